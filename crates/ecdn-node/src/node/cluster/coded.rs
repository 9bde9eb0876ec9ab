//! The coded read path (C2DN §5): an object read stripe by stripe from the K data chunks on
//! their servers, with delayed parity fetch and decode.
//!
//! The object is read in windows of sub-chunks: for a window, every data chunk's sub-chunks
//! are asked for at once from the servers holding them (or read from this node's piece
//! store), so a sequential read pulls from all K data servers at once, and a window's bytes
//! reach the client as soon as its stripes are complete. An answer's first window is one
//! stripe, read alone (the answer starts after one sub-chunk's round trip: read-ahead asked
//! beside it made it wait for the peers' larger reads); then windows double up to
//! [`WINDOW_BYTES`] per chunk, [`READ_AHEAD`] in flight while the previous one is sent.
//!
//! **Delayed parity fetch:** the time to the first data chunk's answer from a peer is recorded
//! (this node's own chunk, read locally, does not count); if, that
//! time × `parity_delay` (0.2 by default) later, some data sub-chunks have still not arrived,
//! the parity chunks' sub-chunks are asked for too, and each stripe is finished with the first
//! K that arrive. A data chunk whose server fails (refused, reset, timed out, `404`) or whose
//! sub-chunk fails its CRC-32C (the checksums come with the piece metadata, signed) is
//! replaced the same way, at once. A stripe with all K data sub-chunks is copied, never decoded.
//! Wrong bytes are never sent: a stripe that cannot be completed ends the response short.
//!
//! **The HOC's stripes:** when the HOC holds the object in stripes, a window whose stripes it
//! holds is answered from them, and any other is read whole-stripe (a range's first and last
//! stripes too) and its stripes kept there.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ecdn_cluster::piece::Coding;
use ecdn_cluster::wire::{self, PieceName};
use ecdn_codec::{decode_range_with, ObjectLayout};
use http_body_util::BodyExt;
use hyper::{Method, StatusCode};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::super::body::{Chunk, Piece};
use super::super::hoc::Striped;
use super::super::State;
use super::pieces::PieceStore;
use super::{Cluster, ClusterStats};

/// Bytes of sub-chunks asked of one chunk's server per request.
pub(super) const WINDOW_BYTES: u64 = 256 << 10;
/// Windows read ahead of the one being sent.
const READ_AHEAD: usize = 2;

/// A coded object as the serving node reads it.
pub(super) struct CodedObject {
    pub(super) key: String,
    /// Its id (the pieces' ids derive from it).
    pub(super) object: u64,
    pub(super) layout: ObjectLayout,
    pub(super) coding: Coding,
    /// Per chunk (`0..K+P`), a node that holds it.
    pub(super) sources: Vec<Option<usize>>,
    /// Chunks already in memory, checked (a partial hit's chunks fetched from the origin);
    /// empty, or one entry per chunk.
    pub(super) supplied: Vec<Option<Bytes>>,
    /// The object's entry in the HOC, when the HOC holds it in stripes: a window whose
    /// stripes it holds is taken from it, and every window read is decoded whole-stripe and
    /// kept in it.
    pub(super) hoc: Option<Arc<Striped>>,
}

impl CodedObject {
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

/// One chunk's sub-chunks of one window: per stripe, the verified bytes (`None`: failed its
/// checksum).
type ChunkWindow = Vec<Option<Bytes>>;

/// Sub-chunks `stripes` of chunk `chunk`, from its source, each checked against its CRC-32C.
async fn fetch(
    st: &State,
    c: &Cluster,
    obj: &CodedObject,
    chunk: usize,
    stripes: Range<u64>,
) -> Option<ChunkWindow> {
    let server = obj.sources.get(chunk).copied().flatten()?;
    let s = obj.layout.sub_chunk();
    let lens: Vec<u64> = stripes
        .clone()
        .map(|j| obj.layout.sub_chunk_len(j).unwrap_or(0))
        .collect();
    let total: u64 = lens.iter().sum();
    let start = stripes.start * s;
    if let Some(Some(bytes)) = obj.supplied.get(chunk) {
        let mut at = start as usize;
        let mut out = Vec::with_capacity(lens.len());
        for len in lens {
            let end = at.checked_add(len as usize).filter(|&e| e <= bytes.len())?;
            out.push(Some(bytes.slice(at..end)));
            at = end;
        }
        return Some(out);
    }
    let bytes = if server == c.id {
        let disk = st.disk.as_ref()?;
        let id = PieceStore::piece_id(obj.object, PieceName::Chunk(chunk as u16));
        c.pieces.read(disk, id, Some(start..start + total)).await?.1
    } else {
        let addr = c.peer_of(server)?;
        let path = wire::piece_path(
            PieceName::Chunk(chunk as u16),
            &obj.key,
            Some((stripes.start, stripes.end)),
        );
        let resp = match c
            .peers
            .send(addr, Method::GET, &path, Bytes::new(), &[], c.peer_timeout)
            .await
        {
            Ok(r) => r,
            Err(_) => {
                ClusterStats::add(&c.stats.peer_errors, 1);
                return None;
            }
        };
        if resp.status() != StatusCode::OK {
            return None;
        }
        let body = tokio::time::timeout(c.peer_timeout * 4, resp.into_body().collect())
            .await
            .ok()?
            .ok()?
            .to_bytes();
        ClusterStats::add(&c.stats.peer_bytes_received, body.len() as u64);
        body
    };
    if bytes.len() as u64 != total {
        return None;
    }
    let mut out = Vec::with_capacity(lens.len());
    let mut at = 0usize;
    for (j, len) in stripes.zip(lens) {
        let sub = bytes.slice(at..at + len as usize);
        at += len as usize;
        if obj.coding.crc(chunk, j) == Some(ecdn_store::crc32c(&sub)) {
            out.push(Some(sub));
        } else {
            ClusterStats::add(&c.stats.corrupt_sub_chunks, 1);
            out.push(None);
        }
    }
    Some(out)
}

/// Object bytes `bytes` of the window of `stripes`: the data chunks' sub-chunks, with parity
/// asked for when they are late or bad (see the module documentation); decoded where needed.
/// `decoded` is set when a stripe needed decoding. `None` when some stripe cannot be completed.
async fn window(
    st: Arc<State>,
    c: Arc<Cluster>,
    obj: Arc<CodedObject>,
    stripes: Range<u64>,
    bytes: Range<u64>,
    decoded: Arc<AtomicBool>,
) -> Option<Bytes> {
    // The object bytes decoded: the window's, or, to keep them in the HOC, its stripes' whole.
    let mut decode = bytes.clone();
    if let Some(h) = &obj.hoc {
        if let Some(parts) = h.range(bytes.clone()) {
            return Some(match parts.len() {
                1 => parts.into_iter().next().unwrap_or_default(),
                _ => Bytes::from(parts.concat()),
            });
        }
        let first = obj.layout.stripe_range(stripes.start).ok()?;
        let last = obj.layout.stripe_range(stripes.end.checked_sub(1)?).ok()?;
        decode = first.start..last.end;
    }
    let (k, total) = (obj.layout.k(), obj.layout.total_chunks());
    let n = (stripes.end - stripes.start) as usize;
    let (tx, mut rx) = mpsc::channel::<(usize, Option<ChunkWindow>)>(total);
    let mut asked = vec![false; total];
    let mut pending = 0usize;
    let ask = |chunk: usize, asked: &mut Vec<bool>, pending: &mut usize| {
        if asked[chunk] || obj.sources[chunk].is_none() {
            return;
        }
        asked[chunk] = true;
        *pending += 1;
        let (st, c, obj, tx, stripes) = (
            st.clone(),
            c.clone(),
            obj.clone(),
            tx.clone(),
            stripes.clone(),
        );
        tokio::spawn(async move {
            let got = fetch(&st, &c, &obj, chunk, stripes).await;
            let _ = tx.send((chunk, got)).await;
        });
    };
    for chunk in 0..k {
        ask(chunk, &mut asked, &mut pending);
    }
    let started = Instant::now();
    let mut parity_asked = (0..k).any(|i| !asked[i]);
    if parity_asked {
        for chunk in k..total {
            ask(chunk, &mut asked, &mut pending);
        }
    }
    let mut got: Vec<Option<ChunkWindow>> = vec![None; total];
    let mut parity_at: Option<Instant> = None;
    let data_complete = |got: &[Option<ChunkWindow>]| {
        got[..k]
            .iter()
            .all(|w| w.as_ref().is_some_and(|w| w.iter().all(Option::is_some)))
    };
    let stripes_complete = |got: &[Option<ChunkWindow>]| {
        (0..n).all(|j| {
            got.iter()
                .filter(|w| w.as_ref().is_some_and(|w| w[j].is_some()))
                .count()
                >= k
        })
    };
    while !(data_complete(&got) || (parity_asked && stripes_complete(&got))) {
        if pending == 0 {
            if parity_asked {
                return None;
            }
            parity_asked = true;
            for chunk in k..total {
                ask(chunk, &mut asked, &mut pending);
            }
            continue;
        }
        let next = match (parity_asked, parity_at) {
            (false, Some(at)) => tokio::select! {
                r = rx.recv() => r,
                _ = tokio::time::sleep_until(at.into()) => {
                    parity_asked = true;
                    for chunk in k..total {
                        ask(chunk, &mut asked, &mut pending);
                    }
                    continue;
                }
            },
            _ => rx.recv().await,
        };
        let (chunk, result) = next?;
        pending -= 1;
        let bad = result
            .as_ref()
            .is_none_or(|w| w.len() != n || w.iter().any(Option::is_none));
        got[chunk] = result.filter(|w| w.len() == n);
        if parity_at.is_none() && obj.sources[chunk] != Some(c.id) {
            // The first answer from a peer (this node's own chunk says nothing about the
            // network): parity is asked for if the others are this much later.
            let first = started.elapsed();
            let delay = Duration::from_secs_f64(first.as_secs_f64() * c.cfg.parity_delay);
            parity_at = Some(Instant::now() + delay);
        }
        if bad && chunk < k && !parity_asked {
            parity_asked = true;
            for chunk in k..total {
                ask(chunk, &mut asked, &mut pending);
            }
        }
    }
    let needs_decode = !data_complete(&got);
    let codec = c.codecs.get(k, obj.layout.p()).ok()?;
    let run = move || -> Option<Bytes> {
        let mut out = vec![0u8; (decode.end - decode.start) as usize];
        let first = stripes.start;
        let at = decode.start;
        decode_range_with(codec.as_ref(), &obj.layout, decode, &mut out, |chunk, j| {
            got.get(chunk)?
                .as_ref()?
                .get(usize::try_from(j.checked_sub(first)?).ok()?)?
                .as_deref()
        })
        .ok()?;
        let out = Bytes::from(out);
        if let Some(h) = &obj.hoc {
            h.keep(at, &out);
        }
        let wanted = (bytes.start - at) as usize..(bytes.end - at) as usize;
        Some(out.slice(wanted))
    };
    if needs_decode {
        decoded.store(true, Ordering::Relaxed);
        tokio::task::spawn_blocking(run).await.ok()?
    } else {
        run()
    }
}

/// Reads the object's `pieces` (byte ranges and multipart text), window by window, with
/// [`READ_AHEAD`] windows in flight. The first window is read before this returns (`None` if
/// it cannot be: the caller treats the request as a miss); the rest is sent on the returned
/// channel, which closes without [`Chunk::Done`] if a later window fails. `finish`, work that
/// runs beside the read (the check that every target holds its chunk), is awaited before the
/// answer ends.
pub(super) async fn stream(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    obj: Arc<CodedObject>,
    pieces: Vec<Piece>,
    decoded: Arc<AtomicBool>,
    finish: Option<JoinHandle<()>>,
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
                // The answer's first window is one stripe; a later range's are full size.
                let first = if steps.iter().any(|s| matches!(s, Step::Window(..))) {
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
    let (st, c) = (st.clone(), c.clone());
    let spawn = move |s: Range<u64>, b: Range<u64>| {
        tokio::spawn(window(
            st.clone(),
            c.clone(),
            obj.clone(),
            s,
            b,
            decoded.clone(),
        ))
    };
    // Everything up to and including the first window is ready before answering.
    let mut ready = VecDeque::new();
    let mut in_flight = VecDeque::new();
    while let Some(step) = steps.pop_front() {
        match step {
            Step::Text(t) => ready.push_back(t),
            Step::Window(s, b) => {
                let first = spawn(s, b);
                let Some(bytes) = first.await.ok().flatten() else {
                    if let Some(f) = &finish {
                        f.abort();
                    }
                    return None;
                };
                for step in steps.iter() {
                    if in_flight.len() == READ_AHEAD {
                        break;
                    }
                    if let Step::Window(s, b) = step {
                        in_flight.push_back(Some(spawn(s.clone(), b.clone())));
                    }
                }
                ready.push_back(bytes);
                break;
            }
        }
    }
    if steps.is_empty() {
        if let Some(f) = finish {
            let _ = f.await;
        }
        return Some((ready, None));
    }
    let (tx, rx) = mpsc::channel(2);
    tokio::spawn(async move {
        // `in_flight` holds the next windows of `steps`, in order.
        while let Some(step) = steps.pop_front() {
            let data = match step {
                Step::Text(t) => t,
                Step::Window(..) => {
                    let next = match in_flight.pop_front() {
                        Some(Some(h)) => h,
                        _ => return,
                    };
                    // Keep READ_AHEAD windows in flight.
                    let mut seen = in_flight.len();
                    for step in steps.iter() {
                        if let Step::Window(s, b) = step {
                            if seen == 0 {
                                in_flight.push_back(Some(spawn(s.clone(), b.clone())));
                                break;
                            }
                            seen -= 1;
                        }
                    }
                    match next.await {
                        Ok(Some(b)) => b,
                        _ => return, // aborts the client's response: never a wrong byte
                    }
                }
            };
            if tx.send(Chunk::Data(data)).await.is_err() {
                return;
            }
        }
        if let Some(f) = finish {
            let _ = f.await;
        }
        let _ = tx.send(Chunk::Done).await;
    });
    Some((ready, Some(rx)))
}

/// The whole object, read window by window (for the HOC, or to restore missing pieces).
pub(super) async fn read_all(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    obj: Arc<CodedObject>,
    decoded: Arc<AtomicBool>,
) -> Option<Bytes> {
    let size = obj.layout.size();
    let mut handles = VecDeque::new();
    for (s, b) in obj.windows(0..size, None) {
        handles.push_back(tokio::spawn(window(
            st.clone(),
            c.clone(),
            obj.clone(),
            s,
            b,
            decoded.clone(),
        )));
    }
    let mut out = Vec::with_capacity(size as usize);
    for h in handles {
        out.extend_from_slice(&h.await.ok()??);
    }
    Some(Bytes::from(out))
}
