//! The receiving side: a request's signature checked before anything is acted on, a body read
//! within its limit and against its signed digest, and the answers signed for (and checked
//! against) the request they answer.

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Body;
use hyper::header::HeaderMap;
use hyper::http::request::Parts;
use hyper::Response;
use thiserror::Error;

use super::AnswerTo;
use crate::auth::{self, AuthError, ClusterKey, Verified};

/// Checks the signature headers of a received request (method, path and query from its URI)
/// against `key` and the receiver's clock `now` (UNIX milliseconds, see [`auth::unix_now_ms`]).
/// Not whether it is for this process or a replay: that is [`crate::replay::Gate::admit`].
pub fn verify_parts(key: &ClusterKey, parts: &Parts, now: u64) -> Result<Verified, AuthError> {
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or_else(|| parts.uri.path());
    key.verify(parts.method.as_str(), path, &parts.headers, now)
}

/// The signature headers of an answer with `body` to the request for `path_and_query` whose
/// signature was `request` ([`Verified::signature`]; see [`ClusterKey::sign_response`]).
pub fn sign_response(
    key: &ClusterKey,
    path_and_query: &str,
    request: &[u8; 32],
    body: &[u8],
) -> HeaderMap {
    key.sign_response(path_and_query, request, body)
}

/// The body of an answer still to be signed, for a server whose handlers build answers
/// before the request's signature is at hand: [`sign_answer`] signs it at the end.
#[derive(Clone, Debug)]
pub struct ToSign(pub Bytes);

/// Signs `resp` if a handler marked it [`ToSign`]: its signature headers for the request for
/// `path_and_query` whose signature was `request`.
pub fn sign_answer<B>(
    key: &ClusterKey,
    path_and_query: &str,
    request: &[u8; 32],
    resp: &mut Response<B>,
) {
    if let Some(ToSign(body)) = resp.extensions_mut().remove::<ToSign>() {
        let headers = sign_response(key, path_and_query, request, &body);
        resp.headers_mut().extend(headers);
    }
}

/// Checks an answer's signature and its body, received for a request for `path_and_query`, at
/// `now` (UNIX milliseconds): `parts` are the answer's head as [`PeerClient::send`](super::PeerClient::send) returned
/// it, which carries the request's signature ([`AnswerTo`]) the answer must be bound to.
/// An answer without it (not to a request this client signed) is refused.
pub fn verify_response(
    key: &ClusterKey,
    path_and_query: &str,
    parts: &hyper::http::response::Parts,
    body: &[u8],
    now: u64,
) -> Result<(), AuthError> {
    let AnswerTo(request) = parts
        .extensions
        .get::<AnswerTo>()
        .ok_or(AuthError::Missing(auth::SIGNATURE))?;
    key.verify_response(path_and_query, request, &parts.headers, body, now)
}

/// Why a body could not be read.
#[derive(Debug, Error)]
pub enum BodyError {
    #[error("body larger than {0} bytes")]
    TooLarge(usize),
    #[error("reading the body: {0}")]
    Read(String),
    #[error(transparent)]
    Auth(#[from] AuthError),
}

/// Reads a body of at most `limit` bytes.
pub async fn read_body<B>(body: B, limit: usize) -> Result<Bytes, BodyError>
where
    B: Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    match Limited::new(body, limit).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(BodyError::TooLarge(limit)),
        Err(e) => Err(BodyError::Read(e.to_string())),
    }
}

/// Reads a body of at most `limit` bytes (a streamed body's tag included), checks it against
/// the request's signed digest or its tag, and returns its content.
pub async fn read_verified_body<B>(
    body: B,
    limit: usize,
    verified: &Verified,
) -> Result<Bytes, BodyError>
where
    B: Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let bytes = read_body(body, limit).await?;
    Ok(verified.open_body(bytes)?)
}
