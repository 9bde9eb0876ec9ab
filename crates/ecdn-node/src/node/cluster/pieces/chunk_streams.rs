//! Chunks streamed to their servers while the object's bytes arrive: the machinery under a
//! coded fill's placement (`write::StripePlacer`, C2DN) and an EC-Cache object's `PUT`
//! (`objects/api.rs`).
//!
//! The object is encoded stripe by stripe as its bytes are pushed (`ecdn_codec::StripeEncoder`,
//! which buffers at most one stripe). This node's own chunk is gathered in memory and stored
//! at the end; every other chunk's sub-chunks go to its server in one streamed, signed `PUT`
//! whose metadata (with every sub-chunk's CRC-32C, known only at the end) follows the payload
//! (`wire`'s trailing frame). The servers store their chunks when the body ends and checks
//! out, as they would a whole one; [`ChunkStreams::abort`] ends every body in an error, so
//! nothing is stored.

use std::sync::Arc;

use bytes::Bytes;
use ecdn_cluster::peer::{BodySender, PeerAnswer};
use ecdn_cluster::piece::{digest, Digest};
use ecdn_cluster::wire::{self, PieceName};
use ecdn_codec::{ObjectLayout, Stripe, StripeEncoder};
use ecdn_objects::digest::{Sha, WindowHasher};
use hyper::{Method, StatusCode};

use crate::node::cluster::pieces::local::{pushed, put_local};
use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::store::Put;
use crate::node::cluster::pieces::together::dying_in_answer;
use crate::node::state::State;

/// Where one chunk goes.
enum Target {
    /// Nowhere (its server is unavailable, or the caller wants it nowhere).
    Skip,
    /// This node: gathered here, stored at the end.
    Local(Vec<u8>),
    /// A peer: streamed to it as the stripes are encoded.
    Peer {
        server: usize,
        body: Box<BodySender>,
        answer: PeerAnswer,
    },
    /// A peer whose request failed; nothing more is sent to it.
    Failed(usize),
}

/// The K + P chunks of one object, streamed as it is encoded (see the module documentation).
pub(in crate::node) struct ChunkStreams {
    key: String,
    k: usize,
    /// `None` once ended.
    encoder: Option<StripeEncoder>,
    targets: Vec<Target>,
    /// Per chunk, the CRC-32C of each sub-chunk so far.
    crcs: Vec<Vec<u32>>,
    /// Per chunk, the digest of each sub-chunk so far (`ecdn_cluster::piece::digest`; C2DN
    /// fills only, [`ChunkStreams::with_sub_chunk_digests`]).
    sub_digests: Option<Vec<Vec<Digest>>>,
    /// Every chunk's window digests, for an EC-Cache object's record
    /// ([`ChunkStreams::with_digests`]; a C2DN fill has none).
    digests: Option<WindowHasher>,
}

impl ChunkStreams {
    /// Streams for the chunks of `key`, coded (`k`, `p`): chunk `i` goes to `servers[i]`
    /// (`None`: nowhere), a peer's `PUT` started at once. `None` if there is no such code.
    /// `chunk_bytes` is what this node's own chunk is expected to take (a capacity hint).
    pub(in crate::node) fn open(
        c: &Cluster,
        key: &str,
        (k, p): (usize, usize),
        servers: &[Option<usize>],
        chunk_bytes: usize,
    ) -> Option<ChunkStreams> {
        let codec = c.codecs.get(k, p).ok()?;
        let encoder = StripeEncoder::new(k, p, c.cfg.sub_chunk, codec).ok()?;
        let mut targets: Vec<Target> = (0..k + p).map(|_| Target::Skip).collect();
        for (chunk, server) in servers.iter().enumerate().take(k + p) {
            let Some(server) = *server else { continue };
            targets[chunk] = if server == c.id {
                Target::Local(Vec::with_capacity(chunk_bytes))
            } else {
                let path = wire::piece_path(PieceName::Chunk(chunk as u16), key, None);
                match c
                    .peer_of(server)
                    .map(|addr| c.peers.send_streamed(addr, Method::PUT, &path))
                {
                    Some(Ok((body, answer))) => Target::Peer {
                        server,
                        body: Box::new(body),
                        answer,
                    },
                    _ => Target::Failed(server),
                }
            };
        }
        Some(ChunkStreams {
            key: key.to_string(),
            k,
            encoder: Some(encoder),
            targets,
            crcs: vec![Vec::new(); k + p],
            sub_digests: None,
            digests: None,
        })
    }

    /// The same streams, also making every sub-chunk's digest, which readers of the chunks
    /// check peers' sub-chunks against (`ecdn_cluster::piece`, version 2 metadata).
    pub(in crate::node) fn with_sub_chunk_digests(mut self) -> ChunkStreams {
        self.sub_digests = Some(vec![Vec::new(); self.crcs.len()]);
        self
    }

    /// The same streams, also hashing every chunk's windows of `window_stripes` sub-chunks
    /// (`ecdn_objects::digest`: what a client reading the splits itself checks them against).
    pub(in crate::node) fn with_digests(mut self, window_stripes: u64) -> ChunkStreams {
        self.digests = Some(WindowHasher::new(self.crcs.len(), window_stripes));
        self
    }

    /// After [`ChunkStreams::end`]: every chunk's window digests, chunk-major (empty without
    /// [`ChunkStreams::with_digests`]).
    pub(in crate::node) fn digests(&mut self) -> Vec<Sha> {
        self.digests.take().map_or(Vec::new(), WindowHasher::finish)
    }

    /// Object bytes pushed so far.
    pub(in crate::node) fn bytes_pushed(&self) -> u64 {
        self.encoder.as_ref().map_or(0, StripeEncoder::bytes_pushed)
    }

    /// Stripes encoded so far (the sub-chunks of each chunk).
    pub(in crate::node) fn stripes(&self) -> usize {
        self.crcs.first().map_or(0, Vec::len)
    }

    /// The next object bytes: every stripe they complete is encoded and its sub-chunks sent on
    /// (never waits). False if the encoder failed or was ended: then [`ChunkStreams::abort`].
    pub(in crate::node) fn push(&mut self, bytes: &[u8]) -> bool {
        let Some(encoder) = self.encoder.as_mut() else {
            return false;
        };
        let mut stripes = Vec::new();
        if encoder.push_with(bytes, |s| stripes.push(s)).is_err() {
            return false;
        }
        for s in stripes {
            self.send(s);
        }
        true
    }

    fn send(&mut self, stripe: Stripe) {
        let (k, len) = (self.k, stripe.sub_chunk_len());
        let (data, parity) = stripe.into_parts();
        let data = Bytes::from(data);
        let parity: Vec<Bytes> = parity.into_iter().map(Bytes::from).collect();
        for (chunk, target) in self.targets.iter_mut().enumerate() {
            let sub = if chunk < k {
                data.slice(chunk * len..(chunk + 1) * len)
            } else {
                parity[chunk - k].clone()
            };
            self.crcs[chunk].push(ecdn_store::crc32c(&sub));
            if let Some(d) = self.sub_digests.as_mut() {
                d[chunk].push(digest(&sub));
            }
            if let Some(d) = self.digests.as_mut() {
                d.push(chunk, &sub);
            }
            match target {
                Target::Skip | Target::Failed(_) => {}
                Target::Local(buf) => buf.extend_from_slice(&sub),
                Target::Peer { server, body, .. } => {
                    if !body.send(sub) {
                        *target = Target::Failed(*server);
                    }
                }
            }
        }
    }

    /// The object's bytes are all pushed: its last (short) stripe is encoded and sent; its
    /// layout. `None` if the encoder failed (then [`ChunkStreams::abort`]).
    pub(in crate::node) fn end(&mut self) -> Option<ObjectLayout> {
        let (last, layout) = self.encoder.take()?.finish().ok()?;
        if let Some(s) = last {
            self.send(s);
        }
        Some(layout)
    }

    /// CRC-32C of every sub-chunk of every chunk, chunk-major (`Coding::crcs`'s order).
    pub(in crate::node) fn crcs(&self) -> Vec<u32> {
        self.crcs.iter().flatten().copied().collect()
    }

    /// The digest of every sub-chunk of every chunk, in the same order (empty without
    /// [`ChunkStreams::with_sub_chunk_digests`]).
    pub(in crate::node) fn sub_chunk_digests(&self) -> Vec<Digest> {
        self.sub_digests
            .iter()
            .flatten()
            .flatten()
            .copied()
            .collect()
    }

    /// After [`ChunkStreams::end`]: every chunk's metadata (`meta_of(chunk)`; its bytes filled
    /// at purge number `filled`, 0 for an EC-Cache split) follows its
    /// payload, this node's chunk is stored, and this returns, once every server answered or
    /// failed, which chunks are stored. The objects the servers evicted a piece of to store
    /// them, which are to leave whole (`evict_together`), are appended to `dying`.
    pub(in crate::node) async fn store(
        mut self,
        st: &Arc<State>,
        c: &Arc<Cluster>,
        meta_of: impl Fn(usize) -> Vec<u8>,
        filled: u64,
        dying: &mut Vec<u64>,
    ) -> Vec<bool> {
        let mut stored = vec![false; self.targets.len()];
        let mut tasks = tokio::task::JoinSet::new();
        for (chunk, target) in std::mem::take(&mut self.targets).into_iter().enumerate() {
            let (st, c, key, k) = (st.clone(), c.clone(), self.key.clone(), self.k);
            match target {
                Target::Skip => {}
                Target::Failed(server) => {
                    c.stats.peer_error(server);
                    eprintln!(
                        "ecdn node: streaming chunk {chunk} of {key} to node {server} failed{}",
                        ecdn_cluster::peer::request_note()
                    );
                }
                Target::Local(buf) => {
                    let meta = meta_of(chunk);
                    tasks.spawn(async move {
                        let name = PieceName::Chunk(chunk as u16);
                        let buf = Bytes::from(buf);
                        let put = put_local(&st, &c, &key, k, name, meta, buf, filled);
                        let (put, evicted) = put.await;
                        (
                            chunk,
                            matches!(put, Ok(Put::Stored | Put::Present)),
                            evicted,
                        )
                    });
                }
                Target::Peer {
                    server,
                    mut body,
                    answer,
                } => {
                    let meta = meta_of(chunk);
                    tasks.spawn(async move {
                        let ok = body.send(Bytes::from(wire::frame_tail(&meta)));
                        let n = body.sent();
                        let ok = ok && body.finish();
                        let answer = tokio::time::timeout(c.peer_timeout * 5, answer).await;
                        let (status, resp) = match answer {
                            Ok(Ok(Ok(r))) => (Ok(r.status()), Some(r)),
                            Ok(Ok(Err(e))) => (Err(e.to_string()), None),
                            Ok(Err(e)) => (Err(e.to_string()), None),
                            Err(_) => (Err("no answer in time".to_string()), None),
                        };
                        let good = ok
                            && matches!(status, Ok(s) if s == StatusCode::OK || s == StatusCode::NO_CONTENT);
                        pushed(&c, server, ok, n, status);
                        let evicted = match resp {
                            Some(r) if good && c.cfg.evict_together => {
                                let path = wire::piece_path(PieceName::Chunk(chunk as u16), &key, None);
                                dying_in_answer(&c, server, &path, r).await
                            }
                            _ => Vec::new(),
                        };
                        (chunk, good, evicted)
                    });
                }
            }
        }
        while let Some(done) = tasks.join_next().await {
            if let Ok((chunk, good, evicted)) = done {
                stored[chunk] = good;
                dying.extend(evicted);
            }
        }
        stored
    }

    /// Gives up: every streamed body ends in an error, so no server stores a chunk.
    pub(in crate::node) fn abort(self) {
        for t in self.targets {
            if let Target::Peer { body, answer, .. } = t {
                body.abort();
                drop(answer); // the request task ends with the body's error
            }
        }
    }
}
