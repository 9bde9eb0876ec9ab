//! Policy specifications as users type them, and building a [`Cache`] from one.
//!
//! Grammar: `EVICTION[+ADMISSION[:ARG]...]`, where an `ARG` is `key=value` or a bare value for
//! the admission's main parameter. Examples:
//!
//! | spec | meaning |
//! |---|---|
//! | `lru`, `fifo`, `s4lru`, `gdsf`, `lfuda`, `clock`, `sieve`, `s3fifo`, `2q`, `arc`, `lirs`, `wtinylfu`, `lhd`, `hyperbolic`, `lecar` | eviction only, admit everything (`lhd`, `hyperbolic` and `lecar` draw from the seed) |
//! | `belady` | offline: evicts the object requested farthest in the future (needs each request's next access: oracleGeneral traces) |
//! | `lru+threshold:64KiB` | admit objects smaller than 64 KiB (`static:64KiB` for short) |
//! | `lru+freq:2` | admit on the 2nd request (nginx `proxy_cache_min_uses`) |
//! | `lru+lrus` | LRU-S: admit with probability min(1, ref/size), `ref` defaults to 1 KiB |
//! | `lru+exp:256KiB` | admit with probability e^(−size/c), fixed c |
//! | `lru+hillclimb` (`hillclimb`) | e^(−size/c), c tuned by two shadow caches |
//! | `lru+adaptsize` (`adaptsize`) | e^(−size/c), c tuned by AdaptSize's Markov model |
//! | `lru+size-opt` (`size-opt`) | e^(−size/c), c chosen per window with knowledge of the window |
//!
//! Keys: `window=` (AdaptSize/SIZE-OPT/HillClimb window in requests), `smoothing=`
//! (AdaptSize's history weight), `horizon=` (AdaptSize's decision horizon in windows, or `inf`
//! for the paper's stationary model), `guard=on|off` (AdaptSize's shadow-cache guard),
//! `model=reuse|rates` (what AdaptSize's model learns from: each object's reuse gaps, the
//! default, or its smoothed request rate as in the paper), `ramp=on|off` (AdaptSize's warm-up
//! ramp: first windows of Δ/16, Δ/8, … up to Δ; `off` waits a whole Δ for the first c, as the
//! paper's §4.2 reads), `step=` (HillClimb's multiplicative step), `c=` (initial c),
//! `ref=` (LRU-S reference size).

use ecdn_trace::units::parse_size;

use crate::admission;
pub use crate::eviction::EvictionKind;
use crate::{Admission, Cache};

/// An admission policy with its parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum AdmissionSpec {
    /// Admit objects with size < threshold.
    Threshold(u64),
    /// Admit on the n-th request of an object.
    Frequency(u32),
    /// LRU-S: admit with probability min(1, reference / size).
    LruS { reference: u64 },
    /// e^(−size/c) with a fixed c.
    Exp { c: f64 },
    /// e^(−size/c), c tuned by hill climbing on two shadow caches.
    HillClimb { c: f64, window: usize, step: f64 },
    /// e^(−size/c), c tuned by AdaptSize's model every `window` requests.
    AdaptSize {
        window: usize,
        smoothing: f64,
        horizon: f64,
        guard: bool,
        /// How the model learns request processes (`model=reuse|rates`).
        estimator: admission::adaptsize::Estimator,
        /// Whether the first windows are shorter (`ramp=on|off`, on by default).
        ramp: bool,
    },
    /// e^(−size/c), best c for each coming window, found with knowledge of that window.
    SizeOpt { window: usize },
}

/// Default AdaptSize window Δ (paper §4.2).
pub const DEFAULT_WINDOW: usize = 250_000;
/// Default weight of the newest window in AdaptSize's exponential smoothing.
pub const DEFAULT_SMOOTHING: f64 = 0.3;

/// A parsed policy: eviction plus optional admission, with the text it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicySpec {
    pub label: String,
    pub eviction: EvictionKind,
    pub admission: Option<AdmissionSpec>,
}

fn split_args(s: &str) -> (String, Vec<(Option<String>, String)>) {
    let mut parts = s.split(':');
    let name = parts.next().unwrap_or("").trim().to_ascii_lowercase();
    let args = parts
        .map(|a| match a.split_once('=') {
            Some((k, v)) => (Some(k.trim().to_ascii_lowercase()), v.trim().to_string()),
            None => (None, a.trim().to_string()),
        })
        .collect();
    (name, args)
}

fn parse_f64(key: &str, v: &str) -> Result<f64, String> {
    let x: f64 = v
        .parse()
        .map_err(|_| format!("{key}={v:?} is not a number"))?;
    if !x.is_finite() {
        return Err(format!("{key}={v:?} is not finite"));
    }
    Ok(x)
}

fn parse_count(key: &str, v: &str) -> Result<usize, String> {
    let x: usize = v
        .replace('_', "")
        .parse()
        .map_err(|_| format!("{key}={v:?} is not a whole number"))?;
    if x == 0 {
        return Err(format!("{key} must be positive"));
    }
    Ok(x)
}

impl AdmissionSpec {
    pub fn parse(s: &str) -> Result<Self, String> {
        let (name, args) = split_args(s);
        let mut main: Option<String> = None;
        let mut kv: Vec<(String, String)> = Vec::new();
        for (k, v) in args {
            match k {
                None if main.is_none() => main = Some(v),
                None => return Err(format!("{s:?}: more than one bare parameter")),
                Some(k) => kv.push((k, v)),
            }
        }
        let take = |key: &str, kv: &mut Vec<(String, String)>| -> Option<String> {
            let i = kv.iter().position(|(k, _)| k == key)?;
            Some(kv.remove(i).1)
        };
        let spec = match name.as_str() {
            "threshold" | "static" | "size" => {
                let v = main.or_else(|| take("c", &mut kv)).ok_or_else(|| {
                    format!("{s:?}: threshold needs a size, e.g. threshold:64KiB")
                })?;
                AdmissionSpec::Threshold(parse_size(&v)?)
            }
            "freq" | "frequency" | "min-uses" => {
                let v = main
                    .or_else(|| take("n", &mut kv))
                    .unwrap_or_else(|| "2".into());
                let n = parse_count("n", &v)?;
                AdmissionSpec::Frequency(u32::try_from(n).map_err(|_| "n too large".to_string())?)
            }
            "lrus" | "lru-s" => {
                let v = main
                    .or_else(|| take("ref", &mut kv))
                    .unwrap_or_else(|| "1KiB".into());
                AdmissionSpec::LruS {
                    reference: parse_size(&v)?.max(1),
                }
            }
            "exp" => {
                let v = main
                    .or_else(|| take("c", &mut kv))
                    .ok_or_else(|| format!("{s:?}: exp needs c, e.g. exp:256KiB"))?;
                AdmissionSpec::Exp {
                    c: parse_size(&v)?.max(1) as f64,
                }
            }
            "hillclimb" => {
                let c = match main.or_else(|| take("c", &mut kv)) {
                    Some(v) => parse_size(&v)?.max(1) as f64,
                    None => (256u64 << 10) as f64,
                };
                let window = match take("window", &mut kv) {
                    Some(v) => parse_count("window", &v)?,
                    None => 100_000,
                };
                let step = match take("step", &mut kv) {
                    Some(v) => parse_f64("step", &v)?,
                    None => 2.0,
                };
                if step <= 1.0 {
                    return Err(format!("{s:?}: step must be > 1"));
                }
                AdmissionSpec::HillClimb { c, window, step }
            }
            "adaptsize" => {
                let window = match main.or_else(|| take("window", &mut kv)) {
                    Some(v) => parse_count("window", &v)?,
                    None => DEFAULT_WINDOW,
                };
                let smoothing = match take("smoothing", &mut kv) {
                    Some(v) => parse_f64("smoothing", &v)?,
                    None => DEFAULT_SMOOTHING,
                };
                if !(smoothing > 0.0 && smoothing <= 1.0) {
                    return Err(format!("{s:?}: smoothing must be in (0, 1]"));
                }
                let horizon = match take("horizon", &mut kv) {
                    Some(v) if v.eq_ignore_ascii_case("inf") => f64::INFINITY,
                    Some(v) => parse_f64("horizon", &v)?,
                    None => admission::adaptsize::DEFAULT_HORIZON,
                };
                if horizon.is_nan() || horizon <= 0.0 {
                    return Err(format!("{s:?}: horizon must be positive (or inf)"));
                }
                let guard = match take("guard", &mut kv).as_deref() {
                    None | Some("on") => true,
                    Some("off") => false,
                    Some(v) => return Err(format!("{s:?}: guard={v:?}: expected on or off")),
                };
                let estimator = match take("model", &mut kv).as_deref() {
                    None | Some("reuse") => admission::adaptsize::Estimator::Reuse,
                    Some("rates") => admission::adaptsize::Estimator::Rates,
                    Some(v) => return Err(format!("{s:?}: model={v:?}: expected reuse or rates")),
                };
                let ramp = match take("ramp", &mut kv).as_deref() {
                    None | Some("on") => true,
                    Some("off") => false,
                    Some(v) => return Err(format!("{s:?}: ramp={v:?}: expected on or off")),
                };
                AdmissionSpec::AdaptSize {
                    window,
                    smoothing,
                    horizon,
                    guard,
                    estimator,
                    ramp,
                }
            }
            "size-opt" | "sizeopt" => {
                let window = match main.or_else(|| take("window", &mut kv)) {
                    Some(v) => parse_count("window", &v)?,
                    None => DEFAULT_WINDOW,
                };
                AdmissionSpec::SizeOpt { window }
            }
            "" => return Err("empty admission policy".into()),
            other => {
                return Err(format!(
                    "unknown admission policy {other:?} (known: threshold, freq, lrus, exp, \
                     hillclimb, adaptsize, size-opt)"
                ))
            }
        };
        if let Some((k, _)) = kv.first() {
            return Err(format!("{s:?}: unknown parameter {k:?}"));
        }
        Ok(spec)
    }

    /// Builds the admission policy; `capacity` is the cache size, `eviction` the kind of the
    /// main cache (shadow caches use the same kind), `seed` seeds its coin flips.
    pub fn build(&self, capacity: u64, eviction: EvictionKind, seed: u64) -> Box<dyn Admission> {
        match *self {
            AdmissionSpec::Threshold(t) => Box::new(admission::Threshold::new(t)),
            AdmissionSpec::Frequency(n) => Box::new(admission::Frequency::new(n)),
            AdmissionSpec::LruS { reference } => Box::new(admission::LruS::new(reference, seed)),
            AdmissionSpec::Exp { c } => Box::new(admission::ExpSize::new(c, seed)),
            AdmissionSpec::HillClimb { c, window, step } => Box::new(admission::HillClimb::new(
                c, window, step, capacity, eviction, seed,
            )),
            AdmissionSpec::AdaptSize {
                window,
                smoothing,
                horizon,
                guard,
                estimator,
                ramp,
            } => Box::new(
                admission::AdaptSize::new(
                    capacity,
                    window,
                    smoothing,
                    horizon,
                    guard.then_some(eviction),
                    seed,
                )
                .with_estimator(estimator)
                .with_ramp(ramp),
            ),
            AdmissionSpec::SizeOpt { window } => {
                Box::new(admission::SizeOpt::new(capacity, window, seed))
            }
        }
    }
}

impl PolicySpec {
    /// Parses one policy spec (see the module docs).
    pub fn parse(s: &str) -> Result<Self, String> {
        let label = s.trim().to_string();
        if label.is_empty() {
            return Err("empty policy name".into());
        }
        let (first, rest) = match label.split_once('+') {
            Some((a, b)) => (a, Some(b)),
            None => (label.as_str(), None),
        };
        // Shorthands: an admission name alone means LRU + that admission.
        if rest.is_none() && EvictionKind::parse(first).is_err() {
            let admission = AdmissionSpec::parse(first).map_err(|e| {
                format!(
                    "policy {label:?}: {e}; a policy is EVICTION[+ADMISSION], e.g. lru+adaptsize"
                )
            })?;
            return Ok(PolicySpec {
                label,
                eviction: EvictionKind::Lru,
                admission: Some(admission),
            });
        }
        let eviction = EvictionKind::parse(first).map_err(|e| format!("policy {label:?}: {e}"))?;
        let admission = match rest {
            None => None,
            Some(a) => Some(AdmissionSpec::parse(a).map_err(|e| format!("policy {label:?}: {e}"))?),
        };
        Ok(PolicySpec {
            label,
            eviction,
            admission,
        })
    }

    /// Parses a comma-separated list of specs.
    pub fn parse_list(s: &str) -> Result<Vec<Self>, String> {
        s.split(',')
            .filter(|p| !p.trim().is_empty())
            .map(PolicySpec::parse)
            .collect()
    }

    /// Builds a cache of `capacity` bytes; `seed` seeds admission coin flips.
    pub fn build(&self, capacity: u64, seed: u64) -> Cache {
        build(self, capacity, seed)
    }
}

/// Builds a cache of `capacity` bytes from a spec.
pub fn build(spec: &PolicySpec, capacity: u64, seed: u64) -> Cache {
    let eviction = spec.eviction.build_seeded(capacity, seed);
    let admission = spec
        .admission
        .as_ref()
        .map(|a| a.build(capacity, spec.eviction, seed));
    Cache::new(eviction, admission)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_specs() {
        let p = PolicySpec::parse("lru").unwrap();
        assert_eq!(p.eviction, EvictionKind::Lru);
        assert!(p.admission.is_none());
        let p = PolicySpec::parse("adaptsize").unwrap();
        assert_eq!(
            p.admission,
            Some(AdmissionSpec::AdaptSize {
                window: DEFAULT_WINDOW,
                smoothing: DEFAULT_SMOOTHING,
                horizon: admission::adaptsize::DEFAULT_HORIZON,
                guard: true,
                estimator: admission::adaptsize::Estimator::Reuse,
                ramp: true,
            })
        );
        let p = PolicySpec::parse("fifo+threshold:64KiB").unwrap();
        assert_eq!(p.eviction, EvictionKind::Fifo);
        assert_eq!(p.admission, Some(AdmissionSpec::Threshold(64 << 10)));
        let p = PolicySpec::parse("lru+adaptsize:window=1000:smoothing=0.5:model=rates").unwrap();
        assert_eq!(
            p.admission,
            Some(AdmissionSpec::AdaptSize {
                window: 1000,
                smoothing: 0.5,
                horizon: admission::adaptsize::DEFAULT_HORIZON,
                guard: true,
                estimator: admission::adaptsize::Estimator::Rates,
                ramp: true,
            })
        );
        let p = PolicySpec::parse("adaptsize:ramp=off").unwrap();
        assert!(matches!(
            p.admission,
            Some(AdmissionSpec::AdaptSize { ramp: false, .. })
        ));
        assert!(PolicySpec::parse("adaptsize:ramp=maybe").is_err());
        assert!(PolicySpec::parse("adaptsize:model=poisson").is_err());
        assert_eq!(
            PolicySpec::parse_list("lru, fifo,adaptsize").unwrap().len(),
            3
        );
    }

    #[test]
    fn rejects_bad_specs() {
        for bad in [
            "",
            "lruu",
            "lru+",
            "lru+nope",
            "lru+threshold",
            "lru+threshold:abc",
            "lru+adaptsize:window=0",
            "lru+adaptsize:bogus=1",
            "lru+hillclimb:step=1",
            "lru+adaptsize:smoothing=2",
        ] {
            assert!(
                PolicySpec::parse(bad).is_err(),
                "{bad:?} should be rejected"
            );
        }
    }
}
