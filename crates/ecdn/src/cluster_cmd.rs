//! `ecdn sim cluster`: the C2DN cluster simulator on a trace.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use ecdn_placement::{Budget, Stability, Weigh};
use ecdn_policy::spec::EvictionKind;
use ecdn_sim::cluster::{ClusterConfig, ClusterResult, Scheme, UnavailabilityResult};
use ecdn_sim::cluster_sweep::{sweep, ClusterSweep, SchemeCode};
use ecdn_sim::unavailability::{FailEvent, Unavailability, Window};
use ecdn_trace::units::{format_size, parse_seconds, parse_size};

use ecdn_lab::args::{ReportArgs, ThreadsArg, TraceArgs};
use ecdn_lab::plot;

#[derive(Args)]
#[command(after_help = "Examples:\n  \
    ecdn sim cluster --trace d-2.oracleGeneral.bin.zst --scheme no-rep,rep2,c2dn-norebal,c2dn --size 1%,10%,30%\n  \
    ecdn sim cluster --trace d-2.oracleGeneral.bin.zst --scheme no-rep,rep2,c2dn --size 10% --window 50000 --fail 3@1000s\n  \
    ecdn sim cluster --trace t.bin --scheme rep2,rep3,c2dn-n5k3,c2dn-n6k3 --size 10% --fail 1@1000s --fail 4@1000s\n\n\
    Schemes: no-rep, rep2, rep3, rep2-popular, c2dn-norebal, c2dn; a coded scheme may name its code,\n\
    e.g. c2dn-n5k3 (K = 3 data + 2 parity chunks). Sizes are the total cluster capacity, in bytes\n\
    (64GiB) or as a percentage of the trace's unique bytes (10%). Runs with unavailability
    simulate every (scheme, size) twice, with and without it.")]
pub struct ClusterArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// Comma-separated schemes.
    #[arg(long, default_value = "c2dn")]
    scheme: String,
    /// Comma-separated total cluster capacities: bytes (64GiB) or % of unique bytes (10%).
    #[arg(long, short = 's')]
    size: String,
    /// Number of servers.
    #[arg(long, default_value_t = 10)]
    servers: usize,
    /// Comma-separated server weights (relative capacities); default all equal.
    #[arg(long)]
    weights: Option<String>,
    /// Eviction policy of every server's cache.
    #[arg(long, default_value = "fifo")]
    eviction: String,
    /// Data chunks of coded schemes (unless the scheme names its code).
    #[arg(long, default_value_t = 3)]
    k: usize,
    /// Parity chunks of coded schemes (unless the scheme names its code).
    #[arg(long, default_value_t = 1)]
    p: usize,
    /// Objects larger than this are coded.
    #[arg(long, default_value = "128KiB")]
    threshold: String,
    /// Objects larger than this are cached as range slices of this size, each a cache object
    /// of its own (its own bucket, coded or replicated on its own), as Traffic Server's slice
    /// plugin and nginx's slice module cache large files; 0 slices nothing. The default is the
    /// cluster file's `slice_size`.
    #[arg(long, default_value = "4MiB")]
    slice: String,
    /// Coded schemes: a chunk the policy evicts takes the object's other chunks with it, from
    /// every available server, once the object being written has all its pieces (an object
    /// leaves whole, not a chunk at a time; the cluster file's `evict_together`); only an
    /// eviction from the server the map assigns the piece counts: true or false. On by
    /// default, as the cluster file's; measured in BENCHMARKS.md (issue 63).
    #[arg(long, value_name = "BOOL", default_value_t = ecdn_placement::pieces::EVICT_TOGETHER, action = clap::ArgAction::Set)]
    evict_together: bool,
    /// Resync (beyond C2DN): a read that writes back a piece its object lacks also rewrites
    /// the pieces it found on the object's assigned servers when the oldest has more than this
    /// fraction of its server's FIFO written after it (e.g. 0.5), so the pieces leave together
    /// again (`c2dn` only; the cluster file's `resync`, the same rule); off writes only the
    /// lacking pieces. Measured in BENCHMARKS.md (issue 63).
    #[arg(long, value_name = "FRACTION|off", default_value = "0.5")]
    resync: String,
    /// Reinsertion (beyond C2DN; every scheme, an eviction change): a hit that finds every
    /// piece of its object rewrites them all when the oldest has more than this fraction of its
    /// server's FIFO written after it (FIFO with reinsertion, the object's pieces at once; the
    /// cluster file's `reinsert`, the same rule; default, as the cluster file's, 0.9). Measured
    /// in BENCHMARKS.md (issue 63).
    #[arg(long, value_name = "FRACTION|off", default_value = "0.9")]
    reinsert: String,
    /// Sub-chunk size of the coding: the object bytes a partial hit fetches for a missing data
    /// chunk depend on it in the last stripe (as in a live cluster file's `sub_chunk`).
    #[arg(long, default_value = "32KiB")]
    sub_chunk: String,
    /// Buckets objects are hashed to (C2DN: "100s" for a 10-server cluster).
    #[arg(long, default_value_t = 100)]
    buckets: usize,
    /// Periodic parity rebalance every SECONDS of trace time (c2dn; 0 never). Parity is also
    /// rebalanced on every availability change (C2DN §4.2, §5, the paper's only ones), as the
    /// live cluster does; the default hour is the cluster file's `rebalance_every_s` (measured
    /// in BENCHMARKS.md, issue 63).
    #[arg(long, default_value = "3600s", value_name = "SECONDS")]
    rebalance_every: String,
    /// One load-based parity rebalance at SECONDS of trace time (c2dn; App. 10.3's initial
    /// Phase 2 once write loads are known); periodic ones follow every --rebalance-every.
    /// Default: a tenth of --rebalance-every, none when it is 0.
    #[arg(long, value_name = "SECONDS")]
    rebalance_at: Option<String>,
    /// What parity rebalance balances: counts (every data and parity chunk bucket weighs 1,
    /// as the authors' simulator and prototype do) or loads (the bytes written since the last
    /// rebalance, Algorithm 1 as §4.2 states it; counts until any are recorded). Loads by
    /// default, as the cluster file's `weigh`: counts balance only where every bucket writes
    /// alike (not on tc-0 or eu-7).
    #[arg(long, default_value = "loads")]
    weigh: String,
    /// Parity rebalance stability: off (Algorithm 1 as published), keep (stay on the current
    /// server when it has flow), steer (also steer the flow to current servers).
    #[arg(long, default_value = "steer")]
    stability: String,
    /// Parity rebalance budgets: paper (⌈W/|A|⌉ − l_i) or water (water-filled level).
    #[arg(long, default_value = "water")]
    budget: String,
    /// Parity rebalance carries the write imbalance so far into the next period, up to this
    /// fraction of a period's mean per-server load; 0 is the paper's inputs. 1 by default, as
    /// the cluster file's `carry`.
    #[arg(long, default_value_t = 1.0)]
    carry: f64,
    /// Periodic parity rebalances move nothing while the write imbalance so far is at most
    /// 1 + this; 0 rebalances every period. 0.02 by default, as the cluster file's `hold`.
    #[arg(long, default_value_t = f64::from(ecdn_placement::rebalance::HOLD_PPM) / 1e6)]
    hold: f64,
    /// Background repair (c2dn, beyond the paper): bytes per second of trace time each server
    /// may write to rebuild the chunks (and replicas) the objects it serves lost, most
    /// requested first (e.g. 512KiB); 0, the default, turns it off. The live nodes' rules
    /// (`repair_rate` in the cluster file). Measured in BENCHMARKS.md.
    #[arg(long, default_value = "0", value_name = "BYTES")]
    repair_rate: String,
    /// Trace seconds between repair rounds.
    #[arg(long, default_value = "60s", value_name = "SECONDS")]
    repair_every: String,
    /// Only objects requested at least N times so far are repaired.
    #[arg(long, default_value_t = 2, value_name = "N")]
    repair_min_requests: u32,
    /// Only objects whose oldest cached piece has less than this fraction of its server's
    /// FIFO written after it are repaired: older ones are at the end of their life.
    #[arg(long, default_value_t = 0.5, value_name = "FRACTION")]
    repair_max_age: f64,
    /// Objects a server looks at per repair round: its most requested.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    repair_scan: usize,
    /// rep2-popular: an object is popular from its N-th request on.
    #[arg(long, default_value_t = 2)]
    popular_min: u32,
    /// Unavailability record: one line per window, the ids of the unavailable servers (comma- or space-separated).
    #[arg(long, value_name = "FILE")]
    unavailability: Option<PathBuf>,
    /// Window of the record and of the per-window series: trace time (300s) or requests (50000).
    #[arg(long, default_value = "300s")]
    window: String,
    /// A server unavailable from SECONDS on (or SERVER@START-END); repeatable.
    #[arg(long, value_name = "SERVER@SECONDS")]
    fail: Vec<String>,
    /// Windows after an unavailability starts in which the spike is measured.
    #[arg(long, default_value_t = 6)]
    spike_windows: usize,
    /// Stop after N requests.
    #[arg(long, value_name = "N")]
    max_requests: Option<u64>,
    /// Seed of the placement hashes.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    threads: ThreadsArg,
    #[command(flatten)]
    report: ReportArgs,
    /// Draw the C2DN figures (PNG or SVG by extension): miss ratios, unprotected fraction and
    /// write imbalance against cache size (Fig. 5, 6b–d) into FILE; with unavailability also
    /// FILE-STEM.spike.EXT (relative miss-ratio change per window, Fig. 6a/7) and
    /// FILE-STEM.series.EXT (the whole run).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Windows after the unavailability shown in the spike plot.
    #[arg(long, default_value_t = 20)]
    plot_windows: usize,
}

pub fn run(a: ClusterArgs) -> Result<()> {
    if a.servers == 0 || a.servers > MAX_SERVERS {
        bail!("--servers must be between 1 and {MAX_SERVERS}");
    }
    let weights = match &a.weights {
        Some(w) => {
            let v: Vec<f64> = w
                .split(',')
                .map(|x| x.trim().parse::<f64>())
                .collect::<Result<_, _>>()
                .context("--weights: expected comma-separated numbers")?;
            if v.len() != a.servers {
                bail!("--weights has {} values for {} servers", v.len(), a.servers);
            }
            v
        }
        None => vec![1.0; a.servers],
    };
    let eviction = EvictionKind::parse(&a.eviction).map_err(anyhow::Error::msg)?;
    let schemes: Vec<SchemeCode> = a
        .scheme
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| SchemeCode::parse(s, a.k, a.p).map_err(anyhow::Error::msg))
        .collect::<Result<_>>()?;
    if schemes.is_empty() {
        bail!("--scheme needs at least one scheme");
    }
    let opts = a.trace.options()?;
    a.trace.open(&opts)?;
    // Sizes: absolute, or a share of the unique bytes (one statistics pass).
    let mut unique: Option<u64> = None;
    let mut sizes = Vec::new();
    for s in a.size.split(',').filter(|s| !s.trim().is_empty()) {
        let bytes = if let Some(pct) = s.trim().strip_suffix('%') {
            let pct: f64 = pct
                .trim()
                .parse()
                .with_context(|| format!("--size {s:?}: bad percentage"))?;
            if !(pct > 0.0 && pct <= 1000.0) {
                bail!("--size {s:?}: percentage out of range");
            }
            let u = match unique {
                Some(u) => u,
                None => {
                    let mut r = a.trace.open(&opts)?;
                    let st = ecdn_trace::TraceStats::compute(&mut *r)?;
                    unique = Some(st.unique_bytes);
                    st.unique_bytes
                }
            };
            (u as f64 * pct / 100.0) as u64
        } else {
            parse_size(s).map_err(anyhow::Error::msg)?
        };
        if bytes == 0 {
            bail!("--size {s:?} is zero bytes");
        }
        sizes.push(bytes);
    }
    if sizes.is_empty() {
        bail!("--size needs at least one size");
    }
    let window = Window::parse(&a.window).map_err(anyhow::Error::msg)?;
    let mut unavailability = Unavailability {
        window: Some(window),
        ..Unavailability::default()
    };
    if let Some(f) = &a.unavailability {
        unavailability.record =
            Unavailability::read_record(f, a.servers).map_err(anyhow::Error::msg)?;
    }
    for f in &a.fail {
        let e = FailEvent::parse(f).map_err(anyhow::Error::msg)?;
        if e.server >= a.servers {
            bail!("--fail {f:?}: server {} does not exist", e.server);
        }
        unavailability.events.push(e);
    }
    let rebalance_every =
        parse_seconds(&a.rebalance_every).map_err(|e| anyhow::anyhow!("--rebalance-every: {e}"))?;
    let rebalance_at = a
        .rebalance_at
        .as_deref()
        .map(parse_seconds)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--rebalance-at: {e}"))?;
    let threshold = parse_size(&a.threshold).map_err(anyhow::Error::msg)?;
    let sub_chunk = parse_size(&a.sub_chunk).map_err(|e| anyhow::anyhow!("--sub-chunk: {e}"))?;
    if sub_chunk == 0 {
        bail!("--sub-chunk 0: need at least 1 byte");
    }
    let rebalance = ecdn_placement::RebalanceOptions {
        weigh: a.weigh.parse::<Weigh>().map_err(anyhow::Error::msg)?,
        stability: a
            .stability
            .parse::<Stability>()
            .map_err(anyhow::Error::msg)?,
        budget: a.budget.parse::<Budget>().map_err(anyhow::Error::msg)?,
        carry_ppm: if (0.0..=1.0).contains(&a.carry) {
            (a.carry * 1e6).round() as u32
        } else {
            bail!("invalid --carry {}: a fraction in [0, 1]", a.carry)
        },
        hold_ppm: if (0.0..=1.0).contains(&a.hold) {
            (a.hold * 1e6).round() as u32
        } else {
            bail!("invalid --hold {}: a fraction in [0, 1]", a.hold)
        },
    };
    // Everything but the scheme and the size; the sweep fills those in.
    let mut base = ClusterConfig::new(Scheme::C2dn, 0);
    base.weights = weights;
    base.eviction = eviction;
    base.threshold = threshold;
    base.evict_together = a.evict_together;
    base.resync = fifo_age("--resync", &a.resync)?;
    base.reinsert = fifo_age("--reinsert", &a.reinsert)?;
    base.slicing = ecdn_placement::slices::Slicing::new(
        parse_size(&a.slice).map_err(|e| anyhow::anyhow!("--slice: {e}"))?,
    )
    .map_err(|e| anyhow::anyhow!("--slice: {e}"))?;
    base.sub_chunk = sub_chunk;
    base.buckets = a.buckets;
    base.rebalance_every = rebalance_every;
    base.rebalance_at = rebalance_at;
    base.rebalance = rebalance;
    base.repair = ecdn_sim::cluster::RepairConfig {
        rate: parse_size(&a.repair_rate).map_err(|e| anyhow::anyhow!("--repair-rate: {e}"))?,
        every: parse_seconds(&a.repair_every)
            .map_err(|e| anyhow::anyhow!("--repair-every: {e}"))?,
        min_requests: a.repair_min_requests,
        max_age: a.repair_max_age,
        scan: a.repair_scan,
    };
    base.popular_min = a.popular_min;
    base.window = window;
    base.unavailability = unavailability;
    base.seed = a.seed;
    base.max_requests = a.max_requests.unwrap_or(0);
    let pb = a.report.progress_bar(None);
    let swept = sweep(
        &base,
        &schemes,
        &sizes,
        a.spike_windows,
        || a.trace.open(&opts),
        a.threads.get(),
        &|n| pb.inc(n),
    );
    pb.finish_and_clear();
    let swept = swept.context("cluster simulation failed")?;
    let mut out = std::io::stdout().lock();
    match swept {
        ClusterSweep::Unavailable(rows) => {
            if let Some(p) = &a.plot {
                plot_unavailable(p, &rows, a.plot_windows)?;
            }
            print_unavailable(&mut out, &rows, a.report.json)?;
        }
        ClusterSweep::Available(done) => {
            if let Some(p) = &a.plot {
                plot::cluster_vs_size(p, &done)?;
                eprintln!("wrote {}", p.display());
            }
            print_available(&mut out, &done, a.report.json)?;
        }
    }
    out.flush()?;
    Ok(())
}

/// The most servers `--servers` accepts (the placement's virtual nodes limit it further).
const MAX_SERVERS: usize = 1 << 16;

/// `FILE`, `FILE-STEM.spike.EXT` and `FILE-STEM.series.EXT` of a run with unavailability.
fn plot_unavailable(p: &Path, rows: &[UnavailabilityResult], plot_windows: usize) -> Result<()> {
    let sibling = |tag: &str| {
        let stem = p.file_stem().unwrap_or_default().to_string_lossy();
        let ext = p.extension().unwrap_or_default().to_string_lossy();
        p.with_file_name(format!("{stem}.{tag}.{ext}"))
    };
    let with: Vec<ClusterResult> = rows.iter().map(|r| r.with.clone()).collect();
    plot::cluster_vs_size(p, &with)?;
    let spike = sibling("spike");
    plot::cluster_spike(&spike, rows, plot_windows)?;
    let series = sibling("series");
    plot::cluster_series(&series, rows)?;
    eprintln!(
        "wrote {}, {} and {}",
        p.display(),
        spike.display(),
        series.display()
    );
    Ok(())
}

fn print_unavailable(
    out: &mut impl Write,
    rows: &[UnavailabilityResult],
    json: bool,
) -> Result<()> {
    if json {
        for r in rows {
            writeln!(out, "{}", serde_json::to_string(r)?)?;
        }
        return Ok(());
    }
    writeln!(
        out,
        "{:<16} {:>10} {:>9} {:>9} {:>9} {:>9} {:>11} {:>11}",
        "scheme", "size", "miss", "byte_miss", "baseline", "partial", "unprotected", "max_spike"
    )?;
    for r in rows {
        writeln!(
            out,
            "{:<16} {:>10} {:>9.4} {:>9.4} {:>9.4} {:>9.4} {:>11.4} {:>+10.1}%",
            r.with.scheme,
            format_size(r.with.cache_size),
            r.with.miss_ratio,
            r.with.byte_miss_ratio,
            r.baseline_miss_ratio,
            r.with.partial_hit_ratio,
            r.with.unprotected_fraction,
            r.max_relative_miss_increase * 100.0
        )?;
    }
    Ok(())
}

fn print_available(out: &mut impl Write, done: &[ClusterResult], json: bool) -> Result<()> {
    if json {
        for r in done {
            writeln!(out, "{}", serde_json::to_string(r)?)?;
        }
        return Ok(());
    }
    writeln!(
        out,
        "{:<16} {:>10} {:>9} {:>9} {:>9} {:>10} {:>10} {:>11} {:>8}",
        "scheme",
        "size",
        "miss",
        "byte_miss",
        "partial",
        "write_imb",
        "read_imb",
        "unprotected",
        "M req/s"
    )?;
    for r in done {
        writeln!(
            out,
            "{:<16} {:>10} {:>9.4} {:>9.4} {:>9.4} {:>10.4} {:>10.4} {:>11.4} {:>8.2}",
            r.scheme,
            format_size(r.cache_size),
            r.miss_ratio,
            r.byte_miss_ratio,
            r.partial_hit_ratio,
            r.write_imbalance,
            r.read_imbalance,
            r.unprotected_fraction,
            r.requests_per_s / 1e6
        )?;
    }
    Ok(())
}

/// An age flag (`--resync`, `--reinsert`).
fn fifo_age(flag: &str, v: &str) -> Result<Option<f64>> {
    ecdn_sim::cluster::parse_fifo_age(v).map_err(|e| anyhow::anyhow!("invalid {flag} {e}"))
}
