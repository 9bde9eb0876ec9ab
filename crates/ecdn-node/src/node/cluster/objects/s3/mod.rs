//! The S3 face of EC-Cache's objects (issue 67): S3's API on every node's client listener,
//! for the cluster file's `[s3]` section (`ecdn_cluster::s3_face`).
//!
//! A request is the S3 face's when its `Host` is one of the section's domains (path-style
//! `/BUCKET/KEY`) or a bucket under one (virtual-hosted), or when it is signed with Signature
//! Version 4 (header or presigned URL), whatever its host: the cache never sees either. Each is
//! answered top to bottom here: its operation (`ecdn_s3::request`), its signature against the
//! section's keys (`ecdn_s3::sigv4`; an unsigned request only reads a bucket with
//! `anonymous_read`), the key's right to the bucket, then the operation: objects
//! (`object.rs`: `PutObject`, `GetObject` with ranges and conditionals, `HeadObject`,
//! `DeleteObject`, `DeleteObjects`; `copy.rs`: `CopyObject`, `UploadPartCopy`) and buckets
//! (`bucket.rs`: `ListObjectsV2` and `ListObjects` by pages of the object directory,
//! `ListBuckets`, `HeadBucket`, `GetBucketLocation`; buckets are the section's, so
//! `CreateBucket` of one succeeds and of another is refused). Every failure is S3's XML error
//! with S3's code.
//!
//! An object written here is an EC-Cache object named `s3/BUCKET/HEX` (`ecdn_s3::names`: the
//! key's bytes in hex keep S3's order, so a listing page is one range of the directory), coded
//! as the bucket says (or `x-ecdn-k` / `x-ecdn-r`), and readable by the object API under that
//! name. Multipart uploads (`multipart.rs`) are written whole at their completion.

pub(in crate::node) mod body;
pub(in crate::node) mod bucket;
pub(in crate::node) mod copy;
pub(in crate::node) mod multipart;
pub(in crate::node) mod object;
pub(in crate::node) mod reply;

use std::sync::Arc;
use std::time::SystemTime;

use crate::node::client_body::ClientBody;
use ecdn_cluster::s3_face::S3Face;
use ecdn_s3::sigv4::{self, SignedParts, Verified};
use ecdn_s3::{Code, Op, S3Error, S3Request};
use hyper::header::HOST;
use hyper::{Request, Response, StatusCode};

use crate::node::body::NodeBody;
use crate::node::cluster::pieces::member::Cluster;
use crate::node::state::State;

/// Whether `req` is the S3 face's (see the module documentation).
pub(in crate::node) fn wants<B>(face: &S3Face, req: &Request<B>) -> bool {
    let host = req
        .headers()
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()));
    if host.is_some_and(|h| face.serves_host(h)) {
        return true;
    }
    // Signed as S3 signs (version 4; version 2's only to be refused as such).
    let signed_header = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .is_some_and(|v| {
            v.as_bytes().starts_with(b"AWS4-HMAC-SHA256") || v.as_bytes().starts_with(b"AWS ")
        });
    let presigned = req.uri().query().is_some_and(|q| {
        q.split('&')
            .any(|p| p.starts_with("X-Amz-Signature=") || p.starts_with("AWSAccessKeyId="))
    });
    signed_header || presigned
}

/// Answers an S3 request.
pub(in crate::node) async fn serve(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    face: &S3Face,
    req: Request<ClientBody>,
) -> Response<NodeBody> {
    let resource = req.uri().path().to_string();
    let id = crate::node::request_id::of(req.headers());
    let mut r = match answer(st, c, face, req).await {
        Ok(r) => r,
        Err(e) => reply::error(&e, &resource, id.to_str().unwrap_or("")),
    };
    r.headers_mut().insert("x-amz-request-id", id);
    r
}

/// The steps: the operation, the signature, the right to the bucket, the operation done.
async fn answer(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    face: &S3Face,
    req: Request<ClientBody>,
) -> Result<Response<NodeBody>, S3Error> {
    let (parts, body) = req.into_parts();
    let host = parts.headers.get(HOST).and_then(|h| h.to_str().ok());
    let query = parts.uri.query().unwrap_or("");
    let path = parts.uri.path();
    let s3 = S3Request::parse(parts.method.as_str(), path, query, host, &face.domains)?;
    let v2_header = parts
        .headers
        .get(hyper::header::AUTHORIZATION)
        .is_some_and(|v| v.as_bytes().starts_with(b"AWS "));
    if v2_header || sigv4::query_value(query, "AWSAccessKeyId").is_some() {
        return Err(S3Error::new(
            Code::InvalidRequest,
            "Signature Version 2 is not accepted here: sign with Signature Version 4 (AWS4-HMAC-SHA256)",
        ));
    }
    let signed = SignedParts {
        method: parts.method.as_str(),
        path,
        query,
        headers: &parts.headers,
    };
    let verified = sigv4::verify(
        &signed,
        |k| face.secret(k).map(str::to_string),
        SystemTime::now(),
    )?;
    let bucket = authorize(face, &s3, verified.as_ref())?;
    let key = s3.key.clone().unwrap_or_default();
    let copies = parts.headers.contains_key("x-amz-copy-source");
    match (s3.op, bucket) {
        (Op::ListBuckets, _) => Ok(bucket::list_buckets(face, verified.as_ref())),
        (op, None) => Err(S3Error::new(
            Code::InvalidRequest,
            format!("{op:?} needs a bucket"),
        )),
        (Op::HeadBucket | Op::CreateBucket, Some(_)) => Ok(reply::empty(StatusCode::OK)),
        (Op::DeleteBucket, Some(b)) => Err(S3Error::new(
            Code::AccessDenied,
            format!("bucket {b} is made and removed in the cluster file"),
        )),
        (Op::GetBucketLocation, Some(_)) => Ok(bucket::location(face)),
        (Op::ListObjects(q), Some(b)) => bucket::list_objects(c, b, q).await,
        (Op::PutObject, Some(b)) if copies => {
            copy::copy(st, c, face, b, &key, &parts.headers, verified.as_ref()).await
        }
        (Op::UploadPart { upload_id, part }, Some(b)) if copies => {
            let (h, v) = (&parts.headers, verified.as_ref());
            copy::copy_part(st, c, face, b, &key, &upload_id, part, h, v).await
        }
        (Op::PutObject, Some(b)) => {
            object::put(st, c, b, &key, &parts.headers, body, verified.as_ref()).await
        }
        (Op::GetObject, Some(b)) => object::get(st, c, b, &key, &parts.headers, false).await,
        (Op::HeadObject, Some(b)) => object::get(st, c, b, &key, &parts.headers, true).await,
        (Op::DeleteObject, Some(b)) => object::delete(st, c, b, &key).await,
        (Op::DeleteObjects, Some(b)) => object::delete_many(st, c, b, body).await,
        (Op::CreateMultipartUpload, Some(b)) => {
            multipart::create(st, c, b, &key, &parts.headers).await
        }
        (Op::UploadPart { upload_id, part }, Some(b)) => {
            let h = &parts.headers;
            let v = verified.as_ref();
            multipart::upload_part(st, c, b, &key, &upload_id, part, h, body, v).await
        }
        (Op::ListParts { upload_id }, Some(b)) => {
            multipart::list_parts(st, c, b, &key, &upload_id).await
        }
        (Op::CompleteMultipartUpload { upload_id }, Some(b)) => {
            multipart::complete(st, c, b, &key, &upload_id, body).await
        }
        (Op::AbortMultipartUpload { upload_id }, Some(b)) => {
            multipart::abort(st, c, b, &key, &upload_id).await
        }
        (Op::ListMultipartUploads(q), Some(b)) => multipart::list_uploads(st, c, b, &q).await,
    }
}

/// The request's bucket (`None` for the service's own operations), if the signer may reach
/// it: a key reaches the buckets it lists; an unsigned request only reads a bucket with
/// `anonymous_read`. A bucket the section does not name is `NoSuchBucket` to a signed
/// request, as S3 says to any account.
fn authorize<'a>(
    face: &'a S3Face,
    s3: &S3Request,
    verified: Option<&Verified>,
) -> Result<Option<&'a str>, S3Error> {
    let Some(name) = s3.bucket.as_deref() else {
        return match verified {
            Some(_) => Ok(None),
            None => Err(S3Error::new(
                Code::AccessDenied,
                "listing the buckets needs a signed request",
            )),
        };
    };
    let bucket = face.bucket(name);
    let read = matches!(
        s3.op,
        Op::GetObject | Op::HeadObject | Op::ListObjects(_) | Op::HeadBucket
    );
    match (verified, bucket) {
        (Some(v), Some(b)) if face.allows(&v.access_key, &b.name) => Ok(Some(&b.name)),
        (Some(_), None) => Err(S3Error::new(
            Code::NoSuchBucket,
            format!("the bucket {name:?} does not exist"),
        )),
        (None, Some(b)) if b.anonymous_read && read => Ok(Some(&b.name)),
        _ => Err(S3Error::new(Code::AccessDenied, "Access Denied")),
    }
}
