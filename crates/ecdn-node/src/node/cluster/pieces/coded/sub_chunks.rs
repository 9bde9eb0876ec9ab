//! A chunk's bytes from its source, cut into checked sub-chunks as they arrive: this node's
//! piece store, bytes supplied with the object, or a peer's answer (tagged, or untagged and
//! checked against the digests in the object's metadata).

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use ecdn_cluster::auth::{SubChunkTagger, SUB_TAG_LEN};
use ecdn_cluster::peer::SentSignature;
use ecdn_cluster::piece::{digest, Coding};
use ecdn_cluster::wire::{self, PieceName};
use http_body_util::BodyExt;
use hyper::StatusCode;
use tokio::sync::mpsc;

use super::object::CodedObject;
use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::stats::ClusterStats;
use crate::node::cluster::pieces::store::PieceStore;
use crate::node::state::State;

/// What a chunk's reader reports to its window.
pub(super) enum Arrival {
    /// Sub-chunk `j` of `chunk`, checked against its tag (from a peer) and its CRC-32C
    /// (`None`: it failed).
    Sub {
        chunk: usize,
        j: u64,
        bytes: Option<Bytes>,
    },
    /// The chunk's reader is done: whatever it has not delivered will not come (`complete`:
    /// it delivered every sub-chunk asked, good or bad).
    End { chunk: usize, complete: bool },
}

/// Cuts a chunk's bytes, as they arrive, into its sub-chunks `next..end`, checks each and
/// hands it to the window: a peer's sub-chunk against its digest in the object's metadata
/// when the metadata has digests (the peer sent it untagged), else against its tag (each is
/// followed by one) and its CRC-32C; this node's own against its CRC-32C. A sub-chunk inside
/// one arriving buffer is a slice of it; only one that straddles two is copied.
struct SubChunks<'a> {
    obj: &'a CodedObject,
    c: &'a Cluster,
    chunk: usize,
    next: u64,
    end: u64,
    partial: Vec<u8>,
    tx: &'a mpsc::UnboundedSender<Arrival>,
    /// Where the bytes come from, which says how each sub-chunk is checked.
    source: Source,
}

impl SubChunks<'_> {
    /// Takes the next bytes of the chunk; `false` when there are more than asked for, or the
    /// window no longer listens (it is complete, or failed).
    fn push(&mut self, mut data: Bytes) -> bool {
        while !data.is_empty() {
            if self.next >= self.end {
                return false;
            }
            let len = self.obj.layout.sub_chunk_len(self.next).unwrap_or(0) as usize;
            let need = len + self.source.tag_len();
            let mut sub = if self.partial.is_empty() && data.len() >= need {
                data.split_to(need)
            } else {
                let take = (need - self.partial.len()).min(data.len());
                self.partial.extend_from_slice(&data.split_to(take));
                if self.partial.len() < need {
                    continue;
                }
                Bytes::from(std::mem::take(&mut self.partial))
            };
            let tag = sub.split_off(len);
            let good = self
                .source
                .passes(&self.obj.coding, self.chunk, self.next, &sub, &tag);
            if !good {
                ClusterStats::add(&self.c.stats.corrupt_sub_chunks, 1);
            }
            let sent = self.tx.send(Arrival::Sub {
                chunk: self.chunk,
                j: self.next,
                bytes: good.then_some(sub),
            });
            self.next += 1;
            if sent.is_err() {
                return false;
            }
        }
        true
    }
}

/// Where a chunk's bytes come from, and so how each sub-chunk is checked (see [`SubChunks`]).
enum Source {
    /// This node (or bytes supplied with the object): its CRC-32C (against the disk's faults).
    Here,
    /// A peer, each sub-chunk followed by its tag (`ecdn_cluster::auth::SubChunkTagger`):
    /// the tag and the CRC-32C.
    Tagged(SubChunkTagger),
    /// A peer, untagged: its digest in the metadata (`ecdn_cluster::piece::digest`).
    Untagged,
}

impl Source {
    /// Bytes of the tag that follows each sub-chunk.
    fn tag_len(&self) -> usize {
        match self {
            Source::Tagged(_) => SUB_TAG_LEN,
            Source::Here | Source::Untagged => 0,
        }
    }

    /// Whether `sub` (followed by `tag`, empty without one) is sub-chunk `j` of chunk `chunk`
    /// of the object `coding` describes.
    fn passes(&self, coding: &Coding, chunk: usize, j: u64, sub: &[u8], tag: &[u8]) -> bool {
        let crc = || coding.crc(chunk, j) == Some(ecdn_store::crc32c(sub));
        match self {
            Source::Here => crc(),
            Source::Tagged(tagger) => tagger.check(j, sub, tag) && crc(),
            Source::Untagged => coding.digest(chunk, j) == Some(&digest(sub)),
        }
    }
}

/// Reads sub-chunks `stripes` of chunk `chunk` from its source and reports each as it is
/// complete, then [`Arrival::End`]: from a peer, the answer's body is cut as it arrives; this
/// node's own chunk is read from the piece store in one read.
pub(super) async fn read_chunk(
    st: Arc<State>,
    c: Arc<Cluster>,
    obj: Arc<CodedObject>,
    chunk: usize,
    stripes: Range<u64>,
    tx: mpsc::UnboundedSender<Arrival>,
) {
    let mut cut = SubChunks {
        obj: &obj,
        c: &c,
        chunk,
        next: stripes.start,
        end: stripes.end,
        partial: Vec::new(),
        tx: &tx,
        source: Source::Here,
    };
    let s = obj.layout.sub_chunk();
    let start = stripes.start * s;
    let total: u64 = stripes
        .clone()
        .map(|j| obj.layout.sub_chunk_len(j).unwrap_or(0))
        .sum();
    let server = obj.sources.get(chunk).copied().flatten();
    if let Some(Some(bytes)) = obj.supplied.get(chunk) {
        let (a, b) = (start as usize, (start + total) as usize);
        if let Some(part) = bytes.get(a..b).map(|_| bytes.slice(a..b)) {
            cut.push(part);
        }
    } else if server == Some(c.id) {
        let id = PieceStore::piece_id(obj.object, PieceName::Chunk(chunk as u16));
        if let Some(disk) = st.disk.as_ref() {
            if let Some((_, bytes)) = c.pieces.read(disk, id, Some(start..start + total)).await {
                // An EC-Cache split costs this node's link the same as a peer's read of it.
                if obj.late.is_some() {
                    tokio::select! {
                        _ = c.link.send(bytes.len()) => {}
                        _ = tx.closed() => return,
                    }
                }
                cut.push(bytes);
            }
        }
    } else if let Some(server) = server {
        // With digests in the metadata, the holder sends the sub-chunks untagged.
        let by_digest = !obj.coding.digests.is_empty();
        let sub_chunks = (stripes.start, stripes.end);
        let path = if by_digest {
            wire::untagged_piece_path(chunk as u16, &obj.key, sub_chunks)
        } else {
            wire::piece_path(PieceName::Chunk(chunk as u16), &obj.key, Some(sub_chunks))
        };
        let answer = c.peer_get(server, &path).await;
        // The signature the request was sent with (the client keeps it with the answer): the
        // key of its sub-chunks' tags.
        let sent = answer
            .as_ref()
            .and_then(|r| r.extensions().get::<SentSignature>());
        let tags = sent.map(SentSignature::sub_chunk_tagger);
        match answer.as_ref().map(|r| r.status()) {
            Some(StatusCode::OK) => obj.heard.record(chunk, true),
            Some(StatusCode::NOT_FOUND) => obj.heard.record(chunk, false),
            _ => {}
        }
        match (answer, tags) {
            (Some(resp), Some(tags)) if resp.status() == StatusCode::OK => {
                cut.source = if by_digest {
                    Source::Untagged
                } else {
                    Source::Tagged(tags)
                };
                let deadline = tokio::time::Instant::now() + c.peer_timeout * 4;
                let mut body = resp.into_body();
                while let Ok(Some(Ok(frame))) =
                    tokio::time::timeout_at(deadline, body.frame()).await
                {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    ClusterStats::add(&c.stats.peer_bytes_received, data.len() as u64);
                    if !cut.push(data) {
                        break;
                    }
                }
                if cut.next < cut.end && !tx.is_closed() {
                    // Cut short, failed or too slow (not: no longer wanted).
                    c.stats.peer_error(server);
                }
            }
            // `404`: the chunk is gone (evicted, moved); anything else counted by `peer_get`.
            _ => {}
        }
    }
    let complete = cut.next >= cut.end;
    let _ = tx.send(Arrival::End { chunk, complete });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_untagged_sub_chunk_passes_only_with_its_own_digest() {
        // (2, 1) in 4-byte sub-chunks: a 16-byte object, chunks of 8 bytes, 2 stripes.
        let subs: Vec<Vec<u8>> = (0u8..6).map(|i| vec![i; 4]).collect();
        let coding = Coding {
            k: 2,
            p: 1,
            chunk: 0,
            sub_chunk: 4,
            size: 16,
            crcs: subs.iter().map(|s| ecdn_store::crc32c(s)).collect(),
            digests: subs.iter().map(|s| digest(s)).collect(),
        };
        // Chunk-major: sub-chunk j of chunk c is subs[2c + j].
        assert!(Source::Untagged.passes(&coding, 1, 1, &subs[3], &[]));
        assert!(Source::Here.passes(&coding, 1, 1, &subs[3], &[]));
        // Another place's bytes, or one flipped bit: refused.
        assert!(!Source::Untagged.passes(&coding, 1, 0, &subs[3], &[]));
        let mut flipped = subs[3].clone();
        flipped[2] ^= 1;
        assert!(!Source::Untagged.passes(&coding, 1, 1, &flipped, &[]));
        // Past the object, or metadata without digests: refused.
        assert!(!Source::Untagged.passes(&coding, 1, 2, &subs[3], &[]));
        let without = Coding {
            digests: Vec::new(),
            ..coding.clone()
        };
        assert!(!Source::Untagged.passes(&without, 1, 1, &subs[3], &[]));
        // Tagged: the tag of the right index, and the CRC.
        let tagger = ecdn_cluster::auth::ClusterKey::new(b"k").sub_chunk_tagger(&[7; 32]);
        let (tag, other) = (tagger.tag(1, &subs[3]), tagger.tag(0, &subs[3]));
        let tagged = Source::Tagged(tagger);
        assert_eq!(tagged.tag_len(), SUB_TAG_LEN);
        assert!(tagged.passes(&coding, 1, 1, &subs[3], &tag));
        assert!(!tagged.passes(&coding, 1, 1, &flipped, &tag));
        assert!(!tagged.passes(&coding, 1, 1, &subs[3], &other));
    }
}
