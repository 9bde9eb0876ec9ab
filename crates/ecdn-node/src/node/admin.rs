//! The node's own endpoints and operations: health, stats, metrics and `PURGE`.
//!
//! * `/_ecdn/health` answers `ok` (`503` `draining` on a cluster node the bucket map says
//!   drains, so load balancers stop sending it clients); `/_ecdn/stats` answers JSON counters (see
//!   [`super::Node`]). `/_ecdn/` paths are never proxied.
//! * `GET /_ecdn/metrics`: Prometheus text exposition (format 0.0.4), under `/_ecdn/` so it
//!   cannot shadow an origin path `/metrics`. Counters `ecdn_requests_total`,
//!   `ecdn_responses_total{tier}` (`hoc`, `disk`, `miss`, `collapsed`, `pass`, `error` — our own
//!   `502` / `504`, `revalidated`, `stale`), `ecdn_bytes_served_total`,
//!   `ecdn_origin_errors_total`, `ecdn_disk_errors_total`; gauges `ecdn_hoc_used_bytes`,
//!   `ecdn_hoc_capacity_bytes`, `ecdn_disk_used_bytes`, `ecdn_disk_capacity_bytes` (0 without a
//!   disk), `ecdn_adaptsize_c_bytes` (the admission policy's c, `+Inf` while AdaptSize admits
//!   everything; absent for a policy without one); histogram
//!   `ecdn_request_duration_seconds{tier}` with buckets 0.5 ms … 10 s. Latency runs from the
//!   request's arrival to its response headers: a streamed miss is timed to the origin's
//!   headers, not to the end of the body. Written by hand from atomics (see [`super::ops`]), no
//!   global recorder. Requests refused by request sanitizing (400, 414), `/_ecdn/` and `PURGE`
//!   are not counted. In a cluster a request relayed to the bucket's serving node counts at
//!   both nodes here: `tier="relayed"` at the node the client reached, its own tier at the
//!   serving node (see `ecdn_cluster_served_total` below for the count once per request).
//! * In a cluster, `/_ecdn/metrics` adds the `ecdn_cluster_*` series (`cluster/metrics.rs`;
//!   series with a fixed set of label values are written for each, zeros included; `peer`
//!   series appear once this node first talked to that peer, `peer` being its node id):
//!   - gauges: `ecdn_cluster_info{node,scheme,k,p}` (1), `ecdn_cluster_epoch` (the bucket map
//!     epoch the node uses), `ecdn_cluster_nodes` and `ecdn_cluster_nodes_available` (in that
//!     map), `ecdn_cluster_control_reachable` (1 if the node reaches its control plane: in etcd
//!     mode etcd answered its last request, else the coordinator answered its last heartbeat;
//!     else 0), `ecdn_cluster_pieces_capacity_bytes`;
//!   - `ecdn_cluster_served_total{result="hit"|"miss"}`, `ecdn_cluster_served_bytes_total`,
//!     `ecdn_cluster_origin_bytes_total`: the `GET` / `HEAD` answers this node gave itself (not
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
//!     `ecdn_cluster_corrupt_sub_chunks_total`, `ecdn_cluster_streamed_fills_total`,
//!     `ecdn_cluster_ring_lost_total`;
//!   - `ecdn_cluster_link_sent_bytes_total` (bytes through the outgoing peer link: peer `GET`
//!     answers and this node's own reads of object splits; capped by `--peer-rate`) and
//!     `ecdn_cluster_link_background_bytes_total` (the `--background-load` traffic);
//!   - `ecdn_cluster_parity_fetches_total{reason}`: read windows that asked for the parity
//!     chunks: `delayed` (C2DN's delayed parity fetch: a data sub-chunk still missing
//!     `parity_delay` × the first peer sub-chunk's latency later), `missing` (a data chunk
//!     without a source), `failed` (the data servers' reads ended short: failed, `404`, cut),
//!     `corrupt` (a data sub-chunk failed its CRC-32C);
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
//! * `PURGE <path>` (same cache key as a `GET`: Host + path + query) removes the entry from
//!   the HOC and the disk and answers `200` `{"purged": true|false}` (whether anything was
//!   held). The disk removal is durable before the answer: after a crash right after the
//!   `200`, the object is not served again. If the disk cannot record the removal, the answer
//!   is `500` (the HOC copy and the Vary index entry are dropped all the same). In a cluster
//!   the purge reaches every node the bucket map has available (`cluster::purge`): each drops
//!   its copies and its pieces of the object; the answer adds `"unreached"`, the nodes that
//!   did not confirm (`502` when any). A node unavailable at the time keeps its pieces. It needs
//!   `Authorization: Bearer <token>` equal to [`super::NodeConfig::purge_token`] (compared in
//!   constant time), else `401`; without a configured token purging is disabled (`403`). It is
//!   never forwarded to the origin.

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};

use super::body::NodeBody;
use super::key::CacheKey;
use super::ops::{self, Gauges};
use super::{lock, text, ReqBody, State};

/// Answers the node's own requests: `/_ecdn/` paths and `PURGE`. `None` for a request to
/// proxy.
pub(super) async fn route(st: &State, req: &Request<ReqBody>) -> Option<Response<NodeBody>> {
    Some(match req.uri().path() {
        "/_ecdn/health" => match &st.cluster {
            // A draining node tells load balancers to stop sending it clients.
            Some(c) if c.leaving() => text(StatusCode::SERVICE_UNAVAILABLE, "draining"),
            _ => text(StatusCode::OK, "ok"),
        },
        "/_ecdn/stats" => stats(st).await,
        "/_ecdn/metrics" => metrics(st).await,
        _ if req.method().as_str() == "PURGE" => purge(st, req).await,
        _ => return None,
    })
}

fn json(status: StatusCode, body: serde_json::Value) -> Response<NodeBody> {
    let mut r = Response::new(NodeBody::Full(Full::new(Bytes::from(body.to_string()))));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// `/_ecdn/stats`: the counters of [`ops::Metrics::stats_json`], the HOC and the disk.
async fn stats(st: &State) -> Response<NodeBody> {
    let hoc = {
        let h = lock(&st.hoc);
        serde_json::json!({
            "policy": h.policy(),
            "used": h.used(),
            "capacity": h.capacity(),
            "objects": h.objects(),
            "c": h.parameter(),
        })
    };
    let disk = match &st.disk {
        Some(d) => d
            .read(|s| {
                serde_json::json!({
                    "used": s.used(),
                    "live_bytes": s.live_bytes(),
                    "capacity": s.capacity(),
                    "objects": s.len(),
                })
            })
            .await
            .unwrap_or(serde_json::Value::Null),
        None => serde_json::Value::Null,
    };
    let mut body = st.metrics.stats_json();
    body.insert(
        "disk_errors".into(),
        st.disk.as_ref().map_or(0, |d| d.errors()).into(),
    );
    body.insert("hoc".into(), hoc);
    body.insert("disk".into(), disk);
    body.insert(
        "cluster".into(),
        st.cluster
            .as_ref()
            .map_or(serde_json::Value::Null, |c| c.stats_json()),
    );
    json(StatusCode::OK, serde_json::Value::Object(body))
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

/// `PURGE <path>`: removes the cached entry of the URL (same cache key as a `GET`: Host + path
/// + query) from the HOC and the disk. Needs `Authorization: Bearer <purge_token>`.
async fn purge(st: &State, req: &Request<ReqBody>) -> Response<NodeBody> {
    let Some(token) = &st.purge_token else {
        return text(StatusCode::FORBIDDEN, "purge is disabled");
    };
    let auth = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes);
    if !ops::bearer_matches(auth, token) {
        let mut r = text(StatusCode::UNAUTHORIZED, "purge needs a valid bearer token");
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"ecdn\""),
        );
        return r;
    }
    let primary = CacheKey::primary(req);
    let purged = match st.invalidate(&primary).await {
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
    let (purged, unreached) = super::cluster::purge(st, c, &primary, purged).await;
    let status = if unreached.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::BAD_GATEWAY
    };
    json(
        status,
        serde_json::json!({ "purged": purged, "unreached": unreached }),
    )
}
