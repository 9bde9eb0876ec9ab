//! Who holds which piece of an object: the `has` questions a node asks the bucket's servers
//! (and the slots' former servers), what the answers make of a coded object's sources, and the
//! signed, checked peer `GET` they and other reads go through.

use std::sync::Arc;

use bytes::Bytes;
use ecdn_cluster::peer::{read_body, verify_response};
use ecdn_cluster::piece::PieceMeta;
use ecdn_cluster::wire::{self, PieceName};
use ecdn_placement::pieces::NO_SERVER;
use hyper::StatusCode;

use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::stats::ClusterStats;

/// What one server said it holds.
pub(in crate::node) struct Holder {
    pub(in crate::node) server: usize,
    pub(in crate::node) held: Vec<PieceName>,
}

/// Asks the bucket's servers and the slots' former servers (those available, but this node)
/// which pieces of `key` they hold, all at once: the servers that answered, with one piece's
/// metadata and what they hold.
pub(in crate::node) async fn ask_holders(
    c: &Arc<Cluster>,
    key: &str,
    bucket: usize,
) -> Vec<(usize, PieceMeta, Vec<PieceName>)> {
    let mut asks = tokio::task::JoinSet::new();
    for s in asked_servers(c, bucket) {
        let (c, key) = (c.clone(), key.to_string());
        asks.spawn(async move { (s, ask_has(&c, s, &key).await) });
    }
    let mut found = Vec::new();
    while let Some(r) = asks.join_next().await {
        if let Ok((server, Some((m, held)))) = r {
            found.push((server, m, held));
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
    let mut holders = vec![Holder {
        server: c.id,
        held: c.pieces.held(object, c.cfg.k + c.cfg.p),
    }];
    for (server, _, held) in ask_holders(c, key, bucket).await {
        holders.push(Holder { server, held });
    }
    sources_of(c, bucket, &holders)
}

/// Asks node `server` which pieces of `key` it holds: their names and one piece's metadata.
pub(in crate::node) async fn ask_has(
    c: &Cluster,
    server: usize,
    key: &str,
) -> Option<(PieceMeta, Vec<PieceName>)> {
    let limit = ecdn_cluster::piece::MAX_META + 512;
    let body = signed_get(c, server, &wire::has_path(key), limit).await?;
    let (m, held) = wire::split_frame(&body).ok()?;
    Some((PieceMeta::decode(m).ok()?, wire::decode_held(held).ok()?))
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
