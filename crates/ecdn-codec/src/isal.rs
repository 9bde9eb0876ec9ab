//! Intel ISA-L's erasure code (`libisal`, Debian's `libisal-dev`) behind the [`Codec`] trait —
//! the yardstick the benchmark compares [`crate::ReedSolomonCodec`] with. Only built with the
//! `isal` feature (build.rs then links `libisal`).
//!
//! ISA-L works in the same field (GF(2^8) mod 0x11D) but its own `gf_gen_rs_matrix` builds a
//! different generator, so [`IsalCodec`] feeds it FORMAT.md's matrix: its chunks are
//! byte-identical to `ReedSolomonCodec`'s and the two interoperate.

use std::collections::HashMap;
use std::os::raw::{c_int, c_uchar};
use std::sync::{Arc, Mutex, PoisonError};

use crate::{check_encode, gf, plan_rebuild, Codec, CodecError, Shard};

mod ffi {
    use std::os::raw::{c_int, c_uchar};

    // /usr/include/isa-l/erasure_code.h (ISA-L 2.30).
    extern "C" {
        pub fn ec_init_tables(k: c_int, rows: c_int, a: *mut c_uchar, gftbls: *mut c_uchar);
        pub fn ec_encode_data(
            len: c_int,
            k: c_int,
            rows: c_int,
            gftbls: *mut c_uchar,
            data: *mut *mut c_uchar,
            coding: *mut *mut c_uchar,
        );
        pub fn gf_invert_matrix(input: *mut c_uchar, output: *mut c_uchar, n: c_int) -> c_int;
        pub fn gf_gen_rs_matrix(a: *mut c_uchar, m: c_int, k: c_int);
        pub fn gf_mul(a: c_uchar, b: c_uchar) -> c_uchar;
    }
}

/// Largest length handed to one `ec_encode_data` call (its length is a C `int`).
const MAX_CALL: usize = 1 << 30;

/// ISA-L's scalar field multiply.
pub fn gf_mul(a: u8, b: u8) -> u8 {
    // SAFETY: pure function on two bytes.
    unsafe { ffi::gf_mul(a, b) }
}

/// ISA-L's own `gf_gen_rs_matrix` for (K, P): row-major (K + P) × K, identity on top, parity
/// row r column c = 2^(c·r) (not FORMAT.md's matrix).
pub fn isal_rs_matrix(k: usize, p: usize) -> Result<Vec<u8>, CodecError> {
    gf::check_shape(k, p)?;
    let mut a = vec![0u8; (k + p) * k];
    // SAFETY: `a` holds m × k bytes as the function requires.
    unsafe { ffi::gf_gen_rs_matrix(a.as_mut_ptr(), (k + p) as c_int, k as c_int) };
    Ok(a)
}

/// ISA-L's `gf_invert_matrix` of the row-major n × n matrix `m`, or `None` if singular.
pub fn invert_matrix(m: &[u8], n: usize) -> Option<Vec<u8>> {
    if m.len() != n * n || n > gf::MAX_SHARDS {
        return None;
    }
    let mut input = m.to_vec();
    let mut out = vec![0u8; n * n];
    // SAFETY: both buffers hold n × n bytes; the input copy may be destroyed.
    let rc = unsafe { ffi::gf_invert_matrix(input.as_mut_ptr(), out.as_mut_ptr(), n as c_int) };
    (rc == 0).then_some(out)
}

/// Expanded multiplication tables for `rows` (row-major `n × k` coefficients).
fn init_tables(k: usize, rows: &[u8]) -> Vec<u8> {
    let n = rows.len() / k;
    let mut a = rows.to_vec();
    let mut tables = vec![0u8; 32 * k * n];
    if n > 0 {
        // SAFETY: `a` holds n × k coefficients, `tables` the 32 · k · n bytes ISA-L fills.
        unsafe { ffi::ec_init_tables(k as c_int, n as c_int, a.as_mut_ptr(), tables.as_mut_ptr()) };
    }
    tables
}

/// `outputs = rows × sources` with ISA-L (`tables` from [`init_tables`]).
fn run(tables: &[u8], k: usize, sources: &[&[u8]], outputs: &mut [&mut [u8]], len: usize) {
    let n = outputs.len();
    debug_assert_eq!(tables.len(), 32 * k * n);
    let mut start = 0;
    while start < len && n > 0 {
        let end = len.min(start + MAX_CALL);
        // ISA-L reads the sources through `*mut` pointers but never writes them.
        let mut src: Vec<*mut c_uchar> = sources
            .iter()
            .map(|s| s[start..].as_ptr() as *mut c_uchar)
            .collect();
        let mut dst: Vec<*mut c_uchar> = outputs
            .iter_mut()
            .map(|o| o[start..].as_mut_ptr())
            .collect();
        // SAFETY: k source and n output pointers, each valid for `end − start` bytes (all
        // slices are `len` long, checked by the callers); outputs are distinct `&mut` slices
        // and do not alias the sources; `tables` holds 32 · k · n bytes.
        unsafe {
            ffi::ec_encode_data(
                (end - start) as c_int,
                k as c_int,
                n as c_int,
                tables.as_ptr() as *mut c_uchar,
                src.as_mut_ptr(),
                dst.as_mut_ptr(),
            )
        };
        start = end;
    }
}

/// Erasure pattern key: source set and target set, as bit masks over 256 shards.
type PatternKey = ([u64; 4], [u64; 4]);

fn mask(indices: &[usize]) -> [u64; 4] {
    let mut m = [0u64; 4];
    for &i in indices {
        m[i / 64] |= 1 << (i % 64);
    }
    m
}

/// [`Codec`] on ISA-L's `ec_encode_data` (AVX-512/AVX2 dispatch at run time) with FORMAT.md's
/// generator matrix. Decode tables are built once per erasure pattern (inverse via ISA-L's
/// `gf_invert_matrix`) and cached.
pub struct IsalCodec {
    k: usize,
    p: usize,
    generator: Vec<u8>,
    encode_tables: Vec<u8>,
    decode_cache: Mutex<HashMap<PatternKey, Arc<Vec<u8>>>>,
}

impl IsalCodec {
    /// A (K, P) codec; errors unless K ≥ 1 and K + P ≤ 256.
    pub fn new(k: usize, p: usize) -> Result<Self, CodecError> {
        let generator = gf::generator_matrix(k, p)?;
        let encode_tables = init_tables(k, &generator[k * k..]);
        Ok(IsalCodec {
            k,
            p,
            generator,
            encode_tables,
            decode_cache: Mutex::new(HashMap::new()),
        })
    }

    fn decode_tables(
        &self,
        sources: &[usize],
        targets: &[usize],
    ) -> Result<Arc<Vec<u8>>, CodecError> {
        let key = (mask(sources), mask(targets));
        if let Some(t) = self
            .decode_cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            return Ok(Arc::clone(t));
        }
        let mut sub = Vec::with_capacity(self.k * self.k);
        for &s in sources {
            sub.extend_from_slice(&self.generator[s * self.k..(s + 1) * self.k]);
        }
        let decode = invert_matrix(&sub, self.k).ok_or(CodecError::Singular)?;
        let rows = gf::rebuild_rows(&self.generator, self.k, &decode, targets);
        let tables = Arc::new(init_tables(self.k, &rows));
        let mut cache = self
            .decode_cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= crate::rs::DECODE_CACHE_CAPACITY {
            cache.clear();
        }
        cache.insert(key, Arc::clone(&tables));
        Ok(tables)
    }
}

impl std::fmt::Debug for IsalCodec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IsalCodec")
            .field("k", &self.k)
            .field("p", &self.p)
            .finish()
    }
}

impl Codec for IsalCodec {
    fn data_shards(&self) -> usize {
        self.k
    }

    fn parity_shards(&self) -> usize {
        self.p
    }

    fn encode(&self, data: &[&[u8]], parity: &mut [&mut [u8]]) -> Result<(), CodecError> {
        let len = check_encode(self.k, self.p, data, parity)?;
        run(&self.encode_tables, self.k, data, parity, len);
        Ok(())
    }

    fn reconstruct_shards(&self, shards: &mut [Shard<'_>]) -> Result<(), CodecError> {
        let plan = plan_rebuild(self.k, self.p, shards)?;
        if plan.targets.is_empty() || plan.len == 0 {
            return Ok(());
        }
        let tables = self.decode_tables(&plan.sources, &plan.targets)?;
        let mut sources: Vec<&[u8]> = Vec::with_capacity(self.k);
        let mut outputs: Vec<&mut [u8]> = Vec::with_capacity(plan.targets.len());
        for slot in shards.iter_mut() {
            match slot {
                Shard::Present(s) if sources.len() < self.k => sources.push(s),
                Shard::Rebuild(b) => outputs.push(&mut **b),
                _ => {}
            }
        }
        run(&tables, self.k, &sources, &mut outputs, plan.len);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ReedSolomonCodec;

    #[test]
    fn same_field_as_ours() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert_eq!(gf_mul(a, b), gf::mul(a, b));
            }
        }
        let m = gf::generator_matrix(4, 2).unwrap();
        let rows = [1usize, 2, 4, 5];
        let mut sub = Vec::new();
        for r in rows {
            sub.extend_from_slice(&m[r * 4..r * 4 + 4]);
        }
        assert_eq!(invert_matrix(&sub, 4), gf::invert(&sub, 4));
        // ISA-L's own matrix is another code: parity row r, column c = 2^(r·c).
        let own = isal_rs_matrix(4, 2).unwrap();
        for r in 0..2 {
            for c in 0..4 {
                assert_eq!(own[(4 + r) * 4 + c], gf::pow(2, c * r));
            }
        }
        assert_ne!(own, m);
    }

    #[test]
    fn byte_identical_to_reed_solomon_codec() {
        for (k, p) in [(3, 1), (3, 2), (10, 4), (2, 0)] {
            let len = 100_003;
            let data: Vec<Vec<u8>> = (0..k)
                .map(|i| (0..len).map(|x| (x * 7 + i * 13 + x / 255) as u8).collect())
                .collect();
            let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
            let mut ours = vec![vec![0u8; len]; p];
            let mut theirs = vec![vec![1u8; len]; p];
            let rs = ReedSolomonCodec::new(k, p).unwrap();
            let isal = IsalCodec::new(k, p).unwrap();
            let mut o: Vec<&mut [u8]> = ours.iter_mut().map(Vec::as_mut_slice).collect();
            rs.encode(&refs, &mut o).unwrap();
            let mut t: Vec<&mut [u8]> = theirs.iter_mut().map(Vec::as_mut_slice).collect();
            isal.encode(&refs, &mut t).unwrap();
            assert_eq!(ours, theirs);
            if p == 0 {
                continue;
            }
            // Lose data shard 0 (and parity 0 if P > 1), rebuild with ISA-L.
            let mut all: Vec<Vec<u8>> = data.iter().chain(&ours).cloned().collect();
            let mut present = vec![true; k + p];
            present[0] = false;
            all[0].fill(0);
            if p > 1 {
                present[k] = false;
                all[k].fill(0);
            }
            let mut refs: Vec<&mut [u8]> = all.iter_mut().map(Vec::as_mut_slice).collect();
            isal.reconstruct(&mut refs, &present).unwrap();
            assert_eq!(all[0], data[0]);
            assert_eq!(all[k], ours[0]);
        }
    }
}
