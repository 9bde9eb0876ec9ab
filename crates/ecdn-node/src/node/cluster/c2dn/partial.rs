//! Partial hits (C2DN §5): a coded object of which the cluster holds some chunks, fewer than K.
//!
//! The serving node fetches from the origin only what is missing: the bytes of K − (chunks
//! found) missing data chunks. In the stripe-major layout (`FORMAT.md` v2) a data chunk is one
//! byte range per stripe, so they go to the origin as multi-range `GET`s of at most
//! [`MAX_RANGES`] ranges each (the limit `ecdn origin` and the node accept, RFC 9110 §14.2's
//! guard), with `If-Range` naming the stored strong `ETag`: an origin whose object changed
//! answers `200`, and so does one that ignores multi-range requests. Every fetched sub-chunk
//! must also match the CRC-32C the chunk's metadata recorded when the object was encoded. With
//! the chunks found on peers, the fetched ones make K: the object is decoded whole (the same
//! windows as a coded hit, `pieces/coded.rs`), answered, admitted to the HOC, and every target that
//! lacks its piece gets it (`write.rs`), the fetched chunks included.
//!
//! Anything else — no strong `ETag`, an answer that is not the ranges asked for, a sub-chunk
//! that fails its checksum, a chunk source that fails — gives `None`: the caller fetches the
//! whole object as a miss. The answer counts as a miss (`X-Cache: MISS`, `X-Ecdn-Partial: 1`)
//! with `X-Ecdn-Origin-Bytes` the range bytes fetched, as the simulator counts it.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use hyper::header::{self, HeaderName, HeaderValue};
use hyper::{Request, StatusCode};

use crate::multipart;
use crate::node::answer::Answer;
use crate::node::answer::ReqBody;
use crate::node::cluster::pieces::coded::CodedObject;
use crate::node::cluster::pieces::holders::Holder;
use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::stats::ClusterStats;
use crate::node::fill::plain_headers;
use crate::node::freshness::StoredResponse;
use crate::node::key::CacheKey;
use crate::node::lock::lock;
use crate::node::outcome::Outcome;
use crate::node::state::State;
use crate::range::MAX_RANGES;

/// What a lookup found of a partially cached coded object.
pub(in crate::node) struct PartialHit {
    /// The object, with a source for every chunk found.
    pub(in crate::node) obj: CodedObject,
    /// The stored response without its body (fresh, and acceptable to the request).
    pub(in crate::node) entry: StoredResponse,
    /// What the servers said they hold (what the placement lacks is written back).
    pub(in crate::node) known: Vec<Holder>,
}

/// Serves a partial hit as the module documentation says; `None`: fetch it whole.
pub(in crate::node) async fn serve(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    req: &Request<ReqBody>,
    key: &CacheKey,
    p: PartialHit,
) -> Option<Answer> {
    let PartialHit {
        mut obj,
        entry,
        known,
    } = p;
    let etag = entry
        .headers
        .iter()
        .find(|(n, _)| n == header::ETAG)
        .map(|(_, v)| v.clone())
        .filter(|v| !v.as_bytes().starts_with(b"W/"))?;
    let layout = obj.layout;
    let k = layout.k();
    let found = obj.sources.iter().filter(|s| s.is_some()).count();
    let fetch: Vec<usize> = (0..k)
        .filter(|&ch| obj.sources[ch].is_none())
        .take(k.checked_sub(found)?)
        .collect();
    let mut ranges: Vec<Range<u64>> = Vec::new();
    for &ch in &fetch {
        ranges.extend(layout.data_ranges(ch).ok()?);
    }
    ranges.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match merged.last_mut() {
            Some(last) if last.end >= r.start => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    // A slice's bytes are at its place in the object (`x-ecdn-slice: FIRST-LAST/LENGTH`).
    let (offset, object_len) = match crate::node::slice_range::stored_slice(&entry.headers) {
        Some((first, _, length)) => (first, length),
        None => (0, layout.size()),
    };
    let mut parts: Vec<(Range<u64>, Bytes)> = Vec::new();
    for batch in merged.chunks(MAX_RANGES) {
        parts.extend(fetch_ranges(st, req, &etag, batch, offset, object_len).await?);
    }
    parts.sort_by_key(|(r, _)| r.start);
    let fetched: u64 = merged.iter().map(|r| r.end - r.start).sum();
    // Each fetched data chunk, sub-chunk by sub-chunk (the last stripe's tail zero-padded, as
    // the encoder pads it), checked against the CRC-32C recorded at encoding.
    let mut supplied = vec![None; layout.total_chunks()];
    for &ch in &fetch {
        let mut chunk = Vec::with_capacity(layout.chunk_size() as usize);
        for j in 0..layout.stripe_count() {
            let len = layout.sub_chunk_len(j).ok()? as usize;
            let at = chunk.len();
            chunk.resize(at + len, 0);
            let r = layout.data_range_of(ch, j).ok()?;
            let n = (r.end - r.start) as usize;
            if !copy_range(&parts, r, &mut chunk[at..at + n]) {
                return None;
            }
            if obj.coding.crc(ch, j) != Some(ecdn_store::crc32c(&chunk[at..])) {
                ClusterStats::add(&c.stats.corrupt_sub_chunks, 1);
                return None;
            }
        }
        supplied[ch] = Some(Bytes::from(chunk));
        obj.sources[ch] = Some(c.id);
    }
    obj.supplied = supplied;
    let admit = lock(&st.hoc).admit(key.id, &key.key, layout.size(), Instant::now());
    let obj = Arc::new(obj);
    let mut response =
        crate::node::cluster::c2dn::whole::answer_whole(st, c, req, key, obj, entry, &known, admit)
            .await?;
    let h = response.headers_mut();
    h.insert(
        HeaderName::from_static("x-ecdn-origin-bytes"),
        HeaderValue::from(fetched),
    );
    h.insert(
        HeaderName::from_static("x-ecdn-partial"),
        HeaderValue::from_static("1"),
    );
    Some(Answer {
        outcome: Outcome::Miss,
        response,
    })
}

/// One multi-range `GET` of `ranges` (sorted, disjoint) of the cached object of `req`, which
/// starts at `offset` of the origin's object of `size` bytes (a slice's place in it; 0 and the
/// object's length for an object that is not sliced), conditional on `etag`: the parts, each
/// inside the cached object; `None` for any other answer.
async fn fetch_ranges(
    st: &State,
    req: &Request<ReqBody>,
    etag: &HeaderValue,
    ranges: &[Range<u64>],
    offset: u64,
    size: u64,
) -> Option<Vec<(Range<u64>, Bytes)>> {
    let spec: Vec<String> = ranges
        .iter()
        .map(|r| format!("{}-{}", r.start + offset, r.end + offset - 1))
        .collect();
    let mut headers = plain_headers(req.headers());
    headers.insert(
        header::RANGE,
        HeaderValue::from_str(&format!("bytes={}", spec.join(","))).ok()?,
    );
    headers.insert(header::IF_RANGE, etag.clone());
    let mut out = Request::new(crate::node::answer::empty_body());
    *out.uri_mut() = req.uri().clone();
    *out.headers_mut() = headers;
    let f = st.upstream.fetch(out).await.ok()?;
    if f.status != StatusCode::PARTIAL_CONTENT {
        return None;
    }
    let content_type = f
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let parts = match multipart::boundary(content_type) {
        Ok(b) => multipart::parse_byteranges(&f.body, &b, ranges.len())
            .ok()?
            .into_iter()
            .map(|p| (p.range, p.complete_length, f.body.slice_ref(p.body)))
            .collect(),
        Err(_) => {
            let cr = f.headers.get(header::CONTENT_RANGE)?.to_str().ok()?;
            let (r, len) = multipart::parse_content_range(cr).ok()?;
            if f.body.len() as u64 != r.end - r.start {
                return None;
            }
            vec![(r, len, f.body.clone())]
        }
    };
    let mut out = Vec::with_capacity(ranges.len());
    for (r, len, body) in parts {
        if len.is_some_and(|n| n != size) || r.end > size || r.start < offset {
            return None;
        }
        out.push((r.start - offset..r.end - offset, body));
    }
    Some(out)
}

/// Copies object bytes `want` out of `parts` (sorted by start) into `out`; false if some byte
/// is in no part.
fn copy_range(parts: &[(Range<u64>, Bytes)], want: Range<u64>, out: &mut [u8]) -> bool {
    let mut at = want.start;
    while at < want.end {
        // The first part that ends after `at`. (Overlapping parts from an odd origin may hide a
        // byte: then false, and the caller fetches the object whole.)
        let i = parts.partition_point(|(r, _)| r.end <= at);
        let Some((r, b)) = parts.get(i).filter(|(r, _)| r.start <= at) else {
            return false;
        };
        let end = r.end.min(want.end);
        let (from, to) = ((at - r.start) as usize, (end - r.start) as usize);
        let dst = (at - want.start) as usize;
        out[dst..dst + (to - from)].copy_from_slice(&b[from..to]);
        at = end;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_across_parts_and_refuses_gaps() {
        let parts = vec![
            (0..4, Bytes::from_static(b"abcd")),
            (4..6, Bytes::from_static(b"ef")),
            (10..12, Bytes::from_static(b"kl")),
        ];
        let mut out = [0u8; 5];
        assert!(copy_range(&parts, 1..6, &mut out));
        assert_eq!(&out, b"bcdef");
        let mut out = [0u8; 2];
        assert!(copy_range(&parts, 10..12, &mut out));
        assert_eq!(&out, b"kl");
        let mut out = [0u8; 6];
        assert!(!copy_range(&parts, 4..10, &mut out));
        assert!(!copy_range(&parts, 11..13, &mut [0u8; 2]));
    }
}
