//! The cluster's status page, served by the coordinator on its admin listener
//! ([`super::RunningCoordinator::serve_admin`], and in etcd mode
//! [`super::etcd::EtcdCoordinator::serve_admin`] on every coordinator), apart from the signed
//! API nodes use. Its data comes from the coordinator's state, the leader's in etcd mode, or,
//! on a coordinator that does not lead, from etcd, read-only (`status_source.rs`); `role` in
//! the JSON says which.
//!
//! * `GET /_ecdn/status`: one HTML page (`status.html` here, compiled in with `status.css`,
//!   `status-login.html` and `status.js`, the styles, token form and script a node's page shares; inline style and script, nothing loaded from elsewhere). Its script asks for `status.json` once a second:
//!   one row per node (health, the epoch it last reported against the map's, its data and
//!   parity buckets, bytes written, decodes, partial hits, peer errors, cache use), the write
//!   imbalance, the bucket map as a grid, decode and partial-hit rates, and the recent
//!   availability changes and rebalances. Served without the token (it holds no data).
//! * `GET /_ecdn/status.json`: `status` is what `GET /coord/status` answers ([`super::Status`]);
//!   `buckets` the current map's data and parity servers of each bucket; `nodes` each member's
//!   own `/_ecdn/stats`, read over the peer protocol (`GET /_peer/stats`, signed both ways,
//!   asked of every member at once, [`NODE_TIMEOUT`] each; a node that does not answer gets
//!   `error`), and `totals` their sums, with `decode_rate` (decodes over coded hits) and
//!   `bytes_written_imbalance` (max over mean of `bytes_written`, available nodes). With more
//!   than [`GRID_CELLS`] buckets × nodes, `buckets` is `null` and `buckets_omitted` says why
//!   (the page would draw millions of cells; the node table counts each node's buckets).
//! * `GET /_ecdn/health`: `ok`.
//!
//! Bound beyond loopback the listener needs a bearer token, which every request but the page's
//! HTML must carry (else `401`), as on a node's admin listener.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use tokio::net::TcpListener;

use super::status_source::{Snapshot, Source};
use crate::auth::unix_now_ms;
use crate::peer::{verify_response, PeerClient};
use crate::wire::STATS_PATH;

/// The styles of the status pages (the coordinator's and each node's), inlined where a page
/// says `/*STYLE*/`.
pub const STYLE: &str = include_str!("status.css");

/// The script both pages share (token, formatting, the polling loop), inlined where a page
/// says `/*SCRIPT*/`.
pub const SCRIPT: &str = include_str!("status.js");

/// The token form [`SCRIPT`] shows when the admin listener asks for a token, inlined where a
/// page says `<!--LOGIN-->`.
pub const LOGIN: &str = include_str!("status-login.html");

/// A status page's HTML with [`STYLE`], [`LOGIN`] and [`SCRIPT`] inlined.
pub fn with_shared(template: &str) -> String {
    template
        .replacen("/*STYLE*/", STYLE, 1)
        .replacen("<!--LOGIN-->", LOGIN.trim_end(), 1)
        .replacen("/*SCRIPT*/", SCRIPT, 1)
}

/// The cluster page, as served.
fn page() -> &'static str {
    static PAGE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PAGE.get_or_init(|| with_shared(include_str!("status.html")))
}

/// How long the page's data waits for each node's stats.
pub const NODE_TIMEOUT: Duration = Duration::from_secs(1);

/// The largest stats body read from a node.
const STATS_LIMIT: usize = 1 << 20;

/// The most buckets × nodes whose placement the JSON lists bucket by bucket.
pub const GRID_CELLS: usize = 100_000;

/// Serves the admin listener until the coordinator stops.
pub(super) async fn serve(
    listener: TcpListener,
    source: Arc<Source>,
    token: Option<Arc<str>>,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    let peers = source.peers();
    let shutdown = source.shutdown();
    let handler = move |req: Request<Incoming>| {
        let (source, token, peers) = (source.clone(), token.clone(), peers.clone());
        async move { handle(&source, token.as_deref(), &peers, req).await }
    };
    let tls = tls.map(crate::mtls::ListenerTls::Fixed);
    super::accept_loop_tls(shutdown, listener, tls, handler).await;
}

fn answer(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

async fn handle(
    source: &Source,
    token: Option<&str>,
    peers: &PeerClient,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    if req.method() != Method::GET {
        return answer(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain; charset=utf-8",
            Bytes::from_static(b"GET only\n"),
        );
    }
    if path == "/_ecdn/status" {
        let mut r = answer(
            StatusCode::OK,
            "text/html; charset=utf-8",
            Bytes::from_static(page().as_bytes()),
        );
        r.headers_mut().insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(
                "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; \
                 connect-src 'self'; img-src data:",
            ),
        );
        return r;
    }
    if let Some(t) = token {
        let auth = req.headers().get(header::AUTHORIZATION);
        if !crate::bearer::bearer_matches(auth.map(HeaderValue::as_bytes), t) {
            let mut r = answer(
                StatusCode::UNAUTHORIZED,
                "text/plain; charset=utf-8",
                Bytes::from_static(b"the admin listener needs its bearer token\n"),
            );
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"ecdn\""),
            );
            return r;
        }
    }
    match path {
        "/_ecdn/health" => answer(
            StatusCode::OK,
            "text/plain; charset=utf-8",
            Bytes::from_static(b"ok\n"),
        ),
        "/_ecdn/status.json" => match source.snapshot().await {
            Ok(snapshot) => {
                let body = data(snapshot, peers).await.to_string();
                answer(StatusCode::OK, "application/json", Bytes::from(body))
            }
            Err(e) => answer(
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain; charset=utf-8",
                Bytes::from(format!("no status to show: {e}\n")),
            ),
        },
        _ => answer(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            Bytes::from_static(
                b"not an admin endpoint: /_ecdn/status, /_ecdn/status.json, /_ecdn/health\n",
            ),
        ),
    }
}

/// One node's `/_ecdn/stats`, over the peer protocol.
async fn node_stats(
    peers: &PeerClient,
    addr: std::net::SocketAddr,
) -> Result<serde_json::Value, String> {
    let r = peers
        .send(
            addr,
            Method::GET,
            STATS_PATH,
            Bytes::new(),
            &[],
            NODE_TIMEOUT,
        )
        .await
        .map_err(|e| e.to_string())?;
    if r.status() != StatusCode::OK {
        return Err(format!("answered {}", r.status()));
    }
    let (parts, body) = r.into_parts();
    let body = tokio::time::timeout(NODE_TIMEOUT, Limited::new(body, STATS_LIMIT).collect())
        .await
        .map_err(|_| "its stats did not arrive in time".to_string())?
        .map_err(|e| e.to_string())?
        .to_bytes();
    verify_response(peers.key(), STATS_PATH, &parts, &body, unix_now_ms())
        .map_err(|e| format!("bad signature on its stats: {e}"))?;
    serde_json::from_slice(&body).map_err(|e| format!("its stats are not JSON: {e}"))
}

/// The page's data.
pub(super) async fn data(snapshot: Snapshot, peers: &PeerClient) -> serde_json::Value {
    let Snapshot { status, map, role } = snapshot;
    peers.set_epoch(map.epoch);
    let mut asks = tokio::task::JoinSet::new();
    for n in status.nodes.iter().filter(|n| n.state != "removed") {
        let (id, addr, peers) = (n.id, n.peer, peers.clone());
        asks.spawn(async move { (id, node_stats(&peers, addr).await) });
    }
    let mut answers = Vec::new();
    while let Some(a) = asks.join_next().await {
        answers.extend(a.ok());
    }
    answers.sort_by_key(|(id, _)| *id);
    let mut nodes = Vec::new();
    let (mut coded_hits, mut decodes, mut partial_hits, mut peer_errors) = (0u64, 0u64, 0u64, 0u64);
    let mut written: Vec<u64> = Vec::new();
    for (id, a) in answers {
        match a {
            Ok(s) => {
                let c = &s["cluster"];
                let get = |k: &str| c[k].as_u64().unwrap_or(0);
                coded_hits += get("coded_hits");
                decodes += get("decodes");
                partial_hits += get("partial_hits");
                peer_errors += get("peer_errors");
                if map.available.get(id).copied().unwrap_or(false) {
                    written.push(get("bytes_written"));
                }
                nodes.push(serde_json::json!({ "id": id, "stats": s }));
            }
            Err(e) => nodes.push(serde_json::json!({ "id": id, "error": e })),
        }
    }
    let imbalance = if written.is_empty() {
        None
    } else {
        let mean = written.iter().sum::<u64>() as f64 / written.len() as f64;
        let max = written.iter().copied().max().unwrap_or(0) as f64;
        (mean > 0.0).then(|| max / mean)
    };
    let cells = map.buckets.saturating_mul(map.servers());
    let buckets: Option<Vec<serde_json::Value>> = (cells <= GRID_CELLS).then(|| {
        (0..map.buckets)
            .map(|b| {
                use ecdn_placement::pieces::BucketLayout;
                serde_json::json!({ "data": map.data_servers(b), "parity": map.parity_servers(b) })
            })
            .collect()
    });
    let buckets_omitted = buckets.is_none().then(|| {
        format!(
            "{} buckets × {} nodes: more than {GRID_CELLS} cells to draw",
            map.buckets,
            map.servers()
        )
    });
    serde_json::json!({
        "now_ms": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        "k": map.k,
        "p": map.p,
        "role": role,
        "status": status,
        "buckets": buckets,
        "buckets_omitted": buckets_omitted,
        "nodes": nodes,
        "totals": {
            "coded_hits": coded_hits,
            "decodes": decodes,
            "decode_rate": (coded_hits > 0).then(|| decodes as f64 / coded_hits as f64),
            "partial_hits": partial_hits,
            "peer_errors": peer_errors,
            "bytes_written_imbalance": imbalance,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_has_the_shared_parts_inlined() {
        let page = page();
        for placeholder in ["/*STYLE*/", "<!--LOGIN-->", "/*SCRIPT*/"] {
            assert!(!page.contains(placeholder), "{placeholder} left");
        }
        for shared in [STYLE, LOGIN.trim_end(), SCRIPT] {
            assert!(page.contains(shared));
        }
    }
}
