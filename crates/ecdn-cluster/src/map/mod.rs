//! The bucket map: which servers hold which bucket's pieces, as of one epoch.
//!
//! The coordinator owns the [`ecdn_placement::Placement`] (data buckets by consistent hashing,
//! parity buckets by parity rebalance, App. 10.3's failure and return procedures) and a
//! [`SlotHistory`]; on every change it publishes a new map with the next epoch. A node keeps
//! the newest map it has seen and answers from it alone, without asking anyone:
//!
//! * the bucket of an object ([`BucketMap::bucket_of`], the placement's hash);
//! * where each piece of an object goes ([`BucketMap::pieces`]: the simulator's
//!   [`ecdn_placement::pieces::pieces`] over this map);
//! * the bucket's **serving node** ([`BucketMap::serving`]): the first server of its data
//!   buckets (`c2dn`) or of its ring walk (the other schemes). It collapses concurrent misses,
//!   keeps the decoded copy in its hot-object cache and fills misses; any node that receives a
//!   request for the bucket passes it there;
//! * where a moved slot's chunks may still be ([`BucketMap::former`]);
//! * the cluster's members ([`BucketMap::members`]): every node's addresses, weight and
//!   [`MemberState`], so nodes added while the cluster runs are reached like the ones the
//!   cluster file lists, and a draining node learns that it drains.
//!
//! A map is plain data (serde): the coordinator sends it as JSON.

mod diff;
pub use diff::MapDiff;

use std::net::SocketAddr;

use ecdn_placement::pieces::{self, BucketLayout, Piece, Scheme, SlotHistory, NO_SERVER};
use ecdn_placement::{bucket_of_key, Placement, ServerId};
use serde::{Deserialize, Serialize};

/// Where a member is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemberState {
    /// Serving: available while its heartbeats (or its etcd registration) last.
    Active,
    /// Leaving: unavailable in the placement (its buckets have moved), it finishes the
    /// requests it has and stops. Heartbeats do not bring it back.
    Draining,
    /// Gone for good: its id is never reused and it is never offered its parity back.
    Removed,
}

impl MemberState {
    pub fn name(self) -> &'static str {
        match self {
            MemberState::Active => "active",
            MemberState::Draining => "draining",
            MemberState::Removed => "removed",
        }
    }
}

/// One node of the cluster, as the coordinator knows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Member {
    pub id: usize,
    /// The client listener.
    pub client: SocketAddr,
    /// The peer listener.
    pub peer: SocketAddr,
    pub weight: f64,
    pub state: MemberState,
}

/// One epoch of the cluster's bucket assignment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BucketMap {
    /// Increases with every change the coordinator publishes.
    pub epoch: u64,
    /// The scheme, by its name on the wire (see [`Scheme::parse`]).
    #[serde(with = "scheme_name")]
    pub scheme: Scheme,
    pub k: usize,
    pub p: usize,
    pub buckets: usize,
    /// The key of [`Placement::object_key`].
    pub object_key: u64,
    /// Per node: available (heard from within the heartbeat deadline) or not.
    pub available: Vec<bool>,
    /// Data servers, `k_placed` per bucket (the placement's K; 1 for replication schemes).
    k_placed: usize,
    data_len: usize,
    data: Vec<ServerId>,
    /// Parity servers, `p_placed` per bucket.
    p_placed: usize,
    parity_len: usize,
    parity: Vec<ServerId>,
    /// The first `walk_width` distinct available servers of each bucket's ring walk.
    walk_width: usize,
    walk_len: usize,
    walk: Vec<ServerId>,
    /// Per (bucket, chunk) slot, `k + p` per bucket: the servers it moved away from.
    former: Vec<[ServerId; 2]>,
    /// Every member by id (one per server), or none in a map made without them (tests; nodes
    /// then use the cluster file's addresses).
    #[serde(default)]
    members: Vec<Member>,
}

impl BucketMap {
    /// The map of `placement` (built with `scheme.placement_code(k, p)`) at `epoch`; `history`
    /// is the coordinator's record of moved slots (`c2dn` only).
    pub fn from_placement(
        epoch: u64,
        scheme: Scheme,
        k: usize,
        p: usize,
        placement: &Placement,
        history: Option<&SlotHistory>,
    ) -> BucketMap {
        let buckets = placement.buckets();
        let (k_placed, p_placed) = (placement.k(), placement.p());
        let walk_width = (k + p).max(3).max(scheme.replicas());
        let mut data = vec![NO_SERVER; buckets * k_placed];
        let mut parity = vec![NO_SERVER; buckets * p_placed];
        let mut walk = vec![NO_SERVER; buckets * walk_width];
        let (mut data_len, mut parity_len, mut walk_len) = (0, 0, 0);
        let mut scratch = Vec::new();
        for b in 0..buckets {
            let d = placement.data_servers(b);
            data_len = d.len();
            data[b * k_placed..b * k_placed + d.len()].copy_from_slice(d);
            let q = placement.parity_servers(b);
            parity_len = q.len();
            parity[b * p_placed..b * p_placed + q.len()].copy_from_slice(q);
            placement.ring_servers_into(b, walk_width, &mut scratch);
            walk_len = scratch.len();
            walk[b * walk_width..b * walk_width + scratch.len()].copy_from_slice(&scratch);
        }
        let former = match history {
            Some(h) => h.as_slice().to_vec(),
            None => vec![[NO_SERVER; 2]; buckets * (k + p)],
        };
        BucketMap {
            epoch,
            scheme,
            k,
            p,
            buckets,
            object_key: placement.object_key(),
            available: (0..placement.servers())
                .map(|s| placement.is_available(s))
                .collect(),
            k_placed,
            data_len,
            data,
            p_placed,
            parity_len,
            parity,
            walk_width,
            walk_len,
            walk,
            former,
            members: Vec::new(),
        }
    }

    /// The map with the members' addresses and states (one per server, in id order).
    pub fn with_members(mut self, members: Vec<Member>) -> BucketMap {
        self.members = members;
        self
    }

    /// Every member by id; empty in a map made without them.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// Member `id`, if the map has members and `id` is one.
    pub fn member(&self, id: ServerId) -> Option<&Member> {
        self.members.get(id)
    }

    /// Checks a map received from the network: every table has the size its header says and
    /// names only known servers, so no lookup can go out of bounds.
    pub fn validate(&self) -> Result<(), String> {
        let n = self.available.len();
        let scheme = self.scheme;
        let ok = self.buckets >= 1
            && self.buckets <= ecdn_placement::MAX_BUCKETS
            && n >= 1
            && self.k >= 1
            && self.k + self.p <= 256
            && (self.k_placed, self.p_placed) == scheme.placement_code(self.k, self.p)
            && self.data_len <= self.k_placed
            && self.parity_len <= self.p_placed
            && self.walk_len <= self.walk_width
            && self.data.len() == self.buckets * self.k_placed
            && self.parity.len() == self.buckets * self.p_placed
            && self.walk.len() == self.buckets * self.walk_width
            && self.former.len() == self.buckets * (self.k + self.p);
        if !ok {
            return Err("bucket map: inconsistent table sizes".into());
        }
        if !self.members.is_empty() {
            if self.members.len() != n || self.members.iter().enumerate().any(|(i, m)| m.id != i) {
                return Err("bucket map: the members are not one per server in id order".into());
            }
            if let Some(m) = self.members.iter().find(|m| {
                m.state != MemberState::Active && self.available[m.id]
                    || !(m.weight.is_finite() && m.weight > 0.0)
            }) {
                return Err(format!(
                    "bucket map: member {} is {} with weight {} and available {}",
                    m.id,
                    m.state.name(),
                    m.weight,
                    self.available[m.id]
                ));
            }
        }
        let used = |v: &[ServerId], stride: usize, len: usize| {
            v.chunks(stride.max(1))
                .all(|c| c[..len.min(c.len())].iter().all(|&s| s < n))
        };
        if !used(&self.data, self.k_placed, self.data_len)
            || !used(&self.parity, self.p_placed, self.parity_len)
            || !used(&self.walk, self.walk_width, self.walk_len)
            || self
                .former
                .iter()
                .flatten()
                .any(|&s| s != NO_SERVER && s >= n)
        {
            return Err("bucket map: a table names an unknown server".into());
        }
        Ok(())
    }

    pub fn servers(&self) -> usize {
        self.available.len()
    }

    pub fn is_available(&self, server: ServerId) -> bool {
        self.available.get(server).copied().unwrap_or(false)
    }

    #[inline]
    pub fn bucket_of(&self, object_id: u64) -> usize {
        bucket_of_key(self.object_key, self.buckets, object_id)
    }

    /// The bucket's serving node: its first data server (`c2dn`) or the first server of its
    /// ring walk; `None` when no server is available.
    pub fn serving(&self, bucket: usize) -> Option<ServerId> {
        self.candidates(bucket).first().copied()
    }

    /// The servers that may serve the bucket, best first: the serving node, then the next ones
    /// a request moves on to when it cannot reach it (before the coordinator notices).
    pub fn candidates(&self, bucket: usize) -> &[ServerId] {
        if self.scheme == Scheme::C2dn && self.data_len > 0 {
            BucketLayout::data_servers(self, bucket)
        } else {
            let at = bucket * self.walk_width;
            &self.walk[at..at + self.walk_len]
        }
    }

    /// The pieces of an object of `bucket` (see [`ecdn_placement::pieces::pieces`]); `walk` is
    /// scratch space, kept by the caller so a request allocates nothing.
    pub fn pieces(
        &self,
        bucket: usize,
        coded: bool,
        out: &mut Vec<Piece>,
        walk: &mut Vec<ServerId>,
    ) {
        pieces::pieces(
            self,
            self.scheme,
            self.k,
            self.p,
            bucket,
            coded,
            self.scheme.replicas(),
            out,
            walk,
        );
    }

    /// The servers chunk `chunk`'s slot of `bucket` moved away from (most recent first);
    /// [`NO_SERVER`] where none.
    pub fn former(&self, bucket: usize, chunk: usize) -> [ServerId; 2] {
        self.former
            .get(bucket * (self.k + self.p) + chunk)
            .copied()
            .unwrap_or([NO_SERVER; 2])
    }
}

/// A [`Scheme`] as its name in JSON.
mod scheme_name {
    use ecdn_placement::pieces::Scheme;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(s: &Scheme, ser: S) -> Result<S::Ok, S::Error> {
        ser.serialize_str(&s.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Scheme, D::Error> {
        let name = String::deserialize(d)?;
        Scheme::parse(&name).map_err(serde::de::Error::custom)
    }
}

impl BucketLayout for BucketMap {
    fn data_servers(&self, bucket: usize) -> &[ServerId] {
        let at = bucket * self.k_placed;
        &self.data[at..at + self.data_len]
    }

    fn parity_servers(&self, bucket: usize) -> &[ServerId] {
        let at = bucket * self.p_placed;
        &self.parity[at..at + self.parity_len]
    }

    fn ring_servers_into(&self, bucket: usize, n: usize, out: &mut Vec<ServerId>) {
        let at = bucket * self.walk_width;
        out.clear();
        out.extend_from_slice(&self.walk[at..at + n.min(self.walk_len)]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ecdn_placement::PlacementConfig;

    fn placement(scheme: Scheme, n: usize, k: usize, p: usize) -> Placement {
        let (kp, pp) = scheme.placement_code(k, p);
        Placement::new(
            &vec![1.0; n],
            PlacementConfig {
                buckets: 100,
                k: kp,
                p: pp,
                seed: 1,
                ..PlacementConfig::default()
            },
        )
        .unwrap()
    }

    /// The map answers exactly what the placement answers, for every scheme and bucket, before
    /// and after a failure, and survives a JSON round trip.
    #[test]
    fn map_pieces_equal_placement_pieces() {
        for scheme in [
            Scheme::NoRep,
            Scheme::Rep(2),
            Scheme::C2dnNoRebal,
            Scheme::C2dn,
        ] {
            let (k, p) = (3, 2);
            let mut pl = placement(scheme, 7, k, p);
            let mut history = SlotHistory::new(100, k, p);
            for step in 0..2 {
                if step == 1 {
                    let before = history.holders(&pl);
                    pl.set_available(4, false);
                    history.record(&before, &history.holders(&pl));
                }
                let map = BucketMap::from_placement(step, scheme, k, p, &pl, Some(&history));
                let json = serde_json::to_string(&map).unwrap();
                let map: BucketMap = serde_json::from_str(&json).unwrap();
                map.validate().unwrap();
                let (mut a, mut b, mut w) = (Vec::new(), Vec::new(), Vec::new());
                let mut scratch = Vec::new();
                for bucket in 0..100 {
                    for coded in [false, true] {
                        map.pieces(bucket, coded, &mut a, &mut scratch);
                        let r = scheme.replicas();
                        pieces::pieces(&pl, scheme, k, p, bucket, coded, r, &mut b, &mut w);
                        assert_eq!(a, b, "{scheme:?} bucket {bucket} coded {coded}");
                        assert!(a.iter().all(|x| map.is_available(x.server)));
                    }
                    for c in 0..k + p {
                        assert_eq!(map.former(bucket, c), history.former(bucket, c));
                    }
                    assert_eq!(
                        map.bucket_of(bucket as u64 * 77),
                        pl.bucket_of(bucket as u64 * 77)
                    );
                    let s = map.serving(bucket).unwrap();
                    assert!(map.is_available(s));
                }
            }
        }
    }

    #[test]
    fn validate_refuses_out_of_range_servers() {
        let pl = placement(Scheme::C2dn, 5, 3, 1);
        let mut map = BucketMap::from_placement(1, Scheme::C2dn, 3, 1, &pl, None);
        map.validate().unwrap();
        map.walk[3] = 99;
        assert!(map.validate().is_err());
        let mut map = BucketMap::from_placement(1, Scheme::C2dn, 3, 1, &pl, None);
        map.data.pop();
        assert!(map.validate().is_err());
        // A scheme the node does not know does not even parse.
        let json = serde_json::to_string(&map)
            .unwrap()
            .replace("\"c2dn\"", "\"raid\"");
        let e = serde_json::from_str::<BucketMap>(&json)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown scheme"), "{e}");
    }
}
