//! Object sizes: the [`SizeDist`] distributions, their parsing and display, and the clamp
//! that keeps every size in `[1, u32::MAX]` bytes.

use std::fmt;
use std::str::FromStr;

use crate::rng::Rng;
use crate::units::{format_size, parse_size};

/// Smallest and largest generated object size.
const MIN_SIZE: f64 = 1.0;
const MAX_SIZE: f64 = u32::MAX as f64;

fn clamp_size(x: f64) -> u64 {
    if x.is_nan() {
        return 1;
    }
    x.round().clamp(MIN_SIZE, MAX_SIZE) as u64
}

/// Parameters of [`SizeDist::WebVideo`]: share of video objects and the two lognormals.
pub const WEB_VIDEO_VIDEO_SHARE: f64 = 0.10;
/// Median size of web objects in [`SizeDist::WebVideo`] (16 KiB).
pub const WEB_MEDIAN: f64 = 16.0 * 1024.0;
/// Log-space standard deviation of web objects in [`SizeDist::WebVideo`].
pub const WEB_SIGMA: f64 = 1.5;
/// Median size of video objects in [`SizeDist::WebVideo`] (4 MiB).
pub const VIDEO_MEDIAN: f64 = 4.0 * 1024.0 * 1024.0;
/// Log-space standard deviation of video objects in [`SizeDist::WebVideo`].
pub const VIDEO_SIGMA: f64 = 0.8;

/// Distribution of per-object sizes (bytes). Every sample is rounded to an integer and clamped
/// to `[1, u32::MAX]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SizeDist {
    /// Every object has this size.
    Fixed(u64),
    /// Lognormal given by its median `e^μ` (bytes) and log-space standard deviation `σ`:
    /// `size = median · e^(σZ)`, Z standard normal. The mean is `median · e^(σ²/2)`.
    LogNormal {
        /// Median size in bytes (`e^μ`).
        median: f64,
        /// Standard deviation of `ln(size)`.
        sigma: f64,
    },
    /// Pareto with shape `alpha` and scale (smallest size) `min`: `P(size > x) = (min/x)^alpha`.
    /// The mean is `alpha · min / (alpha − 1)` for `alpha > 1` (infinite otherwise, before
    /// clamping).
    Pareto {
        /// Tail index.
        alpha: f64,
        /// Smallest size in bytes.
        min: f64,
    },
    /// Log-uniform between `min` and `max` bytes (uniform in `ln(size)`).
    LogUniform {
        /// Smallest size in bytes.
        min: u64,
        /// Largest size in bytes.
        max: u64,
    },
    /// A CDN-like web + video mixture: 90% web objects, lognormal with median 16 KiB and σ 1.5
    /// (90% of them between ~1.4 KiB and ~190 KiB, tail from ~200 B to a few MiB), and 10% video
    /// chunks or downloads, lognormal with median 4 MiB and σ 0.8 (90% between ~1.1 MiB and
    /// ~15 MiB, tail to tens of MiB). See the `WEB_*` and `VIDEO_*` constants.
    WebVideo,
}

impl SizeDist {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), String> {
        let ok = match *self {
            SizeDist::Fixed(s) => (1..=u32::MAX as u64).contains(&s),
            SizeDist::LogNormal { median, sigma } => {
                median.is_finite() && median >= 1.0 && sigma.is_finite() && sigma >= 0.0
            }
            SizeDist::Pareto { alpha, min } => {
                alpha.is_finite() && alpha > 0.0 && min.is_finite() && min >= 1.0
            }
            SizeDist::LogUniform { min, max } => min >= 1 && min <= max,
            SizeDist::WebVideo => true,
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "invalid size distribution {self}: sizes must be ≥ 1 byte (fixed ≤ 4GiB), \
                 sigma ≥ 0, alpha > 0, min ≤ max"
            ))
        }
    }

    /// Draws one size.
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        match *self {
            SizeDist::Fixed(s) => s.clamp(1, u32::MAX as u64),
            SizeDist::LogNormal { median, sigma } => {
                clamp_size(median * (sigma * rng.normal()).exp())
            }
            SizeDist::Pareto { alpha, min } => clamp_size(min * rng.f64_open0().powf(-1.0 / alpha)),
            SizeDist::LogUniform { min, max } => {
                let (a, b) = ((min as f64).ln(), (max as f64).ln());
                clamp_size((a + rng.f64() * (b - a)).exp()).clamp(min, max)
            }
            SizeDist::WebVideo => {
                let (median, sigma) = if rng.f64() < WEB_VIDEO_VIDEO_SHARE {
                    (VIDEO_MEDIAN, VIDEO_SIGMA)
                } else {
                    (WEB_MEDIAN, WEB_SIGMA)
                };
                clamp_size(median * (sigma * rng.normal()).exp())
            }
        }
    }

    /// Parses `fixed:SIZE`, `lognormal:MEDIAN:SIGMA`, `pareto:ALPHA:MIN`,
    /// `loguniform:MIN:MAX` or `web-video`; sizes as in [`parse_size`] (`4KiB`, `16384`).
    pub fn parse(s: &str) -> Result<SizeDist, String> {
        let parts: Vec<&str> = s.trim().split(':').map(str::trim).collect();
        let usage = || {
            format!(
                "invalid size distribution {s:?}: expected fixed:SIZE, lognormal:MEDIAN:SIGMA, \
                 pareto:ALPHA:MIN, loguniform:MIN:MAX or web-video (e.g. lognormal:16KiB:1.5)"
            )
        };
        let num = |v: &str, what: &str| -> Result<f64, String> {
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| {
                    format!("invalid size distribution {s:?}: {what} {v:?} is not a number")
                })
        };
        let size =
            |v: &str| parse_size(v).map_err(|e| format!("invalid size distribution {s:?}: {e}"));
        let d = match parts.as_slice() {
            [kind, v] if kind.eq_ignore_ascii_case("fixed") => SizeDist::Fixed(size(v)?),
            [kind, m, sg] if kind.eq_ignore_ascii_case("lognormal") => SizeDist::LogNormal {
                median: size(m)? as f64,
                sigma: num(sg, "sigma")?,
            },
            [kind, a, m] if kind.eq_ignore_ascii_case("pareto") => SizeDist::Pareto {
                alpha: num(a, "alpha")?,
                min: size(m)? as f64,
            },
            [kind, a, b] if kind.eq_ignore_ascii_case("loguniform") => SizeDist::LogUniform {
                min: size(a)?,
                max: size(b)?,
            },
            [kind]
                if ["web-video", "webvideo", "web+video"]
                    .iter()
                    .any(|k| kind.eq_ignore_ascii_case(k)) =>
            {
                SizeDist::WebVideo
            }
            _ => return Err(usage()),
        };
        d.validate().map_err(|e| format!("{e} (from {s:?})"))?;
        Ok(d)
    }
}

impl FromStr for SizeDist {
    type Err = String;

    /// See [`SizeDist::parse`].
    fn from_str(s: &str) -> Result<Self, String> {
        SizeDist::parse(s)
    }
}

impl fmt::Display for SizeDist {
    /// The syntax [`SizeDist::parse`] accepts.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SizeDist::Fixed(s) => write!(f, "fixed:{}", format_size(s)),
            SizeDist::LogNormal { median, sigma } => {
                write!(
                    f,
                    "lognormal:{}:{sigma}",
                    format_size(median.round() as u64)
                )
            }
            SizeDist::Pareto { alpha, min } => {
                write!(f, "pareto:{alpha}:{}", format_size(min.round() as u64))
            }
            SizeDist::LogUniform { min, max } => {
                write!(f, "loguniform:{}:{}", format_size(min), format_size(max))
            }
            SizeDist::WebVideo => f.write_str("web-video"),
        }
    }
}
