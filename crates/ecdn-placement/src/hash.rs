//! The fixed 64-bit hash behind every placement decision.
//!
//! Placement must be identical on every load balancer and across releases, so it uses one
//! small, fully specified function instead of `std`'s randomly keyed hasher: the finalizer of
//! SplitMix64 (Steele, Lea & Flood, OOPSLA '14), [`mix64`]. It is a bijection on `u64` with full
//! avalanche, so consecutive inputs (object ids 1, 2, 3, …) land far apart.
//!
//! Tuples are hashed by chaining: `h₀ = mix64(seed ⊕ domain·φ)`, then for every field `x`,
//! `h ← mix64((h + φ) ⊕ x)` ([`hash_tuple`]), with φ = `0x9e3779b97f4a7c15` (2⁶⁴ divided by the
//! golden ratio) and a distinct `domain` constant per use (ring points, bucket positions, object
//! ids), so the three never correlate.

/// 2⁶⁴/φ, the SplitMix64 increment.
pub const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// Domain of a virtual node's ring position: fields `(server, vnode index)`.
pub(crate) const DOMAIN_VNODE: u64 = 1;
/// Domain of a bucket's ring position: field `(bucket)`.
pub(crate) const DOMAIN_BUCKET: u64 = 2;
/// Domain of the key mixed into object ids by `bucket_of`.
pub(crate) const DOMAIN_OBJECT: u64 = 3;

/// SplitMix64's finalizer: `z ← (z ⊕ z≫30)·0xbf58476d1ce4e5b9; z ← (z ⊕ z≫27)·0x94d049bb133111eb;
/// z ⊕ z≫31` (wrapping multiplications).
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Hash of `fields` under `seed` and `domain`, as described in the module documentation.
#[inline]
pub fn hash_tuple(seed: u64, domain: u64, fields: &[u64]) -> u64 {
    let mut h = mix64(seed ^ domain.wrapping_mul(GOLDEN_GAMMA));
    for &x in fields {
        h = mix64(h.wrapping_add(GOLDEN_GAMMA) ^ x);
    }
    h
}

/// The cache id of chunk `chunk` of object `object_id`: the key under which a server's cache
/// (its eviction policy, its store) holds that one chunk of a coded object. The simulator and
/// the live node both use this function, so a chunk is found under the same id in both.
///
/// `chunk` is the chunk's index in the stripe: `0..K` are the data chunks, `K..K+P` the parity
/// chunks. A replicated (small) object is cached under its own id, not through this function.
///
/// Definition (fixed; changing it changes every simulated result and orphans every stored
/// chunk): `((object_id ⊕ 0x6a09e667f3bcc908) · φ) ⊕ (chunk + 1)`, with φ = [`GOLDEN_GAMMA`]
/// and a wrapping multiplication. Multiplying by the odd φ is a bijection, so for a fixed
/// `chunk` distinct objects get distinct ids, and the chunks of one object differ in their
/// low bits. (`0x6a09e667f3bcc908` is the first SHA-512 initial hash word, a constant with no
/// structure.)
#[inline]
pub fn chunk_id(object_id: u64, chunk: usize) -> u64 {
    (object_id ^ 0x6a09_e667_f3bc_c908).wrapping_mul(GOLDEN_GAMMA) ^ (chunk as u64 + 1)
}

/// Maps a uniform 64-bit hash onto `0..n` without division bias worth mentioning:
/// `(h · n) ≫ 64` (Lemire's multiply-shift range reduction).
#[inline]
pub fn reduce(h: u64, n: usize) -> usize {
    ((h as u128 * n as u128) >> 64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix64_known_values() {
        // SplitMix64 seeded with 0 yields mix64(φ) first; the published first output is
        // 0xe220a8397b1dcdaf.
        assert_eq!(mix64(GOLDEN_GAMMA), 0xe220_a839_7b1d_cdaf);
        assert_eq!(mix64(0), 0);
    }

    #[test]
    fn reduce_stays_in_range() {
        for h in [0, 1, u64::MAX / 2, u64::MAX] {
            assert!(reduce(h, 100) < 100);
        }
        assert_eq!(reduce(u64::MAX, 100), 99);
    }

    #[test]
    fn chunk_id_known_values() {
        // Pinned: the simulator's results and the node's stored chunks depend on these.
        assert_eq!(
            chunk_id(0, 0),
            0x6a09_e667_f3bc_c908u64.wrapping_mul(GOLDEN_GAMMA) ^ 1
        );
        assert_eq!(chunk_id(0, 0), 0x298b_6bab_842c_5da9);
        assert_eq!(chunk_id(12_345, 3), 0xe740_b23e_de5e_2d01);
        assert_eq!(chunk_id(u64::MAX, 31), 0x383d_1a9a_fc89_2663);
        // The chunks of one object, and one chunk of neighbouring objects, all differ.
        let mut ids: Vec<u64> = (0..4)
            .flat_map(|o| (0..6).map(move |c| chunk_id(o, c)))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 24);
    }

    #[test]
    fn domains_differ() {
        assert_ne!(
            hash_tuple(0, DOMAIN_VNODE, &[0, 0]),
            hash_tuple(0, DOMAIN_BUCKET, &[0, 0])
        );
    }
}
