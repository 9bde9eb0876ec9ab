//! PFOO-L and PFOO-U are bounds: on small random traces PFOO-L never misses more than the
//! optimal schedule, found here by exhaustive search, and PFOO-U never less; on the
//! CloudPhysics trace PFOO-L is below every policy and PFOO-U between PFOO-L and Belady.

use ecdn_policy::{eviction, PolicySpec};
use ecdn_sim::bounds::{pfoo_lower, pfoo_upper, pfoo_upper_windowed};
use ecdn_sim::{simulate, SimConfig};
use ecdn_trace::{open, OpenOptions, Request};
use proptest::prelude::*;

/// The fewest misses and missed bytes any cache of `capacity` bytes can have on `trace`
/// (objects `0..k`, k ≤ 6): after each request the cache may hold any subset of what it held
/// plus the requested object that fits; dynamic programming over those subsets.
fn optimal(trace: &[Request], capacity: u64, k: usize) -> (u64, u64) {
    let states = 1usize << k;
    let size_of = |set: usize, sizes: &[u64]| -> u64 {
        (0..k)
            .filter(|o| set & (1 << o) != 0)
            .map(|o| sizes[o])
            .sum()
    };
    let mut sizes = vec![0u64; k];
    // Per state: (misses, missed bytes), minimised lexicographically for each metric apart.
    let mut best_miss = vec![u64::MAX; states];
    let mut best_bytes = vec![u64::MAX; states];
    best_miss[0] = 0;
    best_bytes[0] = 0;
    for r in trace {
        let o = r.id as usize;
        // A new size is a new version: cached copies of the old one are useless.
        let resized = sizes[o] != r.size;
        sizes[o] = r.size;
        let mut next_miss = vec![u64::MAX; states];
        let mut next_bytes = vec![u64::MAX; states];
        for s in 0..states {
            if best_miss[s] == u64::MAX && best_bytes[s] == u64::MAX {
                continue;
            }
            let held = s & (1 << o) != 0 && !resized;
            let base = if resized { s & !(1 << o) } else { s };
            let (m, b) = if held { (0, 0) } else { (1, r.size) };
            // Keep any subset of what is held, plus the object.
            let pool = base | (1 << o);
            let mut sub = pool;
            loop {
                if size_of(sub, &sizes) <= capacity {
                    if best_miss[s] != u64::MAX {
                        next_miss[sub] = next_miss[sub].min(best_miss[s] + m);
                    }
                    if best_bytes[s] != u64::MAX {
                        next_bytes[sub] = next_bytes[sub].min(best_bytes[s] + b);
                    }
                }
                if sub == 0 {
                    break;
                }
                sub = (sub - 1) & pool;
            }
        }
        best_miss = next_miss;
        best_bytes = next_bytes;
    }
    (
        best_miss.into_iter().min().unwrap(),
        best_bytes.into_iter().min().unwrap(),
    )
}

fn small_trace() -> impl Strategy<Value = (Vec<Request>, u64, usize)> {
    (1usize..=6, 1u64..=40).prop_flat_map(|(k, capacity)| {
        let sizes = prop::collection::vec(1u64..=30, k);
        let reqs = prop::collection::vec((0..k, prop::bool::weighted(0.1), 1u64..=30), 1..=14);
        (sizes, reqs).prop_map(move |(sizes, reqs)| {
            let trace = reqs
                .into_iter()
                .enumerate()
                .map(|(i, (o, other, s))| Request {
                    time: i as u64,
                    id: o as u64,
                    size: if other { s } else { sizes[o] },
                    next_access: -1,
                })
                .collect();
            (trace, capacity, k)
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn pfoo_l_never_misses_more_than_the_optimum((trace, capacity, k) in small_trace()) {
        let (misses, missed_bytes) = optimal(&trace, capacity, k);
        let n = trace.len() as f64;
        let bytes: u64 = trace.iter().map(|r| r.size).sum();
        let b = pfoo_lower(&trace, &[capacity])[0];
        prop_assert!(b.miss_ratio <= misses as f64 / n + 1e-12, "{} > {}/{}", b.miss_ratio, misses, n);
        prop_assert!(
            b.byte_miss_ratio <= missed_bytes as f64 / bytes as f64 + 1e-12,
            "{} > {}/{}", b.byte_miss_ratio, missed_bytes, bytes
        );
    }

    #[test]
    fn pfoo_u_never_misses_less_than_the_optimum((trace, capacity, k) in small_trace()) {
        let (misses, missed_bytes) = optimal(&trace, capacity, k);
        let n = trace.len() as f64;
        let bytes: u64 = trace.iter().map(|r| r.size).sum();
        // The greedy schedule, and with windows of the flow (2: every window decides some
        // intervals again; 64: the whole of a small trace at once).
        for window in [0, 2, 64] {
            let u = pfoo_upper_windowed(&trace, &[capacity], window)[0];
            prop_assert!(
                u.miss_ratio >= misses as f64 / n - 1e-12,
                "window {}: {} < {}/{}", window, u.miss_ratio, misses, n
            );
            prop_assert!(
                u.byte_miss_ratio >= missed_bytes as f64 / bytes as f64 - 1e-12,
                "window {}: {} < {}/{}", window, u.byte_miss_ratio, missed_bytes, bytes
            );
        }
    }
}

/// How often PFOO-U finds the optimum on the small traces: it must on most (it is a bound
/// worth having only if it is close); with windows of the flow, at least as often.
#[test]
fn pfoo_u_is_the_optimum_on_most_small_traces() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, TestRunner};
    let mut runner = TestRunner::new(Config::default());
    let strategy = small_trace();
    let cases = 2000;
    // Per window (0, 64): traces where PFOO-U's misses, and missed bytes, are OPT's.
    let mut exact = [(0, 0); 2];
    for _ in 0..cases {
        let (trace, capacity, k) = strategy.new_tree(&mut runner).unwrap().current();
        let (misses, missed_bytes) = optimal(&trace, capacity, k);
        let n = trace.len() as f64;
        let bytes: u64 = trace.iter().map(|r| r.size).sum();
        for (i, window) in [0, 64].into_iter().enumerate() {
            let u = pfoo_upper_windowed(&trace, &[capacity], window)[0];
            exact[i].0 += usize::from((u.miss_ratio - misses as f64 / n).abs() < 1e-9);
            exact[i].1 +=
                usize::from((u.byte_miss_ratio - missed_bytes as f64 / bytes as f64).abs() < 1e-9);
        }
    }
    eprintln!(
        "PFOO-U equal to OPT in {cases} traces: greedy {:?}, windows of 64 {:?} (misses, bytes)",
        exact[0], exact[1]
    );
    for (hits, bytes) in exact {
        assert!(hits * 100 >= cases * 95, "{hits}/{cases}");
        assert!(bytes * 100 >= cases * 90, "{bytes}/{cases}");
    }
    // The windows never do worse than the greedy schedule they start from.
    assert!(exact[1].0 >= exact[0].0 && exact[1].1 >= exact[0].1);
}

#[test]
fn the_exhaustive_optimum_is_right_on_a_hand_checked_trace() {
    // a b c a b c, 4 bytes each, 5-byte cache: one object at a time, so one hit at best
    // (keep a until its reuse, then b or c is already gone).
    let t: Vec<Request> = [0u64, 1, 2, 0, 1, 2]
        .iter()
        .map(|&id| Request {
            time: 0,
            id,
            size: 4,
            next_access: -1,
        })
        .collect();
    assert_eq!(optimal(&t, 5, 3), (5, 20));
    assert_eq!(optimal(&t, 8, 3), (4, 16));
    assert_eq!(optimal(&t, 12, 3), (3, 12));
}

#[test]
fn pfoo_l_is_below_every_policy_and_pfoo_u_below_belady_on_the_cloudphysics_trace() {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/cloudPhysicsIO.oracleGeneral.bin");
    let (mut reqs, mut batch) = (Vec::new(), Vec::new());
    let mut r = open(&path, &OpenOptions::default()).unwrap();
    while r.read_batch(&mut batch, 1 << 16).unwrap() > 0 {
        reqs.extend_from_slice(&batch);
    }
    assert_eq!(reqs.len(), 113_872);
    let sizes = [1u64 << 20, 16 << 20, 256 << 20];
    let bounds = pfoo_lower(&reqs, &sizes);
    let uppers = pfoo_upper(&reqs, &sizes);
    for ((b, u), &size) in bounds.iter().zip(&uppers).zip(&sizes) {
        // PFOO-U is at or above PFOO-L, and at or below Belady's schedule (libCacheSim's,
        // farthest next access first).
        assert!(b.miss_ratio <= u.miss_ratio && b.byte_miss_ratio <= u.byte_miss_ratio);
        let mut r = open(&path, &OpenOptions::default()).unwrap();
        let spec = PolicySpec::parse("belady").unwrap();
        let belady = simulate(&mut *r, &spec, size, &SimConfig::default(), &|_| {}).unwrap();
        eprintln!("{size}: PFOO-L {b:?}, PFOO-U {u:?}, Belady {belady:?}");
        assert!(u.miss_ratio <= belady.miss_ratio, "{u:?} {belady:?}");
        // Not below the first requests' misses (48,974 objects).
        assert!(b.miss_ratio >= 48_974.0 / 113_872.0, "{b:?}");
        for name in eviction::NAMES.iter().chain(&eviction::OFFLINE_NAMES) {
            let mut r = open(&path, &OpenOptions::default()).unwrap();
            let spec = PolicySpec::parse(name).unwrap();
            let res = simulate(&mut *r, &spec, size, &SimConfig::default(), &|_| {}).unwrap();
            assert!(
                b.miss_ratio < res.miss_ratio && b.byte_miss_ratio < res.byte_miss_ratio,
                "{name} at {size}: {res:?} below the bound {b:?}"
            );
        }
    }
}
