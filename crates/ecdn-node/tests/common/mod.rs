//! HTTP helpers shared by the node and origin tests: one request on a fresh connection.

#![allow(dead_code)] // each test binary uses part of it

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;

pub struct Reply {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn x_cache(&self) -> &str {
        self.headers
            .get("x-cache")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

/// The node's admin listener (health, stats, metrics, `PURGE`).
pub fn admin(n: &ecdn_node::node::RunningNode) -> SocketAddr {
    n.admin_addr().expect("the node has an admin listener")
}

pub async fn fetch(addr: SocketAddr, method: &str, uri: &str) -> Reply {
    fetch_with(addr, method, uri, &[]).await
}

pub async fn fetch_with(
    addr: SocketAddr,
    method: &str,
    uri: &str,
    extra: &[(&str, &str)],
) -> Reply {
    send_body(addr, method, uri, extra, Bytes::new()).await
}

/// One request with a body (`Content-Length`), on a fresh connection.
pub async fn send_body(
    addr: SocketAddr,
    method: &str,
    uri: &str,
    extra: &[(&str, &str)],
    body: Bytes,
) -> Reply {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut req = Request::builder().method(method).uri(uri);
    if !extra.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req = req.header("host", "cdn.test");
    }
    for (k, v) in extra {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(body)).unwrap();
    let resp = send.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    Reply {
        status,
        headers,
        body,
    }
}
