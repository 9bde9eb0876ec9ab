//! How old the pieces of an object are on the servers that may hold them: each server's
//! `has?ages` answer (its pieces of the object, with the bytes its store wrote after each, over
//! its capacity: how far each piece has moved towards eviction in its FIFO). Background repair
//! skips objects near eviction by it (`repair.rs`); resync rewrites them (`resync.rs`).

use std::sync::Arc;

use ecdn_cluster::piece::PieceMeta;
use ecdn_cluster::wire::{self, PieceName};

use crate::node::cluster::pieces::holders::{asked_servers, signed_get};
use crate::node::cluster::pieces::member::Cluster;

/// What one server holds of an object, and how old each piece is.
pub(in crate::node) struct Held {
    pub(in crate::node) server: usize,
    pub(in crate::node) meta: Option<PieceMeta>,
    pub(in crate::node) pieces: Vec<PieceName>,
    /// Per piece, the fraction of the server's FIFO written after it.
    pub(in crate::node) age: Vec<f64>,
}

impl Held {
    /// How old `piece` is here, if this server holds it.
    pub(in crate::node) fn age_of(&self, piece: PieceName) -> Option<f64> {
        let i = self.pieces.iter().position(|&p| p == piece)?;
        self.age.get(i).copied()
    }
}

/// What this node, the bucket's servers and the slots' former servers (those available) hold
/// of `key`, with the pieces' ages; a server that does not answer holds nothing.
pub(in crate::node) async fn ask_ages(c: &Arc<Cluster>, key: &str, bucket: usize) -> Vec<Held> {
    let mut asks = tokio::task::JoinSet::new();
    for s in asked_servers(c, bucket) {
        let (c, key) = (c.clone(), key.to_string());
        asks.spawn(async move { ask_one(&c, s, &key).await });
    }
    let mut peers = Vec::new();
    while let Some(r) = asks.join_next().await {
        if let Ok(Some(h)) = r {
            peers.push(h);
        }
    }
    // This node first (a read prefers it), then by id.
    peers.sort_by_key(|h| h.server);
    let mut out = vec![here(c, key)];
    out.extend(peers);
    out
}

/// This node's pieces of `key` and their ages.
fn here(c: &Cluster, key: &str) -> Held {
    let object = ecdn_trace::hash_id(key.as_bytes());
    let (pieces, since) = c.pieces.held_ages(object, c.cfg.k + c.cfg.p);
    let capacity = c.pieces.capacity().max(1) as f64;
    Held {
        server: c.id,
        meta: None,
        age: since.iter().map(|&s| s as f64 / capacity).collect(),
        pieces,
    }
}

/// Node `server`'s `has?ages` answer for `key`.
async fn ask_one(c: &Cluster, server: usize, key: &str) -> Option<Held> {
    let limit = ecdn_cluster::piece::MAX_META + 4096;
    let body = signed_get(c, server, &wire::has_ages_path(key), limit).await?;
    let (m, rest) = wire::split_frame(&body).ok()?;
    let (pieces, capacity, since) = wire::decode_held_ages(rest).ok()?;
    let capacity = capacity.max(1) as f64;
    Some(Held {
        server,
        meta: PieceMeta::decode(m).ok(),
        age: since.iter().map(|&s| s as f64 / capacity).collect(),
        pieces,
    })
}
