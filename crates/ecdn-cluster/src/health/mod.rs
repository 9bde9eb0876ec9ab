//! Unavailable as C2DN means it (NSDI '22, §1, §3.2): a server is unavailable "if it is deemed
//! incapable of serving content to users within specified performance bounds", not only when
//! it stopped. A node its peers cannot reach, that clients cannot reach, or whose service time
//! stays beyond a bound leaves the map like a dead one (App. 10.3), and returns the same way
//! once that ended and stayed ended.
//!
//! The evidence comes from the cluster itself, in three steps:
//!
//! 1. **Observe** ([`observer`]): every node's peer client notes how each peer answered its
//!    requests (answered or failed), and [`probe`] asks every peer (up to
//!    [`HealthConfig::probe_fanout`] of them every [`HealthConfig::probe_ms`]) a signed probe
//!    with a short timeout, whose round trip is that peer's *service time* as this node sees
//!    it. Reads hedge against a peer much slower than the others, and relays go around it, at
//!    once (`observer::PeerObserver::slower`), long before the judge decides.
//! 2. **Report**: each node's current view of its peers ([`PeerView`]) rides on its heartbeat
//!    (embedded coordinator) or in its `health/{id}` key (etcd). A load balancer reports what
//!    it sees of the nodes' client listeners the same way ([`BalancerReport`]).
//! 3. **Judge** ([`judge`]): the coordinator combines the views into a verdict per node, with
//!    hysteresis against flapping and a cap on how many nodes it may take out at once. The
//!    reason travels with the event (`"node 3 unavailable: cut off from 5 of 5 peers"`), in
//!    the status page and in `ecdn cluster status`.
//!
//! A node that stops sending heartbeats while its peers still reach it is cut off from the
//! control plane, not from its users: it stays in the map. A coordinator that hears from fewer
//! than half of the nodes suspects itself and takes no silent node out, so a partition of the
//! coordinator cannot empty the map.

pub mod judge;
pub mod observer;
pub mod probe;

use serde::{Deserialize, Serialize};

/// What one observer (a node, or a load balancer) currently sees of one node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerView {
    /// The node seen.
    pub node: usize,
    /// Its last request answered (`true`) or failed: refused, timed out, unreachable.
    pub reachable: bool,
    /// Failures in a row, since its last answer.
    #[serde(default)]
    pub failures: u32,
    /// Its service time as this observer measures it (the probes' round trip, smoothed),
    /// microseconds; `None` before the first answer.
    #[serde(default)]
    pub service_us: Option<u64>,
}

/// What a load balancer (or any client-side prober) reports of the nodes' client listeners
/// (`POST /coord/balancer`, signed with the cluster key).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BalancerReport {
    /// Who reports: one view per balancer is kept, the latest.
    pub balancer: String,
    pub nodes: Vec<PeerView>,
}

/// Limit on a [`BalancerReport`]'s body.
pub const BALANCER_LIMIT: usize = 64 << 10;

/// The cluster file's `[health]`: when a node is deemed unavailable, beyond missed heartbeats.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct HealthConfig {
    /// Judge by what peers and balancers see; `false`: heartbeats alone decide (the behaviour
    /// before issue 60).
    pub enabled: bool,
    /// A node is cut off when more than this fraction of the peers that see it cannot reach it
    /// (and at least two, or every peer of a smaller cluster).
    pub cut_quorum: f64,
    /// A node is slow when its service time (the median over its peers' views) exceeds
    /// `max(slow_ms, slow_factor × the median node's)` ... (15 ms: 2.6 times the most any
    /// node showed on the loopback demo at full load, 6 nodes on 2 cores, BENCHMARKS.md)
    pub slow_ms: f64,
    pub slow_factor: f64,
    /// ... for this long (3 s: with 1 s, the start of 2 of 36 bed runs on 2 cores, cold
    /// caches and origin fetches on every node, took a node out as slow; reads hedge against a
    /// slow peer meanwhile, `observer::PeerObserver::slower`).
    pub slow_for_ms: u64,
    /// A node out returns once well for this long; each further exit within
    /// `flap_window_s` doubles it, up to `max_return_ms`.
    pub return_after_ms: u64,
    pub max_return_ms: u64,
    pub flap_window_s: u64,
    /// At most this many nodes out for health (cut off, slow, unreachable by clients) at once;
    /// 0: a third of the nodes, at least one. Never so many that fewer nodes than a bucket's
    /// pieces need stay available.
    pub max_out: usize,
    /// How often each node probes its peers (50 ms: with two probes on their way at once, a
    /// peer turned slow is hedged against and relayed around about two probes and the bar
    /// later, `observer::RecentRtt::least`, as the load balancer's 50 ms probes route clients
    /// around it. With one probe on its way every 100 ms, a node 100 ms away each way on the
    /// bed raised the coded hits' p99 1.54–1.65 times; with two every 50 ms, 1.21–1.27 in two
    /// runs (BENCHMARKS.md, issue 60). 5 peers probed every 50 ms cost 100 small signed
    /// requests a second).
    pub probe_ms: u64,
    /// Peers each node probes per probe period (round robin over the others).
    pub probe_fanout: usize,
    /// A probe unanswered this long is a failure.
    pub probe_timeout_ms: u64,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            enabled: true,
            cut_quorum: 0.5,
            slow_ms: 15.0,
            slow_factor: 4.0,
            slow_for_ms: 3000,
            return_after_ms: 2000,
            max_return_ms: 60_000,
            flap_window_s: 300,
            max_out: 0,
            probe_ms: 50,
            probe_fanout: 16,
            probe_timeout_ms: 500,
        }
    }
}

impl HealthConfig {
    /// Checks the values; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.cut_quorum.is_finite() && (0.0..1.0).contains(&self.cut_quorum)) {
            return Err(format!(
                "[health] cut_quorum = {}: need a fraction in [0, 1)",
                self.cut_quorum
            ));
        }
        if !(self.slow_ms.is_finite() && self.slow_ms > 0.0) {
            return Err(format!("[health] slow_ms = {}: need > 0", self.slow_ms));
        }
        if !(self.slow_factor.is_finite() && self.slow_factor >= 1.0) {
            return Err(format!(
                "[health] slow_factor = {}: need >= 1",
                self.slow_factor
            ));
        }
        if !(10..=60_000).contains(&self.probe_ms) {
            return Err("[health] probe_ms must be between 10 and 60000".into());
        }
        if self.probe_fanout == 0 {
            return Err("[health] probe_fanout must be at least 1".into());
        }
        if self.probe_timeout_ms == 0 || self.probe_timeout_ms > 60_000 {
            return Err("[health] probe_timeout_ms must be between 1 and 60000".into());
        }
        if self.return_after_ms > self.max_return_ms {
            return Err("[health] return_after_ms must not exceed max_return_ms".into());
        }
        Ok(())
    }

    /// The cap on nodes out for health in a cluster of `nodes`, of which a bucket's pieces
    /// need `needed` available.
    pub fn cap(&self, nodes: usize, needed: usize) -> usize {
        let cap = if self.max_out == 0 {
            (nodes / 3).max(1)
        } else {
            self.max_out
        };
        cap.min(nodes.saturating_sub(needed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_validate_and_the_cap_keeps_a_stripe() {
        let h = HealthConfig::default();
        h.validate().unwrap();
        assert_eq!(h.cap(6, 4), 2);
        assert_eq!(h.cap(5, 4), 1);
        assert_eq!(h.cap(4, 4), 0);
        assert_eq!(h.cap(30, 4), 10);
        let fixed = HealthConfig {
            max_out: 3,
            ..HealthConfig::default()
        };
        assert_eq!(fixed.cap(6, 2), 3);
        for bad in [
            HealthConfig {
                cut_quorum: 1.0,
                ..HealthConfig::default()
            },
            HealthConfig {
                slow_factor: 0.5,
                ..HealthConfig::default()
            },
            HealthConfig {
                probe_fanout: 0,
                ..HealthConfig::default()
            },
            HealthConfig {
                probe_ms: 0,
                ..HealthConfig::default()
            },
            HealthConfig {
                return_after_ms: 70_000,
                ..HealthConfig::default()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
