//! Slices: a large object cached as fixed-size byte ranges, each a cache object of its own.
//!
//! A CDN does not cache a multi-GiB file as one object: Traffic Server's slice plugin and
//! nginx's slice module fetch it from the origin as fixed-size ranges and cache each range
//! under a key of its own. ecdn does the same when the cluster file sets `slice_size`
//! ([`ecdn_placement::slices`], the simulator's slicing): slice `i` of the object at URL `U` is
//! cached under [`CacheKey::slice`]`(U, i)`, placed by
//! [`ecdn_placement::slices::slice_id`] in a bucket of its own, and coded or replicated like
//! any object, so each slice lands where the simulator puts it.
//!
//! # A plain `GET` of a URL the caches do not hold whole
//!
//! 1. **Slice 0 first.** The node asks for slice 0 as for any object: the HOC, the disk, the
//!    pieces on the cluster's servers, then the origin, with `Range: bytes=0-(S−1)`. The
//!    origin's answer decides ([`super::slice_range::answer_head`]):
//!    - a `206` of a larger object: slice 0, stored under its key with the object's length;
//!    - a `206` holding the whole object (at most `S` bytes), or a `200` (an origin that does
//!      not serve ranges): the object itself, stored under the URL's key as any miss is, and
//!      that is the client's answer;
//!    - anything else (a `404`, a `5xx`): passed on, not stored.
//! 2. **The rest, in order.** The client's `200` carries slice 0's headers and the object's
//!    length; its body is slice 0's bytes, then slice 1's, and so on, each found or filled by
//!    its own range as slice 0 was, while the previous one streams. A slice whose validator
//!    (`ETag`, else `Last-Modified`) or object length differs from slice 0's is of another
//!    version: the client's response is aborted there (a short body), never mixed.
//! 3. **Remembered.** The node keeps the lengths of the sliced objects it served (a bounded
//!    table, [`super::slice_range::Slices`]), so the next request for one goes to its slices at once.
//!
//! In a cluster, the node serving the URL's bucket reads the slices ([`By::Serving`]), and so
//! does any node that knows the object is sliced ([`By::Direct`], `cluster/c2dn/direct.rs`),
//! asking the serving node only for a slice the cluster's pieces do not hold.
//!
//! # A `GET` of byte ranges
//!
//! The slice holding the first range's first byte is found or filled first (slice 0 for a
//! suffix range, `bytes=-N`), which tells the object's length if the node does not remember
//! it; the ranges are then resolved against that length as a hit resolves them
//! ([`crate::range`]). One range: a `206` with its `Content-Range`, its body the range's bytes
//! of that slice and the next ones. Several: one `206` `multipart/byteranges` whose parts are
//! read from the slices holding them, in request order (a slice two parts share is read
//! twice). None in the object: a `416`. A list refused as abusive: the whole `200`. An object
//! that turns out not to be sliced takes the ordinary path of a range request. Requests that
//! are neither (an `If-Range`, a conditional of the client's own, credentials, `no-store`)
//! take the ordinary path too: they go to the origin as they are.
//!
//! # A `HEAD`
//!
//! Of an object the node knows sliced: slice 0's head, found or filled as for a `GET`, with the
//! object's length ([`serve_head`]). Of any other, the ordinary path (the origin's `HEAD`).
//!
//! # A conditional `GET`
//!
//! With `If-None-Match` or `If-Modified-Since` (nothing else that makes it more than a plain
//! `GET`), of an object known sliced or not held whole: slice 0 first, whose validators decide
//! between a `304` and the slices ([`serve_conditional`]).

use std::ops::Range;
use std::sync::Arc;

use http_body_util::BodyExt;
use hyper::header::{self, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode};
use tokio::sync::mpsc;

use super::answer::{empty_body, Answer, ReqBody};
use super::body::{Chunk, LiveBody, NodeBody, Piece};
use super::fill::{self, Job};
use super::freshness::RequestDirectives;
use super::key::CacheKey;
use super::lookup::{self, Lookup};
use super::outcome::Outcome;
use super::slice_range::{parse_slice, SliceFill, Sliced, SLICED_HEADER, SLICE_HEADER};
use super::state::State;

const X_ORIGIN_BYTES: HeaderName = HeaderName::from_static("x-ecdn-origin-bytes");
const X_PARTIAL: HeaderName = HeaderName::from_static("x-ecdn-partial");

/// Who reads the slices of an answer being streamed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum By {
    /// The node serving the object's URL (its bucket's, or the target of a relay): each slice
    /// from its HOC, the cluster's pieces or the origin, whose fills of a slice it collapses.
    Serving,
    /// A node that does not serve the URL (cluster mode, `cluster::c2dn::direct`): each
    /// slice the cluster's pieces hold is read here, and only a slice they do not is asked of
    /// the URL's serving node, which finds or fills it as it would for its own answer.
    Direct,
}

/// The slice an answer is (`FIRST-LAST/LENGTH` of its [`SLICE_HEADER`]), if it is one.
fn slice_of(response: &Response<NodeBody>) -> Option<(u64, u64, u64)> {
    parse_slice(response.headers().get(SLICE_HEADER)?)
}

/// Counts a slice's answer (of a slice of `len` bytes) into `s`: a partial hit says what it
/// fetched, a miss fetched the slice.
fn count(s: &mut Sliced, a: &Answer, len: u64) {
    s.slices += 1;
    let h = a.response.headers();
    let partial = h.get(&X_PARTIAL).is_some_and(|v| v == "1");
    let origin = if partial {
        h.get(&X_ORIGIN_BYTES)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or(len)
    } else if a.outcome == Outcome::Miss {
        len
    } else {
        0
    };
    if partial || a.outcome == Outcome::Miss {
        s.missed += 1;
    }
    s.partial += u64::from(partial);
    s.origin_bytes += origin;
}

/// The validator that tells two versions of an object apart: `ETag`, else `Last-Modified`.
fn validator(response: &Response<NodeBody>) -> Option<HeaderValue> {
    let h = response.headers();
    h.get(header::ETAG)
        .or_else(|| h.get(header::LAST_MODIFIED))
        .cloned()
}

/// Whether `req` is a `GET` slicing answers but for `allowed`: none of the other headers that
/// make it more than a plain fetch (a conditional of its own, credentials, ...), and
/// directives that let the caches answer and store.
fn plain_but(req: &Request<ReqBody>, rd: &RequestDirectives, allowed: &[HeaderName]) -> bool {
    req.method() == hyper::Method::GET && plain_fetch(req, rd, allowed)
}

/// [`plain_but`] whatever the method.
fn plain_fetch(req: &Request<ReqBody>, rd: &RequestDirectives, allowed: &[HeaderName]) -> bool {
    fill::NOT_PLAIN
        .iter()
        .all(|h| allowed.contains(h) || !req.headers().contains_key(h))
        && !rd.no_store
        && !rd.no_cache
        && !rd.only_if_cached
}

/// Whether `req` is a plain `GET` slicing answers: no range, no conditional of its own, no
/// credentials, and directives that let the caches answer and store.
pub(super) fn takes(req: &Request<ReqBody>, rd: &RequestDirectives) -> bool {
    plain_but(req, rd, &[])
}

/// The conditionals a `GET` of a sliced object is judged by against slice 0.
const CONDITIONALS: [HeaderName; 2] = [header::IF_NONE_MATCH, header::IF_MODIFIED_SINCE];

/// Whether `req` is a `GET` as plain as [`takes`] asks but for `If-None-Match` or
/// `If-Modified-Since` (at least one of them; no `If-Match`, `If-Unmodified-Since`, `If-Range`
/// or `Range`): [`serve_conditional`] answers it.
pub(super) fn takes_conditional(req: &Request<ReqBody>, rd: &RequestDirectives) -> bool {
    plain_but(req, rd, &CONDITIONALS) && CONDITIONALS.iter().any(|h| req.headers().contains_key(h))
}

/// A conditional `GET` ([`takes_conditional`]) of `primary`: slice 0 found or filled as for a
/// plain `GET`; if the object is sliced and slice 0's validators meet the conditions, a `304`
/// with slice 0's head (RFC 9110 §15.4.5), else the slices as [`serve`] streams them. An object
/// that turns out not to be sliced gets its whole answer (a full answer to a conditional
/// request is always allowed), stored under the URL's key as any miss is.
pub(super) async fn serve_conditional(
    st: &Arc<State>,
    req: &Request<ReqBody>,
    primary: &str,
    by: By,
) -> Answer {
    let (length, first) = match first_slice(st, req, primary, by).await {
        Ok(sliced) => sliced,
        Err(whole) => return whole,
    };
    let head = first.response.headers();
    if !super::hit::head_not_modified(first.response.status(), head, req.headers()) {
        return stream_whole(st, req, primary, length, first, by);
    }
    let mut headers = super::hit::head_not_modified_headers(head);
    strip_slice_headers(&mut headers);
    let mut response = Response::new(NodeBody::Full(Default::default()));
    *response.status_mut() = StatusCode::NOT_MODIFIED;
    *response.headers_mut() = headers;
    Answer {
        outcome: first.outcome,
        response,
    }
}

/// The answer of a request for an object this node knows to be sliced, made of its slices
/// (read [`By`] `by`): a plain `GET` ([`serve`]), a `HEAD` ([`serve_head`]), a conditional
/// `GET` ([`serve_conditional`]) or byte ranges ([`serve_range`]). `None` for any other
/// request, and for a range of an object that turns out not to be sliced: the caller answers
/// it as any other.
pub(super) async fn serve_known(
    st: &Arc<State>,
    req: &Request<ReqBody>,
    rd: &RequestDirectives,
    primary: &str,
    by: By,
) -> Option<Answer> {
    if takes(req, rd) {
        return Some(serve(st, req, primary, by).await);
    }
    if takes_head(req, rd) {
        return Some(serve_head(st, req, primary, by).await);
    }
    if takes_conditional(req, rd) {
        return Some(serve_conditional(st, req, primary, by).await);
    }
    let asked = ranges(req, rd)?;
    serve_range(st, req, primary, &asked, by).await
}

/// Whether `req` is a `HEAD` slice 0 answers (of an object known to be sliced): as plain as
/// [`takes`] asks of a `GET`.
pub(super) fn takes_head(req: &Request<ReqBody>, rd: &RequestDirectives) -> bool {
    req.method() == hyper::Method::HEAD && plain_fetch(req, rd, &[])
}

/// A `HEAD` of an object known to be sliced: slice 0 found or filled as for a `GET`, and its
/// head with the object's length (`Content-Length`), no body. An object that turns out not to
/// be sliced (or an error) answers the head of what came.
pub(super) async fn serve_head(
    st: &Arc<State>,
    req: &Request<ReqBody>,
    primary: &str,
    by: By,
) -> Answer {
    let size = st.slices.slicing.size();
    let first = slice_answer(st, req, primary, 0, size, by).await;
    let length = slice_of(&first.response).map(|(_, _, length)| length);
    st.slices.remember(primary, length);
    let Answer { outcome, response } = first;
    let (mut parts, _) = response.into_parts();
    if let Some(length) = length {
        strip_slice_headers(&mut parts.headers);
        parts
            .headers
            .insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    }
    Answer {
        outcome,
        response: Response::from_parts(parts, NodeBody::Full(Default::default())),
    }
}

/// Serves a plain `GET` of `primary` by its slices (module documentation): slice 0, then, if
/// the object is sliced, the rest in order. The answer to slice 0 is the client's when it is
/// the whole object or an error.
pub(super) async fn serve(
    st: &Arc<State>,
    req: &Request<ReqBody>,
    primary: &str,
    by: By,
) -> Answer {
    match first_slice(st, req, primary, by).await {
        Ok((length, first)) => stream_whole(st, req, primary, length, first, by),
        Err(whole) => whole,
    }
}

/// Slice 0 of `primary`, found or filled, and what it says: `Ok` with the object's length if
/// the object is sliced, else `Err` with the client's answer, the whole object (filled under
/// the URL's key) or the origin's error, marked a miss. The node remembers which.
async fn first_slice(
    st: &Arc<State>,
    req: &Request<ReqBody>,
    primary: &str,
    by: By,
) -> Result<(u64, Answer), Answer> {
    let size = st.slices.slicing.size();
    let mut first = slice_answer(st, req, primary, 0, size, by).await;
    let Some((_, _, length)) = slice_of(&first.response) else {
        st.slices.remember(primary, None);
        // (A relayed answer already carries the serving node's.)
        if let (Some(c), false) = (&st.cluster, first.outcome == Outcome::Relayed) {
            super::cluster::c2dn::headers::mark_miss(c, &mut first, false);
        }
        return Err(first);
    };
    st.slices.remember(primary, Some(length));
    Ok((length, first))
}

/// Drops what a slice's answer says of itself (which slice, what it fetched) from a head
/// that speaks for the whole object.
fn strip_slice_headers(headers: &mut hyper::HeaderMap) {
    for h in [SLICE_HEADER, X_ORIGIN_BYTES, X_PARTIAL] {
        headers.remove(h);
    }
}

/// The `Range` of a `GET` [`serve_range`] answers from the slices: one to
/// [`crate::range::MAX_RANGES`] byte ranges (`A-B`, `A-`, `-N`), nothing else that makes the
/// request more than a plain `GET` (no `If-Range`).
pub(super) struct Asked {
    /// The field's value, resolved against the object's length once it is known.
    value: String,
    /// Where the first range starts (`None` for a suffix `-N`): the slice looked up first.
    start: Option<u64>,
}

/// The byte ranges `req` asks for, if [`serve_range`] may answer it from the slices.
pub(super) fn ranges(req: &Request<ReqBody>, rd: &RequestDirectives) -> Option<Asked> {
    if !plain_but(req, rd, &[header::RANGE]) {
        return None;
    }
    let value = req.headers().get(header::RANGE)?.to_str().ok()?;
    // Against the largest length, a suffix `-N` is `u64::MAX − N..u64::MAX`.
    let crate::range::Ranges::Satisfiable(r) = crate::range::parse(value, u64::MAX) else {
        return None;
    };
    let suffix = |r: &Range<u64>| r.end == u64::MAX && r.start > u64::MAX / 2;
    Some(Asked {
        value: value.to_string(),
        start: r.first().filter(|r| !suffix(r)).map(|r| r.start),
    })
}

/// Serves the byte ranges `asked` of `primary` from its slices: the slice holding the first
/// range's first byte is found or filled first (slice 0 for a suffix), which tells the
/// object's length if the node does not know it. Then, as a hit answers a range (RFC 9110
/// §14, [`super::hit::plan_hit`]): one range, a `206` with its `Content-Range`; several, a
/// `206` `multipart/byteranges` (each part read from the slices holding it, in request order);
/// none in the object, a `416`; a list refused as abusive, the whole `200`. `None` when the
/// object is not sliced (the caller goes on as for any range request).
pub(super) async fn serve_range(
    st: &Arc<State>,
    req: &Request<ReqBody>,
    primary: &str,
    asked: &Asked,
    by: By,
) -> Option<Answer> {
    use crate::range::{self, Ranges};
    let size = st.slices.slicing.size();
    let (length, first) = match st.slices.known(primary) {
        Some(length) => (length, None),
        None => {
            let index = asked.start.map_or(0, |s| s / size);
            let a = slice_answer(st, req, primary, index, size, by).await;
            let (_, _, length) = slice_of(&a.response)?;
            st.slices.remember(primary, Some(length));
            (length, Some((index, a)))
        }
    };
    let (parts, status) = match range::parse(&asked.value, length) {
        // A list refused as abusive: the whole object.
        Ranges::Ignore => (std::iter::once(0..length).collect(), StatusCode::OK),
        Ranges::Unsatisfiable => {
            let mut r = super::answer::text(
                StatusCode::RANGE_NOT_SATISFIABLE,
                "no byte of the range is in the object",
            );
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{length}")) {
                r.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            return Some(Answer {
                outcome: Outcome::HitDisk,
                response: r,
            });
        }
        Ranges::Satisfiable(parts) => (parts, StatusCode::PARTIAL_CONTENT),
    };
    let index = parts[0].start / size;
    let first = match first {
        Some((i, a)) if i == index => a,
        _ => slice_answer(st, req, primary, index, size, by).await,
    };
    if slice_of(&first.response).map(|(_, _, n)| n) != Some(length) {
        // Not the object the node remembered (it changed, or is no longer sliced).
        st.slices.remember(primary, None);
        return None;
    }
    // The answer's framing: one range's `Content-Range`, or several ranges' multipart body.
    let (plan, framing) = match parts.as_slice() {
        [one] => {
            let cr = (status == StatusCode::PARTIAL_CONTENT)
                .then(|| HeaderValue::from_str(&range::content_range(one, length)).ok())
                .flatten();
            (
                vec![Piece::Body(one.clone())],
                cr.map(|v| (header::CONTENT_RANGE, v)),
            )
        }
        _ => {
            let part_type = first
                .response
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok());
            let seed = ecdn_trace::hash_id(primary.as_bytes());
            let (plan, _, content_type) = super::hit::byteranges(parts, length, part_type, seed);
            (plan, content_type.map(|v| (header::CONTENT_TYPE, v)))
        }
    };
    let mut answer = stream(st, req, primary, length, plan, (index, first), by);
    *answer.response.status_mut() = status;
    if let Some((name, value)) = framing {
        answer.response.headers_mut().insert(name, value);
    }
    Some(answer)
}

/// The slices a body `plan` reads, in order: for each of its byte ranges of an object of
/// `length` bytes in slices of `size`, the indexes of the slices holding it.
fn slices_read(plan: &[Piece], size: u64) -> impl Iterator<Item = u64> + '_ {
    plan.iter()
        .filter_map(move |p| match p {
            Piece::Body(r) if !r.is_empty() => Some(r.start / size..=(r.end - 1) / size),
            _ => None,
        })
        .flatten()
}

/// The client's answer made of the slices of `primary` (an object of `length` bytes): its body
/// is `plan`, byte ranges of the object (read from the slices holding them, in order) and
/// framing text. `first` is the answer of the slice read first (`(index, answer)`), whose
/// headers the client's answer carries; each later slice is found or filled while the one
/// before streams, and must be of the first one's version. The body is aborted at a slice
/// that is not.
fn stream(
    st: &Arc<State>,
    req: &Request<ReqBody>,
    primary: &str,
    length: u64,
    plan: Vec<Piece>,
    (first_index, first): (u64, Answer),
    by: By,
) -> Answer {
    let size = st.slices.slicing.size();
    let version = validator(&first.response);
    let request_id = ecdn_cluster::peer::request_id();
    let bytes_of = move |index: u64| {
        let first = index * size;
        first..(first + size).min(length)
    };
    let mut sliced = Sliced::default();
    let first_slice = bytes_of(first_index);
    count(&mut sliced, &first, first_slice.end - first_slice.start);
    let sent: u64 = plan.iter().map(Piece::len).sum();
    let object_bytes: u64 = plan
        .iter()
        .filter(|p| matches!(p, Piece::Body(_)))
        .map(Piece::len)
        .sum();
    let Answer { outcome, response } = first;
    let (parts, body) = response.into_parts();
    let mut headers = parts.headers;
    strip_slice_headers(&mut headers);
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(sent));
    headers.insert(
        SLICED_HEADER,
        HeaderValue::from(slices_read(&plan, size).count() as u64),
    );
    if let Some(c) = &st.cluster {
        // Where the answer's outcome is asked for once it has ended.
        headers.insert(
            super::cluster::c2dn::headers::X_SERVED_BY,
            HeaderValue::from(c.id),
        );
    }
    let (tx, rx) = mpsc::channel(4);
    let st = st.clone();
    let (primary, sub) = (primary.to_string(), sub_request(req));
    tokio::spawn(async move {
        // The first slice read is `first`'s body (the one looked up first).
        let mut first = Some((first_index, body));
        for piece in plan {
            let window = match piece {
                Piece::Text(t) => {
                    if tx.send(Chunk::Data(t)).await.is_err() {
                        return;
                    }
                    continue;
                }
                Piece::Body(r) if r.is_empty() => continue,
                Piece::Body(r) => r,
            };
            for index in window.start / size..=(window.end - 1) / size {
                let slice = bytes_of(index);
                let body = match first.take() {
                    Some((i, b)) if i == index => b,
                    _ => {
                        let Some(b) = later_slice(
                            &st,
                            &sub,
                            &primary,
                            index,
                            &version,
                            slice.clone(),
                            length,
                            &mut sliced,
                            by,
                        )
                        .await
                        else {
                            st.slices.remember(&primary, None);
                            return;
                        };
                        b
                    }
                };
                // The part of the slice inside the window, as offsets into the slice.
                let from = window.start.max(slice.start) - slice.start;
                let to = window.end.min(slice.end) - slice.start;
                if !forward(body, slice.end - slice.start, from..to, &tx).await {
                    return;
                }
            }
        }
        st.slices.record(request_id, sliced);
        if let Some(c) = &st.cluster {
            c.stats
                .sliced(sliced.missed > 0, object_bytes, sliced.origin_bytes);
        }
        let _ = tx.send(Chunk::Done).await;
    });
    let mut r = Response::new(NodeBody::Live(LiveBody::new(
        Default::default(),
        None,
        rx,
        Some(sent),
    )));
    *r.status_mut() = StatusCode::OK;
    *r.headers_mut() = headers;
    Answer {
        outcome,
        response: r,
    }
}

/// A slice after the first of an answer being streamed: slice `index` (bytes `slice` of an
/// object of `length`) found or filled, counted into `sliced`, its body if it is of the first
/// slice's `version`. One of another version still cached (its object changed and was purged
/// while this slice was not found) is dropped and filled again once; `None` if that fails too.
#[allow(clippy::too_many_arguments)]
async fn later_slice(
    st: &Arc<State>,
    sub: &Request<ReqBody>,
    primary: &str,
    index: u64,
    version: &Option<HeaderValue>,
    slice: Range<u64>,
    length: u64,
    sliced: &mut Sliced,
    by: By,
) -> Option<NodeBody> {
    let size = st.slices.slicing.size();
    let want = (slice.start, slice.end - 1, length);
    let fits = |a: &Answer| {
        a.response.status() == StatusCode::OK
            && slice_of(&a.response) == Some(want)
            && validator(&a.response) == *version
    };
    let mut a = slice_answer(st, sub, primary, index, size, by).await;
    if !fits(&a) && slice_of(&a.response).is_some() {
        drop(a);
        purge_slice(st, primary, index).await;
        a = slice_answer(st, sub, primary, index, size, by).await;
    }
    if !fits(&a) {
        eprintln!(
            "ecdn node: slice {index} of {primary} is not the slice of the version being \
             sent (status {}, {:?}); the response is aborted",
            a.response.status(),
            a.response.headers().get(SLICE_HEADER)
        );
        return None;
    }
    count(sliced, &a, slice.end - slice.start);
    Some(a.response.into_body())
}

/// [`stream`] of the whole object, from slice 0 (`first`).
fn stream_whole(
    st: &Arc<State>,
    req: &Request<ReqBody>,
    primary: &str,
    length: u64,
    first: Answer,
    by: By,
) -> Answer {
    stream(
        st,
        req,
        primary,
        length,
        vec![Piece::Body(0..length)],
        (0, first),
        by,
    )
}

/// Drops slice `index` of `primary` from this node and, in a cluster, from every node.
async fn purge_slice(st: &State, primary: &str, index: u64) -> bool {
    let key = CacheKey::slice(primary, index).key;
    let held = st.invalidate(&key).await.unwrap_or(false);
    match &st.cluster {
        Some(c) => {
            super::cluster::pieces::purge::purge(st, c, &key, held)
                .await
                .0
        }
        None => held,
    }
}

/// A `PURGE` of `primary`: its slices go too, from every node, as many as this node knows
/// the object has (its table, else the length its own copy of slice 0 says; slice 0 alone
/// when it knows neither). A slice left cached elsewhere is dropped when a download meets it
/// (of another version than slice 0's). Whether any was held. `primary` a slice's key (a
/// purge of one slice that reached this node): nothing more.
pub(super) async fn purge(st: &State, primary: &str) -> bool {
    if !st.slices.on() || super::cluster::pieces::names::slice_of(primary).is_some() {
        return false;
    }
    let size = st.slices.slicing.size();
    let length = match st.slices.known(primary) {
        Some(n) => Some(n),
        None => {
            let sub = Request::new(empty_body());
            let key = CacheKey::slice(primary, 0);
            match lookup::lookup(st, &sub, &key, &RequestDirectives::default()).await {
                Lookup::Hit(a) => slice_of(&a.response).map(|(_, _, n)| n),
                Lookup::Miss(_) => None,
            }
        }
    };
    st.slices.remember(primary, None);
    let mut held = false;
    for index in 0..length.map_or(1, |n| n.div_ceil(size)) {
        held |= purge_slice(st, primary, index).await;
    }
    held
}

/// Sends bytes `keep` of a slice's body on, checking the body holds `len` bytes. Whether it
/// did and the client is still there.
async fn forward(mut body: NodeBody, len: u64, keep: Range<u64>, tx: &mpsc::Sender<Chunk>) -> bool {
    let mut at = 0u64;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else { return false };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let (start, end) = (at, at + data.len() as u64);
        at = end;
        if at > len {
            return false;
        }
        let (a, b) = (start.max(keep.start), end.min(keep.end));
        if a < b {
            let part = data.slice((a - start) as usize..(b - start) as usize);
            if tx.send(Chunk::Data(part)).await.is_err() {
                return false;
            }
        }
    }
    at == len
}

/// The request a slice is looked up and filled with: a `GET` of the client's URL with its
/// headers less ranges, conditionals, credentials and cache directives.
fn sub_request(req: &Request<ReqBody>) -> Request<ReqBody> {
    let mut sub = Request::new(empty_body());
    *sub.uri_mut() = req.uri().clone();
    *sub.headers_mut() = fill::plain_headers(req.headers());
    sub
}

/// Slice `index` of a sliced object, asked by a node reading the object's other slices itself
/// (a relay's `?slice=N`, `cluster::c2dn::direct`): found or filled as this node finds or
/// fills a slice of its own answers. The answer is the slice's (status `200`, its
/// [`SLICE_HEADER`]), or the whole object if it is no longer sliced.
pub(super) async fn relayed_slice(st: &Arc<State>, req: &Request<ReqBody>, index: u64) -> Answer {
    let primary = CacheKey::primary(req);
    let size = st.slices.slicing.size();
    slice_answer(st, req, &primary, index, size, By::Serving).await
}

/// Slice `index` of the object at `primary`: from the HOC, the disk or the cluster's pieces,
/// else filled from the origin by its range. Read [`By::Direct`], from the cluster's pieces,
/// else asked of the URL's serving node (else, that node out of reach, as `Serving` would).
async fn slice_answer(
    st: &Arc<State>,
    req: &Request<ReqBody>,
    primary: &str,
    index: u64,
    size: u64,
    by: By,
) -> Answer {
    // The client's request less its range, conditionals and directives: what the slice is
    // looked up, read and filled with.
    let sub = sub_request(req);
    let key = CacheKey::slice(primary, index);
    let rd = RequestDirectives::default();
    if let (By::Direct, Some(c)) = (by, &st.cluster) {
        // A hit of the cluster's pieces is read here (a replica or K chunks, after one round of
        // questions unless a chunk of it is here); anything else is the URL's serving node's
        // (`?slice=N`), which fills a slice no node holds and collapses concurrent fills of it.
        // That node out of reach, this node goes on as it would.
        use super::cluster::c2dn::{read, relay};
        let hit = read::lookup(st, c, &sub, &key, &rd, read::Reader::Direct);
        if let read::Found::Hit(a) = Box::pin(hit).await {
            return a;
        }
        if let Some(a) = Box::pin(relay::forward_slice(st, c, &sub, index)).await {
            return a;
        }
    }
    if let Some(c) = &st.cluster {
        c.repair.requested(&c.cfg, &c.map, c.id, key.id, &key.key);
    }
    if let Lookup::Hit(a) = lookup::lookup(st, &sub, &key, &rd).await {
        return a;
    }
    if let Some(c) = &st.cluster {
        use super::cluster::c2dn::{partial, read::Found, read::Reader};
        match Box::pin(super::cluster::c2dn::read::lookup(
            st,
            c,
            &sub,
            &key,
            &rd,
            Reader::Serving,
        ))
        .await
        {
            Found::Hit(a) => return a,
            // Only the missing chunks from the origin, at the slice's place in the object.
            Found::Partial(Some(p)) => {
                if let Some(a) = Box::pin(partial::serve(st, c, &sub, &key, p)).await {
                    return a;
                }
            }
            Found::Partial(None) | Found::Miss => {}
        }
    }
    let job = Job {
        key,
        req_headers: sub.headers().clone(),
        stale: None,
        slice: Some(SliceFill { index, size }),
    };
    fill::miss(st, sub, job, &rd).await
}
