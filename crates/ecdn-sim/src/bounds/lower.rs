//! PFOO-L: the lower bound. Optimal caching with sizes is NP-hard, so the bound solves a
//! relaxation. A cache of *C* bytes has *C* · *N* byte-requests of space-time over *N*
//! requests; PFOO-L keeps only that total: it must fit on average, not at every instant. The
//! best choice of intervals under one budget is a fractional knapsack, solved greedily by
//! benefit per cost:
//!
//! * **hit ratio (OHR)**: each interval is worth one hit; cheapest (*s* · length) first;
//! * **byte hit ratio (BHR)**: each is worth *s* bytes; shortest first (worth per cost 1/length).
//!
//! The last interval taken is taken in part.
//!
//! Cost: one pass to find the intervals, one sort per capacity and metric; about a second for
//! two million requests.

use super::{intervals, Bound, Interval};
use ecdn_trace::Request;

/// PFOO-L for each of `capacities` over `trace`.
pub fn pfoo_lower(trace: &[Request], capacities: &[u64]) -> Vec<Bound> {
    let all = intervals(trace);
    let n = trace.len() as f64;
    let total_bytes: f64 = trace.iter().map(|r| r.size as f64).sum();
    capacities
        .iter()
        .map(|&capacity| {
            let mut usable: Vec<Interval> = all
                .iter()
                .copied()
                .filter(|iv| iv.size <= capacity)
                .collect();
            let budget = capacity as f64 * n;
            // Object hits: cheapest space-time first.
            usable.sort_unstable_by_key(|iv| u128::from(iv.size) * u128::from(iv.length()));
            let hits = greedy(&usable, budget, |_| 1.0);
            // Byte hits: shortest first.
            usable.sort_unstable_by_key(|iv| iv.length());
            let hit_bytes = greedy(&usable, budget, |iv| iv.size as f64);
            Bound::of(capacity, hits, n, hit_bytes, total_bytes)
        })
        .collect()
}

/// The fractional knapsack over `sorted` (best first) with `budget` byte-requests: the worth
/// of the intervals taken, the last one in part.
fn greedy(sorted: &[Interval], budget: f64, worth: impl Fn(&Interval) -> f64) -> f64 {
    let mut left = budget;
    let mut total = 0.0;
    for iv in sorted {
        let cost = iv.size as f64 * iv.length() as f64;
        if cost <= left {
            left -= cost;
            total += worth(iv);
        } else {
            total += worth(iv) * left / cost;
            break;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(id: u64, size: u64) -> Request {
        Request {
            time: 0,
            id,
            size,
            next_access: -1,
        }
    }

    #[test]
    fn a_hand_computed_trace() {
        // a(10) b(30) a a b: intervals a 0→2 (cost 20), a 2→3 (10), b 1→4 (90).
        let t = [req(1, 10), req(2, 30), req(1, 10), req(1, 10), req(2, 30)];
        // 10 bytes × 5 requests = 50: both a intervals (30), then 20/90 of b's.
        let b = pfoo_lower(&t, &[10, 30, 1000])
            .into_iter()
            .map(|b| (b.miss_ratio, b.byte_miss_ratio))
            .collect::<Vec<_>>();
        // Capacity 10: b never fits, so only a's: 2 hits, 20 bytes of 90.
        assert_eq!(b[0], (1.0 - 2.0 / 5.0, 1.0 - 20.0 / 90.0));
        // Capacity 30, budget 150: OHR takes a, a (30), then 90 of b: 3 hits. BHR takes the
        // shortest first: a 2→3 (10), a 0→2 (20), b (90): the same.
        assert_eq!(b[1], (1.0 - 3.0 / 5.0, 1.0 - 50.0 / 90.0));
        assert_eq!(b[2], b[1]);
        // A version with another size is a new object.
        let t = [req(1, 10), req(1, 11)];
        assert_eq!(pfoo_lower(&t, &[100])[0].miss_ratio, 1.0);
        assert_eq!(pfoo_lower(&[], &[100])[0].miss_ratio, 0.0);
    }

    #[test]
    fn the_budget_holds_on_average_and_is_shared_fractionally() {
        // a b c a b c, 4 bytes each: each interval costs 4 × 3 = 12. A cache of 5 bytes holds
        // one object at a time (OPT: 1 hit), but its budget of 5 × 6 = 30 buys two intervals
        // and half of the third: 2.5 hits.
        let t = [
            req(1, 4),
            req(2, 4),
            req(3, 4),
            req(1, 4),
            req(2, 4),
            req(3, 4),
        ];
        let b = pfoo_lower(&t, &[5])[0];
        assert_eq!(b.miss_ratio, 1.0 - 2.5 / 6.0);
        assert_eq!(b.byte_miss_ratio, 1.0 - 10.0 / 24.0);
    }
}
