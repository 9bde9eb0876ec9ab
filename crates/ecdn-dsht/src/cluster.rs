//! Joining and managing clusters (§4.4): which cluster a node belongs to at each non-global
//! level, decided from what its peers' RPC headers say and the RTTs it measured to them.
//!
//! * A cluster is **acceptable** when at least 80% of its members whose RTT the node measured
//!   are below the level's threshold.
//! * Of the acceptable clusters (the current one included), a node prefers the larger, but
//!   only if `|log2 size_A − log2 size_B| > δ(min(age_A, age_B))`, where δ is a square wave
//!   that is 0 in even hours of age and 2 in odd ones; otherwise the lower cluster id wins. The
//!   shifting δ stops two clusters of similar, badly estimated sizes from trading nodes forever.
//! * A node leaves for a new singleton cluster when half of its accesses to members of its
//!   cluster missed the threshold (at least [`MIN_ACCESSES`] of them in a period).
//!
//! These are pure functions over [`Candidate`]s; the node gathers the candidates, validates
//! them with pings and applies the choice every cluster period (5 min in the paper).

use std::time::Duration;

use crate::id::Id;

/// Fewest accesses in a period on which a node judges that its cluster has become too slow.
pub const MIN_ACCESSES: u32 = 4;

/// A cluster as a node sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    pub id: Id,
    /// Estimated size (nodes).
    pub size: u32,
    /// Time since the cluster was created.
    pub age: Duration,
    /// Members whose RTT the node measured.
    pub measured: usize,
    /// Of those, members below the level's RTT threshold.
    pub within: usize,
}

impl Candidate {
    /// At least 80% of the measured members below the threshold.
    pub fn acceptable(&self) -> bool {
        self.measured > 0 && self.within * 5 >= self.measured * 4
    }
}

/// The preference function δ of §4.4: 0 in even hours of age, 2 in odd ones.
pub fn delta(age: Duration) -> f64 {
    if (age.as_secs() / 3600).is_multiple_of(2) {
        0.0
    } else {
        2.0
    }
}

/// Whether `a` is preferred to `b`.
pub fn prefers(a: &Candidate, b: &Candidate) -> bool {
    let (sa, sb) = (a.size.max(1) as f64, b.size.max(1) as f64);
    if (sa.log2() - sb.log2()).abs() > delta(a.age.min(b.age)) {
        a.size > b.size
    } else {
        a.id < b.id
    }
}

/// The cluster a node should belong to: the preferred one among `current` (always a choice)
/// and the acceptable `others`.
pub fn choose(current: &Candidate, others: &[Candidate]) -> Id {
    let mut best = current;
    for c in others
        .iter()
        .filter(|c| c.acceptable() && c.id != current.id)
    {
        if prefers(c, best) {
            best = c;
        }
    }
    best.id
}

/// Whether a node should leave for a new singleton: half its `accesses` to members of its
/// cluster in a period were `slow` (above the threshold or unanswered).
pub fn too_slow(accesses: u32, slow: u32) -> bool {
    accesses >= MIN_ACCESSES && slow * 2 >= accesses
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(tag: u8, size: u32, age_h: u64, measured: usize, within: usize) -> Candidate {
        let mut id = [0u8; 20];
        id[0] = tag;
        Candidate {
            id: Id(id),
            size,
            age: Duration::from_secs(age_h * 3600 + 60),
            measured,
            within,
        }
    }

    #[test]
    fn acceptable_needs_eighty_percent_within() {
        assert!(cand(1, 10, 0, 5, 4).acceptable());
        assert!(!cand(1, 10, 0, 5, 3).acceptable());
        assert!(!cand(1, 10, 0, 0, 0).acceptable(), "nothing measured");
    }

    #[test]
    fn larger_wins_when_delta_allows_else_lower_id() {
        let me = cand(9, 1, 0, 1, 1);
        // Even hour: δ = 0, any size difference picks the larger.
        assert_eq!(choose(&me, &[cand(5, 3, 0, 3, 3)]), cand(5, 3, 0, 3, 3).id);
        // Two singletons: the lower id.
        assert_eq!(choose(&me, &[cand(5, 1, 0, 1, 1)]), cand(5, 1, 0, 1, 1).id);
        assert_eq!(
            choose(&cand(2, 1, 0, 1, 1), &[cand(5, 1, 0, 1, 1)]),
            cand(2, 1, 0, 1, 1).id
        );
        // Odd hour: δ = 2, sizes within 4× fall back to the lower id ...
        let a = cand(7, 10, 1, 10, 10);
        let b = cand(3, 30, 1, 10, 10);
        let small_low = cand(3, 12, 1, 10, 10);
        assert_eq!(choose(&a, &[small_low]), small_low.id);
        assert_eq!(choose(&b, &[a]), b.id, "lower id and larger: stays");
        // ... and beyond 4× the larger wins.
        let big = cand(8, 50, 1, 10, 10);
        assert_eq!(choose(&a, &[big]), big.id);
        // Unacceptable clusters are never chosen.
        assert_eq!(choose(&me, &[cand(1, 100, 0, 10, 7)]), me.id);
        assert_eq!(delta(Duration::from_secs(3599)), 0.0);
        assert_eq!(delta(Duration::from_secs(3600)), 2.0);
    }

    #[test]
    fn half_the_accesses_slow_makes_a_singleton() {
        assert!(too_slow(10, 5));
        assert!(!too_slow(10, 4));
        assert!(!too_slow(3, 3), "too few accesses to judge");
    }
}
