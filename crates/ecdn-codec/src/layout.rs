//! The geometry of one coded object (FORMAT.md §3–§5): chunks, sub-chunks, stripes, and which
//! sub-chunks a byte range needs.

use std::iter::FusedIterator;
use std::ops::Range;

use crate::{check_count, gf, CodecError};

/// Default sub-chunk size: 32 KiB, the block size at which C2DN measured coding to be far
/// faster than the NIC and SSDs to reach peak bandwidth (§5, Fig. 3).
pub const DEFAULT_SUB_CHUNK: u64 = 32 * 1024;
/// C2DN codes objects larger than this (128 KiB) and replicates smaller ones (§5).
pub const CODING_THRESHOLD: u64 = 128 * 1024;
/// Default number of data chunks (C2DN's (3, 1)).
pub const DEFAULT_K: usize = 3;
/// Default number of parity chunks.
pub const DEFAULT_P: usize = 1;
/// Bytes of a serialized [`ChunkHeader`].
pub const CHUNK_HEADER_LEN: usize = 24;

/// How an object of `size` bytes is coded (K, P) with sub-chunks of `sub_chunk` bytes.
///
/// * chunk size `c = ceil(size / K)`; data chunk i (0 ≤ i < K) holds object bytes
///   `[i·c, (i+1)·c)` clipped to the object, followed by zero bytes up to `c` (so a data chunk
///   that starts at or past `size` is all zeros); parity chunk r is chunk `K + r`.
/// * every chunk is cut at the same offsets into `n = ceil(c / sub_chunk)` sub-chunks; sub-chunk
///   j is `[j·sub_chunk, min((j+1)·sub_chunk, c))` — the last one may be short, never padded.
/// * stripe j is sub-chunk j of all K + P chunks; its parity is coded from its data alone.
///
/// An empty object has chunk size 0 and no sub-chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ObjectLayout {
    size: u64,
    k: usize,
    p: usize,
    sub_chunk: u64,
}

impl ObjectLayout {
    /// Checks the shape (K ≥ 1, K + P ≤ 256) and the sub-chunk size (≥ 1).
    pub fn new(size: u64, k: usize, p: usize, sub_chunk: u64) -> Result<Self, CodecError> {
        gf::check_shape(k, p)?;
        if sub_chunk == 0 {
            return Err(CodecError::ZeroSubChunk);
        }
        let chunk = size.div_ceil(k as u64);
        if chunk.checked_mul((k + p) as u64).is_none() {
            return Err(CodecError::TooLarge {
                what: "coded object",
                size,
            });
        }
        Ok(ObjectLayout {
            size,
            k,
            p,
            sub_chunk,
        })
    }

    /// (K, P) with [`DEFAULT_SUB_CHUNK`].
    pub fn with_default_sub_chunk(size: u64, k: usize, p: usize) -> Result<Self, CodecError> {
        Self::new(size, k, p, DEFAULT_SUB_CHUNK)
    }

    /// Object size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Data chunks K.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Parity chunks P.
    pub fn p(&self) -> usize {
        self.p
    }

    /// K + P.
    pub fn total_chunks(&self) -> usize {
        self.k + self.p
    }

    /// Nominal sub-chunk size.
    pub fn sub_chunk(&self) -> u64 {
        self.sub_chunk
    }

    /// Bytes of every chunk, data or parity: ceil(size / K).
    pub fn chunk_size(&self) -> u64 {
        self.size.div_ceil(self.k as u64)
    }

    /// Sub-chunks per chunk (= stripes): ceil(chunk_size / sub_chunk).
    pub fn sub_chunks_per_chunk(&self) -> u64 {
        self.chunk_size().div_ceil(self.sub_chunk)
    }

    /// Bytes stored for the whole object: (K + P) · chunk_size.
    pub fn stored_bytes(&self) -> u64 {
        self.chunk_size() * self.total_chunks() as u64
    }

    fn check_chunk(&self, chunk: usize) -> Result<(), CodecError> {
        if chunk >= self.total_chunks() {
            return Err(CodecError::NoSuchChunk {
                chunk,
                total: self.total_chunks(),
            });
        }
        Ok(())
    }

    fn sub_range(&self, j: u64) -> Result<Range<u64>, CodecError> {
        let count = self.sub_chunks_per_chunk();
        if j >= count {
            return Err(CodecError::NoSuchSubChunk { index: j, count });
        }
        let start = j * self.sub_chunk;
        Ok(start..self.chunk_size().min(start + self.sub_chunk))
    }

    /// Bytes `[start, end)` of chunk `chunk` that form its sub-chunk `j` (the same for every
    /// chunk of the object).
    pub fn sub_chunk_range(&self, chunk: usize, j: u64) -> Result<Range<u64>, CodecError> {
        self.check_chunk(chunk)?;
        self.sub_range(j)
    }

    /// Length of sub-chunk `j` (sub_chunk, or less for the last one).
    pub fn sub_chunk_len(&self, j: u64) -> Result<u64, CodecError> {
        self.sub_range(j).map(|r| r.end - r.start)
    }

    /// Object bytes data chunk `chunk` carries, without its padding (empty for an all-padding
    /// chunk).
    pub fn data_range(&self, chunk: usize) -> Result<Range<u64>, CodecError> {
        self.check_chunk(chunk)?;
        if chunk >= self.k {
            return Err(CodecError::NotADataChunk { chunk });
        }
        let c = self.chunk_size();
        let start = (chunk as u64 * c).min(self.size);
        Ok(start..(start + c).min(self.size))
    }

    /// Object bytes data sub-chunk (`chunk`, `j`) carries, without padding: its first
    /// `end − start` bytes are those object bytes, the rest are zeros.
    pub fn data_range_of(&self, chunk: usize, j: u64) -> Result<Range<u64>, CodecError> {
        let base = self.data_range(chunk)?.start;
        let r = self.sub_range(j)?;
        let unclipped = chunk as u64 * self.chunk_size();
        let start = (unclipped + r.start).min(self.size);
        let end = (unclipped + r.end).min(self.size);
        debug_assert!(start >= base);
        Ok(start..end)
    }

    /// The data sub-chunks covering object bytes `range`, in object order, each with the part of
    /// the sub-chunk that falls in the range.
    pub fn sub_chunks_for_range(&self, range: Range<u64>) -> Result<SubChunkSpans, CodecError> {
        self.check_range(&range)?;
        Ok(SubChunkSpans {
            layout: *self,
            pos: range.start,
            end: range.end,
        })
    }

    /// The stripes that must be decoded to read `range` when only the chunks flagged in `present`
    /// (K + P flags) are available: those of the range's sub-chunks whose data chunk is missing,
    /// ascending. Errors if some stripe must be decoded and fewer than K chunks are present.
    pub fn stripes_to_decode(
        &self,
        range: Range<u64>,
        present: &[bool],
    ) -> Result<Vec<u64>, CodecError> {
        check_count("present flags", self.total_chunks(), present.len())?;
        let mut stripes: Vec<u64> = self
            .sub_chunks_for_range(range)?
            .filter(|s| !present[s.chunk])
            .map(|s| s.sub_chunk)
            .collect();
        stripes.sort_unstable();
        stripes.dedup();
        let have = present.iter().filter(|&&p| p).count();
        if !stripes.is_empty() && have < self.k {
            return Err(CodecError::TooFewShards {
                present: have,
                needed: self.k,
            });
        }
        Ok(stripes)
    }

    pub(crate) fn check_range(&self, range: &Range<u64>) -> Result<(), CodecError> {
        if range.start > range.end || range.end > self.size {
            return Err(CodecError::RangeOutOfBounds {
                start: range.start,
                end: range.end,
                size: self.size,
            });
        }
        Ok(())
    }
}

/// Part of one data sub-chunk that a byte range needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubChunkSpan {
    /// Data chunk index (< K).
    pub chunk: usize,
    /// Sub-chunk index j within the chunk (= the stripe).
    pub sub_chunk: u64,
    /// The needed bytes, as offsets within the sub-chunk.
    pub range: Range<u64>,
    /// Object offset of `range.start`.
    pub object_offset: u64,
}

impl SubChunkSpan {
    /// Object bytes this span carries.
    pub fn object_range(&self) -> Range<u64> {
        self.object_offset..self.object_offset + (self.range.end - self.range.start)
    }
}

/// Iterator of [`ObjectLayout::sub_chunks_for_range`].
#[derive(Clone, Debug)]
pub struct SubChunkSpans {
    layout: ObjectLayout,
    pos: u64,
    end: u64,
}

impl Iterator for SubChunkSpans {
    type Item = SubChunkSpan;

    fn next(&mut self) -> Option<SubChunkSpan> {
        if self.pos >= self.end {
            return None;
        }
        let c = self.layout.chunk_size();
        let sub = self.layout.sub_chunk;
        let chunk = self.pos / c;
        let chunk_start = chunk * c;
        let j = (self.pos - chunk_start) / sub;
        let sub_start = j * sub;
        let sub_end = c.min(sub_start + sub);
        let span_end = self.end.min(chunk_start + sub_end);
        let span = SubChunkSpan {
            chunk: chunk as usize,
            sub_chunk: j,
            range: self.pos - chunk_start - sub_start..span_end - chunk_start - sub_start,
            object_offset: self.pos,
        };
        self.pos = span_end;
        Some(span)
    }
}

impl FusedIterator for SubChunkSpans {}

/// A self-describing 24-byte header a node may store or send with each chunk (FORMAT.md §6):
/// which object layout the chunk belongs to and its index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ChunkHeader {
    pub layout: ObjectLayout,
    /// Chunk index: data 0 .. K−1, parity K .. K+P−1.
    pub chunk: usize,
}

const MAGIC: [u8; 4] = *b"ECRS";
const VERSION: u8 = 1;

impl ChunkHeader {
    /// Checks that `chunk` exists and that the sub-chunk size fits the header's 32 bits.
    pub fn new(layout: ObjectLayout, chunk: usize) -> Result<Self, CodecError> {
        layout.check_chunk(chunk)?;
        if u32::try_from(layout.sub_chunk).is_err() {
            return Err(CodecError::Header("sub-chunk size above 4 GiB − 1"));
        }
        Ok(ChunkHeader { layout, chunk })
    }

    /// The header bytes (all integers little-endian).
    pub fn to_bytes(&self) -> [u8; CHUNK_HEADER_LEN] {
        let mut b = [0u8; CHUNK_HEADER_LEN];
        b[0..4].copy_from_slice(&MAGIC);
        b[4] = VERSION;
        b[5] = 0;
        b[6..8].copy_from_slice(&(self.layout.k as u16).to_le_bytes());
        b[8..10].copy_from_slice(&(self.layout.p as u16).to_le_bytes());
        b[10..12].copy_from_slice(&(self.chunk as u16).to_le_bytes());
        b[12..16].copy_from_slice(&(self.layout.sub_chunk as u32).to_le_bytes());
        b[16..24].copy_from_slice(&self.layout.size.to_le_bytes());
        b
    }

    /// Parses and validates the first [`CHUNK_HEADER_LEN`] bytes of `bytes`.
    pub fn parse(bytes: &[u8]) -> Result<Self, CodecError> {
        let b = bytes
            .get(..CHUNK_HEADER_LEN)
            .ok_or(CodecError::Header("shorter than 24 bytes"))?;
        if b[0..4] != MAGIC {
            return Err(CodecError::Header("bad magic (expected \"ECRS\")"));
        }
        if b[4] != VERSION {
            return Err(CodecError::Header("unsupported version"));
        }
        if b[5] != 0 {
            return Err(CodecError::Header("reserved byte is not zero"));
        }
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]) as usize;
        let sub = u32::from_le_bytes([b[12], b[13], b[14], b[15]]) as u64;
        let mut size = [0u8; 8];
        size.copy_from_slice(&b[16..24]);
        let layout = ObjectLayout::new(u64::from_le_bytes(size), u16_at(6), u16_at(8), sub)?;
        let chunk = u16_at(10);
        layout.check_chunk(chunk)?;
        Ok(ChunkHeader { layout, chunk })
    }

    /// Payload bytes that follow the header: the layout's chunk size.
    pub fn chunk_len(&self) -> u64 {
        self.layout.chunk_size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_of_a_c2dn_object() {
        // 200 KiB + 1 byte coded (3, 1) with 32 KiB sub-chunks.
        let l = ObjectLayout::with_default_sub_chunk(200 * 1024 + 1, 3, 1).unwrap();
        assert_eq!(l.chunk_size(), 68267);
        assert_eq!(l.sub_chunks_per_chunk(), 3);
        assert_eq!(l.sub_chunk_range(3, 2).unwrap(), 65536..68267);
        assert_eq!(l.sub_chunk_len(0).unwrap(), 32768);
        assert_eq!(l.data_range(2).unwrap(), 136534..204801);
        assert_eq!(l.data_range_of(2, 2).unwrap(), 202070..204801);
        assert_eq!(l.data_range_of(2, 2).unwrap().end - 202070, 2731);
        assert_eq!(l.stored_bytes(), 4 * 68267);
        assert!(matches!(
            l.data_range(3),
            Err(CodecError::NotADataChunk { chunk: 3 })
        ));
        assert!(matches!(
            l.sub_chunk_range(4, 0),
            Err(CodecError::NoSuchChunk { .. })
        ));
        assert!(matches!(
            l.sub_chunk_range(0, 3),
            Err(CodecError::NoSuchSubChunk { .. })
        ));
    }

    #[test]
    fn padding_only_chunks() {
        // 4 bytes over K = 3: chunks of 2, chunk 2 is all padding.
        let l = ObjectLayout::new(4, 3, 2, 1).unwrap();
        assert_eq!(l.chunk_size(), 2);
        assert_eq!(l.data_range(1).unwrap(), 2..4);
        assert_eq!(l.data_range(2).unwrap(), 4..4);
        assert_eq!(l.data_range_of(2, 1).unwrap(), 4..4);
        let empty = ObjectLayout::new(0, 3, 1, 7).unwrap();
        assert_eq!((empty.chunk_size(), empty.sub_chunks_per_chunk()), (0, 0));
        assert_eq!(empty.sub_chunks_for_range(0..0).unwrap().count(), 0);
        assert!(empty.sub_chunk_range(0, 0).is_err());
    }

    #[test]
    fn spans_tile_the_range() {
        let l = ObjectLayout::new(1000, 3, 1, 100).unwrap(); // chunk 334: subs 100,100,100,34
        let spans: Vec<_> = l.sub_chunks_for_range(290..440).unwrap().collect();
        assert_eq!(
            spans,
            vec![
                SubChunkSpan {
                    chunk: 0,
                    sub_chunk: 2,
                    range: 90..100,
                    object_offset: 290
                },
                SubChunkSpan {
                    chunk: 0,
                    sub_chunk: 3,
                    range: 0..34,
                    object_offset: 300
                },
                SubChunkSpan {
                    chunk: 1,
                    sub_chunk: 0,
                    range: 0..100,
                    object_offset: 334
                },
                SubChunkSpan {
                    chunk: 1,
                    sub_chunk: 1,
                    range: 0..6,
                    object_offset: 434
                },
            ]
        );
        assert_eq!(spans[1].object_range(), 300..334);
        let present = [false, true, true, true];
        assert_eq!(l.stripes_to_decode(290..440, &present).unwrap(), vec![2, 3]);
        assert_eq!(
            l.stripes_to_decode(334..440, &present).unwrap(),
            Vec::<u64>::new()
        );
        assert!(matches!(
            l.stripes_to_decode(0..10, &[false, true, false, true]),
            Err(CodecError::TooFewShards {
                present: 2,
                needed: 3
            })
        ));
        assert!(matches!(
            l.sub_chunks_for_range(10..1001),
            Err(CodecError::RangeOutOfBounds { .. })
        ));
        #[allow(clippy::reversed_empty_ranges)]
        let backwards = 10..5;
        assert!(l.sub_chunks_for_range(backwards).is_err());
    }

    #[test]
    fn bad_layouts_are_errors() {
        assert_eq!(
            ObjectLayout::new(10, 3, 1, 0),
            Err(CodecError::ZeroSubChunk)
        );
        assert!(matches!(
            ObjectLayout::new(10, 0, 1, 1),
            Err(CodecError::InvalidShape { .. })
        ));
        assert!(matches!(
            ObjectLayout::new(10, 200, 57, 1),
            Err(CodecError::InvalidShape { .. })
        ));
        assert!(matches!(
            ObjectLayout::new(u64::MAX, 3, 1, 1),
            Err(CodecError::TooLarge { .. })
        ));
        assert!(ObjectLayout::new(u64::MAX, 1, 0, 1).is_ok());
    }

    #[test]
    fn header_round_trip_and_rejections() {
        let l = ObjectLayout::new(300 * 1024, 10, 4, 4096).unwrap();
        let h = ChunkHeader::new(l, 12).unwrap();
        let b = h.to_bytes();
        assert_eq!(&b[..4], b"ECRS");
        assert_eq!(ChunkHeader::parse(&b).unwrap(), h);
        assert_eq!(h.chunk_len(), 30720);
        assert!(ChunkHeader::new(l, 14).is_err());
        assert!(ChunkHeader::new(ObjectLayout::new(1, 1, 0, 1 << 32).unwrap(), 0).is_err());
        assert!(ChunkHeader::parse(&b[..23]).is_err());
        let mut bad = b;
        bad[0] = b'X';
        assert!(ChunkHeader::parse(&bad).is_err());
        let mut bad = b;
        bad[10] = 14; // chunk 14 of 14
        assert!(matches!(
            ChunkHeader::parse(&bad),
            Err(CodecError::NoSuchChunk { .. })
        ));
        let mut bad = b;
        bad[12..16].fill(0);
        assert_eq!(ChunkHeader::parse(&bad), Err(CodecError::ZeroSubChunk));
        let mut bad = b;
        bad[6] = 0;
        assert!(matches!(
            ChunkHeader::parse(&bad),
            Err(CodecError::InvalidShape { .. })
        ));
    }
}
