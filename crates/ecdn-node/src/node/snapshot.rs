//! The node's state as JSON values, for both the admin API (`admin.rs`) and the status page
//! (`status.rs`), which sit beside each other and import it from here.

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};

use super::body::NodeBody;
use super::lock::lock;
use super::state::State;

/// A JSON answer with `status`.
pub(super) fn json(status: StatusCode, body: serde_json::Value) -> Response<NodeBody> {
    let mut r = Response::new(NodeBody::Full(Full::new(Bytes::from(body.to_string()))));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// The HOC's use and policy, as `/_ecdn/stats` and the status page show it.
pub(super) fn hoc_json(st: &State) -> serde_json::Value {
    let h = lock(&st.hoc);
    serde_json::json!({
        "policy": h.policy(),
        "used": h.used(),
        "capacity": h.capacity(),
        "objects": h.objects(),
        "c": h.parameter(),
    })
}

/// The disk ring's use (`null` without a disk), as `/_ecdn/stats` and the status page show it.
pub(super) async fn disk_json(st: &State) -> serde_json::Value {
    match &st.disk {
        Some(d) => d
            .read(|s| {
                serde_json::json!({
                    "used": s.used(),
                    "live_bytes": s.live_bytes(),
                    "capacity": s.capacity(),
                    "objects": s.len(),
                    "index_bytes": s.index_bytes(),
                    "started": s.started().to_string(),
                })
            })
            .await
            .unwrap_or(serde_json::Value::Null),
        None => serde_json::Value::Null,
    }
}
