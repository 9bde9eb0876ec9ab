//! LRU hit-ratio curves from byte stack distances (Mattson et al., 1970), for every cache size
//! in one pass.
//!
//! A request's stack distance is the bytes of the distinct other objects requested since the
//! previous request to the same object; an LRU cache of C bytes that caches every object it is
//! given hits exactly the requests whose stack distance plus their own size is at most C. This
//! is how footprint descriptors define their hit-ratio curves, so it is the measure a
//! footprint-generated trace is checked with. A simulated cache differs when an object is larger
//! than the cache: [`crate::simulate`] does not cache it, so it does not flush the others.
//!
//! The distances come from a Fenwick tree over request positions that holds, at each object's
//! latest request, its size: the distance of a request is the sum between the object's previous
//! request and now. O(log n) per request; memory: 8 bytes per request and the object table.

use ecdn_trace::Request;
use hashbrown::HashMap;

/// (object hit ratio, byte hit ratio) of an LRU cache that caches every object, at each of
/// `sizes`, over the requests after the first `warmup` (the warm-up's requests still count as
/// history).
pub fn lru_curve(reqs: &[Request], warmup: usize, sizes: &[u64]) -> Vec<(f64, f64)> {
    let n = reqs.len();
    let mut tree = vec![0u64; n + 1];
    let add = |tree: &mut [u64], i: usize, v: u64, neg: bool| {
        let mut i = i + 1;
        while i < tree.len() {
            if neg {
                tree[i] -= v;
            } else {
                tree[i] += v;
            }
            i += i & i.wrapping_neg();
        }
    };
    let prefix = |tree: &[u64], i: usize| {
        // Sum of positions 0..i.
        let (mut i, mut s) = (i, 0u64);
        while i > 0 {
            s += tree[i];
            i &= i - 1;
        }
        s
    };
    let mut last: HashMap<u64, (usize, u64), foldhash::fast::FixedState> =
        HashMap::with_capacity_and_hasher(n / 4, foldhash::fast::FixedState::with_seed(1));
    // Requests after the warm-up that can hit: (stack distance + own size, size).
    let mut reach: Vec<(u64, u64)> = Vec::new();
    let (mut requests, mut bytes) = (0u64, 0u128);
    for (t, r) in reqs.iter().enumerate() {
        let counted = t >= warmup;
        if counted {
            requests += 1;
            bytes += r.size as u128;
        }
        if let Some((prev, prev_size)) = last.insert(r.id, (t, r.size)) {
            if counted {
                let d = prefix(&tree, t) - prefix(&tree, prev + 1);
                reach.push((d.saturating_add(r.size), r.size));
            }
            add(&mut tree, prev, prev_size, true);
        }
        add(&mut tree, t, r.size, false);
    }
    reach.sort_unstable_by_key(|&(d, _)| d);
    let mut out = Vec::with_capacity(sizes.len());
    for &c in sizes {
        let k = reach.partition_point(|&(d, _)| d <= c);
        let hit_bytes: u128 = reach[..k].iter().map(|&(_, s)| s as u128).sum();
        out.push((
            k as f64 / requests.max(1) as f64,
            hit_bytes as f64 / bytes.max(1) as f64,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{simulate, SimConfig};
    use ecdn_policy::PolicySpec;
    use ecdn_trace::gen::Rng;
    use ecdn_trace::SliceReader;

    /// Where every object fits in the smallest cache, the curve is the simulated LRU's.
    #[test]
    fn agrees_with_the_simulated_lru() {
        let mut rng = Rng::new(9);
        let reqs: Vec<Request> = (0..60_000)
            .map(|i| {
                let id = (2000.0 * rng.f64().powi(2)) as u64;
                Request {
                    time: i,
                    id,
                    size: 100 + id * 37 % 4000,
                    next_access: -1,
                }
            })
            .collect();
        let sizes = [1 << 16, 1 << 18, 1 << 20, 1 << 22];
        let curve = lru_curve(&reqs, 10_000, &sizes);
        let spec = PolicySpec::parse("lru").unwrap();
        let cfg = SimConfig {
            warmup: 10_000,
            ..SimConfig::default()
        };
        for (&c, &(ohr, bhr)) in sizes.iter().zip(&curve) {
            let r = simulate(&mut SliceReader::new(&reqs), &spec, c, &cfg, &|_| {}).unwrap();
            assert!(
                (r.object_hit_ratio - ohr).abs() < 1e-12,
                "{c}: {ohr} vs {r:?}"
            );
            assert!(
                (r.byte_hit_ratio - bhr).abs() < 1e-12,
                "{c}: {bhr} vs {r:?}"
            );
        }
    }

    #[test]
    fn distances_count_distinct_bytes() {
        let req = |id, size| Request {
            time: 0,
            id,
            size,
            next_access: -1,
        };
        // a b b c a: the second a is 2 + 3 = 5 bytes of others deep, plus its own 1.
        let reqs = [req(1, 1), req(2, 2), req(2, 2), req(3, 3), req(1, 1)];
        let at = |c| lru_curve(&reqs, 0, &[c])[0].0;
        assert_eq!(at(5), 1.0 / 5.0); // only the repeated b (0 + 2 ≤ 5)
        assert_eq!(at(6), 2.0 / 5.0);
    }
}
