//! What the S3 face answers with: S3's XML, and its errors as S3 writes them.

use ecdn_s3::S3Error;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};

use crate::node::body::NodeBody;

/// S3's answer to a failure: its status and XML.
pub(in crate::node) fn error(e: &S3Error, resource: &str, id: &str) -> Response<NodeBody> {
    let mut r = xml(e.xml(resource, id));
    *r.status_mut() = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_REQUEST);
    r
}

/// A `200` with an XML body.
pub(in crate::node) fn xml(body: String) -> Response<NodeBody> {
    let mut r = Response::new(NodeBody::Full(Full::new(body.into())));
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/xml"));
    r
}

/// An answer without a body.
pub(in crate::node) fn empty(status: StatusCode) -> Response<NodeBody> {
    let mut r = Response::new(NodeBody::Full(Full::default()));
    *r.status_mut() = status;
    r
}
