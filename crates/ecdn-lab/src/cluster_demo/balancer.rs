//! The load driver as C2DN's load balancer sees the nodes: every [`PERIOD`] it probes each
//! node's client listener (`GET /_ecdn/health`, the nodes run with `--client-health`) from the
//! client's host and tells the coordinator what it saw ([`BalancerReport`]), so a node the
//! clients cannot reach leaves the map (`ecdn_cluster::health`).
//!
//! It also routes around a node whose probes answer much slower than the others' (the least
//! of its last two round trips beyond the bound a node's reads hedge by,
//! `PeerObserver::slower`'s: longer than the median node's by 8 ms and by half of it; two late
//! probes still on their way count as their ages, `RecentRtt::least`): such a node gets no
//! request while another node in the map is not slow
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

/// How often the balancer probes each node (two probes may be on their way to a node at
/// once, so a node turned slow is seen about two periods and the bar after it turned).
pub const PERIOD: Duration = Duration::from_millis(50);
/// How often it reports to the coordinator.
const REPORT_EVERY: u32 = 2;
/// A probe unanswered this long is a failure (two in a row say unreachable: the judge). Each
/// probe opens a connection, as a load balancer's health check does, so the limit covers a
/// lost SYN's retransmission (Linux's first, 1 s later): with 600 ms, on issue 60's L2 link
/// (0.2% loss), a node with no fault failed two probes in a row once in 36 runs and left the
/// map as unreachable from clients.
const PROBE_TIMEOUT: Duration = Duration::from_millis(1_200);

/// The balancer's view of the nodes' client listeners: failures in a row and the recent
/// probes, answered and on their way.
#[derive(Debug, Default)]
struct Views {
    failures: Vec<u32>,
    rtt: Vec<RecentRtt>,
}

impl Views {
    fn new(nodes: usize) -> Views {
        Views {
            failures: vec![0; nodes],
            rtt: vec![RecentRtt::default(); nodes],
        }
    }

    /// Notes node `id`'s probe that left at `started`: answered after `rtt`, or not at all.
    fn probed(&mut self, id: usize, started: Instant, rtt: Option<Duration>) {
        self.rtt[id].end(started, rtt);
        match rtt {
            Some(_) => self.failures[id] = 0,
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
            .map(|i| {
                let others = (0..self.rtt.len())
                    .filter(|&j| answering(j))
                    .map(|j| &self.rtt[j]);
                answering(i) && much_slower(&self.rtt[i], median, others, now)
            })
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
    // Up to two probes per node on their way (`RecentRtt::start`), each on its own: a slow
    // node's do not hold the others' back.
    let mut flying = tokio::task::JoinSet::new();
    let mut ticks = 0u32;
    while !done.load(Ordering::Relaxed) {
        tick.tick().await;
        ticks = ticks.wrapping_add(1);
        while let Some(done) = flying.try_join_next() {
            if let Ok((id, started, rtt)) = done {
                views.probed(id, started, rtt);
            }
        }
        for (id, &addr) in nodes.iter().enumerate() {
            let started = Instant::now();
            if !views.rtt[id].start(started) {
                continue;
            }
            flying.spawn(async move {
                let answered =
                    procs::http_get_host(addr, &addr.to_string(), "/_ecdn/health", PROBE_TIMEOUT)
                        .await
                        .is_ok();
                (id, started, answered.then(|| started.elapsed()))
            });
        }
        for (id, now_slow) in views.slow(Instant::now()).into_iter().enumerate() {
            if now_slow != was_slow[id] {
                was_slow[id] = now_slow;
                slow(id, now_slow);
            }
        }
        if !ticks.is_multiple_of(REPORT_EVERY) {
            continue;
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
        let t = Instant::now();
        let mut v = Views::new(4);
        for id in 0..4 {
            v.probed(id, t, ms(1));
        }
        assert_eq!(v.slow(t), vec![false; 4]);
        // Slow once the whole window is: 8 ms and half the median (1 ms) above it.
        for _ in 0..RecentRtt::LEN {
            assert_eq!(v.slow(t), vec![false; 4]);
            v.probed(2, t, ms(50));
        }
        assert_eq!(v.slow(t), vec![false, false, true, false]);
        assert_eq!(v.report()[2].service_us, Some(50_000));
        // Slow but below the floor is not slow (a loaded loopback).
        let mut w = Views::new(3);
        for (id, m) in [(0, 1), (1, 1), (2, 6)] {
            w.probed(id, t, ms(m));
        }
        assert_eq!(w.slow(t), vec![false; 3]);
        // Two late probes on their way are enough.
        assert!(w.rtt[0].start(t) && w.rtt[0].start(t + Duration::from_millis(50)));
        assert_eq!(w.slow(t + Duration::from_millis(55)), vec![false; 3]);
        assert_eq!(
            w.slow(t + Duration::from_millis(70)),
            vec![true, false, false]
        );
        // A failing node is unreachable, not slow; it leaves the median.
        v.probed(1, t, None);
        assert_eq!(v.slow(t), vec![false, false, true, false]);
        assert!(!v.report()[1].reachable);
        // One fast answer ends it.
        v.probed(2, t, ms(1));
        assert_eq!(v.slow(t), vec![false; 4]);
    }
}
