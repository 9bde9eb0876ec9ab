//! The S3 face's objects: `PutObject` (written as an EC-Cache object, `objects/write.rs`,
//! with its body checked as `body.rs` says), `GetObject` and `HeadObject` (the object API's
//! read, with late binding, ranges and conditionals, answered with S3's headers), and
//! `DeleteObject` / `DeleteObjects`.

use std::sync::Arc;

use crate::node::client_body::ClientBody;
use bytes::Bytes;
use ecdn_cluster::objects::DirectoryError;
use ecdn_objects::meta::{MetaError, ObjectMeta, ObjectName, S3Attrs};
use ecdn_s3::sigv4::Verified;
use ecdn_s3::{names, xml, Code, S3Error};
use http_body_util::{BodyExt, Limited};
use hyper::header::{
    HeaderName, HeaderValue, CONTENT_TYPE, ETAG, IF_MATCH, IF_UNMODIFIED_SINCE, LAST_MODIFIED,
};
use hyper::{HeaderMap, Response, StatusCode};

use super::body::S3Body;
use super::reply;
use crate::node::body::NodeBody;
use crate::node::cluster::objects::api::{
    code_of, drop_replaced, read_object, remove_object, replaced, CodeAsked, Face, ReadFailure,
    CODED_FROM,
};
use crate::node::cluster::objects::write::{write_object, PutFailure};
use crate::node::cluster::pieces::member::Cluster;
use crate::node::freshness::http_date;
use crate::node::state::State;

/// Most keys one `DeleteObjects` names (S3's).
const MAX_DELETE: usize = 1000;

/// The object name of `key` in `bucket`.
pub(in crate::node) fn object_name(bucket: &str, key: &str) -> Result<ObjectName, S3Error> {
    ObjectName::parse(&names::object_name(bucket, key))
        .map_err(|e| S3Error::new(Code::KeyTooLongError, e.to_string()))
}

/// `x-amz-meta-*` headers: names without the prefix, and values.
pub(in crate::node) type UserMetadata = Vec<(String, String)>;

/// What a `PutObject` says of its object besides its bytes: `Content-Type` and the
/// `x-amz-meta-*` headers.
pub(in crate::node) fn attrs_of(
    headers: &HeaderMap,
) -> Result<(Option<String>, UserMetadata), S3Error> {
    let text = |v: &HeaderValue| {
        v.to_str()
            .map(str::to_string)
            .map_err(|_| S3Error::new(Code::InvalidArgument, "a header is not text"))
    };
    let content_type = headers.get(CONTENT_TYPE).map(text).transpose()?;
    let mut metadata = Vec::new();
    for (n, v) in headers {
        if let Some(name) = n.as_str().strip_prefix("x-amz-meta-") {
            metadata.push((name.to_string(), text(v)?));
        }
    }
    Ok((content_type, metadata))
}

/// The code an object of `bucket` is written with: `x-ecdn-k` / `x-ecdn-r`, else the
/// bucket's, else the object API's defaults.
pub(in crate::node) fn code_asked(
    c: &Cluster,
    bucket: &str,
    headers: &HeaderMap,
) -> Result<CodeAsked, S3Error> {
    let num = |n: &str| -> Result<Option<usize>, S3Error> {
        headers
            .get(n)
            .map(|v| {
                v.to_str()
                    .ok()
                    .and_then(|s| s.trim().parse().ok())
                    .ok_or_else(|| {
                        S3Error::new(Code::InvalidArgument, format!("{n} must be a number"))
                    })
            })
            .transpose()
    };
    let given = (num("x-ecdn-k")?, num("x-ecdn-r")?);
    let b = c.cfg.s3.as_ref().and_then(|f| f.bucket(bucket));
    Ok(match given {
        (None, None) => CodeAsked {
            k: b.and_then(|b| b.k),
            r: b.and_then(|b| b.r),
        },
        (k, r) => CodeAsked { k, r },
    })
}

/// `PutObject`.
pub(in crate::node) async fn put(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    bucket: &str,
    key: &str,
    headers: &HeaderMap,
    body: ClientBody,
    verified: Option<&Verified>,
) -> Result<Response<NodeBody>, S3Error> {
    if key.is_empty() {
        return Err(S3Error::new(Code::InvalidRequest, "PutObject needs a key"));
    }
    let name = object_name(bucket, key)?;
    let (content_type, metadata) = attrs_of(headers)?;
    let before = replaced(c, &name).await;
    let (r, meta) = store(
        st,
        c,
        bucket,
        name,
        headers,
        body,
        verified,
        content_type,
        metadata,
    )
    .await?;
    drop_replaced(st, c, before, &meta).await;
    Ok(r)
}

/// Stores the body of a `PutObject` or `UploadPart` as the object `name` of `bucket` (its
/// code the bucket's unless the request says), with what the S3 face keeps of it; the answer
/// gives its `ETag`, the body's MD5. Also the record committed.
#[allow(clippy::too_many_arguments)]
pub(in crate::node) async fn store(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    bucket: &str,
    name: ObjectName,
    headers: &HeaderMap,
    body: ClientBody,
    verified: Option<&Verified>,
    content_type: Option<String>,
    metadata: UserMetadata,
) -> Result<(Response<NodeBody>, ObjectMeta), S3Error> {
    let asked = code_asked(c, bucket, headers)?;
    let body = S3Body::new(body, headers, verified)?;
    let failure = body.failure();
    let scheme = c.cfg.object_scheme;
    let code = |at_least: usize, available: usize| code_of(asked, scheme, at_least, available);
    let modified_ms = ecdn_cluster::auth::unix_now_ms();
    let finish = |b: &mut S3Body| {
        let attrs = S3Attrs {
            etag: b.md5_hex(),
            modified_ms,
            content_type,
            metadata,
            parts: None,
        };
        Ok(Some(attrs))
    };
    let written = write_object(st, c, name, CODED_FROM, code, body, finish).await;
    let meta = written
        .map_err(|e| put_failure(e, failure.lock().unwrap_or_else(|p| p.into_inner()).take()))?;
    let mut r = reply::empty(StatusCode::OK);
    if let Some(a) = &meta.s3 {
        if let Ok(v) = HeaderValue::from_str(&format!("\"{}\"", a.etag)) {
            r.headers_mut().insert(ETAG, v);
        }
    }
    Ok((r, meta))
}

/// A failed write as S3 says it: the body's own refusal first (`body_failure`, with its
/// code), else the write's.
pub(in crate::node) fn put_failure(e: PutFailure, body_failure: Option<S3Error>) -> S3Error {
    match (e, body_failure) {
        (_, Some(e)) => e,
        (PutFailure::TooLarge, None) => S3Error::new(
            Code::EntityTooLarge,
            "the object is larger than this store takes (1 GiB)",
        ),
        (PutFailure::Body(e), None) => S3Error::new(Code::IncompleteBody, e),
        (PutFailure::Code(e), None) => S3Error::new(Code::InvalidArgument, e),
        (PutFailure::Directory(e), None) => directory(e),
        (PutFailure::Unstored { stored, total, k }, None) => S3Error::new(
            Code::ServiceUnavailable,
            format!("only {stored} of the {total} splits were stored; decoding needs {k}"),
        ),
        (PutFailure::NotBegun(_), None) => S3Error::new(
            Code::ServiceUnavailable,
            "no write could be begun: the object directory or too few nodes",
        ),
        (PutFailure::Encoding | PutFailure::Backend(_), None) => {
            S3Error::new(Code::InternalError, "the object could not be stored")
        }
    }
}

/// A directory failure as S3 says it.
pub(in crate::node) fn directory(e: DirectoryError) -> S3Error {
    match e {
        DirectoryError::Meta(MetaError::NotFound(_)) => {
            S3Error::new(Code::NoSuchKey, "The specified key does not exist.")
        }
        e => S3Error::new(Code::ServiceUnavailable, e.to_string()),
    }
}

/// A failed read as S3 says it.
pub(in crate::node) fn read_failure(e: ReadFailure) -> S3Error {
    match e {
        ReadFailure::Directory(e) => directory(e),
        ReadFailure::Unreadable(why) => S3Error::new(Code::ServiceUnavailable, why),
    }
}

/// A condition of the request (`If-Match`, `x-amz-copy-source-if-*`, …) that did not hold.
pub(in crate::node) fn precondition_failed() -> S3Error {
    S3Error::new(
        Code::PreconditionFailed,
        "At least one of the pre-conditions you specified did not hold",
    )
}

/// Whether the `If-Match` / `If-None-Match` list `list` names `etag` (quoted or not; `*` names
/// any; a weak tag `W/"…"` compares by its value).
pub(in crate::node) fn etag_listed(list: &str, etag: &str) -> bool {
    fn bare(t: &str) -> &str {
        t.trim().trim_start_matches("W/").trim_matches('"')
    }
    let etag = bare(etag);
    list.split(',').any(|t| t.trim() == "*" || bare(t) == etag)
}

/// `GetObject` and (`head`) `HeadObject`.
pub(in crate::node) async fn get(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    bucket: &str,
    key: &str,
    headers: &HeaderMap,
    head: bool,
) -> Result<Response<NodeBody>, S3Error> {
    let name = object_name(bucket, key)?;
    let r = read_object(st, c, name, None, headers, head, Face::S3)
        .await
        .map_err(read_failure)?;
    // `If-Match`: the object as the client knew it, else `If-Unmodified-Since` (RFC 9110's
    // order, §13.2.2), or nothing (dropping the answer cancels its read).
    let answered = |n: HeaderName| r.headers().get(n).and_then(|v| v.to_str().ok());
    let asked = |n: HeaderName| headers.get(n).and_then(|v| v.to_str().ok());
    let holds = match (asked(IF_MATCH), asked(IF_UNMODIFIED_SINCE)) {
        (Some(want), _) => etag_listed(want, answered(ETAG).unwrap_or("")),
        // A date that is not one is no condition; an object with no time kept is not judged.
        (None, Some(date)) => {
            match (answered(LAST_MODIFIED).and_then(http_date), http_date(date)) {
                (Some(modified), Some(date)) => modified <= date,
                _ => true,
            }
        }
        (None, None) => true,
    };
    if !holds {
        return Err(precondition_failed());
    }
    if r.status() == StatusCode::RANGE_NOT_SATISFIABLE {
        return Err(S3Error::new(
            Code::InvalidRange,
            "The requested range is not satisfiable",
        ));
    }
    Ok(r)
}

/// `DeleteObject`: `204` whether or not the key was there, as S3 answers.
pub(in crate::node) async fn delete(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    bucket: &str,
    key: &str,
) -> Result<Response<NodeBody>, S3Error> {
    remove(st, c, &object_name(bucket, key)?).await?;
    Ok(reply::empty(StatusCode::NO_CONTENT))
}

/// Removes the object `name`, if there is one.
pub(in crate::node) async fn remove(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    name: &ObjectName,
) -> Result<(), S3Error> {
    match remove_object(st, c, name).await {
        Ok(_) | Err(DirectoryError::Meta(MetaError::NotFound(_))) => Ok(()),
        Err(e) => Err(directory(e)),
    }
}

/// `DeleteObjects`: each key of the body's list removed, the outcome of each answered.
pub(in crate::node) async fn delete_many(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    bucket: &str,
    body: ClientBody,
) -> Result<Response<NodeBody>, S3Error> {
    let limit = MAX_DELETE * 1200 + 4096;
    let bytes: Bytes = Limited::new(body, limit)
        .collect()
        .await
        .map_err(|e| S3Error::new(Code::MalformedXML, format!("the body: {e}")))?
        .to_bytes();
    let (keys, quiet) = xml::parse_delete(&bytes, MAX_DELETE)?;
    let (mut deleted, mut failed) = (Vec::new(), Vec::new());
    for k in keys {
        let removed = match object_name(bucket, &k) {
            Ok(name) => remove(st, c, &name).await,
            Err(e) => Err(e),
        };
        match removed {
            Ok(()) => deleted.push(k),
            Err(e) => failed.push((k, e)),
        }
    }
    Ok(reply::xml(xml::delete_result(&deleted, &failed, quiet)))
}
