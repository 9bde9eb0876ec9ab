//! `ecdn cluster`: the live demo (run by [`ecdn_lab::cluster_demo`]) and the operator's commands
//! on a running cluster, `status | add | drain | remove | rebalance`. Each of these reads the
//! cluster file for the key and the way to the leading
//! coordinator ([`CoordinatorClient::for_cluster`]: the `coordinator` address, or in etcd mode
//! the leader etcd names) and sends one signed request; `status` also asks every member node
//! for its `/_ecdn/stats` (disk and HOC use, the epoch it serves with) on the admin listener
//! the cluster file gives it (`admin`; a node without one is listed with that error).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use clap::{Args, Subcommand};
use ecdn_cluster::coordinator::client::CoordinatorClient;
use ecdn_cluster::coordinator::{MemberOp, NewMember, NodeStatus, Status};
use ecdn_cluster::ClusterConfig;
use ecdn_trace::units::format_size;
use serde::Serialize;

use ecdn_lab::cluster_demo::procs::http_get_with;

#[derive(Args)]
pub struct StatusArgs {
    /// The cluster file.
    #[arg(long)]
    cluster: PathBuf,
    /// JSON for scripts: the coordinator's status and every node's stats.
    #[arg(long)]
    json: bool,
    /// The nodes' admin token, if their admin listeners have one (or ECDN_ADMIN_TOKEN).
    #[arg(long, env = "ECDN_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
}

#[derive(Args)]
#[command(
    after_help = "The node gets the next id and a place on the ring by its weight; \
    it takes its share (data buckets by the ring, parity from the most loaded nodes) when it \
    first reports. Then start it: ecdn node --cluster FILE --id ID --disk-path ... (it reads \
    its addresses from the coordinator's map)."
)]
pub struct AddArgs {
    /// The cluster file.
    #[arg(long)]
    cluster: PathBuf,
    /// The new node's client listener.
    #[arg(long)]
    client: SocketAddr,
    /// The new node's peer listener.
    #[arg(long)]
    peer: SocketAddr,
    /// Its weight (relative capacity; the others' are in the cluster file or `status`).
    #[arg(long, default_value_t = 1.0)]
    weight: f64,
}

#[derive(Args)]
pub struct NodeArgs {
    /// The cluster file.
    #[arg(long)]
    cluster: PathBuf,
    /// The node's id.
    node: usize,
}

#[derive(Args)]
pub struct RebalanceArgs {
    /// The cluster file.
    #[arg(long)]
    cluster: PathBuf,
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")
}

async fn client(path: &Path) -> Result<CoordinatorClient> {
    let cfg = ClusterConfig::load(path)?;
    client_for(&cfg).await
}

async fn client_for(cfg: &ClusterConfig) -> Result<CoordinatorClient> {
    CoordinatorClient::for_cluster(cfg)
        .await
        .map_err(|e| anyhow!("finding the coordinator: {e}"))
}

/// `ecdn cluster add|drain|remove`.
pub fn member(cluster: &Path, op: MemberOp) -> Result<()> {
    runtime()?.block_on(async {
        let c = client(cluster).await?;
        let reply = c.member(&op).await.map_err(|e| anyhow!(e))?;
        let added = match &op {
            MemberOp::Add(new) => Some(record_added(cluster, reply.node, new)),
            _ => None,
        };
        match op {
            MemberOp::Add(_) => outln!(
                "node {} added (unavailable until it reports); map epoch {}",
                reply.node,
                reply.epoch
            )?,
            MemberOp::Drain(n) => outln!(
                "node {n} draining: its buckets moved in map epoch {}; it stops once its \
                 requests are done",
                reply.epoch
            )?,
            MemberOp::Undrain(n) => outln!(
                "node {n} active again in map epoch {}; its buckets return once it reports \
                 (start it with `ecdn node --id {n}` if it stopped)",
                reply.epoch
            )?,
            MemberOp::Remove(n) => outln!("node {n} removed; map epoch {}", reply.epoch)?,
        }
        match added {
            Some(Ok(true)) => outln!(
                "{} lists node {} now (start it with `ecdn node --cluster {} --id {}`)",
                cluster.display(),
                reply.node,
                cluster.display(),
                reply.node
            )?,
            Some(Err(e)) => eprintln!(
                "ecdn cluster add: the cluster has node {}, but {} was not updated: {e}",
                reply.node,
                cluster.display()
            ),
            Some(Ok(false)) | None => {}
        }
        Ok(())
    })
}

/// Lists the added node `id` in the cluster file, so that the file and the cluster agree: a
/// `[[node]]` entry appended, the whole file checked to load, and written atomically
/// ([`ecdn_cluster::config::replace_file`]). `false` when the file lists that id already; an
/// error when the file cannot take it (it lists other ids than 0..`id`).
fn record_added(path: &Path, id: usize, new: &NewMember) -> Result<bool, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let cfg = ClusterConfig::parse(&text).map_err(|e| e.to_string())?;
    if cfg.nodes.iter().any(|n| n.id == id) {
        return Ok(false);
    }
    if cfg.nodes.len() != id {
        return Err(format!(
            "it lists {} nodes, and node {id} would not be the next",
            cfg.nodes.len()
        ));
    }
    let mut grown = text;
    if !grown.ends_with('\n') {
        grown.push('\n');
    }
    grown.push_str(&format!(
        "\n# Added by `ecdn cluster add`.\n[[node]]\nid = {id}\nclient = \"{}\"\npeer = \"{}\"\nweight = {:?}\n",
        new.client, new.peer, new.weight
    ));
    ClusterConfig::parse(&grown).map_err(|e| format!("with node {id} it would not load: {e}"))?;
    ecdn_cluster::config::replace_file(path, grown.as_bytes()).map_err(|e| e.to_string())?;
    Ok(true)
}

pub fn add(a: AddArgs) -> Result<()> {
    let new = NewMember {
        client: a.client,
        peer: a.peer,
        weight: a.weight,
    };
    member(&a.cluster, MemberOp::Add(new))
}

pub fn drain(a: NodeArgs) -> Result<()> {
    member(&a.cluster, MemberOp::Drain(a.node))
}

pub fn undrain(a: NodeArgs) -> Result<()> {
    member(&a.cluster, MemberOp::Undrain(a.node))
}

pub fn remove(a: NodeArgs) -> Result<()> {
    member(&a.cluster, MemberOp::Remove(a.node))
}

pub fn rebalance(a: RebalanceArgs) -> Result<()> {
    runtime()?.block_on(async {
        let epoch = client(&a.cluster)
            .await?
            .rebalance()
            .await
            .map_err(|e| anyhow!(e))?;
        outln!("parity rebalanced; map epoch {epoch}")?;
        Ok(())
    })
}

/// What a node's `/_ecdn/stats` says, for the status table.
#[derive(Clone, Debug, Default, Serialize)]
pub struct NodeUse {
    pub hoc_used: Option<u64>,
    pub hoc_capacity: Option<u64>,
    pub disk_used: Option<u64>,
    pub disk_capacity: Option<u64>,
    /// The map epoch the node serves with.
    pub epoch: Option<u64>,
    /// Why the node did not answer.
    pub error: Option<String>,
}

fn node_use(body: &[u8]) -> NodeUse {
    let v: serde_json::Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            return NodeUse {
                error: Some(format!("/_ecdn/stats is not JSON: {e}")),
                ..NodeUse::default()
            }
        }
    };
    let num = |a: &str, b: &str| v.get(a).and_then(|x| x.get(b)).and_then(|x| x.as_u64());
    NodeUse {
        hoc_used: num("hoc", "used"),
        hoc_capacity: num("hoc", "capacity"),
        disk_used: num("disk", "used"),
        disk_capacity: num("disk", "capacity"),
        epoch: num("cluster", "epoch"),
        error: None,
    }
}

#[derive(Serialize)]
struct StatusReport {
    coordinator: String,
    status: Status,
    /// By node id, for every member not removed.
    nodes: Vec<(usize, NodeUse)>,
}

pub fn status(a: StatusArgs) -> Result<()> {
    runtime()?.block_on(async {
        let cfg = ClusterConfig::load(&a.cluster)?;
        let c = client_for(&cfg).await?;
        let status = c.status().await.map_err(|e| anyhow!(e))?;
        let mut asks = tokio::task::JoinSet::new();
        for n in status.nodes.iter().filter(|n| n.state != "removed") {
            let id = n.id;
            let admin = cfg.nodes.iter().find(|e| e.id == id).and_then(|e| e.admin);
            let token = a.admin_token.clone();
            asks.spawn(async move {
                let Some(addr) = admin else {
                    let error = "no admin address in the cluster file".to_string();
                    let u = NodeUse {
                        error: Some(error),
                        ..NodeUse::default()
                    };
                    return (id, u);
                };
                let host = addr.to_string();
                let timeout = Duration::from_secs(2);
                let asked = http_get_with(addr, &host, token.as_deref(), "/_ecdn/stats", timeout);
                let u = match asked.await {
                    Ok((200, body)) => node_use(&body),
                    Ok((s, _)) => NodeUse {
                        error: Some(format!("/_ecdn/stats answered {s}")),
                        ..NodeUse::default()
                    },
                    Err(e) => NodeUse {
                        error: Some(format!("{e:#}")),
                        ..NodeUse::default()
                    },
                };
                (id, u)
            });
        }
        let mut nodes = Vec::new();
        while let Some(r) = asks.join_next().await {
            nodes.push(r.context("a stats request panicked")?);
        }
        nodes.sort_by_key(|(id, _)| *id);
        let report = StatusReport {
            coordinator: c.addr().to_string(),
            status,
            nodes,
        };
        if a.json {
            outln!("{}", serde_json::to_string_pretty(&report)?)?;
        } else {
            out!("{}", table(&report))?;
        }
        Ok(())
    })
}

fn used(u: Option<u64>, cap: Option<u64>) -> String {
    match (u, cap) {
        (Some(u), Some(c)) if c > 0 => format!("{}/{}", format_size(u), format_size(c)),
        (Some(u), _) => format_size(u),
        _ => "-".into(),
    }
}

fn health(n: &NodeStatus) -> String {
    let why = n
        .health
        .out_reason
        .as_deref()
        .and_then(|r| r.split(':').next());
    match (n.state.as_str(), n.available, n.ms_since_heartbeat) {
        ("active", true, _) => "up".into(),
        ("active", false, _) if why.is_some_and(|w| w != "silent") => {
            format!("OUT ({})", why.unwrap_or_default())
        }
        ("active", false, Some(ms)) => format!("DOWN ({:.1} s)", ms as f64 / 1000.0),
        ("active", false, None) => "DOWN (never seen)".into(),
        (state, _, _) => state.to_uppercase(),
    }
}

fn table(r: &StatusReport) -> String {
    use std::fmt::Write;
    let s = &r.status;
    let mut out = String::new();
    let leader = s.leader.clone().unwrap_or_else(|| r.coordinator.clone());
    let available = s.nodes.iter().filter(|n| n.available).count();
    let _ = writeln!(
        out,
        "scheme {}  epoch {}  leader {}  nodes {}/{} available",
        s.scheme,
        s.epoch,
        leader,
        available,
        s.nodes.len()
    );
    let _ = writeln!(
        out,
        "write imbalance (max/mean write load per weight since the last change): {}",
        s.write_imbalance
            .map_or("- (no writes recorded)".into(), |x| format!("{x:.3}"))
    );
    let _ = writeln!(
        out,
        "{:>4}  {:<16} {:>6}  {:<21} {:>5} {:>6}  {:>10}  {:<19} {:<19} {:>6}",
        "id", "health", "weight", "client", "data", "parity", "writes", "disk", "hoc", "epoch"
    );
    for n in &s.nodes {
        let u = r
            .nodes
            .iter()
            .find(|(id, _)| *id == n.id)
            .map(|(_, u)| u.clone())
            .unwrap_or_default();
        let epoch = match (u.epoch, &u.error) {
            (Some(e), _) if e == s.epoch => "ok".to_string(),
            (Some(e), _) => format!("{}", e as i128 - s.epoch as i128),
            (None, Some(_)) => "?".into(),
            (None, None) => "-".into(),
        };
        let _ = writeln!(
            out,
            "{:>4}  {:<16} {:>6}  {:<21} {:>5} {:>6}  {:>10}  {:<19} {:<19} {:>6}",
            n.id,
            health(n),
            format!("{}", n.weight),
            n.client.to_string(),
            n.data_buckets,
            n.parity_buckets,
            format_size(n.data_load.saturating_add(n.parity_load)),
            used(u.disk_used, u.disk_capacity),
            used(u.hoc_used, u.hoc_capacity),
            epoch,
        );
    }
    for (id, u) in &r.nodes {
        if let Some(e) = &u.error {
            let _ = writeln!(out, "node {id}: no stats: {e}");
        }
    }
    for n in &s.nodes {
        if let Some(why) = &n.health.out_reason {
            let _ = writeln!(out, "node {}: out: {why}", n.id);
        } else if n.control_cut {
            let _ = writeln!(
                out,
                "node {}: silent to the coordinator, but its peers reach it: kept in the map",
                n.id
            );
        }
    }
    if let Some(last) = s.recent_rebalances.last() {
        let _ = writeln!(
            out,
            "last change: epoch {}: {} (moved {} data, {} parity buckets)",
            last.epoch, last.trigger, last.moved_data, last.moved_parity
        );
    }
    out
}

/// `ecdn cluster`: the demo (in `ecdn_lab`) and the operator's commands.
#[derive(Subcommand)]
pub enum ClusterCmd {
    /// A live cluster on loopback: origin, coordinator and N node processes, a trace replayed
    /// through them with nodes killed on schedule, side by side with the simulator.
    Demo(Box<ecdn_lab::cluster_demo::DemoArgs>),
    /// The running cluster: nodes (health, weight, address, buckets, write load, disk and
    /// HOC use), the epoch, the leading coordinator, the write imbalance.
    Status(StatusArgs),
    /// Add a node while the cluster serves (then start it with `ecdn node --id`).
    Add(AddArgs),
    /// Drain a node: its buckets move, it finishes its requests and stops.
    Drain(NodeArgs),
    /// Make a draining node active again (its buckets return once it reports).
    Undrain(NodeArgs),
    /// Remove a node for good (drained, or dead).
    Remove(NodeArgs),
    /// Rebalance parity now (c2dn) from the write loads recorded so far.
    Rebalance(RebalanceArgs),
}

pub fn run(cmd: ClusterCmd) -> Result<()> {
    match cmd {
        ClusterCmd::Demo(a) => ecdn_lab::cluster_demo::run_demo(*a),
        ClusterCmd::Status(a) => status(a),
        ClusterCmd::Add(a) => add(a),
        ClusterCmd::Drain(a) => drain(a),
        ClusterCmd::Undrain(a) => undrain(a),
        ClusterCmd::Remove(a) => remove(a),
        ClusterCmd::Rebalance(a) => rebalance(a),
    }
}
