//! Whole-object eviction (`evict_together` in the cluster file; `ecdn sim cluster
//! --evict-together` is the same rule): when a node's piece policy evicts a piece of a cached
//! object that the bucket map assigns this node, the object's other pieces leave every node
//! too. The nodes' FIFOs move at different speeds, so without it an object leaves the cluster a
//! chunk at a time, and the fragments are the unprotected objects (1–3% of the cached coded
//! objects on the download classes; BENCHMARKS.md, issue 63). A piece the map no longer
//! assigns this node (a parity move leaves the old chunk on its former server until its FIFO
//! reaches it) takes nothing with it: the piece is, or will be written, where the map puts it
//! now, and dropping a hot object for a stale copy was most of what whole eviction cost
//! (BENCHMARKS.md, "Whole-object eviction keeps what a stale copy's eviction dropped").
//!
//! The node that writes an object's pieces (a fill's serving node, a restore after a hit, a
//! repair) collects what the holders' policies evicted to admit them: its own ([`put_local`]'s
//! second value) and the others' (their signed `PUT` answers, [`wire::decode_stored`], read by
//! [`dying_in_answer`]). Once every piece of the object is written, [`drop_dying`] has every
//! available node drop every piece of those objects: this node at once, the others by a signed
//! `POST /_peer/dying`, waited for. The simulator drops at the same point (after a cache
//! object's stores), so with one client the nodes hold what its servers hold.
//!
//! A drop is durable (a tombstone, as a purge's) so that a restart does not bring the piece
//! back; it is not a purge otherwise: no later write of the object is refused.
//!
//! [`put_local`]: super::local::put_local

use std::sync::Arc;

use bytes::Bytes;
use ecdn_cluster::wire::{self, PieceName};
use hyper::{Method, StatusCode};

use crate::node::cluster::pieces::holders::verified_body;
use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::stats::ClusterStats;
use crate::node::cluster::pieces::store::Evicted;
use crate::node::lock::lock;
use crate::node::state::State;

/// Whether the eviction `e` (from this node's policy) takes its object's other pieces with
/// it: when the map assigns this node the evicted piece (the chunk, or one of the copies),
/// or when the object's bucket is not known (a piece registered at start, read since).
pub(in crate::node) fn leaves_whole(c: &Cluster, e: &Evicted) -> bool {
    let Some(bucket) = e.bucket else {
        return true;
    };
    let coded = matches!(e.piece, PieceName::Chunk(_));
    let (mut placed, mut walk) = (Vec::new(), Vec::new());
    c.map
        .current()
        .pieces(bucket, coded, &mut placed, &mut walk);
    placed.iter().any(|p| {
        p.server == c.id
            && match e.piece {
                PieceName::Chunk(ch) => p.chunk == usize::from(ch),
                PieceName::Replica => true,
            }
    })
}

/// The objects node `server` evicted a piece of to store the piece `PUT` to `path`, read from
/// its `200` answer `resp` (signed, [`wire::encode_stored`]). An answer that does not verify or
/// parse names none (and counts a peer error): the piece was stored all the same.
pub(in crate::node) async fn dying_in_answer(
    c: &Cluster,
    server: usize,
    path: &str,
    resp: hyper::Response<hyper::body::Incoming>,
) -> Vec<u64> {
    let limit = 16 + 8 * wire::MAX_OBJECTS;
    // The piece is stored once the status is in: a body that does not follow in time (a peer
    // cut off mid-answer) holds up nothing.
    let read = tokio::time::timeout(c.peer_timeout, verified_body(c, server, path, resp, limit));
    let Ok(Some(body)) = read.await else {
        c.stats.peer_error(server);
        eprintln!(
            "ecdn node: node {server}'s answer to a piece write did not come whole in time or \
             did not verify{}",
            ecdn_cluster::peer::request_note()
        );
        return Vec::new();
    };
    match wire::decode_stored(&body) {
        Ok(dying) => dying,
        Err(e) => {
            c.stats.peer_error(server);
            eprintln!(
                "ecdn node: node {server}'s answer to a piece write: {e}{}",
                ecdn_cluster::peer::request_note()
            );
            Vec::new()
        }
    }
}

/// Has every available node drop every piece of the objects `dying` (see the module
/// documentation): this node first, then the others all at once; returns when each answered
/// or failed (a node that did not drop them keeps the pieces until its FIFO reaches them).
pub(in crate::node) async fn drop_dying(st: &State, c: &Arc<Cluster>, mut dying: Vec<u64>) {
    if dying.is_empty() {
        return;
    }
    dying.sort_unstable();
    dying.dedup();
    drop_here(st, c, &dying).await;
    let map = c.map.current();
    let body = Bytes::from(wire::encode_objects(&dying));
    let mut asks = tokio::task::JoinSet::new();
    for server in (0..map.servers()).filter(|&s| s != c.id && map.is_available(s)) {
        let Some(addr) = c.peer_of(server) else {
            continue;
        };
        let (c, body) = (c.clone(), body.clone());
        asks.spawn(async move {
            let sent = c.peers.send(
                addr,
                Method::POST,
                wire::DYING_PATH,
                body,
                &[],
                c.peer_timeout,
            );
            let why = match sent.await {
                Ok(r) if r.status() == StatusCode::OK => return,
                Ok(r) => r.status().to_string(),
                Err(e) => e.to_string(),
            };
            c.stats.peer_error(server);
            eprintln!(
                "ecdn node: dropping dying objects on node {server}: {why}{}",
                ecdn_cluster::peer::request_note()
            );
        });
    }
    while asks.join_next().await.is_some() {}
}

/// Drops every piece this node holds of the objects `objects`, and its decoded copies of them;
/// returns how many pieces it dropped.
pub(in crate::node) async fn drop_here(st: &State, c: &Cluster, objects: &[u64]) -> u64 {
    let Some(disk) = &st.disk else {
        return 0;
    };
    ClusterStats::add(&c.stats.dying_objects, objects.len() as u64);
    let chunks = c.cfg.k + c.cfg.p;
    let mut dropped = 0;
    for &object in objects {
        dropped += c.pieces.drop_object(disk, object, chunks).await;
        lock(&st.hoc).remove(object);
    }
    ClusterStats::add(&c.stats.dying_pieces_dropped, dropped);
    dropped
}
