//! Cache request traces for ecdn.
//!
//! This crate is everything ecdn knows about request traces:
//!
//! * the [`Request`] record every simulator and policy consumes;
//! * streaming readers with constant memory, all implementing [`RequestReader`]:
//!   libCacheSim *oracleGeneral* ([`oracle`]), whitespace text `time id size` in the style of
//!   webcachesim ([`text`]) and CSV with a column mapping ([`csv`]), each optionally
//!   zstd-compressed; [`open`] picks the reader from a [`Format`] or the file name;
//! * streaming writers for the same formats ([`RequestWriter`], [`create`]) and [`copy`] to convert
//!   between them — the oracleGeneral writer fills in the next-access column itself;
//! * trace statistics in one streaming pass ([`stats`]);
//! * deterministic, seeded synthetic workloads ([`gen`]): Zipf popularity, several object-size
//!   distributions, Poisson arrivals and the traffic-mix changes of the AdaptSize paper (§6.3);
//! * byte-size and duration parsing ([`units`]).
//!
//! Readers hand out requests in batches ([`RequestReader::read_batch`]) so that a simulator can
//! process tens of millions of requests per second without a virtual call per request.
//!
//! String object ids (text and CSV traces) are mapped to 64-bit ids with [`hash_id`] (FNV-1a), so
//! the same trace always yields the same ids, on every run and platform.

#![warn(missing_docs)]

pub mod csv;
pub mod error;
pub mod format;
pub mod gen;
mod lines;
pub mod oracle;
pub mod rng;
mod sink;
pub mod stats;
pub mod text;
pub mod units;

pub use error::TraceError;
pub use format::{create, open, Format, OpenOptions};
pub use rng::Rng;
pub use stats::TraceStats;

/// One request of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Request {
    /// Timestamp in trace seconds.
    pub time: u64,
    /// Object id (string ids in CSV traces are hashed to 64 bits).
    pub id: u64,
    /// Object size in bytes.
    pub size: u64,
    /// Index (0-based request number) of the next request to the same object, or -1 if none or
    /// unknown. Only oracleGeneral traces carry it (on disk as libCacheSim's 1-based virtual
    /// time; [`oracle`] converts both ways).
    pub next_access: i64,
}

/// A source of requests, read in batches.
pub trait RequestReader: Send {
    /// Clears `buf` and appends up to `max` requests to it; returns how many were read.
    /// `Ok(0)` means the trace is exhausted.
    fn read_batch(&mut self, buf: &mut Vec<Request>, max: usize) -> Result<usize, TraceError>;
}

impl<R: RequestReader + ?Sized> RequestReader for Box<R> {
    fn read_batch(&mut self, buf: &mut Vec<Request>, max: usize) -> Result<usize, TraceError> {
        (**self).read_batch(buf, max)
    }
}

/// A sink of requests, written in batches. Call [`RequestWriter::finish`] at the end: it flushes,
/// completes compressed streams and (oracleGeneral) fills in next-access indices; dropping a
/// writer without finishing leaves an incomplete file.
pub trait RequestWriter: Send {
    /// Appends `reqs` to the trace.
    fn write_batch(&mut self, reqs: &[Request]) -> Result<(), TraceError>;

    /// Completes the trace and returns the number of requests written.
    fn finish(self: Box<Self>) -> Result<u64, TraceError>;
}

/// A reader over an in-memory slice of requests (tests, generators, look-ahead buffers).
pub struct SliceReader<'a> {
    reqs: &'a [Request],
    pos: usize,
}

impl<'a> SliceReader<'a> {
    /// Reads `reqs` from the start.
    pub fn new(reqs: &'a [Request]) -> Self {
        SliceReader { reqs, pos: 0 }
    }
}

impl RequestReader for SliceReader<'_> {
    fn read_batch(&mut self, buf: &mut Vec<Request>, max: usize) -> Result<usize, TraceError> {
        buf.clear();
        let end = (self.pos + max).min(self.reqs.len());
        buf.extend_from_slice(&self.reqs[self.pos..end]);
        let n = end - self.pos;
        self.pos = end;
        Ok(n)
    }
}

/// Reads a whole trace into memory (convenient for small traces and tests).
pub fn read_all(reader: &mut dyn RequestReader) -> Result<Vec<Request>, TraceError> {
    let mut all = Vec::new();
    let mut buf = Vec::with_capacity(BATCH);
    while reader.read_batch(&mut buf, BATCH)? > 0 {
        all.extend_from_slice(&buf);
    }
    Ok(all)
}

/// Default batch size used by readers and the simulator.
pub const BATCH: usize = 8192;

/// Copies every request from `reader` to `writer` in batches of [`BATCH`]; returns how many were
/// copied. Does not call [`RequestWriter::finish`].
pub fn copy(
    reader: &mut dyn RequestReader,
    writer: &mut dyn RequestWriter,
) -> Result<u64, TraceError> {
    let mut buf = Vec::with_capacity(BATCH);
    let mut n = 0u64;
    loop {
        let got = reader.read_batch(&mut buf, BATCH)?;
        if got == 0 {
            return Ok(n);
        }
        writer.write_batch(&buf)?;
        n += got as u64;
    }
}

/// Maps a string object id to 64 bits: 64-bit FNV-1a (offset basis `0xcbf29ce484222325`, prime
/// `0x100000001b3`) over the id's bytes. Fixed and platform independent, so a trace always gets
/// the same ids.
pub fn hash_id(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Parses an object id: a decimal number that fits in u64 is used as is, anything else
/// (names, hex digests, URLs, numbers too large for u64) is hashed with [`hash_id`].
pub fn parse_id(field: &[u8]) -> u64 {
    if !field.is_empty() && field.len() <= 20 && field.iter().all(u8::is_ascii_digit) {
        let mut v: u64 = 0;
        let mut ok = true;
        for &b in field {
            match v
                .checked_mul(10)
                .and_then(|v| v.checked_add((b - b'0') as u64))
            {
                Some(n) => v = n,
                None => {
                    ok = false;
                    break;
                }
            }
        }
        if ok {
            return v;
        }
    }
    hash_id(field)
}

/// Fills in `next_access` for every request (index of the next request to the same id, -1 if
/// none), as libCacheSim's oracleGeneral format expects. O(n) time, O(unique ids) memory.
pub fn compute_next_access(reqs: &mut [Request]) {
    let mut last: hashbrown::HashMap<u64, usize, foldhash::fast::FixedState> =
        hashbrown::HashMap::with_hasher(foldhash::fast::FixedState::with_seed(0));
    for i in (0..reqs.len()).rev() {
        let id = reqs[i].id;
        reqs[i].next_access = match last.insert(id, i) {
            Some(j) => j as i64,
            None => -1,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_reference_values() {
        assert_eq!(hash_id(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(hash_id(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(hash_id(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn ids() {
        assert_eq!(parse_id(b"0"), 0);
        assert_eq!(parse_id(b"18446744073709551615"), u64::MAX);
        assert_eq!(
            parse_id(b"18446744073709551616"),
            hash_id(b"18446744073709551616")
        );
        assert_eq!(parse_id(b"-1"), hash_id(b"-1"));
        assert_eq!(parse_id(b"abc"), hash_id(b"abc"));
        assert_eq!(parse_id(b""), hash_id(b""));
    }

    #[test]
    fn next_access_and_copy() {
        let mut reqs: Vec<Request> = [5u64, 6, 5, 7, 6, 5]
            .iter()
            .map(|&id| Request {
                id,
                ..Request::default()
            })
            .collect();
        compute_next_access(&mut reqs);
        let na: Vec<i64> = reqs.iter().map(|r| r.next_access).collect();
        assert_eq!(na, [2, 4, 5, -1, -1, -1]);

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.txt");
        let mut w = create(&path, &Format::Text).unwrap();
        assert_eq!(copy(&mut SliceReader::new(&reqs), &mut *w).unwrap(), 6);
        assert_eq!(w.finish().unwrap(), 6);
        let back = read_all(&mut open(&path, &OpenOptions::default()).unwrap()).unwrap();
        assert_eq!(back.len(), 6);
        assert!(back.iter().all(|r| r.next_access == -1));
    }
}
