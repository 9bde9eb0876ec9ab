//! The head deadline of an HTTP/1.1 connection: a client must finish each request head within
//! `header_read_timeout` of the connection's start, or of the end of its previous response;
//! a connection that does not (a slowloris client trickling its head, or an idle keep-alive
//! connection) is closed.
//!
//! hyper keeps the same rule with a timer per request (its `header_read_timeout`): a boxed
//! sleep made, registered in tokio's timer wheel and removed again for every request, about
//! 4% of the CPU of a 1 KiB hit over TLS (BENCHMARKS.md, issue 46). Here a connection holds one sleep for its whole
//! life and moves it only when it fires; a request merely counts itself in and out
//! ([`InFlight`]: two atomic operations and a clock read). When the sleep fires:
//! - a request is in progress (its head has come, its response has not been sent whole):
//!   the deadline is `header_read_timeout` from now, as it is at the latest once that
//!   response ends (a response that takes long is never cut by this rule);
//! - none is, and `header_read_timeout` has passed since the last response ended (or the
//!   connection began): the deadline has passed and the connection is closed;
//! - none is, and the last response ended more recently: the sleep moves to its end plus
//!   `header_read_timeout`.
//!
//! HTTP/2 connections do not use it: hyper pings idle ones and closes them when the client
//! stops answering.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::body::{Body, Frame, SizeHint};
use tokio::time::Instant;

/// What a connection's requests tell its deadline.
struct Watch {
    /// When the connection began.
    start: Instant,
    /// Requests whose head has come and whose response has not ended.
    busy: AtomicUsize,
    /// When the last response ended, in nanoseconds since `start`.
    idle_since: AtomicU64,
}

/// One connection's head deadline (see the module doc).
pub(super) struct HeadDeadline {
    timeout: Duration,
    watch: Arc<Watch>,
}

/// A request in progress on a connection with a [`HeadDeadline`]: made when its head has
/// come, dropped when its response has ended (with the response's body) or was given up.
pub(super) struct InFlight(Arc<Watch>);

impl HeadDeadline {
    /// The deadline of a connection that begins now.
    pub(super) fn new(timeout: Duration) -> HeadDeadline {
        HeadDeadline {
            timeout,
            watch: Arc::new(Watch {
                start: Instant::now(),
                busy: AtomicUsize::new(0),
                idle_since: AtomicU64::new(0),
            }),
        }
    }

    /// What counts the connection's requests in, for its service to hold.
    pub(super) fn requests(&self) -> Requests {
        Requests(self.watch.clone())
    }

    /// Resolves when the connection has been idle past its deadline: then it is to be closed.
    pub(super) async fn passed(&self) {
        let mut at = self.watch.start + self.timeout;
        loop {
            tokio::time::sleep_until(at).await;
            // `busy` first: an [`InFlight`] records its end before it stops counting.
            if self.watch.busy.load(Ordering::Acquire) > 0 {
                at = Instant::now() + self.timeout;
                continue;
            }
            let idle_since = Duration::from_nanos(self.watch.idle_since.load(Ordering::Acquire));
            let deadline = self.watch.start + idle_since + self.timeout;
            if deadline <= Instant::now() {
                return;
            }
            at = deadline;
        }
    }
}

/// A connection's service's handle on its [`HeadDeadline`]: counts requests in.
#[derive(Clone)]
pub(super) struct Requests(Arc<Watch>);

impl Requests {
    /// A request whose head has come: the connection is busy until the result is dropped.
    pub(super) fn request(&self) -> InFlight {
        InFlight::new(self.0.clone())
    }
}

impl InFlight {
    fn new(watch: Arc<Watch>) -> InFlight {
        watch.busy.fetch_add(1, Ordering::AcqRel);
        InFlight(watch)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let w = &self.0;
        let since = u64::try_from(w.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        w.idle_since.fetch_max(since, Ordering::AcqRel);
        w.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its request [`InFlight`] until it is dropped (sent whole, or
/// given up with its connection); `None` on connections without a head deadline.
pub(super) struct Counted<B> {
    body: B,
    _in_flight: Option<InFlight>,
}

impl<B> Counted<B> {
    pub(super) fn new(body: B, in_flight: Option<InFlight>) -> Counted<B> {
        Counted {
            body,
            _in_flight: in_flight,
        }
    }
}

impl<B: Body + Unpin> Body for Counted<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        std::pin::Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(10);

    /// How long `passed` takes, on tokio's paused clock, while `during` runs beside it.
    async fn passes_after<F: std::future::Future<Output = ()>>(
        d: &HeadDeadline,
        during: F,
    ) -> Duration {
        let start = Instant::now();
        let ((), ()) = tokio::join!(d.passed(), during);
        start.elapsed()
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_connection_passes_its_deadline_from_its_start() {
        let d = HeadDeadline::new(T);
        assert_eq!(passes_after(&d, async {}).await, T);
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_counts_from_the_last_response_end() {
        let d = HeadDeadline::new(T);
        let took = passes_after(&d, async {
            // Requests at 3 s (2 s long) and at 9 s (1 s long): the last ends at 10 s.
            tokio::time::sleep(Duration::from_secs(3)).await;
            let r = d.requests().request();
            tokio::time::sleep(Duration::from_secs(2)).await;
            drop(r);
            tokio::time::sleep(Duration::from_secs(4)).await;
            let r = d.requests().request();
            tokio::time::sleep(Duration::from_secs(1)).await;
            drop(r);
        })
        .await;
        assert_eq!(took, Duration::from_secs(10) + T);
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_response_is_never_cut() {
        let d = HeadDeadline::new(T);
        let took = passes_after(&d, async {
            // One request from 1 s to 35 s, past three of the sleep's firings.
            tokio::time::sleep(Duration::from_secs(1)).await;
            let r = d.requests().request();
            tokio::time::sleep(Duration::from_secs(34)).await;
            drop(r);
        })
        .await;
        assert_eq!(took, Duration::from_secs(35) + T);
    }

    #[tokio::test(start_paused = true)]
    async fn overlapping_requests_keep_it_busy_until_the_last_ends() {
        let d = HeadDeadline::new(T);
        let took = passes_after(&d, async {
            let a = d.requests().request();
            let b = d.requests().request();
            tokio::time::sleep(Duration::from_secs(12)).await;
            drop(b);
            tokio::time::sleep(Duration::from_secs(3)).await;
            drop(a);
        })
        .await;
        assert_eq!(took, Duration::from_secs(15) + T);
    }
}
