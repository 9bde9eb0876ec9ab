//! The bulk data path: outputs = coefficient matrix × sources over GF(2^8), on
//! `reed-solomon-erasure`'s SIMD multiply-(xor-)into-slice kernels.

use reed_solomon_erasure::galois_8::{mul_slice, mul_slice_xor};

/// Bytes per cache block: shards longer than this are processed block by block so the K source
/// blocks and the output block being accumulated stay in L1/L2 instead of streaming every whole
/// output K times through the cache hierarchy.
pub(crate) const BLOCK: usize = 4 * 1024;

/// `outputs[o] = Σ_c rows[o·k + c] · sources[c]`, byte by byte. All slices are `len` bytes
/// (checked by the callers), `rows.len() == outputs.len() · k`, `sources.len() == k`.
pub(crate) fn apply(rows: &[u8], k: usize, sources: &[&[u8]], outputs: Vec<&mut [u8]>, len: usize) {
    debug_assert_eq!(rows.len(), outputs.len() * k);
    debug_assert_eq!(sources.len(), k);
    if len == 0 {
        return;
    }
    // Each output's unprocessed tail; each block splits its head off.
    let mut rest = outputs;
    let mut start = 0;
    while start < len {
        let end = len.min(start + BLOCK);
        for (o, tail) in rest.iter_mut().enumerate() {
            let (out, after) = std::mem::take(tail).split_at_mut(end - start);
            *tail = after;
            combine(&rows[o * k..(o + 1) * k], sources, start, end, out);
        }
        start = end;
    }
}

/// `out = Σ_c coefs[c] · sources[c][start..end]`.
fn combine(coefs: &[u8], sources: &[&[u8]], start: usize, end: usize, out: &mut [u8]) {
    let mut first = true;
    for (&c, src) in coefs.iter().zip(sources) {
        let src = &src[start..end];
        match (c, first) {
            (0, _) => continue,
            (1, true) => out.copy_from_slice(src),
            (_, true) => mul_slice(c, src, out),
            (_, false) => mul_slice_xor(c, src, out),
        }
        first = false;
    }
    if first {
        out.fill(0);
    }
}
