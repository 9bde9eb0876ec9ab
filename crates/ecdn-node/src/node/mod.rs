//! `ecdn node`: an HTTP/1.1 caching reverse proxy in front of origins chosen by Host, with a
//! DRAM hot-object cache (HOC) driven by an [`ecdn_policy::Cache`] (AdaptSize by default) and an
//! optional disk cache ([`ecdn_store::Store`]).
//!
//! # Requests
//!
//! * The origin is the route of the request's Host ([`NodeConfig::routes`], matched without
//!   port and case), else the default origin; with neither, `421 Misdirected Request`. The
//!   cache key starts with the Host, so hosts never share entries.
//! * `GET` / `HEAD`: looked up in the HOC, then on disk, then fetched from the origin. Answers
//!   carry `Via: 1.1 ecdn` and `X-Cache: HIT-HOC`, `HIT-DISK`, `MISS` or `MISS-COLLAPSED` (a
//!   miss that joined another request's origin fetch, see below), `REVALIDATED` or `STALE`
//!   (see *Stale entries* below); hits also carry `Age`.
//!   A disk hit is offered to the HOC: if admitted, it is read whole into memory; otherwise
//!   its body (or the requested ranges) streams from the disk in 1 MiB batches, each block
//!   verified before it is sent. A `HEAD` miss is forwarded as `HEAD` and not stored.
//! * Any other method is passed through (`X-Cache: PASS`), never stored, and removes the
//!   cached entry of its URL from the HOC and the disk (RFC 9111 §4.4; this slice invalidates
//!   whatever the status, and does not invalidate `Location` / `Content-Location` URLs).
//! * `/_ecdn/health` answers `ok`; `/_ecdn/stats` answers JSON counters (see [`Node`]).
//!   `/_ecdn/` paths are never proxied.
//!
//! # Operations
//!
//! * Shutdown ([`RunningNode::stop`]; `ecdn node` on SIGTERM or Ctrl-C): stop accepting, close
//!   idle keep-alive connections, let busy ones finish their response (at most
//!   [`NodeConfig::drain_timeout`]), then sync the disk cache.
//! * `GET /_ecdn/metrics`: Prometheus text exposition (format 0.0.4), under `/_ecdn/` so it
//!   cannot shadow an origin path `/metrics`. Counters `ecdn_requests_total`,
//!   `ecdn_responses_total{tier}` (`hoc`, `disk`, `miss`, `collapsed`, `pass`, `error` — our own
//!   `502` / `504`, `revalidated`, `stale`), `ecdn_bytes_served_total`; gauges `ecdn_hoc_used_bytes`,
//!   `ecdn_hoc_capacity_bytes`, `ecdn_disk_used_bytes`, `ecdn_disk_capacity_bytes` (0 without
//!   a disk), `ecdn_adaptsize_c_bytes` (the admission policy's c, `+Inf` while AdaptSize
//!   admits everything; absent for a policy without one); histogram
//!   `ecdn_request_duration_seconds{tier}` with buckets 0.5 ms … 10 s. Latency runs from the
//!   request's arrival to its response headers: a streamed miss is timed to the origin's
//!   headers, not to the end of the body. Written by hand from atomics (see [`ops`]), no
//!   global recorder. Requests refused by request sanitizing (400, 414), `/_ecdn/` and `PURGE` are not counted.
//! * `PURGE <path>` (same cache key as a `GET`: Host + path + query) removes the entry from
//!   the HOC and the disk and answers `200` `{"purged": true|false}` (whether anything was
//!   held). It needs `Authorization: Bearer <token>` equal to [`NodeConfig::purge_token`]
//!   (compared in constant time), else `401`; without a configured token purging is disabled
//!   (`403`). It is never forwarded to the origin.
//! * [`NodeConfig::access_log`]: one JSON line per proxied request on stderr (`ts_unix_ms`,
//!   `method`, `path`, `status`, `tier`, `bytes` — `null` when the body length is not known at the headers, `duration_ms`
//!   to the response headers, `remote`).
//!
//! The cache key is Host + path + query (the *primary* key; for answers with `Vary`, see
//! *Vary* below); its 64-bit FNV-1a hash indexes the HOC, and the full key is kept in the entry
//! and compared on lookup. The disk store is keyed by the full key.
//!
//! # Vary (RFC 9111 §4.1)
//!
//! A storable answer with `Vary` (any list but `*`, which is never stored) is stored under a
//! *variant* key: primary key, `\n#`, a generation number, then for each Vary-named header
//! (names lower-cased, sorted, deduplicated) `\n<name>=<the request's values>`, values
//! trimmed with whitespace runs collapsed to one space and several fields joined with `,`
//! ([`freshness::vary_suffix`]). A lookup must know the names before it can compose that key,
//! so storing such an answer also records them in the *Vary index*, an in-memory side table
//! primary key → (names, generation); every `GET` / `HEAD` first consults it and looks up (and
//! collapses into flights) under the variant key. A request whose values differ misses and
//! stores another variant. A storable answer without `Vary` removes the URL's index entry
//! (it is stored under the primary key again); a changed name list gets a new generation.
//! Invalidation (`PURGE`, other methods) removes the index entry, so the next answer gets a
//! new generation and the old variants are never found again (they age out of the HOC and the
//! disk ring). The index holds at most 100,000 URLs and is cleared beyond it. It is not
//! persisted: after a restart a varying URL misses once, and the re-learned entry gets a new
//! generation (the counter starts from the clock), so variants written to disk by an earlier
//! run are never served again — a known cost, traded for never reviving purged variants.
//!
//! Before the index knows a URL, concurrent misses of it collapse under the primary key; when
//! the answer turns out to vary, a request that joined with different values for the named
//! headers (or any request, for `Vary: *`) leaves the flight and fetches on its own
//! (`X-Cache: MISS`).
//!
//! # Hostile clients
//!
//! * Limits ([`NodeConfig`]): request head size (`max_header_bytes`, `431`), header count
//!   (`max_headers`, `431`), request-target length (`max_uri_len`, `414`), concurrent
//!   connections (`max_connections`; extra ones are accepted and closed at once), and the time
//!   to send a request head (`header_read_timeout`, also the keep-alive idle timeout; the
//!   connection is closed). The first three and the timeout are hyper's own (`max_buf_size`,
//!   `max_headers`, `header_read_timeout`); a `431` or a timeout closes the connection.
//! * Request smuggling: hyper refuses a request with both `Content-Length` and
//!   `Transfer-Encoding`, several differing `Content-Length`s, or a `Transfer-Encoding` not
//!   ending in `chunked`, with `400`, and closes the connection. Hop-by-hop headers (including
//!   `Transfer-Encoding`, `TE`, `Upgrade`, those named in `Connection`) and the client's
//!   `Content-Length` are never forwarded to the origin: hyper frames the origin request from
//!   the decoded body.
//! * The path is normalised before routing, for the cache key and the origin request alike
//!   (dot segments, percent-escapes of unreserved characters, upper-case escapes); a path
//!   climbing above the root or with an escaped control character is a `400`. Exactly what is
//!   normalised is in [`normalize`]. A `400` / `414` of ours closes the connection.
//! * A client that disconnects mid-transfer never leaves a partial object cached (see
//!   *Collapsed forwarding* below).
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
//! `Last-Modified` (neither: an ordinary `GET`). The fetch is an ordinary flight (see
//! *Collapsed forwarding*), so concurrent requests share the validation.
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
//! is forwarded as `HEAD`.
//!
//! Served stale at once, without waiting for the origin (`X-Cache: STALE`), unless the entry
//! has `must-revalidate`, `proxy-revalidate` or `s-maxage`:
//! * `stale-while-revalidate=N` in the entry and age below lifetime + N, for a request without
//!   `no-cache`, `max-age` or `min-fresh`: a background conditional `GET` (a flight of its own,
//!   joined by concurrent ones, so one origin request per burst) validates or replaces the
//!   entry for the next requests.
//! * the request's `max-stale[=N]` (stale by at most N seconds, any without N), within its
//!   `max-age`. The request's `stale-if-error` is not implemented.
//!
//! # The request's `Cache-Control` (RFC 9111 §5.2.1)
//!
//! * `no-cache` (or `Pragma: no-cache` without `Cache-Control`): the cache is not consulted;
//!   the request goes to the origin and a storable answer replaces the cached one.
//! * `min-fresh=N`: a cached response fresh for less than N more seconds is not used.
//! * `max-stale[=N]`: see *Stale entries*.
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
//! [`NodeConfig::origin_timeout`] (connect + headers) gives `504`. Once headers are sent,
//! errors can only abort: an origin that dies mid-body, or sends no frame for the origin
//! timeout, aborts every client response of that fetch (connection closed, the client sees a
//! short body) and nothing is stored. A client that does not take a frame within the origin
//! timeout is dropped (its response aborted) so it cannot stall the others.
//!
//! # Collapsed forwarding
//!
//! Concurrent misses of one cache key share one origin fetch. Candidates are `GET`s without
//! `Range`, `Authorization` or request `no-store` (the others get their own, unshared fetch,
//! still streamed, and stored when storable as before); a request `no-cache` may join, since
//! the answer it gets comes from the origin now in any case. The
//! first candidate creates an in-flight entry (the *flight*) and spawns the origin fetch as
//! its own task (`X-Cache: MISS`); a candidate arriving while it runs subscribes
//! (`X-Cache: MISS-COLLAPSED`, counted in `misses` and in `collapsed`): it waits for the
//! shared headers (a `watch` channel), gets the frames received so far, then the live ones
//! through a bounded channel. Every subscriber, the leader included, reads the same way, and
//! the leader's client is not special. The flight accepts new subscribers only while it
//! keeps every byte: it leaves the key as soon as the answer turns out not storable (at the
//! headers) or too large, then later misses start their own fetch.
//!
//! * A not-storable answer (`no-store`, `private`, no lifetime, non-`200`…) is still given to
//!   the subscribers that joined before its headers: they asked at the same time, and this is
//!   one exchange (a deliberate relaxation of RFC 9111 §4, which only lets a cache reuse a
//!   storable response). Requests arriving after the headers are not collapsed into it.
//! * A client that disconnects mid-transfer only unsubscribes. If the answer is being stored
//!   the fetch runs to completion and fills the cache for the next requests; otherwise, once
//!   no subscriber is left, the fetch is abandoned (origin connection dropped). Either way
//!   nothing partial is ever stored.
//! * A failed fetch gives every subscriber the same `502` / `504`, or the same abort.
//!
//! The fetch is paced by its slowest subscriber (bounded per-subscriber queues), within the
//! per-frame timeout above.

//! # Storage and concurrency
//!
//! The HOC ([`hoc::Hoc`]) sits behind a `std::sync::Mutex` held only for one lookup or one
//! admission, never across an await. An object larger than the HOC is refused by the policy
//! but still written to disk if it fits. The disk [`Store`] is synchronous: every call runs in
//! `tokio::task::spawn_blocking` behind a `std::sync::RwLock`, so the disk I/O never blocks a
//! runtime worker; reads run concurrently under the read lock, writes and removals take the
//! write lock. A disk hit's body is mapped on the blocking pool (pages populated there) and
//! verified on the worker as it is sent, so the checksum pass and the socket's copy read the
//! same cached bytes; see [`ecdn_store::MappedPayload`] for why a mapping stays correct after
//! the ring overwrites its bytes. A stored
//! miss finishes its disk write before its clients get the last frame, so the next request
//! sees the object. The in-flight map is another `std::sync::Mutex`, never held across an
//! await nor together with a flight's own lock except map → flight. Disk entries
//! carry a metadata block ([`meta`]); one that does not parse is a miss.

pub mod freshness;
pub mod hoc;
pub mod meta;
pub mod normalize;
pub mod ops;

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ecdn_store::{
    BadBlock, BlockVerifier, EntryHandle, EntryKey, MappedBlocks, Opened, SharedPayload, Store,
    StoreConfig, DEFAULT_ALIGN,
};
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Semaphore};

use crate::range::{self, Ranges};
use freshness::StoredResponse;
use hoc::{Found, Hoc};
use ops::{Metrics, Tier};

/// A request body on its way to the origin: a client's, or none for a request of our own
/// (a background revalidation).
type ReqBody = http_body_util::combinators::BoxBody<Bytes, hyper::Error>;

/// Node settings.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// The default origin, `http://host:port` (port 80 if omitted; no path), for requests
    /// whose Host has no route; empty for none (such requests then get `421 Misdirected
    /// Request`).
    pub origin: String,
    /// Origins chosen by the request's Host: (host name, `http://host:port`). The host name is
    /// matched case-insensitively, without the port.
    pub routes: Vec<(String, String)>,
    /// HOC capacity in bytes.
    pub hoc_size: u64,
    /// The disk cache file (or block device); `None` for no disk cache.
    pub disk_path: Option<PathBuf>,
    /// Disk ring capacity in bytes (rounded down to a multiple of 4 KiB).
    pub disk_size: u64,
    /// HOC policy in `ecdn_policy::PolicySpec` syntax.
    pub hoc_policy: String,
    /// Limit on the origin's response headers (connect included; `504` beyond it), and on the
    /// wait for each body frame (the response is aborted beyond it). A buffered exchange (`HEAD`
    /// miss, other methods) must complete within it.
    pub origin_timeout: Duration,
    /// Limit on a request head (request line + headers), in bytes; beyond it the client gets
    /// `431 Request Header Fields Too Large` and the connection is closed. This is hyper's
    /// `max_buf_size`, so it also caps the per-connection read and write buffers (raised to
    /// hyper's minimum of 8 KiB if lower). Default 64 KiB.
    pub max_header_bytes: usize,
    /// Limit on the number of request header fields; beyond it `431` and the connection is
    /// closed. Default 100.
    pub max_headers: usize,
    /// Limit on the request target (authority + path + query), in bytes; beyond it `414 URI
    /// Too Long`. Only effective below `max_header_bytes` (a longer request line is a `431`).
    /// Default 8 KiB.
    pub max_uri_len: usize,
    /// Limit on concurrent client connections. Beyond it a new connection is accepted and
    /// closed at once, without a response (the client sees EOF or a reset), rather than left
    /// waiting in the listen backlog. Default 10,000.
    pub max_connections: usize,
    /// Limit on the wait for a complete request head (slowloris defence): a client that has
    /// not sent a whole request head within it is disconnected, without a response. The
    /// clock starts whenever the connection waits for a request, i.e. when it opens and again
    /// after each response, so this is also the idle timeout of a keep-alive connection
    /// between requests (hyper has no separate idle timer). Request *bodies* are not covered;
    /// a slow body is paced by the exchange it belongs to. Default 10 s.
    pub header_read_timeout: Duration,
    /// The bearer token that authorises `PURGE` requests; `None` (the default) disables purging
    /// (`403`).
    pub purge_token: Option<String>,
    /// Whether to write one JSON line per proxied request to stderr. Default `false`.
    pub access_log: bool,
    /// On [`RunningNode::stop`]: how long open connections may take to finish the exchange
    /// in progress (idle keep-alive connections close at once, busy ones after their current
    /// response) before they are cut. Default 30 s.
    pub drain_timeout: Duration,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            origin: "http://127.0.0.1:8080".into(),
            routes: Vec::new(),
            hoc_size: 64 << 20,
            disk_path: None,
            disk_size: 1 << 30,
            hoc_policy: "adaptsize".into(),
            origin_timeout: Duration::from_secs(30),
            max_header_bytes: 64 << 10,
            max_headers: 100,
            max_uri_len: 8 << 10,
            max_connections: 10_000,
            header_read_timeout: Duration::from_secs(10),
            purge_token: None,
            access_log: false,
            drain_timeout: Duration::from_secs(30),
        }
    }
}

#[derive(Default)]
struct Stats {
    requests: AtomicU64,
    hoc_hits: AtomicU64,
    disk_hits: AtomicU64,
    misses: AtomicU64,
    collapsed: AtomicU64,
    passes: AtomicU64,
    origin_errors: AtomicU64,
    revalidated: AtomicU64,
    stale: AtomicU64,
    bytes_served: AtomicU64,
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

type Disk = Arc<RwLock<Store>>;

struct State {
    /// Which origin serves which Host.
    origins: Origins,
    timeout: Duration,
    hoc: Mutex<Hoc>,
    disk: Option<Disk>,
    /// Disk ring capacity in bytes (0 without a disk).
    disk_capacity: u64,
    /// Origin fetches that concurrent misses of the same key may join, by cache key.
    flights: Mutex<HashMap<String, Arc<Flight>>>,
    /// The Vary index, see [`VaryIndex`].
    vary: Mutex<VaryIndex>,
    stats: Stats,
    metrics: Metrics,
    max_uri_len: usize,
    purge_token: Option<String>,
    access_log: bool,
}

/// The origins: one per configured Host, and a default for other hosts.
struct Origins {
    /// Lower-cased host name (without port) → `host:port` of its origin.
    by_host: HashMap<String, String>,
    /// `host:port` of the origin of every other host, if any.
    default: Option<String>,
}

impl Origins {
    fn new(cfg: &NodeConfig) -> io::Result<Origins> {
        let default = match cfg.origin.trim() {
            "" => None,
            o => Some(origin_authority(o)?),
        };
        let mut by_host = HashMap::new();
        for (host, origin) in &cfg.routes {
            let name = host_name(host);
            if name.is_empty() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("route {host:?}: empty host name"),
                ));
            }
            by_host.insert(name, origin_authority(origin)?);
        }
        if default.is_none() && by_host.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no origin: give a default origin or at least one route",
            ));
        }
        Ok(Origins { by_host, default })
    }

    /// The origin (`host:port`) for a request's Host, if one is configured.
    fn for_request<B>(&self, req: &Request<B>) -> Option<&str> {
        self.by_host
            .get(&host_name(request_host(req)))
            .or(self.default.as_ref())
            .map(String::as_str)
    }
}

/// A request's Host: the `Host` header, else the target's authority.
fn request_host<B>(req: &Request<B>) -> &str {
    req.headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()))
        .unwrap_or("")
}

/// A Host value's name: lower-cased, without the port (IPv6 literals keep their brackets).
fn host_name(host: &str) -> String {
    let host = host.trim();
    let name = match host.rfind(':') {
        Some(i) if !host[i..].contains(']') => &host[..i],
        _ => host,
    };
    name.to_ascii_lowercase()
}

/// URLs whose stored responses carry `Vary` (see the module documentation, *Vary*).
struct VaryIndex {
    /// Primary key → (the sorted, lower-cased header names, generation).
    urls: HashMap<String, (Vec<String>, u64)>,
    /// The next generation: started from the clock so that keys of an earlier run (still on
    /// disk) are not reused by a later index entry of another generation.
    next: u64,
}

/// Entries kept in the Vary index; beyond it the index is cleared (the variants become
/// unreachable misses).
const VARY_INDEX_MAX: usize = 100_000;

impl VaryIndex {
    fn new() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        VaryIndex {
            urls: HashMap::new(),
            next: nanos,
        }
    }
}

/// The key of one variant: the primary key, the generation and [`freshness::vary_suffix`]
/// (a newline cannot occur in the primary key).
fn variant_key(primary: &str, names: &[String], generation: u64, req: &HeaderMap) -> String {
    format!(
        "{primary}\n#{generation:x}{}",
        freshness::vary_suffix(names, req)
    )
}

impl State {
    /// The key to look `primary` up under for a request: the variant key when the URL's
    /// answers vary, else `primary`.
    fn lookup_key(&self, primary: &str, req: &HeaderMap) -> String {
        match lock(&self.vary).urls.get(primary) {
            Some((names, generation)) => variant_key(primary, names, *generation, req),
            None => primary.to_string(),
        }
    }

    /// Records a storable answer's Vary header names for `primary` (`None`: it does not vary,
    /// the entry is dropped) and returns the key to store it under. An unchanged name list
    /// keeps its generation; a new or changed one gets a fresh generation.
    fn learn_vary(&self, primary: &str, names: Option<&Vec<String>>, req: &HeaderMap) -> String {
        let mut v = lock(&self.vary);
        let Some(names) = names else {
            v.urls.remove(primary);
            return primary.to_string();
        };
        if let Some((known, generation)) = v.urls.get(primary) {
            if known == names {
                return variant_key(primary, names, *generation, req);
            }
        }
        if v.urls.len() >= VARY_INDEX_MAX {
            v.urls.clear();
        }
        let generation = v.next;
        v.next = v.next.wrapping_add(1);
        v.urls
            .insert(primary.to_string(), (names.clone(), generation));
        variant_key(primary, names, generation, req)
    }

    /// Invalidation: forgets the URL's variants (a later answer gets a fresh generation, so
    /// the old variants are never found again). Whether it had any.
    fn forget_vary(&self, primary: &str) -> bool {
        lock(&self.vary).urls.remove(primary).is_some()
    }
}

/// Marks a response as one of our own `502` / `504` (tier `error` in the metrics).
#[derive(Clone, Copy)]
struct OriginFailure;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave the cache half-updated in a way that matters
    // more than losing the node; keep serving.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs a synchronous store operation that changes the store on the blocking pool.
async fn with_store<T: Send + 'static>(
    disk: &Disk,
    f: impl FnOnce(&mut Store) -> T + Send + 'static,
) -> Option<T> {
    let disk = disk.clone();
    tokio::task::spawn_blocking(move || f(&mut disk.write().unwrap_or_else(|e| e.into_inner())))
        .await
        .ok()
}

/// Runs a synchronous read of the store on the blocking pool; reads run concurrently.
async fn read_store<T: Send + 'static>(
    disk: &Disk,
    f: impl FnOnce(&Store) -> T + Send + 'static,
) -> Option<T> {
    let disk = disk.clone();
    tokio::task::spawn_blocking(move || f(&disk.read().unwrap_or_else(|e| e.into_inner())))
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
    let host = request_host(req);
    let pq = req.uri().path_and_query().map_or("/", |p| p.as_str());
    format!("{}{pq}", host.to_ascii_lowercase())
}

const VIA: &str = "1.1 ecdn";
/// hyper's smallest accepted `max_buf_size`.
const MIN_HEADER_BYTES: usize = 8192;
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

/// A cached response's headers as replayed: the stored ones, `Content-Length` (of a body of
/// `size` bytes) and `Age`.
fn entry_headers(e: &StoredResponse, size: u64, now: Instant) -> HeaderMap {
    let mut headers = HeaderMap::with_capacity(e.headers.len() + 4);
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

/// What a hit's body is made of, in order: byte ranges of the stored body, and literal text
/// (the framing of a `multipart/byteranges` answer). The body may be in memory or streamed
/// from the disk (and, in the cluster, assembled from chunks).
#[derive(Debug)]
enum Piece {
    Body(std::ops::Range<u64>),
    Text(Bytes),
}

/// The client's answer to a hit on a cached response whose body has `size` bytes: status and
/// headers, and the pieces of its body. Honours `Range` / `If-Range` on a `200` (RFC 9110
/// §14): one range → `206` with `Content-Range`; several → `206` `multipart/byteranges`; none
/// satisfiable → `416` with `Content-Range: bytes */size`; an ignored `Range` (see
/// [`crate::range`]) or a failed `If-Range` → the full `200`. A `HEAD` gets the same headers
/// and no pieces.
fn plan_hit(
    e: &StoredResponse,
    size: u64,
    req: &HeaderMap,
    now: Instant,
    head: bool,
    label: &'static str,
) -> (Response<()>, Vec<Piece>) {
    let ranges = match req.get(header::RANGE).and_then(|v| v.to_str().ok()) {
        Some(h) if e.status == StatusCode::OK && if_range_matches(e, req) => range::parse(h, size),
        _ => Ranges::Ignore,
    };
    let mut r = Response::new(());
    *r.status_mut() = e.status;
    *r.headers_mut() = entry_headers(e, size, now);
    r.headers_mut()
        .append(header::VIA, HeaderValue::from_static(VIA));
    r.headers_mut()
        .insert(X_CACHE, HeaderValue::from_static(label));
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
            let mut pieces = Vec::with_capacity(2 * v.len() + 1);
            for part in v {
                let text = format!(
                    "\r\n--{boundary}\r\n{part_type}Content-Range: {}\r\n\r\n",
                    range::content_range(&part, size)
                );
                pieces.push(Piece::Text(Bytes::from(text)));
                pieces.push(Piece::Body(part));
            }
            pieces.push(Piece::Text(Bytes::from(format!("\r\n--{boundary}--\r\n"))));
            let len: u64 = pieces
                .iter()
                .map(|p| match p {
                    Piece::Body(r) => r.end - r.start,
                    Piece::Text(t) => t.len() as u64,
                })
                .sum();
            *r.status_mut() = StatusCode::PARTIAL_CONTENT;
            let h = r.headers_mut();
            h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
            if let Ok(v) =
                HeaderValue::from_str(&format!("multipart/byteranges; boundary={boundary}"))
            {
                h.insert(header::CONTENT_TYPE, v);
            }
            pieces
        }
    };
    (r, if head { Vec::new() } else { pieces })
}

/// The client's answer from a cached response held in memory (see [`plan_hit`]).
fn answer_hit(
    e: &StoredResponse,
    req: &HeaderMap,
    now: Instant,
    head: bool,
    label: &'static str,
) -> Response<Full<Bytes>> {
    let (r, pieces) = plan_hit(e, e.body.len() as u64, req, now, head, label);
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
    r.map(|()| Full::new(body))
}

#[derive(Clone)]
enum FetchError {
    Unreachable(String),
    Timeout,
}

/// Sends `req` to the origin over a fresh connection and buffers the answer, all within the
/// origin timeout.
async fn fetch(st: &State, req: Request<ReqBody>) -> Result<Fetched, FetchError> {
    let exchange = async {
        let (p, body) = send_to_origin(st, req).await?;
        let body = body
            .collect()
            .await
            .map_err(|e| FetchError::Unreachable(e.to_string()))?
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

/// Sends `req` to the origin over a fresh connection; the answer's head within the origin
/// timeout, its body to be read.
async fn fetch_head(
    st: &State,
    req: Request<ReqBody>,
) -> Result<(hyper::http::response::Parts, Incoming), FetchError> {
    match tokio::time::timeout(st.timeout, send_to_origin(st, req)).await {
        Ok(r) => r,
        Err(_) => Err(FetchError::Timeout),
    }
}

async fn send_to_origin(
    st: &State,
    req: Request<ReqBody>,
) -> Result<(hyper::http::response::Parts, Incoming), FetchError> {
    let origin = st
        .origins
        .for_request(&req)
        .ok_or_else(|| FetchError::Unreachable("no origin for this host".into()))?
        .to_string();
    let (parts, body) = req.into_parts();
    let conn = freshness::connection_tokens(&parts.headers);
    let mut headers = HeaderMap::with_capacity(parts.headers.len() + 2);
    for (n, v) in &parts.headers {
        // Framing is never forwarded as received: hyper has already rejected ambiguous
        // framing (both `Content-Length` and `Transfer-Encoding`, or conflicting lengths), and
        // frames the origin request itself from the body it decoded.
        if !freshness::is_hop_by_hop(n, &conn) && n != header::CONTENT_LENGTH {
            headers.append(n.clone(), v.clone());
        }
    }
    if !headers.contains_key(header::HOST) {
        if let Ok(v) = HeaderValue::from_str(&origin) {
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

    let unreachable = |e: &dyn std::fmt::Display| FetchError::Unreachable(e.to_string());
    let stream = TcpStream::connect(&origin)
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
    Ok(resp.into_parts())
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
    r.extensions_mut().insert(OriginFailure);
    r.headers_mut()
        .append(header::VIA, HeaderValue::from_static(VIA));
    r.headers_mut()
        .insert(X_CACHE, HeaderValue::from_static("MISS"));
    r
}

/// An entry found on disk: the response (status, headers, freshness; the body not read yet)
/// and the handle its body is read with.
struct DiskHit {
    entry: StoredResponse,
    handle: Arc<EntryHandle>,
    /// The body's first bytes `0..end`, mapped by [`disk_open`], not yet verified.
    first: Option<(u64, MappedBlocks)>,
}

/// Opens `key` on disk (header, metadata and block table verified; the body is read with
/// [`disk_read`]). `None` for absent, unreadable or corrupt entries; a corrupt one is dropped.
/// With `map_first`, the same trip to the blocking pool also maps the body's first
/// [`DISK_BATCH`] bytes (not yet verified) for a whole-body answer: one hand-off per disk hit
/// instead of two.
async fn disk_open(disk: &Disk, key: String, map_first: bool) -> Option<DiskHit> {
    let entry_key = EntryKey::object(key.as_bytes());
    let probe = entry_key.clone();
    let (opened, first) = read_store(disk, move |s| {
        let opened = s.open_entry(&probe)?;
        let mut first = None;
        if let (true, Opened::Hit(h)) = (map_first, &opened) {
            let end = h.payload_len().min(DISK_BATCH);
            if let Ok(Some(SharedPayload::Mapped(m))) = s.read_payload_shared(h, 0..end) {
                first = Some((end, m));
            }
        }
        Ok::<_, ecdn_store::StoreError>((opened, first))
    })
    .await?
    .ok()?;
    let handle = match opened {
        Opened::Hit(h) => h,
        Opened::Miss => return None,
        Opened::Corrupt { seq } => {
            // Never served; drop it unless a newer version was written meanwhile.
            drop_entry(disk, entry_key, seq).await;
            return None;
        }
    };
    // Only 200s are written; anything else is as corrupt as an unparsable block.
    let m = meta::decode(handle.meta()).filter(|m| m.status == StatusCode::OK)?;
    let on_disk = freshness::unix_now().saturating_sub(m.stored_at_unix);
    Some(DiskHit {
        entry: StoredResponse {
            key,
            status: m.status,
            headers: m.headers,
            body: Bytes::new(),
            stored_at: Instant::now(),
            age_at_store: Duration::from_secs(m.age_at_store_secs.saturating_add(on_disk)),
            lifetime: Duration::from_secs(m.lifetime_secs),
        },
        handle: Arc::new(handle),
        first,
    })
}

/// Bytes `range` of a disk entry's body, every block they touch verified. `None` when they
/// cannot be read: a block failed its checksum (the entry is dropped), or the entry was
/// evicted or replaced since it was opened.
async fn disk_read(
    disk: &Disk,
    h: &Arc<EntryHandle>,
    range: std::ops::Range<u64>,
) -> Option<Bytes> {
    let handle = h.clone();
    match read_store(disk, move |s| s.read_payload(&handle, range)).await? {
        Ok(Some(v)) => Some(Bytes::from(v)),
        Ok(None) | Err(_) => {
            drop_entry(disk, h.key().clone(), h.seq()).await;
            None
        }
    }
}

/// Drops a disk entry found corrupt (or unreadable), unless a newer version replaced it.
async fn drop_entry(disk: &Disk, key: EntryKey, seq: u64) {
    with_store(disk, move |s| s.drop_corrupt(&key, seq)).await;
}

/// Disk-hit bytes on their way to a client: a verified copy, or mapped from the store and
/// cleared block by block as they are sent.
enum DiskBytes {
    Ready(Bytes),
    Verifying(Verifying),
}

/// Bytes of a disk entry mapped from the page cache ([`SharedPayload::Mapped`]), verified
/// [`VERIFY_PIECE`] bytes at a time just before each piece is handed to the connection, so the
/// checksum pass leaves the bytes in this core's cache for the socket's copy. A block that
/// fails its checksum ends the piece stream with an error and drops the entry.
struct Verifying {
    bytes: Bytes,
    verifier: BlockVerifier,
    disk: Disk,
    key: EntryKey,
    seq: u64,
}

/// Bytes verified (and sent) per step of a [`Verifying`]: a few checksum blocks, small enough
/// to stay in the CPU cache until the socket copies them.
const VERIFY_PIECE: usize = 1 << 20;

impl Verifying {
    fn new(disk: &Disk, h: &EntryHandle, m: MappedBlocks) -> Self {
        let (map, verifier) = m.into_parts();
        Verifying {
            bytes: Bytes::from_owner(map),
            verifier,
            disk: disk.clone(),
            key: h.key().clone(),
            seq: h.seq(),
        }
    }

    /// The next verified piece; `Some(Err(()))` when a block failed (the entry is dropped);
    /// `None` when all bytes were sent.
    fn next_piece(&mut self) -> Option<Result<Bytes, ()>> {
        loop {
            match self.verifier.next(&self.bytes, VERIFY_PIECE)? {
                Ok(r) if r.is_empty() => continue,
                Ok(r) => return Some(Ok(self.bytes.slice(r))),
                Err(BadBlock) => {
                    let (disk, key, seq) = (self.disk.clone(), self.key.clone(), self.seq);
                    tokio::spawn(async move { drop_entry(&disk, key, seq).await });
                    return Some(Err(()));
                }
            }
        }
    }
}

/// Like [`disk_read`], for bytes about to be sent and dropped: mapped from the page cache
/// rather than copied when possible ([`Store::read_payload_shared`]), so a disk hit costs one
/// copy (the socket's), like a DRAM hit. Mapped bytes are verified as they are sent.
async fn disk_read_shared(
    disk: &Disk,
    h: &Arc<EntryHandle>,
    range: std::ops::Range<u64>,
) -> Option<DiskBytes> {
    let handle = h.clone();
    match read_store(disk, move |s| s.read_payload_shared(&handle, range)).await? {
        Ok(Some(SharedPayload::Owned(v))) => Some(DiskBytes::Ready(Bytes::from(v))),
        Ok(Some(SharedPayload::Mapped(m))) => {
            Some(DiskBytes::Verifying(Verifying::new(disk, h, m)))
        }
        Ok(None) | Err(_) => {
            drop_entry(disk, h.key().clone(), h.seq()).await;
            None
        }
    }
}

/// [`disk_read_shared`] for one step of a stream: a copy may cover only a prefix of `range`,
/// and the rest goes back to the front of `steps`.
async fn read_step(
    disk: &Disk,
    h: &Arc<EntryHandle>,
    range: std::ops::Range<u64>,
    steps: &mut VecDeque<Piece>,
) -> Option<DiskBytes> {
    let got = disk_read_shared(disk, h, range.clone()).await?;
    if let DiskBytes::Ready(b) = &got {
        let rest = range.start + b.len() as u64..range.end;
        if !rest.is_empty() {
            steps.push_front(Piece::Body(rest));
        }
    }
    Some(got)
}

/// A disk entry with its whole body read.
async fn disk_read_all(disk: &Disk, hit: DiskHit) -> Option<StoredResponse> {
    let body = disk_read(disk, &hit.handle, 0..hit.handle.payload_len()).await?;
    Some(StoredResponse { body, ..hit.entry })
}

/// Bytes a disk hit maps per step of its stream (one `mmap` each; the page cache holds them).
const DISK_BATCH: u64 = 8 << 20;

/// Answers a disk hit by streaming its body from the store, [`DISK_BATCH`] bytes at a time.
/// Each batch is mapped from the page cache (no copy; [`disk_read_shared`]) and verified
/// [`VERIFY_PIECE`] bytes at a time, just before each piece is handed to the connection; where
/// it cannot be mapped it is copied, at most 1 MiB at a time. Memory per response stays
/// bounded and the first byte leaves after one piece, whatever the object's size. The first
/// piece is read and verified before answering: if it cannot be, `None`, and the caller
/// treats the request as a miss. A later failure (a block failing its checksum) aborts the
/// response: the client sees a short body, never a wrong byte. A reader overtaken by the
/// ring keeps its bytes (the store detaches its mapping before overwriting them).
async fn stream_hit(
    disk: &Disk,
    mut hit: DiskHit,
    req: &HeaderMap,
    now: Instant,
    head: bool,
) -> Option<Response<NodeBody>> {
    let size = hit.handle.payload_len();
    let (r, pieces) = plan_hit(&hit.entry, size, req, now, head, "HIT-DISK");
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
                        Some(DiskBytes::Verifying(Verifying::new(disk, &hit.handle, m)))
                    }
                    _ => read_step(disk, &hit.handle, range, &mut steps).await,
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
                Piece::Body(range) => match read_step(&disk, &handle, range, &mut steps).await {
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
    Some(r.map(|()| {
        NodeBody::Live(LiveBody {
            replay: ready,
            verifying,
            rx,
            remaining: Some(length),
            done: false,
        })
    }))
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
async fn cached(st: &Arc<State>, req: Request<ReqBody>) -> Response<NodeBody> {
    let head = req.method() == Method::HEAD;
    let primary = cache_key(&req);
    let key = st.lookup_key(&primary, req.headers());
    let id = fnv1a(key.as_bytes());
    let rd = freshness::request_directives(req.headers());
    let mut stale: Option<Revalidation> = None;
    if !rd.no_cache {
        let now = Instant::now();
        let found = lock(&st.hoc).lookup(id, &key, now);
        match found {
            Found::Fresh(e) if rd.accepts(&e, now) => {
                bump(&st.stats.hoc_hits, 1);
                return answer_hit(&e, req.headers(), now, head, "HIT-HOC").map(NodeBody::Full);
            }
            Found::Stale(entry) => {
                stale = Some(Revalidation {
                    entry,
                    on_disk: false,
                })
            }
            _ => {}
        }
        if let Some(disk) = &st.disk {
            let whole = !head && !req.headers().contains_key(header::RANGE);
            if let Some(hit) = disk_open(disk, key.clone(), whole).await {
                let now = Instant::now();
                let fresh = hit.entry.is_fresh(now);
                if fresh && rd.accepts(&hit.entry, now) {
                    // The HOC's policy sees the request first: an object it admits is read
                    // whole into memory, any other is streamed from the disk.
                    let size = hit.handle.payload_len();
                    let admitted = !head && lock(&st.hoc).admit(id, &key, size, now);
                    let answer = if admitted {
                        match disk_read_all(disk, hit).await {
                            Some(e) => {
                                let e = Arc::new(e);
                                lock(&st.hoc).insert(id, e.clone());
                                Some(
                                    answer_hit(&e, req.headers(), now, head, "HIT-DISK")
                                        .map(NodeBody::Full),
                                )
                            }
                            None => {
                                lock(&st.hoc).remove(id);
                                None
                            }
                        }
                    } else {
                        stream_hit(disk, hit, req.headers(), now, head).await
                    };
                    if let Some(r) = answer {
                        bump(&st.stats.disk_hits, 1);
                        return r;
                    }
                } else if !fresh {
                    // To validate it, or serve it on an origin error, the body is needed.
                    if let Some(e) = disk_read_all(disk, hit).await {
                        match &mut stale {
                            Some(s) => s.on_disk = true,
                            None => {
                                stale = Some(Revalidation {
                                    entry: Arc::new(e),
                                    on_disk: true,
                                })
                            }
                        }
                    }
                }
            }
        }
    }
    if let Some(s) = &stale {
        // A stale copy answers at once when the request's `max-stale` allows it, or when the
        // response's `stale-while-revalidate` does (a background fetch then validates it).
        let now = Instant::now();
        let swr = rd.lenient() && s.entry.stale_while_revalidate(now);
        if swr {
            revalidate_in_background(st, &req, &primary, &key, id, s.clone());
        }
        if swr || rd.accepts_stale(&s.entry, now) {
            bump(&st.stats.stale, 1);
            return answer_hit(&s.entry, req.headers(), now, head, "STALE").map(NodeBody::Full);
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
        return r.map(NodeBody::Full);
    }
    bump(&st.stats.misses, 1);
    if head {
        // Forwarded as `HEAD`, never stored: nothing to stream or share.
        return match fetch(st, req).await {
            Ok(f) => respond(f, true, "MISS"),
            Err(e) => fetch_error(st, e),
        }
        .map(NodeBody::Full);
    }
    // Only a plain `GET` revalidates: a `Range`, a conditional of the client's own, or a
    // request whose answer may not be stored (or shared) goes to the origin as it is.
    let plain = NOT_PLAIN.iter().all(|h| !req.headers().contains_key(h));
    let stale = stale.filter(|_| plain && !rd.no_store);
    let job = Job {
        primary,
        key,
        id,
        may_store: true,
        req_headers: req.headers().clone(),
        stale,
    };
    miss(st, req, job, &rd).await
}

/// Request headers that make a `GET` more than a plain fetch of the stored resource (a range,
/// a conditional of the client's own, credentials): such a request never validates a stale
/// entry, and a background validation drops them.
const NOT_PLAIN: [HeaderName; 7] = [
    header::RANGE,
    header::IF_RANGE,
    header::IF_NONE_MATCH,
    header::IF_MODIFIED_SINCE,
    header::IF_MATCH,
    header::IF_UNMODIFIED_SINCE,
    header::AUTHORIZATION,
];

/// Starts a validation of a stale entry with the origin that no client waits for (RFC 5861
/// `stale-while-revalidate`): a plain conditional `GET` with the client's headers (less its
/// own conditionals, `Range` and credentials). It joins an in-flight fetch of the key if there
/// is one, so a burst of stale hits makes one origin request; the answer updates the caches.
fn revalidate_in_background(
    st: &Arc<State>,
    req: &Request<ReqBody>,
    primary: &str,
    key: &str,
    id: u64,
    stale: Revalidation,
) {
    let mut headers = req.headers().clone();
    for h in NOT_PLAIN
        .iter()
        .chain(&[header::CACHE_CONTROL, header::PRAGMA])
    {
        headers.remove(h);
    }
    let mut bg = Request::new(
        http_body_util::Empty::<Bytes>::new()
            .map_err(|never| match never {})
            .boxed(),
    );
    *bg.uri_mut() = req.uri().clone();
    *bg.headers_mut() = headers.clone();
    let job = Job {
        primary: primary.to_string(),
        key: key.to_string(),
        id,
        may_store: true,
        req_headers: headers,
        stale: Some(stale),
    };
    let st = st.clone();
    tokio::spawn(async move {
        let rd = freshness::RequestDirectives::default();
        let mut body = miss(&st, bg, job, &rd).await.into_body();
        // Drain what the fetch sends (stored as it arrives); nobody reads it.
        while let Some(Ok(_)) = body.frame().await {}
    });
}

/// What one origin fetch is for.
#[derive(Clone)]
struct Job {
    /// Host + path + query.
    primary: String,
    /// The key looked up (and the flight's): see [`State::lookup_key`].
    key: String,
    /// Its hash.
    id: u64,
    /// Whether the answer may be stored (no `Authorization`, no request `no-store`).
    may_store: bool,
    /// The request's headers, for the variant key of an answer with `Vary`.
    req_headers: HeaderMap,
    /// A stale entry of `key` to validate.
    stale: Option<Revalidation>,
}

/// A stale cached response to validate with the origin, or to serve if the origin fails and
/// `stale-if-error` allows it.
#[derive(Clone)]
struct Revalidation {
    entry: Arc<StoredResponse>,
    /// Whether it is (also) on disk: a validated copy is written back there.
    on_disk: bool,
}

// ---------------------------------------------------------------------------------------------
// Streaming misses and collapsed forwarding
// ---------------------------------------------------------------------------------------------

/// Frames a subscriber may have queued before the origin fetch waits for it.
const SUBSCRIBER_QUEUE: usize = 32;

/// What an in-flight fetch sends each subscriber after its replay.
enum Chunk {
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

/// The origin's status and headers, shared by every subscriber.
struct Head {
    status: StatusCode,
    headers: HeaderMap,
    /// The `X-Cache` label when the answer came from the cache (`REVALIDATED`, `STALE`).
    label: Option<&'static str>,
    /// What the answer varies on, to tell whether it suits a request that joined the flight
    /// before the headers.
    vary: Vary,
}

/// What an origin answer varies on (RFC 9111 §4.1).
enum Vary {
    /// Nothing: it suits every request.
    None,
    /// `Vary: *`: it suits no other request.
    All,
    /// These header names, with the leader request's [`freshness::vary_suffix`].
    On(Vec<String>, String),
}

impl Vary {
    fn admits(&self, req: &HeaderMap) -> bool {
        match self {
            Vary::None => true,
            Vary::All => false,
            Vary::On(names, suffix) => freshness::vary_suffix(names, req) == *suffix,
        }
    }
}

/// One origin fetch and its subscribers.
struct Flight {
    head: watch::Sender<Option<Result<Arc<Head>, FetchError>>>,
    st: Mutex<FlightState>,
}

struct FlightState {
    /// Every body byte released so far, while `replayable` (also the accumulation to store).
    frames: Vec<Bytes>,
    /// Whether `frames` holds the whole body so far; once false, nobody can join.
    replayable: bool,
    subs: Vec<mpsc::Sender<Chunk>>,
    /// `Some(true)`: completed; `Some(false)`: failed or abandoned.
    ended: Option<bool>,
}

type Subscription = (VecDeque<Bytes>, mpsc::Receiver<Chunk>);

impl Flight {
    fn new() -> Arc<Flight> {
        Arc::new(Flight {
            head: watch::channel(None).0,
            st: Mutex::new(FlightState {
                frames: Vec::new(),
                replayable: true,
                subs: Vec::new(),
                ended: None,
            }),
        })
    }

    /// Joins: the frames so far plus a channel for the rest; `None` once the fetch can no
    /// longer be replayed from the start.
    fn subscribe(&self) -> Option<Subscription> {
        let mut s = lock(&self.st);
        if !s.replayable {
            return None;
        }
        let (tx, rx) = mpsc::channel(SUBSCRIBER_QUEUE);
        match s.ended {
            Some(true) => {
                let _ = tx.try_send(Chunk::Done);
            }
            // Dropping `tx` aborts the subscriber's response.
            Some(false) => {}
            None => s.subs.push(tx),
        }
        Some((s.frames.iter().cloned().collect(), rx))
    }
}

/// Runs one origin fetch for its subscribers. Dropping it (finished, failed, abandoned, or
/// the task cancelled) always ends the flight: an unfinished one fails its subscribers.
struct Driver {
    st: Arc<State>,
    flight: Arc<Flight>,
    /// The key under which the flight is joinable, while it is.
    key: Option<String>,
}

impl Driver {
    /// No more joiners: leave the map, stop keeping the replay buffer.
    fn seal(&mut self) {
        {
            let mut s = lock(&self.flight.st);
            s.replayable = false;
            s.frames = Vec::new();
        }
        self.unregister();
    }

    fn unregister(&mut self) {
        if let Some(key) = self.key.take() {
            let mut m = lock(&self.st.flights);
            if m.get(&key).is_some_and(|f| Arc::ptr_eq(f, &self.flight)) {
                m.remove(&key);
            }
        }
    }

    /// Hands one frame to every subscriber. A subscriber that has not taken a frame within
    /// the origin timeout is dropped (its response is aborted). Returns whether anyone still
    /// needs the fetch.
    async fn release(&mut self, data: Bytes, storing: bool) -> bool {
        let subs = {
            let mut s = lock(&self.flight.st);
            if s.replayable {
                s.frames.push(data.clone());
            }
            s.subs.retain(|t| !t.is_closed());
            s.subs.clone()
        };
        for tx in &subs {
            let sent = tokio::time::timeout(self.st.timeout, tx.send(Chunk::Data(data.clone())));
            if !matches!(sent.await, Ok(Ok(()))) {
                lock(&self.flight.st).subs.retain(|t| !t.same_channel(tx));
            }
        }
        storing || !lock(&self.flight.st).subs.is_empty()
    }

    /// Success: the flight is over, subscribers get their end of stream.
    async fn finish(&mut self) {
        self.unregister();
        let subs = {
            let mut s = lock(&self.flight.st);
            s.ended = Some(true);
            std::mem::take(&mut s.subs)
        };
        for tx in subs {
            let _ = tokio::time::timeout(self.st.timeout, tx.send(Chunk::Done)).await;
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.unregister();
        self.flight.head.send_if_modified(|h| {
            if h.is_none() {
                *h = Some(Err(FetchError::Unreachable(
                    "origin fetch abandoned".into(),
                )));
                true
            } else {
                false
            }
        });
        let mut s = lock(&self.flight.st);
        if s.ended.is_none() {
            s.ended = Some(false);
            s.subs.clear();
        }
    }
}

fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// The origin fetch behind a flight: streams the body to the subscribers and stores it when
/// it may (see the module documentation).
async fn drive(mut d: Driver, req: Request<ReqBody>, job: Job) {
    let Job {
        primary,
        key,
        id,
        may_store,
        req_headers,
        stale,
    } = job;
    let st = d.st.clone();
    let (parts, mut body) = match fetch_head(&st, req).await {
        Ok(r) => r,
        Err(e) => {
            if let Some(s) = stale.filter(|s| s.entry.stale_if_error(Instant::now())) {
                serve_entry(&mut d, &s.entry, "STALE").await;
                return;
            }
            d.flight.head.send_replace(Some(Err(e)));
            return;
        }
    };
    if let Some(s) = &stale {
        if parts.status == StatusCode::NOT_MODIFIED {
            let e = revalidated(&st, s, &parts.headers, key, id, may_store).await;
            serve_entry(&mut d, &e, "REVALIDATED").await;
            return;
        }
        if parts.status.is_server_error() && s.entry.stale_if_error(Instant::now()) {
            serve_entry(&mut d, &s.entry, "STALE").await;
            return;
        }
    }
    let declared = content_length(&parts.headers);
    let hoc_capacity = lock(&st.hoc).capacity();
    let limit = hoc_capacity.max(st.disk_capacity);
    let lifetime = if may_store {
        freshness::storable_lifetime(false, parts.status, &parts.headers)
    } else {
        None
    };
    let vary = match freshness::vary_names(&parts.headers) {
        None => Vary::All,
        Some(names) if names.is_empty() => Vary::None,
        Some(names) => {
            let suffix = freshness::vary_suffix(&names, &req_headers);
            Vary::On(names, suffix)
        }
    };
    // A storable answer (never `Vary: *`) records the URL's Vary index and is stored under
    // its variant's key.
    let (key, id) = match (&lifetime, &vary) {
        (Some(_), Vary::On(names, _)) => {
            let k = st.learn_vary(&primary, Some(names), &req_headers);
            let id = fnv1a(k.as_bytes());
            (k, id)
        }
        (Some(_), _) => {
            // No longer varies (if it did): stored under the primary key again.
            let k = st.learn_vary(&primary, None, &req_headers);
            let id = fnv1a(k.as_bytes());
            (k, id)
        }
        (None, _) => (key, id),
    };
    let mut storing = lifetime.is_some() && declared.is_none_or(|n| n <= limit);
    if !storing {
        d.seal();
        if stale.is_some() && !parts.status.is_server_error() {
            // The origin answered with something else that is not kept: the stale copy is
            // no longer worth validating (after a `5xx` it is kept for `stale-if-error`).
            lock(&st.hoc).remove(id);
        }
    }
    d.flight.head.send_replace(Some(Ok(Arc::new(Head {
        status: parts.status,
        headers: parts.headers.clone(),
        label: None,
        vary,
    }))));
    // While storing, the newest frame is held back until the next one arrives (or the body
    // is stored), so no client has the whole object before the cache does.
    let mut pending: Option<Bytes> = None;
    let mut total = 0u64;
    loop {
        let frame = match tokio::time::timeout(st.timeout, body.frame()).await {
            Ok(Some(Ok(f))) => f,
            Ok(None) => break,
            Ok(Some(Err(_))) | Err(_) => {
                // The origin died or stalled mid-body: abort everyone, store nothing.
                bump(&st.stats.origin_errors, 1);
                return;
            }
        };
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        if data.is_empty() {
            continue;
        }
        total += data.len() as u64;
        if storing && total > limit {
            storing = false;
            // Release the held frame before the replay buffer goes.
            if let Some(p) = pending.take() {
                if !d.release(p, true).await {
                    return;
                }
            }
            d.seal();
        }
        let out = if storing {
            pending.replace(data)
        } else {
            Some(data)
        };
        if let Some(out) = out {
            if !d.release(out, storing).await {
                return; // not stored and nobody listening: abandon the origin fetch
            }
        }
    }
    if let (true, Some(lifetime)) = (storing && declared.is_none_or(|n| n == total), lifetime) {
        let mut buf = Vec::with_capacity(total as usize);
        {
            let s = lock(&d.flight.st);
            for f in &s.frames {
                buf.extend_from_slice(f);
            }
        }
        if let Some(p) = &pending {
            buf.extend_from_slice(p);
        }
        let e = Arc::new(StoredResponse {
            key,
            status: parts.status,
            headers: freshness::headers_to_store(&parts.headers),
            body: Bytes::from(buf),
            stored_at: Instant::now(),
            age_at_store: freshness::origin_age(&parts.headers),
            lifetime,
        });
        lock(&st.hoc).offer(id, e.clone(), e.stored_at);
        if let Some(disk) = &st.disk {
            if total <= st.disk_capacity {
                disk_put(disk, &e).await;
            }
        }
    }
    if let Some(p) = pending.take() {
        if !d.release(p, false).await {
            return;
        }
    }
    d.finish().await;
}

/// The stale entry of `s` updated from the origin's `304` (RFC 9111 §4.3.4): headers merged
/// ([`freshness::updated_headers`]), age and lifetime from the merged headers and the `304`'s
/// `Age`. It replaces the stale copy in the HOC and, if it was there, on disk; if the merged
/// headers no longer allow storing it, it is served once and dropped from the HOC.
async fn revalidated(
    st: &State,
    s: &Revalidation,
    not_modified: &HeaderMap,
    key: String,
    id: u64,
    may_store: bool,
) -> Arc<StoredResponse> {
    let headers = freshness::updated_headers(&s.entry.headers, not_modified);
    let mut map = HeaderMap::with_capacity(headers.len());
    for (n, v) in &headers {
        map.append(n.clone(), v.clone());
    }
    let lifetime = freshness::storable_lifetime(false, s.entry.status, &map).filter(|_| may_store);
    let e = Arc::new(StoredResponse {
        key,
        status: s.entry.status,
        headers,
        body: s.entry.body.clone(),
        stored_at: Instant::now(),
        age_at_store: freshness::origin_age(not_modified),
        lifetime: lifetime.unwrap_or(Duration::ZERO),
    });
    if lifetime.is_some() {
        lock(&st.hoc).offer(id, e.clone(), e.stored_at);
        if let (true, Some(disk)) = (s.on_disk, &st.disk) {
            disk_put(disk, &e).await;
        }
    } else {
        lock(&st.hoc).remove(id);
    }
    e
}

/// Answers a flight's subscribers from a cached response (a revalidated or stale one).
async fn serve_entry(d: &mut Driver, e: &StoredResponse, label: &'static str) {
    d.flight.head.send_replace(Some(Ok(Arc::new(Head {
        status: e.status,
        headers: entry_headers(e, e.body.len() as u64, Instant::now()),
        label: Some(label),
        vary: Vary::None,
    }))));
    if !e.body.is_empty() && !d.release(e.body.clone(), false).await {
        return;
    }
    d.finish().await;
}

/// A `GET` miss: streamed from the origin; a cacheable candidate joins (or leads) the
/// in-flight fetch of its key.
async fn miss(
    st: &Arc<State>,
    req: Request<ReqBody>,
    job: Job,
    rd: &freshness::RequestDirectives,
) -> Response<NodeBody> {
    let authorization = req.headers().contains_key(header::AUTHORIZATION);
    let collapsible = !authorization && !rd.no_store && !req.headers().contains_key(header::RANGE);
    let may_store = !authorization && !rd.no_store;
    let job = Job { may_store, ..job };
    let mut joined = None;
    let mut req = Some(req);
    if collapsible {
        let mut m = lock(&st.flights);
        if let Some(f) = m.get(&job.key) {
            if let Some(sub) = f.subscribe() {
                joined = Some((f.clone(), sub));
            }
        }
        if joined.is_none() {
            let flight = Flight::new();
            m.insert(job.key.clone(), flight.clone());
            drop(m);
            let key = job.key.clone();
            joined = lead(st, flight, req.take(), Some(key), job.clone());
        }
    } else {
        joined = lead(st, Flight::new(), req.take(), None, job.clone());
    }
    let Some((flight, (mut replay, mut rx))) = joined else {
        return fetch_error(st, FetchError::Unreachable("origin fetch failed".into()))
            .map(NodeBody::Full);
    };
    let mut head = wait_head(&flight).await;
    if let (Ok(h), Some(r)) = (&head, &req) {
        if !h.vary.admits(r.headers()) {
            // Joined before the headers, but the answer varies on request headers whose
            // values differ from the leader's: fetch on our own, unshared.
            let own = Job {
                stale: None,
                req_headers: r.headers().clone(),
                ..job
            };
            let Some((f, (rp, r))) = lead(st, Flight::new(), req.take(), None, own) else {
                return fetch_error(st, FetchError::Unreachable("origin fetch failed".into()))
                    .map(NodeBody::Full);
            };
            (replay, rx) = (rp, r);
            head = wait_head(&f).await;
        }
    }
    let mut label = if req.is_some() {
        bump(&st.stats.collapsed, 1);
        "MISS-COLLAPSED"
    } else {
        "MISS"
    };
    let head = match head {
        Ok(h) => h,
        Err(e) => return fetch_error(st, e).map(NodeBody::Full),
    };
    match head.label {
        Some("REVALIDATED") => bump(&st.stats.revalidated, 1),
        Some("STALE") => bump(&st.stats.stale, 1),
        _ => {}
    }
    label = head.label.unwrap_or(label);
    let conn = freshness::connection_tokens(&head.headers);
    let mut headers = HeaderMap::with_capacity(head.headers.len() + 2);
    for (n, v) in &head.headers {
        if !freshness::is_hop_by_hop(n, &conn) {
            headers.append(n.clone(), v.clone());
        }
    }
    headers.append(header::VIA, HeaderValue::from_static(VIA));
    headers.insert(X_CACHE, HeaderValue::from_static(label));
    let remaining = if has_body(head.status) {
        content_length(&head.headers)
    } else {
        None
    };
    let mut r = Response::new(NodeBody::Live(LiveBody {
        replay,
        verifying: None,
        rx,
        remaining,
        done: false,
    }));
    *r.status_mut() = head.status;
    *r.headers_mut() = headers;
    r
}

/// A flight's shared head, once the origin fetch has it.
async fn wait_head(flight: &Flight) -> Result<Arc<Head>, FetchError> {
    let mut head_rx = flight.head.subscribe();
    let head = head_rx
        .wait_for(Option::is_some)
        .await
        .ok()
        .and_then(|h| h.clone());
    head.unwrap_or_else(|| Err(FetchError::Unreachable("origin fetch abandoned".into())))
}

/// Subscribes the leader to a new flight and starts its origin fetch; with a stale entry, the
/// fetch is a conditional `GET` validating it.
fn lead(
    st: &Arc<State>,
    flight: Arc<Flight>,
    req: Option<Request<ReqBody>>,
    joinable_as: Option<String>,
    job: Job,
) -> Option<(Arc<Flight>, Subscription)> {
    let mut req = req?;
    if let Some((name, value)) = job.stale.as_ref().and_then(|s| s.entry.validator()) {
        req.headers_mut().insert(name, value);
    }
    let sub = flight.subscribe()?;
    let d = Driver {
        st: st.clone(),
        flight: flight.clone(),
        key: joinable_as,
    };
    tokio::spawn(drive(d, req, job));
    Some((flight, sub))
}

/// Other methods: pass through, then invalidate the URL.
async fn pass(st: &State, req: Request<ReqBody>) -> Response<Full<Bytes>> {
    bump(&st.stats.passes, 1);
    let key = cache_key(&req);
    let r = fetch(st, req).await;
    st.forget_vary(&key);
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
        "collapsed": c(&s.collapsed),
        "passes": c(&s.passes),
        "origin_errors": c(&s.origin_errors),
        "revalidated": c(&s.revalidated),
        "stale": c(&s.stale),
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

/// A `4xx` for a request refused before any processing; the connection is closed after it.
fn reject(status: StatusCode, msg: &str) -> Response<NodeBody> {
    let mut r = text(status, msg);
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r.map(NodeBody::Full)
}

/// Applies [`NodeConfig::max_uri_len`] and the path normalisation ([`normalize`]) to the
/// request target: the normalised request, or the answer refusing it.
#[allow(clippy::result_large_err)]
fn sanitize(st: &State, req: Request<Incoming>) -> Result<Request<Incoming>, Response<NodeBody>> {
    let uri = req.uri();
    let len = uri.authority().map_or(0, |a| a.as_str().len())
        + uri.path_and_query().map_or(0, |pq| pq.as_str().len());
    if len > st.max_uri_len {
        return Err(reject(StatusCode::URI_TOO_LONG, "request target too long"));
    }
    let path = match normalize::normalize_path(uri.path()) {
        Ok(p) => p,
        Err(e) => return Err(reject(StatusCode::BAD_REQUEST, &e.to_string())),
    };
    if path == uri.path() {
        return Ok(req);
    }
    let (mut parts, body) = req.into_parts();
    let pq = match parts.uri.query() {
        Some(q) => format!("{path}?{q}"),
        None => path,
    };
    let mut uri = std::mem::take(&mut parts.uri).into_parts();
    uri.path_and_query = match pq.parse() {
        Ok(pq) => Some(pq),
        Err(_) => return Err(reject(StatusCode::BAD_REQUEST, "invalid path")),
    };
    parts.uri = match hyper::Uri::from_parts(uri) {
        Ok(u) => u,
        Err(_) => return Err(reject(StatusCode::BAD_REQUEST, "invalid request target")),
    };
    Ok(Request::from_parts(parts, body))
}

async fn handle(st: Arc<State>, req: Request<Incoming>, remote: SocketAddr) -> Response<NodeBody> {
    let arrived = Instant::now();
    let req = match sanitize(&st, req) {
        Ok(r) => r.map(BodyExt::boxed),
        Err(r) => return r,
    };
    match req.uri().path() {
        "/_ecdn/health" => return text(StatusCode::OK, "ok").map(NodeBody::Full),
        "/_ecdn/stats" => return stats_json(&st).await.map(NodeBody::Full),
        "/_ecdn/metrics" => return metrics_text(&st).await.map(NodeBody::Full),
        _ => {}
    }
    if req.method().as_str() == "PURGE" {
        return purge(&st, &req).await.map(NodeBody::Full);
    }
    if st.origins.for_request(&req).is_none() {
        return text(
            StatusCode::MISDIRECTED_REQUEST,
            "no origin is configured for this host",
        )
        .map(NodeBody::Full);
    }
    bump(&st.stats.requests, 1);
    let log = st
        .access_log
        .then(|| (req.method().clone(), req.uri().path().to_string()));
    let r = if req.method() == Method::GET || req.method() == Method::HEAD {
        cached(&st, req).await
    } else {
        pass(&st, req).await.map(NodeBody::Full)
    };
    let elapsed = arrived.elapsed();
    let tier = response_tier(&r);
    st.metrics.record(tier, elapsed);
    let bytes = hyper::body::Body::size_hint(r.body()).exact();
    bump(&st.stats.bytes_served, bytes.unwrap_or(0));
    if let Some((method, path)) = log {
        let line = ops::Access {
            method: method.as_str(),
            path: &path,
            status: r.status().as_u16(),
            tier: tier.label(),
            bytes,
            duration: elapsed,
            remote,
        }
        .line();
        eprintln!("{line}");
    }
    r
}

/// The tier that answered a proxied request, from our `X-Cache` label.
fn response_tier<B>(r: &Response<B>) -> Tier {
    if r.extensions().get::<OriginFailure>().is_some() {
        return Tier::Error;
    }
    match r.headers().get(X_CACHE).map(HeaderValue::as_bytes) {
        Some(b"HIT-HOC") => Tier::Hoc,
        Some(b"HIT-DISK") => Tier::Disk,
        Some(b"MISS-COLLAPSED") => Tier::Collapsed,
        Some(b"PASS") => Tier::Pass,
        Some(b"REVALIDATED") => Tier::Revalidated,
        Some(b"STALE") => Tier::Stale,
        _ => Tier::Miss,
    }
}

/// `/_ecdn/metrics`: the Prometheus text exposition, see [`ops`].
async fn metrics_text(st: &State) -> Response<Full<Bytes>> {
    let (hoc_used, hoc_capacity, adaptsize_c) = {
        let h = lock(&st.hoc);
        (h.used(), h.capacity(), h.raw_parameter())
    };
    let (disk_used, disk_capacity) = match &st.disk {
        Some(d) => read_store(d, |s| (s.used(), s.capacity()))
            .await
            .unwrap_or((0, st.disk_capacity)),
        None => (0, 0),
    };
    let gauges = ops::Gauges {
        hoc_used,
        hoc_capacity,
        disk_used,
        disk_capacity,
        adaptsize_c,
    };
    let c = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let body = st
        .metrics
        .render(c(&st.stats.requests), c(&st.stats.bytes_served), &gauges);
    let mut r = Response::new(Full::new(Bytes::from(body)));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    r
}

/// `PURGE <path>`: removes the cached entry of the URL (same cache key as a `GET`: Host + path
/// + query) from the HOC and the disk. Needs `Authorization: Bearer <purge_token>`.
async fn purge(st: &State, req: &Request<ReqBody>) -> Response<Full<Bytes>> {
    let Some(token) = &st.purge_token else {
        return text(StatusCode::FORBIDDEN, "purge is disabled");
    };
    let auth = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes);
    if !ops::bearer_matches(auth, token) {
        let mut r = text(StatusCode::UNAUTHORIZED, "purge needs a valid bearer token");
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"ecdn\""),
        );
        return r;
    }
    let key = cache_key(req);
    let mut purged = st.forget_vary(&key);
    purged |= lock(&st.hoc).remove(fnv1a(key.as_bytes()));
    if let Some(disk) = &st.disk {
        let on_disk = with_store(disk, move |s| s.remove(&EntryKey::object(key.as_bytes())))
            .await
            .and_then(Result::ok)
            .unwrap_or(false);
        purged |= on_disk;
    }
    let mut r = Response::new(Full::new(Bytes::from(
        serde_json::json!({ "purged": purged }).to_string(),
    )));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// The node: see the module documentation. `/_ecdn/stats` reports `requests` (proxied, not
/// counting `/_ecdn/`), `hoc_hits`, `disk_hits`, `misses` (including collapsed ones),
/// `collapsed` (misses served by another request's origin fetch), `passes` (other methods),
/// `origin_errors` (502 / 504), `revalidated` / `stale` (stale entries served after a `304` /
/// on an origin error, see the module documentation), `bytes_served` (response bodies), `hoc` (`policy`, `used`,
/// `capacity`, `objects`, `c`: AdaptSize's size parameter, `null` while it admits everything
/// or for policies without one) and `disk` (`null` without a disk).
pub struct Node;

impl Node {
    /// Opens the caches, binds `listen` (port 0 for any free port) and serves on the current
    /// Tokio runtime.
    pub async fn start(listen: SocketAddr, cfg: NodeConfig) -> io::Result<RunningNode> {
        let origins = Origins::new(&cfg)?;
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
                Some(Arc::new(RwLock::new(store)))
            }
            None => None,
        };
        let state = Arc::new(State {
            origins,
            timeout: cfg.origin_timeout,
            hoc: Mutex::new(hoc),
            disk_capacity: if disk.is_some() {
                cfg.disk_size / u64::from(DEFAULT_ALIGN) * u64::from(DEFAULT_ALIGN)
            } else {
                0
            },
            disk,
            flights: Mutex::new(HashMap::new()),
            vary: Mutex::new(VaryIndex::new()),
            stats: Stats::default(),
            metrics: Metrics::default(),
            max_uri_len: cfg.max_uri_len,
            purge_token: cfg.purge_token.clone(),
            access_log: cfg.access_log,
        });
        let listener = TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let mut http = hyper::server::conn::http1::Builder::new();
        http.keep_alive(true)
            // A client that shuts its sending side after the request still gets the answer.
            .half_close(true)
            .max_buf_size(cfg.max_header_bytes.max(MIN_HEADER_BYTES))
            .max_headers(cfg.max_headers)
            .timer(TokioTimer::new())
            .header_read_timeout(cfg.header_read_timeout);
        let limit = Arc::new(Semaphore::new(
            cfg.max_connections.min(Semaphore::MAX_PERMITS),
        ));
        let task = tokio::spawn(serve(
            listener,
            state.clone(),
            http.clone(),
            limit,
            rx,
            cfg.drain_timeout,
        ));
        Ok(RunningNode {
            addr,
            stop: Some(tx),
            task,
            state,
            http,
        })
    }
}

async fn serve(
    listener: TcpListener,
    st: Arc<State>,
    http: hyper::server::conn::http1::Builder,
    limit: Arc<Semaphore>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
    drain_timeout: Duration,
) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let stream = tokio::select! {
            _ = &mut stop => break,
            r = listener.accept() => match r {
                Ok(s) => s,
                // Out of file descriptors and the like: back off instead of spinning.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        // Over the connection limit: close it at once (dropping the stream).
        let (stream, remote) = stream;
        let Ok(permit) = limit.clone().try_acquire_owned() else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let st = st.clone();
        let conn = http.serve_connection(TokioIo::new(stream), service(st, remote));
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _permit = permit;
            let _ = conn.await;
        });
    }
    // Drain: no new connections; idle ones close now, busy ones after their response.
    drop(listener);
    let open = graceful.count();
    if tokio::time::timeout(drain_timeout, graceful.shutdown())
        .await
        .is_err()
    {
        eprintln!(
            "ecdn node: drain timeout ({drain_timeout:?}) reached; cutting the connections left \
             of {open}"
        );
    }
    if let Some(disk) = &st.disk {
        if let Some(Err(e)) = with_store(disk, |s| s.sync()).await {
            eprintln!("ecdn node: syncing the disk cache: {e}");
        }
    }
}

/// The per-connection service: [`handle`] for every request.
fn service(
    st: Arc<State>,
    remote: SocketAddr,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response<NodeBody>,
    Error = Infallible,
    Future = impl std::future::Future<Output = Result<Response<NodeBody>, Infallible>> + Send,
> + Clone {
    hyper::service::service_fn(move |req: Request<Incoming>| {
        let st = st.clone();
        async move { Ok::<_, Infallible>(handle(st, req, remote).await) }
    })
}

/// Serves one client connection with [`handle`] until it closes.
async fn serve_connection<I>(
    st: Arc<State>,
    http: &hyper::server::conn::http1::Builder,
    io: I,
    remote: SocketAddr,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let _ = http.serve_connection(io, service(st, remote)).await;
}

/// A running node: its address and a handle that stops it.
pub struct RunningNode {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
    state: Arc<State>,
    http: hyper::server::conn::http1::Builder,
}

impl RunningNode {
    /// Stops accepting connections and drains the open ones: idle keep-alive connections are
    /// closed, busy ones after the response in progress, within
    /// [`NodeConfig::drain_timeout`]; then the disk cache is synced. Returns when all that is
    /// done.
    pub async fn stop(mut self) -> io::Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        (&mut self.task).await.map_err(io::Error::other)
    }

    /// Serves one client connection over `io` (any byte stream, e.g. one end of
    /// `tokio::io::duplex`) as if accepted from `remote`: the same HTTP settings and request
    /// handling as a TCP connection, but not counted against `max_connections`. The future
    /// ends when the connection closes; for tests and fuzzing.
    pub fn serve_io<I>(
        &self,
        io: I,
        remote: SocketAddr,
    ) -> impl std::future::Future<Output = ()> + Send + 'static
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (st, http) = (self.state.clone(), self.http.clone());
        async move { serve_connection(st, &http, TokioIo::new(io), remote).await }
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
