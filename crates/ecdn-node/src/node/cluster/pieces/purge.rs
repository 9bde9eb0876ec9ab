//! A `PURGE` across the cluster: a number from the cluster's sequence (`purge_log.rs`), this
//! node's copies, then every other node's (a signed `DELETE` of the object's `has` path with
//! that number).

use std::time::Duration;

use bytes::Bytes;
use ecdn_cluster::piece::PieceMeta;
use ecdn_cluster::wire::{self, PieceName};

use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::names::object_id;
use crate::node::cluster::pieces::purge_log::UNORDERED;
use crate::node::cluster::pieces::store::{self as store, PieceStore};
use crate::node::state::State;

/// How long a purge waits for its number before going on without one ([`UNORDERED`]).
const SEQUENCE_TIMEOUT: Duration = Duration::from_secs(5);

/// A `PURGE` in a cluster, after this node dropped its own copies (`purged`: whether it held
/// any): its number from the cluster's sequence (none when the coordinator or etcd does not
/// give one in time), this node's copies filled before it, then a signed `DELETE` of the
/// object's `has` path with the number to every other node the map has available, all at
/// once; each drops its copies filled before it (the bucket's serving node, its decoded copy
/// in the HOC too). Whether any node held something, the nodes that did not confirm, and the
/// number (`None`: unnumbered).
pub(in crate::node) async fn purge(
    st: &State,
    c: &std::sync::Arc<Cluster>,
    primary: &str,
    mut purged: bool,
) -> (bool, Vec<usize>, Option<u64>) {
    let number = match tokio::time::timeout(SEQUENCE_TIMEOUT, c.objects.sequence()).await {
        Ok(Ok(n)) if n < UNORDERED => Some(n),
        Ok(Ok(_)) => None,
        Ok(Err(e)) => {
            eprintln!("ecdn node: purging {primary} without a number: {e}");
            None
        }
        Err(_) => {
            eprintln!("ecdn node: purging {primary} without a number: the sequence did not answer in {SEQUENCE_TIMEOUT:?}");
            None
        }
    };
    let n = number.unwrap_or(UNORDERED);
    purged |= drop_here(st, c, primary, n).await.unwrap_or(false);
    let map = c.map.current();
    let mut asks = tokio::task::JoinSet::new();
    for server in (0..map.servers()).filter(|&s| s != c.id && map.is_available(s)) {
        let (c, key) = (c.clone(), primary.to_string());
        asks.spawn(async move {
            let answer = purge_answer(&c, server, &key, n).await;
            (server, answer)
        });
    }
    let mut unreached = Vec::new();
    while let Some(r) = asks.join_next().await {
        match r {
            Ok((_, Some(held))) => purged |= held,
            Ok((server, None)) => unreached.push(server),
            Err(_) => {}
        }
    }
    unreached.sort_unstable();
    (purged, unreached, number)
}

/// Purge `number` of `key` carried out here (a peer's `DELETE`, or this node's own `PURGE`):
/// recorded first, then this node's copies of the object dropped — its HOC copy, disk entry
/// and variants, and the pieces of it filled before `number` (all of them for
/// [`UNORDERED`]); a piece filled at or after it was fetched after the purge was asked for
/// and stays. Whether it held any; an error when the disk could not record the removal.
pub(in crate::node) async fn drop_here(
    st: &State,
    c: &Cluster,
    key: &str,
    number: u64,
) -> Result<bool, String> {
    let drop_copies = async {
        // The node's disk entry of a replicated object is its replica: a numbered purge drops
        // it with the pieces, only if filled before the purge.
        let mut purged = if number == UNORDERED {
            st.invalidate(key).await?
        } else {
            st.forget_in_memory(key)
        };
        if let Some(disk) = &st.disk {
            let object = ecdn_trace::hash_id(key.as_bytes());
            let pieces = store::pieces_per_object(&c.cfg, key);
            let mut older = Vec::new();
            for name in c.pieces.held(object, pieces) {
                if number == UNORDERED || filled_of(c, disk, object, name).await < number {
                    older.push(name);
                }
            }
            purged |= c.pieces.drop_pieces(disk, object, older).await > 0;
        }
        Ok::<_, String>(purged)
    };
    let now = ecdn_cluster::auth::unix_now_ms();
    c.purges
        .purge(object_id(key), number, now, drop_copies)
        .await
}

/// The purge number piece `name` of `object` was filled at (0 when its metadata does not
/// say: a piece of an earlier version, or one that cannot be read).
async fn filled_of(
    c: &Cluster,
    disk: &crate::node::disk::Disk,
    object: u64,
    name: PieceName,
) -> u64 {
    let id = PieceStore::piece_id(object, name);
    let meta = c.pieces.read(disk, id, Some(0..0)).await;
    meta.and_then(|(meta, _)| PieceMeta::decode(&meta).ok())
        .map_or(0, |m| filled_in(&m))
}

/// The purge number a piece's metadata says its bytes were filled at (0 when it does not say:
/// an EC-Cache split, a piece of an earlier version).
pub(in crate::node) fn filled_in(meta: &PieceMeta) -> u64 {
    crate::node::meta::decode(&meta.http).map_or(0, |m| m.filled)
}

/// Has node `server` carry out purge `number` of `key` (the peer `DELETE` of its `has` path,
/// with the number unless [`UNORDERED`]): `Some(whether it held any)`, `None` when it did not
/// confirm.
async fn purge_answer(c: &Cluster, server: usize, key: &str, number: u64) -> Option<bool> {
    let addr = c.peer_of(server)?;
    let path = if number == UNORDERED {
        wire::has_path(key)
    } else {
        wire::purge_path(key, number)
    };
    let sent = c.peers.send(
        addr,
        hyper::Method::DELETE,
        &path,
        Bytes::new(),
        &[],
        c.peer_timeout,
    );
    match sent.await {
        Ok(r) if r.status() == hyper::StatusCode::OK => {
            let body = ecdn_cluster::peer::read_body(r.into_body(), 64)
                .await
                .ok()?;
            Some(body.as_ref() == b"purged\n")
        }
        _ => None,
    }
}

/// [`purge_answer`] for the object API: whether `server` dropped a piece of `key` (a deleted
/// version's splits: unnumbered, as a version is never written again).
pub(in crate::node) async fn purge_on(c: &Cluster, server: usize, key: &str) -> bool {
    purge_answer(c, server, key, UNORDERED).await == Some(true)
}
