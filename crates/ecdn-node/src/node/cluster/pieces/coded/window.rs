//! One window of an object's stripes: its chunks read at once, each stripe sent as soon as
//! it is complete, parity asked for when a data chunk is late, missing or corrupt, and a
//! stripe decoded only when it lacks a data sub-chunk.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ecdn_codec::decode_range_with;
use tokio::sync::mpsc;

use super::object::CodedObject;
use super::sub_chunks::{read_chunk, Arrival};
use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::stats::Parity;
use crate::node::state::State;

/// What a window sends the answer: a stripe's bytes (one or more buffers, in order), and at
/// the end [`WindowOut::Done`]; a window whose channel closes without it failed.
pub(super) enum WindowOut {
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
pub(super) fn start_window(
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
pub(super) async fn collect_window(rx: &mut mpsc::Receiver<WindowOut>) -> Option<Vec<Bytes>> {
    let mut all = Vec::new();
    loop {
        match rx.recv().await? {
            WindowOut::Bytes(b) => all.extend(b),
            WindowOut::Done => return Some(all),
        }
    }
}
