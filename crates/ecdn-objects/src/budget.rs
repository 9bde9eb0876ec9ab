//! The memory overhead budget, spent by popularity (EC-Cache §6.1's setup).
//!
//! Both schemes get the same budget: a fraction of the objects' total size (15% in the paper)
//! on top of one copy of every object.
//!
//! * **EC-Cache** (`k`, `r`): every object first gets its `r` parity splits (`r/k` of its size:
//!   10% at k = 10, r = 1); what remains of the budget buys extra parity splits, `size/k` each.
//! * **Selective replication**: the whole budget buys extra replicas, `size` each.
//!
//! Either way the budget is spent by the same rule, "to flatten out the popularity skew to the
//! extent possible starting from the most popular object": repeatedly, the object whose
//! servers carry the most read load per server gets one more unit (replica or parity split)
//! if the budget still pays for it (an object it does not pay for is passed over), until no
//! object can get one. An object's load per server, with popularity `p` (its share of reads)
//! and size `s`: `p·s / n` with `n` replicas (a read goes to one of them); `p·(s/k)·(k+Δ) / n`
//! with `n = k + r'` splits (a read asks `k + Δ` of them). No object gets more units than there
//! are servers (its splits or replicas are on distinct servers).
//!
//! [`reallocate`] spends the budget again over objects that already hold units (the coordinator
//! re-spending it from measured reads), preferring the units they hold: a unit an object has is
//! weighed as if its load were `1 + keep` times higher, so it moves to another object only when
//! that one's load per server is more than `1 + keep` times its own. Every move costs a read of
//! an object and a write of a split; a move between two objects of nearly the same popularity
//! gains nothing, and read counts are noisy enough to swap such a pair at every plan.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// How objects are cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Scheme {
    /// `k` data + `r` parity splits; reads ask `k + delta`.
    EcCache { k: usize, r: usize, delta: usize },
    /// Whole replicas; a read asks one.
    SelectiveReplication,
}

impl Scheme {
    pub fn name(&self) -> &'static str {
        match self {
            Scheme::EcCache { .. } => "ec-cache",
            Scheme::SelectiveReplication => "selective-replication",
        }
    }

    /// Units (splits or replicas) every object starts with.
    pub fn start_units(&self) -> usize {
        match *self {
            Scheme::EcCache { k, r, .. } => k + r,
            Scheme::SelectiveReplication => 1,
        }
    }

    /// Bytes beyond one copy that every object has before the budget is spent: its parities.
    fn base_overhead(&self, o: &Object) -> u64 {
        match *self {
            Scheme::EcCache { k, r, .. } => o.size.div_ceil(k as u64) * r as u64,
            Scheme::SelectiveReplication => 0,
        }
    }

    /// Bytes of one more unit.
    fn unit_cost(&self, o: &Object) -> u64 {
        match *self {
            Scheme::EcCache { k, .. } => o.size.div_ceil(k as u64),
            Scheme::SelectiveReplication => o.size,
        }
    }

    /// Bytes one read of the object takes from servers (`k + Δ` splits, or one replica).
    fn read_bytes(&self, o: &Object) -> f64 {
        match *self {
            Scheme::EcCache { k, delta, .. } => o.size as f64 / k as f64 * (k + delta) as f64,
            Scheme::SelectiveReplication => o.size as f64,
        }
    }
}

/// One object as the budget sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Object {
    pub size: u64,
    /// Its share of the reads (any non-negative scale).
    pub popularity: f64,
}

#[derive(Clone, Debug, Error, PartialEq)]
pub enum BudgetError {
    #[error("the budget fraction {0} must be finite and at least 0")]
    BadBudget(f64),
    #[error(
        "the budget ({budget:.1}% of the objects' size) does not pay for every object's r = {r} \
         parity splits ({needed:.1}%)"
    )]
    ParityOverBudget { budget: f64, needed: f64, r: usize },
    #[error("k + r = {n} splits need as many servers; the cluster has {servers}")]
    TooFewServers { n: usize, servers: usize },
    #[error("k must be at least 1")]
    ZeroK,
}

/// Units per object: splits (`k + r + extra`) for EC-Cache, replicas for selective
/// replication; and the bytes the budget paid for.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Allocation {
    pub units: Vec<usize>,
    /// Bytes cached beyond one copy of every object.
    pub overhead_bytes: u64,
}

/// A heap entry: an object and its load per server now (max first, then lower index).
struct Entry {
    load: f64,
    object: usize,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> Ordering {
        self.load
            .total_cmp(&o.load)
            .then_with(|| o.object.cmp(&self.object))
    }
}

/// Spends `budget_fraction` of the objects' total size as the module documentation says.
pub fn allocate(
    objects: &[Object],
    scheme: Scheme,
    budget_fraction: f64,
    servers: usize,
) -> Result<Allocation, BudgetError> {
    reallocate(objects, scheme, budget_fraction, servers, &[], 0.0)
}

/// [`allocate`], for objects that hold `held[i]` units now (missing: none beyond the start),
/// each held unit weighed `1 + keep` times (see the module documentation).
pub fn reallocate(
    objects: &[Object],
    scheme: Scheme,
    budget_fraction: f64,
    servers: usize,
    held: &[usize],
    keep: f64,
) -> Result<Allocation, BudgetError> {
    if !(budget_fraction.is_finite() && budget_fraction >= 0.0) {
        return Err(BudgetError::BadBudget(budget_fraction));
    }
    let total: u64 = objects.iter().map(|o| o.size).sum();
    let mut left = (total as f64 * budget_fraction) as u64;
    if let Scheme::EcCache { k, r, .. } = scheme {
        if k == 0 {
            return Err(BudgetError::ZeroK);
        }
        if k + r > servers {
            return Err(BudgetError::TooFewServers { n: k + r, servers });
        }
    }
    let base: u64 = objects.iter().map(|o| scheme.base_overhead(o)).sum();
    if base > left {
        let pct = |b: u64| b as f64 / total.max(1) as f64 * 100.0;
        let r = match scheme {
            Scheme::EcCache { r, .. } => r,
            Scheme::SelectiveReplication => 0,
        };
        return Err(BudgetError::ParityOverBudget {
            budget: pct(left),
            needed: pct(base),
            r,
        });
    }
    left -= base;
    let start = scheme.start_units();
    let mut units = vec![start; objects.len()];
    let start_left = left;
    // The weight of object i's next unit: its load per server now, more if it holds that unit.
    let keep = if keep.is_finite() { keep.max(0.0) } else { 0.0 };
    let weight = |i: usize, units: usize| {
        let o = &objects[i];
        let load = o.popularity.max(0.0) * scheme.read_bytes(o) / units as f64;
        match held.get(i) {
            Some(&h) if units < h => load * (1.0 + keep),
            _ => load,
        }
    };
    let mut heap: BinaryHeap<Entry> = (0..objects.len())
        .map(|i| Entry {
            load: weight(i, start),
            object: i,
        })
        .collect();
    while let Some(Entry { object, .. }) = heap.pop() {
        let o = &objects[object];
        let cost = scheme.unit_cost(o);
        if units[object] >= servers || cost > left || o.popularity <= 0.0 {
            continue;
        }
        left -= cost;
        units[object] += 1;
        heap.push(Entry {
            load: weight(object, units[object]),
            object,
        });
    }
    Ok(Allocation {
        units,
        overhead_bytes: base + (start_left - left),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zipf(n: usize, alpha: f64, size: u64) -> Vec<Object> {
        (1..=n)
            .map(|i| Object {
                size,
                popularity: (i as f64).powf(-alpha),
            })
            .collect()
    }

    #[test]
    fn both_schemes_spend_the_same_budget_on_the_most_popular() {
        let objs = zipf(100, 0.9, 40 << 20);
        let total: u64 = objs.iter().map(|o| o.size).sum();
        let sr = allocate(&objs, Scheme::SelectiveReplication, 0.15, 25).unwrap();
        // 15% of 100 objects of equal size: 15 extra replicas, to the most popular first.
        assert_eq!(sr.units.iter().sum::<usize>(), 115);
        assert_eq!(sr.overhead_bytes, 15 * (40 << 20));
        assert!(sr.units[0] >= sr.units[1] && sr.units[1] >= sr.units[50]);
        assert_eq!(sr.units[99], 1);
        let ec = allocate(
            &objs,
            Scheme::EcCache {
                k: 10,
                r: 1,
                delta: 1,
            },
            0.15,
            25,
        )
        .unwrap();
        // 10% for one parity each, 5% (50 splits of 4 MiB) for extra parities.
        assert_eq!(ec.units.iter().sum::<usize>(), 100 * 11 + 50);
        assert!(ec.overhead_bytes <= (total as f64 * 0.15) as u64);
        assert!(ec.units[0] > 11 && ec.units[99] == 11);
        // Flattened: the most popular objects reach the cap (a split on every server); below it,
        // no object's load per split is above what any extra-parity object had before its last
        // parity (the greedy gave that parity to the most loaded object).
        assert_eq!(&ec.units[..3], &[25, 25, 23]);
        let load = |i: usize| objs[i].popularity / ec.units[i] as f64;
        let uncapped = (0..100).filter(|&i| ec.units[i] < 25);
        let worst = uncapped.map(load).fold(0.0, f64::max);
        for j in (0..100).filter(|&j| ec.units[j] > 11) {
            assert!(
                worst <= objs[j].popularity / (ec.units[j] - 1) as f64,
                "object {j}"
            );
        }
    }

    #[test]
    fn limits_and_bad_budgets() {
        let objs = zipf(3, 2.0, 1000);
        // No object gets more replicas than there are servers.
        let sr = allocate(&objs, Scheme::SelectiveReplication, 10.0, 4).unwrap();
        assert!(sr.units.iter().all(|&u| u <= 4));
        let ec = Scheme::EcCache {
            k: 10,
            r: 1,
            delta: 1,
        };
        assert!(matches!(
            allocate(&objs, ec, 0.05, 25),
            Err(BudgetError::ParityOverBudget { .. })
        ));
        assert!(matches!(
            allocate(&objs, ec, 0.15, 8),
            Err(BudgetError::TooFewServers { n: 11, servers: 8 })
        ));
        assert!(allocate(&objs, ec, f64::NAN, 25).is_err());
        let zero = Scheme::EcCache {
            k: 0,
            r: 1,
            delta: 0,
        };
        assert_eq!(allocate(&objs, zero, 0.15, 25), Err(BudgetError::ZeroK));
        // No budget: one copy, or k + r splits, each.
        let none = allocate(&objs, Scheme::SelectiveReplication, 0.0, 4).unwrap();
        assert_eq!((none.units, none.overhead_bytes), (vec![1, 1, 1], 0));
    }

    #[test]
    fn held_units_move_only_for_a_clear_gain() {
        let ec = Scheme::EcCache {
            k: 10,
            r: 1,
            delta: 1,
        };
        let objs = zipf(100, 0.9, 40 << 20);
        let plan = allocate(&objs, ec, 0.15, 25).unwrap();
        // Counts off by up to ±10% (the noise of measured reads): with keep = 0.25 nothing
        // moves; with no preference the margin's units do.
        let noisy: Vec<Object> = objs
            .iter()
            .enumerate()
            .map(|(i, o)| Object {
                popularity: o.popularity * if i % 2 == 0 { 1.1 } else { 0.9 },
                ..*o
            })
            .collect();
        let kept = reallocate(&noisy, ec, 0.15, 25, &plan.units, 0.25).unwrap();
        assert_eq!(kept.units, plan.units);
        let fresh = allocate(&noisy, ec, 0.15, 25).unwrap();
        assert_ne!(fresh.units, plan.units);
        // The same budget either way.
        assert_eq!(
            kept.units.iter().sum::<usize>(),
            fresh.units.iter().sum::<usize>()
        );
        // A real change of popularity (the least popular object becomes the most popular)
        // moves units to it all the same.
        let mut turned = objs.clone();
        turned[99].popularity = objs[0].popularity * 2.0;
        let moved = reallocate(&turned, ec, 0.15, 25, &plan.units, 0.25).unwrap();
        assert_eq!(moved.units[99], 25);
        assert!(moved.units[1..99]
            .iter()
            .zip(&plan.units[1..99])
            .any(|(a, b)| a < b));
    }
}
