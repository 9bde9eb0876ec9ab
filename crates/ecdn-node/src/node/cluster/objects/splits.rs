//! The split service for clients that read and write splits themselves (issue 61; EC-Cache
//! §4.2–§4.3, whose client reads the splits from their servers): what a node answers on its
//! client port, without the cluster key, to an `ecdn_client::SplitClient`.
//!
//! * `GET /_objects/<name>?locate`: the record (this node's cached copy while it is fresh) and,
//!   per split, the client address of its server (`addrs`; `null` for a server not in the
//!   cluster file) and whether the node's map has that server available (`available`): all a
//!   client needs to read the splits itself. A client reads from available servers, and from
//!   the others only to make up its `k + Δ` (a server out of the map for being slow still
//!   serves its split, and late binding takes it when it comes before another's; one cut off
//!   is simply not heard from). The record carries every
//!   split window's SHA-256 (`ecdn_objects::digest`), so the client checks each byte it reads
//!   from a split server against it, and needs no key: see ARCHITECTURE.md, "Clients read the
//!   splits".
//! * `GET /_objects/<name>?split=I&version=V`: split `I` of version `V`, if this node holds it
//!   (`404` otherwise), whole or one byte range (`Range: bytes=A-B`, `206`); its bytes go
//!   through the node's outgoing link as a peer's piece does (`pieces/link.rs`: paced under
//!   `--peer-rate`, counted in `ecdn_cluster_link_sent_bytes_total`), so the load a split read
//!   puts on a server is measured the same whoever reads it. A split asked from its start
//!   counts one split read of the object for the coordinator's parity budget.

use ecdn_cluster::piece::PieceMeta;
use ecdn_cluster::wire::PieceName;
use ecdn_objects::meta::{ObjectMeta, ObjectName};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Response, StatusCode};

use crate::node::answer::text;
use crate::node::body::NodeBody;
use crate::node::cluster::objects::record::{json_value, piece_key};
use crate::node::cluster::pieces::link::Paced;
use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::store::PieceStore;
use crate::node::state::State;

/// `?locate`: `meta` and its split servers' client addresses (see the module documentation).
pub(in crate::node) fn locate(c: &Cluster, meta: &ObjectMeta) -> Response<NodeBody> {
    let map = c.map.current();
    let addrs: Vec<Option<String>> = meta
        .splits
        .iter()
        .map(|&s| {
            let entry = c.cfg.nodes.iter().find(|n| n.id == s)?;
            Some(entry.client.to_string())
        })
        .collect();
    let available: Vec<bool> = meta.splits.iter().map(|&s| map.is_available(s)).collect();
    let mut v = serde_json::to_value(meta).expect("a record serializes");
    v["addrs"] = serde_json::json!(addrs);
    v["available"] = serde_json::json!(available);
    json_value(StatusCode::OK, meta, &v)
}

/// One byte range of `Range: bytes=A-B` (or `A-`, or `-N`) over `len` bytes: `Ok(None)` without
/// a header or with one this service does not take (several ranges: the whole split is sent,
/// as RFC 9110 allows), `Err` when it is past the end (`416`).
fn one_range(headers: &HeaderMap, len: u64) -> Result<Option<std::ops::Range<u64>>, ()> {
    let Some(spec) = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("bytes="))
    else {
        return Ok(None);
    };
    if spec.contains(',') {
        return Ok(None);
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return Ok(None);
    };
    let (a, b) = (a.trim(), b.trim());
    let range = match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(a), Ok(b)) if a <= b => a..(b + 1).min(len),
        (Ok(a), Err(_)) if b.is_empty() => a..len,
        (Err(_), Ok(n)) if a.is_empty() && n > 0 => len.saturating_sub(n)..len,
        _ => return Ok(None),
    };
    if range.start >= len {
        return Err(());
    }
    Ok(Some(range))
}

/// The split bytes a `Range` of the form `A-B` or `A-` could want, before the split's length is
/// known; `None` (the whole split) for any other form, which [`one_range`] answers whole or from
/// the length.
fn fetch_bounds(headers: &HeaderMap) -> Option<std::ops::Range<u64>> {
    let spec = headers
        .get(header::RANGE)?
        .to_str()
        .ok()?
        .strip_prefix("bytes=")?;
    if spec.contains(',') {
        return None;
    }
    let (a, b) = spec.trim().split_once('-')?;
    let a: u64 = a.trim().parse().ok()?;
    let end = match b.trim() {
        "" => u64::MAX,
        b => b.parse::<u64>().ok()?.saturating_add(1),
    };
    (a < end).then_some(a..end)
}

/// `?split=I&version=V` (see the module documentation).
pub(in crate::node) async fn serve_split(
    st: &State,
    c: &Cluster,
    name: &ObjectName,
    version: u64,
    split: usize,
    headers: &HeaderMap,
) -> Response<NodeBody> {
    let (Some(disk), Ok(chunk)) = (&st.disk, u16::try_from(split)) else {
        return text(StatusCode::NOT_FOUND, "no such split here");
    };
    let key = piece_key(name, version);
    let object = ecdn_trace::hash_id(key.as_bytes());
    let id = PieceStore::piece_id(object, PieceName::Chunk(chunk));
    // One read: the bytes a range could want (its length is in the metadata read with them).
    let fetch = fetch_bounds(headers);
    let Some((meta, payload)) = c.pieces.read(disk, id, fetch.clone()).await else {
        return text(StatusCode::NOT_FOUND, "no such split here");
    };
    let len = match PieceMeta::decode(&meta).ok().and_then(|m| m.coding) {
        Some(coding) => coding.size.div_ceil(u64::from(coding.k.max(1))),
        None => return text(StatusCode::NOT_FOUND, "no such split here"),
    };
    let range = match one_range(headers, len) {
        Ok(r) => r,
        Err(()) => {
            let mut r = text(StatusCode::RANGE_NOT_SATISFIABLE, "past the split's end");
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{len}")) {
                r.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            return r;
        }
    };
    let want = range.clone().unwrap_or(0..len);
    let base = fetch.map_or(0, |f| f.start.min(len));
    if want.start < base || want.end - base > payload.len() as u64 {
        return text(StatusCode::NOT_FOUND, "the split here is short");
    }
    let payload = payload.slice((want.start - base) as usize..(want.end - base) as usize);
    if want.start == 0 {
        // For the coordinator's parity budget: a client's read asks `k + Δ` splits from their
        // servers, and no node sees the read whole; each split asked from its start counts one
        // (a read through a node counts its `k`, `api.rs`).
        c.loads.record_object_reads(name.as_str(), 1);
    }
    let mut r = Response::new(NodeBody::Produced(Box::pin(Paced::new(
        payload,
        c.link.clone(),
    ))));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    h.insert(
        header::CONTENT_LENGTH,
        HeaderValue::from(want.end - want.start),
    );
    if range.is_some() {
        let spec = format!("bytes {}-{}/{len}", want.start, want.end - 1);
        if let Ok(v) = HeaderValue::from_str(&spec) {
            h.insert(header::CONTENT_RANGE, v);
        }
        *r.status_mut() = StatusCode::PARTIAL_CONTENT;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_byte_range_or_the_whole_split() {
        let h = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::RANGE, HeaderValue::from_str(v).unwrap());
            h
        };
        assert_eq!(one_range(&HeaderMap::new(), 10), Ok(None));
        assert_eq!(one_range(&h("bytes=2-4"), 10), Ok(Some(2..5)));
        assert_eq!(one_range(&h("bytes=2-"), 10), Ok(Some(2..10)));
        assert_eq!(one_range(&h("bytes=-3"), 10), Ok(Some(7..10)));
        assert_eq!(one_range(&h("bytes=5-100"), 10), Ok(Some(5..10)));
        assert_eq!(one_range(&h("bytes=0-1,4-5"), 10), Ok(None));
        assert_eq!(one_range(&h("bytes=4-2"), 10), Ok(None));
        assert_eq!(one_range(&h("items=0-1"), 10), Ok(None));
        assert_eq!(one_range(&h("bytes=10-"), 10), Err(()));
        // What one read fetches before the length is known.
        assert_eq!(fetch_bounds(&h("bytes=2-4")), Some(2..5));
        assert_eq!(fetch_bounds(&h("bytes=2-")), Some(2..u64::MAX));
        for whole in [
            "bytes=-3",
            "bytes=0-1,4-5",
            "bytes=4-2",
            "bytes=1-x",
            "items=0-1",
        ] {
            assert_eq!(fetch_bounds(&h(whole)), None, "{whole}");
        }
    }
}
