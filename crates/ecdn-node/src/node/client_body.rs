//! A client's request body, and the rule that keeps the connection's framing whole: an answer
//! is handed to hyper only once the request's body has been read to its end, or else with
//! `Connection: close`.
//!
//! # Why
//!
//! hyper 1.x's HTTP/1 server returns a connection to idle when the request body is read to
//! its end if the response is complete by then, whether or not the response has been
//! flushed. If the response was complete first (an answer that never reads the body: a HOC
//! hit, or a disk hit whose blocking read was already done, produced in the same poll as
//! the body was dropped; an `/_ecdn/` answer; a `421`; an origin that answers an upload
//! without reading it), hyper drains the rest of the body afterwards and goes idle with the
//! response's tail still in its write buffer. The next pipelined request is then parsed at
//! once, and a malformed one makes hyper write its `400` head in front of that tail: in a
//! debug build the assertion `self.can_write_head()` (`proto/h1/conn.rs`) fails, in a
//! release build the `400` lands inside the previous response's body. The fuzz target
//! `http_request` found it (a `GET` with a chunked body and a trailer, then `G\n`).
//!
//! # What the node does
//!
//! * A body the node does not forward (every request but a pass) is read and discarded
//!   before the answer: at most [`UNREAD_LIMIT`] bytes, within the request's unread-body
//!   timeout ([`super::NodeConfig::header_read_timeout`]). A body that ends in time keeps the
//!   connection alive; a larger, slower, cut or malformed one is left unread and the answer
//!   says `Connection: close` (hyper then closes after it and reads no further request).
//! * A forwarded body (a pass) is watched: if the exchange with the origin is over before the
//!   body was read to its end (the origin answered without reading it all, or failed), the
//!   answer says `Connection: close`.
//!
//! * The S3 face and the object API read their bodies themselves ([`with_client_body`]):
//!   an answer given before its body was read to the end (a refusal before the body, a
//!   failed check halfway through) says `Connection: close`. A client that sent
//!   `Expect: 100-continue` and got a final answer first may or may not send the body
//!   (botocore does not), so the bytes after that answer are not known to be a request; hyper
//!   would read the next request's first bytes as the rest of the body (`PUT` seen as `UT`).
//!
//! Either way hyper is never given a complete response while the request body is still
//! being read on a connection that stays open. A request without a body (nearly every `GET`)
//! costs nothing: it is finished from the start.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response};

use super::body::NodeBody;

/// The most request-body bytes the node reads and discards to keep a connection alive.
pub(super) const UNREAD_LIMIT: u64 = 64 << 10;

/// A request body as received, which records when it has been read to its end.
pub(super) struct ClientBody {
    inner: Incoming,
    finished: Finished,
}

/// Whether a [`ClientBody`] has been read to its end (shared with whoever reads it).
#[derive(Clone)]
pub(super) struct Finished(Arc<AtomicBool>);

impl Finished {
    pub(super) fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    fn set(&self) {
        self.0.store(true, Ordering::Release);
    }
}

impl ClientBody {
    pub(super) fn new(inner: Incoming) -> (ClientBody, Finished) {
        let finished = Finished(Arc::new(AtomicBool::new(inner.is_end_stream())));
        (
            ClientBody {
                inner,
                finished: finished.clone(),
            },
            finished,
        )
    }

    /// Reads the body to its end and discards it, if it ends within [`UNREAD_LIMIT`] bytes
    /// and `timeout`: whether it did (else the connection must close after the answer).
    pub(super) async fn discard(mut self, timeout: Duration) -> bool {
        if self.finished.get() {
            return true;
        }
        if self.inner.size_hint().lower() > UNREAD_LIMIT {
            return false;
        }
        let read = async {
            let mut seen = 0u64;
            loop {
                match self.frame().await {
                    None => return true,
                    Some(Err(_)) => return false,
                    Some(Ok(f)) => {
                        seen += f.data_ref().map_or(0, |d| d.len() as u64);
                        if seen > UNREAD_LIMIT {
                            return false;
                        }
                    }
                }
            }
        };
        tokio::time::timeout(timeout, read).await.unwrap_or(false)
    }
}

impl Body for ClientBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        let r = Pin::new(&mut this.inner).poll_frame(cx);
        match &r {
            Poll::Ready(None) => this.finished.set(),
            Poll::Ready(Some(Ok(_))) if this.inner.is_end_stream() => this.finished.set(),
            _ => {}
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        let end = self.inner.is_end_stream();
        if end {
            self.finished.set();
        }
        end
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// `req` with its body as a [`ClientBody`], and the flag that says whether it was read to its
/// end: for the S3 face and the object API, which read bodies themselves and may answer
/// without reading one (a refusal before the body, a failure halfway through it).
pub(super) fn with_client_body(req: Request<Incoming>) -> (Request<ClientBody>, Finished) {
    let (parts, body) = req.into_parts();
    let (body, finished) = ClientBody::new(body);
    (Request::from_parts(parts, body), finished)
}

/// The answer, made to close the connection when the request body was not read to its end.
pub(super) fn settle(mut response: Response<NodeBody>, body_read: bool) -> Response<NodeBody> {
    if !body_read {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}
