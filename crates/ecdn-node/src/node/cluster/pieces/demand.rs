//! What the serving node was asked for, per object: the counts background repair
//! (`c2dn/repair.rs`) takes its candidates from, the budget a round left, and what repair did.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use ecdn_cluster::config::ClusterConfig;
use ecdn_cluster::control::MapHandle;

use crate::node::cluster::pieces::names::object_id;
use crate::node::lock::lock;

/// Objects whose requests a node counts; past it, the counts of objects it no longer serves
/// are dropped, then every count is halved and the zeros dropped. (The simulator counts
/// without a bound: the two agree while a node serves fewer objects.)
const TRACKED: usize = 1 << 18;

/// A node's repair: the request counts, the budget left, what it did.
#[derive(Default)]
pub(in crate::node) struct Repair {
    /// Per object id: what the serving node knows of it.
    requests: Mutex<HashMap<u64, Requested>>,
    /// Bytes the last round left unspent.
    pub(in crate::node) carry: Mutex<u64>,
    /// One round at a time.
    pub(in crate::node) running: tokio::sync::Mutex<()>,
    pub(in crate::node) stats: RepairStats,
}

/// What a node's repair did (`/_ecdn/stats`'s `cluster.repair`).
#[derive(Default)]
pub(in crate::node) struct RepairStats {
    /// Rounds that wrote something.
    pub(in crate::node) rounds: AtomicU64,
    /// Objects made whole.
    pub(in crate::node) objects: AtomicU64,
    /// Pieces written.
    pub(in crate::node) pieces: AtomicU64,
    /// Payload bytes written.
    pub(in crate::node) written: AtomicU64,
    /// Payload bytes read to rebuild them.
    pub(in crate::node) read: AtomicU64,
}

impl RepairStats {
    pub(in crate::node) fn json(&self) -> serde_json::Value {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        serde_json::json!({
            "rounds": get(&self.rounds),
            "objects": get(&self.objects),
            "pieces": get(&self.pieces),
            "bytes_written": get(&self.written),
            "bytes_read": get(&self.read),
        })
    }
}

impl Repair {
    /// The serving node served a request for the object `id` cached under `key`.
    pub(in crate::node) fn requested(
        &self,
        cfg: &ClusterConfig,
        map: &MapHandle,
        me: usize,
        id: u64,
        key: &str,
    ) {
        if cfg.repair_rate == 0 {
            return;
        }
        let mut r = lock(&self.requests);
        if r.len() >= TRACKED && !r.contains_key(&id) {
            let map = map.current();
            r.retain(|_, e| map.serving(map.bucket_of(e.placed_by)) == Some(me));
            if r.len() >= TRACKED {
                r.retain(|_, e| {
                    e.count /= 2;
                    e.count > 0
                });
            }
        }
        let e = r.entry(id).or_insert_with(|| Requested {
            key: key.to_string(),
            placed_by: object_id(key),
            count: 0,
        });
        e.count = e.count.saturating_add(1);
    }

    /// The round's candidates: objects of buckets this node serves, requested often enough,
    /// most requested first, at most `repair_scan` (only their keys are copied).
    pub(in crate::node) fn candidates(
        &self,
        cfg: &ClusterConfig,
        map: &MapHandle,
        me: usize,
    ) -> Vec<(u64, String)> {
        let map = map.current();
        let min = cfg.repair_min_requests;
        let mut top: Vec<(u32, u64)> = lock(&self.requests)
            .iter()
            .filter(|(_, e)| e.count >= min && map.serving(map.bucket_of(e.placed_by)) == Some(me))
            .map(|(&id, e)| (e.count, id))
            .collect();
        let order = |a: &(u32, u64), b: &(u32, u64)| b.0.cmp(&a.0).then(a.1.cmp(&b.1));
        let scan = cfg.repair_scan;
        if top.len() > scan && scan > 0 {
            top.select_nth_unstable_by(scan - 1, order);
        }
        top.truncate(scan);
        top.sort_unstable_by(order);
        let requests = lock(&self.requests);
        top.into_iter()
            .filter_map(|(_, id)| requests.get(&id).map(|e| (id, e.key.clone())))
            .collect()
    }
}

/// What the serving node knows of an object it served, for the repair's order.
struct Requested {
    /// The cache key its pieces are stored under.
    key: String,
    /// The id the bucket map places it by (its primary key's).
    placed_by: u64,
    count: u32,
}
