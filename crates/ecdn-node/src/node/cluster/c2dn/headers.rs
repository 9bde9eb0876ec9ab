//! The cluster's response headers (listed in the module documentation of `cluster`): what
//! kind of object answered, whether it was decoded, which node served it, and on a miss what
//! the origin gave.

use hyper::header::{HeaderName, HeaderValue};
use hyper::Response;

use crate::node::body::NodeBody;

use crate::node::answer::Answer;
use crate::node::cluster::pieces::member::Cluster;
use crate::node::outcome::Outcome;
use crate::node::upstream::content_length;

/// `coded` or `replicated`.
pub(in crate::node) const X_OBJECT: HeaderName = HeaderName::from_static("x-ecdn-object");
/// `1`: a Reed-Solomon decode was needed.
pub(in crate::node) const X_DECODED: HeaderName = HeaderName::from_static("x-ecdn-decoded");
/// The serving node's id.
pub(in crate::node) const X_SERVED_BY: HeaderName = HeaderName::from_static("x-ecdn-served-by");

/// The cluster's headers on an answer that went to the origin (see the module documentation).
pub(in crate::node) fn mark_miss(c: &Cluster, answer: &mut Answer, partial: bool) {
    use hyper::header::{HeaderName, HeaderValue};
    let h = answer.response.headers_mut();
    let length = content_length(h);
    if let Some(n) = length {
        let kind = if c.coded(n) { "coded" } else { "replicated" };
        h.insert(X_OBJECT, HeaderValue::from_static(kind));
    }
    let fetched = if answer.outcome == Outcome::Miss {
        length.unwrap_or(0)
    } else {
        0
    };
    h.insert(
        HeaderName::from_static("x-ecdn-origin-bytes"),
        HeaderValue::from(fetched),
    );
    if partial {
        h.insert(
            HeaderName::from_static("x-ecdn-partial"),
            HeaderValue::from_static("1"),
        );
    }
    h.insert(X_SERVED_BY, HeaderValue::from(c.id));
}

/// The cluster's headers on a HOC hit of the serving node: the object's kind (from its whole
/// length: `Content-Range`'s, else `Content-Length`) and this node's id.
pub(in crate::node) fn mark_hoc_hit(c: &Cluster, answer: &mut Answer) {
    use hyper::header::{self, HeaderValue};
    let h = answer.response.headers_mut();
    let whole = h
        .get(header::CONTENT_RANGE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.rsplit('/').next())
        .and_then(|n| n.parse().ok())
        .or_else(|| content_length(h));
    if let Some(n) = whole {
        let kind = if c.coded(n) { "coded" } else { "replicated" };
        h.insert(X_OBJECT, HeaderValue::from_static(kind));
    }
    h.insert(X_SERVED_BY, HeaderValue::from(c.id));
}

/// The cluster's headers on a hit from the pieces: the kind of object, this node's id, and
/// whether a decode was needed.
pub(in crate::node) fn mark(
    mut r: Response<NodeBody>,
    c: &Cluster,
    coded: bool,
    decoded: bool,
) -> Response<NodeBody> {
    let h = r.headers_mut();
    h.insert(
        X_OBJECT,
        HeaderValue::from_static(if coded { "coded" } else { "replicated" }),
    );
    h.insert(X_SERVED_BY, HeaderValue::from(c.id));
    if decoded {
        h.insert(X_DECODED, HeaderValue::from_static("1"));
    }
    r
}
