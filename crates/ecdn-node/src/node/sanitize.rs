//! Sanitize: the request target checked and normalised before anything else sees it.
//!
//! # Hostile clients
//!
//! * Limits ([`super::NodeConfig`]): request head size (`max_header_bytes`, `431`), header count
//!   (`max_headers`, `431`), request-target length (`max_uri_len`, `414`, checked here),
//!   concurrent connections (`max_connections`; extra ones are accepted and closed at once),
//!   and the time to send a request head (`header_read_timeout`, also the keep-alive idle
//!   timeout; the connection is closed). The head size and count limits and the timeout are
//!   hyper's own (`max_buf_size`, `max_headers`, `header_read_timeout`, set in
//!   [`super::server`]); a `431` or a timeout closes the connection.
//! * Request smuggling: hyper refuses a request with both `Content-Length` and
//!   `Transfer-Encoding`, several differing `Content-Length`s, or a `Transfer-Encoding` not
//!   ending in `chunked`, with `400`, and closes the connection. Hop-by-hop headers and the
//!   client's `Content-Length` are never forwarded to the origin ([`super::upstream`]).
//! * The path is normalised before routing, for the cache key and the origin request alike
//!   (dot segments, percent-escapes of unreserved characters, upper-case escapes); a path
//!   climbing above the root or with an escaped control character is a `400`. Exactly what is
//!   normalised is in [`normalize`]. A `400` / `414` of ours closes the connection.
//! * A client that disconnects mid-transfer never leaves a partial object cached (see
//!   [`super::flight`]).

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};

use super::answer::text;
use super::body::NodeBody;
use super::normalize;

/// A `4xx` for a request refused before any processing; the connection is closed after it.
fn reject(status: StatusCode, msg: &str) -> Response<NodeBody> {
    let mut r = text(status, msg);
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// Applies [`super::NodeConfig::max_uri_len`] and the path normalisation ([`normalize`]) to the
/// request target: the normalised request, or the answer refusing it.
#[allow(clippy::result_large_err)]
pub(super) fn sanitize(
    req: Request<Incoming>,
    max_uri_len: usize,
) -> Result<Request<Incoming>, Response<NodeBody>> {
    let uri = req.uri();
    let len = uri.authority().map_or(0, |a| a.as_str().len())
        + uri.path_and_query().map_or(0, |pq| pq.as_str().len());
    if len > max_uri_len {
        return Err(reject(StatusCode::URI_TOO_LONG, "request target too long"));
    }
    if normalize::is_normal(uri.path()) {
        return Ok(req);
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
