//! What every step of a request's path deals in: the request body sent on to an origin
//! ([`ReqBody`]), what a path produced ([`Answer`]: its [`Outcome`] and response), and the
//! node's own small answers.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};

use super::body::NodeBody;
use super::outcome::Outcome;

/// A request body on its way to the origin: a client's, or none for a request of our own
/// (a background revalidation).
pub(super) type ReqBody = http_body_util::combinators::BoxBody<Bytes, hyper::Error>;

/// What a proxied request's path produced: how it was answered, and the response (without
/// `X-Cache` and `Via`, which `request.rs`'s `deliver` adds).
pub(super) struct Answer {
    pub(super) outcome: Outcome,
    pub(super) response: Response<NodeBody>,
}

/// What the node adds to `Via` on the answers it proxies.
pub(super) const VIA: &str = "1.1 ecdn";

/// An empty request body, for a request of our own or one whose content is not forwarded.
pub(super) fn empty_body() -> ReqBody {
    http_body_util::Empty::<Bytes>::new()
        .map_err(|never| match never {})
        .boxed()
}

/// A plain-text answer of ours.
pub(super) fn text(status: StatusCode, msg: &str) -> Response<NodeBody> {
    let mut r = Response::new(NodeBody::Full(Full::new(Bytes::from(format!("{msg}\n")))));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}
