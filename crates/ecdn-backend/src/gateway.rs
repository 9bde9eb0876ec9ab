//! An HTTP origin in front of the backend tier: `GET` and `HEAD /KEY` answered from the object
//! store through the [`Proxy`], so a cache node fills its misses with TOFEC's reads. `ecdn
//! node --origin s3://BUCKET/PREFIX` serves this in process (over an in-memory connection);
//! `ecdn backend gateway` serves it on a port.
//!
//! * The key is the request's path without its leading `/` (percent-decoded), under the
//!   store's prefix.
//! * `HEAD` asks the object's head (cached by the proxy). `GET` reads the whole object (coded
//!   files decoded and checked against their SHA-256), then answers it or the one range a
//!   `Range: bytes=…` asks for (`206`; several ranges: the whole object).
//! * The answer carries `Content-Length`, `ETag` and `Last-Modified` from the store,
//!   `Cache-Control` from the configuration, and `X-Ecdn-Code: n/k`, the code the read used.
//!   `If-None-Match` with the current `ETag`: `304`.
//! * No such object: `404`; a store that fails (or too few chunks): `502` with the reason.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;

use crate::proxy::{Proxy, ProxyError};
use crate::strips::Manifest;

/// How the gateway answers.
#[derive(Clone, Debug, Default)]
pub struct GatewayConfig {
    /// `Cache-Control` of every answer (none: none).
    pub cache_control: Option<String>,
}

/// Serves one connection.
pub async fn serve_connection<IO>(io: IO, proxy: Proxy, cfg: Arc<GatewayConfig>)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
        let (proxy, cfg) = (proxy.clone(), cfg.clone());
        async move { Ok::<_, Infallible>(handle(&proxy, &cfg, req).await) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(io), svc)
        .await;
}

/// Serves on `listener` until `shutdown`.
pub async fn serve(
    listener: TcpListener,
    proxy: Proxy,
    cfg: GatewayConfig,
    shutdown: impl Future<Output = ()>,
) {
    let cfg = Arc::new(cfg);
    crate::http::accept_loop(listener, shutdown, |stream| {
        tokio::spawn(serve_connection(stream, proxy.clone(), cfg.clone()));
    })
    .await;
}

fn text(status: StatusCode, msg: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(format!("{msg}\n"))));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// The object key of a request path: without its leading `/`, percent-decoded; `None` for an
/// empty key, bad escapes or `.`/`..` segments.
pub fn key_of(path: &str) -> Option<String> {
    let key = crate::http::percent_decode(path.strip_prefix('/')?)?;
    let bad = key.is_empty() || key.split('/').any(|s| s == ".." || s == ".");
    (!bad).then_some(key)
}

fn error(e: ProxyError) -> Response<Full<Bytes>> {
    match e {
        ProxyError::NotFound(k) => text(StatusCode::NOT_FOUND, &format!("{k}: no such object")),
        e => text(StatusCode::BAD_GATEWAY, &e.to_string()),
    }
}

/// The single range of `Range: bytes=…` within `size` bytes, if there is one: `(start, end)`,
/// or `Err` when it cannot be satisfied.
pub fn single_range(v: Option<&HeaderValue>, size: u64) -> Option<Result<(u64, u64), ()>> {
    let spec = v?.to_str().ok()?.strip_prefix("bytes=")?.trim();
    if spec.contains(',') {
        return None;
    }
    let (a, b) = spec.split_once('-')?;
    Some(match (a.trim().parse::<u64>(), b.trim().parse::<u64>()) {
        (Ok(a), Ok(b)) if a <= b && a < size => Ok((a, (b + 1).min(size))),
        (Ok(a), Err(_)) if b.trim().is_empty() && a < size => Ok((a, size)),
        (Err(_), Ok(n)) if a.trim().is_empty() && n > 0 && size > 0 => {
            Ok((size.saturating_sub(n), size))
        }
        _ => Err(()),
    })
}

async fn handle(
    proxy: &Proxy,
    cfg: &GatewayConfig,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let head_only = match *req.method() {
        Method::GET => false,
        Method::HEAD => true,
        _ => {
            let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "GET and HEAD only");
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return r;
        }
    };
    let Some(key) = key_of(req.uri().path()) else {
        return text(StatusCode::BAD_REQUEST, "the path must name an object");
    };
    let head = match proxy.head(&key).await {
        Ok(Some(h)) => h,
        Ok(None) => return error(ProxyError::NotFound(key)),
        Err(e) => return error(e),
    };
    let size = match head.manifest.as_deref().map(Manifest::from_metadata) {
        Some(Ok(m)) => m.size,
        Some(Err(e)) => return text(StatusCode::BAD_GATEWAY, &format!("{key}: {e}")),
        None => head.size,
    };
    let etag = head.etag.clone();
    let not_modified = match (&etag, req.headers().get(header::IF_NONE_MATCH)) {
        (Some(e), Some(inm)) => inm
            .to_str()
            .map(|v| v.split(',').any(|t| t.trim() == e || t.trim() == "*"))
            .unwrap_or(false),
        _ => false,
    };
    let mut status = StatusCode::OK;
    let mut body = Bytes::new();
    let mut range_header = None;
    let mut code = None;
    if not_modified {
        status = StatusCode::NOT_MODIFIED;
    } else if !head_only {
        let (bytes, served) = match proxy.read(&key).await {
            Ok(x) => x,
            Err(e) => return error(e),
        };
        code = Some(format!("{}/{}", served.n, served.k));
        body = bytes;
        match single_range(req.headers().get(header::RANGE), size) {
            Some(Ok((a, b))) => {
                status = StatusCode::PARTIAL_CONTENT;
                range_header = Some(format!("bytes {a}-{}/{size}", b - 1));
                body = body.slice(a as usize..b as usize);
            }
            Some(Err(())) => {
                let mut r = text(StatusCode::RANGE_NOT_SATISFIABLE, "range not satisfiable");
                if let Ok(v) = HeaderValue::from_str(&format!("bytes */{size}")) {
                    r.headers_mut().insert(header::CONTENT_RANGE, v);
                }
                return r;
            }
            None => {}
        }
    }
    let length = if head_only { size } else { body.len() as u64 };
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    let h = r.headers_mut();
    let mut put = |name: header::HeaderName, v: &str| {
        if let Ok(v) = HeaderValue::from_str(v) {
            h.insert(name, v);
        }
    };
    if status != StatusCode::NOT_MODIFIED {
        put(header::CONTENT_LENGTH, &length.to_string());
        put(header::CONTENT_TYPE, "application/octet-stream");
    }
    put(header::ACCEPT_RANGES, "bytes");
    if let Some(e) = &etag {
        put(header::ETAG, e);
    }
    if let Some(t) = head.last_modified.filter(|t| *t >= 0) {
        let when = SystemTime::UNIX_EPOCH + Duration::from_secs(t as u64);
        put(header::LAST_MODIFIED, &crate::emulator::http_date(when));
    }
    if let Some(cc) = &cfg.cache_control {
        put(header::CACHE_CONTROL, cc);
    }
    if let Some(cr) = &range_header {
        put(header::CONTENT_RANGE, cr);
    }
    if let Some(c) = &code {
        put(header::HeaderName::from_static("x-ecdn-code"), c);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_ranges() {
        assert_eq!(key_of("/a/b%20c"), Some("a/b c".into()));
        assert_eq!(key_of("/"), None);
        assert_eq!(key_of("/a/../b"), None);
        assert_eq!(key_of("/%ff"), None);
        let v = |s: &str| HeaderValue::from_str(s).unwrap();
        assert_eq!(single_range(Some(&v("bytes=0-9")), 100), Some(Ok((0, 10))));
        assert_eq!(
            single_range(Some(&v("bytes=-10")), 100),
            Some(Ok((90, 100)))
        );
        assert_eq!(single_range(Some(&v("bytes=0-1,5-6")), 100), None);
        assert_eq!(single_range(Some(&v("bytes=100-")), 100), Some(Err(())));
    }
}
