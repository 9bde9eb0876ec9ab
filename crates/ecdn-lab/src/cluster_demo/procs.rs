//! The demo's processes: free loopback ports, the cluster file, the origin, the coordinator
//! and the nodes as children of this process (`std::env::current_exe()`), each with its
//! stdout and stderr in a log file of the run's directory; readiness; CPU seconds from
//! `/proc/PID/stat`; and [`Procs`], which kills every child still running when it is dropped,
//! so every exit path (an error, a panic, Ctrl-C) ends them.

use std::fmt::Write as _;
use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use ecdn_cluster::coordinator::client::CoordinatorClient;
use ecdn_cluster::coordinator::Status;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;

use super::measure::ClusterStats;

/// The loopback addresses of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    pub origin: SocketAddr,
    /// The cluster file's `coordinator` (the embedded coordinator listens there).
    pub coordinator: SocketAddr,
    /// etcd mode: each coordinator's API (`--listen`), the first being `coordinator`.
    pub coordinators: Vec<SocketAddr>,
    /// (client, peer) of each node.
    pub nodes: Vec<(SocketAddr, SocketAddr)>,
    /// Each node's admin listener (stats, metrics, health).
    pub admins: Vec<SocketAddr>,
    /// The embedded coordinator's status page.
    pub status: SocketAddr,
}

impl Layout {
    /// `2 + coordinators + 3 × nodes` distinct free ports on 127.0.0.1 (all bound at once,
    /// then released).
    pub fn free(nodes: usize, coordinators: usize) -> Result<Layout> {
        let c = coordinators.max(1);
        let listeners = (0..2 + c + 3 * nodes)
            .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
            .collect::<std::io::Result<Vec<_>>>()
            .context("finding free loopback ports")?;
        let addrs = listeners
            .iter()
            .map(|l| l.local_addr())
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(Layout {
            origin: addrs[0],
            coordinator: addrs[1],
            coordinators: addrs[1..1 + c].to_vec(),
            nodes: (0..nodes)
                .map(|i| (addrs[1 + c + 2 * i], addrs[2 + c + 2 * i]))
                .collect(),
            admins: addrs[1 + c + 2 * nodes..1 + c + 3 * nodes].to_vec(),
            status: addrs[1 + c + 3 * nodes],
        })
    }

    /// The addresses of the listeners that take signed requests (the coordinators', the nodes'
    /// peer listeners): what a `[peer_tls]` certificate must name.
    pub fn ips(&self) -> Vec<std::net::IpAddr> {
        let coordinators = self.coordinators.iter().chain([&self.coordinator]);
        let peers = self.nodes.iter().map(|(_, peer)| peer);
        coordinators.chain(peers).map(|a| a.ip()).collect()
    }
}

/// What the cluster file says besides the addresses.
#[derive(Clone, Debug)]
pub struct FileSettings {
    /// As the cluster file spells it (`c2dn`, `c2dn-norebal`, `rep2`, `no-rep`, ...).
    pub scheme: String,
    pub k: usize,
    pub p: usize,
    pub threshold: u64,
    pub buckets: usize,
    pub sub_chunk: u64,
    /// The cluster file's `slice_size` (0: no slices).
    pub slice_size: u64,
    /// The cluster file's `evict_together`.
    pub evict_together: bool,
    /// The cluster file's `direct_reads`.
    pub direct_reads: bool,
    /// The cluster file's `resync` (`None`: off).
    pub resync: Option<f64>,
    /// The cluster file's `reinsert` (`None`: off).
    pub reinsert: Option<f64>,
    pub seed: u64,
    pub key: String,
    /// etcd endpoints (empty: the embedded coordinator).
    pub etcd: Vec<String>,
    /// Background repair, bytes per trace second per node (0: off); with it the nodes run
    /// rounds only when the driver asks (`repair_every_s = 0`).
    pub repair_rate: u64,
    /// The cluster file's `parity_delay` (`None`: its default).
    pub parity_delay: Option<f64>,
    /// The cluster file's `[peer_tls]` section (`crate::certs`), or none: plain TCP.
    pub peer_tls: Option<String>,
    /// The cluster file's `[health]` lines (`key = value`), or none: its defaults.
    pub health: Vec<String>,
}

/// The cluster file's TOML text.
pub fn cluster_file(s: &FileSettings, layout: &Layout) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "# Written by `ecdn cluster demo`.");
    let _ = writeln!(t, "scheme = \"{}\"", s.scheme);
    let _ = writeln!(t, "k = {}\np = {}", s.k, s.p);
    let _ = writeln!(t, "threshold = {}", s.threshold);
    let _ = writeln!(t, "buckets = {}", s.buckets);
    let _ = writeln!(t, "sub_chunk = {}", s.sub_chunk);
    let _ = writeln!(t, "slice_size = {}", s.slice_size);
    let _ = writeln!(t, "evict_together = {}", s.evict_together);
    let _ = writeln!(t, "direct_reads = {}", s.direct_reads);
    match s.resync {
        Some(r) => writeln!(t, "resync = {r:?}"),
        None => writeln!(t, "resync = \"off\""),
    }
    .ok();
    let _ = match s.reinsert {
        Some(r) => writeln!(t, "reinsert = {r:?}"),
        None => writeln!(t, "reinsert = \"off\""),
    };
    let _ = writeln!(t, "seed = {}", s.seed);
    // The driver asks for periodic rebalances between two requests (`--rebalance-every`), where
    // the simulator has them; none by the wall clock. What they weigh is the file's default,
    // which the simulator's is too.
    let _ = writeln!(t, "rebalance_every_s = 0");
    let _ = writeln!(t, "key = \"{}\"", s.key);
    let _ = writeln!(t, "coordinator = \"{}\"", layout.coordinator);
    if let Some(d) = s.parity_delay {
        let _ = writeln!(t, "parity_delay = {d:?}");
    }
    if s.repair_rate > 0 {
        let _ = writeln!(t, "repair_rate = {}\nrepair_every_s = 0", s.repair_rate);
    }
    if !s.etcd.is_empty() {
        let urls: Vec<String> = s.etcd.iter().map(|u| format!("\"{u}\"")).collect();
        let _ = writeln!(t, "etcd = [{}]", urls.join(", "));
    }
    if let Some(section) = &s.peer_tls {
        let _ = write!(t, "\n{section}");
    }
    if !s.health.is_empty() {
        let _ = writeln!(t, "\n[health]\n{}", s.health.join("\n"));
    }
    for (id, ((client, peer), admin)) in layout.nodes.iter().zip(&layout.admins).enumerate() {
        let _ = writeln!(
            t,
            "\n[[node]]\nid = {id}\nclient = \"{client}\"\npeer = \"{peer}\"\nadmin = \"{admin}\"\n\
             weight = 1.0"
        );
    }
    t
}

/// A random 32-character cluster key (16 bytes of /dev/urandom in hex).
pub fn random_key() -> Result<String> {
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .context("reading /dev/urandom for the cluster key")?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// One child process.
pub struct Proc {
    pub name: String,
    child: Child,
    log: PathBuf,
    /// Exited (or killed and reaped).
    gone: bool,
    /// Killed by the demo (not an unexpected exit).
    killed: bool,
}

impl Proc {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last `lines` lines of its output.
    pub fn tail(&self, lines: usize) -> String {
        tail(&self.log, lines)
    }

    /// `Some(status)` if it has exited.
    fn exited(&mut self) -> Option<String> {
        if self.gone {
            return Some("killed".into());
        }
        match self.child.try_wait() {
            Ok(Some(s)) => {
                self.gone = true;
                Some(s.to_string())
            }
            Ok(None) => None,
            Err(e) => Some(format!("unknown ({e})")),
        }
    }

    /// SIGKILL and reap (nothing if it is gone already).
    fn kill(&mut self) {
        if !self.gone {
            let _ = self.child.kill();
            let _ = self.child.wait();
            self.gone = true;
            self.killed = true;
        }
    }
}

/// The last `lines` lines of the file at `path` (empty if unreadable).
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// User + system CPU seconds of a process, from `/proc/PID/stat`.
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    parse_cpu_ticks(&text)
        .map(|ticks| ticks as f64 / clock_ticks() as f64)
        .ok_or_else(|| anyhow!("cannot parse /proc/{pid}/stat"))
}

/// utime + stime (clock ticks) of a `/proc/PID/stat` line: fields 14 and 15, counted after the
/// command name, which is in parentheses and may hold spaces.
pub fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): utime is field 14, stime 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions; it only reads a system constant.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// The admin token of a run whose listeners are beyond loopback (`--testbed`): every child
/// gets it (`ECDN_ADMIN_TOKEN`), and the demo's requests to admin listeners carry it.
static ADMIN_TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Sets the run's admin token (the static `ADMIN_TOKEN`); once per process.
pub fn use_admin_token(token: String) {
    let _ = ADMIN_TOKEN.set(token);
}

fn admin_bearer() -> Option<&'static str> {
    ADMIN_TOKEN.get().map(String::as_str)
}

/// Every child of a run; dropping it kills those still running.
pub struct Procs {
    dir: PathBuf,
    exe: PathBuf,
    pub origin: Option<Proc>,
    pub coordinators: Vec<Proc>,
    pub nodes: Vec<Option<Proc>>,
    /// Other children ([`Procs::start_other`]).
    pub others: Vec<Proc>,
    /// Per node: how many times it was started.
    starts: Vec<usize>,
    /// `--testbed`: the network namespace (a test bed's host) each process runs in, by name.
    placement: std::collections::HashMap<String, String>,
}

impl Procs {
    pub fn new(dir: &Path) -> Result<Procs> {
        Ok(Procs {
            dir: dir.to_path_buf(),
            exe: std::env::current_exe().context("finding the ecdn executable")?,
            origin: None,
            coordinators: Vec::new(),
            nodes: Vec::new(),
            others: Vec::new(),
            starts: Vec::new(),
            placement: Default::default(),
        })
    }

    /// Runs each process named in `placement` (`origin`, `coordinator`, `node ID`) in the
    /// network namespace it maps to.
    pub fn place(&mut self, placement: std::collections::HashMap<String, String>) {
        self.placement = placement;
    }

    fn spawn(&self, name: &str, log: &str, args: &[String]) -> Result<Proc> {
        let log = self.dir.join(log);
        let out = std::fs::File::create(&log)
            .with_context(|| format!("creating the log {}", log.display()))?;
        let err = out.try_clone()?;
        let mut cmd = Command::new(&self.exe);
        cmd.args(args).stdin(Stdio::null()).stdout(out).stderr(err);
        if let Some(token) = admin_bearer() {
            cmd.env("ECDN_ADMIN_TOKEN", token);
        }
        let netns = match self.placement.get(name) {
            Some(ns) => Some(ecdn_testbed::sys::netns_file(ns)?),
            None => None,
        };
        if let Some(file) = &netns {
            ecdn_testbed::sys::spawn_inside(&mut cmd, file);
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting the {name}: {}", self.exe.display()))?;
        Ok(Proc {
            name: name.to_string(),
            child,
            log,
            gone: false,
            killed: false,
        })
    }

    pub fn start_origin(&mut self, addr: SocketAddr, latency: &str) -> Result<()> {
        let args = [
            "origin",
            "--listen",
            &addr.to_string(),
            "--latency",
            latency,
        ];
        let p = self.spawn("origin", "origin.log", &args.map(String::from))?;
        self.origin = Some(p);
        Ok(())
    }

    /// `ecdn coordinator --cluster FILE [--listen ADDR] [--admin-listen ADDR]` (etcd mode:
    /// each its own API; embedded mode: the status page).
    pub fn start_coordinator(
        &mut self,
        file: &Path,
        listen: Option<SocketAddr>,
        admin: Option<SocketAddr>,
    ) -> Result<()> {
        let mut args = vec!["coordinator".into(), "--cluster".into(), path_arg(file)];
        if let Some(l) = listen {
            args.extend(["--listen".into(), l.to_string()]);
        }
        if let Some(a) = admin {
            args.extend(["--admin-listen".into(), a.to_string()]);
        }
        let i = self.coordinators.len();
        let (name, log) = match i {
            0 => ("coordinator".to_string(), "coordinator.log".to_string()),
            _ => (format!("coordinator {i}"), format!("coordinator-{i}.log")),
        };
        let p = self.spawn(&name, &log, &args)?;
        self.coordinators.push(p);
        Ok(())
    }

    /// SIGKILLs coordinator `i`.
    pub fn kill_coordinator(&mut self, i: usize) {
        if let Some(p) = self.coordinators.get_mut(i) {
            p.kill();
        }
    }

    /// Node `id`'s disk file: the same for every start of it, so a restarted node finds what
    /// it wrote before.
    pub fn disk_path(&self, id: usize) -> PathBuf {
        self.dir.join(format!("node-{id}.disk"))
    }

    /// Deletes node `id`'s disk file, which its next start creates anew: a replaced disk.
    /// Refused while the node runs (it holds the file).
    pub fn wipe_disk(&mut self, id: usize) -> Result<()> {
        if self.node_running(id) {
            bail!("node {id} runs: its disk cannot be wiped");
        }
        let disk = self.disk_path(id);
        std::fs::remove_file(&disk)
            .with_context(|| format!("wiping node {id}'s disk {}", disk.display()))
    }

    /// Node `id`: `ecdn node --cluster FILE --id ID --origin URL --hoc-size S --disk-path
    /// DIR/node-ID.disk --disk-size S -j 1 EXTRA...`. A node started again (after a kill) logs
    /// to `node-ID.N.log` for its N-th restart, so the log of the killed process is kept.
    pub fn start_node(
        &mut self,
        id: usize,
        file: &Path,
        origin: SocketAddr,
        (hoc_size, disk_size): (u64, u64),
        extra: &[String],
    ) -> Result<()> {
        let disk = self.disk_path(id);
        let mut args = vec![
            "node".into(),
            "--cluster".into(),
            path_arg(file),
            "--id".into(),
            id.to_string(),
            "--origin".into(),
            format!("http://{origin}"),
            "--hoc-size".into(),
            hoc_size.to_string(),
            "--disk-path".into(),
            path_arg(&disk),
            "--disk-size".into(),
            disk_size.to_string(),
            "-j".into(),
            "1".into(),
            // The load driver probes it as a load balancer does (`balancer.rs`).
            "--client-health".into(),
        ];
        args.extend_from_slice(extra);
        if self.nodes.len() <= id {
            self.nodes.resize_with(id + 1, || None);
            self.starts.resize(id + 1, 0);
        }
        if self.node_running(id) {
            bail!("node {id} runs already");
        }
        let log = match self.starts[id] {
            0 => format!("node-{id}.log"),
            n => format!("node-{id}.{n}.log"),
        };
        let p = self.spawn(&format!("node {id}"), &log, &args)?;
        self.starts[id] += 1;
        self.nodes[id] = Some(p);
        Ok(())
    }

    /// Any other child: `ecdn ARGS...`, named `name` (also its name in the placement),
    /// logging to `log` in the run's directory. Returns its index in `others`.
    pub fn start_other(&mut self, name: &str, log: &str, args: &[String]) -> Result<usize> {
        let p = self.spawn(name, log, args)?;
        self.others.push(p);
        Ok(self.others.len() - 1)
    }

    /// SIGKILLs every child in `others` and forgets them.
    pub fn stop_others(&mut self) {
        for mut p in self.others.drain(..) {
            p.kill();
        }
    }

    fn all_mut(&mut self) -> impl Iterator<Item = &mut Proc> {
        self.origin
            .iter_mut()
            .chain(self.coordinators.iter_mut())
            .chain(self.nodes.iter_mut().flatten())
            .chain(self.others.iter_mut())
    }

    /// An error naming the first child that exited, with its output's tail.
    pub fn check_running(&mut self) -> Result<()> {
        for p in self.all_mut() {
            if p.gone || p.killed {
                continue;
            }
            if let Some(status) = p.exited() {
                bail!(
                    "the {} exited ({status}); its last output:\n{}",
                    p.name,
                    p.tail(20)
                );
            }
        }
        Ok(())
    }

    /// SIGKILLs node `id`; returns its CPU seconds just before.
    pub fn kill_node(&mut self, id: usize) -> Option<f64> {
        let p = self.nodes.get_mut(id)?.as_mut()?;
        let cpu = cpu_seconds(p.pid()).ok();
        p.kill();
        cpu
    }

    /// Whether node `id` runs (was started, not killed, not exited).
    pub fn node_running(&mut self, id: usize) -> bool {
        match self.nodes.get_mut(id) {
            Some(Some(p)) => p.exited().is_none(),
            _ => false,
        }
    }

    /// Kills every child still running.
    pub fn stop_all(&mut self) {
        for p in self.all_mut() {
            p.kill();
        }
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        self.stop_all();
    }
}

fn path_arg(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// `GET path` on a fresh connection to `addr` with the given `Host` (the cache key's host):
/// (status, body), within `timeout`.
pub async fn http_get_host(
    addr: SocketAddr,
    host: &str,
    path: &str,
    timeout: Duration,
) -> Result<(u16, Bytes)> {
    http_get_with(addr, host, None, path, timeout).await
}

/// [`http_get_host`], with `Authorization: Bearer <bearer>` if given (an admin listener's
/// token).
pub async fn http_get_with(
    addr: SocketAddr,
    host: &str,
    bearer: Option<&str>,
    path: &str,
    timeout: Duration,
) -> Result<(u16, Bytes)> {
    http_request(hyper::Method::GET, addr, host, bearer, path, timeout).await
}

/// `GET path` on an admin listener, with the run's admin token if it has one.
pub async fn admin_get(addr: SocketAddr, path: &str, timeout: Duration) -> Result<(u16, Bytes)> {
    http_get_with(addr, &addr.to_string(), admin_bearer(), path, timeout).await
}

/// `POST path` (no body) on an admin listener, with the run's admin token if it has one.
pub async fn admin_post(addr: SocketAddr, path: &str, timeout: Duration) -> Result<(u16, Bytes)> {
    http_request(
        hyper::Method::POST,
        addr,
        &addr.to_string(),
        admin_bearer(),
        path,
        timeout,
    )
    .await
}

/// A request without a body; its status and whole body.
async fn http_request(
    method: hyper::Method,
    addr: SocketAddr,
    host: &str,
    bearer: Option<&str>,
    path: &str,
    timeout: Duration,
) -> Result<(u16, Bytes)> {
    let go = async {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", host);
        if let Some(token) = bearer {
            req = req.header("authorization", format!("Bearer {token}"));
        }
        let req = req.body(Empty::<Bytes>::new())?;
        let resp = send.send_request(req).await?;
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await?.to_bytes();
        anyhow::Ok((status, body))
    };
    tokio::time::timeout(timeout, go)
        .await
        .map_err(|_| anyhow!("no answer within {timeout:?}"))?
}

/// Has the node at admin address `addr` run one background repair round with `budget` new
/// bytes (`POST /_ecdn/repair`), and waits for it.
pub async fn repair_round(addr: SocketAddr, budget: u64) -> Result<()> {
    let path = format!("/_ecdn/repair?budget={budget}");
    let (status, body) = http_request(
        hyper::Method::POST,
        addr,
        &addr.to_string(),
        admin_bearer(),
        &path,
        Duration::from_secs(60),
    )
    .await
    .with_context(|| format!("POST {path} to {addr}"))?;
    if status != 200 {
        bail!(
            "POST {path} to {addr} answered {status}: {}",
            String::from_utf8_lossy(&body).trim()
        );
    }
    Ok(())
}

/// A node's `cluster` counters from its `/_ecdn/stats`.
pub async fn node_stats(addr: SocketAddr) -> Result<ClusterStats> {
    let (status, body) = admin_get(addr, "/_ecdn/stats", Duration::from_secs(5)).await?;
    if status != 200 {
        bail!("GET /_ecdn/stats answered {status}");
    }
    parse_stats(&body)
}

/// The `cluster` object of a `/_ecdn/stats` body.
pub fn parse_stats(body: &[u8]) -> Result<ClusterStats> {
    let v: serde_json::Value = serde_json::from_slice(body).context("/_ecdn/stats is not JSON")?;
    let c = v.get("cluster").ok_or_else(|| {
        anyhow!("/_ecdn/stats has no `cluster` object: is the node in cluster mode?")
    })?;
    serde_json::from_value(c.clone()).context("/_ecdn/stats: the `cluster` object")
}

/// The coordinator's signed status.
pub async fn coordinator_status(client: &CoordinatorClient) -> Result<Status> {
    client.status().await.map_err(|e| anyhow!(e))
}

/// Has the coordinator rebalance parity now (`POST /coord/rebalance`, which first collects
/// every node's loads) and waits until every node of `nodes` (admin addresses) took the new
/// map; returns its epoch.
pub async fn rebalance(client: &CoordinatorClient, nodes: &[SocketAddr]) -> Result<u64> {
    let epoch = client.rebalance().await.map_err(|e| anyhow!(e))?;
    let t0 = Instant::now();
    for &addr in nodes {
        loop {
            let seen = node_stats(addr).await?.epoch;
            if seen >= epoch {
                break;
            }
            if t0.elapsed() > Duration::from_secs(10) {
                bail!("node {addr} still on map epoch {seen} 10 s after the rebalance to {epoch}");
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    Ok(epoch)
}

/// What in a coordinator status is not ready yet: every node available, heard from, and on
/// the current map epoch.
pub fn status_not_ready(s: &Status, nodes: usize) -> Option<String> {
    if s.nodes.len() != nodes {
        return Some(format!(
            "the coordinator knows {} nodes, expected {nodes}",
            s.nodes.len()
        ));
    }
    let waiting: Vec<String> = s
        .nodes
        .iter()
        .filter_map(|n| {
            if !n.available {
                Some(format!("node {} unavailable", n.id))
            } else if n.heartbeats == 0 {
                Some(format!("node {} sent no heartbeat", n.id))
            } else if s.leader.is_none() && n.seen_epoch != Some(s.epoch) {
                // (etcd mode: nodes do not report their epoch to the coordinator; the
                // caller asks them.)
                Some(format!(
                    "node {} on map epoch {:?}, current {}",
                    n.id, n.seen_epoch, s.epoch
                ))
            } else {
                None
            }
        })
        .collect();
    (!waiting.is_empty()).then(|| format!("coordinator: {}", waiting.join(", ")))
}

/// Waits until every node answers `GET /_ecdn/stats` with 200 and the coordinator shows them
/// all available on its current map, or fails after `timeout` naming what is not up (with the
/// output tail of the processes concerned), or at once when a child exits.
pub async fn wait_ready(
    procs: &std::sync::Mutex<Procs>,
    layout: &Layout,
    cfg: &ecdn_cluster::ClusterConfig,
    timeout: Duration,
) -> Result<()> {
    let t0 = Instant::now();
    let mut ready = vec![false; layout.nodes.len()];
    loop {
        procs.lock().unwrap().check_running()?;
        let mut missing: Vec<(String, Option<usize>)> = Vec::new();
        for (i, admin) in layout.admins.iter().enumerate() {
            if ready[i] {
                continue;
            }
            match admin_get(*admin, "/_ecdn/stats", Duration::from_secs(2)).await {
                Ok((200, _)) => ready[i] = true,
                Ok((s, _)) => {
                    missing.push((format!("node {i}: /_ecdn/stats answered {s}"), Some(i)))
                }
                Err(e) => {
                    missing.push((format!("node {i}'s admin listener {admin}: {e:#}"), Some(i)))
                }
            }
        }
        let status = match CoordinatorClient::for_cluster(cfg).await {
            Ok(client) => coordinator_status(&client).await,
            Err(e) => Err(anyhow!(e)),
        };
        match status {
            Ok(s) => {
                if let Some(why) = status_not_ready(&s, layout.nodes.len()) {
                    missing.push((why, None));
                } else if s.leader.is_some() {
                    for (i, addr) in layout.admins.iter().enumerate() {
                        match node_stats(*addr).await {
                            Ok(st) if st.epoch == s.epoch => {}
                            Ok(st) => missing.push((
                                format!("node {i} on map epoch {}, current {}", st.epoch, s.epoch),
                                Some(i),
                            )),
                            Err(e) => missing.push((format!("node {i}: {e:#}"), Some(i))),
                        }
                    }
                }
            }
            Err(e) => missing.push((
                format!("coordinator on {}: {e:#}", layout.coordinator),
                None,
            )),
        }
        if missing.is_empty() {
            return Ok(());
        }
        if t0.elapsed() >= timeout {
            let procs = procs.lock().unwrap();
            let mut msg = format!("the cluster did not come up within {timeout:?}:");
            for (why, _) in &missing {
                let _ = write!(msg, "\n  {why}");
            }
            let mut shown = Vec::new();
            for (_, node) in &missing {
                let p = match node {
                    Some(i) => procs.nodes.get(*i).and_then(|p| p.as_ref()),
                    None => procs.coordinators.first(),
                };
                if let Some(p) = p {
                    if !shown.contains(&p.name) {
                        shown.push(p.name.clone());
                        let _ = write!(msg, "\n--- last output of the {}:\n{}", p.name, p.tail(15));
                    }
                }
            }
            bail!(msg);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_file_parses_as_the_nodes_will_read_it() {
        let layout = Layout::free(4, 2).unwrap();
        let mut ports: Vec<u16> = [layout.origin, layout.coordinator]
            .iter()
            .chain(layout.nodes.iter().flat_map(|(c, p)| [c, p]))
            .chain(&layout.admins)
            .chain([&layout.status])
            .map(|a| a.port())
            .collect();
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 15);
        assert_eq!(layout.coordinators.len(), 2);
        assert!(!ports.contains(&layout.coordinators[1].port()));
        let key = random_key().unwrap();
        assert_eq!(key.len(), 32);
        assert_ne!(key, random_key().unwrap());
        let s = FileSettings {
            scheme: "c2dn".into(),
            k: 2,
            p: 1,
            threshold: 128 << 10,
            buckets: 50,
            sub_chunk: 32 << 10,
            slice_size: 1 << 20,
            evict_together: true,
            direct_reads: true,
            resync: Some(0.5),
            reinsert: Some(0.8),
            seed: 7,
            key,
            etcd: vec!["http://127.0.0.1:1".into(), "http://127.0.0.1:2".into()],
            repair_rate: 4096,
            parity_delay: Some(1.5),
            peer_tls: None,
            health: vec!["slow_ms = 25".into()],
        };
        let cfg = ecdn_cluster::ClusterConfig::parse(&cluster_file(&s, &layout)).unwrap();
        assert_eq!((cfg.k, cfg.p, cfg.buckets, cfg.seed), (2, 1, 50, 7));
        assert_eq!(cfg.slice_size, 1 << 20);
        assert!(cfg.evict_together);
        assert_eq!(cfg.resync, Some(0.5));
        assert_eq!(cfg.reinsert, Some(0.8));
        assert_eq!(cfg.health.slow_ms, 25.0);
        assert_eq!(cfg.coordinator, layout.coordinator);
        assert_eq!(cfg.nodes.len(), 4);
        assert_eq!(cfg.nodes[3].client, layout.nodes[3].0);
        assert_eq!(cfg.nodes[3].peer, layout.nodes[3].1);
        assert_eq!(cfg.nodes[3].admin, Some(layout.admins[3]));
        assert_eq!(cfg.scheme_name(), "c2dn-n3k2");
        assert_eq!(cfg.etcd.len(), 2);
        assert_eq!((cfg.repair_rate, cfg.repair_every_s), (4096, 0.0));
        assert_eq!(cfg.parity_delay, 1.5);
        // What is off is written off (the file's defaults are on).
        let off = FileSettings {
            evict_together: false,
            direct_reads: false,
            resync: None,
            reinsert: None,
            ..s
        };
        let cfg = ecdn_cluster::ClusterConfig::parse(&cluster_file(&off, &layout)).unwrap();
        assert!(!cfg.evict_together && !cfg.direct_reads);
        assert_eq!((cfg.resync, cfg.reinsert), (None, None));
    }

    #[test]
    fn a_wiped_disk_is_gone_and_wiping_a_missing_one_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = Procs::new(dir.path()).unwrap();
        assert_eq!(p.disk_path(1), dir.path().join("node-1.disk"));
        std::fs::write(p.disk_path(1), b"pieces").unwrap();
        p.wipe_disk(1).unwrap();
        assert!(!p.disk_path(1).exists());
        let e = format!("{:#}", p.wipe_disk(1).unwrap_err());
        assert!(e.contains("wiping node 1's disk"), "{e}");
    }

    #[test]
    fn cpu_ticks_from_a_stat_line_with_spaces_in_the_name() {
        let line = "4242 (ecdn (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 37 0 0 20 0 3 0 \
                    12345 1000000 500 18446744073709551615";
        assert_eq!(parse_cpu_ticks(line), Some(287));
        assert_eq!(parse_cpu_ticks("4242 (ecdn) S 1 2"), None);
        assert_eq!(parse_cpu_ticks("garbage"), None);
        let me = cpu_seconds(std::process::id()).unwrap();
        assert!(me >= 0.0);
    }

    #[test]
    fn stats_need_the_cluster_object() {
        let body = br#"{"requests": 5, "cluster": {"bytes_written": 10, "peer_bytes_received": 1,
            "peer_bytes_sent": 2, "decodes": 3, "partial_hits": 4, "relayed": 5}}"#;
        let s = parse_stats(body).unwrap();
        assert_eq!((s.bytes_written, s.relayed), (10, 5));
        let e = parse_stats(br#"{"requests": 5}"#).unwrap_err().to_string();
        assert!(e.contains("cluster mode"), "{e}");
        assert!(parse_stats(b"not json").is_err());
    }

    #[test]
    fn status_readiness_names_what_is_missing() {
        use ecdn_cluster::coordinator::NodeStatus;
        let node = |id, heartbeats, seen| NodeStatus {
            id,
            client: "127.0.0.1:1".parse().unwrap(),
            peer: "127.0.0.1:2".parse().unwrap(),
            weight: 1.0,
            state: "active".into(),
            available: true,
            data_buckets: 10,
            parity_buckets: 3,
            ms_since_heartbeat: Some(10),
            heartbeats,
            seen_epoch: seen,
            data_load: 0,
            parity_load: 0,
            health: Default::default(),
            control_cut: false,
        };
        let mut s = Status {
            epoch: 9,
            scheme: "c2dn".into(),
            nodes: vec![node(0, 3, Some(9)), node(1, 0, None)],
            heartbeats: 3,
            availability_changes: 0,
            rebalances: 0,
            recent_rebalances: Vec::new(),
            parity_load: 0,
            unauthorized: 0,
            bad_requests: 0,
            write_imbalance: None,
            leader: None,
            objects: 0,
            object_budget_changes: 0,
            object_budget_pending: 0,
        };
        let why = status_not_ready(&s, 2).unwrap();
        assert!(why.contains("node 1 sent no heartbeat"), "{why}");
        s.nodes[1] = node(1, 2, Some(8));
        assert!(status_not_ready(&s, 2).unwrap().contains("epoch"));
        s.nodes[1] = node(1, 2, Some(9));
        assert_eq!(status_not_ready(&s, 2), None);
        assert!(status_not_ready(&s, 3).unwrap().contains("expected 3"));
    }
}
