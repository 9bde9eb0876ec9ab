//! Shadow caches: key-only replicas of a cache that run on the same requests with another
//! e^(−size/c) admission parameter and count their hits. HillClimb compares two of them,
//! AdaptSize's guard one, and SIZE-OPT replays windows on copies of the real cache with them.

use super::exp::exp_admit_probability;
use crate::{Evicted, Eviction, Request};
use ecdn_trace::gen::Rng;

pub struct Shadow {
    pub cache: Box<dyn Eviction>,
    /// Hits since the counter was last reset.
    pub hits: u64,
    evicted: Vec<Evicted>,
}

impl Shadow {
    pub fn new(cache: Box<dyn Eviction>) -> Self {
        Shadow {
            cache,
            hits: 0,
            evicted: Vec::new(),
        }
    }

    /// One request, as [`crate::Cache::access`] would do it with admission e^(−size/c).
    /// Returns whether it hit.
    #[inline]
    pub fn access(&mut self, req: &Request, c: f64, now: u64, rng: &mut Rng) -> bool {
        let touched = self.cache.touch(req.id, now, &mut self.evicted);
        self.evicted.clear();
        match touched {
            Some(s) if s == req.size => {
                self.hits += 1;
                true
            }
            other => {
                if other.is_some() {
                    self.cache.remove(req.id);
                }
                if self.cache.can_insert(req.id, req.size)
                    && rng.chance(exp_admit_probability(req.size, c))
                {
                    self.cache.insert(req.id, req.size, now, &mut self.evicted);
                    self.evicted.clear();
                }
                false
            }
        }
    }

    pub fn heap_bytes(&self) -> usize {
        self.cache.heap_bytes()
    }
}
