//! How old the pieces of an object are on the servers that may hold them: each server's
//! `has?ages` answer (its pieces of the object, with the bytes its store wrote after each, over
//! its capacity: how far each piece has moved towards eviction in its FIFO). A read's lookup
//! asks the same question (`pieces/holders.rs`), so a read's write-back knows the ages it
//! needs from answers it awaited anyway (`resync.rs`); this module asks them when it does not
//! (background repair, which skips objects near eviction, `repair.rs`; a read whose servers
//! were presumed rather than asked).

use std::sync::Arc;

use ecdn_cluster::piece::PieceMeta;

use crate::node::cluster::pieces::holders::{ask_has, asked_servers, Holder};
use crate::node::cluster::pieces::member::Cluster;

/// What this node, the bucket's servers and the slots' former servers (those available) hold
/// of `key`, with the pieces' ages, and each peer's piece metadata; a server that does not
/// answer holds nothing. This node comes first (a read prefers it), without metadata.
pub(in crate::node) async fn ask_ages(
    c: &Arc<Cluster>,
    key: &str,
    bucket: usize,
) -> Vec<(Option<PieceMeta>, Holder)> {
    let mut asks = tokio::task::JoinSet::new();
    for s in asked_servers(c, bucket) {
        let (c, key) = (c.clone(), key.to_string());
        asks.spawn(async move { ask_has(&c, s, &key).await });
    }
    let mut peers = Vec::new();
    while let Some(r) = asks.join_next().await {
        if let Ok(Some((m, h))) = r {
            peers.push((Some(m), h));
        }
    }
    peers.sort_by_key(|(_, h)| h.server);
    let mut out = vec![(None, here(c, key))];
    out.extend(peers);
    out
}

/// This node's pieces of `key` and their ages.
pub(in crate::node) fn here(c: &Cluster, key: &str) -> Holder {
    let object = ecdn_trace::hash_id(key.as_bytes());
    let (held, since) = c.pieces.held_ages(object, c.cfg.k + c.cfg.p);
    let capacity = c.pieces.capacity().max(1) as f64;
    Holder {
        server: c.id,
        age: since.iter().map(|&s| s as f64 / capacity).collect(),
        held,
    }
}
