//! Objects made of parts (issue 67): a multipart upload completed without copying its bytes.
//! The record of such an object holds no bytes of its own; its [`S3Parts`] lists the upload's
//! parts, each an EC-Cache object of its own (`s3mpu/UPLOAD/pNNNNN`, coded and placed as any
//! object: a large object's load spreads over as many servers' splits as it has parts), and
//! its bytes are theirs in order. A read (`read_object`) answers with the whole object's
//! length and ranges and streams the parts' bytes, each part's read with late binding as any
//! object's, checked against the version listed; removing the object removes its parts.
//!
//! This module knows only the arithmetic and the stream: which bytes of which parts a range
//! covers ([`spans`]), and a body that reads them in turn through the reader it is given
//! ([`stream`]), so that it imports nothing above it.

use std::collections::VecDeque;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;

use bytes::Bytes;
use ecdn_objects::meta::{ObjectMeta, ObjectName, S3Parts};
use http_body_util::BodyExt;
use hyper::header::{HeaderMap, HeaderValue, RANGE};
use hyper::Response;
use tokio::sync::mpsc;

use crate::node::body::{Chunk, LiveBody, NodeBody, Piece};

/// The parts of `meta`'s object, if it is made of parts.
pub(in crate::node) fn parts_of(meta: &ObjectMeta) -> Option<&S3Parts> {
    meta.s3.as_ref()?.parts.as_ref()
}

/// The bytes `range` of an object of `parts` (its parts' sizes, in order), as ranges of its
/// parts: (part index, bytes of that part), in order, none empty.
pub(in crate::node) fn spans(sizes: &[u64], range: Range<u64>) -> Vec<(usize, Range<u64>)> {
    let mut out = Vec::new();
    let mut start = 0u64;
    for (i, &size) in sizes.iter().enumerate() {
        let end = start + size;
        let (a, b) = (range.start.max(start), range.end.min(end));
        if a < b {
            out.push((i, a - start..b - start));
        }
        if end >= range.end {
            break;
        }
        start = end;
    }
    out
}

/// A part's read under way: the answer, or why not.
pub(in crate::node) type PartRead =
    Pin<Box<dyn Future<Output = Result<Response<NodeBody>, String>> + Send>>;

/// Reads a part: its name, the request headers of the read (its `Range`).
pub(in crate::node) type OpenPart = Box<dyn Fn(ObjectName, HeaderMap) -> PartRead + Send + Sync>;

/// One part's bytes `range`, opened: the answer's body, once its status says it holds those
/// bytes of the version listed.
async fn open_span(
    open: &OpenPart,
    parts: &S3Parts,
    index: usize,
    range: &Range<u64>,
) -> Result<NodeBody, String> {
    let (number, version, _) = parts.parts[index];
    let name = ObjectName::parse(&parts.part_name(number)).map_err(|e| e.to_string())?;
    let mut h = HeaderMap::new();
    let value = format!("bytes={}-{}", range.start, range.end - 1);
    h.insert(
        RANGE,
        HeaderValue::from_str(&value).map_err(|e| e.to_string())?,
    );
    let r = open(name, h).await?;
    let got = r
        .headers()
        .get("x-ecdn-object-version")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if got != Some(version) {
        return Err(format!(
            "part {number} is version {got:?}, the object was made of version {version}"
        ));
    }
    if r.status() != hyper::StatusCode::PARTIAL_CONTENT {
        return Err(format!("part {number}: {}", r.status()));
    }
    Ok(r.into_body())
}

/// Sends `body`'s bytes on `tx`; whether it ended whole.
async fn forward(mut body: NodeBody, tx: &mpsc::Sender<Chunk>) -> bool {
    loop {
        match body.frame().await {
            None => return true,
            Some(Err(_)) => return false,
            Some(Ok(f)) => {
                if let Ok(d) = f.into_data() {
                    if tx.send(Chunk::Data(d)).await.is_err() {
                        return false;
                    }
                }
            }
        }
    }
}

/// The body of an answer of `pieces` (ranges of the whole object, and a multi-range answer's
/// texts) of an object of `parts`: the first part's read is opened before this returns (a
/// part that cannot be read is then the answer's error, not a cut body); the rest stream, and
/// a part that fails later aborts the answer. `length`: the body's length.
pub(in crate::node) async fn stream(
    parts: S3Parts,
    pieces: Vec<Piece>,
    length: Option<u64>,
    open: OpenPart,
) -> Result<NodeBody, String> {
    let sizes: Vec<u64> = parts.parts.iter().map(|p| p.2).collect();
    // Everything to send, in order: texts, and spans of parts.
    let mut todo: VecDeque<Result<Bytes, (usize, Range<u64>)>> = VecDeque::new();
    for p in pieces {
        match p {
            Piece::Text(t) => todo.push_back(Ok(t)),
            Piece::Body(r) => todo.extend(spans(&sizes, r).into_iter().map(Err)),
        }
    }
    let mut replay = VecDeque::new();
    while let Some(Ok(t)) = todo.front() {
        replay.push_back(t.clone());
        todo.pop_front();
    }
    let first = match todo.pop_front() {
        Some(Err((i, r))) => Some(open_span(&open, &parts, i, &r).await?),
        _ => None,
    };
    let (tx, rx) = mpsc::channel(4);
    ecdn_cluster::peer::spawn_traced(async move {
        if let Some(body) = first {
            if !forward(body, &tx).await {
                return;
            }
        }
        for item in todo {
            match item {
                Ok(t) => {
                    if tx.send(Chunk::Data(t)).await.is_err() {
                        return;
                    }
                }
                Err((i, r)) => match open_span(&open, &parts, i, &r).await {
                    Ok(body) => {
                        if !forward(body, &tx).await {
                            return;
                        }
                    }
                    Err(e) => {
                        eprintln!(
                            "ecdn node: an object of parts: {e}{}",
                            ecdn_cluster::peer::request_note()
                        );
                        return;
                    }
                },
            }
        }
        let _ = tx.send(Chunk::Done).await;
    });
    Ok(NodeBody::Live(LiveBody::new(replay, None, rx, length)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_cover_a_range_part_by_part() {
        let sizes = [10, 5, 7];
        assert_eq!(spans(&sizes, 0..22), vec![(0, 0..10), (1, 0..5), (2, 0..7)]);
        assert_eq!(spans(&sizes, 8..12), vec![(0, 8..10), (1, 0..2)]);
        assert_eq!(spans(&sizes, 10..15), vec![(1, 0..5)]);
        assert_eq!(spans(&sizes, 21..22), vec![(2, 6..7)]);
        assert_eq!(spans(&sizes, 3..4), vec![(0, 3..4)]);
        assert!(spans(&sizes, 5..5).is_empty());
        assert_eq!(spans(&[0, 4], 0..4), vec![(1, 0..4)]);
    }
}
