//! `ecdn demo`: an origin and a node on loopback, a generated CDN-like workload (or a trace)
//! replayed through real HTTP, and what the node did with it: hit ratios per tier, bytes,
//! latency percentiles, and a check of every byte served. With `--compare-sim`, the node's
//! hot-object cache beside the simulator's run of the same policy on the same requests.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use clap::Args;
use ecdn_node::content;
use ecdn_node::node::{Node, NodeConfig};
use ecdn_node::origin::{Origin, OriginConfig};
use ecdn_trace::gen::{GenConfig, Generator, Scenario, SizeDist};
use ecdn_trace::units::{format_size, parse_size};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;

#[derive(Args)]
pub struct DemoArgs {
    /// Requests to replay.
    #[arg(long, short = 'n', default_value_t = 20_000)]
    requests: u64,
    /// Distinct objects (Zipf popularity).
    #[arg(long, default_value_t = 5_000)]
    objects: u64,
    /// Zipf exponent.
    #[arg(long, default_value_t = 0.9)]
    alpha: f64,
    /// Object sizes: fixed:SIZE, lognormal:MEDIAN:SIGMA, pareto:ALPHA:MIN, web-video.
    #[arg(long, default_value = "lognormal:24KiB:1.3")]
    sizes: String,
    /// Concurrent client connections.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// The node's DRAM hot-object cache.
    #[arg(long, default_value = "16MiB")]
    hoc_size: String,
    /// The node's disk cache (a temporary file).
    #[arg(long, default_value = "256MiB")]
    disk_size: String,
    /// The origin's delay before its response headers.
    #[arg(long, default_value = "2ms")]
    origin_latency: String,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Also draw the latency CDF per tier and where requests were served over the run to FILE
    /// (.png or .svg).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Replay this trace's requests (object ids and sizes, in order) instead of generating
    /// them; with --requests, at most that many.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// The hot-object cache's policy (as `ecdn sim cache --policy` spells one).
    #[arg(long, default_value = "adaptsize")]
    hoc_policy: String,
    /// Also run the simulator with the same policy and capacity on the same requests, and
    /// print both hit ratios of the hot-object cache (equal with one connection).
    #[arg(long)]
    compare_sim: bool,
}

/// What one request saw.
struct Sample {
    tier: String,
    micros: u64,
    bytes: u64,
    ok: bool,
}

async fn get(
    send: &mut hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
    id: u64,
    size: u64,
) -> Result<Sample> {
    let req = hyper::Request::get(format!("/obj/{id}?size={size}"))
        .header("host", "demo.ecdn")
        .body(Empty::new())?;
    let t = Instant::now();
    let resp = send.send_request(req).await?;
    let tier = resp
        .headers()
        .get("x-cache")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("none")
        .to_string();
    let status = resp.status();
    let body = resp.into_body().collect().await?.to_bytes();
    let micros = t.elapsed().as_micros() as u64;
    let ok = status == 200
        && body.len() as u64 == size
        && content::first_mismatch(id, 0, &body).is_none();
    Ok(Sample {
        tier,
        micros,
        bytes: body.len() as u64,
        ok,
    })
}

async fn client(
    addr: SocketAddr,
    work: Arc<Mutex<std::vec::IntoIter<(u64, u64)>>>,
    out: Arc<Mutex<Vec<Sample>>>,
) -> Result<()> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let _ = stream.set_nodelay(true);
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    loop {
        let next = work.lock().unwrap().next();
        let Some((id, size)) = next else {
            return Ok(());
        };
        let s = get(&mut send, id, size).await?;
        out.lock().unwrap().push(s);
    }
}

/// The requests of the trace at `path` as (object id, size), at most `limit`.
fn read_trace(path: &std::path::Path, limit: u64) -> Result<Vec<(u64, u64)>> {
    let mut reader = ecdn_trace::open(path, &ecdn_trace::OpenOptions::default())
        .with_context(|| format!("opening {}", path.display()))?;
    let (mut out, mut batch) = (Vec::new(), Vec::new());
    while (out.len() as u64) < limit && reader.read_batch(&mut batch, 1 << 16)? > 0 {
        out.extend(batch.iter().map(|r| (r.id, r.size)));
    }
    out.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    Ok(out)
}

/// The hot-object cache's hits and hit bytes when the simulator runs `spec` with `capacity`
/// bytes on `reqs`, as the node runs it: each request looked up, a miss offered for
/// admission, the size accounted at least 1 byte.
fn simulate_hoc(spec: &ecdn_policy::PolicySpec, capacity: u64, reqs: &[(u64, u64)]) -> (u64, u64) {
    let mut cache = spec.build(capacity.max(1), 0x5eed_ecd0);
    let (mut hits, mut hit_bytes) = (0, 0);
    for (i, &(id, size)) in reqs.iter().enumerate() {
        let req = ecdn_trace::Request {
            time: i as u64,
            id,
            size: size.max(1),
            next_access: -1,
        };
        if cache.lookup(&req) {
            hits += 1;
            hit_bytes += size;
        } else {
            cache.admit(&req);
        }
        cache.clear_evicted();
    }
    (hits, hit_bytes)
}

fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

fn ms(us: u64) -> String {
    format!("{:.2}ms", us as f64 / 1000.0)
}

pub fn run(a: DemoArgs) -> Result<()> {
    if a.concurrency == 0 {
        bail!("--concurrency must be positive");
    }
    if let Some(path) = &a.plot {
        ecdn_lab::plot::check_output(path)?;
    }
    let sizes = SizeDist::parse(&a.sizes).map_err(anyhow::Error::msg)?;
    let hoc_size = parse_size(&a.hoc_size).map_err(anyhow::Error::msg)?;
    let disk_size = parse_size(&a.disk_size).map_err(anyhow::Error::msg)?;
    let latency = ecdn_lab::args::duration("--origin-latency", &a.origin_latency)?;
    let spec = ecdn_policy::PolicySpec::parse(&a.hoc_policy).map_err(anyhow::Error::msg)?;
    let reqs: Vec<(u64, u64)> = match &a.trace {
        Some(path) => read_trace(path, a.requests)?,
        None => Generator::new(GenConfig {
            requests: a.requests,
            objects: a.objects,
            alpha: a.alpha,
            sizes,
            rate: 1000.0,
            seed: a.seed,
            scenario: Scenario::Stationary,
        })?
        .map(|r| (r.id, r.size))
        .collect(),
    };
    let simulated = a.compare_sim.then(|| simulate_hoc(&spec, hoc_size, &reqs));
    let dir = tempfile::tempdir().context("temporary directory for the disk cache")?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let origin = Origin::start(
            "127.0.0.1:0".parse()?,
            OriginConfig {
                latency,
                ..OriginConfig::default()
            },
        )
        .await?;
        let node = Node::start(
            "127.0.0.1:0".parse()?,
            NodeConfig {
                origin: format!("http://{}", origin.addr),
                hoc_size,
                hoc_policy: a.hoc_policy.clone(),
                disk_path: (disk_size > 0).then(|| dir.path().join("disk.ring")),
                disk_size,
                ..NodeConfig::default()
            },
        )
        .await?;
        eprintln!(
            "origin on {}, node on {} (HOC {}, disk {}); replaying {} requests over {} connections",
            origin.addr,
            node.addr,
            format_size(hoc_size),
            format_size(disk_size),
            reqs.len(),
            a.concurrency
        );
        let work = Arc::new(Mutex::new(reqs.into_iter()));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let t = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..a.concurrency {
            tasks.push(tokio::spawn(client(
                node.addr,
                work.clone(),
                samples.clone(),
            )));
        }
        for task in tasks {
            task.await??;
        }
        let elapsed = t.elapsed().as_secs_f64();
        let samples = std::mem::take(&mut *samples.lock().unwrap());
        let printed = report(&samples, elapsed);
        if let Some((hits, hit_bytes)) = simulated {
            let hoc: Vec<&Sample> = samples.iter().filter(|s| s.tier == "HIT-HOC").collect();
            let total = samples.len().max(1) as f64;
            let bytes: u64 = samples.iter().map(|s| s.bytes).sum();
            let hoc_bytes: u64 = hoc.iter().map(|s| s.bytes).sum();
            outln!(
                "hot-object cache ({}, {}): object hit ratio node {:.4}, simulator {:.4}; \
                 byte hit ratio node {:.4}, simulator {:.4}{}",
                a.hoc_policy,
                format_size(hoc_size),
                hoc.len() as f64 / total,
                hits as f64 / total,
                hoc_bytes as f64 / bytes.max(1) as f64,
                hit_bytes as f64 / bytes.max(1) as f64,
                if a.concurrency > 1 {
                    " (requests in flight at once reach the node in another order than the \
                     trace's)"
                } else {
                    ""
                }
            )?;
        }
        node.stop().await?;
        origin.stop().await?;
        printed?;
        if let Some(path) = &a.plot {
            plot(path, &samples, elapsed, hoc_size, disk_size)?;
        }
        anyhow::Ok(())
    })
}

/// Draws the demo's figure from `samples` (in the order the requests completed) to `path`.
fn plot(
    path: &std::path::Path,
    samples: &[Sample],
    elapsed: f64,
    hoc_size: u64,
    disk_size: u64,
) -> Result<()> {
    let data: Vec<(&str, u64)> = samples
        .iter()
        .map(|s| (s.tier.as_str(), s.micros))
        .collect();
    let title = format!(
        "ecdn demo: {} requests, {} req/s; node with HOC {}, disk {}",
        ecdn_lab::plot::grouped(samples.len() as u64),
        ecdn_lab::plot::grouped((samples.len() as f64 / elapsed).round() as u64),
        format_size(hoc_size),
        format_size(disk_size)
    );
    ecdn_lab::plot::demo(path, &data, &title)?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

fn report(samples: &[Sample], elapsed: f64) -> std::io::Result<()> {
    let total = samples.len() as u64;
    let bytes: u64 = samples.iter().map(|s| s.bytes).sum();
    let bad = samples.iter().filter(|s| !s.ok).count();
    outln!(
        "{total} requests in {elapsed:.2} s ({:.0} req/s), {} served ({:.1} MiB/s); {bad} responses with wrong bytes",
        total as f64 / elapsed,
        format_size(bytes),
        bytes as f64 / elapsed / (1 << 20) as f64
    )?;
    let mut tiers: BTreeMap<&str, Vec<&Sample>> = BTreeMap::new();
    for s in samples {
        tiers.entry(s.tier.as_str()).or_default().push(s);
    }
    outln!(
        "{:<14} {:>9} {:>8} {:>11} {:>10} {:>10} {:>10} {:>10}",
        "tier",
        "requests",
        "share",
        "bytes",
        "p50",
        "p90",
        "p99",
        "max"
    )?;
    let mut all: Vec<u64> = samples.iter().map(|s| s.micros).collect();
    all.sort_unstable();
    for (tier, list) in &tiers {
        let mut lat: Vec<u64> = list.iter().map(|s| s.micros).collect();
        lat.sort_unstable();
        let b: u64 = list.iter().map(|s| s.bytes).sum();
        outln!(
            "{:<14} {:>9} {:>7.1}% {:>11} {:>10} {:>10} {:>10} {:>10}",
            tier,
            list.len(),
            100.0 * list.len() as f64 / total.max(1) as f64,
            format_size(b),
            ms(percentile(&lat, 0.5)),
            ms(percentile(&lat, 0.9)),
            ms(percentile(&lat, 0.99)),
            ms(*lat.last().unwrap_or(&0))
        )?;
    }
    outln!(
        "{:<14} {:>9} {:>7.1}% {:>11} {:>10} {:>10} {:>10} {:>10}",
        "all",
        total,
        100.0,
        format_size(bytes),
        ms(percentile(&all, 0.5)),
        ms(percentile(&all, 0.9)),
        ms(percentile(&all, 0.99)),
        ms(*all.last().unwrap_or(&0))
    )?;
    Ok(())
}
