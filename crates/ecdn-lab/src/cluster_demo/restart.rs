//! A killed node's return (`--restart NODE@FRACTION`, `--restart-empty NODE@FRACTION`): C2DN's
//! server return (App. 10.3, "Server addition": the server gets its data buckets back by
//! consistent hashing and its former parity buckets as the write budget allows). The simulator
//! keeps a returning server's cache, so the live node comes back with what it held: the same
//! id, ports and disk file as before its kill. `--restart-empty` wipes the disk file first,
//! which is what a replaced disk looks like; its simulator counterpart empties the server's
//! cache on its return (`Unavailability::returns_empty`).
//!
//! The return falls between the same two requests as in the simulator, the way a scheduled
//! rebalance does ([`super::driver::Next::Return`]): the driver stops handing out requests
//! before the return's request, waits for those in flight, starts the node, and waits until
//! the coordinator's map has it available and every live node (and the returning one) took
//! that map; then the node joins the rotation. Before starting it, the driver also waits for
//! the coordinator to have marked the killed node unavailable (after `missed_heartbeats`
//! missed heartbeats), so that the restart is a return in the map and not a node that never
//! left it.
//!
//! The report gets one [`RestartRow`] per restart: the live miss ratio over the first whole
//! window after the return and over every window from there to the end, next to the
//! simulator's with the same kills and returns, the simulator's whose returns come back empty,
//! and the simulator's without failures.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use ecdn_cluster::coordinator::client::CoordinatorClient;
use ecdn_cluster::coordinator::Status;
use serde::Serialize;

use super::driver::Returner;
use super::measure::{Record, SimWindow, Totals};
use super::procs::{self, Layout, Procs};
use super::schedule::Restart;

/// How a node is started (the same for its restart as for its first start).
#[derive(Clone, Debug)]
pub struct NodeStart {
    pub file: PathBuf,
    pub origin: SocketAddr,
    /// (HOC size, disk size).
    pub sizes: (u64, u64),
}

/// How a return went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct ReturnTiming {
    /// Seconds the driver waited, before the restart, for the coordinator to mark the killed
    /// node unavailable (0 if it had already).
    pub waited_s: f64,
    /// Seconds from starting the node to its being available in the coordinator's map, with
    /// every live node on that map.
    pub back_s: f64,
}

/// What brings killed nodes back during a run.
pub struct Returns {
    pub procs: Arc<Mutex<Procs>>,
    pub layout: Layout,
    pub cfg: ecdn_cluster::ClusterConfig,
    pub start: NodeStart,
    /// Limit on each wait (the coordinator noticing the kill; the node coming back).
    pub timeout: Duration,
    pub progress: indicatif::ProgressBar,
    /// Per node: how its return went (`None`: no return, or it failed).
    pub timings: Mutex<Vec<Option<ReturnTiming>>>,
}

impl Returns {
    /// The driver's [`Returner`] over these.
    pub fn returner(self: &Arc<Self>) -> Returner {
        let me = self.clone();
        Arc::new(move |r: Restart, live: Vec<usize>| {
            let me = me.clone();
            Box::pin(async move {
                let timing = me.bring_back(r, &live).await?;
                me.timings.lock().unwrap()[r.node] = Some(timing);
                me.progress.suspend(|| {
                    eprintln!(
                        "node {} restarted{} before request {}: back in the map after {:.2} s",
                        r.node,
                        if r.empty { " with its disk wiped" } else { "" },
                        r.at,
                        timing.back_s
                    )
                });
                Ok(())
            })
        })
    }

    async fn status(&self) -> Result<Status> {
        let client = CoordinatorClient::for_cluster(&self.cfg)
            .await
            .map_err(anyhow::Error::msg)?;
        procs::coordinator_status(&client).await
    }

    /// Restarts `r.node` once the coordinator has it unavailable, and waits until it is back.
    async fn bring_back(&self, r: Restart, live: &[usize]) -> Result<ReturnTiming> {
        let node = r.node;
        let t0 = Instant::now();
        loop {
            let why = match self.status().await {
                Ok(s) => match s.nodes.get(node) {
                    Some(n) if !n.available => break,
                    Some(_) => "the coordinator still has it available".to_string(),
                    None => bail!("the coordinator does not know node {node}"),
                },
                Err(e) => format!("the coordinator's status: {e:#}"),
            };
            if t0.elapsed() > self.timeout {
                bail!(
                    "restarting node {node} before request {}: it was killed, but after {:?} {why}",
                    r.at,
                    self.timeout
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let waited_s = t0.elapsed().as_secs_f64();
        {
            let mut p = self.procs.lock().unwrap();
            if r.empty {
                p.wipe_disk(node)?;
            }
            p.start_node(
                node,
                &self.start.file,
                self.start.origin,
                self.start.sizes,
                &[],
            )?;
        }
        let t1 = Instant::now();
        let mut nodes = live.to_vec();
        nodes.push(node);
        loop {
            self.procs.lock().unwrap().check_running()?;
            let why = match self.back(node, &nodes).await {
                Ok(None) => break,
                Ok(Some(why)) => why,
                Err(e) => format!("{e:#}"),
            };
            if t1.elapsed() > self.timeout {
                let tail = {
                    let p = self.procs.lock().unwrap();
                    p.nodes[node]
                        .as_ref()
                        .map(|p| p.tail(15))
                        .unwrap_or_default()
                };
                bail!(
                    "node {node}, restarted before request {}, is not back within {:?}: {why}\n\
                     --- last output of node {node}:\n{tail}",
                    r.at,
                    self.timeout
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(ReturnTiming {
            waited_s,
            back_s: t1.elapsed().as_secs_f64(),
        })
    }

    /// `None` once `node` is available in the coordinator's map and every node of `nodes`
    /// took that map; else what is missing.
    async fn back(&self, node: usize, nodes: &[usize]) -> Result<Option<String>> {
        let status = self.status().await?;
        if !status.nodes.get(node).is_some_and(|n| n.available) {
            return Ok(Some(format!("the coordinator has node {node} unavailable")));
        }
        for &n in nodes {
            let seen = procs::node_stats(self.layout.admins[n]).await?.epoch;
            if seen < status.epoch {
                return Ok(Some(format!(
                    "node {n} on map epoch {seen}, current {}",
                    status.epoch
                )));
            }
        }
        Ok(None)
    }
}

/// A miss ratio over a span of windows, live and simulated.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReturnSpan {
    /// The span's first and last window.
    pub first_window: usize,
    pub last_window: usize,
    /// Index of its first request.
    pub start: u64,
    pub requests: u64,
    pub miss_ratio: f64,
    /// The simulator with the run's kills and returns (a return keeps its cache, or comes
    /// back empty with `--restart-empty`).
    pub sim_miss_ratio: Option<f64>,
    /// The simulator with the same kills and every return coming back empty.
    pub sim_empty_miss_ratio: Option<f64>,
    /// The simulator without failures.
    pub sim_no_failure_miss_ratio: Option<f64>,
}

/// A restart as the report shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RestartRow {
    pub node: usize,
    pub fraction: f64,
    /// Index of the first request issued after the node was back.
    pub at_request: u64,
    /// The node came back with its disk file wiped (`--restart-empty`).
    pub empty: bool,
    #[serde(flatten)]
    pub timing: Option<ReturnTiming>,
    /// Requests the node answered successfully from its return on.
    pub requests_after: u64,
    /// The first window that starts at or after the return (null if none does).
    pub first_window_after: Option<ReturnSpan>,
    /// Every window from that one to the end.
    pub after: Option<ReturnSpan>,
}

/// The simulator's windows a [`RestartRow`] compares with.
pub struct Sims<'a> {
    /// With the run's kills and returns.
    pub as_run: &'a [SimWindow],
    /// With the same kills, every return empty.
    pub empty: &'a [SimWindow],
    /// Without failures.
    pub no_failure: &'a [SimWindow],
}

/// Misses over requests of the simulator's windows `from..to` (`None` if it has none there).
fn sim_ratio(windows: &[SimWindow], from: usize, to: usize) -> Option<f64> {
    let (misses, requests) = windows
        .iter()
        .filter(|w| (from..to).contains(&w.index))
        .fold((0.0, 0u64), |(m, n), w| {
            (m + w.miss_ratio * w.requests as f64, n + w.requests)
        });
    (requests > 0).then(|| misses / requests as f64)
}

/// Windows `from..to` (of `window` requests) of the live run and of the simulators.
fn span(records: &[Record], window: u64, from: usize, to: usize, sims: &Sims) -> ReturnSpan {
    let w = window.max(1) as usize;
    let (start, end) = (from * w, (to * w).min(records.len()));
    ReturnSpan {
        first_window: from,
        last_window: to - 1,
        start: start as u64,
        requests: (end - start) as u64,
        miss_ratio: Totals::of(&records[start..end]).miss_ratio(),
        sim_miss_ratio: sim_ratio(sims.as_run, from, to),
        sim_empty_miss_ratio: sim_ratio(sims.empty, from, to),
        sim_no_failure_miss_ratio: sim_ratio(sims.no_failure, from, to),
    }
}

/// One row per restart: when it came back, what it served after, and the miss ratio after
/// its return, live and simulated.
pub fn rows(
    restarts: &[Restart],
    timings: &[Option<ReturnTiming>],
    records: &[Record],
    window: u64,
    sims: &Sims,
) -> Vec<RestartRow> {
    let w = window.max(1);
    let windows = records.len().div_ceil(w as usize);
    restarts
        .iter()
        .map(|r| {
            let first = r.at.div_ceil(w) as usize;
            let after = |to: usize| (first < windows).then(|| span(records, w, first, to, sims));
            RestartRow {
                node: r.node,
                fraction: r.fraction,
                at_request: r.at,
                empty: r.empty,
                timing: timings.get(r.node).copied().flatten(),
                requests_after: records
                    .iter()
                    .skip(r.at as usize)
                    .filter(|x| x.ok && x.node == r.node)
                    .count() as u64,
                first_window_after: after(first + 1),
                after: after(windows),
            }
        })
        .collect()
}

fn opt(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.4}"))
}

/// The restarts' rows as text (empty without restarts).
pub fn table(rows: &[RestartRow]) -> String {
    let mut s = String::new();
    for r in rows {
        let _ = writeln!(
            s,
            "node {} restarted before request {} ({}): {}, {} requests answered since",
            r.node,
            r.at_request,
            if r.empty { "disk wiped" } else { "disk kept" },
            match r.timing {
                Some(t) => format!(
                    "back in the map {:.2} s after its start ({:.2} s waited for its loss to \
                     be seen)",
                    t.back_s, t.waited_s
                ),
                None => "not back".into(),
            },
            r.requests_after
        );
        let _ = writeln!(
            s,
            "  {:<18} {:>7} {:>8} {:>8} {:>10} {:>10} {:>10}",
            "after the return", "windows", "requests", "miss", "sim", "sim_empty", "sim_nofail"
        );
        for (name, span) in [
            ("first window", &r.first_window_after),
            ("to the end", &r.after),
        ] {
            match span {
                Some(p) => {
                    let _ = writeln!(
                        s,
                        "  {:<18} {:>7} {:>8} {:>8.4} {:>10} {:>10} {:>10}",
                        name,
                        format!("{}-{}", p.first_window, p.last_window),
                        p.requests,
                        p.miss_ratio,
                        opt(p.sim_miss_ratio),
                        opt(p.sim_empty_miss_ratio),
                        opt(p.sim_no_failure_miss_ratio)
                    );
                }
                None => {
                    let _ = writeln!(s, "  {name:<18} no whole window after the return");
                }
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::driver::{Dispenser, Next};
    use super::super::schedule::{kills, restarts, KillSpec, RestartSpec};
    use super::*;

    /// Kill node 1 before request 2 and bring it back before request 5 of 8, over 3 nodes.
    fn plan() -> (Vec<super::super::schedule::Kill>, Vec<Restart>) {
        let k = kills(
            &[KillSpec {
                node: 1,
                fraction: 0.25,
            }],
            3,
            8,
        )
        .unwrap();
        let r = restarts(
            &[RestartSpec {
                node: 1,
                fraction: 0.625,
                empty: false,
            }],
            &k,
            8,
        )
        .unwrap();
        (k, r)
    }

    #[test]
    fn dispenser_stops_for_a_return_and_puts_the_node_back_in_the_rotation() {
        let (k, r) = plan();
        let mut d = Dispenser::new(8, 3, k, |_| {}).with_returns(r);
        let mut steps = Vec::new();
        loop {
            match d.next_request() {
                Next::Request(a) => steps.push(format!("{}:{}", a.index, a.node)),
                Next::Return(r) => {
                    // Handed out with requests in flight; nothing else until the node is back.
                    assert_eq!((r.node, r.at, d.in_flight()), (1, 5, 5));
                    assert_eq!(d.next_request(), Next::Wait);
                    for _ in 0..5 {
                        d.finished();
                    }
                    assert_eq!(d.live(), &[0, 2]);
                    d.returned(r.node);
                    steps.push("back".into());
                }
                Next::Rebalance | Next::Repair | Next::Wait => {
                    unreachable!("nothing else is under way")
                }
                Next::Done => break,
            }
        }
        // Round-robin by request index over the live nodes: [0, 1, 2], then [0, 2], then
        // [0, 1, 2] again.
        assert_eq!(steps.join(" "), "0:0 1:1 2:0 3:2 4:0 back 5:2 6:0 7:1");
        assert_eq!(d.live(), &[0, 1, 2]);
    }

    #[test]
    fn a_failed_return_ends_the_handing_out() {
        let (k, r) = plan();
        let mut d = Dispenser::new(8, 3, k, |_| {}).with_returns(r);
        let mut handed = 0;
        loop {
            match d.next_request() {
                Next::Request(_) => {
                    handed += 1;
                    d.finished();
                }
                Next::Return(_) => d.abort(),
                _ => break,
            }
        }
        assert_eq!((handed, d.issued()), (5, 5));
        assert_eq!(d.next_request(), Next::Done);
        assert_eq!(d.live(), &[0, 2]);
    }

    fn rec(node: usize, miss: bool) -> Record {
        Record {
            size: 10,
            node,
            ok: true,
            miss,
            hit: !miss,
            bytes: 10,
            ..Record::default()
        }
    }

    fn sim(ratios: &[f64]) -> Vec<SimWindow> {
        ratios
            .iter()
            .enumerate()
            .map(|(index, &miss_ratio)| SimWindow {
                index,
                start: index as u64 * 4,
                requests: 4,
                miss_ratio,
                byte_miss_ratio: miss_ratio,
            })
            .collect()
    }

    #[test]
    fn rows_measure_from_the_first_whole_window_after_the_return() {
        // 14 requests in windows of 4: 0-3, 4-7, 8-11, 12-13. Node 1 returns before request
        // 6: the first whole window after it is window 2.
        let mut records: Vec<Record> = (0..14).map(|i| rec(i % 2, (8..11).contains(&i))).collect();
        records[9].ok = false;
        let restart = Restart {
            node: 1,
            fraction: 0.43,
            at: 6,
            empty: true,
        };
        let (run, empty, none) = (
            sim(&[0.5, 0.5, 0.25, 0.5]),
            sim(&[0.5, 0.5, 0.75, 0.5]),
            sim(&[0.5, 0.5, 0.0, 0.0]),
        );
        let sims = Sims {
            as_run: &run,
            empty: &empty,
            no_failure: &none,
        };
        let timing = ReturnTiming {
            waited_s: 0.5,
            back_s: 1.25,
        };
        let rows = rows(&[restart], &[None, Some(timing)], &records, 4, &sims);
        let r = &rows[0];
        assert_eq!((r.node, r.at_request, r.empty), (1, 6, true));
        assert_eq!(r.timing, Some(timing));
        // Odd requests 7, 11, 13 (9 failed).
        assert_eq!(r.requests_after, 3);
        let first = r.first_window_after.as_ref().unwrap();
        assert_eq!((first.first_window, first.last_window), (2, 2));
        assert_eq!((first.start, first.requests), (8, 4));
        // Misses at 8 and 10 of the 3 successful requests 8, 10, 11.
        assert_eq!(first.miss_ratio, 2.0 / 3.0);
        assert_eq!(first.sim_miss_ratio, Some(0.25));
        assert_eq!(first.sim_empty_miss_ratio, Some(0.75));
        assert_eq!(first.sim_no_failure_miss_ratio, Some(0.0));
        let after = r.after.as_ref().unwrap();
        assert_eq!((after.first_window, after.last_window), (2, 3));
        assert_eq!((after.start, after.requests), (8, 6));
        assert_eq!(after.miss_ratio, 2.0 / 5.0);
        // Windows of 4 requests each in the simulator: (0.25 + 0.5) / 2.
        assert_eq!(after.sim_miss_ratio, Some(0.375));
        let text = table(&rows);
        assert!(
            text.starts_with(
                "node 1 restarted before request 6 (disk wiped): back in the map 1.25 s"
            ),
            "{text}"
        );
        assert!(
            text.contains("first window") && text.contains("2-3"),
            "{text}"
        );
        // A return in the last window leaves no whole window after it.
        let late = Restart { at: 13, ..restart };
        let rows = super::rows(&[late], &[], &records, 4, &sims);
        assert_eq!((rows[0].after.as_ref(), rows[0].timing), (None, None));
        assert!(table(&rows).contains("no whole window after the return"));
    }
}
