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
//!   are not counted.
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
    let mut r = Response::new(NodeBody::Full(Full::new(Bytes::from(
        st.metrics.render(&gauges),
    ))));
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
