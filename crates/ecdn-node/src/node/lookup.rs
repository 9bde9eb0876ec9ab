//! Lookup: the cache key of a request, and the tiers it is looked up in (the HOC, then the
//! disk), as the request's `Cache-Control` allows.
//!
//! The request's key is a [`CacheKey`] (see `key.rs`).
//!
//! # The request's `Cache-Control` (RFC 9111 §5.2.1)
//!
//! * `no-cache` (or `Pragma: no-cache` without `Cache-Control`): the cache is not consulted;
//!   the request goes to the origin and a storable answer replaces the cached one.
//! * `min-fresh=N`: a cached response fresh for less than N more seconds is not used.
//! * `max-stale[=N]`: a stale entry (stale by at most N seconds, any without N) is served,
//!   within the request's `max-age`.
//! * `max-age=N`: a cached response older than N seconds is not used (compared at sub-second
//!   precision, so `max-age=0` always goes to the origin). A HOC entry refused this way has
//!   still been counted as a hit by the HOC policy.
//! * `only-if-cached`: without a usable cached response, `504` (`X-Cache: MISS`, counted as a
//!   miss) and the origin is not contacted.
//! * `no-store`: the answer is not stored (hits are still served).
//!
//! A request with `Authorization` is answered only by an entry with `public`,
//! `must-revalidate` or `s-maxage` (RFC 9111 §3.5). The request conditionals
//! (`If-None-Match`, `If-Modified-Since`) are evaluated on hits ([`super::hit`]); on a miss
//! every request header goes to the origin.
//!
//! # Stale entries served at once
//!
//! A stale entry found here answers without waiting for the origin (`X-Cache: STALE`), unless
//! it has `must-revalidate`, `proxy-revalidate` or `s-maxage`:
//! * `stale-while-revalidate=N` in the entry and age below lifetime + N, for a request without
//!   `no-cache`, `max-age` or `min-fresh`: a background conditional `GET` (a flight of its own,
//!   joined by concurrent ones, so one origin request per burst) validates or replaces the
//!   entry for the next requests.
//! * the request's `max-stale[=N]`, as above. The request's `stale-if-error` is not
//!   implemented.
//!
//! Otherwise the stale entry goes with the miss, to be validated ([`super::fill`]).

use std::sync::Arc;
use std::time::Instant;

use hyper::header;
use hyper::Request;

use super::answer::{Answer, ReqBody};
use super::disk::Disk;
use super::fill::{revalidate_in_background, Revalidation};
use super::freshness::RequestDirectives;
use super::hit::{answer_hit, answer_striped, stream_hit};
use super::hoc::Found;
use super::key::CacheKey;
use super::lock::lock;
use super::outcome::Outcome;
use super::state::State;

/// What the lookup found. (Returned once per request and never kept: a boxed hit would cost
/// an allocation on the hottest path.)
#[allow(clippy::large_enum_variant)]
pub(super) enum Lookup {
    /// A usable entry, answered.
    Hit(Answer),
    /// Nothing usable: the request goes to the origin, with a stale entry to validate (or to
    /// serve on an origin error) if one was found.
    Miss(Option<Revalidation>),
}

/// Looks the request up in the HOC, then on disk, as the request's directives `rd` allow
/// (`no-cache` skips both). A fresh, acceptable entry answers; a stale one is returned for
/// [`serve_stale`] and the miss.
pub(super) async fn lookup(
    st: &State,
    req: &Request<ReqBody>,
    key: &CacheKey,
    rd: &RequestDirectives,
) -> Lookup {
    if rd.no_cache {
        return Lookup::Miss(None);
    }
    let head = req.method() == hyper::Method::HEAD;
    let now = Instant::now();
    let found = lock(&st.hoc).lookup(key.id, &key.key, now);
    let stale = match found {
        Found::Fresh(e) if rd.accepts(&e, now) => {
            return Lookup::Hit(Answer {
                outcome: Outcome::HitHoc,
                response: answer_hit(&e, req.headers(), now, head),
            })
        }
        Found::Stale(entry) => Some(Revalidation {
            entry,
            on_disk: false,
        }),
        Found::Striped(s) if rd.accepts(&s.head, now) => {
            // Every stripe the answer needs in memory: a HOC hit. Otherwise the cluster's
            // read fetches the missing ones (and keeps them in `s`).
            if let Some(response) = answer_striped(&s, req.headers(), now, head) {
                return Lookup::Hit(Answer {
                    outcome: Outcome::HitHoc,
                    response,
                });
            }
            None
        }
        _ => None,
    };
    // In cluster mode the disk holds pieces, looked up by the cluster's path.
    let Some(disk) = st.disk.as_ref().filter(|_| st.cluster.is_none()) else {
        return Lookup::Miss(stale);
    };
    // Boxed: the disk's steps would make every request's future (moved whole into its task
    // for HTTP/2) several times larger than a memory hit needs.
    Box::pin(on_disk(st, disk, req, key, rd, stale, head)).await
}

/// [`lookup`] on the disk, after the HOC's `stale` entry, if any.
async fn on_disk(
    st: &State,
    disk: &Disk,
    req: &Request<ReqBody>,
    key: &CacheKey,
    rd: &RequestDirectives,
    mut stale: Option<Revalidation>,
    head: bool,
) -> Lookup {
    let whole = !head && !req.headers().contains_key(header::RANGE);
    let Some(hit) = disk.open(key.key.clone(), whole).await else {
        return Lookup::Miss(stale);
    };
    let now = Instant::now();
    if !hit.entry.is_fresh(now) {
        // To validate it, or serve it on an origin error, the body is needed.
        if let Some(e) = disk.read_all(hit).await {
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
        return Lookup::Miss(stale);
    }
    if !rd.accepts(&hit.entry, now) {
        return Lookup::Miss(stale);
    }
    // The HOC's policy sees the request first: an object it admits is read whole into
    // memory, any other is streamed from the disk.
    let size = hit.handle.payload_len();
    let admitted = !head && lock(&st.hoc).admit(key.id, &key.key, size, now);
    let response = if admitted {
        match disk.read_all(hit).await {
            Some(e) => {
                let e = Arc::new(e);
                lock(&st.hoc).insert(key.id, e.clone());
                Some(answer_hit(&e, req.headers(), now, head))
            }
            None => {
                lock(&st.hoc).remove(key.id);
                None
            }
        }
    } else {
        stream_hit(disk, hit, req.headers(), now, head).await
    };
    match response {
        Some(response) => Lookup::Hit(Answer {
            outcome: Outcome::HitDisk,
            response,
        }),
        None => Lookup::Miss(stale),
    }
}

/// A stale entry answers at once when the request's `max-stale` allows it, or when the
/// response's `stale-while-revalidate` does (a background fetch then validates it).
pub(super) fn serve_stale(
    st: &Arc<State>,
    req: &Request<ReqBody>,
    key: &CacheKey,
    rd: &RequestDirectives,
    s: &Revalidation,
) -> Option<Answer> {
    let now = Instant::now();
    let swr = rd.lenient() && s.entry.stale_while_revalidate(now);
    if swr {
        revalidate_in_background(st, req, key, s.clone());
    }
    let head = req.method() == hyper::Method::HEAD;
    (swr || rd.accepts_stale(&s.entry, now)).then(|| Answer {
        outcome: Outcome::Stale,
        response: answer_hit(&s.entry, req.headers(), now, head),
    })
}
