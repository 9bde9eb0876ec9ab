//! A sweep of cluster simulations: every (scheme, size) pair of one configuration, on all
//! cores, and — when servers become unavailable — each run next to its baseline without the
//! unavailability ([`compare`]). This is what `ecdn sim cluster` runs; a library user gets the
//! same by calling [`sweep`].

use ecdn_trace::{RequestReader, TraceError};

use crate::cluster::{
    compare, simulate_cluster, ClusterConfig, ClusterResult, Scheme, UnavailabilityResult,
};
use crate::pool::{run_jobs, Progress};
use crate::unavailability::Unavailability;
use crate::SimError;

/// A scheme with its code (data chunks `k`, parity chunks `p`; replication schemes ignore them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchemeCode {
    pub scheme: Scheme,
    pub k: usize,
    pub p: usize,
}

impl SchemeCode {
    /// Parses a scheme name (see [`Scheme::parse`]); a coded scheme may name its own code,
    /// `c2dn-nNkK` or `c2dn-norebal-nNkK` (K data and N − K parity chunks), else it gets
    /// `k` and `p`.
    pub fn parse(s: &str, k: usize, p: usize) -> Result<SchemeCode, String> {
        let t = s.trim().to_ascii_lowercase();
        if let Ok(scheme) = Scheme::parse(&t) {
            return Ok(SchemeCode { scheme, k, p });
        }
        for base in ["c2dn-norebal", "c2dn"] {
            if let Some(code) = t.strip_prefix(&format!("{base}-n")) {
                let (n, kk) = code.split_once('k').ok_or_else(|| {
                    format!("scheme {s:?}: expected {base}-nNkK, e.g. {base}-n5k3")
                })?;
                let n: usize = n.parse().map_err(|_| format!("scheme {s:?}: bad n"))?;
                let kk: usize = kk.parse().map_err(|_| format!("scheme {s:?}: bad k"))?;
                if kk == 0 || n < kk {
                    return Err(format!("scheme {s:?}: need n ≥ k ≥ 1"));
                }
                return Ok(SchemeCode {
                    scheme: Scheme::parse(base)?,
                    k: kk,
                    p: n - kk,
                });
            }
        }
        Scheme::parse(&t).map(|scheme| SchemeCode { scheme, k, p })
    }
}

/// What a sweep measured, in (scheme, size) order: schemes outer, sizes inner.
#[derive(Clone, Debug)]
pub enum ClusterSweep {
    /// Nothing was unavailable: one result per (scheme, size).
    Available(Vec<ClusterResult>),
    /// Servers were unavailable: each (scheme, size) compared with its run without that.
    Unavailable(Vec<UnavailabilityResult>),
}

/// Runs `base` with every scheme of `schemes` and every total capacity of `sizes` (the rest of
/// `base` — servers, eviction, threshold, windows, unavailability, ... — is shared), on up to
/// `threads` threads; each run opens its own reader with `open`, and `progress` gets the
/// processed-request counts of all of them. When `base.unavailability` makes any server
/// unavailable, every pair also runs without it and the two are compared ([`compare`], with
/// `spike_windows`). The first failing run's error is returned.
pub fn sweep<F, R>(
    base: &ClusterConfig,
    schemes: &[SchemeCode],
    sizes: &[u64],
    spike_windows: usize,
    open: F,
    threads: usize,
    progress: Progress<'_>,
) -> Result<ClusterSweep, SimError>
where
    F: Fn() -> Result<R, TraceError> + Sync,
    R: RequestReader,
{
    let with_unavailability = !base.unavailability.is_empty();
    // Jobs: every (scheme, size), and for unavailability runs its baseline right after it.
    let mut jobs: Vec<ClusterConfig> = Vec::new();
    for code in schemes {
        for &size in sizes {
            let mut cfg = base.clone();
            cfg.scheme = code.scheme;
            cfg.k = code.k;
            cfg.p = code.p;
            cfg.capacity = size;
            if with_unavailability {
                let mut baseline = cfg.clone();
                baseline.unavailability = Unavailability {
                    window: base.unavailability.window.or(Some(base.window)),
                    ..Unavailability::default()
                };
                jobs.push(cfg);
                jobs.push(baseline);
            } else {
                jobs.push(cfg);
            }
        }
    }
    let results = run_jobs(&jobs, threads, progress, |cfg, progress| {
        let mut reader = open()?;
        simulate_cluster(&mut reader, cfg, progress)
    });
    let done: Vec<ClusterResult> = results.into_iter().collect::<Result<_, _>>()?;
    if !with_unavailability {
        return Ok(ClusterSweep::Available(done));
    }
    let mut it = done.into_iter();
    let mut rows = Vec::new();
    while let (Some(with), Some(without)) = (it.next(), it.next()) {
        rows.push(compare(with, &without, spike_windows));
    }
    Ok(ClusterSweep::Unavailable(rows))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unavailability::{FailEvent, Window};
    use ecdn_trace::{Request, SliceReader};

    #[test]
    fn scheme_codes() {
        let c = SchemeCode::parse("c2dn-n5k3", 3, 1).unwrap();
        assert_eq!((c.scheme, c.k, c.p), (Scheme::C2dn, 3, 2));
        let c = SchemeCode::parse("C2DN-norebal-n6k4", 3, 1).unwrap();
        assert_eq!((c.scheme, c.k, c.p), (Scheme::C2dnNoRebal, 4, 2));
        let c = SchemeCode::parse("rep2", 3, 1).unwrap();
        assert_eq!((c.scheme, c.k, c.p), (Scheme::Rep(2), 3, 1));
        for bad in ["c2dn-n2k3", "c2dn-n5k0", "c2dn-n5", "c2dn-nxk1", "rep9"] {
            assert!(SchemeCode::parse(bad, 3, 1).is_err(), "{bad}");
        }
    }

    fn trace() -> Vec<Request> {
        (0..4000u64)
            .map(|i| Request {
                time: i / 4,
                id: (i * 7919) % 300,
                size: 1000 + (i % 7) * 100_000,
                next_access: -1,
            })
            .collect()
    }

    #[test]
    fn sweeps_in_scheme_then_size_order_and_compares_unavailability() {
        let reqs = trace();
        let open = || -> Result<SliceReader<'_>, TraceError> { Ok(SliceReader::new(&reqs)) };
        let mut base = ClusterConfig::new(Scheme::C2dn, 0);
        base.window = Window::Seconds(100.0);
        let schemes = [
            SchemeCode::parse("rep2", 3, 1).unwrap(),
            SchemeCode::parse("c2dn", 3, 1).unwrap(),
        ];
        let sizes = [10 << 20, 40 << 20];
        let ClusterSweep::Available(plain) =
            sweep(&base, &schemes, &sizes, 6, open, 3, &|_| {}).unwrap()
        else {
            panic!("nothing was unavailable");
        };
        let order: Vec<(String, u64)> = plain
            .iter()
            .map(|r| (r.scheme.clone(), r.cache_size))
            .collect();
        assert_eq!(
            order,
            [
                ("rep2".to_string(), 10 << 20),
                ("rep2".to_string(), 40 << 20),
                ("c2dn".to_string(), 10 << 20),
                ("c2dn".to_string(), 40 << 20)
            ]
        );
        // The same run alone gives the same result.
        let alone = simulate_cluster(
            &mut SliceReader::new(&reqs),
            &{
                let mut c = base.clone();
                c.capacity = 40 << 20;
                c
            },
            &|_| {},
        )
        .unwrap();
        assert_eq!(alone.miss_ratio, plain[3].miss_ratio);

        base.unavailability.events.push(FailEvent {
            server: 2,
            start: 500.0,
            end: f64::INFINITY,
        });
        let ClusterSweep::Unavailable(rows) =
            sweep(&base, &schemes, &sizes, 6, open, 3, &|_| {}).unwrap()
        else {
            panic!("server 2 was unavailable");
        };
        assert_eq!(rows.len(), 4);
        for (row, plain) in rows.iter().zip(&plain) {
            assert_eq!(row.baseline_miss_ratio, plain.miss_ratio);
            assert_eq!(row.unavailability_starts, vec![5]);
            assert_eq!(row.relative_miss_change.len(), row.with.windows.len());
        }
    }
}
