//! An answer's bytes read window by window ([`stream`]), with windows read ahead, the
//! sources asked again once when a window fails, and work beside the read ([`Finish`])
//! awaited before the last byte; or the whole object ([`read_all`]).

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::object::CodedObject;
use super::window::{collect_window, start_window, WindowOut};
use crate::node::body::{Chunk, Piece};
use crate::node::cluster::pieces::member::Cluster;
use crate::node::state::State;

/// Windows read ahead of the one being sent.
const READ_AHEAD: usize = 1;

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
