//! Membership changes while the cluster serves: add a node, drain a node, remove a node for
//! good. Each is one step of the coordinator's [`State`] that publishes a new map; the members
//! travel in the map ([`crate::map::Member`]), so every node learns the new addresses and
//! states with the epoch that introduces them.
//!
//! * **Add** (`POST /coord/members`, [`NewMember`]): the node gets the next id and a place on
//!   the ring by its weight, *unavailable* ([`Placement::add_server`]). The map that announces
//!   it is what the new node reads its addresses from; its first heartbeat (or etcd
//!   registration) then makes it available — App. 10.3's return, which hands it the data
//!   buckets of its ring position and parity buckets from the most loaded servers within its
//!   budget. Until it answers, no request goes to it.
//! * **Drain** (`POST /coord/drain?node=N`): the member becomes `draining` and unavailable in
//!   the placement (its data buckets move along the ring, its parity buckets are re-placed by
//!   Algorithm 1). The node keeps answering its peers and the requests it has; seeing itself
//!   draining in the map, it fails its health check, finishes what it has and stops. Its
//!   heartbeats do not bring it back.
//! * **Remove** (`POST /coord/remove?node=N`): gone for good — unavailable, its remembered
//!   parity forgotten ([`Placement::forget_parity`]), its heartbeats refused, its id never
//!   reused. A dead node is removed the same way.
//!
//! Drain and remove refuse to leave fewer available nodes than one bucket's pieces need
//! (`K + P`, or the replicas), so an operator cannot take a cluster below its code by mistake.
//!
//! [`Placement::add_server`]: ecdn_placement::Placement::add_server
//! [`Placement::forget_parity`]: ecdn_placement::Placement::forget_parity

use std::net::SocketAddr;
use std::time::Instant;

use ecdn_placement::{PlacementError, RebalanceReport};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::state::State;
use super::RebalanceEvent;
use crate::config::ClusterConfig;
use crate::map::{Member, MemberState};

/// `POST /coord/members`: the node to add.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewMember {
    pub client: SocketAddr,
    pub peer: SocketAddr,
    #[serde(default = "one")]
    pub weight: f64,
}

fn one() -> f64 {
    1.0
}

/// Why a membership change was refused (`400`, or `409` for a state conflict).
#[derive(Debug, Error, PartialEq)]
pub enum MemberError {
    #[error("node {node} is not in the cluster (nodes 0..{nodes})")]
    Unknown { node: usize, nodes: usize },
    #[error("node {node} is {state}; only an active node can be drained")]
    NotActive { node: usize, state: &'static str },
    #[error("node {node} is {state}; only a draining node can be undrained")]
    NotDraining { node: usize, state: &'static str },
    #[error("node {node} was already removed")]
    AlreadyRemoved { node: usize },
    #[error("weight {0}: must be finite and positive")]
    BadWeight(f64),
    #[error("{addr} is already an address of node {node}")]
    AddressInUse { addr: SocketAddr, node: usize },
    #[error(
        "taking node {node} out would leave {left} available nodes; a bucket's pieces need \
         {needed}"
    )]
    TooFew {
        node: usize,
        left: usize,
        needed: usize,
    },
    #[error("placement: {0}")]
    Placement(#[from] PlacementError),
}

impl MemberError {
    /// A conflict with the member's state (`409`) rather than a bad request (`400`).
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            MemberError::NotActive { .. }
                | MemberError::NotDraining { .. }
                | MemberError::AlreadyRemoved { .. }
                | MemberError::TooFew { .. }
                | MemberError::AddressInUse { .. }
        )
    }
}

/// A membership change an operator asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum MemberOp {
    Add(NewMember),
    Drain(usize),
    /// A draining node made active again: it serves its buckets once it reports.
    Undrain(usize),
    Remove(usize),
}

impl MemberOp {
    /// The change a request asks for: `POST /coord/members` with a [`NewMember`] body, or
    /// `POST /coord/drain?node=N`, `/coord/undrain?node=N` or `/coord/remove?node=N`.
    pub fn from_request(path: &str, query: Option<&str>, body: &[u8]) -> Result<MemberOp, String> {
        match path {
            super::MEMBERS_PATH => serde_json::from_slice(body)
                .map(MemberOp::Add)
                .map_err(|e| format!("new member: {e}")),
            super::DRAIN_PATH => Ok(MemberOp::Drain(node_of(query)?)),
            super::UNDRAIN_PATH => Ok(MemberOp::Undrain(node_of(query)?)),
            super::REMOVE_PATH => Ok(MemberOp::Remove(node_of(query)?)),
            _ => Err(format!("{path}: not a membership change")),
        }
    }
}

/// `node=N`, the only query parameter of drain, undrain and remove.
fn node_of(query: Option<&str>) -> Result<usize, String> {
    match query.unwrap_or("").split_once('=') {
        Some(("node", v)) if !v.contains('&') => {
            v.parse().map_err(|_| format!("node={v:?}: need a node id"))
        }
        _ => Err("need the query node=N and nothing else".into()),
    }
}

/// The answer to a membership change: the node (a new one's id) and the epoch of the map
/// that carries the change.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemberReply {
    pub node: usize,
    pub epoch: u64,
}

impl State {
    /// Applies `op`; returns the node it concerns and the event (the caller publishes).
    pub(super) fn apply_op(
        &mut self,
        op: &MemberOp,
        now: Instant,
    ) -> Result<(usize, RebalanceEvent), MemberError> {
        match op {
            MemberOp::Add(new) => self.add_member(new, now),
            MemberOp::Drain(n) => Ok((*n, self.drain(*n)?)),
            MemberOp::Undrain(n) => Ok((*n, self.undrain(*n)?)),
            MemberOp::Remove(n) => Ok((*n, self.remove(*n)?)),
        }
    }

    pub(super) fn is_active(&self, node: usize) -> bool {
        self.members
            .get(node)
            .is_some_and(|m| m.state == MemberState::Active)
    }

    /// Sizes the per-node records for `n` nodes (new ones never heard from).
    pub(super) fn grow_to(&mut self, n: usize, now: Instant) {
        let deadline = now + self.deadline;
        self.expires.resize(n, deadline);
        self.last_heartbeat.resize(n, None);
        self.seen_epoch.resize(n, None);
        self.node_heartbeats.resize(n, 0);
        self.present.resize(n, false);
        self.control_cut.resize(n, false);
        self.judge.grow_to(n);
    }

    /// Takes the members a former leader stored; every node of the cluster file must be one.
    pub(super) fn adopt_members(
        &mut self,
        cfg: &ClusterConfig,
        members: &[Member],
    ) -> Result<(), PlacementError> {
        let bad = |why: String| Err(PlacementError::BadState(why));
        if let Some((i, m)) = members.iter().enumerate().find(|(i, m)| m.id != *i) {
            return bad(format!("member {i} has id {}", m.id));
        }
        if let Some(n) = cfg.nodes.iter().find(|n| n.id >= members.len()) {
            return bad(format!(
                "the cluster file's node {} is not a member (add nodes with `ecdn cluster add`)",
                n.id
            ));
        }
        self.members = members.to_vec();
        Ok(())
    }

    /// Pieces one bucket needs on distinct available nodes.
    pub(super) fn needed(&self) -> usize {
        (self.placement.k() + self.placement.p())
            .max(self.scheme.replicas())
            .max(1)
    }

    fn member(&self, node: usize) -> Result<&Member, MemberError> {
        self.members.get(node).ok_or(MemberError::Unknown {
            node,
            nodes: self.members.len(),
        })
    }

    /// Checks that taking `node` out of the placement leaves enough available nodes.
    fn check_leaving(&self, node: usize) -> Result<(), MemberError> {
        if !self.placement.is_available(node) {
            return Ok(());
        }
        let left = self.placement.available_servers() - 1;
        let needed = self.needed();
        if left < needed {
            return Err(MemberError::TooFew { node, left, needed });
        }
        Ok(())
    }

    /// Adds a node, unavailable until it first reports; returns its id and the event.
    pub(super) fn add_member(
        &mut self,
        new: &NewMember,
        now: Instant,
    ) -> Result<(usize, RebalanceEvent), MemberError> {
        if !(new.weight.is_finite() && new.weight > 0.0) {
            return Err(MemberError::BadWeight(new.weight));
        }
        for m in self
            .members
            .iter()
            .filter(|m| m.state != MemberState::Removed)
        {
            for addr in [new.client, new.peer] {
                if addr == m.client || addr == m.peer {
                    return Err(MemberError::AddressInUse { addr, node: m.id });
                }
            }
        }
        let id = self.placement.add_server(new.weight)?;
        self.members.push(Member {
            id,
            client: new.client,
            peer: new.peer,
            weight: new.weight,
            state: MemberState::Active,
        });
        self.grow_to(self.members.len(), now);
        let trigger = format!("node {id} added (weight {})", new.weight);
        Ok((id, self.change(trigger, |_| RebalanceReport::default())))
    }

    /// Drains an active node: unavailable now, never back by heartbeats.
    pub(super) fn drain(&mut self, node: usize) -> Result<RebalanceEvent, MemberError> {
        let state = self.member(node)?.state;
        if state != MemberState::Active {
            return Err(MemberError::NotActive {
                node,
                state: state.name(),
            });
        }
        self.check_leaving(node)?;
        self.members[node].state = MemberState::Draining;
        Ok(self.change(format!("node {node} draining"), |pl| {
            pl.set_available(node, false)
        }))
    }

    /// Makes a draining node active again. It stays unavailable until its next heartbeat, as a
    /// returning node does; its buckets come back to it then.
    pub(super) fn undrain(&mut self, node: usize) -> Result<RebalanceEvent, MemberError> {
        let state = self.member(node)?.state;
        if state != MemberState::Draining {
            return Err(MemberError::NotDraining {
                node,
                state: state.name(),
            });
        }
        self.members[node].state = MemberState::Active;
        Ok(self.change(format!("node {node} undrained"), |_| {
            RebalanceReport::default()
        }))
    }

    /// Removes a node for good (active, draining or dead).
    pub(super) fn remove(&mut self, node: usize) -> Result<RebalanceEvent, MemberError> {
        if self.member(node)?.state == MemberState::Removed {
            return Err(MemberError::AlreadyRemoved { node });
        }
        self.check_leaving(node)?;
        self.members[node].state = MemberState::Removed;
        Ok(self.change(format!("node {node} removed"), |pl| {
            let report = pl.set_available(node, false);
            pl.forget_parity(node);
            report
        }))
    }
}

#[cfg(test)]
mod tests {
    use ecdn_placement::pieces::BucketLayout;

    use super::*;
    use crate::coordinator::state::tests::{self as state_tests, hb, opts};
    use crate::coordinator::{HeartbeatError, StoredState};

    fn cfg(n: usize) -> ClusterConfig {
        state_tests::cfg("c2dn", n)
    }

    fn new(port: u16, weight: f64) -> NewMember {
        NewMember {
            client: format!("127.0.0.1:{port}").parse().unwrap(),
            peer: format!("127.0.0.1:{}", port + 1).parse().unwrap(),
            weight,
        }
    }

    fn holds(map: &crate::map::BucketMap, node: usize) -> usize {
        (0..map.buckets)
            .map(|b| {
                map.data_servers(b)
                    .iter()
                    .chain(map.parity_servers(b))
                    .filter(|&&s| s == node)
                    .count()
            })
            .sum()
    }

    /// Add: announced unavailable (the map carries its addresses), available with its first
    /// heartbeat, holding buckets by its weight. Drain: unavailable, heartbeats do not bring
    /// it back. Remove: heartbeats refused.
    /// A drained node made active again comes back at its next heartbeat with its buckets; only
    /// a draining node can be undrained.
    #[test]
    fn undrain_brings_a_draining_node_back_at_its_next_heartbeat() {
        let t0 = Instant::now();
        let mut st = State::new(&cfg(5), &opts(), t0).unwrap();
        let held = holds(&st.map(), 3);
        assert!(held > 0);
        assert_eq!(
            st.undrain(3).unwrap_err(),
            MemberError::NotDraining {
                node: 3,
                state: "active"
            }
        );
        st.drain(3).unwrap();
        let epoch = st.epoch;
        let ev = st.undrain(3).unwrap();
        assert_eq!(
            (ev.trigger.as_str(), ev.epoch),
            ("node 3 undrained", epoch + 1)
        );
        let map = st.map();
        assert_eq!(map.member(3).unwrap().state, MemberState::Active);
        assert!(!map.is_available(3), "unavailable until it reports");
        let ev = st.heartbeat(&hb(3), t0).unwrap().unwrap();
        assert_eq!(ev.trigger, "node 3 available");
        assert_eq!(holds(&st.map(), 3), held, "its data buckets come back");
        st.remove(3).unwrap();
        assert!(matches!(
            st.undrain(3),
            Err(MemberError::NotDraining { .. })
        ));
        assert!(MemberError::NotDraining {
            node: 3,
            state: "removed"
        }
        .is_conflict());
    }

    #[test]
    fn add_drain_remove() {
        let t0 = Instant::now();
        let mut st = State::new(&cfg(5), &opts(), t0).unwrap();
        let (id, ev) = st.add_member(&new(30000, 2.0), t0).unwrap();
        assert_eq!(
            (id, ev.epoch, ev.trigger.as_str()),
            (5, 2, "node 5 added (weight 2)")
        );
        let map = st.map();
        map.validate().unwrap();
        assert_eq!(map.servers(), 6);
        assert!(!map.is_available(5));
        assert_eq!(map.member(5).unwrap().client.port(), 30000);
        assert_eq!(holds(&map, 5), 0);
        let ev = st.heartbeat(&hb(5), t0).unwrap().unwrap();
        assert_eq!(ev.trigger, "node 5 available");
        let map = st.map();
        assert!(map.is_available(5));
        let mean = (0..5).map(|n| holds(&map, n)).sum::<usize>() as f64 / 5.0;
        assert!(
            holds(&map, 5) as f64 > 1.2 * mean,
            "{} vs {mean}",
            holds(&map, 5)
        );

        // Refused additions change nothing.
        let epoch = st.epoch;
        assert_eq!(
            st.add_member(&new(30000, 1.0), t0).unwrap_err(),
            MemberError::AddressInUse {
                addr: "127.0.0.1:30000".parse().unwrap(),
                node: 5
            }
        );
        assert!(st.add_member(&new(31000, 0.0), t0).is_err());
        assert_eq!((st.epoch, st.members.len()), (epoch, 6));

        let ev = st.drain(2).unwrap();
        assert_eq!(ev.trigger, "node 2 draining");
        assert!(ev.moved_data > 0);
        let map = st.map();
        map.validate().unwrap();
        assert!(!map.is_available(2));
        assert_eq!(map.member(2).unwrap().state, MemberState::Draining);
        assert_eq!(holds(&map, 2), 0);
        assert!(st.heartbeat(&hb(2), t0).unwrap().is_none(), "stays out");
        assert!(st.set_presence(2, true).is_none());
        assert!(matches!(st.drain(2), Err(MemberError::NotActive { .. })));

        st.remove(2).unwrap();
        assert!(st.placement.remembered_parity(2).is_empty());
        assert_eq!(
            st.heartbeat(&hb(2), t0).unwrap_err(),
            HeartbeatError::Removed { node: 2 }
        );
        assert_eq!(
            st.remove(2).unwrap_err(),
            MemberError::AlreadyRemoved { node: 2 }
        );
        // Its addresses may be used again, by a new id.
        let again = NewMember {
            client: "127.0.0.1:20002".parse().unwrap(),
            peer: "127.0.0.1:21002".parse().unwrap(),
            weight: 1.0,
        };
        let (id, _) = st.add_member(&again, t0).unwrap();
        assert_eq!(id, 6);
        assert_eq!(
            st.drain(9).unwrap_err(),
            MemberError::Unknown { node: 9, nodes: 7 }
        );
    }

    #[test]
    fn requests_parse() {
        use crate::coordinator::{DRAIN_PATH, MEMBERS_PATH, REMOVE_PATH};
        let body = br#"{"client": "127.0.0.1:1", "peer": "127.0.0.1:2"}"#;
        assert_eq!(
            MemberOp::from_request(MEMBERS_PATH, None, body).unwrap(),
            MemberOp::Add(NewMember {
                client: "127.0.0.1:1".parse().unwrap(),
                peer: "127.0.0.1:2".parse().unwrap(),
                weight: 1.0
            })
        );
        assert!(MemberOp::from_request(MEMBERS_PATH, None, b"{\"client\": 1}").is_err());
        assert_eq!(
            MemberOp::from_request(DRAIN_PATH, Some("node=3"), b"").unwrap(),
            MemberOp::Drain(3)
        );
        assert_eq!(
            MemberOp::from_request(crate::coordinator::UNDRAIN_PATH, Some("node=4"), b"").unwrap(),
            MemberOp::Undrain(4)
        );
        assert_eq!(
            MemberOp::from_request(REMOVE_PATH, Some("node=0"), b"").unwrap(),
            MemberOp::Remove(0)
        );
        for q in [None, Some("node=-1"), Some("node=1&x=2"), Some("id=1")] {
            assert!(MemberOp::from_request(DRAIN_PATH, q, b"").is_err(), "{q:?}");
        }
    }

    /// Drain and remove stop at K + P available nodes.
    #[test]
    fn a_cluster_is_not_taken_below_its_code() {
        let t0 = Instant::now();
        let mut st = State::new(&cfg(5), &opts(), t0).unwrap();
        st.drain(0).unwrap();
        assert_eq!(
            st.drain(1).unwrap_err(),
            MemberError::TooFew {
                node: 1,
                left: 3,
                needed: 4
            }
        );
        assert!(st.remove(1).is_err());
        // A node already unavailable (dead) can always be removed.
        st.set_presence(1, false).unwrap();
        st.remove(1).unwrap();
    }

    /// Members survive the hand-over to the next leader.
    #[test]
    fn members_are_stored() {
        let c = cfg(5);
        let t0 = Instant::now();
        let mut a = State::new(&c, &opts(), t0).unwrap();
        a.add_member(&new(30000, 1.5), t0).unwrap();
        a.heartbeat(&hb(5), t0).unwrap();
        a.drain(1).unwrap();
        let json = serde_json::to_vec(&a.stored()).unwrap();
        let stored: StoredState = serde_json::from_slice(&json).unwrap();
        let mut b = State::from_stored(&c, &opts(), &stored, t0).unwrap();
        assert_eq!(a.map(), b.map());
        for st in [&mut a, &mut b] {
            st.remove(1).unwrap();
            st.set_presence(3, false).unwrap();
        }
        assert_eq!(a.map(), b.map());
        assert_eq!(b.status(t0).nodes.len(), 6);
        // A cluster file naming a node the stored members lack is refused.
        assert!(State::from_stored(&cfg(7), &opts(), &stored, t0).is_err());
    }
}
