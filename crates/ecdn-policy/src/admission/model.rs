//! AdaptSize's Markov cache model (AdaptSize §4.1 and Appendix A).
//!
//! Each object *i* has a request rate r_i (requests per window) and a size s_i. With admission
//! probability e^(−s_i/c) and an LRU list pushed down at rate μ, the long-run probability that
//! *i* is cached is (Theorem 1, with the paper's e^(−c·s_i) read as the admission probability
//! e^(−s_i/c) it stands for):
//!
//! ```text
//!     P_in(i) = a_i (e^(r_i/μ) − 1) / (1 + a_i (e^(r_i/μ) − 1)),   a_i = e^(−s_i/c)
//! ```
//!
//! We write T = 1/μ, the cache's *characteristic time* (how long an object not requested again
//! stays cached). T is the solution of Σ_i P_in(i)·s_i = K (equation 1), found by a safeguarded
//! Newton iteration on log T (the paper's fixed-point solve). The predicted object hit ratio is
//! OHR(c) = Σ r_i P_in(i) / Σ r_i; [`Model::best_c`] searches it globally: a coarse grid over
//! log2 c, then golden-section refinement around the best grid point.
//!
//! Numerical stability: P_in is evaluated as a logistic function of
//! y = ln(a_i) + ln(e^(r_i T) − 1) = −s_i/c + ln(expm1(r_i T)), which never overflows, whatever
//! r_i T or s_i/c are (the paper uses a Padé approximant for the same purpose).
//!
//! Speed: objects are merged into groups of nearly equal (rate, size) — 1/64 octave in rate,
//! 1/32 octave in size — so a model evaluation costs O(groups), not O(objects), with a
//! relative error in rate and size below 1.1%.

use hashbrown::HashMap;

/// One group of objects with (nearly) the same rate and size.
#[derive(Clone, Copy, Debug)]
struct Group {
    /// Number of objects.
    n: f64,
    /// Mean request rate (requests per window).
    rate: f64,
    /// Mean size in bytes.
    size: f64,
}

/// AdaptSize's model of an LRU cache of capacity K under e^(−size/c) admission.
#[derive(Clone, Debug)]
pub struct Model {
    groups: Vec<Group>,
    capacity: f64,
    /// Σ r_i over all objects, including those larger than the cache.
    total_rate: f64,
    /// Σ s_i over objects that fit (if ≤ K, everything fits and T = ∞).
    fit_bytes: f64,
    min_size: f64,
    max_size: f64,
    /// Longest characteristic time the model may assume (windows); see [`Model::with_horizon`].
    horizon: f64,
}

/// ln(e^x − 1) for x > 0, without overflow.
#[inline]
fn ln_expm1(x: f64) -> f64 {
    if x > 36.0 {
        // e^x − 1 = e^x (1 − e^−x); ln(1 − e^−x) < 3e−16 here.
        x
    } else {
        x.exp_m1().ln()
    }
}

/// P_in for one object with rate `r`, size `s`, admission parameter `c`, characteristic time `t`.
#[inline]
pub fn p_in(r: f64, s: f64, c: f64, t: f64) -> f64 {
    if r <= 0.0 || t <= 0.0 {
        return 0.0;
    }
    if t.is_infinite() {
        return if c > 0.0 { 1.0 } else { 0.0 };
    }
    let y = -s / c + ln_expm1(r * t);
    logistic(y)
}

#[inline]
fn logistic(y: f64) -> f64 {
    if y >= 0.0 {
        1.0 / (1.0 + (-y).exp())
    } else {
        let e = y.exp();
        e / (1.0 + e)
    }
}

impl Model {
    /// Builds the model from `(rate, size)` per object and the cache capacity in bytes.
    /// Objects with zero rate are ignored; objects larger than the capacity count as requests
    /// that always miss.
    pub fn new(objects: impl IntoIterator<Item = (f64, u64)>, capacity: u64) -> Self {
        let k = capacity as f64;
        let mut map: HashMap<(i32, i32), (f64, f64, f64), foldhash::fast::FixedState> =
            HashMap::with_hasher(foldhash::fast::FixedState::with_seed(7));
        let mut total_rate = 0.0;
        let mut fit_bytes = 0.0;
        let mut min_size = f64::INFINITY;
        let mut max_size: f64 = 0.0;
        for (rate, size) in objects {
            if rate.is_nan() || rate <= 0.0 || !rate.is_finite() {
                continue;
            }
            total_rate += rate;
            let s = size.max(1) as f64;
            if s > k {
                continue;
            }
            fit_bytes += s;
            min_size = min_size.min(s);
            max_size = max_size.max(s);
            let key = (
                (rate.log2() * 64.0).round() as i32,
                (s.log2() * 32.0).round() as i32,
            );
            let g = map.entry(key).or_insert((0.0, 0.0, 0.0));
            g.0 += 1.0;
            g.1 += rate;
            g.2 += s;
        }
        let groups = map
            .into_values()
            .map(|(n, rs, ss)| Group {
                n,
                rate: rs / n,
                size: ss / n,
            })
            .collect();
        Model {
            groups,
            capacity: k,
            total_rate,
            fit_bytes,
            min_size: if min_size.is_finite() { min_size } else { 1.0 },
            max_size: max_size.max(1.0),
            horizon: f64::INFINITY,
        }
    }

    /// Limits the characteristic time to `horizon` windows. The steady state of Theorem 1 can
    /// need an arbitrarily long time to reach: as c → 0 the model lets T → ∞ and fills the cache
    /// with the highest-rate objects (a perfect LFU), which a real cache, admitting an object
    /// once in 1/(r·e^(−s/c)) requests, reaches only after far longer than its statistics are
    /// valid. With a horizon, a c that cannot fill the cache within `horizon` windows is
    /// evaluated with T = `horizon` and a cache that is not full, so its predicted OHR is what
    /// the cache can actually reach in that time.
    pub fn with_horizon(mut self, horizon: f64) -> Self {
        self.horizon = if horizon > 0.0 { horizon } else { f64::INFINITY };
        self
    }

    /// Number of (rate, size) groups the model evaluates.
    pub fn groups(&self) -> usize {
        self.groups.len()
    }

    /// Σ P_in(i)·s_i at characteristic time `t`, with d/d(ln t) of it.
    fn occupancy(&self, c: f64, t: f64) -> (f64, f64) {
        let mut bytes = 0.0;
        let mut deriv = 0.0;
        for g in &self.groups {
            let x = g.rate * t;
            let p = p_in(g.rate, g.size, c, t);
            bytes += g.n * g.size * p;
            // dP/dx = P(1−P) / (1 − e^−x);  d/d ln t = x dP/dx.
            let dpdx = p * (1.0 - p) / (-(-x).exp_m1()).max(1e-300);
            deriv += g.n * g.size * x * dpdx;
        }
        (bytes, deriv)
    }

    /// The characteristic time T = 1/μ solving Σ P_in·s = K for admission parameter `c`, in
    /// windows; `f64::INFINITY` when every object fits; at most the horizon.
    pub fn characteristic_time(&self, c: f64) -> f64 {
        self.solve_t(c, None)
    }

    fn solve_t(&self, c: f64, guess: Option<f64>) -> f64 {
        if self.fit_bytes <= self.capacity || self.groups.is_empty() {
            return self.horizon;
        }
        let k = self.capacity;
        if self.horizon.is_finite() && self.occupancy(c, self.horizon).0 <= k {
            return self.horizon;
        }
        // Occupancy is increasing in T and tends to fit_bytes > K as T → ∞, so a root exists.
        // Bracket it in ln T with growing steps, then polish with Newton steps that fall back to
        // bisection whenever they would leave the bracket.
        const LN_T_MAX: f64 = 700.0;
        let f = |lt: f64| {
            let (occ, d) = self.occupancy(c, lt.exp());
            (occ - k, d)
        };
        let mut lt = guess
            .filter(|g| g.is_finite() && *g > 0.0)
            .map_or(0.0, f64::ln)
            .clamp(-LN_T_MAX, LN_T_MAX);
        let (mut fx, mut d) = f(lt);
        let (mut lo, mut hi);
        let mut step = 1.0;
        if fx < 0.0 {
            lo = lt;
            loop {
                let next = (lt + step).min(LN_T_MAX);
                let (fn_, dn) = f(next);
                if fn_ >= 0.0 {
                    hi = next;
                    (lt, fx, d) = (next, fn_, dn);
                    break;
                }
                if next >= LN_T_MAX {
                    return LN_T_MAX.exp();
                }
                (lo, lt) = (next, next);
                step *= 2.0;
            }
        } else {
            hi = lt;
            loop {
                let next = (lt - step).max(-LN_T_MAX);
                let (fn_, dn) = f(next);
                if fn_ <= 0.0 {
                    lo = next;
                    (lt, fx, d) = (next, fn_, dn);
                    break;
                }
                if next <= -LN_T_MAX {
                    return 0.0;
                }
                (hi, lt) = (next, next);
                step *= 2.0;
            }
        }
        let tol = 1e-6 * k;
        for _ in 0..100 {
            if fx.abs() <= tol || hi - lo < 1e-12 {
                break;
            }
            let newton = if d > 0.0 { lt - fx / d } else { f64::NAN };
            lt = if newton.is_finite() && newton > lo && newton < hi {
                newton
            } else {
                0.5 * (lo + hi)
            };
            (fx, d) = f(lt);
            if fx < 0.0 {
                lo = lt;
            } else {
                hi = lt;
            }
        }
        lt.exp()
    }

    fn ohr_at(&self, c: f64, t: f64) -> f64 {
        if self.total_rate <= 0.0 {
            return 0.0;
        }
        let hits: f64 = self
            .groups
            .iter()
            .map(|g| g.n * g.rate * p_in(g.rate, g.size, c, t))
            .sum();
        (hits / self.total_rate).clamp(0.0, 1.0)
    }

    /// Predicted object hit ratio for admission parameter `c` (bytes).
    pub fn predicted_ohr(&self, c: f64) -> f64 {
        let t = self.characteristic_time(c);
        self.ohr_at(c, t)
    }

    /// Predicted OHR at each c in `cs`.
    pub fn curve(&self, cs: &[f64]) -> Vec<(f64, f64)> {
        let mut guess = None;
        cs.iter()
            .map(|&c| {
                let t = self.solve_t(c, guess);
                guess = Some(t);
                (c, self.ohr_at(c, t))
            })
            .collect()
    }

    /// The range of log2 c worth searching: from well below the smallest object to well above
    /// the largest (where e^(−s/c) ≈ 1 for every object, i.e. admit-all).
    pub fn search_range(&self) -> (f64, f64) {
        let lo = (self.min_size.log2() - 2.0).floor().max(0.0);
        let hi = (self.max_size.log2() + 4.0).ceil().max(lo + 1.0);
        (lo, hi)
    }

    /// Global search for the c maximizing the predicted OHR: a grid over log2 c with step 1/4,
    /// then golden-section refinement within one grid step of the best point.
    /// Returns `(c, predicted OHR)`.
    pub fn best_c(&self) -> (f64, f64) {
        let (lo, hi) = self.search_range();
        let step = 0.25;
        let n = ((hi - lo) / step).ceil() as usize + 1;
        let mut best = (lo, f64::NEG_INFINITY);
        let mut guess = None;
        for i in 0..n {
            let lc = lo + i as f64 * step;
            let c = lc.exp2();
            let t = self.solve_t(c, guess);
            guess = Some(t);
            let ohr = self.ohr_at(c, t);
            if ohr > best.1 + 1e-12 {
                best = (lc, ohr);
            }
        }
        // Golden-section search on [best − step, best + step].
        let eval = |lc: f64| self.predicted_ohr(lc.exp2());
        let (mut a, mut b) = (best.0 - step, best.0 + step);
        let phi = 0.5 * (5f64.sqrt() - 1.0);
        let mut x1 = b - phi * (b - a);
        let mut x2 = a + phi * (b - a);
        let (mut f1, mut f2) = (eval(x1), eval(x2));
        for _ in 0..12 {
            if f1 < f2 {
                a = x1;
                x1 = x2;
                f1 = f2;
                x2 = a + phi * (b - a);
                f2 = eval(x2);
            } else {
                b = x2;
                x2 = x1;
                f2 = f1;
                x1 = b - phi * (b - a);
                f1 = eval(x1);
            }
        }
        let (lc, f) = if f1 > f2 { (x1, f1) } else { (x2, f2) };
        if f > best.1 {
            (lc.exp2(), f)
        } else {
            (best.0.exp2(), best.1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p_in_is_a_probability_everywhere() {
        for &r in &[0.0, 1e-9, 1e-3, 1.0, 1e3, 1e9, 1e300] {
            for &s in &[1.0, 1e3, 1e9, 1e15] {
                for &c in &[1e-3, 1.0, 1e6, 1e12] {
                    for &t in &[0.0, 1e-9, 1.0, 1e9, 1e300, f64::INFINITY] {
                        let p = p_in(r, s, c, t);
                        assert!((0.0..=1.0).contains(&p), "p_in({r},{s},{c},{t}) = {p}");
                    }
                }
            }
        }
    }

    #[test]
    fn p_in_matches_theorem_1_where_it_can_be_evaluated() {
        let (r, s, c, t): (f64, f64, f64, f64) = (2.0, 1000.0, 4000.0, 0.7);
        let a = (-s / c).exp();
        let e = (r * t).exp() - 1.0;
        let direct = a * e / (1.0 + a * e);
        assert!((p_in(r, s, c, t) - direct).abs() < 1e-12);
    }

    #[test]
    fn occupancy_matches_capacity() {
        let objs: Vec<(f64, u64)> = (1..=2000)
            .map(|i| (1000.0 / i as f64, 1000 + (i * 37 % 5000) as u64))
            .collect();
        let m = Model::new(objs.iter().copied(), 1 << 20);
        for &c in &[1e3, 1e4, 1e5, 1e7] {
            let t = m.characteristic_time(c);
            assert!(t.is_finite() && t > 0.0);
            let (occ, _) = m.occupancy(c, t);
            assert!(
                (occ - (1 << 20) as f64).abs() < 2.0,
                "c={c}: occupancy {occ}"
            );
        }
        // Everything fits: T = ∞ and the OHR is 1.
        let small = Model::new(objs.iter().copied(), 1 << 40);
        assert!(small.characteristic_time(1e4).is_infinite());
        assert!((small.predicted_ohr(1e4) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn extreme_rates_do_not_overflow() {
        let objs = vec![(1e12, 100u64), (1e-12, 1 << 30), (5.0, 1 << 20), (1e6, 10)];
        let m = Model::new(objs, 1 << 20);
        let (c, ohr) = m.best_c();
        assert!(c.is_finite() && c > 0.0);
        assert!((0.0..=1.0).contains(&ohr));
    }

    #[test]
    fn prefers_small_objects_when_large_ones_crowd_the_cache() {
        // AdaptSize §3.1's toy example: many equally popular small objects and one huge one.
        let mut objs: Vec<(f64, u64)> = (0..9999).map(|_| (1.0, 100 << 10)).collect();
        objs.push((1.0, 500 << 20));
        let m = Model::new(objs, 1 << 30);
        let (c, ohr) = m.best_c();
        assert!(ohr > 0.99, "ohr {ohr}");
        assert!(c < (64 << 20) as f64, "c {c}");
    }
}
