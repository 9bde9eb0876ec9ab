//! Copies through the S3 face: `CopyObject` (a `PUT` with `x-amz-copy-source`) and
//! `UploadPartCopy` (an `UploadPart` with it, and `x-amz-copy-source-range` for some of the
//! source's bytes). The source is read as any object is (late binding; an object of parts from
//! its parts), the version whose record was checked, and written through the object write path
//! (`objects/write.rs`), coded as the destination's bucket says; the `ETag` is the MD5 of the
//! bytes copied. A `CopyObject` keeps the source's content type and metadata
//! (`x-amz-metadata-directive: COPY`, the default) or takes the request's (`REPLACE`); one past
//! 1 GiB (an object of parts) is refused, as S3 refuses past 5 GiB: such a source is copied by
//! parts, each at most 1 GiB (what boto3's, the AWS CLI's and rclone's copies do past their
//! multipart threshold). The source's conditions (`x-amz-copy-source-if-match`,
//! `-if-none-match`, `-if-modified-since`, `-if-unmodified-since`) are checked against its
//! record in RFC 9110's order; one that fails is `PreconditionFailed`, nothing written.

use std::sync::Arc;

use bytes::Bytes;
use ecdn_cluster::s3_face::S3Face;
use ecdn_objects::meta::{ObjectMeta, ObjectName, S3Attrs, S3Parts};
use ecdn_s3::sigv4::Verified;
use ecdn_s3::{xml, Code, S3Error};
use hyper::header::{HeaderValue, RANGE};
use hyper::{HeaderMap, Response};
use md5::{Digest as _, Md5};

use super::multipart::{part_name, upload_of};
use super::object::{
    attrs_of, code_asked, directory, etag_listed, object_name, precondition_failed, put_failure,
    read_failure, UserMetadata,
};
use super::reply;
use crate::node::body::NodeBody;
use crate::node::cluster::objects::api::{
    code_of, drop_replaced, read_object, replaced, Face, CODED_FROM,
};
use crate::node::cluster::objects::parts::parts_of;
use crate::node::cluster::objects::record::record;
use crate::node::cluster::objects::write::{next_data, write_object, PutBody, PutFailure};
use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::names::MAX_OBJECT;
use crate::node::freshness::http_date;
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

/// A copy's source, found and allowed, its conditions held.
struct Source {
    name: ObjectName,
    meta: Arc<ObjectMeta>,
    /// Its bytes (an object of parts: its parts' together).
    size: u64,
}

/// The source `x-amz-copy-source` names: its bucket one the signer reaches, its record (from
/// the directory, not a cached one), the request's conditions on it held.
async fn source(
    c: &Arc<Cluster>,
    face: &S3Face,
    headers: &HeaderMap,
    verified: Option<&Verified>,
) -> Result<Source, S3Error> {
    let value = headers
        .get("x-amz-copy-source")
        .map_or(&b""[..], |v| v.as_bytes());
    let (bucket, key) = ecdn_s3::request::copy_source(value)?;
    if face.bucket(&bucket).is_none() {
        return Err(S3Error::new(
            Code::NoSuchBucket,
            format!("the bucket {bucket:?} does not exist"),
        ));
    }
    if !verified.is_some_and(|v| face.allows(&v.access_key, &bucket)) {
        return Err(S3Error::new(Code::AccessDenied, "Access Denied"));
    }
    let name = object_name(&bucket, &key)?;
    let meta = record(c, &name, true).await.map_err(directory)?;
    let (etag, modified_ms) = match &meta.s3 {
        Some(a) => (a.etag.as_str(), Some(a.modified_ms)),
        // Written through the object API: its ETag the SHA-256, no time kept.
        None => (meta.sha256.as_str(), None),
    };
    if !conditions_hold(headers, etag, modified_ms) {
        return Err(precondition_failed());
    }
    let size = parts_of(&meta).map_or(meta.size, S3Parts::size);
    Ok(Source { name, meta, size })
}

/// Whether the copy's conditions on a source with `etag` (unquoted), last modified at
/// `modified_ms` (`None`: not known) hold. RFC 9110's order (§13.2.2), which S3's documented
/// pairs follow: `if-match`, else `if-unmodified-since`; then `if-none-match`, else
/// `if-modified-since`. Dates compare in whole seconds, as `Last-Modified` gives them; a date
/// that is not one is ignored, as RFC 9110 says.
fn conditions_hold(headers: &HeaderMap, etag: &str, modified_ms: Option<u64>) -> bool {
    let text = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
    let matches = |list: &str| etag_listed(list, etag);
    let modified_s = modified_ms.map(|ms| ms / 1000);
    let since = |n: &str| Some((modified_s?, http_date(text(n)?)?));
    let first = match text("x-amz-copy-source-if-match") {
        Some(list) => matches(list),
        None => since("x-amz-copy-source-if-unmodified-since").is_none_or(|(m, d)| m <= d),
    };
    let second = match text("x-amz-copy-source-if-none-match") {
        Some(list) => !matches(list),
        None => since("x-amz-copy-source-if-modified-since").is_none_or(|(m, d)| m > d),
    };
    first && second
}

/// Reads `range` (first and last byte; `None`: all) of the source, as the version checked.
async fn read_source(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    source: &Source,
    range: Option<(u64, u64)>,
) -> Result<Copied, S3Error> {
    let mut h = HeaderMap::new();
    let size = match range {
        Some((first, last)) => {
            if let Ok(v) = HeaderValue::from_str(&format!("bytes={first}-{last}")) {
                h.insert(RANGE, v);
            }
            last - first + 1
        }
        None => source.size,
    };
    let read = read_object(st, c, source.name.clone(), None, &h, false, Face::Api)
        .await
        .map_err(read_failure)?;
    // The read takes this node's cached record, refreshed by `source`: another version only
    // if the source was written again meanwhile (S3 clients retry a `503`).
    let version = read
        .headers()
        .get("x-ecdn-object-version")
        .and_then(|v| v.to_str().ok());
    if version != Some(source.meta.version.to_string().as_str()) {
        return Err(S3Error::new(
            Code::ServiceUnavailable,
            "the source was written again while it was copied",
        ));
    }
    Ok(Copied {
        body: read.into_body(),
        size,
        md5: Md5::new(),
    })
}

/// Writes the bytes `copied` as the object `name` of `bucket` with `content_type` and
/// `metadata`, its `ETag` their MD5: the record committed.
#[allow(clippy::too_many_arguments)]
async fn write_copy(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    bucket: &str,
    name: ObjectName,
    headers: &HeaderMap,
    copied: Copied,
    content_type: Option<String>,
    metadata: UserMetadata,
) -> Result<ObjectMeta, S3Error> {
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
    write_object(st, c, name, CODED_FROM, code, copied, finish)
        .await
        .map_err(|e| match e {
            PutFailure::Body(why) => S3Error::new(Code::ServiceUnavailable, why),
            e => put_failure(e, None),
        })
}

/// The `ETag` (quoted) and ISO 8601 time of what `write_copy` committed.
fn written(meta: &ObjectMeta) -> (String, String) {
    let (etag, ms) = meta
        .s3
        .as_ref()
        .map_or(("", 0), |a| (a.etag.as_str(), a.modified_ms));
    (format!("\"{etag}\""), ecdn_s3::time::iso8601(ms))
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

/// `CopyObject` into `bucket`/`key` (see the module documentation).
pub(in crate::node) async fn copy(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    face: &S3Face,
    bucket: &str,
    key: &str,
    headers: &HeaderMap,
    verified: Option<&Verified>,
) -> Result<Response<NodeBody>, S3Error> {
    let replace = replaces_metadata(headers)?;
    let source = source(c, face, headers, verified).await?;
    let name = object_name(bucket, key)?;
    if source.name == name && !replace {
        return Err(S3Error::new(
            Code::InvalidRequest,
            "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata",
        ));
    }
    if source.size > MAX_OBJECT as u64 {
        return Err(S3Error::new(
            Code::InvalidRequest,
            format!(
                "the source has {} bytes: objects past {MAX_OBJECT} are copied by parts (UploadPartCopy)",
                source.size
            ),
        ));
    }
    let (content_type, metadata) = match (replace, &source.meta.s3) {
        (true, _) => attrs_of(headers)?,
        (false, Some(a)) => (a.content_type.clone(), a.metadata.clone()),
        (false, None) => (None, Vec::new()),
    };
    let copied = read_source(st, c, &source, None).await?;
    let before = replaced(c, &name).await;
    let meta = write_copy(st, c, bucket, name, headers, copied, content_type, metadata).await?;
    drop_replaced(st, c, before, &meta).await;
    let (etag, modified) = written(&meta);
    Ok(reply::xml(xml::copy_object(&etag, &modified)))
}

/// `UploadPartCopy`: part `part` of the upload `id` of `bucket`/`key` copied from the source,
/// all of it or `x-amz-copy-source-range`'s bytes, at most 1 GiB.
#[allow(clippy::too_many_arguments)]
pub(in crate::node) async fn copy_part(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    face: &S3Face,
    bucket: &str,
    key: &str,
    id: &str,
    part: u32,
    headers: &HeaderMap,
    verified: Option<&Verified>,
) -> Result<Response<NodeBody>, S3Error> {
    upload_of(st, c, id, bucket, key).await?;
    let source = source(c, face, headers, verified).await?;
    let range = match headers.get("x-amz-copy-source-range") {
        Some(v) => Some(ecdn_s3::request::copy_source_range(
            v.as_bytes(),
            source.size,
        )?),
        None => None,
    };
    let size = range.map_or(source.size, |(first, last)| last - first + 1);
    if size > MAX_OBJECT as u64 {
        return Err(S3Error::new(
            Code::EntityTooLarge,
            format!("a part of {size} bytes: a part is at most {MAX_OBJECT} bytes here"),
        ));
    }
    let copied = read_source(st, c, &source, range).await?;
    let name = part_name(id, part)?;
    let meta = write_copy(st, c, bucket, name, headers, copied, None, Vec::new()).await?;
    let (etag, modified) = written(&meta);
    Ok(reply::xml(xml::copy_part(&etag, &modified)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_conditions_follow_rfc_9110_s_order() {
        // Last modified at Sun, 09 Sep 2001 01:46:40 GMT (10⁹ s), and 400 ms.
        let at = "Sun, 09 Sep 2001 01:46:40 GMT";
        let (before, after) = (
            "Sat, 01 Jan 2000 00:00:00 GMT",
            "Mon, 10 Sep 2001 00:00:00 GMT",
        );
        let holds = |pairs: &[(&'static str, &str)], modified: Option<u64>| {
            let mut h = HeaderMap::new();
            for (n, v) in pairs {
                h.insert(*n, HeaderValue::from_str(v).unwrap());
            }
            conditions_hold(&h, "abc", modified)
        };
        let m = Some(1_000_000_000_400);
        let (im, ius, inm, ims) = (
            "x-amz-copy-source-if-match",
            "x-amz-copy-source-if-unmodified-since",
            "x-amz-copy-source-if-none-match",
            "x-amz-copy-source-if-modified-since",
        );
        assert!(holds(&[], m));
        for yes in ["abc", "\"abc\"", "\"x\", \"abc\"", "*", "W/\"abc\""] {
            assert!(holds(&[(im, yes)], m), "{yes}");
            assert!(!holds(&[(inm, yes)], m), "{yes}");
        }
        assert!(!holds(&[(im, "\"abcd\"")], m));
        assert!(holds(&[(inm, "\"abcd\"")], m));
        // Dates in whole seconds: unmodified since its own second, modified since before.
        assert!(holds(&[(ius, at)], m) && holds(&[(ius, after)], m));
        assert!(!holds(&[(ius, before)], m));
        assert!(holds(&[(ims, before)], m));
        assert!(!holds(&[(ims, at)], m) && !holds(&[(ims, after)], m));
        // A matching ETag decides over the date beside it, both ways.
        assert!(holds(&[(im, "abc"), (ius, before)], m));
        assert!(holds(&[(inm, "x"), (ims, after)], m));
        assert!(!holds(&[(im, "x"), (ius, after)], m));
        assert!(!holds(&[(inm, "abc"), (ims, before)], m));
        assert!(!holds(&[(im, "abc"), (inm, "abc")], m));
        // A date that is not one, or a source with no time kept: the date is not a condition.
        assert!(holds(&[(ims, "yesterday")], m) && holds(&[(ius, "0")], m));
        assert!(holds(&[(ims, after)], None) && holds(&[(ius, before)], None));
    }
}
