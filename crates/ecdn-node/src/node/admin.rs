//! The node's own endpoints and operations: health, stats, metrics and `PURGE`, on the **admin
//! listener** (`NodeConfig::admin`), never on the client listener.
//!
//! * The admin listener is loopback by default (`127.0.0.1`); bound beyond loopback it must have
//!   a bearer token, and when it has one every request needs `Authorization: Bearer <token>`
//!   (else `401`), but for the status page's HTML, which holds no data. HTTP/1.1 only.
//! * On the client listener, `/_ecdn/` paths get `404` and `PURGE` gets `405`, counted as
//!   `admin_refused` (`/_ecdn/stats`) and `ecdn_admin_refused_total`, unless
//!   `NodeConfig::client_health` lets `GET /_ecdn/health` through as a load balancer's probe.
//!   EC-Cache's object API (`/_objects/`) is a client API and stays on the client listener.
//! * `/_ecdn/health` answers `ok` (`503` `draining` on a cluster node the bucket map says
//!   drains, so load balancers stop sending it clients); `/_ecdn/stats` answers JSON counters (see
//!   [`super::Node`]). `/_ecdn/` paths are never proxied.
//! * `/_ecdn/sites[/OP]` (a node with cooperating sites): the referrals' own operations, in
//!   `ecdn` Coral's DSHT (its state, a lookup, a put, the put probes a key received; see
//!   `ecdn_coral::site`); what they count is also `sites` in `/_ecdn/stats`.
//! * `GET /_ecdn/metrics`: Prometheus text exposition (format 0.0.4), under `/_ecdn/` so it
//!   cannot shadow an origin path `/metrics`. Counters `ecdn_requests_total`,
//!   `ecdn_responses_total{tier}` (`hoc`, `disk`, `miss`, `collapsed`, `pass`, `error` — our own
//!   `502` / `504`, `revalidated`, `stale`), `ecdn_bytes_served_total`,
//!   `ecdn_origin_errors_total`, `ecdn_disk_errors_total`, `ecdn_site_fills_total`,
//!   `ecdn_admin_refused_total`, `ecdn_admin_requests_total` (every request to the admin
//!   listener, the one that reads it included); gauges `ecdn_hoc_used_bytes`,
//!   `ecdn_hoc_capacity_bytes`, `ecdn_disk_used_bytes`, `ecdn_disk_capacity_bytes` (0 without a
//!   disk), `ecdn_adaptsize_c_bytes` (the admission policy's c, `+Inf` while AdaptSize admits
//!   everything; absent for a policy without one); histogram
//!   `ecdn_request_duration_seconds{tier}` with buckets 0.5 ms … 10 s. Latency runs from the
//!   request's arrival to its response headers: a streamed miss is timed to the origin's
//!   headers, not to the end of the body. Written by hand from atomics (see [`super::ops`]), no
//!   global recorder. Requests refused by request sanitizing (400, 414), `/_ecdn/` and `PURGE`
//!   are not counted as requests. In a cluster a request relayed to the bucket's serving node counts at
//!   both nodes here: `tier="relayed"` at the node the client reached, its own tier at the
//!   serving node (see `ecdn_cluster_served_total` below for the count once per request).
//! * In a cluster, `/_ecdn/metrics` adds the `ecdn_cluster_*` series (`cluster/pieces/metrics.rs`;
//!   series with a fixed set of label values are written for each, zeros included; `peer`
//!   series appear once this node first talked to that peer, `peer` being its node id):
//!   - gauges: `ecdn_cluster_info{node,scheme,k,p}` (1), `ecdn_cluster_epoch` (the bucket map
//!     epoch the node uses), `ecdn_cluster_nodes` and `ecdn_cluster_nodes_available` (in that
//!     map), `ecdn_cluster_control_reachable` (1 if the node reaches its control plane: in etcd
//!     mode etcd answered its last request, else the coordinator answered its last heartbeat;
//!     else 0), `ecdn_cluster_pieces_capacity_bytes`;
//!   - `ecdn_cluster_served_total{result="hit"|"miss"|"collapsed"}` (a miss is an origin
//!     fetch, the paper's; a collapsed request waited on another request's fill),
//!     `ecdn_cluster_served_bytes_total`, `ecdn_cluster_origin_bytes_total`: the `GET` / `HEAD` answers this node gave itself (not
//!     the ones it relayed, nor passes), their body bytes, and the origin bytes they fetched
//!     (`X-Ecdn-Origin-Bytes`: a miss's whole object, a partial hit's missing chunks, 0 for a
//!     collapsed miss). Each client request is answered by exactly one node, so summed over
//!     nodes these give the **cluster miss ratio** (`miss` / all) and **byte miss ratio**
//!     (origin bytes / served bytes) without counting relayed requests twice. A partial hit and
//!     a revalidation are misses, a stale answer a hit. (A relay that times out after the
//!     serving node started answering, then served by the next candidate, counts at both.)
//!   - `ecdn_cluster_written_bytes_total{kind="data"|"parity"|"replica"}`: payload bytes this
//!     node's piece store accepted (its own pieces and those peers pushed), the **write load**
//!     of C2DN §6: write imbalance is the max / mean over nodes of its rate;
//!   - `ecdn_cluster_cached_reads_total{object="coded"|"replicated",
//!     protection="protected"|"unprotected"}`: the **unprotected fraction** (C2DN §6, Fig. 6b/c:
//!     an object is unprotected if only one copy is cached in the cluster, a coded object if
//!     fewer than K + 1 of its chunks are), measured at read time since no node sees every
//!     cache: each time the serving node reads a cached object from the pieces (a hit after the
//!     HOC; HOC hits, partial hits and misses are not counted), it counts what the servers it
//!     asked hold — a replicated object is protected with replicas on two servers or more, a
//!     coded one with K + 1 distinct chunks or more among this node's store and the `has`
//!     answers (the bucket's available servers and the slots' former servers; when a chunk
//!     here lets the read start at once, the answers of the assigned servers asked beside it).
//!     A server that does not answer holds nothing. Once per request, before any repair;
//!   - `ecdn_cluster_hits_total{object}` (hits from the pieces), `ecdn_cluster_decodes_total`
//!     (coded answers that needed a decode), `ecdn_cluster_partial_hits_total`,
//!     `ecdn_cluster_repairs_total` (hits after which missing pieces were written back),
//!     `ecdn_cluster_repair_{objects,pieces}_total` and
//!     `ecdn_cluster_repair_{written,read}_bytes_total` (the background repair,
//!     `cluster/c2dn/repair.rs`),
//!     `ecdn_cluster_corrupt_sub_chunks_total`, `ecdn_cluster_streamed_fills_total`,
//!     `ecdn_cluster_dying_{objects,pieces_dropped}_total` (whole-object eviction),
//!     `ecdn_cluster_ring_lost_total`; `ecdn_cluster_peer_replays_refused_total` (peer
//!     requests signed for another node, with a nonce already taken, or older than the node's
//!     replay memory), `ecdn_cluster_writes_refused_after_purge_total` (piece writes of bytes
//!     filled before a purge of their object) and `ecdn_cluster_budget_respends_total` (the
//!     coordinator's re-spends of EC-Cache's parity budget carried out here);
//!   - `ecdn_cluster_link_sent_bytes_total` (bytes through the outgoing peer link: peer `GET`
//!     answers and this node's own reads of object splits; capped by `--peer-rate`) and
//!     `ecdn_cluster_link_background_bytes_total` (the `--background-load` traffic);
//!   - `ecdn_cluster_parity_fetches_total{reason}`: read windows that asked for the parity
//!     chunks: `delayed` (C2DN's delayed parity fetch: a data sub-chunk still missing
//!     `parity_delay` × the first peer sub-chunk's latency later), `missing` (a data chunk
//!     without a source), `failed` (the data servers' reads ended short: failed, `404`, cut),
//!     `corrupt` (a data sub-chunk failed its CRC-32C), `slow` (a data chunk's holder
//!     answers this node's probes much slower than its peers: a hedge from the start);
//!   - per peer: `ecdn_cluster_peer_fetches_total{peer}` (`has` questions and piece reads
//!     sent), the histogram `ecdn_cluster_peer_fetch_duration_seconds{peer}` (send to the
//!     peer's response headers, the same buckets as `ecdn_request_duration_seconds`),
//!     `ecdn_cluster_peer_errors_total{peer}` (fetches without an answer, answers other than
//!     `200` / `404` or with a bad signature, bodies cut short, piece writes that failed),
//!     `ecdn_cluster_relayed_total{peer}` (client requests relayed to it) and
//!     `ecdn_cluster_relay_failovers_total{peer}` (relays to it that failed over);
//!   - `ecdn_cluster_peer_received_bytes_total` (pieces read and stored here, relayed answers),
//!     of which `ecdn_cluster_relay_received_bytes_total`, and
//!     `ecdn_cluster_peer_sent_bytes_total`;
//!   - `ecdn_cluster_etcd_failures_total` (etcd mode: failed sessions) or
//!     `ecdn_cluster_heartbeat_failures_total` (with the coordinator: failed heartbeats).
//!
//!   `docs/grafana/ecdn-cluster.json` is a Grafana dashboard of these (its test checks that
//!   every series it asks for is one a node exports).
//! * `POST /_ecdn/repair?budget=BYTES` (cluster nodes with `repair_rate` set): one background
//!   repair round now with that much new budget (`cluster/c2dn/repair.rs`), answered with what it
//!   did as JSON; `409` when the repair is off. A driver that wants the simulator's schedule
//!   sets `repair_every_s = 0` and calls it.
//! * `GET /_ecdn/status`: the status page, and `GET /_ecdn/status.json` its data (see
//!   `status.rs`).
//! * `PURGE <path>` (same cache key as a `GET`: Host + path + query) removes the entry from
//!   the HOC and the disk and answers `200` `{"purged": true|false}` (whether anything was
//!   held). The disk removal is durable before the answer: after a crash right after the
//!   `200`, the object is not served again. If the disk cannot record the removal, the answer
//!   is `500` (the HOC copy and the Vary index entry are dropped all the same). In a cluster
//!   the purge reaches every node the bucket map has available (`cluster::pieces::purge::purge`): each drops
//!   its copies and its pieces of the object; the answer adds `"unreached"`, the nodes that
//!   did not confirm (`502` when any). A node unavailable at the time keeps its pieces. On an
//!   admin listener with a token, that token authorises it; on one without, it needs
//!   `Authorization: Bearer <token>` equal to [`super::NodeConfig::purge_token`] (compared in
//!   constant time), else `401`, and without a configured purge token purging is disabled
//!   (`403`). The cache key takes the request's `Host` (send the site's, not the admin
//!   listener's: `curl -X PURGE -H 'Host: example.com' http://127.0.0.1:ADMIN/path`). It is
//!   never forwarded to the origin.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use super::answer::{empty_body, text, ReqBody};
use super::body::NodeBody;
use super::key::CacheKey;
use super::lock::lock;
use super::ops::{self, Gauges};
use super::snapshot::{disk_json, hoc_json, json};
use super::state::State;

/// Serves the admin listener until the task is aborted; its connections go with it (they live
/// in the task's set).
pub(super) async fn serve(
    listener: TcpListener,
    st: Arc<State>,
    token: Option<Arc<str>>,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    let mut conns = tokio::task::JoinSet::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.keep_alive(true)
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(10));
    // The status page's history: one sample a second while the listener runs.
    let mut tick = tokio::time::interval(super::status::SAMPLE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
            _ = tick.tick() => {
                super::status::sample(&st);
                continue;
            }
        };
        let Ok((stream, _)) = accepted else {
            // Out of file descriptors and the like: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let (st, token) = (st.clone(), token.clone());
        let svc = hyper::service::service_fn(move |req| {
            let (st, token) = (st.clone(), token.clone());
            async move { Ok::<_, Infallible>(handle(&st, token.as_deref(), req).await) }
        });
        let (http, tls) = (http.clone(), tls.clone());
        conns.spawn(async move {
            match tls {
                None => {
                    let _ = http.serve_connection(TokioIo::new(stream), svc).await;
                }
                // Mutual TLS: a client without a certificate the CA signed ends here.
                Some(tls) => {
                    let hs = tokio::time::timeout(Duration::from_secs(10), tls.accept(stream));
                    if let Ok(Ok(stream)) = hs.await {
                        let _ = http.serve_connection(TokioIo::new(stream), svc).await;
                    }
                }
            }
        });
    }
}

/// One admin request: the token check, then [`route`].
async fn handle(
    st: &Arc<State>,
    token: Option<&str>,
    req: Request<Incoming>,
) -> Response<NodeBody> {
    st.metrics.admin_request();
    // The status page's HTML holds no data (its script asks for it with the token).
    if req.uri().path() == "/_ecdn/status" && req.method() == hyper::Method::GET {
        return super::status::page();
    }
    let authorized = match token {
        Some(t) => {
            let auth = req.headers().get(header::AUTHORIZATION);
            if !ops::bearer_matches(auth.map(HeaderValue::as_bytes), t) {
                return unauthorized("the admin listener needs its bearer token");
            }
            true
        }
        None => false,
    };
    // No admin request has a body to read; one sent anyway is dropped with the request.
    let (parts, _) = req.into_parts();
    let req = Request::from_parts(parts, empty_body());
    match route(st, &req, authorized).await {
        Some(r) => r,
        None => text(
            StatusCode::NOT_FOUND,
            "not an admin endpoint: /_ecdn/health, /_ecdn/stats, /_ecdn/metrics, /_ecdn/status, \
             /_ecdn/status.json, /_ecdn/sites, POST /_ecdn/repair, PURGE",
        ),
    }
}

fn unauthorized(msg: &str) -> Response<NodeBody> {
    let mut r = text(StatusCode::UNAUTHORIZED, msg);
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"ecdn\""),
    );
    r
}

/// Answers the node's own requests on the admin listener: `/_ecdn/` paths and `PURGE`
/// (`token_ok`: the listener's token authorised the request). `None` for anything else.
async fn route(
    st: &Arc<State>,
    req: &Request<ReqBody>,
    token_ok: bool,
) -> Option<Response<NodeBody>> {
    Some(match req.uri().path() {
        _ if req.method().as_str() == "PURGE" => purge(st, req, token_ok).await,
        "/_ecdn/repair" if req.method() == hyper::Method::POST => repair(st, req).await,
        "/_ecdn/health" => health(st),
        "/_ecdn/stats" => stats(st).await,
        p if p.starts_with("/_ecdn/sliced/") => {
            match st.slices.finished(&p["/_ecdn/sliced/".len()..]) {
                Some(s) => json(StatusCode::OK, s.json()),
                None => text(
                    StatusCode::NOT_FOUND,
                    "no sliced answer to that request finished lately here",
                ),
            }
        }
        "/_ecdn/metrics" => metrics(st).await,
        "/_ecdn/status" => super::status::page(),
        "/_ecdn/status.json" => super::status::data(st, req.uri().query()).await,
        p if p == "/_ecdn/sites" || p.starts_with("/_ecdn/sites/") => sites(st, req).await?,
        _ => return None,
    })
}

/// `/_ecdn/sites[/OP]`: the cooperating sites' own operations ([`super::sites::Referrals::admin`]);
/// `404` on a node without sites.
async fn sites(st: &State, req: &Request<ReqBody>) -> Option<Response<NodeBody>> {
    let Some(sites) = &st.sites else {
        return Some(text(
            StatusCode::NOT_FOUND,
            "this node does not cooperate with other sites",
        ));
    };
    let op = req.uri().path()["/_ecdn/sites".len()..].trim_start_matches('/');
    let post = match *req.method() {
        hyper::Method::GET => false,
        hyper::Method::POST => true,
        _ => {
            return Some(text(
                StatusCode::METHOD_NOT_ALLOWED,
                "/_ecdn/sites takes GET and POST",
            ))
        }
    };
    let query = req.uri().query().unwrap_or("");
    let (status, body) = sites.0.admin(op, query, post).await?;
    Some(json(
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        body,
    ))
}

fn health(st: &State) -> Response<NodeBody> {
    match &st.cluster {
        // A draining node tells load balancers to stop sending it clients.
        Some(c) if c.leaving() => text(StatusCode::SERVICE_UNAVAILABLE, "draining"),
        _ => text(StatusCode::OK, "ok"),
    }
}

/// What the client listener answers for the node's own requests: the health probe when
/// [`super::NodeConfig::client_health`] allows it, else a counted `404` for a `/_ecdn/` path or
/// `405` for `PURGE`. `None` for a request to proxy.
pub(super) fn on_client_port(st: &State, req: &Request<ReqBody>) -> Option<Response<NodeBody>> {
    let path = req.uri().path();
    if st.client_health && path == "/_ecdn/health" && req.method() == hyper::Method::GET {
        return Some(health(st));
    }
    let refused = if path.starts_with("/_ecdn/") {
        text(
            StatusCode::NOT_FOUND,
            "not found: the node's own endpoints are on its admin listener",
        )
    } else if req.method().as_str() == "PURGE" {
        let mut r = text(
            StatusCode::METHOD_NOT_ALLOWED,
            "PURGE is answered on the node's admin listener",
        );
        r.headers_mut().insert(
            header::ALLOW,
            HeaderValue::from_static("GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH"),
        );
        r
    } else {
        return None;
    };
    st.metrics.admin_refused();
    Some(refused)
}

/// `/_ecdn/stats`: the counters of [`ops::Metrics::stats_json`], the HOC and the disk.
async fn stats(st: &State) -> Response<NodeBody> {
    json(StatusCode::OK, stats_value(st).await)
}

/// The body of `/_ecdn/stats` (also the peer listener's `/_peer/stats`).
pub(super) async fn stats_value(st: &State) -> serde_json::Value {
    let (hoc, disk) = (hoc_json(st), disk_json(st).await);
    let mut body = st.metrics.stats_json();
    body.insert(
        "disk_errors".into(),
        st.disk.as_ref().map_or(0, |d| d.errors()).into(),
    );
    body.insert("hoc".into(), hoc);
    body.insert("disk".into(), disk);
    body.insert(
        "sites".into(),
        st.sites
            .as_ref()
            .map_or(serde_json::Value::Null, |s| s.0.stats()),
    );
    body.insert(
        "cluster".into(),
        st.cluster
            .as_ref()
            .map_or(serde_json::Value::Null, |c| c.stats_json()),
    );
    serde_json::Value::Object(body)
}

/// `/_ecdn/metrics`: the Prometheus text exposition, see [`ops`].
async fn metrics(st: &State) -> Response<NodeBody> {
    let (hoc_used, hoc_capacity, adaptsize_c) = {
        let h = lock(&st.hoc);
        (h.used(), h.capacity(), h.raw_parameter())
    };
    let (disk_used, disk_capacity, disk_errors) = match &st.disk {
        Some(d) => {
            let (used, capacity) = d
                .read(|s| (s.used(), s.capacity()))
                .await
                .unwrap_or((0, d.capacity));
            (used, capacity, d.errors())
        }
        None => (0, 0, 0),
    };
    let gauges = Gauges {
        hoc_used,
        hoc_capacity,
        disk_used,
        disk_capacity,
        disk_errors,
        adaptsize_c,
    };
    let mut text = st.metrics.render(&gauges);
    if let Some(c) = &st.cluster {
        c.render_metrics(&mut text);
    }
    let mut r = Response::new(NodeBody::Full(Full::new(Bytes::from(text))));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    r
}

/// `PURGE <path>`: removes the cached entry of the URL (same cache key as a `GET`: Host, path
/// and query) from the HOC and the disk. Authorised by the admin listener's token
/// (`token_ok`), else needs `Authorization: Bearer <purge_token>`.
/// `POST /_ecdn/repair?budget=BYTES`: one background repair round now, with `BYTES` of new
/// budget (`cluster::c2dn::repair`); the round's figures as JSON. (It only writes pieces the
/// cluster had: the admin listener's own access rule is enough.)
async fn repair(st: &Arc<State>, req: &Request<ReqBody>) -> Response<NodeBody> {
    let Some(c) = &st.cluster else {
        return text(
            StatusCode::NOT_FOUND,
            "not a cluster node: nothing to repair",
        );
    };
    if c.cfg.repair_rate == 0 {
        return text(
            StatusCode::CONFLICT,
            "the background repair is off (repair_rate = 0 in the cluster file)",
        );
    }
    let budget = req
        .uri()
        .query()
        .and_then(|q| q.strip_prefix("budget="))
        .and_then(|b| ecdn_trace::units::parse_size(b).ok());
    let Some(budget) = budget else {
        return text(
            StatusCode::BAD_REQUEST,
            "POST /_ecdn/repair?budget=BYTES (a size: 1048576, 4MiB)",
        );
    };
    let round = super::cluster::c2dn::repair::round(st, c, budget).await;
    json(StatusCode::OK, round.json())
}

async fn purge(st: &State, req: &Request<ReqBody>, token_ok: bool) -> Response<NodeBody> {
    if !token_ok {
        let Some(token) = &st.purge_token else {
            return text(StatusCode::FORBIDDEN, "purge is disabled");
        };
        let auth = req
            .headers()
            .get(header::AUTHORIZATION)
            .map(HeaderValue::as_bytes);
        if !ops::bearer_matches(auth, token) {
            return unauthorized("purge needs a valid bearer token");
        }
    }
    let primary = CacheKey::primary(req);
    let sliced = super::slices::purge(st, &primary).await;
    let purged = match st.invalidate(&primary).await.map(|p| p | sliced) {
        Ok(purged) => purged,
        Err(why) => {
            return json(
                StatusCode::INTERNAL_SERVER_ERROR,
                serde_json::json!({ "error": format!("the disk cache could not record the purge: {why}") }),
            )
        }
    };
    let Some(c) = &st.cluster else {
        return json(StatusCode::OK, serde_json::json!({ "purged": purged }));
    };
    // In a cluster: this node's pieces, then every other available node (its pieces, and the
    // decoded copy in its HOC if it serves the object's bucket).
    let (purged, unreached, number) =
        super::cluster::pieces::purge::purge(st, c, &primary, purged).await;
    let status = if unreached.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::BAD_GATEWAY
    };
    json(
        status,
        serde_json::json!({ "purged": purged, "unreached": unreached, "sequence": number }),
    )
}
