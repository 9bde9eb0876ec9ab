//! `CopyObject` through the S3 face: a `PUT` with `x-amz-copy-source`. The source is read as
//! any object is (late binding; an object of parts from its parts) and written as the
//! destination through the object write path (`objects/write.rs`), coded as the destination's
//! bucket says; its `ETag` is the MD5 of the bytes copied, its content type and metadata the
//! source's (`x-amz-metadata-directive: COPY`, the default) or the request's (`REPLACE`).
//! Objects past 1 GiB (made of parts) are refused: S3 copies those by parts
//! (`UploadPartCopy`), not implemented here.

use std::sync::Arc;

use bytes::Bytes;
use ecdn_cluster::s3_face::S3Face;
use ecdn_objects::meta::{S3Attrs, S3Parts};
use ecdn_s3::sigv4::Verified;
use ecdn_s3::{xml, Code, S3Error};
use hyper::{HeaderMap, Response};
use md5::{Digest as _, Md5};

use super::object::{attrs_of, code_asked, directory, object_name, put_failure};
use super::reply;
use crate::node::body::NodeBody;
use crate::node::cluster::objects::api::{
    code_of, drop_replaced, read_object, replaced, Face, ReadFailure, CODED_FROM,
};
use crate::node::cluster::objects::parts::parts_of;
use crate::node::cluster::objects::record::record;
use crate::node::cluster::objects::write::{next_data, write_object, PutBody, PutFailure};
use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::names::MAX_OBJECT;
use crate::node::state::State;

/// The source's bytes as they are read, as the destination's body; their MD5 kept.
struct Copied {
    body: NodeBody,
    size: u64,
    md5: Md5,
}

impl PutBody for Copied {
    fn size_hint(&self) -> u64 {
        self.size
    }

    async fn next(&mut self) -> Option<Result<Bytes, String>> {
        match next_data(&mut self.body).await? {
            Ok(d) => {
                self.md5.update(&d);
                Some(Ok(d))
            }
            Err(e) => Some(Err(format!("reading the source: {e}"))),
        }
    }
}

/// Whether the request replaces the metadata (`x-amz-metadata-directive`).
fn replaces_metadata(headers: &HeaderMap) -> Result<bool, S3Error> {
    match headers
        .get("x-amz-metadata-directive")
        .map(|v| v.as_bytes())
    {
        None | Some(b"COPY") => Ok(false),
        Some(b"REPLACE") => Ok(true),
        Some(_) => Err(S3Error::new(
            Code::InvalidArgument,
            "x-amz-metadata-directive is COPY or REPLACE",
        )),
    }
}

/// `CopyObject` into `bucket`/`key` (see the module documentation); the signer must reach the
/// source's bucket too.
pub(in crate::node) async fn copy(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    face: &S3Face,
    bucket: &str,
    key: &str,
    headers: &HeaderMap,
    verified: Option<&Verified>,
) -> Result<Response<NodeBody>, S3Error> {
    let value = headers
        .get("x-amz-copy-source")
        .map_or(&b""[..], |v| v.as_bytes());
    let (from_bucket, from_key) = ecdn_s3::request::copy_source(value)?;
    if face.bucket(&from_bucket).is_none() {
        return Err(S3Error::new(
            Code::NoSuchBucket,
            format!("the bucket {from_bucket:?} does not exist"),
        ));
    }
    if !verified.is_some_and(|v| face.allows(&v.access_key, &from_bucket)) {
        return Err(S3Error::new(Code::AccessDenied, "Access Denied"));
    }
    let replace = replaces_metadata(headers)?;
    let (source, name) = (
        object_name(&from_bucket, &from_key)?,
        object_name(bucket, key)?,
    );
    if source == name && !replace {
        return Err(S3Error::new(
            Code::InvalidRequest,
            "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata",
        ));
    }
    let meta = record(c, &source, true).await.map_err(directory)?;
    let size = parts_of(&meta).map_or(meta.size, S3Parts::size);
    if size > MAX_OBJECT as u64 {
        return Err(S3Error::new(
            Code::InvalidRequest,
            format!("the source has {size} bytes: objects past {MAX_OBJECT} are copied by parts (UploadPartCopy), not implemented here"),
        ));
    }
    let (content_type, metadata) = match (replace, &meta.s3) {
        (true, _) => attrs_of(headers)?,
        (false, Some(a)) => (a.content_type.clone(), a.metadata.clone()),
        (false, None) => (None, Vec::new()),
    };
    let read = read_object(st, c, source, None, &HeaderMap::new(), false, Face::Api)
        .await
        .map_err(|e| match e {
            ReadFailure::Directory(e) => directory(e),
            ReadFailure::Unreadable(why) => S3Error::new(Code::ServiceUnavailable, why),
        })?;
    let body = Copied {
        body: read.into_body(),
        size,
        md5: Md5::new(),
    };
    let asked = code_asked(c, bucket, headers)?;
    let scheme = c.cfg.object_scheme;
    let code = |at_least: usize, available: usize| code_of(asked, scheme, at_least, available);
    let modified_ms = ecdn_cluster::auth::unix_now_ms();
    let finish = |b: &mut Copied| {
        Ok(Some(S3Attrs {
            etag: ecdn_s3::text::hex(&std::mem::take(&mut b.md5).finalize()),
            modified_ms,
            content_type,
            metadata,
            parts: None,
        }))
    };
    let before = replaced(c, &name).await;
    let written = write_object(st, c, name, CODED_FROM, code, body, finish)
        .await
        .map_err(|e| match e {
            PutFailure::Body(why) => S3Error::new(Code::ServiceUnavailable, why),
            e => put_failure(e, None),
        })?;
    drop_replaced(st, c, before, &written).await;
    let etag = written.s3.as_ref().map_or("", |a| a.etag.as_str());
    Ok(reply::xml(xml::copy_object(
        &format!("\"{etag}\""),
        &ecdn_s3::time::iso8601(modified_ms),
    )))
}
