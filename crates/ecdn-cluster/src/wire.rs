//! The peer protocol's requests on the wire (HTTP/1.1 on the peer listener, every request
//! signed, see [`crate::auth`]):
//!
//! | request | meaning |
//! |---|---|
//! | `PUT /_peer/piece/{chunk}/{key}` body [`trailing frame`](split_trailing_frame) | store a piece (chunk `chunk`; a replica is chunk `r`); with the header `x-ecdn-renew: 1` (resync), a piece the node holds is dropped first and stored as new |
//! | `GET /_peer/piece/{chunk}/{key}[?from=A&to=B]` | a piece's metadata and payload (sub-chunks `A..B` of a chunk), as a frame ([`frame_head`]) |
//! | `GET /_peer/piece/{chunk}/{key}?from=A&to=B&untagged` | sub-chunks `A..B` of a chunk, without their tags: the reader checks them against the digests of its metadata ([`untagged_piece_path`]) |
//! | `GET /_peer/has/{key}` | which pieces of the object the node holds: a frame whose metadata is one held piece's (a chunk's if it holds one) and whose payload lists the held pieces ([`encode_held`]); `404` when none |
//! | `GET /_peer/has/{key}?ages` | the same, and how old each held piece is ([`encode_ages`]: repair's and resync's question) |
//! | `DELETE /_peer/has/{key}?purge=N` | a `PURGE`, number `N` of the cluster's sequence (`ecdn_cluster::objects::ObjectDirectory::sequence`): the node drops its copies of the object and the pieces of it filled before that purge, and refuses (`409`) a piece `PUT` of it filled before it, for twice the signature window (`ecdn-node`'s `purge_log.rs`) |
//! | `DELETE /_peer/has/{key}` | a `PURGE` with no number (a node that could not get one, or of an earlier version): every copy and piece dropped, every write of the object refused for that time |
//! | `GET`/`HEAD /_peer/relay/{target}` | a client's request passed on to the bucket's serving node (`{target}`: the request's path and query, percent-encoded; the client's headers travel as they are) |
//! | `GET /_peer/relay/{target}?slice=N` | slice `N` of the sliced object at `{target}`, asked by a node reading the object's other slices itself: the serving node answers that slice as it would while streaming the object (found or filled by its range), with the slice's headers (`x-ecdn-slice`) |
//! | `POST /_peer/units/{name}?units=N` | EC-Cache's parity budget re-spent on object `{name}` (the coordinator's `object_budget.rs`): its splits grown or shrunk to `N`; the answer, signed, is the new record |
//! | `POST /_peer/dying` body [`encode_objects`] | whole-object eviction (`evict_together`): the node drops every piece it holds of these objects, as its policy would evict them |
//!
//! A piece `PUT` that stored or already held its piece answers `200`, signed, with
//! [`encode_stored`]'s body: whether it was new, and the objects whose pieces the node's policy
//! evicted to make room ([`decode_stored`]), which the writer passes on as a `dying` request
//! once all of its object's pieces are written.
//!
//! A piece request with `from`/`to` answers the payload bytes of those sub-chunks alone, not
//! as a frame, **each sub-chunk followed by its tag** ([`crate::auth::SubChunkTagger`], keyed
//! to that request's signature): the reader takes a sub-chunk once its tag checks out, and
//! checks it against the CRC-32C values of the piece's metadata, which it got from a signed
//! `has` answer (so a peer holding another version of the object is caught too). With
//! `&untagged`, the sub-chunks come alone, and the reader checks each against its digest in
//! that metadata (`crate::piece`, version 2): the holder computes nothing.
//!
//! `{key}` is the object's cache key, percent-encoded ([`encode_key`]): every byte outside
//! `A-Z a-z 0-9 - . _ ~` as `%XX`, so it is one path segment and the signature (over the path)
//! covers it. `{chunk}` is a decimal chunk index, or `r` for a replica.
//!
//! A **frame** is what a piece travels as: the piece's metadata length (u32, little-endian),
//! the metadata ([`crate::piece::PieceMeta`]), then the payload. A piece sent to be stored
//! travels as a **trailing frame**, the same parts the other way round: the payload, the
//! metadata, then its length (u32, little-endian), so a chunk can be sent stripe by stripe
//! while its object is still arriving and its metadata (the CRC-32C of every sub-chunk) follows
//! once known. Such a body may be streamed ([`crate::auth`]'s body tag follows it).

use thiserror::Error;

use crate::piece::MAX_META;

/// Why a peer request's path or body was refused (a `400` on the wire).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum WireError {
    #[error("peer request: {0}")]
    Bad(&'static str),
}

/// Which piece a request names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PieceName {
    Replica,
    Chunk(u16),
}

/// A parsed peer request path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerPath {
    Piece {
        piece: PieceName,
        key: String,
        /// Sub-chunks `from..to` only.
        sub_chunks: Option<(u64, u64)>,
        /// `&untagged` (with `sub_chunks`): the sub-chunks without their tags, for a reader
        /// that checks them against the digests of its metadata ([`untagged_piece_path`]).
        untagged: bool,
    },
    Has {
        key: String,
        /// `?ages`: the answer also says how old each held piece is ([`encode_ages`]).
        ages: bool,
    },
    /// `DELETE` of [`purge_path`]: purge number `sequence` of the object (with no number:
    /// [`PeerPath::Has`]).
    Purge { key: String, sequence: u64 },
    /// A client request relayed to the serving node: its path and query, and with
    /// `?slice=N` ([`relay_slice_path`]) only slice `N` of the object asked.
    Relay { target: String, slice: Option<u64> },
    /// The node's counters (its `/_ecdn/stats`), for the coordinator's status page.
    Stats,
    /// A health probe ([`crate::health::probe`]): answered at once, its round trip is the
    /// node's service time as the prober sees it.
    Probe,
    /// `POST` of [`units_path`]: the object `name`'s splits grown or shrunk to `units`.
    Units { name: String, units: u64 },
    /// Objects to drop whole ([`DYING_PATH`], body [`encode_objects`]).
    Dying,
}

/// The path of [`PeerPath::Dying`].
pub const DYING_PATH: &str = "/_peer/dying";

/// The most object ids one [`encode_objects`] body may carry.
pub const MAX_OBJECTS: usize = 1 << 16;

/// The path of [`PeerPath::Probe`].
pub const PROBE_PATH: &str = "/_peer/probe";

/// The path of [`PeerPath::Stats`].
pub const STATS_PATH: &str = "/_peer/stats";

/// The longest cache key a peer request may name.
pub const MAX_KEY: usize = 16 << 10;

fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

pub fn encode_key(key: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut s = String::with_capacity(key.len() * 3);
    for &b in key.as_bytes() {
        if unreserved(b) {
            s.push(b as char);
        } else {
            s.push('%');
            s.push(HEX[usize::from(b >> 4)] as char);
            s.push(HEX[usize::from(b & 15)] as char);
        }
    }
    s
}

pub fn decode_key(s: &str) -> Result<String, WireError> {
    let bad = |m| Err(WireError::Bad(m));
    if s.is_empty() {
        return bad("empty key");
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = |c: u8| (c as char).to_digit(16);
                let (Some(h), Some(l)) = (
                    b.get(i + 1).and_then(|&c| hex(c)),
                    b.get(i + 2).and_then(|&c| hex(c)),
                ) else {
                    return bad("bad percent-escape in key");
                };
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            c if unreserved(c) => {
                out.push(c);
                i += 1;
            }
            _ => return bad("unescaped byte in key"),
        }
        if out.len() > MAX_KEY {
            return bad("key too long");
        }
    }
    String::from_utf8(out).or(bad("key is not UTF-8"))
}

/// The path of a piece request.
pub fn piece_path(piece: PieceName, key: &str, sub_chunks: Option<(u64, u64)>) -> String {
    let name = match piece {
        PieceName::Replica => "r".to_string(),
        PieceName::Chunk(c) => c.to_string(),
    };
    let mut p = format!("/_peer/piece/{name}/{}", encode_key(key));
    if let Some((a, b)) = sub_chunks {
        p.push_str(&format!("?from={a}&to={b}"));
    }
    p
}

/// The path of a read of sub-chunks `from..to` of a chunk, sent without their tags: the reader
/// checks each against its digest (`crate::piece`'s version 2 metadata), which it holds from
/// its own disk or a signed answer.
pub fn untagged_piece_path(chunk: u16, key: &str, (from, to): (u64, u64)) -> String {
    let mut p = piece_path(PieceName::Chunk(chunk), key, Some((from, to)));
    p.push_str("&untagged");
    p
}

/// The path of a relayed client request for `target` (path and query).
pub fn relay_path(target: &str) -> String {
    format!("/_peer/relay/{}", encode_key(target))
}

/// The path of a relayed request for slice `index` of the sliced object at `target`.
pub fn relay_slice_path(target: &str, index: u64) -> String {
    format!("{}?slice={index}", relay_path(target))
}

/// The path of a "which pieces do you hold" request.
pub fn has_path(key: &str) -> String {
    format!("/_peer/has/{}", encode_key(key))
}

/// The path of a purge's `DELETE`, purge number `sequence` of the cluster's sequence.
pub fn purge_path(key: &str, sequence: u64) -> String {
    format!("/_peer/has/{}?purge={sequence}", encode_key(key))
}

/// The path of the coordinator's re-spend of EC-Cache object `name` to `units` splits.
pub fn units_path(name: &str, units: u64) -> String {
    format!("/_peer/units/{}?units={units}", encode_key(name))
}

/// The path of a "which pieces do you hold, and how old are they" request (the background
/// repair's question, [`encode_ages`]).
pub fn has_ages_path(key: &str) -> String {
    format!("/_peer/has/{}?ages", encode_key(key))
}

fn number(s: &str) -> Option<u64> {
    (!s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// Parses a peer request's path and query.
pub fn parse_path(path_and_query: &str) -> Result<PeerPath, WireError> {
    let bad = |m| Err(WireError::Bad(m));
    let (path, query) = match path_and_query.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path_and_query, None),
    };
    if path == STATS_PATH {
        if query.is_some() {
            return bad("unexpected query");
        }
        return Ok(PeerPath::Stats);
    }
    if path == PROBE_PATH {
        if query.is_some() {
            return bad("unexpected query");
        }
        return Ok(PeerPath::Probe);
    }
    if path == DYING_PATH {
        if query.is_some() {
            return bad("unexpected query");
        }
        return Ok(PeerPath::Dying);
    }
    if let Some(key) = path.strip_prefix("/_peer/has/") {
        let ages = match query {
            None => false,
            Some("ages") => true,
            Some(q) => match q.strip_prefix("purge=").and_then(number) {
                Some(sequence) => {
                    let key = decode_key(key)?;
                    return Ok(PeerPath::Purge { key, sequence });
                }
                None => return bad("unexpected query"),
            },
        };
        return Ok(PeerPath::Has {
            key: decode_key(key)?,
            ages,
        });
    }
    if let Some(name) = path.strip_prefix("/_peer/units/") {
        let Some(units) = query
            .and_then(|q| q.strip_prefix("units="))
            .and_then(number)
        else {
            return bad("units needs ?units=N");
        };
        return Ok(PeerPath::Units {
            name: decode_key(name)?,
            units,
        });
    }
    if let Some(target) = path.strip_prefix("/_peer/relay/") {
        let slice = match query {
            None => None,
            Some(q) => match q.strip_prefix("slice=").and_then(number) {
                Some(n) => Some(n),
                None => return bad("unexpected query"),
            },
        };
        let target = decode_key(target)?;
        if !target.starts_with('/') {
            return bad("relay target must start with /");
        }
        return Ok(PeerPath::Relay { target, slice });
    }
    let Some(rest) = path.strip_prefix("/_peer/piece/") else {
        return bad("unknown peer path");
    };
    let Some((name, key)) = rest.split_once('/') else {
        return bad("missing key");
    };
    let piece = match name {
        "r" => PieceName::Replica,
        n => match number(n).and_then(|c| u16::try_from(c).ok()) {
            Some(c) if c < 256 => PieceName::Chunk(c),
            _ => return bad("bad chunk index"),
        },
    };
    let key = decode_key(key)?;
    let mut untagged = false;
    let sub_chunks = match query {
        None => None,
        Some(q) => {
            let mut from = None;
            let mut to = None;
            for pair in q.split('&') {
                match pair.split_once('=') {
                    Some(("from", v)) if from.is_none() => from = number(v),
                    Some(("to", v)) if to.is_none() => to = number(v),
                    None if pair == "untagged" && !untagged => untagged = true,
                    _ => return bad("bad query"),
                }
            }
            match (from, to) {
                (Some(a), Some(b)) if a < b && piece != PieceName::Replica => Some((a, b)),
                _ => return bad("bad sub-chunk range"),
            }
        }
    };
    Ok(PeerPath::Piece {
        piece,
        key,
        sub_chunks,
        untagged,
    })
}

/// The head of a frame: metadata length and metadata.
pub fn frame_head(meta: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + meta.len());
    v.extend_from_slice(&(meta.len() as u32).to_le_bytes());
    v.extend_from_slice(meta);
    v
}

/// Splits a whole frame into metadata and payload.
pub fn split_frame(frame: &[u8]) -> Result<(&[u8], &[u8]), WireError> {
    let Some(len) = frame.get(..4) else {
        return Err(WireError::Bad("frame shorter than its length field"));
    };
    let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
    if len > MAX_META {
        return Err(WireError::Bad("frame metadata too long"));
    }
    let rest = &frame[4..];
    if len > rest.len() {
        return Err(WireError::Bad("frame shorter than its metadata"));
    }
    Ok(rest.split_at(len))
}

/// What follows a piece's payload in a trailing frame: the metadata and its length.
pub fn frame_tail(meta: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(meta.len() + 4);
    v.extend_from_slice(meta);
    v.extend_from_slice(&(meta.len() as u32).to_le_bytes());
    v
}

/// Splits a whole trailing frame into metadata and payload.
pub fn split_trailing_frame(frame: &[u8]) -> Result<(&[u8], &[u8]), WireError> {
    let Some(at) = frame.len().checked_sub(4) else {
        return Err(WireError::Bad(
            "trailing frame shorter than its length field",
        ));
    };
    let len = &frame[at..];
    let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
    if len > MAX_META {
        return Err(WireError::Bad("frame metadata too long"));
    }
    let Some(start) = at.checked_sub(len) else {
        return Err(WireError::Bad("trailing frame shorter than its metadata"));
    };
    Ok((&frame[start..at], &frame[..start]))
}

/// The payload of a `has` answer: one byte per held piece, `255` for a replica, else the
/// chunk index.
pub fn encode_held(held: &[PieceName]) -> Vec<u8> {
    held.iter()
        .map(|p| match p {
            PieceName::Replica => 255,
            PieceName::Chunk(c) => *c as u8,
        })
        .collect()
}

/// Reads a `has` answer's payload (chunk indices below 255; at most 256 entries).
pub fn decode_held(bytes: &[u8]) -> Result<Vec<PieceName>, WireError> {
    if bytes.len() > 256 {
        return Err(WireError::Bad("too many held pieces"));
    }
    Ok(bytes
        .iter()
        .map(|&b| {
            if b == 255 {
                PieceName::Replica
            } else {
                PieceName::Chunk(u16::from(b))
            }
        })
        .collect())
}

/// Object ids (the simulator's, `ecdn_trace::hash_id` of the cache key) as little-endian
/// `u64`s: a `dying` request's body, and the tail of a piece `PUT`'s answer.
pub fn encode_objects(ids: &[u64]) -> Vec<u8> {
    ids.iter().flat_map(|id| id.to_le_bytes()).collect()
}

/// Reads [`encode_objects`]' bytes: a whole number of ids, at most [`MAX_OBJECTS`].
pub fn decode_objects(bytes: &[u8]) -> Result<Vec<u64>, WireError> {
    if !bytes.len().is_multiple_of(8) {
        return Err(WireError::Bad("object ids: not a whole number of u64s"));
    }
    if bytes.len() / 8 > MAX_OBJECTS {
        return Err(WireError::Bad("object ids: too many"));
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("chunks of 8")))
        .collect())
}

/// A piece `PUT`'s `200` body: `stored\n` (or `present\n` when the node already held the
/// piece), then the objects whose pieces the node's policy evicted to admit it
/// ([`encode_objects`]).
pub fn encode_stored(present: bool, evicted: &[u64]) -> Vec<u8> {
    let head: &[u8] = if present { b"present\n" } else { b"stored\n" };
    let mut v = head.to_vec();
    v.extend_from_slice(&encode_objects(evicted));
    v
}

/// Reads [`encode_stored`]'s body: the evicted objects.
pub fn decode_stored(bytes: &[u8]) -> Result<Vec<u64>, WireError> {
    let tail = bytes
        .strip_prefix(b"stored\n")
        .or_else(|| bytes.strip_prefix(b"present\n"))
        .ok_or(WireError::Bad("piece answer: neither stored nor present"))?;
    decode_objects(tail)
}

/// The tail of a `has?ages` answer's payload, after [`encode_held`]'s bytes: the node's piece
/// capacity, then per held piece (in the same order) the bytes the node wrote since it wrote
/// that piece — its place in the node's FIFO: it is evicted when that reaches the capacity.
/// All little-endian `u64`.
pub fn encode_ages(capacity: u64, since: &[u64]) -> Vec<u8> {
    let mut v = Vec::with_capacity(8 * (1 + since.len()));
    v.extend_from_slice(&capacity.to_le_bytes());
    for s in since {
        v.extend_from_slice(&s.to_le_bytes());
    }
    v
}

/// Reads a `has?ages` answer's payload: the held pieces, the capacity, and each piece's bytes
/// written since (see [`encode_ages`]): `n` names, then `8 + 8·n` bytes.
pub fn decode_held_ages(bytes: &[u8]) -> Result<(Vec<PieceName>, u64, Vec<u64>), WireError> {
    let n = bytes
        .len()
        .checked_sub(8)
        .filter(|rest| rest % 9 == 0)
        .map(|rest| rest / 9)
        .ok_or(WireError::Bad("has answer with ages of the wrong length"))?;
    let held = decode_held(&bytes[..n])?;
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[at..at + 8]);
        u64::from_le_bytes(w)
    };
    let capacity = word(n);
    let since = (0..n).map(|i| word(n + 8 + 8 * i)).collect();
    Ok((held, capacity, since))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn dying_objects_and_piece_answers_round_trip_and_refuse_bad_bodies() {
        assert_eq!(parse_path(DYING_PATH), Ok(PeerPath::Dying));
        assert_eq!(
            parse_path(&units_path("a b", 12)),
            Ok(PeerPath::Units {
                name: "a b".into(),
                units: 12
            })
        );
        for bad in [
            "/_peer/units/x",
            "/_peer/units/x?units=",
            "/_peer/units/x?k=1",
        ] {
            assert!(parse_path(bad).is_err(), "{bad}");
        }
        assert!(parse_path("/_peer/dying?x").is_err());
        let ids = [0, 7, u64::MAX];
        assert_eq!(decode_objects(&encode_objects(&ids)).unwrap(), ids);
        assert_eq!(decode_stored(&encode_stored(false, &ids)).unwrap(), ids);
        assert_eq!(
            decode_stored(&encode_stored(true, &[])).unwrap(),
            Vec::<u64>::new()
        );
        assert!(decode_objects(&[1, 2, 3]).is_err());
        assert!(decode_objects(&vec![0; 8 * (MAX_OBJECTS + 1)]).is_err());
        assert!(decode_stored(b"stored").is_err());
        assert!(decode_stored(b"stored\n123").is_err());
        assert!(decode_stored(b"purged\n").is_err());
    }

    #[test]
    fn paths_round_trip() {
        let key = "demo.ecdn/obj/12?size=300000&x=ä /%";
        for (piece, sub) in [
            (PieceName::Replica, None),
            (PieceName::Chunk(0), None),
            (PieceName::Chunk(3), Some((2, 9))),
        ] {
            let p = piece_path(piece, key, sub);
            assert_eq!(
                parse_path(&p).unwrap(),
                PeerPath::Piece {
                    piece,
                    key: key.into(),
                    sub_chunks: sub,
                    untagged: false,
                }
            );
            assert_eq!(p.matches('?').count(), usize::from(sub.is_some()));
            assert_eq!(p.matches('/').count(), 4);
        }
        assert_eq!(
            parse_path(&untagged_piece_path(3, key, (2, 9))).unwrap(),
            PeerPath::Piece {
                piece: PieceName::Chunk(3),
                key: key.into(),
                sub_chunks: Some((2, 9)),
                untagged: true,
            }
        );
        for bad in [
            "/_peer/piece/3/k?untagged",
            "/_peer/piece/3/k?from=1&to=2&untagged&untagged",
            "/_peer/piece/3/k?from=1&to=2&untagged=1",
            "/_peer/piece/r/k?from=1&to=2&untagged",
        ] {
            assert!(parse_path(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_path(&has_path(key)).unwrap(),
            PeerPath::Has {
                key: key.into(),
                ages: false
            }
        );
        assert_eq!(
            parse_path(&has_ages_path(key)).unwrap(),
            PeerPath::Has {
                key: key.into(),
                ages: true
            }
        );
        assert!(parse_path(&format!("{}?old", has_path(key))).is_err());
        for sequence in [0, 7, u64::MAX] {
            assert_eq!(
                parse_path(&purge_path(key, sequence)).unwrap(),
                PeerPath::Purge {
                    key: key.into(),
                    sequence
                }
            );
        }
        for q in [
            "purge=",
            "purge=x",
            "purge=18446744073709551616",
            "purge=1&ages",
        ] {
            assert!(
                parse_path(&format!("{}?{q}", has_path(key))).is_err(),
                "{q}"
            );
        }
    }

    #[test]
    fn relay_and_held_round_trip() {
        let t = "/obj/1?size=5&a=b c";
        assert_eq!(
            parse_path(&relay_path(t)).unwrap(),
            PeerPath::Relay {
                target: t.into(),
                slice: None
            }
        );
        assert_eq!(
            parse_path(&relay_slice_path(t, 7)).unwrap(),
            PeerPath::Relay {
                target: t.into(),
                slice: Some(7)
            }
        );
        assert!(parse_path("/_peer/relay/%2Fx?slice=").is_err());
        assert!(parse_path("/_peer/relay/%2Fx?slice=1&y").is_err());
        assert!(parse_path("/_peer/relay/obj").is_err());
        assert_eq!(parse_path(STATS_PATH).unwrap(), PeerPath::Stats);
        assert!(parse_path("/_peer/stats?x=1").is_err());
        assert!(parse_path("/_peer/stats/x").is_err());
        assert_eq!(parse_path(PROBE_PATH).unwrap(), PeerPath::Probe);
        assert!(parse_path("/_peer/probe?x").is_err());
        assert!(parse_path("/_peer/probe/x").is_err());
        assert!(parse_path("/_peer/relay/%2Fx?y=1").is_err());
        let held = [PieceName::Replica, PieceName::Chunk(0), PieceName::Chunk(4)];
        assert_eq!(decode_held(&encode_held(&held)).unwrap(), held);
        assert!(decode_held(&[0; 300]).is_err());
        let mut answer = encode_held(&held);
        answer.extend_from_slice(&encode_ages(1 << 30, &[0, 7, u64::MAX]));
        assert_eq!(
            decode_held_ages(&answer).unwrap(),
            (held.to_vec(), 1 << 30, vec![0, 7, u64::MAX])
        );
        assert!(decode_held_ages(&answer[1..]).is_err());
        assert!(decode_held_ages(&[0; 7]).is_err());
        assert_eq!(
            decode_held_ages(&[9; 8]).unwrap(),
            (vec![], 0x0909_0909_0909_0909, vec![])
        );
    }

    #[test]
    fn bad_paths_are_refused() {
        for p in [
            "/_peer/piece/",
            "/_peer/piece/1",
            "/_peer/piece/1/",
            "/_peer/piece/x/abc",
            "/_peer/piece/256/abc",
            "/_peer/piece/+1/abc",
            "/_peer/piece/1/a%2",
            "/_peer/piece/1/a%zz",
            "/_peer/piece/1/a/b",
            "/_peer/piece/1/%ff",
            "/_peer/piece/1/abc?from=3&to=3",
            "/_peer/piece/1/abc?from=1",
            "/_peer/piece/1/abc?from=1&to=2&to=3",
            "/_peer/piece/r/abc?from=1&to=2",
            "/_peer/has/abc?x",
            "/other",
            "/obj/1",
        ] {
            assert!(parse_path(p).is_err(), "{p}");
        }
        let long = format!("/_peer/has/{}", "a".repeat(MAX_KEY + 1));
        assert!(parse_path(&long).is_err());
    }

    #[test]
    fn frames_split() {
        let mut f = frame_head(b"meta");
        f.extend_from_slice(b"payload");
        assert_eq!(split_frame(&f).unwrap(), (&b"meta"[..], &b"payload"[..]));
        assert!(split_frame(&f[..3]).is_err());
        assert!(split_frame(&f[..7]).is_err());
        assert_eq!(split_frame(&f[..8]).unwrap(), (&b"meta"[..], &b""[..]));
        // The trailing frame: payload, metadata, length.
        let mut t = b"payload".to_vec();
        t.extend_from_slice(&frame_tail(b"meta"));
        assert_eq!(
            split_trailing_frame(&t).unwrap(),
            (&b"meta"[..], &b"payload"[..])
        );
        assert_eq!(
            split_trailing_frame(&t[7..]).unwrap(),
            (&b"meta"[..], &b""[..])
        );
        assert!(split_trailing_frame(&t[8..]).is_err());
        assert!(split_trailing_frame(&t[..3]).is_err());
        let mut long = vec![0u8; 8];
        long.extend_from_slice(&((MAX_META + 1) as u32).to_le_bytes());
        assert!(split_trailing_frame(&long).is_err());
    }

    proptest! {
        #[test]
        fn keys_round_trip_and_junk_never_panics(key in "\\PC{1,40}", junk in "\\PC{0,60}") {
            prop_assert_eq!(decode_key(&encode_key(&key)).unwrap(), key);
            let _ = parse_path(&junk);
            let _ = parse_path(&format!("/_peer/piece/{junk}"));
            let _ = split_frame(junk.as_bytes());
            let _ = split_trailing_frame(junk.as_bytes());
        }
    }
}
