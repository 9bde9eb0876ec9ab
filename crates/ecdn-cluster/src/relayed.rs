//! A relayed answer, authenticated: what the serving node sends back for a request another
//! node relayed to it (`GET` / `HEAD /_peer/relay/{target}`), so that the relaying node
//! passes on no byte and no header the serving node did not send.
//!
//! Both ends key their tags from the relay request's signature
//! ([`crate::auth::ClusterKey::sub_chunk_tagger`]: a key of that one request, which only
//! holders of the cluster key can derive):
//!
//! * **The head.** [`RELAY_TAG_HEADER`] carries the tag of the status and the answer's
//!   headers, sorted, less those a hop may add or change ([`UNTAGGED`]: `Date`, the
//!   connection's and the framing's). The serving node moves `Content-Length` into
//!   [`RELAY_LENGTH_HEADER`] (tagged), since the body it sends is longer.
//! * **The body** is a sequence of segments, `[length: u32 LE][bytes][tag]`, segment `i`'s
//!   tag over its bytes and `i`, and ends with an empty segment whose tag covers the body's
//!   length ([`END_INDEX`]): a body cut short, reordered, spliced from another answer or with
//!   one byte changed fails its check, and the relaying node aborts the client's response
//!   instead of sending it on.

use bytes::{Buf, Bytes, BytesMut};
use hyper::header::{HeaderName, HeaderValue, CONTENT_LENGTH};
use hyper::{HeaderMap, StatusCode};

use crate::auth::{hex, unhex, SubChunkTagger, SUB_TAG_LEN};

/// The head's tag, hex.
pub const RELAY_TAG_HEADER: &str = "x-ecdn-relay-tag";
/// The answer's `Content-Length` as the serving node had it (the client's, when restored).
pub const RELAY_LENGTH_HEADER: &str = "x-ecdn-relay-length";
/// Headers the head's tag leaves out: a hop adds or changes them.
pub const UNTAGGED: [&str; 10] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "date",
    "content-length",
    RELAY_TAG_HEADER,
];
/// The index the head's tag is made with (segments count from 0).
const HEAD_INDEX: u64 = u64::MAX;
/// The index of the last segment's tag, over the body's length.
pub const END_INDEX: u64 = u64::MAX - 1;
/// Most bytes in one segment.
pub const MAX_SEGMENT: usize = 256 << 10;

/// Whether an answer of `status` to a request (`head`: a `HEAD`) has a body, and so is sent
/// as tagged segments.
pub fn has_body(head: bool, status: StatusCode) -> bool {
    !head
        && !status.is_informational()
        && status != StatusCode::NO_CONTENT
        && status != StatusCode::NOT_MODIFIED
}

/// Why a relayed answer was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RelayError {
    #[error("relayed answer: no head tag, or a wrong one")]
    Head,
    #[error("relayed answer: segment {0} fails its tag")]
    Segment(u64),
    #[error("relayed answer: a segment of {0} bytes (at most {MAX_SEGMENT})")]
    TooLong(u64),
    #[error("relayed answer: bytes after its end")]
    AfterEnd,
    #[error("relayed answer: its end fails its tag")]
    End,
}

fn head_bytes(status: StatusCode, headers: &HeaderMap) -> Vec<u8> {
    let mut lines: Vec<(&[u8], &[u8])> = headers
        .iter()
        .filter(|(n, _)| !UNTAGGED.contains(&n.as_str()))
        .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()))
        .collect();
    lines.sort_unstable();
    let mut out = status.as_u16().to_string().into_bytes();
    out.push(b'\n');
    for (n, v) in lines {
        out.extend_from_slice(n);
        out.push(b':');
        out.extend_from_slice(v);
        out.push(b'\n');
    }
    out
}

/// The serving node's side of the head: `Content-Length` moved into [`RELAY_LENGTH_HEADER`],
/// then the head's tag put in [`RELAY_TAG_HEADER`].
pub fn tag_head(tagger: &SubChunkTagger, status: StatusCode, headers: &mut HeaderMap) {
    if let Some(len) = headers.remove(CONTENT_LENGTH) {
        headers.insert(HeaderName::from_static(RELAY_LENGTH_HEADER), len);
    }
    let tag = tagger.tag(HEAD_INDEX, &head_bytes(status, headers));
    if let Ok(v) = HeaderValue::from_str(&hex(&tag)) {
        headers.insert(HeaderName::from_static(RELAY_TAG_HEADER), v);
    }
}

/// The relaying node's side of the head: checks the tag, then keeps only the tagged headers,
/// with `Content-Length` restored.
pub fn check_head(
    tagger: &SubChunkTagger,
    status: StatusCode,
    headers: &HeaderMap,
) -> Result<HeaderMap, RelayError> {
    let tag = headers
        .get(RELAY_TAG_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(unhex::<SUB_TAG_LEN>)
        .ok_or(RelayError::Head)?;
    if !tagger.check(HEAD_INDEX, &head_bytes(status, headers), &tag) {
        return Err(RelayError::Head);
    }
    let mut kept = HeaderMap::with_capacity(headers.len());
    for (n, v) in headers {
        if UNTAGGED.contains(&n.as_str()) {
            continue;
        }
        if n.as_str() == RELAY_LENGTH_HEADER {
            kept.insert(CONTENT_LENGTH, v.clone());
        } else {
            kept.append(n.clone(), v.clone());
        }
    }
    Ok(kept)
}

/// The serving node's side of the body: cuts each piece of it into segments and tags them.
pub struct SegmentWriter {
    tagger: SubChunkTagger,
    next: u64,
    total: u64,
}

impl SegmentWriter {
    pub fn new(tagger: SubChunkTagger) -> Self {
        SegmentWriter {
            tagger,
            next: 0,
            total: 0,
        }
    }

    /// `bytes` as segments, each as three buffers (length, the bytes, the tag) to send in
    /// order; the bytes are slices of `bytes`, not copies.
    pub fn segments(&mut self, bytes: Bytes, out: &mut impl Extend<Bytes>) {
        let mut rest = bytes;
        while !rest.is_empty() {
            let part = rest.split_to(rest.len().min(MAX_SEGMENT));
            let tag = self.tagger.tag(self.next, &part);
            self.next += 1;
            self.total += part.len() as u64;
            out.extend([
                Bytes::copy_from_slice(&(part.len() as u32).to_le_bytes()),
                part,
                Bytes::copy_from_slice(&tag),
            ]);
        }
    }

    /// The last segment: empty, its tag over the body's length.
    pub fn end(&self) -> Bytes {
        let mut out = Vec::with_capacity(4 + SUB_TAG_LEN);
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&self.tagger.tag(END_INDEX, &self.total.to_le_bytes()));
        Bytes::from(out)
    }
}

/// The relaying node's side of the body: takes the answer's bytes as they arrive and gives
/// back the checked bytes of every complete segment.
pub struct SegmentReader {
    tagger: SubChunkTagger,
    next: u64,
    total: u64,
    buf: BytesMut,
    ended: bool,
}

impl SegmentReader {
    pub fn new(tagger: SubChunkTagger) -> Self {
        SegmentReader {
            tagger,
            next: 0,
            total: 0,
            buf: BytesMut::new(),
            ended: false,
        }
    }

    /// Takes `data`; pushes the checked bytes of the segments it completes onto `out`.
    pub fn push(&mut self, data: Bytes, out: &mut Vec<Bytes>) -> Result<(), RelayError> {
        if self.ended {
            return if data.is_empty() {
                Ok(())
            } else {
                Err(RelayError::AfterEnd)
            };
        }
        // A segment inside `data` is sliced from it; one across two arrivals is copied.
        let mut data = data;
        loop {
            if self.buf.is_empty() {
                if self.segment_in(&mut data, out)? {
                    continue;
                }
                self.buf.extend_from_slice(&data);
                return Ok(());
            }
            // Complete the segment begun in `buf` (its length field first).
            while self.buf.len() < self.need()? {
                if data.is_empty() {
                    return Ok(());
                }
                let take = (self.need()? - self.buf.len()).min(data.len());
                self.buf.extend_from_slice(&data.split_to(take));
            }
            let mut whole = std::mem::take(&mut self.buf).freeze();
            self.segment_in(&mut whole, out)?;
        }
    }

    /// The bytes the segment at the start of `buf` needs in all (its length field first).
    fn need(&self) -> Result<usize, RelayError> {
        if self.buf.len() < 4 {
            return Ok(4);
        }
        let len = u32::from_le_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]) as usize;
        if len > MAX_SEGMENT {
            return Err(RelayError::TooLong(len as u64));
        }
        Ok(4 + len + SUB_TAG_LEN)
    }

    /// Takes one whole segment from the start of `data`, if there is one (`false`: not yet).
    fn segment_in(&mut self, data: &mut Bytes, out: &mut Vec<Bytes>) -> Result<bool, RelayError> {
        if self.ended {
            return if data.is_empty() {
                Ok(false)
            } else {
                Err(RelayError::AfterEnd)
            };
        }
        if data.len() < 4 {
            return Ok(false);
        }
        let len = u32::from_le_bytes([data[0], data[1], data[2], data[3]]) as usize;
        if len > MAX_SEGMENT {
            return Err(RelayError::TooLong(len as u64));
        }
        if data.len() < 4 + len + SUB_TAG_LEN {
            return Ok(false);
        }
        data.advance(4);
        let bytes = data.split_to(len);
        let tag = data.split_to(SUB_TAG_LEN);
        if len == 0 {
            if !self
                .tagger
                .check(END_INDEX, &self.total.to_le_bytes(), &tag)
            {
                return Err(RelayError::End);
            }
            self.ended = true;
            return if data.is_empty() {
                Ok(false)
            } else {
                Err(RelayError::AfterEnd)
            };
        }
        if !self.tagger.check(self.next, &bytes, &tag) {
            return Err(RelayError::Segment(self.next));
        }
        self.next += 1;
        self.total += len as u64;
        out.push(bytes);
        Ok(true)
    }

    /// Whether the body's end arrived, checked.
    pub fn ended(&self) -> bool {
        self.ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::ClusterKey;

    fn taggers() -> (SubChunkTagger, SubChunkTagger) {
        let k = ClusterKey::new(b"a cluster key of enough bytes!!!");
        (k.sub_chunk_tagger(&[7; 32]), k.sub_chunk_tagger(&[8; 32]))
    }

    fn body(w: &mut SegmentWriter, parts: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in parts {
            let mut segs = Vec::new();
            w.segments(Bytes::copy_from_slice(p), &mut segs);
            for s in segs {
                out.extend_from_slice(&s);
            }
        }
        out.extend_from_slice(&w.end());
        out
    }

    /// Feeds `wire` in pieces of `step` bytes; the bytes passed on, and the first error.
    fn read(t: SubChunkTagger, wire: &[u8], step: usize) -> (Vec<u8>, Result<bool, RelayError>) {
        let mut r = SegmentReader::new(t);
        let mut got = Vec::new();
        for piece in wire.chunks(step.max(1)) {
            let mut out = Vec::new();
            let pushed = r.push(Bytes::copy_from_slice(piece), &mut out);
            for b in out {
                got.extend_from_slice(&b);
            }
            if let Err(e) = pushed {
                return (got, Err(e));
            }
        }
        (got, Ok(r.ended()))
    }

    #[test]
    fn a_body_passes_whole_however_it_arrives() {
        let (t, _) = taggers();
        let big = vec![3u8; MAX_SEGMENT + 1000];
        let parts: [&[u8]; 3] = [b"hello ", &big, b"world"];
        let wire = body(&mut SegmentWriter::new(t.clone()), &parts);
        let want: Vec<u8> = parts.concat();
        for step in [1, 3, 4, 19, 20, 21, 1000, wire.len()] {
            let (got, r) = read(t.clone(), &wire, step);
            assert_eq!(r, Ok(true), "step {step}");
            assert_eq!(got, want, "step {step}");
        }
        // An empty body is its end alone.
        let wire = body(&mut SegmentWriter::new(t.clone()), &[]);
        assert_eq!(read(t, &wire, 1), (Vec::new(), Ok(true)));
    }

    #[test]
    fn a_changed_cut_or_foreign_body_fails_before_its_bad_bytes_pass() {
        let (t, other) = taggers();
        let parts: [&[u8]; 2] = [b"first segment", b"second segment"];
        let wire = body(&mut SegmentWriter::new(t.clone()), &parts);
        // One byte of the second segment changed: the first passes, the second does not.
        let mut bad = wire.clone();
        let at = 4 + parts[0].len() + SUB_TAG_LEN + 4 + 2;
        bad[at] ^= 1;
        let (got, r) = read(t.clone(), &bad, 7);
        assert_eq!(got, parts[0]);
        assert_eq!(r, Err(RelayError::Segment(1)));
        // Cut after the first segment: no end, so the caller aborts.
        let cut = &wire[..4 + parts[0].len() + SUB_TAG_LEN];
        assert_eq!(read(t.clone(), cut, 5), (parts[0].to_vec(), Ok(false)));
        // The end's tag covers the length: a segment dropped fails at the end.
        let mut spliced = wire[..4 + parts[0].len() + SUB_TAG_LEN].to_vec();
        spliced.extend_from_slice(&wire[wire.len() - 4 - SUB_TAG_LEN..]);
        assert_eq!(read(t.clone(), &spliced, 64).1, Err(RelayError::End));
        // Bytes after the end.
        let mut after = wire.clone();
        after.push(0);
        assert_eq!(read(t.clone(), &after, 3).1, Err(RelayError::AfterEnd));
        // Another request's key: nothing passes.
        assert_eq!(
            read(other, &wire, 64),
            (Vec::new(), Err(RelayError::Segment(0)))
        );
        // A length field past the limit is refused before waiting for its bytes.
        let huge = (MAX_SEGMENT as u32 + 1).to_le_bytes();
        for step in [1, 4] {
            assert_eq!(
                read(t.clone(), &huge, step).1,
                Err(RelayError::TooLong(MAX_SEGMENT as u64 + 1))
            );
        }
    }

    #[test]
    fn a_head_passes_only_as_tagged() {
        let (t, other) = taggers();
        let mut h = HeaderMap::new();
        h.insert("content-length", HeaderValue::from_static("42"));
        h.insert("cache-control", HeaderValue::from_static("max-age=60"));
        h.append("x-cache", HeaderValue::from_static("HIT"));
        tag_head(&t, StatusCode::OK, &mut h);
        assert!(h.get("content-length").is_none());
        // A hop adds a date and the framing: still good; the length is restored.
        let mut sent = h.clone();
        sent.insert(
            "date",
            HeaderValue::from_static("Fri, 27 Nov 2026 22:00:00 GMT"),
        );
        sent.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        let kept = check_head(&t, StatusCode::OK, &sent).unwrap();
        assert_eq!(kept.get("content-length").unwrap(), "42");
        assert_eq!(kept.get("x-cache").unwrap(), "HIT");
        assert!(kept.get("date").is_none() && kept.get(RELAY_TAG_HEADER).is_none());
        // Another status, a changed, added or removed header, another key: refused.
        assert_eq!(
            check_head(&t, StatusCode::NOT_FOUND, &sent),
            Err(RelayError::Head)
        );
        let mut changed = sent.clone();
        changed.insert("cache-control", HeaderValue::from_static("max-age=600"));
        assert_eq!(
            check_head(&t, StatusCode::OK, &changed),
            Err(RelayError::Head)
        );
        let mut added = sent.clone();
        added.insert("set-cookie", HeaderValue::from_static("a=b"));
        assert_eq!(
            check_head(&t, StatusCode::OK, &added),
            Err(RelayError::Head)
        );
        let mut removed = sent.clone();
        removed.remove("x-cache");
        assert_eq!(
            check_head(&t, StatusCode::OK, &removed),
            Err(RelayError::Head)
        );
        assert_eq!(
            check_head(&other, StatusCode::OK, &sent),
            Err(RelayError::Head)
        );
        let mut untagged = sent;
        untagged.remove(RELAY_TAG_HEADER);
        assert_eq!(
            check_head(&t, StatusCode::OK, &untagged),
            Err(RelayError::Head)
        );
    }
}
