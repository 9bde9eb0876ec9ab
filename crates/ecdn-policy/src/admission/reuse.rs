//! AdaptSize's Markov model driven by observed reuse gaps instead of rates: Theorem 1 for
//! traffic with temporal locality.
//!
//! # Why
//!
//! Theorem 1 ([`super::model`]) takes each object's rate r as steady: requests at exponential
//! gaps with mean 1/r, all through the window. On CDN traffic many objects are requested in a
//! burst and then not again. Counted over a window, a burst of n requests looks like a steady
//! rate n/Δ, so the model believes every such object is live for the whole window and needs
//! cache space all along: the cache seems oversubscribed many times over, the characteristic
//! time T it solves for comes out tiny, and it predicts almost no hits (OHR 0.05 where LRU
//! measures 0.66 on a footprint-generated web trace). The bursts themselves are hits.
//!
//! # The model
//!
//! Theorem 1 is the stationary state of a two-state chain per object, observed at its requests:
//! a request finds the object cached if it was cached after the previous request and the gap
//! since then is at most T (LRU under the characteristic-time approximation); a request that
//! misses admits the object with probability a = e^(−s/c). With q = P(gap ≤ T), a request hits
//! with probability b = q·p, where p = b + (1 − b)·a is the probability that the object is
//! cached right after a request; the fixed point is p = a / (1 − (1 − a)·q). For exponential gaps, q = 1 − e^(−rT) and this is exactly
//! Theorem 1's P_in = a(e^(rT) − 1)/(1 + a(e^(rT) − 1)).
//!
//! This module keeps that chain and replaces the exponential q by each object's **observed**
//! reuse gaps: q_i(T) is the fraction of its requests in the window whose gap since its
//! previous request (in requests, possibly reaching into earlier windows; ∞ for a first
//! request) is at most T. An object stays cached for min(gap, T) after a request, so its time
//! average occupancy is s_i · p_after · Σ min(g, T) / Δ, and equation 1 (Σ occupancy = K)
//! gives T by the same monotone fixed-point solve. The gap after an object's last request is
//! not seen; by stationarity, the window's first requests (gap ∞, occupancy T) stand in for
//! those tails. A burst of n requests is now n − 1 short gaps and one long one: it occupies the
//! cache for its duration plus T, and its requests after the first hit.
//!
//! The finite decision horizon of [`super::model`] carries over: per request the chain
//! contracts by ρ = (1 − a)·q, so over the N = n·H requests an object gets in H windows the
//! average weight of its current state is φ = (1 − ρ^N) / (N(1 − ρ)).
//!
//! # Evaluation
//!
//! q_i(T) is a step function of T, so objects cannot be grouped once for all T. Instead the
//! model is tabulated on a grid of T, two points per octave from 1 request to past the largest
//! finite gap; at each grid point objects of nearly equal (size, q, requests) — four buckets per
//! octave each, like [`super::model`] — are one cell. Occupancy and hits are interpolated
//! linearly in ln T between grid points (and extrapolated exactly beyond the last, where they
//! are linear in T); T is found by bisection over the grid. Objects with a single request in
//! the window — most of them in CDN traffic — are grouped by (size, gap) before tabulating.

use hashbrown::HashMap;

use super::model::{best_c, bucket, fast_exp, horizon_windows, relaxation_weight, search_range};

/// What the model knows about one object: its size, its requests' reuse gaps in the window (in
/// requests; `f64::INFINITY` for a request with no earlier one known) and whether it is cached
/// now (only used with a finite horizon).
#[derive(Clone, Debug, PartialEq)]
pub struct ReuseObject<'a> {
    /// Size in bytes.
    pub size: u64,
    /// One gap per request of the object in the window.
    pub gaps: &'a [f64],
    /// Probability that the object is cached now.
    pub p_in: f64,
}

/// Sums over the objects of one cell at one grid point.
#[derive(Clone, Copy, Debug, Default)]
struct Cell {
    /// Objects.
    objects: f64,
    /// Σ requests.
    n: f64,
    /// Σ requests · p_in.
    n_in: f64,
    /// Σ requests · q.
    nq: f64,
    /// Σ size (for the cell's mean size).
    size: f64,
    /// Σ size · Σ min(g, T).
    occ: f64,
    /// Σ size · Σ min(g, T) · p_in.
    occ_in: f64,
}

/// One grid point: T and its cells.
#[derive(Clone, Debug)]
struct Point {
    t: f64,
    cells: Vec<Cell>,
}

/// AdaptSize's model of an LRU cache of capacity K under e^(−size/c) admission, for requests
/// with the observed reuse gaps (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct ReuseModel {
    points: Vec<Point>,
    capacity: f64,
    /// Window length Δ in requests (the time unit of occupancy).
    window: f64,
    /// All requests, including those of objects larger than the cache.
    requests: f64,
    /// Σ size over objects that fit (if ≤ K, everything fits and T = ∞).
    fit_bytes: f64,
    /// (size, requests) per object that fits, for the search range.
    by_size: Vec<(f64, f64)>,
    min_size: f64,
    max_size: f64,
    horizon: f64,
}

/// Grid points per octave of T.
const PER_OCTAVE: f64 = 2.0;

/// Key of a cell: buckets of size, of 1 − q (q = 1 exactly: `i32::MAX`) and of requests.
type Key = (i32, i32, i32);

/// Single-request objects by (size bucket, gap bucket, cached now): count, Σ size, Σ gap.
type Singles = HashMap<(i32, i32, bool), (f64, f64, f64), foldhash::fast::FixedState>;

fn q_bucket(q: f64) -> i32 {
    if q >= 1.0 {
        i32::MAX
    } else {
        bucket(1.0 - q)
    }
}

/// The largest grid index j ≤ `top` at which the cache admitting everything (a = 1, the most
/// occupancy any c gives) is not yet full: Σ s·min(g, T) / Δ < K at T = 2^(j/2); 0 if none.
fn first_unfilled(
    singles: &Singles,
    multi: &[(f64, Vec<f64>, f64)],
    capacity: f64,
    window: f64,
    top: usize,
) -> usize {
    // Per grid interval (T_{j−1}, T_j]: Σ s·g and Σ s of the requests whose gap falls in it
    // (a gap is never put in an interval below its own, so the estimate errs toward keeping
    // more points); gaps past the top and first requests stay above every T.
    let (mut sg, mut ss) = (vec![0.0; top + 1], vec![0.0; top + 1]);
    let mut total = 0.0;
    let mut add = |g: f64, s: f64| {
        total += s;
        if g.is_finite() {
            let j = (g.max(1.0).log2() * PER_OCTAVE).ceil() as usize;
            if j <= top {
                sg[j] += s * g;
                ss[j] += s;
            }
        }
    };
    for (&(_, gb, _), &(count, size, gap_sum)) in singles {
        add(
            if gb == i32::MAX {
                f64::INFINITY
            } else {
                gap_sum / count
            },
            size,
        );
    }
    for (s, gaps, _) in multi {
        for &g in gaps {
            add(g, *s);
        }
    }
    // Occupancy at T_j: (Σ_{g ≤ T} s·g + T·Σ_{g > T} s) / Δ, walking up the grid.
    let (mut below, mut above) = (0.0, total);
    let mut last_unfilled = 0;
    for j in 0..=top {
        let t = (j as f64 / PER_OCTAVE).exp2();
        below += sg[j];
        above -= ss[j];
        if (below + t * above) / window < capacity {
            last_unfilled = j;
        } else {
            break;
        }
    }
    last_unfilled.min(top.saturating_sub(1))
}

impl ReuseModel {
    /// Builds the model from every object requested in a window of `window` requests.
    pub fn new<'a>(
        objects: impl IntoIterator<Item = ReuseObject<'a>>,
        capacity: u64,
        window: u64,
    ) -> Self {
        let k = capacity as f64;
        let mut requests = 0.0;
        let mut fit_bytes = 0.0;
        let (mut min_size, mut max_size) = (f64::INFINITY, 0.0f64);
        let mut by_size = Vec::new();
        let mut singles: Singles = HashMap::with_hasher(foldhash::fast::FixedState::with_seed(7));
        // Multi-request objects: (size, sorted gaps, p_in).
        let mut multi: Vec<(f64, Vec<f64>, f64)> = Vec::new();
        let mut max_gap: f64 = 1.0;
        for o in objects {
            if o.gaps.is_empty() {
                continue;
            }
            let n = o.gaps.len() as f64;
            requests += n;
            let s = o.size.max(1) as f64;
            if s > k {
                continue;
            }
            fit_bytes += s;
            min_size = min_size.min(s);
            max_size = max_size.max(s);
            by_size.push((s, n));
            for &g in o.gaps {
                if g.is_finite() {
                    max_gap = max_gap.max(g);
                }
            }
            let p_in = o.p_in.clamp(0.0, 1.0);
            if o.gaps.len() == 1 {
                let g = o.gaps[0].max(0.0);
                let gb = if g.is_finite() {
                    bucket(g.max(1.0))
                } else {
                    i32::MAX
                };
                let e = singles
                    .entry((bucket(s), gb, p_in >= 0.5))
                    .or_insert((0.0, 0.0, 0.0));
                e.0 += 1.0;
                e.1 += s;
                e.2 += g;
            } else {
                let mut gaps = o.gaps.to_vec();
                gaps.sort_unstable_by(f64::total_cmp);
                multi.push((s, gaps, p_in));
            }
        }
        // Grid: T = 2^(j/2) up to two points past the largest finite gap, from the last point
        // where even admitting everything leaves the cache unfilled: every c's occupancy is at
        // most that of c = ∞, so its T is not below.
        let top = (max_gap.log2() * PER_OCTAVE).ceil() as usize + 2;
        let bottom = first_unfilled(&singles, &multi, k, window.max(1) as f64, top);
        let ts: Vec<f64> = (bottom..=top)
            .map(|j| (j as f64 / PER_OCTAVE).exp2())
            .collect();
        let mut tables: Vec<HashMap<Key, Cell, foldhash::fast::FixedState>> = ts
            .iter()
            .map(|_| HashMap::with_hasher(foldhash::fast::FixedState::with_seed(9)))
            .collect();
        for (&(sb, gb, cached), &(count, size, gap_sum)) in &singles {
            // A bucket's gaps are within 25%; its mean stands for all of them.
            let g = if gb == i32::MAX {
                f64::INFINITY
            } else {
                gap_sum / count
            };
            let s = size / count;
            let p_in = if cached { 1.0 } else { 0.0 };
            for (j, &t) in ts.iter().enumerate() {
                let q = if g <= t { 1.0 } else { 0.0 };
                let m = g.min(t);
                let c = tables[j].entry((sb, q_bucket(q), bucket(1.0))).or_default();
                c.objects += count;
                c.n += count;
                c.n_in += count * p_in;
                c.nq += count * q;
                c.size += size;
                c.occ += count * s * m;
                c.occ_in += count * s * m * p_in;
            }
        }
        for (s, gaps, p_in) in &multi {
            let n = gaps.len() as f64;
            let (sb, nb) = (bucket(*s), bucket(n));
            // Walk the sorted gaps along the grid: below = gaps ≤ T, their sum.
            let (mut below, mut sum) = (0usize, 0.0);
            for (j, &t) in ts.iter().enumerate() {
                while below < gaps.len() && gaps[below] <= t {
                    sum += gaps[below];
                    below += 1;
                }
                let q = below as f64 / n;
                let m = sum + t * (gaps.len() - below) as f64;
                let c = tables[j].entry((sb, q_bucket(q), nb)).or_default();
                c.objects += 1.0;
                c.n += n;
                c.n_in += n * p_in;
                c.nq += n * q;
                c.size += s;
                c.occ += s * m;
                c.occ_in += s * m * p_in;
            }
        }
        let points = ts
            .into_iter()
            .zip(tables)
            .map(|(t, table)| Point {
                t,
                cells: table.into_values().collect(),
            })
            .collect();
        ReuseModel {
            points,
            capacity: k,
            window: window.max(1) as f64,
            requests,
            fit_bytes,
            by_size,
            min_size: if min_size.is_finite() { min_size } else { 1.0 },
            max_size: max_size.max(1.0),
            horizon: f64::INFINITY,
        }
    }

    /// Sets the decision horizon H in windows; ∞ or ≤ 0 means the stationary model.
    pub fn with_horizon(mut self, horizon: f64) -> Self {
        self.horizon = horizon_windows(horizon);
        self
    }

    /// (occupancy in bytes, expected hits) at grid point `j` for admission parameter `c`.
    fn at_point(&self, j: usize, c: f64) -> (f64, f64) {
        let (mut occ, mut hits) = (0.0, 0.0);
        for cell in &self.points[j].cells {
            let s = cell.size / cell.objects;
            let a = if c.is_infinite() {
                1.0
            } else if c > 0.0 {
                fast_exp(-s / c)
            } else {
                0.0
            };
            let q = cell.nq / cell.n;
            let rho = (1.0 - a) * q;
            // Cached right after a request, in the stationary state.
            let p = if rho < 1.0 { a / (1.0 - rho) } else { 0.0 };
            let (w, w_in) = if self.horizon.is_infinite() {
                (p, 0.0)
            } else {
                // Requests per object over the horizon, and the chain's average memory of
                // its current state over them.
                let big_n = self.horizon * cell.n / cell.objects;
                let y = -big_n * rho.min(1.0).ln();
                let phi = if rho <= 0.0 {
                    1.0 / big_n.max(1.0)
                } else {
                    // (1 − ρ^N)/(N(1 − ρ)) = (1 − e^(−y))/y · y/(N(1 − ρ)).
                    relaxation_weight(y) * y / (big_n * (1.0 - rho)).max(1e-300)
                };
                let phi = phi.clamp(0.0, 1.0);
                (p * (1.0 - phi), phi)
            };
            occ += cell.occ * w + cell.occ_in * w_in;
            hits += q * (cell.n * w + cell.n_in * w_in);
        }
        (occ / self.window, hits)
    }

    /// (characteristic time, predicted OHR) for `c`.
    fn evaluate(&self, c: f64, _guess: Option<f64>) -> (f64, f64) {
        if self.requests <= 0.0 || self.points.is_empty() {
            return (f64::INFINITY, 0.0);
        }
        let ohr = |h: f64| (h / self.requests).clamp(0.0, 1.0);
        let last = self.points.len() - 1;
        if self.fit_bytes <= self.capacity {
            return (f64::INFINITY, ohr(self.at_point(last, c).1));
        }
        let k = self.capacity;
        let (occ0, hits0) = self.at_point(0, c);
        if occ0 >= k {
            return (self.points[0].t, ohr(hits0));
        }
        let (occ_l, hits_l) = self.at_point(last, c);
        if occ_l < k {
            // Beyond every finite gap occupancy grows linearly in T: extrapolate from the last
            // two points (both past the largest gap); hits no longer change.
            let (occ_p, _) = self.at_point(last - 1, c);
            let (t_p, t_l) = (self.points[last - 1].t, self.points[last].t);
            let slope = (occ_l - occ_p) / (t_l - t_p);
            let t = if slope > 0.0 {
                t_l + (k - occ_l) / slope
            } else {
                f64::INFINITY
            };
            return (t, ohr(hits_l));
        }
        // Bisection for the grid interval [lo, lo + 1] where occupancy crosses K.
        let (mut lo, mut hi) = (0usize, last);
        let (mut lo_v, mut hi_v) = ((occ0, hits0), (occ_l, hits_l));
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            let v = self.at_point(mid, c);
            if v.0 < k {
                (lo, lo_v) = (mid, v);
            } else {
                (hi, hi_v) = (mid, v);
            }
        }
        let f = if hi_v.0 > lo_v.0 {
            (k - lo_v.0) / (hi_v.0 - lo_v.0)
        } else {
            0.0
        };
        let (t_lo, t_hi) = (self.points[lo].t, self.points[hi].t);
        let t = (t_lo.ln() + f * (t_hi.ln() - t_lo.ln())).exp();
        (t, ohr(lo_v.1 + f * (hi_v.1 - lo_v.1)))
    }

    /// The characteristic time T (in requests) solving equation 1 for `c`.
    pub fn characteristic_time(&self, c: f64) -> f64 {
        self.evaluate(c, None).0
    }

    /// Predicted object hit ratio for admission parameter `c` (bytes).
    pub fn predicted_ohr(&self, c: f64) -> f64 {
        self.evaluate(c, None).1
    }

    /// Predicted OHR at each c in `cs`.
    pub fn curve(&self, cs: &[f64]) -> Vec<(f64, f64)> {
        cs.iter().map(|&c| (c, self.predicted_ohr(c))).collect()
    }

    /// The range of log2 c searched (see [`super::model::Model::search_range`]).
    pub fn search_range(&self) -> (f64, f64) {
        search_range(self.by_size.clone(), self.min_size, self.max_size)
    }

    /// §4.1's global search for the c with the best predicted OHR; `(c, OHR)`, c may be ∞.
    pub fn best_c(&self) -> (f64, f64) {
        best_c(self.search_range(), |c, g| self.evaluate(c, g))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::model::Model;
    use ecdn_trace::gen::Rng;

    /// Poisson requests: the reuse model must agree with Theorem 1 on its own ground.
    #[test]
    fn matches_theorem_1_on_independent_requests() {
        let mut rng = Rng::new(3);
        let window = 200_000.0;
        // 3,000 objects, rates Zipf-like, sizes 1–64 KiB; gaps drawn exponential.
        let objs: Vec<(f64, u64)> = (1..=3000u64)
            .map(|i| (20.0 / (i as f64).powf(0.8), 1024 + (i * 7919 % 65_536)))
            .collect();
        let total_rate: f64 = objs.iter().map(|o| o.0).sum();
        let scale = window / total_rate;
        let gaps: Vec<Vec<f64>> = objs
            .iter()
            .map(|&(r, _)| {
                let per_window = r * scale;
                let n = (per_window.floor() as usize).max(1);
                (0..n).map(|_| rng.exp() / (per_window / window)).collect()
            })
            .collect();
        let reuse = ReuseModel::new(
            objs.iter().zip(&gaps).map(|(&(_, size), g)| ReuseObject {
                size,
                gaps: g,
                p_in: 0.0,
            }),
            16 << 20,
            window as u64,
        );
        let rates = Model::new(
            objs.iter()
                .zip(&gaps)
                .map(|(&(_, size), g)| (g.len() as f64, size)),
            16 << 20,
        );
        for c in [4096.0, 16384.0, 65536.0, f64::INFINITY] {
            let (a, b) = (reuse.predicted_ohr(c), rates.predicted_ohr(c));
            assert!((a - b).abs() < 0.03, "c = {c}: reuse {a:.4}, rates {b:.4}");
        }
    }

    /// Bursts: each object requested 10 times in quick succession, then never. LRU with
    /// admit-all hits 9 of 10 whenever a burst fits; the rate model sees 10 000 objects live
    /// all window and predicts almost nothing.
    #[test]
    fn bursts_hit() {
        let gaps: Vec<f64> = std::iter::once(f64::INFINITY)
            .chain(std::iter::repeat_n(5.0, 9))
            .collect();
        let objs: Vec<ReuseObject> = (0..10_000)
            .map(|_| ReuseObject {
                size: 10_000,
                gaps: &gaps,
                p_in: 0.0,
            })
            .collect();
        // 100 objects of cache: bursts (≈ 50 requests long) fit easily.
        let m = ReuseModel::new(objs.iter().cloned(), 1_000_000, 100_000);
        let ohr = m.predicted_ohr(f64::INFINITY);
        assert!((ohr - 0.9).abs() < 0.005, "{ohr}");
        let rates = Model::new((0..10_000).map(|_| (10.0, 10_000u64)), 1_000_000);
        assert!(rates.predicted_ohr(f64::INFINITY) < 0.1);
        // Everything fits: T = ∞.
        let big = ReuseModel::new(objs.iter().cloned(), 1 << 40, 100_000);
        assert!(big.characteristic_time(1e6).is_infinite());
    }

    #[test]
    fn solves_with_a_horizon_and_mixed_gaps() {
        let mut rng = Rng::new(5);
        let gaps: Vec<Vec<f64>> = (0..5000)
            .map(|i| {
                let n = 1 + i % 7;
                (0..n)
                    .map(|_| {
                        if rng.chance(0.2) {
                            f64::INFINITY
                        } else {
                            1.0 + rng.below(50_000) as f64
                        }
                    })
                    .collect()
            })
            .collect();
        let m = ReuseModel::new(
            gaps.iter().enumerate().map(|(i, g)| ReuseObject {
                size: 1000 + (i as u64 * 37) % 20_000,
                gaps: g,
                p_in: (i % 3 == 0) as u8 as f64,
            }),
            8 << 20,
            100_000,
        )
        .with_horizon(2.0);
        for c in [1e3, 1e4, 1e5, f64::INFINITY] {
            let t = m.characteristic_time(c);
            assert!(t.is_finite() && t > 1.0, "c = {c}: T = {t}");
            let ohr = m.predicted_ohr(c);
            assert!((0.0..=1.0).contains(&ohr));
        }
        let (c, ohr) = m.best_c();
        assert!(c > 0.0 && (0.0..=1.0).contains(&ohr));
    }
}
