//! Placing an object's pieces on the bucket's servers (C2DN §4.1, §5).
//!
//! After a fill (and after a hit that found pieces missing), the serving node writes every
//! piece whose server is available and lacks it: two replicas of a small object, or the K data
//! and P parity chunks of a coded one (stripe-major, `ecdn-codec`'s FORMAT.md v2), each with its
//! [`PieceMeta`]: the coding, the CRC-32C of every sub-chunk of every chunk (so a reader can
//! tell a wrong sub-chunk and decode its stripe from the others instead), and the HTTP
//! metadata. The node's own piece goes to its piece store; the others are `PUT` to their
//! servers, all at once. The server that admits a piece records it in its write load (a
//! parity chunk of `c2dn` as its bucket's parity load), which its heartbeats report to the
//! coordinator for parity rebalance.

use std::sync::Arc;

use bytes::Bytes;
use ecdn_cluster::piece::{Coding, PieceMeta};
use ecdn_cluster::wire::{self, PieceName};
use ecdn_codec::{encode_object, ObjectLayout};
use ecdn_placement::pieces::{Piece, Scheme};
use hyper::Method;
use hyper::StatusCode;

use super::super::disk::encode_meta;
use super::super::freshness::StoredResponse;
use super::super::{lock, State};
use super::pieces::{PieceStore, Put};
use super::{Cluster, ClusterStats};

/// CRC-32C of every sub-chunk of every chunk, chunk-major (see [`Coding::crcs`]).
pub(super) fn chunk_crcs(chunks: &[Vec<u8>], sub_chunk: usize) -> Vec<u32> {
    chunks
        .iter()
        .flat_map(|c| c.chunks(sub_chunk.max(1)).map(ecdn_store::crc32c))
        .collect()
}

/// Writes the pieces of `e` that the servers `lacking` (piece index → whether to write it;
/// `None`: all) do not hold yet, on the bucket's available servers; returns when every write
/// is done or failed.
pub(in crate::node) async fn place(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    e: &StoredResponse,
    lacking: Option<&[bool]>,
) {
    let id = ecdn_trace::hash_id(e.key.as_bytes());
    let map = c.map.current();
    let bucket = map.bucket_of(super::object_id(&e.key));
    let size = e.body.len() as u64;
    let coded = c.coded(size);
    let mut placed = Vec::new();
    let mut walk = Vec::new();
    map.pieces(bucket, coded, &mut placed, &mut walk);
    let targets: Vec<Piece> = placed
        .iter()
        .enumerate()
        .filter(|(i, p)| {
            map.is_available(p.server) && lacking.is_none_or(|l| l.get(*i).copied().unwrap_or(true))
        })
        .map(|(_, p)| *p)
        .collect();
    if targets.is_empty() {
        return;
    }
    let http = encode_meta(e);
    // What each target gets: (piece name, metadata, payload).
    let mut writes: Vec<(Piece, PieceName, Vec<u8>, Bytes)> = Vec::with_capacity(targets.len());
    if coded {
        let (k, p) = (c.cfg.k, c.cfg.p);
        let sub = c.cfg.sub_chunk;
        let Ok(codec) = c.codecs.get(k, p) else {
            return;
        };
        let body = e.body.clone();
        let encoded = tokio::task::spawn_blocking(move || {
            let layout = ObjectLayout::new(size, k, p, sub).ok()?;
            let chunks = encode_object(codec.as_ref(), &layout, &body).ok()?;
            let crcs = chunk_crcs(&chunks, sub as usize);
            Some((chunks, crcs))
        })
        .await;
        let Ok(Some((chunks, crcs))) = encoded else {
            eprintln!("ecdn node: encoding {} failed", e.key);
            return;
        };
        let chunks: Vec<Bytes> = chunks.into_iter().map(Bytes::from).collect();
        for t in targets {
            let m = PieceMeta {
                coding: Some(Coding {
                    k: k as u16,
                    p: p as u16,
                    chunk: t.chunk as u16,
                    sub_chunk: sub as u32,
                    size,
                    crcs: crcs.clone(),
                }),
                http: http.clone(),
            };
            writes.push((
                t,
                PieceName::Chunk(t.chunk as u16),
                m.encode(),
                chunks[t.chunk].clone(),
            ));
        }
    } else {
        let m = PieceMeta {
            coding: None,
            http: http.clone(),
        }
        .encode();
        for t in targets {
            writes.push((t, PieceName::Replica, m.clone(), e.body.clone()));
        }
    }
    let mut tasks = tokio::task::JoinSet::new();
    for (t, name, m, payload) in writes {
        let (st, c, key) = (st.clone(), c.clone(), e.key.clone());
        tasks.spawn(async move {
            if t.server == c.id {
                put_local(&st, &c, &key, id, name, m, payload).await;
            } else {
                push(&c, t.server, &key, name, m, payload).await;
            }
        });
    }
    while tasks.join_next().await.is_some() {}
}

/// Stores a piece on this node: admitted by the piece policy and written; its write load
/// recorded. The HOC keeps a decoded copy only while this node holds the object's piece, so
/// objects whose piece the policy evicts leave the HOC too.
pub(super) async fn put_local(
    st: &State,
    c: &Cluster,
    key: &str,
    object: u64,
    name: PieceName,
    meta: Vec<u8>,
    payload: Bytes,
) -> Put {
    let Some(disk) = &st.disk else {
        return Put::Refused;
    };
    let len = payload.len() as u64;
    let mut evicted = Vec::new();
    let put = c
        .pieces
        .put(
            disk,
            PieceStore::piece_id(object, name),
            object,
            PieceStore::entry_key(key, name),
            meta,
            payload,
            &mut evicted,
        )
        .await;
    if !evicted.is_empty() {
        let mut hoc = lock(&st.hoc);
        for o in evicted {
            hoc.remove(o);
        }
    }
    if put == Put::Stored {
        match name {
            PieceName::Chunk(ch) if c.scheme() == Scheme::C2dn && usize::from(ch) >= c.cfg.k => {
                let map = c.map.current();
                let bucket = map.bucket_of(super::object_id(key));
                c.loads
                    .record_parity(bucket, usize::from(ch) - c.cfg.k, len);
            }
            _ => c.loads.record_data(len),
        }
    }
    put
}

/// Sends a piece to node `server`.
async fn push(
    c: &Cluster,
    server: usize,
    key: &str,
    name: PieceName,
    meta: Vec<u8>,
    payload: Bytes,
) {
    let Some(addr) = c.peer_of(server) else {
        return;
    };
    let mut frame = wire::frame_head(&meta);
    frame.extend_from_slice(&payload);
    let n = frame.len() as u64;
    let path = wire::piece_path(name, key, None);
    let sent = c
        .peers
        .send(
            addr,
            Method::PUT,
            &path,
            Bytes::from(frame),
            &[],
            c.peer_timeout * 5,
        )
        .await;
    match sent {
        Ok(r) if r.status() == StatusCode::OK || r.status() == StatusCode::NO_CONTENT => {
            ClusterStats::add(&c.stats.peer_bytes_sent, n);
        }
        Ok(r) => {
            ClusterStats::add(&c.stats.peer_errors, 1);
            eprintln!(
                "ecdn node: storing a piece on node {server}: {}",
                r.status()
            );
        }
        Err(e) => {
            ClusterStats::add(&c.stats.peer_errors, 1);
            eprintln!("ecdn node: storing a piece on node {server}: {e}");
        }
    }
}
