//! An object written through a node (EC-Cache §4.2's write path, one node coding for the
//! client): its body streamed as it arrives, coded stripe by stripe into `k` data and `r`
//! parity splits (`pieces/chunk_streams.rs`), each split sent on to its server as it grows, and
//! the record committed once at least `k` splits are stored (nothing half-written is ever
//! readable). The object API's `PUT` (`api.rs`) and the S3 face's (`s3/`) both write here: the
//! body is a [`PutBody`] (the client's, or the S3 face's decoded and checked one), and the
//! caller's `finish` says, once the body is whole, whether it may be committed and what the S3
//! face keeps with it.

use std::future::Future;
use std::sync::Arc;

use crate::node::client_body::ClientBody;
use bytes::Bytes;
use ecdn_cluster::objects::DirectoryError;
use ecdn_objects::meta::{ObjectMeta, ObjectName, S3Attrs, MAX_CRCS};
use http_body_util::BodyExt;
use hyper::body::Body;
use hyper::Response;
use sha2::{Digest, Sha256};

use crate::node::body::NodeBody;
use crate::node::cluster::objects::record::{
    available_nodes, begin_placed, piece_key, remove_splits_on, split_meta,
};
use crate::node::cluster::pieces::chunk_streams::ChunkStreams;
use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::names::MAX_OBJECT;
use crate::node::state::State;

/// Where a write's bytes come from.
pub(in crate::node) trait PutBody: Send {
    /// What the body is known to hold at least (its `Content-Length`, when it says).
    fn size_hint(&self) -> u64;
    /// Its next bytes; `None` at its end; `Err` when it failed (why).
    fn next(&mut self) -> impl Future<Output = Option<Result<Bytes, String>>> + Send;
}

impl PutBody for ClientBody {
    fn size_hint(&self) -> u64 {
        Body::size_hint(self).lower()
    }

    async fn next(&mut self) -> Option<Result<Bytes, String>> {
        next_data(self).await
    }
}

/// `body`'s next bytes (its trailers skipped); `None` at its end; `Err`: why it failed.
pub(in crate::node) async fn next_data<B>(body: &mut B) -> Option<Result<Bytes, String>>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    loop {
        match body.frame().await? {
            Err(e) => return Some(Err(e.to_string())),
            Ok(f) => {
                if let Ok(d) = f.into_data() {
                    return Some(Ok(d));
                }
            }
        }
    }
}

/// Why a write failed (nothing of it is readable).
pub(in crate::node) enum PutFailure {
    /// Past [`MAX_OBJECT`] bytes, or `MAX_CRCS` sub-chunks in all splits.
    TooLarge,
    /// The body failed, or its check (`finish`) refused it: why.
    Body(String),
    /// The code asked for cannot be: why.
    Code(String),
    /// No version was begun, or too few nodes are available: the object API's answer.
    NotBegun(Box<Response<NodeBody>>),
    /// The encoder failed.
    Encoding,
    /// Fewer than `k` of the `total` splits were stored.
    Unstored {
        stored: usize,
        total: usize,
        k: usize,
    },
    /// The backend store written through failed.
    Backend(String),
    /// The directory did not commit the record.
    Directory(DirectoryError),
}

/// Reads the start of a body, up to `limit` bytes: the bytes, and whether the body ended
/// within them.
async fn read_head<B: PutBody>(body: &mut B, limit: usize) -> Result<(Vec<u8>, bool), String> {
    let mut head = Vec::new();
    while head.len() < limit {
        match body.next().await {
            None => return Ok((head, true)),
            Some(Err(e)) => return Err(e),
            Some(Ok(d)) => head.extend_from_slice(&d),
        }
    }
    Ok((head, false))
}

/// Streams the rest of `body` (after `head`) into `streams` and `sha` (and `copy`, for a
/// backend written through): every stripe is encoded and sent on as soon as its bytes are
/// in. Refuses an object past [`MAX_OBJECT`], or whose record would hold more than
/// `MAX_CRCS` sub-chunk checksums.
async fn stream_body<B: PutBody>(
    head: &[u8],
    body: Option<&mut B>,
    streams: &mut ChunkStreams,
    sha: &mut Sha256,
    mut copy: Option<&mut Vec<u8>>,
    splits: usize,
) -> Result<(), PutFailure> {
    let mut take = |bytes: &[u8], streams: &mut ChunkStreams| {
        if streams.bytes_pushed() + bytes.len() as u64 > MAX_OBJECT as u64 {
            return Err(PutFailure::TooLarge);
        }
        sha.update(bytes);
        if let Some(copy) = copy.as_deref_mut() {
            copy.extend_from_slice(bytes);
        }
        if !streams.push(bytes) {
            return Err(PutFailure::Encoding);
        }
        // One more stripe at most is pending in the encoder.
        if (streams.stripes() + 1) * splits > MAX_CRCS {
            return Err(PutFailure::TooLarge);
        }
        Ok(())
    };
    take(head, streams)?;
    let Some(body) = body else {
        return Ok(());
    };
    while let Some(d) = body.next().await {
        let d = d.map_err(|e| PutFailure::Body(format!("request body: {e}")))?;
        take(&d, streams)?;
    }
    Ok(())
}

/// Writes `body` as the object `name` (see the module documentation). `small`: the bytes read
/// before the code is chosen (`code` is given the bytes known at least and the available
/// nodes); `finish`, once the body is whole: `Err` refuses it (nothing is stored), `Ok` gives
/// what the S3 face keeps with the record. The committed record.
pub(in crate::node) async fn write_object<B: PutBody>(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    name: ObjectName,
    small: usize,
    code: impl FnOnce(usize, usize) -> Result<(usize, usize), String>,
    mut body: B,
    finish: impl FnOnce(&mut B) -> Result<Option<S3Attrs>, String>,
) -> Result<ObjectMeta, PutFailure> {
    if body.size_hint() > MAX_OBJECT as u64 {
        return Err(PutFailure::TooLarge);
    }
    // The start of the body says whether the object is small (its default code).
    let (head, ended) = read_head(&mut body, small)
        .await
        .map_err(|e| PutFailure::Body(format!("request body: {e}")))?;
    let map = c.map.current();
    let available = available_nodes(c);
    let at_least = head.len().max(body.size_hint() as usize);
    let (k, r) = code(at_least, available.len()).map_err(PutFailure::Code)?;
    let (version, splits) = begin_placed(c, &name, &available, k + r)
        .await
        .map_err(|a| PutFailure::NotBegun(Box::new(a)))?;
    let key = piece_key(&name, version);
    let servers: Vec<Option<usize>> = splits.iter().map(|&s| Some(s)).collect();
    let hint = at_least.div_ceil(k);
    let window_stripes = ecdn_objects::digest::window_stripes(c.cfg.sub_chunk);
    let Some(mut streams) =
        ChunkStreams::open(c, &key, (k, r), &servers, hint).map(|s| s.with_digests(window_stripes))
    else {
        let _ = c.objects.abort(&name, version).await;
        return Err(PutFailure::Code("no such code".into()));
    };
    let mut sha = Sha256::new();
    let through = c.backend.as_ref().filter(|b| b.writes_through());
    let mut copy = through.map(|_| Vec::with_capacity(at_least));
    let rest = (!ended).then_some(&mut body);
    let streamed = stream_body(&head, rest, &mut streams, &mut sha, copy.as_mut(), k + r).await;
    // The body is whole: the caller's check, before anything is stored.
    let checked = streamed.and_then(|()| finish(&mut body).map_err(PutFailure::Body));
    let ended = checked.and_then(|s3| streams.end().map(|l| (l, s3)).ok_or(PutFailure::Encoding));
    let (layout, s3) = match ended {
        Ok(x) => x,
        Err(e) => {
            // Every streamed split ends in an error: no server stores one.
            streams.abort();
            let _ = c.objects.abort(&name, version).await;
            return Err(e);
        }
    };
    let size = layout.size();
    let sub = layout.sub_chunk();
    let crcs = streams.crcs();
    let digests = streams.digests();
    let piece_meta = |i: usize| split_meta((k, r), i, sub, size, &crcs);
    // The splits' servers store them while the backend takes its copy.
    let written = async {
        match (through, copy) {
            (Some(b), Some(copy)) => b.write(name.as_str(), Bytes::from(copy)).await,
            _ => Ok(()),
        }
    };
    let mut dying = Vec::new();
    let (stored, written) = tokio::join!(streams.store(st, c, piece_meta, 0, &mut dying), written);
    // Cached objects a piece of which the splits' writes evicted leave whole.
    crate::node::cluster::pieces::together::drop_dying(st, c, dying).await;
    let n = stored.iter().filter(|&&s| s).count();
    let meta = ObjectMeta {
        name: name.clone(),
        version,
        size,
        k,
        r,
        splits,
        stored,
        sha256: ecdn_cluster::auth::hex(&sha.finalize()),
        sub_chunk: sub,
        crcs,
        window_stripes,
        digests,
        s3,
    };
    if n < k {
        give_up(st, c, &meta).await;
        return Err(PutFailure::Unstored {
            stored: n,
            total: k + r,
            k,
        });
    }
    if let Err(e) = written {
        // The store must hold every object the cache does: nothing is committed.
        give_up(st, c, &meta).await;
        return Err(PutFailure::Backend(format!(
            "object {name}: writing through to the backend store: {e}"
        )));
    }
    match c.objects.commit(&meta, map.servers()).await {
        Ok(()) => {
            let now = std::time::Instant::now();
            crate::node::lock::lock(&c.records).insert(Arc::new(meta.clone()), now);
            Ok(meta)
        }
        Err(e) => {
            let key = piece_key(&meta.name, meta.version);
            remove_splits_on(st, c, &key, &meta.splits).await;
            Err(PutFailure::Directory(e))
        }
    }
}

/// A write that will not be committed: its version aborted, its stored splits removed.
async fn give_up(st: &Arc<State>, c: &Arc<Cluster>, meta: &ObjectMeta) {
    let _ = c.objects.abort(&meta.name, meta.version).await;
    let key = piece_key(&meta.name, meta.version);
    remove_splits_on(st, c, &key, &meta.splits).await;
}
