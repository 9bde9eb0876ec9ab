//! Trace-driven cache simulation: feeds a trace through an [`ecdn_policy::Cache`] — the same
//! code the node runs — and measures object and byte miss ratios, per-window time series and the
//! admission parameter over time. [`sweep`] runs many (policy, size) pairs on all cores, each
//! streaming the trace with constant memory ([`pool`] is the work queue every sweep runs on).
//!
//! Byte sums are `u128`: the sum of a trace's sizes can pass `u64::MAX` (sizes up to `u64::MAX`
//! each), and a wrapped or panicking counter would be worse than a wide one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use ecdn_policy::{Cache, PolicySpec};
use ecdn_trace::{Request, RequestReader, TraceError, BATCH};
use serde::Serialize;

pub mod bounds;
pub mod cluster;
pub mod cluster_sweep;
pub mod model_check;
pub mod pool;
mod protection;
pub mod stack_distance;
pub mod unavailability;

/// How much of the trace warms the cache before measuring.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Warmup {
    /// The first n requests.
    Requests(u64),
    /// A fraction of the trace (needs the trace's length).
    Fraction(f64),
}

impl Warmup {
    /// Parses `100000` (requests) or `0.1` / `10%` (fraction of the trace).
    pub fn parse(s: &str) -> Result<Warmup, String> {
        let t = s.trim();
        if let Some(p) = t.strip_suffix('%') {
            let v: f64 = p
                .trim()
                .parse()
                .map_err(|_| format!("invalid warmup {s:?}"))?;
            if !(0.0..100.0).contains(&v) {
                return Err(format!("warmup {s:?} must be in [0%, 100%)"));
            }
            return Ok(Warmup::Fraction(v / 100.0));
        }
        if let Ok(n) = t.replace('_', "").parse::<u64>() {
            return Ok(Warmup::Requests(n));
        }
        match t.parse::<f64>() {
            Ok(v) if (0.0..1.0).contains(&v) => Ok(Warmup::Fraction(v)),
            _ => Err(format!(
                "invalid warmup {s:?}: a request count (100000) or a fraction (0.1 or 10%)"
            )),
        }
    }

    /// Number of warm-up requests for a trace of `total` requests.
    pub fn requests(self, total: Option<u64>) -> Result<u64, String> {
        match self {
            Warmup::Requests(n) => Ok(n),
            Warmup::Fraction(f) => total
                .map(|t| (t as f64 * f).floor() as u64)
                .ok_or_else(|| "a fractional warmup needs the trace length".to_string()),
        }
    }
}

/// Simulation settings shared by every job of a sweep.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Requests that warm the cache and are not counted.
    pub warmup: u64,
    /// Record a time-series point every this many requests (0: none).
    pub series_every: u64,
    /// Seed of the randomised policies: admission coin flips, and the eviction policies that
    /// draw (Hyperbolic's samples, LeCaR's choice of expert, LHD's samples; for LHD, 0 draws
    /// what a fresh libCacheSim process draws).
    pub seed: u64,
    /// Stop after this many requests (0: whole trace).
    pub max_requests: u64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            warmup: 0,
            series_every: 0,
            seed: 1,
            max_requests: 0,
        }
    }
}

/// Counters of one measured interval.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Counters {
    pub requests: u64,
    pub hits: u64,
    pub bytes: u128,
    pub hit_bytes: u128,
}

impl Counters {
    #[inline]
    fn add(&mut self, req: &Request, hit: bool) {
        self.requests += 1;
        self.bytes += u128::from(req.size);
        if hit {
            self.hits += 1;
            self.hit_bytes += u128::from(req.size);
        }
    }

    pub fn miss_ratio(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            1.0 - self.hits as f64 / self.requests as f64
        }
    }

    pub fn byte_miss_ratio(&self) -> f64 {
        if self.bytes == 0 {
            0.0
        } else {
            1.0 - self.hit_bytes as f64 / self.bytes as f64
        }
    }
}

/// One point of the per-window time series.
#[derive(Clone, Debug, Serialize)]
pub struct WindowPoint {
    /// Index of the first request after the window (counting warm-up).
    pub end: u64,
    pub requests: u64,
    pub miss_ratio: f64,
    pub byte_miss_ratio: f64,
    /// The admission parameter c at the window's end, if the policy has one.
    pub c: Option<f64>,
    pub used_bytes: u64,
}

/// What one (policy, cache size) simulation measured.
#[derive(Clone, Debug, Serialize)]
pub struct SimResult {
    pub policy: String,
    pub cache_size: u64,
    /// Measured requests (after warm-up).
    pub requests: u64,
    pub warmup: u64,
    pub hits: u64,
    pub miss_ratio: f64,
    pub byte_miss_ratio: f64,
    pub object_hit_ratio: f64,
    pub byte_hit_ratio: f64,
    pub bytes: u128,
    pub hit_bytes: u128,
    /// Objects cached at the end and the eviction policy's heap metadata for them.
    pub cached_objects: usize,
    pub policy_heap_bytes: usize,
    /// Objects the admission policy keeps statistics for, and the heap bytes of its state.
    pub admission_tracked: usize,
    /// Guarded admission (AdaptSize): windows in which the guard overruled the model, and
    /// windows ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guard_overruled: Option<(u64, u64)>,
    pub admission_heap_bytes: usize,
    pub elapsed_s: f64,
    pub requests_per_s: f64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<WindowPoint>,
    /// `(request index, c)` each time the admission policy re-tuned c.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub c_history: Vec<(u64, f64)>,
}

/// Errors of a simulation.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error("{0}")]
    Config(String),
}

/// Whether a batch says when ids come back: some request has a next access, or no id repeats.
fn carries_next_access(batch: &[Request]) -> bool {
    if batch.iter().any(|r| r.next_access >= 0) {
        return true;
    }
    let mut seen = std::collections::HashSet::with_capacity(batch.len());
    batch.iter().all(|r| seen.insert(r.id))
}

/// Runs one simulation over `reader`. `progress` is called with the number of requests just
/// processed, about every batch.
pub fn simulate(
    reader: &mut dyn RequestReader,
    spec: &PolicySpec,
    cache_size: u64,
    cfg: &SimConfig,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<SimResult, SimError> {
    let mut cache = spec.build(cache_size, cfg.seed);
    let start = Instant::now();
    let mut run = Run {
        cache: &mut cache,
        cfg,
        index: 0,
        total: Counters::default(),
        window: Counters::default(),
        series: Vec::new(),
    };
    let limit = if cfg.max_requests == 0 {
        u64::MAX
    } else {
        cfg.max_requests
    };
    let mut buf: Vec<Request> = Vec::with_capacity(BATCH);
    // An offline eviction policy (Belady) needs each request's next access: refuse a trace
    // whose first batch repeats an id without saying when.
    let mut check_future = run.cache.eviction().offline();
    match run.cache.lookahead() {
        None => loop {
            let want = (limit - run.index).min(BATCH as u64) as usize;
            if want == 0 || reader.read_batch(&mut buf, want)? == 0 {
                break;
            }
            if std::mem::take(&mut check_future) && !carries_next_access(&buf) {
                return Err(SimError::Config(format!(
                    "{}: the eviction policy needs each request's next access, which this \
                     trace does not carry (use an oracleGeneral trace: `ecdn trace convert`)",
                    spec.label
                )));
            }
            run.process(&buf);
            progress(buf.len() as u64);
        },
        Some(w) => {
            // Offline policies see each window before it is replayed.
            let mut window: Vec<Request> = Vec::with_capacity(w);
            loop {
                window.clear();
                while window.len() < w {
                    let want = (limit - run.index - window.len() as u64)
                        .min((w - window.len()).min(BATCH) as u64)
                        as usize;
                    if want == 0 || reader.read_batch(&mut buf, want)? == 0 {
                        break;
                    }
                    window.extend_from_slice(&buf);
                }
                if window.is_empty() {
                    break;
                }
                run.cache.prepare_window(&window);
                for chunk in window.chunks(BATCH) {
                    run.process(chunk);
                    progress(chunk.len() as u64);
                }
            }
        }
    }
    let Run {
        total,
        series,
        index,
        ..
    } = run;
    let elapsed = start.elapsed().as_secs_f64();
    Ok(SimResult {
        policy: spec.label.clone(),
        cache_size,
        requests: total.requests,
        warmup: cfg.warmup.min(index),
        hits: total.hits,
        miss_ratio: total.miss_ratio(),
        byte_miss_ratio: total.byte_miss_ratio(),
        object_hit_ratio: 1.0 - total.miss_ratio(),
        byte_hit_ratio: 1.0 - total.byte_miss_ratio(),
        bytes: total.bytes,
        hit_bytes: total.hit_bytes,
        cached_objects: cache.eviction().len(),
        policy_heap_bytes: cache.eviction().heap_bytes(),
        admission_tracked: cache.admission().map_or(0, |a| a.tracked()),
        guard_overruled: cache.admission().and_then(|a| a.overruled()),
        admission_heap_bytes: cache.admission().map_or(0, |a| a.heap_bytes()),
        elapsed_s: elapsed,
        requests_per_s: if elapsed > 0.0 {
            index as f64 / elapsed
        } else {
            0.0
        },
        series,
        c_history: cache
            .admission()
            .map(|a| a.history().to_vec())
            .unwrap_or_default(),
    })
}

struct Run<'a> {
    cache: &'a mut Cache,
    cfg: &'a SimConfig,
    index: u64,
    total: Counters,
    window: Counters,
    series: Vec<WindowPoint>,
}

impl Run<'_> {
    #[inline]
    fn process(&mut self, reqs: &[Request]) {
        // Fast path: past the warm-up and no time series.
        if self.index >= self.cfg.warmup && self.cfg.series_every == 0 {
            for req in reqs {
                let hit = self.cache.access(req).is_hit();
                self.total.add(req, hit);
            }
            self.cache.clear_evicted();
            self.index += reqs.len() as u64;
            return;
        }
        for req in reqs {
            let hit = self.cache.access(req).is_hit();
            self.index += 1;
            if self.index > self.cfg.warmup {
                self.total.add(req, hit);
            }
            if self.cfg.series_every > 0 {
                self.window.add(req, hit);
                if self.index.is_multiple_of(self.cfg.series_every) {
                    self.push_point();
                }
            }
        }
        self.cache.clear_evicted();
    }

    fn push_point(&mut self) {
        let w = std::mem::take(&mut self.window);
        self.series.push(WindowPoint {
            end: self.index,
            requests: w.requests,
            miss_ratio: w.miss_ratio(),
            byte_miss_ratio: w.byte_miss_ratio(),
            c: self.cache.admission().and_then(|a| a.parameter()),
            used_bytes: self.cache.used(),
        });
    }
}

/// One job of a sweep.
#[derive(Clone, Debug)]
pub struct Job {
    pub spec: PolicySpec,
    pub cache_size: u64,
}

/// Runs every job on up to `threads` threads; each job opens its own reader with `open`.
/// `progress` receives processed-request counts from all jobs. Results come back in job order.
pub fn sweep<F>(
    jobs: &[Job],
    open: F,
    cfg: &SimConfig,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Vec<Result<SimResult, SimError>>
where
    F: Fn() -> Result<Box<dyn RequestReader>, TraceError> + Sync,
{
    pool::run_jobs(jobs, threads, progress, |job, progress| {
        let mut reader = open()?;
        simulate(&mut *reader, &job.spec, job.cache_size, cfg, progress)
    })
}

/// Counts the requests of a trace (one streaming pass).
pub fn count_requests(reader: &mut dyn RequestReader) -> Result<u64, TraceError> {
    let mut buf = Vec::with_capacity(BATCH);
    let mut n = 0;
    loop {
        let got = reader.read_batch(&mut buf, BATCH)?;
        if got == 0 {
            return Ok(n);
        }
        n += got as u64;
    }
}

/// A shared request counter for progress bars.
#[derive(Default)]
pub struct ProgressCounter(pub AtomicU64);

impl ProgressCounter {
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}
