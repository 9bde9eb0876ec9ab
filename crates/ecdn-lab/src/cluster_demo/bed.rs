//! `ecdn cluster demo --testbed LINK`: the demo's processes on hosts of a test bed
//! (`ecdn-testbed`) instead of one loopback interface.
//!
//! Each process has a host of its own, joined by links of the given spec: `origin`, `coord`
//! (the coordinator and its status page), `client` (this process: the load driver and
//! everything it asks the cluster), and `n0` ... `nN-1`, one per node. They are addressed by
//! their hosts' IPs on fixed ports, so the cluster file names no loopback address.
//!
//! The network faults of the bed become failure events of the run, like `--kill`:
//! `--partition-peers NODE@F` (the node's peers cannot reach it, nor it them; the client, the
//! origin and the coordinator still can), `--partition-clients NODE@F` (the reverse: the client
//! cannot reach it, so the load balancer takes it out of its rotation, but its peers still
//! read its pieces), `--slow NODE:DELAY@F` (DELAY more each way on its link: slow, alive),
//! `--lossy NODE:LOSS@F` (LOSS% of its packets lost each way) and `--flap NODE:PERIOD@F`
//! (partitioned from its peers for PERIOD, healed for PERIOD, again and again). Each takes a
//! duration, `NODE@F+20s`, after which it heals (without one it lasts to the end of the
//! replay), so a run measures the return too.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use ecdn_testbed::{Bed, BedConfig, HostSpec, LinkSpec};
use serde::Serialize;

use super::procs::Layout;
use super::schedule::node_at;

/// The demo's test-bed options.
#[derive(Args, Clone, Default)]
pub struct TestbedArgs {
    /// Run the origin, the coordinator, every node and the load driver as separate processes
    /// on separate hosts of a test bed (network namespaces on a bridge; needs root), each
    /// host's link shaped to LINK: `RATE[,delay=D][,jitter=J][,loss=P%]`, e.g. `1gbit` or
    /// `10gbit,delay=100us`. The bed is removed when the demo ends, however it ends.
    #[arg(long, value_name = "LINK")]
    pub testbed: Option<String>,
    /// With --testbed: the client host's link (default: LINK of --testbed), e.g.
    /// `1gbit,delay=10ms` for clients across a WAN.
    #[arg(long, value_name = "LINK", requires = "testbed")]
    pub testbed_client: Option<String>,
    /// With --testbed: the origin host's link (default: LINK of --testbed).
    #[arg(long, value_name = "LINK", requires = "testbed")]
    pub testbed_origin: Option<String>,
    /// With --testbed: partition NODE from the other nodes when FRACTION of the requests were
    /// issued (clients, origin and coordinator still reach it); repeatable.
    #[arg(long, value_name = "NODE@FRACTION", requires = "testbed")]
    pub partition_peers: Vec<String>,
    /// With --testbed: partition NODE from the client host at FRACTION (its peers still reach
    /// it); the load balancer takes it out of its rotation. Repeatable.
    #[arg(long, value_name = "NODE@FRACTION", requires = "testbed")]
    pub partition_clients: Vec<String>,
    /// With --testbed: add DELAY each way to NODE's link at FRACTION (a slow but alive
    /// server), e.g. `1:20ms@0.5`; repeatable.
    #[arg(long, value_name = "NODE:DELAY@FRACTION", requires = "testbed")]
    pub slow: Vec<String>,
    /// With --testbed: partition NODE from the coordinator's host at FRACTION (its peers
    /// and the client still reach it); repeatable: a coordinator cut off from several nodes.
    #[arg(long, value_name = "NODE@FRACTION", requires = "testbed")]
    pub partition_coordinator: Vec<String>,
    /// With --testbed: lose LOSS of NODE's packets each way from FRACTION on, e.g.
    /// `1:1%@0.3`; repeatable.
    #[arg(long, value_name = "NODE:LOSS@FRACTION", requires = "testbed")]
    pub lossy: Vec<String>,
    /// With --testbed: partition NODE from its peers for PERIOD, heal it for PERIOD, and so on
    /// from FRACTION (to the end of the replay, or for the fault's +DURATION), e.g.
    /// `3:2s@0.3+30s`; repeatable.
    #[arg(long, value_name = "NODE:PERIOD@FRACTION", requires = "testbed")]
    pub flap: Vec<String>,
}

/// What a network fault does to a node.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum FaultKind {
    PartitionPeers,
    PartitionClients,
    PartitionCoordinator,
    Slow {
        #[serde(serialize_with = "ms")]
        delay: Duration,
    },
    Lossy {
        loss_ppm: u32,
    },
    /// Partitioned from its peers for `period`, healed for `period`, and so on.
    Flap {
        #[serde(serialize_with = "ms")]
        period: Duration,
    },
}

fn ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FaultKind::PartitionPeers => f.write_str("partitioned from its peers"),
            FaultKind::PartitionClients => {
                f.write_str("partitioned from the client (out of the rotation)")
            }
            FaultKind::PartitionCoordinator => f.write_str("partitioned from the coordinator"),
            FaultKind::Slow { delay } => write!(f, "slowed by {delay:?} each way"),
            FaultKind::Lossy { loss_ppm } => {
                write!(f, "losing {}% of its packets", *loss_ppm as f64 / 1e4)
            }
            FaultKind::Flap { period } => {
                write!(
                    f,
                    "flapping (partitioned from its peers every other {period:?})"
                )
            }
        }
    }
}

impl FaultKind {
    /// Whether the client can no longer reach the node, so that the load balancer takes it
    /// out of its rotation (as its health checks would).
    pub fn leaves_rotation(&self) -> bool {
        matches!(self, FaultKind::PartitionClients)
    }
}

/// A network fault of the run: `kind` on `node` before request `at`, healed `duration` later
/// (`None`: at the end of the replay).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Fault {
    pub node: usize,
    pub fraction: f64,
    pub at: u64,
    #[serde(flatten)]
    pub kind: FaultKind,
    #[serde(serialize_with = "opt_s")]
    pub duration: Option<Duration>,
}

fn opt_s<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

/// `SPEC+DURATION` split: the spec, and the duration if given.
fn with_duration(flag: &str, s: &str) -> Result<(String, Option<Duration>)> {
    match s.split_once('+') {
        None => Ok((s.to_string(), None)),
        Some((spec, d)) => {
            let d = crate::args::duration(flag, d.trim())?;
            if d.is_zero() {
                bail!("{flag} {s:?}: the duration after '+' must be above 0");
            }
            Ok((spec.to_string(), Some(d)))
        }
    }
}

/// `NODE:VALUE@FRACTION`: the node, VALUE, the fraction.
fn node_value_at<'s>(flag: &str, s: &'s str, example: &str) -> Result<(usize, &'s str, f64)> {
    let bad = || anyhow::anyhow!("{flag} {s:?}: expected NODE:{example}");
    let (node, rest) = s.split_once(':').ok_or_else(bad)?;
    let (value, fraction) = rest.split_once('@').ok_or_else(bad)?;
    let (node, f) = node_at(flag, &format!("{node}@{fraction}")).map_err(anyhow::Error::msg)?;
    Ok((node, value, f))
}

/// The faults of `args` for a run of `requests` over `nodes` nodes, in the order they happen.
pub fn faults(args: &TestbedArgs, nodes: usize, requests: u64) -> Result<Vec<Fault>> {
    let mut out = Vec::new();
    let mut add = |node: usize, fraction: f64, kind: FaultKind, duration| -> Result<()> {
        if node >= nodes {
            bail!("fault on node {node}: nodes are 0..{}", nodes - 1);
        }
        out.push(Fault {
            node,
            fraction,
            at: (fraction * requests as f64).floor() as u64,
            kind,
            duration,
        });
        Ok(())
    };
    for s in &args.partition_peers {
        let (spec, d) = with_duration("--partition-peers", s)?;
        let (node, f) = node_at("--partition-peers", &spec).map_err(anyhow::Error::msg)?;
        add(node, f, FaultKind::PartitionPeers, d)?;
    }
    for s in &args.partition_clients {
        let (spec, d) = with_duration("--partition-clients", s)?;
        let (node, f) = node_at("--partition-clients", &spec).map_err(anyhow::Error::msg)?;
        add(node, f, FaultKind::PartitionClients, d)?;
    }
    for s in &args.partition_coordinator {
        let (spec, d) = with_duration("--partition-coordinator", s)?;
        let (node, f) = node_at("--partition-coordinator", &spec).map_err(anyhow::Error::msg)?;
        add(node, f, FaultKind::PartitionCoordinator, d)?;
    }
    for s in &args.slow {
        let (spec, d) = with_duration("--slow", s)?;
        let (node, delay, f) = node_value_at("--slow", &spec, "DELAY@FRACTION, e.g. 1:20ms@0.5")?;
        let delay = ecdn_testbed::spec::parse_duration(delay)
            .map_err(|e| anyhow::anyhow!("--slow {s:?}: {e}"))?;
        add(node, f, FaultKind::Slow { delay }, d)?;
    }
    for s in &args.lossy {
        let (spec, d) = with_duration("--lossy", s)?;
        let (node, loss, f) = node_value_at("--lossy", &spec, "LOSS@FRACTION, e.g. 1:1%@0.3")?;
        let probe = LinkSpec::parse(&format!("1gbit,loss={loss}"))
            .map_err(|e| anyhow::anyhow!("--lossy {s:?}: {e}"))?;
        add(
            node,
            f,
            FaultKind::Lossy {
                loss_ppm: probe.loss_ppm,
            },
            d,
        )?;
    }
    for s in &args.flap {
        let (spec, d) = with_duration("--flap", s)?;
        let (node, period, f) = node_value_at("--flap", &spec, "PERIOD@FRACTION, e.g. 3:2s@0.3")?;
        let period = crate::args::duration("--flap", period)?;
        if period < Duration::from_millis(100) {
            bail!("--flap {s:?}: the period must be at least 100ms");
        }
        add(node, f, FaultKind::Flap { period }, d)?;
    }
    let leaving = out.iter().filter(|f| f.kind.leaves_rotation()).count();
    if leaving >= nodes {
        bail!("--partition-clients would leave the client no node");
    }
    out.sort_by_key(|f| (f.at, f.node));
    Ok(out)
}

/// The demo's bed: its hosts and the processes that run on them.
pub struct DemoBed {
    bed: Mutex<Bed>,
    nodes: usize,
    report: BedReport,
}

/// The bed in the demo's JSON (`testbed`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BedReport {
    pub id: String,
    /// The links as given: the nodes' and the coordinator's, the client's, the origin's.
    pub link: String,
    pub client_link: String,
    pub origin_link: String,
    pub hosts: Vec<HostReport>,
    pub faults: Vec<Fault>,
    /// Each delaying host's delayer, as it measured itself by the end of the run.
    pub delayers: Vec<ecdn_testbed::bed::DelayerReport>,
    /// The share of the machine's CPU the delayers took together, their threads' user and
    /// system time (`ecdn_testbed::bed::delayers_cpu_share`).
    pub delayers_cpu: f64,
    /// The machine's spare CPU while the delayers ran (`ecdn_testbed::machine`); `None`
    /// without delay.
    pub machine: Option<ecdn_testbed::machine::MachineReport>,
    /// `false` when a delayer did not keep up, or the machine had no CPU to spare in too many
    /// seconds (`ecdn_testbed::bed::machine_kept_up`): the run measured the bed, not the
    /// system, and is no result ([`BedReport::invalid_because`]).
    pub valid: bool,
}

impl BedReport {
    /// Why the run is no result, if it is none: the delayers that did not keep up, or the
    /// CPU they took from the processes under test when the machine had none to spare.
    pub fn invalid_because(&self) -> Option<String> {
        if let Some(m) = self
            .machine
            .filter(|m| !ecdn_testbed::bed::machine_kept_up(m))
        {
            return Some(format!(
                "INVALID RUN: the machine had no CPU to spare (under {:.0}% idle) in {} of {} \
                 seconds, while the test bed's delayers took {:.0}% of it at a real-time \
                 priority; the processes under test waited for the bed, so this run measured \
                 the bed, not the system (use a lower rate or load, or no delay)",
                ecdn_testbed::machine::STARVED_IDLE * 100.0,
                m.starved_seconds,
                m.seconds,
                self.delayers_cpu * 100.0,
            ));
        }
        let bad: Vec<String> = self
            .delayers
            .iter()
            .filter(|d| !d.kept_up())
            .map(|d| {
                format!(
                    "{} (saturated {} of {} s, busiest second {:.0}%, {} late packets up to \
                     {:.1} ms, {} overflows)",
                    d.host,
                    d.saturated_seconds,
                    d.seconds,
                    d.max_busy * 100.0,
                    d.late,
                    d.max_late_ms,
                    d.overflows
                )
            })
            .collect();
        (!bad.is_empty()).then(|| {
            format!(
                "INVALID RUN: the test bed's delayer did not keep up with the traffic, so \
                 packets waited more than their links' delay; this run measured the bed, not \
                 the system (use a lower rate or load, or no delay): {}",
                bad.join("; ")
            )
        })
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostReport {
    pub name: String,
    pub addr: IpAddr,
    pub link: String,
    /// The demo's processes on it.
    pub runs: String,
}

const ORIGIN_PORT: u16 = 8000;
const COORDINATOR_PORT: u16 = 7000;
const STATUS_PORT: u16 = 7001;
const CLIENT_PORT: u16 = 8080;
const PEER_PORT: u16 = 8081;
const ADMIN_PORT: u16 = 8082;

impl DemoBed {
    /// Builds the bed of `args` for `nodes` nodes, with this executable as its watcher.
    pub fn create(args: &TestbedArgs, nodes: usize, faults: Vec<Fault>) -> Result<DemoBed> {
        let spec = args.testbed.as_deref().expect("--testbed given");
        let parse = |flag: &str, s: &str| -> Result<LinkSpec> {
            LinkSpec::parse(s).map_err(|e| anyhow::anyhow!("{flag}: {e}"))
        };
        let link = parse("--testbed", spec)?;
        let client = parse(
            "--testbed-client",
            args.testbed_client.as_deref().unwrap_or(spec),
        )?;
        let origin = parse(
            "--testbed-origin",
            args.testbed_origin.as_deref().unwrap_or(spec),
        )?;
        let host = |name: &str, l: LinkSpec| HostSpec::new(name, l).map_err(anyhow::Error::msg);
        let mut hosts = vec![
            host("client", client)?,
            host("origin", origin)?,
            host("coord", link)?,
        ];
        for i in 0..nodes {
            hosts.push(host(&format!("n{i}"), link)?);
        }
        let exe = std::env::current_exe().context("this executable's path")?;
        let bed = Bed::create(&BedConfig {
            hosts,
            guard: Some(exe),
        })
        .context("--testbed: building the test bed")?;
        let runs = |name: &str| match name {
            "client" => "the load driver (this process)".to_string(),
            "origin" => "the origin".to_string(),
            "coord" => "the coordinator".to_string(),
            n => format!("node {}", &n[1..]),
        };
        let report = BedReport {
            id: bed.id().to_string(),
            link: link.to_string(),
            client_link: client.to_string(),
            origin_link: origin.to_string(),
            hosts: bed
                .hosts()
                .iter()
                .map(|h| HostReport {
                    name: h.name.clone(),
                    addr: IpAddr::V4(h.addr),
                    link: h.link.to_string(),
                    runs: runs(&h.name),
                })
                .collect(),
            faults,
            delayers: Vec::new(),
            delayers_cpu: 0.0,
            machine: None,
            valid: true,
        };
        Ok(DemoBed {
            bed: Mutex::new(bed),
            nodes,
            report,
        })
    }

    fn addr(&self, host: &str, port: u16) -> SocketAddr {
        let h = self.report.hosts.iter().find(|h| h.name == host);
        SocketAddr::new(h.expect("a host of the bed").addr, port)
    }

    /// Where every process listens: its host's address, fixed ports.
    pub fn layout(&self) -> Layout {
        let coordinator = self.addr("coord", COORDINATOR_PORT);
        Layout {
            origin: self.addr("origin", ORIGIN_PORT),
            coordinator,
            coordinators: vec![coordinator],
            nodes: (0..self.nodes)
                .map(|i| {
                    let h = format!("n{i}");
                    (self.addr(&h, CLIENT_PORT), self.addr(&h, PEER_PORT))
                })
                .collect(),
            admins: (0..self.nodes)
                .map(|i| self.addr(&format!("n{i}"), ADMIN_PORT))
                .collect(),
            status: self.addr("coord", STATUS_PORT),
        }
    }

    /// The namespace each of the demo's processes runs in, by its name in [`super::procs`].
    pub fn placement(&self) -> HashMap<String, String> {
        let bed = self.bed.lock().unwrap();
        let ns = |h: &str| bed.host(h).expect("a host of the bed").netns.clone();
        let mut map = HashMap::new();
        map.insert("origin".to_string(), ns("origin"));
        map.insert("coordinator".to_string(), ns("coord"));
        for i in 0..self.nodes {
            map.insert(format!("node {i}"), ns(&format!("n{i}")));
        }
        map
    }

    /// Moves the calling thread (the demo's main thread, before its runtime starts) onto the
    /// client host until the guard is dropped.
    pub fn enter_client(&self) -> Result<ecdn_testbed::bed::Entered> {
        Ok(self.bed.lock().unwrap().enter("client")?)
    }

    /// Applies a fault to the running bed.
    pub fn apply(&self, f: &Fault) -> Result<()> {
        let mut bed = self.bed.lock().unwrap();
        let node = format!("n{}", f.node);
        match f.kind {
            FaultKind::PartitionPeers => {
                let others: Vec<String> = (0..self.nodes)
                    .filter(|&i| i != f.node)
                    .map(|i| format!("n{i}"))
                    .collect();
                let others: Vec<&str> = others.iter().map(String::as_str).collect();
                bed.partition(&[&node], &others)?;
            }
            FaultKind::PartitionClients => bed.partition(&[&node], &["client"])?,
            FaultKind::PartitionCoordinator => bed.partition(&[&node], &["coord"])?,
            FaultKind::Slow { delay } => bed.slow(&node, delay)?,
            FaultKind::Lossy { loss_ppm } => {
                let mut spec = bed.host(&node)?.link;
                spec.loss_ppm = loss_ppm;
                bed.shape(&node, spec)?;
            }
            // Its first half period: partitioned (the caller's timer flips it).
            FaultKind::Flap { .. } => {
                drop(bed);
                return self.apply(&Fault {
                    kind: FaultKind::PartitionPeers,
                    ..*f
                });
            }
        }
        Ok(())
    }

    /// Undoes every fault on `node` (its fault's duration is over, or a flap's half period).
    pub fn heal_node(&self, node: usize) -> Result<()> {
        Ok(self.bed.lock().unwrap().restore(&format!("n{node}"))?)
    }

    /// Undoes every fault (at the end of the replay).
    pub fn heal(&self) -> Result<()> {
        Ok(self.bed.lock().unwrap().restore_all()?)
    }

    /// The bed for the demo's JSON, with its delayers' measures so far.
    pub fn report(&self) -> BedReport {
        let mut r = self.report.clone();
        let bed = self.bed.lock().unwrap();
        r.delayers = bed.delayers();
        r.machine = bed.machine();
        drop(bed);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        r.delayers_cpu = ecdn_testbed::bed::delayers_cpu_share(&r.delayers, cores);
        r.valid = r.delayers.iter().all(|d| d.kept_up())
            && r.machine
                .as_ref()
                .is_none_or(ecdn_testbed::bed::machine_kept_up);
        r
    }
}

/// A shared handle the run's fault callback can hold.
pub type SharedBed = Arc<DemoBed>;

/// Nodes whose network fault healed, for the load driver's dispenser to take back into its
/// rotation.
pub type Heals = Arc<Mutex<Vec<usize>>>;

/// What the fault timers share with the run.
#[derive(Clone)]
pub struct FaultContext {
    /// Every fault's start and heal, as it happened.
    pub log: super::declared::FaultLog,
    /// Nodes the client reaches again, for the load balancer's rotation.
    pub heals: Heals,
    /// The replay ended: timers apply nothing more.
    pub done: Arc<std::sync::atomic::AtomicBool>,
    /// Requests handed out so far.
    pub issued: Arc<std::sync::atomic::AtomicU64>,
}

impl FaultContext {
    fn mark(&self, node: usize, heal: bool) {
        self.log.lock().unwrap().push(super::declared::FaultMark {
            node,
            heal,
            at: std::time::Instant::now(),
            at_request: self.issued.load(std::sync::atomic::Ordering::Relaxed),
        });
    }

    fn done(&self) -> bool {
        self.done.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sleeps `d`, or less if the replay ends; whether it ended.
    fn sleep(&self, d: Duration) -> bool {
        let until = std::time::Instant::now() + d;
        while std::time::Instant::now() < until {
            if self.done() {
                return true;
            }
            std::thread::sleep((until - std::time::Instant::now()).min(Duration::from_millis(20)));
        }
        self.done()
    }
}

/// Applies `f` to the bed now and, when it lasts a while or flaps, heals (and flaps) it on
/// time in a thread of its own; every start and heal is marked in `ctx.log`.
pub fn apply_timed(bed: &SharedBed, f: &Fault, ctx: &FaultContext) -> Result<()> {
    bed.apply(f)?;
    ctx.mark(f.node, false);
    let timed = f.duration.is_some() || matches!(f.kind, FaultKind::Flap { .. });
    if !timed {
        return Ok(());
    }
    let (bed, f, ctx) = (bed.clone(), *f, ctx.clone());
    std::thread::spawn(move || {
        let start = std::time::Instant::now();
        let over =
            |ctx: &FaultContext| ctx.done() || f.duration.is_some_and(|d| start.elapsed() >= d);
        match f.kind {
            FaultKind::Flap { period } => loop {
                if ctx.sleep(period) {
                    return;
                }
                if let Err(e) = bed.heal_node(f.node) {
                    eprintln!("error: healing node {}: {e:#}", f.node);
                }
                ctx.mark(f.node, true);
                if ctx.sleep(period) || over(&ctx) {
                    return;
                }
                let part = Fault {
                    kind: FaultKind::PartitionPeers,
                    ..f
                };
                if let Err(e) = bed.apply(&part) {
                    eprintln!("error: partitioning node {} again: {e:#}", f.node);
                }
                ctx.mark(f.node, false);
            },
            _ => {
                let Some(d) = f.duration else { return };
                if ctx.sleep(d) {
                    return;
                }
                match bed.heal_node(f.node) {
                    Ok(()) => eprintln!("node {} healed ({} over)", f.node, f.kind),
                    Err(e) => eprintln!("error: healing node {}: {e:#}", f.node),
                }
                ctx.mark(f.node, true);
                if f.kind.leaves_rotation() {
                    ctx.heals.lock().unwrap().push(f.node);
                }
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_parse_and_sort() {
        let args = TestbedArgs {
            testbed: Some("1gbit".into()),
            partition_peers: vec!["1@0.5".into()],
            partition_clients: vec!["2@0.2".into()],
            slow: vec!["0:20ms@0.7".into()],
            ..Default::default()
        };
        let f = faults(&args, 4, 1000).unwrap();
        assert_eq!(
            f.iter().map(|f| (f.node, f.at)).collect::<Vec<_>>(),
            [(2, 200), (1, 500), (0, 700)]
        );
        assert!(f.iter().all(|f| f.duration.is_none()));
        let timed = TestbedArgs {
            testbed: Some("1gbit".into()),
            partition_peers: vec!["3@0.3+20s".into()],
            lossy: vec!["1:1%@0.2+5s".into()],
            flap: vec!["2:2s@0.4".into()],
            partition_coordinator: vec!["0@0.5".into()],
            ..Default::default()
        };
        let t = faults(&timed, 4, 1000).unwrap();
        assert_eq!(
            t.iter()
                .map(|f| (f.node, f.at, f.duration))
                .collect::<Vec<_>>(),
            [
                (1, 200, Some(Duration::from_secs(5))),
                (3, 300, Some(Duration::from_secs(20))),
                (2, 400, None),
                (0, 500, None)
            ]
        );
        assert_eq!(t[0].kind, FaultKind::Lossy { loss_ppm: 10_000 });
        assert_eq!(
            t[2].kind,
            FaultKind::Flap {
                period: Duration::from_secs(2)
            }
        );
        assert_eq!(t[3].kind, FaultKind::PartitionCoordinator);
        for bad in [
            TestbedArgs {
                partition_peers: vec!["3@0.3+0s".into()],
                ..Default::default()
            },
            TestbedArgs {
                partition_peers: vec!["3@0.3+soon".into()],
                ..Default::default()
            },
            TestbedArgs {
                flap: vec!["2:10ms@0.4".into()],
                ..Default::default()
            },
            TestbedArgs {
                lossy: vec!["2:lots@0.4".into()],
                ..Default::default()
            },
        ] {
            assert!(faults(&bad, 4, 1000).is_err());
        }
        assert_eq!(
            f[2].kind,
            FaultKind::Slow {
                delay: Duration::from_millis(20)
            }
        );
        assert!(f[0].kind.leaves_rotation() && !f[1].kind.leaves_rotation());
        for (bad, why) in [
            (vec!["9:1ms@0.5"], "nodes are 0..3"),
            (vec!["1:20ms"], "NODE:DELAY@FRACTION"),
            (vec!["1:fast@0.5"], "needs a unit"),
        ] {
            let args = TestbedArgs {
                testbed: Some("1gbit".into()),
                slow: bad.iter().map(|s| s.to_string()).collect(),
                ..Default::default()
            };
            let e = faults(&args, 4, 1000).unwrap_err().to_string();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
        let all = TestbedArgs {
            testbed: Some("1gbit".into()),
            partition_clients: vec!["0@0.1".into(), "1@0.2".into()],
            ..Default::default()
        };
        assert!(faults(&all, 2, 10).is_err());
    }

    #[test]
    fn a_run_is_invalid_when_the_machine_was_starved_while_delayers_ran() {
        use ecdn_testbed::machine::MachineReport;
        let report = |machine| BedReport {
            id: "t".into(),
            link: "1gbit,delay=1ms".into(),
            client_link: "10gbit".into(),
            origin_link: "1gbit,delay=1ms".into(),
            hosts: Vec::new(),
            faults: Vec::new(),
            delayers: Vec::new(),
            delayers_cpu: 0.55,
            machine,
            valid: true,
        };
        // The object bench with delay: 91 of 115 seconds under 5% idle.
        let starved = report(Some(MachineReport {
            seconds: 115,
            starved_seconds: 91,
            idle: 0.025,
        }));
        let why = starved.invalid_because().expect("invalid");
        assert!(
            why.contains("91 of 115 seconds") && why.contains("55%"),
            "{why}"
        );
        // The L2 cluster demo: none of 27 (a tenth may be, a second of a burst or so).
        for starved_seconds in [0, 2] {
            let spare = report(Some(MachineReport {
                seconds: 27,
                starved_seconds,
                idle: 0.2,
            }));
            assert_eq!(spare.invalid_because(), None);
        }
        assert!(report(Some(MachineReport {
            seconds: 27,
            starved_seconds: 3,
            idle: 0.1,
        }))
        .invalid_because()
        .is_some());
        assert_eq!(report(None).invalid_because(), None);
    }
}
