//! Erasure coding of cached objects for ecdn (C2DN, NSDI '22, §4.1 and §5): a systematic
//! Reed-Solomon code over GF(2^8) behind the [`Codec`] trait, and the object layout (format
//! version 2, stripe-major) that cuts an object into stripes of K·s consecutive bytes, each
//! split into K data sub-chunks and coded into P parity sub-chunks, the i-th sub-chunk of every
//! stripe going to chunk i — so that a sequential read pulls from all K data chunks at once, an
//! object can be encoded as its bytes arrive, and streaming and byte-range requests decode only
//! the stripes they touch.
//!
//! * [`Codec`] — encode K equal-length data shards into P parity shards, rebuild any missing
//!   shards from any K present ones ([`Shard`] slots: present shards are only read, rebuilt ones
//!   are written straight into caller buffers), verify. [`ReedSolomonCodec`] implements it on
//!   our own GF(2^8) kernels (`kernel.rs`: GFNI + AVX-512, AVX2 or portable, chosen at run
//!   time); [`CodecCache`] keeps one codec per (K, P).
//!   With the `isal` feature, `isal::IsalCodec` implements the same trait (and the same bytes) on
//!   Intel ISA-L, the benchmark's yardstick.
//! * [`ObjectLayout`] — the stripe / chunk / sub-chunk geometry of one object (size, K, P and
//!   the sub-chunk size s, which reader and writer must agree on): which object bytes each data
//!   sub-chunk carries ([`ObjectLayout::data_range_of`]), the object byte ranges of a whole data
//!   chunk for a multi-range origin fetch ([`ObjectLayout::data_ranges`]), which stripes and
//!   sub-chunks cover a byte range. Every chunk is ceil(size / K) bytes, as in version 1.
//! * [`StripeEncoder`] — encodes an object pushed in arbitrary pieces, emitting each [`Stripe`]
//!   (K + P sub-chunks) as soon as its K·s bytes are in, and the layout at the end: the size
//!   need not be known in advance, memory is one stripe.
//! * [`decode_stripe`] / [`decode_stripe_into`] — one stripe's object bytes from any K of its
//!   sub-chunks (a copy, no decoding, when the data sub-chunks are all there).
//! * [`encode_object`], [`encode_parity_into`], [`decode_object`], [`decode_range`],
//!   [`decode_range_with`] — whole objects and byte ranges to and from chunks or sub-chunks.
//! * [`ChunkHeader`] — a 24-byte self-describing header (version 2) a node can store with each
//!   chunk; it carries the coding parameters including s.
//!
//! The byte format (field, generator matrix, stripes, padding, numbering) is specified in
//! `FORMAT.md` next to this crate's `Cargo.toml` ("format, version 2"), with test vectors.
//! Objects above [`CODING_THRESHOLD`] are coded with ([`DEFAULT_K`], [`DEFAULT_P`]) = (3, 1) and
//! [`DEFAULT_SUB_CHUNK`] = 32 KiB by default; smaller ones are replicated by the caller
//! (selective coding, §5).

pub mod gf;
#[cfg(feature = "isal")]
pub mod isal;
mod kernel;
mod layout;
mod object;
mod rs;
mod stream;

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

pub use layout::{
    ChunkHeader, ObjectLayout, SubChunkSpan, SubChunkSpans, CHUNK_HEADER_LEN, CODING_THRESHOLD,
    DEFAULT_K, DEFAULT_P, DEFAULT_SUB_CHUNK, FORMAT_VERSION,
};
pub use object::{
    decode_object, decode_object_into, decode_range, decode_range_into, decode_range_with,
    decode_stripe, decode_stripe_into, encode_object, encode_object_into, encode_parity_into,
};
pub use rs::ReedSolomonCodec;
pub use stream::{Stripe, StripeEncoder};

/// Everything that can go wrong coding or decoding; inputs are checked, nothing panics.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("invalid code shape K={k}, P={p}: need K >= 1, P >= 0 and K + P <= 256")]
    InvalidShape { k: usize, p: usize },
    #[error("codec is ({codec_k}, {codec_p}) but the object layout is ({layout_k}, {layout_p})")]
    ShapeMismatch {
        codec_k: usize,
        codec_p: usize,
        layout_k: usize,
        layout_p: usize,
    },
    #[error("expected {expected} {what}, got {got}")]
    Count {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("shard {index} is {got} bytes, expected {expected} (all shards of a stripe have one length)")]
    ShardLength {
        index: usize,
        expected: usize,
        got: usize,
    },
    #[error("too few shards to decode: {present} present, need {needed}")]
    TooFewShards { present: usize, needed: usize },
    #[error("the sub-chunk size must be at least 1 byte")]
    ZeroSubChunk,
    #[error("byte range {start}..{end} is not within the object of {size} bytes")]
    RangeOutOfBounds { start: u64, end: u64, size: u64 },
    #[error("chunk {chunk} does not exist (the object has {total} chunks)")]
    NoSuchChunk { chunk: usize, total: usize },
    #[error("chunk {chunk} is a parity chunk; it carries no object bytes")]
    NotADataChunk { chunk: usize },
    #[error("stripe {index} does not exist (the object has {count} stripes)")]
    NoSuchStripe { index: u64, count: u64 },
    #[error("chunk {chunk} is given more than once")]
    DuplicateShard { chunk: usize },
    #[error("the object is {got} bytes but its layout says {expected}")]
    ObjectLength { expected: u64, got: u64 },
    #[error("the output buffer is {got} bytes, expected {expected}")]
    OutputLength { expected: u64, got: u64 },
    #[error("{what} of {size} bytes does not fit this platform's buffers")]
    TooLarge { what: &'static str, size: u64 },
    #[error("decode matrix is singular (the generator matrix is not MDS)")]
    Singular,
    #[error("coding backend: {0}")]
    Backend(&'static str),
    #[error("invalid chunk header: {0}")]
    Header(&'static str),
}

/// One shard slot of a stripe for [`Codec::reconstruct_shards`].
#[derive(Debug)]
pub enum Shard<'a> {
    /// An available shard: read, never written.
    Present(&'a [u8]),
    /// A missing shard to rebuild into this buffer (same length as the present shards).
    Rebuild(&'a mut [u8]),
    /// A missing shard that is not wanted: neither read nor written.
    Absent,
}

/// A systematic (K, P) Reed-Solomon code over GF(2^8) as specified in FORMAT.md: shard i < K of
/// a stripe is data, shard K + r is parity r, and any K of the K + P shards determine the rest.
/// All shards of one call have the same length (any length, including 0); bytes at different
/// offsets are coded independently.
pub trait Codec: Send + Sync {
    /// K.
    fn data_shards(&self) -> usize;
    /// P.
    fn parity_shards(&self) -> usize;
    /// K + P.
    fn total_shards(&self) -> usize {
        self.data_shards() + self.parity_shards()
    }

    /// Computes the P parity shards of the K data shards into `parity` (overwritten).
    fn encode(&self, data: &[&[u8]], parity: &mut [&mut [u8]]) -> Result<(), CodecError>;

    /// Rebuilds every [`Shard::Rebuild`] slot from the present shards (K + P slots, at least K
    /// present when anything is to be rebuilt). On error no buffer has been written.
    fn reconstruct_shards(&self, shards: &mut [Shard<'_>]) -> Result<(), CodecError>;

    /// Rebuilds, in place, every shard whose `present` flag is false.
    fn reconstruct(&self, shards: &mut [&mut [u8]], present: &[bool]) -> Result<(), CodecError> {
        let mut slots = slots_from_mask(shards, present)?;
        self.reconstruct_shards(&mut slots)
    }

    /// Rebuilds, in place, the data shards whose `present` flag is false; absent parity shards
    /// are neither read nor written (their buffers may be empty).
    fn reconstruct_data(
        &self,
        shards: &mut [&mut [u8]],
        present: &[bool],
    ) -> Result<(), CodecError> {
        let k = self.data_shards();
        let mut slots = slots_from_mask(shards, present)?;
        for slot in slots.iter_mut().skip(k) {
            if matches!(slot, Shard::Rebuild(_)) {
                *slot = Shard::Absent;
            }
        }
        self.reconstruct_shards(&mut slots)
    }

    /// Whether the parity shards of `shards` (K + P, equal lengths) match their data shards.
    fn verify(&self, shards: &[&[u8]]) -> Result<bool, CodecError> {
        let (k, p) = (self.data_shards(), self.parity_shards());
        check_count("shards", k + p, shards.len())?;
        let len = common_len(shards.iter().map(|s| s.len()))?;
        let mut computed = vec![vec![0u8; len]; p];
        let mut outs: Vec<&mut [u8]> = computed.iter_mut().map(Vec::as_mut_slice).collect();
        self.encode(&shards[..k], &mut outs)?;
        Ok(computed
            .iter()
            .zip(&shards[k..])
            .all(|(c, s)| c.as_slice() == *s))
    }
}

fn slots_from_mask<'s>(
    shards: &'s mut [&mut [u8]],
    present: &[bool],
) -> Result<Vec<Shard<'s>>, CodecError> {
    check_count("present flags", shards.len(), present.len())?;
    Ok(shards
        .iter_mut()
        .zip(present)
        .map(|(s, &have)| {
            if have {
                Shard::Present(s)
            } else {
                Shard::Rebuild(s)
            }
        })
        .collect())
}

pub(crate) fn check_count(
    what: &'static str,
    expected: usize,
    got: usize,
) -> Result<(), CodecError> {
    if expected != got {
        return Err(CodecError::Count {
            what,
            expected,
            got,
        });
    }
    Ok(())
}

/// The common length of shards, or the first that differs from shard 0.
pub(crate) fn common_len(lens: impl Iterator<Item = usize>) -> Result<usize, CodecError> {
    let mut first = None;
    for (index, got) in lens.enumerate() {
        match first {
            None => first = Some(got),
            Some(expected) if expected != got => {
                return Err(CodecError::ShardLength {
                    index,
                    expected,
                    got,
                })
            }
            Some(_) => {}
        }
    }
    Ok(first.unwrap_or(0))
}

/// Checks [`Codec::encode`]'s arguments; returns the shard length.
pub(crate) fn check_encode(
    k: usize,
    p: usize,
    data: &[&[u8]],
    parity: &[&mut [u8]],
) -> Result<usize, CodecError> {
    check_count("data shards", k, data.len())?;
    check_count("parity shards", p, parity.len())?;
    common_len(
        data.iter()
            .map(|s| s.len())
            .chain(parity.iter().map(|s| s.len())),
    )
}

/// What [`Codec::reconstruct_shards`] has to do, after checking its arguments.
pub(crate) struct RebuildPlan {
    /// Shard length.
    pub len: usize,
    /// The first K present shard indices (empty when nothing is to be rebuilt).
    pub sources: Vec<usize>,
    /// Indices of the [`Shard::Rebuild`] slots, ascending.
    pub targets: Vec<usize>,
}

pub(crate) fn plan_rebuild(
    k: usize,
    p: usize,
    shards: &[Shard<'_>],
) -> Result<RebuildPlan, CodecError> {
    check_count("shards", k + p, shards.len())?;
    let mut len = None;
    let mut present = Vec::with_capacity(k);
    let mut n_present = 0;
    let mut targets = Vec::new();
    for (index, slot) in shards.iter().enumerate() {
        let got = match slot {
            Shard::Present(s) => {
                n_present += 1;
                if present.len() < k {
                    present.push(index);
                }
                s.len()
            }
            Shard::Rebuild(b) => {
                targets.push(index);
                b.len()
            }
            Shard::Absent => continue,
        };
        match len {
            None => len = Some(got),
            Some(expected) if expected != got => {
                return Err(CodecError::ShardLength {
                    index,
                    expected,
                    got,
                })
            }
            Some(_) => {}
        }
    }
    if !targets.is_empty() && n_present < k {
        return Err(CodecError::TooFewShards {
            present: n_present,
            needed: k,
        });
    }
    if targets.is_empty() {
        present.clear();
    }
    Ok(RebuildPlan {
        len: len.unwrap_or(0),
        sources: present,
        targets,
    })
}

type Factory = dyn Fn(usize, usize) -> Result<Arc<dyn Codec>, CodecError> + Send + Sync;

/// One shared codec per (K, P), built on first use (codecs precompute matrices and cache decode
/// matrices, so they are worth keeping).
pub struct CodecCache {
    factory: Box<Factory>,
    codecs: RwLock<HashMap<(usize, usize), Arc<dyn Codec>>>,
}

impl CodecCache {
    /// A cache of [`ReedSolomonCodec`]s.
    pub fn new() -> Self {
        Self::with_factory(|k, p| Ok(Arc::new(ReedSolomonCodec::new(k, p)?) as Arc<dyn Codec>))
    }

    /// A cache of codecs built by `factory(k, p)` (another implementation of [`Codec`]).
    pub fn with_factory(
        factory: impl Fn(usize, usize) -> Result<Arc<dyn Codec>, CodecError> + Send + Sync + 'static,
    ) -> Self {
        CodecCache {
            factory: Box::new(factory),
            codecs: RwLock::new(HashMap::new()),
        }
    }

    /// The codec for (K, P), built if needed; errors for an invalid shape.
    pub fn get(&self, k: usize, p: usize) -> Result<Arc<dyn Codec>, CodecError> {
        if let Some(c) = self
            .codecs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(k, p))
        {
            return Ok(Arc::clone(c));
        }
        gf::check_shape(k, p)?;
        let built = (self.factory)(k, p)?;
        if built.data_shards() != k || built.parity_shards() != p {
            return Err(CodecError::ShapeMismatch {
                codec_k: built.data_shards(),
                codec_p: built.parity_shards(),
                layout_k: k,
                layout_p: p,
            });
        }
        let mut map = self.codecs.write().unwrap_or_else(PoisonError::into_inner);
        Ok(Arc::clone(map.entry((k, p)).or_insert(built)))
    }

    /// The codec for `layout`'s (K, P).
    pub fn for_layout(&self, layout: &ObjectLayout) -> Result<Arc<dyn Codec>, CodecError> {
        self.get(layout.k(), layout.p())
    }
}

impl Default for CodecCache {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for CodecCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let map = self.codecs.read().unwrap_or_else(PoisonError::into_inner);
        let mut shapes: Vec<_> = map.keys().copied().collect();
        shapes.sort_unstable();
        f.debug_struct("CodecCache")
            .field("shapes", &shapes)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_reuses_codecs_and_rejects_bad_shapes() {
        let cache = CodecCache::new();
        let a = cache.get(3, 1).unwrap();
        let b = cache.get(3, 1).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!((a.data_shards(), a.parity_shards()), (3, 1));
        assert_eq!(
            cache.get(0, 1).err(),
            Some(CodecError::InvalidShape { k: 0, p: 1 })
        );
        assert!(cache.get(250, 7).is_err());
        assert!(format!("{cache:?}").contains("(3, 1)"));
    }

    #[test]
    fn cache_checks_factory_shape() {
        let cache = CodecCache::with_factory(|_, _| Ok(Arc::new(ReedSolomonCodec::new(2, 2)?)));
        assert!(matches!(
            cache.get(3, 1),
            Err(CodecError::ShapeMismatch { .. })
        ));
    }
}
