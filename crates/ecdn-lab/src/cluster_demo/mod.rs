//! `ecdn cluster demo`: a live C2DN cluster as separate processes on loopback — an origin
//! (`ecdn origin`), the coordinator (`ecdn coordinator`) and N nodes (`ecdn node --cluster`) —
//! a trace replayed through it by a load driver acting as the cluster's front load balancer,
//! nodes killed on schedule and, if asked, started again, and what the cluster did next to
//! what the simulator (`ecdn_sim::cluster`, in-process, same trace and configuration, without
//! failures and with the same ones) does.
//!
//! The parts: `args.rs` ([`DemoArgs`]) and `plan.rs` (the arguments checked, the trace loaded),
//! [`procs`] (ports, the cluster file, the children, readiness, CPU), [`schedule`] (the kills
//! and restarts, checked), [`driver`] (the load balancer, which carries out the schedule),
//! [`restart`] (a killed node's return, and how the report shows it), [`measure`] (what a run
//! measured: records, windows, percentiles), [`report`] (the JSON object and the tables),
//! `sim.rs` (the simulator's runs); the figure is drawn by [`crate::plot::cluster_demo`].

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use ecdn_cluster::coordinator::client::CoordinatorClient;
use ecdn_cluster::etcd_local::LocalEtcd;
use ecdn_trace::units::format_size;

mod args;
mod balancer;
pub mod bed;
pub mod contract;
mod control;
pub mod declared;
pub mod dispenser;
pub mod driver;
pub mod measure;
mod plan;
pub mod procs;
pub mod report;
pub mod restart;
pub mod routing;
pub mod schedule;
mod sim;

pub use args::DemoArgs;
use driver::{Dispenser, Rebalancer, SharedDispenser, Work};
use measure::{ClusterStats, CompareRow, KillRow, Record, SimSummary, Totals};
use plan::{plan, Plan};
use procs::{FileSettings, Layout, Procs};
use report::Report;
use restart::{NodeStart, ReturnTiming, Returns};
use sim::{sim_summary, simulate, Failures};

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
    /// The coordinator's declarations: each stay of a node out of the map.
    outs: Vec<declared::OutRow>,
    /// Requests the load balancer sent past a node it found slow (`--routing bucket`).
    slow_skips: u64,
    /// Per node, the largest service time the coordinator showed while it was in the map.
    service_ms_max: Vec<Option<f64>>,
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
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let fault_ctx = bed::FaultContext {
        log: Default::default(),
        heals: Default::default(),
        done: done.clone(),
        issued: Default::default(),
    };
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
            .with_heals(fault_ctx.heals.clone())
            .with_issued(fault_ctx.issued.clone())
            .with_faults(plan.faults.clone(), {
                let (bed, progress, ctx) = (setup.bed.clone(), progress.clone(), fault_ctx.clone());
                // On a thread of its own: rewriting the bed's rules takes 100 ms or more, and
                // done under the dispenser's lock on a runtime thread it stalled every request
                // in flight (each fault's start is marked once it applies).
                Box::new(move |f| {
                    let Some(bed) = bed.clone() else { return };
                    let (f, ctx, progress) = (*f, ctx.clone(), progress.clone());
                    std::thread::spawn(move || {
                        let said = match bed::apply_timed(&bed, &f, &ctx) {
                            Ok(()) => format!("node {} {}", f.node, f.kind),
                            Err(e) => format!("error: node {} not {}: {e:#}", f.node, f.kind),
                        };
                        progress.suspend(|| eprintln!("{said}"));
                    });
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
        admins: layout.admins.clone(),
        dispenser,
        timeout: plan.request_timeout,
        idle: plan.idle_timeout,
        rebalancer: Some(rebalancer),
        repairer: Some(repairer),
        returner: Some(returns.returner()),
        arrivals: !plan.client_links.is_empty(),
        progress: progress.clone(),
    });
    let events = tokio::spawn(control::run_events(
        plan.control.clone(),
        cfg.clone(),
        layout.clone(),
        procs.clone(),
        setup.etcd.clone(),
        work.dispenser.clone(),
        done.clone(),
    ));
    // What the coordinator declares, and the load balancer's view of the nodes it reports.
    let watcher = tokio::spawn(declared::watch(
        cfg.clone(),
        fault_ctx.issued.clone(),
        done.clone(),
        {
            let dispenser = work.dispenser.clone();
            move |node, available| dispenser.lock().unwrap().in_map(node, available)
        },
    ));
    let balancer = balancer::spawn(
        cfg.clone(),
        layout.nodes.iter().map(|(c, _)| *c).collect(),
        done.clone(),
        {
            let dispenser = work.dispenser.clone();
            move |node, slow| dispenser.lock().unwrap().slow(node, slow)
        },
    );
    let t = Instant::now();
    let records = driver::run(work.clone(), a.concurrency).await;
    let elapsed_s = t.elapsed().as_secs_f64();
    progress.finish_and_clear();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let watched = watcher.await.context("the coordinator's watcher")?;
    let _ = tokio::task::spawn_blocking(move || balancer.join()).await;
    let outs = declared::rows(&watched.changes, &fault_ctx.log.lock().unwrap(), t);
    let slow_skips = work.dispenser.lock().unwrap().slow_skips();
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
        outs,
        slow_skips,
        service_ms_max: watched.service_ms_max,
    })
}

/// `--health`'s `[health]` lines: `off`, or `KEY=VALUE` pairs (the cluster file checks them).
fn health_lines(spec: Option<&str>) -> Result<Vec<String>> {
    match spec.map(str::trim) {
        None | Some("") => Ok(Vec::new()),
        Some("off") => Ok(vec!["enabled = false".into()]),
        Some(pairs) => pairs
            .split(',')
            .map(|kv| match kv.split_once('=') {
                Some((k, v))
                    if !k.trim().is_empty()
                        && k.trim()
                            .bytes()
                            .all(|b| b.is_ascii_lowercase() || b == b'_')
                        && !v.trim().is_empty()
                        && v.trim()
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'.') =>
                {
                    Ok(format!("{} = {}", k.trim(), v.trim()))
                }
                _ => {
                    bail!("--health {pairs:?}: expected off, or KEY=VALUE pairs such as slow_ms=20")
                }
            })
            .collect(),
    }
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
    let failures = plan.failures();
    let max_rel = measure::max_relative_miss_increase(&windows, &failures, plan.window, false);
    let max_rel_sim = measure::max_relative_miss_increase(&windows, &failures, plan.window, true);
    let (ttfb_ms, download_ms) = measure::latency(&live.records, false);
    let (ttfb_ms_piece_hits, download_ms_piece_hits) = measure::latency(&live.records, true);
    let bytes_written: Vec<Option<u64>> = live
        .stats
        .iter()
        .map(|s| s.map(|s| s.bytes_written))
        .collect();
    // Over the nodes in the map for the whole run, as the simulator counts it: neither
    // killed nor ever declared out.
    let whole_run = bytes_written
        .iter()
        .zip(&live.killed)
        .enumerate()
        .filter(|(id, (_, &k))| !k && !live.outs.iter().any(|o| o.node == *id))
        .filter_map(|(_, (b, _))| b.map(|b| b as f64));
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
        dying_pieces_dropped: live
            .stats
            .iter()
            .flatten()
            .map(|s| s.dying_pieces_dropped)
            .sum(),
        handoffs: live.stats.iter().flatten().map(|s| s.handoffs).sum(),
        resyncs: live.stats.iter().flatten().map(|s| s.resyncs).sum(),
        reinserts: live.stats.iter().flatten().map(|s| s.reinserts).sum(),
        ages_asked: live.stats.iter().flatten().map(|s| s.ages_asked).sum(),
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
        declared: live.outs.clone(),
        balancer_slow_skips: live.slow_skips,
        service_ms_max: live.service_ms_max.clone(),
    }
}

pub fn run_demo(a: DemoArgs) -> Result<()> {
    let mut plan = plan(&a)?;
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
            slice_size: plan.slice_size,
            evict_together: a.evict_together,
            direct_reads: a.direct_reads,
            resync: a.resync.0,
            reinsert: a.reinsert.0,
            seed: a.seed,
            key: key.clone(),
            etcd: etcd
                .as_ref()
                .map(|e| e.lock().unwrap().endpoints())
                .unwrap_or_default(),
            repair_rate: plan.repair_rate,
            parity_delay: a.parity_delay,
            peer_tls: match a.peer_tls {
                true => Some(crate::certs::write_peer_tls(dir.path(), &layout.ips())?),
                false => None,
            },
            health: health_lines(a.health.as_deref())?,
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
    plan.adopt_declared(&live.outs);
    let sim = simulate(&a, &plan, Failures::None)?;
    let sim_killed = if plan.failures().is_empty() {
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
        report::window_table(
            &report.windows,
            &plan.failures(),
            &plan.restarts,
            plan.window
        )
    )?;
    out!("{}", declared::table(&report.declared))?;
    out!("{}", restart::table(&report.restarts))?;
    out!("{}", report::summary(&report))?;
    if let Some(why) = report.testbed.as_ref().and_then(|b| b.invalid_because()) {
        outln!("{why}")?;
        eprintln!("{why}");
    }
    out!(
        "{}",
        measure::compare_table(&report.compare, &compare_heading(&a, &plan))
    )?;
    if let Some(path) = &a.plot {
        plot(path, &report, &live.records)?;
    }
    if let Some(path) = &a.records {
        std::fs::write(path, measure::records_csv(&live.records))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if a.json {
        outln!("{}", serde_json::to_string(&report)?)?;
    }
    Ok(())
}

/// The line above the comparison table: what the simulator's runs share with the live one.
fn compare_heading(a: &DemoArgs, plan: &Plan) -> String {
    let failures = if plan.failures().is_empty() {
        "without failures".to_string()
    } else {
        let mut what: Vec<String> = plan
            .kills
            .iter()
            .map(|k| format!("node {} killed at {}", k.node, k.fraction))
            .collect();
        what.extend(plan.outages.iter().map(|o| {
            let back = o
                .end
                .map_or(String::new(), |e| format!(", back at request {e}"));
            format!("node {} declared out at request {}{back}", o.node, o.start)
        }));
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
