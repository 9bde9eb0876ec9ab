//! SIZE-OPT: the offline reference of AdaptSize §6 — e^(−size/c) admission whose c is, for each
//! window of requests, the best c *for that window*, found with knowledge of it.
//!
//! At every window start the simulator hands SIZE-OPT the next `window` requests and the current
//! cache state. SIZE-OPT replays the window on a copy of the cache for every c of a grid (1/2
//! octave steps from 64 B to 16× the largest object, plus admit-all), with the same coin flips
//! for every candidate (common random numbers), and keeps the c with the most hits. It is the
//! paper's offline reference, chosen greedily window by window from the cache's state at the
//! window start — not a strict upper bound: a c that invests in the cache's later contents can
//! beat it over several windows. It costs O(grid × window) work per window.

use super::exp::exp_admit_probability;
use super::shadow::Shadow;
use crate::{Admission, Eviction, Request};
use ecdn_trace::gen::Rng;

pub struct SizeOpt {
    capacity: u64,
    window: usize,
    c: f64,
    rng: Rng,
    seed: u64,
    windows: u64,
    history: Vec<(u64, f64)>,
}

impl SizeOpt {
    pub fn new(capacity: u64, window: usize, seed: u64) -> Self {
        SizeOpt {
            capacity,
            window: window.max(1),
            c: f64::INFINITY,
            rng: Rng::new(seed),
            seed,
            windows: 0,
            history: Vec::new(),
        }
    }

    /// Hits of the window `future` replayed on `cache` with parameter `c`.
    fn replay(future: &[Request], cache: &dyn Eviction, c: f64, seed: u64, now: u64) -> u64 {
        let mut shadow = Shadow::new(cache.clone_box());
        let mut rng = Rng::new(seed);
        for (i, req) in future.iter().enumerate() {
            shadow.access(req, c, now + i as u64, &mut rng);
        }
        shadow.hits
    }
}

impl Admission for SizeOpt {
    fn name(&self) -> String {
        "size-opt".into()
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

    fn lookahead(&self) -> Option<usize> {
        Some(self.window)
    }

    fn prepare_window(&mut self, future: &[Request], cache: &dyn Eviction, now: u64) {
        if future.is_empty() {
            return;
        }
        let max_size = future
            .iter()
            .map(|r| r.size)
            .filter(|&s| s <= self.capacity)
            .max()
            .unwrap_or(1)
            .max(1);
        let hi = ((max_size as f64).log2() + 4.0).ceil();
        let mut grid: Vec<f64> = Vec::new();
        let mut lc = 6.0;
        while lc <= hi {
            grid.push(f64::exp2(lc));
            lc += 0.5;
        }
        grid.push(f64::INFINITY);
        let seed = self.seed ^ self.windows.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.windows += 1;
        let mut best = (self.c, 0u64);
        let mut first = true;
        for &c in &grid {
            let hits = Self::replay(future, cache, c, seed, now);
            if first || hits > best.1 {
                best = (c, hits);
                first = false;
            }
        }
        self.c = best.0;
        self.history.push((now.saturating_sub(1), self.c));
    }

    fn history(&self) -> &[(u64, f64)] {
        &self.history
    }
}
