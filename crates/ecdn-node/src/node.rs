//! `ecdn node`, first slice: an HTTP/1.1 caching reverse proxy in front of one origin, with a
//! DRAM hot-object cache (HOC) driven by an [`ecdn_policy::Cache`] (AdaptSize by default) and an
//! optional disk cache ([`ecdn_store::Store`]).
//!
//! # Requests
//!
//! * `GET` / `HEAD`: looked up in the HOC, then on disk, then fetched from the origin. Answers
//!   carry `Via: 1.1 ecdn` and `X-Cache: HIT-HOC`, `HIT-DISK` or `MISS`; hits also carry `Age`.
//!   A disk hit is offered to the HOC. A `HEAD` miss is forwarded as `HEAD` and not stored.
//! * Any other method is passed through (`X-Cache: PASS`), never stored, and removes the
//!   cached entry of its URL from the HOC and the disk (RFC 9111 §4.4; this slice invalidates
//!   whatever the status, and does not invalidate `Location` / `Content-Location` URLs).
//! * `/_ecdn/health` answers `ok`; `/_ecdn/stats` answers JSON counters (see [`Node`]).
//!
//! The cache key is Host + path + query; its 64-bit FNV-1a hash indexes the HOC, and the full
//! key is kept in the entry and compared on lookup. The disk store is keyed by the full key.
//!
//! # What is cached, and for how long
//!
//! See [`freshness`]: `200` answers to `GET` without `Authorization`, without `no-store`,
//! `private`, `no-cache`, `Vary` or `Set-Cookie`, with an explicit lifetime (`s-maxage`, else
//! `max-age`, else `Expires` − `Date`). Age = origin `Age` + time in this node (on disk too:
//! the write time is kept as UNIX seconds). A stale entry is simply refetched: conditional
//! revalidation (`If-None-Match` / `If-Modified-Since` to the origin, `stale-while-revalidate`)
//! is a later slice. `5xx` and every other non-`200` status are never stored.
//!
//! # The request's `Cache-Control` (RFC 9111 §5.2.1)
//!
//! * `no-cache` (or `Pragma: no-cache` without `Cache-Control`): the cache is not consulted;
//!   the request goes to the origin and a storable answer replaces the cached one.
//! * `max-age=N`: a cached response older than N seconds is not used (compared at sub-second
//!   precision, so `max-age=0` always goes to the origin). A HOC entry refused this way has
//!   still been counted as a hit by the HOC policy.
//! * `only-if-cached`: without a usable cached response, `504` (`X-Cache: MISS`, counted as a
//!   miss) and the origin is not contacted.
//! * `no-store`: the answer is not stored (hits are still served).
//!
//! `max-stale`, `min-fresh` and the request conditionals (`If-None-Match`, …) are not
//! evaluated on hits; on a miss every request header goes to the origin.
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
//! # Misses, errors
//!
//! This slice buffers the whole origin response before answering (one fresh origin connection
//! per miss); streaming misses, an origin connection pool and collapsed forwarding are the next
//! slice. An unreachable origin gives `502`; no complete answer within
//! [`NodeConfig::origin_timeout`] (connect + headers + body) gives `504`.
//!
//! # Storage and concurrency
//!
//! The HOC ([`hoc::Hoc`]) sits behind a `std::sync::Mutex` held only for one lookup or one
//! admission, never across an await. An object larger than the HOC is refused by the policy
//! but still written to disk if it fits. The disk [`Store`] is synchronous: every call runs in
//! `tokio::task::spawn_blocking` behind a `std::sync::Mutex`, so the disk I/O never blocks a
//! runtime worker (and the lock serializes disk access, which this slice accepts). A miss waits
//! for its disk write before answering, so the next request sees the object. Disk entries
//! carry a metadata block ([`meta`]); one that does not parse is a miss.

pub mod freshness;
pub mod hoc;
pub mod meta;

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ecdn_store::{EntryKey, Store, StoreConfig, DEFAULT_ALIGN};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

use crate::range::{self, Ranges};
use freshness::StoredResponse;
use hoc::Hoc;

/// Node settings.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// The origin, `http://host:port` (port 80 if omitted; no path).
    pub origin: String,
    /// HOC capacity in bytes.
    pub hoc_size: u64,
    /// The disk cache file (or block device); `None` for no disk cache.
    pub disk_path: Option<PathBuf>,
    /// Disk ring capacity in bytes (rounded down to a multiple of 4 KiB).
    pub disk_size: u64,
    /// HOC policy in `ecdn_policy::PolicySpec` syntax.
    pub hoc_policy: String,
    /// Limit on one origin exchange (connect, headers and body); `504` beyond it.
    pub origin_timeout: Duration,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            origin: "http://127.0.0.1:8080".into(),
            hoc_size: 64 << 20,
            disk_path: None,
            disk_size: 1 << 30,
            hoc_policy: "adaptsize".into(),
            origin_timeout: Duration::from_secs(30),
        }
    }
}

#[derive(Default)]
struct Stats {
    requests: AtomicU64,
    hoc_hits: AtomicU64,
    disk_hits: AtomicU64,
    misses: AtomicU64,
    passes: AtomicU64,
    origin_errors: AtomicU64,
    bytes_served: AtomicU64,
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

type Disk = Arc<Mutex<Store>>;

struct State {
    /// `host:port` of the origin.
    origin: String,
    timeout: Duration,
    hoc: Mutex<Hoc>,
    disk: Option<Disk>,
    stats: Stats,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave the cache half-updated in a way that matters
    // more than losing the node; keep serving.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs a synchronous store operation on the blocking pool.
async fn with_store<T: Send + 'static>(
    disk: &Disk,
    f: impl FnOnce(&mut Store) -> T + Send + 'static,
) -> Option<T> {
    let disk = disk.clone();
    tokio::task::spawn_blocking(move || f(&mut lock(&disk)))
        .await
        .ok()
}

/// `host:port` from `http://host[:port][/]`.
fn origin_authority(origin: &str) -> io::Result<String> {
    let bad = |why: &str| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("origin {origin:?}: {why}"),
        )
    };
    let rest = origin
        .strip_prefix("http://")
        .ok_or_else(|| bad("must start with http://"))?;
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.is_empty() || authority.contains('/') || authority.contains('@') {
        return Err(bad("must be http://host:port without a path"));
    }
    let has_port = match authority.rsplit_once(':') {
        Some((_, port)) => !port.contains(']'),
        None => false,
    };
    Ok(if has_port {
        authority.to_string()
    } else {
        format!("{authority}:80")
    })
}

/// 64-bit FNV-1a.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Host + path + query.
fn cache_key<B>(req: &Request<B>) -> String {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()))
        .unwrap_or("");
    let pq = req.uri().path_and_query().map_or("/", |p| p.as_str());
    format!("{}{pq}", host.to_ascii_lowercase())
}

const VIA: &str = "1.1 ecdn";
const X_CACHE: HeaderName = HeaderName::from_static("x-cache");

fn text(status: StatusCode, msg: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(format!("{msg}\n"))));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// An origin answer, buffered.
struct Fetched {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

fn has_body(status: StatusCode) -> bool {
    !(status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED)
}

/// The client's answer from an origin answer: end-to-end headers, our `Content-Length`.
fn respond(f: Fetched, head: bool, label: &'static str) -> Response<Full<Bytes>> {
    let conn = freshness::connection_tokens(&f.headers);
    let mut headers = HeaderMap::with_capacity(f.headers.len() + 3);
    for (n, v) in &f.headers {
        if !freshness::is_hop_by_hop(n, &conn) {
            headers.append(n.clone(), v.clone());
        }
    }
    if !head && has_body(f.status) {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(f.body.len()));
    }
    headers.append(header::VIA, HeaderValue::from_static(VIA));
    headers.insert(X_CACHE, HeaderValue::from_static(label));
    let mut r = Response::new(Full::new(if head { Bytes::new() } else { f.body }));
    *r.status_mut() = f.status;
    *r.headers_mut() = headers;
    r
}

/// The client's answer from a cached response.
fn replay(
    e: &StoredResponse,
    now: Instant,
    head: bool,
    label: &'static str,
) -> Response<Full<Bytes>> {
    let mut headers = HeaderMap::with_capacity(e.headers.len() + 4);
    for (n, v) in &e.headers {
        headers.append(n.clone(), v.clone());
    }
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(e.body.len()));
    headers.insert(header::AGE, HeaderValue::from(e.age(now).as_secs()));
    headers.append(header::VIA, HeaderValue::from_static(VIA));
    headers.insert(X_CACHE, HeaderValue::from_static(label));
    let mut r = Response::new(Full::new(if head { Bytes::new() } else { e.body.clone() }));
    *r.status_mut() = e.status;
    *r.headers_mut() = headers;
    r
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
    let stored = |name: &HeaderName| {
        e.headers
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.to_str().ok())
            .map(str::trim)
    };
    if v.starts_with('"') || v.starts_with("W/") {
        v.starts_with('"') && stored(&header::ETAG) == Some(v)
    } else {
        let lm = stored(&header::LAST_MODIFIED).and_then(freshness::http_date);
        lm.is_some() && freshness::http_date(v) == lm
    }
}

/// The client's answer from a cached response, honouring `Range` / `If-Range` on a `200`
/// (RFC 9110 §14): one range → `206` with `Content-Range`; several → `206`
/// `multipart/byteranges`; none satisfiable → `416` with `Content-Range: bytes */size`; an
/// ignored `Range` (see [`crate::range`]) or a failed `If-Range` → the full `200`. A `HEAD`
/// gets the same headers without the body.
fn answer_hit(
    e: &StoredResponse,
    req: &HeaderMap,
    now: Instant,
    head: bool,
    label: &'static str,
) -> Response<Full<Bytes>> {
    let size = e.body.len() as u64;
    let ranges = match req.get(header::RANGE).and_then(|v| v.to_str().ok()) {
        Some(h) if e.status == StatusCode::OK && if_range_matches(e, req) => range::parse(h, size),
        _ => Ranges::Ignore,
    };
    let mut r = replay(e, now, head, label);
    match ranges {
        Ranges::Ignore => return r,
        Ranges::Unsatisfiable => {
            *r.status_mut() = StatusCode::RANGE_NOT_SATISFIABLE;
            let h = r.headers_mut();
            h.remove(header::CONTENT_TYPE);
            h.insert(header::CONTENT_LENGTH, HeaderValue::from(0));
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{size}")) {
                h.insert(header::CONTENT_RANGE, v);
            }
            *r.body_mut() = Full::new(Bytes::new());
        }
        Ranges::Satisfiable(v) if v.len() == 1 => {
            let part = &v[0];
            *r.status_mut() = StatusCode::PARTIAL_CONTENT;
            let h = r.headers_mut();
            h.insert(
                header::CONTENT_LENGTH,
                HeaderValue::from(part.end - part.start),
            );
            if let Ok(v) = HeaderValue::from_str(&range::content_range(part, size)) {
                h.insert(header::CONTENT_RANGE, v);
            }
            if !head {
                *r.body_mut() = Full::new(e.body.slice(part.start as usize..part.end as usize));
            }
        }
        Ranges::Satisfiable(v) => {
            let boundary = format!(
                "ecdn-{:016x}",
                fnv1a(e.key.as_bytes()) ^ freshness::unix_now().rotate_left(32) ^ size
            );
            let part_type = e
                .headers
                .iter()
                .find(|(n, _)| n == header::CONTENT_TYPE)
                .and_then(|(_, v)| v.to_str().ok())
                .map(|t| format!("Content-Type: {t}\r\n"))
                .unwrap_or_default();
            let mut body = Vec::new();
            for part in &v {
                body.extend_from_slice(
                    format!(
                        "\r\n--{boundary}\r\n{part_type}Content-Range: {}\r\n\r\n",
                        range::content_range(part, size)
                    )
                    .as_bytes(),
                );
                body.extend_from_slice(&e.body[part.start as usize..part.end as usize]);
            }
            body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
            *r.status_mut() = StatusCode::PARTIAL_CONTENT;
            let h = r.headers_mut();
            h.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
            if let Ok(v) =
                HeaderValue::from_str(&format!("multipart/byteranges; boundary={boundary}"))
            {
                h.insert(header::CONTENT_TYPE, v);
            }
            if !head {
                *r.body_mut() = Full::new(Bytes::from(body));
            }
        }
    }
    r
}

enum FetchError {
    Unreachable(String),
    Timeout,
}

/// Sends `req` to the origin over a fresh connection and buffers the answer.
async fn fetch(st: &State, req: Request<Incoming>) -> Result<Fetched, FetchError> {
    let (parts, body) = req.into_parts();
    let conn = freshness::connection_tokens(&parts.headers);
    let mut headers = HeaderMap::with_capacity(parts.headers.len() + 2);
    for (n, v) in &parts.headers {
        if !freshness::is_hop_by_hop(n, &conn) {
            headers.append(n.clone(), v.clone());
        }
    }
    if !headers.contains_key(header::HOST) {
        if let Ok(v) = HeaderValue::from_str(&st.origin) {
            headers.insert(header::HOST, v);
        }
    }
    headers.append(header::VIA, HeaderValue::from_static(VIA));
    let mut out = Request::new(body);
    *out.method_mut() = parts.method;
    *out.uri_mut() = parts.uri.path_and_query().map_or_else(
        || hyper::Uri::from_static("/"),
        |pq| pq.as_str().parse().unwrap_or_default(),
    );
    *out.headers_mut() = headers;

    let exchange = async {
        let unreachable = |e: &dyn std::fmt::Display| FetchError::Unreachable(e.to_string());
        let stream = TcpStream::connect(&st.origin)
            .await
            .map_err(|e| unreachable(&e))?;
        let _ = stream.set_nodelay(true);
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| unreachable(&e))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let resp = send.send_request(out).await.map_err(|e| unreachable(&e))?;
        let (p, body) = resp.into_parts();
        let body = body
            .collect()
            .await
            .map_err(|e| unreachable(&e))?
            .to_bytes();
        Ok(Fetched {
            status: p.status,
            headers: p.headers,
            body,
        })
    };
    match tokio::time::timeout(st.timeout, exchange).await {
        Ok(r) => r,
        Err(_) => Err(FetchError::Timeout),
    }
}

fn fetch_error(st: &State, e: FetchError) -> Response<Full<Bytes>> {
    bump(&st.stats.origin_errors, 1);
    let mut r = match e {
        FetchError::Unreachable(why) => text(
            StatusCode::BAD_GATEWAY,
            &format!("origin unreachable: {why}"),
        ),
        FetchError::Timeout => text(StatusCode::GATEWAY_TIMEOUT, "origin timed out"),
    };
    r.headers_mut()
        .append(header::VIA, HeaderValue::from_static(VIA));
    r.headers_mut()
        .insert(X_CACHE, HeaderValue::from_static("MISS"));
    r
}

/// Reads `key` from disk; `None` for absent, unreadable or corrupt entries.
async fn disk_get(disk: &Disk, key: String) -> Option<StoredResponse> {
    let entry_key = EntryKey::object(key.as_bytes());
    let entry = with_store(disk, move |s| s.get(&entry_key)).await?.ok()??;
    // Only 200s are written; anything else is as corrupt as an unparsable block.
    let m = meta::decode(&entry.meta).filter(|m| m.status == StatusCode::OK)?;
    let on_disk = freshness::unix_now().saturating_sub(m.stored_at_unix);
    Some(StoredResponse {
        key,
        status: m.status,
        headers: m.headers,
        body: Bytes::from(entry.payload),
        stored_at: Instant::now(),
        age_at_store: Duration::from_secs(m.age_at_store_secs.saturating_add(on_disk)),
        lifetime: Duration::from_secs(m.lifetime_secs),
    })
}

/// Writes a response to disk; a failure (e.g. larger than the ring) just leaves it uncached.
async fn disk_put(disk: &Disk, e: &StoredResponse) {
    let m = meta::encode(&meta::DiskMeta {
        status: e.status,
        lifetime_secs: e.lifetime.as_secs(),
        stored_at_unix: freshness::unix_now(),
        age_at_store_secs: e.age_at_store.as_secs(),
        headers: e.headers.clone(),
    });
    let key = EntryKey::object(e.key.as_bytes());
    let body = e.body.clone();
    let _ = with_store(disk, move |s| s.put(&key, &m, &body)).await;
}

/// `GET` / `HEAD`: HOC, disk, origin, as the request's `Cache-Control` allows.
async fn cached(st: &State, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let head = req.method() == Method::HEAD;
    let key = cache_key(&req);
    let id = fnv1a(key.as_bytes());
    let rd = freshness::request_directives(req.headers());
    if !rd.no_cache {
        let now = Instant::now();
        let hit = lock(&st.hoc).lookup(id, &key, now);
        if let Some(e) = hit.filter(|e| rd.accepts(e, now)) {
            bump(&st.stats.hoc_hits, 1);
            return answer_hit(&e, req.headers(), now, head, "HIT-HOC");
        }
        if let Some(disk) = &st.disk {
            if let Some(e) = disk_get(disk, key.clone()).await {
                let now = Instant::now();
                if e.is_fresh(now) && rd.accepts(&e, now) {
                    bump(&st.stats.disk_hits, 1);
                    let e = Arc::new(e);
                    lock(&st.hoc).offer(id, e.clone(), now);
                    return answer_hit(&e, req.headers(), now, head, "HIT-DISK");
                }
            }
        }
    }
    if rd.only_if_cached {
        bump(&st.stats.misses, 1);
        let mut r = text(
            StatusCode::GATEWAY_TIMEOUT,
            "only-if-cached: no usable cached response",
        );
        r.headers_mut()
            .append(header::VIA, HeaderValue::from_static(VIA));
        r.headers_mut()
            .insert(X_CACHE, HeaderValue::from_static("MISS"));
        return r;
    }
    bump(&st.stats.misses, 1);
    let authorization = req.headers().contains_key(header::AUTHORIZATION);
    let f = match fetch(st, req).await {
        Ok(f) => f,
        Err(e) => return fetch_error(st, e),
    };
    if !head && !rd.no_store {
        if let Some(lifetime) = freshness::storable_lifetime(authorization, f.status, &f.headers) {
            let e = Arc::new(StoredResponse {
                key,
                status: f.status,
                headers: freshness::headers_to_store(&f.headers),
                body: f.body.clone(),
                stored_at: Instant::now(),
                age_at_store: freshness::origin_age(&f.headers),
                lifetime,
            });
            lock(&st.hoc).offer(id, e.clone(), e.stored_at);
            if let Some(disk) = &st.disk {
                disk_put(disk, &e).await;
            }
        }
    }
    respond(f, head, "MISS")
}

/// Other methods: pass through, then invalidate the URL.
async fn pass(st: &State, req: Request<Incoming>) -> Response<Full<Bytes>> {
    bump(&st.stats.passes, 1);
    let key = cache_key(&req);
    let r = fetch(st, req).await;
    lock(&st.hoc).remove(fnv1a(key.as_bytes()));
    if let Some(disk) = &st.disk {
        let _ = with_store(disk, move |s| s.remove(&EntryKey::object(key.as_bytes()))).await;
    }
    match r {
        Ok(f) => respond(f, false, "PASS"),
        Err(e) => fetch_error(st, e),
    }
}

async fn stats_json(st: &State) -> Response<Full<Bytes>> {
    let c = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let s = &st.stats;
    let hoc = {
        let h = lock(&st.hoc);
        serde_json::json!({
            "policy": h.policy(),
            "used": h.used(),
            "capacity": h.capacity(),
            "objects": h.objects(),
            "c": h.parameter(),
        })
    };
    let disk = match &st.disk {
        Some(d) => with_store(d, |s| {
            serde_json::json!({
                "used": s.used(),
                "live_bytes": s.live_bytes(),
                "capacity": s.capacity(),
                "objects": s.len(),
            })
        })
        .await
        .unwrap_or(serde_json::Value::Null),
        None => serde_json::Value::Null,
    };
    let body = serde_json::json!({
        "requests": c(&s.requests),
        "hoc_hits": c(&s.hoc_hits),
        "disk_hits": c(&s.disk_hits),
        "misses": c(&s.misses),
        "passes": c(&s.passes),
        "origin_errors": c(&s.origin_errors),
        "bytes_served": c(&s.bytes_served),
        "hoc": hoc,
        "disk": disk,
    });
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

async fn handle(st: Arc<State>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    match req.uri().path() {
        "/_ecdn/health" => return text(StatusCode::OK, "ok"),
        "/_ecdn/stats" => return stats_json(&st).await,
        _ => {}
    }
    bump(&st.stats.requests, 1);
    let r = if req.method() == Method::GET || req.method() == Method::HEAD {
        cached(&st, req).await
    } else {
        pass(&st, req).await
    };
    bump(
        &st.stats.bytes_served,
        hyper::body::Body::size_hint(r.body()).exact().unwrap_or(0),
    );
    r
}

/// The node: see the module documentation. `/_ecdn/stats` reports `requests` (proxied, not
/// counting `/_ecdn/`), `hoc_hits`, `disk_hits`, `misses`, `passes` (other methods),
/// `origin_errors` (502 / 504), `bytes_served` (response bodies), `hoc` (`policy`, `used`,
/// `capacity`, `objects`, `c`: AdaptSize's size parameter, `null` while it admits everything
/// or for policies without one) and `disk` (`null` without a disk).
pub struct Node;

impl Node {
    /// Opens the caches, binds `listen` (port 0 for any free port) and serves on the current
    /// Tokio runtime.
    pub async fn start(listen: SocketAddr, cfg: NodeConfig) -> io::Result<RunningNode> {
        let origin = origin_authority(&cfg.origin)?;
        let invalid = |e: String| io::Error::new(io::ErrorKind::InvalidInput, e);
        let spec = ecdn_policy::PolicySpec::parse(&cfg.hoc_policy).map_err(invalid)?;
        let hoc = Hoc::new(spec.build(cfg.hoc_size.max(1), 0x5eed_ecd0));
        let disk = match cfg.disk_path.clone() {
            Some(path) => {
                let align = u64::from(DEFAULT_ALIGN);
                let capacity = cfg.disk_size / align * align;
                if capacity == 0 {
                    return Err(invalid(format!(
                        "disk size {} is below 4 KiB",
                        cfg.disk_size
                    )));
                }
                let store = tokio::task::spawn_blocking(move || {
                    Store::open(StoreConfig::new(path, capacity))
                })
                .await
                .map_err(io::Error::other)?
                .map_err(io::Error::other)?;
                Some(Arc::new(Mutex::new(store)))
            }
            None => None,
        };
        let state = Arc::new(State {
            origin,
            timeout: cfg.origin_timeout,
            hoc: Mutex::new(hoc),
            disk,
            stats: Stats::default(),
        });
        let listener = TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(serve(listener, state, rx));
        Ok(RunningNode {
            addr,
            stop: Some(tx),
            task,
        })
    }
}

async fn serve(
    listener: TcpListener,
    st: Arc<State>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    loop {
        let stream = tokio::select! {
            _ = &mut stop => return,
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                // Out of file descriptors and the like: back off instead of spinning.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let st = st.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let st = st.clone();
                async move { Ok::<_, Infallible>(handle(st, req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

/// A running node: its address and a handle that stops it.
pub struct RunningNode {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl RunningNode {
    /// Stops accepting connections and waits for the accept loop to end (connections already
    /// open finish their current exchange).
    pub async fn stop(mut self) -> io::Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        (&mut self.task).await.map_err(io::Error::other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_and_keys() {
        assert_eq!(
            origin_authority("http://127.0.0.1:81").unwrap(),
            "127.0.0.1:81"
        );
        assert_eq!(
            origin_authority("http://example.com/").unwrap(),
            "example.com:80"
        );
        assert_eq!(origin_authority("http://[::1]").unwrap(), "[::1]:80");
        assert_eq!(origin_authority("http://[::1]:9").unwrap(), "[::1]:9");
        assert!(origin_authority("https://example.com").is_err());
        assert!(origin_authority("http://example.com/x").is_err());
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        let req = Request::builder()
            .uri("/obj/1?size=10")
            .header("host", "Example.com")
            .body(())
            .unwrap();
        assert_eq!(cache_key(&req), "example.com/obj/1?size=10");
    }
}
