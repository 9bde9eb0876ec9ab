//! Response bodies: a buffered one ([`NodeBody::Full`]), or a live one ([`LiveBody`]) fed by
//! an origin fetch (a miss's flight) or by a disk stream, with disk-hit bytes verified as they
//! are sent.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::mpsc;

use super::disk::Verifying;

/// What an in-flight fetch sends each subscriber after its replay.
pub(super) enum Chunk {
    Data(Bytes),
    /// Disk-hit bytes still to be verified as they are sent.
    Verifying(Verifying),
    /// The origin body completed (and was stored if it could be). A channel closed without
    /// `Done` means the exchange failed: the client's response is aborted.
    Done,
}

/// A client response body: buffered, or a miss streamed from an origin fetch.
pub enum NodeBody {
    Full(Full<Bytes>),
    Live(LiveBody),
}

/// A subscriber's view of an origin fetch: the frames received before it joined, then the
/// live ones.
pub struct LiveBody {
    replay: VecDeque<Bytes>,
    /// Disk-hit bytes being verified and sent, before anything more from `rx`.
    verifying: Option<Verifying>,
    rx: mpsc::Receiver<Chunk>,
    /// Bytes still to come, when the origin gave a `Content-Length`.
    remaining: Option<u64>,
    done: bool,
}

impl LiveBody {
    /// A body that sends `replay`, then `verifying`'s pieces, then what `rx` delivers;
    /// `remaining` is the length still to come, when known.
    pub(super) fn new(
        replay: VecDeque<Bytes>,
        verifying: Option<Verifying>,
        rx: mpsc::Receiver<Chunk>,
        remaining: Option<u64>,
    ) -> Self {
        LiveBody {
            replay,
            verifying,
            rx,
            remaining,
            done: false,
        }
    }

    fn data(&mut self, b: Bytes) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        if let Some(r) = &mut self.remaining {
            *r = r.saturating_sub(b.len() as u64);
        }
        Poll::Ready(Some(Ok(Frame::data(b))))
    }

    /// The frame for what the channel delivered (other than [`Chunk::Verifying`]).
    fn chunk(&mut self, c: Option<Chunk>) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match c {
            Some(Chunk::Data(b)) => self.data(b),
            Some(Chunk::Done) => {
                self.done = true;
                Poll::Ready(None)
            }
            Some(Chunk::Verifying(_)) | None => {
                self.done = true;
                Poll::Ready(Some(Err(io::Error::other("response aborted"))))
            }
        }
    }
}

impl Body for NodeBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match self.get_mut() {
            NodeBody::Full(f) => Pin::new(f).poll_frame(cx).map_err(|e| match e {}),
            NodeBody::Live(l) => {
                if l.done {
                    return Poll::Ready(None);
                }
                if let Some(b) = l.replay.pop_front() {
                    return l.data(b);
                }
                loop {
                    if let Some(v) = &mut l.verifying {
                        match v.next_piece() {
                            Some(Ok(b)) => return l.data(b),
                            Some(Err(())) => {
                                l.done = true;
                                return Poll::Ready(Some(Err(io::Error::other(
                                    "disk entry failed its checksum mid-response",
                                ))));
                            }
                            None => l.verifying = None,
                        }
                    }
                    match ready!(l.rx.poll_recv(cx)) {
                        Some(Chunk::Verifying(v)) => l.verifying = Some(v),
                        other => break l.chunk(other),
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            NodeBody::Full(f) => f.is_end_stream(),
            NodeBody::Live(l) => l.done,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            NodeBody::Full(f) => f.size_hint(),
            NodeBody::Live(l) => l
                .remaining
                .map_or_else(SizeHint::default, SizeHint::with_exact),
        }
    }
}
