//! Response bodies: a buffered one ([`NodeBody::Full`]), or a live one ([`LiveBody`]) fed by
//! an origin fetch (a miss's flight) or by a disk stream, with disk-hit bytes verified as they
//! are sent ([`Verifying`]); and what a hit's body is made of ([`Piece`]).

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::mpsc;

use ecdn_store::{BadBlock, BlockVerifier, MappedBlocks};

/// What an in-flight fetch sends each subscriber after its replay.
pub(super) enum Chunk {
    Data(Bytes),
    /// Several buffers, in order (a coded object's stripe: slices of its sub-chunks).
    Slices(Vec<Bytes>),
    /// Disk-hit bytes still to be verified as they are sent.
    Verifying(Verifying),
    /// The origin body completed (and was stored if it could be). A channel closed without
    /// `Done` means the exchange failed: the client's response is aborted.
    Done,
}

/// A client response body: buffered (whole, or as slices of buffers held elsewhere: a striped
/// HOC object's stripes), or a miss streamed from an origin fetch.
pub enum NodeBody {
    Full(Full<Bytes>),
    Slices(VecDeque<Bytes>),
    Live(LiveBody),
    /// A body another part of the node makes and paces itself: the cluster's answers to
    /// peers (sent through the modelled peer link, or cut into tagged segments for a relaying
    /// node), which this module does not need to know.
    Produced(Pin<Box<dyn Body<Data = Bytes, Error = io::Error> + Send + Sync>>),
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

    /// `body` at once but its last byte, which is sent once `until` is over: work beside the
    /// answer whose outcome the client's next request must find done (a client has not every
    /// byte before). `body` must not be empty (nothing could wait: await `until` first).
    pub(super) fn last_byte_after(
        body: Bytes,
        until: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> LiveBody {
        let n = body.len();
        debug_assert!(n > 0, "an empty body cannot hold its last byte back");
        let last = body.slice(n.saturating_sub(1)..);
        let (tx, rx) = mpsc::channel(2);
        tokio::spawn(async move {
            until.await;
            if tx.send(Chunk::Data(last)).await.is_ok() {
                let _ = tx.send(Chunk::Done).await;
            }
        });
        let first = body.slice(..n.saturating_sub(1));
        LiveBody::new(VecDeque::from([first]), None, rx, Some(n as u64))
    }

    fn data(&mut self, b: Bytes) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        if let Some(r) = &mut self.remaining {
            *r = r.saturating_sub(b.len() as u64);
        }
        Poll::Ready(Some(Ok(Frame::data(b))))
    }

    /// The frame for what the channel delivered (other than [`Chunk::Verifying`] and
    /// [`Chunk::Slices`]).
    fn chunk(&mut self, c: Option<Chunk>) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match c {
            Some(Chunk::Data(b)) => self.data(b),
            Some(Chunk::Done) => {
                self.done = true;
                Poll::Ready(None)
            }
            Some(Chunk::Verifying(_) | Chunk::Slices(_)) | None => {
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
            NodeBody::Slices(s) => Poll::Ready(s.pop_front().map(|b| Ok(Frame::data(b)))),
            NodeBody::Produced(p) => p.as_mut().poll_frame(cx),
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
                        Some(Chunk::Slices(v)) => {
                            l.replay.extend(v);
                            if let Some(b) = l.replay.pop_front() {
                                return l.data(b);
                            }
                        }
                        other => break l.chunk(other),
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            NodeBody::Full(f) => f.is_end_stream(),
            NodeBody::Slices(s) => s.is_empty(),
            NodeBody::Live(l) => l.done,
            NodeBody::Produced(p) => p.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            NodeBody::Full(f) => f.size_hint(),
            NodeBody::Slices(s) => SizeHint::with_exact(s.iter().map(|b| b.len() as u64).sum()),
            NodeBody::Produced(p) => p.size_hint(),
            NodeBody::Live(l) => l
                .remaining
                .map_or_else(SizeHint::default, SizeHint::with_exact),
        }
    }
}

/// What a hit's body is made of, in order: byte ranges of the stored body, and literal text
/// (the framing of a `multipart/byteranges` answer). The body may be in memory or streamed
/// from the disk (and, in the cluster, assembled from chunks).
#[derive(Debug)]
pub(super) enum Piece {
    Body(std::ops::Range<u64>),
    Text(Bytes),
}

impl Piece {
    /// The bytes it puts in the body.
    pub(super) fn len(&self) -> u64 {
        match self {
            Piece::Body(r) => r.end - r.start,
            Piece::Text(t) => t.len() as u64,
        }
    }
}

/// Bytes of a disk entry mapped from the page cache ([`ecdn_store::SharedPayload::Mapped`]),
/// verified [`VERIFY_PIECE`] bytes at a time just before each piece is handed to the
/// connection, so the checksum pass leaves the bytes in this core's cache for the socket's
/// copy. A block that fails its checksum ends the piece stream with an error and runs the
/// `on_bad_block` hook (the disk drops the entry).
pub(super) struct Verifying {
    bytes: Bytes,
    pub(super) verifier: BlockVerifier,
    on_bad_block: Option<Box<dyn FnOnce() + Send + Sync>>,
}

/// Bytes verified (and sent) per step of a [`Verifying`]: a few checksum blocks, small enough
/// to stay in the CPU cache until the socket copies them.
const VERIFY_PIECE: usize = 1 << 20;

impl Verifying {
    pub(super) fn new(
        m: MappedBlocks,
        on_bad_block: impl FnOnce() + Send + Sync + 'static,
    ) -> Self {
        let (map, verifier) = m.into_parts();
        Verifying {
            bytes: Bytes::from_owner(map),
            verifier,
            on_bad_block: Some(Box::new(on_bad_block)),
        }
    }

    /// The next verified piece; `Some(Err(()))` when a block failed; `None` when all bytes
    /// were sent.
    pub(super) fn next_piece(&mut self) -> Option<Result<Bytes, ()>> {
        loop {
            match self.verifier.next(&self.bytes, VERIFY_PIECE)? {
                Ok(r) if r.is_empty() => continue,
                Ok(r) => return Some(Ok(self.bytes.slice(r))),
                Err(BadBlock) => {
                    if let Some(hook) = self.on_bad_block.take() {
                        hook();
                    }
                    return Some(Err(()));
                }
            }
        }
    }
}
