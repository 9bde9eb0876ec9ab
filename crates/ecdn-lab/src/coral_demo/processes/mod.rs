//! `ecdn coral demo --processes`: Coral with every node an `ecdn node --coral-*` process on a
//! host of its own, and the network's delays on every packet.
//!
//! The in-process demo's topology ([`super::topology`]: sites at random points of a square,
//! 5 ms RTT within a site, 20–150 ms between) becomes a test bed (`ecdn-testbed`, network
//! namespaces on a bridge; needs root):
//!
//! * one host per node, `n0`, `n1`, … site by site, each pair of hosts delayed by half its
//!   RTT one way, on every packet (the bed's delayers), not only on connects;
//! * `origin`, 50 ms one way from every node ([`super::proxies::ORIGIN_RTT`] round trip), served from a
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
//!
//! [`bed`] builds the hosts and serves the origin and the resolver's port; [`redirect`] asks
//! the redirectors; this module starts the nodes, runs the workloads
//! ([`super::workload`], the crowd) and reports.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use ecdn_dsht::Id;
use indicatif::ProgressBar;
use serde::Serialize;

use super::proxies::FlashCrowd;
use super::redirect::DOMAIN;
use super::topology::Topology;
use super::workload::{self, DemoNode, Got, Stop, HOT_TTL};
use super::{clusters_of, finish, levels, print_run, quantiles, DemoArgs, HotRun, LookupRun};
use super::{Phase, Quantiles, Summary, MINUTE};
use crate::cluster_demo::procs::{
    admin_get, admin_post, cpu_seconds, random_key, use_admin_token, Procs,
};
use ecdn_dsht::sloppy::PutProbe;

mod bed;
mod redirect;

pub use bed::MAX_NODES;
use bed::{OriginThread, ProcBed, ResolverPort, DNS_PORT, DSHT_PORT};
use redirect::{redirection, ProcRedirection};

/// The longest the demo waits for an admin or client answer.
const TIMEOUT: Duration = Duration::from_secs(30);

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

    async fn put(&self, key: Id, value: String) -> Option<Vec<Stop>> {
        let ttl = HOT_TTL.as_secs();
        let path = format!("/_ecdn/sites/put?key={key}&value={value}&ttl={ttl}");
        let (status, body) = admin_post(self.admin, &path, TIMEOUT).await.ok()?;
        let put: serde_json::Value = serde_json::from_slice(&body).ok()?;
        let stops = put["path"].as_array().filter(|_| status == 200)?;
        let stop = |s: &serde_json::Value| {
            Some(Stop {
                id: s["id"].as_str()?.parse().ok()?,
                probe: PutProbe {
                    loaded: s["loaded"].as_bool()?,
                    count: s["values"].as_u64()? as usize,
                    min_ttl: Duration::from_secs(s["min_ttl_s"].as_u64()?),
                },
            })
        };
        let level0 = stops.iter().filter(|s| s["level"] == 0);
        level0.map(stop).collect()
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

    async fn rpcs(&self) -> Result<(u64, u64, u64)> {
        let (_, body) = admin_get(self.admin, "/_ecdn/sites", TIMEOUT).await?;
        let v: serde_json::Value = serde_json::from_slice(&body)?;
        let d = &v["dsht"];
        Ok((
            d["rpcs_sent"].as_u64().unwrap_or(0),
            d["hedges"].as_u64().unwrap_or(0),
            d["rpcs_timed_out"].as_u64().unwrap_or(0),
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
    let stats = run.stats().await?;
    Ok(FlashCrowd {
        run: run_name,
        cooperating: true,
        nodes: n,
        objects: a.flash_objects,
        requests: n * a.flash_objects,
        failed,
        origin_requests,
        origin_requests_per_object: origin_requests as f64 / a.flash_objects.max(1) as f64,
        sites: super::proxies::SiteCounts::sum(&stats),
        fetch_ms: quantiles(ms),
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
