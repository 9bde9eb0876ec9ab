//! How each request's code `(n, k)` is chosen (TOFEC §IV and §V-A): TOFEC's backlog thresholds,
//! the Greedy heuristic, and static codes.
//!
//! **The optimal static code (Theorem 1).** For one class of requests (a kind of operation and
//! a file size `J`), with `L` connections and the delay model of [`crate::model`], the code
//! minimising the expected delay depends on the load only through `λ̄ = λ·U`, the connection
//! time per second the requests ask for: the optimal redundancy `r = n/k` solves equation (10),
//! `(L/(L − λ̄))² − 1 = L·π(r)`, where `π(r)` is the right-hand side of equation (17) with
//! `k = Ω(r)` (equation (8)); `π` falls strictly with `r`, so [`optimal_code`] finds `r` by
//! bisection. Both `n` and `k` fall as the load rises.
//!
//! **TOFEC (Algorithm 1).** The expected request-queue length `Q = λ̄²/(L(L − λ̄))` (equation
//! (11)) rises with the load, so the optimal `n` and `k` are decreasing functions of `Q`
//! (Corollary 1). For each code length `n` (and dimension `k`) that the coded file allows,
//! [`Thresholds`] holds the backlog `Q_n` at which it is optimal, and thresholds half way
//! between neighbours: `H_1 = ∞`, `H_n = (Q_n + Q_{n−1})/2`. At each arrival the proxy folds the
//! request queue's length `q` into `q̄ ← α·q̄ + (1 − α)·q` (α = 0.99) and serves the request with
//! the `k` and `n` whose intervals `[H_{v+1}, H_v)` hold `q̄`, `n` then kept within
//! `k ≤ n ≤ r_max·k` (Algorithm 1, line 6).
//!
//! Which `k` are possible depends on the coded file: with `K` strips a chunk is `K/k` whole
//! strips, so `k` divides `K` ([`crate::strips`]). With the paper's `k_max = 6` and `K = 6` that
//! is `k ∈ {1, 2, 3, 6}`; a file coded with `K = 60` strips allows every `k ≤ 6`. Thresholds are
//! computed over the possible values only.
//!
//! **Greedy (§V-A)** takes the connections idle at the request's arrival, `l`: `k = min(k_max,
//! l)` and `n = min(r_max·k, l)`, or `(1, 1)` when none is idle. **Static** codes are fixed.

use serde::Serialize;

use crate::model::DelayModel;

/// One request class's optimal continuous code at load `λ̄` (connection-seconds per second, `0 <
/// λ̄ < L`): `(n, k)` of Theorem 1, or `None` when the model is not valid or the load is
/// outside `(0, L)`.
pub fn optimal_code(
    m: &DelayModel,
    size: f64,
    connections: usize,
    load: f64,
) -> Option<(f64, f64)> {
    let l = connections as f64;
    let in_range = load > 0.0 && load < l && size > 0.0;
    if !m.is_valid() || !in_range {
        return None;
    }
    let lhs = (l / (l - load)).powi(2) - 1.0;
    // L·π(r) falls from +∞ (r → 1) towards 0 (r → ∞): bisection on r in (1, hi).
    let pi = |r: f64| {
        let k = omega(m, size, r);
        l * (m.psi0 * k + m.psi1 * size) / (k * r * (r - 1.0) * (m.delta0 * k + m.delta1 * size))
    };
    let (mut lo, mut hi) = (1.0 + 1e-12, 2.0);
    while pi(hi) > lhs {
        hi *= 2.0;
        if hi > 1e9 {
            return None;
        }
    }
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if pi(mid) > lhs {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let r = 0.5 * (lo + hi);
    let k = omega(m, size, r);
    Some((k * r, k))
}

/// Equation (8): the optimal `k` for redundancy `r`.
fn omega(m: &DelayModel, size: f64, r: f64) -> f64 {
    let gamma =
        size * r * (r - 1.0) / (m.delta0 * r + m.psi0) * (m.delta1 + m.psi1 * (r / (r - 1.0)).ln());
    let b = m.delta0 * gamma - m.psi1 * size;
    (b + (b * b + 4.0 * m.psi0 * m.delta1 * size * gamma).sqrt()) / (2.0 * m.psi0)
}

/// Equation (11): the expected request-queue length at load `λ̄`.
pub fn queue_length(connections: usize, load: f64) -> f64 {
    let l = connections as f64;
    load * load / (l * (l - load))
}

/// How the thresholds map a load `λ̄` to the request-queue length it causes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub enum QueueModel {
    /// The paper's equation (11): one server of rate `L/Ū` (M/M/1); the default. The proxy's
    /// request queue is not M/M/L's: a request leaves it only when a connection is idle and
    /// the task queue empty, so a queue forms already at light load when codes are long, and
    /// M/M/L, whose queue at light load is nearly nil, reads it as heavy load and shortens
    /// the codes too early. Measured under four delay sources at 15%, 50% and 85% of the
    /// (1, 1) capacity (issue 40, BENCHMARKS.md), M/M/1's thresholds were within 5% of the
    /// best strategy in 7 of 12 rows (mean ratio 1.13), M/M/L's in 6 (mean 1.17, and 1.98 at
    /// light load under the measured S3 delays).
    #[default]
    Mm1,
    /// `L` servers of rate `1/Ū` each (M/M/L, Erlang C): at the same load its queue is shorter
    /// (at 90% of 16 connections, 5.3 requests against M/M/1's 8.1). It was the default from
    /// issue 13's runs at 90% load under TOFEC's own delay model (3% below plain reads where
    /// M/M/1 was 7–8% above); across delay sources it is the worse of the two.
    Mml,
}

impl QueueModel {
    /// The expected number of requests waiting at load `λ̄` (connection-seconds per second).
    pub fn length(self, connections: usize, load: f64) -> f64 {
        match self {
            QueueModel::Mm1 => queue_length(connections, load),
            QueueModel::Mml => {
                let rho = load / connections as f64;
                // Erlang B by its recursion, then Erlang C.
                let mut b = 1.0;
                for k in 1..=connections {
                    b = load * b / (k as f64 + load * b);
                }
                let wait = b / (1.0 - rho * (1.0 - b));
                wait * rho / (1.0 - rho)
            }
        }
    }

    /// `mm1` or `mml`.
    pub fn parse(s: &str) -> Result<QueueModel, String> {
        match s {
            "mm1" => Ok(QueueModel::Mm1),
            "mml" => Ok(QueueModel::Mml),
            _ => Err(format!(
                "{s:?}: the queue model is mm1 (the paper's) or mml"
            )),
        }
    }
}

/// The backlog thresholds of one request class: the codes from the longest down, each with
/// the backlog below which it is used (see the module documentation).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Thresholds {
    /// `((n, k), H)`, `H` falling: the code of smoothed backlog `q̄` is the last whose `H` is
    /// above `q̄`. The first `H` is ∞.
    pub codes: Vec<((usize, usize), f64)>,
}

impl Thresholds {
    /// The thresholds for files of `size` bytes with `connections` connections, `ks` the
    /// possible dimensions (ascending), `r_max` the largest redundancy.
    pub fn new(
        m: &DelayModel,
        size: f64,
        connections: usize,
        ks: &[usize],
        r_max: usize,
        queue: QueueModel,
    ) -> Option<Thresholds> {
        let sized = size > 0.0 && size.is_finite();
        if ks.is_empty() || ks[0] == 0 || r_max == 0 || !m.is_valid() || !sized {
            return None;
        }
        Some(Thresholds {
            codes: merged(m, size, connections, ks, r_max, queue)?,
        })
    }

    /// Algorithm 1, lines 4 to 6: the code `(n, k)` for smoothed backlog `q̄`.
    pub fn code(&self, q: f64) -> (usize, usize) {
        interval_of(&self.codes, q).unwrap_or((1, 1))
    }
}

/// In a list of values with falling thresholds, the value whose interval `[H_next, H)` holds
/// `q`: the last whose threshold is above it.
fn interval_of<T: Copy>(list: &[(T, f64)], q: f64) -> Option<T> {
    list.iter().rev().find(|&&(_, h)| q < h).map(|&(v, _)| v)
}

/// The thresholds of `k` and of `n`, merged into one list of codes (`n` clamped as line 6
/// says).
fn merged(
    m: &DelayModel,
    size: f64,
    connections: usize,
    ks: &[usize],
    r_max: usize,
    queue: QueueModel,
) -> Option<Vec<((usize, usize), f64)>> {
    let k_of = |load: f64| optimal_code(m, size, connections, load).map(|c| c.1);
    let n_of = |load: f64| optimal_code(m, size, connections, load).map(|c| c.0);
    let ns: Vec<usize> = (1..=r_max * ks[ks.len() - 1]).collect();
    let hk = thresholds(ks, connections, queue, k_of)?;
    let hn = thresholds(&ns, connections, queue, n_of)?;
    let pick = |t: &[(usize, f64)], q: f64| interval_of(t, q).unwrap_or(t[0].0);
    let code = |q: f64| {
        let k = pick(&hk, q);
        (pick(&hn, q).clamp(k, r_max * k), k)
    };
    // Every threshold where k or n changes, from the top.
    let mut hs: Vec<f64> = hk
        .iter()
        .chain(&hn)
        .map(|p| p.1)
        .filter(|h| *h > 0.0)
        .collect();
    hs.sort_by(|a, b| b.total_cmp(a));
    hs.dedup();
    let mut out: Vec<((usize, usize), f64)> = Vec::new();
    for h in hs {
        // The code just below h (h = ∞: the code of an unbounded backlog).
        let c = if h.is_finite() {
            code(h * (1.0 - 1e-9))
        } else {
            code(f64::MAX)
        };
        match out.last_mut() {
            Some(last) if last.0 == c => {}
            _ => out.push((c, h)),
        }
    }
    Some(out)
}

/// For ascending `values`, each one's threshold: `Q_v` is the backlog at which `f` (falling
/// with the load) equals `v`; `H` of the smallest is ∞, of the others the mean of theirs and
/// the next smaller one's `Q`; a value `f` never reaches (above its value at no load) gets 0,
/// and is never chosen.
fn thresholds(
    values: &[usize],
    connections: usize,
    queue: QueueModel,
    f: impl Fn(f64) -> Option<f64>,
) -> Option<Vec<(usize, f64)>> {
    let l = connections as f64;
    let (lightest, heaviest) = (l * 1e-9, l * (1.0 - 1e-9));
    let q_of = |v: f64| -> Option<f64> {
        if f(lightest)? < v {
            return Some(-1.0); // never optimal
        }
        if f(heaviest)? > v {
            return Some(f64::INFINITY);
        }
        let (mut lo, mut hi) = (lightest, heaviest);
        for _ in 0..60 {
            let mid = 0.5 * (lo + hi);
            if f(mid)? > v {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Some(queue.length(connections, 0.5 * (lo + hi)))
    };
    let qs: Vec<f64> = values
        .iter()
        .map(|&v| q_of(v as f64))
        .collect::<Option<_>>()?;
    Some(
        values
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let h = if i == 0 {
                    f64::INFINITY
                } else if qs[i] < 0.0 {
                    0.0
                } else {
                    0.5 * (qs[i] + qs[i - 1])
                };
                (v, h)
            })
            .collect(),
    )
}

/// How a request's code is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Strategy {
    /// Algorithm 1: from the smoothed request-queue length.
    Tofec,
    /// Theorem 1's choice with the delays' measured tail ([`crate::tail`]): `tofec-tail`.
    TofecTail,
    /// From the connections idle at arrival.
    Greedy,
    /// Always `(n, k)`.
    Static { n: usize, k: usize },
}

impl Strategy {
    /// `tofec`, `greedy`, or `static-N-K`.
    pub fn name(&self) -> String {
        match self {
            Strategy::Tofec => "tofec".into(),
            Strategy::TofecTail => "tofec-tail".into(),
            Strategy::Greedy => "greedy".into(),
            Strategy::Static { n, k } => format!("static-{n}-{k}"),
        }
    }

    /// Parses [`Strategy::name`]'s forms.
    pub fn parse(s: &str) -> Result<Strategy, String> {
        match s {
            "tofec" => Ok(Strategy::Tofec),
            "tofec-tail" => Ok(Strategy::TofecTail),
            "greedy" => Ok(Strategy::Greedy),
            _ => {
                let bad = || {
                    format!(
                        "{s:?}: a strategy is tofec, tofec-tail, greedy or static-N-K (N ≥ K ≥ 1)"
                    )
                };
                let rest = s.strip_prefix("static-").ok_or_else(bad)?;
                let (n, k) = rest.split_once('-').ok_or_else(bad)?;
                let (n, k) = (n.parse().map_err(|_| bad())?, k.parse().map_err(|_| bad())?);
                if k == 0 || n < k {
                    return Err(bad());
                }
                Ok(Strategy::Static { n, k })
            }
        }
    }
}

/// Greedy's code with `idle` idle connections (§V-A), `k` the largest possible dimension not
/// above `min(k_max, idle)`.
pub fn greedy(idle: usize, ks: &[usize], r_max: usize) -> (usize, usize) {
    if idle == 0 {
        return (1, 1);
    }
    let k = ks.iter().copied().filter(|&k| k <= idle).max().unwrap_or(1);
    (idle.min(r_max * k).max(k), k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::MB;

    const L: usize = 16;

    #[test]
    fn the_optimal_code_shrinks_as_the_load_grows() {
        let m = DelayModel::PAPER_S3;
        let mut last = (f64::INFINITY, f64::INFINITY);
        for i in 1..100 {
            let load = L as f64 * i as f64 / 100.0;
            let (n, k) = optimal_code(&m, 3.0 * MB, L, load).unwrap();
            assert!(n >= k && k > 0.0, "{load}: {n} {k}");
            assert!(n < last.0 && k < last.1, "{load}");
            last = (n, k);
        }
        // Near capacity: no chunking, no redundancy; at light load, more than the paper's
        // k_max = 6 and n_max = 12 (TOFEC then stays at its limits).
        let (n, k) = optimal_code(&m, 3.0 * MB, L, 0.99 * L as f64).unwrap();
        assert!(n < 1.5 && k < 1.0, "{n} {k}");
        let (n, k) = optimal_code(&m, 3.0 * MB, L, 0.001 * L as f64).unwrap();
        assert!(n > 12.0 && k > 6.0, "{n} {k}");
        assert!(optimal_code(&m, 3.0 * MB, L, 0.0).is_none());
        assert!(optimal_code(&m, 3.0 * MB, L, L as f64).is_none());
    }

    #[test]
    fn the_optimal_code_minimises_the_model_s_delay() {
        // Theorem 1 against a search: the total delay of the approximations (equations (2)
        // with the logarithm, (5) and (7)) over continuous k and r, at arrival rates from
        // light load to near capacity; the code Theorem 1 gives at the best point's λ̄ is
        // that point.
        let m = DelayModel::PAPER_S3;
        let (j, l) = (3.0 * MB, L as f64);
        let usage = |k: f64, r: f64| m.delta0 * k * r + m.delta1 * j * r + m.psi0 * k + m.psi1 * j;
        let total = |lambda: f64, k: f64, r: f64| {
            let u = usage(k, r);
            if lambda * u >= l {
                return f64::INFINITY;
            }
            let service = m.floor(j / k) + m.tail(j / k) * (r / (r - 1.0)).ln();
            lambda * u * u / (l * (l - lambda * u)) + service
        };
        for lambda in [1.0, 10.0, 30.0, 70.0] {
            let mut best = (f64::INFINITY, 0.0, 0.0);
            let mut k = 0.1;
            while k < 40.0 {
                let mut r = 1.005;
                while r < 40.0 {
                    let t = total(lambda, k, r);
                    if t < best.0 {
                        best = (t, k, r);
                    }
                    r *= 1.005;
                }
                k *= 1.005;
            }
            let (_, k, r) = best;
            let (tn, tk) = optimal_code(&m, j, L, lambda * usage(k, r)).unwrap();
            assert!((tk / k - 1.0).abs() < 0.03, "λ {lambda}: k {tk} vs {k}");
            assert!(
                (tn / (k * r) - 1.0).abs() < 0.03,
                "λ {lambda}: n {tn} vs {}",
                k * r
            );
        }
    }

    #[test]
    fn thresholds_fall_and_pick_codes_by_backlog() {
        let m = DelayModel::PAPER_S3;
        let t = Thresholds::new(&m, 3.0 * MB, L, &[1, 2, 3, 6], 2, QueueModel::Mm1).unwrap();
        assert_eq!(t.codes[0], ((1, 1), f64::INFINITY));
        for w in t.codes.windows(2) {
            assert!(w[0].1 > w[1].1, "{w:?}");
        }
        // No backlog: the longest code; a long one: (1, 1); in between, n within [k, 2k],
        // never growing with the backlog.
        assert_eq!(t.code(0.0), (12, 6));
        assert_eq!(t.code(1e6), (1, 1));
        let mut last = (12, 6);
        for i in 0..2000 {
            let (n, k) = t.code(i as f64 * 0.005);
            assert!(k <= n && n <= 2 * k && [1, 2, 3, 6].contains(&k));
            assert!(n <= last.0 && k <= last.1, "{:?} {:?}", (n, k), last);
            last = (n, k);
        }
        // The codes of the paper's Fig. 10 as the load rises, from Theorem 1 with S3's model:
        // (12, 6) at no backlog down to (1, 1).
        let codes: Vec<(usize, usize)> = t.codes.iter().map(|c| c.0).collect();
        assert_eq!(codes, [(1, 1), (2, 1), (4, 2), (6, 3), (12, 6)]);
    }

    #[test]
    fn the_m_m_l_queue_is_shorter_and_its_thresholds_lower() {
        // One connection: M/M/L is M/M/1.
        for load in [0.1, 0.5, 0.9] {
            let (a, b) = (
                QueueModel::Mm1.length(1, load),
                QueueModel::Mml.length(1, load),
            );
            assert!((a - b).abs() < 1e-12, "{load}");
        }
        // 16: shorter at every load, and still rising with it.
        let mut last = 0.0;
        for i in 1..16 {
            let load = i as f64;
            let (a, b) = (
                QueueModel::Mm1.length(L, load),
                QueueModel::Mml.length(L, load),
            );
            assert!(b < a && b > last, "{load}: {b} {a}");
            last = b;
        }
        let q = QueueModel::Mml.length(L, 0.9 * L as f64);
        assert!((q - 5.32).abs() < 0.01, "{q}"); // Erlang C by its closed form: 0.5913 · 0.9 / 0.1
                                                 // The thresholds are lower: a given backlog means a higher load.
        let m = DelayModel::PAPER_S3;
        let t1 = Thresholds::new(&m, 3.0 * MB, L, &[1, 2, 3, 6], 2, QueueModel::Mm1).unwrap();
        let tl = Thresholds::new(&m, 3.0 * MB, L, &[1, 2, 3, 6], 2, QueueModel::Mml).unwrap();
        assert_eq!(t1.codes.len(), tl.codes.len());
        for (a, b) in t1.codes.iter().zip(&tl.codes).skip(1) {
            assert_eq!(a.0, b.0);
            assert!(b.1 < a.1, "{a:?} {b:?}");
        }
        assert_eq!(QueueModel::parse("mml"), Ok(QueueModel::Mml));
        assert!(QueueModel::parse("mmc").is_err());
    }

    #[test]
    fn strategies_parse_and_greedy_follows_idle_connections() {
        for s in ["tofec", "greedy", "static-1-1", "static-12-6"] {
            assert_eq!(Strategy::parse(s).unwrap().name(), s);
        }
        for bad in [
            "",
            "static",
            "static-1-2",
            "static-0-0",
            "static-a-1",
            "tofecc",
        ] {
            assert!(Strategy::parse(bad).is_err(), "{bad}");
        }
        let ks = [1, 2, 3, 6];
        assert_eq!(greedy(0, &ks, 2), (1, 1));
        assert_eq!(greedy(1, &ks, 2), (1, 1));
        assert_eq!(greedy(5, &ks, 2), (5, 3));
        assert_eq!(greedy(16, &ks, 2), (12, 6));
        assert_eq!(greedy(4, &[1, 2, 3, 4, 5, 6], 2), (4, 4));
    }
}
