//! LRU-S's size-aware admission (Starobinski and Tse): an object is admitted with probability
//! inversely proportional to its size, min(1, reference / size).

use crate::{Admission, Request};
use ecdn_trace::gen::Rng;

#[derive(Clone, Debug)]
pub struct LruS {
    reference: u64,
    rng: Rng,
}

impl LruS {
    pub fn new(reference: u64, seed: u64) -> Self {
        LruS {
            reference: reference.max(1),
            rng: Rng::new(seed),
        }
    }
}

impl Admission for LruS {
    fn name(&self) -> String {
        format!("lrus({})", ecdn_trace::units::format_size(self.reference))
    }
    #[inline]
    fn admit(&mut self, req: &Request) -> bool {
        let p = self.probability(req.size);
        self.rng.chance(p)
    }
    fn probability(&self, size: u64) -> f64 {
        if size <= self.reference {
            1.0
        } else {
            self.reference as f64 / size as f64
        }
    }
    fn parameter(&self) -> Option<f64> {
        Some(self.reference as f64)
    }
}
