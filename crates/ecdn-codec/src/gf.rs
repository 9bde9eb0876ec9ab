//! Scalar arithmetic in GF(2^8) and the small matrices of the code: the field, the generator
//! matrix of FORMAT.md and decode matrices.
//!
//! The field is GF(2)\[x\] / (x^8 + x^4 + x^3 + x^2 + 1) ([`POLYNOMIAL`] = 0x11D) with primitive
//! element x = 2 ([`GENERATOR`]); a byte's bit i is the coefficient of x^i and addition is XOR.
//! This is the field of `reed-solomon-erasure`'s `galois_8`, of ISA-L and of Backblaze's
//! JavaReedSolomon, so bytes coded here interoperate with theirs given the same matrix.
//!
//! Nothing here is on the bulk data path (that is [`crate::Codec`]'s job): these are the
//! per-shape and per-erasure-pattern computations (K × K inversions for K ≤ 256).

use crate::CodecError;

/// The field's reducing polynomial x^8 + x^4 + x^3 + x^2 + 1, bit i = coefficient of x^i.
pub const POLYNOMIAL: u16 = 0x11D;
/// The primitive element x whose powers 2^0 .. 2^254 are the 255 non-zero field elements.
pub const GENERATOR: u8 = 2;
/// Largest K + P: the generator's rows are evaluation points 0 ..= 255, which must be distinct.
pub const MAX_SHARDS: usize = 256;

struct Tables {
    /// `exp[i] = 2^i` for i in 0 .. 510 (doubled so `exp[log a + log b]` needs no reduction).
    exp: [u8; 510],
    /// `log[a]` for a ≠ 0 (`log[0]` is unused and 0).
    log: [u8; 256],
}

const fn build_tables() -> Tables {
    let mut exp = [0u8; 510];
    let mut log = [0u8; 256];
    let mut x: u16 = 1;
    let mut i = 0;
    while i < 255 {
        exp[i] = x as u8;
        exp[i + 255] = x as u8;
        log[x as usize] = i as u8;
        x <<= 1;
        if x & 0x100 != 0 {
            x ^= POLYNOMIAL;
        }
        i += 1;
    }
    Tables { exp, log }
}

static TABLES: Tables = build_tables();

/// a · b in the field.
#[inline]
pub fn mul(a: u8, b: u8) -> u8 {
    if a == 0 || b == 0 {
        return 0;
    }
    TABLES.exp[TABLES.log[a as usize] as usize + TABLES.log[b as usize] as usize]
}

/// The multiplicative inverse of `a`, or `None` for 0.
#[inline]
pub fn inv(a: u8) -> Option<u8> {
    if a == 0 {
        return None;
    }
    Some(TABLES.exp[(255 - TABLES.log[a as usize] as usize) % 255])
}

/// a^n, with 0^0 = 1 (the convention the generator matrix needs for its row 0).
pub fn pow(a: u8, n: usize) -> u8 {
    if n == 0 {
        return 1;
    }
    if a == 0 {
        return 0;
    }
    TABLES.exp[(TABLES.log[a as usize] as usize * n) % 255]
}

/// The product of the row-major `n × m` matrix `a` and the row-major `m × q` matrix `b`.
pub fn mat_mul(a: &[u8], b: &[u8], n: usize, m: usize, q: usize) -> Vec<u8> {
    debug_assert_eq!(a.len(), n * m);
    debug_assert_eq!(b.len(), m * q);
    let mut out = vec![0u8; n * q];
    for r in 0..n {
        for t in 0..m {
            let f = a[r * m + t];
            if f == 0 {
                continue;
            }
            for c in 0..q {
                out[r * q + c] ^= mul(f, b[t * q + c]);
            }
        }
    }
    out
}

/// The inverse of the row-major `n × n` matrix `m` by Gauss–Jordan elimination, or `None` if it
/// is singular (or not `n × n`).
pub fn invert(m: &[u8], n: usize) -> Option<Vec<u8>> {
    if m.len() != n * n {
        return None;
    }
    let mut a = m.to_vec();
    let mut out = vec![0u8; n * n];
    for i in 0..n {
        out[i * n + i] = 1;
    }
    for col in 0..n {
        let pivot = (col..n).find(|&r| a[r * n + col] != 0)?;
        if pivot != col {
            for c in 0..n {
                a.swap(pivot * n + c, col * n + c);
                out.swap(pivot * n + c, col * n + c);
            }
        }
        let f = inv(a[col * n + col])?;
        for c in 0..n {
            a[col * n + c] = mul(a[col * n + c], f);
            out[col * n + c] = mul(out[col * n + c], f);
        }
        for r in 0..n {
            let g = a[r * n + col];
            if r == col || g == 0 {
                continue;
            }
            for c in 0..n {
                a[r * n + c] ^= mul(g, a[col * n + c]);
                out[r * n + c] ^= mul(g, out[col * n + c]);
            }
        }
    }
    Some(out)
}

/// Checks a code shape: K ≥ 1, P ≥ 0, K + P ≤ 256.
pub fn check_shape(k: usize, p: usize) -> Result<(), CodecError> {
    if k == 0 || k.checked_add(p).is_none_or(|n| n > MAX_SHARDS) {
        return Err(CodecError::InvalidShape { k, p });
    }
    Ok(())
}

/// The row-major `(K + P) × K` generator matrix G of FORMAT.md: with the Vandermonde matrix
/// V\[r\]\[c\] = r^c (r = 0 .. K+P−1 read as field elements, c = 0 .. K−1) and T its top K × K
/// block, G = V · T⁻¹. Its top K rows are the identity (the code is systematic) and any K of its
/// rows are linearly independent (any K rows of V are a Vandermonde matrix on distinct points).
/// Shard r of a stripe is Σ_c G\[r\]\[c\] · data_c, byte by byte.
pub fn generator_matrix(k: usize, p: usize) -> Result<Vec<u8>, CodecError> {
    check_shape(k, p)?;
    let n = k + p;
    let mut v = vec![0u8; n * k];
    for r in 0..n {
        for c in 0..k {
            v[r * k + c] = pow(r as u8, c);
        }
    }
    let top_inv = invert(&v[..k * k], k).ok_or(CodecError::Singular)?;
    Ok(mat_mul(&v, &top_inv, n, k, k))
}

/// Coefficients that rebuild shards `targets` from the K shards `sources` (distinct shard
/// indices, `sources.len() == K`): a row-major `targets.len() × K` matrix whose row t gives
/// shard `targets[t]` as Σ_c row\[c\] · shard `sources[c]`. `generator` is
/// [`generator_matrix`]`(k, p)`.
pub fn rebuild_matrix(
    generator: &[u8],
    k: usize,
    sources: &[usize],
    targets: &[usize],
) -> Result<Vec<u8>, CodecError> {
    let decode = decode_matrix(generator, k, sources)?;
    Ok(rebuild_rows(generator, k, &decode, targets))
}

/// The inverse of the K × K matrix formed by the `sources` rows of `generator`: it maps the K
/// source shards back to the K data shards.
pub fn decode_matrix(generator: &[u8], k: usize, sources: &[usize]) -> Result<Vec<u8>, CodecError> {
    if sources.len() != k {
        return Err(CodecError::TooFewShards {
            present: sources.len(),
            needed: k,
        });
    }
    let rows = generator.len() / k.max(1);
    let mut sub = Vec::with_capacity(k * k);
    for &s in sources {
        if s >= rows {
            return Err(CodecError::NoSuchChunk {
                chunk: s,
                total: rows,
            });
        }
        sub.extend_from_slice(&generator[s * k..(s + 1) * k]);
    }
    invert(&sub, k).ok_or(CodecError::Singular)
}

/// Rows of [`rebuild_matrix`] given the decode matrix D of the sources: data shard i is row i of
/// D, shard r in general is G[r] · D.
pub(crate) fn rebuild_rows(
    generator: &[u8],
    k: usize,
    decode: &[u8],
    targets: &[usize],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(targets.len() * k);
    for &t in targets {
        if t < k {
            out.extend_from_slice(&decode[t * k..(t + 1) * k]);
        } else {
            out.extend(mat_mul(&generator[t * k..(t + 1) * k], decode, 1, k, k));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_axioms_hold() {
        for a in 0..=255u8 {
            assert_eq!(mul(a, 1), a);
            assert_eq!(mul(a, 0), 0);
            if a != 0 {
                assert_eq!(mul(a, inv(a).unwrap()), 1);
            }
            for b in 0..=255u8 {
                assert_eq!(mul(a, b), mul(b, a));
            }
        }
        assert_eq!(inv(0), None);
        // x^8 = x^4 + x^3 + x^2 + 1.
        assert_eq!(pow(GENERATOR, 8), 0x1D);
        assert_eq!(pow(0, 0), 1);
        assert_eq!(pow(0, 3), 0);
    }

    #[test]
    fn generator_is_systematic_and_mds_for_small_shapes() {
        for (k, p) in [(1, 0), (1, 3), (3, 1), (3, 3), (4, 2), (5, 4)] {
            let g = generator_matrix(k, p).unwrap();
            for r in 0..k {
                for c in 0..k {
                    assert_eq!(g[r * k + c], u8::from(r == c));
                }
            }
            // Every K-subset of rows is invertible.
            let n = k + p;
            for mask in 0u32..(1 << n) {
                if mask.count_ones() as usize != k {
                    continue;
                }
                let rows: Vec<usize> = (0..n).filter(|r| mask & (1 << r) != 0).collect();
                assert!(decode_matrix(&g, k, &rows).is_ok(), "{k},{p} rows {rows:?}");
            }
        }
    }

    #[test]
    fn shapes_are_checked() {
        assert!(generator_matrix(0, 1).is_err());
        assert!(generator_matrix(200, 57).is_err());
        assert!(generator_matrix(255, 1).is_ok());
        assert!(check_shape(256, 0).is_ok());
        assert!(check_shape(usize::MAX, 2).is_err());
    }

    #[test]
    fn invert_rejects_singular() {
        assert_eq!(invert(&[1, 1, 1, 1], 2), None);
        assert_eq!(invert(&[1, 2, 3], 2), None);
        let m = [3u8, 7, 9, 200];
        let i = invert(&m, 2).unwrap();
        assert_eq!(mat_mul(&m, &i, 2, 2, 2), vec![1, 0, 0, 1]);
    }
}
