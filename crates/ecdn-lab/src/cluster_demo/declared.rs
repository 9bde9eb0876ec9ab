//! What the coordinator declared during a run, beside what the bed did: when each node left
//! the map and came back (and why), when each network fault began and healed, and the times
//! between (fault to declaration, heal to return). The simulator's column then loses each
//! node when the coordinator declared it, not when its fault began: live and simulated
//! compare as they do for kills.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ecdn_cluster::coordinator::client::CoordinatorClient;
use ecdn_cluster::ClusterConfig;
use serde::Serialize;

/// How often the watcher asks the coordinator.
const POLL: Duration = Duration::from_millis(100);

/// A fault's start or heal on the bed, as it happened.
#[derive(Clone, Copy, Debug)]
pub struct FaultMark {
    pub node: usize,
    /// A heal (else the fault began).
    pub heal: bool,
    pub at: Instant,
    pub at_request: u64,
}

/// The bed's marks, shared by the faulter and its heal timers.
pub type FaultLog = Arc<Mutex<Vec<FaultMark>>>;

/// A change of a node's availability in the coordinator's map, as the watcher saw it.
#[derive(Clone, Debug)]
pub struct Change {
    pub node: usize,
    pub available: bool,
    pub reason: Option<String>,
    pub at: Instant,
    pub at_request: u64,
}

/// What the watcher saw.
#[derive(Debug, Default)]
pub struct Watched {
    /// Every change of a node's availability.
    pub changes: Vec<Change>,
    /// Per node, the largest service time (ms, the median of its peers' probes) the
    /// coordinator showed while the node was in the map: what the slow bound is set against.
    pub service_ms_max: Vec<Option<f64>>,
}

/// Watches the coordinator's status every [`POLL`] until `done`; returns every change of a
/// node's availability, with the requests issued by then (`issued`), and tells `follow` of
/// each (the load balancer follows the map).
pub async fn watch(
    cfg: ClusterConfig,
    issued: Arc<AtomicU64>,
    done: Arc<AtomicBool>,
    follow: impl Fn(usize, bool),
) -> Watched {
    let mut changes = Vec::new();
    let mut service_ms_max: Vec<Option<f64>> = Vec::new();
    let mut known: Vec<bool> = Vec::new();
    let mut client = None;
    while !done.load(Ordering::Relaxed) {
        if client.is_none() {
            client = CoordinatorClient::for_cluster(&cfg).await.ok();
        }
        let status = match &client {
            Some(c) => c.status().await.ok(),
            None => None,
        };
        match status {
            None => client = None,
            Some(s) => {
                let (at, at_request) = (Instant::now(), issued.load(Ordering::Relaxed));
                if known.len() < s.nodes.len() {
                    // The first look (and nodes added): what is, not a change.
                    known.extend(s.nodes[known.len()..].iter().map(|n| n.available));
                }
                service_ms_max.resize(s.nodes.len(), None);
                for n in &s.nodes {
                    if let (true, Some(ms)) = (n.available, n.health.service_ms) {
                        let m = &mut service_ms_max[n.id];
                        *m = Some(m.map_or(ms, |x: f64| x.max(ms)));
                    }
                    if known[n.id] != n.available {
                        known[n.id] = n.available;
                        follow(n.id, n.available);
                        changes.push(Change {
                            node: n.id,
                            available: n.available,
                            reason: n.health.out_reason.clone(),
                            at,
                            at_request,
                        });
                    }
                }
            }
        }
        tokio::time::sleep(POLL).await;
    }
    Watched {
        changes,
        service_ms_max,
    }
}

/// One stay of a node out of the map.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OutRow {
    pub node: usize,
    /// Why the coordinator took it out (its status page's words).
    pub reason: Option<String>,
    pub out_at_request: u64,
    /// Seconds from the replay's start.
    pub out_s: f64,
    pub back_at_request: Option<u64>,
    pub back_s: Option<f64>,
    /// Seconds from the last fault on the node that began before it left, to its exit.
    pub fault_to_out_s: Option<f64>,
    /// Seconds from the last heal of the node before it came back, to its return.
    pub heal_to_back_s: Option<f64>,
}

/// The stays out of the map, in order, from the watcher's changes and the bed's marks.
pub fn rows(changes: &[Change], marks: &[FaultMark], start: Instant) -> Vec<OutRow> {
    let secs = |t: Instant| t.saturating_duration_since(start).as_secs_f64();
    let mut rows: Vec<OutRow> = Vec::new();
    for c in changes {
        if !c.available {
            let fault = marks
                .iter()
                .filter(|m| m.node == c.node && !m.heal && m.at <= c.at)
                .map(|m| m.at)
                .max();
            rows.push(OutRow {
                node: c.node,
                reason: c.reason.clone(),
                out_at_request: c.at_request,
                out_s: secs(c.at),
                back_at_request: None,
                back_s: None,
                fault_to_out_s: fault.map(|f| c.at.saturating_duration_since(f).as_secs_f64()),
                heal_to_back_s: None,
            });
        } else if let Some(r) = rows
            .iter_mut()
            .rev()
            .find(|r| r.node == c.node && r.back_s.is_none())
        {
            let out_at = start + Duration::from_secs_f64(r.out_s);
            let heal = marks
                .iter()
                .filter(|m| m.node == c.node && m.heal && m.at <= c.at && m.at >= out_at)
                .map(|m| m.at)
                .max();
            r.back_at_request = Some(c.at_request);
            r.back_s = Some(secs(c.at));
            r.heal_to_back_s = heal.map(|h| c.at.saturating_duration_since(h).as_secs_f64());
        }
    }
    rows
}

/// The table of [`rows`] for the report.
pub fn table(rows: &[OutRow]) -> String {
    use std::fmt::Write;
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "declared by the coordinator (out of the map, and back):\n\
         node  out at req (s)      back at req (s)     fault->out  heal->back  why\n",
    );
    let opt = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.2} s"));
    for r in rows {
        let back = match (r.back_at_request, r.back_s) {
            (Some(q), Some(s)) => format!("{q} ({s:.1} s)"),
            _ => "-".into(),
        };
        let _ = writeln!(
            out,
            "{:>4}  {:<19} {:<19} {:>10}  {:>10}  {}",
            r.node,
            format!("{} ({:.1} s)", r.out_at_request, r.out_s),
            back,
            opt(r.fault_to_out_s),
            opt(r.heal_to_back_s),
            r.reason.as_deref().unwrap_or("silent")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_pair_exits_with_returns_faults_and_heals() {
        let t = Instant::now();
        let at = |ms: u64| t + Duration::from_millis(ms);
        let marks = [
            FaultMark {
                node: 3,
                heal: false,
                at: at(1000),
                at_request: 100,
            },
            FaultMark {
                node: 3,
                heal: true,
                at: at(9000),
                at_request: 900,
            },
        ];
        let change = |node, available, ms, q| Change {
            node,
            available,
            reason: (!available).then(|| "cut off: 5 of 5 peers cannot reach it".to_string()),
            at: at(ms),
            at_request: q,
        };
        let changes = [
            change(3, false, 2500, 250),
            change(1, false, 4000, 400),
            change(3, true, 11_000, 1100),
        ];
        let r = rows(&changes, &marks, t);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].node, 3);
        assert_eq!(r[0].out_at_request, 250);
        assert_eq!(r[0].back_at_request, Some(1100));
        assert!((r[0].fault_to_out_s.unwrap() - 1.5).abs() < 1e-9);
        assert!((r[0].heal_to_back_s.unwrap() - 2.0).abs() < 1e-9);
        assert_eq!(
            (r[1].node, r[1].back_s, r[1].fault_to_out_s),
            (1, None, None)
        );
        let text = table(&r);
        assert!(text.contains("cut off: 5 of 5"), "{text}");
        assert!(table(&[]).is_empty());
    }
}
