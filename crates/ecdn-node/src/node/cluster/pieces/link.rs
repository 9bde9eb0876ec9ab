//! The node's outgoing peer link, as a test bed models it (issue 12; EC-Cache, OSDI '16, §6):
//! a cap on the bytes per second this node sends to its peers, and optional background
//! traffic that takes part of it.
//!
//! EC-Cache's evaluation runs in the bandwidth-limited regime, where a server's load is the
//! bytes read from it and a busy server is a slow one. On one machine, loopback is far faster
//! than the CPU that feeds it, so that regime needs a model of the link:
//!
//! * **The cap** (`--peer-rate`): the link sends one [`QUANTUM`] at a time. A sender reserves
//!   the link for its next quantum after every quantum already reserved (a FIFO of quanta, so
//!   concurrent senders share the link round-robin, as flows share a NIC) and the quantum
//!   leaves when its reservation ends. Peer `GET` answers are sent this way
//!   ([`NodeBody::Produced`](crate::node::body::NodeBody)), and so are the node's reads of its
//!   own splits for the object API, so that a split costs its server the same link time
//!   whoever asks. A read abandoned midway (late binding cancels the slow ones) stops taking
//!   the link at its next quantum.
//! * **Background load** (`--background-load F`, §6.3's unbalanced background traffic): a
//!   sender that, in bursts, takes a fraction `F` of the link: on and off periods alternate,
//!   each exponential with a mean of one second.
//!
//! Without a cap the link only counts ([`Link::sent`]): every byte of a peer `GET` answer or
//! of an own split read, the load EC-Cache's λ is computed from.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use ecdn_cluster::auth::{SubChunkTagger, SUB_TAG_LEN};
use hyper::body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use crate::node::config::PeerLink;

/// The unit the link sends at once.
pub(in crate::node) const QUANTUM: usize = 64 << 10;

/// Mean length of the background sender's on and off periods.
const BURST_MEAN: Duration = Duration::from_secs(1);

/// One node's outgoing link.
pub(in crate::node) struct Link {
    /// Nanoseconds per byte; 0 without a cap.
    ns_per_byte: f64,
    /// When the last reserved quantum leaves.
    free_at: Mutex<Instant>,
    /// Bytes sent for peers and own split reads.
    sent: AtomicU64,
    /// Bytes the background sender took.
    background: AtomicU64,
}

impl Link {
    pub(in crate::node) fn new(cfg: &PeerLink) -> Arc<Link> {
        let link = Arc::new(Link {
            ns_per_byte: cfg.rate.map_or(0.0, |r| 1e9 / r as f64),
            free_at: Mutex::new(Instant::now()),
            sent: AtomicU64::new(0),
            background: AtomicU64::new(0),
        });
        if cfg.rate.is_some() && cfg.background_load > 0.0 {
            tokio::spawn(background(Arc::downgrade(&link), cfg.background_load));
        }
        link
    }

    pub(in crate::node) fn capped(&self) -> bool {
        self.ns_per_byte > 0.0
    }

    /// Reserves the link for `len` bytes after everything reserved before; when they leave.
    pub(in crate::node) fn reserve(&self, len: usize) -> Instant {
        let now = Instant::now();
        let mut free_at = self.free_at.lock().unwrap_or_else(|p| p.into_inner());
        let start = (*free_at).max(now);
        *free_at = start + Duration::from_nanos((len as f64 * self.ns_per_byte) as u64);
        *free_at
    }

    /// Bytes queued on the link now (the reservations not yet sent); 0 without a cap.
    pub(in crate::node) fn queued_bytes(&self) -> f64 {
        if !self.capped() {
            return 0.0;
        }
        let free_at = *self.free_at.lock().unwrap_or_else(|p| p.into_inner());
        let wait = free_at.saturating_duration_since(Instant::now());
        wait.as_nanos() as f64 / self.ns_per_byte
    }

    /// Counts `len` bytes sent (for the load).
    pub(in crate::node) fn count(&self, len: usize) {
        self.sent.fetch_add(len as u64, Ordering::Relaxed);
    }

    /// Sends `len` bytes through the link: quantum by quantum, each counted when it is
    /// queued and sent when its reservation ends (a send dropped midway counts what it queued,
    /// as a [`Paced`] body does).
    pub(in crate::node) async fn send(&self, len: usize) {
        if !self.capped() {
            self.count(len);
            return;
        }
        let mut left = len;
        while left > 0 {
            let q = left.min(QUANTUM);
            self.count(q);
            tokio::time::sleep_until(self.reserve(q)).await;
            left -= q;
        }
    }

    pub(in crate::node) fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    pub(in crate::node) fn background_sent(&self) -> u64 {
        self.background.load(Ordering::Relaxed)
    }
}

/// A response body sent through the link ([`Link`]'s quanta, each when its reservation ends):
/// one buffer, or several in order (a piece's sub-chunks with their tags, without copying them
/// into one).
pub struct Paced {
    /// Parts ready to go, in order.
    rest: VecDeque<Bytes>,
    /// Sub-chunks still to be tagged, each then followed by its tag.
    untagged: VecDeque<Bytes>,
    /// The tagger of `untagged` and the next one's sub-chunk index.
    tags: Option<(SubChunkTagger, u64)>,
    /// Bytes still to send, tags to come included.
    left: usize,
    link: Arc<Link>,
    /// The quantum on its way and when it leaves.
    next: Option<(Bytes, Pin<Box<Sleep>>)>,
}

impl Paced {
    pub(in crate::node) fn new(body: Bytes, link: Arc<Link>) -> Paced {
        Paced {
            left: body.len(),
            rest: VecDeque::from([body]),
            untagged: VecDeque::new(),
            tags: None,
            link,
            next: None,
        }
    }

    /// A body of sub-chunks `first..` (`subs`, in order), each followed by its tag; a tag is
    /// computed when its sub-chunk is about to be sent, so the first one leaves without
    /// waiting for the others' tags.
    pub(in crate::node) fn tagged(
        subs: VecDeque<Bytes>,
        first: u64,
        tagger: SubChunkTagger,
        link: Arc<Link>,
    ) -> Paced {
        Paced {
            left: subs.iter().map(|s| s.len() + SUB_TAG_LEN).sum(),
            rest: VecDeque::new(),
            untagged: subs,
            tags: Some((tagger, first)),
            link,
            next: None,
        }
    }

    fn poll_quantum(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        if let Some((_, sleep)) = &mut self.next {
            ready!(sleep.as_mut().poll(cx));
            return Poll::Ready(self.next.take().map(|(q, _)| q));
        }
        let q = loop {
            if self.rest.is_empty() {
                let (Some(sub), Some((tagger, index))) =
                    (self.untagged.pop_front(), &mut self.tags)
                else {
                    return Poll::Ready(None);
                };
                let tag = tagger.tag(*index, &sub);
                *index += 1;
                self.rest.push_back(sub);
                self.rest.push_back(Bytes::copy_from_slice(&tag));
            }
            let Some(front) = self.rest.front_mut() else {
                continue;
            };
            if front.len() > QUANTUM {
                break front.split_to(QUANTUM);
            }
            let part = self.rest.pop_front().unwrap_or_default();
            if !part.is_empty() {
                break part;
            }
        };
        self.left -= q.len();
        self.link.count(q.len());
        if !self.link.capped() {
            return Poll::Ready(Some(q));
        }
        let at = self.link.reserve(q.len());
        self.next = Some((q, Box::pin(tokio::time::sleep_until(at))));
        // Registers the waker with the new sleep.
        self.poll_quantum(cx)
    }

    pub(in crate::node) fn remaining(&self) -> u64 {
        (self.left + self.next.as_ref().map_or(0, |(q, _)| q.len())) as u64
    }
}

impl Body for Paced {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        self.get_mut()
            .poll_quantum(cx)
            .map(|q| q.map(|q| Ok(Frame::data(q))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining() == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining())
    }
}

/// An exponential duration of mean [`BURST_MEAN`].
fn burst(rng: &mut ecdn_trace::Rng) -> Duration {
    BURST_MEAN.mul_f64(rng.exp())
}

/// The background sender: on a burst, one quantum per `QUANTUM / (F × rate)` of time, each
/// queued on the link like any other; ends with the link.
async fn background(link: std::sync::Weak<Link>, fraction: f64) {
    let seed = std::process::id() as u64 ^ 0x6263_6b67;
    let mut rng = ecdn_trace::Rng::new(seed);
    loop {
        let on_until = Instant::now() + burst(&mut rng);
        while Instant::now() < on_until {
            let Some(l) = link.upgrade() else { return };
            let period = Duration::from_nanos((QUANTUM as f64 * l.ns_per_byte / fraction) as u64);
            let next = Instant::now() + period;
            l.reserve(QUANTUM);
            l.background.fetch_add(QUANTUM as u64, Ordering::Relaxed);
            drop(l);
            tokio::time::sleep_until(next).await;
        }
        tokio::time::sleep(burst(&mut rng)).await;
        if link.strong_count() == 0 {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_checked() {
        assert!(PeerLink::default().validate().is_ok());
        let capped = PeerLink {
            rate: Some(1 << 20),
            background_load: 0.5,
        };
        assert!(capped.validate().is_ok());
        for bad in [
            PeerLink {
                rate: Some(0),
                ..capped
            },
            PeerLink {
                background_load: 1.0,
                ..capped
            },
            PeerLink {
                rate: None,
                ..capped
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_senders_share_the_cap() {
        // 1 MiB/s: two senders of 512 KiB each finish together after about one second.
        let link = Link::new(&PeerLink {
            rate: Some(1 << 20),
            background_load: 0.0,
        });
        let t0 = Instant::now();
        let (a, b) = (link.clone(), link.clone());
        let ends = tokio::join!(
            async move {
                a.send(512 << 10).await;
                t0.elapsed()
            },
            async move {
                b.send(512 << 10).await;
                t0.elapsed()
            }
        );
        assert_eq!(link.queued_bytes(), 0.0);
        for e in [ends.0, ends.1] {
            assert!(
                e >= Duration::from_millis(930) && e <= Duration::from_millis(1001),
                "{e:?}"
            );
        }
        assert_eq!(link.sent(), 1 << 20);
    }

    #[tokio::test(start_paused = true)]
    async fn background_load_takes_its_share() {
        let link = Link::new(&PeerLink {
            rate: Some(10 << 20),
            background_load: 0.5,
        });
        tokio::time::sleep(Duration::from_secs(100)).await;
        // On half of the time (on and off of equal mean), half the rate while on.
        let share = link.background_sent() as f64 / (100.0 * (10 << 20) as f64);
        assert!((0.15..0.35).contains(&share), "{share}");
    }

    #[tokio::test(start_paused = true)]
    async fn uncapped_only_counts() {
        let link = Link::new(&PeerLink::default());
        let t0 = Instant::now();
        link.send(100 << 20).await;
        assert_eq!(t0.elapsed(), Duration::ZERO);
        assert_eq!(link.sent(), 100 << 20);
    }
}
