//! The storage cloud's task delays (TOFEC §III-C): a task that moves a chunk of `B` bytes takes
//! `Δ(B) + Exp(μ(B))`, a floor `Δ(B) = Δ̄ + Δ̃·B` plus an exponential tail of mean (and standard
//! deviation) `1/μ(B) = Ψ̄ + Ψ̃·B`, both linear in the chunk size (Fig. 6).
//!
//! [`DelayModel::PAPER_S3`] holds S3's parameters as the paper's own numbers pin them down (its
//! Fig. 6 is a plot whose values the text does not give); [`fit`] estimates a model from the
//! task delays the proxy measures, as §V-A does: per chunk size, the worst 10% of delays left
//! out, then least-squares lines through the means and standard deviations.

use serde::{Deserialize, Serialize};

/// One megabyte (10^6 bytes, the paper's unit).
pub const MB: f64 = 1e6;

/// `Δ(B) = delta0 + delta1·B`, `1/μ(B) = psi0 + psi1·B` (seconds, and seconds per byte).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct DelayModel {
    /// `Δ̄`: the floor of a task's delay at chunk size 0 (s).
    pub delta0: f64,
    /// `Δ̃`: its growth per byte (s/B).
    pub delta1: f64,
    /// `Ψ̄`: the tail's mean at chunk size 0 (s).
    pub psi0: f64,
    /// `Ψ̃`: its growth per byte (s/B).
    pub psi1: f64,
}

impl DelayModel {
    /// Amazon S3 ("North California", 2013), reading 3 MB files with `L = 16` connections, as
    /// the paper's numbers determine it:
    ///
    /// * the plain `(1, 1)` read at light load: mean 205 ms and median 156 ms (§V-B). With one
    ///   task of 3 MB, mean `Δ + 1/μ` and median `Δ + ln 2/μ` give `1/μ(3 MB) = 160 ms` and
    ///   `Δ(3 MB) = 45 ms`;
    /// * the adaptive code with `k = 6` supports "less than 30%" of the `(1, 1)` capacity
    ///   (§V-B): with equation (3), `U(6, 6) = 6Δ(0.5 MB) + 6/μ(0.5 MB) = U(1, 1)/0.3`, so the
    ///   mean task delay is `95.6 ms + 36.5 ms/MB · B`;
    /// * TOFEC's mean delay at light load, 84 ms (§V-B), with the `(12, 6)` code it uses there:
    ///   `Δ(0.5 MB) + ln 2/μ(0.5 MB) = 84 ms`.
    ///
    /// Hence `Δ(B) = 10.9 ms + 11.4 ms/MB · B` and `1/μ(B) = 84.7 ms + 25.1 ms/MB · B`. Their
    /// `(1, 1)` capacity with 16 connections, `L/U(1, 1) = 16 / 205 ms = 78` requests per
    /// second, is what §V-D calls "slightly" below its 80 requests per second.
    pub const PAPER_S3: DelayModel = DelayModel {
        delta0: 0.0109,
        delta1: 0.0114 / MB,
        psi0: 0.0847,
        psi1: 0.0251 / MB,
    };

    /// `Δ(B)` (s).
    pub fn floor(&self, bytes: f64) -> f64 {
        self.delta0 + self.delta1 * bytes
    }

    /// `1/μ(B)` (s): the tail's mean.
    pub fn tail(&self, bytes: f64) -> f64 {
        self.psi0 + self.psi1 * bytes
    }

    /// A task's mean delay for a chunk of `bytes`.
    pub fn mean(&self, bytes: f64) -> f64 {
        self.floor(bytes) + self.tail(bytes)
    }

    /// A task's delay for a chunk of `bytes` at quantile `u` ∈ [0, 1).
    pub fn quantile(&self, bytes: f64, u: f64) -> f64 {
        self.floor(bytes) - self.tail(bytes) * (1.0 - u.clamp(0.0, 1.0 - 1e-12)).ln()
    }

    /// A task's delay drawn with the uniform variate `u` ∈ [0, 1).
    pub fn sample(&self, bytes: f64, u: f64) -> f64 {
        self.quantile(bytes, u)
    }

    /// Equation (2): the expected service delay of a request for `size` bytes with an `(n, k)`
    /// code whose `n` tasks start together: the floor of a chunk of `size/k`, plus the `k`-th
    /// smallest of `n` exponential tails, `(1/μ)·Σ_{j=n−k+1..n} 1/j`.
    pub fn service_delay(&self, size: f64, n: usize, k: usize) -> f64 {
        let b = size / k.max(1) as f64;
        let harmonic: f64 = (n.saturating_sub(k) + 1..=n).map(|j| 1.0 / j as f64).sum();
        self.floor(b) + self.tail(b) * harmonic
    }

    /// Equation (3): the connection time a request uses, `n·Δ(size/k) + k/μ(size/k)`.
    pub fn usage(&self, size: f64, n: usize, k: usize) -> f64 {
        let b = size / k.max(1) as f64;
        n as f64 * self.floor(b) + k as f64 * self.tail(b)
    }

    /// Equation (4): requests per second `connections` sustain with the static `(n, k)` code.
    pub fn capacity(&self, size: f64, n: usize, k: usize, connections: usize) -> f64 {
        connections as f64 / self.usage(size, n, k)
    }

    /// Whether every parameter is a finite non-negative number, and the tail's is positive (a
    /// model the thresholds can be computed from).
    pub fn is_valid(&self) -> bool {
        let all = [self.delta0, self.delta1, self.psi0, self.psi1];
        all.iter().all(|v| v.is_finite() && *v >= 0.0) && self.psi0 > 0.0
    }
}

/// A task's measured delay: the bytes it moved and how long it took; `censored` when it was
/// cancelled (its request completed without it) after `delay` seconds, so its delay is only
/// known to be longer.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskSample {
    pub bytes: u64,
    pub delay: f64,
    pub censored: bool,
    /// Its request was slow as a whole: its `k`-th task to finish was later than independent
    /// tasks would be but rarely ([`crate::tail::Excess::slow_together`]) — a slowdown its
    /// tasks shared (a slow partition), not a task's own tail. Left out of the fit.
    #[serde(default)]
    pub slow_together: bool,
}

/// The least number of samples of one chunk size [`fit`] uses.
pub const MIN_SAMPLES: usize = 20;

/// Per chunk size: (bytes, mean, standard deviation, samples) of the delays [`fit`] kept.
pub type SizeStats = (f64, f64, f64, usize);

/// Fits a [`DelayModel`] to measured task delays as §V-A does: for each chunk size with at
/// least [`MIN_SAMPLES`] samples, the worst `trim` (0.1 in the paper) of its delays are left
/// out, and the floor and tail of the rest estimated; then `Δ̄, Δ̃` and `Ψ̄, Ψ̃` are the
/// least-squares lines through the floors and the tails over the chunk sizes.
///
/// **Cancelled tasks.** With `n > k` a request completes with its `k` fastest tasks and
/// cancels the rest, so the completed ones alone are the fast end of the distribution (their
/// mean is far below a task's). A cancelled task is therefore counted as a delay known to be
/// longer than the time it ran (a censored sample): the tail's mean is estimated by the
/// exponential's maximum likelihood with censoring, the time all kept tasks spent beyond the
/// floor over the number that completed; the floor is the smallest delay kept (a low quantile
/// would do as well; with hundreds of samples the difference is below a millisecond).
///
/// `None` with fewer than two chunk sizes to draw lines through (TOFEC varies the chunk size,
/// so a running proxy sees several).
pub fn fit(samples: &[TaskSample], trim: f64) -> Option<(DelayModel, Vec<SizeStats>)> {
    let points = size_points(samples, trim);
    if points.len() < 2 {
        return None;
    }
    Some(lines_through(points))
}

/// [`fit`], or with one chunk size only, `prior` scaled to it: its floor and tail lines
/// multiplied so that they pass through that size's measured floor and tail (a proxy that
/// uses one code sees one chunk size, and without this would keep its prior for ever; the
/// prior's slopes say how delays grow with the size). `None` without a chunk size of enough
/// samples.
pub fn fit_around(samples: &[TaskSample], trim: f64, prior: &DelayModel) -> Option<DelayModel> {
    let points = size_points(samples, trim);
    match points[..] {
        [] => None,
        [(bytes, floor, tail, _)] => {
            let f = floor / prior.floor(bytes).max(1e-9);
            let t = tail / prior.tail(bytes).max(1e-9);
            let m = DelayModel {
                delta0: prior.delta0 * f,
                delta1: prior.delta1 * f,
                psi0: (prior.psi0 * t).max(1e-6),
                psi1: prior.psi1 * t,
            };
            m.is_valid().then_some(m)
        }
        _ => Some(lines_through(points).0),
    }
}

/// Per chunk size with enough samples: (bytes, floor, tail mean, samples kept), as [`fit`]
/// estimates them.
fn size_points(samples: &[TaskSample], trim: f64) -> Vec<(f64, f64, f64, usize)> {
    let mut by_size: std::collections::BTreeMap<u64, Vec<TaskSample>> = Default::default();
    for s in samples
        .iter()
        .filter(|s| s.delay.is_finite() && s.delay >= 0.0 && !s.slow_together)
    {
        by_size.entry(s.bytes).or_default().push(*s);
    }
    let mut points = Vec::new();
    for (bytes, mut v) in by_size {
        if v.len() < MIN_SAMPLES {
            continue;
        }
        v.sort_by(|a, b| a.delay.total_cmp(&b.delay));
        let keep = ((v.len() as f64) * (1.0 - trim.clamp(0.0, 0.9))).ceil() as usize;
        v.truncate(keep.max(1));
        let completed = v.iter().filter(|s| !s.censored).count();
        let Some(floor) = v
            .iter()
            .filter(|s| !s.censored)
            .map(|s| s.delay)
            .reduce(f64::min)
        else {
            continue;
        };
        if completed < MIN_SAMPLES / 2 {
            continue;
        }
        let excess: f64 = v.iter().map(|s| (s.delay - floor).max(0.0)).sum();
        let tail = excess / completed as f64;
        points.push((bytes as f64, floor, tail, v.len()));
    }
    points
}

/// The least-squares floor and tail lines through per-size points (at least two).
fn lines_through(points: Vec<(f64, f64, f64, usize)>) -> (DelayModel, Vec<SizeStats>) {
    let (d0, d1) = least_squares(points.iter().map(|p| (p.0, p.1)));
    let (p0, p1) = least_squares(points.iter().map(|p| (p.0, p.2)));
    // A line may cross below zero at size 0 from noise: the model keeps its parameters
    // non-negative (the paper's extrapolations are all positive, observation (4)).
    let model = DelayModel {
        delta0: d0.max(0.0),
        delta1: d1.max(0.0),
        psi0: p0.max(1e-6),
        psi1: p1.max(0.0),
    };
    let stats = points
        .into_iter()
        .map(|(b, floor, tail, n)| (b, floor + tail, tail, n))
        .collect();
    (model, stats)
}

/// The least-squares line `y = a + b·x` through the points: `(a, b)`.
fn least_squares(points: impl Iterator<Item = (f64, f64)> + Clone) -> (f64, f64) {
    let n = points.clone().count() as f64;
    let (sx, sy) = points
        .clone()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let (sxy, sxx) = points.fold((0.0, 0.0), |(a, b), (x, y)| {
        (a + (x - mx) * (y - my), b + (x - mx) * (x - mx))
    });
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    (my - slope * mx, slope)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ecdn_trace::Rng;

    #[test]
    fn the_paper_s_numbers_come_back_out() {
        let m = DelayModel::PAPER_S3;
        let j = 3.0 * MB;
        // (1, 1) at light load: mean 205 ms, median 156 ms.
        assert!((m.mean(j) - 0.205).abs() < 0.001, "{}", m.mean(j));
        assert!((m.quantile(j, 0.5) - 0.156).abs() < 0.001);
        // Capacity with 16 connections: 78 requests per second.
        assert!((m.capacity(j, 1, 1, 16) - 78.0).abs() < 0.5);
        // The k = 6 code's capacity is 30% of it; (12, 6) at light load: 84 ms.
        let ratio = m.capacity(j, 6, 6, 16) / m.capacity(j, 1, 1, 16);
        assert!((ratio - 0.30).abs() < 0.01, "{ratio}");
        let light = m.floor(j / 6.0) + m.tail(j / 6.0) * 2f64.ln();
        assert!((light - 0.084).abs() < 0.001, "{light}");
        // The harmonic sum of equation (2) for (1, 1) is the mean.
        assert!((m.service_delay(j, 1, 1) - m.mean(j)).abs() < 1e-12);
        assert!(m.service_delay(j, 12, 6) < m.service_delay(j, 6, 6));
    }

    /// Delays drawn from a known model, with requests that cancel their slowest tasks.
    fn draw(m: &DelayModel, sizes: &[u64], per_size: usize, n: usize, k: usize) -> Vec<TaskSample> {
        let mut rng = Rng::new(7);
        let mut out = Vec::new();
        for &b in sizes {
            for _ in 0..per_size / n {
                let mut d: Vec<f64> = (0..n).map(|_| m.sample(b as f64, rng.f64())).collect();
                d.sort_by(f64::total_cmp);
                let kth = d[k - 1];
                for (i, &x) in d.iter().enumerate() {
                    let censored = i >= k;
                    out.push(TaskSample {
                        bytes: b,
                        delay: if censored { kth } else { x },
                        censored,
                        slow_together: false,
                    });
                }
            }
        }
        out
    }

    #[test]
    fn fit_recovers_a_model_through_cancellations() {
        let m = DelayModel::PAPER_S3;
        let sizes = [500_000, 1_000_000, 1_500_000, 3_000_000];
        // Every task completes, nothing trimmed: the model comes back.
        let (f, stats) = fit(&draw(&m, &sizes, 4000, 1, 1), 0.0).unwrap();
        assert_eq!(stats.len(), 4);
        for b in sizes {
            let (want, got) = (m.mean(b as f64), f.mean(b as f64));
            assert!((got / want - 1.0).abs() < 0.06, "{b}: {got} vs {want}");
        }
        // Half the tasks cancelled (n = 2k): still the model, where the completed tasks
        // alone would give a far lower mean.
        let half = draw(&m, &sizes, 4000, 4, 2);
        let (f, _) = fit(&half, 0.0).unwrap();
        for b in sizes {
            let (want, got) = (m.mean(b as f64), f.mean(b as f64));
            assert!((got / want - 1.0).abs() < 0.08, "{b}: {got} vs {want}");
        }
        let done: Vec<f64> = half
            .iter()
            .filter(|s| !s.censored && s.bytes == 3_000_000)
            .map(|s| s.delay)
            .collect();
        let naive = done.iter().sum::<f64>() / done.len() as f64;
        assert!(naive < 0.8 * m.mean(3e6), "{naive}");
        // The paper's trim of the worst 10% shortens the tail (an exponential has no outliers
        // to remove), and the floor stays.
        let (t, _) = fit(&draw(&m, &sizes, 4000, 1, 1), 0.1).unwrap();
        assert!(t.tail(3e6) < 0.85 * m.tail(3e6));
        assert!((t.floor(3e6) - m.floor(3e6)).abs() < 0.005);
        // One chunk size, or too few samples: no lines.
        assert!(fit(&draw(&m, &sizes[..1], 4000, 1, 1), 0.1).is_none());
        assert!(fit(&draw(&m, &sizes, 15, 1, 1), 0.1).is_none());
        assert!(fit(&[], 0.1).is_none());
    }

    #[test]
    fn one_chunk_size_scales_the_prior() {
        let prior = DelayModel::PAPER_S3;
        let truth = DelayModel {
            delta0: prior.delta0 * 2.0,
            delta1: prior.delta1 * 2.0,
            psi0: prior.psi0 / 2.0,
            psi1: prior.psi1 / 2.0,
        };
        let mut rng = Rng::new(9);
        let samples: Vec<TaskSample> = (0..4_000)
            .map(|_| TaskSample {
                bytes: 1_000_000,
                delay: truth.sample(1e6, rng.f64()),
                censored: false,
                slow_together: false,
            })
            .collect();
        assert!(fit(&samples, 0.0).is_none(), "one size: no lines");
        let m = fit_around(&samples, 0.0, &prior).unwrap();
        for b in [250e3, 1e6, 3e6] {
            let (got, want) = (m.mean(b), truth.mean(b));
            assert!((got - want).abs() < 0.05 * want, "{b}: {got} vs {want}");
        }
        assert_eq!(fit_around(&samples[..5], 0.0, &prior), None);
    }
}
