//! Relay: a `GET` / `HEAD` for a bucket another node serves goes to that node.
//!
//! The request travels signed to the serving node's peer listener as
//! `/_peer/relay/{target}` with the client's end-to-end headers; the answer (its status, its
//! headers, its `X-Cache`) is streamed back as it arrives. A relayed request is never relayed
//! again. When the serving node refuses the connection, resets it or does not answer within
//! the origin timeout plus the peer timeout, the request goes on at once to the bucket's next
//! candidate (C2DN §5: no waiting for the coordinator), and when none is left, or the next
//! candidate is this node, this node serves it.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use ecdn_cluster::wire;
use http_body_util::BodyExt;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Request, Response};
use tokio::sync::mpsc;

use super::super::body::{Chunk, LiveBody, NodeBody};
use super::super::freshness;
use super::super::key::CacheKey;
use super::super::outcome::Outcome;
use super::super::upstream::content_length;
use super::super::{Answer, ReqBody, State};
use super::{Cluster, ClusterStats};

/// Passes `req` to the bucket's serving node; `None` when this node is to serve it.
pub(in crate::node) async fn forward(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    req: &Request<ReqBody>,
) -> Option<Answer> {
    let primary = CacheKey::primary(req);
    let map = c.map.current();
    let bucket = map.bucket_of(super::object_id(&primary));
    let target = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let path = wire::relay_path(target);
    let conn = freshness::connection_tokens(req.headers());
    let headers: Vec<(HeaderName, HeaderValue)> = req
        .headers()
        .iter()
        .filter(|(n, _)| !freshness::is_hop_by_hop(n, &conn) && !n.as_str().starts_with("x-ecdn-"))
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect();
    let timeout = st.upstream.timeout + c.peer_timeout;
    for &server in map.candidates(bucket) {
        if server == c.id {
            return None;
        }
        let Some(addr) = c.peer_of(server) else {
            continue;
        };
        let sent = c
            .peers
            .send(
                addr,
                req.method().clone(),
                &path,
                Bytes::new(),
                &headers,
                timeout,
            )
            .await;
        match sent {
            Ok(resp) => {
                c.stats.relay(server, true);
                return Some(Answer {
                    outcome: Outcome::Relayed,
                    response: stream_back(c, resp, req.method() == hyper::Method::HEAD),
                });
            }
            Err(e) => {
                c.stats.relay(server, false);
                eprintln!(
                    "ecdn node: relay to node {server}: {e}; trying the next candidate{}",
                    ecdn_cluster::peer::request_note()
                );
            }
        }
    }
    None
}

/// The serving node's answer as this node's: headers less hop-by-hop ones, the body streamed
/// frame by frame (a body cut short aborts the client's response too). Its bytes count as
/// received from peers (they cross the cluster's network as a chunk does).
fn stream_back(
    c: &Arc<Cluster>,
    resp: Response<hyper::body::Incoming>,
    head: bool,
) -> Response<NodeBody> {
    let (parts, mut body) = resp.into_parts();
    let conn = freshness::connection_tokens(&parts.headers);
    let mut headers = hyper::HeaderMap::with_capacity(parts.headers.len());
    for (n, v) in &parts.headers {
        if !freshness::is_hop_by_hop(n, &conn) {
            headers.append(n.clone(), v.clone());
        }
    }
    let remaining = if head {
        Some(0)
    } else {
        content_length(&parts.headers)
    };
    let (tx, rx) = mpsc::channel(4);
    let c = c.clone();
    ecdn_cluster::peer::spawn_traced(async move {
        loop {
            match body.frame().await {
                None => {
                    let _ = tx.send(Chunk::Done).await;
                    return;
                }
                Some(Ok(f)) => {
                    if let Ok(data) = f.into_data() {
                        let n = data.len() as u64;
                        ClusterStats::add(&c.stats.peer_bytes_received, n);
                        ClusterStats::add(&c.stats.relay_bytes_received, n);
                        if n > 0 && tx.send(Chunk::Data(data)).await.is_err() {
                            return;
                        }
                    }
                }
                // Closing the channel without `Done` aborts the client's response.
                Some(Err(_)) => return,
            }
        }
    });
    let mut r = Response::new(NodeBody::Live(LiveBody::new(
        VecDeque::new(),
        None,
        rx,
        remaining,
    )));
    *r.status_mut() = parts.status;
    *r.headers_mut() = headers;
    r
}
