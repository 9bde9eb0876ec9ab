//! Misses: a `GET` fetched from the origin, streamed to its clients and driven into the tiers.
//!
//! # Misses, errors
//!
//! A `GET` miss is streamed: the client's response starts as soon as the origin's headers
//! arrive (end-to-end headers, the origin's `Content-Length`), and the body is forwarded frame
//! by frame as it arrives (one fresh origin connection per fetch; no pool yet). While
//! streaming, the body is accumulated if the answer is storable and fits: at most
//! max(HOC capacity, disk capacity), judged from `Content-Length` at the headers and again as
//! bytes arrive; beyond it accumulation stops and nothing is stored. The object is stored
//! (offered to the HOC, written to disk if it fits the ring) only when the origin body
//! completed **and** its length equals `Content-Length` (if given); the last frame is held
//! back until then, so a client never has the whole object before the cache does, and the
//! next request sees it. A `HEAD` miss is forwarded as `HEAD`, buffered and not stored.
//!
//! An unreachable origin gives `502`; no response headers within
//! [`super::NodeConfig::origin_timeout`] (connect + headers) gives `504`. Once headers are
//! sent, errors can only abort: an origin that dies mid-body, or sends no frame for the origin
//! timeout, aborts every client response of that fetch (connection closed, the client sees a
//! short body) and nothing is stored. A client that does not take a frame within the origin
//! timeout is dropped (its response aborted) so it cannot stall the others.
//!
//! Concurrent misses share one fetch: see [`super::flight`].
//!
//! # What is cached, and for how long
//!
//! See [`freshness`]: `200` answers to `GET` without `Authorization`, without `no-store`,
//! `private`, `no-cache`, `Vary: *` or `Set-Cookie`, with a lifetime: `s-maxage`, else
//! `max-age`, else `Expires` − `Date`, else a heuristic 10% of `Date` − `Last-Modified` (at
//! most a day; RFC 9111 §4.2.2). Age = origin `Age` + time in this node (on disk too:
//! the write time is kept as UNIX seconds). `5xx` and every other non-`200` status are never
//! stored.
//!
//! # Stale entries (RFC 9111 §4.3, RFC 5861)
//!
//! A stale entry is kept (the HOC keeps it until replaced or evicted, the disk until
//! overwritten) and a plain `GET` finding one, in the HOC or on disk, sends the origin a
//! conditional `GET`: `If-None-Match` with its `ETag`, else `If-Modified-Since` with its
//! `Last-Modified` (neither: an ordinary `GET`). The fetch is an ordinary flight, so concurrent
//! requests share the validation.
//!
//! * `304 Not Modified`: the stored headers are updated from the `304` (every header it
//!   carries replaces the stored ones of that name, except `Content-Length`, `Age` and
//!   hop-by-hop / framing headers; RFC 9111 §4.3.4), its age restarts from the `304`'s `Age`
//!   and its lifetime is recomputed from the updated headers. The updated entry replaces the
//!   stale one in the HOC and, when the stale copy was on disk, on disk, before it is served
//!   (`200`, `X-Cache: REVALIDATED`, tier `revalidated`, counted in `revalidated` and in
//!   `misses`). If the updated headers are no longer storable it is served once and dropped.
//! * `200` (or any other answer): handled as a miss; a storable answer replaces the entry, an
//!   unstorable non-`5xx` one drops the stale copy from the HOC.
//! * `5xx`, origin unreachable or timed out: if the entry's `Cache-Control` has
//!   `stale-if-error=N` and its age is below lifetime + N, it is served as it is (`200`,
//!   `X-Cache: STALE`, tier `stale`, counted in `stale`; no `Warning`, which RFC 9111
//!   obsoletes); else the `5xx` is passed on or our `502` / `504` given as for any miss. An
//!   entry with `must-revalidate`, `proxy-revalidate` or `s-maxage` is never served stale.
//!
//! Only a `GET` without `Range`, `Authorization`, request `no-store` or a conditional of its
//! own (`If-None-Match`, `If-Modified-Since`, `If-Match`, `If-Unmodified-Since`, `If-Range`)
//! validates; others go to the origin unconditionally as before, and a `HEAD` on a stale entry
//! is forwarded as `HEAD`. Serving a stale entry at once (`stale-while-revalidate`, the
//! request's `max-stale`) is decided at lookup: see [`super::lookup`].

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::header::{self, HeaderMap, HeaderName};
use hyper::{Request, Response, StatusCode};

use super::answer::{Answer, ReqBody};
use super::body::{LiveBody, NodeBody};
use super::cluster::c2dn::write::StripePlacer;
use super::flight::{wait_head, Driver, Flight, Head, Subscription};
use super::freshness::{self, StoredResponse};
use super::hit::entry_headers;
use super::key::CacheKey;
use super::lock::lock;
use super::outcome::Outcome;
use super::slice_range::{self, SliceFill, SliceHead};
use super::state::State;
use super::upstream::{content_length, has_body, FetchError};
use super::vary::Vary;

/// Request headers that make a `GET` more than a plain fetch of the stored resource (a range,
/// a conditional of the client's own, credentials): such a request never validates a stale
/// entry, and a background validation drops them.
pub(super) const NOT_PLAIN: [HeaderName; 7] = [
    header::RANGE,
    header::IF_RANGE,
    header::IF_NONE_MATCH,
    header::IF_MODIFIED_SINCE,
    header::IF_MATCH,
    header::IF_UNMODIFIED_SINCE,
    header::AUTHORIZATION,
];

/// The client's request headers for a request of the node's own to the origin (a background
/// validation, a partial hit's chunk ranges): without [`NOT_PLAIN`] headers and the client's
/// `Cache-Control` / `Pragma`.
pub(super) fn plain_headers(h: &HeaderMap) -> HeaderMap {
    let mut headers = h.clone();
    for name in NOT_PLAIN
        .iter()
        .chain(&[header::CACHE_CONTROL, header::PRAGMA])
    {
        headers.remove(name);
    }
    headers
}

/// Starts a validation of a stale entry with the origin that no client waits for (RFC 5861
/// `stale-while-revalidate`): a plain conditional `GET` with the client's headers (less its
/// own conditionals, `Range` and credentials). It joins an in-flight fetch of the key if there
/// is one, so a burst of stale hits makes one origin request; the answer updates the caches.
pub(super) fn revalidate_in_background(
    st: &Arc<State>,
    req: &Request<ReqBody>,
    key: &CacheKey,
    stale: Revalidation,
) {
    let headers = plain_headers(req.headers());
    let mut bg = Request::new(super::answer::empty_body());
    *bg.uri_mut() = req.uri().clone();
    *bg.headers_mut() = headers.clone();
    let job = Job {
        key: key.clone(),
        req_headers: headers,
        stale: Some(stale),
        slice: None,
    };
    let st = st.clone();
    tokio::spawn(async move {
        let rd = freshness::RequestDirectives::default();
        let mut body = miss(&st, bg, job, &rd).await.response.into_body();
        // Drain what the fetch sends (stored as it arrives); nobody reads it.
        while let Some(Ok(_)) = body.frame().await {}
    });
}

/// What one miss asks of the origin.
#[derive(Clone)]
pub(super) struct Job {
    /// The key looked up (and the flight's).
    pub(super) key: CacheKey,
    /// The request's headers, for the variant key of an answer with `Vary`.
    pub(super) req_headers: HeaderMap,
    /// A stale entry of `key` to validate.
    pub(super) stale: Option<Revalidation>,
    /// A slice's fill (`key` is the slice's): the origin is asked for its range, and its `206`
    /// is stored as the slice (see [`super::slices`]).
    pub(super) slice: Option<SliceFill>,
}

/// A stale cached response to validate with the origin, or to serve if the origin fails and
/// `stale-if-error` allows it.
#[derive(Clone)]
pub(super) struct Revalidation {
    pub(super) entry: Arc<StoredResponse>,
    /// Whether it is (also) on disk: a validated copy is written back there.
    pub(super) on_disk: bool,
}

/// One origin fetch: the miss's [`Job`] and whether its answer may be stored (no
/// `Authorization`, no request `no-store`).
struct Fetch {
    job: Job,
    may_store: bool,
}

/// A `GET` miss: streamed from the origin; a cacheable candidate joins (or leads) the
/// in-flight fetch of its key ([`super::flight`]).
pub(super) async fn miss(
    st: &Arc<State>,
    req: Request<ReqBody>,
    job: Job,
    rd: &freshness::RequestDirectives,
) -> Answer {
    let authorization = req.headers().contains_key(header::AUTHORIZATION);
    // One client's credentials never serve another's request through a shared fetch; the
    // answer is stored if it says it may be (see `plan_store`).
    let collapsible = !authorization && !rd.no_store && !req.headers().contains_key(header::RANGE);
    let may_store = !rd.no_store;
    let fetch = Fetch {
        job: job.clone(),
        may_store,
    };
    let mut joined = None;
    let mut req = Some(req);
    if collapsible {
        let mut m = lock(&st.flights);
        if let Some(f) = m.get(&job.key.key) {
            if let Some(sub) = f.subscribe() {
                joined = Some((f.clone(), sub));
            }
        }
        if joined.is_none() {
            let flight = Flight::new();
            // A fresh miss of a cooperating site asks the other sites first (`drive`): it is
            // marked so from the moment another site's request could find it.
            if st.sites.is_some() && job.stale.is_none() {
                flight.set_asking_sites(Some(Vec::new()));
            }
            m.insert(job.key.key.clone(), flight.clone());
            drop(m);
            let key = job.key.key.clone();
            joined = lead(st, flight, req.take(), Some(key), fetch);
        }
    } else {
        joined = lead(st, Flight::new(), req.take(), None, fetch);
    }
    let fetch_failed = || Answer {
        outcome: Outcome::MissError,
        response: FetchError::Unreachable("origin fetch failed".into()).answer(),
    };
    let Some((flight, (mut replay, mut rx))) = joined else {
        return fetch_failed();
    };
    let mut head = wait_head(&flight).await;
    if let (Ok(h), Some(r)) = (&head, &req) {
        if !h.vary.admits(r.headers()) {
            // Joined before the headers, but the answer varies on request headers whose
            // values differ from the leader's: fetch on our own, unshared.
            let own = Fetch {
                job: Job {
                    stale: None,
                    req_headers: r.headers().clone(),
                    ..job
                },
                may_store,
            };
            let Some((f, (rp, r))) = lead(st, Flight::new(), req.take(), None, own) else {
                return fetch_failed();
            };
            (replay, rx) = (rp, r);
            head = wait_head(&f).await;
        }
    }
    let head = match head {
        Ok(h) => h,
        Err(e) => {
            return Answer {
                outcome: Outcome::MissError,
                response: e.answer(),
            }
        }
    };
    // Still holding the request: it joined another's flight.
    let outcome = head.from_cache.unwrap_or(if req.is_some() {
        Outcome::MissCollapsed
    } else {
        Outcome::Miss
    });
    Answer {
        outcome,
        response: live_response(&head, replay, rx),
    }
}

/// A subscriber's response: the shared head's end-to-end headers, the body from its
/// subscription.
fn live_response(
    head: &Head,
    replay: VecDeque<Bytes>,
    rx: tokio::sync::mpsc::Receiver<super::body::Chunk>,
) -> Response<NodeBody> {
    let conn = freshness::connection_tokens(&head.headers);
    let mut headers = HeaderMap::with_capacity(head.headers.len() + 2);
    for (n, v) in &head.headers {
        if !freshness::is_hop_by_hop(n, &conn) {
            headers.append(n.clone(), v.clone());
        }
    }
    let remaining = if has_body(head.status) {
        content_length(&head.headers)
    } else {
        None
    };
    let mut r = Response::new(NodeBody::Live(LiveBody::new(replay, None, rx, remaining)));
    *r.status_mut() = head.status;
    *r.headers_mut() = headers;
    r
}

/// Subscribes the leader to a new flight and starts its origin fetch; with a stale entry, the
/// fetch is a conditional `GET` validating it.
fn lead(
    st: &Arc<State>,
    flight: Arc<Flight>,
    req: Option<Request<ReqBody>>,
    joinable_as: Option<String>,
    fetch: Fetch,
) -> Option<(Arc<Flight>, Subscription)> {
    let mut req = req?;
    if let Some((name, value)) = fetch.job.stale.as_ref().and_then(|s| s.entry.validator()) {
        req.headers_mut().insert(name, value);
    }
    if let Some(sl) = &fetch.job.slice {
        req.headers_mut().insert(header::RANGE, sl.range_header());
    }
    let sub = flight.subscribe()?;
    let d = Driver {
        flights: st.flights.clone(),
        timeout: st.upstream.timeout,
        flight: flight.clone(),
        key: joinable_as,
    };
    tokio::spawn(drive(st.clone(), d, req, fetch));
    Some((flight, sub))
}

/// The origin fetch behind a flight, in its phases: the origin's head (or a stale entry
/// answering instead), the body streamed to the subscribers, then stored when it may be.
async fn drive(st: Arc<State>, mut d: Driver, req: Request<ReqBody>, fetch: Fetch) {
    let Fetch { job, may_store } = fetch;
    // Cooperating sites: a shared fill of a fresh miss claims the object and tries the sites
    // that held or claimed it before, then the origin (see `sites.rs`).
    let mut site_fill = match (&st.sites, &d.key, &job.stale) {
        (Some(sites), Some(_), None) => Some(SiteFill {
            sites: sites.clone(),
            url: job.key.primary.clone(),
            filled: false,
        }),
        _ => None,
    };
    let from_site = match &site_fill {
        Some(f) => fetch_from_sites(&st, &f.sites, &job.key.primary, &req, &d.flight).await,
        None => None,
    };
    // The origin is next, or the answer is here: any site's request may join from now on.
    d.flight.set_asking_sites(None);
    // The purges this fill is ordered after: those this node knows of before it asks.
    let filled = st.cluster.as_ref().map_or(0, |c| c.purges.known());
    let fetched = match from_site {
        Some(answer) => Ok(answer),
        None => st.upstream.fetch_head(req).await,
    };
    // The request's own `stale-if-error` counts too (the stale copy is only ever here for a
    // request that may be answered with it); read only when the origin fails.
    let asked = || freshness::request_directives(&job.req_headers).stale_if_error;
    let (mut parts, body) = match fetched {
        Ok(r) => r,
        Err(e) => {
            let usable = |s: &Revalidation| s.entry.usable_on_error(Instant::now(), asked());
            if let Some(s) = job.stale.filter(usable) {
                serve_entry(&mut d, &s.entry, Outcome::Stale).await;
                return;
            }
            d.flight.head.send_replace(Some(Err(e)));
            return;
        }
    };
    if let Some(s) = &job.stale {
        if parts.status == StatusCode::NOT_MODIFIED {
            let e = revalidated(&st, s, &parts.headers, &job.key, may_store, filled).await;
            serve_entry(&mut d, &e, Outcome::Revalidated).await;
            return;
        }
        if parts.status.is_server_error() && s.entry.usable_on_error(Instant::now(), asked()) {
            serve_entry(&mut d, &s.entry, Outcome::Stale).await;
            return;
        }
    }
    // A slice's fill: its range as a slice of its own, the whole object, or neither.
    let slice_head = job.slice.map(|sl| slice_range::answer_head(&mut parts, sl));
    let vary = Vary::of(&parts.headers, &job.req_headers);
    let plan = match slice_head {
        // A slice is stored under its own key, never a variant's.
        Some(SliceHead::Slice) if matches!(vary, Vary::None) => {
            plan_store(&st, &job, may_store, &parts, || job.key.clone())
        }
        None | Some(SliceHead::Whole) => plan_store(&st, &job, may_store, &parts, || {
            let primary = &job.key.primary;
            CacheKey::variant(primary, st.vary.store_key(primary, &vary, &job.req_headers))
        }),
        Some(_) => None,
    };
    if plan.is_none() {
        d.seal();
        if job.stale.is_some() && !parts.status.is_server_error() {
            // The origin answered with something else that is not kept: the stale copy is
            // no longer worth validating (after a `5xx` it is kept for `stale-if-error`).
            lock(&st.hoc).remove(job.key.id);
        }
    }
    d.flight.head.send_replace(Some(Ok(Arc::new(Head {
        status: parts.status,
        headers: parts.headers.clone(),
        from_cache: None,
        vary,
    }))));
    // Cluster mode: a coded object's chunks go to their servers as the body arrives.
    let mut placer = match (&st.cluster, &plan) {
        (Some(c), Some(p)) => StripePlacer::start(&st, c, &p.key.key, p.declared),
        _ => None,
    };
    let Some((plan, last)) = stream_body(&st, &mut d, body, plan, &mut placer).await else {
        if let Some(p) = placer {
            p.abort();
        }
        return; // aborted, or abandoned by every subscriber
    };
    match plan {
        Some(plan) => {
            let held = store(&st, &d, plan, &parts, last.as_ref(), placer, filled).await;
            if held {
                // The stored copy answers new requests from here on: none joins the fill
                // between its last frame and its end (it would be a collapsed miss).
                d.unregister();
            }
            if let (true, Some(f)) = (held, site_fill.as_mut()) {
                f.filled();
            }
        }
        None => {
            if let Some(p) = placer {
                p.abort();
            }
        }
    }
    if let Some(last) = last {
        if !d.release(last, false).await {
            return;
        }
    }
    d.finish().await;
}

/// Where and for how long an answer is to be stored.
struct StorePlan {
    key: CacheKey,
    lifetime: Duration,
    /// The most the accumulated body may hold: max(HOC capacity, disk capacity).
    limit: u64,
    /// The origin's `Content-Length`, which the body must match.
    declared: Option<u64>,
    /// Body bytes received so far.
    total: u64,
}

/// Whether the origin's answer is to be stored, and under which key: storable, and not
/// declared larger than the caches; `key` is asked for only then. An answer's key is its
/// variant's (recording the URL's Vary index, [`super::vary`]; never for `Vary: *`), a
/// slice's its own.
fn plan_store(
    st: &State,
    job: &Job,
    may_store: bool,
    parts: &hyper::http::response::Parts,
    key: impl FnOnce() -> CacheKey,
) -> Option<StorePlan> {
    if !st.store_set_cookie && parts.headers.contains_key(header::SET_COOKIE) {
        return None;
    }
    let lifetime = if may_store {
        let authorization = job.req_headers.contains_key(header::AUTHORIZATION);
        freshness::storable_lifetime(authorization, parts.status, &parts.headers)?
    } else {
        return None;
    };
    let key = key();
    let limit = lock(&st.hoc)
        .capacity()
        .max(st.disk.as_ref().map_or(0, |d| d.capacity));
    let declared = content_length(&parts.headers);
    declared.is_none_or(|n| n <= limit).then_some(StorePlan {
        key,
        lifetime,
        limit,
        declared,
        total: 0,
    })
}

/// Streams the origin body to the flight's subscribers. While storing, the newest frame is
/// held back until the next one arrives (or the body is stored), so no client has the whole
/// object before the cache does; an answer that grows past the limit stops being stored.
/// Returns the plan (if still storing) and the frame held back; `None` when the origin failed
/// mid-body (every subscriber is aborted, nothing is stored) or nobody needs the fetch any
/// more.
async fn stream_body(
    st: &State,
    d: &mut Driver,
    mut body: hyper::body::Incoming,
    mut plan: Option<StorePlan>,
    placer: &mut Option<StripePlacer>,
) -> Option<(Option<StorePlan>, Option<Bytes>)> {
    let timeout = d.timeout;
    let mut pending: Option<Bytes> = None;
    let mut total = 0u64;
    loop {
        let frame = match tokio::time::timeout(timeout, body.frame()).await {
            Ok(Some(Ok(f))) => f,
            Ok(None) => break,
            Ok(Some(Err(_))) | Err(_) => {
                // The origin died or stalled mid-body: abort everyone, store nothing.
                st.metrics.origin_aborted();
                return None;
            }
        };
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        if data.is_empty() {
            continue;
        }
        total += data.len() as u64;
        if plan.as_ref().is_some_and(|p| total > p.limit) {
            plan = None;
            if let Some(p) = placer.take() {
                p.abort();
            }
            // Release the held frame before the replay buffer goes.
            if let Some(p) = pending.take() {
                if !d.release(p, true).await {
                    return None;
                }
            }
            d.seal();
        }
        let storing = plan.is_some();
        let out = if storing {
            pending.replace(data.clone())
        } else {
            Some(data.clone())
        };
        if let Some(out) = out {
            if !d.release(out, storing).await {
                return None; // not stored and nobody listening: abandon the origin fetch
            }
        }
        // Encoded after the frame before it went out: the clients never wait for the coding.
        if placer.as_mut().is_some_and(|p| !p.push(&data)) {
            if let Some(p) = placer.take() {
                p.abort();
            }
        }
    }
    let plan = plan
        .filter(|p| p.declared.is_none_or(|n| n == total))
        .map(|p| StorePlan { total, ..p });
    Some((plan, pending))
}

/// Stores a completed answer: the replay buffer plus the frame held back, offered to the HOC
/// and written to disk if it fits the ring. Returns whether the node now holds it.
async fn store(
    st: &Arc<State>,
    d: &Driver,
    plan: StorePlan,
    parts: &hyper::http::response::Parts,
    last: Option<&Bytes>,
    placer: Option<StripePlacer>,
    filled: u64,
) -> bool {
    let mut buf = d.flight.body_so_far(plan.total as usize);
    if let Some(p) = last {
        buf.extend_from_slice(p);
    }
    let e = Arc::new(StoredResponse {
        key: plan.key.key,
        status: parts.status,
        headers: freshness::headers_to_store(&parts.headers),
        body: Bytes::from(buf),
        stored_at: Instant::now(),
        age_at_store: freshness::origin_age(&parts.headers),
        lifetime: plan.lifetime,
        filled,
    });
    let in_hoc = st
        .unless_purged(&e, || {
            lock(&st.hoc).offer(plan.key.id, e.clone(), e.stored_at)
        })
        .await
        .unwrap_or(false);
    if let Some(c) = &st.cluster {
        // The object's pieces, on the bucket's servers, before the last frame is released:
        // the next request finds them. A coded object's chunks are on their way already.
        use super::cluster::c2dn::handoff;
        match placer {
            Some(p) => {
                let failed = p.finish(st, c, &e).await;
                handoff::failed_writes(st, c, &e, failed);
            }
            None => handoff::place(st, c, &e, None).await,
        }
        true
    } else if let Some(disk) = &st.disk {
        let on_disk = plan.total <= disk.capacity && disk.put(&e).await;
        in_hoc || on_disk
    } else {
        in_hoc
    }
}

/// The stale entry of `s` updated from the origin's `304` (RFC 9111 §4.3.4): headers merged
/// ([`freshness::updated_headers`]), age and lifetime from the merged headers and the `304`'s
/// `Age`. It replaces the stale copy in the HOC and, if it was there, on disk; if the merged
/// headers no longer allow storing it, it is served once and dropped from the HOC.
async fn revalidated(
    st: &State,
    s: &Revalidation,
    not_modified: &HeaderMap,
    key: &CacheKey,
    may_store: bool,
    filled: u64,
) -> Arc<StoredResponse> {
    let headers = freshness::updated_headers(&s.entry.headers, not_modified);
    let mut map = HeaderMap::with_capacity(headers.len());
    for (n, v) in &headers {
        map.append(n.clone(), v.clone());
    }
    let lifetime = freshness::storable_lifetime(false, s.entry.status, &map).filter(|_| may_store);
    let e = Arc::new(StoredResponse {
        key: key.key.clone(),
        status: s.entry.status,
        headers,
        body: s.entry.body.clone(),
        stored_at: Instant::now(),
        age_at_store: freshness::origin_age(not_modified),
        lifetime: lifetime.unwrap_or(Duration::ZERO),
        filled,
    });
    if lifetime.is_some() {
        st.unless_purged(&e, || lock(&st.hoc).offer(key.id, e.clone(), e.stored_at))
            .await;
        if let (true, Some(disk), None) = (s.on_disk, &st.disk, &st.cluster) {
            disk.put(&e).await;
        }
    } else {
        lock(&st.hoc).remove(key.id);
    }
    e
}

/// Answers a flight's subscribers from a cached response (a revalidated or stale one).
async fn serve_entry(d: &mut Driver, e: &StoredResponse, outcome: Outcome) {
    d.flight.head.send_replace(Some(Ok(Arc::new(Head {
        status: e.status,
        headers: entry_headers(e, e.body.len() as u64, Instant::now()),
        from_cache: Some(outcome),
        vary: Vary::None,
    }))));
    // As after a store: the flight leaves the map before the body goes out, so a request from
    // now on looks the caches up (where a revalidated entry was written back) instead of
    // joining the ending fetch.
    d.unregister();
    if !e.body.is_empty() && !d.release(e.body.clone(), false).await {
        return;
    }
    d.finish().await;
}

/// A fill the cooperating sites are told about (claimed in [`fetch_from_sites`]): `filled`
/// once it is stored here, else `abandoned` when it ends (dropped).
struct SiteFill {
    sites: super::sites::Sites,
    url: String,
    filled: bool,
}

impl SiteFill {
    fn filled(&mut self) {
        self.filled = true;
        self.sites.0.filled(&self.url);
    }
}

impl Drop for SiteFill {
    fn drop(&mut self) {
        if !self.filled {
            self.sites.0.abandoned(&self.url);
        }
    }
}

/// Claims `url` ([`super::sites::Referrals::claim`]) and asks the sites the claim named, nearest
/// first, with the client's request marked as a peer's ([`super::sites::PEER_HEADER`]); the
/// first `200` is the answer. Sites are asked two at a time, racing: the first two at once (the
/// nearest may be slow or gone, and waiting for it to fail would add its timeout to the fill),
/// the loser cancelled; when neither answers `200`, the next two. `None` when no site has it.
async fn fetch_from_sites(
    st: &State,
    sites: &super::sites::Sites,
    url: &str,
    req: &Request<ReqBody>,
    flight: &Flight,
) -> Option<(hyper::http::response::Parts, hyper::body::Incoming)> {
    // Every request says which site asks (see `join_in_flight`).
    let mark = hyper::header::HeaderValue::from_str(sites.0.me()).ok()?;
    let ask = |site: String| {
        let mut ask = Request::new(super::answer::empty_body());
        *ask.method_mut() = req.method().clone();
        *ask.uri_mut() = req.uri().clone();
        *ask.headers_mut() = req.headers().clone();
        ask.headers_mut()
            .insert(super::sites::PEER_HEADER, mark.clone());
        async move {
            match st.upstream.fetch_head_from(&site, ask).await {
                Ok((parts, body)) if parts.status == StatusCode::OK => Some((parts, body)),
                _ => None,
            }
        }
    };
    let named = sites.0.claim(url).await;
    flight.set_asking_sites(Some(named.clone()));
    let referred = !named.is_empty();
    let mut named = named.into_iter();
    let mut answer = None;
    while let Some(first) = named.next() {
        answer = match named.next() {
            None => ask(first).await,
            Some(second) => first_of_two(ask(first), ask(second)).await,
        };
        if answer.is_some() {
            break;
        }
    }
    match answer {
        Some(_) => st.metrics.site_fill(),
        None => st.metrics.site_origin(referred),
    }
    answer
}

/// The first of two futures to give `Some`, the other dropped; `None` when both give `None`.
async fn first_of_two<T>(
    a: impl std::future::Future<Output = Option<T>>,
    b: impl std::future::Future<Output = Option<T>>,
) -> Option<T> {
    tokio::pin!(a, b);
    let (mut a_done, mut b_done) = (false, false);
    while !(a_done && b_done) {
        tokio::select! {
            r = &mut a, if !a_done => match r {
                Some(v) => return Some(v),
                None => a_done = true,
            },
            r = &mut b, if !b_done => match r {
                Some(v) => return Some(v),
                None => b_done = true,
            },
        }
    }
    None
}

/// A request from another site that the caches could not answer: it joins a fill of its key
/// in flight here, if there is one whose answer suits it, and waits for it as long as it
/// takes; `None` otherwise (the caller answers `504`: a site never fetches for another), and
/// at once when that fill is asking the requesting site itself (see `sites.rs`).
pub(super) async fn join_in_flight(
    st: &Arc<State>,
    req: &Request<ReqBody>,
    key: &CacheKey,
) -> Option<Answer> {
    if req.headers().contains_key(header::RANGE) {
        return None;
    }
    let (flight, (replay, rx)) = {
        let m = lock(&st.flights);
        let Some(f) = m.get(&key.key) else {
            st.metrics.site_peer_refused(false);
            return None;
        };
        let from = req.headers().get(super::sites::PEER_HEADER)?.as_bytes();
        if f.asking_site(from) {
            st.metrics.site_peer_refused(true);
            return None;
        }
        (f.clone(), f.subscribe()?)
    };
    match wait_head(&flight).await {
        Ok(head) if head.vary.admits(req.headers()) => Some(Answer {
            outcome: Outcome::MissCollapsed,
            response: live_response(&head, replay, rx),
        }),
        Ok(_) => None,
        Err(e) => Some(Answer {
            outcome: Outcome::MissError,
            response: e.answer(),
        }),
    }
}
