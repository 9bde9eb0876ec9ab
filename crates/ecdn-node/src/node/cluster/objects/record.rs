//! An object's record and its splits, as the object API's endpoints (`api.rs`) and the
//! parity budget (`budget.rs`) both need them: the record read (through the node's record
//! cache) and described in headers and JSON, the splits' piece keys and metadata, the plan of a
//! read, and the splits removed.

use std::sync::Arc;

use bytes::Bytes;
use ecdn_cluster::objects::DirectoryError;
use ecdn_cluster::piece::{Coding, PieceMeta};
use ecdn_codec::ObjectLayout;
use ecdn_objects::meta::{MetaError, ObjectMeta, ObjectName};
use ecdn_objects::split::{place_splits, read_plan};
use ecdn_trace::Rng;
use http_body_util::Full;
use hyper::header::{self, HeaderName, HeaderValue};
use hyper::{Response, StatusCode};

use crate::node::answer::text;
use crate::node::body::NodeBody;
use crate::node::cluster::pieces::coded::{CodedObject, LateBinding};
use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::purge_log::UNORDERED;
use crate::node::state::State;

/// The piece keys of objects' splits start with this (never a cache key: those hold a host).
pub(in crate::node) const KEY_PREFIX: &str = crate::node::cluster::pieces::store::SPLIT_PREFIX;

/// The piece key of an object version's splits.
pub(in crate::node) fn piece_key(name: &ObjectName, version: u64) -> String {
    format!("{KEY_PREFIX}{name}@{version}")
}

pub(in crate::node) fn json(status: StatusCode, meta: &ObjectMeta) -> Response<NodeBody> {
    let v = serde_json::to_value(meta).expect("a record serializes");
    json_value(status, meta, &v)
}

/// `v` (the record `meta`, perhaps with more fields) as a JSON answer with the record's
/// headers.
pub(in crate::node) fn json_value(
    status: StatusCode,
    meta: &ObjectMeta,
    v: &serde_json::Value,
) -> Response<NodeBody> {
    let body = serde_json::to_vec(v).expect("JSON serializes");
    let mut r = Response::new(NodeBody::Full(Full::new(Bytes::from(body))));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    describe(&mut r, meta);
    r
}

/// The record's headers on an answer.
pub(in crate::node) fn describe(r: &mut Response<NodeBody>, meta: &ObjectMeta) {
    r.headers_mut().extend(record_headers(meta));
}

/// Version, code and `ETag` (the SHA-256) of a record, as headers.
pub(in crate::node) fn record_headers(
    meta: &ObjectMeta,
) -> impl Iterator<Item = (HeaderName, HeaderValue)> {
    [
        ("x-ecdn-object-version", meta.version.to_string()),
        ("x-ecdn-k", meta.k.to_string()),
        ("x-ecdn-r", meta.r.to_string()),
        ("etag", format!("\"{}\"", meta.sha256)),
    ]
    .into_iter()
    .filter_map(|(name, value)| Some((HeaderName::from_static(name), value.try_into().ok()?)))
}

pub(in crate::node) fn directory_error(e: DirectoryError) -> Response<NodeBody> {
    match e {
        DirectoryError::Meta(e @ MetaError::NotFound(_)) => {
            text(StatusCode::NOT_FOUND, &e.to_string())
        }
        DirectoryError::Meta(e @ MetaError::Stale { .. }) => {
            text(StatusCode::CONFLICT, &e.to_string())
        }
        e => text(StatusCode::BAD_GATEWAY, &e.to_string()),
    }
}

/// The record of `name`: this node's cached copy while it is fresh (unless `fresh`), else the
/// directory's, then cached.
pub(in crate::node) async fn record(
    c: &Cluster,
    name: &ObjectName,
    fresh: bool,
) -> Result<Arc<ObjectMeta>, DirectoryError> {
    Ok(cached_record(c, name, fresh).await?.0)
}

/// [`record`], and whether it came from the cache.
pub(in crate::node) async fn cached_record(
    c: &Cluster,
    name: &ObjectName,
    fresh: bool,
) -> Result<(Arc<ObjectMeta>, bool), DirectoryError> {
    let now = std::time::Instant::now();
    if !fresh {
        if let Some(m) = crate::node::lock::lock(&c.records).get(name, now) {
            return Ok((m, true));
        }
    }
    let got = c.objects.get(name, c.map.current().servers()).await;
    let mut records = crate::node::lock::lock(&c.records);
    match got {
        Ok(m) => {
            let m = Arc::new(m);
            records.insert(m.clone(), now);
            Ok((m, false))
        }
        Err(e) => {
            records.remove(name);
            Err(e)
        }
    }
}

/// The piece metadata of split `i` of an object of `size` bytes coded (`k`, `p`) with
/// `sub`-byte sub-chunks whose CRCs are `crcs` (every split's, split-major).
pub(in crate::node) fn split_meta(
    (k, p): (usize, usize),
    i: usize,
    sub: u64,
    size: u64,
    crcs: &[u32],
) -> Vec<u8> {
    PieceMeta {
        coding: Some(Coding {
            k: k as u16,
            p: p as u16,
            chunk: i as u16,
            sub_chunk: sub as u32,
            size,
            crcs: crcs.to_vec(),
            // (Read with tags: an object's record holds no digests.)
            digests: Vec::new(),
        }),
        http: Vec::new(),
    }
    .encode()
}

/// The nodes the current map has available.
pub(in crate::node) fn available_nodes(c: &Cluster) -> Vec<usize> {
    let map = c.map.current();
    (0..map.servers())
        .filter(|&s| map.is_available(s))
        .collect()
}

/// A new version of `name` begun in the directory, and its `n` splits placed on distinct nodes
/// of `available` chosen at random (`place_splits`, seeded by the version and the name); `Err`:
/// the answer saying why not (the version is aborted).
pub(in crate::node) async fn begin_placed(
    c: &Cluster,
    name: &ObjectName,
    available: &[usize],
    n: usize,
) -> Result<(u64, Vec<usize>), Response<NodeBody>> {
    let version = c.objects.begin(name).await.map_err(directory_error)?;
    let mut rng = Rng::new(version ^ ecdn_trace::hash_id(name.as_str().as_bytes()));
    match place_splits(&mut rng, available, n) {
        Ok(splits) => Ok((version, splits)),
        Err(_) => {
            let _ = c.objects.abort(name, version).await;
            Err(text(
                StatusCode::SERVICE_UNAVAILABLE,
                "too few available nodes",
            ))
        }
    }
}

/// How `meta`'s object is read: the sources, and late binding over `k + Δ` splits chosen at
/// random among the stored ones on available nodes, the others as spares.
pub(in crate::node) fn plan_read(
    c: &Cluster,
    meta: &ObjectMeta,
    delta: usize,
) -> Result<CodedObject, String> {
    let map = c.map.current();
    // Unstored splits, and those on unavailable nodes, have no source.
    let sources: Vec<Option<usize>> = meta
        .splits
        .iter()
        .zip(&meta.stored)
        .map(|(&s, &stored)| (stored && map.is_available(s)).then_some(s))
        .collect();
    let locations: Vec<usize> = sources.iter().map(|s| s.unwrap_or(usize::MAX)).collect();
    let mut rng = Rng::new(meta.version ^ ecdn_trace::hash_id(&c.id.to_le_bytes()) ^ now_nanos());
    let first = read_plan(&mut rng, &locations, meta.k, delta, |s| s != usize::MAX)
        .map_err(|e| e.to_string())?;
    let mut spare: Vec<usize> = (0..sources.len())
        .filter(|i| sources[*i].is_some() && !first.contains(i))
        .collect();
    for j in (1..spare.len()).rev() {
        spare.swap(j, rng.below(j as u64 + 1) as usize);
    }
    let p = meta.splits.len() - meta.k;
    let key = piece_key(&meta.name, meta.version);
    let layout = ObjectLayout::new(meta.size, meta.k, p, meta.sub_chunk)
        .map_err(|e| format!("its record's code: {e}"))?;
    Ok(CodedObject {
        object: ecdn_trace::hash_id(key.as_bytes()),
        key,
        layout,
        coding: Coding {
            k: meta.k as u16,
            p: p as u16,
            chunk: 0,
            sub_chunk: meta.sub_chunk as u32,
            size: meta.size,
            crcs: meta.crcs.clone(),
            digests: Vec::new(),
        },
        sources,
        supplied: Vec::new(),
        hoc: None,
        late: Some(Arc::new(LateBinding {
            first,
            spare,
            ..LateBinding::default()
        })),
        heard: Default::default(),
    })
}

pub(in crate::node) fn now_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Deletes the splits under piece key `key` held by `servers`; how many were removed.
pub(in crate::node) async fn remove_splits_on(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    key: &str,
    servers: &[usize],
) -> usize {
    let mut removed = 0;
    let mut asks = tokio::task::JoinSet::new();
    for &server in servers {
        if server == c.id {
            // A peer's `DELETE` carried out here: no held-back write brings the split back (a
            // version's splits are never written again once deleted: unnumbered).
            let purged = crate::node::cluster::pieces::purge::drop_here(st, c, key, UNORDERED);
            removed += usize::from(purged.await.unwrap_or(false));
            continue;
        }
        let key = key.to_string();
        let c = c.clone();
        asks.spawn(
            async move { crate::node::cluster::pieces::purge::purge_on(&c, server, &key).await },
        );
    }
    while let Some(r) = asks.join_next().await {
        removed += usize::from(r.unwrap_or(false));
    }
    removed
}

/// The headers a read of `meta` answers with through the S3 face.
pub(in crate::node) fn s3_headers(meta: &ObjectMeta) -> Vec<(HeaderName, HeaderValue)> {
    let mut h: Vec<(HeaderName, HeaderValue)> = Vec::new();
    let mut add = |name: HeaderName, value: &str| {
        if let Ok(v) = HeaderValue::from_str(value) {
            h.push((name, v));
        }
    };
    match &meta.s3 {
        Some(a) => {
            add(
                hyper::header::CONTENT_TYPE,
                a.content_type.as_deref().unwrap_or("binary/octet-stream"),
            );
            add(hyper::header::ETAG, &format!("\"{}\"", a.etag));
            add(
                hyper::header::LAST_MODIFIED,
                &ecdn_s3::time::http_date(a.modified_ms),
            );
            for (n, v) in &a.metadata {
                if let Ok(name) = HeaderName::from_bytes(format!("x-amz-meta-{n}").as_bytes()) {
                    add(name, v);
                }
            }
        }
        // Written through the object API: its ETag, the SHA-256.
        None => {
            add(hyper::header::CONTENT_TYPE, "binary/octet-stream");
            add(hyper::header::ETAG, &format!("\"{}\"", meta.sha256));
        }
    }
    h
}
