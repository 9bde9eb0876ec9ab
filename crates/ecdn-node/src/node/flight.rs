//! Collapsed forwarding: one origin fetch (a *flight*) shared by concurrent misses of a key.
//!
//! Concurrent misses of one cache key share one origin fetch. Candidates are `GET`s without
//! `Range`, `Authorization` or request `no-store` (the others get their own, unshared fetch,
//! still streamed, and stored when storable as before); a request `no-cache` may join, since
//! the answer it gets comes from the origin now in any case. The first candidate creates an
//! in-flight entry (the *flight*) and spawns the origin fetch as its own task (`X-Cache:
//! MISS`); a candidate arriving while it runs subscribes (`X-Cache: MISS-COLLAPSED`, counted in
//! `misses` and in `collapsed`): it waits for the shared headers (a `watch` channel), gets the
//! frames received so far, then the live ones through a bounded channel. Every subscriber, the
//! leader included, reads the same way, and the leader's client is not special. The flight
//! accepts new subscribers only while it keeps every byte: it leaves the key as soon as the
//! answer turns out not storable (at the headers) or too large, then later misses start their
//! own fetch.
//!
//! * A not-storable answer (`no-store`, `private`, no lifetime, non-`200`…) is still given to
//!   the subscribers that joined before its headers: they asked at the same time, and this is
//!   one exchange (a deliberate relaxation of RFC 9111 §4, which only lets a cache reuse a
//!   storable response). Requests arriving after the headers are not collapsed into it.
//! * A client that disconnects mid-transfer only unsubscribes. If the answer is being stored
//!   the fetch runs to completion and fills the cache for the next requests; otherwise, once
//!   no subscriber is left, the fetch is abandoned (origin connection dropped). Either way
//!   nothing partial is ever stored.
//! * A failed fetch gives every subscriber the same `502` / `504`, or the same abort.
//!
//! The fetch is paced by its slowest subscriber (bounded per-subscriber queues), within the
//! per-frame timeout ([`super::NodeConfig::origin_timeout`]). The in-flight map is a
//! `std::sync::Mutex`, never held across an await nor together with a flight's own lock except
//! map → flight.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use hyper::header::HeaderMap;
use hyper::StatusCode;
use tokio::sync::{mpsc, watch};

use super::body::Chunk;
use super::lock::lock;
use super::outcome::Outcome;
use super::upstream::FetchError;
use super::vary::Vary;

/// The flights in progress that a miss may join, by cache key.
pub(super) type Flights = Mutex<HashMap<String, Arc<Flight>>>;

/// Frames a subscriber may have queued before the origin fetch waits for it.
const SUBSCRIBER_QUEUE: usize = 32;

/// The origin's status and headers, shared by every subscriber.
pub(super) struct Head {
    pub(super) status: StatusCode,
    pub(super) headers: HeaderMap,
    /// The outcome when the answer came from the cache ([`Outcome::Revalidated`],
    /// [`Outcome::Stale`]).
    pub(super) from_cache: Option<Outcome>,
    /// What the answer varies on, to tell whether it suits a request that joined the flight
    /// before the headers.
    pub(super) vary: Vary,
}

/// One origin fetch and its subscribers.
pub(super) struct Flight {
    pub(super) head: watch::Sender<Option<Result<Arc<Head>, FetchError>>>,
    st: Mutex<FlightState>,
    /// While the fetch asks other sites (`sites.rs`) rather than the origin: the sites its
    /// claim named (empty while it claims). A request from one of them is refused at once: it
    /// would wait on this fill while this fill waits on it.
    asking_sites: Mutex<Option<Vec<String>>>,
}

struct FlightState {
    /// Every body byte released so far, while `replayable` (also the accumulation to store).
    frames: Vec<Bytes>,
    /// Whether `frames` holds the whole body so far; once false, nobody can join.
    replayable: bool,
    subs: Vec<mpsc::Sender<Chunk>>,
    /// `Some(true)`: completed; `Some(false)`: failed or abandoned.
    ended: Option<bool>,
}

pub(super) type Subscription = (VecDeque<Bytes>, mpsc::Receiver<Chunk>);

impl Flight {
    pub(super) fn new() -> Arc<Flight> {
        Arc::new(Flight {
            head: watch::channel(None).0,
            asking_sites: Mutex::new(None),
            st: Mutex::new(FlightState {
                frames: Vec::new(),
                replayable: true,
                subs: Vec::new(),
                ended: None,
            }),
        })
    }

    /// Marks the fetch as asking the sites its claim `named` (`Some`; empty from before the
    /// flight can be found until the claim returns) or not (`None`: the origin, or the
    /// answer, is next).
    pub(super) fn set_asking_sites(&self, named: Option<Vec<String>>) {
        *lock(&self.asking_sites) = named;
    }

    /// Whether the fetch is asking other sites, one of them `from` (a [`super::sites::PEER_HEADER`]
    /// value).
    pub(super) fn asking_site(&self, from: &[u8]) -> bool {
        lock(&self.asking_sites)
            .as_ref()
            .is_some_and(|named| named.iter().any(|s| s.as_bytes() == from))
    }

    /// The body bytes released so far, while the flight keeps them (in a buffer of at least
    /// `capacity` bytes).
    pub(super) fn body_so_far(&self, capacity: usize) -> Vec<u8> {
        let mut buf = Vec::with_capacity(capacity);
        for f in &lock(&self.st).frames {
            buf.extend_from_slice(f);
        }
        buf
    }

    /// Joins: the frames so far plus a channel for the rest; `None` once the fetch can no
    /// longer be replayed from the start.
    pub(super) fn subscribe(&self) -> Option<Subscription> {
        let mut s = lock(&self.st);
        if !s.replayable {
            return None;
        }
        let (tx, rx) = mpsc::channel(SUBSCRIBER_QUEUE);
        match s.ended {
            Some(true) => {
                let _ = tx.try_send(Chunk::Done);
            }
            // Dropping `tx` aborts the subscriber's response.
            Some(false) => {}
            None => s.subs.push(tx),
        }
        Some((s.frames.iter().cloned().collect(), rx))
    }
}

/// Runs one origin fetch for its subscribers. Dropping it (finished, failed, abandoned, or
/// the task cancelled) always ends the flight: an unfinished one fails its subscribers.
pub(super) struct Driver {
    /// The flights map the flight is joinable in (the node's).
    pub(super) flights: Arc<Flights>,
    /// The origin timeout, per frame.
    pub(super) timeout: std::time::Duration,
    pub(super) flight: Arc<Flight>,
    /// The key under which the flight is joinable, while it is.
    pub(super) key: Option<String>,
}

impl Driver {
    /// No more joiners: leave the map, stop keeping the replay buffer.
    pub(super) fn seal(&mut self) {
        {
            let mut s = lock(&self.flight.st);
            s.replayable = false;
            s.frames = Vec::new();
        }
        self.unregister();
    }

    /// Leaves the map: new requests no longer join this fetch (its subscribers keep it).
    pub(super) fn unregister(&mut self) {
        if let Some(key) = self.key.take() {
            let mut m = lock(&self.flights);
            if m.get(&key).is_some_and(|f| Arc::ptr_eq(f, &self.flight)) {
                m.remove(&key);
            }
        }
    }

    /// Hands one frame to every subscriber. A subscriber that has not taken a frame within
    /// the origin timeout is dropped (its response is aborted). Returns whether anyone still
    /// needs the fetch.
    pub(super) async fn release(&mut self, data: Bytes, storing: bool) -> bool {
        let subs = {
            let mut s = lock(&self.flight.st);
            if s.replayable {
                s.frames.push(data.clone());
            }
            s.subs.retain(|t| !t.is_closed());
            s.subs.clone()
        };
        for tx in &subs {
            let sent = tokio::time::timeout(self.timeout, tx.send(Chunk::Data(data.clone())));
            if !matches!(sent.await, Ok(Ok(()))) {
                lock(&self.flight.st).subs.retain(|t| !t.same_channel(tx));
            }
        }
        storing || !lock(&self.flight.st).subs.is_empty()
    }

    /// Success: the flight is over, subscribers get their end of stream.
    pub(super) async fn finish(&mut self) {
        self.unregister();
        let subs = {
            let mut s = lock(&self.flight.st);
            s.ended = Some(true);
            std::mem::take(&mut s.subs)
        };
        for tx in subs {
            let _ = tokio::time::timeout(self.timeout, tx.send(Chunk::Done)).await;
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.unregister();
        self.flight.head.send_if_modified(|h| {
            if h.is_none() {
                *h = Some(Err(FetchError::Unreachable(
                    "origin fetch abandoned".into(),
                )));
                true
            } else {
                false
            }
        });
        let mut s = lock(&self.flight.st);
        if s.ended.is_none() {
            s.ended = Some(false);
            s.subs.clear();
        }
    }
}

/// A flight's shared head, once the origin fetch has it.
pub(super) async fn wait_head(flight: &Flight) -> Result<Arc<Head>, FetchError> {
    let mut head_rx = flight.head.subscribe();
    let head = head_rx
        .wait_for(Option::is_some)
        .await
        .ok()
        .and_then(|h| h.clone());
    head.unwrap_or_else(|| Err(FetchError::Unreachable("origin fetch abandoned".into())))
}
