//! `ecdn origin`: a synthetic origin server. `GET /obj/<id>?size=<bytes>` answers with the
//! object's deterministic content ([`crate::content`]), so objects of any size cost nothing to
//! store and every byte can be verified. Other methods than `GET` and `HEAD` get `405`, or
//! the status of an `X-Origin-Status` request header (and its `X-Origin-Location` as
//! `Location`).
//!
//! Per request, in the query: `size=` (bytes, units allowed: `size=8MiB`; default from the
//! config), `cc=` (a Cache-Control value replacing the configured one, `cc=` alone for none),
//! `status=` (answer with this status and a short text body, to test error handling; with
//! `cc=` its only Cache-Control, else none), `vary=`
//! (a `Vary` header value to add, percent-decoded like `cc=`; the content does not change),
//! `cdn-cc=` and `ecdn-cc=` (`CDN-Cache-Control` and `Ecdn-Cache-Control` values, likewise),
//! `h=Name:value` (any header, repeatable, likewise; an invalid one makes the answer a `500`),
//! `abort=` (bytes: the body breaks off with an error after that many bytes, the connection
//! cut mid-body, to test what a cache does with an origin that dies).
//! Responses carry `Content-Length`, `Cache-Control` (default `public, max-age=3600`), an `ETag`
//! derived from id and size, a fixed `Last-Modified`, and `Accept-Ranges: bytes`. `HEAD`,
//! `If-None-Match` (304), `If-Range` with the ETag, and byte ranges (206, 416 when
//! unsatisfiable; several ranges get one `multipart/byteranges` answer, built in memory; a
//! range list [`crate::range`] ignores gets the whole object) are supported. The
//! configured latency delays the response headers; the configured bandwidth paces the body,
//! which is generated in frames as it is sent.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::content;
use crate::range::{self, Ranges};

/// Origin settings.
#[derive(Clone, Debug)]
pub struct OriginConfig {
    /// Cache-Control of every response unless the request's `cc=` says otherwise.
    pub cache_control: String,
    /// Object size when the request has no `size=`.
    pub default_size: u64,
    /// Delay before the response headers.
    pub latency: Duration,
    /// Body pacing in bytes per second (`None`: as fast as the connection takes it).
    pub bandwidth: Option<u64>,
    /// Body frame size in bytes.
    pub frame: usize,
}

impl Default for OriginConfig {
    fn default() -> Self {
        OriginConfig {
            cache_control: "public, max-age=3600".into(),
            default_size: 16 << 10,
            latency: Duration::ZERO,
            bandwidth: None,
            frame: 64 << 10,
        }
    }
}

/// The fixed Last-Modified of every object.
pub const LAST_MODIFIED: &str = "Thu, 01 Jan 2026 00:00:00 GMT";

/// The body of an origin response: generated object content, or a fixed text.
pub enum OriginBody {
    Content(ContentBody),
    Fixed(Option<Bytes>),
}

/// Object content `[pos, end)` generated frame by frame, paced to a bandwidth if set.
pub struct ContentBody {
    id: u64,
    pos: u64,
    end: u64,
    frame: usize,
    rate: Option<u64>,
    started: Option<Instant>,
    sent: u64,
    pause: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Break off with an error once this many bytes are sent.
    abort_at: Option<u64>,
}

impl Body for OriginBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.get_mut() {
            OriginBody::Fixed(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            OriginBody::Content(c) => c.poll_next(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            OriginBody::Fixed(b) => b.is_none(),
            OriginBody::Content(c) => c.pos >= c.end,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            OriginBody::Fixed(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            OriginBody::Content(c) => SizeHint::with_exact(c.end - c.pos),
        }
    }
}

impl ContentBody {
    fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        if self.pos >= self.end {
            return Poll::Ready(None);
        }
        if self.abort_at.is_some_and(|a| self.sent >= a) {
            return Poll::Ready(Some(Err(std::io::Error::other("abort= in the query"))));
        }
        if let Some(rate) = self.rate {
            let started = *self.started.get_or_insert_with(Instant::now);
            let due = started + Duration::from_secs_f64(self.sent as f64 / rate as f64);
            if due > Instant::now() {
                let pause = self
                    .pause
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due.into())));
                if pause.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
            }
            self.pause = None;
        }
        let mut n = (self.end - self.pos).min(self.frame as u64) as usize;
        if let Some(a) = self.abort_at {
            n = n.min(a.saturating_sub(self.sent).max(1) as usize);
        }
        let mut buf = vec![0u8; n];
        content::fill(self.id, self.pos, &mut buf);
        self.pos += n as u64;
        self.sent += n as u64;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(buf)))))
    }
}

fn query_param<'a>(query: &'a str, key: &str) -> Option<&'a str> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == key).then_some(v)
    })
}

/// The value of one hexadecimal digit.
fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// Minimal percent-decoding (`%2C`, `+` for space) for the `cc=` parameter.
fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            // On bytes, not `&str` slices: the two bytes after a `%` may split a UTF-8
            // character (found by the fuzz target `http_request`).
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(hi), Some(lo)) => {
                    out.push(hi << 4 | lo);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn text(status: StatusCode, msg: &str) -> Response<OriginBody> {
    let mut r = Response::new(OriginBody::Fixed(Some(Bytes::from(format!("{msg}\n")))));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// Connections to this origin over in-memory pipes, for tests and fuzzing: each connection the
/// node opens is a `tokio::io::duplex` pipe served by [`handle`] on a task of its own (the
/// authority asked for is ignored).
pub fn in_memory_connector(cfg: OriginConfig) -> crate::node::Connector {
    let cfg = Arc::new(cfg);
    Arc::new(move |_authority: String| -> crate::node::Connecting {
        let cfg = cfg.clone();
        Box::pin(async move {
            let (node_end, origin_end) = tokio::io::duplex(1 << 16);
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| {
                    let cfg = cfg.clone();
                    async move { Ok::<_, Infallible>(handle(req, cfg).await) }
                });
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(origin_end), svc)
                    .await
                    .ok();
            });
            Ok(Box::new(node_end) as Box<dyn crate::node::OriginIo>)
        })
    })
}

/// The response header that echoes the request's `X-Request-Id` (so tests can see which
/// request id reached the origin).
pub const SAW_REQUEST_ID: &str = "x-origin-saw-request-id";

/// Answers one request; a request with `X-Request-Id` gets it back as [`SAW_REQUEST_ID`].
pub async fn handle<B>(req: Request<B>, cfg: Arc<OriginConfig>) -> Response<OriginBody> {
    let id = req.headers().get("x-request-id").cloned();
    let mut r = answer(req, cfg).await;
    if let Some(id) = id {
        r.headers_mut().insert(SAW_REQUEST_ID, id);
    }
    r
}

async fn answer<B>(req: Request<B>, cfg: Arc<OriginConfig>) -> Response<OriginBody> {
    if !cfg.latency.is_zero() {
        tokio::time::sleep(cfg.latency).await;
    }
    let head = req.method() == Method::HEAD;
    if req.method() != Method::GET && !head {
        // A test may ask for another answer: `X-Origin-Status`, with `X-Origin-Location` as
        // its `Location`.
        let asked = req
            .headers()
            .get("x-origin-status")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u16>().ok())
            .and_then(|c| StatusCode::from_u16(c).ok());
        if let Some(status) = asked {
            let mut r = text(status, "status requested by the request");
            if let Some(l) = req.headers().get("x-origin-location") {
                r.headers_mut().insert(header::LOCATION, l.clone());
            }
            return r;
        }
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD");
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let path = req.uri().path();
    let Some(name) = path
        .strip_prefix("/obj/")
        .filter(|n| !n.is_empty() && !n.contains('/'))
    else {
        return text(StatusCode::NOT_FOUND, "no such object: paths are /obj/<id>");
    };
    let id = content::object_id(name);
    let query = req.uri().query().unwrap_or("");
    if let Some(s) = query_param(query, "status") {
        return match s
            .parse::<u16>()
            .ok()
            .and_then(|c| StatusCode::from_u16(c).ok())
        {
            Some(code) => {
                let mut r = text(code, "status requested by the query");
                // `cc=` gives it a Cache-Control (none by default).
                if let Some(v) = query_param(query, "cc")
                    .map(decode)
                    .and_then(|v| HeaderValue::from_str(&v).ok())
                {
                    r.headers_mut().insert(header::CACHE_CONTROL, v);
                }
                r
            }
            None => text(
                StatusCode::BAD_REQUEST,
                "status= must be an HTTP status code",
            ),
        };
    }
    let size = match query_param(query, "size") {
        Some(s) => match ecdn_trace::units::parse_size(s) {
            Ok(v) => v,
            Err(e) => return text(StatusCode::BAD_REQUEST, &e),
        },
        None => cfg.default_size,
    };
    let abort_at = match query_param(query, "abort").map(ecdn_trace::units::parse_size) {
        None => None,
        Some(Ok(v)) => Some(v),
        Some(Err(e)) => return text(StatusCode::BAD_REQUEST, &e),
    };
    let cache_control = match query_param(query, "cc") {
        Some(v) => decode(v),
        None => cfg.cache_control.clone(),
    };
    let etag = format!("\"{id:x}-{size:x}\"");
    let mut builder = Response::builder()
        .header(header::ETAG, &etag)
        .header(header::LAST_MODIFIED, LAST_MODIFIED)
        .header(header::ACCEPT_RANGES, "bytes");
    if !cache_control.is_empty() {
        builder = builder.header(header::CACHE_CONTROL, &cache_control);
    }
    if let Some(v) = query_param(query, "vary").map(decode) {
        builder = builder.header(header::VARY, v);
    }
    for (param, field) in [
        ("cdn-cc", "cdn-cache-control"),
        ("ecdn-cc", "ecdn-cache-control"),
    ] {
        if let Some(v) = query_param(query, param).map(decode) {
            builder = builder.header(field, v);
        }
    }
    // `h=Name:value`, repeatable: any header, added as given (percent-decoded).
    for kv in query.split('&') {
        let Some(("h", v)) = kv.split_once('=') else {
            continue;
        };
        let v = decode(v);
        if let Some((name, value)) = v.split_once(':') {
            builder = builder.header(name.trim(), value.trim());
        }
    }
    let inm = req
        .headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok());
    if inm.is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*")) {
        return builder
            .status(StatusCode::NOT_MODIFIED)
            .body(OriginBody::Fixed(None))
            .unwrap_or_else(|_| text(StatusCode::INTERNAL_SERVER_ERROR, "bad header"));
    }
    // An `If-Range` naming another validator: the whole object (RFC 9110 §13.1.5).
    let if_range_holds = req
        .headers()
        .get(header::IF_RANGE)
        .is_none_or(|v| v.to_str().is_ok_and(|v| v.trim() == etag));
    let range = req
        .headers()
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .filter(|_| if_range_holds)
        .map_or(Ranges::Ignore, |h| range::parse(h, size));
    let (status, start, end) = match range {
        Ranges::Unsatisfiable => {
            return builder
                .status(StatusCode::RANGE_NOT_SATISFIABLE)
                .header(header::CONTENT_RANGE, format!("bytes */{size}"))
                .body(OriginBody::Fixed(None))
                .unwrap_or_else(|_| text(StatusCode::INTERNAL_SERVER_ERROR, "bad header"));
        }
        // One range: 206 with Content-Range.
        Ranges::Satisfiable(v) if v.len() == 1 => {
            let r = &v[0];
            builder = builder.header(header::CONTENT_RANGE, range::content_range(r, size));
            (StatusCode::PARTIAL_CONTENT, r.start, r.end)
        }
        // Several: one multipart/byteranges body.
        Ranges::Satisfiable(v) => {
            let bytes: Vec<Vec<u8>> = v
                .iter()
                .map(|r| content::bytes(id, r.start, (r.end - r.start) as usize))
                .collect();
            let parts: Vec<(std::ops::Range<u64>, &[u8])> = v
                .iter()
                .cloned()
                .zip(bytes.iter().map(Vec::as_slice))
                .collect();
            let boundary = format!("ecdn-origin-{id:016x}");
            let (body, content_type) = crate::multipart::write_byteranges(
                &parts,
                size,
                Some("application/octet-stream"),
                &boundary,
            );
            return builder
                .status(StatusCode::PARTIAL_CONTENT)
                .header(header::CONTENT_TYPE, content_type)
                .header(header::CONTENT_LENGTH, body.len())
                .body(OriginBody::Fixed((!head).then(|| Bytes::from(body))))
                .unwrap_or_else(|_| text(StatusCode::INTERNAL_SERVER_ERROR, "bad header"));
        }
        _ => (StatusCode::OK, 0, size),
    };
    let body = if head {
        OriginBody::Fixed(None)
    } else {
        OriginBody::Content(ContentBody {
            id,
            pos: start,
            end,
            frame: cfg.frame.max(1),
            rate: cfg.bandwidth.filter(|&b| b > 0),
            started: None,
            sent: 0,
            pause: None,
            abort_at,
        })
    };
    builder
        .status(status)
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .header(header::CONTENT_LENGTH, end - start)
        .body(body)
        .unwrap_or_else(|_| text(StatusCode::INTERNAL_SERVER_ERROR, "bad header"))
}

/// Serves connections from `listener` until `shutdown` completes; connections already open
/// finish their current exchange.
pub async fn serve(
    listener: TcpListener,
    cfg: OriginConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    serve_counted(listener, cfg, shutdown, Arc::default()).await
}

/// [`serve`], counting the requests received in `requests`.
async fn serve_counted(
    listener: TcpListener,
    cfg: OriginConfig,
    shutdown: impl Future<Output = ()>,
    requests: Arc<AtomicU64>,
) -> std::io::Result<()> {
    let cfg = Arc::new(cfg);
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            _ = &mut shutdown => return Ok(()),
            r = listener.accept() => match r {
                Ok(c) => c,
                // Out of file descriptors and the like: back off instead of spinning.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let cfg = cfg.clone();
        let requests = requests.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let cfg = cfg.clone();
                requests.fetch_add(1, Ordering::Relaxed);
                async move { Ok::<_, Infallible>(handle(req, cfg).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

/// A running origin (for tests and the demo): its address and a handle that stops it.
pub struct Origin {
    pub addr: SocketAddr,
    requests: Arc<AtomicU64>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Origin {
    /// Binds `addr` (port 0 for any free port) and serves on the current Tokio runtime.
    pub async fn start(addr: SocketAddr, cfg: OriginConfig) -> std::io::Result<Origin> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let requests = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(serve_counted(
            listener,
            cfg,
            async {
                let _ = rx.await;
            },
            requests.clone(),
        ));
        Ok(Origin {
            addr,
            requests,
            stop: Some(tx),
            task,
        })
    }

    /// Requests received so far (every method, every path).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// The counter behind [`Origin::requests`], to read from another thread or runtime.
    pub fn request_counter(&self) -> Arc<AtomicU64> {
        self.requests.clone()
    }

    /// Stops accepting connections and waits for the accept loop to end.
    pub async fn stop(mut self) -> std::io::Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        match (&mut self.task).await {
            Ok(r) => r,
            Err(e) => Err(std::io::Error::other(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query() {
        assert_eq!(decode("no-store%2C+private"), "no-store, private");
        assert_eq!(decode("50%"), "50%");
        assert_eq!(decode("%zz%4"), "%zz%4");
        // A `%` followed by the bytes of a multi-byte character: kept as it is, no panic.
        assert_eq!(decode("a%2\u{5c9}b"), "a%2\u{5c9}b");
        assert_eq!(decode("%\u{5c9}"), "%\u{5c9}");
        assert_eq!(query_param("a=1&size=10&cc=", "cc"), Some(""));
        assert_eq!(query_param("a=1&size=10", "size"), Some("10"));
    }

    async fn get(range: &str, if_range: Option<&str>) -> (StatusCode, hyper::HeaderMap, Bytes) {
        use http_body_util::BodyExt;
        let mut b = Request::get("/obj/7?size=1000").header(header::RANGE, range);
        if let Some(v) = if_range {
            b = b.header(header::IF_RANGE, v);
        }
        let resp = handle(b.body(()).unwrap(), Arc::new(OriginConfig::default())).await;
        let (parts, body) = resp.into_parts();
        let body = body.collect().await.ok().unwrap().to_bytes();
        (parts.status, parts.headers, body)
    }

    #[tokio::test]
    async fn several_ranges_get_one_multipart_answer_unless_if_range_fails() {
        let id = content::object_id("7");
        let (status, h, body) = get("bytes=0-9,500-599,990-", None).await;
        assert_eq!(status, StatusCode::PARTIAL_CONTENT);
        let ct = h[header::CONTENT_TYPE].to_str().unwrap();
        assert_eq!(h[header::CONTENT_LENGTH], body.len().to_string().as_str());
        let b = crate::multipart::boundary(ct).unwrap();
        let parts = crate::multipart::parse_byteranges(&body, &b, 16).unwrap();
        let got: Vec<_> = parts.iter().map(|p| p.range.clone()).collect();
        assert_eq!(got, vec![0..10, 500..600, 990..1000]);
        for p in &parts {
            let want = content::bytes(id, p.range.start, p.body.len());
            assert_eq!(p.body, &want[..]);
            assert_eq!(p.complete_length, Some(1000));
        }
        // If-Range with the current ETag: ranges; with another: the whole object.
        let etag = h[header::ETAG].to_str().unwrap().to_string();
        let (status, _, _) = get("bytes=0-9,20-29", Some(&etag)).await;
        assert_eq!(status, StatusCode::PARTIAL_CONTENT);
        let (status, _, body) = get("bytes=0-9,20-29", Some("\"other\"")).await;
        assert_eq!((status, body.len()), (StatusCode::OK, 1000));
    }
}
