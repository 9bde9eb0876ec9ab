//! The metadata block the node writes next to each object in the disk store.
//!
//! Format (all integers little-endian):
//!
//! | field | type |
//! |---|---|
//! | magic | 4 bytes `"ECNM"` |
//! | version | u8 (= 2; 1 has no *filled*) |
//! | status | u16 |
//! | lifetime | u64 seconds |
//! | stored at | u64 UNIX seconds (when the node received the response) |
//! | age at store | u64 seconds (the origin's `Age`) |
//! | filled | u64: the cluster's purge sequence its fill knew (`cluster/pieces/purge_log.rs`; 0 outside a cluster and in version 1) |
//! | header count | u16 |
//! | per header | name length u16, name bytes, value length u32, value bytes |
//!
//! [`decode`] checks every length against what is left, validates names, values and the
//! status, and rejects trailing bytes: anything wrong makes it return `None`, which the node
//! treats as a miss.

use hyper::header::{HeaderName, HeaderValue};
use hyper::StatusCode;

const MAGIC: &[u8; 4] = b"ECNM";
const VERSION: u8 = 2;
/// The version before *filled*, still read.
const VERSION_1: u8 = 1;

/// The decoded metadata of a disk entry.
#[derive(Debug, PartialEq, Eq)]
pub struct DiskMeta {
    pub status: StatusCode,
    pub lifetime_secs: u64,
    pub stored_at_unix: u64,
    pub age_at_store_secs: u64,
    /// The cluster's purge sequence the fill knew when it began (`purge_log.rs`).
    pub filled: u64,
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

pub fn encode(m: &DiskMeta) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    out.extend_from_slice(&m.status.as_u16().to_le_bytes());
    out.extend_from_slice(&m.lifetime_secs.to_le_bytes());
    out.extend_from_slice(&m.stored_at_unix.to_le_bytes());
    out.extend_from_slice(&m.age_at_store_secs.to_le_bytes());
    out.extend_from_slice(&m.filled.to_le_bytes());
    // Header names are far below 64 KiB and values below 4 GiB (hyper's limits are much
    // lower); headers beyond 65535 are dropped rather than written with a wrong count.
    let headers: Vec<_> = m
        .headers
        .iter()
        .filter(|(n, v)| n.as_str().len() <= u16::MAX as usize && v.len() <= u32::MAX as usize)
        .take(u16::MAX as usize)
        .collect();
    out.extend_from_slice(&(headers.len() as u16).to_le_bytes());
    for (name, value) in headers {
        out.extend_from_slice(&(name.as_str().len() as u16).to_le_bytes());
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(&(value.len() as u32).to_le_bytes());
        out.extend_from_slice(value.as_bytes());
    }
    out
}

/// A cursor that never reads past the end.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    fn u16(&mut self) -> Option<u16> {
        self.array().map(u16::from_le_bytes)
    }

    fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Option<u64> {
        self.array().map(u64::from_le_bytes)
    }
}

pub fn decode(bytes: &[u8]) -> Option<DiskMeta> {
    let mut r = Reader(bytes);
    if r.take(4)? != MAGIC {
        return None;
    }
    let version = r.take(1)?[0];
    if version != VERSION && version != VERSION_1 {
        return None;
    }
    let status = StatusCode::from_u16(r.u16()?).ok()?;
    let lifetime_secs = r.u64()?;
    let stored_at_unix = r.u64()?;
    let age_at_store_secs = r.u64()?;
    let filled = if version == VERSION { r.u64()? } else { 0 };
    let count = r.u16()?;
    let mut headers = Vec::with_capacity(usize::from(count).min(64));
    for _ in 0..count {
        let len = usize::from(r.u16()?);
        let name = HeaderName::from_bytes(r.take(len)?).ok()?;
        let len = usize::try_from(r.u32()?).ok()?;
        let value = HeaderValue::from_bytes(r.take(len)?).ok()?;
        headers.push((name, value));
    }
    if !r.0.is_empty() {
        return None;
    }
    Some(DiskMeta {
        status,
        lifetime_secs,
        stored_at_unix,
        age_at_store_secs,
        filled,
        headers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let m = DiskMeta {
            status: StatusCode::OK,
            lifetime_secs: 3600,
            stored_at_unix: 1_767_225_600,
            age_at_store_secs: 3,
            filled: 1_767_225_600_123,
            headers: vec![
                (
                    HeaderName::from_static("etag"),
                    HeaderValue::from_static("\"2a-100\""),
                ),
                (
                    HeaderName::from_static("cache-control"),
                    HeaderValue::from_static("public, max-age=3600"),
                ),
            ],
        };
        let b = encode(&m);
        assert_eq!(decode(&b), Some(m));
        // Every truncation, every single-byte change and trailing garbage: never a panic,
        // and truncations and trailing bytes are always rejected.
        for n in 0..b.len() {
            assert_eq!(decode(&b[..n]), None);
        }
        for i in 0..b.len() {
            for x in [0x00, 0x7f, 0xff] {
                let mut c = b.clone();
                c[i] ^= x;
                let _ = decode(&c);
            }
        }
        let mut c = b.clone();
        c.push(0);
        assert_eq!(decode(&c), None);
        assert_eq!(decode(b"ECNM\x02"), None);
        assert_eq!(decode(b"ECNM\x03"), None);
        // Version 1 (no `filled`) is still read, as filled at 0.
        let mut v1 = b.clone();
        v1[4] = 1;
        v1.drain(31..39);
        assert_eq!(
            decode(&v1),
            Some(DiskMeta {
                filled: 0,
                ..decode(&b).unwrap()
            })
        );
    }
}
