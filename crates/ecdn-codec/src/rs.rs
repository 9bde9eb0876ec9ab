//! [`ReedSolomonCodec`]: the [`Codec`] of FORMAT.md on our own GF(2^8) kernels (`kernel.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::{check_encode, gf, kernel, plan_rebuild, Codec, CodecError, Shard};

/// Decode matrices kept per codec before the cache is flushed (a codec sees at most
/// C(K+P, K) source sets, so this only bounds pathological shapes like (128, 128)).
pub(crate) const DECODE_CACHE_CAPACITY: usize = 1024;

/// The set of source shard indices a decode matrix was built for (K + P ≤ 256).
type SourceSet = [u64; 4];

/// The reference [`Codec`]: the generator matrix of FORMAT.md (`reed-solomon-erasure`'s
/// Vandermonde-derived systematic matrix) applied with our GF(2^8) kernels (GFNI + AVX-512,
/// AVX2 or portable, several outputs per pass, 4 KiB cache blocks). Decoding inverts the K × K submatrix of the K present shards it uses (the first K
/// present, data shards preferred) once per erasure pattern and caches it; a rebuilt parity shard
/// is computed straight from those K shards, without rebuilding data first.
///
/// `reed-solomon-erasure` itself is only a test dependency now: the tests check our matrix and
/// bytes against its encoder (`tests/format_vectors.rs`), so a change of format on either side
/// is caught.
pub struct ReedSolomonCodec {
    k: usize,
    p: usize,
    /// Row-major (K + P) × K.
    generator: Vec<u8>,
    decode_cache: Mutex<HashMap<SourceSet, Arc<Vec<u8>>>>,
}

impl ReedSolomonCodec {
    /// A (K, P) codec; errors unless K ≥ 1 and K + P ≤ 256.
    pub fn new(k: usize, p: usize) -> Result<Self, CodecError> {
        let generator = gf::generator_matrix(k, p)?;
        let codec = ReedSolomonCodec {
            k,
            p,
            generator,
            decode_cache: Mutex::new(HashMap::new()),
        };
        Ok(codec)
    }

    /// The row-major (K + P) × K generator matrix (FORMAT.md §2).
    pub fn generator(&self) -> &[u8] {
        &self.generator
    }

    fn decode_matrix(&self, sources: &[usize]) -> Result<Arc<Vec<u8>>, CodecError> {
        let mut key: SourceSet = [0; 4];
        for &s in sources {
            key[s / 64] |= 1 << (s % 64);
        }
        if let Some(m) = self
            .decode_cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            return Ok(Arc::clone(m));
        }
        let m = Arc::new(gf::decode_matrix(&self.generator, self.k, sources)?);
        let mut cache = self
            .decode_cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= DECODE_CACHE_CAPACITY {
            cache.clear();
        }
        cache.insert(key, Arc::clone(&m));
        Ok(m)
    }
}

impl std::fmt::Debug for ReedSolomonCodec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReedSolomonCodec")
            .field("k", &self.k)
            .field("p", &self.p)
            .finish()
    }
}

impl Codec for ReedSolomonCodec {
    fn data_shards(&self) -> usize {
        self.k
    }

    fn parity_shards(&self) -> usize {
        self.p
    }

    fn encode(&self, data: &[&[u8]], parity: &mut [&mut [u8]]) -> Result<(), CodecError> {
        let len = check_encode(self.k, self.p, data, parity)?;
        let outputs: Vec<&mut [u8]> = parity.iter_mut().map(|s| &mut **s).collect();
        kernel::apply(
            &self.generator[self.k * self.k..],
            self.k,
            data,
            outputs,
            len,
        );
        Ok(())
    }

    fn reconstruct_shards(&self, shards: &mut [Shard<'_>]) -> Result<(), CodecError> {
        let plan = plan_rebuild(self.k, self.p, shards)?;
        if plan.targets.is_empty() || plan.len == 0 {
            return Ok(());
        }
        let rows = if plan.sources.iter().enumerate().all(|(i, &s)| i == s) {
            // All data present: the targets are parity, i.e. plain encoding rows.
            let mut rows = Vec::with_capacity(plan.targets.len() * self.k);
            for &t in &plan.targets {
                rows.extend_from_slice(&self.generator[t * self.k..(t + 1) * self.k]);
            }
            rows
        } else {
            let decode = self.decode_matrix(&plan.sources)?;
            gf::rebuild_rows(&self.generator, self.k, &decode, &plan.targets)
        };
        let mut sources: Vec<&[u8]> = Vec::with_capacity(self.k);
        let mut outputs: Vec<&mut [u8]> = Vec::with_capacity(plan.targets.len());
        for slot in shards.iter_mut() {
            match slot {
                Shard::Present(s) if sources.len() < self.k => sources.push(s),
                Shard::Rebuild(b) => outputs.push(&mut **b),
                _ => {}
            }
        }
        kernel::apply(&rows, self.k, &sources, outputs, plan.len);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(k: usize, p: usize, len: usize) -> Vec<Vec<u8>> {
        let mut x = 0x9E37_79B9u32;
        let mut shards = vec![vec![0u8; len]; k + p];
        for s in shards.iter_mut().take(k) {
            for b in s.iter_mut() {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                *b = x as u8;
            }
        }
        let codec = ReedSolomonCodec::new(k, p).unwrap();
        let (data, parity) = shards.split_at_mut(k);
        let data: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
        let mut parity: Vec<&mut [u8]> = parity.iter_mut().map(Vec::as_mut_slice).collect();
        codec.encode(&data, &mut parity).unwrap();
        shards
    }

    #[test]
    fn matches_the_library_encoder_on_long_shards() {
        for (k, p) in [(3, 1), (4, 2), (10, 4)] {
            let len = 3 * kernel::BLOCK + 77;
            let ours = sample(k, p, len);
            let mut theirs = ours.clone();
            for s in theirs.iter_mut().skip(k) {
                s.fill(0);
            }
            let rs = reed_solomon_erasure::galois_8::ReedSolomon::new(k, p).unwrap();
            rs.encode(&mut theirs).unwrap();
            assert_eq!(ours, theirs);
        }
    }

    #[test]
    fn rebuilds_every_pattern_of_erasures() {
        let (k, p) = (3, 3);
        let full = sample(k, p, kernel::BLOCK + 5);
        let codec = ReedSolomonCodec::new(k, p).unwrap();
        for mask in 0u32..(1 << (k + p)) {
            let present: Vec<bool> = (0..k + p).map(|i| mask & (1 << i) != 0).collect();
            let mut shards: Vec<Vec<u8>> = full
                .iter()
                .zip(&present)
                .map(|(s, &have)| if have { s.clone() } else { vec![0xAA; s.len()] })
                .collect();
            let mut refs: Vec<&mut [u8]> = shards.iter_mut().map(Vec::as_mut_slice).collect();
            let res = codec.reconstruct(&mut refs, &present);
            if mask.count_ones() as usize >= k {
                res.unwrap();
                assert_eq!(shards, full, "mask {mask:b}");
            } else {
                assert_eq!(
                    res,
                    Err(CodecError::TooFewShards {
                        present: mask.count_ones() as usize,
                        needed: k
                    })
                );
            }
        }
        let refs: Vec<&[u8]> = full.iter().map(Vec::as_slice).collect();
        assert!(codec.verify(&refs).unwrap());
    }

    #[test]
    fn reconstruct_data_leaves_parity_alone() {
        let (k, p) = (4, 2);
        let full = sample(k, p, 1000);
        let codec = ReedSolomonCodec::new(k, p).unwrap();
        let mut d1 = vec![0u8; 1000];
        let mut slots = vec![
            Shard::Present(&full[0]),
            Shard::Rebuild(&mut d1),
            Shard::Absent,
            Shard::Present(&full[3]),
            Shard::Present(&full[4]),
            Shard::Present(&full[5]),
        ];
        codec.reconstruct_shards(&mut slots).unwrap();
        assert_eq!(d1, full[1]);

        let mut shards = full.clone();
        shards[2].fill(0);
        shards[5].clear();
        let mut refs: Vec<&mut [u8]> = shards.iter_mut().map(Vec::as_mut_slice).collect();
        let present = [true, true, false, true, true, false];
        codec.reconstruct_data(&mut refs, &present).unwrap();
        assert_eq!(shards[2], full[2]);
        assert!(shards[5].is_empty());
    }

    #[test]
    fn errors_are_reported_not_panicked() {
        let codec = ReedSolomonCodec::new(3, 1).unwrap();
        let a = [0u8; 4];
        let b = [0u8; 5];
        let mut out = [0u8; 4];
        assert!(matches!(
            codec.encode(&[&a, &a], &mut [&mut out]),
            Err(CodecError::Count {
                expected: 3,
                got: 2,
                ..
            })
        ));
        assert_eq!(
            codec.encode(&[&a, &b, &a], &mut [&mut out]),
            Err(CodecError::ShardLength {
                index: 1,
                expected: 4,
                got: 5
            })
        );
        let mut slots = [
            Shard::Present(&a),
            Shard::Present(&a),
            Shard::Present(&b),
            Shard::Absent,
        ];
        assert!(matches!(
            codec.reconstruct_shards(&mut slots),
            Err(CodecError::ShardLength { index: 2, .. })
        ));
        let mut bad = [0u8; 3];
        let mut slots = [
            Shard::Present(&a),
            Shard::Present(&a),
            Shard::Rebuild(&mut bad),
            Shard::Present(&a),
        ];
        assert!(codec.reconstruct_shards(&mut slots).is_err());
        assert_eq!(bad, [0; 3]);
        assert!(matches!(
            codec.reconstruct(&mut [], &[]),
            Err(CodecError::Count { .. })
        ));
        assert!(ReedSolomonCodec::new(0, 2).is_err());
        assert!(ReedSolomonCodec::new(3, 254).is_err());
    }

    #[test]
    fn zero_parity_and_empty_shards() {
        let codec = ReedSolomonCodec::new(2, 0).unwrap();
        let a = [1u8, 2];
        codec.encode(&[&a, &a], &mut []).unwrap();
        assert!(codec.verify(&[&a, &a]).unwrap());
        let mut x = [0u8; 2];
        let mut slots = [Shard::Present(&a), Shard::Rebuild(&mut x)];
        assert!(matches!(
            codec.reconstruct_shards(&mut slots),
            Err(CodecError::TooFewShards {
                present: 1,
                needed: 2
            })
        ));
        let codec = ReedSolomonCodec::new(3, 2).unwrap();
        let e: [u8; 0] = [];
        let mut p0: [u8; 0] = [];
        let mut p1: [u8; 0] = [];
        codec
            .encode(&[&e, &e, &e], &mut [&mut p0, &mut p1])
            .unwrap();
        let mut slots = [
            Shard::Rebuild(&mut []),
            Shard::Present(&e),
            Shard::Present(&e),
            Shard::Present(&e),
            Shard::Absent,
        ];
        codec.reconstruct_shards(&mut slots).unwrap();
    }
}
