//! The peer listener: what a node answers its peers (the protocol is `ecdn_cluster::wire`).
//!
//! Every request must carry a valid signature of the cluster key over its method, path, time,
//! body digest, destination, map epoch and nonce (`ecdn_cluster::auth`), be signed for this
//! node's peer address and carry a nonce not taken before (`ecdn_cluster::replay`); one without,
//! with a wrong key, a stale time, another signature version, another destination or a nonce
//! already taken gets `401` with the reason and changes nothing. A bad path or body gets `400`.
//! The client listener never routes to any of this: peer operations exist only here.
//!
//! Every kind of request goes through the same check, reads included: a replayed read would
//! change nothing, but naming the destination and taking the nonce costs nothing, and keeps a
//! captured relay from being answered twice. A piece `PUT` whose bytes were filled before
//! the last purge of its object here is refused with `409` (`pieces/purge_log.rs`: purges and
//! fills are ordered by the cluster's sequence, not by clocks), so a held-back write cannot
//! bring a purged object back, and a late `DELETE` drops only what was filled before it.
//!
//! * `GET /_peer/has/{key}`: the pieces of the object this node holds, with one piece's
//!   metadata (a chunk's when it holds one), signed; `404` when none.
//! * `GET /_peer/piece/{chunk}/{key}`: a whole piece as a frame, signed; with `?from=A&to=B`,
//!   the payload bytes of sub-chunks `A..B` alone, each followed by its tag (keyed to the
//!   request's signature, `ecdn_cluster::auth::SubChunkTagger`), sent from the page cache
//!   without a copy through this process where the store can map them; with `&untagged`,
//!   without tags (the reader checks each against its digest in the chunk's metadata).
//! * `PUT /_peer/piece/{chunk}/{key}`: stores a piece (its trailing frame is the body, checked
//!   against the signed digest, or its tag when streamed; the metadata must match the path and
//!   the payload its length and checksums), admitted by the piece policy once the whole body
//!   arrived and checked out.
//! * `GET` / `HEAD /_peer/relay/{target}`: a client request relayed by a node that does not
//!   serve its bucket, answered as a request on the client port would be, never relayed again;
//!   the answer's head is tagged and its body sent as tagged segments (`ecdn_cluster::relayed`).
//! * `POST /_peer/units/{name}?units=N`: the coordinator's re-spend of EC-Cache's parity
//!   budget on an object (`objects/budget.rs`), answered with the new record, signed.
//! * `GET /_peer/stats`: the node's `/_ecdn/stats` JSON, signed (the coordinator's status page
//!   reads every node's).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use ecdn_cluster::auth::{unix_now_ms, Verified};
use ecdn_cluster::peer::{read_verified_body, sign_answer, sign_response, ToSign};
use ecdn_cluster::piece::PieceMeta;
use ecdn_cluster::relayed;
use ecdn_cluster::replay::ArrivedAt;
use ecdn_cluster::wire::{self, PeerPath, PieceName};
use http_body_util::Full;
use hyper::body::{Body, Frame, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use crate::node::answer::empty_body;
use crate::node::body::NodeBody;
use crate::node::cluster::pieces::link::Paced;
use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::purge_log::UNORDERED;
use crate::node::cluster::pieces::stats::ClusterStats;
use crate::node::cluster::pieces::store::{self as store, PieceStore, Put, RENEW};
use crate::node::state::State;

/// How long a peer has to finish its TLS handshake (the cluster file's `[peer_tls]`).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves the peer listener until the task is aborted; its connections go with it (they live
/// in the task's set), so a stopped node is gone for its peers at once. With the cluster's
/// mutual TLS, a connection first completes a handshake with a certificate of the cluster's
/// CA, or is closed before any HTTP.
pub(in crate::node) async fn serve(listener: TcpListener, st: Arc<State>, c: Arc<Cluster>) {
    let mut conns = tokio::task::JoinSet::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.keep_alive(true)
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(30));
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
        };
        let (stream, remote) = match accepted {
            Ok(s) => s,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let arrived = stream.local_addr().ok().map(ArrivedAt);
        // The acceptor of now: a certificate reloaded on SIGHUP serves the next connection.
        let tls = c.cfg.peer_tls().map(|t| t.acceptor());
        let (st, c) = (st.clone(), c.clone());
        let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
            let (st, c) = (st.clone(), c.clone());
            // Where the connection arrived: an address this node answers as.
            if let Some(a) = arrived {
                req.extensions_mut().insert(a);
            }
            // The client request this serves, if the peer named one: in scope for this
            // node's own peer requests and error lines, and a relayed answer's id.
            let id = req
                .headers()
                .get(ecdn_cluster::peer::REQUEST_ID_HEADER)
                .filter(|v| crate::node::request_id::valid(v))
                .cloned();
            async move {
                let answer = handle(st, c, req, remote);
                Ok::<_, Infallible>(match id {
                    Some(id) => ecdn_cluster::peer::REQUEST_ID.scope(id, answer).await,
                    None => answer.await,
                })
            }
        });
        let http = http.clone();
        conns.spawn(async move {
            match tls {
                None => {
                    let _ = http.serve_connection(TokioIo::new(stream), service).await;
                }
                Some(tls) => {
                    let hs = tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.accept(stream)).await;
                    if let Ok(Ok(stream)) = hs {
                        let _ = http.serve_connection(TokioIo::new(stream), service).await;
                    }
                }
            }
        });
    }
}

fn plain(status: StatusCode, msg: &str) -> Response<NodeBody> {
    let mut r = Response::new(NodeBody::Full(Full::new(Bytes::from(format!("{msg}\n")))));
    *r.status_mut() = status;
    r
}

/// A signed answer of `body` to the request for `path`.
fn signed(body: Vec<u8>) -> Response<NodeBody> {
    let body = Bytes::from(body);
    let mut r = Response::new(NodeBody::Full(Full::new(body.clone())));
    r.extensions_mut().insert(ToSign(body));
    r
}

/// One peer request.
async fn handle(
    st: Arc<State>,
    c: Arc<Cluster>,
    req: Request<Incoming>,
    remote: SocketAddr,
) -> Response<NodeBody> {
    let (parts, body) = req.into_parts();
    let verified = match c.gate.admit(&parts, unix_now_ms()) {
        Ok(v) => v,
        Err(e) => return plain(StatusCode::UNAUTHORIZED, &e.to_string()),
    };
    let path = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path().to_string(), |p| p.as_str().to_string());
    // Signed answers ([`signed`]) are bound to the request they answer.
    let request = *verified.signature();
    let mut resp = handle_admitted(st, c.clone(), parts, body, remote, verified, &path).await;
    sign_answer(c.peers.key(), &path, &request, &mut resp);
    resp
}

/// A peer request [`handle`] admitted, for `path` (its path and query).
async fn handle_admitted(
    st: Arc<State>,
    c: Arc<Cluster>,
    parts: hyper::http::request::Parts,
    body: Incoming,
    remote: SocketAddr,
    verified: Verified,
    path: &str,
) -> Response<NodeBody> {
    let path = path.to_string();
    let parsed = match wire::parse_path(&path) {
        Ok(p) => p,
        Err(e) => return plain(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    let get = parts.method == Method::GET;
    if parts.method != Method::PUT && parts.method != Method::POST && !verified.empty_body() {
        return plain(StatusCode::BAD_REQUEST, "peer request: unexpected body");
    }
    match parsed {
        PeerPath::Has { key, ages } if get => has(&st, &c, &key, ages).await,
        PeerPath::Has { key, ages: false } if parts.method == Method::DELETE => {
            purge(&st, &c, &key, UNORDERED).await
        }
        PeerPath::Purge { key, sequence } if parts.method == Method::DELETE => {
            purge(&st, &c, &key, sequence).await
        }
        PeerPath::Piece {
            piece,
            key,
            sub_chunks,
            untagged,
        } if get => {
            let sub_chunks = sub_chunks.map(|s| (s, !untagged));
            get_piece(&st, &c, &path, &verified, piece, &key, sub_chunks).await
        }
        PeerPath::Piece {
            piece,
            key,
            sub_chunks: None,
            ..
        } if parts.method == Method::PUT => {
            let limit = c.pieces.capacity().min(1 << 30) as usize + wire_meta_limit(&c);
            let frame = match read_verified_body(body, limit, &verified).await {
                Ok(b) => b,
                Err(e) => return plain(StatusCode::BAD_REQUEST, &e.to_string()),
            };
            ClusterStats::add(&c.stats.peer_bytes_received, frame.len() as u64);
            let renew = parts.headers.contains_key(RENEW);
            put_piece(&st, &c, piece, &key, frame, renew).await
        }
        PeerPath::Dying if parts.method == Method::POST => {
            let limit = 8 * wire::MAX_OBJECTS;
            let body = match read_verified_body(body, limit, &verified).await {
                Ok(b) => b,
                Err(e) => return plain(StatusCode::BAD_REQUEST, &e.to_string()),
            };
            match wire::decode_objects(&body) {
                Ok(objects) => {
                    let dropped =
                        crate::node::cluster::pieces::together::drop_here(&st, &c, &objects).await;
                    plain(StatusCode::OK, &format!("dropped {dropped}"))
                }
                Err(e) => plain(StatusCode::BAD_REQUEST, &e.to_string()),
            }
        }
        PeerPath::Units { name, units } if parts.method == Method::POST => {
            set_units(&st, &c, &name, units).await
        }
        PeerPath::Relay { target, slice } if get || parts.method == Method::HEAD => {
            let mut req = Request::new(empty_body());
            *req.method_mut() = parts.method.clone();
            *req.uri_mut() = match target.parse() {
                Ok(u) => u,
                Err(_) => return plain(StatusCode::BAD_REQUEST, "peer request: bad relay target"),
            };
            let h = req.headers_mut();
            for (n, v) in &parts.headers {
                if !n.as_str().starts_with("x-ecdn-") {
                    h.append(n.clone(), v.clone());
                }
            }
            let head = req.method() == Method::HEAD;
            let answer = crate::node::request::relayed(st, req, remote, slice).await;
            relay_answer(&verified, head, answer)
        }
        PeerPath::Stats if get => {
            let body = crate::node::admin::stats_value(&st).await.to_string();
            signed(body.into_bytes())
        }
        // A peer's health probe: answered as soon as it is verified (its round trip is this
        // node's service time as the peer sees it: network, accept queue, runtime).
        PeerPath::Probe if get => plain(StatusCode::NO_CONTENT, ""),
        _ => plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "peer request: method not allowed",
        ),
    }
}

/// The coordinator's re-spend of EC-Cache object `name` to `units` splits (`objects/budget.rs`):
/// the new record, signed.
async fn set_units(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    name: &str,
    units: u64,
) -> Response<NodeBody> {
    use http_body_util::BodyExt;
    let name = match ecdn_objects::meta::ObjectName::parse(name) {
        Ok(n) => n,
        Err(e) => return plain(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    let units = usize::try_from(units).unwrap_or(usize::MAX);
    let answer = crate::node::cluster::objects::budget::set_units(st, c, name, units).await;
    let (parts, body) = answer.into_parts();
    match body.collect().await {
        Ok(b) if parts.status == StatusCode::OK => {
            ClusterStats::add(&c.stats.budget_respends, 1);
            signed(b.to_bytes().to_vec())
        }
        Ok(b) => plain(
            parts.status,
            String::from_utf8_lossy(&b.to_bytes()).trim_end(),
        ),
        Err(_) => plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the re-spend's answer failed",
        ),
    }
}

/// The most metadata bytes a piece frame of this cluster may carry.
fn wire_meta_limit(c: &Cluster) -> usize {
    let capacity = c.pieces.capacity();
    let sub = c.cfg.sub_chunk.max(1);
    let stripes = capacity / sub + 2;
    (64 << 10)
        + ((4 + ecdn_cluster::piece::DIGEST_LEN as u64) * stripes * (c.cfg.k + c.cfg.p) as u64)
            .min(ecdn_cluster::piece::MAX_META as u64) as usize
}

/// The `has` answer: one piece's metadata and the pieces held (`ages`: and how old each is,
/// [`wire::encode_ages`]), or `404` when it holds none.
async fn has(st: &State, c: &Cluster, key: &str, ages: bool) -> Response<NodeBody> {
    let Some(disk) = &st.disk else {
        return plain(StatusCode::NOT_FOUND, "no pieces");
    };
    let object = ecdn_trace::hash_id(key.as_bytes());
    let (held, since) = c
        .pieces
        .held_ages(object, store::pieces_per_object(&c.cfg, key));
    // One piece's metadata: a chunk's if any (it names the coding), else the replica's.
    let first = held
        .iter()
        .find(|p| matches!(p, PieceName::Chunk(_)))
        .or(held.first())
        .copied();
    let Some(first) = first else {
        return plain(StatusCode::NOT_FOUND, "no pieces");
    };
    let Some((meta, _)) = c
        .pieces
        .read(disk, PieceStore::piece_id(object, first), Some(0..0))
        .await
    else {
        return plain(StatusCode::NOT_FOUND, "no pieces");
    };
    // Held pieces the store lost meanwhile are found missing when read.
    let mut body = wire::frame_head(&meta);
    body.extend_from_slice(&wire::encode_held(&held));
    if ages {
        body.extend_from_slice(&wire::encode_ages(c.pieces.capacity(), &since));
    }
    signed(body)
}

/// `DELETE` of a `has` path: purge `number` (of the cluster's sequence; [`UNORDERED`] when
/// it has none) that another node received, carried out here (`purge.rs`'s `drop_here`): this
/// node's own copies of the object (HOC, disk entry, variants) and the pieces of it filled
/// before that purge; no write of it filled before it is taken after (`purge_log.rs`).
async fn purge(st: &State, c: &Cluster, key: &str, number: u64) -> Response<NodeBody> {
    match crate::node::cluster::pieces::purge::drop_here(st, c, key, number).await {
        Ok(purged) => plain(StatusCode::OK, if purged { "purged" } else { "not held" }),
        Err(why) => plain(StatusCode::INTERNAL_SERVER_ERROR, &why),
    }
}

/// A piece `GET`: the piece as a signed frame, or with `sub_chunks` (`(from, to)` and whether
/// tagged) those sub-chunks of a chunk, each followed by its tag unless the reader checks
/// them against its metadata's digests.
async fn get_piece(
    st: &State,
    c: &Cluster,
    path: &str,
    verified: &Verified,
    piece: PieceName,
    key: &str,
    sub_chunks: Option<((u64, u64), bool)>,
) -> Response<NodeBody> {
    let Some(disk) = &st.disk else {
        return plain(StatusCode::NOT_FOUND, "no such piece");
    };
    let object = ecdn_trace::hash_id(key.as_bytes());
    let id = PieceStore::piece_id(object, piece);
    let s = c.cfg.sub_chunk;
    let range = sub_chunks.map(|((a, b), _)| a.saturating_mul(s)..b.saturating_mul(s));
    let Some((meta, payload)) = c.pieces.read(disk, id, range).await else {
        return plain(StatusCode::NOT_FOUND, "no such piece");
    };
    match sub_chunks {
        Some(((first, _), tagged)) => {
            let body = if tagged {
                let tagger = verified.sub_chunk_tagger();
                Paced::tagged(sub_chunks_of(s, payload), first, tagger, c.link.clone())
            } else {
                // The reader checks them against its digests (`untagged`).
                Paced::new(payload, c.link.clone())
            };
            ClusterStats::add(&c.stats.peer_bytes_sent, body.remaining());
            let mut r = Response::new(NodeBody::Produced(Box::pin(body)));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            );
            r
        }
        None => {
            let mut body = wire::frame_head(&meta);
            body.extend_from_slice(&payload);
            ClusterStats::add(&c.stats.peer_bytes_sent, body.len() as u64);
            // Signed, then sent through the link quantum by quantum.
            let headers = sign_response(c.peers.key(), path, verified.signature(), &body);
            let paced = Paced::new(Bytes::from(body), c.link.clone());
            let mut r = Response::new(NodeBody::Produced(Box::pin(paced)));
            r.headers_mut().extend(headers);
            r
        }
    }
}

/// This node's answer to a relayed request as it goes back to the relaying node: its head
/// tagged, its body (if it has one) as tagged segments (`ecdn_cluster::relayed`), keyed to
/// the relay request's signature.
fn relay_answer(verified: &Verified, head: bool, answer: Response<NodeBody>) -> Response<NodeBody> {
    let tagger = verified.sub_chunk_tagger();
    let (mut parts, body) = answer.into_parts();
    relayed::tag_head(&tagger, parts.status, &mut parts.headers);
    let body = if relayed::has_body(head, parts.status) {
        let writer = relayed::SegmentWriter::new(tagger);
        NodeBody::Produced(Box::pin(RelayedBody::new(body, writer)))
    } else {
        body
    };
    Response::from_parts(parts, body)
}

/// A body cut into tagged segments as it is sent, then its end segment: what this node
/// answers a relayed request with (`ecdn_cluster::relayed`).
struct RelayedBody {
    inner: NodeBody,
    writer: relayed::SegmentWriter,
    queue: VecDeque<Bytes>,
    done: bool,
}

impl RelayedBody {
    fn new(inner: NodeBody, writer: relayed::SegmentWriter) -> Self {
        RelayedBody {
            inner,
            writer,
            queue: VecDeque::new(),
            done: false,
        }
    }
}

impl Body for RelayedBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = self.get_mut();
        loop {
            if let Some(b) = this.queue.pop_front() {
                return Poll::Ready(Some(Ok(Frame::data(b))));
            }
            if this.done {
                return Poll::Ready(None);
            }
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        this.writer.segments(data, &mut this.queue);
                    }
                }
                // No end segment: the relaying node aborts its client's response too.
                Some(Err(e)) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(e)));
                }
                None => {
                    this.queue.push_back(this.writer.end());
                    this.done = true;
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.queue.is_empty()
    }
}

/// `payload` cut into sub-chunks of `s` bytes (the last one shorter): slices, not copies.
fn sub_chunks_of(s: u64, payload: Bytes) -> VecDeque<Bytes> {
    let s = s.max(1) as usize;
    (0..payload.len().div_ceil(s))
        .map(|i| payload.slice(i * s..((i + 1) * s).min(payload.len())))
        .collect()
}

/// Checks a pushed piece (a trailing frame) against its path and its own checksums, then
/// stores it (with `renew`, in place of the copy held: `c2dn/resync.rs`); a signed answer
/// names the objects a piece of which the policy evicted to make room, when the writer is to
/// have them dropped whole (`pieces/together.rs`).
async fn put_piece(
    st: &State,
    c: &Cluster,
    piece: PieceName,
    key: &str,
    frame: Bytes,
    renew: bool,
) -> Response<NodeBody> {
    let (meta_bytes, payload) = match wire::split_trailing_frame(&frame) {
        Ok(x) => x,
        Err(e) => return plain(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    let meta = match PieceMeta::decode(meta_bytes) {
        Ok(m) => m,
        Err(e) => return plain(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    if let Err(e) = check_piece(c, piece, key, &meta, payload) {
        return plain(StatusCode::BAD_REQUEST, &format!("peer request: {e}"));
    }
    // The piece's own code (checked above: the cluster's, or an EC-Cache split's).
    let k = meta
        .coding
        .as_ref()
        .map_or(c.cfg.k, |coding| usize::from(coding.k));
    let payload = frame.slice(..payload.len());
    if renew {
        crate::node::cluster::pieces::local::renew_local(c, key, piece);
    }
    let (put, dying) = crate::node::cluster::pieces::local::put_local(
        st,
        c,
        key,
        k,
        piece,
        meta_bytes.to_vec(),
        payload,
        crate::node::cluster::pieces::purge::filled_in(&meta),
    )
    .await;
    match put {
        Ok(put @ (Put::Stored | Put::Present)) => {
            signed(wire::encode_stored(put == Put::Present, &dying))
        }
        Ok(Put::Refused) => plain(StatusCode::INSUFFICIENT_STORAGE, "refused"),
        Err(refused) => plain(StatusCode::CONFLICT, &refused.to_string()),
    }
}

/// A piece's metadata agrees with its path, the cluster's code and its payload (length and
/// every sub-chunk's checksum).
fn check_piece(
    c: &Cluster,
    piece: PieceName,
    key: &str,
    meta: &PieceMeta,
    payload: &[u8],
) -> Result<(), String> {
    store::check_meta(&c.cfg, piece, key, meta, payload.len() as u64)?;
    match &meta.coding {
        Some(coding) => store::check_chunk(coding, payload),
        None => Ok(()),
    }
}
