//! A piece stored on this node ([`put_local`]), and a piece write to a peer counted by its
//! outcome ([`pushed`]): what C2DN's fills and repairs, EC-Cache's `PUT`s and the peer
//! listener's writes all end in.

use bytes::Bytes;
use ecdn_cluster::wire::PieceName;
use ecdn_placement::pieces::Scheme;
use hyper::StatusCode;

use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::names::object_id;
use crate::node::cluster::pieces::purge_log::PurgedAfter;
use crate::node::cluster::pieces::stats::ClusterStats;
use crate::node::cluster::pieces::store::{PieceStore, Put};
use crate::node::cluster::pieces::together::leaves_whole;
use crate::node::lock::lock;
use crate::node::state::State;

/// Counts a piece write to node `server` (`n` bytes sent) by its outcome.
pub(in crate::node) fn pushed(
    c: &Cluster,
    server: usize,
    sent_all: bool,
    n: u64,
    status: Result<StatusCode, String>,
) {
    match status {
        Ok(s) if sent_all && (s == StatusCode::OK || s == StatusCode::NO_CONTENT) => {
            ClusterStats::add(&c.stats.peer_bytes_sent, n);
        }
        Ok(s) => {
            c.stats.peer_error(server);
            eprintln!(
                "ecdn node: storing a piece on node {server}: {s}{}",
                ecdn_cluster::peer::request_note()
            );
        }
        Err(e) => {
            c.stats.peer_error(server);
            eprintln!(
                "ecdn node: storing a piece on node {server}: {e}{}",
                ecdn_cluster::peer::request_note()
            );
        }
    }
}

/// Has this node's piece policy forget its copy of piece `name` of `key`, so the next
/// [`put_local`] of it stores it anew, at the head of the FIFO (resync and reinsertion:
/// `c2dn/resync.rs`); the old bytes stay on disk until that put replaces them.
pub(in crate::node) fn renew_local(c: &Cluster, key: &str, name: PieceName) {
    let object = ecdn_trace::hash_id(key.as_bytes());
    c.pieces.renew(PieceStore::piece_id(object, name));
}

/// Stores a piece on this node: admitted by the piece policy and written; its write load
/// recorded (`k`: the data chunks of the piece's code — the cluster's K for a cached object,
/// the object's own for an EC-Cache split). The HOC keeps a decoded copy only while this node
/// holds the object's piece, so objects whose piece the policy evicts leave the HOC too. With
/// the cluster's `evict_together`, also the cached objects (not EC-Cache objects) a piece of
/// which the policy evicted: the writer has them dropped whole (`together.rs`).
///
/// A piece whose bytes were filled at purge number `filled` (`StoredResponse::filled`; 0 for
/// an EC-Cache split), before a purge of its object that this node remembers, is not stored
/// (`Err`, counted): its own fills' pieces and its peers' go through the same check
/// (`purge_log.rs`).
#[allow(clippy::too_many_arguments)]
pub(in crate::node) async fn put_local(
    st: &State,
    c: &Cluster,
    key: &str,
    k: usize,
    name: PieceName,
    meta: Vec<u8>,
    payload: Bytes,
    filled: u64,
) -> (Result<Put, PurgedAfter>, Vec<u64>) {
    let Some(disk) = &st.disk else {
        return (Ok(Put::Refused), Vec::new());
    };
    let len = payload.len() as u64;
    let object = ecdn_trace::hash_id(key.as_bytes());
    // An EC-Cache split is in none of C2DN's buckets.
    let bucketed = !key.starts_with(crate::node::cluster::pieces::store::SPLIT_PREFIX);
    let bucket = bucketed.then(|| c.map.current().bucket_of(object_id(key)));
    let mut evicted = Vec::new();
    let store = c.pieces.put(
        disk,
        PieceStore::piece_id(object, name),
        object,
        bucket,
        PieceStore::entry_key(key, name),
        meta,
        payload,
        &mut evicted,
    );
    let now = ecdn_cluster::auth::unix_now_ms();
    let put = match c.purges.write(object_id(key), filled, now, store).await {
        Ok(put) => put,
        Err(refused) => {
            ClusterStats::add(&c.stats.writes_refused_after_purge, 1);
            return (Err(refused), Vec::new());
        }
    };
    let mut dying = Vec::new();
    if !evicted.is_empty() {
        let together = c.cfg.evict_together && c.scheme().coded();
        let mut hoc = lock(&st.hoc);
        for e in evicted {
            hoc.remove(e.object);
            if together && !e.split && leaves_whole(c, &e) {
                dying.push(e.object);
            }
        }
    }
    if put == Put::Stored {
        c.stats.written(name, k, len);
        match (name, bucket) {
            (PieceName::Chunk(ch), Some(bucket))
                if c.scheme() == Scheme::C2dn && usize::from(ch) >= c.cfg.k =>
            {
                c.loads
                    .record_parity(bucket, usize::from(ch) - c.cfg.k, len);
            }
            _ => c.loads.record_data(len),
        }
    }
    (Ok(put), dying)
}
