//! The signed peer client and the receiving side's check, for node↔node and node↔coordinator
//! requests (see [`crate::auth`] for the signature itself).
//!
//! * [`PeerClient`] — one pooled HTTP/1.1 client (hyper-util's legacy client: connections are
//!   kept and reused per peer, `TCP_NODELAY` on; over mutual TLS when the cluster file has
//!   `[peer_tls]`, [`PeerClient::for_cluster`] and [`crate::peer_connector`]).
//!   [`PeerClient::send`] signs every request with
//!   the cluster key over the body's digest, for the address it is sent to, under the map epoch
//!   the client was last told ([`PeerClient::set_epoch`]) and with a fresh nonce, and bounds the
//!   time to the response headers; its
//!   [`PeerError`] says whether the peer refused the connection, reset it or did not answer in
//!   time, so a caller can go on with another peer at once.
//!   [`PeerClient::send_streamed`] sends a body as it is produced (signed as streamed, ended
//!   with its body tag by [`BodySender::finish`]).
//! * [`verify_parts`] — the check of a request's signature headers, before the receiver acts on
//!   anything (a listener goes through [`crate::replay::Gate::admit`], which also refuses
//!   requests for another process and replays); [`read_verified_body`] then reads the body up to
//!   a size limit and checks it against the signed digest (or its tag), returning its content.
//! * [`sign_response`] / [`verify_response`] — the coordinator signs what it answers (the map,
//!   heartbeat replies, the status), and a node its `has` answers, pieces and stats, for the
//!   request's path ([`ClusterKey::sign_response`]), so a node never takes a map from anyone
//!   without the cluster key.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Request, Response, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use thiserror::Error;

use crate::auth::{self, BodyTagger, ClusterKey, Recipient};
use crate::breaker::Breaker;
use crate::config::ClusterConfig;
use crate::health::observer::{Outcome, PeerObserver};
use crate::mtls::PeerTls;
use crate::peer_connector::PeerConnector;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

mod receive;
pub use receive::{
    read_body, read_verified_body, sign_answer, sign_response, verify_parts, verify_response,
    BodyError, ToSign,
};

/// Why a peer request failed.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum PeerError {
    /// Nothing listens at the address (the peer is down): fail over at once.
    #[error("connection refused by {0}")]
    Refused(SocketAddr),
    /// The connection was reset or closed before the response headers arrived.
    #[error("connection to {0} reset")]
    Reset(SocketAddr),
    /// No response headers within the timeout (connect included).
    #[error("no answer from {0} within {1:?}")]
    Timeout(SocketAddr, Duration),
    /// The peer acknowledged nothing for [`PEER_GONE`] — not the connect, not what was sent
    /// to it, not the connection's keep-alive probes: cut off, or its host gone. (The
    /// request's own timeout had not run out; a slow peer that is reachable acknowledges.)
    #[error("{0} acknowledged nothing for {PEER_GONE:?}: cut off, or its host gone")]
    Gone(SocketAddr),
    /// Anything else (an unreachable network, a malformed request or response).
    #[error("request to {0} failed: {1}")]
    Other(SocketAddr, String),
    /// Not sent: the peer failed to answer lately and is skipped for the time given
    /// ([`crate::breaker`]).
    #[error("{0} skipped for {1:?}: it did not answer lately")]
    Skipped(SocketAddr, Duration),
}

impl PeerError {
    /// The peer the request was for.
    pub fn addr(&self) -> SocketAddr {
        match self {
            PeerError::Refused(a)
            | PeerError::Reset(a)
            | PeerError::Timeout(a, _)
            | PeerError::Gone(a)
            | PeerError::Other(a, _)
            | PeerError::Skipped(a, _) => *a,
        }
    }
}

/// How long a peer may leave a connect, or what was sent to it, unacknowledged before the
/// connection is given up (the connect timeout, TCP_USER_TIMEOUT, and the keep-alive probes'
/// span). The peers are one cluster's servers, on one network: a reachable peer's kernel
/// acknowledges within milliseconds even when its process is slow or starved, and a lost
/// segment is sent again within a second (the minimum retransmission timeout is 200 ms). A
/// relay, a lookup or a piece write to a peer cut off gives up within this (plus the second
/// of keep-alive probing), not when its own timeout — up to the origin's — runs out.
pub const PEER_GONE: Duration = Duration::from_secs(2);
/// How long an idle pooled connection is kept.
const POOL_IDLE: Duration = Duration::from_secs(30);

/// The body of a peer request: whole, or streamed from a [`BodySender`].
pub enum PeerBody {
    Full(Full<Bytes>),
    Streamed(mpsc::UnboundedReceiver<Result<Bytes, std::io::Error>>),
}

impl Body for PeerBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.get_mut() {
            PeerBody::Full(f) => Pin::new(f).poll_frame(cx).map_err(|never| match never {}),
            PeerBody::Streamed(rx) => rx.poll_recv(cx).map(|r| r.map(|r| r.map(Frame::data))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            PeerBody::Full(f) => f.is_end_stream(),
            PeerBody::Streamed(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            PeerBody::Full(f) => f.size_hint(),
            PeerBody::Streamed(_) => SizeHint::default(),
        }
    }
}

/// The producing end of a streamed request body (see [`PeerClient::send_streamed`]). Sending
/// never waits (the bytes queue in memory until the connection takes them). Dropped without
/// [`BodySender::finish`], the body ends without its tag, which the receiver refuses.
pub struct BodySender {
    tx: mpsc::UnboundedSender<Result<Bytes, std::io::Error>>,
    tagger: BodyTagger,
    sent: u64,
}

impl BodySender {
    /// Queues content bytes; false when the request is gone (failed or answered early).
    pub fn send(&mut self, bytes: Bytes) -> bool {
        self.tagger.update(&bytes);
        self.sent += bytes.len() as u64;
        self.tx.send(Ok(bytes)).is_ok()
    }

    /// Content bytes sent so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Ends the body with its tag; false when the request is gone.
    pub fn finish(self) -> bool {
        let tag = self.tagger.finish();
        self.tx.send(Ok(Bytes::copy_from_slice(&tag))).is_ok()
    }

    /// Ends the body with an error: the connection is closed, the receiver stores nothing.
    pub fn abort(self) {
        let _ = self
            .tx
            .send(Err(std::io::Error::other("body aborted by its sender")));
    }
}

tokio::task_local! {
    /// The client request the current work serves (its `X-Request-Id`): every peer request
    /// sent within its scope carries it, so one request can be followed across the cluster.
    pub static REQUEST_ID: HeaderValue;
}

/// The header that carries a request id, to peers and to the origin.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// The request id in scope, if any.
pub fn request_id() -> Option<HeaderValue> {
    REQUEST_ID.try_with(Clone::clone).ok()
}

/// ` (request ID)` for an error line written while serving a request, else nothing.
pub fn request_note() -> String {
    request_id()
        .and_then(|id| id.to_str().ok().map(|s| format!(" (request {s})")))
        .unwrap_or_default()
}

/// `tokio::spawn`, with the request id in scope kept in the new task.
pub fn spawn_traced<F>(task: F) -> JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    match request_id() {
        Some(id) => tokio::spawn(REQUEST_ID.scope(id, task)),
        None => tokio::spawn(task),
    }
}

/// The signed, pooled peer client. Clones share the connection pool, the key and the epoch.
#[derive(Clone)]
pub struct PeerClient {
    client: Client<PeerConnector, PeerBody>,
    /// `https` over mutual TLS, else `http`.
    scheme: &'static str,
    key: Arc<ClusterKey>,
    /// The epoch of the map its owner acts under (0: none), signed into every request.
    epoch: Arc<AtomicU64>,
    /// Peers that failed to answer lately, skipped for a while ([`PeerClient::with_breaker`]).
    breaker: Option<Arc<Breaker>>,
    /// How each peer answered lately, for the coordinator's health verdicts
    /// ([`PeerClient::with_observer`]).
    observer: Option<Arc<PeerObserver>>,
}

impl std::fmt::Debug for PeerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerClient(..)")
    }
}

impl PeerClient {
    /// A client signing with `key`, over plain TCP. Must be called within a tokio runtime's
    /// context only when a request is sent (building it needs none).
    pub fn new(key: ClusterKey) -> PeerClient {
        Self::with_tls(key, None)
    }

    /// The client of a process of the cluster of `cfg`: signing with its key ring, over
    /// mutual TLS when the file has `[peer_tls]`.
    pub fn for_cluster(cfg: &ClusterConfig) -> PeerClient {
        Self::with_tls(cfg.cluster_key(), cfg.peer_tls())
    }

    /// A client signing with `key`, over mutual TLS when `tls` is given.
    pub fn with_tls(key: ClusterKey, tls: Option<&PeerTls>) -> PeerClient {
        let mut connector = HttpConnector::new();
        // The scheme is `https` over TLS; the TLS itself is the connector's.
        connector.enforce_http(false);
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(PEER_GONE));
        // A peer that stops acknowledging (cut off, or its host gone) breaks the connection
        // within seconds, even while a request waits on a slow answer (a relay waits as long
        // as the origin may take): unacknowledged data for PEER_GONE ends it, and so do
        // keep-alive probes unanswered for as long while it idles. A slow but reachable peer
        // acknowledges at once and is waited for.
        connector.set_tcp_user_timeout(Some(PEER_GONE));
        connector.set_keepalive(Some(Duration::from_secs(1)));
        connector.set_keepalive_interval(Some(Duration::from_secs(1)));
        connector.set_keepalive_retries(Some(2));
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(POOL_IDLE)
            .build(PeerConnector {
                tcp: connector,
                tls: tls.cloned(),
            });
        PeerClient {
            client,
            scheme: if tls.is_some() { "https" } else { "http" },
            key: Arc::new(key),
            epoch: Arc::new(AtomicU64::new(0)),
            breaker: None,
            observer: None,
        }
    }

    /// A client sharing this one's pool, key and epoch that skips peers which failed to
    /// answer lately ([`crate::breaker`]): for requests to other nodes, not to the
    /// coordinator, whose heartbeats must not be skipped.
    pub fn with_breaker(&self) -> PeerClient {
        PeerClient {
            breaker: Some(Arc::new(Breaker::default())),
            ..self.clone()
        }
    }

    /// A client sharing this one's pool, key, epoch and breaker that notes how every peer
    /// answered in `observer` ([`crate::health::observer`]).
    pub fn with_observer(&self, observer: Arc<PeerObserver>) -> PeerClient {
        PeerClient {
            observer: Some(observer),
            ..self.clone()
        }
    }

    /// Its observer, if it has one.
    pub fn observer(&self) -> Option<&Arc<PeerObserver>> {
        self.observer.as_ref()
    }

    fn admit(&self, addr: SocketAddr) -> Result<(), PeerError> {
        match &self.breaker {
            Some(b) => b
                .admit(addr, Instant::now())
                .map_err(|left| PeerError::Skipped(addr, left)),
            None => Ok(()),
        }
    }

    /// Tells the breaker and the observer how a request to `addr` went.
    fn record<T>(
        breaker: &Option<Arc<Breaker>>,
        observer: &Option<Arc<PeerObserver>>,
        addr: SocketAddr,
        result: &Result<T, PeerError>,
    ) {
        let now = Instant::now();
        let failed = matches!(
            result,
            Err(PeerError::Refused(_)
                | PeerError::Timeout(..)
                | PeerError::Gone(_)
                | PeerError::Other(..))
        );
        if let Some(o) = observer {
            // A request the breaker skipped says nothing new: the failure that struck the
            // peer was noted, and the probes go on past the breaker.
            let outcome = match result {
                Ok(_) => Outcome::Answered,
                Err(_) if failed => Outcome::Failed,
                Err(_) => Outcome::Neutral,
            };
            o.note(addr, outcome, now);
        }
        let Some(b) = breaker else { return };
        match result {
            Ok(_) => b.answered(addr),
            Err(_) if failed => b.struck(addr, now),
            Err(_) => {}
        }
    }

    /// Probes the peer at `addr` ([`crate::wire::PROBE_PATH`]), past the breaker: the round
    /// trip to its answer, noted in the observer. An answer also clears the peer's strikes; a
    /// failure strikes nothing (the requests that matter strike for themselves: a probe that
    /// failed while a peer was still starting must not have its pieces skipped).
    pub async fn probe(&self, addr: SocketAddr, timeout: Duration) -> Result<Duration, PeerError> {
        let t = Instant::now();
        if let Some(o) = &self.observer {
            if !o.probe_started(addr, t) {
                return Err(PeerError::Other(addr, "a probe is on its way".into()));
            }
        }
        let unbroken = PeerClient {
            breaker: None,
            ..self.clone()
        };
        let result = unbroken
            .send_admitted(
                addr,
                Method::GET,
                crate::wire::PROBE_PATH,
                Bytes::new(),
                &[],
                timeout,
            )
            .await;
        let rtt = t.elapsed();
        if let Some(o) = &self.observer {
            o.probe_ended(addr, t);
        }
        match &result {
            Ok(resp) if resp.status().is_success() => {
                if let Some(o) = &self.observer {
                    o.probed(addr, rtt, Instant::now());
                }
                if let Some(b) = &self.breaker {
                    b.answered(addr);
                }
                Ok(rtt)
            }
            Ok(resp) => Err(PeerError::Other(
                addr,
                format!("probe answered {}", resp.status()),
            )),
            Err(e) => Err(e.clone()),
        }
    }

    pub fn key(&self) -> &ClusterKey {
        &self.key
    }

    /// The map epoch the client's requests are signed under from now on (for it and its
    /// clones): a node's current map's, the coordinator's published one.
    pub fn set_epoch(&self, epoch: u64) {
        self.epoch.store(epoch, Ordering::Relaxed);
    }

    /// Whom a request to `addr` is signed for.
    fn recipient(&self, addr: SocketAddr) -> Recipient {
        Recipient {
            addr,
            epoch: self.epoch.load(Ordering::Relaxed),
        }
    }

    /// Sends `method path_and_query` with `body` to the peer at `addr`, signed with the cluster
    /// key for `addr` (see [`crate::auth`]), plus `headers`; resolves when the response headers arrived (the body is the
    /// caller's to read), or fails after `timeout` (connect included).
    pub async fn send(
        &self,
        addr: SocketAddr,
        method: Method,
        path_and_query: &str,
        body: Bytes,
        headers: &[(HeaderName, HeaderValue)],
        timeout: Duration,
    ) -> Result<Response<Incoming>, PeerError> {
        self.admit(addr)?;
        self.send_admitted(addr, method, path_and_query, body, headers, timeout)
            .await
    }

    /// [`PeerClient::send`] without asking the breaker first.
    async fn send_admitted(
        &self,
        addr: SocketAddr,
        method: Method,
        path_and_query: &str,
        body: Bytes,
        headers: &[(HeaderName, HeaderValue)],
        timeout: Duration,
    ) -> Result<Response<Incoming>, PeerError> {
        let other = |m: String| PeerError::Other(addr, m);
        let uri = uri_of(self.scheme, addr, path_and_query)?;
        let to = self.recipient(addr);
        let (signature, answers) =
            self.key
                .sign_expecting_sub_chunks(method.as_str(), path_and_query, to, &body);
        let req = build(method, &uri, headers, &signature)
            .body(PeerBody::Full(Full::new(body)))
            .map_err(|e| other(e.to_string()))?;
        let result = match tokio::time::timeout(timeout, self.client.request(req)).await {
            Err(_) => Err(PeerError::Timeout(addr, timeout)),
            Ok(Ok(mut resp)) => {
                if let Some(sent) = signature.mac() {
                    resp.extensions_mut().insert(SentSignature {
                        signature: sent,
                        answers,
                    });
                    resp.extensions_mut().insert(AnswerTo(sent));
                }
                Ok(resp)
            }
            Ok(Err(e)) => Err(classify(addr, &e)),
        };
        Self::record(&self.breaker, &self.observer, addr, &result);
        result
    }

    /// Starts `method path_and_query` to the peer at `addr` with a body sent as it is produced
    /// through the returned [`BodySender`], signed as streamed (see [`crate::auth`]). The
    /// request runs in its own task; its handle resolves to the response once the body ended
    /// and the peer answered, or to the error. Bound the wait for it after
    /// [`BodySender::finish`] (a peer answers only once the whole body arrived).
    pub fn send_streamed(
        &self,
        addr: SocketAddr,
        method: Method,
        path_and_query: &str,
    ) -> Result<(BodySender, PeerAnswer), PeerError> {
        self.admit(addr)?;
        let other = |m: String| PeerError::Other(addr, m);
        let uri = uri_of(self.scheme, addr, path_and_query)?;
        let (signature, tagger) = self.key.sign_streamed(
            method.as_str(),
            path_and_query,
            self.recipient(addr),
            auth::unix_now_ms(),
            auth::fresh_nonce(),
        );
        let (tx, rx) = mpsc::unbounded_channel();
        let req = build(method, &uri, &[], &signature)
            .body(PeerBody::Streamed(rx))
            .map_err(|e| other(e.to_string()))?;
        let (client, breaker) = (self.client.clone(), self.breaker.clone());
        let observer = self.observer.clone();
        // The answer is bound to this request's signature ([`verify_response`]).
        let sent = signature.mac().map(AnswerTo);
        let answer = tokio::spawn(async move {
            let result = client
                .request(req)
                .await
                .map(|mut resp| {
                    if let Some(sent) = sent {
                        resp.extensions_mut().insert(sent);
                    }
                    resp
                })
                .map_err(|e| classify(addr, &e));
            Self::record(&breaker, &observer, addr, &result);
            result
        });
        let sender = BodySender {
            tx,
            tagger,
            sent: 0,
        };
        Ok((sender, answer))
    }
}

/// The signature of the request a response answers, in the extensions of every response
/// [`PeerClient::send`] and [`PeerClient::send_streamed`] return: what [`verify_response`]
/// binds the answer to.
#[derive(Clone, Copy, Debug)]
pub struct AnswerTo(pub [u8; 32]);

/// The signature a request was sent with, in the extensions of the response
/// [`PeerClient::send`] returns, and the key of the answer's sub-chunk tags: the secret the
/// request was signed with ([`ClusterKey::sign_expecting_sub_chunks`]).
#[derive(Clone, Debug)]
pub struct SentSignature {
    pub signature: [u8; 32],
    pub answers: crate::auth::AnswerKey,
}

impl SentSignature {
    /// The tagger of the answer's sub-chunks.
    pub fn sub_chunk_tagger(&self) -> crate::auth::SubChunkTagger {
        self.answers.sub_chunk_tagger(&self.signature)
    }
}

/// The response to a streamed request, from the task that sends it.
pub type PeerAnswer = JoinHandle<Result<Response<Incoming>, PeerError>>;

/// The URI of `path_and_query` (which must start with `/`) at the peer `addr`.
fn uri_of(scheme: &str, addr: SocketAddr, path_and_query: &str) -> Result<Uri, PeerError> {
    let other = |m: String| PeerError::Other(addr, m);
    if !path_and_query.starts_with('/') {
        return Err(other(format!("path {path_and_query:?} must start with /")));
    }
    format!("{scheme}://{addr}{path_and_query}")
        .parse()
        .map_err(|e| other(format!("bad path {path_and_query:?}: {e}")))
}

/// A request's head: method, URI, the caller's headers and the signature's.
fn build(
    method: Method,
    uri: &Uri,
    headers: &[(HeaderName, HeaderValue)],
    signature: &auth::Signature,
) -> hyper::http::request::Builder {
    let mut req = Request::builder().method(method).uri(uri.clone());
    for (name, value) in headers {
        req = req.header(name, value);
    }
    if let Some(id) = request_id() {
        if !headers.iter().any(|(n, _)| n == REQUEST_ID_HEADER) {
            req = req.header(REQUEST_ID_HEADER, id);
        }
    }
    for (name, value) in signature.header_map() {
        if let Some(name) = name {
            req = req.header(name, value);
        }
    }
    req
}

/// Sorts a client error by the I/O error found in its chain of causes.
fn classify(addr: SocketAddr, e: &hyper_util::client::legacy::Error) -> PeerError {
    use std::io::ErrorKind;
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            match io.kind() {
                ErrorKind::ConnectionRefused => return PeerError::Refused(addr),
                ErrorKind::ConnectionReset
                | ErrorKind::ConnectionAborted
                | ErrorKind::BrokenPipe
                | ErrorKind::UnexpectedEof => return PeerError::Reset(addr),
                // The kernel gave the connection up (TCP_USER_TIMEOUT, keep-alive probes):
                // not the request's timeout, which a timer ends as `Timeout`.
                ErrorKind::TimedOut => return PeerError::Gone(addr),
                _ => {}
            }
        }
        if let Some(h) = err.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() || h.is_canceled() {
                return PeerError::Reset(addr);
            }
        }
        source = err.source();
    }
    let mut msg = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(err) = source {
        msg.push_str(": ");
        msg.push_str(&err.to_string());
        source = err.source();
    }
    PeerError::Other(addr, msg)
}

#[cfg(test)]
mod tests;
