//! `ecdn object bench`: EC-Cache's evaluation (OSDI '16, §6) on one machine.
//!
//! It starts a coordinator and `--nodes` nodes on loopback, each node's outgoing peer link
//! capped (`--peer-rate`, `ecdn node --peer-rate`) so that reads are bandwidth-bound as in the
//! paper, some with background traffic on that link (`--background-load`, §6.3). It writes
//! `--objects` objects of `--size` bytes, each with the units the memory budget gives it by
//! popularity (`ecdn_objects::budget`: EC-Cache's extra parities or selective replication's
//! extra replicas, `--budget` of the objects' size beyond one copy; the popularity is the
//! workload's Zipf law, the "skew information" both schemes use in §6.1), and may kill a node
//! (`--kill`, §6.4; the reads start once the coordinator marked it unavailable) or, on the test
//! bed, slow one (`--slow NODE:DELAY`). Then it reads: requests arrive as a Poisson process at
//! `--load` × what every live node's link could send in useful bytes, each for an object drawn
//! from Zipf(`--zipf`). The readers (and the writers) are clients that read the splits from
//! their servers themselves, as the paper's are (`ecdn_client::SplitClient`: `k + Δ` splits
//! asked, the first `k` decoded, §4.3; on the bed, from the client host); with `--via-node`,
//! each read is sent to a live node chosen uniformly (`GET /_objects/NAME?delta=Δ`: that node
//! reads the splits from its peers, decodes, and sends the object on), and each write too.
//!
//! It reports λ (§6: `(L_max − L_avg) / L_avg × 100`, a node's load being the bytes its link
//! sent during the reads, `ecdn_cluster_link_sent_bytes_total`: splits sent to clients or to
//! peers, and `L_avg` the useful bytes over the live nodes), the latency of the reads (mean,
//! p50, p99, p99.9), the failed reads, and for client reads what each node was asked and which
//! of its windows were used; the last line of `--json` is all of it.
//!
//! `--measured-budget READS` spends the budget as the live system does instead: every object is
//! written with the scheme's base code (`k + r` splits, or one copy), `READS` warm-up reads
//! run, and the coordinator re-spends the budget from the reads the nodes counted (every 2 s,
//! `object_budget_every_s`); the measured reads start once a period passes without a change,
//! and the coordinator goes on re-spending during them, as it would in service.
//!
//! `--simulate` runs the same placement and budget code without a cluster
//! (`ecdn_objects::model`): λ for the same settings, and Theorem 1's variance ratio (§5.1).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use clap::{Args, ValueEnum};
use ecdn_client::{Code, ObjectClient};
use ecdn_cluster::coordinator::client::CoordinatorClient;
use ecdn_objects::budget::{allocate, Object, Scheme};
use ecdn_objects::model::{imbalance_percent, simulate, variance_ratio, SimConfig};
use ecdn_trace::gen::Zipf;
use ecdn_trace::units::{format_size, parse_size};
use ecdn_trace::Rng;
use indicatif::ProgressBar;

use crate::cluster_demo::bed::{DemoBed, TestbedArgs};
use crate::cluster_demo::procs::{self, FileSettings, Layout, Procs};

mod report;
use report::print_report;
pub use report::{Latency, Report, SplitServer};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SchemeArg {
    /// k data + r parity splits, extra parities for popular objects; reads ask k + Δ.
    EcCache,
    /// Whole objects, extra replicas for popular ones; a read asks one replica.
    SelectiveReplication,
}

#[derive(Args)]
pub struct BenchArgs {
    /// Cache servers (nodes).
    #[arg(long, default_value_t = 12)]
    nodes: usize,
    /// Objects written (all of the same size; 240 on 12 nodes: 20 per node, as the paper's
    /// 500 on 25).
    #[arg(long, default_value_t = 240)]
    objects: usize,
    /// Size of each object (the paper's 40 MB scaled with the link: see BENCHMARKS.md).
    #[arg(long, default_value = "4MiB")]
    size: String,
    /// Zipf exponent of the objects' popularity.
    #[arg(long, default_value_t = 0.9)]
    zipf: f64,
    #[arg(long, value_enum, default_value = "ec-cache")]
    scheme: SchemeArg,
    /// EC-Cache: data splits.
    #[arg(long, default_value_t = 10)]
    k: usize,
    /// EC-Cache: parity splits every object has (the budget adds more to popular ones).
    #[arg(long, default_value_t = 1)]
    r: usize,
    /// Extra splits a read asks for, or `auto`: from the entry node's link backlog (TOFEC's
    /// rule, `ecdn_objects::backlog`) [default: 1 for ec-cache, 0 for selective-replication].
    #[arg(long)]
    delta: Option<String>,
    /// Memory beyond one copy of every object, a fraction of their size [default: 0.15, or
    /// r/k + 0.05 when r/k is above 0.10, as the paper's k = 10 leaves 5% for skew].
    #[arg(long)]
    budget: Option<f64>,
    /// Reads measured.
    #[arg(long, default_value_t = 1500)]
    requests: u64,
    /// Spend the budget from measured reads: write every object with the base code, run this
    /// many warm-up reads, and let the coordinator re-spend the budget from the reads the
    /// nodes counted before the measured reads.
    #[arg(long, value_name = "READS")]
    measured_budget: Option<u64>,
    /// Offered load: arrivals at this fraction of the useful bytes per second that every live
    /// node's link could send.
    #[arg(long, default_value_t = 0.5)]
    load: f64,
    /// Each node's outgoing peer link (`ecdn node --peer-rate`).
    #[arg(long, default_value = "100Mbit")]
    peer_rate: String,
    /// Run the coordinator, every node and the readers (this process) on hosts of a test bed
    /// (network namespaces; needs root), each host's link shaped to LINK in both directions
    /// by tc, e.g. `1gbit`. The offered load is then a fraction of LINK's rate, and the nodes'
    /// own --peer-rate cap is set ten times above it, so that it only counts bytes.
    #[arg(long, value_name = "LINK", conflicts_with = "simulate")]
    testbed: Option<String>,
    /// With --testbed: the readers' host's link (default: LINK of --testbed).
    #[arg(long, value_name = "LINK", requires = "testbed")]
    testbed_client: Option<String>,
    /// Background traffic on the chosen nodes' links: the fraction of the link it takes in its
    /// bursts (`ecdn node --background-load`).
    #[arg(long, value_name = "F")]
    background_load: Option<f64>,
    /// How many nodes get the background traffic (nodes 0, 1, ...) [default: a third].
    #[arg(long, requires = "background_load")]
    background_nodes: Option<usize>,
    /// Read through the nodes, as before issue 61: each read is sent to a live node chosen
    /// uniformly, which reads the splits from its peers, decodes, and sends the object on.
    /// Without it the readers are clients that read the splits from their servers
    /// themselves (`ecdn_client::SplitClient`), as the paper's are.
    #[arg(long)]
    via_node: bool,
    /// With --testbed: this node's link gets DELAY more each way after the writes, before the
    /// reads (a slow server; late binding should leave its splits), e.g. `3:50ms`.
    #[arg(long, value_name = "NODE:DELAY", requires = "testbed")]
    slow: Option<String>,
    /// Kill this node after the writes, before the reads (§6.4).
    #[arg(long, value_name = "NODE")]
    kill: Option<usize>,
    /// Seed of the contents, the placement and the workload.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// No cluster: the model on the same placement and budget code, and Theorem 1's variance
    /// ratio for this k and number of nodes.
    #[arg(long)]
    simulate: bool,
    /// Run directory (cluster file, logs, disks) [default: a new one under the system's
    /// temporary directory, removed at the end].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The report as one JSON line (last line of the output).
    #[arg(long)]
    json: bool,
}

/// What the flags say, checked.
struct Plan {
    scheme: Scheme,
    k: usize,
    r: usize,
    /// Fixed Δ (with `auto`: 1, for the budget's and the model's load).
    delta: usize,
    /// `--delta auto`.
    auto: bool,
    size: u64,
    budget: f64,
    rate_bytes: f64,
    rate_bits: f64,
    background: f64,
    background_nodes: usize,
    /// `--slow`: the node and its extra delay.
    slow: Option<(usize, Duration)>,
}

fn plan(a: &BenchArgs) -> Result<Plan> {
    if a.nodes < 2 {
        bail!("--nodes: need at least 2");
    }
    if a.objects == 0 || a.requests == 0 {
        bail!("--objects and --requests must be at least 1");
    }
    let size = parse_size(&a.size).map_err(|e| anyhow::anyhow!("--size: {e}"))?;
    if size == 0 || size > ecdn_node::node::MAX_OBJECT as u64 {
        bail!(
            "--size: need 1 byte to {}",
            format_size(ecdn_node::node::MAX_OBJECT as u64)
        );
    }
    if a.simulate && a.measured_budget.is_some() {
        bail!("--measured-budget needs a live cluster (the model knows the popularity)");
    }
    if !(a.zipf.is_finite() && a.zipf >= 0.0) {
        bail!("--zipf: need a finite exponent >= 0");
    }
    if !(a.load.is_finite() && a.load > 0.0) {
        bail!("--load: need a fraction above 0");
    }
    let auto = a.delta.as_deref() == Some("auto");
    let given = match a.delta.as_deref() {
        None | Some("auto") => None,
        Some(d) => Some(
            d.parse::<usize>()
                .map_err(|_| anyhow::anyhow!("--delta {d:?}: need a number or auto"))?,
        ),
    };
    let (scheme, k, r, delta) = match a.scheme {
        SchemeArg::EcCache => {
            let delta = given.unwrap_or(1);
            (
                Scheme::EcCache {
                    k: a.k,
                    r: a.r,
                    delta,
                },
                a.k,
                a.r,
                delta,
            )
        }
        SchemeArg::SelectiveReplication => (Scheme::SelectiveReplication, 1, 0, given.unwrap_or(0)),
    };
    let live = a.nodes - usize::from(a.kill.is_some());
    if k == 0 || k + r > live {
        bail!("k = {k}, r = {r}: need k >= 1 and k + r <= the {live} live nodes");
    }
    if let Some(n) = a.kill {
        if n >= a.nodes {
            bail!("--kill {n}: the nodes are 0..{}", a.nodes);
        }
    }
    let budget = a.budget.unwrap_or(match a.scheme {
        SchemeArg::EcCache if r as f64 / k as f64 > 0.10 => r as f64 / k as f64 + 0.05,
        _ => 0.15,
    });
    let rate_bits = match &a.testbed {
        Some(link) => {
            let spec = ecdn_testbed::LinkSpec::parse(link)
                .map_err(|e| anyhow::anyhow!("--testbed: {e}"))?;
            spec.rate_bps
                .ok_or_else(|| anyhow::anyhow!("--testbed {link}: the offered load needs a rate"))?
                as f64
        }
        None => crate::args::bit_rate("--peer-rate", &a.peer_rate)?,
    };
    let background = a.background_load.unwrap_or(0.0);
    if !(0.0..1.0).contains(&background) {
        bail!("--background-load: need 0 <= F < 1");
    }
    let background_nodes = match a.background_load {
        Some(_) => a.background_nodes.unwrap_or(a.nodes / 3).min(a.nodes),
        None => 0,
    };
    let slow = match &a.slow {
        None => None,
        Some(spec) => {
            let (n, d) = spec
                .split_once(':')
                .ok_or_else(|| anyhow::anyhow!("--slow {spec:?}: need NODE:DELAY, e.g. 3:50ms"))?;
            let n: usize = n
                .parse()
                .map_err(|_| anyhow::anyhow!("--slow {spec:?}: {n:?} is not a node"))?;
            if n >= a.nodes || Some(n) == a.kill {
                bail!("--slow {spec:?}: node {n} is not one of the live nodes");
            }
            let d = crate::args::duration("--slow", d)?;
            Some((n, d))
        }
    };
    Ok(Plan {
        slow,
        scheme,
        k,
        r,
        delta,
        auto,
        size,
        budget,
        rate_bytes: rate_bits / 8.0,
        rate_bits,
        background,
        background_nodes,
    })
}

/// Object `i`'s name.
fn name(i: usize) -> String {
    format!("bench/object-{i:05}")
}

/// Object `i`'s bytes (a function of the seed and `i`).
fn contents(seed: u64, i: usize, size: u64) -> Bytes {
    let mut rng = Rng::new(seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut v = Vec::with_capacity(size as usize + 8);
    while (v.len() as u64) < size {
        v.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    v.truncate(size as usize);
    Bytes::from(v)
}

/// Each object's units (splits or replicas) from the budget, the objects ranked by the
/// workload's popularity; and the bytes beyond one copy.
fn units(a: &BenchArgs, p: &Plan) -> Result<(Vec<usize>, u64)> {
    let objects: Vec<Object> = (1..=a.objects)
        .map(|rank| Object {
            size: p.size,
            popularity: (rank as f64).powf(-a.zipf),
        })
        .collect();
    let live = a.nodes - usize::from(a.kill.is_some());
    let alloc = allocate(&objects, p.scheme, p.budget, live).context("the memory budget")?;
    Ok((alloc.units, alloc.overhead_bytes))
}

/// `ecdn object bench`: on a test bed when asked, then the bench in a runtime whose threads
/// are the readers' host.
pub fn main(a: BenchArgs) -> Result<()> {
    let bed = match &a.testbed {
        Some(link) => {
            let args = TestbedArgs {
                testbed: Some(link.clone()),
                testbed_client: a.testbed_client.clone(),
                ..Default::default()
            };
            procs::use_admin_token(procs::random_key()?);
            Some(Arc::new(DemoBed::create(&args, a.nodes, Vec::new())?))
        }
        None => None,
    };
    let on_client = bed.as_ref().map(|b| b.enter_client()).transpose()?;
    // Two threads: a client reading the splits decodes and checks every byte itself. Both are
    // started here, so both are on the readers' host.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let result = rt.block_on(run(a, bed.clone()));
    drop(rt);
    // Out of the readers' host before the bed goes.
    drop(on_client);
    drop(bed);
    result
}

async fn run(a: BenchArgs, testbed: Option<Arc<DemoBed>>) -> Result<()> {
    let p = plan(&a)?;
    let report = if a.simulate {
        simulated(&a, &p)?
    } else {
        let (dir, temp) = match &a.dir {
            Some(d) => (d.clone(), false),
            None => (
                std::env::temp_dir().join(format!("ecdn-object-bench-{}", std::process::id())),
                true,
            ),
        };
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let pb = crate::args::phase_spinner(crate::args::progress_hidden(a.json, false));
        let out = live(&a, &p, &dir, &pb, testbed.as_deref()).await;
        pb.finish_and_clear();
        if temp {
            let _ = std::fs::remove_dir_all(&dir);
        }
        out?
    };
    print_report(&report, a.json)
}

fn report(a: &BenchArgs, p: &Plan, mode: &'static str) -> Report {
    Report {
        mode,
        path: if a.via_node { "via-node" } else { "client" },
        scheme: p.scheme.name(),
        k: p.k,
        r: p.r,
        delta: match p.auto {
            true => "auto".into(),
            false => p.delta.into(),
        },
        nodes: a.nodes,
        objects: a.objects,
        size: p.size,
        zipf: a.zipf,
        budget: p.budget,
        overhead_bytes: 0,
        requests: a.requests,
        failed_requests: 0,
        imbalance_percent: 0.0,
        latency_ms: Latency::default(),
        loads: Vec::new(),
        useful_bytes: 0,
        peer_rate_bits: p.rate_bits,
        load: a.load,
        background_load: p.background,
        background_nodes: p.background_nodes,
        killed: a.kill,
        slowed: p.slow.map(|(n, d)| (n, d.as_secs_f64() * 1e3)),
        via_node_reads: 0,
        split_servers: Vec::new(),
        read_machine: None,
        write_s: 0.0,
        read_s: 0.0,
        variance_ratio: None,
        variance_predicted: None,
        warmup_reads: a.measured_budget,
        budget_changes: 0,
        budget_changes_during_reads: 0,
        testbed: None,
    }
}

fn simulated(a: &BenchArgs, p: &Plan) -> Result<Report> {
    let sim = simulate(&SimConfig {
        servers: a.nodes,
        objects: a.objects,
        alpha: a.zipf,
        size: p.size,
        scheme: p.scheme,
        budget: p.budget,
        requests: a.requests,
        failed: a.kill.into_iter().collect(),
        seed: a.seed,
    })?;
    let mut r = report(a, p, "simulate");
    r.overhead_bytes = sim.overhead_bytes;
    r.failed_requests = sim.failed_reads;
    r.imbalance_percent = sim.imbalance_percent;
    r.loads = sim.loads;
    r.useful_bytes = sim.useful_bytes;
    if p.k > 1 {
        let (v, pred) = variance_ratio(a.nodes, a.objects, p.k, 200, a.seed)?;
        r.variance_ratio = Some(v);
        r.variance_predicted = Some(pred);
    }
    Ok(r)
}

/// The cluster's processes and where they listen.
struct Bed {
    procs: Arc<Mutex<Procs>>,
    layout: Layout,
    cfg: ecdn_cluster::ClusterConfig,
}

/// How often the coordinator re-spends the budget under `--measured-budget`, seconds.
const BUDGET_EVERY_S: f64 = 2.0;

async fn start(
    a: &BenchArgs,
    p: &Plan,
    dir: &Path,
    overhead: u64,
    testbed: Option<&DemoBed>,
) -> Result<Bed> {
    let layout = match testbed {
        Some(b) => b.layout(),
        None => Layout::free(a.nodes, 1)?,
    };
    let settings = FileSettings {
        // The cluster's own scheme is for cached HTTP objects; the object API codes each
        // object with its own (k, r).
        scheme: "c2dn".into(),
        k: 2,
        p: 1,
        threshold: 1 << 20,
        buckets: 1000,
        sub_chunk: 32 << 10,
        slice_size: 0,
        evict_together: false,
        direct_reads: true,
        resync: None,
        reinsert: None,
        seed: a.seed,
        key: procs::random_key()?,
        etcd: Vec::new(),
        repair_rate: 0,
        parity_delay: None,
        peer_tls: None,
        health: Vec::new(),
    };
    let file = dir.join("cluster.toml");
    let mut text = procs::cluster_file(&settings, &layout);
    if a.measured_budget.is_some() {
        // Top-level settings, before the first [[node]] table.
        text = format!(
            "object_budget = {}\nobject_budget_every_s = {BUDGET_EVERY_S}\n{text}",
            p.budget
        );
    }
    std::fs::write(&file, text)?;
    let cfg = ecdn_cluster::ClusterConfig::load(&file).context("the bench's cluster file")?;
    // Room for each node's share of the objects and half as much again (placement is
    // random; an evicted split would fail reads).
    let stored = p.size * a.objects as u64 + overhead;
    let disk = (3 * stored / 2 / a.nodes as u64).max(64 << 20) + (64 << 20);
    let procs = Arc::new(Mutex::new(Procs::new(dir)?));
    {
        let mut pr = procs.lock().unwrap();
        if let Some(b) = testbed {
            pr.place(b.placement());
        }
        pr.start_coordinator(&file, None, None)?;
        // On a bed, tc shapes the links; the node's own cap only counts the bytes sent.
        let cap = match testbed {
            Some(_) => 10.0 * p.rate_bits,
            None => p.rate_bits,
        };
        for id in 0..a.nodes {
            let mut extra = vec!["--peer-rate".to_string(), format!("{cap}bit")];
            if id < p.background_nodes {
                extra.extend(["--background-load".into(), p.background.to_string()]);
            }
            // No origin runs: the object API never asks one.
            pr.start_node(id, &file, layout.origin, (8 << 20, disk), &extra)?;
        }
    }
    procs::wait_ready(&procs, &layout, &cfg, Duration::from_secs(60)).await?;
    Ok(Bed { procs, layout, cfg })
}

/// Who writes: a client coding the objects and putting the splits itself, or the nodes.
#[derive(Clone)]
enum Writer {
    Splits(Arc<ecdn_client::SplitClient>),
    ViaNode(Vec<ObjectClient>),
}

impl Writer {
    async fn put(&self, i: usize, data: Bytes, code: Code) -> Result<(), ecdn_client::ClientError> {
        match self {
            Writer::Splits(c) => c.put(&name(i), data, Some(code)).await.map(drop),
            Writer::ViaNode(clients) => {
                let c = &clients[i % clients.len()];
                c.put(&name(i), data, Some(code)).await.map(drop)
            }
        }
    }
}

/// Writes every object with its units, four at a time: as clients that code the objects
/// themselves, or (`--via-node`) through the nodes in turn.
async fn write_objects(
    a: &BenchArgs,
    p: &Plan,
    bed: &Bed,
    units: &[usize],
    pb: &ProgressBar,
) -> Result<()> {
    let timeout = Duration::from_secs(120);
    let nodes: Vec<std::net::SocketAddr> = bed.layout.nodes.iter().map(|&(c, _)| c).collect();
    let writer = match a.via_node {
        true => Writer::ViaNode(
            nodes
                .iter()
                .map(|&c| ObjectClient::new(c).with_timeout(timeout))
                .collect(),
        ),
        false => Writer::Splits(Arc::new(
            ecdn_client::SplitClient::new(nodes).with_timeout(timeout),
        )),
    };
    let next = Arc::new(AtomicUsize::new(0));
    let written = Arc::new(AtomicUsize::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let (next, writer, units) = (next.clone(), writer.clone(), units.to_vec());
        let (written, pb) = (written.clone(), pb.clone());
        let (seed, size, k) = (a.seed, p.size, p.k);
        workers.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= units.len() {
                    return Ok::<(), anyhow::Error>(());
                }
                let code = Code { k, r: units[i] - k };
                writer
                    .put(i, contents(seed, i, size), code)
                    .await
                    .with_context(|| format!("writing {}", name(i)))?;
                let done = written.fetch_add(1, Ordering::Relaxed) + 1;
                pb.set_message(format!("writing objects, {done} of {}", units.len()));
            }
        });
    }
    while let Some(w) = workers.join_next().await {
        w.context("a writer")??;
    }
    Ok(())
}

/// Kills `node` and waits until the coordinator marks it unavailable.
async fn kill(bed: &Bed, node: usize) -> Result<()> {
    bed.procs.lock().unwrap().kill_node(node);
    let client = CoordinatorClient::for_cluster(&bed.cfg).await?;
    let t0 = Instant::now();
    loop {
        let s = procs::coordinator_status(&client).await?;
        if s.nodes.iter().any(|n| n.id == node && !n.available) {
            return Ok(());
        }
        if t0.elapsed() > Duration::from_secs(30) {
            bail!("node {node} killed, but the coordinator still shows it available after 30 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Bytes each of `nodes` has sent through its link so far.
async fn link_bytes(bed: &Bed, nodes: &[usize]) -> Result<Vec<u64>> {
    let mut out = Vec::with_capacity(nodes.len());
    for &n in nodes {
        let s = procs::node_stats(bed.layout.admins[n])
            .await
            .with_context(|| format!("node {n}'s counters"))?;
        out.push(s.link_bytes_sent);
    }
    Ok(out)
}

/// One read's outcome: its latency in ms, or why it failed.
type ReadResult = Result<f64, String>;

/// Who the readers are: clients reading the splits themselves, or clients of the nodes.
enum Readers {
    Splits(Arc<ecdn_client::SplitClient>),
    ViaNode(Vec<ObjectClient>, String),
}

impl Readers {
    fn new(a: &BenchArgs, p: &Plan, bed: &Bed, live: &[usize]) -> Readers {
        let timeout = Duration::from_secs(60);
        let delta = match p.auto {
            true => "auto".to_string(),
            false => p.delta.to_string(),
        };
        if a.via_node {
            let clients = live
                .iter()
                .map(|&n| ObjectClient::new(bed.layout.nodes[n].0).with_timeout(timeout))
                .collect();
            return Readers::ViaNode(clients, delta);
        }
        let nodes = live.iter().map(|&n| bed.layout.nodes[n].0).collect();
        let delta = match p.auto {
            true => ecdn_client::Delta::Auto,
            false => ecdn_client::Delta::Fixed(p.delta),
        };
        // The objects are not written again during the reads; but under `--measured-budget`
        // the coordinator re-codes them (and restores the splits a server out of the map
        // holds), and the readers see each new record within the client's default 2 s.
        let ttl = match a.measured_budget {
            Some(_) => Duration::from_secs(2),
            None => Duration::from_secs(3600),
        };
        let c = ecdn_client::SplitClient::new(nodes)
            .with_delta(delta)
            .with_timeout(timeout)
            .with_record_ttl(ttl);
        Readers::Splits(Arc::new(c))
    }

    /// Reads object `i`; `pick` chooses the entry node of a read through one.
    async fn read(&self, i: usize, pick: u64) -> Result<Bytes, String> {
        let got = match self {
            Readers::Splits(c) => c.get(&name(i)).await,
            Readers::ViaNode(clients, delta) => {
                let c = &clients[(pick % clients.len() as u64) as usize];
                c.get_with_delta(&name(i), delta).await
            }
        };
        got.map_err(|e| format!("{}: {e}", name(i)))
    }

    fn split_servers(&self) -> Vec<SplitServer> {
        match self {
            Readers::Splits(c) => {
                let slow = c.slow_servers();
                let split_server = |(node, used)| SplitServer {
                    node,
                    used,
                    slow: slow.contains(&node),
                };
                c.server_use().into_iter().map(split_server).collect()
            }
            Readers::ViaNode(..) => Vec::new(),
        }
    }

    fn via_node_reads(&self) -> usize {
        match self {
            Readers::Splits(c) => c.via_node_reads(),
            Readers::ViaNode(..) => 0,
        }
    }
}

/// `count` reads: Poisson arrivals, Zipf objects (and uniform entry nodes, via a node).
async fn read_load(
    a: &BenchArgs,
    p: &Plan,
    readers: &Arc<Readers>,
    live: &[usize],
    count: u64,
    pb: &ProgressBar,
) -> Result<Vec<ReadResult>> {
    let zipf = Zipf::new(a.objects as u64, a.zipf).context("--zipf")?;
    // Useful bytes per second every live link could send, times the load.
    let per_s = a.load * p.rate_bytes * live.len() as f64 / p.size as f64;
    let mut rng = Rng::new(a.seed ^ 0x7265_6164 ^ count.rotate_left(32));
    let t0 = tokio::time::Instant::now();
    let mut at = 0.0f64;
    let mut reads = tokio::task::JoinSet::new();
    for _ in 0..count {
        at += rng.exp() / per_s;
        tokio::time::sleep_until(t0 + Duration::from_secs_f64(at)).await;
        let i = zipf.sample(&mut rng) as usize;
        let pick = rng.next_u64();
        let (readers, size) = (readers.clone(), p.size);
        reads.spawn(async move {
            let t = Instant::now();
            match readers.read(i, pick).await {
                Ok(b) if b.len() as u64 == size => Ok(t.elapsed().as_secs_f64() * 1e3),
                Ok(b) => Err(format!("{}: {} bytes, not {size}", name(i), b.len())),
                Err(e) => Err(e),
            }
        });
    }
    let mut out = Vec::with_capacity(count as usize);
    while let Some(r) = reads.join_next().await {
        out.push(r.unwrap_or_else(|e| Err(format!("a read task: {e}"))));
        pb.set_message(format!(
            "reads, the last {} finishing",
            count - out.len() as u64
        ));
    }
    Ok(out)
}

/// Under `--measured-budget`, after the warm-up reads: waits until a budget period passes in
/// which the coordinator re-codes no object (at most 15 periods); the objects it re-coded so
/// far.
async fn settle_budget(bed: &Bed) -> Result<u64> {
    let client = CoordinatorClient::for_cluster(&bed.cfg).await?;
    let period = Duration::from_secs_f64(BUDGET_EVERY_S);
    // Two plans before a change is made (the coordinator's hysteresis).
    tokio::time::sleep(period * 2).await;
    // Settled: no batch running, and a period without a change (at most 5 minutes).
    let mut last = procs::coordinator_status(&client)
        .await?
        .object_budget_changes;
    for _ in 0..150 {
        tokio::time::sleep(period).await;
        let now = procs::coordinator_status(&client).await?;
        if now.object_budget_changes == last && now.object_budget_pending == 0 {
            break;
        }
        last = now.object_budget_changes;
    }
    Ok(last)
}

/// The objects the coordinator re-coded so far, and the bytes the objects take beyond one
/// copy (from their records).
async fn budget_state(a: &BenchArgs, p: &Plan, bed: &Bed) -> Result<(u64, u64)> {
    let coordinator = CoordinatorClient::for_cluster(&bed.cfg).await?;
    let changes = procs::coordinator_status(&coordinator)
        .await?
        .object_budget_changes;
    let client = ObjectClient::new(bed.layout.nodes[0].0).with_timeout(Duration::from_secs(30));
    let mut overhead = 0;
    for i in 0..a.objects {
        let m = client.stat(&name(i)).await.with_context(|| name(i))?.record;
        let extra = (m.splits.len() - m.k) as u64;
        overhead += extra * p.size.div_ceil(m.k as u64);
    }
    Ok((changes, overhead))
}

async fn live(
    a: &BenchArgs,
    p: &Plan,
    dir: &Path,
    pb: &ProgressBar,
    testbed: Option<&DemoBed>,
) -> Result<Report> {
    // The disks are sized for the budget spent either way.
    let (budgeted, budget_bytes) = units(a, p)?;
    let (units, mut overhead) = match a.measured_budget {
        // The base code only; the coordinator spends the rest from the reads it sees.
        Some(_) => (vec![p.scheme.start_units(); a.objects], 0),
        None => (budgeted, budget_bytes),
    };
    pb.set_message(format!("starting the cluster: {} nodes", a.nodes));
    let bed = start(a, p, dir, budget_bytes, testbed).await?;
    let t = Instant::now();
    write_objects(a, p, &bed, &units, pb).await?;
    let write_s = t.elapsed().as_secs_f64();
    if let Some(n) = a.kill {
        pb.set_message(format!("killing node {n}"));
        kill(&bed, n).await?;
    }
    let live: Vec<usize> = (0..a.nodes).filter(|&n| Some(n) != a.kill).collect();
    if let (Some((n, delay)), Some(b)) = (p.slow, testbed) {
        pb.set_message(format!("slowing node {n} by {delay:?} each way"));
        b.apply(&crate::cluster_demo::bed::Fault {
            node: n,
            fraction: 0.0,
            at: 0,
            kind: crate::cluster_demo::bed::FaultKind::Slow { delay },
            duration: None,
        })?;
    }
    let readers = Arc::new(Readers::new(a, p, &bed, &live));
    let mut budget_changes = 0;
    if let Some(warm) = a.measured_budget {
        pb.set_message(format!("{warm} warm-up reads"));
        let warmup = read_load(a, p, &readers, &live, warm, pb).await?;
        if let Some(Err(e)) = warmup.iter().find(|r| r.is_err()) {
            pb.suspend(|| eprintln!("a warm-up read failed: {e}"));
        }
        pb.set_message("waiting for the memory budget to settle");
        budget_changes = settle_budget(&bed).await?;
    }
    let before = link_bytes(&bed, &live).await?;
    let t = Instant::now();
    pb.set_message(format!("{} reads", a.requests));
    // The machine's spare CPU during the reads: a run that left none measured this machine's
    // cores, not the links (the bed's own rule applies only while its delayers run).
    let watch = ecdn_testbed::machine::MachineWatch::start().ok();
    let results = read_load(a, p, &readers, &live, a.requests, pb).await?;
    let read_s = t.elapsed().as_secs_f64();
    let machine = watch
        .as_ref()
        .map(ecdn_testbed::machine::MachineWatch::report);
    let after = link_bytes(&bed, &live).await?;
    // The budget as the reads left it, and what it re-coded during them.
    let mut changes_during_reads = 0;
    if a.measured_budget.is_some() {
        let (changes, bytes) = budget_state(a, p, &bed).await?;
        changes_during_reads = changes - budget_changes;
        overhead = bytes;
    }
    bed.procs.lock().unwrap().check_running()?;
    bed.procs.lock().unwrap().stop_all();
    let loads: Vec<u64> = after
        .iter()
        .zip(&before)
        .map(|(a, b)| a.saturating_sub(*b))
        .collect();
    let mut ms = Vec::new();
    let mut failures = Vec::new();
    for r in results {
        match r {
            Ok(l) => ms.push(l),
            Err(e) => failures.push(e),
        }
    }
    for e in failures.iter().take(3) {
        eprintln!("failed read: {e}");
    }
    let useful = ms.len() as u64 * p.size;
    let mut r = report(a, p, "live");
    r.testbed = testbed.map(|b| b.report());
    r.overhead_bytes = overhead;
    r.failed_requests = failures.len() as u64;
    r.imbalance_percent = imbalance_percent(&loads, useful);
    r.latency_ms = Latency::of(ms);
    r.loads = loads;
    r.useful_bytes = useful;
    r.write_s = write_s;
    r.read_s = read_s;
    r.budget_changes = budget_changes;
    r.budget_changes_during_reads = changes_during_reads;
    r.via_node_reads = readers.via_node_reads();
    r.split_servers = readers.split_servers();
    r.read_machine = machine;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn args(a: &[&str]) -> BenchArgs {
        Cli::try_parse_from(std::iter::once("bench").chain(a.iter().copied()))
            .unwrap()
            .bench
    }

    #[test]
    fn plans_and_budgets() {
        let p = plan(&args(&[])).unwrap();
        assert_eq!((p.k, p.r, p.delta, p.budget), (10, 1, 1, 0.15));
        let p = plan(&args(&["--scheme", "selective-replication"])).unwrap();
        assert_eq!((p.k, p.r, p.delta), (1, 0, 0));
        let p = plan(&args(&["--delta", "auto"])).unwrap();
        assert_eq!((p.delta, p.auto), (1, true));
        assert_eq!(report(&args(&[]), &p, "live").delta, "auto");
        // Small k: the parity alone is over 15%; 5% is left for skew.
        let p = plan(&args(&["--k", "4"])).unwrap();
        assert!((p.budget - 0.30).abs() < 1e-9);
        for bad in [
            &["--k", "12"][..],
            &["--kill", "12"],
            &["--nodes", "11", "--kill", "3"],
            &["--size", "0"],
            &["--size", "2GiB"],
            &["--simulate", "--measured-budget", "100"],
            &["--load", "0"],
            &["--peer-rate", "5"],
            &["--background-load", "1"],
            &["--delta", "x"],
        ] {
            assert!(plan(&args(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn units_follow_popularity() {
        let a = args(&["--objects", "50"]);
        let (u, overhead) = units(&a, &plan(&a).unwrap()).unwrap();
        assert!(u.iter().all(|&n| n >= 11));
        assert!(u[0] > 11 && u[49] == 11, "{u:?}");
        assert!(overhead as f64 <= 0.15 * 50.0 * (4 << 20) as f64);
        let a = args(&["--objects", "50", "--scheme", "selective-replication"]);
        let (u, _) = units(&a, &plan(&a).unwrap()).unwrap();
        assert!(u[0] > 1 && u[49] == 1, "{u:?}");
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let l = Latency::of((1..=1000).map(f64::from).collect());
        assert_eq!(
            (l.p50, l.p99, l.p99_9, l.max),
            (500.0, 990.0, 999.0, 1000.0)
        );
        assert!((l.mean - 500.5).abs() < 1e-9);
        assert_eq!(Latency::of(Vec::new()), Latency::default());
    }

    #[test]
    fn contents_are_a_function_of_seed_and_index() {
        assert_eq!(contents(1, 3, 1001), contents(1, 3, 1001));
        assert_ne!(contents(1, 3, 64), contents(1, 4, 64));
        assert_eq!(contents(2, 0, 13).len(), 13);
    }

    #[test]
    fn simulate_mode_reports_lambda_and_variance() {
        let a = args(&[
            "--simulate",
            "--nodes",
            "25",
            "--objects",
            "200",
            "--requests",
            "20000",
        ]);
        let r = simulated(&a, &plan(&a).unwrap()).unwrap();
        assert_eq!(r.failed_requests, 0);
        let (v, pred) = (r.variance_ratio.unwrap(), r.variance_predicted.unwrap());
        assert!((v - pred).abs() < 0.3 * pred, "{v} vs {pred}");
        assert!(r.imbalance_percent > 0.0 && r.imbalance_percent < 100.0);
    }
}
