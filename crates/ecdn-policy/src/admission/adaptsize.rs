//! AdaptSize (NSDI '17): admit with probability e^(−size/c), and every Δ requests re-tune c
//! with the Markov model of [`super::model`].
//!
//! Statistics (§4.2): every request counts toward its object in the current window. At the end
//! of a window each object's rate is smoothed, r ← (1 − β)·r + β·(requests this window), with β
//! the `smoothing` weight (default 0.3), so history from earlier windows is kept. Objects whose
//! smoothed rate falls below [`FORGET_RATE`] are forgotten, which bounds memory. Then the model
//! is built from all remembered objects and c is set to its global optimum (§4.1).
//!
//! The model's decision horizon (see [`super::model`]) defaults to [`DEFAULT_HORIZON`] windows:
//! c is chosen for the OHR of the coming windows, starting from what is cached now, rather than
//! for the stationary state (`horizon=inf`, the paper's model), which favours an ever smaller c
//! whose benefits arrive only after far longer than the statistics stay valid. What is cached
//! now is estimated without looking into the cache: an object is cached if its last request hit
//! or was admitted and it is among the most recently used such objects that fit in the capacity
//! (exact for LRU).
//!
//! **Guard** (on by default, `guard=off` for the paper's policy alone): the model is Che's
//! approximation under independent requests; on traffic with strong temporal locality it can
//! be badly wrong (on the JEDI d-2 trace it predicts an OHR of 0.47 for admit-all LRU, which
//! measures 0.68 — see `ecdn sim model`), and its c then loses to plain LRU. So a key-only
//! shadow cache of the same capacity runs the configuration the cache is *not* running — admit
//! everything while the cache follows the model, the model's c while it admits everything —
//! and at each window end the cache switches to whichever of the two hit more in that window.
//! Within a window the guard looks every Δ/16 requests and switches early when the shadow leads
//! by more than three standard deviations of the hit-count difference (3·√(hits of both)), so a
//! wrong model costs a fraction of a window, not a whole one. When the model says admit
//! everything, both run the same configuration.

use hashbrown::HashMap;

use super::exp::exp_admit_probability;
use super::model::{Model, ObjectState};
use super::shadow::Shadow;
use crate::spec::EvictionKind;
use crate::{Admission, Request};
use ecdn_trace::gen::Rng;

/// Smoothed rates below this (requests per window) are dropped from the statistics.
pub const FORGET_RATE: f64 = 0.1;

/// Default decision horizon of the model, in windows.
pub const DEFAULT_HORIZON: f64 = 2.0;

#[derive(Clone, Copy, Debug)]
struct Stat {
    /// Smoothed requests per window, as of the last window end.
    rate: f64,
    /// Latest size seen.
    size: u64,
    /// Request index of the latest request.
    last: u64,
    /// Requests in the current window.
    count: u32,
    /// The latest request hit or was admitted.
    cached: bool,
}

/// The guard's shadow cache and the hit counts it is judged by.
struct Guard {
    shadow: Shadow,
    rng: Rng,
    /// Hits of the real cache in the current window.
    main_hits: u64,
    /// The real cache follows the model (else it admits everything).
    follow_model: bool,
    /// Windows in which the real cache admitted everything.
    overruled: u64,
    /// Requests until the next early check.
    until_check: usize,
}

/// The AdaptSize admission policy.
pub struct AdaptSize {
    capacity: u64,
    window: usize,
    smoothing: f64,
    horizon: f64,
    /// The c the real cache uses now.
    c: f64,
    /// The c the model chose at the last window end.
    model_c: f64,
    guard: Option<Guard>,
    seen: usize,
    requests: u64,
    stats: HashMap<u64, Stat, foldhash::fast::FixedState>,
    rng: Rng,
    history: Vec<(u64, f64)>,
    last_prediction: Option<f64>,
    scratch: Vec<(u64, u64)>,
}

impl AdaptSize {
    /// `capacity` of the cache it guards, window Δ in requests, smoothing weight β ∈ (0, 1],
    /// decision horizon in windows (∞ for the paper's stationary model); `guard` is the
    /// eviction policy of the real cache, for the guard's shadow (`None`: no guard).
    pub fn new(
        capacity: u64,
        window: usize,
        smoothing: f64,
        horizon: f64,
        guard: Option<EvictionKind>,
        seed: u64,
    ) -> Self {
        // Until the first window's statistics exist, c is infinite: admit everything, like the
        // plain LRU cache AdaptSize is added to.
        let c = f64::INFINITY;
        AdaptSize {
            capacity,
            window: window.max(1),
            smoothing: smoothing.clamp(1e-6, 1.0),
            horizon,
            c,
            model_c: c,
            guard: guard.map(|kind| Guard {
                shadow: Shadow::new(kind.build(capacity)),
                rng: Rng::new(seed ^ 0x9a2d_0000_0000_0001),
                main_hits: 0,
                follow_model: true,
                overruled: 0,
                until_check: (window / 16).max(1),
            }),
            seen: 0,
            requests: 0,
            stats: HashMap::with_hasher(foldhash::fast::FixedState::with_seed(0xada)),
            rng: Rng::new(seed),
            history: vec![(0, c)],
            last_prediction: None,
            scratch: Vec::new(),
        }
    }

    /// The OHR the model predicted for the chosen c at the last re-tuning.
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
        if let Some(g) = self.guard.as_mut() {
            if g.shadow.hits > g.main_hits {
                g.follow_model = !g.follow_model;
            }
            g.shadow.hits = 0;
            g.main_hits = 0;
        }
        let model = self.model();
        if model.groups() > 0 {
            let (c, ohr) = model.best_c();
            self.model_c = c;
            self.last_prediction = Some(ohr);
        }
        self.c = match &mut self.guard {
            Some(g) if !g.follow_model => {
                g.overruled += 1;
                f64::INFINITY
            }
            _ => self.model_c,
        };
        self.history.push((self.requests, self.c));
    }

    /// The c the model chose at the last window end (the guard may be overruling it).
    pub fn model_c(&self) -> f64 {
        self.model_c
    }

    /// Windows in which the guard had the cache admit everything instead of following the
    /// model.
    pub fn overruled_windows(&self) -> u64 {
        self.guard.as_ref().map_or(0, |g| g.overruled)
    }

    /// Request index before which a flagged object has been pushed out of an LRU cache: the
    /// most recently used flagged objects fill the capacity, older ones are gone.
    fn cached_since(&mut self) -> u64 {
        if self.horizon.is_infinite() {
            return u64::MAX;
        }
        self.scratch.clear();
        self.scratch.extend(
            self.stats
                .values()
                .filter(|s| s.cached)
                .map(|s| (s.last, s.size)),
        );
        self.scratch
            .sort_unstable_by_key(|&(last, _)| std::cmp::Reverse(last));
        let mut bytes = 0u64;
        for &(last, size) in &self.scratch {
            bytes += size;
            if bytes > self.capacity {
                return last + 1;
            }
        }
        0
    }

    /// The model built from the smoothed statistics as of the last window end.
    pub fn model(&mut self) -> Model {
        let since = self.cached_since();
        Model::with_state(
            self.stats.values().map(|s| ObjectState {
                rate: s.rate,
                size: s.size,
                p_in: if s.cached && s.last >= since {
                    1.0
                } else {
                    0.0
                },
            }),
            self.capacity,
        )
        .with_horizon(self.horizon)
    }
}

impl Admission for AdaptSize {
    fn name(&self) -> String {
        "adaptsize".into()
    }

    #[inline]
    fn observe(&mut self, req: &Request, hit: bool) {
        let now = self.requests;
        if let Some(g) = self.guard.as_mut() {
            g.main_hits += hit as u64;
            let other = if g.follow_model {
                f64::INFINITY
            } else {
                self.model_c
            };
            g.shadow.access(req, other, now, &mut g.rng);
            g.until_check -= 1;
            if g.until_check == 0 {
                g.until_check = (self.window / 16).max(1);
                let (m, sh) = (g.main_hits as f64, g.shadow.hits as f64);
                if sh > m + 3.0 * (m + sh).sqrt() {
                    g.follow_model = !g.follow_model;
                    g.main_hits = 0;
                    g.shadow.hits = 0;
                    self.c = if g.follow_model {
                        self.model_c
                    } else {
                        f64::INFINITY
                    };
                    self.history.push((now, self.c));
                }
            }
        }
        let s = self.stats.entry(req.id).or_insert(Stat {
            rate: 0.0,
            size: req.size,
            last: now,
            count: 0,
            cached: false,
        });
        s.count = s.count.saturating_add(1);
        s.size = req.size;
        s.last = now;
        s.cached = hit;
        self.requests += 1;
        self.seen += 1;
        if self.seen >= self.window {
            self.seen = 0;
            self.retune();
        }
    }

    #[inline]
    fn admit(&mut self, req: &Request) -> bool {
        let admitted = self.rng.chance(exp_admit_probability(req.size, self.c));
        if admitted && !self.horizon.is_infinite() {
            if let Some(s) = self.stats.get_mut(&req.id) {
                s.cached = true;
            }
        }
        admitted
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

    fn tracked(&self) -> usize {
        self.stats.len()
    }

    fn heap_bytes(&self) -> usize {
        self.stats.capacity() * (std::mem::size_of::<(u64, Stat)>() + 1)
            + self.scratch.capacity() * std::mem::size_of::<(u64, u64)>()
            + self.guard.as_ref().map_or(0, |g| g.shadow.heap_bytes())
    }
}
