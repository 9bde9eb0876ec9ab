//! The coordinator's verdicts: from the views its nodes and load balancers report, which
//! nodes are unavailable and why, apart from the network and the clock (the coordinator's
//! `State` feeds it and publishes what it decides).
//!
//! **Out.** Among the nodes in the map, a node leaves when
//! * it is *cut off*: more than [`HealthConfig::cut_quorum`] of the peers that see it (and at
//!   least two, or every one of a smaller cluster) cannot reach it;
//! * it is *unreachable from clients*: most load balancers that see it cannot reach it;
//! * it is *slow*: its service time, the median of its peers' views, stayed above
//!   `max(slow_ms, slow_factor × the median node's)` for `slow_for_ms`.
//!
//! A view says unreachable after [`MIN_FAILURES`] failures in a row; one failure alone (a lost
//! SYN, a probe stuck behind a burst) says nothing yet. Only the views of nodes in the map
//! (and alive) count, and one exit at a time is decided,
//! worst first, each without the views of the nodes already out: a node cut off from every
//! peer also reports every peer unreachable, and once it is out its word is no longer taken.
//! At most [`HealthConfig::cap`] nodes are out for these reasons at once.
//!
//! **Back.** A node out for its health returns when none of the three holds (a slow one: below
//! 0.8 of the bound) and has not held for `return_after_ms`, doubled for each further exit
//! within `flap_window_s` (at most `max_return_ms`): a node that flaps stays out longer each
//! time, so the map changes a few times, not at every flap.
//!
//! **Silent.** A node that misses its heartbeats is out as before, unless its peers still
//! reach it (then only its link to the coordinator is cut: [`Judge::reached_by_peers`]).

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::observer::STALE;
use super::{BalancerReport, HealthConfig, PeerView};

/// Why a node is out of the map.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum OutReason {
    /// No heartbeat (or no etcd registration), and no peer reaches it: dead, or gone.
    Silent,
    /// `failing` of the `of` peers that see it cannot reach it.
    CutOff { failing: usize, of: usize },
    /// `failing` of the `of` load balancers that see it cannot reach its client listener.
    Unreachable { failing: usize, of: usize },
    /// Its service time stayed above the bound.
    Slow { service_ms: f64, bound_ms: f64 },
}

impl std::fmt::Display for OutReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OutReason::Silent => f.write_str("silent: no heartbeat, and no peer reaches it"),
            OutReason::CutOff { failing, of } => {
                write!(f, "cut off: {failing} of {of} peers cannot reach it")
            }
            OutReason::Unreachable { failing, of } => write!(
                f,
                "unreachable from clients: {failing} of {of} load balancers cannot reach it"
            ),
            OutReason::Slow {
                service_ms,
                bound_ms,
            } => write!(
                f,
                "slow: service time {service_ms:.1} ms above the bound of {bound_ms:.1} ms"
            ),
        }
    }
}

/// What the judge needs to know of each node from the coordinator's state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Standing {
    /// In the map.
    pub available: bool,
    /// Heartbeats arrive (embedded), or it is registered (etcd).
    pub alive: bool,
    /// An active member (not draining, not removed): only those come back.
    pub active: bool,
}

/// One change the judge decided: `node` leaves (with its reason) or returns (`None`).
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub node: usize,
    pub out: Option<OutReason>,
}

/// How one node looks right now, for the status page.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeHealth {
    /// Why it is out of the map, if it is.
    #[serde(default)]
    pub out_reason: Option<String>,
    /// Peers (in the map) whose latest view of it says unreachable, of those that see it.
    pub peers_failing: usize,
    pub peers_seeing: usize,
    /// Its service time: the median of its peers' views, ms.
    #[serde(default)]
    pub service_ms: Option<f64>,
    /// Times it left the map for its health within the flap window.
    #[serde(default)]
    pub recent_exits: usize,
}

#[derive(Debug, Default)]
struct Subject {
    out: Option<OutReason>,
    slow_since: Option<Instant>,
    well_since: Option<Instant>,
    exits: VecDeque<Instant>,
}

/// Evidence about one node from the current views.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Evidence {
    failing: usize,
    of: usize,
    lb_failing: usize,
    lb_of: usize,
    service_us: Option<f64>,
}

/// The coordinator's verdicts (see the module doc).
#[derive(Debug)]
pub struct Judge {
    cfg: HealthConfig,
    /// The latest views each node reported, by reporter.
    reports: Vec<Vec<PeerView>>,
    /// The latest report of each load balancer, and when it came.
    balancers: HashMap<String, (Vec<PeerView>, Instant)>,
    subjects: Vec<Subject>,
}

/// Most load balancers remembered.
const MAX_BALANCERS: usize = 64;

/// Failures in a row before a view says unreachable.
pub const MIN_FAILURES: u32 = 2;

impl Judge {
    pub fn new(cfg: HealthConfig, nodes: usize) -> Judge {
        let mut j = Judge {
            cfg,
            reports: Vec::new(),
            balancers: HashMap::new(),
            subjects: Vec::new(),
        };
        j.grow_to(nodes);
        j
    }

    pub fn config(&self) -> &HealthConfig {
        &self.cfg
    }

    /// Makes room for `nodes` nodes (members added).
    pub fn grow_to(&mut self, nodes: usize) {
        if self.reports.len() < nodes {
            self.reports.resize_with(nodes, Vec::new);
            self.subjects.resize_with(nodes, Subject::default);
        }
    }

    /// Node `reporter`'s current views of its peers (replacing its earlier ones); views of
    /// unknown nodes and of itself are dropped.
    pub fn reported(&mut self, reporter: usize, views: &[PeerView]) {
        let n = self.reports.len();
        if let Some(r) = self.reports.get_mut(reporter) {
            *r = sorted(views.iter().filter(|v| v.node < n && v.node != reporter));
        }
    }

    /// A load balancer's report (replacing its earlier one).
    pub fn balancer(&mut self, report: BalancerReport, now: Instant) {
        self.balancers
            .retain(|_, (_, at)| now.saturating_duration_since(*at) < STALE);
        if self.balancers.len() >= MAX_BALANCERS && !self.balancers.contains_key(&report.balancer) {
            return;
        }
        self.balancers
            .insert(report.balancer, (sorted(report.nodes.iter()), now));
    }

    /// Whether the judge took `node` out for its health (cut off, unreachable, slow), not
    /// a silence: only the judge brings such a node back.
    pub fn out_for_health(&self, node: usize) -> bool {
        self.reason(node).is_some_and(|r| *r != OutReason::Silent)
    }

    /// Why `node` is out, if the judge or a silence took it out.
    pub fn reason(&self, node: usize) -> Option<&OutReason> {
        self.subjects.get(node).and_then(|s| s.out.as_ref())
    }

    /// `node` left the map for `reason` (the coordinator decided it: a silence, a drain).
    pub fn set_out(&mut self, node: usize, reason: OutReason, now: Instant) {
        if let Some(s) = self.subjects.get_mut(node) {
            if reason != OutReason::Silent {
                s.exits.push_back(now);
            }
            s.out = Some(reason);
            s.well_since = None;
            s.slow_since = None;
        }
    }

    /// `node` is back in the map.
    pub fn set_back(&mut self, node: usize) {
        if let Some(s) = self.subjects.get_mut(node) {
            s.out = None;
            s.well_since = None;
            s.slow_since = None;
        }
    }

    /// Whether most of the peers in the map that see `node` reach it (and at least one does):
    /// a silent node they reach is cut off from the control plane only.
    pub fn reached_by_peers(&self, node: usize, standing: &[Standing]) -> bool {
        let counts = |r: usize| standing.get(r).is_some_and(|s| s.available && s.alive);
        let e = self.evidence(node, &counts, Instant::now());
        let reached = e.of - e.failing;
        reached > 0 && reached as f64 > (1.0 - self.cfg.cut_quorum) * e.of as f64
    }

    /// The peers' evidence about `node`, from the reporters `counts` accepts.
    fn evidence(&self, node: usize, counts: &dyn Fn(usize) -> bool, now: Instant) -> Evidence {
        let mut e = Evidence::default();
        let mut services = Vec::new();
        for (reporter, views) in self.reports.iter().enumerate() {
            if reporter == node || !counts(reporter) {
                continue;
            }
            match view_of(views, node) {
                Some(v) if v.reachable => {
                    e.of += 1;
                    if let Some(us) = v.service_us {
                        services.push(us as f64);
                    }
                }
                Some(v) if v.failures >= MIN_FAILURES => {
                    e.of += 1;
                    e.failing += 1;
                }
                // One failure alone (a lost SYN, a probe behind a burst) is no evidence yet.
                _ => {}
            }
        }
        for (views, at) in self.balancers.values() {
            if now.saturating_duration_since(*at) >= STALE {
                continue;
            }
            match view_of(views, node) {
                Some(v) if v.reachable => e.lb_of += 1,
                Some(v) if v.failures >= MIN_FAILURES => {
                    e.lb_of += 1;
                    e.lb_failing += 1;
                }
                _ => {}
            }
        }
        e.service_us = median(&mut services);
        e
    }

    /// More than `cut_quorum` of the peers that see it fail, and at least two (or every peer
    /// there is, `peers` of them in the map, when fewer).
    fn cut(&self, e: &Evidence, peers: usize) -> bool {
        e.of > 0
            && e.failing >= peers.clamp(1, 2)
            && e.failing as f64 > self.cfg.cut_quorum * e.of as f64
    }

    fn unreachable(e: &Evidence) -> bool {
        e.lb_of > 0 && e.lb_failing * 2 > e.lb_of
    }

    /// Every node's evidence from the reporters `counted` says count, and the slow bound (µs)
    /// over the service times of those reporters.
    fn evidence_of_all(&self, counted: &[bool], now: Instant) -> (Vec<Evidence>, f64) {
        let evidence: Vec<Evidence> = (0..counted.len())
            .map(|i| self.evidence(i, &|r| counted.get(r).copied().unwrap_or(false), now))
            .collect();
        let services: Vec<f64> = (0..counted.len())
            .filter(|&i| counted[i])
            .filter_map(|i| evidence[i].service_us)
            .collect();
        let bound = self.bound_us(&services);
        (evidence, bound)
    }

    /// The slow bound (µs) given the service times of the nodes in the map.
    fn bound_us(&self, services: &[f64]) -> f64 {
        let mut s = services.to_vec();
        let median = median(&mut s).unwrap_or(0.0);
        (self.cfg.slow_ms * 1e3).max(self.cfg.slow_factor * median)
    }

    /// How long `node` must stay well before it returns.
    fn return_delay(&self, s: &Subject) -> Duration {
        let base = self.cfg.return_after_ms;
        let doublings = s.exits.len().saturating_sub(1).min(20) as u32;
        Duration::from_millis(
            base.saturating_mul(1u64 << doublings)
                .min(self.cfg.max_return_ms),
        )
    }

    /// Decides at `now` which nodes leave and which return, given each node's standing and
    /// the pieces one bucket needs on distinct available nodes. The caller applies the
    /// verdicts (in order) and tells the judge nothing more: the judge has noted them.
    pub fn decide(&mut self, now: Instant, standing: &[Standing], needed: usize) -> Vec<Verdict> {
        if !self.cfg.enabled {
            return Vec::new();
        }
        let n = standing.len().min(self.subjects.len());
        let window = Duration::from_secs(self.cfg.flap_window_s);
        for s in &mut self.subjects {
            while s
                .exits
                .front()
                .is_some_and(|&t| now.saturating_duration_since(t) > window)
            {
                s.exits.pop_front();
            }
        }
        // The nodes in the map whose word counts, shrinking as nodes are taken out.
        let mut counted: Vec<bool> = (0..n)
            .map(|i| standing[i].available && standing[i].alive)
            .collect();
        let health_out = (0..n)
            .filter(|&i| !standing[i].available && self.out_for_health(i))
            .count();
        let available = (0..n).filter(|&i| standing[i].available).count();
        let nodes = (0..n).filter(|&i| standing[i].active).count();
        let cap = self.cfg.cap(nodes, needed);
        let mut verdicts = Vec::new();

        // Exits, worst first, each judged without the views of those already out.
        let mut outs = health_out;
        let mut left = available;
        loop {
            let (evidence, bound) = self.evidence_of_all(&counted, now);
            let in_map = counted.iter().filter(|&&c| c).count();
            let mut worst: Option<(f64, usize, OutReason)> = None;
            for i in 0..n {
                if !counted[i] {
                    continue;
                }
                let e = &evidence[i];
                let s = &mut self.subjects[i];
                let slow = e.service_us.is_some_and(|us| us > bound);
                if slow {
                    s.slow_since.get_or_insert(now);
                } else {
                    s.slow_since = None;
                }
                let slow_long = s.slow_since.is_some_and(|t| {
                    now.saturating_duration_since(t) >= Duration::from_millis(self.cfg.slow_for_ms)
                });
                // Counted itself, so its peers in the map are the others.
                let candidate = if self.cut(e, in_map - 1) {
                    Some((
                        2.0 + e.failing as f64 / e.of as f64,
                        OutReason::CutOff {
                            failing: e.failing,
                            of: e.of,
                        },
                    ))
                } else if Self::unreachable(e) {
                    Some((
                        1.0 + e.lb_failing as f64 / e.lb_of as f64,
                        OutReason::Unreachable {
                            failing: e.lb_failing,
                            of: e.lb_of,
                        },
                    ))
                } else if slow_long {
                    let us = e.service_us.unwrap_or(0.0);
                    Some((
                        // In (0, 1), higher the slower: below every cut or unreachable node.
                        1.0 - bound / us,
                        OutReason::Slow {
                            service_ms: us / 1e3,
                            bound_ms: bound / 1e3,
                        },
                    ))
                } else {
                    None
                };
                if let Some((score, reason)) = candidate {
                    if worst.as_ref().is_none_or(|(w, _, _)| score > *w) {
                        worst = Some((score, i, reason));
                    }
                }
            }
            let Some((_, node, reason)) = worst else {
                break;
            };
            if outs >= cap || left <= needed {
                break;
            }
            counted[node] = false;
            outs += 1;
            left -= 1;
            self.set_out(node, reason.clone(), now);
            verdicts.push(Verdict {
                node,
                out: Some(reason),
            });
        }

        // Returns: judged by the nodes in the map.
        let (evidence, bound) = self.evidence_of_all(&counted, now);
        let in_map = counted.iter().filter(|&&c| c).count();
        for i in 0..n {
            let st = standing[i];
            if st.available || !st.alive || !st.active || !self.out_for_health(i) {
                continue;
            }
            let e = &evidence[i];
            // Out, so not counted: every node in the map is its peer.
            let well = !self.cut(e, in_map)
                && !Self::unreachable(e)
                && e.of > e.failing
                && e.service_us.is_some_and(|us| us < 0.8 * bound);
            let delay = self.return_delay(&self.subjects[i]);
            let s = &mut self.subjects[i];
            if !well {
                s.well_since = None;
                continue;
            }
            let since = *s.well_since.get_or_insert(now);
            if now.saturating_duration_since(since) >= delay {
                self.set_back(i);
                verdicts.push(Verdict { node: i, out: None });
            }
        }
        verdicts
    }

    /// How `node` looks now, judged by the nodes `standing` says are in the map.
    pub fn health(&self, node: usize, standing: &[Standing], now: Instant) -> NodeHealth {
        let counts = |r: usize| standing.get(r).is_some_and(|s| s.available && s.alive);
        let e = self.evidence(node, &counts, now);
        let s = self.subjects.get(node);
        NodeHealth {
            out_reason: s.and_then(|s| s.out.as_ref()).map(|r| r.to_string()),
            peers_failing: e.failing,
            peers_seeing: e.of,
            service_ms: e.service_us.map(|us| (us / 10.0).round() / 100.0),
            recent_exits: s.map_or(0, |s| s.exits.len()),
        }
    }
}

/// `views` by node, one each (the last given for a node wins).
fn sorted<'a>(views: impl Iterator<Item = &'a PeerView>) -> Vec<PeerView> {
    let mut v: Vec<PeerView> = views.copied().collect();
    v.reverse();
    v.sort_by_key(|x| x.node);
    v.dedup_by_key(|x| x.node);
    v
}

/// The view of `node` in `views` (sorted by [`sorted`]).
fn view_of(views: &[PeerView], node: usize) -> Option<&PeerView> {
    views
        .binary_search_by_key(&node, |v| v.node)
        .ok()
        .map(|i| &views[i])
}

/// The median of `v` (sorted in place), `None` when empty.
fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    })
}

#[cfg(test)]
mod tests;
