//! Who holds which piece of an object, and how old each is: the `has?ages` questions a node
//! asks the bucket's servers (and the slots' former servers), what the answers make of a
//! coded object's sources and of the pieces its placement lacks, and the signed, checked peer
//! `GET` they and other reads go through.

use std::sync::Arc;

use bytes::Bytes;
use ecdn_cluster::peer::{read_body, verify_response};
use ecdn_cluster::piece::PieceMeta;
use ecdn_cluster::wire::{self, PieceName};
use ecdn_placement::pieces::NO_SERVER;
use hyper::StatusCode;

use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::stats::ClusterStats;

/// What one server said it holds (or is presumed to hold).
#[derive(Clone)]
pub(in crate::node) struct Holder {
    pub(in crate::node) server: usize,
    pub(in crate::node) held: Vec<PieceName>,
    /// Per piece of `held` (in its order), how old it is: the fraction of the server's FIFO
    /// written after it, as its `has?ages` answer said. Empty when not known (what a server
    /// is presumed to hold, or this node's own pieces, whose ages it reads itself).
    pub(in crate::node) age: Vec<f64>,
}

impl Holder {
    /// A server presumed (or known otherwise than by its answer) to hold `held`, ages unknown.
    pub(in crate::node) fn presumed(server: usize, held: Vec<PieceName>) -> Holder {
        Holder {
            server,
            held,
            age: Vec::new(),
        }
    }

    /// Whether the ages of what it holds are known (nothing held: nothing to know).
    pub(in crate::node) fn aged(&self) -> bool {
        self.age.len() == self.held.len()
    }

    /// How old `piece` is here, if this server holds it and said how old.
    pub(in crate::node) fn age_of(&self, piece: PieceName) -> Option<f64> {
        let i = self.held.iter().position(|&p| p == piece)?;
        self.age.get(i).copied()
    }
}

/// Asks the bucket's servers and the slots' former servers (those available, but this node)
/// which pieces of `key` they hold, all at once: the servers that answered, each with one
/// piece's metadata, what it holds and how old.
pub(in crate::node) async fn ask_holders(
    c: &Arc<Cluster>,
    key: &str,
    bucket: usize,
) -> Vec<(PieceMeta, Holder)> {
    let mut asks = tokio::task::JoinSet::new();
    for s in asked_servers(c, bucket) {
        let (c, key) = (c.clone(), key.to_string());
        asks.spawn(async move { ask_has(&c, s, &key).await });
    }
    let mut found = Vec::new();
    while let Some(r) = asks.join_next().await {
        if let Ok(Some(answer)) = r {
            found.push(answer);
        }
    }
    found
}

/// The servers a node asks who holds an object of `bucket`: the bucket's servers of both kinds
/// of pieces and the slots' former servers, those available, but this node.
pub(in crate::node) fn asked_servers(c: &Cluster, bucket: usize) -> Vec<usize> {
    let map = c.map.current();
    let chunks = if c.scheme().coded() {
        c.cfg.k + c.cfg.p
    } else {
        0
    };
    let mut servers = Vec::new();
    let (mut placed, mut walk) = (Vec::new(), Vec::new());
    for coded in [false, true] {
        map.pieces(bucket, coded, &mut placed, &mut walk);
        servers.extend(placed.iter().map(|p| p.server));
    }
    for ch in 0..chunks.max(2) {
        servers.extend(
            map.former(bucket, ch)
                .into_iter()
                .filter(|&s| s != NO_SERVER),
        );
    }
    servers.sort_unstable();
    servers.dedup();
    servers.retain(|&s| s != c.id && map.is_available(s));
    servers
}

/// A source per chunk of a coded object in `bucket`: its assigned server if that holds it,
/// else any holder (the first in `holders` that does).
pub(in crate::node) fn sources_of(
    c: &Cluster,
    bucket: usize,
    holders: &[Holder],
) -> Vec<Option<usize>> {
    let map = c.map.current();
    let (mut placed, mut walk) = (Vec::new(), Vec::new());
    map.pieces(bucket, true, &mut placed, &mut walk);
    (0..c.cfg.k + c.cfg.p)
        .map(|ch| {
            let want = PieceName::Chunk(ch as u16);
            let assigned = placed.iter().find(|pc| pc.chunk == ch).map(|pc| pc.server);
            holders
                .iter()
                .find(|h| Some(h.server) == assigned && h.held.contains(&want))
                .or_else(|| holders.iter().find(|h| h.held.contains(&want)))
                .map(|h| h.server)
        })
        .collect()
}

/// The sources of a coded object's chunks as the servers say now (this node's piece store,
/// and the `has` answers of the bucket's servers): what a read whose sources failed goes on
/// with.
pub(in crate::node) async fn refind_sources(
    c: &Arc<Cluster>,
    key: &str,
    object: u64,
) -> Vec<Option<usize>> {
    let map = c.map.current();
    let bucket = map.bucket_of(crate::node::cluster::pieces::names::object_id(key));
    let here = Holder::presumed(c.id, c.pieces.held(object, c.cfg.k + c.cfg.p));
    let mut holders = vec![here];
    holders.extend(
        ask_holders(c, key, bucket)
            .await
            .into_iter()
            .map(|(_, h)| h),
    );
    sources_of(c, bucket, &holders)
}

/// Asks node `server` which pieces of `key` it holds, and how old they are (`has?ages`: the
/// ages cost the answer 8 bytes a piece, and spare the reads that write back a second round,
/// `resync.rs`): one piece's metadata, and what it holds. `None` when it holds nothing or does
/// not answer.
pub(in crate::node) async fn ask_has(
    c: &Cluster,
    server: usize,
    key: &str,
) -> Option<(PieceMeta, Holder)> {
    let limit = ecdn_cluster::piece::MAX_META + 4096;
    let body = signed_get(c, server, &wire::has_ages_path(key), limit).await?;
    let (m, rest) = wire::split_frame(&body).ok()?;
    let (held, capacity, since) = wire::decode_held_ages(rest).ok()?;
    let capacity = capacity.max(1) as f64;
    let age = since.iter().map(|&s| s as f64 / capacity).collect();
    Some((PieceMeta::decode(m).ok()?, Holder { server, held, age }))
}

/// A signed answer of node `server` to `GET path`, of at most `limit` bytes, its signature and
/// digest checked; `None` for anything else (a failed peer, `404`, a bad signature).
pub(in crate::node) async fn signed_get(
    c: &Cluster,
    server: usize,
    path: &str,
    limit: usize,
) -> Option<Bytes> {
    let resp = c.peer_get(server, path).await?;
    if resp.status() != StatusCode::OK {
        return None;
    }
    verified_body(c, server, path, resp, limit).await
}

/// The body of node `server`'s answer `resp` to `GET path`, of at most `limit` bytes, its
/// signature and digest checked; `None` (and a peer error counted) when they fail.
pub(in crate::node) async fn verified_body(
    c: &Cluster,
    server: usize,
    path: &str,
    resp: hyper::Response<hyper::body::Incoming>,
    limit: usize,
) -> Option<Bytes> {
    let (parts, body) = resp.into_parts();
    let Ok(body) = read_body(body, limit).await else {
        c.stats.peer_error(server);
        return None;
    };
    ClusterStats::add(&c.stats.peer_bytes_received, body.len() as u64);
    let now = ecdn_cluster::auth::unix_now_ms();
    if verify_response(c.peers.key(), path, &parts, &body, now).is_err() {
        c.stats.peer_error(server);
        return None;
    }
    Some(body)
}

/// Per piece of the object's placement, whether its server lacks it (to be written).
pub(in crate::node) fn lacking(
    c: &Cluster,
    key: &str,
    coded: bool,
    holders: &[Holder],
) -> Vec<bool> {
    let bucket = c
        .map
        .current()
        .bucket_of(crate::node::cluster::pieces::names::object_id(key));
    lacking_in(c, bucket, coded, |server, want| {
        holders
            .iter()
            .any(|h| h.server == server && h.held.contains(&want))
    })
    .into_iter()
    .map(|(_, lacks)| lacks)
    .collect()
}

/// Per piece of the placement of an object of `bucket` (chunks if `coded`, else replicas),
/// its server and whether that lacks it: `holds(server, piece)` says what each server holds.
pub(in crate::node) fn lacking_in(
    c: &Cluster,
    bucket: usize,
    coded: bool,
    holds: impl Fn(usize, PieceName) -> bool,
) -> Vec<(usize, bool)> {
    let (mut placed, mut walk) = (Vec::new(), Vec::new());
    c.map
        .current()
        .pieces(bucket, coded, &mut placed, &mut walk);
    placed
        .iter()
        .map(|p| {
            let want = if coded {
                PieceName::Chunk(p.chunk as u16)
            } else {
                PieceName::Replica
            };
            (p.server, !holds(p.server, want))
        })
        .collect()
}
