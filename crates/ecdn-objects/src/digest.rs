//! Window digests: the SHA-256 of every window of every split, kept in the object's record, so
//! that a reader that holds no cluster key checks every split byte it uses against the record
//! alone (issue 61: clients read the splits from their servers themselves).
//!
//! A split is cut into **windows** of `ObjectMeta::window_stripes` sub-chunks (1 MiB of a
//! split with the cluster's sub-chunks, [`WINDOW_BYTES`]): window `w` of split `i` is the
//! split's bytes `w · window_stripes · sub_chunk` up to the next window or the split's end.
//! Its digest is at `i · windows + w` of `ObjectMeta::digests`. A reader takes a window of a
//! split into its decode only once the window's bytes hash to it.
//!
//! Why a digest per window and not the sub-chunk CRC-32Cs alone: a CRC catches a disk's or a
//! wire's accident, not bytes made to fit it; SHA-256 catches both. Why per window and not per
//! split: a reader decodes and sends a window as soon as `k` of its splits' windows are in,
//! so it must be able to check a window without the rest of the split.
//!
//! [`WindowHasher`] computes them while a writer encodes (a node's `PUT`, the parity budget's
//! new splits, a client's own write).

use sha2::{Digest, Sha256};

/// A window's bytes per split, at most (whole sub-chunks).
pub const WINDOW_BYTES: u64 = 1 << 20;

/// The sub-chunks of a window with `sub_chunk`-byte sub-chunks: [`WINDOW_BYTES`] of them, at
/// least one.
pub fn window_stripes(sub_chunk: u64) -> u64 {
    (WINDOW_BYTES / sub_chunk.max(1)).max(1)
}

/// Windows of each split of an object with `stripes` sub-chunks per split.
pub fn windows(stripes: u64, window_stripes: u64) -> u64 {
    stripes.div_ceil(window_stripes.max(1))
}

/// A SHA-256.
pub type Sha = [u8; 32];

/// The SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> Sha {
    Sha256::digest(bytes).into()
}

/// Window digests of every split, computed as the sub-chunks are produced stripe by stripe.
pub struct WindowHasher {
    window_stripes: u64,
    /// Per split: the window being hashed and its stripes so far, and the windows done.
    splits: Vec<(Sha256, u64, Vec<Sha>)>,
}

impl WindowHasher {
    /// For `splits` splits cut into windows of `window_stripes` sub-chunks.
    pub fn new(splits: usize, window_stripes: u64) -> WindowHasher {
        WindowHasher {
            window_stripes: window_stripes.max(1),
            splits: (0..splits)
                .map(|_| (Sha256::new(), 0, Vec::new()))
                .collect(),
        }
    }

    /// Split `split`'s next sub-chunk.
    pub fn push(&mut self, split: usize, sub: &[u8]) {
        let (h, n, done) = &mut self.splits[split];
        h.update(sub);
        *n += 1;
        if *n == self.window_stripes {
            done.push(std::mem::take(h).finalize().into());
            *n = 0;
        }
    }

    /// Every split's window digests, split-major (`ObjectMeta::digests`' order); a last
    /// window shorter than the others is closed here.
    pub fn finish(self) -> Vec<Sha> {
        let mut out = Vec::new();
        for (h, n, mut done) in self.splits {
            if n > 0 {
                done.push(h.finalize().into());
            }
            out.extend(done);
        }
        out
    }
}

/// `ObjectMeta::digests` as one hex string (64 digits per digest).
pub(crate) mod hex_digests {
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    use super::Sha;

    pub fn serialize<S: Serializer>(digests: &[Sha], s: S) -> Result<S::Ok, S::Error> {
        let mut out = String::with_capacity(digests.len() * 64);
        for d in digests {
            for b in d {
                out.push_str(&format!("{b:02x}"));
            }
        }
        s.serialize_str(&out)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Sha>, D::Error> {
        let s = String::deserialize(d)?;
        if s.len() % 64 != 0 {
            return Err(D::Error::custom("digests: need 64 hex digits per digest"));
        }
        s.as_bytes()
            .chunks(64)
            .map(|c| {
                let mut d = [0u8; 32];
                for (i, pair) in c.chunks(2).enumerate() {
                    let hex = std::str::from_utf8(pair).map_err(D::Error::custom)?;
                    d[i] = u8::from_str_radix(hex, 16)
                        .map_err(|_| D::Error::custom("digests: not hex"))?;
                }
                Ok(d)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_close_every_window_stripes_and_at_the_end() {
        let mut h = WindowHasher::new(2, 2);
        for j in 0..5u8 {
            h.push(0, &[j]);
            h.push(1, &[j + 10]);
        }
        let d = h.finish();
        assert_eq!(d.len(), 6);
        assert_eq!(d[0], sha256(&[0, 1]));
        assert_eq!(d[2], sha256(&[4]));
        assert_eq!(d[3], sha256(&[10, 11]));
        assert_eq!(d[5], sha256(&[14]));
        assert_eq!(windows(5, 2), 3);
        assert_eq!(window_stripes(32 << 10), 32);
        assert_eq!(window_stripes(4 << 20), 1);
    }
}
