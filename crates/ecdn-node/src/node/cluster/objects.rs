//! EC-Cache's object API on the client port (issue 12; EC-Cache, OSDI '16, §4): an object
//! cache clients write to and read from, on the cluster's nodes, peer protocol, codec and
//! piece stores.
//!
//! * `PUT /_objects/<name>[?k=K&r=R]`: the body (at most [`MAX_OBJECT`] bytes) is coded into
//!   `k` data and `r` parity splits (`ecdn-codec`, FORMAT.md v2; `k = 1` is replication:
//!   `1 + r` copies). Defaults: `k` = 10, `r` = 1 from 1 MiB on, `k` = 1, `r` = 1 below; `k`
//!   shrinks to the available nodes when not given. The splits go to `k + r` distinct available
//!   nodes chosen uniformly at random (`ecdn_objects::split::place_splits`), stored as pieces
//!   under `_objects/<name>@<version>` (this node's own in its piece store, the others by the
//!   signed peer `PUT`). The record (`ecdn_objects::meta::ObjectMeta`: version, size, k, r,
//!   locations, which splits were stored, SHA-256) is committed to the cluster's object
//!   directory (`ecdn_cluster::objects`: the coordinator, or etcd) only once at least `k`
//!   splits are stored, so nothing half-written is ever readable; the answer, `201`, is the
//!   record, saying how many were stored. Fewer than `k` stored: `503`, nothing visible.
//! * `GET /_objects/<name>[?delta=D|auto]`: one directory lookup, then `k + Δ` of the stored
//!   splits on available nodes, chosen uniformly at random (Δ = 1 by default; `auto`: from this
//!   node's smoothed link backlog by TOFEC's thresholds, `ecdn_objects::backlog`, which sees a
//!   backlog only on a capped link, `--peer-rate`), read at once; the first
//!   `k` that arrive and pass their checksums are decoded, the other reads are cancelled (late
//!   binding, §4.3); a read that fails is replaced by one of the object's other stored splits
//!   on an available node. The decoded object must match the record's SHA-256. With fewer than `k`
//!   readable: `502` naming both numbers (no backend store is configured to refetch from).
//!   A `Range` header is ignored (the whole object is sent; ranges are not built yet).
//!   `GET /_objects/<name>?stat`: the record as JSON. `HEAD`: the record in headers.
//! * `DELETE /_objects/<name>`: the record is removed first (readers stop finding it), then
//!   every split, on every node that holds one.
//!
//! Headers of an answer: `X-Ecdn-Object-Version`, `X-Ecdn-K`, `X-Ecdn-R`, `ETag` (the SHA-256),
//! and for a `GET` `X-Ecdn-Splits` (the split indexes decoded from) and `X-Ecdn-Delta` (the Δ
//! it read with).
//!
//! Splits share the node's piece store (and its FIFO piece policy) with the cached objects'
//! pieces: an object cache, whose evicted splits make a read fail once fewer than `k` remain.
//! The API's requests are not counted in the node's request metrics or access log (as
//! `/_ecdn/` is not); the bytes its splits take and send are (`ecdn_cluster_*`).

use std::sync::Arc;

use bytes::Bytes;
use ecdn_cluster::objects::DirectoryError;
use ecdn_cluster::piece::{Coding, PieceMeta};
use ecdn_cluster::wire::{self, PieceName};
use ecdn_codec::{decode_object, encode_object, ObjectLayout};
use ecdn_objects::meta::{MetaError, ObjectMeta, ObjectName};
use ecdn_objects::split::{place_splits, read_plan};
use ecdn_trace::Rng;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};

use super::super::body::NodeBody;
use super::super::{text, State};
use super::pieces::{PieceStore, Put};
use super::Cluster;

/// Where the API lives on the client port.
pub(in crate::node) const PREFIX: &str = "/_objects/";
/// The piece keys of objects' splits start with this (never a cache key: those hold a host).
pub(in crate::node) const KEY_PREFIX: &str = "_objects/";
/// Largest object a `PUT` takes (it is coded in memory).
pub const MAX_OBJECT: usize = 256 << 20;
/// Objects from this size on are coded with `k` = 10 by default; smaller ones replicated.
const CODED_FROM: usize = 1 << 20;
const DEFAULT_K: usize = 10;
const DEFAULT_R: usize = 1;

/// The piece key of an object version's splits.
fn piece_key(name: &ObjectName, version: u64) -> String {
    format!("{KEY_PREFIX}{name}@{version}")
}

fn json(status: StatusCode, meta: &ObjectMeta) -> Response<NodeBody> {
    let body = serde_json::to_vec(meta).expect("a record serializes");
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
fn describe(r: &mut Response<NodeBody>, meta: &ObjectMeta) {
    let h = r.headers_mut();
    for (name, value) in [
        ("x-ecdn-object-version", meta.version.to_string()),
        ("x-ecdn-k", meta.k.to_string()),
        ("x-ecdn-r", meta.r.to_string()),
        ("etag", format!("\"{}\"", meta.sha256)),
    ] {
        if let Ok(v) = HeaderValue::from_str(&value) {
            h.insert(name, v);
        }
    }
}

fn directory_error(e: DirectoryError) -> Response<NodeBody> {
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

/// The query of an object request.
#[derive(Debug, Default, PartialEq)]
struct Query {
    k: Option<usize>,
    r: Option<usize>,
    delta: Option<Delta>,
    stat: bool,
}

/// Δ of a read: given, or from the backlog.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Delta {
    Fixed(usize),
    Auto,
}

fn query(q: Option<&str>) -> Result<Query, String> {
    let mut out = Query::default();
    for pair in q.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let num = || -> Result<usize, String> {
            value
                .parse()
                .map_err(|_| format!("{name}={value:?}: need a number"))
        };
        match name {
            "k" => out.k = Some(num()?),
            "r" => out.r = Some(num()?),
            "delta" if value == "auto" => out.delta = Some(Delta::Auto),
            "delta" => out.delta = Some(Delta::Fixed(num()?)),
            "stat" if value.is_empty() => out.stat = true,
            _ => return Err(format!("unknown query parameter {pair:?}")),
        }
    }
    Ok(out)
}

/// Answers a request under [`PREFIX`] (cluster mode only).
pub(in crate::node) async fn serve(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    req: Request<Incoming>,
) -> Response<NodeBody> {
    let path = req.uri().path().to_string();
    let name = match ObjectName::parse(&path[PREFIX.len()..]) {
        Ok(n) => n,
        Err(e) => return text(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    let q = match query(req.uri().query()) {
        Ok(q) => q,
        Err(e) => return text(StatusCode::BAD_REQUEST, &e),
    };
    match *req.method() {
        Method::PUT => put(st, c, name, &q, req.into_body()).await,
        Method::GET if q.stat => match c.objects.get(&name, c.map.current().servers()).await {
            Ok(meta) => json(StatusCode::OK, &meta),
            Err(e) => directory_error(e),
        },
        Method::GET => get(st, c, name, &q, false).await,
        Method::HEAD => get(st, c, name, &q, true).await,
        Method::DELETE => delete(st, c, name).await,
        _ => text(StatusCode::METHOD_NOT_ALLOWED, "PUT, GET, HEAD or DELETE"),
    }
}

/// The code of a new object of `size` bytes on `available` nodes.
fn code_of(q: &Query, size: usize, available: usize) -> Result<(usize, usize), String> {
    let (dk, dr) = if size >= CODED_FROM {
        (DEFAULT_K, DEFAULT_R)
    } else {
        (1, DEFAULT_R)
    };
    let r = q.r.unwrap_or(dr);
    let k = match q.k {
        Some(k) => k,
        None => dk.min(available.saturating_sub(r)).max(1),
    };
    if k == 0 || k + r > 256 {
        return Err(format!("k = {k}, r = {r}: need k >= 1 and k + r <= 256"));
    }
    if k + r > available {
        return Err(format!(
            "k + r = {} splits need as many available nodes; {available} are",
            k + r
        ));
    }
    Ok((k, r))
}

async fn put(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    name: ObjectName,
    q: &Query,
    body: Incoming,
) -> Response<NodeBody> {
    let body = match Limited::new(body, MAX_OBJECT).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return text(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("objects are at most {MAX_OBJECT} bytes"),
            )
        }
        // The client went away or sent a broken body: nothing is stored.
        Err(e) => return text(StatusCode::BAD_REQUEST, &format!("request body: {e}")),
    };
    let map = c.map.current();
    let available: Vec<usize> = (0..map.servers())
        .filter(|&s| map.is_available(s))
        .collect();
    let (k, r) = match code_of(q, body.len(), available.len()) {
        Ok(x) => x,
        Err(e) => return text(StatusCode::BAD_REQUEST, &e),
    };
    let version = match c.objects.begin(&name).await {
        Ok(v) => v,
        Err(e) => return directory_error(e),
    };
    let mut rng = Rng::new(version ^ ecdn_trace::hash_id(name.as_str().as_bytes()));
    let Ok(splits) = place_splits(&mut rng, &available, k + r) else {
        return text(StatusCode::SERVICE_UNAVAILABLE, "too few available nodes");
    };
    let sub = c.cfg.sub_chunk;
    let Ok(codec) = c.codecs.get(k, r) else {
        return text(StatusCode::BAD_REQUEST, "no such code");
    };
    let size = body.len() as u64;
    let data = body.clone();
    let encoded = tokio::task::spawn_blocking(move || {
        let layout = ObjectLayout::new(size, k, r, sub).ok()?;
        let chunks = encode_object(codec.as_ref(), &layout, &data).ok()?;
        let crcs = super::write::chunk_crcs(&chunks, sub as usize);
        let sha = ecdn_cluster::auth::hex(&ecdn_cluster::auth::sha256(&data));
        Some((chunks, crcs, sha))
    })
    .await;
    let Ok(Some((chunks, crcs, sha256))) = encoded else {
        return text(StatusCode::INTERNAL_SERVER_ERROR, "encoding failed");
    };
    let key = piece_key(&name, version);
    let mut writes = tokio::task::JoinSet::new();
    for (i, (chunk, &server)) in chunks.into_iter().zip(&splits).enumerate() {
        let meta = PieceMeta {
            coding: Some(Coding {
                k: k as u16,
                p: r as u16,
                chunk: i as u16,
                sub_chunk: sub as u32,
                size,
                crcs: crcs.clone(),
            }),
            http: Vec::new(),
        }
        .encode();
        let (st, c, key) = (st.clone(), c.clone(), key.clone());
        writes.spawn(async move {
            let piece = PieceName::Chunk(i as u16);
            let payload = Bytes::from(chunk);
            let ok = if server == c.id {
                let put = super::write::put_local(&st, &c, &key, k, piece, meta, payload);
                matches!(put.await, Put::Stored | Put::Present)
            } else {
                super::write::push(&c, server, &key, piece, meta, payload).await
            };
            (i, ok)
        });
    }
    let mut stored = vec![false; k + r];
    while let Some(w) = writes.join_next().await {
        if let Ok((i, ok)) = w {
            stored[i] = ok;
        }
    }
    let n = stored.iter().filter(|&&s| s).count();
    let meta = ObjectMeta {
        name: name.clone(),
        version,
        size,
        k,
        r,
        splits,
        stored,
        sha256,
    };
    if n < k {
        let _ = c.objects.abort(&name, version).await;
        remove_splits(st, c, &meta).await;
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!(
                "only {n} of the {} splits were stored; decoding needs {k}",
                k + r
            ),
        );
    }
    match c.objects.commit(&meta, map.servers()).await {
        Ok(()) => json(StatusCode::CREATED, &meta),
        Err(e) => {
            remove_splits(st, c, &meta).await;
            directory_error(e)
        }
    }
}

/// One split of `meta` from `server` (this node or a peer), its checksums checked against its
/// coding, which must be the record's; `None` for anything else.
async fn read_split(
    st: &State,
    c: &Cluster,
    meta: &ObjectMeta,
    key: &str,
    i: usize,
) -> Option<Bytes> {
    let server = meta.splits[i];
    let piece = PieceName::Chunk(i as u16);
    let (meta_bytes, payload) = if server == c.id {
        let disk = st.disk.as_ref()?;
        let id = PieceStore::piece_id(ecdn_trace::hash_id(key.as_bytes()), piece);
        let (m, p) = c.pieces.read(disk, id, None).await?;
        // An own split costs this node's link the same as a peer's read of it.
        c.link.send(p.len()).await;
        (Bytes::from(m), p)
    } else {
        let path = wire::piece_path(piece, key, None);
        let limit = (meta.size.div_ceil(meta.k as u64) as usize).saturating_add(1 << 20);
        let frame = super::read::signed_get(c, server, &path, limit).await?;
        let (m, p) = wire::split_frame(&frame).ok()?;
        let (m, p) = (Bytes::copy_from_slice(m), frame.slice_ref(p));
        (m, p)
    };
    let coding = PieceMeta::decode(&meta_bytes).ok()?.coding?;
    let same = usize::from(coding.k) == meta.k
        && usize::from(coding.p) == meta.r
        && usize::from(coding.chunk) == i
        && coding.size == meta.size;
    (same && super::write::check_chunk(&coding, &payload).is_ok()).then_some(payload)
}

async fn get(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    name: ObjectName,
    q: &Query,
    head: bool,
) -> Response<NodeBody> {
    let map = c.map.current();
    let meta = match c.objects.get(&name, map.servers()).await {
        Ok(m) => m,
        Err(e) => return directory_error(e),
    };
    if head {
        let mut r = Response::new(NodeBody::Full(Full::new(Bytes::new())));
        describe(&mut r, &meta);
        if let Ok(v) = HeaderValue::from_str(&meta.size.to_string()) {
            r.headers_mut().insert(header::CONTENT_LENGTH, v);
        }
        return r;
    }
    // Unstored splits are on no server.
    let locations: Vec<usize> = meta
        .splits
        .iter()
        .zip(&meta.stored)
        .map(|(&s, &stored)| if stored { s } else { usize::MAX })
        .collect();
    let mut rng = Rng::new(meta.version ^ ecdn_trace::hash_id(&c.id.to_le_bytes()) ^ now_nanos());
    let delta = match q.delta {
        None => 1,
        Some(Delta::Fixed(d)) => d,
        Some(Delta::Auto) => {
            let split = meta.size.div_ceil(meta.k as u64).max(1) as f64;
            let queued = c.link.queued_bytes() / split;
            let rule = ecdn_objects::backlog::DeltaRule::default();
            super::super::lock(&c.backlog).arrival(&rule, queued)
        }
    };
    let plan = match read_plan(&mut rng, &locations, meta.k, delta, |s| map.is_available(s)) {
        Ok(p) => p,
        Err(e) => return text(StatusCode::BAD_GATEWAY, &format!("object {name}: {e}")),
    };
    // Late binding: all at once, the first k that check out win, the rest are cancelled.
    let key = piece_key(&name, meta.version);
    let meta = Arc::new(meta);
    let mut reads = tokio::task::JoinSet::new();
    let read = |reads: &mut tokio::task::JoinSet<_>, i: usize| {
        let (st, c, meta, key) = (st.clone(), c.clone(), meta.clone(), key.clone());
        reads.spawn(async move { (i, read_split(&st, &c, &meta, &key, i).await) });
    };
    for &i in &plan {
        read(&mut reads, i);
    }
    // Stored splits on available nodes the plan left out, in random order: a read that fails
    // (a node gone since the map said otherwise, an evicted or corrupt split) is replaced by
    // one of them.
    let mut spare: Vec<usize> = (0..locations.len())
        .filter(|i| !plan.contains(i) && map.is_available(locations[*i]))
        .collect();
    for j in (1..spare.len()).rev() {
        spare.swap(j, rng.below(j as u64 + 1) as usize);
    }
    let mut asked = plan.len();
    let mut got: Vec<Option<Bytes>> = vec![None; meta.splits.len()];
    let mut used = Vec::new();
    while used.len() < meta.k {
        match reads.join_next().await {
            Some(Ok((i, Some(split)))) => {
                got[i] = Some(split);
                used.push(i);
            }
            Some(_) => {
                if let Some(i) = spare.pop() {
                    read(&mut reads, i);
                    asked += 1;
                }
            }
            None => break,
        }
    }
    reads.abort_all();
    if used.len() < meta.k {
        return text(
            StatusCode::BAD_GATEWAY,
            &format!(
                "object {name}: only {} of the {} splits asked could be read; decoding needs {}",
                used.len(),
                asked,
                meta.k
            ),
        );
    }
    let (k, r, sub) = (meta.k, meta.r, c.cfg.sub_chunk);
    let Ok(codec) = c.codecs.get(k, r) else {
        return text(StatusCode::INTERNAL_SERVER_ERROR, "no such code");
    };
    let m = meta.clone();
    let decoded = tokio::task::spawn_blocking(move || {
        let layout = ObjectLayout::new(m.size, k, r, sub).ok()?;
        let avail: Vec<Option<&[u8]>> = got.iter().map(|g| g.as_deref()).collect();
        let object = decode_object(codec.as_ref(), &layout, &avail).ok()?;
        let sha = ecdn_cluster::auth::hex(&ecdn_cluster::auth::sha256(&object));
        (sha == m.sha256).then_some(object)
    })
    .await;
    let Ok(Some(object)) = decoded else {
        return text(
            StatusCode::BAD_GATEWAY,
            &format!("object {name}: the decoded bytes do not match its checksum"),
        );
    };
    used.sort_unstable();
    let mut resp = Response::new(NodeBody::Full(Full::new(Bytes::from(object))));
    describe(&mut resp, &meta);
    let splits: Vec<String> = used.iter().map(usize::to_string).collect();
    if let Ok(v) = HeaderValue::from_str(&splits.join(",")) {
        resp.headers_mut().insert("x-ecdn-splits", v);
    }
    resp.headers_mut()
        .insert("x-ecdn-delta", HeaderValue::from(delta as u64));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    resp
}

fn now_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Deletes the splits of `meta` wherever they are (best effort: a node down keeps its split
/// until its piece policy evicts it; no record points to it any more).
async fn remove_splits(st: &Arc<State>, c: &Arc<Cluster>, meta: &ObjectMeta) -> usize {
    let key = piece_key(&meta.name, meta.version);
    let object = ecdn_trace::hash_id(key.as_bytes());
    let mut removed = 0;
    let mut asks = tokio::task::JoinSet::new();
    for &server in &meta.splits {
        if server == c.id {
            if let Some(disk) = &st.disk {
                removed += usize::from(c.pieces.purge(disk, object, meta.splits.len()).await);
            }
            continue;
        }
        let (c, key) = (c.clone(), key.clone());
        asks.spawn(async move { super::purge_on(&c, server, &key).await });
    }
    while let Some(r) = asks.join_next().await {
        removed += usize::from(r.unwrap_or(false));
    }
    removed
}

async fn delete(st: &Arc<State>, c: &Arc<Cluster>, name: ObjectName) -> Response<NodeBody> {
    let meta = match c.objects.remove(&name).await {
        Ok(m) => m,
        Err(e) => return directory_error(e),
    };
    let removed = remove_splits(st, c, &meta).await;
    let mut r = json(StatusCode::OK, &meta);
    if let Ok(v) = HeaderValue::from_str(&removed.to_string()) {
        r.headers_mut().insert("x-ecdn-splits-removed", v);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_and_codes() {
        assert_eq!(query(None).unwrap(), Query::default());
        let q = query(Some("k=4&r=2&delta=0")).unwrap();
        assert_eq!(
            (q.k, q.r, q.delta, q.stat),
            (Some(4), Some(2), Some(Delta::Fixed(0)), false)
        );
        assert_eq!(query(Some("delta=auto")).unwrap().delta, Some(Delta::Auto));
        assert!(query(Some("stat")).unwrap().stat);
        for bad in ["k=x", "stat=1", "z=1", "r=-1"] {
            assert!(query(Some(bad)).is_err(), "{bad}");
        }
        let d = Query::default();
        // Defaults: k = 10 (from 1 MiB), fewer on a small cluster; replicated below 1 MiB.
        assert_eq!(code_of(&d, 40 << 20, 25), Ok((10, 1)));
        assert_eq!(code_of(&d, 40 << 20, 6), Ok((5, 1)));
        assert_eq!(code_of(&d, 1000, 6), Ok((1, 1)));
        // Given: kept, or refused when the cluster is too small.
        let q = query(Some("k=4&r=3")).unwrap();
        assert!(code_of(&q, 1000, 6).unwrap_err().contains("7 splits"));
        assert!(code_of(&query(Some("k=0")).unwrap(), 1000, 6).is_err());
    }
}
