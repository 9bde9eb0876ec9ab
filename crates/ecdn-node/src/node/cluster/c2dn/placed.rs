//! What the bucket's servers hold of an object, as a read learns it (C2DN §5, "Metadata
//! lookups"): the coding a chunk on this node names, the holders the bucket map implies, the
//! servers asked at once (the slow ones presumed to hold what the map assigns them), the
//! servers asked beside a read from the presumed holders (those whose answers the read heard
//! are not asked again), and the protection a read counts from what they hold.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use ecdn_cluster::piece::{Coding, PieceMeta};
use ecdn_cluster::wire::PieceName;
use ecdn_placement::pieces::Piece;
use tokio::sync::oneshot;

use crate::node::cluster::pieces::coded::CodedObject;
use crate::node::cluster::pieces::holders::{ask_has, Holder};
use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::store::PieceStore;
use crate::node::key::CacheKey;
use crate::node::state::State;

/// The coding and HTTP metadata of a chunk of `object` this node holds (`holder`: what it
/// holds), if it holds one: what a node that finds a chunk locally needs to know what to fetch
/// (C2DN §5, "Metadata lookups").
pub(in crate::node) async fn local_coding(
    st: &State,
    c: &Cluster,
    object: u64,
    holder: &Holder,
) -> Option<(Coding, Vec<u8>)> {
    let disk = st.disk.as_ref()?;
    let ch = holder.held.iter().find_map(|p| match p {
        PieceName::Chunk(ch) => Some(*ch),
        _ => None,
    })?;
    let id = PieceStore::piece_id(object, PieceName::Chunk(ch));
    let (m, _) = c.pieces.read(disk, id, Some(0..0)).await?;
    let m = PieceMeta::decode(&m).ok()?;
    Some((m.coding?, m.http))
}

/// The holders the bucket map implies: every assigned server of the bucket's coded pieces
/// holding its chunk. Entry 0 is this node's, empty (the caller puts what it really holds).
pub(in crate::node) fn presumed_holders(c: &Cluster, bucket: usize) -> Vec<Holder> {
    let map = c.map.current();
    let (mut placed, mut walk) = (Vec::new(), Vec::new());
    map.pieces(bucket, true, &mut placed, &mut walk);
    let mut holders = vec![Holder::presumed(c.id, Vec::new())];
    for p in placed.iter().filter(|p| p.server != c.id) {
        holders.push(Holder::presumed(p.server, vec![assigned(p, true)]));
    }
    holders
}

/// The piece the map assigns `p`'s server: its chunk if `coded`, else a replica.
fn assigned(p: &Piece, coded: bool) -> PieceName {
    if coded {
        PieceName::Chunk(p.chunk as u16)
    } else {
        PieceName::Replica
    }
}

/// What the bucket's assigned servers of its pieces (chunks if `coded`, else replicas) hold,
/// asking every available one but this node (whose pieces `here` says) and the slow ones at
/// once; a server that does not answer holds nothing. ([`lacking`] of it: which pieces their
/// servers lack.)
pub(in crate::node) async fn ask_placed(
    c: &Arc<Cluster>,
    key: &CacheKey,
    coded: bool,
    here: &Holder,
) -> Vec<Holder> {
    let map = c.map.current();
    let bucket = map.bucket_of(crate::node::cluster::pieces::names::object_id(&key.key));
    let (mut placed, mut walk) = (Vec::new(), Vec::new());
    map.pieces(bucket, coded, &mut placed, &mut walk);
    // A server this node's probes find much slower than its peers is not waited for: it is
    // presumed to hold what the map assigns it (a piece it lacks is restored by a later hit
    // or by repair, not by this answer).
    let now = Instant::now();
    let (slow, fast): (Vec<&Piece>, Vec<&Piece>) = placed
        .iter()
        .filter(|p| p.server != c.id && map.is_available(p.server))
        .partition(|p| c.slower(p.server, now));
    let mut holders = vec![here.clone()];
    for p in &slow {
        let piece = assigned(p, coded);
        match holders.iter_mut().find(|h| h.server == p.server) {
            Some(h) => h.held.push(piece),
            None => holders.push(Holder::presumed(p.server, vec![piece])),
        }
    }
    let servers = fast.iter().map(|p| p.server).collect();
    holders.extend(ask_servers(c, &key.key, servers).await);
    holders
}

/// What `servers` hold of `key` (those available, but this node), asked at once; a server that
/// does not answer holds nothing.
async fn ask_servers(c: &Arc<Cluster>, key: &str, mut servers: Vec<usize>) -> Vec<Holder> {
    let map = c.map.current();
    servers.sort_unstable();
    servers.dedup();
    servers.retain(|&s| s != c.id && map.is_available(s));
    let mut asks = tokio::task::JoinSet::new();
    for s in servers {
        let (c, k) = (c.clone(), key.to_string());
        asks.spawn(async move { (s, ask_has(&c, s, &k).await) });
    }
    let mut holders = Vec::new();
    while let Some(r) = asks.join_next().await {
        if let Ok((server, answer)) = r {
            // No answer: holds nothing (and there is no age to know).
            holders.push(answer.map_or_else(|| Holder::presumed(server, Vec::new()), |(_, h)| h));
        }
    }
    holders
}

/// [`ask_placed`] for a read from the presumed holders, told the read's answers: the servers
/// whose only assigned pieces are data chunks the read asks of them are not asked again
/// (`heard`, once `read_over`: a `200` holds its chunk). The others are asked beside the read,
/// and so is any server the read did not hear from, or heard lacks its chunk. When what was
/// heard leaves the object with K distinct chunks or fewer, the servers heard are asked too,
/// for every piece they hold, so the protection counted is the one the full answers give.
/// With `reinsert`, every assigned server is asked beside the read: the hit's reinsertion
/// needs every piece's age, which a piece's answer does not say.
pub(in crate::node) async fn ask_placed_beside(
    c: &Arc<Cluster>,
    key: &CacheKey,
    obj: &CodedObject,
    here: &Holder,
    read_over: oneshot::Receiver<()>,
) -> Vec<Holder> {
    let map = c.map.current();
    let bucket = map.bucket_of(crate::node::cluster::pieces::names::object_id(&key.key));
    let (mut placed, mut walk) = (Vec::new(), Vec::new());
    map.pieces(bucket, true, &mut placed, &mut walk);
    let k = obj.layout.k();
    // A piece the read answers: a data chunk read from its assigned server, a peer.
    let read = |chunk: usize, server: usize| {
        chunk < k
            && server != c.id
            && obj.sources.get(chunk) == Some(&Some(server))
            && c.cfg.reinsert.is_none()
    };
    let (mut heard_from, mut others): (Vec<usize>, Vec<usize>) = (Vec::new(), Vec::new());
    for p in &placed {
        if read(p.chunk, p.server) {
            heard_from.push(p.server);
        } else {
            others.push(p.server);
        }
    }
    heard_from.retain(|s| !others.contains(s) && map.is_available(*s));
    heard_from.sort_unstable();
    heard_from.dedup();
    let asked = ask_servers(c, &key.key, others);
    // (A read dropped before its end has heard what it heard: the rest is asked.)
    let (mut holders, _) = tokio::join!(asked, read_over);
    holders.insert(0, here.clone());
    let (mut sure, mut ask) = (Vec::new(), Vec::new());
    for s in heard_from {
        let chunks: Vec<usize> = placed
            .iter()
            .filter(|p| p.server == s)
            .map(|p| p.chunk)
            .collect();
        if chunks.iter().all(|&ch| obj.heard.of(ch) == Some(true)) {
            let held = chunks.iter().map(|&ch| PieceName::Chunk(ch as u16));
            sure.push(Holder::presumed(s, held.collect()));
        } else {
            ask.push(s);
        }
    }
    let heard: Vec<usize> = sure.iter().map(|h| h.server).collect();
    holders.extend(sure);
    if distinct_chunks(c, &holders) <= k {
        // Every piece the servers heard hold may count: ask them.
        holders.retain(|h| !heard.contains(&h.server));
        ask.extend(heard);
    }
    holders.extend(ask_servers(c, &key.key, ask).await);
    holders
}

/// Counts the serving node's read of a cached object (`ecdn_cluster_cached_reads_total`, see
/// `admin.rs`), once per lookup (`once`): protected if `holders` hold replicas on two servers
/// or more (`coded`: K + 1 distinct chunks or more), unprotected otherwise.
pub(in crate::node) fn count_protection(
    c: &Cluster,
    holders: &[Holder],
    coded: bool,
    once: &AtomicBool,
) {
    if once.swap(true, Ordering::Relaxed) {
        return;
    }
    let protected = if coded {
        distinct_chunks(c, holders) > c.cfg.k
    } else {
        let mut servers: Vec<usize> = holders
            .iter()
            .filter(|h| h.held.contains(&PieceName::Replica))
            .map(|h| h.server)
            .collect();
        servers.sort_unstable();
        servers.dedup();
        servers.len() >= 2
    };
    c.stats.cached_read(coded, protected);
}

/// How many of the object's chunks `holders` hold between them.
pub(in crate::node) fn distinct_chunks(c: &Cluster, holders: &[Holder]) -> usize {
    let total = c.cfg.k + c.cfg.p;
    let mut chunks: Vec<u16> = holders
        .iter()
        .flat_map(|h| &h.held)
        .filter_map(|piece| match piece {
            PieceName::Chunk(ch) if usize::from(*ch) < total => Some(*ch),
            _ => None,
        })
        .collect();
    chunks.sort_unstable();
    chunks.dedup();
    chunks.len()
}
