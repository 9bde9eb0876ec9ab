//! AdaptSize's Markov cache model (AdaptSize §4.1 and Appendix A), with an optional finite
//! decision horizon.
//!
//! Each object *i* has a request rate r_i (requests per window) and a size s_i. With admission
//! probability a_i = e^(−s_i/c) and an LRU list pushed down at rate μ, the long-run probability
//! that *i* is cached is (Theorem 1, with the paper's e^(−c·s_i) read as the admission
//! probability e^(−s_i/c) it stands for):
//!
//! ```text
//!     P_in(i) = a_i (e^(r_i/μ) − 1) / (1 + a_i (e^(r_i/μ) − 1))
//! ```
//!
//! We write T = 1/μ, the cache's *characteristic time* (how long an object not requested again
//! stays cached). T solves Σ_i P_in(i)·s_i = K (equation 1); we solve it in ln T with
//! safeguarded secant (Illinois) steps inside a bracket (the paper's fixed-point solve). The
//! predicted object hit ratio is OHR(c) = Σ r_i P_in(i) / Σ r_i; [`Model::best_c`] searches it
//! globally: a grid over log2 c, then golden-section refinement around the best grid point.
//!
//! **Steady state and the decision horizon.** Theorem 1 is the chain's stationary distribution.
//! Seen as a two-state chain, object *i* enters the cache at rate α_i = r_i·a_i (a request that is
//! admitted) and leaves at rate β_i = r_i / (e^(r_i T) − 1) (one over its mean stay), and
//! P_in = α/(α+β). As c → 0 the stationary optimum becomes a perfect LFU (T → ∞, only the
//! highest-rate objects cached) that a real cache reaches only after ~1/α_i requests — far more
//! than any window. So [`Model::with_horizon`] lets the model ask the question a re-tuning
//! policy actually faces: *given which objects are cached now, what will the OHR be over the
//! next H windows?* The chain relaxes from its state p0_i at rate κ_i = α_i + β_i, and its time
//! average over H is
//!
//! ```text
//!     P̄_i = P_in(i) + (p0_i − P_in(i))·φ_i,   φ_i = (1 − e^(−κ_i H)) / (κ_i H)
//! ```
//!
//! which equals Theorem 1 as H → ∞ (φ → 0). Equation 1 and OHR(c) use P̄ in place of P_in.
//! With an infinite horizon (the default) the model is exactly the paper's.
//!
//! Numerical stability: everything is computed without overflow for any r·T or s/c — where
//! e^(rT) would overflow or a_i underflows, P_in is the logistic function of
//! −s_i/c + ln(e^(r_i T) − 1) (the paper uses a Padé approximant for the same purpose).
//!
//! Speed: objects are merged into groups of nearly equal (rate, size) — four buckets per octave
//! in each, every bucket spanning less than 25% — and a group is evaluated at its mean rate and
//! size, so an evaluation costs O(groups), not O(objects) (the initial state is kept exactly,
//! as cached and uncached weights per group). The
//! admission probabilities of a c are computed once per group, so each step of the solve costs
//! one or two exponentials per group.

use hashbrown::HashMap;

/// Group bucket of a positive value: its binary exponent and the top two bits of its mantissa,
/// i.e. four buckets per octave, each spanning less than 25% relative. No libm call: building
/// the model touches every tracked object.
#[inline]
pub(super) fn bucket(x: f64) -> i32 {
    (x.to_bits() >> 50) as i32
}

/// One group of objects with (nearly) the same rate and size.
#[derive(Clone, Copy, Debug)]
struct Group {
    /// Number of objects.
    n: f64,
    /// Σ p0 over the group's objects: expected number cached at the start.
    n_in: f64,
    /// Mean request rate (requests per window).
    rate: f64,
    /// Mean size in bytes.
    size: f64,
}

/// What the model knows about one object.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ObjectState {
    /// Request rate, requests per window.
    pub rate: f64,
    /// Size in bytes.
    pub size: u64,
    /// Probability that the object is cached now (only used with a finite horizon).
    pub p_in: f64,
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
    /// Decision horizon H in windows (∞: the stationary model of Theorem 1).
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

/// Theorem 1's P_in for one object with rate `r`, size `s`, admission parameter `c` and
/// characteristic time `t`, in a form that never overflows.
#[inline]
pub fn p_in(r: f64, s: f64, c: f64, t: f64) -> f64 {
    if r <= 0.0 || t <= 0.0 {
        return 0.0;
    }
    if t.is_infinite() {
        return if c > 0.0 { 1.0 } else { 0.0 };
    }
    logistic(-s / c + ln_expm1(r * t))
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

/// e^x − 1 to about 1e-8 relative error, several times faster than libm's `exp_m1` — the model
/// evaluates it once or twice per group and solver step, so it dominates re-tuning time, and
/// the model needs nowhere near full precision. Range reduction x = n·ln2 + r with
/// |r| ≤ ln2/2, the degree-8 Taylor polynomial of e^r − 1 in Estrin's form (short dependency
/// chains), then e^x − 1 = 2^n(e^r − 1) + (2^n − 1). For |x| ≤ ln2/2 the polynomial is used
/// directly, so small arguments keep their relative accuracy. Outside [−700, 700]: libm.
#[inline(always)]
pub(super) fn fast_expm1(x: f64) -> f64 {
    if !(-700.0..=700.0).contains(&x) {
        return x.exp_m1();
    }
    let (two_n, em1) = reduce_exp(x);
    if two_n == 1.0 {
        return em1;
    }
    two_n * em1 + (two_n - 1.0)
}

/// e^x with the same method and accuracy as [`fast_expm1`].
#[inline(always)]
pub(super) fn fast_exp(x: f64) -> f64 {
    if !(-700.0..=700.0).contains(&x) {
        return x.exp();
    }
    let (two_n, em1) = reduce_exp(x);
    two_n * (1.0 + em1)
}

/// Splits e^x = 2^n · e^r with |r| ≤ ln2/2 and returns (2^n, e^r − 1); |x| ≤ 700.
#[inline(always)]
fn reduce_exp(x: f64) -> (f64, f64) {
    // ln 2 split in two (fdlibm's constants): n·LN2_HI is exact for the n that occur here.
    const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
    const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
    // Round to nearest with a truncating cast (f64::round is a libm call without SSE4.1).
    let t = x * std::f64::consts::LOG2_E;
    let n = (t + if t >= 0.0 { 0.5 } else { -0.5 }) as i64;
    let nf = n as f64;
    let r = (x - nf * LN2_HI) - nf * LN2_LO;
    let r2 = r * r;
    let r4 = r2 * r2;
    let p01 = 1.0 + 0.5 * r;
    let p23 = 1.0 / 6.0 + r * (1.0 / 24.0);
    let p45 = 1.0 / 120.0 + r * (1.0 / 720.0);
    let p67 = 1.0 / 5_040.0 + r * (1.0 / 40_320.0);
    let em1 = r * ((p01 + r2 * p23) + r4 * (p45 + r2 * p67));
    // 2^n exactly, built from its exponent bits (|n| ≤ 1010 here).
    (f64::from_bits(((n + 1023) as u64) << 52), em1)
}

/// Stationary P_in and relaxation rate κ = α + β (per window) at x = r·T, for an object of rate
/// `r` admitted with probability `a` = e^(`la`). One exponential in the common case.
#[inline(always)]
fn stationary(r: f64, x: f64, a: f64, la: f64) -> (f64, f64) {
    if x <= 0.0 || r <= 0.0 {
        return (0.0, 0.0);
    }
    if x < 700.0 && a > 1e-300 {
        let e = fast_expm1(x);
        let ae = a * e;
        // κ = r·a + r/(e^x − 1).
        (ae / (1.0 + ae), r * a + r / e)
    } else if x < 700.0 && la + x < -745.0 {
        // a·(e^x − 1) < e^−745: P_in underflows to 0 and α to nothing.
        (0.0, r / fast_expm1(x))
    } else {
        let p = logistic(la + ln_expm1(x));
        let beta = if x < 700.0 { r / fast_expm1(x) } else { 0.0 };
        (p, r * a + beta)
    }
}

/// φ = (1 − e^(−y))/y, the time-average weight of the initial state over a horizon (y = κH).
#[inline(always)]
pub(super) fn relaxation_weight(y: f64) -> f64 {
    if y < 1e-9 {
        1.0 - 0.5 * y
    } else if y > 40.0 {
        // e^−y < 5e−18: below f64's resolution next to 1.
        1.0 / y
    } else {
        -fast_expm1(-y) / y
    }
}

impl Model {
    /// Builds the stationary model (Theorem 1) from `(rate, size)` per object and the cache
    /// capacity in bytes. Objects with zero rate are ignored; objects larger than the capacity
    /// count as requests that always miss.
    pub fn new(objects: impl IntoIterator<Item = (f64, u64)>, capacity: u64) -> Self {
        Self::with_state(
            objects.into_iter().map(|(rate, size)| ObjectState {
                rate,
                size,
                p_in: 0.0,
            }),
            capacity,
        )
    }

    /// Builds the model from per-object rates, sizes and current cache state; the state matters
    /// only once a finite horizon is set with [`Model::with_horizon`].
    pub fn with_state(objects: impl IntoIterator<Item = ObjectState>, capacity: u64) -> Self {
        let k = capacity as f64;
        let mut map: HashMap<(i32, i32), Group, foldhash::fast::FixedState> =
            HashMap::with_hasher(foldhash::fast::FixedState::with_seed(7));
        let mut total_rate = 0.0;
        let mut fit_bytes = 0.0;
        let mut min_size = f64::INFINITY;
        let mut max_size: f64 = 0.0;
        for o in objects {
            let rate = o.rate;
            if rate.is_nan() || rate <= 0.0 || !rate.is_finite() {
                continue;
            }
            total_rate += rate;
            let s = o.size.max(1) as f64;
            if s > k {
                continue;
            }
            fit_bytes += s;
            min_size = min_size.min(s);
            max_size = max_size.max(s);
            let key = (bucket(rate), bucket(s));
            let g = map.entry(key).or_insert(Group {
                n: 0.0,
                n_in: 0.0,
                rate: 0.0,
                size: 0.0,
            });
            g.n += 1.0;
            g.n_in += o.p_in.clamp(0.0, 1.0);
            g.rate += rate;
            g.size += s;
        }
        let groups = map
            .into_values()
            .map(|g| Group {
                rate: g.rate / g.n,
                size: g.size / g.n,
                ..g
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

    /// Sets the decision horizon H in windows (see the module docs); ∞ or ≤ 0 means the
    /// stationary model.
    pub fn with_horizon(mut self, horizon: f64) -> Self {
        self.horizon = horizon_windows(horizon);
        self
    }

    /// Number of (rate, size) groups the model evaluates.
    pub fn groups(&self) -> usize {
        self.groups.len()
    }

    /// Admission probabilities e^(−s/c) of every group, and their logarithms.
    fn admission(&self, c: f64) -> Vec<(f64, f64)> {
        self.groups
            .iter()
            .map(|g| {
                let la = if c > 0.0 {
                    -g.size / c
                } else {
                    f64::NEG_INFINITY
                };
                (fast_exp(la), la)
            })
            .collect()
    }

    /// Expected number of the group's objects cached (time-averaged over the horizon) at
    /// characteristic time `t`.
    #[inline(always)]
    fn cached(&self, g: &Group, a: f64, la: f64, t: f64) -> f64 {
        let (p, kappa) = if t.is_infinite() {
            // Nothing is ever evicted: an object enters at its admission rate r·a and stays.
            if a > 0.0 {
                (1.0, g.rate * a)
            } else {
                (0.0, 0.0)
            }
        } else {
            stationary(g.rate, g.rate * t, a, la)
        };
        if self.horizon.is_infinite() {
            return g.n * p;
        }
        let phi = relaxation_weight(kappa * self.horizon);
        g.n * p * (1.0 - phi) + g.n_in * phi
    }

    /// Σ P·s at characteristic time `t`.
    fn occupancy(&self, adm: &[(f64, f64)], t: f64) -> f64 {
        self.groups
            .iter()
            .zip(adm)
            .map(|(g, &(a, la))| g.size * self.cached(g, a, la, t))
            .sum()
    }

    /// The characteristic time T = 1/μ solving Σ P·s = K for admission parameter `c`, in
    /// windows; `f64::INFINITY` when every object fits.
    pub fn characteristic_time(&self, c: f64) -> f64 {
        self.solve_t(&self.admission(c), None)
    }

    fn solve_t(&self, adm: &[(f64, f64)], guess: Option<f64>) -> f64 {
        if self.fit_bytes <= self.capacity || self.groups.is_empty() {
            return f64::INFINITY;
        }
        let k = self.capacity;
        // f(ln T) = occupancy − K is increasing. Bracket the root with doubling steps from the
        // guess (the previous c's T), then Illinois steps inside the bracket.
        const LN_T_MAX: f64 = 700.0;
        let f = |lt: f64| self.occupancy(adm, lt.exp()) - k;
        let mut x0 = guess
            .filter(|g| g.is_finite() && *g > 0.0)
            .map_or(0.0, f64::ln)
            .clamp(-LN_T_MAX, LN_T_MAX);
        let mut f0 = f(x0);
        if f0 == 0.0 {
            return x0.exp();
        }
        let dir = if f0 < 0.0 { 1.0 } else { -1.0 };
        let mut step = 1.0;
        let (mut x1, mut f1);
        loop {
            x1 = (x0 + dir * step).clamp(-LN_T_MAX, LN_T_MAX);
            f1 = f(x1);
            if f1.signum() != f0.signum() || f1 == 0.0 {
                break;
            }
            if x1.abs() >= LN_T_MAX {
                // No root within e^±700: the cache never fills (or is always full).
                return x1.exp();
            }
            (x0, f0) = (x1, f1);
            step *= 2.0;
        }
        // Illinois: regula falsi that halves the retained end's value when it goes stale.
        let tol = 1e-3 * k;
        for _ in 0..100 {
            if f1.abs() <= tol || (x1 - x0).abs() < 1e-10 {
                break;
            }
            let x2 = (x0 * f1 - x1 * f0) / (f1 - f0);
            let f2 = f(x2);
            if f2.signum() != f1.signum() {
                (x0, f0) = (x1, f1);
            } else {
                f0 *= 0.5;
            }
            (x1, f1) = (x2, f2);
        }
        x1.exp()
    }

    /// Predicted OHR for admission probabilities `adm` at characteristic time `t`.
    fn ohr_at(&self, adm: &[(f64, f64)], t: f64) -> f64 {
        if self.total_rate <= 0.0 {
            return 0.0;
        }
        let hits: f64 = self
            .groups
            .iter()
            .zip(adm)
            .map(|(g, &(a, la))| g.rate * self.cached(g, a, la, t))
            .sum();
        (hits / self.total_rate).clamp(0.0, 1.0)
    }

    /// Characteristic time and predicted OHR at `c`, starting the solve from `guess`.
    fn evaluate(&self, c: f64, guess: Option<f64>) -> (f64, f64) {
        let adm = self.admission(c);
        let t = self.solve_t(&adm, guess);
        (t, self.ohr_at(&adm, t))
    }

    /// Predicted object hit ratio for admission parameter `c` (bytes).
    pub fn predicted_ohr(&self, c: f64) -> f64 {
        self.evaluate(c, None).1
    }

    /// Predicted OHR at each c in `cs`.
    pub fn curve(&self, cs: &[f64]) -> Vec<(f64, f64)> {
        let mut guess = None;
        cs.iter()
            .map(|&c| {
                let (t, ohr) = self.evaluate(c, guess);
                guess = Some(t);
                (c, ohr)
            })
            .collect()
    }

    /// The range of log2 c searched: from half the size below which 0.1% of the requests fall
    /// to four times the size below which 99.9% fall (request-weighted, over the objects that
    /// fit). Below it nearly nothing is admitted, above it c is as good as ∞, which is
    /// evaluated on its own.
    pub fn search_range(&self) -> (f64, f64) {
        search_range(
            self.groups.iter().map(|g| (g.size, g.n * g.rate)).collect(),
            self.min_size,
            self.max_size,
        )
    }

    /// Global search for the c maximizing the predicted OHR: a grid over log2 c with a step of
    /// one octave plus c = ∞, then golden-section refinement within one grid step of the best
    /// finite point. Returns `(c, predicted OHR)`; c may be `f64::INFINITY` (admit everything).
    pub fn best_c(&self) -> (f64, f64) {
        best_c(self.search_range(), |c, guess| self.evaluate(c, guess))
    }
}

/// A decision horizon as given (in windows), with ∞ for a non-positive one: the stationary
/// model.
pub(super) fn horizon_windows(horizon: f64) -> f64 {
    if horizon > 0.0 {
        horizon
    } else {
        f64::INFINITY
    }
}

/// The range of log2 c searched, from `(size, request weight)` pairs: from half the size below
/// which 0.1% of the requests fall to four times the size below which 99.9% fall. Below it
/// nearly nothing is admitted, above it c is as good as ∞, which is evaluated on its own.
pub(super) fn search_range(
    mut by_size: Vec<(f64, f64)>,
    min_size: f64,
    max_size: f64,
) -> (f64, f64) {
    by_size.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = by_size.iter().map(|&(_, w)| w).sum();
    let quantile = |q: f64| {
        let mut acc = 0.0;
        for &(size, w) in &by_size {
            acc += w;
            if acc >= q * total {
                return size;
            }
        }
        max_size
    };
    let (small, large) = if total > 0.0 {
        (quantile(0.001), quantile(0.999))
    } else {
        (min_size, max_size)
    };
    let lo = (small.log2() - 1.0).floor().max(0.0);
    let hi = (large.log2() + 2.0).ceil().max(lo + 1.0);
    (lo, hi)
}

/// §4.1's global search for the c maximizing the predicted OHR, over `range` (log2 c), with
/// `evaluate(c, guess)` giving a c's (characteristic time, predicted OHR), the solve started
/// from `guess`: a grid with a step of one octave plus c = ∞, then golden-section refinement
/// within one grid step of the best finite point. Returns `(c, predicted OHR)`; c may be
/// `f64::INFINITY` (admit everything).
pub(super) fn best_c(
    range: (f64, f64),
    evaluate: impl Fn(f64, Option<f64>) -> (f64, f64),
) -> (f64, f64) {
    let (lo, hi) = range;
    let step = 1.0;
    let n = ((hi - lo) / step).ceil() as usize + 1;
    let mut best = (lo, f64::NEG_INFINITY, None);
    let mut guess = None;
    for i in 0..n {
        let lc = lo + i as f64 * step;
        let (t, ohr) = evaluate(lc.exp2(), guess);
        guess = Some(t);
        // Ties go to the larger c: with no difference in predicted hits, admit more.
        if ohr >= best.1 - 1e-12 {
            best = (lc, ohr, Some(t));
        }
    }
    // Golden-section search on [best − step, best + step].
    let guess = best.2;
    let eval = |lc: f64| evaluate(lc.exp2(), guess).1;
    let (mut a, mut b) = (best.0 - step, best.0 + step);
    let phi = 0.5 * (5f64.sqrt() - 1.0);
    let mut x1 = b - phi * (b - a);
    let mut x2 = a + phi * (b - a);
    let (mut f1, mut f2) = (eval(x1), eval(x2));
    for _ in 0..8 {
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
    let finite = if f > best.1 {
        (lc.exp2(), f)
    } else {
        (best.0.exp2(), best.1)
    };
    let admit_all = evaluate(f64::INFINITY, None).1;
    if admit_all >= finite.1 - 1e-12 {
        (f64::INFINITY, admit_all)
    } else {
        finite
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_expm1_is_accurate() {
        let mut x = -700.0;
        while x <= 700.0 {
            for d in [0.0, 1e-300, 1e-12, 1e-7, 3e-3, 0.1234] {
                let y = x + d;
                let (f, e) = (fast_expm1(y), y.exp_m1());
                let rel = if e == 0.0 {
                    f.abs()
                } else {
                    ((f - e) / e).abs()
                };
                assert!(rel < 1e-8, "expm1({y}) = {e}, fast {f}");
            }
            x += 0.37;
        }
        for y in [0.0, 1e-300, -1e-300, 1e-20, -0.34657, 0.34657, 1e3, -1e3] {
            let (f, e) = (fast_expm1(y), y.exp_m1());
            assert!(
                f == e || ((f - e) / e).abs() < 1e-8,
                "expm1({y}) = {e}, fast {f}"
            );
        }
    }

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
            let occ = m.occupancy(&m.admission(c), t);
            assert!(
                (occ - (1 << 20) as f64).abs() <= 1e-3 * (1 << 20) as f64,
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
        assert!(c > 0.0, "c = {c}");
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
