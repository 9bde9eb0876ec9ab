//! The coded read path (C2DN §5): an object read stripe by stripe from the K data chunks on
//! their servers, with delayed parity fetch and decode.
//!
//! The object is read in windows of sub-chunks: for a window, every data chunk's sub-chunks
//! are asked for at once from the servers holding them (or read from this node's piece
//! store), so a sequential read pulls from all K data servers at once. Each peer's answer is
//! cut into sub-chunks as its bytes arrive, and **a stripe goes to the client as soon as it is
//! complete**, in order. An answer that one full window of [`WINDOW_BYTES`] per chunk holds (a
//! 1 MiB object's) is read in that one window, one request per peer, and starts at its first
//! stripe (a one-stripe first window cost a second request per peer and a quarter of the hit's
//! CPU on loopback; but its first byte came 0.6 ms sooner there, 1.3 ms on the test bed). A
//! longer answer's first window is one stripe, read alone (the answer starts after one
//! sub-chunk's round trip: read-ahead asked beside it made it wait for the peers' larger reads;
//! one full first window doubled a 16 MiB hit's time to the first byte); then windows doubling
//! up to [`WINDOW_BYTES`] per chunk, [`READ_AHEAD`] read ahead of the one being sent (a
//! window's memory is bounded by its size).
//!
//! **Delayed parity fetch:** in each window, the time to the first data sub-chunk from a peer
//! is recorded (this node's own chunk, read locally, does not count); if, that
//! time × `parity_delay` (0.2 by default) later, the stripe being waited for still lacks a data
//! sub-chunk, the parity chunks' sub-chunks are asked for too (for the stripes not sent yet),
//! and each stripe is finished with the first K that arrive. A data chunk whose server fails
//! (refused, reset, timed out, `404`, a short answer) or whose sub-chunk fails its tag (each
//! sub-chunk of a peer's answer carries one, keyed to the request) or its CRC-32C (the
//! checksums come with the piece metadata, signed) is replaced the same way, at once. A stripe
//! with all K data sub-chunks is sent as slices of the buffers they arrived in (no copy, no
//! decode). Wrong bytes are never sent: when a stripe cannot be completed from the sources the
//! read began with (chunks evicted or moved since), the servers are asked again which pieces
//! they hold and the answer goes on from its first unsent byte; if that fails too, the
//! response ends short.
//!
//! **Late binding (EC-Cache §4.3)** replaces the data-first read for an EC-Cache object
//! ([`LateBinding`]): in each window the `k + Δ` chunks chosen are asked at once, and each
//! stripe leaves as soon as any K of its sub-chunks are there. A chunk read that fails (no
//! answer, `404`, cut short, a sub-chunk failing its CRC) is replaced at once by one of the
//! object's other stored chunks, and in the answer's later windows too (a dead server costs
//! one failed read per answer, not one per window). When a window is complete, the reads still running stop at
//! their next buffer (a peer's paced answer is dropped; this node's own chunk stops waiting
//! for its link). The first window is a full one (the object's splits are read whole, as the
//! paper's are, up to [`WINDOW_BYTES`] each), and the sources are never asked again: the record
//! names every split.
//!
//! **The HOC's stripes:** when the HOC holds the object in stripes, a window whose stripes it
//! holds is answered from them, and any other is read whole-stripe (a range's first and last
//! stripes too) and its stripes kept there.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ecdn_cluster::auth::{SubChunkTagger, SUB_TAG_LEN};
use ecdn_cluster::peer::SentSignature;
use ecdn_cluster::piece::{digest, Coding};
use ecdn_cluster::wire::{self, PieceName};
use ecdn_codec::{decode_range_with, ObjectLayout};
use http_body_util::BodyExt;
use hyper::StatusCode;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::node::body::{Chunk, Piece};
use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::stats::ClusterStats;
use crate::node::cluster::pieces::stats::Parity;
use crate::node::cluster::pieces::store::PieceStore;
use crate::node::hoc::Striped;
use crate::node::state::State;

/// Bytes of sub-chunks asked of one chunk's server per request.
const WINDOW_BYTES: u64 = 1 << 20;
/// Windows read ahead of the one being sent.
const READ_AHEAD: usize = 1;

/// A coded object as the serving node reads it.
pub(in crate::node) struct CodedObject {
    pub(in crate::node) key: String,
    /// Its id (the pieces' ids derive from it).
    pub(in crate::node) object: u64,
    pub(in crate::node) layout: ObjectLayout,
    pub(in crate::node) coding: Coding,
    /// Per chunk (`0..K+P`), a node that holds it.
    pub(in crate::node) sources: Vec<Option<usize>>,
    /// Chunks already in memory, checked (a partial hit's chunks fetched from the origin);
    /// empty, or one entry per chunk.
    pub(in crate::node) supplied: Vec<Option<Bytes>>,
    /// The object's entry in the HOC, when the HOC holds it in stripes: a window whose
    /// stripes it holds is taken from it, and every window read is decoded whole-stripe and
    /// kept in it.
    pub(in crate::node) hoc: Option<Arc<Striped>>,
    /// An EC-Cache object's read: late binding instead of data first (see the module
    /// documentation).
    pub(in crate::node) late: Option<Arc<LateBinding>>,
    /// What the chunks' servers answered this read (see [`Heard`]).
    pub(in crate::node) heard: Heard,
}

/// What the servers of a read's chunks said by answering it: per chunk asked of a peer,
/// whether its source holds it (a `200`) or not (a `404`). A chunk read from this node, not
/// asked, or whose answer never came has no entry. The serving node's check that every
/// target holds its chunk (`c2dn/read.rs`) takes these answers instead of asking those servers
/// again.
#[derive(Debug, Default)]
pub(in crate::node) struct Heard(Mutex<Vec<(usize, bool)>>);

impl Heard {
    fn record(&self, chunk: usize, held: bool) {
        let mut heard = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match heard.iter_mut().find(|(c, _)| *c == chunk) {
            // A chunk lacking once is lacking: a later window's answer does not undo it.
            Some((_, h)) => *h &= held,
            None => heard.push((chunk, held)),
        }
    }

    /// Whether the source of `chunk` said it holds it (`None`: it said nothing).
    pub(in crate::node) fn of(&self, chunk: usize) -> Option<bool> {
        let heard = self.0.lock().unwrap_or_else(|e| e.into_inner());
        heard.iter().find(|(c, _)| *c == chunk).map(|&(_, h)| h)
    }
}

/// Work beside a read that needs the read's outcome (the check that every target holds its
/// chunk, `c2dn/read.rs`): a task started with the read, told when the read is over, and awaited
/// before the answer ends.
pub(in crate::node) struct Finish {
    pub(in crate::node) task: JoinHandle<()>,
    pub(in crate::node) read_over: oneshot::Sender<()>,
}

impl Finish {
    async fn run(self) {
        let _ = self.read_over.send(());
        let _ = self.task.await;
    }
}

/// How an EC-Cache object is read (§4.3; see the module documentation).
#[derive(Debug, Default)]
pub(in crate::node) struct LateBinding {
    /// The chunks asked at once in every window: `k + Δ`, chosen at random.
    pub(in crate::node) first: Vec<usize>,
    /// The object's other chunks with a source, in random order: each read that fails is
    /// replaced by the next.
    pub(in crate::node) spare: Vec<usize>,
    /// Chunk reads asked and failed, over all windows (for the error of a failed read).
    pub(in crate::node) asked: AtomicUsize,
    pub(in crate::node) failed: AtomicUsize,
    /// The chunks the answer's first stripe was made from.
    pub(in crate::node) used: OnceLock<Vec<usize>>,
    /// Chunks whose read failed or was corrupt: the later windows ask a spare in their place,
    /// instead of waiting on a dead server again in every window.
    pub(in crate::node) lost: Mutex<Vec<usize>>,
}

impl LateBinding {
    /// The chunks a window asks at once (`first`, each lost one replaced by a spare) and the
    /// spares left for the reads that fail in it.
    fn chosen(&self) -> (Vec<usize>, Vec<usize>) {
        let lost = self.lost.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut spare: Vec<usize> = self
            .spare
            .iter()
            .copied()
            .filter(|c| !lost.contains(c))
            .collect();
        let first = self
            .first
            .iter()
            .filter_map(|&c| {
                if lost.contains(&c) {
                    spare.pop()
                } else {
                    Some(c)
                }
            })
            .collect();
        (first, spare)
    }

    fn lose(&self, chunk: usize) {
        let mut lost = self.lost.lock().unwrap_or_else(|e| e.into_inner());
        if !lost.contains(&chunk) {
            lost.push(chunk);
        }
    }
}

impl CodedObject {
    /// The same object read from other sources.
    fn with_sources(&self, sources: Vec<Option<usize>>) -> CodedObject {
        CodedObject {
            key: self.key.clone(),
            object: self.object,
            layout: self.layout,
            coding: self.coding.clone(),
            sources,
            supplied: self.supplied.clone(),
            hoc: self.hoc.clone(),
            late: self.late.clone(),
            heard: Heard::default(),
        }
    }

    /// Whether object bytes `range` fit in one full window: then they are read in one, one
    /// request per peer (a 1 MiB object's whole answer). A one-stripe first window would cost
    /// a second request per peer, and with it a quarter of a 1 MiB hit's CPU (issue 39).
    fn one_window(&self, range: Range<u64>) -> bool {
        self.layout
            .stripes_for_range(range)
            .is_ok_and(|s| s.end - s.start <= self.stripes_per_window())
    }

    fn stripes_per_window(&self) -> u64 {
        (WINDOW_BYTES / self.layout.sub_chunk().max(1)).max(1)
    }

    /// The windows covering object bytes `range`: (stripes, object bytes wanted). With
    /// `first`, the first window is that many stripes and each next one twice the one before,
    /// up to [`WINDOW_BYTES`] per chunk: the first bytes reach the client after one stripe's
    /// round trip, and the later, larger windows keep the peers' connections busy.
    fn windows(&self, range: Range<u64>, first: Option<u64>) -> Vec<(Range<u64>, Range<u64>)> {
        let Ok(stripes) = self.layout.stripes_for_range(range.clone()) else {
            return Vec::new();
        };
        let most = self.stripes_per_window();
        let mut w = first.unwrap_or(most).clamp(1, most);
        let mut out = Vec::new();
        let mut a = stripes.start;
        while a < stripes.end {
            let b = (a + w).min(stripes.end);
            w = (w * 2).min(most);
            let (Ok(first), Ok(last)) =
                (self.layout.stripe_range(a), self.layout.stripe_range(b - 1))
            else {
                return Vec::new();
            };
            let bytes = first.start.max(range.start)..last.end.min(range.end);
            out.push((a..b, bytes));
            a = b;
        }
        out
    }
}

/// What a chunk's reader reports to its window.
enum Arrival {
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
async fn read_chunk(
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

/// What a window sends the answer: a stripe's bytes (one or more buffers, in order), and at
/// the end [`WindowOut::Done`]; a window whose channel closes without it failed.
enum WindowOut {
    Bytes(Vec<Bytes>),
    Done,
}

/// Reads the window of `stripes` (object bytes `bytes` of them wanted) and sends its bytes on
/// `out`, **stripe by stripe as each is complete**: the data chunks' sub-chunks are asked of
/// their servers at once, each answer cut into sub-chunks as it arrives, and a stripe leaves as
/// soon as its K data sub-chunks are there (slices of the buffers they arrived in, never
/// copied) or, once parity was asked for, any K (decoded). Parity is asked for (for the
/// stripes not sent yet) as the module documentation says. `decoded` is set when a stripe
/// needed decoding. When a stripe cannot be completed, `out` closes without
/// [`WindowOut::Done`].
async fn window(
    st: Arc<State>,
    c: Arc<Cluster>,
    obj: Arc<CodedObject>,
    stripes: Range<u64>,
    bytes: Range<u64>,
    decoded: Arc<AtomicBool>,
    out: mpsc::Sender<WindowOut>,
) {
    if let Some(parts) = obj.hoc.as_ref().and_then(|h| h.range(bytes.clone())) {
        let _ = out.send(WindowOut::Bytes(parts)).await;
        let _ = out.send(WindowOut::Done).await;
        return;
    }
    let (k, total) = (obj.layout.k(), obj.layout.total_chunks());
    let n = (stripes.end - stripes.start) as usize;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut asked = vec![false; total];
    let mut running = 0usize;
    let late = obj.late.clone();
    let mut ask = |chunk: usize, from: u64, running: &mut usize| {
        if asked[chunk] || obj.sources[chunk].is_none() {
            return;
        }
        asked[chunk] = true;
        *running += 1;
        if let Some(l) = &late {
            l.asked.fetch_add(1, Ordering::Relaxed);
        }
        let task = read_chunk(
            st.clone(),
            c.clone(),
            obj.clone(),
            chunk,
            from..stripes.end,
            tx.clone(),
        );
        ecdn_cluster::peer::spawn_traced(task);
    };
    let started = Instant::now();
    // Late binding: the chunks chosen, at once, any K finishing a stripe; the spares replace
    // those that fail (here, and in the windows after this one).
    let mut spare = Vec::new();
    if let Some(l) = &obj.late {
        let first;
        (first, spare) = l.chosen();
        for chunk in first {
            ask(chunk, stripes.start, &mut running);
        }
    } else {
        for chunk in 0..k {
            ask(chunk, stripes.start, &mut running);
        }
    }
    // A data chunk without a source: parity from the start. The same for a data chunk whose
    // holder this node's probes find much slower than its peers (a hedge: C2DN §5's delayed
    // parity, without waiting to find the chunk late).
    let missing = obj.sources[..k].iter().any(Option::is_none);
    let slow = !missing && obj.late.is_none() && {
        let now = Instant::now();
        obj.sources[..k].iter().flatten().any(|&s| c.slower(s, now))
    };
    let mut parity_asked = obj.late.is_some() || missing || slow;
    if parity_asked && obj.late.is_none() {
        c.stats
            .parity_fetch(if slow { Parity::Slow } else { Parity::Missing });
        for chunk in k..total {
            ask(chunk, stripes.start, &mut running);
        }
    }
    let mut parity_at: Option<Instant> = None;
    // Per stripe of the window not sent yet, per chunk, its verified sub-chunk.
    let mut have: Vec<Vec<Option<Bytes>>> = vec![vec![None; total]; n];
    let mut next = 0usize;
    loop {
        // Send every stripe that is complete, in order.
        while next < n {
            let j = stripes.start + next as u64;
            let row = &have[next];
            let data = row[..k].iter().all(Option::is_some);
            let any_k = parity_asked && row.iter().flatten().count() >= k;
            if !(data || any_k) {
                break;
            }
            if !data {
                decoded.store(true, Ordering::Relaxed);
            }
            if let Some(l) = obj.late.as_ref().filter(|l| l.used.get().is_none()) {
                let _ = l
                    .used
                    .set((0..total).filter(|&i| row[i].is_some()).take(k).collect());
            }
            let Some(sent) = stripe_bytes(&c, &obj, j, &bytes, row, data) else {
                return;
            };
            have[next] = Vec::new();
            if out.send(WindowOut::Bytes(sent)).await.is_err() {
                return;
            }
            next += 1;
        }
        if next == n {
            let _ = out.send(WindowOut::Done).await;
            return;
        }
        if running == 0 {
            if parity_asked {
                return; // a stripe cannot be completed: the answer ends short
            }
            parity_asked = true;
            c.stats.parity_fetch(Parity::Failed);
            let from = stripes.start + next as u64;
            for chunk in k..total {
                ask(chunk, from, &mut running);
            }
            continue;
        }
        let arrival = match (parity_asked, parity_at) {
            (false, Some(at)) => tokio::select! {
                a = rx.recv() => a,
                _ = tokio::time::sleep_until(at.into()) => {
                    // The stripe being waited for is late: parity for the rest of the window.
                    parity_asked = true;
                    c.stats.parity_fetch(Parity::Delayed);
                    let from = stripes.start + next as u64;
                    for chunk in k..total {
                        ask(chunk, from, &mut running);
                    }
                    continue;
                }
            },
            _ => rx.recv().await,
        };
        match arrival {
            Some(Arrival::Sub { chunk, j, bytes: b }) => {
                let bad = b.is_none();
                if let (true, Some(l)) = (bad, &obj.late) {
                    // Late binding: another chunk for the stripes not sent yet.
                    l.lose(chunk);
                    if let Some(next_chunk) = spare.pop() {
                        ask(next_chunk, stripes.start + next as u64, &mut running);
                    }
                }
                if let Some(row) = have.get_mut((j - stripes.start) as usize) {
                    if !row.is_empty() {
                        row[chunk] = b;
                    }
                }
                if parity_at.is_none() && obj.sources[chunk] != Some(c.id) {
                    // The first sub-chunk from a peer (this node's own chunk says nothing
                    // about the network): parity is asked for if the stripe waited for is
                    // still incomplete this much later.
                    let first = started.elapsed();
                    let delay = Duration::from_secs_f64(first.as_secs_f64() * c.cfg.parity_delay);
                    parity_at = Some(Instant::now() + delay);
                }
                if bad && chunk < k && !parity_asked {
                    parity_asked = true;
                    c.stats.parity_fetch(Parity::Corrupt);
                    let from = stripes.start + next as u64;
                    for chunk in k..total {
                        ask(chunk, from, &mut running);
                    }
                }
            }
            Some(Arrival::End { chunk, complete }) => {
                running -= 1;
                if let (Some(l), false) = (&obj.late, complete) {
                    l.failed.fetch_add(1, Ordering::Relaxed);
                    l.lose(chunk);
                    if let Some(next_chunk) = spare.pop() {
                        ask(next_chunk, stripes.start + next as u64, &mut running);
                    }
                }
            }
            None => return,
        }
    }
}

/// The bytes stripe `j` sends (those in `bytes`) from its sub-chunks `row` (per chunk): with
/// all K data sub-chunks (`data`), slices of them; else decoded from any K. When the HOC holds
/// the object in stripes, the stripe is made whole and kept there first.
fn stripe_bytes(
    c: &Cluster,
    obj: &CodedObject,
    j: u64,
    bytes: &Range<u64>,
    row: &[Option<Bytes>],
    data: bool,
) -> Option<Vec<Bytes>> {
    let layout = &obj.layout;
    let whole = layout.stripe_range(j).ok()?;
    let wanted = whole.start.max(bytes.start)..whole.end.min(bytes.end);
    let made = if obj.hoc.is_some() {
        whole.clone()
    } else {
        wanted.clone()
    };
    let slices = if data {
        let mut v = Vec::with_capacity(layout.k());
        for (chunk, sub) in row.iter().enumerate().take(layout.k()) {
            let r = layout.data_range_of(chunk, j).ok()?;
            let (a, b) = (r.start.max(made.start), r.end.min(made.end));
            if a < b {
                let sub = sub.as_ref()?;
                let (from, to) = ((a - r.start) as usize, (b - r.start) as usize);
                v.push(sub.get(from..to).map(|_| sub.slice(from..to))?);
            }
        }
        v
    } else {
        let codec = c.codecs.get(layout.k(), layout.p()).ok()?;
        let mut out = vec![0u8; (made.end - made.start) as usize];
        decode_range_with(
            codec.as_ref(),
            layout,
            made.clone(),
            &mut out,
            |chunk, i| (i == j).then(|| row.get(chunk)?.as_deref()).flatten(),
        )
        .ok()?;
        vec![Bytes::from(out)]
    };
    let Some(h) = &obj.hoc else {
        return Some(slices);
    };
    let stripe = match slices.len() {
        1 => slices.into_iter().next()?,
        _ => Bytes::from(slices.concat()),
    };
    h.keep(whole.start, &stripe);
    let (a, b) = (wanted.start - whole.start, wanted.end - whole.start);
    Some(vec![stripe.slice(a as usize..b as usize)])
}

/// Starts reading the window of `stripes` (object bytes `bytes`); its bytes come on the
/// returned channel (see [`window`]), which holds the whole window, so a window read ahead
/// never waits for the answer.
fn start_window(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    obj: &Arc<CodedObject>,
    stripes: Range<u64>,
    bytes: Range<u64>,
    decoded: &Arc<AtomicBool>,
) -> mpsc::Receiver<WindowOut> {
    let n = (stripes.end - stripes.start) as usize;
    let (tx, rx) = mpsc::channel(n + 1);
    let task = window(
        st.clone(),
        c.clone(),
        obj.clone(),
        stripes,
        bytes,
        decoded.clone(),
        tx,
    );
    ecdn_cluster::peer::spawn_traced(task);
    rx
}

/// Everything a window sends, until [`WindowOut::Done`] (`None` if it failed).
async fn collect_window(rx: &mut mpsc::Receiver<WindowOut>) -> Option<Vec<Bytes>> {
    let mut all = Vec::new();
    loop {
        match rx.recv().await? {
            WindowOut::Bytes(b) => all.extend(b),
            WindowOut::Done => return Some(all),
        }
    }
}

/// Reads the object's `pieces` (byte ranges and multipart text), window by window, each
/// window's stripes sent as they complete, with [`READ_AHEAD`] windows read ahead of the one
/// being sent. The first window (one stripe) is read before this returns (`None` if it cannot
/// be: the caller treats the request as a miss); the rest is sent on the returned channel,
/// which closes without [`Chunk::Done`] if a later window fails. `finish`, work that runs
/// beside the read (the check that every target holds its chunk), is told when the read is
/// over and awaited before the answer ends.
pub(in crate::node) async fn stream(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    obj: Arc<CodedObject>,
    pieces: Vec<Piece>,
    decoded: Arc<AtomicBool>,
    mut finish: Option<Finish>,
) -> Option<(VecDeque<Bytes>, Option<mpsc::Receiver<Chunk>>)> {
    // The steps: text, or a window of object bytes.
    enum Step {
        Text(Bytes),
        Window(Range<u64>, Range<u64>),
    }
    let mut steps = VecDeque::new();
    for p in pieces {
        match p {
            Piece::Text(t) => steps.push_back(Step::Text(t)),
            Piece::Body(r) => {
                // The answer's first window is one stripe, unless one full window holds the
                // whole range (an EC-Cache object's is a full one); a later range's are full
                // size.
                let later = steps.iter().any(|s| matches!(s, Step::Window(..)));
                let first = if later || obj.late.is_some() || obj.one_window(r.clone()) {
                    None
                } else {
                    Some(1)
                };
                for (s, b) in obj.windows(r, first) {
                    steps.push_back(Step::Window(s, b));
                }
            }
        }
    }
    // Everything up to and including the first window is ready before answering.
    let mut ready = VecDeque::new();
    let mut in_flight = VecDeque::new();
    while let Some(step) = steps.pop_front() {
        match step {
            Step::Text(t) => ready.push_back(t),
            Step::Window(s, b) => {
                // Read alone: the peers answer one stripe faster without a larger read
                // beside it. The one full window of a short answer starts it at its first
                // stripe, and the rest of it follows as the first window in flight.
                let only = !steps.iter().any(|s| matches!(s, Step::Window(..)));
                let mut first = start_window(st, c, &obj, s.clone(), b.clone(), &decoded);
                let got = if only {
                    match first.recv().await {
                        Some(WindowOut::Bytes(bytes)) => Some((bytes, false)),
                        Some(WindowOut::Done) => Some((Vec::new(), true)),
                        None => None,
                    }
                } else {
                    collect_window(&mut first).await.map(|b| (b, true))
                };
                let Some((bytes, done)) = got else {
                    if let Some(f) = finish.take() {
                        f.task.abort();
                    }
                    return None;
                };
                if !done {
                    let taken: u64 = bytes.iter().map(|b| b.len() as u64).sum();
                    steps.push_front(Step::Window(s, b.start + taken..b.end));
                    in_flight.push_back(first);
                    ready.extend(bytes);
                    break;
                }
                for step in steps.iter() {
                    if in_flight.len() == READ_AHEAD {
                        break;
                    }
                    if let Step::Window(s, b) = step {
                        in_flight.push_back(start_window(
                            st,
                            c,
                            &obj,
                            s.clone(),
                            b.clone(),
                            &decoded,
                        ));
                    }
                }
                ready.extend(bytes);
                break;
            }
        }
    }
    if steps.is_empty() {
        if let Some(f) = finish {
            f.run().await;
        }
        return Some((ready, None));
    }
    let (tx, rx) = mpsc::channel(4);
    let (st, c) = (st.clone(), c.clone());
    ecdn_cluster::peer::spawn_traced(async move {
        let mut obj = obj;
        // Whether the sources were asked again already (once per answer).
        let mut refound = false;
        // The last bytes read are held back until `finish` is over: a client that has every
        // byte may send its next request, which must find this one's writes done (as the
        // simulator's next request does).
        let mut held: Option<Chunk> = None;
        macro_rules! send {
            ($chunk:expr) => {
                if let Some(earlier) = held.replace($chunk) {
                    if tx.send(earlier).await.is_err() {
                        return; // the client went away
                    }
                }
            };
        }
        // `in_flight` holds the next windows of `steps`, in order.
        while let Some(step) = steps.pop_front() {
            let (mut current, bytes) = match step {
                Step::Text(t) => {
                    send!(Chunk::Data(t));
                    continue;
                }
                Step::Window(s, b) => match in_flight.pop_front() {
                    Some(rx) => (rx, b),
                    None => (start_window(&st, &c, &obj, s, b.clone(), &decoded), b),
                },
            };
            // Keep READ_AHEAD windows in flight.
            let mut seen = in_flight.len();
            for step in steps.iter() {
                if let Step::Window(s, b) = step {
                    if seen == 0 {
                        let w = start_window(&st, &c, &obj, s.clone(), b.clone(), &decoded);
                        in_flight.push_back(w);
                        break;
                    }
                    seen -= 1;
                }
            }
            let mut sent = 0u64;
            let failed = loop {
                match current.recv().await {
                    Some(WindowOut::Bytes(b)) => {
                        sent += b.iter().map(|b| b.len() as u64).sum::<u64>();
                        send!(Chunk::Slices(b));
                    }
                    Some(WindowOut::Done) => break false,
                    None => break true,
                }
            };
            if failed {
                if refound || obj.late.is_some() {
                    return; // aborts the client's response: never a wrong byte
                }
                // A stripe could not be completed from the sources the read began with
                // (chunks evicted or moved since): ask the servers again and go on from the
                // first byte not sent, with the windows read ahead started again too.
                refound = true;
                let sources =
                    crate::node::cluster::pieces::holders::refind_sources(&c, &obj.key, obj.object)
                        .await;
                obj = Arc::new(obj.with_sources(sources));
                in_flight.clear();
                let rest = bytes.start + sent..bytes.end;
                for (s, b) in obj.windows(rest, None).into_iter().rev() {
                    steps.push_front(Step::Window(s, b));
                }
            }
        }
        if let Some(f) = finish {
            f.run().await;
        }
        if let Some(last) = held {
            if tx.send(last).await.is_err() {
                return;
            }
        }
        let _ = tx.send(Chunk::Done).await;
    });
    Some((ready, Some(rx)))
}

/// The whole object, read window by window (for the HOC, or to restore missing pieces).
pub(in crate::node) async fn read_all(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    obj: Arc<CodedObject>,
    decoded: Arc<AtomicBool>,
) -> Option<Bytes> {
    let size = obj.layout.size();
    let mut windows = VecDeque::new();
    for (s, b) in obj.windows(0..size, None) {
        windows.push_back(start_window(st, c, &obj, s, b, &decoded));
    }
    let mut out = Vec::with_capacity(size as usize);
    for mut w in windows {
        for b in collect_window(&mut w).await? {
            out.extend_from_slice(&b);
        }
    }
    Some(Bytes::from(out))
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

    #[test]
    fn a_lost_chunk_is_replaced_in_every_later_window() {
        let l = LateBinding {
            first: vec![0, 3, 5],
            spare: vec![1, 4, 2],
            ..LateBinding::default()
        };
        assert_eq!(l.chosen(), (vec![0, 3, 5], vec![1, 4, 2]));
        l.lose(3);
        assert_eq!(l.chosen(), (vec![0, 2, 5], vec![1, 4]));
        // The spare that replaced it fails too, and so does a spare no window asked yet.
        l.lose(2);
        l.lose(1);
        l.lose(2);
        assert_eq!(l.chosen(), (vec![0, 4, 5], vec![]));
        // Fewer chunks left than asked: the window asks what there is.
        l.lose(0);
        assert_eq!(l.chosen(), (vec![4, 5], vec![]));
    }
}
