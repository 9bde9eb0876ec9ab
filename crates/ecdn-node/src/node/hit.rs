//! Hits: answering a request from a stored response, in memory or streamed from the disk.
//!
//! # Ranges (RFC 9110 §14)
//!
//! On a hit (HOC or disk), `Range: bytes=…` is answered from the cached `200`: one satisfiable
//! range gives `206` with `Content-Range`; several give one `206` `multipart/byteranges`
//! answer (parts in request order, each with the stored `Content-Type` and its
//! `Content-Range`); none satisfiable gives `416` with `Content-Range: bytes */size`. `If-Range`
//! must match (strong `ETag` comparison, or an HTTP-date equal to `Last-Modified`), else the
//! full `200` is served. The `Range` is ignored (full `200`) for another unit, invalid syntax,
//! more than [`crate::range::MAX_RANGES`] ranges, or several ranges totalling more than the
//! object (overlap abuse); see [`crate::range`]. `HEAD` gets the same status and headers
//! without the body. On a miss the `Range` goes to the origin, and its `206` / `416` answers
//! are passed on and not stored.
//!
//! # Conditional requests (RFC 9110 §13, RFC 9111 §4.3.2)
//!
//! A hit on a stored `2xx` whose validators match the request's conditions is answered `304`
//! with no body: `If-None-Match` (weak comparison, a list or `*`) is evaluated when present,
//! else `If-Modified-Since` (an HTTP-date not earlier than the stored `Last-Modified`; an
//! invalid date, or a response without `Last-Modified`, is no match). The `304` carries the
//! stored `ETag`, `Last-Modified`, `Cache-Control`, `Expires`, `Vary`, `Content-Location` and
//! `Date`, and `Age`. Conditions on other statuses are ignored (§13.2.1).
//!
//! # Disk hits
//!
//! A disk hit is offered to the HOC first (see [`super::lookup`]): if admitted, it is read
//! whole into memory and answered like a HOC hit; otherwise its body (or the requested ranges)
//! streams from the disk ([`stream_hit`]), each block verified before it is sent.
//!
//! A hit is planned once ([`plan_hit`]: status, headers and the pieces of the body), whatever
//! holds the bytes: memory ([`answer_hit`]), the disk ([`stream_hit`]), and, in the cluster,
//! chunks from peers.

use std::collections::VecDeque;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Response, StatusCode};
use tokio::sync::mpsc;

use super::body::{Chunk, LiveBody, NodeBody, Piece};
use super::disk::{Disk, DiskBytes, DiskHit, DISK_BATCH};
use super::freshness::{self, StoredResponse};
use super::hoc::Striped;
use super::upstream::content_length;
use crate::range::{self, Ranges};

/// Headers the answer gains after [`entry_headers`]: `Content-Length`, `Age`, `Via`, `X-Cache`,
/// `X-Request-Id`, and room for a `Content-Range` or a cluster's tag, so that adding them
/// never grows the map.
const ADDED_HEADERS: usize = 8;

/// A cached response's headers as replayed: the stored ones, `Content-Length` (of a body of
/// `size` bytes) and `Age`.
pub(super) fn entry_headers(e: &StoredResponse, size: u64, now: Instant) -> HeaderMap {
    let mut headers = HeaderMap::with_capacity(e.headers.len() + ADDED_HEADERS);
    for (n, v) in &e.headers {
        headers.append(n.clone(), v.clone());
    }
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(size));
    headers.insert(header::AGE, HeaderValue::from(e.age(now).as_secs()));
    headers
}

/// Whether `If-Range` (RFC 9110 §13.1.5) lets the `Range` apply: absent, an entity tag
/// strongly equal to the stored `ETag` (weak tags never match), or an HTTP-date equal to the
/// stored `Last-Modified`.
fn if_range_matches(e: &StoredResponse, req: &HeaderMap) -> bool {
    let Some(v) = req.get(header::IF_RANGE) else {
        return true;
    };
    let Ok(v) = v.to_str() else {
        return false;
    };
    let v = v.trim();
    let stored = |name: &HeaderName| e.first(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if v.starts_with('"') || v.starts_with("W/") {
        v.starts_with('"') && stored(&header::ETAG) == Some(v)
    } else {
        let lm = stored(&header::LAST_MODIFIED).and_then(freshness::http_date);
        lm.is_some() && freshness::http_date(v) == lm
    }
}

/// The opaque tag of an entity tag, weak or strong (`W/"x"` and `"x"` give `"x"`).
fn opaque_tag(tag: &str) -> &str {
    let tag = tag.trim();
    tag.strip_prefix("W/").unwrap_or(tag)
}

/// Whether the request's conditions say the client's copy of `e` is current (see the module
/// doc): then the answer is `304`.
fn not_modified(e: &StoredResponse, req: &HeaderMap) -> bool {
    e.status.is_success() && conditions_met(|n| e.first(n).and_then(|v| v.to_str().ok()), req)
}

/// [`not_modified`] for an answer's head (`status`, `headers`): a sliced object's, judged by
/// its slice 0.
pub(super) fn head_not_modified(status: StatusCode, headers: &HeaderMap, req: &HeaderMap) -> bool {
    status.is_success() && conditions_met(|n| headers.get(n).and_then(|v| v.to_str().ok()), req)
}

/// Whether `If-None-Match` (else `If-Modified-Since`) of `req` matches the stored validators
/// (`stored(name)`: a stored header's value).
fn conditions_met<'a>(stored: impl Fn(&HeaderName) -> Option<&'a str>, req: &HeaderMap) -> bool {
    if req.contains_key(header::IF_NONE_MATCH) {
        let Some(etag) = stored(&header::ETAG).map(opaque_tag) else {
            // Only `*` matches a response without an entity tag.
            return req
                .get_all(header::IF_NONE_MATCH)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .any(|v| v.trim() == "*");
        };
        return req
            .get_all(header::IF_NONE_MATCH)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim() == "*" || opaque_tag(t) == etag);
    }
    let Some(since) = req
        .get(header::IF_MODIFIED_SINCE)
        .and_then(|v| v.to_str().ok())
        .and_then(freshness::http_date)
    else {
        return false;
    };
    let modified = stored(&header::LAST_MODIFIED).and_then(freshness::http_date);
    modified.is_some_and(|modified| modified <= since)
}

/// What a `304` carries of the stored headers (RFC 9110 §15.4.5), `Age` besides.
const KEPT_BY_304: [HeaderName; 7] = [
    header::ETAG,
    header::LAST_MODIFIED,
    header::CACHE_CONTROL,
    header::EXPIRES,
    header::VARY,
    header::CONTENT_LOCATION,
    header::DATE,
];

/// The headers a `304` for `e` carries, and `Age`.
fn not_modified_headers(e: &StoredResponse, now: Instant) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (n, v) in e.headers.iter().filter(|(n, _)| KEPT_BY_304.contains(n)) {
        headers.append(n.clone(), v.clone());
    }
    headers.insert(header::AGE, HeaderValue::from(e.age(now).as_secs()));
    headers
}

/// The headers a `304` for an answer with headers `head` carries, its `Age` and the node's
/// own `X-` headers included.
pub(super) fn head_not_modified_headers(head: &HeaderMap) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (n, v) in head.iter().filter(|(n, _)| {
        KEPT_BY_304.contains(n) || *n == header::AGE || n.as_str().starts_with("x-")
    }) {
        headers.append(n.clone(), v.clone());
    }
    headers
}

/// The client's answer to a hit on a cached response whose body has `size` bytes: status and
/// headers, and the pieces of its body. Honours `Range` / `If-Range` on a `200` (RFC 9110
/// §14): one range → `206` with `Content-Range`; several → `206` `multipart/byteranges`; none
/// satisfiable → `416` with `Content-Range: bytes */size`; an ignored `Range` (see
/// [`crate::range`]) or a failed `If-Range` → the full `200`. Conditions the stored response
/// meets → `304` (see the module doc). A `HEAD` gets the same headers and no pieces.
pub(super) fn plan_hit(
    e: &StoredResponse,
    size: u64,
    req: &HeaderMap,
    now: Instant,
    head: bool,
) -> (Response<()>, Vec<Piece>) {
    if not_modified(e, req) {
        let mut r = Response::new(());
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        *r.headers_mut() = not_modified_headers(e, now);
        return (r, Vec::new());
    }
    let ranges = match req.get(header::RANGE).and_then(|v| v.to_str().ok()) {
        Some(h) if e.status == StatusCode::OK && if_range_matches(e, req) => range::parse(h, size),
        _ => Ranges::Ignore,
    };
    let mut r = Response::new(());
    *r.status_mut() = e.status;
    *r.headers_mut() = entry_headers(e, size, now);
    let pieces = match ranges {
        Ranges::Ignore => vec![Piece::Body(0..size)],
        Ranges::Unsatisfiable => {
            *r.status_mut() = StatusCode::RANGE_NOT_SATISFIABLE;
            let h = r.headers_mut();
            h.remove(header::CONTENT_TYPE);
            h.insert(header::CONTENT_LENGTH, HeaderValue::from(0));
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{size}")) {
                h.insert(header::CONTENT_RANGE, v);
            }
            Vec::new()
        }
        Ranges::Satisfiable(mut v) if v.len() == 1 => {
            let part = v.remove(0);
            *r.status_mut() = StatusCode::PARTIAL_CONTENT;
            let h = r.headers_mut();
            h.insert(
                header::CONTENT_LENGTH,
                HeaderValue::from(part.end - part.start),
            );
            if let Ok(v) = HeaderValue::from_str(&range::content_range(&part, size)) {
                h.insert(header::CONTENT_RANGE, v);
            }
            vec![Piece::Body(part)]
        }
        Ranges::Satisfiable(v) => {
            let part_type = e
                .headers
                .iter()
                .find(|(n, _)| n == header::CONTENT_TYPE)
                .and_then(|(_, v)| v.to_str().ok());
            let seed = ecdn_trace::hash_id(e.key.as_bytes());
            let (pieces, len, content_type) = byteranges(v, size, part_type, seed);
            *r.status_mut() = StatusCode::PARTIAL_CONTENT;
            let h = r.headers_mut();
            h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
            if let Some(v) = content_type {
                h.insert(header::CONTENT_TYPE, v);
            }
            pieces
        }
    };
    (r, if head { Vec::new() } else { pieces })
}

/// The pieces of a `206` `multipart/byteranges` body of `parts` of a representation of `size`
/// bytes (each part framed by a boundary, with `part_type` as its `Content-Type` and its
/// `Content-Range`), their total length, and the answer's `Content-Type`. `seed` (e.g. a hash
/// of the key) makes the boundary differ between objects; the time, between answers.
pub(super) fn byteranges(
    parts: Vec<std::ops::Range<u64>>,
    size: u64,
    part_type: Option<&str>,
    seed: u64,
) -> (Vec<Piece>, u64, Option<HeaderValue>) {
    let boundary = format!(
        "ecdn-{:016x}",
        seed ^ freshness::unix_now().rotate_left(32) ^ size
    );
    let part_type = part_type
        .map(|t| format!("Content-Type: {t}\r\n"))
        .unwrap_or_default();
    let mut pieces = Vec::with_capacity(2 * parts.len() + 1);
    for part in parts {
        let text = format!(
            "\r\n--{boundary}\r\n{part_type}Content-Range: {}\r\n\r\n",
            range::content_range(&part, size)
        );
        pieces.push(Piece::Text(Bytes::from(text)));
        pieces.push(Piece::Body(part));
    }
    pieces.push(Piece::Text(Bytes::from(format!("\r\n--{boundary}--\r\n"))));
    let len = pieces.iter().map(Piece::len).sum();
    let content_type =
        HeaderValue::from_str(&format!("multipart/byteranges; boundary={boundary}")).ok();
    (pieces, len, content_type)
}

/// The client's answer from a cached response held in memory (see [`plan_hit`]).
pub(super) fn answer_hit(
    e: &StoredResponse,
    req: &HeaderMap,
    now: Instant,
    head: bool,
) -> Response<NodeBody> {
    let (r, body) = hit_bytes(e, req, now, head);
    r.map(|()| NodeBody::Full(Full::new(body)))
}

/// [`answer_hit`]'s head, and its body's bytes (slices of the stored body when they can be).
pub(super) fn hit_bytes(
    e: &StoredResponse,
    req: &HeaderMap,
    now: Instant,
    head: bool,
) -> (Response<()>, Bytes) {
    let (r, pieces) = plan_hit(e, e.body.len() as u64, req, now, head);
    let slice = |r: &std::ops::Range<u64>| e.body.slice(r.start as usize..r.end as usize);
    let body = match pieces.as_slice() {
        [] => Bytes::new(),
        [Piece::Body(r)] => slice(r),
        many => {
            let mut out = Vec::new();
            for p in many {
                match p {
                    Piece::Body(r) => out.extend_from_slice(&slice(r)),
                    Piece::Text(t) => out.extend_from_slice(t),
                }
            }
            Bytes::from(out)
        }
    };
    (r, body)
}

/// The client's answer from an object the HOC holds in stripes (see [`super::hoc::Striped`]),
/// if it holds every stripe the answer needs; `None` otherwise (the missing stripes are read
/// from the chunks). No byte is copied: the body is slices of the stripes.
pub(super) fn answer_striped(
    s: &Striped,
    req: &HeaderMap,
    now: Instant,
    head: bool,
) -> Option<Response<NodeBody>> {
    let (r, pieces) = plan_hit(&s.head, s.size(), req, now, head);
    let mut body = VecDeque::new();
    for p in pieces {
        match p {
            Piece::Text(t) => body.push_back(t),
            Piece::Body(range) => body.extend(s.range(range)?),
        }
    }
    Some(r.map(|()| NodeBody::Slices(body)))
}

/// Answers a disk hit by streaming its body from the store, [`DISK_BATCH`] bytes at a time.
/// Each batch is mapped from the page cache (no copy; `Disk::read_shared`) and verified
/// `body.rs`'s `VERIFY_PIECE` bytes at a time, just before each piece is handed to the connection; where
/// it cannot be mapped it is copied, at most 1 MiB at a time. Memory per response stays
/// bounded and the first byte leaves after one piece, whatever the object's size. The first
/// piece is read and verified before answering: if it cannot be, `None`, and the caller
/// treats the request as a miss. A later failure (a block failing its checksum) aborts the
/// response: the client sees a short body, never a wrong byte. A reader overtaken by the
/// ring keeps its bytes (the store detaches its mapping before overwriting them).
pub(super) async fn stream_hit(
    disk: &Disk,
    mut hit: DiskHit,
    req: &HeaderMap,
    now: Instant,
    head: bool,
) -> Option<Response<NodeBody>> {
    let size = hit.handle.payload_len();
    let (r, pieces) = plan_hit(&hit.entry, size, req, now, head);
    let length = content_length(r.headers()).unwrap_or(0);
    let mut steps = VecDeque::new();
    for p in pieces {
        match p {
            Piece::Text(t) => steps.push_back(Piece::Text(t)),
            Piece::Body(mut range) => {
                while !range.is_empty() {
                    let end = ((range.start / DISK_BATCH + 1) * DISK_BATCH).min(range.end);
                    steps.push_back(Piece::Body(range.start..end));
                    range.start = end;
                }
            }
        }
    }
    let mut ready = VecDeque::new();
    let mut verifying = None;
    while let Some(p) = steps.pop_front() {
        match p {
            Piece::Text(t) => ready.push_back(t),
            Piece::Body(range) => {
                let mapped = match hit.first.take() {
                    Some((end, m)) if range == (0..end) => {
                        Some(DiskBytes::Verifying(disk.verifying(&hit.handle, m)))
                    }
                    _ => disk.read_step(&hit.handle, range, &mut steps).await,
                };
                match mapped? {
                    DiskBytes::Ready(b) => ready.push_back(b),
                    DiskBytes::Verifying(mut v) => {
                        // The first piece is verified before answering: a bad block there
                        // turns the request into a miss instead of a short response.
                        if let Some(first) = v.next_piece() {
                            ready.push_back(first.ok()?);
                        }
                        verifying = (!v.verifier.is_done()).then_some(v);
                    }
                }
                break;
            }
        }
    }
    if steps.is_empty() && verifying.is_none() {
        let body = if ready.len() == 1 {
            ready.pop_front().unwrap_or_default()
        } else {
            Bytes::from(ready.make_contiguous().concat())
        };
        return Some(r.map(|()| NodeBody::Full(Full::new(body))));
    }
    let (tx, rx) = mpsc::channel(2);
    let (disk, handle) = (disk.clone(), hit.handle);
    tokio::spawn(async move {
        while let Some(p) = steps.pop_front() {
            let chunk = match p {
                Piece::Text(t) => Chunk::Data(t),
                Piece::Body(range) => match disk.read_step(&handle, range, &mut steps).await {
                    Some(DiskBytes::Ready(b)) => Chunk::Data(b),
                    Some(DiskBytes::Verifying(v)) => Chunk::Verifying(v),
                    None => return, // closes the channel without `Done`: aborted
                },
            };
            if tx.send(chunk).await.is_err() {
                return; // the client went away
            }
        }
        let _ = tx.send(Chunk::Done).await;
    });
    Some(r.map(|()| NodeBody::Live(LiveBody::new(ready, verifying, rx, Some(length)))))
}
