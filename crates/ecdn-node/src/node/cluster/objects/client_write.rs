//! Writes by a client that codes the object itself and puts each split on its server (EC-Cache
//! §4.2's write path; issue 61), so a write's bytes are not funnelled through one node either.
//! The client holds no cluster key: the node it asks first grants it the puts, each split's
//! server receipts what it stored, and the record is committed only with those receipts.
//!
//! 1. `POST /_objects/<name>?begin&size=S[&k=K&r=R]`: the code (as a `PUT` through the node
//!    would choose it), a new version begun in the directory, the splits placed on `k + r`
//!    available nodes at random (`ecdn_objects::split::place_splits`), and per split a
//!    **grant**: the cluster key's seal (`ClusterKey::seal`, as etcd values are sealed) of
//!    name, version, split, server, code, size and an expiry 10 minutes on. The answer
//!    (`ecdn_objects::writes::Begun`) also gives the sub-chunk and window sizes and the servers' client addresses.
//! 2. `PUT /_objects/<name>?split=I&version=V&k=K&r=R&size=S&expires=E` with the grant in
//!    `X-Ecdn-Grant`, to the split's server: its body is the split's bytes (exactly
//!    `⌈S / K⌉`). The server checks the grant against itself, stores the split with its own
//!    sub-chunks' CRC-32Cs in the piece's metadata (the other splits' are left 0: the record
//!    holds every split's, and readers check against the record), and answers (`Stored`) the
//!    split's CRCs and window digests as it computed them, and a **receipt**: the seal of
//!    name, version, split, server and the SHA-256 of those CRCs and digests.
//! 3. `POST /_objects/<name>?commit` with the record and the receipts (`Commit`): a split
//!    counts as stored only if its receipt seals the record's CRCs and digests for it on its
//!    server; with at least `k`, the record is committed (as a `PUT`'s is), else the version is
//!    aborted (`503`). `POST ?abort&version=V` gives up a begun write.
//!
//! A client that lies can only write its own object wrongly: its splits are what their
//! servers hashed, so a reader that decodes them and finds a SHA-256 other than the record's
//! fails the read (and reads through a node instead).

use std::sync::Arc;

use crate::node::client_body::ClientBody;
use bytes::Bytes;
use ecdn_cluster::auth::{hex, sha256, unix_now_ms};
use ecdn_cluster::piece::{Coding, PieceMeta};
use ecdn_cluster::wire::PieceName;
use ecdn_objects::digest::{window_stripes, Sha, WindowHasher};
use ecdn_objects::meta::{stripes, ObjectName};
use ecdn_objects::writes::{Begun, Commit, Stored};
use http_body_util::BodyExt;
use hyper::{HeaderMap, Response, StatusCode};

use crate::node::answer::text;
use crate::node::body::NodeBody;
use crate::node::cluster::objects::record::{begin_placed, directory_error, json};
use crate::node::cluster::pieces::local::put_local;
use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::names::MAX_OBJECT;
use crate::node::cluster::pieces::store::Put;
use crate::node::state::State;

/// How long a grant lets a client put its splits.
const GRANT_MS: u64 = 10 * 60 * 1000;

/// The grant's sealed text for split `i` on `server`.
fn grant_text(
    name: &ObjectName,
    version: u64,
    i: usize,
    server: usize,
    code: (usize, usize, u64),
    expires: u64,
) -> String {
    let (k, r, size) = code;
    format!("{name}@{version}/{i}/{server}/{k}/{r}/{size}/{expires}")
}

/// The receipt's sealed text for split `i` of `version` on `server`, of `crcs` and `digests`.
fn receipt_text(
    name: &ObjectName,
    version: u64,
    i: usize,
    server: usize,
    crcs: &[u32],
    digests: &[Sha],
) -> String {
    let crc_bytes: Vec<u8> = crcs.iter().flat_map(|c| c.to_be_bytes()).collect();
    let digest_bytes: Vec<u8> = digests.iter().flatten().copied().collect();
    format!(
        "{name}@{version}/{i}/{server}/{}/{}",
        hex(&sha256(&crc_bytes)),
        hex(&sha256(&digest_bytes))
    )
}

/// `body` (JSON) as the answer.
fn answer(status: StatusCode, body: serde_json::Result<Vec<u8>>) -> Response<NodeBody> {
    let body = body.expect("JSON serializes");
    let mut r = Response::new(NodeBody::Full(http_body_util::Full::new(Bytes::from(body))));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

/// `POST ?begin` (see the module documentation).
pub(in crate::node) async fn begin(
    c: &Cluster,
    name: ObjectName,
    (k, r): (usize, usize),
    size: u64,
    available: &[usize],
) -> Response<NodeBody> {
    if size > MAX_OBJECT as u64 {
        return text(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("objects are at most {MAX_OBJECT} bytes"),
        );
    }
    let sub_chunk = c.cfg.sub_chunk;
    if stripes(size, k, sub_chunk) as usize * (k + r) > ecdn_objects::meta::MAX_CRCS {
        return text(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too many sub-chunks for one record",
        );
    }
    let (version, splits) = match begin_placed(c, &name, available, k + r).await {
        Ok(x) => x,
        Err(answer) => return answer,
    };
    let expires = unix_now_ms() + GRANT_MS;
    let key = c.peers.key();
    let grants = splits
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            key.seal(
                "split-grant",
                grant_text(&name, version, i, s, (k, r, size), expires).as_bytes(),
            )
        })
        .collect();
    let addrs = splits
        .iter()
        .map(|&s| {
            c.cfg
                .nodes
                .iter()
                .find(|n| n.id == s)
                .map_or(String::new(), |n| n.client.to_string())
        })
        .collect();
    answer(
        StatusCode::OK,
        serde_json::to_vec(&Begun {
            version,
            k,
            r,
            size,
            sub_chunk,
            window_stripes: window_stripes(sub_chunk),
            splits,
            addrs,
            expires,
            grants,
        }),
    )
}

/// A granted split `PUT`'s parameters (from its query).
pub(in crate::node) struct SplitPut {
    pub split: usize,
    pub version: u64,
    pub k: usize,
    pub r: usize,
    pub size: u64,
    pub expires: u64,
}

/// `PUT ?split=I&version=V&k=K&r=R&size=S&expires=E` (see the module documentation).
pub(in crate::node) async fn put_split(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    name: &ObjectName,
    p: SplitPut,
    headers: &HeaderMap,
    body: ClientBody,
) -> Response<NodeBody> {
    let grant = headers
        .get("x-ecdn-grant")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let text_ = grant_text(
        name,
        p.version,
        p.split,
        c.id,
        (p.k, p.r, p.size),
        p.expires,
    );
    if c.peers
        .key()
        .check_seal("split-grant", text_.as_bytes(), grant)
        .is_err()
    {
        return text(
            StatusCode::FORBIDDEN,
            "no valid grant for this split on this node",
        );
    }
    if p.expires < unix_now_ms() {
        return text(StatusCode::FORBIDDEN, "the grant has expired");
    }
    if p.k == 0 || p.split >= p.k + p.r || p.k + p.r > ecdn_objects::meta::MAX_SPLITS {
        return text(StatusCode::BAD_REQUEST, "no such split of that code");
    }
    let len = p.size.div_ceil(p.k as u64);
    // The split's bytes, exactly its length.
    let mut payload = Vec::with_capacity(len as usize);
    let mut body = body;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            return text(StatusCode::BAD_REQUEST, "the request body failed");
        };
        if let Ok(d) = frame.into_data() {
            if payload.len() as u64 + d.len() as u64 > len {
                return text(
                    StatusCode::BAD_REQUEST,
                    &format!("a split of this object is {len} bytes"),
                );
            }
            payload.extend_from_slice(&d);
        }
    }
    if payload.len() as u64 != len {
        return text(
            StatusCode::BAD_REQUEST,
            &format!("a split of this object is {len} bytes"),
        );
    }
    let sub = c.cfg.sub_chunk;
    let n = stripes(p.size, p.k, sub) as usize;
    let own: Vec<u32> = payload
        .chunks(sub.max(1) as usize)
        .map(ecdn_store::crc32c)
        .collect();
    let mut hasher = WindowHasher::new(1, window_stripes(sub));
    for s in payload.chunks(sub.max(1) as usize) {
        hasher.push(0, s);
    }
    let digests = hasher.finish();
    let mut crcs = vec![0u32; n * (p.k + p.r)];
    crcs[p.split * n..(p.split + 1) * n].copy_from_slice(&own);
    let meta = PieceMeta {
        coding: Some(Coding {
            k: p.k as u16,
            p: p.r as u16,
            chunk: p.split as u16,
            sub_chunk: sub as u32,
            size: p.size,
            crcs,
            digests: Vec::new(),
        }),
        http: Vec::new(),
    }
    .encode();
    let key = crate::node::cluster::objects::record::piece_key(name, p.version);
    let (put, dying) = put_local(
        st,
        c,
        &key,
        p.k,
        PieceName::Chunk(p.split as u16),
        meta,
        Bytes::from(payload),
        0,
    )
    .await;
    // Cached objects a piece of which this split evicted leave whole (`evict_together`).
    crate::node::cluster::pieces::together::drop_dying(st, c, dying).await;
    match put {
        Ok(Put::Refused) => return text(StatusCode::INSUFFICIENT_STORAGE, "refused"),
        Err(purged) => return text(StatusCode::CONFLICT, &purged.to_string()),
        Ok(_) => {}
    }
    let receipt = c.peers.key().seal(
        "split-stored",
        receipt_text(name, p.version, p.split, c.id, &own, &digests).as_bytes(),
    );
    answer(
        StatusCode::OK,
        serde_json::to_vec(&Stored {
            crcs: own,
            digests,
            receipt,
        }),
    )
}

/// `POST ?commit` (see the module documentation).
pub(in crate::node) async fn commit(
    c: &Cluster,
    name: ObjectName,
    body: ClientBody,
) -> Response<NodeBody> {
    let bytes = match http_body_util::Limited::new(body, 4 << 20).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return text(StatusCode::BAD_REQUEST, &format!("request body: {e}")),
    };
    let Commit {
        mut record,
        receipts,
    } = match serde_json::from_slice(&bytes) {
        Ok(x) => x,
        Err(e) => return text(StatusCode::BAD_REQUEST, &format!("the commit: {e}")),
    };
    let servers = c.map.current().servers();
    if record.name != name {
        return text(StatusCode::BAD_REQUEST, "the record names another object");
    }
    if let Err(e) = record.validate(servers) {
        return text(StatusCode::BAD_REQUEST, &e.to_string());
    }
    if receipts.len() != record.splits.len() || !record.has_digests() {
        return text(
            StatusCode::BAD_REQUEST,
            "one receipt per split, and window digests, are needed",
        );
    }
    let n = stripes(record.size, record.k, record.sub_chunk) as usize;
    let w = record.windows() as usize;
    let key = c.peers.key();
    for (i, receipt) in receipts.iter().enumerate() {
        let sealed = receipt.as_deref().is_some_and(|r| {
            let t = receipt_text(
                &name,
                record.version,
                i,
                record.splits[i],
                &record.crcs[i * n..(i + 1) * n],
                &record.digests[i * w..(i + 1) * w],
            );
            key.check_seal("split-stored", t.as_bytes(), r).is_ok()
        });
        record.stored[i] = record.stored[i] && sealed;
    }
    let stored = record.stored.iter().filter(|&&s| s).count();
    if stored < record.k {
        let _ = c.objects.abort(&name, record.version).await;
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!(
                "only {stored} splits have receipts; decoding needs {}",
                record.k
            ),
        );
    }
    match c.objects.commit(&record, servers).await {
        Ok(()) => {
            let r = json(StatusCode::CREATED, &record);
            let now = std::time::Instant::now();
            crate::node::lock::lock(&c.records).insert(Arc::new(record), now);
            r
        }
        Err(e) => directory_error(e),
    }
}

/// `POST ?abort&version=V`.
pub(in crate::node) async fn abort(
    c: &Cluster,
    name: ObjectName,
    version: u64,
) -> Response<NodeBody> {
    match c.objects.abort(&name, version).await {
        Ok(()) => text(StatusCode::OK, "aborted"),
        Err(e) => directory_error(e),
    }
}
