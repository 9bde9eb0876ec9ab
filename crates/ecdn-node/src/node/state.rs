//! [`State`]: everything a request may need, shared by all connections.

use std::sync::{Arc, Mutex};

use super::disk::Disk;
use super::flight::Flights;
use super::freshness::StoredResponse;
use super::hoc::Hoc;
use super::lock::lock;
use super::ops::Metrics;
use super::status::history::History;
use super::upstream::Upstream;
use super::vary::VaryIndex;
use super::{cluster, sites};

/// Everything a request may need, shared by all connections.
pub(super) struct State {
    /// Which origin serves which Host, and the origin timeout.
    pub(super) upstream: Upstream,
    pub(super) hoc: Mutex<Hoc>,
    pub(super) disk: Option<Disk>,
    /// Origin fetches that concurrent misses of the same key may join, by cache key.
    pub(super) flights: Arc<Flights>,
    pub(super) vary: VaryIndex,
    pub(super) metrics: Metrics,
    pub(super) max_uri_len: usize,
    /// How long a request body the node does not forward may take to arrive before the answer
    /// ([`super::config::NodeConfig::header_read_timeout`]; see `client_body.rs`).
    pub(super) unread_body_timeout: std::time::Duration,
    pub(super) purge_token: Option<String>,
    /// [`super::config::NodeConfig::client_health`].
    pub(super) client_health: bool,
    pub(super) access_log: bool,
    /// Cluster mode: the node's side of the cluster.
    pub(super) cluster: Option<Arc<cluster::pieces::member::Cluster>>,
    /// Cooperating sites, if any ([`super::sites`]).
    pub(super) sites: Option<sites::Sites>,
    /// [`super::config::NodeConfig::store_set_cookie`].
    pub(super) store_set_cookie: bool,
    /// The status page's history ([`super::status`]).
    pub(super) status: History,
    /// Large objects cached as range slices (cluster mode, `slice_size`).
    pub(super) slices: super::slice_range::Slices,
}

impl State {
    /// Removes every cached answer of the URL `primary`: its Vary index entry, the HOC copy
    /// and the disk entry (durably, see [`Disk::remove`]). Whether anything was held; an
    /// error when the disk could not record the removal.
    pub(super) async fn invalidate(&self, primary: &str) -> Result<bool, String> {
        let mut held = self.forget_in_memory(primary);
        if let Some(disk) = &self.disk {
            held |= disk.remove(primary).await?;
        }
        Ok(held)
    }

    /// [`State::invalidate`] in memory only: the URL's Vary index entry and its HOC copy.
    pub(super) fn forget_in_memory(&self, primary: &str) -> bool {
        let held = self.vary.forget(primary);
        held | lock(&self.hoc).remove(ecdn_trace::hash_id(primary.as_bytes()))
    }

    /// Runs `keep` (a copy of `e` going into the HOC) unless, in a cluster, this node carried
    /// out a purge of its object that its bytes were filled before (a fill that began before
    /// the purge and ended after it: `cluster/pieces/purge_log.rs`); `None` then.
    pub(super) async fn unless_purged<T>(
        &self,
        e: &StoredResponse,
        keep: impl FnOnce() -> T,
    ) -> Option<T> {
        let Some(c) = &self.cluster else {
            return Some(keep());
        };
        let object = cluster::pieces::names::object_id(&e.key);
        let now = ecdn_cluster::auth::unix_now_ms();
        c.purges
            .write(object, e.filled, now, async { keep() })
            .await
            .ok()
    }
}
