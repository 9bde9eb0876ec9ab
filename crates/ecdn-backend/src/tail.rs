//! TOFEC with the measured tail (beyond the paper; strategy `tofec-tail`): the same choice of
//! code as Theorem 1 — the code with the least expected delay at the load the requests bring —
//! but with the tail of a task's delay taken from the delays the proxy measured rather than
//! assumed exponential.
//!
//! **Why.** The paper's model (§III-C) is a floor `Δ(B)` plus an exponential of mean `Ψ(B)`,
//! and its thresholds (equations (8)–(11)) hold for that shape only. Measured against stores
//! of other shapes (BENCHMARKS.md, issue 40), TOFEC chose `(12, 6)` under a Pareto excess of
//! the same mean, where `(6, 3)` was 16% faster (six of twelve heavy-tailed tasks wait longer
//! than three of six), and under S3's measured delays, whose whole tail lies beyond the fit's
//! trimmed 10%, it misjudged what a second chunk buys.
//!
//! **The excess.** Each task's delay `x` for a chunk of `B` bytes becomes a standardised excess
//! `z = (x − Δ(B)) / Ψ(B)`, with the floor and scale lines of the fitted model ([`crate::model::fit`]):
//! the lines carry how delays grow with the chunk size, `z` the shape, pooled over every chunk
//! size the proxy has used (so a code whose chunk size it has not used yet is judged by the
//! shape measured on the others). A cancelled task (censored: its delay is only known to be
//! longer) counts as in Kaplan–Meier's estimator; the mass beyond the largest observed excess
//! is put one mean past it. Under the paper's model `z` is an exponential of mean 1, and every
//! number below is the paper's.
//!
//! **Slow together.** The excess's order statistics assume a request's tasks independent.
//! When a slowdown is shared by a request's tasks — a slow partition of the store, where
//! every chunk of an object is slow at once (the emulator's `slow-periods`) — its tasks are
//! not `n` draws but one slowdown `n` times, and pooling them as independent tails tells the
//! table that a long code escapes them. Measured (BENCHMARKS.md, issue 64): at 15% load under
//! slow periods, once the excess was measured so, `tofec-tail` gave `(12, 6)` to 30% of the
//! reads, which took 378 ms on average (static `(6, 3)`: 190). So a request whose `k`-th
//! task to finish is later than the `k`-th of `n` independent tasks would be but with
//! probability [`TOGETHER`] ([`Excess::slow_together`]) was slow as a whole, and its tasks are
//! left out of the excess and of the model's fit (whose lines would otherwise charge the
//! slowdown to the chunk sizes of the codes that happened to be used during it) — when at
//! least [`SHARED`] of the samples are so flagged ([`shared_slowdowns`]).
//! A slowdown shared by a request multiplies every code's delay and connection time alike, so
//! it does not change which code is best at a measured load: the excess must measure what a
//! request's tasks do apart from it. A code of `n = 1` cannot tell the two apart; its tasks
//! always count.
//!
//! **A code's delay and cost** ([`CodeTable`]). With `n` tasks started together and the request
//! done at the `k`-th completion, the service delay is `Δ(B) + Ψ(B)·E[Z(k:n)]` (equation (2)
//! with `Σ 1/j` replaced by the `k`-th order statistic of `n` draws of the measured excess) and
//! the connection time `n·Δ(B) + Ψ(B)·(Σ_{i≤k} E[Z(i:n)] + (n − k)·E[Z(k:n)])` (equation (3):
//! the `n − k` tasks cancelled at the `k`-th completion ran as long as it).
//!
//! **The choice** ([`CodeTable::best`]): each code's expected delay is its service delay plus
//! the wait in the request queue ([`wait`]). The load `ρ` a code would bring is measured, not
//! computed from the arrival rate and the model:
//! the connections' busy fraction over the last [`RATE_WINDOW`] arrivals, times the code's
//! connection time over the mean of those the window's requests were given — so a model whose
//! scale is still wrong (the prior, before the delays are fitted) misjudges no load, as
//! TOFEC's backlog does not. The code with the least sum is used; when every code would
//! overload the connections, the one with the least connection time.
//!
//! **The wait: `L/n` servers.** Equation (11) waits as in one server of rate `L/U` (M/M/1):
//! `ρ/(1 − ρ)·U/L`, which is a read's wait when its `n` tasks take all `L` connections. A read
//! of `n < L` tasks takes `n` of them for `U/n`, so `L/n` reads are served at once: the queue
//! is an M/M/c with `c = L/n` servers of mean service `U/n`, and its wait is Sakasegawa's
//! approximation `ρ^√(2(c+1)) / (1 − ρ) · U / (n·c·ρ)` (the mean queue over the arrival
//! rate), continuous in `c` and equation (11) itself at `c = 1` (`n ≥ L`). Measured waits sit
//! near it (BENCHMARKS.md, issue 64): at 15% of the `(1, 1)` capacity `(6, 3)` waits about 3 ms
//! (its measured mean less its service by the model and the proxy's own time), where M/M/1
//! says 15 and `c = 16/6` says 7; at 50% `(4, 2)` waits about 150 ms, where `c = 4` says 127
//! and M/M/1 149. With equation (11)'s wait `tofec-tail` gave `(4, 2)` to up to 58% of the
//! reads at 15% load (104.6 ms against `(6, 3)`'s 101.1 in that round), and backed off to
//! `(2, 1)` in the slow periods' episodes.
//!
//! **Two windows, the larger load.** A hundred arrivals' busy fraction is a noisy measure: at
//! 85% of the `(1, 1)` capacity it dips below 65% now and then, where `(2, 1)` looks better,
//! and the reads given `(2, 1)` in those dips (4–20% of them) load connections that had no
//! room: measured 7–15% slower than `(1, 1)` alone (BENCHMARKS.md, issue 64). The wait is
//! convex in `ρ` and an overload costs far more than a missed parallel read, so the load is
//! also measured over the last [`SLOW_WINDOW`] arrivals and each code is judged at the larger
//! of the two: a rise in load is seen within a hundred arrivals, a fall only when it lasts.

use crate::model::{DelayModel, TaskSample};

/// Arrivals over which the load is measured (TOFEC's α = 0.99 weighs about as many).
pub const RATE_WINDOW: usize = 100;

/// Arrivals of the slow window: the load must stay low this long before it is believed
/// (see the module documentation).
pub const SLOW_WINDOW: usize = 10 * RATE_WINDOW;

/// The load measured over the last arrivals ([`CodeTable::best`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Load {
    /// The connections' busy fraction, in [0, 1].
    pub busy: f64,
    /// The mean connection time (s, by the model) of the codes the arrivals were given.
    pub usage: f64,
}

/// A request is slow together when independent tasks would have been as late as its `k`-th
/// with at most this probability (see the module documentation).
pub const TOGETHER: f64 = 1e-3;

/// The share of the samples slow together below which none is taken as such
/// ([`shared_slowdowns`]).
pub const SHARED: f64 = 0.01;

/// The samples as the excess and the fit are to see them: when fewer than [`SHARED`] of them
/// are slow together, the store shows no shared slowdowns — independent tails flag about
/// [`TOGETHER`] of the requests, and leaving those out would lighten the measured tail, which
/// flags more (measured under S3's delays: `(7, 6)` for 89% of the reads, 5% slower than
/// `(6, 3)`) — and the flags are cleared.
pub fn shared_slowdowns(mut samples: Vec<TaskSample>) -> Vec<TaskSample> {
    let flagged = samples.iter().filter(|s| s.slow_together).count();
    if (flagged as f64) < SHARED * samples.len() as f64 {
        for s in &mut samples {
            s.slow_together = false;
        }
    }
    samples
}

/// Completed tasks the measured excess needs before it replaces the exponential.
pub const MIN_COMPLETED: usize = 200;

/// Support points the excess keeps (a quantile's worth of mass each, at its mean).
const POINTS: usize = 256;

/// The distribution of a task's standardised excess `z` (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub enum Excess {
    /// The paper's: exponential of mean 1.
    Exponential,
    /// Measured: `(z, probability)`, `z` ascending, probabilities summing to 1.
    Measured(Vec<(f64, f64)>),
}

impl Excess {
    /// The excess of `samples` under `model`: `None` with fewer than [`MIN_COMPLETED`]
    /// completed tasks.
    pub fn measure(samples: &[TaskSample], model: &DelayModel) -> Option<Excess> {
        let mut zs: Vec<(f64, bool)> = samples
            .iter()
            .filter(|s| s.delay.is_finite() && s.delay >= 0.0 && !s.slow_together)
            .map(|s| {
                let b = s.bytes as f64;
                let z = ((s.delay - model.floor(b)) / model.tail(b)).max(0.0);
                (z, s.censored)
            })
            .filter(|(z, _)| z.is_finite())
            .collect();
        if zs.iter().filter(|(_, c)| !c).count() < MIN_COMPLETED {
            return None;
        }
        // Kaplan–Meier: at each completed excess the survival falls by 1/(still at risk); a
        // censored one only leaves the risk set. Ties: completions before censorings.
        zs.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut at_risk = zs.len() as f64;
        let mut survival = 1.0;
        let mut mass: Vec<(f64, f64)> = Vec::new();
        for &(z, censored) in &zs {
            if !censored {
                let p = survival / at_risk;
                survival -= p;
                mass.push((z, p));
            }
            at_risk -= 1.0;
        }
        let last = zs.last().map_or(0.0, |z| z.0);
        if survival > 1e-12 {
            mass.push((last + 1.0, survival));
        }
        Some(Excess::Measured(compress(&mass)))
    }

    /// `P(Z > z)`.
    pub fn survival(&self, z: f64) -> f64 {
        match self {
            Excess::Exponential => (-z.max(0.0)).exp(),
            Excess::Measured(points) => points.iter().filter(|p| p.0 > z).map(|p| p.1).sum(),
        }
    }

    /// Whether a request of `n` tasks of `bytes` each, whose `k`-th task to finish took
    /// `kth` seconds, was slow together (see the module documentation): `n ≥ 2`, and
    /// `P(Z(k:n) > z)` — fewer than `k` of `n` independent tasks within the excess `z` of
    /// `kth` under `model` — below [`TOGETHER`].
    pub fn slow_together(
        &self,
        model: &DelayModel,
        bytes: u64,
        kth: f64,
        n: usize,
        k: usize,
    ) -> bool {
        if n < 2 || k == 0 || k > n || !kth.is_finite() {
            return false;
        }
        let b = bytes as f64;
        let z = (kth - model.floor(b)) / model.tail(b);
        if !z.is_finite() {
            return false;
        }
        let within = (1.0 - self.survival(z)).clamp(0.0, 1.0);
        1.0 - at_least_of(n, within)[k] < TOGETHER
    }

    /// `E[Z(i:n)]` for `i = 1..=n`: the expected order statistics of `n` independent draws.
    pub fn order_statistics(&self, n: usize) -> Vec<f64> {
        match self {
            // Rényi: the i-th smallest of n exponentials of mean 1 is Σ_{j=n−i+1..n} 1/j.
            Excess::Exponential => (1..=n)
                .map(|i| (n - i + 1..=n).map(|j| 1.0 / j as f64).sum())
                .collect(),
            Excess::Measured(points) => {
                // P(Z(i:n) ≤ z) = P(at least i of n draws ≤ z) = Σ_{j ≥ i} C(n, j) F^j (1 − F)^(n − j).
                let mut out = vec![0.0; n];
                let mut before = vec![0.0; n + 1]; // P(at least i ≤ previous point), i = 0..=n
                let mut cdf = 0.0;
                for &(z, p) in points {
                    cdf = (cdf + p).min(1.0);
                    let at_least = at_least_of(n, cdf);
                    for i in 1..=n {
                        out[i - 1] += z * (at_least[i] - before[i]);
                    }
                    before = at_least;
                }
                out
            }
        }
    }
}

/// `P(Binomial(n, f) ≥ i)` for `i = 0..=n`.
fn at_least_of(n: usize, f: f64) -> Vec<f64> {
    // The binomial's probabilities by the recursion C(n, j+1)/C(n, j) = (n − j)/(j + 1).
    let mut pmf = vec![0.0; n + 1];
    if f >= 1.0 {
        pmf[n] = 1.0;
    } else {
        pmf[0] = (1.0 - f).powi(n as i32);
        let odds = f / (1.0 - f);
        for j in 0..n {
            pmf[j + 1] = pmf[j] * odds * (n - j) as f64 / (j + 1) as f64;
        }
    }
    let mut out = vec![0.0; n + 1];
    let mut tail = 0.0;
    for i in (0..=n).rev() {
        tail += pmf[i];
        out[i] = tail.min(1.0);
    }
    out
}

/// At most [`POINTS`] points of about equal mass, each at the mean of what it merges.
fn compress(mass: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let total: f64 = mass.iter().map(|m| m.1).sum();
    if mass.len() <= POINTS || total <= 0.0 {
        return mass.to_vec();
    }
    let step = total / POINTS as f64;
    let mut out = Vec::with_capacity(POINTS + 1);
    let (mut p, mut zp) = (0.0, 0.0);
    for &(z, q) in mass {
        p += q;
        zp += z * q;
        if p >= step {
            out.push((zp / p, p));
            (p, zp) = (0.0, 0.0);
        }
    }
    if p > 0.0 {
        out.push((zp / p, p));
    }
    out
}

/// One code's expected service delay and connection time (s).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CodeCost {
    pub n: usize,
    pub k: usize,
    pub delay: f64,
    pub usage: f64,
}

/// Every code a request class allows, costed (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct CodeTable {
    pub codes: Vec<CodeCost>,
    connections: f64,
}

impl CodeTable {
    /// The codes for files of `size` bytes: every `k` of `ks` and `n` from `k` to the least of
    /// `r_max·k` and `chunks(k)` (the chunks the file has at that `k`).
    pub fn new(
        model: &DelayModel,
        excess: &Excess,
        size: f64,
        connections: usize,
        ks: &[usize],
        r_max: usize,
        chunks: impl Fn(usize) -> usize,
    ) -> CodeTable {
        let most = ks
            .iter()
            .map(|&k| (r_max * k).min(chunks(k)))
            .max()
            .unwrap_or(1);
        let stats: Vec<Vec<f64>> = (0..=most).map(|n| excess.order_statistics(n)).collect();
        let mut codes = Vec::new();
        for &k in ks.iter().filter(|&&k| k >= 1) {
            let b = size / k as f64;
            for n in k..=(r_max * k).min(chunks(k)).max(k) {
                let Some(s) = stats.get(n) else { continue };
                let kth = s[k - 1];
                let before: f64 = s[..k].iter().sum();
                codes.push(CodeCost {
                    n,
                    k,
                    delay: model.floor(b) + model.tail(b) * kth,
                    usage: n as f64 * model.floor(b)
                        + model.tail(b) * (before + (n - k) as f64 * kth),
                });
            }
        }
        CodeTable {
            codes,
            connections: connections.max(1) as f64,
        }
    }

    /// The code with the least expected delay at the largest of `loads` (each measured over a
    /// window of arrivals; see the module documentation); `(1, 1)` at no cost if the table is
    /// empty.
    pub fn best(&self, loads: &[Load]) -> CodeCost {
        let l = self.connections;
        let expected = |c: &CodeCost| {
            let rho = loads
                .iter()
                .filter(|load| load.usage > 0.0)
                .map(|load| load.busy.clamp(0.0, 1.0) * c.usage / load.usage)
                .fold(0.0, f64::max);
            (rho < 1.0).then(|| c.delay + wait(rho, c.usage, c.n, l))
        };
        let by_delay = self
            .codes
            .iter()
            .filter_map(|c| expected(c).map(|d| (c, d)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(c, _)| c);
        let least_usage = || self.codes.iter().min_by(|a, b| a.usage.total_cmp(&b.usage));
        by_delay.or_else(least_usage).copied().unwrap_or(CodeCost {
            n: 1,
            k: 1,
            delay: 0.0,
            usage: 0.0,
        })
    }
}

/// The mean wait (s) in the request queue of a read whose code takes `n` connections for a
/// total of `usage` connection-seconds, at load `rho` of `connections` (see the module
/// documentation): an M/M/c queue of `c = connections/n` servers (at least one) and mean
/// service `usage/n`, by Sakasegawa's approximation.
pub fn wait(rho: f64, usage: f64, n: usize, connections: f64) -> f64 {
    if rho <= 0.0 {
        return 0.0;
    }
    let n = n.max(1) as f64;
    let c = (connections / n).max(1.0);
    let service = usage / n;
    let queue = rho.powf((2.0 * (c + 1.0)).sqrt()) / (1.0 - rho);
    // Little: the mean queue over the arrival rate, c·ρ/service.
    queue * service / (c * rho)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::MB;
    use ecdn_trace::Rng;

    fn samples(m: &DelayModel, draw: impl Fn(f64) -> f64, n: usize) -> Vec<TaskSample> {
        let mut rng = Rng::new(7);
        let mut out = Vec::new();
        for i in 0..n {
            let bytes = [250_000u64, 500_000, 1_000_000, 3_000_000][i % 4];
            let b = bytes as f64;
            let delay = m.floor(b) + m.tail(b) * draw(rng.f64());
            out.push(TaskSample {
                bytes,
                delay,
                censored: false,
                slow_together: false,
            });
        }
        out
    }

    /// The codes of a 3 MB file of (12, 6) strips under S3's model, 16 connections.
    fn paper_table(excess: &Excess) -> CodeTable {
        let m = DelayModel::PAPER_S3;
        CodeTable::new(&m, excess, 3.0 * MB, 16, &[1, 2, 3, 6], 2, |k| 2 * k)
    }

    #[test]
    fn the_exponential_gives_the_paper_s_equations() {
        let m = DelayModel::PAPER_S3;
        let t = paper_table(&Excess::Exponential);
        for c in &t.codes {
            let d = m.service_delay(3.0 * MB, c.n, c.k);
            let u = m.usage(3.0 * MB, c.n, c.k);
            assert!((c.delay - d).abs() < 1e-12, "{c:?}: {d}");
            assert!((c.usage - u).abs() < 1e-12, "{c:?}: {u}");
        }
        // At no load the longest code; with the connections always busy though the requests
        // were given the cheapest code, that one (every code overloads them).
        let best = |busy, usage| {
            let c = t.best(&[Load { busy, usage }]);
            (c.n, c.k)
        };
        assert_eq!(best(0.0, 0.0), (12, 6));
        assert_eq!(best(1.0, m.usage(3.0 * MB, 1, 1)), (1, 1));
        let longest = m.usage(3.0 * MB, 12, 6);
        // The load a code brings scales with its connection time: half busy with (12, 6)
        // makes (1, 1) a fraction as busy, so a shorter code than at no load is chosen.
        let (n, k) = best(0.5, longest);
        assert!(k < 6 && n >= k, "({n}, {k})");
    }

    #[test]
    fn a_request_slow_as_a_whole_is_told_from_independent_tails_and_left_out_of_the_excess() {
        let m = DelayModel::PAPER_S3;
        let e = Excess::Exponential;
        let (b, n, k) = (1_000_000u64, 6, 3);
        let mut rng = Rng::new(11);
        // The k-th of n tasks of the model, each `slow` times as long when the request is slowed.
        let mut kth = |slow: f64| {
            let mut d: Vec<f64> = (0..n)
                .map(|_| slow * (m.floor(b as f64) + m.tail(b as f64) * rng.exp()))
                .collect();
            d.sort_by(f64::total_cmp);
            d[k - 1]
        };
        let trials = 20_000;
        let flagged = |kth: &mut dyn FnMut(f64) -> f64, slow| {
            (0..trials)
                .filter(|_| e.slow_together(&m, b, kth(slow), n, k))
                .count() as f64
                / trials as f64
        };
        let independent = flagged(&mut kth, 1.0);
        let slowed = flagged(&mut kth, 4.0);
        assert!(independent < 2.0 * TOGETHER, "{independent}");
        assert!(slowed > 0.5, "{slowed}");
        // One task alone cannot tell a shared slowdown from its own tail.
        assert!(!e.slow_together(&m, b, 100.0, 1, 1));
        assert!(e.slow_together(&m, b, 100.0, 2, 1));
        // The excess and the fit leave the slowed requests' tasks out.
        let plain = samples(&m, |u| -(1.0 - u).ln(), 4_000);
        let mut with = plain.clone();
        with.extend(plain.iter().take(1_000).map(|s| TaskSample {
            delay: 4.0 * s.delay,
            slow_together: true,
            ..*s
        }));
        assert_eq!(Excess::measure(&with, &m), Excess::measure(&plain, &m));
        assert_eq!(
            crate::model::fit(&with, 0.1),
            crate::model::fit(&plain, 0.1)
        );
        // Flags as rare as independent tails give are cleared; a share of them stays.
        assert_eq!(shared_slowdowns(with.clone()), with);
        let mut rare = plain.clone();
        rare[0].slow_together = true;
        assert_eq!(shared_slowdowns(rare), plain);
    }

    #[test]
    fn the_wait_is_equation_11_when_a_read_takes_every_connection_and_less_when_it_does_not() {
        let m = DelayModel::PAPER_S3;
        let (u1, u63, u126) = (
            m.usage(3.0 * MB, 1, 1),
            m.usage(3.0 * MB, 6, 3),
            m.usage(3.0 * MB, 12, 6),
        );
        for rho in [0.1, 0.5, 0.9] {
            // n ≥ L: one server of rate L/U, equation (11).
            let mm1 = rho / (1.0 - rho) * u126 / 12.0;
            assert!((wait(rho, u126, 12, 12.0) - mm1).abs() < 1e-12 * mm1.max(1.0));
            assert!((wait(rho, u126, 24, 12.0) - rho / (1.0 - rho) * u126 / 24.0).abs() < 1e-12);
            // Sixteen connections for reads of one task: far less at a light load.
            assert!(wait(rho, u1, 1, 16.0) < rho / (1.0 - rho) * u1 / 16.0);
        }
        // M/M/2 exactly: Lq = 2ρ³/(1 − ρ²), so at ρ = 0.5 the wait is ρ²/(1 − ρ²)·S; the
        // approximation is within 10% there.
        let s = 0.1;
        let exact = 0.25 / 0.75 * s;
        let approx = wait(0.5, 2.0 * s, 2, 4.0);
        assert!(
            (approx / exact - 1.0).abs() < 0.1,
            "{approx} against {exact}"
        );
        // The waits measured (module documentation): (6, 3) at 15% of (1, 1)'s capacity a few
        // ms, not M/M/1's 15; (4, 2) at 50% over a hundred.
        let w = wait(0.15 * u63 / u1, u63, 6, 16.0);
        assert!(w > 0.002 && w < 0.010, "{w}");
        let u42 = m.usage(3.0 * MB, 4, 2);
        assert!(wait(0.5 * u42 / u1, u42, 4, 16.0) > 0.1);
        assert_eq!(wait(0.0, u1, 1, 16.0), 0.0);
    }

    #[test]
    fn a_dip_in_the_recent_load_is_not_believed_while_the_slow_window_says_busy() {
        let m = DelayModel::PAPER_S3;
        let t = paper_table(&Excess::Exponential);
        let one = m.usage(3.0 * MB, 1, 1);
        let at = |busy| Load { busy, usage: one };
        // 85% busy with every read given (1, 1): (1, 1). A hundred arrivals at 40% alone: a
        // longer code; the same dip while the slow window still measures 85%: (1, 1).
        let code = |loads: &[Load]| {
            let c = t.best(loads);
            (c.n, c.k)
        };
        assert_eq!(code(&[at(0.85)]), (1, 1));
        assert_ne!(code(&[at(0.4)]), (1, 1));
        assert_eq!(code(&[at(0.4), at(0.85)]), (1, 1));
        // The larger of the two decides whichever window it is.
        assert_eq!(code(&[at(0.85), at(0.4)]), (1, 1));
        assert_eq!(code(&[at(0.4), at(0.4)]), code(&[at(0.4)]));
    }

    #[test]
    fn a_measured_exponential_is_the_exponential() {
        let m = DelayModel::PAPER_S3;
        let s = samples(&m, |u| -(1.0 - u).ln(), 20_000);
        let e = Excess::measure(&s, &m).unwrap();
        for n in [1, 2, 6, 12] {
            let (got, want) = (
                e.order_statistics(n),
                Excess::Exponential.order_statistics(n),
            );
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (g - w).abs() < 0.06 * w.max(0.2),
                    "n {n}: {got:?} vs {want:?}"
                );
            }
        }
    }

    #[test]
    fn a_heavy_tail_of_the_same_mean_has_its_mass_in_the_last_draws() {
        // A Pareto (Lomax) excess of shape 1.5 and mean 1, the bench's heavy-tail source: most
        // tasks finish sooner than the exponential's, a few far later.
        let m = DelayModel::PAPER_S3;
        let pareto = |u: f64| 0.5 * ((1.0 - u).powf(-1.0 / 1.5) - 1.0);
        let s = samples(&m, pareto, 40_000);
        let e = Excess::measure(&s, &m).unwrap();
        let (z, exp) = (
            e.order_statistics(12),
            Excess::Exponential.order_statistics(12),
        );
        assert!(z[..6].iter().zip(&exp).all(|(a, b)| a < b), "{z:?}");
        assert!(z[11] > exp[11], "{z:?}");
        // So the costed codes differ from the paper's.
        assert_ne!(
            paper_table(&e).codes,
            paper_table(&Excess::Exponential).codes
        );
    }

    #[test]
    fn censored_tasks_push_the_tail_out() {
        let m = DelayModel::PAPER_S3;
        let mut s = samples(&m, |u| -(1.0 - u).ln(), 4_000);
        let plain = Excess::measure(&s, &m).unwrap().order_statistics(1)[0];
        // A tenth of the tasks cancelled late: known only to be slower than 3 means.
        for t in s.iter_mut().step_by(10) {
            let b = t.bytes as f64;
            t.delay = m.floor(b) + 3.0 * m.tail(b);
            t.censored = true;
        }
        let with = Excess::measure(&s, &m).unwrap().order_statistics(1)[0];
        assert!(with > plain * 1.1, "{with} vs {plain}");
        // Too few completed tasks: no measured excess.
        assert_eq!(Excess::measure(&s[..100], &m), None);
    }

    #[test]
    fn order_statistics_are_ordered_and_average_to_the_mean() {
        let m = DelayModel::PAPER_S3;
        let s = samples(&m, |u| u * 2.0, 5_000); // uniform on [0, 2): mean 1
        let e = Excess::measure(&s, &m).unwrap();
        for n in 1..=12 {
            let z = e.order_statistics(n);
            assert!(z.windows(2).all(|w| w[0] <= w[1] + 1e-12), "{z:?}");
            let mean = z.iter().sum::<f64>() / n as f64;
            assert!((mean - 1.0).abs() < 0.03, "n {n}: mean {mean}");
        }
    }
}
