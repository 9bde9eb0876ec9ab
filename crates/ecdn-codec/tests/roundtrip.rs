//! Property tests: for random objects (0 .. 300 KiB, including sizes below K, multiples of K and
//! of the stripe width K · sub-chunk, and off-by-one), shapes (3,1) (3,2) (3,3) (2,1) (4,2)
//! (10,4), sub-chunk sizes 1 .. 4096 and random erasures of at most P chunks, any K chunks give
//! back every byte of the object and every random byte range; sub-chunk decoding with a
//! different erasure set per stripe does too; more than P erasures are an error, not wrong
//! bytes. `StripeEncoder` fed random pieces equals `encode_object` (K 1..=6, P 0..=3, s in
//! {1, 3, 7, 64, 4096}), and every stripe decodes from every K-subset of its sub-chunks, without
//! decoding work when the K data sub-chunks are given.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ecdn_codec::{
    decode_object, decode_range, decode_range_with, decode_stripe, encode_object,
    encode_parity_into, Codec, CodecCache, CodecError, ObjectLayout, ReedSolomonCodec, Shard,
    StripeEncoder,
};
use proptest::prelude::*;

const SHAPES: [(usize, usize); 6] = [(3, 1), (3, 2), (3, 3), (2, 1), (4, 2), (10, 4)];
const MAX_SIZE: u64 = 300 * 1024;

/// SplitMix64: turns one proptest seed into as many choices as a case needs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    /// `count` distinct indices below `n`.
    fn subset(&mut self, n: usize, count: usize) -> Vec<usize> {
        let mut all: Vec<usize> = (0..n).collect();
        for i in 0..count.min(n) {
            let j = i + self.below((n - i) as u64) as usize;
            all.swap(i, j);
        }
        all.truncate(count.min(n));
        all
    }

    fn range(&mut self, size: u64) -> Range<u64> {
        let a = self.below(size + 1);
        let b = self.below(size + 1);
        a.min(b)..a.max(b)
    }
}

/// An object size of one of the interesting kinds, at most `cap` bytes.
fn object_size(kind: u8, raw: u64, k: usize, sub: u64, cap: u64) -> u64 {
    let k = k as u64;
    let delta = (raw % 3) as i64 - 1; // −1, 0, +1
    let size = match kind % 5 {
        0 => raw % (cap + 1),
        1 => raw % (2 * k + 2), // tiny: below K, K, a little above
        2 => ((raw >> 2) % (cap / k + 1)) * k,
        3 => (((raw >> 2) % (cap / k + 1)) * k).saturating_add_signed(delta),
        _ => (((raw >> 2) % 6 + 1) * k * sub).saturating_add_signed(delta),
    };
    size.min(cap)
}

fn object_bytes(size: u64, seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed);
    let mut out = Vec::with_capacity(size as usize);
    while (out.len() as u64) < size {
        out.extend_from_slice(&rng.next().to_le_bytes());
    }
    out.truncate(size as usize);
    out
}

fn available<'a>(chunks: &'a [Vec<u8>], erased: &[usize]) -> Vec<Option<&'a [u8]>> {
    chunks
        .iter()
        .enumerate()
        .map(|(i, c)| (!erased.contains(&i)).then_some(c.as_slice()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn any_k_chunks_decode_every_byte(
        shape in 0..SHAPES.len(),
        sub in prop_oneof![1..=16u64, 17..=4096u64, Just(4096u64)],
        kind in any::<u8>(),
        raw in any::<u64>(),
        seed in any::<u64>(),
    ) {
        let (k, p) = SHAPES[shape];
        // Keep the number of stripes (codec calls) bounded for tiny sub-chunks.
        let cap = MAX_SIZE.min(sub * k as u64 * 400);
        let size = object_size(kind, raw, k, sub, cap);
        let layout = ObjectLayout::new(size, k, p, sub).unwrap();
        let codec = ReedSolomonCodec::new(k, p).unwrap();
        let object = object_bytes(size, seed);
        let mut rng = Rng(seed ^ 0xA5A5);

        let chunks = encode_object(&codec, &layout, &object).unwrap();
        prop_assert_eq!(chunks.len(), k + p);
        for c in &chunks {
            prop_assert_eq!(c.len() as u64, layout.chunk_size());
        }
        // Each data chunk is the object bytes of its data ranges, in order, then zeros; together
        // they hold every object byte once.
        let mut seen = 0u64;
        for (i, chunk) in chunks[..k].iter().enumerate() {
            let ranges = layout.data_ranges(i).unwrap();
            let carried: Vec<u8> = ranges
                .iter()
                .flat_map(|r| object[r.start as usize..r.end as usize].iter().copied())
                .collect();
            prop_assert_eq!(&chunk[..carried.len()], &carried[..]);
            prop_assert!(chunk[carried.len()..].iter().all(|&b| b == 0));
            prop_assert_eq!(layout.data_bytes(i).unwrap(), carried.len() as u64);
            seen += carried.len() as u64;
        }
        prop_assert_eq!(seen, size);
        let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
        prop_assert!(codec.verify(&refs).unwrap());

        // Parity straight from the object into caller buffers is the same.
        let mut parity = vec![vec![0xEEu8; layout.chunk_size() as usize]; p];
        let mut prefs: Vec<&mut [u8]> = parity.iter_mut().map(Vec::as_mut_slice).collect();
        encode_parity_into(&codec, &layout, &object, &mut prefs).unwrap();
        prop_assert_eq!(&parity[..], &chunks[k..]);

        // Any K of K + P chunks: the whole object and random ranges.
        let n_erased = rng.below(p as u64 + 1) as usize;
        let erased = rng.subset(k + p, n_erased);
        let avail = available(&chunks, &erased);
        prop_assert_eq!(decode_object(&codec, &layout, &avail).unwrap(), object.clone());
        for _ in 0..6 {
            let r = rng.range(size);
            let got = decode_range(&codec, &layout, &avail, r.clone()).unwrap();
            prop_assert_eq!(&got[..], &object[r.start as usize..r.end as usize]);
            // The plan names exactly the stripes of erased data chunks the range touches.
            let present: Vec<bool> = (0..k + p).map(|i| !erased.contains(&i)).collect();
            let stripes = layout.stripes_to_decode(r.clone(), &present).unwrap();
            let mut want: Vec<u64> = layout
                .sub_chunks_for_range(r)
                .unwrap()
                .filter(|s| erased.contains(&s.chunk))
                .map(|s| s.sub_chunk)
                .collect();
            want.sort_unstable();
            want.dedup();
            prop_assert_eq!(stripes, want);
        }

        // Sub-chunk level: every stripe loses its own random set of at most P sub-chunks.
        let n = layout.stripe_count();
        let per_stripe: Vec<Vec<usize>> = (0..n)
            .map(|_| {
                let e = rng.below(p as u64 + 1) as usize;
                rng.subset(k + p, e)
            })
            .collect();
        let r = rng.range(size);
        let mut out = vec![0u8; (r.end - r.start) as usize];
        decode_range_with(&codec, &layout, r.clone(), &mut out, |c, j| {
            if per_stripe[j as usize].contains(&c) {
                return None;
            }
            let sr = layout.sub_chunk_range(c, j).ok()?;
            Some(&chunks[c][sr.start as usize..sr.end as usize])
        })
        .unwrap();
        prop_assert_eq!(&out[..], &object[r.start as usize..r.end as usize]);

        // P + 1 erasures including a data chunk with object bytes: an error, never wrong bytes.
        if let Some(d) = (0..k).find(|&i| !layout.data_ranges(i).unwrap().is_empty()) {
            let mut erased = vec![d];
            erased.extend((0..k + p).filter(|&i| i != d).take(p));
            let avail = available(&chunks, &erased);
            let res = decode_object(&codec, &layout, &avail);
            prop_assert!(
                matches!(res, Err(CodecError::TooFewShards { .. })),
                "expected TooFewShards, got {:?}", res.map(|v| v.len())
            );
        }
    }

    #[test]
    fn spans_tile_every_range(
        shape in 0..SHAPES.len(),
        sub in 1..=600u64,
        size in 0..20_000u64,
        seed in any::<u64>(),
    ) {
        let (k, p) = SHAPES[shape];
        let layout = ObjectLayout::new(size, k, p, sub).unwrap();
        let mut rng = Rng(seed);
        for _ in 0..8 {
            let r = rng.range(size);
            let mut next = r.start;
            for s in layout.sub_chunks_for_range(r.clone()).unwrap() {
                prop_assert_eq!(s.object_offset, next);
                prop_assert!(s.chunk < k);
                prop_assert!(!s.range.is_empty());
                let sr = layout.sub_chunk_range(s.chunk, s.sub_chunk).unwrap();
                prop_assert!(s.range.end <= sr.end - sr.start);
                let carried = layout.data_range_of(s.chunk, s.sub_chunk).unwrap();
                prop_assert_eq!(carried.start + s.range.start, s.object_offset);
                prop_assert!(s.object_range().end <= carried.end);
                next = s.object_range().end;
            }
            prop_assert_eq!(next, r.end);
        }
        // Data sub-chunks carry the object exactly once, in order: stripe by stripe, data chunk
        // 0 … K−1 within a stripe, the stripe's range being their union.
        let mut pos = 0;
        for j in 0..layout.stripe_count() {
            let stripe = layout.stripe_range(j).unwrap();
            prop_assert_eq!(stripe.start, pos);
            for i in 0..k {
                let d = layout.data_range_of(i, j).unwrap();
                prop_assert!(d.is_empty() || d.start == pos);
                prop_assert!(d.end - d.start <= layout.sub_chunk_len(j).unwrap());
                pos = pos.max(d.end);
            }
            prop_assert_eq!(stripe.end, pos);
        }
        prop_assert_eq!(pos, size);
        prop_assert_eq!(
            layout.chunk_size(),
            (0..layout.stripe_count()).map(|j| layout.sub_chunk_len(j).unwrap()).sum::<u64>()
        );
    }
}

/// A `ReedSolomonCodec` that counts its `reconstruct_shards` calls (decoding work).
struct Counting {
    inner: ReedSolomonCodec,
    rebuilds: AtomicUsize,
}

impl Counting {
    fn new(k: usize, p: usize) -> Self {
        Counting {
            inner: ReedSolomonCodec::new(k, p).unwrap(),
            rebuilds: AtomicUsize::new(0),
        }
    }
}

impl Codec for Counting {
    fn data_shards(&self) -> usize {
        self.inner.data_shards()
    }
    fn parity_shards(&self) -> usize {
        self.inner.parity_shards()
    }
    fn encode(&self, data: &[&[u8]], parity: &mut [&mut [u8]]) -> Result<(), CodecError> {
        self.inner.encode(data, parity)
    }
    fn reconstruct_shards(&self, shards: &mut [Shard<'_>]) -> Result<(), CodecError> {
        self.rebuilds.fetch_add(1, Ordering::Relaxed);
        self.inner.reconstruct_shards(shards)
    }
}

const STREAM_SUBS: [u64; 5] = [1, 3, 7, 64, 4096];

/// A size of one of the kinds the streaming test must cover, for stripe width `w`.
fn stream_size(kind: u8, raw: u64, k: u64, w: u64) -> u64 {
    let m = (raw >> 8) % 5 + 1; // a few stripes
    match kind % 8 {
        0 => 0,
        1 => 1,
        2 => raw % k.max(1), // < K (0 when K = 1)
        3 => m * w,          // exact multiples of w
        4 => m * w - 1,
        5 => m * w + 1,
        6 => w + (raw % 2) * 2 - 1, // w ± 1
        _ => raw % (6 * w + 1),
    }
}

/// All `count`-subsets of 0 .. n, in lexicographic order.
fn subsets(n: usize, count: usize) -> Vec<Vec<usize>> {
    fn rec(start: usize, n: usize, left: usize, cur: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if left == 0 {
            out.push(cur.clone());
            return;
        }
        for i in start..=n - left {
            cur.push(i);
            rec(i + 1, n, left - 1, cur, out);
            cur.pop();
        }
    }
    let mut out = Vec::new();
    rec(0, n, count, &mut Vec::new(), &mut out);
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn stream_encoder_equals_encode_object(
        k in 1..=6usize,
        p in 0..=3usize,
        sub_i in 0..STREAM_SUBS.len(),
        kind in any::<u8>(),
        raw in any::<u64>(),
        seed in any::<u64>(),
    ) {
        let sub = STREAM_SUBS[sub_i];
        let w = k as u64 * sub;
        let size = stream_size(kind, raw, k as u64, w);
        let object = object_bytes(size, seed);
        let cache = CodecCache::new();
        let codec = cache.get(k, p).unwrap();
        let mut enc = StripeEncoder::from_cache(&cache, k, p, sub).unwrap();
        let mut rng = Rng(seed ^ 0x5EED);
        let mut stripes = Vec::new();
        let mut pos = 0usize;
        while pos < object.len() {
            // Pieces from empty to a little over two stripes.
            let piece = (rng.below(2 * w + 3) as usize).min(object.len() - pos);
            let before = stripes.len() as u64;
            let out = enc.push(&object[pos..pos + piece]).unwrap();
            pos += piece;
            // A stripe is emitted exactly when its w bytes are in.
            prop_assert_eq!(before + out.len() as u64, pos as u64 / w);
            prop_assert_eq!(enc.buffered() as u64, pos as u64 % w);
            stripes.extend(out);
        }
        let (last, layout) = enc.finish().unwrap();
        prop_assert_eq!(last.is_some(), !size.is_multiple_of(w));
        stripes.extend(last);
        prop_assert_eq!(layout, ObjectLayout::new(size, k, p, sub).unwrap());
        prop_assert_eq!(stripes.len() as u64, layout.stripe_count());

        let chunks = encode_object(&*codec, &layout, &object).unwrap();
        for (j, st) in stripes.iter().enumerate() {
            let j = j as u64;
            prop_assert_eq!(st.index(), j);
            let sr = layout.stripe_range(j).unwrap();
            prop_assert_eq!(st.object_offset(), sr.start);
            prop_assert_eq!(st.object_bytes(), &object[sr.start as usize..sr.end as usize]);
            prop_assert_eq!(st.sub_chunk_len() as u64, layout.sub_chunk_len(j).unwrap());
            prop_assert_eq!(st.shards().len(), k + p);
            for (c, shard) in st.shards().into_iter().enumerate() {
                let r = layout.sub_chunk_range(c, j).unwrap();
                prop_assert_eq!(shard, &chunks[c][r.start as usize..r.end as usize]);
            }
        }
    }

    #[test]
    fn every_k_subset_decodes_every_stripe(
        k in 1..=4usize,
        p in 0..=3usize,
        sub in 1..=5u64,
        size in 0..=60u64,
        seed in any::<u64>(),
    ) {
        let layout = ObjectLayout::new(size, k, p, sub).unwrap();
        let codec = Counting::new(k, p);
        let object = object_bytes(size, seed);
        let chunks = encode_object(&codec, &layout, &object).unwrap();
        for j in 0..layout.stripe_count() {
            let r = layout.sub_chunk_range(0, j).unwrap();
            let sub_of = |c: usize| &chunks[c][r.start as usize..r.end as usize];
            let sr = layout.stripe_range(j).unwrap();
            let want = &object[sr.start as usize..sr.end as usize];
            for set in subsets(k + p, k) {
                let mut given: Vec<(usize, &[u8])> = set.iter().map(|&c| (c, sub_of(c))).collect();
                given.reverse(); // any order
                let before = codec.rebuilds.load(Ordering::Relaxed);
                let got = decode_stripe(&codec, &layout, j, &given).unwrap();
                prop_assert_eq!(&got[..], want, "stripe {} from {:?}", j, set);
                if set.iter().all(|&c| c < k) {
                    prop_assert_eq!(codec.rebuilds.load(Ordering::Relaxed), before);
                }
            }
            // K − 1 sub-chunks without data chunk 0 (which carries bytes of every stripe): an
            // error, not wrong bytes.
            let few: Vec<(usize, &[u8])> = (1..k).map(|c| (c, sub_of(c))).collect();
            prop_assert!(
                matches!(
                    decode_stripe(&codec, &layout, j, &few),
                    Err(CodecError::TooFewShards { .. })
                ),
                "stripe {} from {} shards", j, k - 1
            );
        }
        // Range decode from the last K chunks equals the object slice.
        let avail: Vec<Option<&[u8]>> = (0..k + p)
            .map(|c| (c >= p).then_some(chunks[c].as_slice()))
            .collect();
        let mut rng = Rng(seed);
        for _ in 0..8 {
            let r = rng.range(size);
            let got = decode_range(&codec, &layout, &avail, r.clone()).unwrap();
            prop_assert_eq!(&got[..], &object[r.start as usize..r.end as usize]);
        }
    }
}

/// One codec shared by threads (`Codec: Send + Sync`), through the cache.
#[test]
fn codecs_are_shared_across_threads() {
    let cache = Arc::new(CodecCache::new());
    let handles: Vec<_> = (0..4u64)
        .map(|t| {
            let cache = Arc::clone(&cache);
            std::thread::spawn(move || {
                let codec = cache.get(4, 2).unwrap();
                for round in 0..20u64 {
                    let size = 50_000 + t * 977 + round;
                    let layout = ObjectLayout::new(size, 4, 2, 4096).unwrap();
                    let object = object_bytes(size, t * 100 + round);
                    let chunks = encode_object(&*codec, &layout, &object).unwrap();
                    let erased = [(round % 4) as usize, 4 + (t % 2) as usize];
                    let avail = available(&chunks, &erased);
                    assert_eq!(decode_object(&*codec, &layout, &avail).unwrap(), object);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

/// Rebuilding into disjoint parts of one buffer through `Shard` slots (no copies of inputs).
#[test]
fn shard_slots_rebuild_into_caller_buffers() {
    let codec = ReedSolomonCodec::new(3, 2).unwrap();
    let data: Vec<Vec<u8>> = (0..3).map(|i| object_bytes(5000, i)).collect();
    let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
    let mut parity = vec![vec![0u8; 5000]; 2];
    let mut prefs: Vec<&mut [u8]> = parity.iter_mut().map(Vec::as_mut_slice).collect();
    codec.encode(&refs, &mut prefs).unwrap();
    let mut out = vec![0u8; 10_000];
    let (d0, d2) = out.split_at_mut(5000);
    let mut slots = [
        Shard::Rebuild(d0),
        Shard::Present(&data[1]),
        Shard::Rebuild(d2),
        Shard::Present(&parity[0]),
        Shard::Present(&parity[1]),
    ];
    codec.reconstruct_shards(&mut slots).unwrap();
    assert_eq!(&out[..5000], &data[0][..]);
    assert_eq!(&out[5000..], &data[2][..]);
}
