//! AdaptSize (NSDI '17): admit with probability e^(−size/c), and every Δ requests re-tune c
//! with the Markov model of [`super::model`].
//!
//! Statistics: every request counts toward its object in the current window. At the end of a
//! window each object's rate is smoothed, r ← (1 − β)·r + β·(requests this window), with β the
//! `smoothing` weight (default 0.3), so history from earlier windows is kept (§4.2). Objects
//! whose smoothed rate falls below [`FORGET_RATE`] are forgotten, which bounds memory. Then the
//! model is built from all remembered objects and c is set to its global optimum.

use hashbrown::HashMap;

use super::exp::exp_admit_probability;
use super::model::Model;
use crate::rng::Rng;
use crate::{Admission, Request};

/// Smoothed rates below this (requests per window) are dropped from the statistics.
pub const FORGET_RATE: f64 = 0.1;

#[derive(Clone, Copy, Debug)]
struct Stat {
    /// Smoothed requests per window, as of the last window end.
    rate: f64,
    /// Requests in the current window.
    count: u32,
    /// Latest size seen.
    size: u64,
}

/// The AdaptSize admission policy.
#[derive(Clone)]
pub struct AdaptSize {
    capacity: u64,
    window: usize,
    smoothing: f64,
    c: f64,
    horizon: f64,
    seen: usize,
    requests: u64,
    stats: HashMap<u64, Stat, foldhash::fast::FixedState>,
    rng: Rng,
    history: Vec<(u64, f64)>,
    last_prediction: Option<f64>,
}

impl AdaptSize {
    /// `capacity` of the cache it guards, window Δ in requests, smoothing weight β ∈ (0, 1].
    pub fn new(capacity: u64, window: usize, smoothing: f64, seed: u64) -> Self {
        // Until the first window's statistics exist, c is infinite: admit everything, like the
        // plain LRU cache AdaptSize is added to.
        let c = f64::INFINITY;
        AdaptSize {
            capacity,
            window: window.max(1),
            smoothing: smoothing.clamp(1e-6, 1.0),
            c,
            horizon: std::env::var("ECDN_HORIZON").ok().and_then(|v| v.parse().ok()).unwrap_or(1.0 / smoothing.clamp(1e-6, 1.0)),
            seen: 0,
            requests: 0,
            stats: HashMap::with_hasher(foldhash::fast::FixedState::with_seed(0xada)),
            rng: Rng::new(seed),
            history: vec![(0, c)],
            last_prediction: None,
        }
    }

    /// Objects currently tracked by the statistics.
    pub fn tracked(&self) -> usize {
        self.stats.len()
    }

    /// The OHR the model predicted for the current c at the last re-tuning.
    pub fn last_prediction(&self) -> Option<f64> {
        self.last_prediction
    }

    /// Ends the current window: smooth the statistics, build the model, pick c.
    pub fn retune(&mut self) {
        let beta = self.smoothing;
        self.stats.retain(|_, s| {
            s.rate = (1.0 - beta) * s.rate + beta * s.count as f64;
            s.count = 0;
            s.rate >= FORGET_RATE
        });
        let model = self.model();
        if std::env::var("ECDN_DEBUG_MODEL").is_ok() {
            let cs: Vec<f64> = (4..24).map(|e| f64::exp2(e as f64)).collect();
            for (c, o) in model.curve(&cs) {
                eprintln!("DBG cap={} c={c} ohr={o:.4} T={}", self.capacity, model.characteristic_time(c));
            }
        }
        if model.groups() > 0 {
            let (c, ohr) = model.best_c();
            self.c = c;
            self.last_prediction = Some(ohr);
        }
        self.history.push((self.requests, self.c));
    }

    /// The model built from the smoothed statistics as of the last window end.
    pub fn model(&self) -> Model {
        Model::new(self.stats.values().map(|s| (s.rate, s.size)), self.capacity)
            .with_horizon(self.horizon)
    }

    /// Heap bytes of the statistics table.
    pub fn heap_bytes(&self) -> usize {
        self.stats.capacity() * (std::mem::size_of::<(u64, Stat)>() + 1)
    }
}

impl Admission for AdaptSize {
    fn name(&self) -> String {
        "adaptsize".into()
    }

    #[inline]
    fn observe(&mut self, req: &Request, _hit: bool) {
        let s = self.stats.entry(req.id).or_insert(Stat {
            rate: 0.0,
            count: 0,
            size: req.size,
        });
        s.count = s.count.saturating_add(1);
        s.size = req.size;
        self.requests += 1;
        self.seen += 1;
        if self.seen >= self.window {
            self.seen = 0;
            self.retune();
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
}
