//! The parity budget re-spent on one object (EC-Cache §4.2, §6.1: "the coordinator gives extra
//! parities to the most popular objects"): `POST /_objects/<name>?units=N` gives the object
//! `N` splits. For EC-Cache (`k` > 1) that is `k` data and `N − k` parity splits; for selective
//! replication (`k` = 1) `N` replicas. An object never goes below the `k + r` splits it was
//! written with.
//!
//! * **Growing.** The object is read as a `GET` reads it (late binding over `k` splits, every
//!   sub-chunk checked against the record's CRCs) and streamed through the encoder of the code
//!   (`k`, `N − k`). The new splits only are sent on, to servers chosen uniformly at random
//!   among the available ones that hold none of the object's splits (`pieces/chunk_streams.rs`), so
//!   the node holds one stripe at a time. The first parities of a Reed–Solomon code do not
//!   depend on how many there are: the encoder's checksums of the splits the object already has
//!   must equal the record's, or nothing is stored. The record is then replaced by one with the
//!   new splits (`ObjectDirectory::update`: the same version, the first `k + r` splits
//!   unchanged), so readers find them at their next lookup. If the object was written again
//!   meanwhile, the update is refused and the new splits are removed.
//! * **Shrinking.** The record loses its last splits first, then their servers delete them
//!   (a reader holding the longer record replaces a failed read by another split).
//!
//! The answer is the new record (`200`); the same `N`: the record unchanged.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use bytes::Bytes;
use ecdn_objects::meta::{stripes, ObjectMeta, ObjectName, MAX_SPLITS};
use ecdn_objects::split::place_splits;
use ecdn_trace::Rng;
use hyper::{Response, StatusCode};
use sha2::{Digest, Sha256};

use crate::node::answer::text;
use crate::node::body::{Chunk, NodeBody, Piece};
use crate::node::cluster::objects::record::{
    directory_error, json, piece_key, plan_read, record, remove_splits_on, split_meta,
};
use crate::node::cluster::pieces::chunk_streams::ChunkStreams;
use crate::node::cluster::pieces::coded;
use crate::node::cluster::pieces::member::Cluster;
use crate::node::lock::lock;
use crate::node::state::State;

/// `POST /_objects/<name>?units=N` (see the module documentation).
pub(in crate::node) async fn set_units(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    name: ObjectName,
    units: usize,
) -> Response<NodeBody> {
    let meta = match record(c, &name, true).await {
        Ok(m) => m,
        Err(e) => return directory_error(e),
    };
    let (base, now) = (meta.k + meta.r, meta.splits.len());
    if units < base || units > MAX_SPLITS {
        return text(
            StatusCode::BAD_REQUEST,
            &format!(
                "units = {units}: an object keeps the k + r = {base} splits it was written \
                 with, and has at most {MAX_SPLITS}"
            ),
        );
    }
    let changed = if units < now {
        shrink(st, c, &meta, units).await
    } else if units > now {
        grow(st, c, &meta, units).await
    } else {
        return json(StatusCode::OK, &meta);
    };
    match changed {
        Ok(m) => {
            let r = json(StatusCode::OK, &m);
            lock(&c.records).insert(Arc::new(m), std::time::Instant::now());
            r
        }
        Err(r) => r,
    }
}

/// The record without its splits from `units` on; then their servers delete them.
async fn shrink(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    meta: &ObjectMeta,
    units: usize,
) -> Result<ObjectMeta, Response<NodeBody>> {
    let per_split = stripes(meta.size, meta.k, meta.sub_chunk) as usize;
    let mut m = meta.clone();
    let dropped = m.splits.split_off(units);
    m.stored.truncate(units);
    m.crcs.truncate(units * per_split);
    m.digests.truncate(units * m.windows() as usize);
    let servers = c.map.current().servers();
    c.objects
        .update(&m, servers)
        .await
        .map_err(directory_error)?;
    let key = piece_key(&m.name, m.version);
    remove_splits_on(st, c, &key, &dropped).await;
    Ok(m)
}

/// The object read and re-encoded with `units − k` parities, the new ones stored on new
/// servers, and the record updated.
async fn grow(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    meta: &ObjectMeta,
    units: usize,
) -> Result<ObjectMeta, Response<NodeBody>> {
    let unavailable = |why: &str| text(StatusCode::SERVICE_UNAVAILABLE, why);
    let (k, p, now) = (meta.k, units - meta.k, meta.splits.len());
    // Servers for the new splits: available, holding none of the object's.
    let map = c.map.current();
    let free: Vec<usize> = (0..map.servers())
        .filter(|&s| map.is_available(s) && !meta.splits.contains(&s))
        .collect();
    let mut rng =
        Rng::new(meta.version ^ units as u64 ^ crate::node::cluster::objects::record::now_nanos());
    let Ok(added) = place_splits(&mut rng, &free, units - now) else {
        return Err(unavailable(&format!(
            "{} more splits need as many available nodes without one; {} are",
            units - now,
            free.len()
        )));
    };
    let key = piece_key(&meta.name, meta.version);
    let mut targets = vec![None; units];
    for (slot, &server) in targets[now..].iter_mut().zip(&added) {
        *slot = Some(server);
    }
    let hint = meta.size.div_ceil(k as u64) as usize;
    // The new splits get window digests only if the record has them.
    let hashed = |s: ChunkStreams| match meta.window_stripes {
        0 => s,
        w => s.with_digests(w),
    };
    let Some(mut streams) = ChunkStreams::open(c, &key, (k, p), &targets, hint).map(hashed) else {
        return Err(text(StatusCode::BAD_REQUEST, "no such code"));
    };
    // The object, read as a GET reads it, into the encoder.
    let read = match plan_read(c, meta, 0) {
        Ok(o) => Arc::new(o),
        Err(e) => {
            streams.abort();
            return Err(text(
                StatusCode::BAD_GATEWAY,
                &format!("{}: {e}", meta.name),
            ));
        }
    };
    let whole = vec![Piece::Body(0..meta.size)];
    let decoded = Arc::new(AtomicBool::new(false));
    let mut sha = Sha256::new();
    let mut feed = |b: &Bytes, streams: &mut ChunkStreams| {
        sha.update(b);
        streams.push(b)
    };
    let mut read_all = false;
    if let Some((ready, rest)) = coded::stream(st, c, read, whole, decoded, None).await {
        read_all = ready.iter().all(|b| feed(b, &mut streams));
        if let (true, Some(mut rx)) = (read_all, rest) {
            read_all = false;
            while let Some(chunk) = rx.recv().await {
                let ok = match chunk {
                    Chunk::Data(b) => feed(&b, &mut streams),
                    Chunk::Slices(v) => v.iter().all(|b| feed(b, &mut streams)),
                    Chunk::Done => {
                        read_all = true;
                        break;
                    }
                    Chunk::Verifying(_) => false,
                };
                if !ok {
                    break;
                }
            }
        }
    }
    let layout = streams.end().filter(|l| l.size() == meta.size);
    let read_right =
        read_all && layout.is_some() && ecdn_cluster::auth::hex(&sha.finalize()) == meta.sha256;
    if !read_right {
        streams.abort();
        return Err(text(
            StatusCode::BAD_GATEWAY,
            &format!("{}: the object could not be read whole", meta.name),
        ));
    }
    let per_split = stripes(meta.size, k, meta.sub_chunk) as usize;
    let crcs = streams.crcs();
    let mut digests = streams.digests();
    if !meta.has_digests() {
        digests.clear();
    }
    let windows = meta.windows() as usize;
    if crcs.get(..now * per_split) != meta.crcs.get(..now * per_split)
        || digests.get(..now * windows) != meta.digests.get(..now * windows)
    {
        streams.abort();
        return Err(text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the longer code does not reproduce the object's existing parities",
        ));
    }
    let (size, sub) = (meta.size, meta.sub_chunk);
    let piece_meta = |i: usize| split_meta((k, p), i, sub, size, &crcs);
    let mut dying = Vec::new();
    let stored = streams.store(st, c, piece_meta, 0, &mut dying).await;
    // Cached objects a piece of which the splits' writes evicted leave whole.
    crate::node::cluster::pieces::together::drop_dying(st, c, dying).await;
    let mut m = meta.clone();
    m.splits.extend(&added);
    m.stored.extend(&stored[now..]);
    m.crcs = crcs;
    m.digests = digests;
    if let Err(e) = c.objects.update(&m, map.servers()).await {
        remove_splits_on(st, c, &key, &added).await;
        return Err(directory_error(e));
    }
    Ok(m)
}
