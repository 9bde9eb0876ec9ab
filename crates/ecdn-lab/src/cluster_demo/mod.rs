//! `ecdn cluster demo`: a live C2DN cluster as separate processes on loopback — an origin
//! (`ecdn origin`), the coordinator (`ecdn coordinator`) and N nodes (`ecdn node --cluster`) —
//! a trace replayed through it by a load driver acting as the cluster's front load balancer,
//! nodes killed on schedule and, if asked, started again, and what the cluster did next to
//! what the simulator (`ecdn_sim::cluster`, in-process, same trace and configuration, without
//! failures and with the same ones) does.
//!
//! The parts: [`procs`] (ports, the cluster file, the children, readiness, CPU), [`schedule`]
//! (the kills and restarts, checked), [`driver`] (the load balancer, which carries out the
//! schedule), [`restart`] (a killed node's return, and how the report shows it), [`report`]
//! (windows, percentiles, the JSON object), `sim.rs` (the simulator's runs); the figure is
//! `plot.rs`, drawn through [`crate::plot::cluster_demo`].

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use ecdn_cluster::coordinator::client::CoordinatorClient;
use ecdn_cluster::etcd_local::LocalEtcd;
use ecdn_placement::pieces::Scheme;
use ecdn_sim::cluster_sweep::SchemeCode;
use ecdn_trace::gen::{GenConfig, Generator, Scenario, SizeDist};
use ecdn_trace::units::{format_size, parse_size};
use ecdn_trace::{Format, OpenOptions, Request, BATCH};

pub mod bed;
pub mod contract;
mod control;
pub mod driver;
pub mod measure;
pub mod procs;
pub mod report;
pub mod restart;
pub mod routing;
pub mod schedule;
mod sim;

use driver::{Dispenser, Rebalancer, SharedDispenser, Work};
use measure::{ClusterStats, CompareRow, KillRow, Record, SimSummary, Totals};
use procs::{FileSettings, Layout, Procs};
use report::Report;
use restart::{NodeStart, ReturnTiming, Returns};
use schedule::{Kill, KillSpec, Restart, RestartSpec};
use sim::{sim_summary, simulate, Failures};

#[derive(Args, Clone)]
#[command(after_help = "Examples:\n  \
    ecdn cluster demo                                  # C2DN's regime, node 2 killed at 0.5\n  \
    ecdn cluster demo --no-kill                        # the same without a failure\n  \
    ecdn cluster demo --objects 2000 --sizes lognormal:48KiB:1.2 --disk-size 8MiB  # small caches\n  \
    ecdn cluster demo --nodes 6 --kill 2@0.5 --json --plot demo.png\n  \
    ecdn cluster demo --scheme rep2 --nodes 6 --kill 2@0.5\n  \
    ecdn cluster demo --scheme c2dn-n5k3 --nodes 6 --kill 1@0.4 --kill 4@0.6\n  \
    ecdn cluster demo --nodes 6 --kill 2@0.3 --restart 2@0.6      # a node returns\n  \
    ecdn cluster demo --nodes 6 --kill 2@0.3 --restart-empty 2@0.6  # with a new disk\n  \
    ecdn cluster demo --trace t.oracleGeneral.bin --max-requests 50000\n  \
    ecdn cluster demo --sizes fixed:1MiB --objects 200 --json     # Fig. 8, coded\n  \
    ecdn cluster demo --sizes fixed:1MiB --objects 200 --threshold 2MiB --json  # replicated\n\n\
    The load driver spreads requests round-robin over the live nodes (--routing bucket: to \
    each request's bucket's serving node, as C2DN's own load balancer does); a request whose \
    connection fails (refused or reset before the answer, or broken mid-body) is retried \
    once on the next live node. --kill \
    NODE@FRACTION SIGKILLs that node once FRACTION of the requests were issued; it leaves \
    the rotation at that moment. --restart NODE@FRACTION starts a killed node again (same \
    id, ports and disk file) before that request, and it rejoins the rotation once the \
    coordinator's map has it available; --restart-empty wipes its disk file first. Without \
    --kill, --restart, --restart-empty or --no-kill, node 2 is killed at 0.5 (--kill 2@0.5) when \
    the nodes left can still run the scheme. The default workload (500 objects, sizes \
    lognormal:256KiB:1.0, 64 MiB of pieces per node) is the regime of C2DN's §6.2-6.3: the \
    surviving nodes' caches hold c2dn's working set but not rep2's; the flags of the third \
    example (the defaults before issue 37) give caches that turn over within a window. Every \
    body is checked byte by byte. The simulator runs the same trace with the same scheme, K, \
    P, threshold, buckets and seed, capacity nodes × disk size, equal weights, FIFO, without \
    failures and (with --kill) with the same kills and returns; after the run, a table sets \
    the live scheme's miss ratio, byte miss ratio, write imbalance and largest relative miss \
    increase after a kill beside the simulator's for the schemes no-rep, rep2, c2dn-norebal \
    and c2dn on the same trace, capacity and kills (JSON: `compare`). With --json the last \
    line of stdout is one JSON object.")]
pub struct DemoArgs {
    /// Nodes (processes) in the cluster.
    #[arg(long, default_value_t = 6)]
    nodes: usize,
    /// no-rep, rep2, c2dn-norebal, c2dn; a coded scheme may name its code (c2dn-n5k3).
    #[arg(long, default_value = "c2dn")]
    scheme: String,
    /// Data chunks of coded schemes (unless the scheme names its code).
    #[arg(long, default_value_t = 3)]
    k: usize,
    /// Parity chunks of coded schemes (unless the scheme names its code).
    #[arg(long, default_value_t = 1)]
    p: usize,
    /// Requests of the generated trace.
    #[arg(long, default_value_t = 10_000, conflicts_with = "trace")]
    requests: u64,
    /// Distinct objects of the generated trace (Zipf popularity).
    #[arg(long, default_value_t = 500)]
    objects: u64,
    /// Zipf exponent of the generated trace.
    #[arg(long, default_value_t = 0.9)]
    alpha: f64,
    /// Object sizes of the generated trace: fixed:SIZE, lognormal:MEDIAN:SIGMA,
    /// pareto:ALPHA:MIN, web-video. The default makes about three quarters of the objects
    /// larger than the coding threshold, and most bytes coded.
    #[arg(long, default_value = "lognormal:256KiB:1.0")]
    sizes: String,
    /// Replay this trace instead (oracleGeneral, .zst, text or CSV by its name).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// With --trace: replay at most R requests.
    #[arg(long, value_name = "R", requires = "trace")]
    max_requests: Option<u64>,
    /// Kill NODE (SIGKILL) when FRACTION of the requests were issued; repeatable. Without it
    /// (and without --restart, --restart-empty and --no-kill) node 2 is killed at 0.5, if the
    /// nodes left can run the scheme.
    #[arg(long, value_name = "NODE@FRACTION")]
    kill: Vec<String>,
    /// Kill no node: turns the default kill (node 2 at 0.5) off.
    #[arg(long, conflicts_with_all = ["kill", "restart", "restart_empty"])]
    no_kill: bool,
    /// Start NODE, killed earlier by --kill, again before FRACTION of the requests are issued:
    /// same id, ports and disk file, so it returns with what it held (C2DN App. 10.3; the
    /// simulator keeps a returning server's cache). It rejoins the rotation once the
    /// coordinator's map has it available. At most once per kill; repeatable.
    #[arg(long, value_name = "NODE@FRACTION")]
    restart: Vec<String>,
    /// As --restart, with the node's disk file wiped first: a replaced disk, returning empty
    /// (the simulator empties that server's cache on its return).
    #[arg(long, value_name = "NODE@FRACTION")]
    restart_empty: Vec<String>,
    /// C2DN's optional periodic parity rebalance, before every N-th request: the driver waits
    /// for the requests in flight, the coordinator rebalances from the loads so far and every
    /// node takes the new map; the simulator rebalances before the same requests. Off by
    /// default: parity is rebalanced only when a node fails or returns (§4.2, §5).
    #[arg(long, value_name = "N", default_value_t = 0)]
    rebalance_every: u64,
    /// Background repair (c2dn, beyond the paper): bytes each node may write per request of
    /// the trace (its trace time) to rebuild the pieces the objects it serves lost; 0, the
    /// default, turns it off. The driver stops before every --repair-every-th request and has
    /// every live node run a round (`POST /_ecdn/repair`); the simulator repairs before the
    /// same requests.
    #[arg(long, value_name = "BYTES", default_value = "0")]
    repair_rate: String,
    /// Requests between repair rounds.
    #[arg(long, value_name = "N", default_value_t = 100)]
    repair_every: u64,
    /// Concurrent requests of the load driver.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Print one JSON object as the last line of stdout.
    #[arg(long)]
    json: bool,
    /// Draw per-window miss ratios (live and simulated, kills marked), bytes written per node
    /// and the latency CDFs of coded and replicated hits to FILE (.png or .svg).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Requests per window of the table (default: a tenth of the requests).
    #[arg(long, value_name = "REQUESTS")]
    window: Option<u64>,
    /// Each node's DRAM hot-object cache.
    #[arg(long, default_value = "1MiB")]
    hoc_size: String,
    /// Each node's cache capacity for pieces (the simulator's per-server capacity).
    #[arg(long, default_value = "64MiB")]
    disk_size: String,
    /// Objects larger than this are coded (C2DN schemes).
    #[arg(long, default_value = "128KiB")]
    threshold: String,
    /// Buckets objects are hashed to.
    #[arg(long, default_value_t = 100)]
    buckets: usize,
    /// Sub-chunk size of coded objects.
    #[arg(long, default_value = "32KiB")]
    sub_chunk: String,
    /// Seed of the generated trace and of the placement.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The origin's delay before its response headers.
    #[arg(long, default_value = "0s")]
    origin_latency: String,
    /// How long the cluster may take to come up.
    #[arg(long, default_value = "30s")]
    ready_timeout: String,
    /// Limit on one attempt of one request, connect to last byte.
    #[arg(long, default_value = "30s")]
    request_timeout: String,
    /// Limit on a silence within one attempt (no response head or no body byte for this
    /// long): the load driver gives the attempt up and retries on another node, as a load
    /// balancer does with a node it can no longer reach. Keep it above --origin-latency.
    #[arg(long, default_value = "10s")]
    idle_timeout: String,
    /// Also report the download times of hits through modeled client access links of these
    /// rates (bits per second, comma-separated, e.g. `1Gbit,10Gbit`): each answer's frames, as
    /// they arrived, pass a FIFO link of that rate (C2DN's Fig. 8 clients reach the cluster over
    /// a WAN). The measured times are reported as well.
    #[arg(long, value_name = "RATES")]
    client_link: Option<String>,
    /// Where the load balancer sends a request: `round-robin` over the live nodes (a node
    /// relays a request for a bucket it does not serve to the node that does, as an anycast
    /// CDN's servers do), or `bucket`: to the bucket's serving node in the coordinator's map,
    /// fetched every 250 ms, as C2DN's prototype's DNS-based local load balancer does (§2).
    #[arg(long, value_enum, default_value_t = routing::Routing::RoundRobin)]
    routing: routing::Routing,
    /// C2DN's delayed parity fetch (§5): parity is asked for when the stripe waited for still
    /// lacks a data sub-chunk F × the first peer sub-chunk's latency later (the cluster file's
    /// `parity_delay`; default 0.2, the paper's 20%).
    #[arg(long, value_name = "F")]
    parity_delay: Option<f64>,
    /// Keep the run's directory (cluster file, logs, disk files) and print where it is.
    #[arg(long)]
    keep_dir: bool,
    #[command(flatten)]
    control: control::ControlArgs,
    #[command(flatten)]
    testbed: bed::TestbedArgs,
}

/// The requests to replay, in order.
fn load_trace(a: &DemoArgs) -> Result<Vec<Request>> {
    if let Some(path) = &a.trace {
        let opts = OpenOptions {
            format: Format::from_path(path),
        };
        let mut r = ecdn_trace::open(path, &opts)
            .with_context(|| format!("opening the trace {}", path.display()))?;
        let limit = a.max_requests.unwrap_or(u64::MAX);
        let mut out = Vec::new();
        let mut buf = Vec::with_capacity(BATCH);
        while (out.len() as u64) < limit {
            let want = (limit - out.len() as u64).min(BATCH as u64) as usize;
            if r.read_batch(&mut buf, want)
                .with_context(|| format!("reading the trace {}", path.display()))?
                == 0
            {
                break;
            }
            out.extend_from_slice(&buf);
        }
        if let Some(bad) = out.iter().position(|r| r.size == 0) {
            bail!(
                "the trace's request {bad} has size 0; the demo replays objects of at least one byte"
            );
        }
        return Ok(out);
    }
    let sizes = SizeDist::parse(&a.sizes).map_err(anyhow::Error::msg)?;
    Ok(Generator::new(GenConfig {
        requests: a.requests,
        objects: a.objects,
        alpha: a.alpha,
        sizes,
        rate: 1000.0,
        seed: a.seed,
        scenario: Scenario::Stationary,
    })?
    .collect())
}

/// The kill of a run whose flags name no kill, restart or `--no-kill`: node 2 at 0.5, as the
/// live runs of C2DN's regime in BENCHMARKS.md ("The paper's regime, live").
pub const DEFAULT_KILL: KillSpec = KillSpec {
    node: 2,
    fraction: 0.5,
};

/// Whether a run gets [`DEFAULT_KILL`].
#[derive(Clone, Copy, Debug, PartialEq)]
enum DefaultKill {
    /// The flags name kills or restarts, or `--no-kill`.
    NotAsked,
    Kill(KillSpec),
    /// The cluster cannot lose the node: it does not exist, or the nodes left are fewer than
    /// the scheme needs (`needed`).
    CannotLose,
}

fn default_kill(a: &DemoArgs, needed: usize) -> DefaultKill {
    if a.no_kill || !a.kill.is_empty() || !a.restart.is_empty() || !a.restart_empty.is_empty() {
        DefaultKill::NotAsked
    } else if DEFAULT_KILL.node < a.nodes && a.nodes > needed {
        DefaultKill::Kill(DEFAULT_KILL)
    } else {
        DefaultKill::CannotLose
    }
}

/// Everything checked and parsed before any process starts.
struct Plan {
    code: SchemeCode,
    /// What became of the default kill, when the flags asked for none, for stderr.
    kill_note: Option<String>,
    trace: Vec<Request>,
    window: u64,
    kills: Vec<Kill>,
    restarts: Vec<Restart>,
    hoc_size: u64,
    disk_size: u64,
    threshold: u64,
    sub_chunk: u64,
    /// `--repair-rate`: bytes per request of trace time per node (0: off).
    repair_rate: u64,
    ready_timeout: Duration,
    request_timeout: Duration,
    idle_timeout: Duration,
    /// `--client-link`, bits per second.
    client_links: Vec<f64>,
    control: control::ControlPlan,
    /// `--testbed`'s network faults, in the order they happen.
    faults: Vec<bed::Fault>,
}

fn plan(a: &DemoArgs) -> Result<Plan> {
    if a.nodes == 0 || a.nodes > 256 {
        bail!("--nodes must be between 1 and 256");
    }
    if a.concurrency == 0 {
        bail!("--concurrency must be positive");
    }
    if let Some(path) = &a.plot {
        crate::plot::check_output(path)?;
    }
    crate::args::duration("--origin-latency", &a.origin_latency)?;
    let code = SchemeCode::parse(&a.scheme, a.k, a.p).map_err(anyhow::Error::msg)?;
    let needed = code.scheme.servers_needed(code.k, code.p);
    if needed > a.nodes {
        bail!(
            "--scheme {} with K = {}, P = {} needs {needed} nodes; --nodes is {}",
            a.scheme,
            code.k,
            code.p,
            a.nodes
        );
    }
    let size = |flag: &str, v: &str| -> Result<u64> {
        let s = parse_size(v).map_err(|e| anyhow::anyhow!("{flag}: {e}"))?;
        if s == 0 {
            bail!("{flag} must be above 0");
        }
        Ok(s)
    };
    let hoc_size = size("--hoc-size", &a.hoc_size)?;
    let disk_size = size("--disk-size", &a.disk_size)?;
    let threshold = size("--threshold", &a.threshold)?;
    let sub_chunk = size("--sub-chunk", &a.sub_chunk)?;
    let mut specs = a
        .kill
        .iter()
        .map(|s| KillSpec::parse(s))
        .collect::<Result<Vec<_>, _>>()
        .map_err(anyhow::Error::msg)?;
    let default_kill = default_kill(a, needed);
    let kill_note = match default_kill {
        DefaultKill::NotAsked => None,
        DefaultKill::Kill(spec) => {
            specs.push(spec);
            Some(format!(
                "no --kill given: node {} is killed at {} (the default; --no-kill turns it off)",
                spec.node, spec.fraction
            ))
        }
        DefaultKill::CannotLose => Some(format!(
            "no --kill given, and no default kill: {} nodes without node {} cannot run {} \
             (it needs {needed})",
            a.nodes, DEFAULT_KILL.node, a.scheme
        )),
    };
    let trace = load_trace(a)?;
    let total = trace.len() as u64;
    if total == 0 {
        bail!("no requests to replay");
    }
    let window = match a.window {
        Some(0) => bail!("--window must be at least 1 request"),
        Some(w) => w,
        None => (total / 10).max(1),
    };
    let kills = schedule::kills(&specs, a.nodes, total).map_err(anyhow::Error::msg)?;
    let restart_specs = a
        .restart
        .iter()
        .map(|s| RestartSpec::parse(s, false))
        .chain(a.restart_empty.iter().map(|s| RestartSpec::parse(s, true)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(anyhow::Error::msg)?;
    let restarts = schedule::restarts(&restart_specs, &kills, total).map_err(anyhow::Error::msg)?;
    if a.rebalance_every > 0 && code.scheme != Scheme::C2dn {
        bail!("--rebalance-every: only c2dn rebalances parity");
    }
    let repair_rate =
        parse_size(&a.repair_rate).map_err(|e| anyhow::anyhow!("--repair-rate: {e}"))?;
    if repair_rate > 0 && code.scheme != Scheme::C2dn {
        bail!("--repair-rate: only c2dn repairs");
    }
    if repair_rate > 0 && a.repair_every == 0 {
        bail!("--repair-every: need at least 1 request between rounds");
    }
    let control = control::ControlPlan::parse(&a.control, total)?;
    let faults = bed::faults(&a.testbed, a.nodes, total)?;
    if a.testbed.testbed.is_some() && control.etcd() {
        bail!("--testbed runs the embedded coordinator; --control etcd on a test bed is not built yet");
    }
    let leaving = faults.iter().filter(|f| f.kind.leaves_rotation()).count();
    if leaving > 0 && kills.len() + leaving >= a.nodes {
        bail!("--kill and --partition-clients together would leave the client no node");
    }
    Ok(Plan {
        code,
        kill_note,
        trace,
        window,
        kills,
        restarts,
        hoc_size,
        disk_size,
        threshold,
        sub_chunk,
        repair_rate,
        ready_timeout: crate::args::duration("--ready-timeout", &a.ready_timeout)?,
        request_timeout: crate::args::duration("--request-timeout", &a.request_timeout)?,
        idle_timeout: crate::args::duration("--idle-timeout", &a.idle_timeout)?,
        client_links: match &a.client_link {
            Some(l) => l
                .split(',')
                .map(|r| crate::args::bit_rate("--client-link", r))
                .collect::<Result<_>>()?,
            None => Vec::new(),
        },
        control,
        faults,
    })
}

/// What the live run produced.
struct Live {
    records: Vec<Record>,
    elapsed_s: f64,
    /// Per node: CPU seconds at its kill (killed nodes) or at the end (the others); a node
    /// that came back adds its restarted process's at the end.
    cpu: Vec<Option<f64>>,
    /// Per node alive at the end: its `cluster` counters (a node that came back: since its
    /// restart).
    stats: Vec<Option<ClusterStats>>,
    /// Per node: killed by the schedule (whether or not it came back).
    killed: Vec<bool>,
    /// Per node: how its return went, if it came back.
    returns: Vec<Option<ReturnTiming>>,
    control: control::ControlReport,
}

/// The run's cluster: its file, layout and (etcd mode) local etcd.
struct Setup<'a> {
    dir: &'a Path,
    layout: &'a Layout,
    cfg: &'a ecdn_cluster::ClusterConfig,
    etcd: Option<Arc<Mutex<LocalEtcd>>>,
    /// `--testbed`: the hosts the processes run on.
    bed: Option<bed::SharedBed>,
}

async fn live(a: &DemoArgs, plan: &Plan, setup: &Setup<'_>) -> Result<Live> {
    let (dir, layout, cfg) = (setup.dir, setup.layout, setup.cfg);
    let n = a.nodes;
    let file = dir.join("cluster.toml");
    let procs = Arc::new(Mutex::new(Procs::new(dir)?));
    {
        let mut p = procs.lock().unwrap();
        if let Some(b) = &setup.bed {
            p.place(b.placement());
        }
        p.start_origin(layout.origin, &a.origin_latency)?;
        if plan.control.etcd() {
            for &c in &layout.coordinators {
                p.start_coordinator(&file, Some(c), None)?;
            }
        } else {
            p.start_coordinator(&file, None, Some(layout.status))?;
        }
        for id in 0..n {
            p.start_node(
                id,
                &file,
                layout.origin,
                (plan.hoc_size, plan.disk_size),
                &[],
            )?;
        }
    }
    let start = NodeStart {
        file: file.clone(),
        origin: layout.origin,
        sizes: (plan.hoc_size, plan.disk_size),
    };
    let t = Instant::now();
    procs::wait_ready(&procs, layout, cfg, plan.ready_timeout).await?;
    let first_epoch = coordinator_epoch(cfg).await?;
    if !plan.control.etcd() {
        eprintln!(
            "status pages: the cluster's http://{}/_ecdn/status, node 0's http://{}/_ecdn/status",
            layout.status, layout.admins[0]
        );
    }
    eprintln!(
        "cluster up in {:.2} s: origin {}, coordinator {}, {} nodes (HOC {}, disk {} each); \
         replaying {} requests with {} workers, {}",
        t.elapsed().as_secs_f64(),
        layout.origin,
        layout.coordinator,
        n,
        format_size(plan.hoc_size),
        format_size(plan.disk_size),
        plan.trace.len(),
        a.concurrency,
        a.routing.describe()
    );
    let progress = crate::args::progress_bar(
        Some(plan.trace.len() as u64),
        crate::args::progress_hidden(a.json, false),
    );
    let kill_cpu: Arc<Mutex<Vec<Option<f64>>>> = Arc::new(Mutex::new(vec![None; n]));
    let killer: Box<dyn FnMut(usize) + Send> = {
        let (procs, kill_cpu, progress) = (procs.clone(), kill_cpu.clone(), progress.clone());
        Box::new(move |node| {
            let cpu = procs.lock().unwrap().kill_node(node);
            kill_cpu.lock().unwrap()[node] = cpu;
            progress.suspend(|| eprintln!("killed node {node} (SIGKILL)"));
        })
    };
    let requests: Vec<(u64, u64)> = plan.trace.iter().map(|r| (r.id, r.size)).collect();
    let mut dispenser = Dispenser::new(plan.trace.len() as u64, n, plan.kills.clone(), killer);
    if a.routing == routing::Routing::Bucket {
        let router = routing::BucketRouter::start(cfg, &requests)
            .await
            .map_err(anyhow::Error::msg)
            .context("--routing bucket: the coordinator's map")?;
        dispenser = dispenser.with_router(Box::new(move |i, live| router.pick(i, live)));
    }
    let dispenser: SharedDispenser = Arc::new(Mutex::new(
        dispenser
            .with_rebalances(a.rebalance_every)
            .with_repairs(if plan.repair_rate > 0 {
                a.repair_every
            } else {
                0
            })
            .with_returns(plan.restarts.clone())
            .with_faults(plan.faults.clone(), {
                let (bed, progress) = (setup.bed.clone(), progress.clone());
                Box::new(move |f| {
                    let Some(bed) = &bed else { return };
                    let said = match bed.apply(f) {
                        Ok(()) => format!("node {} {}", f.node, f.kind),
                        Err(e) => format!("error: node {} not {}: {e:#}", f.node, f.kind),
                    };
                    progress.suspend(|| eprintln!("{said}"));
                })
            }),
    ));
    let returns = Arc::new(Returns {
        procs: procs.clone(),
        layout: layout.clone(),
        cfg: cfg.clone(),
        start,
        timeout: plan.ready_timeout,
        progress: progress.clone(),
        timings: Mutex::new(vec![None; n]),
    });
    let rebalancer: Rebalancer = {
        let cfg = cfg.clone();
        let admins = layout.admins.clone();
        Arc::new(move |live: Vec<usize>| {
            let cfg = cfg.clone();
            let nodes: Vec<SocketAddr> = live.iter().map(|&i| admins[i]).collect();
            Box::pin(async move {
                let client = CoordinatorClient::for_cluster(&cfg)
                    .await
                    .map_err(anyhow::Error::msg)?;
                procs::rebalance(&client, &nodes)
                    .await
                    .map(|_| ())
                    .context("the scheduled parity rebalance")
            })
        })
    };
    let repairer: Rebalancer = {
        let admins = layout.admins.clone();
        let budget = plan.repair_rate.saturating_mul(a.repair_every);
        Arc::new(move |live: Vec<usize>| {
            let nodes: Vec<SocketAddr> = live.iter().map(|&i| admins[i]).collect();
            Box::pin(async move {
                for addr in nodes {
                    procs::repair_round(addr, budget)
                        .await
                        .context("the scheduled repair round")?;
                }
                Ok(())
            })
        })
    };
    let work = Arc::new(Work {
        requests,
        nodes: layout.nodes.iter().map(|(c, _)| *c).collect(),
        dispenser,
        timeout: plan.request_timeout,
        idle: plan.idle_timeout,
        rebalancer: Some(rebalancer),
        repairer: Some(repairer),
        returner: Some(returns.returner()),
        arrivals: !plan.client_links.is_empty(),
        progress: progress.clone(),
    });
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let events = tokio::spawn(control::run_events(
        plan.control.clone(),
        cfg.clone(),
        layout.clone(),
        procs.clone(),
        setup.etcd.clone(),
        work.dispenser.clone(),
        done.clone(),
    ));
    let t = Instant::now();
    let records = driver::run(work, a.concurrency).await;
    let elapsed_s = t.elapsed().as_secs_f64();
    progress.finish_and_clear();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut control = events.await.context("the control-plane events")??;
    let records = records?;
    if let Some(b) = &setup.bed {
        // The faults end with the replay: the counters below are read from the client host.
        b.heal()?;
    }
    if !plan.control.etcd() {
        // The embedded coordinator's epochs count up by one per map.
        control.epoch_changes = coordinator_epoch(cfg).await? - first_epoch;
    }
    let mut killed = vec![false; n];
    for k in &plan.kills {
        killed[k.node] = true;
    }
    let returned = returns.timings.lock().unwrap().clone();
    let mut cpu = kill_cpu.lock().unwrap().clone();
    let mut stats = vec![None; n];
    for id in 0..n {
        if killed[id] && returned[id].is_none() {
            continue;
        }
        let (running, pid, tail) = {
            let mut p = procs.lock().unwrap();
            let running = p.node_running(id);
            let node = p.nodes[id].as_ref();
            (
                running,
                node.map(|p| p.pid()),
                node.map(|p| p.tail(10)).unwrap_or_default(),
            )
        };
        if !running {
            eprintln!("warning: node {id} exited during the run (not killed by the demo); its last output:\n{tail}");
            continue;
        }
        let addr = layout.admins[id];
        stats[id] = Some(
            procs::node_stats(addr)
                .await
                .with_context(|| format!("node {id} ({addr})"))?,
        );
        let now = pid.and_then(|pid| procs::cpu_seconds(pid).ok());
        cpu[id] = match (cpu[id], now) {
            (Some(before), Some(now)) => Some(before + now),
            (before, now) => now.or(before),
        };
    }
    procs.lock().unwrap().stop_all();
    Ok(Live {
        records,
        elapsed_s,
        cpu,
        stats,
        killed,
        returns: returned,
        control,
    })
}

/// The leading coordinator's current epoch.
async fn coordinator_epoch(cfg: &ecdn_cluster::ClusterConfig) -> Result<u64> {
    let client = CoordinatorClient::for_cluster(cfg)
        .await
        .map_err(anyhow::Error::msg)?;
    Ok(procs::coordinator_status(&client).await?.epoch)
}

fn build_report(
    a: &DemoArgs,
    plan: &Plan,
    scheme: String,
    live: &Live,
    sim: SimSummary,
    sim_killed: Option<SimSummary>,
    sim_empty: Option<&SimSummary>,
) -> Report {
    let t = Totals::of(&live.records);
    let windows = measure::windows(
        &live.records,
        plan.window,
        &sim.windows,
        sim_killed.as_ref().map(|s| &s.windows[..]),
    );
    let max_rel = measure::max_relative_miss_increase(&windows, &plan.kills, plan.window, false);
    let max_rel_sim = measure::max_relative_miss_increase(&windows, &plan.kills, plan.window, true);
    let (ttfb_ms, download_ms) = measure::latency(&live.records, false);
    let (ttfb_ms_piece_hits, download_ms_piece_hits) = measure::latency(&live.records, true);
    let bytes_written: Vec<Option<u64>> = live
        .stats
        .iter()
        .map(|s| s.map(|s| s.bytes_written))
        .collect();
    let whole_run = bytes_written
        .iter()
        .zip(&live.killed)
        .filter(|(_, &k)| !k)
        .filter_map(|(b, _)| b.map(|b| b as f64));
    let (peer_received, relay_received) = live
        .stats
        .iter()
        .flatten()
        .fold((0u64, 0u64), |(all, relay), s| {
            (all + s.peer_bytes_received, relay + s.relay_bytes_received)
        });
    let per_byte_served = |n: u64| {
        if t.served_bytes > 0 {
            n as f64 / t.served_bytes as f64
        } else {
            0.0
        }
    };
    let cpu_s: f64 = live.cpu.iter().flatten().sum();
    let gib = t.served_bytes as f64 / (1u64 << 30) as f64;
    let kills = plan
        .kills
        .iter()
        .map(|k| KillRow {
            node: k.node,
            fraction: k.fraction,
            at_request: k.at,
            window: measure::window_of(k.at, plan.window),
            cpu_s: live.cpu[k.node],
        })
        .collect();
    let restarts = match &sim_killed {
        Some(killed) => restart::rows(
            &plan.restarts,
            &live.returns,
            &live.records,
            plan.window,
            &restart::Sims {
                as_run: &killed.windows,
                // Without a separate run, every return came back empty already.
                empty: &sim_empty.unwrap_or(killed).windows,
                no_failure: &sim.windows,
            },
        ),
        None => Vec::new(),
    };
    let write_imbalance = measure::imbalance(whole_run);
    let compare = [
        CompareRow {
            scheme: scheme.clone(),
            run: "live",
            miss_ratio: t.miss_ratio(),
            byte_miss_ratio: t.byte_miss_ratio(),
            write_imbalance,
            max_relative_miss_increase: max_rel,
        },
        CompareRow {
            scheme: scheme.clone(),
            ..match &sim_killed {
                Some(killed) => sim::sim_row(killed, max_rel_sim),
                None => sim::sim_row(&sim, None),
            }
        },
    ]
    .into();
    Report {
        compare,
        control: live.control.clone(),
        scheme,
        nodes: a.nodes,
        k: plan.code.k,
        p: plan.code.p,
        requests: t.requests,
        concurrency: a.concurrency,
        window: plan.window,
        balancing: a.routing.describe(),
        failed_requests: t.failed,
        wrong_bytes: t.wrong_bytes,
        retried_before_response: t.retried_before_response,
        retried_mid_body: t.retried_mid_body,
        miss_ratio: t.miss_ratio(),
        byte_miss_ratio: t.byte_miss_ratio(),
        collapsed_fraction: t.collapsed_fraction(),
        collapsed_ms: measure::collapsed_latency(&live.records),
        write_imbalance,
        bytes_written,
        windows,
        kills,
        restarts,
        max_relative_miss_increase: max_rel,
        sim_max_relative_miss_increase: max_rel_sim,
        decode_fraction: t.decode_fraction(),
        decoded_request_fraction: if t.ok > 0 {
            t.decoded as f64 / t.ok as f64
        } else {
            0.0
        },
        partial_hits: t.partial_hits,
        repair: live
            .stats
            .iter()
            .flatten()
            .fold(measure::RepairCounts::default(), |a, s| {
                measure::RepairCounts {
                    objects: a.objects + s.repair.objects,
                    pieces: a.pieces + s.repair.pieces,
                    bytes_written: a.bytes_written + s.repair.bytes_written,
                }
            }),
        intra_cluster_bytes: per_byte_served(peer_received),
        intra_cluster_relay_bytes: per_byte_served(relay_received),
        bytes_served: t.served_bytes,
        ttfb_ms,
        download_ms,
        ttfb_ms_piece_hits,
        download_ms_piece_hits,
        client_links: measure::client_links(&live.records, &plan.client_links),
        cpu_s,
        cpu_s_per_gib: if gib > 0.0 { cpu_s / gib } else { 0.0 },
        node_stats: live.stats.clone(),
        elapsed_s: live.elapsed_s,
        requests_per_s: if live.elapsed_s > 0.0 {
            t.requests as f64 / live.elapsed_s
        } else {
            0.0
        },
        sim,
        sim_with_kills: sim_killed,
        testbed: None,
    }
}

pub fn run_demo(a: DemoArgs) -> Result<()> {
    let plan = plan(&a)?;
    if let Some(note) = &plan.kill_note {
        eprintln!("{note}");
    }
    let dir = tempfile::Builder::new()
        .prefix("ecdn-cluster-demo-")
        .tempdir()
        .context("creating the run's temporary directory")?;
    // etcd first: its members hold their ports, so the layout's free ports cannot collide.
    let etcd = if plan.control.etcd() {
        let bin = LocalEtcd::find_binary().context(
            "--control etcd: etcd is not installed (Debian: apt-get install etcd-server)",
        )?;
        let e = LocalEtcd::start(&bin, dir.path(), plan.control.etcd_members)
            .context("starting the local etcd cluster")?;
        eprintln!(
            "etcd: {} member(s) at {}",
            e.members(),
            e.endpoints().join(", ")
        );
        Some(Arc::new(Mutex::new(e)))
    } else {
        None
    };
    let testbed = match &a.testbed.testbed {
        Some(_) => Some(Arc::new(bed::DemoBed::create(
            &a.testbed,
            a.nodes,
            plan.faults.clone(),
        )?)),
        None => None,
    };
    if testbed.is_some() {
        // Admin listeners on a bed's hosts are beyond loopback: they need a token.
        procs::use_admin_token(procs::random_key()?);
    }
    let layout = match &testbed {
        Some(b) => b.layout(),
        None => Layout::free(a.nodes, plan.control.coordinators)?,
    };
    let key = procs::random_key()?;
    let text = procs::cluster_file(
        &FileSettings {
            scheme: plan.code.scheme.name(),
            k: plan.code.k,
            p: plan.code.p,
            threshold: plan.threshold,
            buckets: a.buckets,
            sub_chunk: plan.sub_chunk,
            seed: a.seed,
            key: key.clone(),
            etcd: etcd
                .as_ref()
                .map(|e| e.lock().unwrap().endpoints())
                .unwrap_or_default(),
            repair_rate: plan.repair_rate,
            parity_delay: a.parity_delay,
        },
        &layout,
    );
    let cfg = ecdn_cluster::ClusterConfig::parse(&text).context("the demo's cluster file")?;
    std::fs::write(dir.path().join("cluster.toml"), &text).context("writing the cluster file")?;
    // On a test bed this thread, and the runtime's threads it starts, are the client host.
    let on_client = testbed.as_ref().map(|b| b.enter_client()).transpose()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let setup = Setup {
        dir: dir.path(),
        layout: &layout,
        cfg: &cfg,
        etcd: etcd.clone(),
        bed: testbed.clone(),
    };
    let live = rt.block_on(async {
        let interrupted = crate::signals::shutdown_signal();
        tokio::select! {
            r = live(&a, &plan, &setup) => r,
            _ = interrupted => bail!("interrupted"),
        }
    });
    // Every child is dead here: the run's future (and with it the processes) is gone.
    drop(rt);
    drop(setup);
    drop(etcd);
    drop(on_client);
    let kept = if a.keep_dir {
        let path = dir.keep();
        eprintln!("kept the run's directory {}", path.display());
        Some(path)
    } else {
        None
    };
    let live = match live {
        Ok(l) => l,
        Err(e) => match kept {
            Some(p) => return Err(e.context(format!("logs in {}", p.display()))),
            None => return Err(e),
        },
    };
    eprint!("{}", report::failures(&live.records, 10));
    let sim = simulate(&a, &plan, Failures::None)?;
    let sim_killed = if plan.kills.is_empty() {
        None
    } else {
        Some(sim_summary(&simulate(&a, &plan, Failures::AsRun)?))
    };
    // What the returns that kept their disk would have cost if they had come back empty.
    let sim_empty = if plan.restarts.iter().any(|r| !r.empty) {
        Some(sim_summary(&simulate(&a, &plan, Failures::ReturnsEmpty)?))
    } else {
        None
    };
    let mut report = build_report(
        &a,
        &plan,
        cfg.scheme_name(),
        &live,
        sim_summary(&sim),
        sim_killed,
        sim_empty.as_ref(),
    );
    report.compare.extend(sim::peers(&a, &plan)?);
    report.testbed = testbed.as_ref().map(|b| b.report());
    // The bed goes now (its watcher would remove it too); the rest is reporting.
    drop(testbed);
    out!(
        "{}",
        report::window_table(&report.windows, &plan.kills, &plan.restarts, plan.window)
    )?;
    out!("{}", restart::table(&report.restarts))?;
    out!("{}", report::summary(&report))?;
    out!(
        "{}",
        measure::compare_table(&report.compare, &compare_heading(&a, &plan))
    )?;
    if let Some(path) = &a.plot {
        plot(path, &report, &live.records)?;
    }
    if a.json {
        outln!("{}", serde_json::to_string(&report)?)?;
    }
    Ok(())
}

/// The line above the comparison table: what the simulator's runs share with the live one.
fn compare_heading(a: &DemoArgs, plan: &Plan) -> String {
    let failures = if plan.kills.is_empty() {
        "without failures".to_string()
    } else {
        let mut what: Vec<String> = plan
            .kills
            .iter()
            .map(|k| format!("node {} killed at {}", k.node, k.fraction))
            .collect();
        what.extend(plan.restarts.iter().map(|r| {
            let wiped = if r.empty { ", disk wiped" } else { "" };
            format!("node {} back at {}{wiped}", r.node, r.fraction)
        }));
        what.join(", ")
    };
    format!(
        "schemes on the same {} requests and {} nodes × {}, {failures} (sim: the simulator; \
         max_rel_miss_incr: over the {} windows from each kill, against the same scheme's \
         simulator without failures):",
        plan.trace.len(),
        a.nodes,
        format_size(plan.disk_size),
        measure::SPIKE_WINDOWS
    )
}

fn plot(path: &Path, r: &Report, records: &[Record]) -> Result<()> {
    let [coded, replicated] = measure::hit_latencies(records, false);
    let input = crate::plot::PlotInput {
        title: format!(
            "ecdn cluster demo: {} on {} nodes, {} requests{}{}",
            r.scheme,
            r.nodes,
            crate::plot::grouped(r.requests),
            if r.kills.is_empty() {
                String::new()
            } else {
                format!(
                    ", killed {}",
                    r.kills
                        .iter()
                        .map(|k| format!("node {} at {:.0}%", k.node, k.fraction * 100.0))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
            if r.restarts.is_empty() {
                String::new()
            } else {
                format!(
                    ", back {}",
                    r.restarts
                        .iter()
                        .map(|b| format!(
                            "node {} at {:.0}%{}",
                            b.node,
                            b.fraction * 100.0,
                            if b.empty { " (disk wiped)" } else { "" }
                        ))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        ),
        windows: r
            .windows
            .iter()
            .map(|w| (w.start, w.requests, w.miss_ratio, w.sim_miss_ratio))
            .collect(),
        kills: r.kills.iter().map(|k| (k.at_request, k.node)).collect(),
        restarts: r
            .restarts
            .iter()
            .map(|b| (b.at_request, b.node, b.empty))
            .collect(),
        bytes_written: r.bytes_written.clone(),
        sim_bytes_written: r.sim.bytes_written.clone(),
        coded,
        replicated,
    };
    crate::plot::cluster_demo(path, &input)?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests;
