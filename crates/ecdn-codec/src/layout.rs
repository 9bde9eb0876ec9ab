//! The geometry of one coded object (FORMAT.md §3–§5, format version 2, stripe-major): stripes,
//! chunks, sub-chunks, which object bytes each data sub-chunk carries and which sub-chunks a
//! byte range needs.

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
/// The format version this crate writes and reads (FORMAT.md's title, [`ChunkHeader`] byte 4).
pub const FORMAT_VERSION: u8 = 2;

/// How an object of `size` bytes is coded (K, P) with sub-chunks of `s = sub_chunk` bytes
/// (FORMAT.md §3, version 2 — stripe-major).
///
/// * stripe width `w = K·s` object bytes; `n = ceil(size / w)` stripes (none for size 0).
/// * full stripe j < n−1: data sub-chunk (i, j) is object bytes `[j·w + i·s, j·w + (i+1)·s)`.
/// * last stripe n−1 holds `r = size − (n−1)·w` bytes (1 ≤ r ≤ w) in sub-chunks of
///   `t = ceil(r / K)` bytes: data sub-chunk (i, n−1) is object bytes
///   `[(n−1)·w + i·t, min((n−1)·w + (i+1)·t, size))`, zero-padded to t bytes.
/// * every chunk (data chunk i < K, parity chunk K + r) is `c = (n−1)·s + t = ceil(size / K)`
///   bytes; its sub-chunk j sits at chunk offset `j·s`. Stripe j is sub-chunk j of all K + P
///   chunks; its parity is coded from its data alone.
///
/// So the object reads stripe by stripe, and within a stripe data chunk 0, 1, … K−1: a
/// sequential read pulls from all K data chunks at once, and a stripe can be encoded as soon as
/// its w bytes are known ([`crate::StripeEncoder`]). Reader and writer must agree on s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ObjectLayout {
    size: u64,
    k: usize,
    p: usize,
    sub_chunk: u64,
}

impl ObjectLayout {
    /// Checks the shape (K ≥ 1, K + P ≤ 256), the sub-chunk size (≥ 1) and that the stripe
    /// width K·s and the coded size (K + P)·c fit 64 bits.
    pub fn new(size: u64, k: usize, p: usize, sub_chunk: u64) -> Result<Self, CodecError> {
        gf::check_shape(k, p)?;
        if sub_chunk == 0 {
            return Err(CodecError::ZeroSubChunk);
        }
        if sub_chunk.checked_mul(k as u64).is_none() {
            return Err(CodecError::TooLarge {
                what: "stripe (K × sub-chunk size)",
                size: sub_chunk,
            });
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

    /// Nominal sub-chunk size s (every sub-chunk but the last stripe's).
    pub fn sub_chunk(&self) -> u64 {
        self.sub_chunk
    }

    /// Object bytes per full stripe: w = K·s.
    pub fn stripe_width(&self) -> u64 {
        self.sub_chunk * self.k as u64
    }

    /// Number of stripes n = ceil(size / w) (= sub-chunks per chunk; 0 for an empty object).
    pub fn stripe_count(&self) -> u64 {
        self.size.div_ceil(self.stripe_width())
    }

    /// Bytes of every chunk, data or parity: (n−1)·s + t = ceil(size / K).
    pub fn chunk_size(&self) -> u64 {
        self.size.div_ceil(self.k as u64)
    }

    /// Bytes stored for the whole object: (K + P) · chunk_size.
    pub fn stored_bytes(&self) -> u64 {
        self.chunk_size() * self.total_chunks() as u64
    }

    pub(crate) fn check_chunk(&self, chunk: usize) -> Result<(), CodecError> {
        if chunk >= self.total_chunks() {
            return Err(CodecError::NoSuchChunk {
                chunk,
                total: self.total_chunks(),
            });
        }
        Ok(())
    }

    fn check_data_chunk(&self, chunk: usize) -> Result<(), CodecError> {
        self.check_chunk(chunk)?;
        if chunk >= self.k {
            return Err(CodecError::NotADataChunk { chunk });
        }
        Ok(())
    }

    pub(crate) fn check_stripe(&self, j: u64) -> Result<(), CodecError> {
        let count = self.stripe_count();
        if j >= count {
            return Err(CodecError::NoSuchStripe { index: j, count });
        }
        Ok(())
    }

    /// Sub-chunk length of stripe `j`, unchecked: s, or t for the last stripe.
    fn len_of(&self, j: u64) -> u64 {
        let w = self.stripe_width();
        let start = j * w;
        if self.size - start >= w {
            self.sub_chunk
        } else {
            (self.size - start).div_ceil(self.k as u64)
        }
    }

    /// Length of the sub-chunks of stripe `j` (the same in all K + P chunks): s, or
    /// t = ceil(r / K) for the last stripe of r bytes.
    pub fn sub_chunk_len(&self, j: u64) -> Result<u64, CodecError> {
        self.check_stripe(j)?;
        Ok(self.len_of(j))
    }

    /// Bytes `[j·s, j·s + sub_chunk_len(j))` of chunk `chunk` that form its sub-chunk `j` (the
    /// same offsets in every chunk of the object).
    pub fn sub_chunk_range(&self, chunk: usize, j: u64) -> Result<Range<u64>, CodecError> {
        self.check_chunk(chunk)?;
        self.check_stripe(j)?;
        let start = j * self.sub_chunk;
        Ok(start..start + self.len_of(j))
    }

    /// Object bytes of stripe `j`: `[j·w, min((j+1)·w, size))`. Its data sub-chunks, in chunk
    /// order, are these bytes followed (last stripe only) by K·t − r zero bytes.
    pub fn stripe_range(&self, j: u64) -> Result<Range<u64>, CodecError> {
        self.check_stripe(j)?;
        let w = self.stripe_width();
        let start = j * w;
        Ok(start..start + (self.size - start).min(w))
    }

    /// The stripes whose object bytes overlap `range` (empty for an empty range).
    pub fn stripes_for_range(&self, range: Range<u64>) -> Result<Range<u64>, CodecError> {
        self.check_range(&range)?;
        if range.is_empty() {
            return Ok(0..0);
        }
        let w = self.stripe_width();
        Ok(range.start / w..(range.end - 1) / w + 1)
    }

    /// Object bytes data sub-chunk (`chunk`, `j`) carries, without padding: its first
    /// `end − start` bytes are those object bytes, the rest are zeros (all of it, as an empty
    /// range at the object's end, for a sub-chunk past the end of the last stripe).
    pub fn data_range_of(&self, chunk: usize, j: u64) -> Result<Range<u64>, CodecError> {
        self.check_data_chunk(chunk)?;
        self.check_stripe(j)?;
        let len = self.len_of(j);
        let start = (j * self.stripe_width() + chunk as u64 * len).min(self.size);
        Ok(start..(start + len).min(self.size))
    }

    /// The object bytes data chunk `chunk` carries, in chunk order: one range per stripe (only
    /// non-empty ones), adjacent ranges merged (so K = 1 gives the whole object as one range).
    /// Concatenated, they are the chunk's bytes without padding; a node missing this data chunk
    /// can fetch it from the origin with one multi-range request for them.
    pub fn data_ranges(&self, chunk: usize) -> Result<Vec<Range<u64>>, CodecError> {
        self.check_data_chunk(chunk)?;
        let mut out: Vec<Range<u64>> = Vec::new();
        for j in 0..self.stripe_count() {
            let r = self.data_range_of(chunk, j)?;
            if r.is_empty() {
                continue;
            }
            match out.last_mut() {
                Some(last) if last.end == r.start => last.end = r.end,
                _ => out.push(r),
            }
        }
        Ok(out)
    }

    /// How many object bytes data chunk `chunk` carries, without padding: the total length of
    /// [`Self::data_ranges`], what a node missing the chunk fetches from the origin. Every full
    /// stripe gives s; the last stripe gives what is left of its r bytes after the chunks before
    /// it (t, fewer, or none).
    pub fn data_bytes(&self, chunk: usize) -> Result<u64, CodecError> {
        self.check_data_chunk(chunk)?;
        let n = self.stripe_count();
        if n == 0 {
            return Ok(0);
        }
        let last = self.data_range_of(chunk, n - 1)?;
        Ok((n - 1) * self.sub_chunk + (last.end - last.start))
    }

    /// Where object byte `offset` is stored: (data chunk, chunk offset).
    pub fn locate(&self, offset: u64) -> Result<(usize, u64), CodecError> {
        if offset >= self.size {
            return Err(CodecError::RangeOutOfBounds {
                start: offset,
                end: offset.saturating_add(1),
                size: self.size,
            });
        }
        let w = self.stripe_width();
        let j = offset / w;
        let u = offset - j * w;
        let len = self.len_of(j);
        let i = u / len;
        Ok((i as usize, j * self.sub_chunk + (u - i * len)))
    }

    /// The data sub-chunks covering object bytes `range`, in object order (stripe by stripe,
    /// data chunk 0 … K−1 within a stripe), each with the part of the sub-chunk that falls in
    /// the range.
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
        stripes.dedup(); // spans come stripe by stripe
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
    /// The needed bytes, as offsets within the sub-chunk (add `sub_chunk · s` for chunk
    /// offsets).
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
        let w = self.layout.stripe_width();
        let j = self.pos / w;
        let len = self.layout.len_of(j);
        let u = self.pos - j * w;
        let i = u / len;
        let sub_start = j * w + i * len; // object offset of the sub-chunk's first byte
        let span_end = self.end.min(sub_start + len);
        let span = SubChunkSpan {
            chunk: i as usize,
            sub_chunk: j,
            range: self.pos - sub_start..span_end - sub_start,
            object_offset: self.pos,
        };
        self.pos = span_end;
        Some(span)
    }
}

impl FusedIterator for SubChunkSpans {}

/// A self-describing 24-byte header a node may store or send with each chunk (FORMAT.md §6):
/// which object layout (size, K, P and the sub-chunk size s, which decides the chunk's bytes)
/// the chunk belongs to and its index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ChunkHeader {
    pub layout: ObjectLayout,
    /// Chunk index: data 0 .. K−1, parity K .. K+P−1.
    pub chunk: usize,
}

const MAGIC: [u8; 4] = *b"ECRS";

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
        b[4] = FORMAT_VERSION;
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
        match b[4] {
            FORMAT_VERSION => {}
            1 => {
                return Err(CodecError::Header(
                    "format version 1 (chunk-major) is not supported; this reader is version 2 \
                     (stripe-major): the chunk's bytes would be misread",
                ))
            }
            _ => return Err(CodecError::Header("unknown format version (expected 2)")),
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
        // 200 KiB + 1 byte coded (3, 1) with 32 KiB sub-chunks: w = 96 KiB, 3 stripes, the last
        // of r = 8193 bytes in sub-chunks of t = 2731.
        let l = ObjectLayout::with_default_sub_chunk(200 * 1024 + 1, 3, 1).unwrap();
        assert_eq!(l.stripe_width(), 98304);
        assert_eq!(l.stripe_count(), 3);
        assert_eq!(l.chunk_size(), 68267);
        assert_eq!(l.chunk_size(), 2 * 32768 + 2731);
        assert_eq!(l.sub_chunk_range(3, 2).unwrap(), 65536..68267);
        assert_eq!(l.sub_chunk_len(0).unwrap(), 32768);
        assert_eq!(l.sub_chunk_len(2).unwrap(), 2731);
        assert_eq!(l.stripe_range(1).unwrap(), 98304..196608);
        assert_eq!(l.stripe_range(2).unwrap(), 196608..204801);
        assert_eq!(l.data_range_of(0, 1).unwrap(), 98304..131072);
        assert_eq!(l.data_range_of(2, 2).unwrap(), 202070..204801);
        assert_eq!(
            l.data_ranges(1).unwrap(),
            vec![32768..65536, 131072..163840, 199339..202070]
        );
        assert_eq!(l.locate(202070).unwrap(), (2, 65536));
        assert_eq!(l.locate(98304 + 32768 + 5).unwrap(), (1, 32768 + 5));
        assert_eq!(l.stored_bytes(), 4 * 68267);
        assert_eq!(l.data_bytes(0).unwrap(), 68267);
        assert_eq!(l.data_bytes(2).unwrap(), 2 * 32768 + (204801 - 202070));
        assert!(matches!(
            l.data_bytes(3),
            Err(CodecError::NotADataChunk { chunk: 3 })
        ));
        assert_eq!(l.stripes_for_range(98303..98305).unwrap(), 0..2);
        assert_eq!(l.stripes_for_range(7..7).unwrap(), 0..0);
        assert!(matches!(
            l.data_range_of(3, 0),
            Err(CodecError::NotADataChunk { chunk: 3 })
        ));
        assert!(matches!(
            l.data_ranges(3),
            Err(CodecError::NotADataChunk { chunk: 3 })
        ));
        assert!(matches!(
            l.sub_chunk_range(4, 0),
            Err(CodecError::NoSuchChunk { .. })
        ));
        assert!(matches!(
            l.sub_chunk_range(0, 3),
            Err(CodecError::NoSuchStripe { index: 3, count: 3 })
        ));
        assert!(matches!(
            l.locate(204801),
            Err(CodecError::RangeOutOfBounds { .. })
        ));
    }

    #[test]
    fn padding_only_sub_chunks_and_k1() {
        // 4 bytes over K = 3, s = 1: stripe 0 = bytes 0..3, stripe 1 = byte 3 then two zeros.
        let l = ObjectLayout::new(4, 3, 2, 1).unwrap();
        assert_eq!((l.chunk_size(), l.stripe_count()), (2, 2));
        assert_eq!(l.data_range_of(0, 1).unwrap(), 3..4);
        assert_eq!(l.data_range_of(1, 1).unwrap(), 4..4);
        assert_eq!(l.data_range_of(2, 1).unwrap(), 4..4);
        assert_eq!(l.data_ranges(0).unwrap(), vec![0..1, 3..4]);
        assert_eq!(l.data_ranges(2).unwrap(), vec![2..3]);
        assert_eq!((0..3).map(|c| l.data_bytes(c).unwrap()).sum::<u64>(), 4);
        // 1 byte over K = 3: chunks 1 and 2 carry nothing.
        let l = ObjectLayout::new(1, 3, 1, 64).unwrap();
        assert_eq!((l.chunk_size(), l.sub_chunk_len(0).unwrap()), (1, 1));
        assert_eq!(l.data_ranges(1).unwrap(), Vec::<Range<u64>>::new());
        // K = 1: the chunk is the object; its per-stripe ranges merge into one.
        let l = ObjectLayout::new(10, 1, 1, 3).unwrap();
        assert_eq!(l.stripe_count(), 4);
        assert_eq!(l.data_ranges(0).unwrap(), vec![0..10]);
        let empty = ObjectLayout::new(0, 3, 1, 7).unwrap();
        assert_eq!((empty.chunk_size(), empty.stripe_count()), (0, 0));
        assert_eq!(empty.sub_chunks_for_range(0..0).unwrap().count(), 0);
        assert_eq!(empty.data_ranges(0).unwrap(), Vec::<Range<u64>>::new());
        assert_eq!(empty.data_bytes(0).unwrap(), 0);
        assert!(empty.sub_chunk_range(0, 0).is_err());
        assert!(empty.stripe_range(0).is_err());
    }

    #[test]
    fn spans_tile_the_range() {
        // w = 300, 4 stripes; the last (100 bytes) has sub-chunks of 34; chunks of 334.
        let l = ObjectLayout::new(1000, 3, 1, 100).unwrap();
        assert_eq!(l.chunk_size(), 334);
        let spans: Vec<_> = l.sub_chunks_for_range(290..440).unwrap().collect();
        assert_eq!(
            spans,
            vec![
                SubChunkSpan {
                    chunk: 2,
                    sub_chunk: 0,
                    range: 90..100,
                    object_offset: 290
                },
                SubChunkSpan {
                    chunk: 0,
                    sub_chunk: 1,
                    range: 0..100,
                    object_offset: 300
                },
                SubChunkSpan {
                    chunk: 1,
                    sub_chunk: 1,
                    range: 0..40,
                    object_offset: 400
                },
            ]
        );
        assert_eq!(spans[1].object_range(), 300..400);
        let tail: Vec<_> = l
            .sub_chunks_for_range(900..1000)
            .unwrap()
            .map(|s| (s.chunk, s.sub_chunk, s.range))
            .collect();
        assert_eq!(tail, vec![(0, 3, 0..34), (1, 3, 0..34), (2, 3, 0..32)]);
        let present = [false, true, true, true];
        assert_eq!(l.stripes_to_decode(290..440, &present).unwrap(), vec![1]);
        assert_eq!(
            l.stripes_to_decode(400..600, &present).unwrap(),
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
        assert!(matches!(
            ObjectLayout::new(10, 3, 1, u64::MAX / 2),
            Err(CodecError::TooLarge { .. })
        ));
        let huge = ObjectLayout::new(u64::MAX, 1, 0, 1).unwrap();
        assert_eq!(huge.stripe_count(), u64::MAX);
        assert_eq!(huge.sub_chunk_len(u64::MAX - 1).unwrap(), 1);
    }

    #[test]
    fn header_round_trip_and_rejections() {
        let l = ObjectLayout::new(300 * 1024, 10, 4, 4096).unwrap();
        let h = ChunkHeader::new(l, 12).unwrap();
        let b = h.to_bytes();
        assert_eq!(&b[..4], b"ECRS");
        assert_eq!(b[4], 2);
        assert_eq!(ChunkHeader::parse(&b).unwrap(), h);
        assert_eq!(h.chunk_len(), 30720);
        assert!(ChunkHeader::new(l, 14).is_err());
        assert!(ChunkHeader::new(ObjectLayout::new(1, 1, 0, 1 << 32).unwrap(), 0).is_err());
        assert!(ChunkHeader::parse(&b[..23]).is_err());
        let mut bad = b;
        bad[0] = b'X';
        assert!(ChunkHeader::parse(&bad).is_err());
        let mut v1 = b;
        v1[4] = 1;
        match ChunkHeader::parse(&v1) {
            Err(CodecError::Header(msg)) => assert!(msg.contains("version 1"), "{msg}"),
            other => panic!("version 1 accepted: {other:?}"),
        }
        let mut v3 = b;
        v3[4] = 3;
        assert!(matches!(
            ChunkHeader::parse(&v3),
            Err(CodecError::Header(_))
        ));
        let mut bad = b;
        bad[5] = 1;
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
