//! The demo's control plane: the embedded coordinator (one process), or with `--control etcd`
//! a local etcd cluster ([`LocalEtcd`], `--etcd-members`) and several coordinators
//! (`--coordinators`) that elect a leader in it; control-plane failures on schedule (the
//! leading coordinator killed, an etcd member killed, all of etcd stopped and restarted), each
//! at a fraction of the requests like the node kills; and what the control plane did: the
//! leader changes and the map epochs it published, counted by watching etcd.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use ecdn_cluster::etcd::{connect, get_prefix, leader_name, Keys};
use ecdn_cluster::etcd_local::LocalEtcd;
use ecdn_cluster::etcd_map::{seal_map, MapFollower};
use ecdn_cluster::{ClusterConfig, ClusterKey};
use etcd_client::{EventType, WatchOptions};
use serde::Serialize;

use super::driver::SharedDispenser;
use super::procs::{Layout, Procs};

#[derive(Args, Clone, Debug)]
pub struct ControlArgs {
    /// The control plane: `embedded` (one coordinator process) or `etcd` (a local etcd
    /// cluster and several coordinators electing a leader in it).
    #[arg(long, default_value = "embedded")]
    pub control: String,
    /// etcd: members of the local etcd cluster (separate data directories, loopback ports).
    #[arg(long, default_value_t = 1)]
    pub etcd_members: usize,
    /// etcd: coordinator processes.
    #[arg(long, default_value_t = 2)]
    pub coordinators: usize,
    /// etcd: SIGKILL the leading coordinator when FRACTION of the requests were issued;
    /// repeatable.
    #[arg(long, value_name = "FRACTION")]
    pub kill_coordinator: Vec<f64>,
    /// etcd: SIGKILL etcd member M at FRACTION of the requests; repeatable.
    #[arg(long, value_name = "M@FRACTION")]
    pub kill_etcd_member: Vec<String>,
    /// etcd: stop every etcd member at FRACTION of the requests and restart them SECONDS
    /// later.
    #[arg(long, value_name = "FRACTION+SECONDS")]
    pub stop_etcd: Option<String>,
}

/// One scheduled control-plane failure.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    KillLeader,
    KillEtcdMember(usize),
    StopEtcd(Duration),
}

/// The control plane of a run, checked before anything starts.
#[derive(Clone, Debug)]
pub struct ControlPlan {
    /// 0 for the embedded coordinator.
    pub etcd_members: usize,
    pub coordinators: usize,
    /// (request index, event), by index.
    pub events: Vec<(u64, Event)>,
}

fn fraction(flag: &str, f: f64) -> Result<f64> {
    if !(0.0..1.0).contains(&f) {
        bail!("{flag}: the fraction {f} must be in [0, 1)");
    }
    Ok(f)
}

impl ControlPlan {
    pub fn parse(a: &ControlArgs, total: u64) -> Result<ControlPlan> {
        let at = |f: f64| (f * total as f64) as u64;
        let etcd = match a.control.as_str() {
            "embedded" => false,
            "etcd" => true,
            other => bail!("--control {other:?}: embedded or etcd"),
        };
        let mut events = Vec::new();
        for &f in &a.kill_coordinator {
            events.push((at(fraction("--kill-coordinator", f)?), Event::KillLeader));
        }
        for s in &a.kill_etcd_member {
            let (m, f) = s
                .split_once('@')
                .with_context(|| format!("--kill-etcd-member {s:?}: expected M@FRACTION"))?;
            let m: usize = m
                .parse()
                .with_context(|| format!("--kill-etcd-member {s:?}"))?;
            if m >= a.etcd_members {
                bail!(
                    "--kill-etcd-member {s:?}: members are 0..{}",
                    a.etcd_members
                );
            }
            let f: f64 = f
                .parse()
                .with_context(|| format!("--kill-etcd-member {s:?}"))?;
            events.push((
                at(fraction("--kill-etcd-member", f)?),
                Event::KillEtcdMember(m),
            ));
        }
        if let Some(s) = &a.stop_etcd {
            let (f, secs) = s
                .split_once('+')
                .with_context(|| format!("--stop-etcd {s:?}: expected FRACTION+SECONDS"))?;
            let f: f64 = f.parse().with_context(|| format!("--stop-etcd {s:?}"))?;
            let secs: f64 = secs.parse().with_context(|| format!("--stop-etcd {s:?}"))?;
            if !(secs.is_finite() && secs > 0.0 && secs < 3600.0) {
                bail!("--stop-etcd {s:?}: SECONDS must be in (0, 3600)");
            }
            let d = Duration::from_secs_f64(secs);
            events.push((at(fraction("--stop-etcd", f)?), Event::StopEtcd(d)));
        }
        if !etcd && !events.is_empty() {
            bail!("--kill-coordinator, --kill-etcd-member and --stop-etcd need --control etcd");
        }
        if etcd && (a.etcd_members == 0 || a.etcd_members > 9) {
            bail!("--etcd-members must be between 1 and 9");
        }
        if etcd && (a.coordinators == 0 || a.coordinators > 9) {
            bail!("--coordinators must be between 1 and 9");
        }
        let kills = events.iter().filter(|e| e.1 == Event::KillLeader).count();
        if kills >= a.coordinators {
            bail!(
                "--kill-coordinator {kills} times leaves no coordinator of {}",
                a.coordinators
            );
        }
        events.sort_by_key(|e| e.0);
        Ok(ControlPlan {
            etcd_members: if etcd { a.etcd_members } else { 0 },
            coordinators: if etcd { a.coordinators } else { 1 },
            events,
        })
    }

    pub fn etcd(&self) -> bool {
        self.etcd_members > 0
    }
}

/// One event as it happened.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EventRow {
    pub at_request: u64,
    pub what: String,
    /// Killed leader: seconds until another coordinator led. Stopped etcd: seconds from the
    /// restart until a coordinator led again.
    pub recovered_s: Option<f64>,
}

/// What the control plane did during the run (in the `--json` object).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ControlReport {
    /// `embedded` or `etcd`.
    pub control: String,
    pub etcd_members: usize,
    pub coordinators: usize,
    /// Times another coordinator took the lead during the run.
    pub coordinator_failovers: u64,
    /// Maps published during the run (availability changes, rebalances, new leaders).
    pub epoch_changes: u64,
    pub control_events: Vec<EventRow>,
    /// etcd: what the maps written during the run cost (`None` for the embedded
    /// coordinator).
    pub map_traffic: Option<MapTraffic>,
}

/// The bytes the leader put in etcd for the maps of the run, as a watch of etcd saw them, and
/// what the same maps would have cost whole (see `ecdn_cluster::etcd_map`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MapTraffic {
    /// Whole maps put (`map`) and their bytes.
    pub whole_maps: u64,
    pub whole_map_bytes: u64,
    /// Diffs put (`map-diff`) and their bytes.
    pub diffs: u64,
    pub diff_bytes: u64,
    /// Per map written, on average: the bytes put for it (a diff or a whole map), ...
    pub map_bytes_per_change: f64,
    /// ... the bytes of the same map put whole (compressed and sealed), ...
    pub whole_bytes_per_change: f64,
    /// ... and of the same map as uncompressed JSON, as it was stored before diffs.
    pub json_bytes_per_change: f64,
    /// The leader's state, written with every map (compressed).
    pub state_bytes_per_change: f64,
    /// Every node and coordinator watches the map keys, so each map put is sent this many
    /// times more.
    pub map_watchers: usize,
}

/// Sums what the map puts cost, following the maps as a node does.
#[derive(Default)]
struct MapCount {
    follower: MapFollower,
    traffic: MapTraffic,
    /// Sums over the maps written: bytes put, whole, JSON, state.
    sums: [u64; 4],
    changes: u64,
}

impl MapCount {
    fn put(&mut self, keys: &Keys, key: &ClusterKey, k: &[u8], value: &[u8], rev: i64) {
        if k == keys.state().as_bytes() {
            self.sums[3] += value.len() as u64;
            return;
        }
        let whole = k == keys.map().as_bytes();
        let Ok(Some(map)) = self.follower.put(keys, key, k, value, rev) else {
            return;
        };
        let t = &mut self.traffic;
        if whole {
            t.whole_maps += 1;
            t.whole_map_bytes += value.len() as u64;
        } else {
            t.diffs += 1;
            t.diff_bytes += value.len() as u64;
        }
        self.changes += 1;
        self.sums[0] += value.len() as u64;
        self.sums[1] += seal_map(key, &map).len() as u64;
        self.sums[2] += serde_json::to_vec(&map).map_or(0, |j| j.len()) as u64;
    }

    fn report(mut self, map_watchers: usize) -> MapTraffic {
        let per = |x: u64| x as f64 / self.changes.max(1) as f64;
        let t = &mut self.traffic;
        t.map_bytes_per_change = per(self.sums[0]);
        t.whole_bytes_per_change = per(self.sums[1]);
        t.json_bytes_per_change = per(self.sums[2]);
        t.state_bytes_per_change = per(self.sums[3]);
        t.map_watchers = map_watchers;
        self.traffic
    }
}

/// Counts leader changes and map writes, and what the maps cost, by watching etcd until
/// `stop`.
async fn watch_etcd(
    cfg: ClusterConfig,
    stop: Arc<AtomicBool>,
    failovers: Arc<AtomicU64>,
    epochs: Arc<AtomicU64>,
) -> MapCount {
    let keys = Keys::new(&cfg);
    let key = cfg.cluster_key();
    let mut count = MapCount::default();
    // The leader at the start (the run starts with one): a later put of another is a failover.
    let mut leader: Option<Vec<u8>> = leader_name(&cfg)
        .await
        .ok()
        .flatten()
        .map(String::into_bytes);
    let mut from = 0i64;
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut client) = connect(&cfg.etcd).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        if from == 0 {
            // The map the run starts with, which the first diffs apply to.
            let Ok((kvs, rev)) = get_prefix(&mut client, &keys.map()).await else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            let _ = count.follower.snapshot(&keys, &key, &kvs);
            from = rev + 1;
        }
        let opts = WatchOptions::new().with_prefix().with_start_revision(from);
        let Ok(mut watch) = client.watch(cfg.etcd_prefix.as_bytes(), Some(opts)).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        while !stop.load(Ordering::Relaxed) {
            let msg = tokio::time::timeout(Duration::from_millis(200), watch.message()).await;
            let msg = match msg {
                Err(_) => continue,
                Ok(Ok(Some(m))) => m,
                Ok(_) => break,
            };
            for ev in msg.events() {
                let Some(kv) = ev.kv() else { continue };
                from = kv.mod_revision() + 1;
                let put = ev.event_type() == EventType::Put;
                let map_key =
                    kv.key() == keys.map().as_bytes() || kv.key() == keys.map_diff().as_bytes();
                if map_key && put {
                    epochs.fetch_add(1, Ordering::Relaxed);
                }
                if put {
                    count.put(&keys, &key, kv.key(), kv.value(), kv.mod_revision());
                }
                if kv.key() == keys.leader().as_bytes() && put {
                    if leader.as_deref().is_some_and(|l| l != kv.value()) {
                        failovers.fetch_add(1, Ordering::Relaxed);
                    }
                    leader = Some(kv.value().to_vec());
                }
            }
        }
    }
    count
}

/// Waits until a coordinator other than `former` leads; seconds waited.
async fn new_leader(cfg: &ClusterConfig, former: Option<&str>, limit: Duration) -> Option<f64> {
    let t = Instant::now();
    while t.elapsed() < limit {
        if let Ok(Some(l)) = leader_name(cfg).await {
            if Some(l.as_str()) != former {
                return Some(t.elapsed().as_secs_f64());
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

/// Carries out the plan's events as the requests pass their indexes, and counts what the
/// control plane did, until `done`.
pub async fn run_events(
    plan: ControlPlan,
    cfg: ClusterConfig,
    layout: Layout,
    procs: Arc<Mutex<Procs>>,
    etcd: Option<Arc<Mutex<LocalEtcd>>>,
    dispenser: SharedDispenser,
    done: Arc<AtomicBool>,
) -> Result<ControlReport> {
    let mut report = ControlReport {
        control: if plan.etcd() { "etcd" } else { "embedded" }.into(),
        etcd_members: plan.etcd_members,
        coordinators: plan.coordinators,
        ..ControlReport::default()
    };
    let (failovers, epochs) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    // The watcher stops after the replay and the events: a leader killed late in a fast replay
    // is replaced after the last request, and its failover still counts.
    let stop_watching = Arc::new(AtomicBool::new(false));
    let watcher = plan.etcd().then(|| {
        tokio::spawn(watch_etcd(
            cfg.clone(),
            stop_watching.clone(),
            failovers.clone(),
            epochs.clone(),
        ))
    });
    for (at, event) in plan.events.clone() {
        while dispenser.lock().unwrap().issued() < at {
            if done.load(Ordering::Relaxed) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        if done.load(Ordering::Relaxed) {
            break;
        }
        let etcd = etcd.clone().context("an etcd event without etcd")?;
        let row = match event {
            Event::KillLeader => {
                let leader = leader_name(&cfg).await.ok().flatten();
                let index = leader
                    .as_deref()
                    .and_then(|l| layout.coordinators.iter().position(|c| c.to_string() == l));
                let Some(i) = index else {
                    bail!("--kill-coordinator: no leading coordinator at request {at}");
                };
                procs.lock().unwrap().kill_coordinator(i);
                eprintln!("killed the leading coordinator {i} (SIGKILL) at request {at}");
                let took = new_leader(&cfg, leader.as_deref(), Duration::from_secs(30)).await;
                EventRow {
                    at_request: at,
                    what: format!("leading coordinator {i} killed"),
                    recovered_s: took,
                }
            }
            Event::KillEtcdMember(m) => {
                tokio::task::spawn_blocking(move || etcd.lock().unwrap().kill(m)).await?;
                eprintln!("killed etcd member {m} (SIGKILL) at request {at}");
                EventRow {
                    at_request: at,
                    what: format!("etcd member {m} killed"),
                    recovered_s: None,
                }
            }
            Event::StopEtcd(d) => {
                let e = etcd.clone();
                tokio::task::spawn_blocking(move || e.lock().unwrap().kill_all()).await?;
                eprintln!("stopped every etcd member at request {at} for {d:?}");
                tokio::time::sleep(d).await;
                tokio::task::spawn_blocking(move || etcd.lock().unwrap().restart_all())
                    .await?
                    .context("restarting etcd")?;
                let took = new_leader(&cfg, None, Duration::from_secs(30)).await;
                eprintln!("etcd restarted; a coordinator leads after {took:?} s");
                EventRow {
                    at_request: at,
                    what: format!("etcd stopped for {:.1} s", d.as_secs_f64()),
                    recovered_s: took,
                }
            }
        };
        report.control_events.push(row);
    }
    while !done.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if watcher.is_some() {
        // The events waited for their new leaders; the watch gets a second (five of its
        // 200 ms polls) to see the last puts.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    stop_watching.store(true, Ordering::Relaxed);
    if let Some(w) = watcher {
        if let Ok(count) = w.await {
            report.map_traffic = Some(count.report(layout.nodes.len() + plan.coordinators));
        }
    }
    report.coordinator_failovers = failovers.load(Ordering::Relaxed);
    report.epoch_changes = epochs.load(Ordering::Relaxed);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(control: &str) -> ControlArgs {
        ControlArgs {
            control: control.into(),
            etcd_members: 3,
            coordinators: 2,
            kill_coordinator: Vec::new(),
            kill_etcd_member: Vec::new(),
            stop_etcd: None,
        }
    }

    #[test]
    fn control_plans_parse_and_refuse_nonsense() {
        let mut a = args("etcd");
        a.kill_coordinator = vec![0.5];
        a.kill_etcd_member = vec!["2@0.25".into()];
        a.stop_etcd = Some("0.75+3".into());
        let p = ControlPlan::parse(&a, 1000).unwrap();
        assert_eq!(
            p.events,
            vec![
                (250, Event::KillEtcdMember(2)),
                (500, Event::KillLeader),
                (750, Event::StopEtcd(Duration::from_secs(3)))
            ]
        );
        assert_eq!((p.etcd_members, p.coordinators), (3, 2));
        let embedded = ControlPlan::parse(&args("embedded"), 1000).unwrap();
        assert!(!embedded.etcd() && embedded.events.is_empty());
        let refused = |f: &dyn Fn(&mut ControlArgs)| {
            let mut a = args("etcd");
            f(&mut a);
            ControlPlan::parse(&a, 1000).is_err()
        };
        assert!(refused(&|a| a.control = "zookeeper".into()));
        assert!(refused(&|a| a.kill_coordinator = vec![1.5]));
        assert!(
            refused(&|a| a.kill_coordinator = vec![0.1, 0.2]),
            "no coordinator left"
        );
        assert!(refused(&|a| a.kill_etcd_member = vec!["3@0.5".into()]));
        assert!(refused(&|a| a.kill_etcd_member = vec!["0.5".into()]));
        assert!(refused(&|a| a.stop_etcd = Some("0.5".into())));
        assert!(refused(&|a| a.stop_etcd = Some("0.5+0".into())));
        assert!(refused(&|a| a.etcd_members = 0));
        let mut e = args("embedded");
        e.kill_coordinator = vec![0.5];
        assert!(ControlPlan::parse(&e, 1000).is_err());
    }
}
