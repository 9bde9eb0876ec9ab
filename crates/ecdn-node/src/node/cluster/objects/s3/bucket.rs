//! The S3 face's buckets: those of the cluster file's `[s3]` section. `ListObjectsV2` and
//! `ListObjects` page through a bucket's keys by range reads of the object directory (the
//! keys' names keep their order, `ecdn_s3::names`; `ecdn_s3::list` folds common prefixes);
//! `ListBuckets` names the buckets the key reaches; `GetBucketLocation` says the section's
//! region.

use std::sync::Arc;

use ecdn_cluster::s3_face::S3Face;
use ecdn_s3::list::Lister;
use ecdn_s3::request::ListQuery;
use ecdn_s3::sigv4::Verified;
use ecdn_s3::xml::{self, ListEntry};
use ecdn_s3::{names, Code, S3Error};
use hyper::Response;

use super::reply;
use crate::node::body::NodeBody;
use crate::node::cluster::pieces::member::Cluster;

/// `ListObjectsV2` / `ListObjects`: one page, a few range reads of the directory.
pub(in crate::node) async fn list_objects(
    c: &Arc<Cluster>,
    bucket: &str,
    q: ListQuery,
) -> Result<Response<NodeBody>, S3Error> {
    let v1 = q.v1;
    let mut lister = Lister::new(bucket, q)?;
    while let Some(batch) = lister.next_batch() {
        let prefix = names::name_prefix(bucket, batch.prefix.as_bytes());
        let after = batch
            .after
            .as_deref()
            .map(|a| names::name_prefix(bucket, a));
        let listed = c
            .objects
            .list(&prefix, after.as_deref(), batch.limit)
            .await
            .map_err(|e| S3Error::new(Code::ServiceUnavailable, e.to_string()))?;
        let entries = listed
            .into_iter()
            .filter_map(|l| {
                let key = names::key_of(bucket, l.name.as_str())?;
                let (etag, modified) = l.s3.unwrap_or((l.sha256, 0));
                Some(ListEntry {
                    key,
                    size: l.size,
                    etag: format!("\"{etag}\""),
                    last_modified_ms: modified,
                })
            })
            .collect();
        lister.take(entries, batch.limit);
    }
    let page = lister.finish();
    let body = if v1 { page.xml_v1() } else { page.xml() };
    Ok(reply::xml(body))
}

/// `ListBuckets`: the buckets the signer's key reaches.
pub(in crate::node) fn list_buckets(
    face: &S3Face,
    verified: Option<&Verified>,
) -> Response<NodeBody> {
    let key = verified.map_or("", |v| v.access_key.as_str());
    let names: Vec<(String, u64)> = face
        .buckets
        .iter()
        .filter(|b| face.allows(key, &b.name))
        .map(|b| (b.name.clone(), 0))
        .collect();
    reply::xml(xml::list_buckets(key, &names))
}

/// `GetBucketLocation`: the section's region (S3 answers an empty one for us-east-1).
pub(in crate::node) fn location(face: &S3Face) -> Response<NodeBody> {
    let region = match face.region() {
        "us-east-1" => String::new(),
        r => xml::escape(r),
    };
    reply::xml(format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<LocationConstraint xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">{region}</LocationConstraint>"
    ))
}
