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
//! read its pieces), and `--slow NODE:DELAY@F` (DELAY more each way on its link: slow, alive).

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
}

/// What a network fault does to a node.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum FaultKind {
    PartitionPeers,
    PartitionClients,
    Slow {
        #[serde(serialize_with = "ms")]
        delay: Duration,
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
            FaultKind::Slow { delay } => write!(f, "slowed by {delay:?} each way"),
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

/// A network fault of the run: `kind` on `node` before request `at`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Fault {
    pub node: usize,
    pub fraction: f64,
    pub at: u64,
    #[serde(flatten)]
    pub kind: FaultKind,
}

/// The faults of `args` for a run of `requests` over `nodes` nodes, in the order they happen.
pub fn faults(args: &TestbedArgs, nodes: usize, requests: u64) -> Result<Vec<Fault>> {
    let mut out = Vec::new();
    let mut add = |node: usize, fraction: f64, kind: FaultKind| -> Result<()> {
        if node >= nodes {
            bail!("fault on node {node}: nodes are 0..{}", nodes - 1);
        }
        out.push(Fault {
            node,
            fraction,
            at: (fraction * requests as f64).floor() as u64,
            kind,
        });
        Ok(())
    };
    for s in &args.partition_peers {
        let (node, f) = node_at("--partition-peers", s).map_err(anyhow::Error::msg)?;
        add(node, f, FaultKind::PartitionPeers)?;
    }
    for s in &args.partition_clients {
        let (node, f) = node_at("--partition-clients", s).map_err(anyhow::Error::msg)?;
        add(node, f, FaultKind::PartitionClients)?;
    }
    for s in &args.slow {
        let bad = || anyhow::anyhow!("--slow {s:?}: expected NODE:DELAY@FRACTION, e.g. 1:20ms@0.5");
        let (node, rest) = s.split_once(':').ok_or_else(bad)?;
        let (delay, fraction) = rest.split_once('@').ok_or_else(bad)?;
        let (node, f) =
            node_at("--slow", &format!("{node}@{fraction}")).map_err(anyhow::Error::msg)?;
        let delay = ecdn_testbed::spec::parse_duration(delay)
            .map_err(|e| anyhow::anyhow!("--slow {s:?}: {e}"))?;
        add(node, f, FaultKind::Slow { delay })?;
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
            FaultKind::Slow { delay } => bed.slow(&node, delay)?,
        }
        Ok(())
    }

    /// Undoes every fault (at the end of the replay).
    pub fn heal(&self) -> Result<()> {
        Ok(self.bed.lock().unwrap().restore_all()?)
    }

    /// The bed for the demo's JSON.
    pub fn report(&self) -> BedReport {
        self.report.clone()
    }
}

/// A shared handle the run's fault callback can hold.
pub type SharedBed = Arc<DemoBed>;

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
}
