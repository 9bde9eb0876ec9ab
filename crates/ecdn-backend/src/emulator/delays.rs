//! Where the emulator's delays come from: TOFEC's own model, or a store that TOFEC did not
//! design.
//!
//! TOFEC fits and optimises for `Δ(B) + Exp(μ(B))` (§III-C). A storage cloud that draws
//! every task's delay from that model makes the comparison with other strategies partly
//! circular, so the emulator has other sources, each chosen by name ([`DelaySource::parse`]):
//!
//! * `model` — the model itself, S3's parameters ([`DelayModel::PAPER_S3`]);
//! * `empirical:FILE` — measured delays: per request size, quantiles of the delay, from a file
//!   ([`Empirical`]; `benches/data/s3-get-latency.txt` holds a public measurement of S3);
//! * `heavy-tail[:pareto:ALPHA | :lognormal:SIGMA]` — the model's floor `Δ(B)` plus an excess
//!   with the model's mean `1/μ(B)` but a heavy tail: Pareto of shape `ALPHA` (1.5 by default:
//!   a finite mean, an infinite variance) or lognormal of log-deviation `SIGMA`;
//! * `slow-periods[:keys|:connections]` — the model, with slow periods: episodes that arrive
//!   as a Poisson process (one per [`SlowPeriods::every`] on average), each lasting
//!   [`SlowPeriods::length`], during which every request of a quarter of the key space (a slow
//!   partition: every strip of an object is slow together), or of a quarter of the
//!   connections, takes [`SlowPeriods::factor`] times as long.
//!
//! Every source is drawn with one uniform variate per request, so a seed gives the same
//! delays to every strategy that asks the same sizes in the same order.

use std::path::Path;
use std::sync::Arc;

use ecdn_trace::Rng;

use crate::model::DelayModel;

/// The distribution of a task's delay (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub enum DelaySource {
    /// TOFEC's model: `Δ(B) + Exp(μ(B))`.
    Model(DelayModel),
    /// Quantiles measured per size.
    Empirical(Arc<Empirical>),
    /// `Δ(B)` plus a heavy-tailed excess whose mean is the model's `1/μ(B)`.
    HeavyTail { model: DelayModel, tail: Tail },
    /// A source whose delays grow during slow periods.
    SlowPeriods {
        base: Box<DelaySource>,
        periods: SlowPeriods,
    },
}

/// The shape of [`DelaySource::HeavyTail`]'s excess.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tail {
    /// Pareto of shape `alpha` (> 1, so that the mean exists).
    Pareto { alpha: f64 },
    /// Lognormal whose logarithm has deviation `sigma`.
    LogNormal { sigma: f64 },
}

/// What a slow period slows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlowScope {
    /// A range of the key space: every request for those objects.
    Keys,
    /// Some connections: every request they carry.
    Connections,
}

/// Slow periods: episodes that arrive as a Poisson process.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SlowPeriods {
    /// Mean time between episodes' starts (s).
    pub every: f64,
    /// How long an episode lasts (s).
    pub length: f64,
    /// How much longer a slowed request takes.
    pub factor: f64,
    /// The share of keys (or connections) an episode slows.
    pub share: f64,
    pub scope: SlowScope,
}

impl SlowPeriods {
    /// One episode every 5 s on average, 2 s long, a quarter of the key space 4× slower.
    pub const DEFAULT: SlowPeriods = SlowPeriods {
        every: 5.0,
        length: 2.0,
        factor: 4.0,
        share: 0.25,
        scope: SlowScope::Keys,
    };

    /// Whether a request at `t` seconds after the start, for a key hashing to `key` (or on
    /// connection `conn`), falls in an episode. Episodes are drawn from `seed` alone, so the
    /// schedule is the same for every run with that seed.
    pub fn slowed(&self, seed: u64, t: f64, key: u64, conn: u64) -> bool {
        // Episodes that started in (t − length, t]. Starts are a Poisson process: the start
        // times are generated from the beginning (cheap: one per `every` seconds).
        let mut rng = Rng::new(seed ^ 0x510e_9e12_0d5a_0001);
        let mut start = 0.0;
        loop {
            start += rng.exp() * self.every;
            // Each episode picks where its slowed share begins, on a circle of [0, 1).
            let at = rng.f64();
            if start > t {
                return false;
            }
            if start + self.length <= t {
                continue;
            }
            let what = match self.scope {
                SlowScope::Keys => unit(key),
                SlowScope::Connections => unit(conn.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            };
            if (what - at).rem_euclid(1.0) < self.share {
                return true;
            }
        }
    }
}

/// A 64-bit hash as a point of [0, 1).
fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// What the emulator knows of a request when it draws its delay.
#[derive(Clone, Copy, Debug, Default)]
pub struct DrawContext {
    /// Bytes the request moves.
    pub bytes: u64,
    /// Seconds since the emulator started.
    pub t: f64,
    /// A hash of the object's key.
    pub key: u64,
    /// The connection's number, in the order connections were accepted.
    pub conn: u64,
    /// The emulator's seed (the slow periods' schedule).
    pub seed: u64,
}

impl DelaySource {
    /// A delay (s) for the request, with the uniform variate `u` ∈ [0, 1).
    pub fn draw(&self, cx: &DrawContext, u: f64) -> f64 {
        let b = cx.bytes as f64;
        let d = match self {
            DelaySource::Model(m) => m.sample(b, u),
            DelaySource::Empirical(e) => e.sample(cx.bytes, u),
            DelaySource::HeavyTail { model, tail } => {
                model.floor(b) + tail.excess(model.tail(b), u)
            }
            DelaySource::SlowPeriods { base, periods } => {
                let d = base.draw(cx, u);
                if periods.slowed(cx.seed, cx.t, cx.key, cx.conn) {
                    d * periods.factor
                } else {
                    d
                }
            }
        };
        bounded(d)
    }

    /// The mean delay (s) of a request of `bytes`, outside slow periods (numerically, over
    /// 10,000 variates).
    pub fn mean(&self, bytes: u64) -> f64 {
        let n = 10_000;
        let cx = DrawContext {
            bytes,
            ..DrawContext::default()
        };
        let base = match self {
            DelaySource::SlowPeriods { base, .. } => base,
            other => other,
        };
        (0..n)
            .map(|i| base.draw(&cx, (i as f64 + 0.5) / n as f64))
            .sum::<f64>()
            / n as f64
    }

    /// Parses a source's name (see the module documentation); `empirical:FILE` reads the file.
    pub fn parse(s: &str) -> Result<DelaySource, String> {
        let (name, arg) = s.split_once(':').unwrap_or((s, ""));
        let model = DelayModel::PAPER_S3;
        match (name, arg) {
            ("model", "") => Ok(DelaySource::Model(model)),
            ("empirical", path) if !path.is_empty() => {
                Ok(DelaySource::Empirical(Arc::new(Empirical::load(
                    Path::new(path),
                )?)))
            }
            ("heavy-tail", arg) => {
                let tail = match arg.split_once(':').unwrap_or((arg, "")) {
                    ("", "") => Tail::Pareto { alpha: 1.5 },
                    ("pareto", a) => Tail::Pareto {
                        alpha: number(s, a).and_then(|a| {
                            (a > 1.0)
                                .then_some(a)
                                .ok_or_else(|| format!("{s:?}: a Pareto shape must exceed 1"))
                        })?,
                    },
                    ("lognormal", v) => Tail::LogNormal {
                        sigma: number(s, v).and_then(|v| {
                            (v > 0.0 && v < 5.0)
                                .then_some(v)
                                .ok_or_else(|| format!("{s:?}: sigma must be in (0, 5)"))
                        })?,
                    },
                    _ => {
                        return Err(format!(
                            "{s:?}: heavy-tail, heavy-tail:pareto:ALPHA or heavy-tail:lognormal:SIGMA"
                        ))
                    }
                };
                Ok(DelaySource::HeavyTail { model, tail })
            }
            ("slow-periods", scope) => {
                let scope = match scope {
                    "" | "keys" => SlowScope::Keys,
                    "connections" => SlowScope::Connections,
                    _ => return Err(format!("{s:?}: slow-periods:keys or slow-periods:connections")),
                };
                Ok(DelaySource::SlowPeriods {
                    base: Box::new(DelaySource::Model(model)),
                    periods: SlowPeriods {
                        scope,
                        ..SlowPeriods::DEFAULT
                    },
                })
            }
            _ => Err(format!(
                "{s:?}: model, empirical:FILE, heavy-tail[:pareto:A|:lognormal:S] or slow-periods[:keys|:connections]"
            )),
        }
    }
}

/// The longest delay drawn (s): an hour, whatever a tail or a file's extrapolation says.
pub const LONGEST: f64 = 3600.0;

/// `d` within `[0, LONGEST]` (NaN: 0).
fn bounded(d: f64) -> f64 {
    if d.is_nan() {
        0.0
    } else {
        d.clamp(0.0, LONGEST)
    }
}

fn number(whole: &str, v: &str) -> Result<f64, String> {
    v.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
        .ok_or_else(|| format!("{whole:?}: {v:?} is not a number"))
}

impl Tail {
    /// An excess of mean `mean` (s) at the uniform variate `u`.
    pub fn excess(&self, mean: f64, u: f64) -> f64 {
        let u = u.clamp(0.0, 1.0 - 1e-12);
        match *self {
            // Pareto(x_m, α): mean α·x_m/(α − 1), quantile x_m·(1 − u)^(−1/α).
            Tail::Pareto { alpha } => {
                let xm = mean * (alpha - 1.0) / alpha;
                xm * (1.0 - u).powf(-1.0 / alpha)
            }
            // Lognormal: mean e^(m + σ²/2), quantile e^(m + σ·Φ⁻¹(u)).
            Tail::LogNormal { sigma } => {
                let m = mean.max(1e-12).ln() - sigma * sigma / 2.0;
                (m + sigma * normal_quantile(u.max(1e-12))).exp()
            }
        }
    }
}

/// Φ⁻¹(p), the standard normal quantile (Acklam's rational approximation, relative error
/// below 1.2·10⁻⁹).
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let p = p.clamp(1e-300, 1.0 - 1e-16);
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

/// Measured delays: for each request size, the delay at some quantiles.
///
/// **The file**: one measurement per line, `BYTES QUANTILE MILLISECONDS` (whitespace
/// between), `#` to the end of a line is a comment. Per size, at least two quantiles in
/// (0, 1], increasing, with delays not decreasing.
///
/// **Sampling** a size `B` at the variate `u`: at each measured size, the delay is the
/// quantile function through its points, linear between them, flat below the first (the
/// measured minimum stands for everything below it), and above the last one below 1 an
/// exponential tail whose slope continues the last two points'. Between two measured sizes,
/// delays at the same `u` are interpolated linearly in `B`; beyond the largest they are
/// extrapolated from the two largest (a larger request takes longer at the same rate), below
/// the smallest they are the smallest's.
#[derive(Clone, Debug, PartialEq)]
pub struct Empirical {
    /// Sizes ascending, each with its `(quantile, seconds)` points ascending.
    sizes: Vec<(u64, Vec<(f64, f64)>)>,
}

impl Empirical {
    pub fn load(path: &Path) -> Result<Empirical, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Empirical::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Empirical, String> {
        let mut sizes: Vec<(u64, Vec<(f64, f64)>)> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let bad = |why: &str| format!("line {}: {why}: {line:?}", i + 1);
            let f: Vec<&str> = line.split_whitespace().collect();
            let [b, q, ms] = f[..] else {
                return Err(bad("not BYTES QUANTILE MILLISECONDS"));
            };
            let b: u64 = b.parse().map_err(|_| bad("bytes is not a whole number"))?;
            let q: f64 = q.parse().map_err(|_| bad("quantile is not a number"))?;
            let ms: f64 = ms.parse().map_err(|_| bad("delay is not a number"))?;
            if !(q > 0.0 && q <= 1.0) {
                return Err(bad("quantile is not in (0, 1]"));
            }
            if !(ms.is_finite() && ms >= 0.0) {
                return Err(bad("delay is not a non-negative number"));
            }
            match sizes.iter_mut().find(|(s, _)| *s == b) {
                Some((_, pts)) => pts.push((q, ms / 1e3)),
                None => sizes.push((b, vec![(q, ms / 1e3)])),
            }
        }
        if sizes.is_empty() {
            return Err("no measurements".into());
        }
        sizes.sort_by_key(|(s, _)| *s);
        for (b, pts) in &mut sizes {
            pts.sort_by(|x, y| x.0.total_cmp(&y.0));
            if pts.len() < 2 {
                return Err(format!("size {b}: fewer than two quantiles"));
            }
            for w in pts.windows(2) {
                if w[0].0 == w[1].0 {
                    return Err(format!("size {b}: quantile {} given twice", w[0].0));
                }
                if w[1].1 < w[0].1 {
                    return Err(format!(
                        "size {b}: the delay at quantile {} is below the one at {}",
                        w[1].0, w[0].0
                    ));
                }
            }
        }
        Ok(Empirical { sizes })
    }

    /// The measured sizes.
    pub fn sizes(&self) -> impl Iterator<Item = u64> + '_ {
        self.sizes.iter().map(|(s, _)| *s)
    }

    /// The delay (s) of a request of `bytes` at the variate `u` ∈ [0, 1).
    pub fn sample(&self, bytes: u64, u: f64) -> f64 {
        let at = |i: usize| quantile(&self.sizes[i].1, u);
        let n = self.sizes.len();
        let i = self.sizes.partition_point(|(s, _)| *s < bytes);
        let (lo, hi) = match (i, n) {
            (_, 1) | (0, _) => return bounded(at(0)),
            (i, n) if i < n => (i - 1, i),
            _ => (n - 2, n - 1),
        };
        let (b0, b1) = (self.sizes[lo].0 as f64, self.sizes[hi].0 as f64);
        let (d0, d1) = (at(lo), at(hi));
        let d = d0 + (d1 - d0) * (bytes as f64 - b0) / (b1 - b0);
        bounded(d)
    }
}

/// The quantile function through `pts` at `u` (see [`Empirical`]).
fn quantile(pts: &[(f64, f64)], u: f64) -> f64 {
    let u = u.clamp(0.0, 1.0 - 1e-9);
    let (q0, v0) = pts[0];
    if u <= q0 {
        return v0;
    }
    for w in pts.windows(2) {
        let ((qa, va), (qb, vb)) = (w[0], w[1]);
        if u <= qb {
            return va + (vb - va) * (u - qa) / (qb - qa);
        }
    }
    // Past the last point (whose quantile is below 1): an exponential tail, its scale from
    // the last two points, `v(u) = v_L + θ·ln((1 − q_L)/(1 − u))`.
    let ((qa, va), (qb, vb)) = (pts[pts.len() - 2], pts[pts.len() - 1]);
    let theta = (vb - va) / ((1.0 - qa) / (1.0 - qb)).ln();
    vb + theta * ((1.0 - qb) / (1.0 - u)).ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean_of(f: impl Fn(f64) -> f64) -> f64 {
        let n = 200_000;
        (0..n).map(|i| f((i as f64 + 0.5) / n as f64)).sum::<f64>() / n as f64
    }

    #[test]
    fn heavy_tails_keep_the_model_s_mean_and_not_its_shape() {
        for tail in [Tail::Pareto { alpha: 2.5 }, Tail::LogNormal { sigma: 1.0 }] {
            let m = mean_of(|u| tail.excess(0.1, u));
            assert!((m - 0.1).abs() < 0.004, "{tail:?}: mean {m}");
            // Heavier than the exponential of the same mean beyond its 99.9th percentile.
            let exp999 = -0.1 * (0.001f64).ln();
            assert!(tail.excess(0.1, 0.9999) > exp999, "{tail:?}");
        }
        assert!((normal_quantile(0.975) - 1.959_964).abs() < 1e-5);
        assert!((normal_quantile(0.01) + 2.326_348).abs() < 1e-5);
        assert!(normal_quantile(0.5).abs() < 1e-9);
    }

    #[test]
    fn empirical_quantiles_interpolate_in_quantile_and_size() {
        let e = Empirical::parse(
            "# bytes q ms\n1000 0.5 10\n1000 0.9 20 # p90\n1000 0.99 40\n\
             3000 0.5 30\n3000 0.9 60\n3000 0.99 120\n",
        )
        .unwrap();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(e.sample(1000, 0.5), 0.010));
        assert!(close(e.sample(1000, 0.1), 0.010), "flat below the first");
        assert!(close(e.sample(1000, 0.7), 0.015));
        assert!(close(e.sample(2000, 0.5), 0.020), "halfway in size");
        assert!(close(e.sample(5000, 0.5), 0.050), "extrapolated in size");
        assert!(close(e.sample(10, 0.5), 0.010));
        // The tail continues the slope of (0.9, 20) → (0.99, 40): 20 ms per factor 10.
        assert!((e.sample(1000, 0.999) - 0.060).abs() < 1e-6);
        assert_eq!(e.sizes().collect::<Vec<_>>(), vec![1000, 3000]);
        // Far beyond the file, a delay is still one the emulator can wait.
        assert_eq!(e.sample(u64::MAX, 0.5), LONGEST);
        assert!(Tail::Pareto { alpha: 1.1 }.excess(1.0, 1.0) > LONGEST);
        let huge = DelaySource::HeavyTail {
            model: DelayModel::PAPER_S3,
            tail: Tail::Pareto { alpha: 1.1 },
        };
        assert_eq!(huge.draw(&DrawContext::default(), 1.0), LONGEST);
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        for (text, says) in [
            ("", "no measurements"),
            ("1000 0.5", "not BYTES"),
            ("x 0.5 1", "bytes"),
            ("1000 1.5 1", "quantile is not in"),
            ("1000 0.5 -1", "non-negative"),
            ("1000 0.5 1", "fewer than two"),
            ("1000 0.5 1\n1000 0.5 2", "given twice"),
            ("1000 0.5 5\n1000 0.9 2", "below"),
        ] {
            let e = Empirical::parse(text).unwrap_err();
            assert!(e.contains(says), "{text:?}: {e}");
        }
    }

    #[test]
    fn sources_parse_and_slow_periods_slow_a_share() {
        assert!(matches!(
            DelaySource::parse("model"),
            Ok(DelaySource::Model(_))
        ));
        assert!(matches!(
            DelaySource::parse("heavy-tail:lognormal:1.2"),
            Ok(DelaySource::HeavyTail {
                tail: Tail::LogNormal { .. },
                ..
            })
        ));
        for bad in [
            "heavy-tail:pareto:1",
            "heavy-tail:gamma:2",
            "slow-periods:disks",
            "empirical:",
            "fast",
            "empirical:/no/such/file",
        ] {
            assert!(DelaySource::parse(bad).is_err(), "{bad}");
        }
        let p = SlowPeriods::DEFAULT;
        // Over a long run, the share of (time, key) points slowed is about
        // share × length / every = 0.1.
        let mut rng = Rng::new(9);
        let n = 20_000;
        let slowed = (0..n)
            .filter(|_| p.slowed(3, rng.f64() * 200.0, rng.next_u64(), 0))
            .count();
        let share = slowed as f64 / n as f64;
        assert!((0.06..0.14).contains(&share), "{share}");
        // One key at one time: slowed or not, the same for every draw.
        assert_eq!(p.slowed(3, 17.0, 42, 0), p.slowed(3, 17.0, 42, 9));
    }
}
