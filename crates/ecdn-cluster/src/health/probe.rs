//! A node's probes of its peers: every [`super::HealthConfig::probe_ms`], up to
//! [`super::HealthConfig::probe_fanout`] peers (round robin over the others, in the map or out of
//! it, removed members excepted) are asked [`crate::wire::PROBE_PATH`] with a short timeout.
//!
//! The requests a node already makes say whether a peer answers, but not at a steady pace: a
//! node out of the map gets none, and a quiet cluster few. The probes give every peer a view
//! each period, so a partition is seen within a probe timeout and a return is seen at all,
//! and their round trip is the service time the coordinator compares across nodes.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use crate::config::ClusterConfig;
use crate::map::{BucketMap, MemberState};
use crate::peer::PeerClient;

/// Every peer of the cluster by its peer address: the map's members (removed ones
/// excepted), else the cluster file's nodes.
pub fn peer_ids(map: &BucketMap, cfg: &ClusterConfig) -> HashMap<SocketAddr, usize> {
    if map.members().is_empty() {
        return cfg.nodes.iter().map(|n| (n.peer, n.id)).collect();
    }
    map.members()
        .iter()
        .filter(|m| m.state != MemberState::Removed)
        .map(|m| (m.peer, m.id))
        .collect()
}

/// The peers to probe this round: up to `fanout` of `peers` (sorted by id, without `me`),
/// starting at `round × fanout`.
fn this_round(peers: &[(usize, SocketAddr)], fanout: usize, round: usize) -> Vec<SocketAddr> {
    if peers.is_empty() {
        return Vec::new();
    }
    let start = round.wrapping_mul(fanout) % peers.len();
    (0..fanout.min(peers.len()))
        .map(|i| peers[(start + i) % peers.len()].1)
        .collect()
}

/// Probes node `me`'s peers every `period` until the task is dropped; `map` gives the
/// node's current map (its `MapHandle`'s). `client` must carry the node's observer
/// ([`PeerClient::with_observer`]).
pub async fn probe_loop(
    client: PeerClient,
    map: impl Fn() -> std::sync::Arc<BucketMap>,
    cfg: ClusterConfig,
    me: usize,
    period: Duration,
) {
    let health = cfg.health.clone();
    let timeout = Duration::from_millis(health.probe_timeout_ms);
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut round = 0usize;
    // The probes on their way: a slow or silent peer does not hold the others' back (each
    // peer has up to two at a time, `PeerObserver::probe_started`), and dropping the loop stops
    // them.
    let mut flying = tokio::task::JoinSet::new();
    loop {
        tick.tick().await;
        let mut peers: Vec<(usize, SocketAddr)> = peer_ids(&map(), &cfg)
            .into_iter()
            .filter(|&(_, id)| id != me)
            .map(|(a, id)| (id, a))
            .collect();
        peers.sort();
        let targets = this_round(&peers, health.probe_fanout, round);
        round = round.wrapping_add(1);
        while flying.try_join_next().is_some() {}
        for addr in targets {
            let c = client.clone();
            flying.spawn(async move { c.probe(addr, timeout).await });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_cover_every_peer_in_turn() {
        let peers: Vec<(usize, SocketAddr)> = (0..5)
            .map(|i| (i, format!("10.0.0.{i}:1").parse().unwrap()))
            .collect();
        let ip = |a: &SocketAddr| a.ip().to_string();
        let r0: Vec<String> = this_round(&peers, 2, 0).iter().map(ip).collect();
        let r1: Vec<String> = this_round(&peers, 2, 1).iter().map(ip).collect();
        let r2: Vec<String> = this_round(&peers, 2, 2).iter().map(ip).collect();
        assert_eq!(r0, ["10.0.0.0", "10.0.0.1"]);
        assert_eq!(r1, ["10.0.0.2", "10.0.0.3"]);
        assert_eq!(r2, ["10.0.0.4", "10.0.0.0"]);
        assert_eq!(this_round(&peers, 16, 7).len(), 5);
        assert!(this_round(&[], 4, 0).is_empty());
    }
}
