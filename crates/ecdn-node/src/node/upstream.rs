//! Upstream: the origins, chosen by the request's Host, and the exchanges with them.
//!
//! The origin is the route of the request's Host ([`NodeConfig::routes`], matched without port
//! and case), else the default origin; with neither, the node answers `421 Misdirected Request`
//! before any lookup. Each fetch opens a fresh connection (no pool yet). Hop-by-hop headers
//! (including `Transfer-Encoding`, `TE`, `Upgrade`, those named in `Connection`) and the
//! client's `Content-Length` are never forwarded to the origin: hyper frames the origin request
//! from the decoded body. An unreachable origin is a `502`; no response headers within
//! [`NodeConfig::origin_timeout`] (connect + headers) a `504` ([`FetchError::answer`]).
//!
//! Every answer's targeted cache-control fields are replaced here by the directives that apply
//! ([`super::targeted::apply`]).
//!
//! This file takes an [`Upstream`] (the origins and the timeout), never the node's whole state,
//! so the cluster's peer fetches can use it alike.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::answer::{text, Answer, ReqBody, VIA};
use super::body::NodeBody;
use super::config::NodeConfig;
use super::freshness;
use super::outcome::Outcome;

/// A connection to an origin: any byte stream.
pub trait OriginIo: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}

impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> OriginIo for T {}

/// A connection being opened.
pub type Connecting = Pin<Box<dyn Future<Output = io::Result<Box<dyn OriginIo>>> + Send>>;

/// How the node opens a connection to an origin, given its `host:port`: TCP
/// ([`tcp_connector`]) unless [`super::Node::start_with_connector`] says otherwise (in-memory
/// origins for tests and fuzzing).
pub type Connector = Arc<dyn Fn(String) -> Connecting + Send + Sync>;

/// The default [`Connector`]: a TCP connection with `TCP_NODELAY`.
pub fn tcp_connector() -> Connector {
    Arc::new(|authority: String| -> Connecting {
        Box::pin(async move {
            let stream = TcpStream::connect(&authority).await?;
            stream.set_nodelay(true)?;
            Ok(Box::new(stream) as Box<dyn OriginIo>)
        })
    })
}

/// Where requests go on a miss, and how long the node waits for them.
pub(super) struct Upstream {
    origins: Origins,
    connect: Connector,
    /// The targeted cache-control fields honoured ([`super::targeted`]).
    targeted: Vec<hyper::header::HeaderName>,
    /// Limit on an origin's response headers, and on the wait for each body frame
    /// ([`NodeConfig::origin_timeout`]).
    pub(super) timeout: Duration,
}

impl Upstream {
    pub(super) fn new(cfg: &NodeConfig, connect: Connector) -> io::Result<Upstream> {
        Ok(Upstream {
            origins: Origins::new(cfg)?,
            connect,
            targeted: cfg.targeted_cache_control.clone(),
            timeout: cfg.origin_timeout,
        })
    }

    /// Whether an origin serves the request's Host.
    pub(super) fn serves<B>(&self, req: &Request<B>) -> bool {
        self.origins.for_request(req).is_some()
    }

    /// Sends `req` to the origin over a fresh connection and buffers the answer, all within
    /// the origin timeout.
    pub(super) async fn fetch(&self, req: Request<ReqBody>) -> Result<Fetched, FetchError> {
        let exchange = async {
            let (p, body) = self.send(req).await?;
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
        self.within_timeout(exchange).await
    }

    /// `exchange`, or [`FetchError::Timeout`] once the origin timeout has passed.
    async fn within_timeout<T>(
        &self,
        exchange: impl std::future::Future<Output = Result<T, FetchError>>,
    ) -> Result<T, FetchError> {
        tokio::time::timeout(self.timeout, exchange)
            .await
            .unwrap_or(Err(FetchError::Timeout))
    }

    /// Sends `req` to the origin over a fresh connection; the answer's head within the origin
    /// timeout, its body to be read.
    pub(super) async fn fetch_head(
        &self,
        req: Request<ReqBody>,
    ) -> Result<(hyper::http::response::Parts, Incoming), FetchError> {
        self.within_timeout(self.send(req)).await
    }

    /// [`Upstream::fetch_head`] from `authority` (`host:port`) instead of the request's
    /// origin: another site's node ([`super::sites`]).
    pub(super) async fn fetch_head_from(
        &self,
        authority: &str,
        req: Request<ReqBody>,
    ) -> Result<(hyper::http::response::Parts, Incoming), FetchError> {
        self.within_timeout(self.send_to(authority.to_string(), req))
            .await
    }

    async fn send(
        &self,
        req: Request<ReqBody>,
    ) -> Result<(hyper::http::response::Parts, Incoming), FetchError> {
        let origin = self
            .origins
            .for_request(&req)
            .ok_or_else(|| FetchError::Unreachable("no origin for this host".into()))?
            .to_string();
        self.send_to(origin, req).await
    }

    async fn send_to(
        &self,
        origin: String,
        req: Request<ReqBody>,
    ) -> Result<(hyper::http::response::Parts, Incoming), FetchError> {
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
        let stream = (self.connect)(origin).await.map_err(|e| unreachable(&e))?;
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| unreachable(&e))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let resp = send.send_request(out).await.map_err(|e| unreachable(&e))?;
        let (mut parts, body) = resp.into_parts();
        super::targeted::apply(&mut parts.headers, &self.targeted);
        Ok((parts, body))
    }
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
pub(super) fn request_host<B>(req: &Request<B>) -> &str {
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

/// An origin answer, buffered.
pub(super) struct Fetched {
    pub(super) status: StatusCode,
    pub(super) headers: HeaderMap,
    pub(super) body: Bytes,
}

/// Whether an answer with `status` has a body (RFC 9110 §6.4.1).
pub(super) fn has_body(status: StatusCode) -> bool {
    !(status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED)
}

impl Fetched {
    /// The client's answer: end-to-end headers, our `Content-Length`; no body for a `HEAD`.
    pub(super) fn answer(self, head: bool) -> Response<NodeBody> {
        let conn = freshness::connection_tokens(&self.headers);
        let mut headers = HeaderMap::with_capacity(self.headers.len() + 3);
        for (n, v) in &self.headers {
            if !freshness::is_hop_by_hop(n, &conn) {
                headers.append(n.clone(), v.clone());
            }
        }
        if !head && has_body(self.status) {
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(self.body.len()));
        }
        let body = if head { Bytes::new() } else { self.body };
        let mut r = Response::new(NodeBody::Full(Full::new(body)));
        *r.status_mut() = self.status;
        *r.headers_mut() = headers;
        r
    }
}

/// A `Content-Length` header's value, if valid.
pub(super) fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// Why an origin exchange failed before its headers.
#[derive(Clone)]
pub(super) enum FetchError {
    Unreachable(String),
    Timeout,
}

impl FetchError {
    /// Our answer to the client: `502` for an unreachable origin, `504` for a timeout.
    pub(super) fn answer(self) -> Response<NodeBody> {
        match self {
            FetchError::Unreachable(why) => text(
                StatusCode::BAD_GATEWAY,
                &format!("origin unreachable: {why}"),
            ),
            FetchError::Timeout => text(StatusCode::GATEWAY_TIMEOUT, "origin timed out"),
        }
    }
}

// Defined here, beside the exchange it reads, rather than beside `Answer`
// (`answer.rs` stays below this module).
impl Answer {
    /// The answer from a buffered origin exchange: its response (no body for a `HEAD`) with
    /// outcome `ok`, or our `502` / `504` with outcome `failed`.
    pub(super) fn exchange(
        fetched: Result<Fetched, FetchError>,
        head: bool,
        ok: Outcome,
        failed: Outcome,
    ) -> Answer {
        match fetched {
            Ok(f) => Answer {
                outcome: ok,
                response: f.answer(head),
            },
            Err(e) => Answer {
                outcome: failed,
                response: e.answer(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins() {
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
        assert_eq!(host_name(" Example.COM:8080 "), "example.com");
        assert_eq!(host_name("[::1]:80"), "[::1]");
        assert_eq!(host_name("[::1]"), "[::1]");
    }
}
