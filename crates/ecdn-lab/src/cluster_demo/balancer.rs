//! The load driver as C2DN's load balancer sees the nodes: every [`PERIOD`] it probes each
//! node's client listener (`GET /_ecdn/health`, the nodes run with `--client-health`) from the
//! client's host and tells the coordinator what it saw ([`BalancerReport`]), so a node the
//! clients cannot reach leaves the map (`ecdn_cluster::health`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ecdn_cluster::coordinator::client::CoordinatorClient;
use ecdn_cluster::health::{BalancerReport, PeerView};
use ecdn_cluster::ClusterConfig;

use super::procs;

/// How often the balancer probes and reports.
pub const PERIOD: Duration = Duration::from_millis(250);
/// A probe unanswered this long is a failure (two in a row say unreachable: the judge).
const PROBE_TIMEOUT: Duration = Duration::from_millis(600);

/// Probes `nodes` (client addresses, by id) and reports to the cluster's coordinator until
/// `done`. Any HTTP answer is reachable (a draining node's `503` too).
pub async fn run(cfg: ClusterConfig, nodes: Vec<SocketAddr>, done: Arc<AtomicBool>) {
    let mut failures = vec![0u32; nodes.len()];
    let mut client: Option<CoordinatorClient> = None;
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !done.load(Ordering::Relaxed) {
        tick.tick().await;
        let probes: Vec<_> = nodes
            .iter()
            .map(|&addr| {
                tokio::spawn(async move {
                    procs::http_get_host(addr, &addr.to_string(), "/_ecdn/health", PROBE_TIMEOUT)
                        .await
                        .is_ok()
                })
            })
            .collect();
        let mut views = Vec::with_capacity(nodes.len());
        for (id, p) in probes.into_iter().enumerate() {
            let reachable = p.await.unwrap_or(false);
            failures[id] = if reachable { 0 } else { failures[id] + 1 };
            views.push(PeerView {
                node: id,
                reachable,
                failures: failures[id],
                service_us: None,
            });
        }
        if client.is_none() {
            client = CoordinatorClient::for_cluster(&cfg).await.ok();
        }
        let report = BalancerReport {
            balancer: "demo-driver".into(),
            nodes: views,
        };
        if let Some(c) = &client {
            if c.balancer_report(&report).await.is_err() {
                // Perhaps another leader (etcd mode): find it again next time.
                client = None;
            }
        }
    }
}
