//! The load driver as C2DN's load balancer sees the nodes: every [`PERIOD`] it probes each
//! node's client listener (`GET /_ecdn/health`, the nodes run with `--client-health`) from the
//! client's host and tells the coordinator what it saw ([`BalancerReport`]), so a node the
//! clients cannot reach leaves the map (`ecdn_cluster::health`).
//!
//! It also routes around a node whose probes answer much slower than the others' (the least
//! of its last two round trips beyond the bound a node's reads hedge by,
//! `PeerObserver::slower`'s: longer than the median node's by 8 ms and by half of it): such a
//! node gets no request while another node in the map is not slow
//! ([`super::dispenser::Dispenser::slow`]). The load balancer of C2DN §3.2 does the same with
//! what it measures; the coordinator declares the node out later, on its peers' evidence, or
//! not at all if it recovers first.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ecdn_cluster::coordinator::client::CoordinatorClient;
use ecdn_cluster::health::observer::{median_of, much_slower, RecentRtt};
use ecdn_cluster::health::{BalancerReport, PeerView};
use ecdn_cluster::ClusterConfig;

use super::procs;

/// How often the balancer probes and reports.
pub const PERIOD: Duration = Duration::from_millis(100);
/// A probe unanswered this long is a failure (two in a row say unreachable: the judge).
const PROBE_TIMEOUT: Duration = Duration::from_millis(600);

/// The balancer's view of the nodes' client listeners: failures in a row and the recent
/// round trips of the probes answered.
#[derive(Debug, Default)]
struct Views {
    failures: Vec<u32>,
    rtt: Vec<RecentRtt>,
    /// Since when each node's probe on its way left.
    probing: Vec<Option<Instant>>,
}

impl Views {
    fn new(nodes: usize) -> Views {
        Views {
            failures: vec![0; nodes],
            rtt: vec![RecentRtt::default(); nodes],
            probing: vec![None; nodes],
        }
    }

    /// The least of node `i`'s recent round trips, its probe on its way counted at `now`
    /// ([`RecentRtt::min_pending`]).
    fn least(&self, i: usize, now: Instant) -> Option<f64> {
        let pending = self.probing[i].map(|t| now.saturating_duration_since(t));
        self.rtt[i].min_pending(pending)
    }

    /// Notes node `id`'s probe: answered after `rtt`, or not at all.
    fn probed(&mut self, id: usize, rtt: Option<Duration>) {
        self.probing[id] = None;
        match rtt {
            Some(rtt) => {
                self.failures[id] = 0;
                self.rtt[id].push(rtt.as_secs_f64() * 1e6);
            }
            None => self.failures[id] += 1,
        }
    }

    /// The nodes answering much slower than the median answering node: the least of their
    /// recent round trips above the bound a node's reads hedge by ([`much_slower`]).
    fn slow(&self, now: Instant) -> Vec<bool> {
        let answering = |id: usize| self.failures[id] == 0;
        let mut rtts: Vec<f64> = (0..self.rtt.len())
            .filter(|&i| answering(i))
            .filter_map(|i| self.rtt[i].min())
            .collect();
        let median = median_of(&mut rtts);
        (0..self.rtt.len())
            .map(|i| answering(i) && self.least(i, now).is_some_and(|r| much_slower(r, median)))
            .collect()
    }

    fn report(&self) -> Vec<PeerView> {
        (0..self.failures.len())
            .map(|id| PeerView {
                node: id,
                reachable: self.failures[id] == 0,
                failures: self.failures[id],
                service_us: self.rtt[id].min().map(|u| u.round() as u64),
            })
            .collect()
    }
}

/// [`run`] on a thread and a runtime of its own: the driver's workers keep their runtime
/// busy checking bytes, and a probe sharing it measured them (healthy nodes' probes took 15 to
/// 30 ms there at full load, against 1 to 2 ms alone). The thread ends after `done`.
pub fn spawn(
    cfg: ClusterConfig,
    nodes: Vec<SocketAddr>,
    done: Arc<AtomicBool>,
    slow: impl Fn(usize, bool) + Send + 'static,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt.block_on(run(cfg, nodes, done, slow)),
            Err(e) => eprintln!("warning: no load balancer this run: {e}"),
        }
    })
}

/// Probes `nodes` (client addresses, by id) and reports to the cluster's coordinator until
/// `done`; tells `slow` which nodes answer much slower than the others whenever that changes.
/// Any HTTP answer is reachable (a draining node's `503` too).
pub async fn run(
    cfg: ClusterConfig,
    nodes: Vec<SocketAddr>,
    done: Arc<AtomicBool>,
    slow: impl Fn(usize, bool),
) {
    let mut views = Views::new(nodes.len());
    let mut was_slow = vec![false; nodes.len()];
    let mut client: Option<CoordinatorClient> = None;
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // One probe per node at a time, each on its own: a slow node's does not hold the others'.
    let mut flying = tokio::task::JoinSet::new();
    while !done.load(Ordering::Relaxed) {
        tick.tick().await;
        while let Some(done) = flying.try_join_next() {
            if let Ok((id, rtt)) = done {
                views.probed(id, rtt);
            }
        }
        let now = Instant::now();
        for (id, &addr) in nodes.iter().enumerate() {
            if views.probing[id].is_some() {
                continue;
            }
            views.probing[id] = Some(now);
            flying.spawn(async move {
                let t = Instant::now();
                let answered =
                    procs::http_get_host(addr, &addr.to_string(), "/_ecdn/health", PROBE_TIMEOUT)
                        .await
                        .is_ok();
                (id, answered.then(|| t.elapsed()))
            });
        }
        for (id, now_slow) in views.slow(Instant::now()).into_iter().enumerate() {
            if now_slow != was_slow[id] {
                was_slow[id] = now_slow;
                slow(id, now_slow);
            }
        }
        if client.is_none() {
            client = CoordinatorClient::for_cluster(&cfg).await.ok();
        }
        let report = BalancerReport {
            balancer: "demo-driver".into(),
            nodes: views.report(),
        };
        if let Some(c) = &client {
            if c.balancer_report(&report).await.is_err() {
                // Perhaps another leader (etcd mode): find it again next time.
                client = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_much_slower_than_the_median_is_slow_until_it_recovers() {
        let ms = |m: u64| Some(Duration::from_millis(m));
        let mut v = Views::new(4);
        for id in 0..4 {
            v.probed(id, ms(1));
        }
        assert_eq!(v.slow(Instant::now()), vec![false; 4]);
        // Slow once the whole window is: 8 ms and half the median (1 ms) above it.
        for _ in 0..RecentRtt::LEN {
            assert_eq!(v.slow(Instant::now()), vec![false; 4]);
            v.probed(2, ms(50));
        }
        assert_eq!(v.slow(Instant::now()), vec![false, false, true, false]);
        assert_eq!(v.report()[2].service_us, Some(50_000));
        // Slow but below the floor is not slow (a loaded loopback).
        let mut w = Views::new(3);
        for (id, m) in [(0, 1), (1, 1), (2, 6)] {
            w.probed(id, ms(m));
        }
        assert_eq!(w.slow(Instant::now()), vec![false; 3]);
        // A failing node is unreachable, not slow; it leaves the median.
        v.probed(1, None);
        assert_eq!(v.slow(Instant::now()), vec![false, false, true, false]);
        assert!(!v.report()[1].reachable);
        // One fast answer ends it.
        v.probed(2, ms(1));
        assert_eq!(v.slow(Instant::now()), vec![false; 4]);
    }
}
