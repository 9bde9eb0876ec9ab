//! `ecdn coral demo`: Coral on a test bed of one machine (issue 14).
//!
//! N DSHT nodes in S sites on loopback (`topology.rs`: 5 ms RTT within a site, 20–150 ms
//! between), each with an `ecdn node` beside it (`proxies`), in this process:
//!
//! 1. **The hierarchy** (levels ∞, 60 ms, 20 ms): the nodes join through one seed, find their
//!    clusters (one cluster period of `--cluster-period` instead of the paper's 5 min), and
//!    serve a lookup workload: `--requests` requests for `--objects` objects (Zipf, s = 0.8),
//!    each at a random node, which looks the object's URL up (`get`, the fastest level first)
//!    and then puts a reference to itself, as a CoralProxy does once it holds the object.
//!    Reported: lookup hops and latency, the share of gets answered in the level-2 cluster,
//!    the clusters found per level against the injected topology. Then the **flash crowd**
//!    of §6.1 through the proxies: every node's client asks for each of `--flash-objects` new
//!    objects within `--flash-window`; reported: origin requests per object, fills from other
//!    sites, client fetch latency. Then **the redirectors** (`redirect`, §3.1): one DNS
//!    redirector per site, asked by every site's resolver; reported: the answers' levels, the
//!    RTT to the proxies answered against a random one's, and how long a proxy that dies
//!    stays in answers (`--proxy-fresh`).
//! 2. **One level** (∞ only): the same topology, workload and crowd, for comparison (§6.2).
//! 3. **Alone**: the crowd on nodes that do not cooperate (what the origin sees without the
//!    DSHT).
//! 4. **The hot spot** (§6.4, one level as in the paper): every node puts the same key every
//!    `--hot-interval`; the puts reaching the key's closest node are counted over a minute
//!    after a third of one and compared with β·(2^b − 1)·⌈log2 n / b⌉ (a perfectly balanced
//!    tree's) and with β times the nodes a walk would reach the closest node from with these
//!    ids and every node known; the puts seen reaching it are told apart by how they passed
//!    the stop before it (their putter, a node not full, a full one's leakage). The test
//!    bed's minute, `--hot-minute`, is 12 s by default: the leakage rate is β puts per it and
//!    every node puts 30 times per it, so the experiment is the paper's with time running five
//!    times faster (but for the network's RTTs).
//!
//! The defaults run in under a minute on two cores (the paper's spans are minutes: its 5 min
//! cluster period and hour-long crowd); each phase says on stderr what it is doing, and longer
//! runs are a matter of flags (`--cluster-period`, `--flash-window`, `--hot-minute 60s`, ...).
//! With `--json` each run prints one line and the last line sums them up.

mod processes;
mod proxies;
mod redirect;
mod topology;
mod workload;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use ecdn_dsht::{Config, Dsht, Id};
use indicatif::ProgressBar;
use serde::Serialize;

use topology::Topology;

#[derive(Subcommand)]
pub enum CoralCmd {
    /// Coral on loopback with injected RTTs: clusters, lookups with and without the
    /// hierarchy, a flash crowd through cooperating proxies, and the hot-spot bound.
    Demo(DemoArgs),
}

#[derive(Args)]
pub struct DemoArgs {
    /// DSHT nodes.
    #[arg(long, default_value_t = 100)]
    nodes: usize,
    /// Sites the nodes are spread over.
    #[arg(long, default_value_t = 10)]
    sites: usize,
    /// Seed of the topology and the workload.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How often each node reconsiders its clusters (the paper: 5 min); the hierarchy settles
    /// for six of them before its lookups.
    #[arg(long, default_value = "1s")]
    cluster_period: String,
    /// Proxy requests in each lookup run.
    #[arg(long, default_value_t = 600)]
    requests: usize,
    /// Distinct objects they ask for.
    #[arg(long, default_value_t = 60)]
    objects: usize,
    /// Requests per second.
    #[arg(long, default_value_t = 200.0)]
    rate: f64,
    /// New objects each node's client asks for in the flash crowd (0: no proxies).
    #[arg(long, default_value_t = 12)]
    flash_objects: usize,
    /// The flash crowd's requests arrive at random within this window.
    #[arg(long, default_value = "5s")]
    flash_window: String,
    /// A redirector answers a proxy heard from within this long without pinging it first.
    #[arg(long, default_value = "3s")]
    proxy_fresh: String,
    /// How often each node puts the hot key (0s: no hot-spot run); the default is 30 puts a
    /// `--hot-minute`.
    #[arg(long, default_value = "0.4s")]
    hot_interval: String,
    /// The hot-spot run's minute: the leakage rate's window (β = 12 puts per it), a third of it
    /// to warm up, then one of it counted. The paper's is 60 s; a shorter one runs the same
    /// experiment faster, with puts and leakage scaled together.
    #[arg(long, default_value = "12s")]
    hot_minute: String,
    /// One JSON line per run, and a summary line last.
    #[arg(long)]
    json: bool,
    /// Run every node as an `ecdn node --coral-*` process on a host of its own: a test bed
    /// (network namespaces; needs root) whose links delay every packet by the topology's RTTs
    /// (at most 96 nodes). Without it, the nodes run in this process with delays injected.
    #[arg(long)]
    processes: bool,
    /// With --processes: every host's link (rate, and delay added to the topology's), e.g.
    /// `1gbit` or `100mbit`.
    #[arg(long, default_value = "1gbit", requires = "processes")]
    link: String,
}

pub fn run(cmd: CoralCmd) -> Result<()> {
    match cmd {
        CoralCmd::Demo(a) if a.processes => {
            check_sizes(&a)?;
            processes::run(a)
        }
        CoralCmd::Demo(a) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("starting the runtime")?
            .block_on(demo(a)),
    }
}

#[derive(Clone, Copy, Debug, Default, Serialize)]
struct Quantiles {
    p50: f64,
    p90: f64,
    p99: f64,
}

fn quantiles(mut v: Vec<f64>) -> Quantiles {
    if v.is_empty() {
        return Quantiles::default();
    }
    v.sort_by(f64::total_cmp);
    let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    Quantiles {
        p50: q(0.5),
        p90: q(0.9),
        p99: q(0.99),
    }
}

/// One level's clusters against the topology.
#[derive(Debug, Serialize)]
struct LevelClusters {
    level: usize,
    threshold_ms: Option<f64>,
    /// Distinct clusters (singletons included).
    clusters: usize,
    /// Clusters of one node.
    singletons: usize,
    /// Pairs of nodes in one cluster whose injected RTT is within the threshold, of all
    /// pairs in one cluster (1: every cluster is tight).
    pairs_within: f64,
    /// Pairs within the threshold that share a cluster, of all pairs within it (1: nothing
    /// that could cluster was left apart).
    pairs_joined: f64,
}

#[derive(Debug, Serialize)]
struct LookupRun {
    run: &'static str,
    nodes: usize,
    sites: usize,
    levels: usize,
    requests: usize,
    /// Gets that found a reference (the rest would go to the origin).
    found: usize,
    lookup_hops: Quantiles,
    lookup_ms: Quantiles,
    /// Gets answered in the level-2 cluster, of those answered.
    local_hit_fraction: f64,
    clusters: Vec<LevelClusters>,
    setup_s: f64,
}

impl LookupRun {
    /// The run as a line of text.
    fn text(&self) -> String {
        let mut line = format!(
            "{}: {} gets, {} found; hops p50 {} p99 {}; ms p50 {:.1} p90 {:.1} p99 {:.1}",
            self.run,
            self.requests,
            self.found,
            self.lookup_hops.p50,
            self.lookup_hops.p99,
            self.lookup_ms.p50,
            self.lookup_ms.p90,
            self.lookup_ms.p99
        );
        if self.levels > 1 {
            line += &format!(
                "; level-2 hits {:.0}%; clusters per level {:?}",
                100.0 * self.local_hit_fraction,
                self.clusters.iter().map(|c| c.clusters).collect::<Vec<_>>()
            );
        }
        line
    }
}

#[derive(Debug, Serialize)]
struct HotRun {
    run: &'static str,
    nodes: usize,
    puts: u64,
    /// The test bed's minute (`--hot-minute`), seconds: the leakage window, and the span the
    /// counts below are over.
    minute_s: f64,
    closest_node_puts_per_min: u64,
    /// The most put probes any node received in that minute.
    max_node_puts_per_min: u64,
    /// That node's rank by distance to the key (0: the closest).
    max_node_rank: usize,
    bound_puts_per_min: u64,
    /// The nodes from which a walk would go straight to the closest node with these ids if
    /// every node knew every other ([`workload::ideal_predecessors`]; ⌈log2 n⌉ in the
    /// paper's perfectly balanced tree), and β times them: the bound for these ids.
    ids_predecessors: usize,
    ids_bound_puts_per_min: u64,
    /// Gets of the hot key from every node that found it, at the end.
    found_fraction: f64,
    /// The walks' RPCs (every node's, every key's) in the counted minute, how many of them
    /// were hedges (sent because the hops asked were late), and how many timed out: a put walk
    /// that goes on without a late hop's answer may pass a node that was loaded.
    minute_rpcs: u64,
    minute_hedges: u64,
    minute_timeouts: u64,
    /// How the puts that reached the closest node in the minute passed the stop before it.
    passed: workload::HotPassed,
    /// The same for the node that received the most.
    max_node_passed: workload::HotPassed,
}

impl HotRun {
    /// The run as a line of text.
    fn text(&self) -> String {
        format!(
            "hot spot: {} puts; the closest node got {} in a minute of {:.0} s (most on any node {}, the {}th closest), bound {} (for these ids {}: {} nodes before the closest with every node known); {:.0}% of nodes find the key; {} RPCs in the minute, {} hedges, {} timed out; the puts seen reaching it came from their putter {}, passed a node not full {}, leaked through a full one {} ({} nodes before it, at most {} from one)",
            self.puts,
            self.closest_node_puts_per_min,
            self.minute_s,
            self.max_node_puts_per_min,
            self.max_node_rank + 1,
            self.bound_puts_per_min,
            self.ids_bound_puts_per_min,
            self.ids_predecessors,
            100.0 * self.found_fraction,
            self.minute_rpcs,
            self.minute_hedges,
            self.minute_timeouts,
            self.passed.from_putter,
            self.passed.not_full,
            self.passed.leaked,
            self.passed.predecessors,
            self.passed.most_from_one
        )
    }
}

/// The paper's leakage window (β puts a minute), for every run but the hot spot's.
const MINUTE: Duration = Duration::from_secs(60);

/// The levels of a run: ∞, 60 ms and 20 ms with the hierarchy, else ∞ alone.
fn levels(hierarchy: bool) -> Vec<Option<Duration>> {
    if hierarchy {
        vec![
            None,
            Some(Duration::from_millis(60)),
            Some(Duration::from_millis(20)),
        ]
    } else {
        vec![None]
    }
}

/// A run's DSHT nodes, one per topology node, joined.
struct Bed {
    nodes: Vec<Arc<Dsht>>,
    /// Seconds from the first node's start to the last refresh.
    start_s: f64,
}

impl Bed {
    /// Starts a bed in the background: its nodes bind their own ports (port 0 on the
    /// topology's addresses), so it joins while the previous run's last phase goes on, which
    /// spares the demo the joins' wait (a few seconds of injected RTTs, little CPU).
    fn spawn(
        topo: &Topology,
        levels: Vec<Option<Duration>>,
        period: Duration,
        minute: Duration,
        seed: u64,
    ) -> tokio::task::JoinHandle<Result<Bed>> {
        let topo = topo.clone();
        tokio::spawn(async move {
            let t0 = Instant::now();
            let nodes = start_bed(&topo, levels, period, minute, seed).await?;
            Ok(Bed {
                nodes,
                start_s: t0.elapsed().as_secs_f64(),
            })
        })
    }

    /// Waits for a bed [`Bed::spawn`] started.
    async fn ready(handle: tokio::task::JoinHandle<Result<Bed>>) -> Result<Bed> {
        handle.await.context("starting a DSHT test bed")?
    }

    fn shutdown(&self) {
        for n in &self.nodes {
            n.shutdown();
        }
    }
}

/// Starts one DSHT node per topology node and joins them through the first. `minute` is the
/// leakage rate's window (β puts per it).
async fn start_bed(
    topo: &Topology,
    levels: Vec<Option<Duration>>,
    period: Duration,
    minute: Duration,
    seed: u64,
) -> Result<Vec<Arc<Dsht>>> {
    let latency = topo.latency();
    let mut nodes = Vec::new();
    for (i, (addr, _)) in topo.nodes().into_iter().enumerate() {
        let mut cfg = Config::new(addr);
        cfg.thresholds = levels.clone();
        cfg.cluster_period = period;
        cfg.leakage_window = minute;
        cfg.latency = Some(latency.clone());
        cfg.seed = Some(seed.wrapping_mul(1_000_003).wrapping_add(i as u64));
        nodes.push(Arc::new(
            Dsht::start(cfg)
                .await
                .with_context(|| format!("starting a DSHT node on {addr}"))?,
        ));
    }
    let seed_addr = nodes[0].addr();
    let mut joins = tokio::task::JoinSet::new();
    for n in &nodes[1..] {
        let n = n.clone();
        joins.spawn(async move { n.join(&[seed_addr]).await });
    }
    while joins.join_next().await.is_some() {}
    let mut refresh = tokio::task::JoinSet::new();
    for n in &nodes {
        let n = n.clone();
        refresh.spawn(async move { n.refresh(0, 8).await });
    }
    while refresh.join_next().await.is_some() {}
    Ok(nodes)
}

fn clusters_against(
    topo: &Topology,
    nodes: &[Arc<Dsht>],
    thresholds: &[Option<Duration>],
) -> Vec<LevelClusters> {
    let sites: Vec<usize> = nodes
        .iter()
        .map(|n| topo.site_of(n.addr().ip()).unwrap_or(0))
        .collect();
    let ids: Vec<Vec<Id>> = nodes.iter().map(|n| n.clusters()).collect();
    clusters_of(topo, &sites, &ids, thresholds)
}

/// The clusters of nodes in `sites` (one entry per node) whose cluster ids per level are
/// `ids`, against the topology's RTTs.
fn clusters_of(
    topo: &Topology,
    sites: &[usize],
    ids: &[Vec<Id>],
    thresholds: &[Option<Duration>],
) -> Vec<LevelClusters> {
    (0..thresholds.len())
        .map(|level| {
            let mut sizes: HashMap<Id, usize> = HashMap::new();
            for c in ids {
                *sizes
                    .entry(c.get(level).copied().unwrap_or_default())
                    .or_default() += 1;
            }
            let limit = thresholds[level].unwrap_or(Duration::MAX);
            let (mut same, mut same_within, mut within, mut within_joined) =
                (0u64, 0u64, 0u64, 0u64);
            for i in 0..ids.len() {
                for j in i + 1..ids.len() {
                    let near = topo.rtt(sites[i], sites[j]) <= limit;
                    let joined = ids[i].get(level) == ids[j].get(level);
                    same += joined as u64;
                    same_within += (joined && near) as u64;
                    within += near as u64;
                    within_joined += (near && joined) as u64;
                }
            }
            LevelClusters {
                level,
                threshold_ms: thresholds[level].map(|t| t.as_secs_f64() * 1000.0),
                clusters: sizes.len(),
                singletons: sizes.values().filter(|s| **s == 1).count(),
                pairs_within: same_within as f64 / same.max(1) as f64,
                pairs_joined: within_joined as f64 / within.max(1) as f64,
            }
        })
        .collect()
}

/// The lookups and the flash crowd of one run on `bed` (with the hierarchy: after its clusters
/// settle).
async fn lookup_run(
    a: &DemoArgs,
    topo: &Topology,
    bed: &Bed,
    hierarchy: bool,
    period: Duration,
    window: Duration,
    pb: &ProgressBar,
) -> Result<(LookupRun, Option<proxies::FlashCrowd>)> {
    let levels = levels(hierarchy);
    let name = if hierarchy {
        "hierarchy"
    } else {
        "single-level"
    };
    let phase = Phase { pb, run: name };
    let t0 = Instant::now();
    if hierarchy {
        // Clusters form from singletons; a few periods let merges settle (§6: 30 min for
        // 5 min periods).
        phase.say(&format!("clusters settling for {:?}", period * 6));
        tokio::time::sleep(period * 6).await;
    }
    let setup_s = bed.start_s + t0.elapsed().as_secs_f64();
    let nodes = &bed.nodes;
    phase.say(&format!("{} lookups", a.requests));
    let l = workload::lookups(a, nodes, &phase).await?;
    let run = LookupRun {
        run: name,
        nodes: nodes.len(),
        sites: topo.sites(),
        levels: levels.len(),
        requests: a.requests,
        found: l.found,
        lookup_hops: quantiles(l.hops),
        lookup_ms: quantiles(l.ms),
        local_hit_fraction: l.local as f64 / l.found.max(1) as f64,
        clusters: clusters_against(topo, nodes, &levels),
        setup_s,
    };
    let crowd = if a.flash_objects > 0 {
        let first = if hierarchy { 1_000 } else { 2_000 };
        phase.say(&format!("flash crowd over {window:?}"));
        Some(
            proxies::flash_crowd(
                run.run,
                topo,
                Some(nodes),
                a.flash_objects,
                window,
                first,
                a.seed,
            )
            .await?,
        )
    } else {
        None
    };
    Ok((run, crowd))
}

/// The sizes both modes accept.
fn check_sizes(a: &DemoArgs) -> Result<()> {
    anyhow::ensure!(
        a.nodes >= 2 && a.sites >= 1,
        "--nodes must be at least 2 and --sites 1"
    );
    anyhow::ensure!(
        a.nodes.div_ceil(a.sites) <= 250 && a.sites <= 200,
        "at most 200 sites of 250 nodes (one /24 of 127.0.0.0/8 each)"
    );
    anyhow::ensure!(
        !a.processes || a.nodes <= processes::MAX_NODES,
        "--processes: at most {} nodes (a test bed has at most 99 hosts)",
        processes::MAX_NODES
    );
    let minute = crate::args::duration("--hot-minute", &a.hot_minute)?;
    anyhow::ensure!(
        minute >= Duration::from_secs(1),
        "--hot-minute must be at least 1s"
    );
    Ok(())
}

async fn demo(a: DemoArgs) -> Result<()> {
    check_sizes(&a)?;
    let period = crate::args::duration("--cluster-period", &a.cluster_period)?;
    let hot_interval = crate::args::duration("--hot-interval", &a.hot_interval)?;
    let hot_minute = crate::args::duration("--hot-minute", &a.hot_minute)?;
    let window = crate::args::duration("--flash-window", &a.flash_window)?;
    let fresh = crate::args::duration("--proxy-fresh", &a.proxy_fresh)?;
    let topo = Topology::generate(a.nodes, a.sites, a.seed);
    let started = Instant::now();
    let pb = crate::args::phase_spinner(crate::args::progress_hidden(a.json, false));
    let nodes = topo.nodes().len();
    // 1. The hierarchy: lookups, the crowd, then the redirectors, while the one-level bed joins.
    Phase {
        pb: &pb,
        run: "hierarchy",
    }
    .say(&format!("starting and joining {nodes} DSHT nodes"));
    let multi_bed = Bed::ready(Bed::spawn(&topo, levels(true), period, MINUTE, a.seed)).await?;
    let (multi, multi_crowd) = lookup_run(&a, &topo, &multi_bed, true, period, window, &pb).await?;
    print_run(&a, &pb, &multi, LookupRun::text)?;
    if let Some(c) = &multi_crowd {
        print_run(&a, &pb, c, proxies::FlashCrowd::text)?;
    }
    let single_bed = Bed::spawn(&topo, levels(false), period, MINUTE, a.seed);
    Phase {
        pb: &pb,
        run: "hierarchy",
    }
    .say("DNS redirectors, then a proxy dies");
    let redirection = redirect::redirection(&topo, &multi_bed.nodes, fresh).await?;
    multi_bed.shutdown();
    print_run(&a, &pb, &redirection, redirect::Redirection::text)?;
    // 2. One level.
    Phase {
        pb: &pb,
        run: "single-level",
    }
    .say(&format!("joining {nodes} DSHT nodes"));
    let single_bed = Bed::ready(single_bed).await?;
    let (single, single_crowd) =
        lookup_run(&a, &topo, &single_bed, false, period, window, &pb).await?;
    single_bed.shutdown();
    print_run(&a, &pb, &single, LookupRun::text)?;
    if let Some(c) = &single_crowd {
        print_run(&a, &pb, c, proxies::FlashCrowd::text)?;
    }
    // 3. The same crowd on nodes that do not cooperate (what the origin sees without the
    // DSHT), while the hot spot's bed joins.
    let hot_bed = (!hot_interval.is_zero()).then(|| {
        Bed::spawn(
            &topo,
            levels(false),
            Duration::from_secs(300),
            hot_minute,
            a.seed,
        )
    });
    let alone = if a.flash_objects > 0 {
        Phase {
            pb: &pb,
            run: "alone",
        }
        .say(&format!("flash crowd over {window:?}"));
        let c = proxies::flash_crowd("alone", &topo, None, a.flash_objects, window, 3_000, a.seed)
            .await?;
        print_run(&a, &pb, &c, proxies::FlashCrowd::text)?;
        Some(c)
    } else {
        None
    };
    let hot = if hot_interval.is_zero() {
        None
    } else {
        let bed = Bed::ready(hot_bed.context("the hot spot's bed")?).await?;
        let ids: Vec<Id> = bed.nodes.iter().map(|n| n.id()).collect();
        let phase = Phase {
            pb: &pb,
            run: "hot spot",
        };
        let h = workload::hot_spot(&bed.nodes, &ids, hot_interval, hot_minute, &phase).await?;
        bed.shutdown();
        print_run(&a, &pb, &h, HotRun::text)?;
        Some(h)
    };
    let mut summary = Summary {
        mode: "in-process",
        nodes: a.nodes,
        sites: topo.sites(),
        multi: &multi,
        single: &single,
        multi_crowd: multi_crowd.as_ref(),
        single_crowd: single_crowd.as_ref(),
        hot: hot.as_ref(),
    }
    .json();
    for (k, v) in [
        ("objects", multi_crowd.as_ref().map(|c| c.objects).into()),
        (
            "origin_requests",
            multi_crowd.as_ref().map(|c| c.origin_requests).into(),
        ),
        (
            "alone_origin_requests_per_object",
            alone.as_ref().map(|c| c.origin_requests_per_object).into(),
        ),
        ("level2_answers", redirection.level2_answers.into()),
        (
            "answered_proxy_rtt_ms_p50",
            redirection.answer_rtt_ms.p50.into(),
        ),
        (
            "random_proxy_rtt_ms_p50",
            redirection.random_rtt_ms.p50.into(),
        ),
        ("dead_proxy_last_named_s", redirection.last_named_s.into()),
        ("dead_proxy_ttl_s", redirection.killed_ttl_s.into()),
    ] {
        summary.insert(k.into(), v);
    }
    finish(&a, &pb, summary, started)
}

/// The summary line's keys both modes report.
struct Summary<'a> {
    mode: &'static str,
    nodes: usize,
    sites: usize,
    multi: &'a LookupRun,
    single: &'a LookupRun,
    multi_crowd: Option<&'a proxies::FlashCrowd>,
    single_crowd: Option<&'a proxies::FlashCrowd>,
    hot: Option<&'a HotRun>,
}

impl Summary<'_> {
    fn json(&self) -> serde_json::Map<String, serde_json::Value> {
        let (multi, single) = (self.multi, self.single);
        let ms = |q: &Quantiles| serde_json::json!({"p50": q.p50, "p90": q.p90, "p99": q.p99});
        let v = serde_json::json!({
            "mode": self.mode,
            "nodes": self.nodes,
            "sites": self.sites,
            "lookup_hops": {"p50": multi.lookup_hops.p50, "p99": multi.lookup_hops.p99},
            "lookup_ms": ms(&multi.lookup_ms),
            "single_level_lookup_ms": ms(&single.lookup_ms),
            "local_hit_fraction": multi.local_hit_fraction,
            "clusters": multi.clusters.iter().map(|c| c.clusters).collect::<Vec<_>>(),
            "origin_requests_per_object": self.multi_crowd.map(|c| c.origin_requests_per_object),
            "single_level_origin_requests_per_object": self.single_crowd.map(|c| c.origin_requests_per_object),
            "fetch_ms": self.multi_crowd.map(|c| c.fetch_ms),
            "single_level_fetch_ms": self.single_crowd.map(|c| c.fetch_ms),
            "closest_node_puts_per_min": self.hot.map(|h| h.closest_node_puts_per_min),
            "bound_puts_per_min": self.hot.map(|h| h.bound_puts_per_min),
            "ids_bound_puts_per_min": self.hot.map(|h| h.ids_bound_puts_per_min),
        });
        match v {
            serde_json::Value::Object(m) => m,
            _ => unreachable!("a JSON object"),
        }
    }
}

/// Prints the summary (with the run's time) as the last JSON line, or says how long it took.
fn finish(
    a: &DemoArgs,
    pb: &ProgressBar,
    mut summary: serde_json::Map<String, serde_json::Value>,
    started: Instant,
) -> Result<()> {
    let elapsed = started.elapsed().as_secs_f64();
    summary.insert("elapsed_s".into(), elapsed.into());
    pb.finish_and_clear();
    if a.json {
        outln!("{}", serde_json::Value::Object(summary))?;
    } else {
        eprintln!("done in {elapsed:.0} s");
    }
    Ok(())
}

/// What the spinner says during one run of the demo.
struct Phase<'a> {
    pb: &'a ProgressBar,
    run: &'static str,
}

impl Phase<'_> {
    fn say(&self, what: &str) {
        self.pb.set_message(format!("{}: {what}", self.run));
    }
}

/// Prints a run's result: a JSON line on stdout with `--json`, else a line of text on stderr
/// (above the spinner).
fn print_run<T: Serialize>(
    a: &DemoArgs,
    pb: &ProgressBar,
    run: &T,
    text: impl Fn(&T) -> String,
) -> Result<()> {
    if a.json {
        outln!("{}", serde_json::to_string(run)?)?;
    } else {
        pb.suspend(|| eprintln!("{}", text(run)));
    }
    Ok(())
}
