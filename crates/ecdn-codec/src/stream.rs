//! Encoding an object stripe by stripe as its bytes arrive (FORMAT.md §3, version 2), without
//! knowing its size in advance.
//!
//! Because the format is stripe-major, stripe j holds object bytes `[j·w, (j+1)·w)` (w = K·s)
//! and a full stripe is laid out the same whether or not more bytes follow: [`StripeEncoder`]
//! emits each stripe — its K data sub-chunks and P parity sub-chunks — as soon as its w bytes
//! have been pushed, and [`StripeEncoder::finish`] emits the short last stripe, if any, and the
//! object's [`ObjectLayout`]. It buffers at most one stripe (w bytes).

use std::sync::Arc;

use crate::{gf, Codec, CodecCache, CodecError, ObjectLayout};

/// Smallest buffer reserved for a stripe being filled (it grows by doubling up to w).
const MIN_RESERVE: usize = 64 * 1024;

/// One encoded stripe: sub-chunk `index` of each of the K + P chunks.
///
/// The K data sub-chunks are stored back to back in one buffer, which is exactly the stripe's
/// object bytes followed (last stripe only) by zero padding: [`Stripe::object_bytes`] is what a
/// client gets, without another copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stripe {
    index: u64,
    object_offset: u64,
    object_len: usize,
    sub_len: usize,
    k: usize,
    data: Vec<u8>,
    parity: Vec<Vec<u8>>,
}

impl Stripe {
    /// The stripe index j (= sub-chunk index in every chunk).
    pub fn index(&self) -> u64 {
        self.index
    }

    /// Object offset of the stripe's first byte (j·w).
    pub fn object_offset(&self) -> u64 {
        self.object_offset
    }

    /// The stripe's object bytes, in order, without padding (w bytes, fewer for the last stripe).
    pub fn object_bytes(&self) -> &[u8] {
        &self.data[..self.object_len]
    }

    /// Length of each of the K + P sub-chunks: s, or t for a short last stripe. The sub-chunk
    /// sits at chunk offset `index() · s`.
    pub fn sub_chunk_len(&self) -> usize {
        self.sub_len
    }

    /// K + P.
    pub fn total_shards(&self) -> usize {
        self.k + self.parity.len()
    }

    /// Sub-chunk of chunk `chunk` (data 0 … K−1, parity K … K+P−1); `None` past K + P.
    pub fn shard(&self, chunk: usize) -> Option<&[u8]> {
        if chunk < self.k {
            let start = chunk * self.sub_len;
            Some(&self.data[start..start + self.sub_len])
        } else {
            self.parity.get(chunk - self.k).map(Vec::as_slice)
        }
    }

    /// All K + P sub-chunks, data then parity.
    pub fn shards(&self) -> Vec<&[u8]> {
        (0..self.total_shards())
            .filter_map(|c| self.shard(c))
            .collect()
    }

    /// The K data sub-chunks back to back (K · sub_chunk_len bytes: the object bytes, then
    /// padding).
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// The P parity sub-chunks.
    pub fn parity(&self) -> &[Vec<u8>] {
        &self.parity
    }

    /// The data buffer (as [`Stripe::data`]) and the parity buffers, to hand on without copying.
    pub fn into_parts(self) -> (Vec<u8>, Vec<Vec<u8>>) {
        (self.data, self.parity)
    }
}

/// Encodes an object pushed in arbitrary pieces into stripes, emitting each stripe as soon as
/// it is complete; the object's size need not be known before [`StripeEncoder::finish`].
///
/// The stripes it emits are byte for byte those of [`crate::encode_object`] for the final
/// layout: sub-chunk j of chunk c is `stripe_j.shard(c)`.
pub struct StripeEncoder {
    codec: Arc<dyn Codec>,
    k: usize,
    p: usize,
    sub_chunk: u64,
    sub_len: usize,
    width: usize,
    buf: Vec<u8>,
    next_index: u64,
    total: u64,
}

impl std::fmt::Debug for StripeEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StripeEncoder")
            .field("k", &self.k)
            .field("p", &self.p)
            .field("sub_chunk", &self.sub_chunk)
            .field("buffered", &self.buf.len())
            .field("stripes", &self.next_index)
            .field("total", &self.total)
            .finish()
    }
}

impl StripeEncoder {
    /// An encoder for (K, P) with sub-chunks of `sub_chunk` bytes, coding with `codec` (which
    /// must be a (K, P) codec, e.g. from [`CodecCache::get`]).
    pub fn new(
        k: usize,
        p: usize,
        sub_chunk: u64,
        codec: Arc<dyn Codec>,
    ) -> Result<Self, CodecError> {
        gf::check_shape(k, p)?;
        if codec.data_shards() != k || codec.parity_shards() != p {
            return Err(CodecError::ShapeMismatch {
                codec_k: codec.data_shards(),
                codec_p: codec.parity_shards(),
                layout_k: k,
                layout_p: p,
            });
        }
        // Validates s ≥ 1 and that K·s fits 64 bits.
        let layout = ObjectLayout::new(0, k, p, sub_chunk)?;
        let too_large = |size| CodecError::TooLarge {
            what: "stripe buffer (K × sub-chunk size)",
            size,
        };
        let width =
            usize::try_from(layout.stripe_width()).map_err(|_| too_large(layout.stripe_width()))?;
        let sub_len = usize::try_from(sub_chunk).map_err(|_| too_large(sub_chunk))?;
        Ok(StripeEncoder {
            codec,
            k,
            p,
            sub_chunk,
            sub_len,
            width,
            buf: Vec::new(),
            next_index: 0,
            total: 0,
        })
    }

    /// [`StripeEncoder::new`] with the codec for (K, P) from `cache`.
    pub fn from_cache(
        cache: &CodecCache,
        k: usize,
        p: usize,
        sub_chunk: u64,
    ) -> Result<Self, CodecError> {
        Self::new(k, p, sub_chunk, cache.get(k, p)?)
    }

    /// Object bytes pushed so far.
    pub fn bytes_pushed(&self) -> u64 {
        self.total
    }

    /// Object bytes buffered for the stripe being filled (< w).
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Stripes emitted so far (= the index of the next one).
    pub fn stripes_emitted(&self) -> u64 {
        self.next_index
    }

    /// Stripe width w = K·s in object bytes.
    pub fn stripe_width(&self) -> usize {
        self.width
    }

    /// Appends `bytes` to the object and returns the stripes completed by them, in order (none
    /// while fewer than w bytes are buffered). Memory held by the encoder stays below w bytes;
    /// the returned stripes are the caller's (use [`StripeEncoder::push_with`] to handle them
    /// one at a time when a piece may span many stripes).
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<Stripe>, CodecError> {
        let mut out = Vec::new();
        self.push_with(bytes, |s| out.push(s))?;
        Ok(out)
    }

    /// Like [`StripeEncoder::push`], handing each completed stripe to `emit` as soon as it is
    /// encoded. A size error (the object would be too large for the format) is returned before
    /// any byte is taken; if the codec itself fails, the encoder must be dropped.
    pub fn push_with(
        &mut self,
        mut bytes: &[u8],
        mut emit: impl FnMut(Stripe),
    ) -> Result<(), CodecError> {
        let total = self
            .total
            .checked_add(bytes.len() as u64)
            .ok_or(CodecError::TooLarge {
                what: "streamed object",
                size: u64::MAX,
            })?;
        // The final layout must exist for this size (K + P chunks of ceil(size / K) bytes).
        ObjectLayout::new(total, self.k, self.p, self.sub_chunk)?;
        while !bytes.is_empty() {
            let take = (self.width - self.buf.len()).min(bytes.len());
            let want = self.buf.len() + take;
            if want > self.buf.capacity() {
                let target = (self.buf.capacity() * 2)
                    .max(want)
                    .max(MIN_RESERVE)
                    .min(self.width);
                self.buf.reserve_exact(target - self.buf.len());
            }
            self.buf.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            self.total += take as u64;
            if self.buf.len() == self.width {
                let data = std::mem::take(&mut self.buf);
                emit(self.encode(data, self.width, self.sub_len)?);
            }
        }
        Ok(())
    }

    /// Ends the object: returns its last stripe if it is short (none when the size is a multiple
    /// of w, including 0: every stripe has been emitted by `push`) and the object's layout.
    pub fn finish(mut self) -> Result<(Option<Stripe>, ObjectLayout), CodecError> {
        let layout = ObjectLayout::new(self.total, self.k, self.p, self.sub_chunk)?;
        let last = if self.buf.is_empty() {
            None
        } else {
            let r = self.buf.len();
            let t = r.div_ceil(self.k);
            let mut data = std::mem::take(&mut self.buf);
            data.resize(self.k * t, 0);
            Some(self.encode(data, r, t)?)
        };
        debug_assert_eq!(layout.stripe_count(), self.next_index);
        Ok((last, layout))
    }

    /// Encodes one stripe of `object_len` object bytes whose data sub-chunks of `sub_len` bytes
    /// are `data` (K · sub_len bytes, padded).
    fn encode(
        &mut self,
        data: Vec<u8>,
        object_len: usize,
        sub_len: usize,
    ) -> Result<Stripe, CodecError> {
        let mut parity = vec![vec![0u8; sub_len]; self.p];
        {
            let shards: Vec<&[u8]> = data.chunks_exact(sub_len).collect();
            let mut outs: Vec<&mut [u8]> = parity.iter_mut().map(Vec::as_mut_slice).collect();
            self.codec.encode(&shards, &mut outs)?;
        }
        let index = self.next_index;
        self.next_index += 1;
        Ok(Stripe {
            index,
            object_offset: index * self.width as u64,
            object_len,
            sub_len,
            k: self.k,
            data,
            parity,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{encode_object, ReedSolomonCodec};

    #[test]
    fn stripes_match_whole_object_encoding() {
        let cache = CodecCache::new();
        let obj: Vec<u8> = (0..1000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        let mut enc = StripeEncoder::from_cache(&cache, 3, 2, 100).unwrap();
        let mut stripes = Vec::new();
        for piece in obj.chunks(77) {
            stripes.extend(enc.push(piece).unwrap());
            assert!(enc.buffered() < 300);
        }
        assert_eq!(enc.bytes_pushed(), 1000);
        assert_eq!(stripes.len(), 3);
        let (last, layout) = enc.finish().unwrap();
        let last = last.unwrap();
        assert_eq!((last.index(), last.sub_chunk_len()), (3, 34));
        assert_eq!(last.object_bytes(), &obj[900..]);
        assert_eq!(last.object_offset(), 900);
        stripes.push(last);
        assert_eq!(layout, ObjectLayout::new(1000, 3, 2, 100).unwrap());
        let codec = ReedSolomonCodec::new(3, 2).unwrap();
        let chunks = encode_object(&codec, &layout, &obj).unwrap();
        for s in &stripes {
            for (c, chunk) in chunks.iter().enumerate() {
                let r = layout.sub_chunk_range(c, s.index()).unwrap();
                assert_eq!(
                    s.shard(c).unwrap(),
                    &chunk[r.start as usize..r.end as usize]
                );
            }
            assert_eq!(s.shard(5), None);
            assert_eq!(s.shards().len(), 5);
        }
    }

    #[test]
    fn exact_multiple_has_no_last_stripe_and_empty_object_has_none() {
        let cache = CodecCache::new();
        let mut enc = StripeEncoder::from_cache(&cache, 2, 1, 4).unwrap();
        let out = enc.push(&[1u8; 16]).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].object_bytes(), &[1u8; 8]);
        let (last, layout) = enc.finish().unwrap();
        assert!(last.is_none());
        assert_eq!((layout.size(), layout.stripe_count()), (16, 2));
        let enc = StripeEncoder::from_cache(&cache, 2, 1, 4).unwrap();
        let (last, layout) = enc.finish().unwrap();
        assert!(last.is_none());
        assert_eq!(layout.chunk_size(), 0);
    }

    #[test]
    fn bad_parameters_are_errors() {
        let cache = CodecCache::new();
        assert!(matches!(
            StripeEncoder::from_cache(&cache, 3, 1, 0),
            Err(CodecError::ZeroSubChunk)
        ));
        assert!(matches!(
            StripeEncoder::from_cache(&cache, 0, 1, 4),
            Err(CodecError::InvalidShape { .. })
        ));
        assert!(matches!(
            StripeEncoder::new(3, 1, 4, cache.get(3, 2).unwrap()),
            Err(CodecError::ShapeMismatch { .. })
        ));
        assert!(matches!(
            StripeEncoder::from_cache(&cache, 3, 1, u64::MAX / 2),
            Err(CodecError::TooLarge { .. })
        ));
    }
}
