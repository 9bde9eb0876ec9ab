//! Deterministic object content: byte `o` of object `id` is a pure function of `(id, o)`, so
//! an origin can serve objects of any size without storing them and a client, a cache or a test
//! can verify any byte range it received.
//!
//! Definition (stable, part of ecdn's test contract): the object is a sequence of 8-byte words;
//! word `w` is `mix64(id ⊕ (w · 0x9E3779B97F4A7C15) ⊕ 0x5851F42D4C957F2D)` in little-endian
//! byte order, where `mix64` is the SplitMix64 finalizer. Byte `o` is byte `o mod 8` of word
//! `o / 8`.

/// The SplitMix64 finalizer.
#[inline]
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[inline]
fn word(id: u64, w: u64) -> [u8; 8] {
    mix64(id ^ w.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5851_F42D_4C95_7F2D).to_le_bytes()
}

/// Fills `buf` with the object's bytes starting at `offset`.
pub fn fill(id: u64, offset: u64, buf: &mut [u8]) {
    let mut pos = 0usize;
    let mut o = offset;
    // Leading partial word.
    let skip = (o % 8) as usize;
    if skip != 0 && !buf.is_empty() {
        let wb = word(id, o / 8);
        let n = (8 - skip).min(buf.len());
        buf[..n].copy_from_slice(&wb[skip..skip + n]);
        pos += n;
        o += n as u64;
    }
    let mut chunks = buf[pos..].chunks_exact_mut(8);
    for c in &mut chunks {
        c.copy_from_slice(&word(id, o / 8));
        o += 8;
    }
    let rest = chunks.into_remainder();
    if !rest.is_empty() {
        let n = rest.len();
        rest.copy_from_slice(&word(id, o / 8)[..n]);
    }
}

/// The object's bytes `[offset, offset + len)`.
pub fn bytes(id: u64, offset: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    fill(id, offset, &mut v);
    v
}

/// Index of the first byte of `data` that differs from the object's bytes at `offset`, if any.
pub fn first_mismatch(id: u64, offset: u64, data: &[u8]) -> Option<usize> {
    let mut buf = [0u8; 4096];
    let mut done = 0usize;
    while done < data.len() {
        let n = (data.len() - done).min(buf.len());
        fill(id, offset + done as u64, &mut buf[..n]);
        let got = &data[done..done + n];
        // Slice equality is a vectorised `memcmp`; the byte loop only runs on a mismatch (a
        // load driver verifies every byte it receives, so this is on its hot path).
        if buf[..n] != *got {
            let i = buf[..n].iter().zip(got).position(|(a, b)| a != b);
            return Some(done + i.unwrap_or(0));
        }
        done += n;
    }
    None
}

/// The object id of a URL path segment: a decimal u64 is used as is, anything else is hashed
/// (FNV-1a, as trace readers do), so `/obj/42` and trace id 42 are the same object.
pub fn object_id(segment: &str) -> u64 {
    ecdn_trace::parse_id(segment.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_window_matches_the_whole() {
        let whole = bytes(7, 0, 1000);
        for off in [0usize, 1, 7, 8, 9, 13, 500, 991] {
            for len in [0usize, 1, 3, 8, 9, 17, 100] {
                let end = (off + len).min(1000);
                assert_eq!(bytes(7, off as u64, end - off), whole[off..end]);
            }
        }
        assert_ne!(bytes(7, 0, 64), bytes(8, 0, 64));
        assert_eq!(first_mismatch(7, 3, &whole[3..900]), None);
        let mut bad = whole[100..200].to_vec();
        bad[42] ^= 1;
        assert_eq!(first_mismatch(7, 100, &bad), Some(42));
        // Past the first 4 KiB block compared.
        let mut long = bytes(7, 5, 10_000);
        assert_eq!(first_mismatch(7, 5, &long), None);
        long[9_999] ^= 0x80;
        assert_eq!(first_mismatch(7, 5, &long), Some(9_999));
        long[5_000] ^= 1;
        assert_eq!(first_mismatch(7, 5, &long), Some(5_000));
        assert_eq!(object_id("42"), 42);
        assert_ne!(object_id("video.mp4"), object_id("video2.mp4"));
    }
}
