//! `ecdn sim`: trace-driven simulation.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use ecdn_policy::spec::AdmissionSpec;
use ecdn_policy::PolicySpec;
use ecdn_sim::model_check::Estimator;
use ecdn_sim::{sweep, Job, SimConfig, SimResult, Warmup};
use ecdn_trace::units::{format_size, parse_size};
use ecdn_trace::{OpenOptions, RequestReader};

use ecdn_lab::args::{ReportArgs, ThreadsArg, TraceArgs};
use ecdn_lab::plot;

#[derive(Subcommand)]
pub enum SimCmd {
    /// Simulate cache policies over a trace, for every (policy, size) pair, on all cores.
    #[command(after_help = "Examples:\n  \
        ecdn sim cache --trace tests/data/cloudPhysicsIO.oracleGeneral.bin --policy lru,fifo --size 1MiB,16MiB,256MiB\n  \
        ecdn sim cache --trace web.bin --policy lru,adaptsize,size-opt,lru+threshold:64KiB --size 64MiB,1GiB --warmup 10% --plot mr.png\n\n\
        Policies are EVICTION[+ADMISSION[:ARG]...]: evictions lru, fifo, s4lru, gdsf, lfuda, clock, sieve,\n\
        s3fifo, 2q, arc, lirs, wtinylfu, lhd, hyperbolic, lecar, and offline belady (oracleGeneral traces);\n\
        admissions threshold:SIZE, freq:N, lrus[:REF], exp:C, hillclimb, adaptsize[:window=N:smoothing=B], size-opt[:window=N].\n\
        An admission alone (adaptsize, hillclimb, size-opt, static:SIZE) means LRU with it.")]
    Cache(CacheArgs),
    /// Simulate a C2DN cache cluster: replication and erasure-coding schemes, parity rebalance,
    /// server unavailability.
    Cluster(Box<crate::cluster_cmd::ClusterArgs>),
    /// Compare AdaptSize's model with measurement: predicted vs simulated OHR for a grid of c.
    #[command(
        after_help = "Example:\n  ecdn sim model --trace web.bin --size 64MiB --warmup 50% --plot model.png"
    )]
    Model(ModelArgs),
    /// Offline bounds (Berger et al., SIGMETRICS '18): PFOO-L, the lowest miss and byte miss
    /// ratio any cache of each size could have on the trace, and PFOO-U, those of a schedule
    /// such a cache can run; OPT lies between them.
    #[command(after_help = "Example:\n  \
        ecdn sim bounds --trace tests/data/cloudPhysicsIO.oracleGeneral.bin --size 1MiB,16MiB,256MiB")]
    Bounds(BoundsArgs),
}

#[derive(Args)]
pub struct BoundsArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// Comma-separated cache sizes, e.g. 64MiB,1GiB (binary units).
    #[arg(long, short = 's')]
    size: String,
    /// Print one JSON object per bound and size instead of a table.
    #[arg(long)]
    json: bool,
    /// PFOO-U's window: intervals decided together by a min-cost flow (0: the greedy
    /// schedule alone).
    #[arg(long, default_value_t = ecdn_sim::bounds::WINDOW)]
    window: usize,
}

#[derive(Args)]
pub struct CacheArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// Comma-separated policies, e.g. lru,fifo,adaptsize.
    #[arg(long, short = 'p', default_value = "lru")]
    policy: String,
    /// Comma-separated cache sizes, e.g. 64MiB,1GiB (binary units).
    #[arg(long, short = 's')]
    size: String,
    /// Warm-up before measuring: a request count (100000) or a fraction (0.1 or 10%).
    #[arg(long, default_value = "0")]
    warmup: String,
    /// Record a per-window time series every N requests.
    #[arg(long, value_name = "N")]
    series: Option<u64>,
    /// Stop after N requests.
    #[arg(long, value_name = "N")]
    max_requests: Option<u64>,
    /// Seed of the randomised policies (admission coin flips, Hyperbolic's and LHD's samples,
    /// LeCaR's choice of expert; for LHD, 0 draws what a fresh libCacheSim process draws).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    threads: ThreadsArg,
    #[command(flatten)]
    report: ReportArgs,
    /// Draw miss ratio vs cache size (PNG or SVG by extension). With AdaptSize among the
    /// policies, also FILE-STEM.adaptsize-model.EXT: the model's OHR-vs-c curve against the OHR
    /// measured at fixed c (middle cache size, first 4M requests, half of them warm-up).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Draw the per-window miss ratio and admission parameter c over time (implies a time
    /// series; without --series, 200 windows over the trace).
    #[arg(long, value_name = "FILE")]
    plot_series: Option<PathBuf>,
}

#[derive(Args)]
pub struct ModelArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// Cache size.
    #[arg(long, short = 's')]
    size: String,
    /// Warm-up: the model uses the requests of the measured part only.
    #[arg(long, default_value = "50%")]
    warmup: String,
    /// What the model learns from: each object's reuse gaps (AdaptSize's default) or its
    /// request count as a steady rate (the paper's model).
    #[arg(long, value_enum, default_value_t = EstimatorArg::Reuse)]
    estimator: EstimatorArg,
    /// Smallest c of the grid.
    #[arg(long, default_value = "1KiB")]
    c_min: String,
    /// Largest c of the grid.
    #[arg(long, default_value = "64MiB")]
    c_max: String,
    /// Grid points per doubling of c.
    #[arg(long, default_value_t = 1)]
    per_octave: u32,
    /// Read at most N requests.
    #[arg(long, value_name = "N")]
    max_requests: Option<u64>,
    /// Seed of admission coin flips and of randomised eviction (LHD; 0 draws what a fresh
    /// libCacheSim process draws).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    threads: ThreadsArg,
    /// One JSON object per line per c.
    #[arg(long)]
    json: bool,
    /// Draw predicted vs measured OHR against c.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
}

/// `sim model --estimator`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EstimatorArg {
    /// Reuse gaps.
    Reuse,
    /// Request rates.
    Rates,
}

pub fn run(cmd: SimCmd) -> Result<()> {
    match cmd {
        SimCmd::Cache(a) => run_cache(a),
        SimCmd::Model(a) => run_model(a),
        SimCmd::Cluster(a) => crate::cluster_cmd::run(*a),
        SimCmd::Bounds(a) => run_bounds(a),
    }
}

fn run_bounds(a: BoundsArgs) -> Result<()> {
    let sizes = parse_sizes(&a.size)?;
    let opts = a.trace.options()?;
    let pb = ecdn_lab::args::phase_spinner(ecdn_lab::args::progress_hidden(a.json, false));
    pb.set_message(format!("reading {}", a.trace.trace.display()));
    let mut reader = a.trace.open(&opts)?;
    let (mut reqs, mut batch) = (Vec::new(), Vec::new());
    while reader.read_batch(&mut batch, 1 << 16)? > 0 {
        reqs.extend_from_slice(&batch);
    }
    pb.set_message(format!(
        "PFOO-L over {} requests at {} sizes",
        reqs.len(),
        sizes.len()
    ));
    let started = std::time::Instant::now();
    let lower = ecdn_sim::bounds::pfoo_lower(&reqs, &sizes);
    let lower_secs = started.elapsed().as_secs_f64();
    pb.set_message(format!(
        "PFOO-U over {} requests at {} sizes",
        reqs.len(),
        sizes.len()
    ));
    let started = std::time::Instant::now();
    let upper = ecdn_sim::bounds::pfoo_upper_windowed(&reqs, &sizes, a.window);
    let upper_secs = started.elapsed().as_secs_f64();
    pb.finish_and_clear();
    if a.json {
        for (name, bounds, secs) in [
            ("pfoo-l", &lower, lower_secs),
            ("pfoo-u", &upper, upper_secs),
        ] {
            for b in bounds {
                outln!(
                    "{{\"bound\":\"{name}\",\"size\":{},\"requests\":{},\"miss_ratio\":{},\"byte_miss_ratio\":{},\"seconds\":{secs}}}",
                    b.capacity,
                    reqs.len(),
                    b.miss_ratio,
                    b.byte_miss_ratio
                )?;
            }
        }
    } else {
        outln!(
            "Over {} requests, OPT lies between PFOO-L ({lower_secs:.2} s: no cache misses \
             less) and PFOO-U ({upper_secs:.2} s: a schedule such a cache can run)",
            reqs.len()
        )?;
        outln!(
            "{:>10} {:>10} {:>10} {:>10} {:>10}",
            "size",
            "miss ≥",
            "miss ≤",
            "bytes ≥",
            "bytes ≤"
        )?;
        for (l, u) in lower.iter().zip(&upper) {
            outln!(
                "{:>10} {:>10.4} {:>10.4} {:>10.4} {:>10.4}",
                format_size(l.capacity),
                l.miss_ratio,
                u.miss_ratio,
                l.byte_miss_ratio,
                u.byte_miss_ratio
            )?;
        }
    }
    Ok(())
}

pub(crate) fn parse_sizes(s: &str) -> Result<Vec<u64>> {
    let sizes: Vec<u64> = s
        .split(',')
        .filter(|x| !x.trim().is_empty())
        .map(|x| parse_size(x).map_err(anyhow::Error::msg))
        .collect::<Result<_>>()?;
    if sizes.is_empty() {
        bail!("--size needs at least one cache size, e.g. 64MiB");
    }
    if sizes.contains(&0) {
        bail!("cache size must be positive");
    }
    Ok(sizes)
}

fn run_cache(a: CacheArgs) -> Result<()> {
    let specs = PolicySpec::parse_list(&a.policy).map_err(anyhow::Error::msg)?;
    if specs.is_empty() {
        bail!("--policy needs at least one policy");
    }
    let sizes = parse_sizes(&a.size)?;
    let opts = a.trace.options()?;
    // Fail early, with the file's own error, if the trace cannot be opened.
    a.trace.open(&opts)?;
    let warmup = Warmup::parse(&a.warmup).map_err(anyhow::Error::msg)?;
    let len = match warmup {
        Warmup::Fraction(_) => Some(a.trace.len(&opts)?),
        Warmup::Requests(_) => a.trace.cheap_len(&opts),
    };
    let series_every = match (a.series, &a.plot_series) {
        (Some(0), _) => bail!("--series must be positive"),
        (Some(n), _) => n,
        (None, Some(_)) => {
            let len = match len {
                Some(l) => l,
                None => a.trace.len(&opts)?,
            };
            let len = a.max_requests.map_or(len, |m| len.min(m));
            (len / 200).max(1)
        }
        (None, None) => 0,
    };
    let cfg = SimConfig {
        warmup: warmup.requests(len).map_err(anyhow::Error::msg)?,
        series_every,
        seed: a.seed,
        max_requests: a.max_requests.unwrap_or(0),
    };
    let jobs: Vec<Job> = specs
        .iter()
        .flat_map(|s| {
            sizes.iter().map(|&z| Job {
                spec: s.clone(),
                cache_size: z,
            })
        })
        .collect();
    let per_job = match (len, a.max_requests) {
        (Some(l), Some(m)) => Some(l.min(m)),
        (Some(l), None) => Some(l),
        (None, m) => m,
    };
    let pb = a
        .report
        .progress_bar(per_job.map(|l| l * jobs.len() as u64));
    let results = sweep(&jobs, || a.trace.open(&opts), &cfg, a.threads.get(), &|n| {
        pb.inc(n)
    });
    pb.finish_and_clear();
    let mut ok: Vec<SimResult> = Vec::new();
    for r in results {
        ok.push(r.context("simulation failed")?);
    }
    let mut out = std::io::stdout().lock();
    if a.report.json {
        for r in &ok {
            writeln!(out, "{}", serde_json::to_string(r)?)?;
        }
    } else {
        print_table(&mut out, &ok)?;
    }
    out.flush()?;
    if let Some(p) = &a.plot {
        plot::miss_ratio_vs_size(p, &ok)?;
        eprintln!("wrote {}", p.display());
        if specs
            .iter()
            .any(|s| matches!(s.admission, Some(AdmissionSpec::AdaptSize { .. })))
        {
            adaptsize_model_plot(&a, &opts, &sizes, p)?;
        }
    }
    if let Some(p) = &a.plot_series {
        plot::series(p, &ok)?;
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}

fn print_table(out: &mut impl Write, rs: &[SimResult]) -> Result<()> {
    let w = rs.iter().map(|r| r.policy.len()).max().unwrap_or(6).max(6);
    writeln!(
        out,
        "{:<w$}  {:>10}  {:>11}  {:>10}  {:>10}  {:>6}  {:>10}",
        "policy", "cache_size", "requests", "miss_ratio", "byte_miss", "OHR", "req/s"
    )?;
    for r in rs {
        writeln!(
            out,
            "{:<w$}  {:>10}  {:>11}  {:>10.4}  {:>10.4}  {:>6.4}  {:>9.2}M",
            r.policy,
            format_size(r.cache_size),
            r.requests,
            r.miss_ratio,
            r.byte_miss_ratio,
            r.object_hit_ratio,
            r.requests_per_s / 1e6
        )?;
    }
    Ok(())
}

/// Reads at most `max` requests into memory.
fn read_prefix(reader: &mut dyn RequestReader, max: u64) -> Result<Vec<ecdn_trace::Request>> {
    let mut all = Vec::new();
    let mut buf = Vec::with_capacity(ecdn_trace::BATCH);
    while (all.len() as u64) < max {
        let want = (max - all.len() as u64).min(ecdn_trace::BATCH as u64) as usize;
        if reader.read_batch(&mut buf, want)? == 0 {
            break;
        }
        all.extend_from_slice(&buf);
    }
    Ok(all)
}

/// c values from `c_min` to `c_max`, `per_octave` per doubling.
fn c_grid(c_min: f64, c_max: f64, per_octave: u32) -> Vec<f64> {
    let step = 1.0 / per_octave.max(1) as f64;
    let mut cs = Vec::new();
    let mut lc = c_min.log2();
    while lc <= c_max.log2() + 1e-9 {
        cs.push(lc.exp2());
        lc += step;
    }
    cs
}

/// Requests the AdaptSize model plot of `sim cache --plot` reads at most.
const MODEL_PLOT_REQUESTS: u64 = 4_000_000;

/// For `sim cache --plot` with AdaptSize among the policies: the model's OHR-vs-c curve against
/// the OHR measured at fixed c (1 KiB to 64 MiB), at the middle cache size, on the first
/// [`MODEL_PLOT_REQUESTS`] requests (the first half warms the cache), next to the main plot.
fn adaptsize_model_plot(
    a: &CacheArgs,
    opts: &OpenOptions,
    sizes: &[u64],
    plot: &Path,
) -> Result<()> {
    let mut reader = a.trace.open(opts)?;
    let reqs = read_prefix(&mut *reader, MODEL_PLOT_REQUESTS)?;
    let capacity = sizes[sizes.len() / 2];
    let cs = c_grid(1024.0, (64u64 << 20) as f64, 1);
    let points = ecdn_sim::model_check::model_vs_measured(
        &reqs,
        reqs.len() / 2,
        capacity,
        &cs,
        a.seed,
        a.threads.get(),
        Estimator::Reuse,
    )?;
    let stem = plot.file_stem().unwrap_or_default().to_string_lossy();
    let ext = plot.extension().unwrap_or_default().to_string_lossy();
    let path = plot.with_file_name(format!("{stem}.adaptsize-model.{ext}"));
    plot::model_curve(&path, &points, capacity)?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

fn run_model(a: ModelArgs) -> Result<()> {
    let capacity = parse_size(&a.size).map_err(anyhow::Error::msg)?;
    let c_min = parse_size(&a.c_min).map_err(anyhow::Error::msg)?.max(1) as f64;
    let c_max = parse_size(&a.c_max).map_err(anyhow::Error::msg)? as f64;
    if c_max < c_min {
        bail!("--c-max must be at least --c-min");
    }
    let opts = a.trace.options()?;
    let mut reader = a.trace.open(&opts)?;
    let reqs = read_prefix(&mut *reader, a.max_requests.unwrap_or(u64::MAX))?;
    let warmup = Warmup::parse(&a.warmup)
        .map_err(anyhow::Error::msg)?
        .requests(Some(reqs.len() as u64))
        .map_err(anyhow::Error::msg)? as usize;
    let cs = c_grid(c_min, c_max, a.per_octave);
    let points = ecdn_sim::model_check::model_vs_measured(
        &reqs,
        warmup,
        capacity,
        &cs,
        a.seed,
        a.threads.get(),
        match a.estimator {
            EstimatorArg::Reuse => Estimator::Reuse,
            EstimatorArg::Rates => Estimator::Rates,
        },
    )?;
    let mut out = std::io::stdout().lock();
    let max_err = points
        .iter()
        .map(|p| (p.predicted_ohr - p.measured_ohr).abs())
        .fold(0.0, f64::max);
    if a.json {
        for p in &points {
            writeln!(out, "{}", serde_json::to_string(p)?)?;
        }
    } else {
        writeln!(
            out,
            "{:>10}  {:>10}  {:>10}  {:>7}",
            "c", "predicted", "measured", "error"
        )?;
        for p in &points {
            writeln!(
                out,
                "{:>10}  {:>10.4}  {:>10.4}  {:>+7.4}",
                format_size(p.c as u64),
                p.predicted_ohr,
                p.measured_ohr,
                p.predicted_ohr - p.measured_ohr
            )?;
        }
        writeln!(out, "max |error| = {max_err:.4}")?;
    }
    out.flush()?;
    if let Some(p) = &a.plot {
        plot::model_curve(p, &points, capacity)?;
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}
