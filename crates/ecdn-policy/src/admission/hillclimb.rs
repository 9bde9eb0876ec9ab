//! HillClimb: e^(−size/c) admission whose c is tuned by hill climbing on two shadow caches
//! (AdaptSize §3.2 and §6.3). Two shadow caches — same eviction policy and capacity as the main
//! cache, keys only — run on the same requests with c/step and c·step. Every `window` requests
//! the hits of the main cache and of both shadows in that window are compared; c moves to the
//! better shadow's value if it beat the main cache, and the shadows are re-centred around the
//! new c (they keep their contents, so they stay warm).

use super::exp::exp_admit_probability;
use super::shadow::Shadow;
use crate::eviction::EvictionKind;
use crate::{Admission, Request};
use ecdn_trace::gen::Rng;

pub struct HillClimb {
    c: f64,
    step: f64,
    window: usize,
    seen: usize,
    requests: u64,
    main_hits: u64,
    lower: Shadow,
    upper: Shadow,
    rng: Rng,
    shadow_rng: Rng,
    history: Vec<(u64, f64)>,
}

impl HillClimb {
    /// Starts at `c`, compares every `window` requests, moves by the factor `step` (> 1).
    pub fn new(
        c: f64,
        window: usize,
        step: f64,
        capacity: u64,
        eviction: EvictionKind,
        seed: u64,
    ) -> Self {
        HillClimb {
            c,
            step,
            window: window.max(1),
            seen: 0,
            requests: 0,
            main_hits: 0,
            lower: Shadow::new(eviction.build(capacity)),
            upper: Shadow::new(eviction.build(capacity)),
            rng: Rng::new(seed),
            shadow_rng: Rng::new(seed ^ 0x5ad0_5ad0),
            history: vec![(0, c)],
        }
    }

    fn climb(&mut self) {
        let best_shadow = self.lower.hits.max(self.upper.hits);
        if best_shadow > self.main_hits {
            if self.lower.hits >= self.upper.hits {
                self.c /= self.step;
            } else {
                self.c *= self.step;
            }
            self.c = self.c.clamp(1.0, 1e18);
        }
        self.main_hits = 0;
        self.lower.hits = 0;
        self.upper.hits = 0;
        self.history.push((self.requests, self.c));
    }
}

impl Admission for HillClimb {
    fn name(&self) -> String {
        "hillclimb".into()
    }

    fn observe(&mut self, req: &Request, hit: bool) {
        self.requests += 1;
        self.main_hits += hit as u64;
        let now = self.requests;
        self.lower
            .access(req, self.c / self.step, now, &mut self.shadow_rng);
        self.upper
            .access(req, self.c * self.step, now, &mut self.shadow_rng);
        self.seen += 1;
        if self.seen >= self.window {
            self.seen = 0;
            self.climb();
        }
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

    fn history(&self) -> &[(u64, f64)] {
        &self.history
    }

    fn heap_bytes(&self) -> usize {
        self.lower.cache.heap_bytes() + self.upper.cache.heap_bytes()
    }
}
