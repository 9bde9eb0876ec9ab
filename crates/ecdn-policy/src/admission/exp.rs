//! Probabilistic size-aware admission with a fixed parameter: admit with probability
//! e^(−size/c) (AdaptSize §3.2 / §4). AdaptSize, HillClimb and SIZE-OPT use the same function and
//! differ only in how they choose c.

use crate::{Admission, Request};
use ecdn_trace::gen::Rng;

/// e^(−size/c), in [0, 1] for every size and every c > 0 (c ≤ 0 admits nothing but size 0).
#[inline]
pub fn exp_admit_probability(size: u64, c: f64) -> f64 {
    if c <= 0.0 || c.is_nan() {
        return if size == 0 { 1.0 } else { 0.0 };
    }
    (-(size as f64) / c).exp().clamp(0.0, 1.0)
}

#[derive(Clone, Debug)]
pub struct ExpSize {
    c: f64,
    rng: Rng,
}

impl ExpSize {
    pub fn new(c: f64, seed: u64) -> Self {
        ExpSize {
            c,
            rng: Rng::new(seed),
        }
    }
}

impl Admission for ExpSize {
    fn name(&self) -> String {
        format!("exp({})", ecdn_trace::units::format_size(self.c as u64))
    }
    #[inline]
    fn admit(&mut self, req: &Request) -> bool {
        self.rng.chance(exp_admit_probability(req.size, self.c))
    }
    fn probability(&self, size: u64) -> f64 {
        exp_admit_probability(size, self.c)
    }
    fn parameter(&self) -> Option<f64> {
        Some(self.c)
    }
}
