//! Hyperbolic caching (Blankstein, Sen and Freedman, ATC '17): each cached object `i` has the
//! priority `p_i = n_i / t_i`, its requests since it entered the cache (`n_i`, 1 on insertion,
//! +1 per hit) over its time in the cache (`t_i`, in requests). Priorities decay at different
//! rates and are never kept sorted, so the policy evicts by sampling: it draws `S` cached
//! objects uniformly at random (with replacement) and evicts the one with the lowest priority;
//! a tie goes to the one drawn first. `S` is 64, as in libCacheSim.
//!
//! This follows libCacheSim's `Hyperbolic`: the priority is neither cost- nor size-aware (the
//! paper also weighs it by an object's cost or size), `t_i` counts requests since the one that
//! inserted the object, and nothing is remembered of an evicted object. Two differences, neither
//! in the algorithm: libCacheSim picks a sample by drawing a random hash bucket and then an
//! object within it (objects in crowded buckets are drawn a bit less often), here every cached
//! object is equally likely, drawn from a dense array of residents (an eviction swap-removes,
//! so a draw is O(1)); and libCacheSim compares `1e8 · n / t` as doubles, here `n_a · t_b <
//! n_b · t_a` is compared exactly. The draws come from the generator seeded by
//! [`Hyperbolic::new`]'s seed, so equal seeds, equal decisions; libCacheSim draws from its
//! process-wide generator.

use crate::dense::{Dense, Keyed};
use crate::{Evicted, Eviction};
use ecdn_trace::gen::Rng;

/// Objects drawn per eviction (libCacheSim's default).
pub const SAMPLES: usize = 64;

#[derive(Clone, Copy, Debug)]
struct Resident {
    id: u64,
    size: u64,
    /// `n_i`: requests since entering the cache, the inserting one included.
    requests: u64,
    /// The request index at which it entered.
    entered: u64,
}

impl Keyed for Resident {
    fn id(&self) -> u64 {
        self.id
    }
}

impl Resident {
    /// Whether this object's priority is below `other`'s at `now`:
    /// `n_a / t_a < n_b / t_b`, compared as `n_a · t_b < n_b · t_a`. An object with `t = 0`
    /// (inserted at `now`) has an infinite priority.
    #[inline]
    fn below(&self, other: &Resident, now: u64) -> bool {
        let age = |r: &Resident| u128::from(now.saturating_sub(r.entered));
        u128::from(self.requests) * age(other) < u128::from(other.requests) * age(self)
    }
}

#[derive(Clone)]
pub struct Hyperbolic {
    capacity: u64,
    samples: usize,
    /// Every cached object, densely: what the samples are drawn from.
    residents: Dense<Resident>,
    bytes: u64,
    rng: Rng,
}

impl Hyperbolic {
    /// Hyperbolic caching with [`SAMPLES`] samples per eviction, drawing from a generator
    /// seeded with `seed`.
    pub fn new(capacity: u64, seed: u64) -> Self {
        Self::with_samples(capacity, SAMPLES, seed)
    }

    /// With `samples` (at least 1) objects drawn per eviction.
    pub fn with_samples(capacity: u64, samples: usize, seed: u64) -> Self {
        Hyperbolic {
            capacity,
            samples: samples.max(1),
            residents: Dense::new(),
            bytes: 0,
            rng: Rng::new(seed),
        }
    }

    /// The priority `n_i / t_i` of a cached `id` at request `now` (for tests and reports).
    pub fn priority(&self, id: u64, now: u64) -> Option<f64> {
        let r = *self.residents.at(self.residents.position(id)?);
        Some(r.requests as f64 / now.saturating_sub(r.entered) as f64)
    }

    /// Removes the resident at `slot`, moving the last one into its place.
    fn remove_slot(&mut self, slot: usize) -> Resident {
        let gone = self.residents.swap_remove(slot);
        self.bytes -= gone.size;
        gone
    }

    /// Evicts the lowest-priority object of a sample; `None` when empty.
    fn evict_one(&mut self, now: u64) -> Option<Resident> {
        let n = self.residents.len() as u64;
        if n == 0 {
            return None;
        }
        let mut best = self.rng.below(n) as usize;
        for _ in 1..self.samples {
            let s = self.rng.below(n) as usize;
            if self.residents.at(s).below(self.residents.at(best), now) {
                best = s;
            }
        }
        Some(self.remove_slot(best))
    }
}

impl Eviction for Hyperbolic {
    fn name(&self) -> &'static str {
        "hyperbolic"
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn used(&self) -> u64 {
        self.bytes
    }
    fn len(&self) -> usize {
        self.residents.len()
    }
    fn peek(&self, id: u64) -> Option<u64> {
        self.residents
            .position(id)
            .map(|s| self.residents.at(s).size)
    }
    #[inline]
    fn touch(&mut self, id: u64, _now: u64, _evicted: &mut Vec<Evicted>) -> Option<u64> {
        let slot = self.residents.position(id)?;
        let r = self.residents.at_mut(slot);
        r.requests += 1;
        Some(r.size)
    }
    #[inline]
    fn insert(&mut self, id: u64, size: u64, now: u64, evicted: &mut Vec<Evicted>) {
        while self.bytes + size > self.capacity {
            match self.evict_one(now) {
                Some(r) => evicted.push(Evicted {
                    id: r.id,
                    size: r.size,
                }),
                None => break,
            }
        }
        self.residents.push(Resident {
            id,
            size,
            requests: 1,
            entered: now,
        });
        self.bytes += size;
    }
    fn remove(&mut self, id: u64) -> Option<u64> {
        let slot = self.residents.position(id)?;
        Some(self.remove_slot(slot).size)
    }
    fn clone_box(&self) -> Box<dyn Eviction> {
        Box::new(self.clone())
    }
    fn heap_bytes(&self) -> usize {
        self.residents.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(ev: &[Evicted]) -> Vec<u64> {
        ev.iter().map(|e| e.id).collect()
    }

    #[test]
    fn evicts_the_lowest_hits_per_time_in_cache() {
        // Many samples of three objects: the minimum is all but surely among them.
        let mut c = Hyperbolic::with_samples(30, 256, 7);
        let mut ev = Vec::new();
        c.insert(1, 10, 1, &mut ev);
        c.insert(2, 10, 2, &mut ev);
        c.insert(3, 10, 3, &mut ev);
        for now in 4..=7 {
            c.touch(1, now, &mut Vec::new()); // 1: 5 requests in 9 at eviction time
        }
        c.touch(3, 8, &mut Vec::new()); // 3: 2 in 7; 2: 1 in 8, the lowest
        c.insert(4, 10, 10, &mut ev);
        assert_eq!(ids(&ev), [2]);
        assert_eq!(c.priority(1, 10), Some(5.0 / 9.0));
        // Now 4: 1 in 10, 3: 2 in 17, 1: 5 in 19: 4 goes, though the newest.
        ev.clear();
        c.insert(5, 10, 20, &mut ev);
        assert_eq!(ids(&ev), [4]);
        assert_eq!((c.len(), c.used()), (3, 30));
    }

    #[test]
    fn a_popular_object_no_longer_requested_decays_below_a_requested_one() {
        let mut c = Hyperbolic::with_samples(20, 256, 1);
        let mut ev = Vec::new();
        c.insert(1, 10, 1, &mut ev);
        for now in 2..=10 {
            c.touch(1, now, &mut Vec::new()); // 10 requests
        }
        c.insert(2, 10, 11, &mut ev);
        c.touch(2, 12, &mut Vec::new()); // 2 requests
                                         // At 15, 1 has 10 in 14 (0.71) and 2 has 2 in 4 (0.5): 2 goes.
        c.insert(3, 10, 15, &mut ev);
        assert_eq!(ids(&ev), [2]);
        // 1 is not requested again, 3 is, ten times: at 200, 1 (10 in 199) is below 3 (11 in
        // 185).
        ev.clear();
        for now in 16..=25 {
            c.touch(3, now, &mut Vec::new());
        }
        c.insert(4, 10, 200, &mut ev);
        assert_eq!(ids(&ev), [1]);
    }

    #[test]
    fn equal_seeds_make_equal_choices_and_removal_keeps_the_index() {
        let run = |seed| {
            let mut c = Hyperbolic::new(1000, seed);
            let mut ev = Vec::new();
            let mut x = 12345u64;
            for now in 1..5000u64 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let id = (x >> 33) % 300;
                if c.touch(id, now, &mut Vec::new()).is_none() {
                    c.insert(id, 1 + (x >> 20) % 50, now, &mut ev);
                }
                if now % 97 == 0 {
                    c.remove((x >> 40) % 300);
                }
                assert_eq!(c.used(), c.residents.iter().map(|r| r.size).sum::<u64>());
                for (s, r) in c.residents.iter().enumerate() {
                    assert_eq!(c.residents.position(r.id), Some(s));
                }
            }
            ids(&ev)
        };
        assert_eq!(run(3), run(3));
        assert_ne!(run(3), run(4));
    }
}
