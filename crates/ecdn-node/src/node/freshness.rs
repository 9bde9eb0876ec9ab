//! What the node may store and for how long (RFC 9111, the subset this slice covers), and the
//! response it keeps.
//!
//! Stored: an answer to a `GET` (with `Authorization` only if it has `public`,
//! `must-revalidate` or `s-maxage`, RFC 9111 §3.5), of any status but 1xx, `206` and
//! `304` (a heuristic lifetime only for [`HEURISTICALLY_CACHEABLE`] statuses or `public`), whose response has no
//! `no-store` directive, no unqualified `private` or `no-cache` (the qualified forms withhold
//! the fields they name, e.g. `no-cache="set-cookie"`), no `Vary: *`, and an explicit
//! freshness lifetime greater than zero: `s-maxage`, else `max-age`, else `Expires` − `Date`
//! (IMF-fixdate only; any other date is invalid, which for `Expires` means "already expired").
//! Without any of them, a response with `Last-Modified` gets a heuristic lifetime (RFC 9111
//! §4.2.2): [`HEURISTIC_FRACTION`] of the time since it was last modified, at most
//! [`HEURISTIC_MAX`] (Traffic Server's defaults). The current age is the origin's `Age` plus
//! the time the response spent in this node; it is fresh while that is below the lifetime.
//!
//! A stale response is validated with [`StoredResponse::validator`], updated from a `304` with
//! [`updated_headers`], and may be served stale: on an origin error per
//! [`StoredResponse::stale_if_error`], while it is revalidated in the background per
//! [`StoredResponse::stale_while_revalidate`] (RFC 5861), or when the request's `max-stale`
//! allows ([`RequestDirectives::accepts_stale`]). Never if the response requires revalidation
//! ([`StoredResponse::must_revalidate`]).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::StatusCode;

/// A cached response: what a hit replays.
#[derive(Clone, Debug)]
pub struct StoredResponse {
    /// The full cache key (Host + path + query), compared on lookup to rule out hash collisions.
    pub key: String,
    pub status: StatusCode,
    /// End-to-end headers to replay (no hop-by-hop headers, no `Age`, no `Content-Length`).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: Bytes,
    /// When this copy entered this node's memory.
    pub stored_at: Instant,
    /// The response's age at `stored_at` (origin `Age`, plus time spent on disk if it came
    /// from there).
    pub age_at_store: Duration,
    /// Freshness lifetime.
    pub lifetime: Duration,
    /// In a cluster, the highest purge sequence this node knew when the fill that brought the
    /// bytes began (`cluster/pieces/purge_log.rs`): a purge numbered above it may have been
    /// asked for before the origin was; 0 outside a cluster.
    pub filled: u64,
}

impl StoredResponse {
    /// Current age (RFC 9111 §4.2.3, simplified: no clock-skew correction).
    pub fn age(&self, now: Instant) -> Duration {
        self.age_at_store + now.saturating_duration_since(self.stored_at)
    }

    pub fn is_fresh(&self, now: Instant) -> bool {
        self.age(now) < self.lifetime
    }

    /// The stored headers as a map.
    pub fn header_map(&self) -> HeaderMap {
        let mut h = HeaderMap::with_capacity(self.headers.len());
        for (n, v) in &self.headers {
            h.append(n.clone(), v.clone());
        }
        h
    }

    /// The first stored value of `name`.
    pub fn first(&self, name: &HeaderName) -> Option<&HeaderValue> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// The conditional header to validate this response with (RFC 9111 §4.3.1): `If-None-Match`
    /// with the `ETag`, else `If-Modified-Since` with `Last-Modified`; `None` without either.
    pub fn validator(&self) -> Option<(HeaderName, HeaderValue)> {
        if let Some(etag) = self.first(&header::ETAG) {
            return Some((header::IF_NONE_MATCH, etag.clone()));
        }
        self.first(&header::LAST_MODIFIED)
            .map(|lm| (header::IF_MODIFIED_SINCE, lm.clone()))
    }

    /// Whether this (stale) response may be served when the origin fails (RFC 5861
    /// `stale-if-error=N`): its age is below lifetime + N, and it has none of `must-revalidate`,
    /// `proxy-revalidate` or `s-maxage` (RFC 9111 §5.2.2.2, §5.2.2.8, §5.2.2.10: never served
    /// stale without successful validation).
    pub fn stale_if_error(&self, now: Instant) -> bool {
        self.stale_within("stale-if-error", now)
    }

    /// Whether this (stale) response may answer when the origin fails: its own
    /// `stale-if-error` allows ([`Self::stale_if_error`]), or the request's
    /// `stale-if-error=N` (`request`, RFC 5861 §4) does: stale by at most N seconds, unless
    /// the response [`Self::must_revalidate`].
    pub fn usable_on_error(&self, now: Instant, request: Option<Duration>) -> bool {
        self.stale_if_error(now)
            || request.is_some_and(|n| {
                !self.must_revalidate() && self.age(now).saturating_sub(self.lifetime) <= n
            })
    }

    /// Whether this (stale) response may be served while it is revalidated in the background
    /// (RFC 5861 `stale-while-revalidate=N`): its age is below lifetime + N, and it does not
    /// [`StoredResponse::must_revalidate`].
    pub fn stale_while_revalidate(&self, now: Instant) -> bool {
        self.stale_within("stale-while-revalidate", now)
    }

    fn stale_within(&self, directive: &str, now: Instant) -> bool {
        let cc = cache_control(&self.header_map());
        !must_revalidate(&cc)
            && seconds_directive(&cc, directive)
                .is_some_and(|window| self.age(now) < self.lifetime.saturating_add(window))
    }

    /// Whether a stale copy may never be served without successful validation:
    /// `must-revalidate`, `proxy-revalidate` or `s-maxage` (RFC 9111 §5.2.2.2, §5.2.2.8,
    /// §5.2.2.10; the node is a shared cache).
    pub fn must_revalidate(&self) -> bool {
        must_revalidate(&cache_control(&self.header_map()))
    }

    /// Whether this response may answer a request with `Authorization` (RFC 9111 §3.5): it
    /// has `public`, `must-revalidate` or `s-maxage`.
    pub fn shared_with_authorization(&self) -> bool {
        shared_with_authorization(&cache_control(&self.header_map()))
    }
}

fn shared_with_authorization(cc: &[(String, Option<String>)]) -> bool {
    cc.iter()
        .any(|(k, _)| k == "public" || k == "must-revalidate" || k == "s-maxage")
}

fn must_revalidate(cc: &[(String, Option<String>)]) -> bool {
    cc.iter()
        .any(|(k, _)| k == "must-revalidate" || k == "proxy-revalidate" || k == "s-maxage")
}

/// Share of the time since `Last-Modified` that a response without an explicit lifetime is
/// considered fresh (RFC 9111 §4.2.2 suggests 10%).
pub const HEURISTIC_FRACTION: f64 = 0.1;
/// Longest heuristic lifetime: one day.
pub const HEURISTIC_MAX: Duration = Duration::from_secs(86_400);

/// The heuristic freshness lifetime of a response without an explicit one: a fraction of the
/// time between `Last-Modified` and `Date` (now, without `Date`), capped; `None` without a
/// valid `Last-Modified`.
fn heuristic_lifetime(headers: &HeaderMap) -> Option<Duration> {
    let modified = http_date(headers.get(header::LAST_MODIFIED)?.to_str().ok()?)?;
    let date = headers
        .get(header::DATE)
        .and_then(|v| v.to_str().ok())
        .and_then(http_date)
        .unwrap_or_else(unix_now);
    let since = date.saturating_sub(modified) as f64;
    Some(Duration::from_secs_f64(since * HEURISTIC_FRACTION).min(HEURISTIC_MAX))
}

/// The stored headers updated from a `304 Not Modified` (RFC 9111 §4.3.4): every header the
/// `304` carries replaces the stored ones of that name, except `Content-Length` (the stored body
/// is still the one described), `Age` and hop-by-hop / framing headers; the others are kept.
pub fn updated_headers(
    stored: &[(HeaderName, HeaderValue)],
    not_modified: &HeaderMap,
) -> Vec<(HeaderName, HeaderValue)> {
    let fresh = headers_to_store(not_modified);
    let mut out: Vec<(HeaderName, HeaderValue)> = stored
        .iter()
        .filter(|(n, _)| !fresh.iter().any(|(f, _)| f == n))
        .cloned()
        .collect();
    out.extend(fresh);
    out
}

/// Headers that describe one connection, never forwarded or stored (RFC 9110 §7.6.1), plus the
/// ones named in `Connection`.
pub fn is_hop_by_hop(name: &HeaderName, connection_tokens: &[String]) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
    ) || connection_tokens.iter().any(|t| t == name.as_str())
}

/// The lower-cased tokens of the `Connection` header(s).
pub fn connection_tokens(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .filter(|t| !t.is_empty())
        .collect()
}

/// The end-to-end headers of a response worth replaying from the cache: not hop-by-hop, not
/// `Age` or `Content-Length`, and not withheld by a qualified `no-cache="…"` or
/// `private="…"`. The rest, `Set-Cookie` included, as received.
pub fn headers_to_store(headers: &HeaderMap) -> Vec<(HeaderName, HeaderValue)> {
    let conn = connection_tokens(headers);
    let withheld = withheld_fields(&cache_control(headers));
    headers
        .iter()
        .filter(|(n, _)| {
            !is_hop_by_hop(n, &conn)
                && *n != header::AGE
                && *n != header::CONTENT_LENGTH
                && !withheld.iter().any(|w| w == n.as_str())
        })
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect()
}

/// The directives of all `Cache-Control` headers: lower-cased name, optional unquoted value
/// (a quoted value may hold commas: `no-cache="set-cookie, x-a"`).
fn cache_control(headers: &HeaderMap) -> Vec<(String, Option<String>)> {
    // The targeted field that applies, if any, takes the place of `Cache-Control`; its
    // booleans `?0` are absent directives.
    let targeted = headers.contains_key(&super::targeted::EFFECTIVE);
    let field = if targeted {
        super::targeted::EFFECTIVE
    } else {
        header::CACHE_CONTROL
    };
    headers
        .get_all(field)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(split_directives)
        .filter_map(|d| {
            let d = d.trim();
            if d.is_empty() {
                return None;
            }
            // A structured field's parameters are not directives.
            let d = if targeted {
                d.split(';').next().unwrap_or(d)
            } else {
                d
            };
            Some(match d.split_once('=') {
                Some((_, "?0")) if targeted => return None,
                Some((k, "?1")) if targeted => (k.trim().to_string(), None),
                Some((k, v)) => (
                    k.trim().to_ascii_lowercase(),
                    Some(v.trim().trim_matches('"').to_string()),
                ),
                None => (d.to_ascii_lowercase(), None),
            })
        })
        .collect()
}

/// A header value's comma-separated members, commas inside double quotes kept.
fn split_directives(v: &str) -> Vec<&str> {
    let (mut out, mut start, mut quoted) = (Vec::new(), 0, false);
    for (i, c) in v.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                out.push(&v[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&v[start..]);
    out
}

/// The fields a shared cache must not replay (RFC 9111 §5.2.2.4, §5.2.2.7): those named by
/// `no-cache="…"` and `private="…"`, lower-cased.
fn withheld_fields(cc: &[(String, Option<String>)]) -> Vec<String> {
    cc.iter()
        .filter(|(k, v)| (k == "no-cache" || k == "private") && v.is_some())
        .flat_map(|(_, v)| v.as_deref().unwrap_or("").split(','))
        .map(|f| f.trim().to_ascii_lowercase())
        .filter(|f| !f.is_empty())
        .collect()
}

fn seconds_directive(cc: &[(String, Option<String>)], name: &str) -> Option<Duration> {
    cc.iter()
        .find(|(k, _)| k == name)
        .and_then(|(_, v)| v.as_deref())
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_secs)
}

/// The request's `Cache-Control` directives the node honours (RFC 9111 §5.2.1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestDirectives {
    /// `no-cache`, or `Pragma: no-cache` when the request has no `Cache-Control` (RFC 9111
    /// §5.4): do not answer from the cache.
    pub no_cache: bool,
    /// `no-store`: do not store the response.
    pub no_store: bool,
    /// `max-age=N`: do not use a cached response older than N seconds.
    pub max_age: Option<Duration>,
    /// `max-stale[=N]`: a stale response is acceptable, stale by at most N seconds
    /// (`Duration::MAX` without a value).
    pub max_stale: Option<Duration>,
    /// `min-fresh=N`: only a response that stays fresh for N more seconds.
    pub min_fresh: Option<Duration>,
    /// `only-if-cached`: never contact the origin.
    pub only_if_cached: bool,
    /// `stale-if-error=N`: on an origin error a response stale by at most N seconds will do.
    pub stale_if_error: Option<Duration>,
    /// The request carries `Authorization`: only a response that allows it may answer
    /// ([`StoredResponse::shared_with_authorization`]).
    pub authorization: bool,
}

impl RequestDirectives {
    /// Whether a fresh cached response may answer this request: not with `no-cache`, and not
    /// older than `max-age` (compared at the clock's precision, so `max-age=0` never accepts
    /// a stored response).
    pub fn accepts(&self, e: &StoredResponse, now: Instant) -> bool {
        let age = e.age(now);
        !self.no_cache
            && (!self.authorization || e.shared_with_authorization())
            && self.max_age.is_none_or(|m| age <= m)
            && self
                .min_fresh
                .is_none_or(|m| e.lifetime.saturating_sub(age) >= m)
    }

    /// Whether a stale cached response may answer this request without validation (RFC 9111
    /// §5.2.1.2 `max-stale`): it is stale by no more than `max-stale`, within `max-age`, and
    /// does not [`StoredResponse::must_revalidate`].
    pub fn accepts_stale(&self, e: &StoredResponse, now: Instant) -> bool {
        let age = e.age(now);
        !self.no_cache
            && (!self.authorization || e.shared_with_authorization())
            && self.min_fresh.is_none()
            && self.max_age.is_none_or(|m| age <= m)
            && self
                .max_stale
                .is_some_and(|m| age.saturating_sub(e.lifetime) <= m)
            && !e.must_revalidate()
    }

    /// Whether the request leaves the cache free to choose how fresh an answer is (no
    /// `no-cache`, `max-age` or `min-fresh`): then `stale-while-revalidate` applies.
    pub fn lenient(&self) -> bool {
        !self.no_cache && self.max_age.is_none() && self.min_fresh.is_none()
    }
}

/// The request directives of `headers` (unknown directives and invalid `max-age` values are
/// ignored).
pub fn request_directives(headers: &HeaderMap) -> RequestDirectives {
    let cc = cache_control(headers);
    let has = |name: &str| cc.iter().any(|(k, _)| k == name);
    let pragma_no_cache = !headers.contains_key(header::CACHE_CONTROL)
        && headers
            .get_all(header::PRAGMA)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case("no-cache"));
    RequestDirectives {
        no_cache: has("no-cache") || pragma_no_cache,
        no_store: has("no-store"),
        max_age: seconds_directive(&cc, "max-age"),
        max_stale: cc
            .iter()
            .find(|(k, _)| k == "max-stale")
            .and_then(|(_, v)| match v {
                None => Some(Duration::MAX),
                Some(v) => v.parse::<u64>().ok().map(Duration::from_secs),
            }),
        min_fresh: seconds_directive(&cc, "min-fresh"),
        only_if_cached: has("only-if-cached"),
        stale_if_error: seconds_directive(&cc, "stale-if-error"),
        authorization: headers.contains_key(header::AUTHORIZATION),
    }
}

/// Statuses a response may be stored with under a heuristic lifetime (RFC 9110 §15.1; 206
/// aside, since the node keeps whole responses); any other status needs an explicit one
/// (or `public`).
pub const HEURISTICALLY_CACHEABLE: [u16; 11] =
    [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501];

/// The response's freshness lifetime if the node may store it (see the module doc), else `None`.
pub fn storable_lifetime(
    request_has_authorization: bool,
    status: StatusCode,
    headers: &HeaderMap,
) -> Option<Duration> {
    // 1xx are interim, 304 and 206 are answers about a stored response or a part of one:
    // the node keeps whole responses only.
    let never = status.is_informational()
        || status == StatusCode::NOT_MODIFIED
        || status == StatusCode::PARTIAL_CONTENT;
    if never || vary_names(headers).is_none() {
        return None;
    }
    let cc = cache_control(headers);
    if request_has_authorization && !shared_with_authorization(&cc) {
        return None;
    }
    // `private` and `no-cache` without a field list; with one, the fields are withheld
    // ([`headers_to_store`]) and the rest is stored.
    if cc
        .iter()
        .any(|(k, v)| k == "no-store" || ((k == "private" || k == "no-cache") && v.is_none()))
    {
        return None;
    }
    let heuristic =
        HEURISTICALLY_CACHEABLE.contains(&status.as_u16()) || cc.iter().any(|(k, _)| k == "public");
    let lifetime = seconds_directive(&cc, "s-maxage")
        .or_else(|| seconds_directive(&cc, "max-age"))
        // A targeted field replaces `Expires` too (RFC 9213 §2.2).
        .or_else(|| {
            (!headers.contains_key(&super::targeted::EFFECTIVE))
                .then(|| expires_lifetime(headers))
                .flatten()
        })
        .or_else(|| heuristic.then(|| heuristic_lifetime(headers)).flatten())?;
    (!lifetime.is_zero()).then_some(lifetime)
}

/// The lifetime `Expires` gives (RFC 9111 §5.3): `Expires` − `Date` (now without a valid
/// `Date`); zero, "already expired", for an `Expires` that is not one valid IMF-fixdate
/// (another date form, a one-digit hour, several `Expires` lines); `None` without `Expires`.
fn expires_lifetime(headers: &HeaderMap) -> Option<Duration> {
    let mut lines = headers.get_all(header::EXPIRES).iter();
    let first = lines.next()?;
    let expires = match (lines.next(), first.to_str().ok().and_then(http_date)) {
        (None, Some(e)) => e,
        _ => return Some(Duration::ZERO),
    };
    let date = headers
        .get(header::DATE)
        .and_then(|v| v.to_str().ok())
        .and_then(http_date)
        .unwrap_or_else(unix_now);
    Some(Duration::from_secs(expires.saturating_sub(date)))
}

/// The header names a response varies on (RFC 9111 §4.1): the members of its `Vary` headers,
/// lower-cased, sorted and deduplicated (empty without `Vary`); `None` for `Vary: *`, which no
/// request matches.
pub fn vary_names(headers: &HeaderMap) -> Option<Vec<String>> {
    let mut names = Vec::new();
    for v in headers.get_all(header::VARY) {
        // An unreadable `Vary` cannot be matched either.
        let v = v.to_str().ok()?;
        for name in v.split(',').map(|n| n.trim().to_ascii_lowercase()) {
            if name == "*" {
                return None;
            }
            if !name.is_empty() {
                names.push(name);
            }
        }
    }
    names.sort();
    names.dedup();
    Some(names)
}

/// The secondary key of a request for a response varying on `names`: for each name (in
/// order), `\n<name>=<values>`, the request's values of that header joined with `,`, each
/// trimmed and with inner whitespace runs collapsed to one space (an absent header gives an
/// empty value, distinct from none only through the name list, which is fixed per URL).
/// Empty when `names` is.
pub fn vary_suffix(names: &[String], req: &HeaderMap) -> String {
    let mut out = String::new();
    for name in names {
        out.push('\n');
        out.push_str(name);
        out.push('=');
        let values: Vec<String> = req
            .get_all(name.as_str())
            .iter()
            .map(|v| {
                String::from_utf8_lossy(v.as_bytes())
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        out.push_str(&values.join(","));
    }
    out
}

/// The origin's `Age` (RFC 9111 §5.1): of a list (one line with commas, or several lines),
/// the first member; a member that is not a non-negative integer is ignored, as is an
/// absent `Age` (0 s).
pub fn origin_age(headers: &HeaderMap) -> Duration {
    headers
        .get(header::AGE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .map(str::trim)
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        .map_or(Duration::ZERO, |v| {
            // Larger than u64 seconds: as old as can be.
            Duration::from_secs(v.parse::<u64>().unwrap_or(u64::MAX))
        })
}

/// Seconds since the UNIX epoch, now.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Days from 1970-01-01 to the given proleptic Gregorian date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    // Count years from March so the leap day is the last day of the year.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Parses an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`: a weekday name, two-digit day,
/// four-digit year, two-digit hour, minute and second) into UNIX seconds; `None` for any other
/// form or a date before 1970.
pub fn http_date(s: &str) -> Option<u64> {
    let (weekday, rest) = s.trim().split_once(", ")?;
    const WEEKDAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
    if !WEEKDAYS.contains(&weekday) {
        return None;
    }
    let parts: Vec<&str> = rest.split(' ').collect();
    let [day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| m == month)? as i64 + 1;
    // Exactly this many digits, nothing else (no sign, no one-digit hour).
    let digits = |s: &str, n: usize| -> Option<i64> {
        (s.len() == n && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let day = digits(day, 2)?;
    let year = digits(year, 4)?;
    let hms: Vec<i64> = time
        .split(':')
        .map(|p| digits(p, 2))
        .collect::<Option<_>>()?;
    let [h, m, sec] = hms.as_slice() else {
        return None;
    };
    if !(1..=31).contains(&day) || !(0..24).contains(h) || !(0..60).contains(m) {
        return None;
    }
    if !(0..=60).contains(sec) {
        return None;
    }
    let secs = days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + sec;
    u64::try_from(secs).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn dates() {
        assert_eq!(http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(
            http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(
            http_date("Thu, 01 Jan 2026 00:00:00 GMT"),
            Some(1_767_225_600)
        );
        assert_eq!(http_date("Sunday, 06-Nov-94 08:49:37 GMT"), None);
        assert_eq!(http_date("0"), None);
    }

    #[test]
    fn request_cache_control() {
        let d = request_directives(&map(&[("cache-control", "No-Cache, max-age=5")]));
        assert!(d.no_cache && !d.no_store && !d.only_if_cached);
        assert_eq!(d.max_age, Some(Duration::from_secs(5)));
        let d = request_directives(&map(&[("cache-control", "no-store, only-if-cached")]));
        assert!(!d.no_cache && d.no_store && d.only_if_cached);
        assert!(request_directives(&map(&[("pragma", "no-cache")])).no_cache);
        let d = request_directives(&map(&[
            ("pragma", "no-cache"),
            ("cache-control", "max-age=9"),
        ]));
        assert!(!d.no_cache);
        assert_eq!(
            request_directives(&HeaderMap::new()),
            RequestDirectives::default()
        );
        let e = StoredResponse {
            key: String::new(),
            status: StatusCode::OK,
            headers: Vec::new(),
            body: Bytes::new(),
            stored_at: Instant::now(),
            age_at_store: Duration::from_secs(10),
            lifetime: Duration::from_secs(100),
            filled: 0,
        };
        let now = e.stored_at;
        assert!(RequestDirectives::default().accepts(&e, now));
        let max_age = |s| RequestDirectives {
            max_age: Some(Duration::from_secs(s)),
            ..RequestDirectives::default()
        };
        assert!(max_age(10).accepts(&e, now));
        assert!(!max_age(9).accepts(&e, now));
        assert!(!request_directives(&map(&[("pragma", "no-cache")])).accepts(&e, now));
        // min-fresh: 90 s of freshness left.
        let cc = |v: &'static str| request_directives(&map(&[("cache-control", v)]));
        assert!(cc("min-fresh=90").accepts(&e, now));
        assert!(!cc("min-fresh=91").accepts(&e, now));
        // max-stale, on a copy 30 s stale.
        let stale = StoredResponse {
            age_at_store: Duration::from_secs(130),
            ..e
        };
        assert!(!cc("max-age=500").accepts_stale(&stale, now));
        assert!(cc("max-stale").accepts_stale(&stale, now));
        assert!(cc("max-stale=30").accepts_stale(&stale, now));
        assert!(!cc("max-stale=29").accepts_stale(&stale, now));
        assert!(!cc("max-stale, max-age=100").accepts_stale(&stale, now));
        assert!(!cc("max-stale, no-cache").accepts_stale(&stale, now));
        let strict = StoredResponse {
            headers: vec![(
                header::CACHE_CONTROL,
                HeaderValue::from_static("max-age=100, must-revalidate"),
            )],
            ..stale
        };
        assert!(!cc("max-stale").accepts_stale(&strict, now));
        assert!(cc("max-stale=5").lenient() && !cc("min-fresh=1").lenient());
    }

    #[test]
    fn stale_while_revalidate_window() {
        let e = |cc: &'static str, age: u64| StoredResponse {
            key: String::new(),
            status: StatusCode::OK,
            headers: vec![(header::CACHE_CONTROL, HeaderValue::from_static(cc))],
            body: Bytes::new(),
            stored_at: Instant::now(),
            age_at_store: Duration::from_secs(age),
            lifetime: Duration::from_secs(60),
            filled: 0,
        };
        let swr = "max-age=60, stale-while-revalidate=30";
        assert!(e(swr, 89).stale_while_revalidate(e(swr, 89).stored_at));
        let late = e(swr, 90);
        assert!(!late.stale_while_revalidate(late.stored_at));
        let strict = e(
            "max-age=60, stale-while-revalidate=30, proxy-revalidate",
            70,
        );
        assert!(!strict.stale_while_revalidate(strict.stored_at));
        let none = e("max-age=60", 70);
        assert!(!none.stale_while_revalidate(none.stored_at));
    }

    #[test]
    fn validation_and_stale_if_error() {
        let entry = |pairs: &[(&'static str, &'static str)], age: u64| StoredResponse {
            key: String::new(),
            status: StatusCode::OK,
            headers: headers_to_store(&map(pairs)),
            body: Bytes::new(),
            stored_at: Instant::now(),
            age_at_store: Duration::from_secs(age),
            lifetime: Duration::from_secs(10),
            filled: 0,
        };
        let e = entry(
            &[
                ("etag", "\"x\""),
                ("last-modified", "Thu, 01 Jan 2026 00:00:00 GMT"),
            ],
            0,
        );
        assert_eq!(
            e.validator(),
            Some((header::IF_NONE_MATCH, HeaderValue::from_static("\"x\"")))
        );
        let e = entry(&[("last-modified", "Thu, 01 Jan 2026 00:00:00 GMT")], 0);
        assert_eq!(e.validator().unwrap().0, header::IF_MODIFIED_SINCE);
        assert_eq!(entry(&[], 0).validator(), None);
        let cc = |v: &'static str, age| entry(&[("cache-control", v)], age);
        let now = Instant::now();
        assert!(cc("max-age=10, stale-if-error=60", 20).stale_if_error(now));
        assert!(!cc("max-age=10, stale-if-error=60", 80).stale_if_error(now));
        assert!(!cc("max-age=10", 20).stale_if_error(now));
        for v in [
            "max-age=10, stale-if-error=60, must-revalidate",
            "max-age=10, stale-if-error=60, proxy-revalidate",
            "s-maxage=10, stale-if-error=60",
        ] {
            assert!(!cc(v, 20).stale_if_error(now), "{v}");
        }
        let stored = headers_to_store(&map(&[
            ("etag", "\"x\""),
            ("cache-control", "max-age=1"),
            ("content-type", "text/plain"),
        ]));
        let updated = updated_headers(
            &stored,
            &map(&[
                ("cache-control", "max-age=60"),
                ("content-length", "0"),
                ("connection", "close"),
                ("x-new", "1"),
            ]),
        );
        let get = |n: &str| {
            updated
                .iter()
                .filter(|(k, _)| k == n)
                .map(|(_, v)| v.to_str().unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(get("cache-control"), ["max-age=60"]);
        assert_eq!(get("etag"), ["\"x\""]);
        assert_eq!(get("content-type"), ["text/plain"]);
        assert_eq!(get("x-new"), ["1"]);
        assert!(get("content-length").is_empty() && get("connection").is_empty());
    }

    #[test]
    fn vary() {
        assert_eq!(vary_names(&HeaderMap::new()), Some(vec![]));
        let h = map(&[
            ("vary", "Accept-Encoding, accept-language"),
            ("vary", "accept-encoding"),
        ]);
        let names = vary_names(&h).unwrap();
        assert_eq!(names, ["accept-encoding", "accept-language"]);
        assert_eq!(vary_names(&map(&[("vary", "accept, *")])), None);
        let h = map(&[("cache-control", "max-age=60"), ("vary", "*")]);
        assert_eq!(storable_lifetime(false, StatusCode::OK, &h), None);
        let h = map(&[("cache-control", "max-age=60"), ("vary", "accept")]);
        assert!(storable_lifetime(false, StatusCode::OK, &h).is_some());
        let a = vary_suffix(&names, &map(&[("accept-encoding", "  gzip,   br ")]));
        let b = vary_suffix(&names, &map(&[("Accept-Encoding", "gzip, br")]));
        assert_eq!(a, b);
        assert_eq!(a, "\naccept-encoding=gzip, br\naccept-language=");
        assert_ne!(a, vary_suffix(&names, &map(&[("accept-encoding", "br")])));
        assert_eq!(vary_suffix(&[], &map(&[("accept", "x")])), "");
    }

    #[test]
    fn lifetimes() {
        let ok = StatusCode::OK;
        let h = map(&[("cache-control", "public, max-age=60, s-maxage=10")]);
        assert_eq!(
            storable_lifetime(false, ok, &h),
            Some(Duration::from_secs(10))
        );
        let h = map(&[("cache-control", "max-age=\"60\"")]);
        assert_eq!(
            storable_lifetime(false, ok, &h),
            Some(Duration::from_secs(60))
        );
        assert_eq!(storable_lifetime(true, ok, &h), None);
        assert_eq!(
            storable_lifetime(false, StatusCode::NOT_FOUND, &h),
            Some(Duration::from_secs(60))
        );
        let h = map(&[
            ("date", "Sun, 06 Nov 1994 08:49:37 GMT"),
            ("expires", "Sun, 06 Nov 1994 08:50:37 GMT"),
        ]);
        assert_eq!(
            storable_lifetime(false, ok, &h),
            Some(Duration::from_secs(60))
        );
        for cc in ["no-store", "private", "max-age=0", "no-cache, max-age=5"] {
            let mut h = HeaderMap::new();
            h.insert(header::CACHE_CONTROL, HeaderValue::from_str(cc).unwrap());
            assert_eq!(storable_lifetime(false, ok, &h), None, "{cc}");
        }
        assert_eq!(storable_lifetime(false, ok, &HeaderMap::new()), None);
        assert_eq!(origin_age(&map(&[("age", "7")])), Duration::from_secs(7));
        // Heuristic: 10% of the time since Last-Modified, at most a day; explicit wins.
        let h = map(&[
            ("date", "Sun, 06 Nov 1994 08:49:37 GMT"),
            ("last-modified", "Sun, 06 Nov 1994 07:49:37 GMT"),
        ]);
        assert_eq!(
            storable_lifetime(false, ok, &h),
            Some(Duration::from_secs(360))
        );
        let h = map(&[
            ("date", "Sun, 06 Nov 1994 08:49:37 GMT"),
            ("last-modified", "Thu, 01 Jan 1970 00:00:00 GMT"),
        ]);
        assert_eq!(storable_lifetime(false, ok, &h), Some(HEURISTIC_MAX));
        let h = map(&[
            ("last-modified", "Thu, 01 Jan 1970 00:00:00 GMT"),
            ("cache-control", "max-age=5"),
        ]);
        assert_eq!(
            storable_lifetime(false, ok, &h),
            Some(Duration::from_secs(5))
        );
        let h = map(&[("last-modified", "yesterday")]);
        assert_eq!(storable_lifetime(false, ok, &h), None);
    }

    /// `Set-Cookie` does not keep a response from being stored, and is replayed as received;
    /// `no-cache="set-cookie"` or `private="set-cookie, x-held"` withhold the fields they name
    /// (commas inside the quotes included); unqualified `private` / `no-cache` still refuse.
    #[test]
    fn set_cookie_is_stored_unless_withheld() {
        let ok = StatusCode::OK;
        let cookie = ("set-cookie", "id=1; Path=/; HttpOnly");
        let h = map(&[("cache-control", "max-age=60"), cookie]);
        assert!(storable_lifetime(false, ok, &h).is_some());
        assert!(headers_to_store(&h)
            .iter()
            .any(|(n, v)| n == header::SET_COOKIE && v == "id=1; Path=/; HttpOnly"));
        for cc in [
            "max-age=60, no-cache=\"set-cookie\"",
            "private=\"Set-Cookie, x-held\", max-age=60",
        ] {
            let h = map(&[("cache-control", cc), cookie, ("x-held", "1"), ("x-b", "2")]);
            assert!(storable_lifetime(false, ok, &h).is_some(), "{cc}");
            let stored: Vec<String> = headers_to_store(&h)
                .iter()
                .map(|(n, _)| n.to_string())
                .collect();
            assert!(
                !stored.contains(&"set-cookie".to_string()),
                "{cc}: {stored:?}"
            );
            assert!(stored.contains(&"x-b".to_string()), "{cc}");
            let held = cc.contains("x-held");
            assert_eq!(stored.contains(&"x-held".to_string()), !held, "{cc}");
        }
        for cc in ["private, max-age=60", "no-cache, max-age=60"] {
            let h = map(&[("cache-control", cc), cookie]);
            assert_eq!(storable_lifetime(false, ok, &h), None, "{cc}");
        }
    }

    /// Statuses: any with an explicit lifetime, a heuristic one only for the heuristically
    /// cacheable ones (or with `public`); never 1xx, 206, 304.
    #[test]
    fn statuses_other_than_200() {
        let explicit = map(&[("cache-control", "max-age=60")]);
        let lm = map(&[
            ("date", "Sun, 06 Nov 1994 08:49:37 GMT"),
            ("last-modified", "Sun, 06 Nov 1994 07:49:37 GMT"),
        ]);
        let public = map(&[
            ("date", "Sun, 06 Nov 1994 08:49:37 GMT"),
            ("last-modified", "Sun, 06 Nov 1994 07:49:37 GMT"),
            ("cache-control", "public"),
        ]);
        let code = |c: u16| StatusCode::from_u16(c).unwrap();
        for c in HEURISTICALLY_CACHEABLE {
            assert!(storable_lifetime(false, code(c), &lm).is_some(), "{c}");
            assert!(
                storable_lifetime(false, code(c), &explicit).is_some(),
                "{c}"
            );
        }
        for c in [201, 302, 303, 307, 403, 500, 502, 503] {
            assert_eq!(storable_lifetime(false, code(c), &lm), None, "{c}");
            assert!(
                storable_lifetime(false, code(c), &explicit).is_some(),
                "{c}"
            );
            assert!(storable_lifetime(false, code(c), &public).is_some(), "{c}");
        }
        for c in [100, 103, 206, 304] {
            assert_eq!(storable_lifetime(false, code(c), &explicit), None, "{c}");
        }
    }

    /// An `Expires` that is not one valid IMF-fixdate means "already expired": no heuristic
    /// lifetime from `Last-Modified` instead.
    #[test]
    fn invalid_or_repeated_expires_is_already_expired() {
        let ok = StatusCode::OK;
        let lm = ("last-modified", "Sun, 06 Nov 1994 07:49:37 GMT");
        let date = ("date", "Sun, 06 Nov 1994 08:49:37 GMT");
        for expires in [
            "Sun, 06 Nov 1994 8:50:37 GMT",
            "Sunday, 06-Nov-94 08:50:37 GMT",
            "0",
            "",
        ] {
            let h = map(&[date, lm, ("expires", expires)]);
            assert_eq!(storable_lifetime(false, ok, &h), None, "{expires:?}");
        }
        let later = ("expires", "Sun, 06 Nov 1994 09:49:37 GMT");
        let h = map(&[date, lm, later, later]);
        assert_eq!(storable_lifetime(false, ok, &h), None, "two Expires lines");
        let h = map(&[date, lm, later]);
        assert_eq!(
            storable_lifetime(false, ok, &h),
            Some(Duration::from_secs(3600))
        );
    }

    /// `Age`: the first member of a list; a non-integer is ignored.
    #[test]
    fn age_takes_the_first_member_and_ignores_junk() {
        let secs = |pairs: &[(&'static str, &'static str)]| origin_age(&map(pairs)).as_secs();
        assert_eq!(secs(&[("age", "3600, 0")]), 3600);
        assert_eq!(secs(&[("age", "0, 3600")]), 0);
        assert_eq!(secs(&[("age", "3600"), ("age", "0")]), 3600);
        assert_eq!(secs(&[("age", "3600a")]), 0);
        assert_eq!(secs(&[("age", "-5")]), 0);
        assert_eq!(secs(&[("age", "1.5")]), 0);
        assert_eq!(secs(&[]), 0);
        assert_eq!(secs(&[("age", "99999999999999999999999")]), u64::MAX);
    }
}
