//! How the node runs HTTP/2 streams: in batches, on their connection's task.
//!
//! hyper's HTTP/2 server hands every request (its service future and its response body) to
//! an executor as one future, a *stream*, and the usual executor spawns each as a task. For a
//! hit from memory that costs a spawn, a trip through the scheduler and a wake-up of the
//! connection per request.
//!
//! Here a connection's streams are run the way nginx runs its requests. While the connection
//! is polled ([`Batched`]), the executor ([`StreamExecutor`]) only collects the streams hyper
//! starts; once that poll returns, each collected stream is polled once. A stream that
//! finishes there (a memory hit) has queued its response, and the connection, woken once for
//! all of them, sends them at its next poll, in one write: the connection's writes are
//! gathered while it is polled and sent when the poll is over (`gather.rs`; `h2` alone writes
//! each DATA frame of more than 256 bytes on its own). A stream that waits (a miss, a disk
//! read, a body larger than the flow-control window) goes on as its own task. The first poll's waker
//! does nothing: the spawned task polls the stream again with its real waker, and sees then
//! whatever happened in between. Outside a [`Batched`] poll, the executor polls a stream once
//! at once and spawns it if it is not done.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use super::gather::Sender;

/// A stream, boxed so that spawning it moves a pointer.
type Stream = Pin<Box<dyn Future<Output = ()> + Send>>;

thread_local! {
    /// The streams started during the current [`Batched`] poll on this thread (`None`: no
    /// such poll is under way).
    static STARTED: RefCell<Option<Vec<Stream>>> = const { RefCell::new(None) };
}

/// Polls `stream` once; spawns it if it is not done.
fn first_poll(mut stream: Stream) {
    let mut cx = Context::from_waker(Waker::noop());
    if stream.as_mut().poll(&mut cx).is_pending() {
        tokio::spawn(stream);
    }
}

/// The HTTP/2 builders' executor (see the module documentation).
#[derive(Clone, Copy, Debug)]
pub(super) struct StreamExecutor;

impl<F> hyper::rt::Executor<F> for StreamExecutor
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, stream: F) {
        let stream: Stream = Box::pin(stream);
        let stream = STARTED.with(|s| match s.borrow_mut().as_mut() {
            Some(started) => {
                started.push(stream);
                None
            }
            None => Some(stream),
        });
        if let Some(stream) = stream {
            first_poll(stream);
        }
    }
}

/// A connection future whose HTTP/2 streams run in batches (see the module documentation),
/// and whose writes are sent once each poll is over (see `gather.rs`).
pub(super) struct Batched<C> {
    conn: Pin<Box<C>>,
    /// The batch's vector, kept between polls.
    spare: Vec<Stream>,
    /// Sends what the connection's writes left gathered (none: they were not gathered).
    sender: Option<Sender>,
}

impl<C: Future> Batched<C> {
    pub(super) fn new(conn: C, sender: Option<Sender>) -> Batched<C> {
        Batched {
            conn: Box::pin(conn),
            spare: Vec::new(),
            sender,
        }
    }
}

impl<C: Future> Future for Batched<C> {
    type Output = C::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<C::Output> {
        let this = self.get_mut();
        let mine = std::mem::take(&mut this.spare);
        // Nested polls (a connection polled from another's stream) keep their own batch.
        let outer = STARTED.with(|s| s.replace(Some(mine)));
        let done = this.conn.as_mut().poll(cx);
        let mut started = STARTED.with(|s| s.replace(outer)).unwrap_or_default();
        for stream in started.drain(..) {
            first_poll(stream);
        }
        this.spare = started;
        // What this poll wrote goes out now, in one write. If the stream takes no more, the
        // task is woken when it does, and this is where the rest is sent.
        if let Some(sender) = &this.sender {
            let _ = sender.poll_send(cx);
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::rt::Executor;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Streams started while a connection is polled run after that poll, in order; one that
    /// waits is spawned and finishes on its own.
    #[tokio::test]
    async fn streams_run_after_their_connections_poll() {
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let finished = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let conn = {
            let order = order.clone();
            let finished = finished.clone();
            let mut rx = Some(rx);
            std::future::poll_fn(move |_| {
                for i in 0..3 {
                    let order = order.clone();
                    StreamExecutor.execute(async move { order.lock().unwrap().push(i) });
                }
                let (finished, rx) = (finished.clone(), rx.take().unwrap());
                StreamExecutor.execute(async move {
                    let _ = rx.await;
                    finished.fetch_add(1, Ordering::SeqCst);
                });
                // Nothing has run while the connection is polled.
                assert!(order.lock().unwrap().is_empty());
                Poll::Ready(())
            })
        };
        Batched::new(conn, None).await;
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
        assert_eq!(finished.load(Ordering::SeqCst), 0);
        tx.send(()).unwrap();
        for _ in 0..100 {
            if finished.load(Ordering::SeqCst) == 1 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        panic!("the waiting stream never finished");
    }

    /// Outside a batch a stream is polled at once.
    #[tokio::test]
    async fn alone_a_stream_runs_at_once() {
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        StreamExecutor.execute(async move {
            r.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }
}
