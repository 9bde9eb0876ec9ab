//! Whole objects, stripes and byte ranges to and from chunks (FORMAT.md §3–§5, version 2),
//! stripe by stripe.
//!
//! Copies are kept to what the output needs: encoding reads the data sub-chunks of full stripes
//! straight out of the object (only a short last stripe is padded in a scratch buffer), and
//! decoding rebuilds a missing data sub-chunk straight into the output when the output wants
//! all of it.

use std::ops::Range;

use crate::{check_count, Codec, CodecError, ObjectLayout, Shard, SubChunkSpan};

fn check_codec(codec: &dyn Codec, layout: &ObjectLayout) -> Result<(), CodecError> {
    if codec.data_shards() != layout.k() || codec.parity_shards() != layout.p() {
        return Err(CodecError::ShapeMismatch {
            codec_k: codec.data_shards(),
            codec_p: codec.parity_shards(),
            layout_k: layout.k(),
            layout_p: layout.p(),
        });
    }
    Ok(())
}

fn to_usize(what: &'static str, size: u64) -> Result<usize, CodecError> {
    usize::try_from(size).map_err(|_| CodecError::TooLarge { what, size })
}

fn as_range(r: Range<u64>) -> Range<usize> {
    // Callers have checked that the chunk / object size fits in usize.
    r.start as usize..r.end as usize
}

fn check_object(layout: &ObjectLayout, object: &[u8]) -> Result<(), CodecError> {
    if object.len() as u64 != layout.size() {
        return Err(CodecError::ObjectLength {
            expected: layout.size(),
            got: object.len() as u64,
        });
    }
    Ok(())
}

fn check_chunk_lens(
    layout: &ObjectLayout,
    first_index: usize,
    lens: impl Iterator<Item = Option<usize>>,
) -> Result<(), CodecError> {
    let expected = to_usize("chunk", layout.chunk_size())?;
    for (i, len) in lens.enumerate() {
        if let Some(got) = len {
            if got != expected {
                return Err(CodecError::ShardLength {
                    index: first_index + i,
                    expected,
                    got,
                });
            }
        }
    }
    Ok(())
}

/// Computes the P parity chunks of `object` into `parity` (P buffers of
/// [`ObjectLayout::chunk_size`] bytes), stripe by stripe. The data chunks are never
/// materialized: a full stripe's data sub-chunks are read straight out of the object; only the
/// last stripe, when short, is copied and zero-padded (K·t bytes).
pub fn encode_parity_into(
    codec: &dyn Codec,
    layout: &ObjectLayout,
    object: &[u8],
    parity: &mut [&mut [u8]],
) -> Result<(), CodecError> {
    check_codec(codec, layout)?;
    check_object(layout, object)?;
    check_count("parity chunks", layout.p(), parity.len())?;
    check_chunk_lens(layout, layout.k(), parity.iter().map(|p| Some(p.len())))?;
    to_usize("chunk", layout.chunk_size())?;
    to_usize("stripe", layout.stripe_width())?;
    if layout.p() == 0 {
        return Ok(());
    }
    let k = layout.k();
    let mut padded: Vec<u8> = Vec::new();
    let mut rest: Vec<&mut [u8]> = parity.iter_mut().map(|p| &mut **p).collect();
    for j in 0..layout.stripe_count() {
        let len = layout.sub_chunk_len(j)? as usize;
        let stripe = as_range(layout.stripe_range(j)?);
        let data_bytes: &[u8] = if stripe.len() == k * len {
            &object[stripe]
        } else {
            padded.clear();
            padded.extend_from_slice(&object[stripe]);
            padded.resize(k * len, 0);
            &padded
        };
        let data: Vec<&[u8]> = data_bytes.chunks_exact(len).collect();
        let mut outs: Vec<&mut [u8]> = Vec::with_capacity(rest.len());
        for tail in rest.iter_mut() {
            let (head, after) = std::mem::take(tail).split_at_mut(len);
            *tail = after;
            outs.push(head);
        }
        codec.encode(&data, &mut outs)?;
    }
    Ok(())
}

/// Writes all K + P chunks of `object` into `chunks` (K + P buffers of
/// [`ObjectLayout::chunk_size`] bytes): data sub-chunks copied from the object stripe by stripe
/// and zero-padded, parity computed from the object.
pub fn encode_object_into(
    codec: &dyn Codec,
    layout: &ObjectLayout,
    object: &[u8],
    chunks: &mut [&mut [u8]],
) -> Result<(), CodecError> {
    check_codec(codec, layout)?;
    check_object(layout, object)?;
    check_count("chunks", layout.total_chunks(), chunks.len())?;
    check_chunk_lens(layout, 0, chunks.iter().map(|c| Some(c.len())))?;
    let (data, parity) = chunks.split_at_mut(layout.k());
    for j in 0..layout.stripe_count() {
        for (i, chunk) in data.iter_mut().enumerate() {
            let dst = as_range(layout.sub_chunk_range(i, j)?);
            let src = as_range(layout.data_range_of(i, j)?);
            let (bytes, pad) = chunk[dst].split_at_mut(src.len());
            bytes.copy_from_slice(&object[src]);
            pad.fill(0);
        }
    }
    encode_parity_into(codec, layout, object, parity)
}
/// The K + P chunks of `object`: data chunks 0 .. K−1, then parity chunks.
pub fn encode_object(
    codec: &dyn Codec,
    layout: &ObjectLayout,
    object: &[u8],
) -> Result<Vec<Vec<u8>>, CodecError> {
    check_codec(codec, layout)?;
    check_object(layout, object)?;
    let c = to_usize("chunk", layout.chunk_size())?;
    let mut chunks = vec![vec![0u8; c]; layout.total_chunks()];
    let mut refs: Vec<&mut [u8]> = chunks.iter_mut().map(Vec::as_mut_slice).collect();
    encode_object_into(codec, layout, object, &mut refs)?;
    Ok(chunks)
}

/// Decodes object bytes `range` into `out` (exactly the range's length) from sub-chunks:
/// `sub_chunk(chunk, j)` returns sub-chunk j of chunk `chunk` (exactly
/// [`ObjectLayout::sub_chunk_len`]`(j)` bytes) or `None` if it is unavailable. Present data
/// sub-chunks are copied; each stripe with a needed missing data sub-chunk is decoded once, from
/// K sub-chunks of that stripe (`sub_chunk` is asked for the stripe's other chunks in index
/// order, data first, until K are found). On error `out` holds unspecified bytes.
pub fn decode_range_with<'a, F>(
    codec: &dyn Codec,
    layout: &ObjectLayout,
    range: Range<u64>,
    out: &mut [u8],
    mut sub_chunk: F,
) -> Result<(), CodecError>
where
    F: FnMut(usize, u64) -> Option<&'a [u8]>,
{
    check_codec(codec, layout)?;
    layout.check_range(&range)?;
    to_usize("chunk", layout.chunk_size())?;
    to_usize("object", layout.size())?;
    if out.len() as u64 != range.end - range.start {
        return Err(CodecError::OutputLength {
            expected: range.end - range.start,
            got: out.len() as u64,
        });
    }
    let mut fetch = |chunk: usize, j: u64| -> Result<Option<&'a [u8]>, CodecError> {
        match sub_chunk(chunk, j) {
            None => Ok(None),
            Some(b) => {
                let expected = layout.sub_chunk_len(j)? as usize;
                if b.len() != expected {
                    return Err(CodecError::ShardLength {
                        index: chunk,
                        expected,
                        got: b.len(),
                    });
                }
                Ok(Some(b))
            }
        }
    };
    let base = range.start;
    let mut missing: Vec<SubChunkSpan> = Vec::new();
    for span in layout.sub_chunks_for_range(range)? {
        match fetch(span.chunk, span.sub_chunk)? {
            Some(b) => {
                let dst =
                    as_range(span.object_range().start - base..span.object_range().end - base);
                out[dst].copy_from_slice(&b[as_range(span.range.clone())]);
            }
            None => missing.push(span),
        }
    }
    missing.sort_by_key(|s| (s.sub_chunk, s.chunk));
    let mut scratch: Vec<Vec<u8>> = Vec::new();
    for group in missing.chunk_by(|a, b| a.sub_chunk == b.sub_chunk) {
        let j = group[0].sub_chunk;
        let len = layout.sub_chunk_len(j)? as usize;
        // A span that wants its whole sub-chunk is rebuilt straight into `out`.
        let direct = |s: &SubChunkSpan| (s.range.end - s.range.start) as usize == len;
        let n_scratch = group.iter().filter(|s| !direct(s)).count();
        if scratch.len() < n_scratch {
            scratch.resize_with(n_scratch, Vec::new);
        }
        for b in &mut scratch[..n_scratch] {
            b.resize(len, 0);
        }
        {
            let mut slots: Vec<Shard<'_>> =
                (0..layout.total_chunks()).map(|_| Shard::Absent).collect();
            let mut out_rest: &mut [u8] = &mut *out;
            let mut out_pos = base;
            for s in group.iter().filter(|s| direct(s)) {
                let skip = (s.object_offset - out_pos) as usize;
                let (_, after) = std::mem::take(&mut out_rest).split_at_mut(skip);
                let (head, after) = after.split_at_mut(len);
                out_rest = after;
                out_pos = s.object_offset + len as u64;
                slots[s.chunk] = Shard::Rebuild(head);
            }
            for (s, b) in group.iter().filter(|s| !direct(s)).zip(scratch.iter_mut()) {
                slots[s.chunk] = Shard::Rebuild(&mut b[..len]);
            }
            // Any K present sub-chunks of the stripe will do: ask for no more than that.
            let mut have = 0;
            for (c, slot) in slots.iter_mut().enumerate() {
                if have == layout.k() {
                    break;
                }
                if matches!(slot, Shard::Absent) {
                    if let Some(b) = fetch(c, j)? {
                        *slot = Shard::Present(b);
                        have += 1;
                    }
                }
            }
            codec.reconstruct_shards(&mut slots)?;
        }
        for (s, b) in group.iter().filter(|s| !direct(s)).zip(&scratch) {
            let dst = as_range(s.object_range().start - base..s.object_range().end - base);
            out[dst].copy_from_slice(&b[as_range(s.range.clone())]);
        }
    }
    Ok(())
}

/// Decodes object bytes `range` into `out` from whole chunks: `chunks[i]` is chunk i
/// ([`ObjectLayout::chunk_size`] bytes) or `None` if unavailable; K + P entries. Only the stripes
/// the range touches in missing data chunks are decoded.
pub fn decode_range_into(
    codec: &dyn Codec,
    layout: &ObjectLayout,
    chunks: &[Option<&[u8]>],
    range: Range<u64>,
    out: &mut [u8],
) -> Result<(), CodecError> {
    check_count("chunks", layout.total_chunks(), chunks.len())?;
    check_chunk_lens(layout, 0, chunks.iter().map(|c| c.map(<[u8]>::len)))?;
    decode_range_with(codec, layout, range, out, |chunk, j| {
        let r = layout.sub_chunk_range(chunk, j).ok()?;
        chunks[chunk].map(|b| &b[as_range(r)])
    })
}

/// [`decode_range_into`] into a new buffer.
pub fn decode_range(
    codec: &dyn Codec,
    layout: &ObjectLayout,
    chunks: &[Option<&[u8]>],
    range: Range<u64>,
) -> Result<Vec<u8>, CodecError> {
    layout.check_range(&range)?;
    let mut out = vec![0u8; to_usize("byte range", range.end - range.start)?];
    decode_range_into(codec, layout, chunks, range, &mut out)?;
    Ok(out)
}

/// Decodes the whole object into `out` (exactly `size` bytes) from any K of its K + P chunks.
pub fn decode_object_into(
    codec: &dyn Codec,
    layout: &ObjectLayout,
    chunks: &[Option<&[u8]>],
    out: &mut [u8],
) -> Result<(), CodecError> {
    decode_range_into(codec, layout, chunks, 0..layout.size(), out)
}

/// The whole object from any K of its K + P chunks.
pub fn decode_object(
    codec: &dyn Codec,
    layout: &ObjectLayout,
    chunks: &[Option<&[u8]>],
) -> Result<Vec<u8>, CodecError> {
    decode_range(codec, layout, chunks, 0..layout.size())
}

/// Decodes stripe `stripe` into `out`: the stripe's object bytes in order
/// ([`ObjectLayout::stripe_range`]; the last stripe is shorter, its padding is dropped).
/// `shards` are sub-chunks of this stripe with their chunk indices (0 … K+P−1, any order, each
/// [`ObjectLayout::sub_chunk_len`]`(stripe)` bytes). When every data sub-chunk that carries
/// object bytes is given, they are copied and nothing is decoded; otherwise the missing ones
/// are rebuilt from K of the given sub-chunks (an error if fewer than K are given). On error
/// `out` holds unspecified bytes.
pub fn decode_stripe_into(
    codec: &dyn Codec,
    layout: &ObjectLayout,
    stripe: u64,
    shards: &[(usize, &[u8])],
    out: &mut [u8],
) -> Result<(), CodecError> {
    check_codec(codec, layout)?;
    let range = layout.stripe_range(stripe)?;
    let len = to_usize("sub-chunk", layout.sub_chunk_len(stripe)?)?;
    let mut slots: Vec<Option<&[u8]>> = vec![None; layout.total_chunks()];
    for &(chunk, bytes) in shards {
        layout.check_chunk(chunk)?;
        if bytes.len() != len {
            return Err(CodecError::ShardLength {
                index: chunk,
                expected: len,
                got: bytes.len(),
            });
        }
        if slots[chunk].replace(bytes).is_some() {
            return Err(CodecError::DuplicateShard { chunk });
        }
    }
    decode_range_with(codec, layout, range, out, |chunk, _| slots[chunk])
}

/// [`decode_stripe_into`] into a new buffer of the stripe's object bytes.
pub fn decode_stripe(
    codec: &dyn Codec,
    layout: &ObjectLayout,
    stripe: u64,
    shards: &[(usize, &[u8])],
) -> Result<Vec<u8>, CodecError> {
    let r = layout.stripe_range(stripe)?;
    let mut out = vec![0u8; to_usize("stripe", r.end - r.start)?];
    decode_stripe_into(codec, layout, stripe, shards, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ReedSolomonCodec;

    fn object(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 31 + i / 251) as u8).collect()
    }

    #[test]
    fn round_trip_with_padding_chunks() {
        let codec = ReedSolomonCodec::new(3, 2).unwrap();
        for size in [0usize, 1, 2, 4, 5, 6, 7, 100, 301] {
            let layout = ObjectLayout::new(size as u64, 3, 2, 4).unwrap();
            let obj = object(size);
            let chunks = encode_object(&codec, &layout, &obj).unwrap();
            let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
            assert!(codec.verify(&refs).unwrap());
            for lost in [[0, 1], [1, 2], [0, 4], [2, 3]] {
                let avail: Vec<Option<&[u8]>> = chunks
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (!lost.contains(&i)).then_some(c.as_slice()))
                    .collect();
                assert_eq!(
                    decode_object(&codec, &layout, &avail).unwrap(),
                    obj,
                    "{size} {lost:?}"
                );
                if size > 3 {
                    let r = 1..size as u64 - 1;
                    assert_eq!(
                        decode_range(&codec, &layout, &avail, r.clone()).unwrap(),
                        obj[1..size - 1]
                    );
                }
            }
        }
    }

    /// FORMAT.md §2: (K, P + e) extends (K, P); the shards a code with fewer parities stored
    /// are the first shards of one with more, so parities can be added later.
    #[test]
    fn more_parities_extend_fewer() {
        let obj = object(10_000);
        for (k, p, more) in [(10, 1, 4), (4, 2, 3), (2, 0, 2), (3, 1, 1)] {
            let small = ObjectLayout::new(obj.len() as u64, k, p, 64).unwrap();
            let large = ObjectLayout::new(obj.len() as u64, k, p + more, 64).unwrap();
            let a = encode_object(&ReedSolomonCodec::new(k, p).unwrap(), &small, &obj).unwrap();
            let b =
                encode_object(&ReedSolomonCodec::new(k, p + more).unwrap(), &large, &obj).unwrap();
            assert_eq!(&b[..k + p], &a[..], "({k}, {p}) + {more}");
        }
    }

    #[test]
    fn inconsistent_inputs_are_errors() {
        let codec = ReedSolomonCodec::new(3, 1).unwrap();
        let layout = ObjectLayout::new(10, 3, 1, 2).unwrap();
        let obj = object(10);
        let chunks = encode_object(&codec, &layout, &obj).unwrap();
        assert!(matches!(
            encode_object(&codec, &layout, &obj[..9]),
            Err(CodecError::ObjectLength {
                expected: 10,
                got: 9
            })
        ));
        let other = ReedSolomonCodec::new(3, 2).unwrap();
        assert!(matches!(
            encode_object(&other, &layout, &obj),
            Err(CodecError::ShapeMismatch { .. })
        ));
        let short = &chunks[1][..3];
        let avail = [
            None,
            Some(short),
            Some(&chunks[2][..]),
            Some(&chunks[3][..]),
        ];
        assert!(matches!(
            decode_object(&codec, &layout, &avail),
            Err(CodecError::ShardLength {
                index: 1,
                expected: 4,
                got: 3
            })
        ));
        let avail = [None, None, Some(&chunks[2][..]), Some(&chunks[3][..])];
        assert!(matches!(
            decode_object(&codec, &layout, &avail),
            Err(CodecError::TooFewShards {
                present: 2,
                needed: 3
            })
        ));
        // w = 6: bytes 2..4 and 8..10 are chunk 1's, so chunks 0 and 2 missing is fine there.
        let avail2 = [None, Some(&chunks[1][..]), None, Some(&chunks[3][..])];
        assert_eq!(
            decode_range(&codec, &layout, &avail2, 2..4).unwrap(),
            obj[2..4]
        );
        assert_eq!(
            decode_range(&codec, &layout, &avail2, 8..10).unwrap(),
            obj[8..10]
        );
        assert!(matches!(
            decode_range(&codec, &layout, &avail2, 3..5),
            Err(CodecError::TooFewShards { .. })
        ));
        assert!(matches!(
            decode_range(&codec, &layout, &avail[..3], 4..8),
            Err(CodecError::Count { .. })
        ));
        assert!(matches!(
            decode_range(&codec, &layout, &avail, 4..11),
            Err(CodecError::RangeOutOfBounds { .. })
        ));
        let mut out = [0u8; 3];
        assert!(matches!(
            decode_range_into(&codec, &layout, &avail, 4..8, &mut out),
            Err(CodecError::OutputLength { .. })
        ));
        let res = decode_range_with(&codec, &layout, 0..10, &mut [0u8; 10], |_, _| {
            Some(&obj[..1])
        });
        assert!(matches!(res, Err(CodecError::ShardLength { .. })));
    }

    #[test]
    fn stripe_decode_checks_its_inputs() {
        let codec = ReedSolomonCodec::new(3, 2).unwrap();
        // 11 bytes, s = 3: stripe 0 = bytes 0..9 (sub-chunks of 3), stripe 1 = 9..11 (t = 1,
        // data sub-chunk 2 is padding only).
        let layout = ObjectLayout::new(11, 3, 2, 3).unwrap();
        let obj = object(11);
        let chunks = encode_object(&codec, &layout, &obj).unwrap();
        let sub = |c: usize, j: u64| {
            let r = layout.sub_chunk_range(c, j).unwrap();
            &chunks[c][r.start as usize..r.end as usize]
        };
        let all: Vec<(usize, &[u8])> = (0..5).map(|c| (c, sub(c, 0))).collect();
        assert_eq!(decode_stripe(&codec, &layout, 0, &all).unwrap(), obj[..9]);
        let some = [(4, sub(4, 0)), (1, sub(1, 0)), (3, sub(3, 0))];
        assert_eq!(decode_stripe(&codec, &layout, 0, &some).unwrap(), obj[..9]);
        // The last stripe needs only the data sub-chunks that carry object bytes.
        let last = [(1, sub(1, 1)), (0, sub(0, 1))];
        assert_eq!(decode_stripe(&codec, &layout, 1, &last).unwrap(), obj[9..]);
        let last = [(2, sub(2, 1)), (3, sub(3, 1)), (1, sub(1, 1))];
        assert_eq!(decode_stripe(&codec, &layout, 1, &last).unwrap(), obj[9..]);
        assert!(matches!(
            decode_stripe(&codec, &layout, 0, &some[..2]),
            Err(CodecError::TooFewShards {
                present: 2,
                needed: 3
            })
        ));
        assert!(matches!(
            decode_stripe(&codec, &layout, 2, &some),
            Err(CodecError::NoSuchStripe { index: 2, count: 2 })
        ));
        assert!(matches!(
            decode_stripe(&codec, &layout, 0, &[(5, sub(4, 0))]),
            Err(CodecError::NoSuchChunk { chunk: 5, total: 5 })
        ));
        assert!(matches!(
            decode_stripe(&codec, &layout, 1, &[(0, sub(0, 0))]),
            Err(CodecError::ShardLength {
                index: 0,
                expected: 1,
                got: 3
            })
        ));
        assert!(matches!(
            decode_stripe(&codec, &layout, 0, &[(0, sub(0, 0)), (0, sub(0, 0))]),
            Err(CodecError::DuplicateShard { chunk: 0 })
        ));
        let mut out = [0u8; 8];
        assert!(matches!(
            decode_stripe_into(&codec, &layout, 0, &all, &mut out),
            Err(CodecError::OutputLength {
                expected: 9,
                got: 8
            })
        ));
        let other = ReedSolomonCodec::new(3, 1).unwrap();
        assert!(matches!(
            decode_stripe(&other, &layout, 0, &all),
            Err(CodecError::ShapeMismatch { .. })
        ));
    }
}
