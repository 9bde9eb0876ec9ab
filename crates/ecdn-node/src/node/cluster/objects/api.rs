//! EC-Cache's object API on the client port (issue 12; EC-Cache, OSDI '16, §4): an object
//! cache clients write to and read from, on the cluster's nodes, peer protocol, codec and
//! piece stores.
//!
//! * `PUT /_objects/<name>[?k=K&r=R]`: the body (at most [`MAX_OBJECT`] bytes, with a
//!   `Content-Length` or chunked) is **streamed**: coded stripe by stripe as it arrives into
//!   `k` data and `r` parity splits (`ecdn-codec`, FORMAT.md v2; `k = 1` is replication:
//!   `1 + r` copies), each split sent on to its server as it grows (`pieces/chunk_streams.rs`), so
//!   the node holds one stripe, plus its own split if it is one of the servers. Defaults:
//!   `k` = 10, `r` = 1 from 1 MiB on (the first MiB of the body decides), `k` = 1, `r` = 1
//!   below; `k` shrinks to the available nodes when not given. The splits go to `k + r`
//!   distinct available nodes chosen uniformly at random (`ecdn_objects::split::place_splits`),
//!   stored as pieces under `_objects/<name>@<version>`. The record
//!   (`ecdn_objects::meta::ObjectMeta`: version, size, k, r, locations, which splits were
//!   stored, SHA-256, sub-chunk size and every sub-chunk's CRC-32C) is committed to the
//!   cluster's object directory (`ecdn_cluster::objects`: the coordinator, or etcd) only once
//!   at least `k` splits are stored, so nothing half-written is ever readable; the answer,
//!   `201`, is the record, saying how many were stored. Fewer than `k` stored: `503`; a body
//!   that fails or is cut off: `400`; too large: `413`; nothing visible in any case. With an
//!   `s3://` `object_backend`, the body is also kept whole and written through to that store
//!   (`cluster/backend.rs`: TOFEC's coded file, acknowledged after `k` parts) while the splits are
//!   stored; if the store fails, nothing is committed either (`502`).
//! * `GET /_objects/<name>[?delta=D|auto]`: the record (this node's cached copy for up to
//!   `object_record_ttl_ms`, else one directory lookup: `ecdn_objects::records`), then
//!   `k + Δ` of the stored splits on available nodes, chosen uniformly at random (Δ = 1 by
//!   default; `auto`: from this node's smoothed link backlog by TOFEC's thresholds,
//!   `ecdn_objects::backlog`, which sees a backlog only on a capped link, `--peer-rate`), read
//!   at once, and each stripe decoded from the first `k` sub-chunks that arrive and pass their
//!   CRCs; when a window of stripes is done the other reads are cancelled (late binding, §4.3,
//!   on the coded read path: `pieces/coded/`). A read that fails is replaced by one of the object's
//!   other stored splits on an available node. The answer **streams**, window by window (up to
//!   1 MiB of each split); a whole object's bytes are checked against the record's SHA-256 as
//!   they go, and a mismatch aborts the answer. **Ranges** (`Range`, `If-Range` against the
//!   `ETag`, several ranges as `multipart/byteranges`, `416`) read only the stripes they
//!   cover, as the node's cache hits do (`hit::plan_hit`). With fewer than `k` readable:
//!   `502` naming both numbers, or, with `object_backend` in the cluster file, the object
//!   fetched from that store and checked against its record (`cluster/backend.rs`); with a cached
//!   record the directory is asked again first (the object may have been written again or
//!   deleted). `GET /_objects/<name>?stat`: the record as JSON, with what the splits' servers
//!   hold now (`stat.rs`). `HEAD`: the record in headers.
//! * `DELETE /_objects/<name>`: the record is removed first (readers stop finding it), then
//!   every split, on every node that holds one, and the copy in an `s3://` backend
//!   (`X-Ecdn-Backend: removed`, or why not).
//! * `POST /_objects/<name>?units=N`: the parity budget re-spent on the object: its splits
//!   (replicas, for `k` = 1) grown or shrunk to `N`, never below the `k + r` it was written
//!   with (`budget.rs`).
//!
//! Headers of an answer: `X-Ecdn-Object-Version`, `X-Ecdn-K`, `X-Ecdn-R`, `ETag` (the SHA-256),
//! and for a `GET` `X-Ecdn-Splits` (the split indexes the first stripe was decoded from) and `X-Ecdn-Delta` (the Δ
//! it read with).
//!
//! Splits share the node's piece store (and its FIFO piece policy) with the cached objects'
//! pieces: an object cache, whose evicted splits make a read fail once fewer than `k` remain.
//! The API's requests are not counted in the node's request metrics or access log (as
//! `/_ecdn/` is not); the bytes its splits take and send are (`ecdn_cluster_*`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::node::client_body::ClientBody;
use bytes::Bytes;
use ecdn_cluster::config::ObjectScheme;
use ecdn_cluster::objects::DirectoryError;
use ecdn_objects::meta::{ObjectMeta, ObjectName, S3Parts, MAX_CRCS};
use http_body_util::Full;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use crate::node::answer::text;
use crate::node::body::{Chunk, LiveBody, NodeBody, Piece};
use crate::node::cluster::objects::record::{
    available_nodes, cached_record, directory_error, json, piece_key, plan_read, record,
    record_headers, remove_splits_on,
};
use crate::node::cluster::objects::write::{write_object, PutFailure};
use crate::node::cluster::objects::{client_write, parts, splits};
use crate::node::cluster::pieces::coded::{self};
use crate::node::cluster::pieces::member::Cluster;
use crate::node::freshness::StoredResponse;
use crate::node::hit::plan_hit;
use crate::node::state::State;

/// Where the API lives on the client port.
pub(in crate::node) const PREFIX: &str = "/_objects/";
pub use crate::node::cluster::pieces::names::MAX_OBJECT;
/// Objects from this size on are coded with `k` = 10 by default; smaller ones replicated.
pub(in crate::node) const CODED_FROM: usize = 1 << 20;
const DEFAULT_K: usize = 10;
const DEFAULT_R: usize = 1;

/// The query of an object request.
#[derive(Debug, Default, PartialEq)]
struct Query {
    k: Option<usize>,
    r: Option<usize>,
    delta: Option<Delta>,
    stat: bool,
    /// `POST ?units=N`: the object's splits (replicas) after the budget's re-spend.
    units: Option<usize>,
    /// `GET ?locate`: the record and its split servers' addresses (`splits.rs`).
    locate: bool,
    /// `GET ?split=I&version=V`: one split this node holds (`splits.rs`).
    split: Option<usize>,
    version: Option<u64>,
    /// A client's own write (`client_write.rs`): `POST ?begin&size=S`, `PUT ?split=I&...&
    /// size=S&expires=E`, `POST ?commit`, `POST ?abort&version=V`.
    begin: bool,
    commit: bool,
    abort: bool,
    size: Option<u64>,
    expires: Option<u64>,
}

/// Δ of a read: given, or from the backlog.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(in crate::node) enum Delta {
    Fixed(usize),
    Auto,
}

fn query(q: Option<&str>) -> Result<Query, String> {
    let mut out = Query::default();
    for pair in q.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let num = || -> Result<usize, String> {
            value
                .parse()
                .map_err(|_| format!("{name}={value:?}: need a number"))
        };
        match name {
            "k" => out.k = Some(num()?),
            "r" => out.r = Some(num()?),
            "delta" if value == "auto" => out.delta = Some(Delta::Auto),
            "delta" => out.delta = Some(Delta::Fixed(num()?)),
            "stat" if value.is_empty() => out.stat = true,
            "units" => out.units = Some(num()?),
            "locate" if value.is_empty() => out.locate = true,
            "split" => out.split = Some(num()?),
            "version" => out.version = Some(num()? as u64),
            "begin" if value.is_empty() => out.begin = true,
            "commit" if value.is_empty() => out.commit = true,
            "abort" if value.is_empty() => out.abort = true,
            "size" => out.size = Some(num()? as u64),
            "expires" => out.expires = Some(num()? as u64),
            _ => return Err(format!("unknown query parameter {pair:?}")),
        }
    }
    Ok(out)
}

/// Answers a request under [`PREFIX`] (cluster mode only).
pub(in crate::node) async fn serve(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    req: Request<ClientBody>,
) -> Response<NodeBody> {
    let path = req.uri().path().to_string();
    let name = match ObjectName::parse(&path[PREFIX.len()..]) {
        Ok(n) => n,
        Err(e) => return text(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    let q = match query(req.uri().query()) {
        Ok(q) => q,
        Err(e) => return text(StatusCode::BAD_REQUEST, &e),
    };
    match *req.method() {
        Method::PUT if q.split.is_some() => {
            let (Some(split), Some(version), Some(k), Some(r), Some(size), Some(expires)) =
                (q.split, q.version, q.k, q.r, q.size, q.expires)
            else {
                return text(
                    StatusCode::BAD_REQUEST,
                    "a split PUT needs split, version, k, r, size and expires",
                );
            };
            let p = client_write::SplitPut {
                split,
                version,
                k,
                r,
                size,
                expires,
            };
            let (parts, body) = req.into_parts();
            client_write::put_split(st, c, &name, p, &parts.headers, body).await
        }
        Method::PUT => put(st, c, name, &q, req.into_body()).await,
        Method::POST if q.begin => {
            let Some(size) = q.size else {
                return text(StatusCode::BAD_REQUEST, "?begin needs &size=S");
            };
            let available = available_nodes(c);
            match code_of(
                q.code(),
                c.cfg.object_scheme,
                size as usize,
                available.len(),
            ) {
                Ok(code) => client_write::begin(c, name, code, size, &available).await,
                Err(e) => text(StatusCode::BAD_REQUEST, &e),
            }
        }
        Method::POST if q.commit => client_write::commit(c, name, req.into_body()).await,
        Method::POST if q.abort => match q.version {
            Some(v) => client_write::abort(c, name, v).await,
            None => text(StatusCode::BAD_REQUEST, "?abort needs &version=V"),
        },
        // The directory's record, not a cached copy: `stat` tells what is there now.
        Method::GET if q.stat => match record(c, &name, true).await {
            Ok(meta) => crate::node::cluster::objects::stat::stat(c, &meta).await,
            Err(e) => directory_error(e),
        },
        Method::GET if q.locate => match record(c, &name, false).await {
            Ok(meta) => splits::locate(c, &meta),
            Err(e) => directory_error(e),
        },
        Method::GET if q.split.is_some() => match (q.split, q.version) {
            (Some(i), Some(v)) => splits::serve_split(st, c, &name, v, i, req.headers()).await,
            _ => text(StatusCode::BAD_REQUEST, "?split=I needs &version=V"),
        },
        Method::GET => get(st, c, name, &q, req.headers(), false).await,
        Method::HEAD => get(st, c, name, &q, req.headers(), true).await,
        Method::DELETE => delete(st, c, name).await,
        Method::POST => match q.units {
            Some(units) => {
                crate::node::cluster::objects::budget::set_units(st, c, name, units).await
            }
            None => text(StatusCode::BAD_REQUEST, "POST needs ?units=N"),
        },
        _ => text(
            StatusCode::METHOD_NOT_ALLOWED,
            "PUT, GET, HEAD, DELETE, or POST ?units=N",
        ),
    }
}

/// The `k` and `r` a write asks for (either may be left to the defaults).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(in crate::node) struct CodeAsked {
    pub(in crate::node) k: Option<usize>,
    pub(in crate::node) r: Option<usize>,
}

impl Query {
    fn code(&self) -> CodeAsked {
        CodeAsked {
            k: self.k,
            r: self.r,
        }
    }
}

/// The code of a new object of at least `size` bytes on `available` nodes, by the cluster's
/// `object_scheme` unless the request says.
pub(in crate::node) fn code_of(
    q: CodeAsked,
    scheme: ObjectScheme,
    size: usize,
    available: usize,
) -> Result<(usize, usize), String> {
    let (dk, dr) = match scheme {
        ObjectScheme::EcCache if size >= CODED_FROM => (DEFAULT_K, DEFAULT_R),
        ObjectScheme::EcCache => (1, DEFAULT_R),
        // One copy; the budget adds replicas.
        ObjectScheme::SelectiveReplication => (1, 0),
    };
    let r = q.r.unwrap_or(dr);
    let k = match q.k {
        Some(k) => k,
        None => dk.min(available.saturating_sub(r)).max(1),
    };
    if k == 0 || k + r > 256 {
        return Err(format!("k = {k}, r = {r}: need k >= 1 and k + r <= 256"));
    }
    if k + r > available {
        return Err(format!(
            "k + r = {} splits need as many available nodes; {available} are",
            k + r
        ));
    }
    Ok((k, r))
}

async fn put(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    name: ObjectName,
    q: &Query,
    body: ClientBody,
) -> Response<NodeBody> {
    let scheme = c.cfg.object_scheme;
    let code = |at_least: usize, available: usize| code_of(q.code(), scheme, at_least, available);
    let before = replaced(c, &name).await;
    let written = write_object(st, c, name, CODED_FROM, code, body, |_| Ok(None)).await;
    match written {
        Ok(meta) => {
            drop_replaced(st, c, before, &meta).await;
            json(StatusCode::CREATED, &meta)
        }
        Err(PutFailure::TooLarge) => text(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!(
                "objects are at most {MAX_OBJECT} bytes, and {MAX_CRCS} sub-chunks in all splits"
            ),
        ),
        Err(PutFailure::Body(e) | PutFailure::Code(e)) => text(StatusCode::BAD_REQUEST, &e),
        Err(PutFailure::NotBegun(answer)) => *answer,
        Err(PutFailure::Encoding) => text(StatusCode::INTERNAL_SERVER_ERROR, "encoding failed"),
        Err(PutFailure::Unstored { stored, total, k }) => text(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("only {stored} of the {total} splits were stored; decoding needs {k}"),
        ),
        Err(PutFailure::Backend(e)) => text(StatusCode::BAD_GATEWAY, &e),
        Err(PutFailure::Directory(e)) => directory_error(e),
    }
}

/// Δ of a read: the one asked for, or (`auto`) from this node's smoothed link backlog.
fn delta_of(c: &Cluster, delta: Option<Delta>, meta: &ObjectMeta) -> usize {
    match delta {
        None => 1,
        Some(Delta::Fixed(d)) => d,
        Some(Delta::Auto) => {
            let split = meta.size.div_ceil(meta.k as u64).max(1) as f64;
            let queued = c.link.queued_bytes() / split;
            let rule = ecdn_objects::backlog::DeltaRule::default();
            crate::node::lock::lock(&c.backlog).arrival(&rule, queued)
        }
    }
}

/// Which face an object is read through: its headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::node) enum Face {
    /// The object API: the record's version and code, `ETag` the SHA-256.
    Api,
    /// The S3 face: what it kept with the object (`ETag`, `Last-Modified`, `Content-Type`,
    /// `x-amz-meta-*`; `s3/object.rs`).
    S3,
}

/// The answer's status, headers and body pieces for `req` (`Range`, `If-Range` and the
/// conditionals as a cache hit on a stored `200` follows them, `hit::plan_hit`), whoever
/// supplies the bytes: the splits or the backend store.
fn plan_object(
    meta: &ObjectMeta,
    req: &HeaderMap,
    head: bool,
    face: Face,
) -> (Response<()>, Vec<Piece>) {
    let now = std::time::Instant::now();
    let headers = match face {
        Face::Api => {
            let mut h = vec![(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            )];
            h.extend(record_headers(meta));
            h
        }
        Face::S3 => crate::node::cluster::objects::record::s3_headers(meta),
    };
    let stored = StoredResponse {
        key: meta.name.to_string(),
        status: StatusCode::OK,
        headers,
        body: Bytes::new(),
        stored_at: now,
        age_at_store: std::time::Duration::ZERO,
        lifetime: std::time::Duration::MAX,
        filled: 0,
    };
    let (mut r, pieces) = plan_hit(&stored, meta.size, req, now, head);
    let h = r.headers_mut();
    h.remove(header::AGE);
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    (r, pieces)
}

/// Why an object could not be read.
pub(in crate::node) enum ReadFailure {
    /// Its record: not found, or the directory failed.
    Directory(DirectoryError),
    /// Fewer than `k` splits (and not the backend store): why.
    Unreadable(String),
}

/// The object API's `GET` or `HEAD` ([`read_object`]).
async fn get(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    name: ObjectName,
    q: &Query,
    req: &HeaderMap,
    head: bool,
) -> Response<NodeBody> {
    match read_object(st, c, name, q.delta, req, head, Face::Api).await {
        Ok(r) => r,
        Err(ReadFailure::Directory(e)) => directory_error(e),
        Err(ReadFailure::Unreadable(why)) => text(StatusCode::BAD_GATEWAY, &why),
    }
}

/// A `GET` or `HEAD` of the object `name` through `face`: with the cached record, and if the
/// read fails with it, once more with the directory's (when that is another version: the
/// object was written again); then from the backend store, if there is one.
pub(in crate::node) async fn read_object(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    name: ObjectName,
    delta: Option<Delta>,
    req: &HeaderMap,
    head: bool,
    face: Face,
) -> Result<Response<NodeBody>, ReadFailure> {
    let (meta, cached) = cached_record(c, &name, false)
        .await
        .map_err(ReadFailure::Directory)?;
    if !head {
        // For the coordinator's parity budget (sent with the heartbeats), in splits read: the
        // `k` this read decodes (a client's own read counts each split it asks, `splits.rs`).
        c.loads.record_object_reads(name.as_str(), meta.k as u64);
    }
    let failed = match read(st, c, &name, &meta, delta, req, head, face).await {
        Ok(r) => return Ok(r),
        Err(failed) => failed,
    };
    let (meta, failed) = match cached {
        false => (meta, failed),
        true => match record(c, &name, true).await {
            Ok(now) if now.version != meta.version => {
                match read(st, c, &name, &now, delta, req, head, face).await {
                    Ok(r) => return Ok(r),
                    Err(failed) => (now, failed),
                }
            }
            Ok(_) => (meta, failed),
            Err(e) => return Err(ReadFailure::Directory(e)),
        },
    };
    match &c.backend {
        // An object of parts has no bytes of its own in the backend store.
        Some(b) if parts::parts_of(&meta).is_none() => from_backend(b, &meta, req, face).await,
        _ => Err(ReadFailure::Unreadable(failed)),
    }
}

/// A `GET` or `HEAD` of an object made of parts (`parts.rs`): answered over the parts' bytes
/// together, each range read from the parts it covers in turn, through [`read_object`].
async fn read_parts(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    meta: &ObjectMeta,
    parts: &S3Parts,
    req: &HeaderMap,
    head: bool,
    face: Face,
) -> Result<Response<NodeBody>, String> {
    // The object as its answer describes it: the parts' length; its ETag the S3 one through
    // the object API too (there is no SHA-256 of the whole).
    let mut whole = meta.clone();
    whole.size = parts.size();
    if let Some(a) = &meta.s3 {
        whole.sha256 = a.etag.clone();
    }
    let (r, pieces) = plan_object(&whole, req, head, face);
    let mut r = r.map(|()| NodeBody::Full(Full::new(Bytes::new())));
    r.headers_mut()
        .insert("x-ecdn-parts", HeaderValue::from(parts.parts.len() as u64));
    if head || pieces.is_empty() || whole.size == 0 {
        return Ok(r); // HEAD, 416, or an empty object
    }
    let length = crate::node::upstream::content_length(r.headers());
    let (st, c) = (st.clone(), c.clone());
    let open: parts::OpenPart = Box::new(move |name, h| read_part(st.clone(), c.clone(), name, h));
    *r.body_mut() = parts::stream(parts.clone(), pieces, length, open).await?;
    Ok(r)
}

/// A part of an object of parts, read through [`read_object`] with the request headers `h`.
/// (A function with a named future type: [`read_parts`], inside `read_object`, reads through
/// it, and a future of `read_object`'s own type there could not be shown to be `Send`.)
fn read_part(st: Arc<State>, c: Arc<Cluster>, name: ObjectName, h: HeaderMap) -> parts::PartRead {
    Box::pin(async move {
        let part = name.to_string();
        read_object(&st, &c, name, None, &h, false, Face::Api)
            .await
            .map_err(|e| match e {
                ReadFailure::Directory(e) => format!("part {part}: {e}"),
                ReadFailure::Unreadable(why) => why,
            })
    })
}

/// Fewer than `k` splits could be read: the object from the backend store, checked against
/// its record (`cluster/backend.rs`), answered as a read from the splits would be (`X-Ecdn-Source:
/// backend`); `502` naming both failures if the backend fails too.
async fn from_backend(
    backend: &crate::node::cluster::backend::ObjectBackend,
    meta: &ObjectMeta,
    req: &HeaderMap,
    face: Face,
) -> Result<Response<NodeBody>, ReadFailure> {
    let bytes = backend.fetch(meta).await.map_err(|e| {
        ReadFailure::Unreadable(format!(
            "object {}: fewer than k = {} splits could be read, and the backend: {e}",
            meta.name, meta.k
        ))
    })?;
    let (r, pieces) = plan_object(meta, req, false, face);
    let body: VecDeque<Bytes> = pieces
        .into_iter()
        .map(|p| match p {
            Piece::Body(r) => bytes.slice(r.start as usize..r.end as usize),
            Piece::Text(t) => t,
        })
        .collect();
    let mut r = r.map(|()| NodeBody::Slices(body));
    r.headers_mut()
        .insert("x-ecdn-source", HeaderValue::from_static("backend"));
    Ok(r)
}

/// Answers a `GET` or `HEAD` of `meta`'s object (a ranged one with only the stripes the
/// ranges cover; an object made of parts from its parts, [`read_parts`]); `Err`: the object
/// could not be read (why).
#[allow(clippy::too_many_arguments)]
async fn read(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    name: &ObjectName,
    meta: &ObjectMeta,
    delta: Option<Delta>,
    req: &HeaderMap,
    head: bool,
    face: Face,
) -> Result<Response<NodeBody>, String> {
    if let Some(p) = parts::parts_of(meta) {
        return read_parts(st, c, meta, p, req, head, face).await;
    }
    let (r, pieces) = plan_object(meta, req, head, face);
    let mut r = r.map(|()| NodeBody::Full(Full::new(Bytes::new())));
    if head || pieces.is_empty() || meta.size == 0 {
        return Ok(r); // HEAD, 416, or an empty object
    }
    let delta = delta_of(c, delta, meta);
    let obj = match plan_read(c, meta, delta) {
        Ok(o) => Arc::new(o),
        Err(e) => return Err(format!("object {name}: {e}")),
    };
    let late = obj.late.clone().expect("an object read binds late");
    let whole = matches!(pieces.as_slice(), [Piece::Body(b)] if *b == (0..meta.size));
    let length = crate::node::upstream::content_length(r.headers());
    let decoded = Arc::new(AtomicBool::new(false));
    // The first window is read before answering; the rest streams.
    let Some((ready, rest)) = coded::stream(st, c, obj, pieces, decoded, None).await else {
        return Err(format!(
            "object {name}: only {} of the {} splits asked could be read; decoding needs {}",
            late.asked
                .load(Ordering::Relaxed)
                .saturating_sub(late.failed.load(Ordering::Relaxed)),
            late.asked.load(Ordering::Relaxed),
            meta.k
        ));
    };
    let used: Vec<String> = late
        .used
        .get()
        .into_iter()
        .flatten()
        .map(usize::to_string)
        .collect();
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&used.join(",")) {
        h.insert("x-ecdn-splits", v);
    }
    h.insert("x-ecdn-delta", HeaderValue::from(delta as u64));
    let body = match (rest, whole) {
        (None, false) => NodeBody::Slices(ready),
        (rest, true) => {
            // The whole object: its SHA-256 is checked as it is sent, and a mismatch aborts
            // the answer (its sub-chunks passed their CRCs, so this is a last guard).
            let rx = checked(ready, rest, meta.sha256.clone());
            NodeBody::Live(LiveBody::new(VecDeque::new(), None, rx, length))
        }
        (Some(rx), false) => NodeBody::Live(LiveBody::new(ready, None, rx, length)),
    };
    *r.body_mut() = body;
    Ok(r)
}

/// Forwards a whole object's bytes (`ready`, then what `rest` delivers) while hashing them;
/// ends with [`Chunk::Done`] only if they match `sha256` (else the channel closes without it
/// and the client's response is aborted).
fn checked(
    ready: VecDeque<Bytes>,
    rest: Option<mpsc::Receiver<Chunk>>,
    sha256: String,
) -> mpsc::Receiver<Chunk> {
    let (tx, rx) = mpsc::channel(4);
    ecdn_cluster::peer::spawn_traced(async move {
        let mut sha = Sha256::new();
        let ready: Vec<Bytes> = ready.into_iter().collect();
        for b in &ready {
            sha.update(b);
        }
        if tx.send(Chunk::Slices(ready)).await.is_err() {
            return;
        }
        if let Some(mut rest) = rest {
            loop {
                let chunk = match rest.recv().await {
                    Some(Chunk::Done) => break,
                    Some(chunk @ Chunk::Data(_)) | Some(chunk @ Chunk::Slices(_)) => chunk,
                    // Never on this path; the channel closed: the read failed.
                    Some(Chunk::Verifying(_)) | None => return,
                };
                match &chunk {
                    Chunk::Data(b) => sha.update(b),
                    Chunk::Slices(v) => v.iter().for_each(|b| sha.update(b)),
                    _ => {}
                }
                if tx.send(chunk).await.is_err() {
                    return;
                }
            }
        }
        if ecdn_cluster::auth::hex(&sha.finalize()) == sha256 {
            let _ = tx.send(Chunk::Done).await;
        } else {
            eprintln!(
                "ecdn node: an object's decoded bytes do not match its SHA-256{}",
                ecdn_cluster::peer::request_note()
            );
        }
    });
    rx
}

/// Deletes the splits of `meta` wherever they are (best effort: a node down keeps its split
/// until its piece policy evicts it; no record points to it any more).
async fn remove_splits(st: &Arc<State>, c: &Arc<Cluster>, meta: &ObjectMeta) -> usize {
    let key = piece_key(&meta.name, meta.version);
    remove_splits_on(st, c, &key, &meta.splits).await
}

/// Removes the object `name`: its record first (readers stop finding it), then its splits
/// wherever they are. The record, and how many splits were removed.
pub(in crate::node) async fn remove_object(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    name: &ObjectName,
) -> Result<(ObjectMeta, usize), DirectoryError> {
    crate::node::lock::lock(&c.records).remove(name);
    let meta = c.objects.remove(name).await?;
    let removed = remove_splits(st, c, &meta).await;
    if let Some(p) = parts::parts_of(&meta) {
        remove_parts(st, c, p).await;
    }
    Ok((meta, removed))
}

/// The object `name` is before a write replaces it, if it is made of parts (whose parts the
/// write's success leaves to no record: [`drop_replaced`]). Only S3's names (`s3/…`) can be.
pub(in crate::node) async fn replaced(c: &Cluster, name: &ObjectName) -> Option<Arc<ObjectMeta>> {
    if !name.as_str().starts_with(ecdn_s3::names::PREFIX) {
        return None;
    }
    record(c, name, true)
        .await
        .ok()
        .filter(|m| parts::parts_of(m).is_some())
}

/// Once `now` is committed: the parts of the object of parts it replaced are removed.
pub(in crate::node) async fn drop_replaced(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    before: Option<Arc<ObjectMeta>>,
    now: &ObjectMeta,
) {
    let Some(before) = before.filter(|b| b.version < now.version) else {
        return;
    };
    if let Some(p) = parts::parts_of(&before) {
        remove_parts(st, c, p).await;
    }
}

/// Removes the parts an object was made of (best effort: one already gone is skipped, one
/// the directory fails to remove is said).
pub(in crate::node) async fn remove_parts(st: &Arc<State>, c: &Arc<Cluster>, parts: &S3Parts) {
    for &(number, _, _) in &parts.parts {
        let Ok(name) = ObjectName::parse(&parts.part_name(number)) else {
            continue;
        };
        match Box::pin(remove_object(st, c, &name)).await {
            Ok(_) | Err(DirectoryError::Meta(ecdn_objects::meta::MetaError::NotFound(_))) => {}
            Err(e) => eprintln!(
                "ecdn node: removing part {name} of {}: {e}{}",
                parts.upload,
                ecdn_cluster::peer::request_note()
            ),
        }
    }
}

async fn delete(st: &Arc<State>, c: &Arc<Cluster>, name: ObjectName) -> Response<NodeBody> {
    let (meta, removed) = match remove_object(st, c, &name).await {
        Ok(x) => x,
        Err(e) => return directory_error(e),
    };
    let mut r = json(StatusCode::OK, &meta);
    if let Ok(v) = HeaderValue::from_str(&removed.to_string()) {
        r.headers_mut().insert("x-ecdn-splits-removed", v);
    }
    if let Some(b) = c.backend.as_ref().filter(|b| b.writes_through()) {
        // The record is gone already: a copy left behind is only storage, said here.
        let said = match b.remove(name.as_str()).await {
            Ok(()) => "removed".to_string(),
            Err(e) => {
                eprintln!(
                    "ecdn node: object {name}: removing the backend's copy: {e}{}",
                    ecdn_cluster::peer::request_note()
                );
                format!("failed: {e}")
            }
        };
        if let Ok(v) = HeaderValue::from_str(&said) {
            r.headers_mut().insert("x-ecdn-backend", v);
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_and_codes() {
        assert_eq!(query(None).unwrap(), Query::default());
        let q = query(Some("k=4&r=2&delta=0")).unwrap();
        assert_eq!(
            (q.k, q.r, q.delta, q.stat),
            (Some(4), Some(2), Some(Delta::Fixed(0)), false)
        );
        assert_eq!(query(Some("delta=auto")).unwrap().delta, Some(Delta::Auto));
        assert!(query(Some("stat")).unwrap().stat);
        for bad in ["k=x", "stat=1", "z=1", "r=-1"] {
            assert!(query(Some(bad)).is_err(), "{bad}");
        }
        let d = Query::default();
        let (ec, sr) = (ObjectScheme::EcCache, ObjectScheme::SelectiveReplication);
        // Defaults: k = 10 (from 1 MiB), fewer on a small cluster; replicated below 1 MiB;
        // one copy under selective replication.
        assert_eq!(code_of(d.code(), ec, 40 << 20, 25), Ok((10, 1)));
        assert_eq!(code_of(d.code(), ec, 40 << 20, 6), Ok((5, 1)));
        assert_eq!(code_of(d.code(), ec, 1000, 6), Ok((1, 1)));
        assert_eq!(code_of(d.code(), sr, 40 << 20, 6), Ok((1, 0)));
        // Given: kept, or refused when the cluster is too small.
        let q = query(Some("k=4&r=3")).unwrap();
        assert!(code_of(q.code(), ec, 1000, 6)
            .unwrap_err()
            .contains("7 splits"));
        assert!(code_of(query(Some("k=0")).unwrap().code(), ec, 1000, 6).is_err());
        assert_eq!(query(Some("units=7")).unwrap().units, Some(7));
    }
}
