//! `ecdn coral demo --processes`: Coral with every node an `ecdn node --coral-*` process on a
//! host of its own, and the network's delays on every packet.
//!
//! The in-process demo's topology ([`super::topology`]: sites at random points of a square,
//! 5 ms RTT within a site, 20–150 ms between) becomes a test bed (`ecdn-testbed`, network
//! namespaces on a bridge; needs root):
//!
//! * one host per node, `n0`, `n1`, … site by site, each pair of hosts delayed by half its
//!   RTT one way, on every packet (the bed's delayers), not only on connects;
//! * `origin`, 50 ms one way from every node ([`ORIGIN_RTT`] round trip), served from a
//!   thread of this process, which counts its requests;
//! * `resolver`, a DNS resolver in site 0 (2.5 ms one way from site 0's nodes, as far from the
//!   others as site 0 is) that no DSHT node knows: it only listens on TCP port 53, so a
//!   redirector must probe it (`ecdn_coral::probe`) to place it;
//! * `client`, this process (the clients and the load driver), next to every node (no delay),
//!   as the paper's clients were next to their proxies.
//!
//! Node `i` runs `ecdn node --listen IP:8090 --admin-listen IP:8091 --coral-listen IP:8092
//! --coral-seed N0:8092 --coral-levels … --coral-cluster-period …` (LRU HOC, no disk, one
//! worker thread), joined through node 0; the first node of each site also runs the site's DNS
//! redirector on port 53 with `--coral-resolver-prefix 32` (the bed's hosts share one /24, so
//! only a resolver on the node's own address is its site's by prefix: the others are placed by
//! the RTTs the DSHT measured, or probed). The demo drives the nodes through their admin
//! listeners (`/_ecdn/sites/get`, `/put` and `/probes`, the DSHT operations the in-process demo
//! calls directly) and their HTTP listeners (the flash crowd), with the same seeds, so each
//! run's workload is the in-process run's, and reads their counters from `/_ecdn/stats`.
//!
//! Runs: the hierarchy (clusters settling, lookups, the flash crowd, then every redirector
//! asked by a resolver in every site and by the `resolver` host), one level (lookups and
//! crowd), and the hot spot (one level, the leakage window `--hot-minute`). The nodes are
//! started anew for each run, and given a cluster period and a half (six with the hierarchy)
//! before it: their routing tables refresh each period, as the in-process demo refreshes them
//! once all nodes have joined. The crowd on nodes that do not cooperate is the in-process
//! demo's (the origin sees every request: nothing there depends on the network).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use ecdn_coral::dns::{query_a, TTL_NEAR};
use ecdn_dsht::Id;
use ecdn_node::origin::{Origin, OriginConfig};
use ecdn_testbed::{Bed, BedConfig, HostSpec, LinkSpec};
use indicatif::ProgressBar;
use serde::Serialize;

use super::proxies::{FlashCrowd, ORIGIN_RTT};
use super::redirect::DOMAIN;
use super::topology::Topology;
use super::workload::{self, DemoNode, Got};
use super::{clusters_of, finish, levels, print_run, quantiles, DemoArgs, HotRun, LookupRun};
use super::{Phase, Summary};
use super::{Quantiles, MINUTE};
use crate::cluster_demo::procs::{
    admin_get, admin_post, cpu_seconds, random_key, use_admin_token, Procs,
};

const HTTP_PORT: u16 = 8090;
const ADMIN_PORT: u16 = 8091;
const DSHT_PORT: u16 = 8092;
const DNS_PORT: u16 = 53;
const ORIGIN_PORT: u16 = 80;
/// A bed has at most 99 hosts: the nodes, `origin`, `resolver` and `client`.
pub const MAX_NODES: usize = 96;
/// The longest the demo waits for an admin or client answer.
const TIMEOUT: Duration = Duration::from_secs(30);
/// The name the resolvers ask for.
const NAME: &str = "www.example.com.cdn.test.";

/// The bed of a run: its hosts, the nodes' addresses, the origin and the resolver.
struct ProcBed {
    bed: Bed,
    topo: Topology,
    /// Each node's address (its host's) and site, in the topology's order.
    nodes: Vec<(IpAddr, usize)>,
    origin: SocketAddr,
    resolver: IpAddr,
}

impl ProcBed {
    fn create(topo: &Topology, link: &str) -> Result<ProcBed> {
        let spec = LinkSpec::parse(link).map_err(|e| anyhow!("--link: {e}"))?;
        let sites: Vec<usize> = topo.nodes().into_iter().map(|(_, s)| s).collect();
        let n = sites.len();
        if n > MAX_NODES {
            bail!("--processes: at most {MAX_NODES} nodes (a test bed has at most 99 hosts)");
        }
        let names: Vec<String> = (0..n).map(|i| format!("n{i}")).collect();
        let mut hosts = Vec::new();
        for name in names
            .iter()
            .map(String::as_str)
            .chain(["origin", "resolver", "client"])
        {
            hosts.push(HostSpec::new(name, spec).map_err(anyhow::Error::msg)?);
        }
        let exe = std::env::current_exe().context("this executable's path")?;
        let mut bed = Bed::create(&BedConfig {
            hosts,
            guard: Some(exe),
        })
        .context("--processes: building the test bed")?;
        let mut pairs: Vec<(&str, &str, Option<Duration>)> = Vec::new();
        for i in 0..n {
            for j in i + 1..n {
                pairs.push((&names[i], &names[j], Some(topo.rtt(sites[i], sites[j]) / 2)));
            }
            pairs.push((&names[i], "origin", Some(ORIGIN_RTT / 2)));
            pairs.push((&names[i], "resolver", Some(topo.rtt(0, sites[i]) / 2)));
        }
        bed.delays_between(&pairs)
            .context("--processes: the topology's delays")?;
        let addr = |h: &str| -> Result<IpAddr> { Ok(IpAddr::V4(bed.host(h)?.addr)) };
        let nodes = (0..n)
            .map(|i| Ok((addr(&names[i])?, sites[i])))
            .collect::<Result<Vec<_>>>()?;
        let origin = SocketAddr::new(addr("origin")?, ORIGIN_PORT);
        let resolver = addr("resolver")?;
        Ok(ProcBed {
            bed,
            topo: topo.clone(),
            nodes,
            origin,
            resolver,
        })
    }

    fn http(&self, i: usize) -> SocketAddr {
        SocketAddr::new(self.nodes[i].0, HTTP_PORT)
    }

    fn admin(&self, i: usize) -> SocketAddr {
        SocketAddr::new(self.nodes[i].0, ADMIN_PORT)
    }

    fn admins(&self) -> Vec<SocketAddr> {
        (0..self.nodes.len()).map(|i| self.admin(i)).collect()
    }

    /// The first node of each site, which runs its redirector.
    fn redirectors(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| i == 0 || self.nodes[i - 1].1 != self.nodes[i].1)
            .collect()
    }

    /// The site of a node's address.
    fn site_of(&self, ip: IpAddr) -> Option<usize> {
        self.nodes.iter().find(|(a, _)| *a == ip).map(|(_, s)| *s)
    }

    /// The RTT between two addresses of the bed: nodes by their sites, the resolver as site 0.
    fn rtt(&self, a: IpAddr, b: IpAddr) -> Duration {
        let site = |ip: IpAddr| {
            if ip == self.resolver {
                Some(0)
            } else {
                self.site_of(ip)
            }
        };
        match (site(a), site(b)) {
            (Some(x), Some(y)) => self.topo.rtt(x, y),
            _ => Duration::ZERO,
        }
    }

    /// The namespace of each node's process, by its name in [`Procs`].
    fn placement(&self) -> Result<HashMap<String, String>> {
        (0..self.nodes.len())
            .map(|i| {
                let netns = self.bed.host(&format!("n{i}"))?.netns.clone();
                Ok((format!("node {i}"), netns))
            })
            .collect()
    }
}

/// The origin, on its own host, in a thread of this process.
struct OriginThread {
    requests: Arc<AtomicU64>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl OriginThread {
    fn start(bed: &ProcBed) -> Result<OriginThread> {
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let addr = bed.origin;
        let thread = bed.bed.spawn_in("origin", move || -> Result<()> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async move {
                let origin = Origin::start(addr, OriginConfig::default())
                    .await
                    .with_context(|| format!("starting the origin on {addr}"))?;
                let _ = tx.send(origin.request_counter());
                let _ = stopped.await;
                origin.stop().await?;
                Ok(())
            })
        })?;
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(requests) => Ok(OriginThread {
                requests,
                stop: Some(stop),
            }),
            Err(_) => match thread.join() {
                Ok(Ok(Err(e))) => Err(e),
                _ => bail!("the origin did not start on {addr}"),
            },
        }
    }

    fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}

impl Drop for OriginThread {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

/// The `resolver` host's DNS port: it accepts TCP connections (a redirector's probe) and
/// nothing else, until dropped.
struct ResolverPort(Arc<AtomicBool>);

impl ResolverPort {
    fn start(bed: &ProcBed) -> Result<ResolverPort> {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let flag = stop.clone();
        bed.bed.spawn_in("resolver", move || {
            let listener = std::net::TcpListener::bind((Ipv4Addr::UNSPECIFIED, DNS_PORT))
                .and_then(|l| l.set_nonblocking(true).map(|()| l));
            let listener = match listener {
                Ok(l) => {
                    let _ = tx.send(Ok(()));
                    l
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            while !flag.load(Ordering::Relaxed) {
                if listener.accept().is_err() {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        })?;
        rx.recv_timeout(Duration::from_secs(10))
            .context("the resolver host's port 53")?
            .context("listening on the resolver host's TCP port 53")?;
        Ok(ResolverPort(stop))
    }
}

impl Drop for ResolverPort {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// What the node processes used, at the end of a run.
#[derive(Debug, Default, Serialize)]
pub struct ProcessUse {
    pub processes: usize,
    pub rss_mib_total: f64,
    pub rss_mib_max: f64,
    /// User + system CPU seconds of all of them, over the run.
    pub cpu_s_total: f64,
}

fn rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// The counters of the nodes' lookups (`/_ecdn/stats` `sites.lookups`), summed over nodes:
/// the lookup workload's gets and the crowd's misses'.
#[derive(Debug, Default, Serialize)]
pub struct NodeLookups {
    pub gets: u64,
    pub found: u64,
    pub found_at_level: Vec<u64>,
    pub lookup_ms: Quantiles,
    pub site_fills: u64,
    /// Put probes the nodes' DSHT nodes received.
    pub put_probes: u64,
    /// RPCs the DSHT nodes sent, and those that timed out (a packet lost or held too long).
    pub rpcs_sent: u64,
    pub rpcs_timed_out: u64,
}

/// One run of the processes.
struct Run<'a> {
    bed: &'a ProcBed,
    procs: Mutex<Procs>,
    levels: Vec<Option<Duration>>,
    started: Instant,
}

fn ms_arg(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

impl<'a> Run<'a> {
    /// Starts every node (node 0 first: the others join through it) and waits until each
    /// answers on its admin listener.
    async fn start(
        bed: &'a ProcBed,
        dir: &std::path::Path,
        levels: Vec<Option<Duration>>,
        period: Duration,
        leakage: Duration,
    ) -> Result<Run<'a>> {
        let mut procs = Procs::new(dir)?;
        procs.place(bed.placement()?);
        let levels_arg = levels
            .iter()
            .map(|l| l.map_or_else(|| "inf".to_string(), ms_arg))
            .collect::<Vec<_>>()
            .join(",");
        let redirectors = bed.redirectors();
        let seed = SocketAddr::new(bed.nodes[0].0, DSHT_PORT);
        let run = Run {
            bed,
            procs: Mutex::new(procs),
            levels,
            started: Instant::now(),
        };
        for i in 0..bed.nodes.len() {
            let ip = bed.nodes[i].0;
            let mut args: Vec<String> = [
                "node",
                "--listen",
                &bed.http(i).to_string(),
                "--admin-listen",
                &bed.admin(i).to_string(),
                "--origin",
                &format!("http://{}", bed.origin),
                "--hoc-size",
                "64MiB",
                "--hoc-policy",
                "lru",
                "-j",
                "1",
                "--coral-listen",
                &SocketAddr::new(ip, DSHT_PORT).to_string(),
                "--coral-levels",
                &levels_arg,
                "--coral-cluster-period",
                &ms_arg(period),
                "--coral-leakage-window",
                &ms_arg(leakage),
            ]
            .map(String::from)
            .to_vec();
            if i > 0 {
                args.extend(["--coral-seed".into(), seed.to_string()]);
            }
            if redirectors.contains(&i) {
                args.extend([
                    "--coral-dns".into(),
                    SocketAddr::new(ip, DNS_PORT).to_string(),
                    "--coral-domain".into(),
                    DOMAIN.into(),
                    "--coral-resolver-prefix".into(),
                    "32".into(),
                ]);
            }
            run.procs.lock().unwrap().start_other(
                &format!("node {i}"),
                &format!("node-{i}.log"),
                &args,
            )?;
            if i == 0 {
                run.wait_ready(0..1).await?;
            }
        }
        run.wait_ready(1..bed.nodes.len()).await?;
        Ok(run)
    }

    /// Waits until nodes `range` answer `/_ecdn/sites` (a node starts its listeners after its
    /// DSHT node joined), or fails when one exits or after a minute and a second a node.
    async fn wait_ready(&self, range: std::ops::Range<usize>) -> Result<()> {
        let t0 = Instant::now();
        let limit = Duration::from_secs(60 + range.len() as u64);
        for i in range {
            loop {
                self.procs.lock().unwrap().check_running()?;
                let ok = admin_get(self.bed.admin(i), "/_ecdn/sites", Duration::from_secs(2)).await;
                if matches!(ok, Ok((200, _))) {
                    if std::env::var_os("ECDN_CORAL_DEBUG").is_some() {
                        eprintln!("node {i} ready after {:?}", t0.elapsed());
                    }
                    break;
                }
                if t0.elapsed() > limit {
                    let procs = self.procs.lock().unwrap();
                    let tail = procs.others.get(i).map(|p| p.tail(15)).unwrap_or_default();
                    bail!(
                        "node {i} did not answer on its admin listener within {limit:?} ({ok:?}); its last output:\n{tail}"
                    );
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Ok(())
    }

    /// Every node's `/_ecdn/stats`.
    async fn stats(&self) -> Result<Vec<serde_json::Value>> {
        let mut out = Vec::new();
        for a in self.bed.admins() {
            let (status, body) = admin_get(a, "/_ecdn/stats", TIMEOUT).await?;
            if status != 200 {
                bail!("{a}/_ecdn/stats answered {status}");
            }
            out.push(serde_json::from_slice(&body).context("a node's /_ecdn/stats")?);
        }
        Ok(out)
    }

    /// The nodes' lookup counters, summed.
    async fn node_lookups(&self) -> Result<NodeLookups> {
        let stats = self.stats().await?;
        let mut n = NodeLookups::default();
        let mut hists = Vec::new();
        for s in &stats {
            let l = &s["sites"]["lookups"];
            n.gets += l["gets"].as_u64().unwrap_or(0);
            n.found += l["found"].as_u64().unwrap_or(0);
            for (i, c) in l["found_at_level"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                if n.found_at_level.len() <= i {
                    n.found_at_level.resize(i + 1, 0);
                }
                n.found_at_level[i] += c.as_u64().unwrap_or(0);
            }
            hists.push(&l["lookup_ms"]);
            n.site_fills += s["site_fills"].as_u64().unwrap_or(0);
            let d = &s["sites"]["dsht"];
            n.put_probes += d["put_probes"].as_u64().unwrap_or(0);
            n.rpcs_sent += d["rpcs_sent"].as_u64().unwrap_or(0);
            n.rpcs_timed_out += d["rpcs_timed_out"].as_u64().unwrap_or(0);
        }
        n.lookup_ms = quantiles(ecdn_coral::stats::samples(&hists));
        Ok(n)
    }

    /// Each node's DSHT id and cluster per level.
    async fn ids(&self) -> Result<Vec<(Id, Vec<Id>)>> {
        let mut out = Vec::new();
        for a in self.bed.admins() {
            let (_, body) = admin_get(a, "/_ecdn/sites", TIMEOUT).await?;
            let v: serde_json::Value = serde_json::from_slice(&body)?;
            let id = |v: &serde_json::Value| -> Result<Id> {
                v.as_str()
                    .unwrap_or("")
                    .parse()
                    .map_err(|e: String| anyhow!("{a}: {e}"))
            };
            let clusters = v["clusters"]
                .as_array()
                .into_iter()
                .flatten()
                .map(id)
                .collect::<Result<Vec<_>>>()?;
            out.push((id(&v["id"])?, clusters));
        }
        Ok(out)
    }

    /// The nodes, as the workloads drive them.
    fn remotes(&self) -> Vec<Remote> {
        (0..self.bed.nodes.len())
            .map(|i| Remote {
                admin: self.bed.admin(i),
                http: self.bed.http(i),
            })
            .collect()
    }

    /// What the node processes used so far.
    fn usage(&self) -> ProcessUse {
        let procs = self.procs.lock().unwrap();
        let mut u = ProcessUse::default();
        for p in &procs.others {
            u.processes += 1;
            let rss = rss_mib(p.pid()).unwrap_or(0.0);
            u.rss_mib_total += rss;
            u.rss_mib_max = u.rss_mib_max.max(rss);
            u.cpu_s_total += cpu_seconds(p.pid()).unwrap_or(0.0);
        }
        u
    }

    fn stop(self) {
        self.procs.lock().unwrap().stop_others();
    }
}

/// A node process as the workloads drive it: through its admin listener.
#[derive(Clone)]
struct Remote {
    admin: SocketAddr,
    /// Its HTTP listener: the reference it puts to itself.
    http: SocketAddr,
}

impl DemoNode for Remote {
    async fn get(&self, key: Id) -> Option<Got> {
        let path = format!("/_ecdn/sites/get?key={key}");
        let (status, body) = admin_get(self.admin, &path, TIMEOUT).await.ok()?;
        let got: serde_json::Value = serde_json::from_slice(&body).ok()?;
        (status == 200).then(|| Got {
            values: got["values"].as_array().map_or(0, Vec::len),
            level: got["level"].as_u64().map(|l| l as usize),
            hops: got["hops"].as_u64().unwrap_or(0) as u32,
            ms: got["ms"].as_f64().unwrap_or(0.0),
        })
    }

    async fn put(&self, key: Id, value: String) {
        let path = format!("/_ecdn/sites/put?key={key}&value={value}&ttl=3600");
        let _ = admin_post(self.admin, &path, TIMEOUT).await;
    }

    async fn put_probes(&self, key: Id) -> Result<u64> {
        let path = format!("/_ecdn/sites/probes?key={key}");
        let (_, body) = admin_get(self.admin, &path, TIMEOUT).await?;
        let v: serde_json::Value = serde_json::from_slice(&body)?;
        v["put_probes"]
            .as_u64()
            .ok_or_else(|| anyhow!("{}: no put_probes in {v}", self.admin))
    }

    fn me(&self) -> String {
        self.http.to_string()
    }

    async fn rpcs(&self) -> Result<(u64, u64)> {
        let (_, body) = admin_get(self.admin, "/_ecdn/sites", TIMEOUT).await?;
        let v: serde_json::Value = serde_json::from_slice(&body)?;
        let d = &v["dsht"];
        Ok((
            d["rpcs_sent"].as_u64().unwrap_or(0),
            d["hedges"].as_u64().unwrap_or(0),
        ))
    }
}

/// The flash crowd of [`super::proxies::flash_crowd`] at the node processes: the same
/// requests (same seed), from the client host.
async fn flash_crowd(
    run_name: &'static str,
    run: &Run<'_>,
    origin: &OriginThread,
    a: &DemoArgs,
    window: Duration,
    first_object: u64,
) -> Result<FlashCrowd> {
    let before = origin.requests();
    let n = run.bed.nodes.len();
    let addrs: Vec<SocketAddr> = (0..n).map(|i| run.bed.http(i)).collect();
    let (failed, ms) =
        super::proxies::crowd_requests(&addrs, a.flash_objects, window, first_object, a.seed).await;
    let origin_requests = origin.requests() - before;
    let site_fills = run
        .stats()
        .await?
        .iter()
        .map(|s| s["site_fills"].as_u64().unwrap_or(0))
        .sum();
    Ok(FlashCrowd {
        run: run_name,
        cooperating: true,
        nodes: n,
        objects: a.flash_objects,
        requests: n * a.flash_objects,
        failed,
        origin_requests,
        origin_requests_per_object: origin_requests as f64 / a.flash_objects.max(1) as f64,
        site_fills,
        fetch_ms: quantiles(ms),
    })
}

/// The redirectors asked by a resolver in every site (the host of the site's last node, a
/// DSHT peer of every redirector) and by the `resolver` host (which none knows: probed).
#[derive(Debug, Serialize)]
pub struct ProcRedirection {
    pub run: &'static str,
    pub redirectors: usize,
    pub queries: usize,
    pub failed: usize,
    /// The redirectors' own counts (`/_ecdn/stats` `sites.dns`), by level 0, 1, 2.
    pub answers_by_level: Vec<u64>,
    /// Of the site resolvers' queries, those whose TTL says level 2 exactly when the
    /// resolver is within 20 ms of the redirector.
    pub site_resolvers_placed_right: f64,
    /// The same for the probed resolver's queries (one per redirector).
    pub probed_resolver_placed_right: f64,
    /// RTT from a site resolver to the proxies it was given, ms, against a random proxy.
    pub answer_rtt_ms: Quantiles,
    pub random_rtt_ms: Quantiles,
}

impl ProcRedirection {
    fn text(&self) -> String {
        format!(
            "redirection: {} queries to {} redirectors, {} failed; answers by level {:?}; placed right: site resolvers {:.0}%, probed resolver {:.0}%; proxy RTT ms p50 {:.1} p90 {:.1} (random proxy p50 {:.1} p90 {:.1})",
            self.queries,
            self.redirectors,
            self.failed,
            self.answers_by_level,
            100.0 * self.site_resolvers_placed_right,
            100.0 * self.probed_resolver_placed_right,
            self.answer_rtt_ms.p50,
            self.answer_rtt_ms.p90,
            self.random_rtt_ms.p50,
            self.random_rtt_ms.p90
        )
    }
}

/// Asks each of `servers` for [`NAME`] from host `host` (address `source`), in that host's
/// namespace.
async fn ask_from(
    bed: &ProcBed,
    host: &str,
    source: IpAddr,
    servers: Vec<SocketAddr>,
) -> Result<Vec<Option<Vec<(IpAddr, u32)>>>> {
    let handle = bed.bed.spawn_in(host, move || -> Result<Vec<_>> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(rt.block_on(async move {
            let mut out = Vec::new();
            for s in servers {
                out.push(query_a(s, source, NAME, Duration::from_secs(5)).await.ok());
            }
            out
        }))
    })?;
    let joined = tokio::task::spawn_blocking(move || handle.join()).await?;
    let entered = joined.map_err(|_| anyhow!("a resolver's thread panicked"))?;
    entered.with_context(|| format!("entering host {host}"))?
}

async fn redirection(run: &Run<'_>) -> Result<ProcRedirection> {
    let bed = run.bed;
    let redirectors = bed.redirectors();
    let servers: Vec<SocketAddr> = redirectors
        .iter()
        .map(|&i| SocketAddr::new(bed.nodes[i].0, DNS_PORT))
        .collect();
    // Each site's resolver is its last node's host: the node before the next site's first.
    let resolvers: Vec<(String, IpAddr)> = (0..redirectors.len())
        .map(|k| {
            let last = redirectors.get(k + 1).map_or(bed.nodes.len(), |&n| n) - 1;
            (format!("n{last}"), bed.nodes[last].0)
        })
        .collect();
    let expected_near = |a: IpAddr, b: IpAddr| bed.rtt(a, b) <= Duration::from_millis(20);
    let (mut queries, mut failed, mut right, mut asked) = (0, 0, 0, 0);
    let (mut answer_rtt, mut random_rtt) = (Vec::new(), Vec::new());
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    for (host, source) in &resolvers {
        let got = ask_from(bed, host, *source, servers.clone()).await?;
        for (server, answer) in servers.iter().zip(got) {
            queries += 1;
            let Some(answer) = answer.filter(|a| !a.is_empty()) else {
                failed += 1;
                continue;
            };
            asked += 1;
            let near = answer[0].1 == TTL_NEAR;
            right += usize::from(near == expected_near(*source, server.ip()));
            answer_rtt.extend(answer.iter().map(|(ip, _)| ms(bed.rtt(*source, *ip))));
            random_rtt.extend(bed.nodes.iter().map(|(ip, _)| ms(bed.rtt(*source, *ip))));
        }
    }
    let got = ask_from(bed, "resolver", bed.resolver, servers.clone()).await?;
    let (mut probed_right, mut probed) = (0, 0);
    for (server, answer) in servers.iter().zip(got) {
        queries += 1;
        let Some(answer) = answer.filter(|a| !a.is_empty()) else {
            failed += 1;
            continue;
        };
        probed += 1;
        let near = answer[0].1 == TTL_NEAR;
        probed_right += usize::from(near == expected_near(bed.resolver, server.ip()));
    }
    let mut by_level = vec![0u64; run.levels.len()];
    for s in run.stats().await? {
        for (l, c) in s["sites"]["dns"]["answers_by_level"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            if l < by_level.len() {
                by_level[l] += c.as_u64().unwrap_or(0);
            }
        }
    }
    Ok(ProcRedirection {
        run: "redirection",
        redirectors: servers.len(),
        queries,
        failed,
        answers_by_level: by_level,
        site_resolvers_placed_right: right as f64 / asked.max(1) as f64,
        probed_resolver_placed_right: probed_right as f64 / probed.max(1) as f64,
        answer_rtt_ms: quantiles(answer_rtt),
        random_rtt_ms: quantiles(random_rtt),
    })
}

/// How long a run's nodes settle before its workload. The in-process demo refreshes every
/// node's routing table once all have joined; node processes refresh theirs each cluster
/// period (the first within one), so a run waits one and a half, and with the hierarchy, as
/// in process, six for the clusters.
fn settle(hierarchy: bool, period: Duration) -> Duration {
    if hierarchy {
        period * 6
    } else {
        period.mul_f64(1.5)
    }
}

/// One lookup run (and its crowd) of the processes, as [`super::lookup_run`].
async fn lookup_run(
    a: &DemoArgs,
    run: &Run<'_>,
    origin: &OriginThread,
    hierarchy: bool,
    period: Duration,
    window: Duration,
    pb: &ProgressBar,
) -> Result<(LookupRun, Option<FlashCrowd>, NodeLookups)> {
    let name = if hierarchy {
        "hierarchy"
    } else {
        "single-level"
    };
    let phase = Phase { pb, run: name };
    let settle = settle(hierarchy, period);
    phase.say(&format!(
        "routing tables and clusters settling for {settle:?}"
    ));
    tokio::time::sleep(settle).await;
    let setup_s = run.started.elapsed().as_secs_f64();
    phase.say(&format!("{} lookups", a.requests));
    let l = workload::lookups(a, &run.remotes(), &phase).await?;
    let ids = run.ids().await?;
    let sites: Vec<usize> = run.bed.nodes.iter().map(|(_, s)| *s).collect();
    let clusters: Vec<Vec<Id>> = ids.into_iter().map(|(_, c)| c).collect();
    let lookup = LookupRun {
        run: name,
        nodes: run.bed.nodes.len(),
        sites: run.bed.topo.sites(),
        levels: run.levels.len(),
        requests: a.requests,
        found: l.found,
        lookup_hops: quantiles(l.hops),
        lookup_ms: quantiles(l.ms),
        local_hit_fraction: l.local as f64 / l.found.max(1) as f64,
        clusters: clusters_of(&run.bed.topo, &sites, &clusters, &run.levels),
        setup_s,
    };
    let crowd = if a.flash_objects > 0 {
        let first = if hierarchy { 1_000 } else { 2_000 };
        phase.say(&format!("flash crowd over {window:?}"));
        Some(flash_crowd(name, run, origin, a, window, first).await?)
    } else {
        None
    };
    let counts = run.node_lookups().await?;
    Ok((lookup, crowd, counts))
}

/// `ecdn coral demo --processes`: builds the bed, moves this thread onto its client host,
/// and runs the demo's runs on node processes. Every process and the bed are gone when it
/// returns, however it returns.
pub fn run(a: DemoArgs) -> Result<()> {
    ecdn_testbed::bed::preflight().context("--processes needs a test bed")?;
    let period = crate::args::duration("--cluster-period", &a.cluster_period)?;
    let hot_interval = crate::args::duration("--hot-interval", &a.hot_interval)?;
    let hot_minute = crate::args::duration("--hot-minute", &a.hot_minute)?;
    let window = crate::args::duration("--flash-window", &a.flash_window)?;
    let topo = Topology::generate(a.nodes, a.sites, a.seed);
    let started = Instant::now();
    let pb = crate::args::phase_spinner(crate::args::progress_hidden(a.json, false));
    Phase {
        pb: &pb,
        run: "bed",
    }
    .say(&format!(
        "building a test bed of {} hosts",
        topo.nodes().len() + 3
    ));
    let bed = ProcBed::create(&topo, &a.link)?;
    use_admin_token(random_key()?);
    let dir = std::env::temp_dir().join(format!("ecdn-coral-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let origin = OriginThread::start(&bed)?;
    let _resolver = ResolverPort::start(&bed)?;
    let _client = bed.bed.enter("client")?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let result = rt.block_on(async {
        // 1. The hierarchy.
        let say = |run, what: String| Phase { pb: &pb, run }.say(&what);
        say(
            "hierarchy",
            format!("starting {} node processes", bed.nodes.len()),
        );
        let r = Run::start(&bed, &dir, levels(true), period, MINUTE).await?;
        let (multi, multi_crowd, multi_counts) =
            lookup_run(&a, &r, &origin, true, period, window, &pb).await?;
        print_run(&a, &pb, &multi, LookupRun::text)?;
        if let Some(c) = &multi_crowd {
            print_run(&a, &pb, c, FlashCrowd::text)?;
        }
        print_run(&a, &pb, &multi_counts, |c| {
            format!("node lookups (hierarchy): {c:?}")
        })?;
        say("hierarchy", "DNS redirectors".into());
        let redirection = redirection(&r).await?;
        print_run(&a, &pb, &redirection, ProcRedirection::text)?;
        let usage = r.usage();
        print_run(&a, &pb, &usage, |u| {
            format!(
                "{} node processes: RSS {:.0} MiB in all ({:.0} MiB the largest), {:.0} CPU s",
                u.processes, u.rss_mib_total, u.rss_mib_max, u.cpu_s_total
            )
        })?;
        r.stop();
        // 2. One level.
        say(
            "single-level",
            format!("starting {} node processes", bed.nodes.len()),
        );
        let r = Run::start(&bed, &dir, levels(false), period, MINUTE).await?;
        let (single, single_crowd, single_counts) =
            lookup_run(&a, &r, &origin, false, period, window, &pb).await?;
        print_run(&a, &pb, &single, LookupRun::text)?;
        if let Some(c) = &single_crowd {
            print_run(&a, &pb, c, FlashCrowd::text)?;
        }
        print_run(&a, &pb, &single_counts, |c| {
            format!("node lookups (single level): {c:?}")
        })?;
        r.stop();
        // 3. The hot spot.
        let hot = if hot_interval.is_zero() {
            None
        } else {
            say(
                "hot spot",
                format!("starting {} node processes", bed.nodes.len()),
            );
            let r = Run::start(&bed, &dir, levels(false), period, hot_minute).await?;
            let phase = Phase {
                pb: &pb,
                run: "hot spot",
            };
            phase.say("routing tables settling");
            tokio::time::sleep(settle(false, period)).await;
            let ids: Vec<Id> = r.ids().await?.into_iter().map(|(id, _)| id).collect();
            let h =
                workload::hot_spot(&r.remotes(), &ids, hot_interval, hot_minute, &phase).await?;
            r.stop();
            print_run(&a, &pb, &h, HotRun::text)?;
            Some(h)
        };
        let mut summary = Summary {
            mode: "processes",
            nodes: bed.nodes.len(),
            sites: topo.sites(),
            multi: &multi,
            single: &single,
            multi_crowd: multi_crowd.as_ref(),
            single_crowd: single_crowd.as_ref(),
            hot: hot.as_ref(),
        }
        .json();
        for (k, v) in [
            ("testbed", bed.bed.id().into()),
            ("link", a.link.clone().into()),
            ("node_processes", usage.processes.into()),
            ("node_rss_mib_total", usage.rss_mib_total.into()),
            (
                "node_lookup_ms",
                serde_json::to_value(multi_counts.lookup_ms)?,
            ),
            (
                "single_level_node_lookup_ms",
                serde_json::to_value(single_counts.lookup_ms)?,
            ),
            (
                "dns_answers_by_level",
                redirection.answers_by_level.clone().into(),
            ),
            (
                "probed_resolver_placed_right",
                redirection.probed_resolver_placed_right.into(),
            ),
        ] {
            summary.insert(k.into(), v);
        }
        finish(&a, &pb, summary, started)?;
        anyhow::Ok(())
    });
    drop(rt);
    drop(origin);
    // The nodes' logs are kept when the run failed, to say why.
    match result {
        Ok(()) => {
            let _ = std::fs::remove_dir_all(&dir);
            Ok(())
        }
        Err(e) => Err(e.context(format!("the node processes' logs are in {}", dir.display()))),
    }
}
