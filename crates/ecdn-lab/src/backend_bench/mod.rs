//! `ecdn backend bench`: TOFEC's evaluation (§V) against the storage-cloud emulator.
//!
//! It starts the emulator in process (`ecdn_backend::emulator`, S3's delay model by default),
//! writes `--objects` coded files of `--size` bytes (the paper's 3 MB), then, for every
//! strategy and arrival rate, starts a fresh proxy (`ecdn_backend::proxy`: `L` connections,
//! TOFEC's backlog from zero, the delay model refitted as it runs) and sends it reads as a
//! Poisson process for `--duration`, each for an object chosen uniformly. Requests arriving in
//! the first `--warmup` are not measured (TOFEC's `q̄`, with `α = 0.99`, needs a few hundred
//! arrivals to follow the load). After the arrivals, the proxy has `--drain` to finish; what
//! it has not finished then is counted as unfinished (a rate above a strategy's capacity).
//!
//! Per strategy and rate it reports the throughput (reads completed per second of the measured
//! window), the delay of the completed reads (arrival to the last chunk needed, decoding
//! included: mean, p50, p90, p99, standard deviation), the mean `n` and `k` and the share of
//! each `k` (Fig. 10). `--phases 10:200,80:200,10:200` runs the §V-D experiment instead: the
//! rate steps through the phases (requests per second : seconds), and the report is per
//! second of the run.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::plot::backend::{survival, LinesFigure, Panel};
use anyhow::{bail, Context, Result};
use bytes::Bytes;
use clap::Args;
use ecdn_backend::emulator::{DelaySource, EmulatorConfig};
use ecdn_backend::model::{fit, DelayModel, TaskSample};
use ecdn_backend::proxy::{Proxy, ProxyConfig};
use ecdn_backend::store::{S3Config, S3Store, Store};
use ecdn_backend::tofec::Strategy;
use ecdn_trace::units::parse_size;
use ecdn_trace::Rng;

mod place;
mod report;

use report::{codes_line, delays, mark_best, summarize, table, Delays, Point, Record};

#[derive(Args)]
pub struct BenchArgs {
    /// Strategies: tofec, greedy, static-N-K; tofec-mm1 and tofec-mml are TOFEC with the
    /// queue model named (instead of --queue-model's).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "tofec,greedy,static-1-1,static-2-1,static-6-3,static-12-6"
    )]
    strategies: Vec<String>,
    /// Arrival rates (reads per second); the (1, 1) capacity with S3's model and 16
    /// connections is 78.
    #[arg(long, value_delimiter = ',', default_value = "10,40,70")]
    rates: Vec<f64>,
    /// Rates as fractions of the (1, 1) capacity under each delay source (L over the
    /// source's mean delay of a whole object), e.g. 0.15,0.5,0.85; instead of --rates.
    #[arg(long, value_delimiter = ',', conflicts_with = "rates")]
    loads: Option<Vec<f64>>,
    /// The emulator's delay sources, each a run of every strategy and rate: model (TOFEC's
    /// own, S3's parameters), empirical:FILE (measured quantiles per size, e.g.
    /// benches/data/s3-get-latency.txt), heavy-tail[:pareto:A|:lognormal:S],
    /// slow-periods[:keys|:connections].
    #[arg(long, value_delimiter = ',', default_value = "model")]
    store_delays: Vec<String>,
    /// The least size of a multipart upload's parts but the last, in the emulator and the
    /// proxy (S3's 5 MiB; 0: any, as the paper's measurements assumed).
    #[arg(long, default_value = "5MiB")]
    min_part: String,
    /// Arrivals per strategy and rate (the warm-up included).
    #[arg(long, default_value = "10s")]
    duration: String,
    /// Arrivals not measured at the start: TOFEC's smoothed backlog starts at 0, and the
    /// longer codes it uses meanwhile leave a queue behind at high rates.
    #[arg(long, default_value = "4s")]
    warmup: String,
    /// Time the proxy has to finish after the arrivals.
    #[arg(long, default_value = "2s")]
    drain: String,
    /// Object size in bytes (the paper's 3 MB).
    #[arg(long, default_value = "3000000")]
    size: String,
    /// Objects written, read uniformly.
    #[arg(long, default_value_t = 10)]
    objects: usize,
    /// L: the proxy's connections to the store.
    #[arg(long, default_value_t = 16)]
    connections: usize,
    /// K of the coded files (N = 2K): 6 allows k ∈ {1, 2, 3, 6}, 60 every k ≤ 6.
    #[arg(long, default_value_t = 6)]
    strips: usize,
    /// Emulated per-connection bandwidth, each way (bytes per second, e.g. 100MiB); none: the
    /// delays alone.
    #[arg(long)]
    bandwidth: Option<String>,
    /// Keep the proxy's delay model at S3's instead of refitting it from measured tasks.
    #[arg(long)]
    no_refit: bool,
    /// The fraction of arrivals that are writes of a new object of --size (coded, acknowledged
    /// after k parts; its delay is to the acknowledgement). Reads and writes are reported
    /// apart (`op`).
    #[arg(long, default_value_t = 0.0)]
    writes: f64,
    /// How TOFEC's thresholds map load to backlog: mm1 (the paper's equation (11); the
    /// default) or mml (the L connections as L servers, Erlang C).
    #[arg(long, default_value = "mm1")]
    queue_model: String,
    /// The worst fraction of task delays each fit leaves out (the paper's 0.1).
    #[arg(long, default_value_t = 0.1)]
    fit_trim: f64,
    /// `RATE:SECONDS,...`: the changing workload of §V-D instead of the sweep.
    #[arg(long)]
    phases: Option<String>,
    /// A figure (.png or .svg): delay against rate (the sweep) or over time (--phases).
    #[arg(long)]
    plot: Option<PathBuf>,
    /// A figure of the task delays the TOFEC runs measured against the model fitted to them.
    #[arg(long)]
    plot_model: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Run the emulator on a host of its own on a test bed (network namespaces; needs root),
    /// behind a link of this spec, e.g. `10gbit,delay=2ms` (4 ms more RTT to every request);
    /// the proxy and the load run on another host. The bed is removed when the bench ends.
    #[arg(long, value_name = "LINK")]
    testbed: Option<String>,
    /// One JSON line per strategy and rate (per second with --phases).
    #[arg(long)]
    json: bool,
}

/// What the arrivals ask: reads of `keys`, and a `writes` fraction of writes of `payload`.
struct Workload<'a> {
    keys: &'a [String],
    writes: f64,
    payload: Bytes,
}

fn model_ms(m: &DelayModel) -> [f64; 4] {
    [m.delta0 * 1e3, m.delta1 * 1e9, m.psi0 * 1e3, m.psi1 * 1e9]
}

/// Poisson arrivals at `rate(t)` until `end`; each request's record.
async fn run_requests(
    proxy: &Proxy,
    work: &Workload<'_>,
    rate: impl Fn(f64) -> f64,
    end: f64,
    drain: Duration,
    seed: u64,
) -> (Vec<Record>, usize) {
    let start = Instant::now();
    let records = Arc::new(Mutex::new(Vec::new()));
    let mut rng = Rng::new(seed);
    let mut t = 0.0;
    let mut handles = Vec::new();
    loop {
        let r = rate(t).max(1e-3);
        t += rng.exp() / r;
        if t >= end {
            break;
        }
        let due = start + Duration::from_secs_f64(t);
        tokio::time::sleep_until(due.into()).await;
        let write = rng.chance(work.writes);
        let key = if write {
            format!("written/{seed}/{}", handles.len())
        } else {
            work.keys[rng.below(work.keys.len() as u64) as usize].clone()
        };
        let (p, recs, payload) = (proxy.clone(), records.clone(), work.payload.clone());
        handles.push(tokio::spawn(async move {
            // The arrival is the scheduled time (so every strategy measures the same arrivals
            // in its window, and a late start counts in the delay).
            let r = if write {
                p.write(&key, payload).await.map(|w| w.served)
            } else {
                p.read(&key).await.map(|r| r.1)
            };
            let at = t;
            let delay = due.elapsed().as_secs_f64();
            let (n, k, ok, queued) = match &r {
                Ok(s) => (s.n, s.k, true, s.queued.as_secs_f64()),
                Err(_) => (0, 0, false, 0.0),
            };
            let stopped = matches!(r, Err(ecdn_backend::proxy::ProxyError::Stopped));
            recs.lock().unwrap_or_else(|e| e.into_inner()).push(Record {
                at,
                done_at: at + delay,
                delay,
                queued,
                n,
                k,
                ok,
                stopped,
                write,
            });
        }));
    }
    let total = handles.len();
    let deadline = tokio::time::Instant::now() + drain;
    let mut left = Vec::new();
    for mut h in handles {
        if tokio::time::timeout_at(deadline, &mut h).await.is_err() {
            left.push(h);
        }
    }
    // What is left fails with `Stopped` at once.
    proxy.stop();
    for h in left {
        let _ = tokio::time::timeout(Duration::from_secs(10), h).await;
    }
    let recs = records.lock().unwrap_or_else(|e| e.into_inner()).clone();
    (recs, total)
}

/// A strategy as the bench runs it: TOFEC may name its queue model.
#[derive(Clone, Debug)]
struct Contender {
    strategy: Strategy,
    queue: Option<ecdn_backend::tofec::QueueModel>,
    name: String,
}

impl Contender {
    fn parse(s: &str) -> Result<Contender> {
        use ecdn_backend::tofec::QueueModel;
        let (strategy, queue) = match s {
            "tofec-mm1" => (Strategy::Tofec, Some(QueueModel::Mm1)),
            "tofec-mml" => (Strategy::Tofec, Some(QueueModel::Mml)),
            _ => (Strategy::parse(s).map_err(anyhow::Error::msg)?, None),
        };
        Ok(Contender {
            strategy,
            queue,
            name: s.to_string(),
        })
    }

    fn is_tofec(&self) -> bool {
        matches!(self.strategy, Strategy::Tofec | Strategy::TofecTail)
    }
}

/// `ecdn backend bench`: the bench in a runtime of its own, whose threads are the test bed's
/// proxy host when there is one (`--testbed`).
pub fn main(a: BenchArgs) -> Result<()> {
    let bed = match &a.testbed {
        Some(link) => Some(Arc::new(place::StoreBed::create(link)?)),
        None => None,
    };
    let on_proxy = bed.as_ref().map(|b| b.enter_proxy()).transpose()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let result = rt.block_on(run(a, bed.clone()));
    drop(rt);
    // Out of the proxy's host before the bed goes.
    drop(on_proxy);
    drop(bed);
    result
}

/// What every delay source's run shares, checked once.
struct Setup {
    duration: f64,
    warmup: f64,
    drain: Duration,
    size: u64,
    strategies: Vec<Contender>,
    phases: Option<Vec<(f64, f64)>>,
    queue_model: ecdn_backend::tofec::QueueModel,
    bandwidth: Option<u64>,
    min_part: u64,
}

async fn run(a: BenchArgs, bed: Option<Arc<place::StoreBed>>) -> Result<()> {
    let dur = |flag: &str, v: &str| crate::args::duration(flag, v);
    let duration = dur("--duration", &a.duration)?.as_secs_f64();
    let warmup = dur("--warmup", &a.warmup)?.as_secs_f64();
    let drain = dur("--drain", &a.drain)?;
    if warmup >= duration {
        bail!("--warmup must be shorter than --duration");
    }
    let size = parse_size(&a.size).map_err(anyhow::Error::msg)?;
    let strategies: Vec<Contender> = a
        .strategies
        .iter()
        .map(|s| Contender::parse(s))
        .collect::<Result<_>>()?;
    if let Some(r) = a.rates.iter().find(|r| !(**r > 0.0 && r.is_finite())) {
        bail!("--rates: {r} is not a positive rate");
    }
    if let Some(l) = a
        .loads
        .iter()
        .flatten()
        .find(|l| !(**l > 0.0 && l.is_finite()))
    {
        bail!("--loads: {l} is not a positive fraction of the (1, 1) capacity");
    }
    let phases = a.phases.as_deref().map(parse_phases).transpose()?;
    let queue_model =
        ecdn_backend::tofec::QueueModel::parse(&a.queue_model).map_err(anyhow::Error::msg)?;
    if !(0.0..=1.0).contains(&a.writes) {
        bail!("--writes: {} is not a fraction in [0, 1]", a.writes);
    }
    if !(0.0..0.9).contains(&a.fit_trim) {
        bail!("--fit-trim: {} is not a fraction in [0, 0.9)", a.fit_trim);
    }
    if a.objects == 0 || a.connections == 0 || a.strips == 0 {
        bail!("--objects, --connections and --strips must be at least 1");
    }
    let bandwidth = match &a.bandwidth {
        Some(b) => Some(parse_size(b).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let sources: Vec<(String, DelaySource)> = a
        .store_delays
        .iter()
        .map(|s| {
            DelaySource::parse(s)
                .map(|d| (s.clone(), d))
                .map_err(|e| anyhow::anyhow!("--store-delays: {e}"))
        })
        .collect::<Result<_>>()?;
    if sources.len() > 1 && (phases.is_some() || a.plot.is_some() || a.plot_model.is_some()) {
        bail!("--phases, --plot and --plot-model take one --store-delays source");
    }
    let setup = Setup {
        duration,
        warmup,
        drain,
        size,
        strategies,
        phases,
        queue_model,
        bandwidth,
        min_part: parse_size(&a.min_part).map_err(anyhow::Error::msg)?,
    };
    for (name, source) in &sources {
        run_source(&a, &setup, name, source, bed.as_deref()).await?;
    }
    Ok(())
}

/// The bench against an emulator whose delays come from `source`.
async fn run_source(
    a: &BenchArgs,
    setup: &Setup,
    name: &str,
    source: &DelaySource,
    bed: Option<&place::StoreBed>,
) -> Result<()> {
    let Setup {
        duration,
        warmup,
        drain,
        size,
        ref strategies,
        ref phases,
        queue_model,
        bandwidth,
        min_part,
    } = *setup;
    let emu_cfg = EmulatorConfig {
        read: Some(source.clone()),
        write: Some(source.clone()),
        bandwidth,
        seed: a.seed,
        min_part,
        ..EmulatorConfig::default()
    };
    let emu = match bed {
        Some(b) => place::Store::on_bed(b, emu_cfg).await?,
        None => place::Store::here(emu_cfg).await?,
    };
    let s3 = S3Config {
        bucket: "bench".into(),
        endpoint: Some(emu.endpoint()),
        region: Some("us-east-1".into()),
        ..S3Config::default()
    };
    let store: Arc<dyn Store> = Arc::new(S3Store::new(&s3, Duration::from_secs(60))?);
    let cfg = |strategy: Strategy, queue: Option<_>| ProxyConfig {
        strategy,
        connections: a.connections,
        strips_k: a.strips,
        refit_every: if a.no_refit { 0 } else { 500 },
        fit_trim: a.fit_trim,
        queue_model: queue.unwrap_or(queue_model),
        min_part,
        task_timeout: Duration::from_secs(60),
        ..ProxyConfig::default()
    };
    let pb = crate::args::phase_spinner(crate::args::progress_hidden(a.json, false));
    pb.set_message(format!("{name}: writing {} objects", a.objects));
    // The objects, written once (coded), and their heads given to every proxy.
    let writer = Proxy::start(store.clone(), cfg(Strategy::Static { n: 1, k: 1 }, None));
    let mut keys = Vec::new();
    let mut rng = Rng::new(a.seed ^ 0x0b1ec7);
    for i in 0..a.objects {
        let key = format!("obj/{i}");
        let data: Vec<u8> = (0..size).map(|_| rng.next_u64() as u8).collect();
        writer
            .write(&key, Bytes::from(data))
            .await?
            .finished()
            .await?;
        keys.push(key);
    }
    let mut heads = Vec::new();
    for k in &keys {
        heads.push((
            k.clone(),
            store.head(k).await?.context("an object just written")?,
        ));
    }
    let fresh = |s: &Contender| {
        let p = Proxy::start(store.clone(), cfg(s.strategy, s.queue));
        for (k, h) in &heads {
            p.remember(k, h.clone());
        }
        p
    };
    let payload: Vec<u8> = (0..size).map(|_| rng.next_u64() as u8).collect();
    let work = Workload {
        keys: &keys,
        writes: a.writes,
        payload: Bytes::from(payload),
    };
    let mut samples: Vec<TaskSample> = Vec::new();
    if let Some(phases) = phases {
        let phases = phases.clone();
        let mut lines = Vec::new();
        let mut k_lines = Vec::new();
        for (i, s) in strategies.iter().enumerate() {
            let end: f64 = phases.iter().map(|p| p.1).sum();
            let rate_at = |t: f64| {
                let mut acc = 0.0;
                for &(r, len) in &phases {
                    acc += len;
                    if t < acc {
                        return r;
                    }
                }
                phases[phases.len() - 1].0
            };
            let p = fresh(s);
            // The same arrivals, variates and slow periods for every strategy.
            let seed = a.seed;
            emu.restart();
            pb.set_message(format!(
                "{} through the phases, {end:.0} s (run {} of {})",
                s.name,
                i + 1,
                strategies.len()
            ));
            let (recs, _) = run_requests(&p, &work, rate_at, end, drain, seed).await;
            let recs: Vec<Record> = recs.into_iter().filter(|r| !r.write).collect();
            if s.is_tofec() {
                samples.extend(p.read_samples());
            }
            let mut pts = Vec::new();
            let mut kpts = Vec::new();
            for sec in 0..end.ceil() as usize {
                let in_sec: Vec<&Record> = recs
                    .iter()
                    .filter(|r| r.ok && r.at >= sec as f64 && r.at < (sec + 1) as f64)
                    .collect();
                if in_sec.is_empty() {
                    continue;
                }
                let d = delays(in_sec.iter().map(|r| r.delay).collect());
                let mean_k = in_sec.iter().map(|r| r.k as f64).sum::<f64>() / in_sec.len() as f64;
                let mean_n = in_sec.iter().map(|r| r.n as f64).sum::<f64>() / in_sec.len() as f64;
                pts.push((sec as f64, d.mean));
                kpts.push((sec as f64, mean_k));
                if a.json {
                    let line = serde_json::json!({
                        "strategy": s.name, "second": sec, "arrival_rate": rate_at(sec as f64),
                        "requests": in_sec.len(), "delay_ms": d, "mean_n": mean_n, "mean_k": mean_k,
                    });
                    outln!("{line}")?;
                }
            }
            let summary: Vec<String> = phases
                .iter()
                .scan(0.0, |t0, &(r, len)| {
                    let (a0, a1) = (*t0, *t0 + len);
                    *t0 = a1;
                    let d: Vec<f64> = recs
                        .iter()
                        .filter(|x| x.ok && x.at >= a0 && x.at < a1)
                        .map(|x| x.delay)
                        .collect();
                    let unfinished = recs
                        .iter()
                        .filter(|x| !x.ok && x.at >= a0 && x.at < a1)
                        .count();
                    Some(format!(
                        "{r}/s: mean {:.0} ms, p99 {:.0} ms ({} reads, {unfinished} failed)",
                        delays(d.clone()).mean,
                        delays(d.clone()).p99,
                        d.len()
                    ))
                })
                .collect();
            pb.suspend(|| eprintln!("{:>12}: {}", s.name, summary.join("; ")));
            lines.push(pts);
            k_lines.push(kpts);
        }
        if let Some(path) = &a.plot {
            let labels = strategies.iter().map(|c| c.name.clone()).collect();
            let fig = LinesFigure {
                title: format!(
                    "Changing workload (TOFEC §V-D): phases {}",
                    a.phases.as_deref().unwrap_or("")
                ),
                labels,
                panels: vec![
                    Panel {
                        caption: "Mean delay of the reads arriving in each second".into(),
                        x_desc: "time (s)".into(),
                        y_desc: "delay (ms)".into(),
                        log_y: false,
                        lines,
                    },
                    Panel {
                        caption: "Mean k of those reads".into(),
                        x_desc: "time (s)".into(),
                        y_desc: "k".into(),
                        log_y: false,
                        lines: k_lines,
                    },
                ],
            };
            crate::plot::lines(path, &fig)?;
        }
    } else {
        // The rates: given, or fractions of the (1, 1) capacity, L over the source's mean delay
        // of a whole object.
        let rates: Vec<f64> = match &a.loads {
            Some(loads) => {
                let capacity = a.connections as f64 / source.mean(size);
                loads
                    .iter()
                    .map(|l| (l * capacity * 10.0).round() / 10.0)
                    .collect()
            }
            None => a.rates.clone(),
        };
        let mut by_strategy: Vec<Vec<(f64, Delays)>> =
            strategies.iter().map(|_| Vec::new()).collect();
        let mut rows: Vec<Vec<Point>> = Vec::new();
        let ops: &[(&str, bool)] = if a.writes >= 1.0 {
            &[("write", true)]
        } else if a.writes > 0.0 {
            &[("read", false), ("write", true)]
        } else {
            &[("read", false)]
        };
        // Rates outer, strategies inner: a row is measured within minutes, on the same
        // arrivals (the seed is the rate's).
        for (j, &rate) in rates.iter().enumerate() {
            let mut row: Vec<Vec<Point>> = ops.iter().map(|_| Vec::new()).collect();
            for (i, s) in strategies.iter().enumerate() {
                let p = fresh(s);
                let seed = a.seed + j as u64;
                // Every strategy meets the same slow periods and the same variates.
                emu.restart();
                pb.set_message(format!(
                    "{name}: {} at {rate}/s for {duration:.0} s (run {} of {})",
                    s.name,
                    j * strategies.len() + i + 1,
                    strategies.len() * rates.len()
                ));
                let (recs, total) = run_requests(&p, &work, |_| rate, duration, drain, seed).await;
                // Arrivals that left no record (none, unless a task outlived the run).
                let lost = total - recs.len();
                let (models, read_samples) = (p.models(), p.read_samples());
                if s.is_tofec() {
                    samples.extend(read_samples);
                }
                let window = (warmup, duration);
                for (o, &(op, write)) in ops.iter().enumerate() {
                    let of_op: Vec<&Record> = recs.iter().filter(|r| r.write == write).collect();
                    let model = s
                        .is_tofec()
                        .then(|| model_ms(if write { &models.1 } else { &models.0 }));
                    let mut point = summarize(&of_op, window, s.name.clone(), op, rate, model);
                    if o == 0 {
                        point.unfinished += lost;
                    }
                    (point.size, point.connections) = (size, a.connections);
                    point.store_delays = name.to_string();
                    point.store_link = a.testbed.clone();
                    pb.suspend(|| eprintln!(
                        "{:>12} {op:>5} at {rate:>5}/s: {:6.1} done/s, delay mean {:7.1} ms p50 {:7.1} p99 {:7.1} std {:7.1}, n {:.1} k {:.1}{}{}",
                        point.strategy,
                        point.throughput,
                        point.delay_ms.mean,
                        point.delay_ms.p50,
                        point.delay_ms.p99,
                        point.delay_ms.std,
                        point.mean_n,
                        point.mean_k,
                        if point.unfinished > 0 { format!(", {} unfinished", point.unfinished) } else { String::new() },
                        if point.codes.len() > 1 { format!("; {}", codes_line(&point.codes, 3)) } else { String::new() }
                    ));
                    if o == 0 {
                        by_strategy[i].push((rate, point.delay_ms.clone()));
                    }
                    row[o].push(point);
                }
            }
            for mut r in row {
                mark_best(&mut r);
                if a.json {
                    for point in &r {
                        outln!("{}", serde_json::to_string(point)?)?;
                    }
                }
                rows.push(r);
            }
        }
        pb.suspend(|| eprint!("{}", table(name, &rows)));
        if let Some(path) = &a.plot {
            let labels = strategies.iter().map(|c| c.name.clone()).collect();
            // Log scale: an overloaded static code's delays are seconds, the others' tens of
            // milliseconds.
            let line = |f: fn(&Delays) -> f64| {
                by_strategy
                    .iter()
                    .map(|row| {
                        row.iter()
                            .filter(|(_, d)| f(d).is_finite() && f(d) > 0.0)
                            .map(|(r, d)| (*r, f(d).log10()))
                            .collect()
                    })
                    .collect()
            };
            let panel = |caption: &str, y: &str, lines| Panel {
                caption: caption.into(),
                x_desc: "arrival rate (reads/s)".into(),
                y_desc: y.into(),
                log_y: true,
                lines,
            };
            let fig = LinesFigure {
                title: format!(
                    "Throughput-delay (TOFEC Fig. 8, 9): {} B objects, L = {}",
                    size, a.connections
                ),
                labels,
                panels: vec![
                    panel("Mean delay", "ms", line(|d| d.mean)),
                    panel("p99 delay", "ms", line(|d| d.p99)),
                    panel("Standard deviation", "ms", line(|d| d.std)),
                ],
            };
            crate::plot::lines(path, &fig)?;
        }
    }
    pb.finish_and_clear();
    if let Some(path) = &a.plot_model {
        plot_model(path, &samples, a.fit_trim)?;
    }
    emu.stop().await;
    Ok(())
}

/// `RATE:SECONDS,...`.
fn parse_phases(s: &str) -> Result<Vec<(f64, f64)>> {
    let mut out = Vec::new();
    for p in s.split(',') {
        let (r, t) = p
            .split_once(':')
            .with_context(|| format!("--phases: {p:?} is not RATE:SECONDS"))?;
        let (r, t): (f64, f64) = (r.trim().parse()?, t.trim().parse()?);
        if !(r > 0.0 && t > 0.0 && r.is_finite() && t.is_finite()) {
            bail!("--phases: {p:?} needs a positive rate and duration");
        }
        out.push((r, t));
    }
    Ok(out)
}

/// The measured task delays per chunk size (Kaplan–Meier, cancelled tasks as censored)
/// against the model fitted to them, as complementary CDFs.
fn plot_model(path: &std::path::Path, samples: &[TaskSample], trim: f64) -> Result<()> {
    let Some((m, stats)) = fit(samples, trim) else {
        bail!("--plot-model: the TOFEC runs measured too few chunk sizes to fit a model");
    };
    let mut labels = Vec::new();
    let mut lines = Vec::new();
    for (bytes, _, _, n) in stats.iter().take(4) {
        let b = *bytes as u64;
        let obs: Vec<(f64, bool)> = samples
            .iter()
            .filter(|s| s.bytes == b)
            .map(|s| (s.delay, s.censored))
            .collect();
        let measured = survival(&obs);
        let lo = m.floor(*bytes);
        let hi = measured
            .last()
            .map_or(lo + 5.0 * m.tail(*bytes), |p| p.0 / 1000.0);
        let model: Vec<(f64, f64)> = (0..=100)
            .map(|i| lo + (hi - lo) * i as f64 / 100.0)
            .map(|t| {
                (
                    t * 1000.0,
                    (-(t - lo) / m.tail(*bytes)) / std::f64::consts::LN_10,
                )
            })
            .collect();
        labels.push(format!("{:.2} MB measured ({n} tasks)", bytes / 1e6));
        lines.push(measured);
        labels.push(format!("{:.2} MB model", bytes / 1e6));
        lines.push(model);
    }
    let [d0, d1, p0, p1] = model_ms(&m);
    let fig = LinesFigure {
        title: "Task delays against the fitted model".into(),
        labels,
        panels: vec![Panel {
            caption: format!(
                "Δ(B) = {d0:.1} + {d1:.1}·B ms, 1/μ(B) = {p0:.1} + {p1:.1}·B ms (B in MB)"
            ),
            x_desc: "t (ms)".into(),
            y_desc: "fraction of tasks slower than t".into(),
            log_y: true,
            lines,
        }],
    };
    crate::plot::lines(path, &fig)
}
