//! Multipart uploads through the S3 face: `CreateMultipartUpload`, `UploadPart`,
//! `ListParts`, `CompleteMultipartUpload`, `AbortMultipartUpload`, `ListMultipartUploads`.
//!
//! An upload lives in the object directory, so any node takes any of its requests: its
//! description (bucket, key, content type, `x-amz-meta-*`) is a small object
//! `s3mpu/UPLOAD/meta`, and each part an EC-Cache object `s3mpu/UPLOAD/pNNNNN` coded as the
//! bucket says, its MD5 its `ETag`. Completing checks the list the client sends against the
//! parts stored (each named part there with that `ETag`, numbers ascending, every part but the
//! last at least [`MIN_PART`]) and commits the object as made of those parts
//! (`objects/parts.rs`: a record listing them, no byte copied; read as one object through S3
//! and the object API alike), with S3's multipart `ETag` (the MD5 of the parts' MD5s, `-`,
//! their number); then the upload's description and the parts not listed are removed.
//! Aborting removes the upload and its parts. A part is at most `MAX_OBJECT` bytes (1 GiB, as
//! a `PutObject`); the object, up to 10,000 parts, at most S3's 5 TiB.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::node::client_body::ClientBody;
use bytes::Bytes;
use ecdn_cluster::objects::DirectoryError;
use ecdn_objects::meta::{
    part_segment, upload_object, Listed, MetaError, ObjectName, S3Attrs, S3Parts, MAX_PARTS_SIZE,
    UPLOADS,
};
use ecdn_s3::request::UploadsQuery;
use ecdn_s3::sigv4::Verified;
use ecdn_s3::xml::UploadListed;
use ecdn_s3::{xml, Code, S3Error};
use http_body_util::{BodyExt, Limited};
use hyper::{HeaderMap, Response};
use md5::{Digest as _, Md5};

use super::object::{attrs_of, put_failure, read_failure, remove, store};
use super::reply;
use crate::node::body::NodeBody;
use crate::node::cluster::objects::api::{
    code_of, drop_replaced, read_object, replaced, CodeAsked, Face, ReadFailure, CODED_FROM,
};
use crate::node::cluster::objects::write::{write_object, PutBody};
use crate::node::cluster::pieces::member::Cluster;
use crate::node::state::State;

/// The smallest part but the last (S3's 5 MiB).
pub(in crate::node) const MIN_PART: u64 = 5 << 20;
/// Most parts listed in one `ListParts` answer.
const MAX_LISTED_PARTS: usize = 1000;

/// What an upload is for, kept as its `meta` object (JSON).
#[derive(Debug)]
pub(super) struct Upload {
    bucket: String,
    key: String,
    content_type: Option<String>,
    metadata: Vec<(String, String)>,
}

impl Upload {
    fn to_json(&self) -> Vec<u8> {
        let metadata: Vec<serde_json::Value> = self
            .metadata
            .iter()
            .map(|(n, v)| serde_json::json!([n, v]))
            .collect();
        serde_json::json!({
            "bucket": self.bucket,
            "key": self.key,
            "content_type": self.content_type,
            "metadata": metadata,
        })
        .to_string()
        .into_bytes()
    }

    fn from_json(b: &[u8]) -> Option<Upload> {
        let v: serde_json::Value = serde_json::from_slice(b).ok()?;
        let text = |v: &serde_json::Value| v.as_str().map(str::to_string);
        let metadata = v["metadata"]
            .as_array()?
            .iter()
            .map(|p| Some((text(&p[0])?, text(&p[1])?)))
            .collect::<Option<Vec<_>>>()?;
        Some(Upload {
            bucket: text(&v["bucket"])?,
            key: text(&v["key"])?,
            content_type: text(&v["content_type"]),
            metadata,
        })
    }
}

fn upload_name(upload: &str, what: &str) -> Result<ObjectName, S3Error> {
    let valid =
        !upload.is_empty() && upload.len() <= 64 && upload.bytes().all(|b| b.is_ascii_hexdigit());
    if !valid {
        return Err(no_such_upload());
    }
    ObjectName::parse(&upload_object(upload, what))
        .map_err(|e| S3Error::new(Code::InternalError, e.to_string()))
}

/// The object part `part` of the upload `id` is stored as.
pub(super) fn part_name(id: &str, part: u32) -> Result<ObjectName, S3Error> {
    upload_name(id, &part_segment(part))
}

fn no_such_upload() -> S3Error {
    S3Error::new(
        Code::NoSuchUpload,
        "The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.",
    )
}

/// A new upload's id: unique in the cluster (this node, its clock, a counter, the key).
fn new_upload_id(c: &Cluster, bucket: &str, key: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let seed = format!("{}/{nanos}/{n}/{bucket}/{key}", c.id);
    ecdn_s3::text::hex(&ecdn_cluster::auth::sha256(seed.as_bytes())[..16])
}

/// A body already in memory, as a [`PutBody`].
struct Memory(Option<Bytes>);

impl PutBody for Memory {
    fn size_hint(&self) -> u64 {
        self.0.as_ref().map_or(0, |b| b.len() as u64)
    }
    async fn next(&mut self) -> Option<Result<Bytes, String>> {
        self.0.take().map(Ok)
    }
}

/// `CreateMultipartUpload`: the upload's description stored, its id answered.
pub(in crate::node) async fn create(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    bucket: &str,
    key: &str,
    headers: &HeaderMap,
) -> Result<Response<NodeBody>, S3Error> {
    let (content_type, metadata) = attrs_of(headers)?;
    let upload = Upload {
        bucket: bucket.to_string(),
        key: key.to_string(),
        content_type,
        metadata,
    };
    let id = new_upload_id(c, bucket, key);
    let json = upload.to_json();
    let name = upload_name(&id, "meta")?;
    // Its time, for `ListMultipartUploads` (a listing gives it with the record).
    let begun = S3Attrs {
        modified_ms: ecdn_cluster::auth::unix_now_ms(),
        ..S3Attrs::default()
    };
    write_small(st, c, name, json.into(), Some(begun)).await?;
    Ok(reply::xml(xml::initiate_multipart(bucket, key, &id)))
}

/// Writes `bytes` as the small object `name`, replicated (one copy and one more), with the
/// S3 face's `attrs`.
async fn write_small(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    name: ObjectName,
    bytes: Bytes,
    attrs: Option<S3Attrs>,
) -> Result<ecdn_objects::meta::ObjectMeta, S3Error> {
    let scheme = c.cfg.object_scheme;
    let code = |at_least: usize, available: usize| {
        let asked = CodeAsked {
            k: Some(1),
            r: Some(1),
        };
        code_of(asked, scheme, at_least, available)
    };
    write_object(st, c, name, CODED_FROM, code, Memory(Some(bytes)), |_| {
        Ok(attrs)
    })
    .await
    .map_err(|e| put_failure(e, None))
}

/// The upload's description, checked against the request's bucket and key.
pub(super) async fn upload_of(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    id: &str,
    bucket: &str,
    key: &str,
) -> Result<Upload, S3Error> {
    let upload = description(st, c, id).await?;
    if upload.bucket != bucket || upload.key != key {
        return Err(no_such_upload());
    }
    Ok(upload)
}

/// The upload's description.
async fn description(st: &Arc<State>, c: &Arc<Cluster>, id: &str) -> Result<Upload, S3Error> {
    let name = upload_name(id, "meta")?;
    let r = read_object(st, c, name, None, &HeaderMap::new(), false, Face::Api)
        .await
        .map_err(|e| match e {
            ReadFailure::Directory(DirectoryError::Meta(MetaError::NotFound(_))) => {
                no_such_upload()
            }
            e => read_failure(e),
        })?;
    let body = Limited::new(r.into_body(), 64 << 10)
        .collect()
        .await
        .map_err(|e| {
            S3Error::new(
                Code::ServiceUnavailable,
                format!("the upload's description: {e}"),
            )
        })?
        .to_bytes();
    Upload::from_json(&body)
        .ok_or_else(|| S3Error::new(Code::InternalError, "the upload's description is not one"))
}

/// Whether the upload `id` of `key` comes after the query's markers: after `key-marker`, or
/// with `upload-id-marker` too, after that upload of that key (S3's rule; an
/// `upload-id-marker` alone is ignored).
fn after_markers(key: &str, id: &str, q: &UploadsQuery) -> bool {
    match (q.key_marker.as_str(), q.upload_id_marker.as_str()) {
        ("", _) => true,
        (km, "") => key > km,
        (km, uim) => (key, id) > (km, uim),
    }
}

/// `ListMultipartUploads`: the uploads in progress of `bucket` (every upload's description
/// is read: the directory knows uploads by id, not by bucket), in key then id order, a page
/// after the query's markers.
pub(in crate::node) async fn list_uploads(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    bucket: &str,
    q: &UploadsQuery,
) -> Result<Response<NodeBody>, S3Error> {
    let mut found = Vec::new();
    for l in listed_under(c, UPLOADS).await? {
        let Some(id) = l.name.as_str()[UPLOADS.len()..].strip_suffix("/meta") else {
            continue;
        };
        // An upload completed or aborted meanwhile is no longer one.
        let Ok(u) = description(st, c, id).await else {
            continue;
        };
        if u.bucket == bucket && u.key.starts_with(&q.prefix) && after_markers(&u.key, id, q) {
            let initiated_ms = l.s3.as_ref().map_or(0, |s| s.1);
            found.push(UploadListed {
                key: u.key,
                upload_id: id.to_string(),
                initiated_ms,
            });
        }
    }
    found.sort_by(|a, b| (&a.key, &a.upload_id).cmp(&(&b.key, &b.upload_id)));
    let truncated = found.len() > q.max_uploads;
    found.truncate(q.max_uploads);
    Ok(reply::xml(xml::list_uploads(bucket, q, &found, truncated)))
}

/// `UploadPart`: the part stored as an object of its own, its MD5 its `ETag`.
#[allow(clippy::too_many_arguments)]
pub(in crate::node) async fn upload_part(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    bucket: &str,
    key: &str,
    id: &str,
    part: u32,
    headers: &HeaderMap,
    body: ClientBody,
    verified: Option<&Verified>,
) -> Result<Response<NodeBody>, S3Error> {
    upload_of(st, c, id, bucket, key).await?;
    let name = part_name(id, part)?;
    let stored = store(
        st,
        c,
        bucket,
        name,
        headers,
        body,
        verified,
        None,
        Vec::new(),
    )
    .await?;
    Ok(stored.0)
}

/// Every record whose name begins with `prefix`, in name order (the directory's pages of
/// 1,000 read in turn).
async fn listed_under(c: &Cluster, prefix: &str) -> Result<Vec<Listed>, S3Error> {
    let mut out = Vec::new();
    loop {
        let after = out.last().map(|l: &Listed| l.name.to_string());
        let page = c
            .objects
            .list(prefix, after.as_deref(), 1000)
            .await
            .map_err(|e| S3Error::new(Code::ServiceUnavailable, e.to_string()))?;
        let more = page.len() == 1000;
        out.extend(page);
        if !more {
            return Ok(out);
        }
    }
}

/// The parts stored for an upload, in part order: (number, record).
async fn parts_of(c: &Cluster, id: &str) -> Result<Vec<(u32, Listed)>, S3Error> {
    let prefix = upload_object(id, "p");
    let listed = listed_under(c, &prefix).await?;
    Ok(listed
        .into_iter()
        .filter_map(|l| Some((l.name.as_str()[prefix.len()..].parse::<u32>().ok()?, l)))
        .collect())
}

/// `ListParts`: the parts stored so far (at most 1,000).
pub(in crate::node) async fn list_parts(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    bucket: &str,
    key: &str,
    id: &str,
) -> Result<Response<NodeBody>, S3Error> {
    upload_of(st, c, id, bucket, key).await?;
    let parts = parts_of(c, id).await?;
    let mut x = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListPartsResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Bucket>{}</Bucket><Key>{}</Key><UploadId>{}</UploadId><MaxParts>{MAX_LISTED_PARTS}</MaxParts><IsTruncated>{}</IsTruncated>",
        xml::escape(bucket),
        xml::escape(key),
        xml::escape(id),
        parts.len() > MAX_LISTED_PARTS
    );
    for (n, l) in parts.iter().take(MAX_LISTED_PARTS) {
        let (etag, modified) = l.s3.clone().unwrap_or_default();
        x.push_str(&format!(
            "<Part><PartNumber>{n}</PartNumber><LastModified>{}</LastModified><ETag>\"{}\"</ETag><Size>{}</Size></Part>",
            ecdn_s3::time::iso8601(modified),
            xml::escape(&etag),
            l.size
        ));
    }
    x.push_str("</ListPartsResult>");
    Ok(reply::xml(x))
}

/// Removes an upload: its parts but those numbered in `kept` (an object is made of them), then
/// its description.
async fn remove_upload(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    id: &str,
    kept: &[u32],
) -> Result<(), S3Error> {
    for (n, l) in parts_of(c, id).await? {
        if !kept.contains(&n) {
            remove(st, c, &l.name).await?;
        }
    }
    remove(st, c, &upload_name(id, "meta")?).await
}

/// `AbortMultipartUpload`.
pub(in crate::node) async fn abort(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    bucket: &str,
    key: &str,
    id: &str,
) -> Result<Response<NodeBody>, S3Error> {
    upload_of(st, c, id, bucket, key).await?;
    remove_upload(st, c, id, &[]).await?;
    Ok(reply::empty(hyper::StatusCode::NO_CONTENT))
}

/// `CompleteMultipartUpload`.
#[allow(clippy::too_many_arguments)]
pub(in crate::node) async fn complete(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    bucket: &str,
    key: &str,
    id: &str,
    body: ClientBody,
) -> Result<Response<NodeBody>, S3Error> {
    let upload = upload_of(st, c, id, bucket, key).await?;
    let limit = 10_000 * 160 + 4096;
    let xml_body = Limited::new(body, limit)
        .collect()
        .await
        .map_err(|e| S3Error::new(Code::MalformedXML, format!("the body: {e}")))?
        .to_bytes();
    let listed = xml::parse_complete(&xml_body, ecdn_s3::request::MAX_PARTS as usize)?;
    let stored = parts_of(c, id).await?;
    // Every part named, stored with that ETag, in ascending order; all but the last large.
    let mut made_of = Vec::new();
    let mut md5s = Vec::new();
    let mut total = 0u64;
    let mut previous = 0;
    for (i, p) in listed.iter().enumerate() {
        if p.number <= previous {
            return Err(S3Error::new(
                Code::InvalidPartOrder,
                "The list of parts was not in ascending order.",
            ));
        }
        previous = p.number;
        let Some((_, l)) = stored.iter().find(|(n, _)| *n == p.number) else {
            return Err(S3Error::new(
                Code::InvalidPart,
                format!("part {} was not uploaded", p.number),
            ));
        };
        let etag = l.s3.as_ref().map(|(e, _)| e.as_str()).unwrap_or("");
        if etag != p.etag {
            return Err(S3Error::new(
                Code::InvalidPart,
                format!("part {}'s ETag is not {:?}", p.number, p.etag),
            ));
        }
        if i + 1 < listed.len() && l.size < MIN_PART {
            return Err(S3Error::new(
                Code::EntityTooSmall,
                format!(
                    "part {} has {} bytes: every part but the last needs 5 MiB",
                    p.number, l.size
                ),
            ));
        }
        total += l.size;
        md5s.extend(ecdn_s3::text::unhex(etag).unwrap_or_default());
        made_of.push((p.number, l.version, l.size));
    }
    if total > MAX_PARTS_SIZE {
        return Err(S3Error::new(
            Code::EntityTooLarge,
            format!("the parts hold {total} bytes; objects here are at most {MAX_PARTS_SIZE}"),
        ));
    }
    let etag = format!(
        "{}-{}",
        ecdn_s3::text::hex(&Md5::digest(&md5s)),
        listed.len()
    );
    let kept: Vec<u32> = made_of.iter().map(|p| p.0).collect();
    let attrs = S3Attrs {
        etag: etag.clone(),
        modified_ms: ecdn_cluster::auth::unix_now_ms(),
        content_type: upload.content_type,
        metadata: upload.metadata,
        parts: Some(S3Parts {
            upload: id.to_string(),
            parts: made_of,
        }),
    };
    let name = ObjectName::parse(&ecdn_s3::names::object_name(bucket, key))
        .map_err(|e| S3Error::new(Code::KeyTooLongError, e.to_string()))?;
    // The object is its record: the parts stay where they are (each checked as it was stored,
    // and as it is read), and the record's own body is empty.
    let before = replaced(c, &name).await;
    let meta = write_small(st, c, name, Bytes::new(), Some(attrs)).await?;
    drop_replaced(st, c, before, &meta).await;
    remove_upload(st, c, id, &kept).await?;
    let location = format!("/{bucket}/{key}");
    Ok(reply::xml(xml::complete_multipart(
        &location,
        bucket,
        key,
        &format!("\"{etag}\""),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uploads_after_the_markers() {
        let q = |km: &str, uim: &str| UploadsQuery {
            key_marker: km.into(),
            upload_id_marker: uim.into(),
            ..UploadsQuery::default()
        };
        assert!(after_markers("a", "01", &q("", "")));
        assert!(
            after_markers("a", "01", &q("", "ff")),
            "an id marker alone is ignored"
        );
        assert!(!after_markers("a", "ff", &q("a", "")));
        assert!(after_markers("b", "00", &q("a", "")));
        assert!(!after_markers("a", "01", &q("a", "01")));
        assert!(after_markers("a", "02", &q("a", "01")));
        assert!(after_markers("b", "00", &q("a", "01")));
        assert!(!after_markers("0", "ff", &q("a", "01")));
    }
}
