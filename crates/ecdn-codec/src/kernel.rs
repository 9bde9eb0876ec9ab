//! The bulk data path: outputs = coefficient matrix × sources over GF(2^8), in our own kernels.
//!
//! Every encode and every rebuild comes down to [`apply`]: each output is a sum of the sources,
//! each multiplied by a coefficient. Like ISA-L, the kernels compute **several outputs per pass
//! over the sources**: a 64-byte (or 32-byte) piece of each source is loaded once and multiplied
//! into every output's accumulator, which stays in a register until the piece is done; and the
//! shards are processed in cache blocks of [`BLOCK`] bytes so the sources of a block stay in L1
//! while all output groups read them.
//!
//! Three paths, chosen once at run time ([`Path::detect`]; `ECDN_GF_KERNEL=gfni|avx2|portable`
//! forces one, for benchmarks):
//!
//! * **GFNI + AVX-512** (`vgf2p8affineqb`): multiplication by a constant c is a linear map of
//!   GF(2)^8, so it is one 8×8 bit-matrix product per byte — the affine instruction with c's
//!   matrix (built for our field's polynomial 0x11D, not the instruction set's 0x11B), 64 bytes
//!   per instruction.
//! * **AVX2** (split-nibble tables): c·x = c·(x & 15) ⊕ c·(x & 0xF0), each half a 16-entry
//!   table lookup (`vpshufb`), 32 bytes per instruction.
//! * **Portable**: a 256-byte product table per coefficient, a byte at a time.
//!
//! All three compute exactly the same bytes (the tests check every path against the portable
//! one). `unsafe` is confined to this module: the SIMD functions are `unsafe` only because they
//! require CPU features, which [`Path::detect`] checks before any of them is called, and their
//! loads and stores stay within slices whose lengths are checked first.

use std::sync::OnceLock;

use crate::gf;

/// Bytes per cache block: shards longer than this are processed block by block.
pub(crate) const BLOCK: usize = 4 * 1024;

/// Outputs accumulated per pass over the sources (registers: 8 accumulators and the loaded
/// source leave room for the coefficients).
const GROUP: usize = 8;

/// A kernel implementation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// GFNI affine transforms on 512-bit vectors.
    Gfni,
    /// Split-nibble table lookups on 256-bit vectors.
    Avx2,
    /// Table lookups a byte at a time.
    Portable,
}

impl Path {
    /// The fastest path this CPU supports, unless `ECDN_GF_KERNEL` names another (a path the
    /// CPU lacks falls back to the detected one).
    pub fn detect() -> Path {
        let best = Self::best();
        match std::env::var("ECDN_GF_KERNEL").as_deref() {
            Ok("portable") => Path::Portable,
            Ok("avx2") if best != Path::Portable => Path::Avx2,
            _ => best,
        }
    }

    fn best() -> Path {
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("gfni")
            {
                return Path::Gfni;
            }
            if is_x86_feature_detected!("avx2") {
                return Path::Avx2;
            }
        }
        Path::Portable
    }

    /// The path [`apply`] uses (detected once).
    pub fn current() -> Path {
        static PATH: OnceLock<Path> = OnceLock::new();
        *PATH.get_or_init(Path::detect)
    }
}

/// `outputs[o] = Σ_c rows[o·k + c] · sources[c]`, byte by byte. All slices are `len` bytes
/// (checked by the callers), `rows.len() == outputs.len() · k`, `sources.len() == k`.
pub(crate) fn apply(rows: &[u8], k: usize, sources: &[&[u8]], outputs: Vec<&mut [u8]>, len: usize) {
    apply_with(Path::current(), rows, k, sources, outputs, len)
}

/// [`apply`] on a given path (tests and benchmarks).
pub(crate) fn apply_with(
    path: Path,
    rows: &[u8],
    k: usize,
    sources: &[&[u8]],
    mut outputs: Vec<&mut [u8]>,
    len: usize,
) {
    assert_eq!(
        rows.len(),
        outputs.len() * k,
        "one row of k coefficients per output"
    );
    assert_eq!(sources.len(), k, "k sources");
    assert!(
        sources.iter().all(|s| s.len() >= len) && outputs.iter().all(|o| o.len() >= len),
        "shards shorter than len"
    );
    if len == 0 || outputs.is_empty() {
        return;
    }
    let tables = Tables::new(path, rows);
    let mut start = 0;
    while start < len {
        let end = len.min(start + BLOCK);
        for (g, group) in outputs.chunks_mut(GROUP).enumerate() {
            let b = Block {
                tables: &tables,
                k,
                first: g * GROUP,
                sources,
                start,
                end,
            };
            b.run(path, group);
        }
        start = end;
    }
}

/// One cache block `[start, end)` of one group of outputs, whose rows begin at output `first`:
/// what every kernel works on.
struct Block<'a> {
    tables: &'a Tables,
    k: usize,
    first: usize,
    sources: &'a [&'a [u8]],
    start: usize,
    end: usize,
}

impl Block<'_> {
    /// Output `o` of the group's data for source `c` (see [`Tables`]).
    fn table(&self, o: usize, c: usize) -> &[u8] {
        self.tables.get((self.first + o) * self.k + c)
    }

    /// Computes the block into `group`: the path's vectors, then the tail a byte at a time.
    fn run(&self, path: Path, group: &mut [&mut [u8]]) {
        let done = match path {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Path::Gfni` is only chosen when avx512f, avx512bw and gfni are detected.
            Path::Gfni => unsafe { x86::gfni(self, group) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Path::Avx2` is only chosen when avx2 is detected.
            Path::Avx2 => unsafe { x86::avx2(self, group) },
            _ => self.start,
        };
        self.bytes(path, group, done);
    }

    /// The bytes `[from, end)` a byte at a time (the whole block on the portable path, the
    /// tail shorter than a vector on the others).
    fn bytes(&self, path: Path, group: &mut [&mut [u8]], from: usize) {
        if from >= self.end {
            return;
        }
        for (o, out) in group.iter_mut().enumerate() {
            let out = &mut out[from..self.end];
            out.fill(0);
            for (c, src) in self.sources.iter().enumerate() {
                let t = self.table(o, c);
                let src = &src[from..self.end];
                match path {
                    Path::Portable => {
                        for (d, &s) in out.iter_mut().zip(src) {
                            *d ^= t[s as usize];
                        }
                    }
                    Path::Avx2 => {
                        for (d, &s) in out.iter_mut().zip(src) {
                            *d ^= t[(s & 15) as usize] ^ t[16 + (s >> 4) as usize];
                        }
                    }
                    Path::Gfni => {
                        let coef = gf_coefficient(t);
                        for (d, &s) in out.iter_mut().zip(src) {
                            *d ^= gf::mul(coef, s);
                        }
                    }
                }
            }
        }
    }
}

/// Per-coefficient data for a path, in `rows` order (output-major).
struct Tables {
    /// Portable: 256-byte product tables. AVX2: 32-byte (low, high nibble) tables. GFNI: the
    /// affine matrices as bytes (for the tail).
    bytes: Vec<u8>,
    stride: usize,
    /// GFNI: the affine matrices.
    words: Vec<u64>,
}

impl Tables {
    fn new(path: Path, rows: &[u8]) -> Tables {
        let stride = match path {
            Path::Portable => 256,
            Path::Avx2 => 32,
            Path::Gfni => 8,
        };
        let mut bytes = Vec::with_capacity(rows.len() * stride);
        for &c in rows {
            match path {
                Path::Portable => bytes.extend((0..=255u8).map(|x| gf::mul(c, x))),
                Path::Avx2 => {
                    bytes.extend((0..16u8).map(|x| gf::mul(c, x)));
                    bytes.extend((0..16u8).map(|x| gf::mul(c, x << 4)));
                }
                Path::Gfni => bytes.extend_from_slice(&affine_matrix(c).to_le_bytes()),
            }
        }
        let words = match path {
            Path::Gfni => rows.iter().map(|&c| affine_matrix(c)).collect(),
            _ => Vec::new(),
        };
        Tables {
            bytes,
            stride,
            words,
        }
    }

    fn get(&self, i: usize) -> &[u8] {
        &self.bytes[i * self.stride..(i + 1) * self.stride]
    }
}

/// The matrix of x ↦ c·x for `vgf2p8affineqb`: output bit i is the parity of
/// (byte 7 − i of the matrix) AND x, so that byte holds, at bit j, bit i of c·2^j. Looked up
/// in a table built at compile time: every encode of a stripe builds its coefficients'
/// matrices, and computing them (64 field products each) cost 7% of the kernel's time in a
/// cluster of 32 KiB sub-chunks.
fn affine_matrix(c: u8) -> u64 {
    AFFINE[c as usize]
}

static AFFINE: [u64; 256] = affine_table();

const fn affine_table() -> [u64; 256] {
    let mut table = [0u64; 256];
    let mut c = 0;
    while c < 256 {
        // powers[j] = c·2^j, by repeated multiplication by x modulo the polynomial.
        let mut powers = [0u8; 8];
        let mut x = c as u16;
        let mut j = 0;
        while j < 8 {
            powers[j] = x as u8;
            x <<= 1;
            if x & 0x100 != 0 {
                x ^= gf::POLYNOMIAL;
            }
            j += 1;
        }
        let mut m = 0u64;
        let mut i = 0;
        while i < 8 {
            let mut row = 0u64;
            let mut j = 0;
            while j < 8 {
                row |= ((powers[j] as u64 >> i) & 1) << j;
                j += 1;
            }
            m |= row << (8 * (7 - i));
            i += 1;
        }
        table[c] = m;
        c += 1;
    }
    table
}

/// The coefficient whose affine matrix is `m` (byte 7 − i, bit 0 = bit i of c·1 = bit i of c).
fn gf_coefficient(m: &[u8]) -> u8 {
    let m = u64::from_le_bytes(m.try_into().expect("8-byte matrix"));
    (0..8).fold(0u8, |c, i| c | ((((m >> (8 * (7 - i))) & 1) as u8) << i))
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{Block, GROUP};

    /// GFNI path over `[start, end)`, 64 bytes at a time; returns where the unprocessed tail
    /// (under 64 bytes) begins.
    ///
    /// # Safety
    /// The CPU must support avx512f, avx512bw and gfni; every slice holds at least `end` bytes.
    #[target_feature(enable = "avx512f,avx512bw,gfni")]
    pub(super) unsafe fn gfni(b: &Block, group: &mut [&mut [u8]]) -> usize {
        let Block {
            tables,
            k,
            first,
            sources,
            start,
            end,
        } = *b;
        let g = group.len();
        debug_assert!(g <= GROUP);
        // This group's matrices, output-major: output o's row is mats[o·k..(o + 1)·k]. Each use
        // broadcasts one from L1 (a single load µop), cheaper than keeping them anywhere else.
        let mats = &tables.words[first * k..(first + g) * k];
        // Few outputs: two vectors per step, so that each output has two independent chains of
        // XORs (one output alone would wait on its single accumulator). Four vectors for one or
        // two outputs, two for up to eight, and software prefetching were no faster (paired runs
        // against ISA-L, 2026-11-24): the 4 MiB shapes are bound by L3 bandwidth.
        let mut at = start;
        if g <= 4 {
            at = steps::<2, 4>(mats, k, sources, group, at, end);
        }
        steps::<1, GROUP>(mats, k, sources, group, at, end)
    }

    /// `V` vectors of 64 bytes per step for up to `G` outputs (the group must have at most G):
    /// each output keeps V independent chains of XORs. Returns where it stopped (fewer than
    /// 64·V bytes before `end`).
    #[target_feature(enable = "avx512f,avx512bw,gfni")]
    #[inline]
    fn steps<const V: usize, const G: usize>(
        mats: &[u64],
        k: usize,
        sources: &[&[u8]],
        group: &mut [&mut [u8]],
        mut at: usize,
        end: usize,
    ) -> usize {
        let g = group.len();
        debug_assert!(g <= G);
        while at + 64 * V <= end {
            let mut acc = [[_mm512_setzero_si512(); V]; G];
            for (c, src) in sources.iter().enumerate() {
                let mut x = [_mm512_setzero_si512(); V];
                for (v, x) in x.iter_mut().enumerate() {
                    // SAFETY: at + 64·V ≤ end ≤ src.len().
                    *x = unsafe { _mm512_loadu_si512(src.as_ptr().add(at + 64 * v).cast()) };
                }
                for (o, acc) in acc.iter_mut().take(g).enumerate() {
                    let m = _mm512_set1_epi64(mats[o * k + c] as i64);
                    for (a, x) in acc.iter_mut().zip(&x) {
                        *a = _mm512_xor_si512(*a, _mm512_gf2p8affine_epi64_epi8::<0>(*x, m));
                    }
                }
            }
            for (out, acc) in group.iter_mut().zip(&acc) {
                for (v, a) in acc.iter().enumerate() {
                    // SAFETY: at + 64·V ≤ end ≤ out.len().
                    unsafe { _mm512_storeu_si512(out.as_mut_ptr().add(at + 64 * v).cast(), *a) };
                }
            }
            at += 64 * V;
        }
        at
    }

    /// AVX2 path over `[start, end)`, 32 bytes at a time; returns where the tail begins.
    ///
    /// # Safety
    /// The CPU must support avx2; every slice holds at least `end` bytes.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn avx2(b: &Block, group: &mut [&mut [u8]]) -> usize {
        let (sources, start, end) = (b.sources, b.start, b.end);
        let g = group.len();
        let mask = _mm256_set1_epi8(0x0f);
        let mut at = start;
        while at + 32 <= end {
            let mut acc = [_mm256_setzero_si256(); GROUP];
            for (c, src) in sources.iter().enumerate() {
                // SAFETY: at + 32 ≤ end ≤ src.len().
                let x = unsafe { _mm256_loadu_si256(src.as_ptr().add(at).cast()) };
                let lo = _mm256_and_si256(x, mask);
                let hi = _mm256_and_si256(_mm256_srli_epi64::<4>(x), mask);
                for (o, a) in acc.iter_mut().take(g).enumerate() {
                    // The (low, high) nibble tables, each 16 bytes broadcast to both lanes.
                    let t = b.table(o, c);
                    // SAFETY: t is 32 bytes.
                    let (tl, th) = unsafe {
                        (
                            _mm256_broadcastsi128_si256(_mm_loadu_si128(t.as_ptr().cast())),
                            _mm256_broadcastsi128_si256(_mm_loadu_si128(t.as_ptr().add(16).cast())),
                        )
                    };
                    let p =
                        _mm256_xor_si256(_mm256_shuffle_epi8(tl, lo), _mm256_shuffle_epi8(th, hi));
                    *a = _mm256_xor_si256(*a, p);
                }
            }
            for (out, a) in group.iter_mut().zip(&acc) {
                // SAFETY: at + 32 ≤ end ≤ out.len().
                unsafe { _mm256_storeu_si256(out.as_mut_ptr().add(at).cast(), *a) };
            }
            at += 32;
        }
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn run(
        path: Path,
        rows: &[u8],
        k: usize,
        sources: &[Vec<u8>],
        len: usize,
        off: usize,
    ) -> Vec<Vec<u8>> {
        let p = rows.len() / k;
        let mut outs = vec![vec![0x5Au8; len + off]; p];
        let srcs: Vec<&[u8]> = sources.iter().map(|s| &s[off..]).collect();
        apply_with(
            path,
            rows,
            k,
            &srcs,
            outs.iter_mut().map(|o| &mut o[off..]).collect(),
            len,
        );
        outs
    }

    fn paths() -> Vec<Path> {
        let mut v = vec![Path::Portable];
        let best = Path::best();
        if best != Path::Portable {
            v.push(Path::Avx2);
        }
        if best == Path::Gfni {
            v.push(Path::Gfni);
        }
        v
    }

    #[test]
    fn affine_matrices_multiply() {
        for c in 0..=255u8 {
            let m = affine_matrix(c);
            assert_eq!(gf_coefficient(&m.to_le_bytes()), c);
            for x in 0..=255u8 {
                // Apply the matrix bit by bit as the instruction does.
                let mut y = 0u8;
                for i in 0..8 {
                    let row = (m >> (8 * (7 - i))) as u8;
                    y |= (((row & x).count_ones() & 1) as u8) << i;
                }
                assert_eq!(y, gf::mul(c, x), "c={c} x={x}");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Every path computes the portable path's bytes, for random shapes, lengths (across
        /// block and vector boundaries) and misaligned starts.
        #[test]
        fn every_path_matches_the_portable_one(
            k in 1usize..12,
            p in 1usize..12,
            len in prop_oneof![0usize..200, (BLOCK - 70)..(BLOCK + 70), Just(3 * BLOCK + 77)],
            off in 0usize..64,
            seed in any::<u64>(),
        ) {
            let mut x = seed | 1;
            let mut next = || { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x as u8 };
            let rows: Vec<u8> = (0..k * p).map(|i| if i % 7 == 3 { 0 } else if i % 5 == 1 { 1 } else { next() }).collect();
            let sources: Vec<Vec<u8>> = (0..k).map(|_| (0..len + off).map(|_| next()).collect()).collect();
            let want = run(Path::Portable, &rows, k, &sources, len, off);
            for path in paths() {
                prop_assert_eq!(&run(path, &rows, k, &sources, len, off), &want, "{:?}", path);
            }
            // And the portable path is the definition.
            for (o, out) in want.iter().enumerate() {
                for i in 0..len {
                    let v = (0..k).fold(0u8, |a, c| a ^ gf::mul(rows[o * k + c], sources[c][off + i]));
                    prop_assert_eq!(out[off + i], v);
                }
            }
        }
    }
}
