//! The status page, on the admin listener: what an operator opens first when something is wrong.
//!
//! * `GET /_ecdn/status`: one HTML page (`status.html`, compiled into the binary with the styles
//!   and script it shares with the coordinator's page: its styles and script are inline, it loads nothing
//!   else and works offline). Its script asks for
//!   `status.json` once a second and redraws. The page itself holds no data, so the admin
//!   listener serves it without its token; `status.json` needs the token like everything else
//!   there, and the page sends it as `Authorization: Bearer` when the address ends with
//!   `#token=…` (a fragment: never sent to the server or logged) or when it was typed into the
//!   box the page shows after a `401`. It draws: requests per second by tier and AdaptSize's c over the last five minutes, hit
//!   ratio, latency percentiles, HOC and disk use, and in a cluster the node's view of it (its
//!   counters, the members' availability, the bucket map as a grid of data and parity buckets).
//! * `GET /_ecdn/status.json`: the page's data. The counters are the ones `/_ecdn/metrics`
//!   exports, read from the same atomics: `requests` (`ecdn_requests_total`), `tiers`
//!   (`ecdn_responses_total{tier}`), `bytes_served`, `admin_refused`, `origin_errors`; the
//!   latency percentiles are Prometheus's `histogram_quantile` over the buckets of
//!   `ecdn_request_duration_seconds{tier}` (so a dashboard over the metrics shows the same);
//!   `hoc` and `disk` are `/_ecdn/stats`'s; `adaptsize_c` is `ecdn_adaptsize_c_bytes` (`null`
//!   while AdaptSize admits everything, with `adaptsize_admits_all`); `history` holds one
//!   [`Sample`] a second for the last [`HISTORY`] seconds, taken by the admin listener (with
//!   `?since=T`, only those after T: the page asks for the new ones).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ecdn_placement::pieces::BucketLayout;
use http_body_util::Full;
use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};

pub(in crate::node) mod history;

pub use history::{Sample, HISTORY};

use super::body::NodeBody;
use super::lock::lock;
use super::outcome::Outcome;
use super::snapshot::{disk_json, hoc_json, json};
use super::state::State;

/// The page, as served: `status.html` with the styles, token form and script it shares with the
/// coordinator's page.
pub fn page_html() -> &'static str {
    static PAGE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PAGE.get_or_init(|| {
        ecdn_cluster::coordinator::status_page::with_shared(include_str!("status.html"))
    })
}

/// How often the admin listener takes a [`Sample`].
pub(super) const SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// The quantiles the page shows for each tier.
const QUANTILES: [(&str, f64); 3] = [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)];

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// AdaptSize's c if it has one and it is finite.
fn finite_c(raw: Option<f64>) -> Option<f64> {
    raw.filter(|c| c.is_finite())
}

/// The counters now, and AdaptSize's c as the HOC reports it (`+inf` while it admits all).
fn take(st: &State) -> (Sample, Option<f64>) {
    let (raw_c, hoc_used) = {
        let h = lock(&st.hoc);
        (h.raw_parameter(), h.used())
    };
    let sample = Sample {
        t_ms: unix_ms(),
        requests: st.metrics.requests(),
        tiers: st.metrics.tier_counts(),
        bytes_served: st.metrics.bytes_served(),
        c: finite_c(raw_c),
        hoc_used,
    };
    (sample, raw_c)
}

/// Records one sample (the admin listener calls this every [`SAMPLE_EVERY`]).
pub(super) fn sample(st: &State) {
    let (s, _) = take(st);
    let mut h = lock(&st.status.samples);
    if h.len() == HISTORY {
        h.pop_front();
    }
    h.push_back(s);
}

/// `GET /_ecdn/status`.
pub(super) fn page() -> Response<NodeBody> {
    let mut r = Response::new(NodeBody::Full(Full::new(Bytes::from_static(
        page_html().as_bytes(),
    ))));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    // Nothing from elsewhere, ever: the page's own inline style and script, and requests to
    // this listener.
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; \
             connect-src 'self'; img-src data:",
        ),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// `GET /_ecdn/status.json[?since=T]`: with `since` (UNIX ms), `history` holds only the samples
/// taken after T (the page asks for what it does not have yet).
pub(super) async fn data(st: &State, query: Option<&str>) -> Response<NodeBody> {
    let since = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|kv| kv.strip_prefix("since="))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    let (now, raw_c) = take(st);
    let m = &st.metrics;
    let latency: serde_json::Map<String, serde_json::Value> = Outcome::TIERS
        .iter()
        .enumerate()
        .map(|(i, tier)| {
            let h = m.latency(i);
            let mut q = serde_json::Map::new();
            q.insert("count".into(), h.count().into());
            for (name, p) in QUANTILES {
                let ms = h.quantile(p).map(|s| s * 1000.0);
                q.insert(name.into(), ms.into());
            }
            (tier.to_string(), serde_json::Value::Object(q))
        })
        .collect();
    let tiers: serde_json::Map<String, serde_json::Value> = Outcome::TIERS
        .iter()
        .zip(now.tiers)
        .map(|(t, n)| (t.to_string(), n.into()))
        .collect();
    let hits = now.tiers[0] + now.tiers[1];
    let history: Vec<serde_json::Value> = lock(&st.status.samples)
        .iter()
        .filter(|s| s.t_ms > since)
        .map(Sample::to_json)
        .collect();
    let body = serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_s": st.status.started.elapsed().as_secs_f64(),
        "now_ms": now.t_ms,
        "requests": now.requests,
        "bytes_served": now.bytes_served,
        "tiers": tiers,
        "hit_ratio": (now.requests > 0).then(|| hits as f64 / now.requests as f64),
        "origin_errors": m.origin_errors(),
        "admin_refused": m.admin_refused_count(),
        "latency_ms": latency,
        "hoc": hoc_json(st),
        "disk": disk_json(st).await,
        "adaptsize_c": finite_c(raw_c),
        "adaptsize_admits_all": raw_c == Some(f64::INFINITY),
        "tier_names": Outcome::TIERS,
        "sample_every_s": SAMPLE_EVERY.as_secs_f64(),
        "history": history,
        "cluster": st.cluster.as_ref().map(|c| cluster_json(c)),
    });
    let mut r = json(StatusCode::OK, body);
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// A cluster node's view of its cluster: its counters (`/_ecdn/stats`'s `cluster`), the
/// members and their availability in the map it serves with, and the map's buckets.
fn cluster_json(c: &super::cluster::pieces::member::Cluster) -> serde_json::Value {
    let map = c.map.current();
    let nodes: Vec<serde_json::Value> = (0..map.servers())
        .map(|id| {
            let m = map.member(id);
            serde_json::json!({
                "id": id,
                "available": map.is_available(id),
                "state": m.map(|m| m.state.name()),
                "client": m.map(|m| m.client.to_string()),
            })
        })
        .collect();
    let buckets: Vec<serde_json::Value> = (0..map.buckets)
        .map(|b| {
            serde_json::json!({
                "data": map.data_servers(b),
                "parity": map.parity_servers(b),
            })
        })
        .collect();
    serde_json::json!({
        "counters": c.stats_json(),
        "k": map.k,
        "p": map.p,
        "nodes": nodes,
        "buckets": buckets,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_page_has_the_shared_parts_inlined() {
        let page = super::page_html();
        for placeholder in ["/*STYLE*/", "<!--LOGIN-->", "/*SCRIPT*/"] {
            assert!(!page.contains(placeholder), "{placeholder} left");
        }
        assert!(page.contains(r#"<form id="loginform">"#));
    }
}
