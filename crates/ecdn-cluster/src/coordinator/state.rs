//! The coordinator's decisions, apart from the network and the clock: the placement, the
//! moved slots, availability and the epoch, changed by heartbeats (or, in etcd mode, by the
//! nodes' registrations and load reports) and by rebalances. [`State::stored`] and
//! [`State::from_stored`] hand it from one leading coordinator to the next (etcd mode).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use ecdn_placement::pieces::{Scheme, SlotHistory};
use ecdn_placement::{Placement, PlacementConfig, PlacementError, PlacementState, RebalanceReport};
use serde::{Deserialize, Serialize};

use super::{
    CoordinatorOptions, Heartbeat, HeartbeatError, NodeStatus, RebalanceEvent, Status, RECENT,
};
use crate::config::ClusterConfig;
use crate::health::judge::{Judge, OutReason, Standing};
use crate::health::PeerView;
use crate::map::{BucketMap, Member, MemberState};

/// What one leading coordinator leaves for the next (etcd mode): the placement's state, the
/// moved slots, the epoch and the counters of `GET /coord/status`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredState {
    pub epoch: u64,
    pub placement: PlacementState,
    /// [`SlotHistory::as_slice`] (`c2dn` only).
    pub history: Option<Vec<[usize; 2]>>,
    pub availability_changes: u64,
    pub rebalances: u64,
    pub recent: Vec<RebalanceEvent>,
    /// The members (the cluster file's and those added since); `None` in a state written
    /// before membership changes: the cluster file's.
    #[serde(default)]
    pub members: Option<Vec<Member>>,
}

/// The coordinator's decisions, separate from the network and the clock so they can be tested
/// step by step.
pub(super) struct State {
    pub(super) scheme: Scheme,
    pub(super) k: usize,
    pub(super) p: usize,
    pub(super) placement: Placement,
    pub(super) history: Option<SlotHistory>,
    /// By id, one per placement server (see `members.rs`).
    pub(super) members: Vec<Member>,
    pub(super) epoch: u64,
    /// How long a node may stay silent.
    pub(super) deadline: Duration,
    /// When each node becomes unavailable unless it sends a heartbeat.
    pub(super) expires: Vec<Instant>,
    pub(super) last_heartbeat: Vec<Option<Instant>>,
    pub(super) seen_epoch: Vec<Option<u64>>,
    pub(super) node_heartbeats: Vec<u64>,
    pub(super) heartbeats: u64,
    pub(super) availability_changes: u64,
    pub(super) rebalances: u64,
    pub(super) recent: VecDeque<RebalanceEvent>,
    pub(super) unauthorized: u64,
    pub(super) bad_requests: u64,
    /// EC-Cache's object records (`objects.rs`; embedded mode).
    pub(super) objects: ecdn_objects::meta::MetaTable,
    /// Reads of committed EC-Cache objects the nodes reported, decayed at every re-spend of
    /// the budget (`object_budget.rs`).
    pub(super) object_reads: std::collections::HashMap<ecdn_objects::meta::ObjectName, f64>,
    /// Objects the budget re-coded so far.
    pub(super) object_budget_changes: u64,
    /// Objects of the budget's running batch not re-coded yet.
    pub(super) object_budget_pending: usize,
    /// The last plan's new number of splits per object it would change.
    pub(super) object_targets: std::collections::HashMap<ecdn_objects::meta::ObjectName, usize>,
    /// Whether each node's heartbeats arrive (embedded) or it is registered (etcd).
    pub(super) present: Vec<bool>,
    /// Nodes silent to the coordinator but reached by their peers: kept in the map.
    pub(super) control_cut: Vec<bool>,
    /// The verdicts beyond silence ([`crate::health::judge`]).
    pub(super) judge: Judge,
    /// The coordinator heard from no node when some went silent: it took none out.
    pub(super) suspects_itself: bool,
}

impl State {
    pub(super) fn new(
        cfg: &ClusterConfig,
        opts: &CoordinatorOptions,
        now: Instant,
    ) -> Result<State, PlacementError> {
        let mut placement = Placement::new(&cfg.weights(), State::placement_config_of(cfg))?;
        placement.set_rebalance_options(cfg.rebalance_options());
        let n = cfg.nodes.len();
        let deadline =
            Duration::from_millis(cfg.heartbeat_ms).saturating_mul(cfg.missed_heartbeats);
        let grace = deadline.max(opts.start_grace);
        let history =
            (cfg.scheme == Scheme::C2dn).then(|| SlotHistory::new(cfg.buckets, cfg.k, cfg.p));
        let epoch = opts.first_epoch.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(1)
        });
        Ok(State {
            scheme: cfg.scheme,
            k: cfg.k,
            p: cfg.p,
            placement,
            history,
            members: cfg
                .nodes
                .iter()
                .map(|n| Member {
                    id: n.id,
                    client: n.client,
                    peer: n.peer,
                    weight: n.weight,
                    state: MemberState::Active,
                })
                .collect(),
            epoch: epoch.max(1),
            deadline,
            expires: vec![now + grace; n],
            last_heartbeat: vec![None; n],
            seen_epoch: vec![None; n],
            node_heartbeats: vec![0; n],
            heartbeats: 0,
            availability_changes: 0,
            rebalances: 0,
            recent: VecDeque::new(),
            unauthorized: 0,
            bad_requests: 0,
            // Versions above the epoch: a restarted coordinator never hands one out twice.
            objects: ecdn_objects::meta::MetaTable::new(epoch.max(1)),
            object_reads: Default::default(),
            object_budget_changes: 0,
            object_budget_pending: 0,
            object_targets: Default::default(),
            present: vec![true; n],
            control_cut: vec![false; n],
            judge: Judge::new(cfg.health.clone(), n),
            suspects_itself: false,
        })
    }

    /// The placement configuration of the cluster file (as `ecdn sim cluster` builds it).
    pub(super) fn placement_config_of(cfg: &ClusterConfig) -> PlacementConfig {
        let (k, p) = cfg.placement_code();
        PlacementConfig {
            buckets: cfg.buckets,
            k,
            p,
            seed: cfg.seed,
            ..PlacementConfig::default()
        }
    }

    pub(super) fn map(&self) -> BucketMap {
        BucketMap::from_placement(
            self.epoch,
            self.scheme,
            self.k,
            self.p,
            &self.placement,
            self.history.as_ref(),
        )
        .with_members(self.members.clone())
    }

    /// Runs a placement change with the slot bookkeeping, bumps the epoch and returns the
    /// event (the caller publishes the new map).
    pub(super) fn change(
        &mut self,
        trigger: String,
        f: impl FnOnce(&mut Placement) -> RebalanceReport,
    ) -> RebalanceEvent {
        self.change_because(trigger, None, f)
    }

    /// [`State::change`] with the reason a node left, if one did.
    fn change_because(
        &mut self,
        trigger: String,
        reason: Option<String>,
        f: impl FnOnce(&mut Placement) -> RebalanceReport,
    ) -> RebalanceEvent {
        let before = self.history.as_ref().map(|h| h.holders(&self.placement));
        let report = f(&mut self.placement);
        if let (Some(h), Some(before)) = (self.history.as_mut(), before) {
            let after = h.holders(&self.placement);
            h.record(&before, &after);
        }
        self.epoch += 1;
        self.rebalances += 1;
        let event = RebalanceEvent {
            epoch: self.epoch,
            trigger,
            moved_parity: report.moved_parity,
            moved_data: report.moved_data,
            elapsed_us: report.elapsed.as_micros() as u64,
            reason,
        };
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(event.clone());
        event
    }

    pub(super) fn set_available(&mut self, node: usize, available: bool) -> RebalanceEvent {
        self.availability_changes += 1;
        let what = if available {
            "available"
        } else {
            "unavailable"
        };
        self.change(format!("node {node} {what}"), |pl| {
            pl.set_available(node, available)
        })
    }

    /// Takes `node` out of the map for `reason` (noted by the judge when `note`); the
    /// event's trigger names a reason other than silence.
    fn take_out(
        &mut self,
        node: usize,
        reason: OutReason,
        note: bool,
        now: Instant,
    ) -> RebalanceEvent {
        if note {
            self.judge.set_out(node, reason.clone(), now);
        }
        self.control_cut[node] = false;
        self.availability_changes += 1;
        let trigger = match reason {
            OutReason::Silent => format!("node {node} unavailable"),
            ref r => format!("node {node} unavailable: {r}"),
        };
        self.change_because(trigger, Some(reason.to_string()), |pl| {
            pl.set_available(node, false)
        })
    }

    /// A node whose heartbeats stopped (or whose etcd registration lapsed), still in the map:
    /// kept while its peers reach it (only its link to the control plane is cut), else out.
    fn silent(
        &mut self,
        node: usize,
        standing: &[Standing],
        now: Instant,
    ) -> Option<RebalanceEvent> {
        if self.judge.config().enabled && self.judge.reached_by_peers(node, standing) {
            if !self.control_cut[node] {
                eprintln!(
                    "ecdn coordinator: node {node} is silent but its peers reach it: kept in \
                     the map (cut off from the control plane only)"
                );
            }
            self.control_cut[node] = true;
            return None;
        }
        Some(self.take_out(node, OutReason::Silent, true, now))
    }

    /// Brings `node` back into the map.
    fn bring_back(&mut self, node: usize) -> RebalanceEvent {
        self.judge.set_back(node);
        self.set_available(node, true)
    }

    /// Each node's standing, for the judge.
    pub(super) fn standing(&self) -> Vec<Standing> {
        (0..self.placement.servers())
            .map(|n| Standing {
                available: self.placement.is_available(n),
                alive: self.present.get(n).copied().unwrap_or(false),
                active: self.is_active(n),
            })
            .collect()
    }

    /// A load balancer's report, checked: every node it names is a member, its name has 1 to
    /// 128 bytes.
    pub(super) fn balancer_report(
        &mut self,
        report: crate::health::BalancerReport,
        now: Instant,
    ) -> Result<(), String> {
        let nodes = self.members.len();
        if let Some(v) = report.nodes.iter().find(|v| v.node >= nodes) {
            return Err(format!(
                "balancer report: node {} is not in the cluster (nodes 0..{nodes})",
                v.node
            ));
        }
        if report.balancer.is_empty() || report.balancer.len() > 128 {
            return Err("balancer report: the balancer's name must have 1 to 128 bytes".into());
        }
        self.judge.balancer(report, now);
        Ok(())
    }

    /// Node `node`'s current views of its peers (a heartbeat's, or its etcd health key).
    pub(super) fn peer_views(&mut self, node: usize, views: &[PeerView]) {
        self.judge.reported(node, views);
    }

    /// The verdicts at `now`: silent nodes out unless their peers reach them (or the
    /// coordinator heard from nobody), then the judge's exits and returns.
    pub(super) fn judge_tick(&mut self, now: Instant) -> Vec<RebalanceEvent> {
        let mut events = Vec::new();
        let standing = self.standing();
        let enabled = self.judge.config().enabled;
        let anyone = (0..standing.len()).any(|n| standing[n].alive && standing[n].active);
        let mut suspects = false;
        for node in 0..standing.len() {
            if !standing[node].available || standing[node].alive {
                self.control_cut[node] = false;
                continue;
            }
            if enabled && !anyone {
                suspects = true;
                continue;
            }
            events.extend(self.silent(node, &standing, now));
        }
        if suspects && !self.suspects_itself {
            eprintln!(
                "ecdn coordinator: no node reports: this coordinator is cut off, not every \
                 node; the map is kept"
            );
        }
        self.suspects_itself = suspects;
        if !enabled || suspects {
            return events;
        }
        let standing = self.standing();
        for v in self.judge.decide(now, &standing, self.needed()) {
            events.push(match v.out {
                Some(reason) => self.take_out(v.node, reason, false, now),
                None => self.set_available(v.node, true),
            });
        }
        events
    }

    pub(super) fn periodic_rebalance(&mut self) -> RebalanceEvent {
        self.change("periodic".into(), |pl| pl.rebalance())
    }

    /// Heartbeats received from each node so far, `None` for an unavailable node.
    pub(super) fn heard(&self) -> Vec<Option<u64>> {
        (0..self.placement.servers())
            .map(|n| {
                self.placement
                    .is_available(n)
                    .then_some(self.node_heartbeats[n])
            })
            .collect()
    }

    /// Checks a heartbeat completely before anything is recorded.
    pub(super) fn check(&self, hb: &Heartbeat) -> Result<(), HeartbeatError> {
        let nodes = self.placement.servers();
        if hb.node >= nodes {
            return Err(HeartbeatError::UnknownNode {
                node: hb.node,
                nodes,
            });
        }
        if self.members[hb.node].state == MemberState::Removed {
            return Err(HeartbeatError::Removed { node: hb.node });
        }
        let (buckets, p) = (self.placement.buckets(), self.placement.p());
        if let Some(&(bucket, index, _)) =
            hb.parity.iter().find(|&&(b, j, _)| b >= buckets || j >= p)
        {
            return Err(HeartbeatError::BadParity {
                bucket,
                index,
                buckets,
                p,
            });
        }
        Ok(())
    }

    /// Records a heartbeat received at `now`; returns the event if the node came back.
    pub(super) fn heartbeat(
        &mut self,
        hb: &Heartbeat,
        now: Instant,
    ) -> Result<Option<RebalanceEvent>, HeartbeatError> {
        self.check(hb)?;
        let node = hb.node;
        self.heartbeats += 1;
        self.node_heartbeats[node] += 1;
        self.last_heartbeat[node] = Some(now);
        self.seen_epoch[node] = Some(hb.epoch);
        self.expires[node] = now + self.deadline;
        self.present[node] = true;
        self.judge.reported(node, &hb.peers);
        // A silent node returns with its heartbeat; one out for its health when the judge
        // says so.
        let returns = !self.placement.is_available(node)
            && self.is_active(node)
            && !self.judge.out_for_health(node);
        let event = returns.then(|| self.bring_back(node));
        // The loads count toward the next rebalance (a return just consumed the earlier ones).
        self.record(hb);
        Ok(event)
    }

    /// Records the loads of `hb` (checked) toward the next rebalance.
    fn record(&mut self, hb: &Heartbeat) {
        self.placement.record_data_write(hb.node, hb.data_bytes);
        for &(bucket, index, bytes) in &hb.parity {
            self.placement.record_parity_write(bucket, index, bytes);
        }
        // Only committed objects' reads count (the table bounds the counts).
        for (name, n) in &hb.object_reads {
            if let Ok(name) = ecdn_objects::meta::ObjectName::parse(name) {
                if self.objects.get(&name).is_some() {
                    *self.object_reads.entry(name).or_default() += *n as f64;
                }
            }
        }
    }

    /// Records the loads a node reported (etcd mode: from its load key), without touching
    /// its availability.
    pub(super) fn record_loads(&mut self, hb: &Heartbeat) -> Result<(), HeartbeatError> {
        self.check(hb)?;
        self.record(hb);
        Ok(())
    }

    /// Etcd mode: node `node` is registered (`present`) or its registration is gone. Returns
    /// the event when that changes its availability.
    pub(super) fn set_presence(&mut self, node: usize, present: bool) -> Option<RebalanceEvent> {
        if node >= self.placement.servers() {
            return None;
        }
        if present {
            self.last_heartbeat[node] = Some(Instant::now());
            self.node_heartbeats[node] += 1;
        }
        self.present[node] = present;
        let available = self.placement.is_available(node);
        if present {
            // Only an active member comes back, and one out for its health only when the
            // judge says so; a draining or removed one only goes.
            let back = !available && self.is_active(node) && !self.judge.out_for_health(node);
            return back.then(|| self.bring_back(node));
        }
        if !available {
            return None;
        }
        // Gone from etcd: out, unless its peers still reach it (the judge's tick looks again).
        let standing = self.standing();
        self.silent(node, &standing, Instant::now())
    }

    /// What a leader stores for the next one (etcd mode).
    pub(super) fn stored(&self) -> StoredState {
        StoredState {
            epoch: self.epoch,
            placement: self.placement.snapshot(),
            history: self.history.as_ref().map(|h| h.as_slice().to_vec()),
            availability_changes: self.availability_changes,
            rebalances: self.rebalances,
            recent: self.recent.iter().cloned().collect(),
            members: Some(self.members.clone()),
        }
    }

    /// The state a leader left in `stored`, for this cluster file; every node's heartbeat
    /// deadline starts now.
    pub(super) fn from_stored(
        cfg: &ClusterConfig,
        opts: &CoordinatorOptions,
        stored: &StoredState,
        now: Instant,
    ) -> Result<State, PlacementError> {
        let mut st = State::new(cfg, opts, now)?;
        st.placement = Placement::restore(
            &cfg.weights(),
            State::placement_config_of(cfg),
            &stored.placement,
        )?;
        st.placement.set_rebalance_options(cfg.rebalance_options());
        if let Some(members) = &stored.members {
            st.adopt_members(cfg, members)?;
        }
        if st.members.len() != st.placement.servers() {
            return Err(PlacementError::BadState(format!(
                "{} members for {} servers",
                st.members.len(),
                st.placement.servers()
            )));
        }
        st.grow_to(st.members.len(), now);
        st.history = match (&stored.history, st.history.take()) {
            (Some(former), Some(_)) => Some(
                SlotHistory::from_slice(cfg.buckets, cfg.k, cfg.p, former).ok_or_else(|| {
                    PlacementError::BadState("the slot history has the wrong size".into())
                })?,
            ),
            (None, h) => h,
            (Some(_), None) => {
                return Err(PlacementError::BadState(
                    "a slot history for a scheme without one".into(),
                ))
            }
        };
        st.epoch = stored.epoch;
        st.availability_changes = stored.availability_changes;
        st.rebalances = stored.rebalances;
        st.recent = stored.recent.iter().cloned().collect();
        Ok(st)
    }

    /// Marks the nodes whose deadline passed by `now` silent, and judges (see
    /// [`State::judge_tick`]).
    pub(super) fn expire(&mut self, now: Instant) -> Vec<RebalanceEvent> {
        for node in 0..self.expires.len() {
            self.present[node] = now < self.expires[node];
        }
        self.judge_tick(now)
    }

    pub(super) fn status(&self, now: Instant) -> Status {
        let standing = self.standing();
        let pl = &self.placement;
        let n = pl.servers();
        let (mut data_buckets, mut parity_buckets) = (vec![0; n], vec![0; n]);
        let mut parity_load = vec![0u64; n];
        for b in 0..pl.buckets() {
            for &s in pl.data_servers(b) {
                data_buckets[s] += 1;
            }
            for (j, &s) in pl.parity_servers(b).iter().enumerate() {
                parity_buckets[s] += 1;
                parity_load[s] = parity_load[s].saturating_add(pl.parity_load(b, j));
            }
        }
        let nodes: Vec<NodeStatus> = self
            .members
            .iter()
            .map(|m| {
                let id = m.id;
                NodeStatus {
                    id,
                    client: m.client,
                    peer: m.peer,
                    weight: m.weight,
                    state: m.state.name().into(),
                    available: pl.is_available(id),
                    data_buckets: data_buckets[id],
                    parity_buckets: parity_buckets[id],
                    ms_since_heartbeat: self.last_heartbeat[id]
                        .map(|t| now.saturating_duration_since(t).as_millis() as u64),
                    heartbeats: self.node_heartbeats[id],
                    seen_epoch: self.seen_epoch[id],
                    data_load: pl.data_load(id),
                    parity_load: parity_load[id],
                    health: self.judge.health(id, &standing, now),
                    control_cut: self.control_cut.get(id).copied().unwrap_or(false),
                }
            })
            .collect();
        let total_parity = (0..pl.buckets())
            .flat_map(|b| (0..pl.p()).map(move |j| (b, j)))
            .map(|(b, j)| pl.parity_load(b, j))
            .fold(0u64, u64::saturating_add);
        Status {
            epoch: self.epoch,
            scheme: self.scheme.name(),
            write_imbalance: write_imbalance(&nodes),
            nodes,
            heartbeats: self.heartbeats,
            availability_changes: self.availability_changes,
            rebalances: self.rebalances,
            recent_rebalances: self.recent.iter().cloned().collect(),
            parity_load: total_parity,
            unauthorized: self.unauthorized,
            bad_requests: self.bad_requests,
            leader: None,
            objects: self.objects.len(),
            object_budget_changes: self.object_budget_changes,
            object_budget_pending: self.object_budget_pending,
        }
    }
}

/// Write load per unit of weight, max over mean across available nodes; `None` without load.
fn write_imbalance(nodes: &[NodeStatus]) -> Option<f64> {
    let per_weight: Vec<f64> = nodes
        .iter()
        .filter(|n| n.available)
        .map(|n| n.data_load.saturating_add(n.parity_load) as f64 / n.weight)
        .collect();
    let mean = per_weight.iter().sum::<f64>() / per_weight.len().max(1) as f64;
    let max = per_weight.iter().copied().fold(0.0, f64::max);
    (mean > 0.0).then(|| max / mean)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::auth::unix_now_ms;

    /// A cluster file of `n` nodes running `scheme` (heartbeats every 100 ms).
    pub(in crate::coordinator) fn cfg(scheme: &str, n: usize) -> ClusterConfig {
        let mut text = format!(
            "scheme = \"{scheme}\"\nkey = \"0123456789abcdef-secret\"\n\
             coordinator = \"127.0.0.1:1\"\nheartbeat_ms = 100\nmissed_heartbeats = 3\n"
        );
        for i in 0..n {
            text.push_str(&format!(
                "[[node]]\nid = {i}\nclient = \"127.0.0.1:{}\"\npeer = \"127.0.0.1:{}\"\n",
                20000 + i,
                21000 + i
            ));
        }
        ClusterConfig::parse(&text).unwrap()
    }

    /// Epochs from 1, a start grace of one second.
    pub(in crate::coordinator) fn opts() -> CoordinatorOptions {
        CoordinatorOptions {
            first_epoch: Some(1),
            start_grace: Duration::from_secs(1),
            ..CoordinatorOptions::default()
        }
    }

    /// A heartbeat of `node` without loads.
    pub(in crate::coordinator) fn hb(node: usize) -> Heartbeat {
        Heartbeat {
            node,
            ..Heartbeat::default()
        }
    }

    /// Silent nodes expire after the start grace, then after the heartbeat deadline; a
    /// heartbeat brings a node back and the data placement returns exactly.
    #[test]
    fn nodes_expire_and_return() {
        let t0 = Instant::now();
        let ms = |m: u64| t0 + Duration::from_millis(m);
        let mut st = State::new(&cfg("c2dn", 5), &opts(), t0).unwrap();
        let first = st.map();
        assert_eq!(first.epoch, 1);
        // Within the start grace nobody expires, even without heartbeats.
        assert!(st.expire(ms(999)).is_empty());
        for n in 0..5 {
            st.heartbeat(&hb(n), ms(900)).unwrap();
        }
        assert!(st.expire(ms(1100)).is_empty());
        for n in 1..5 {
            st.heartbeat(&hb(n), ms(1150)).unwrap();
        }
        // Node 0's last heartbeat was at 900: deadline 1200.
        assert!(st.expire(ms(1199)).is_empty());
        let ev = st.expire(ms(1200));
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].trigger, "node 0 unavailable");
        assert_eq!(ev[0].epoch, 2);
        assert!(ev[0].moved_data > 0);
        let down = st.map();
        assert!(!down.is_available(0));
        let (mut pieces, mut walk) = (Vec::new(), Vec::new());
        for b in 0..down.buckets {
            for coded in [false, true] {
                down.pieces(b, coded, &mut pieces, &mut walk);
                assert!(pieces.iter().all(|p| p.server != 0), "bucket {b}");
            }
        }
        // It comes back with its next heartbeat; data buckets exactly as before.
        let ev = st.heartbeat(&hb(0), ms(1300)).unwrap().unwrap();
        assert_eq!(ev.trigger, "node 0 available");
        assert_eq!(ev.epoch, 3);
        let back = st.map();
        for b in 0..back.buckets {
            use ecdn_placement::pieces::BucketLayout;
            assert_eq!(back.data_servers(b), first.data_servers(b), "bucket {b}");
        }
        let s = st.status(ms(1300));
        assert_eq!(
            (s.availability_changes, s.rebalances, s.heartbeats),
            (2, 2, 10)
        );
        assert_eq!(s.recent_rebalances.len(), 2);
    }

    /// Every node gone at once and back (with heartbeats as the only evidence): no panic,
    /// and the map stays valid throughout.
    #[test]
    fn all_nodes_down_and_back() {
        for scheme in ["c2dn", "c2dn-norebal", "rep2", "no-rep"] {
            let t0 = Instant::now();
            let mut c = cfg(scheme, 5);
            c.health.enabled = false;
            let mut st = State::new(&c, &opts(), t0).unwrap();
            let ev = st.expire(t0 + Duration::from_secs(2));
            assert_eq!(ev.len(), 5, "{scheme}");
            let m = st.map();
            m.validate().unwrap();
            assert!(m.serving(0).is_none());
            for n in 0..5 {
                st.heartbeat(&hb(n), t0 + Duration::from_secs(3)).unwrap();
            }
            let m = st.map();
            m.validate().unwrap();
            assert!(m.available.iter().all(|&a| a), "{scheme}");
            assert_eq!(m.epoch, 11);
        }
    }

    /// A coordinator that hears from no node at all is the one cut off: it keeps the map. One
    /// that hears from some keeps the silent nodes their peers reach, and takes out those
    /// they cannot reach.
    #[test]
    fn a_coordinator_cut_off_does_not_empty_the_map() {
        use crate::health::PeerView;
        let t0 = Instant::now();
        let s = |m: u64| t0 + Duration::from_millis(m);
        let mut st = State::new(&cfg("c2dn", 6), &opts(), t0).unwrap();
        assert!(
            st.expire(s(2000)).is_empty(),
            "nobody reports: the map is kept"
        );
        assert!(st.map().available.iter().all(|&a| a));
        assert!(st.suspects_itself);
        // Nodes 0 and 1 reach the coordinator; they reach every peer but node 5.
        let views = |me: usize| -> Vec<PeerView> {
            (0..6)
                .filter(|&i| i != me)
                .map(|i| PeerView {
                    node: i,
                    reachable: i != 5,
                    failures: if i == 5 { 2 } else { 0 },
                    service_us: Some(1000),
                })
                .collect()
        };
        for n in 0..2 {
            st.heartbeat(
                &Heartbeat {
                    node: n,
                    peers: views(n),
                    ..Heartbeat::default()
                },
                s(2100),
            )
            .unwrap();
        }
        let ev = st.expire(s(2200));
        assert_eq!(ev.len(), 1, "{ev:?}");
        assert_eq!(ev[0].trigger, "node 5 unavailable");
        let m = st.map();
        assert_eq!(m.available, vec![true, true, true, true, true, false]);
        let status = st.status(s(2200));
        assert!(status.nodes[2].control_cut);
        assert_eq!(
            status.nodes[5].health.out_reason.as_deref(),
            Some("silent: no heartbeat, and no peer reaches it")
        );
        // Switched off, heartbeats alone decide, as before.
        let mut c = cfg("c2dn", 6);
        c.health.enabled = false;
        let mut st = State::new(&c, &opts(), t0).unwrap();
        assert_eq!(st.expire(s(2000)).len(), 6);
    }

    /// A node its peers cannot reach leaves the map with its reason, its heartbeats do not
    /// bring it back while it stays cut off, and it returns once its peers reach it again.
    #[test]
    fn a_node_cut_off_from_its_peers_leaves_and_returns_by_the_judge() {
        use crate::health::PeerView;
        let t0 = Instant::now();
        let s = |m: u64| t0 + Duration::from_millis(m);
        let mut st = State::new(&cfg("c2dn", 6), &opts(), t0).unwrap();
        let beat = |st: &mut State, at: u64, cut: Option<usize>| {
            for n in 0..6 {
                let peers = (0..6)
                    .filter(|&i| i != n)
                    .map(|i| {
                        let reachable = cut.is_none_or(|c| c != i && c != n);
                        PeerView {
                            node: i,
                            reachable,
                            failures: if reachable { 0 } else { 2 },
                            service_us: reachable.then_some(1000),
                        }
                    })
                    .collect();
                st.heartbeat(
                    &Heartbeat {
                        node: n,
                        peers,
                        ..Heartbeat::default()
                    },
                    s(at),
                )
                .unwrap();
            }
        };
        beat(&mut st, 100, None);
        assert!(st.expire(s(150)).is_empty());
        beat(&mut st, 200, Some(3));
        let ev = st.expire(s(250));
        assert_eq!(ev.len(), 1);
        assert_eq!(
            ev[0].trigger,
            "node 3 unavailable: cut off: 5 of 5 peers cannot reach it"
        );
        assert!(ev[0].reason.is_some());
        // Its heartbeats go on; it stays out while cut off.
        for t in [300, 400, 500] {
            beat(&mut st, t, Some(3));
            assert!(st.expire(s(t + 50)).is_empty());
        }
        assert!(!st.map().is_available(3));
        let status = st.status(s(500));
        assert_eq!(
            (
                status.nodes[3].health.peers_failing,
                status.nodes[3].health.peers_seeing
            ),
            (5, 5)
        );
        // Healed: back 2 s after its peers first reach it again.
        beat(&mut st, 600, None);
        assert!(st.expire(s(650)).is_empty());
        beat(&mut st, 2600, None);
        let ev = st.expire(s(2650));
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].trigger, "node 3 available");
        // Switched off, the same heartbeats change nothing.
        let mut c = cfg("c2dn", 6);
        c.health.enabled = false;
        let mut st = State::new(&c, &opts(), t0).unwrap();
        beat(&mut st, 200, Some(3));
        assert!(st.expire(s(250)).is_empty());
    }

    #[test]
    fn loads_are_recorded_and_bad_heartbeats_change_nothing() {
        let t0 = Instant::now();
        let mut st = State::new(&cfg("c2dn", 5), &opts(), t0).unwrap();
        let good = Heartbeat {
            node: 2,
            epoch: 1,
            data_bytes: 1000,
            parity: vec![(7, 0, 300), (99, 0, 5)],
            ..Heartbeat::default()
        };
        st.heartbeat(&good, t0).unwrap();
        assert_eq!(st.placement.data_load(2), 1000);
        assert_eq!(st.placement.parity_load(7, 0), 300);
        let bad = [
            (
                Heartbeat {
                    node: 5,
                    data_bytes: 1,
                    ..Heartbeat::default()
                },
                HeartbeatError::UnknownNode { node: 5, nodes: 5 },
            ),
            (
                Heartbeat {
                    node: 2,
                    data_bytes: 1,
                    parity: vec![(1, 0, 1), (100, 0, 1)],
                    ..Heartbeat::default()
                },
                HeartbeatError::BadParity {
                    bucket: 100,
                    index: 0,
                    buckets: 100,
                    p: 1,
                },
            ),
            (
                Heartbeat {
                    node: 2,
                    data_bytes: 1,
                    parity: vec![(1, 1, 1)],
                    ..Heartbeat::default()
                },
                HeartbeatError::BadParity {
                    bucket: 1,
                    index: 1,
                    buckets: 100,
                    p: 1,
                },
            ),
        ];
        for (h, want) in bad {
            assert_eq!(st.heartbeat(&h, t0).unwrap_err(), want);
        }
        assert_eq!(st.placement.data_load(2), 1000);
        assert_eq!(st.placement.parity_load(1, 0), 0);
        assert_eq!(st.status(t0).heartbeats, 1);
        // Replication schemes place no parity: any parity entry is out of range.
        let mut st = State::new(&cfg("rep2", 5), &opts(), t0).unwrap();
        assert!(st
            .heartbeat(
                &Heartbeat {
                    node: 0,
                    parity: vec![(0, 0, 1)],
                    ..Heartbeat::default()
                },
                t0
            )
            .is_err());
    }

    #[test]
    fn periodic_rebalance_bumps_the_epoch() {
        let t0 = Instant::now();
        let mut st = State::new(&cfg("c2dn", 5), &opts(), t0).unwrap();
        let ev = st.periodic_rebalance();
        assert_eq!((ev.epoch, ev.trigger.as_str()), (2, "periodic"));
        assert_eq!(st.map().epoch, 2);
    }

    #[test]
    fn the_first_epoch_defaults_to_the_start_time_in_ms() {
        let before = unix_now_ms();
        let st = State::new(
            &cfg("c2dn", 5),
            &CoordinatorOptions::default(),
            Instant::now(),
        )
        .unwrap();
        assert!(st.epoch >= before && st.epoch < before + 60_000);
    }

    /// A leader's stored state gives the next one the same map, counters and decisions.
    #[test]
    fn the_stored_state_continues_in_the_next_leader() {
        let c = cfg("c2dn", 6);
        let t0 = Instant::now();
        let mut a = State::new(&c, &opts(), t0).unwrap();
        for n in 0..6 {
            a.record_loads(&Heartbeat {
                node: n,
                epoch: 1,
                data_bytes: 1000 * (n as u64 + 1),
                parity: vec![(n * 3, 0, 700)],
                ..Heartbeat::default()
            })
            .unwrap();
        }
        a.set_presence(4, false).unwrap();
        assert!(a.set_presence(4, false).is_none(), "no change, no event");
        assert!(
            a.set_presence(9, true).is_none(),
            "an unknown node changes nothing"
        );
        let json = serde_json::to_vec(&a.stored()).unwrap();
        let stored: StoredState = serde_json::from_slice(&json).unwrap();
        let mut b = State::from_stored(&c, &opts(), &stored, Instant::now()).unwrap();
        assert_eq!(a.map(), b.map());
        assert_eq!(b.epoch, a.epoch);
        assert_eq!(
            b.status(t0).recent_rebalances,
            a.status(t0).recent_rebalances
        );
        for st in [&mut a, &mut b] {
            st.set_presence(4, true).unwrap();
            st.periodic_rebalance();
            st.set_presence(1, false).unwrap();
        }
        assert_eq!(a.map(), b.map());
        // A stored state of another cluster shape is refused.
        assert!(State::from_stored(&cfg("c2dn", 7), &opts(), &stored, t0).is_err());
        assert!(State::from_stored(&cfg("rep2", 6), &opts(), &stored, t0).is_err());
    }
}
