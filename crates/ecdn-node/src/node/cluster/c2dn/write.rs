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
//!
//! A fill of a coded object does not wait for the whole object: [`StripePlacer`] encodes it
//! stripe by stripe as the origin's bytes arrive and streams each chunk to its server
//! (`pieces/chunk_streams.rs`); an origin that fails mid-body leaves nothing stored.

use std::sync::Arc;

use bytes::Bytes;
use ecdn_cluster::piece::{Coding, Digest, PieceMeta};
use ecdn_cluster::wire::{self, PieceName};
use ecdn_codec::{encode_object, ObjectLayout};
use ecdn_placement::pieces::Piece;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, StatusCode};

use crate::node::cluster::pieces::chunk_streams::ChunkStreams;
use crate::node::cluster::pieces::local::{pushed, put_local, renew_local};
use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::stats::ClusterStats;
use crate::node::cluster::pieces::store::{chunk_sums, RENEW};
use crate::node::cluster::pieces::together::{drop_dying, dying_in_answer};
use crate::node::disk::encode_meta;
use crate::node::freshness::StoredResponse;
use crate::node::state::State;

/// Pieces whose writes failed: `(piece index in the bucket's placement, server)`, and the
/// epoch of the map that placed them (what `handoff.rs` waits past).
pub(in crate::node) type Failed = (u64, Vec<(usize, usize)>);

/// Writes the pieces of `e` that the servers `lacking` (piece index → whether to write it;
/// `None`: all) do not hold yet, on the bucket's available servers; those `renew` names (piece
/// index → whether) replace the copy their server holds (`resync.rs`). Returns, when every
/// write is done or failed, the pieces whose writes failed (`handoff.rs` hands them off).
pub(in crate::node) async fn place(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    e: &StoredResponse,
    lacking: Option<&[bool]>,
    renew: &[bool],
) -> Failed {
    let size = e.body.len() as u64;
    let coded = c.coded(size);
    let (epoch, targets) = targets(c, &e.key, coded, lacking);
    if targets.is_empty() {
        return (epoch, Vec::new());
    }
    let http = encode_meta(e);
    // What each target gets: (piece index, piece, piece name, metadata, payload).
    let mut writes: Vec<(usize, Piece, PieceName, Vec<u8>, Bytes)> =
        Vec::with_capacity(targets.len());
    if coded {
        let (k, p) = (c.cfg.k, c.cfg.p);
        let sub = c.cfg.sub_chunk;
        let Ok(codec) = c.codecs.get(k, p) else {
            return (epoch, Vec::new());
        };
        let body = e.body.clone();
        let encoded = tokio::task::spawn_blocking(move || {
            let layout = ObjectLayout::new(size, k, p, sub).ok()?;
            let chunks = encode_object(codec.as_ref(), &layout, &body).ok()?;
            let sums = chunk_sums(&chunks, sub as usize);
            Some((chunks, sums))
        })
        .await;
        let Ok(Some((chunks, sums))) = encoded else {
            eprintln!(
                "ecdn node: encoding {} failed{}",
                e.key,
                ecdn_cluster::peer::request_note()
            );
            return (epoch, Vec::new());
        };
        let chunks: Vec<Bytes> = chunks.into_iter().map(Bytes::from).collect();
        for (i, t) in targets {
            let m = chunk_meta(c, t.chunk, size, &sums, &http);
            writes.push((
                i,
                t,
                PieceName::Chunk(t.chunk as u16),
                m,
                chunks[t.chunk].clone(),
            ));
        }
    } else {
        let m = PieceMeta {
            coding: None,
            http: http.clone(),
        }
        .encode();
        for (i, t) in targets {
            writes.push((i, t, PieceName::Replica, m.clone(), e.body.clone()));
        }
    }
    let mut tasks = tokio::task::JoinSet::new();
    for (i, t, name, m, payload) in writes {
        let (st, c, key, filled) = (st.clone(), c.clone(), e.key.clone(), e.filled);
        let renew = renew.get(i).copied().unwrap_or(false);
        tasks.spawn(async move {
            if t.server == c.id {
                if renew {
                    renew_local(&c, &key, name);
                }
                (
                    i,
                    t.server,
                    true,
                    put_local(&st, &c, &key, c.cfg.k, name, m, payload, filled)
                        .await
                        .1,
                )
            } else {
                let (stored, dying) = push(&c, t.server, &key, name, m, payload, renew).await;
                (i, t.server, stored, dying)
            }
        });
    }
    // What the writes evicted leaves whole once every piece is written (`evict_together`).
    let mut dying = Vec::new();
    let mut failed = Vec::new();
    while let Some(done) = tasks.join_next().await {
        let Ok((i, server, stored, evicted)) = done else {
            continue;
        };
        if !stored {
            failed.push((i, server));
        }
        dying.extend(evicted);
    }
    drop_dying(st, c, dying).await;
    (epoch, failed)
}

/// The pieces of the object `key` (coded or not) whose servers are available and, with
/// `lacking` (piece index → whether to write it), lack them, with their indexes in the
/// bucket's placement; and the epoch of the map that placed them.
fn targets(
    c: &Cluster,
    key: &str,
    coded: bool,
    lacking: Option<&[bool]>,
) -> (u64, Vec<(usize, Piece)>) {
    let map = c.map.current();
    let bucket = map.bucket_of(crate::node::cluster::pieces::names::object_id(key));
    let mut placed = Vec::new();
    let mut walk = Vec::new();
    map.pieces(bucket, coded, &mut placed, &mut walk);
    let targets = placed
        .iter()
        .enumerate()
        .filter(|(i, p)| {
            map.is_available(p.server) && lacking.is_none_or(|l| l.get(*i).copied().unwrap_or(true))
        })
        .map(|(i, p)| (i, *p))
        .collect();
    (map.epoch, targets)
}

/// The encoded metadata of chunk `chunk` of a coded object of `size` bytes, its sub-chunks'
/// CRC-32C values and digests `(crcs, digests)`.
fn chunk_meta(
    c: &Cluster,
    chunk: usize,
    size: u64,
    (crcs, digests): &(Vec<u32>, Vec<Digest>),
    http: &[u8],
) -> Vec<u8> {
    PieceMeta {
        coding: Some(Coding {
            k: c.cfg.k as u16,
            p: c.cfg.p as u16,
            chunk: chunk as u16,
            sub_chunk: c.cfg.sub_chunk as u32,
            size,
            crcs: crcs.clone(),
            digests: digests.clone(),
        }),
        http: http.to_vec(),
    }
    .encode()
}

/// A coded object's chunks placed while its fill arrives (see the module documentation).
pub(in crate::node) struct StripePlacer {
    /// The size the origin declared; the fill must match it.
    size: u64,
    streams: ChunkStreams,
    /// The epoch of the map that placed the chunks, and each chunk's server (`None`: its
    /// server was unavailable).
    epoch: u64,
    servers: Vec<Option<usize>>,
}

impl StripePlacer {
    /// A placer for the fill of `key`, whose origin declared `declared` bytes; `None` unless
    /// the object is to be coded (its declared size above the threshold, with a piece store).
    pub(in crate::node) fn start(
        st: &State,
        c: &Cluster,
        key: &str,
        declared: Option<u64>,
    ) -> Option<StripePlacer> {
        let size = declared?;
        if !c.coded(size) || st.disk.is_none() {
            return None;
        }
        let (k, p) = (c.cfg.k, c.cfg.p);
        let mut servers = vec![None; k + p];
        let (epoch, targets) = self::targets(c, key, true, None);
        for (_, t) in targets {
            if let Some(slot) = servers.get_mut(t.chunk) {
                *slot = Some(t.server);
            }
        }
        let chunk_bytes = size.div_ceil(k as u64) as usize;
        let streams =
            ChunkStreams::open(c, key, (k, p), &servers, chunk_bytes)?.with_sub_chunk_digests();
        Some(StripePlacer {
            size,
            streams,
            epoch,
            servers,
        })
    }

    /// Object bytes as they arrive: every stripe they complete is encoded and its sub-chunks
    /// sent on (never waits). False when the fill no longer matches the placement (more bytes
    /// than declared, or the encoder failed): then [`StripePlacer::abort`] it.
    pub(in crate::node) fn push(&mut self, bytes: &[u8]) -> bool {
        self.streams.bytes_pushed() + bytes.len() as u64 <= self.size && self.streams.push(bytes)
    }

    /// The fill ended with `e`, the stored answer: the last stripe is encoded and sent, every
    /// chunk's metadata follows its payload, this node's chunk is stored, and this returns once
    /// every server answered (or failed), with the chunks whose writes failed. A fill that does
    /// not match the declared size, or that is not coded after all, is aborted instead.
    pub(in crate::node) async fn finish(
        mut self,
        st: &Arc<State>,
        c: &Arc<Cluster>,
        e: &StoredResponse,
    ) -> Failed {
        let aborted = (self.epoch, Vec::new());
        if e.body.len() as u64 != self.size || self.streams.bytes_pushed() != self.size {
            self.abort();
            return aborted;
        }
        match self.streams.end() {
            Some(layout) if layout.size() == self.size => {}
            _ => {
                self.abort();
                return aborted;
            }
        }
        ClusterStats::add(&c.stats.streamed_fills, 1);
        let sums = (self.streams.crcs(), self.streams.sub_chunk_digests());
        let http = encode_meta(e);
        let size = self.size;
        let mut dying = Vec::new();
        let stored = self
            .streams
            .store(
                st,
                c,
                |chunk| chunk_meta(c, chunk, size, &sums, &http),
                e.filled,
                &mut dying,
            )
            .await;
        drop_dying(st, c, dying).await;
        // A coded object's placement lists its chunks in order: piece index = chunk.
        let failed: Vec<(usize, usize)> = self
            .servers
            .iter()
            .enumerate()
            .filter_map(|(chunk, s)| Some((chunk, (*s)?)))
            .filter(|(chunk, _)| !stored.get(*chunk).copied().unwrap_or(false))
            .collect();
        (self.epoch, failed)
    }

    /// Gives up: every streamed body ends in an error, so no server stores a chunk.
    pub(in crate::node) fn abort(self) {
        self.streams.abort();
    }
}

/// Sends a piece to node `server` (with `renew`, to replace the copy it holds); whether it
/// stored it, and the objects it evicted a piece of to do so that are to leave whole
/// (`evict_together`, `pieces/together.rs`).
pub(in crate::node) async fn push(
    c: &Cluster,
    server: usize,
    key: &str,
    name: PieceName,
    meta: Vec<u8>,
    payload: Bytes,
    renew: bool,
) -> (bool, Vec<u64>) {
    let Some(addr) = c.peer_of(server) else {
        return (false, Vec::new());
    };
    let mut frame = Vec::with_capacity(payload.len() + meta.len() + 4);
    frame.extend_from_slice(&payload);
    frame.extend_from_slice(&wire::frame_tail(&meta));
    let n = frame.len() as u64;
    let path = wire::piece_path(name, key, None);
    let headers: Vec<(HeaderName, HeaderValue)> = if renew {
        vec![(
            HeaderName::from_static(RENEW),
            HeaderValue::from_static("1"),
        )]
    } else {
        Vec::new()
    };
    let sent = c
        .peers
        .send(
            addr,
            Method::PUT,
            &path,
            Bytes::from(frame),
            &headers,
            c.peer_timeout * 5,
        )
        .await;
    let status = sent.as_ref().map(|r| r.status()).map_err(|e| e.to_string());
    let stored = status.as_ref().is_ok_and(|s| *s == StatusCode::OK);
    pushed(c, server, true, n, status);
    let dying = match sent {
        Ok(r) if stored && c.cfg.evict_together => dying_in_answer(c, server, &path, r).await,
        _ => Vec::new(),
    };
    (stored, dying)
}
