//! The coded file (TOFEC §II-B and §III, "Shared Key", Fig. 3): an object of `size` bytes cut
//! into `K` data **strips** and coded with an `(N, K)` Reed–Solomon code into `N` strips, stored
//! one after the other as one object of `N · strip` bytes under the object's key. The same
//! file then serves every code `(n, k)` with `k` dividing `K`: a **chunk** is `m = K/k`
//! consecutive strips, there are `N/m` of them, and any `k` chunks are `K` strips, enough to
//! decode. A read asks `n ≤ N/m` chunks as byte ranges of the one object.
//!
//! The code is systematic: strip `i < K` is bytes `[i·strip, (i+1)·strip)` of the object (the
//! last one padded with zeros), so the first `K` strips are the object itself.
//!
//! The [`Manifest`] (size, `N`, `K`, strip size, the SHA-256 of the object and the CRC-32C of
//! every strip) travels with the object as S3 user metadata (`x-amz-meta-ecdn-tofec`); a strip
//! whose CRC does not match is treated as a failed read, and a strip rebuilt from the parity
//! is checked against its CRC before the object is answered. The SHA-256 names the object's
//! bytes for whoever reads the file without the proxy; reads do not compute it (at 3 MB it was
//! a third of a read's CPU on loopback, and every byte answered is already covered by a CRC:
//! BENCHMARKS.md, issue 64).

use std::fmt;

use bytes::Bytes;
use ecdn_codec::{Codec, CodecCache, Shard};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The metadata key (without `x-amz-meta-`) that holds a coded file's [`Manifest`].
pub const MANIFEST_KEY: &str = "ecdn-tofec";

/// How an object was coded into strips.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The object's size.
    pub size: u64,
    /// `N`: strips stored.
    pub n: usize,
    /// `K`: data strips.
    pub k: usize,
    /// Bytes per strip.
    pub strip: u64,
    /// SHA-256 of the object, hex.
    pub sha256: String,
    /// CRC-32C of each of the `N` strips.
    pub crcs: Vec<u32>,
}

/// A manifest or a strip that cannot be right.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StripError {
    #[error("bad manifest: {0}")]
    Manifest(String),
    #[error("the code ({n}, {k}) does not fit a file of {strips_n} strips, {strips_k} of them data (k must divide K and n·K/k ≤ N)")]
    Code {
        n: usize,
        k: usize,
        strips_n: usize,
        strips_k: usize,
    },
    #[error("chunk {chunk} is {got} bytes, expected {expected}")]
    ChunkLength {
        chunk: usize,
        got: usize,
        expected: usize,
    },
    #[error("strip {0} fails its CRC-32C")]
    Corrupt(usize),
    #[error("{got} chunks of {m} strips cannot be decoded: {need} strips needed")]
    TooFew { got: usize, m: usize, need: usize },
    #[error("strip {0}, rebuilt from the others, fails its CRC-32C")]
    Rebuilt(usize),
    #[error("coding: {0}")]
    Codec(#[from] ecdn_codec::CodecError),
}

impl Manifest {
    /// The manifest of `data` coded `(n, k)` strips (its CRCs and checksum filled in by
    /// [`encode`]).
    fn shape(size: u64, n: usize, k: usize) -> Result<Manifest, StripError> {
        if k == 0 || n < k || n > 256 {
            return Err(StripError::Manifest(format!(
                "({n}, {k}) strips: need 1 ≤ K ≤ N ≤ 256"
            )));
        }
        Ok(Manifest {
            size,
            n,
            k,
            strip: size.div_ceil(k as u64).max(1),
            sha256: String::new(),
            crcs: Vec::new(),
        })
    }

    /// The stored object's size: `N` strips.
    pub fn coded_size(&self) -> u64 {
        self.n as u64 * self.strip
    }

    /// Checks what a manifest from the store says.
    pub fn validate(&self) -> Result<(), StripError> {
        let bad = |why: String| Err(StripError::Manifest(why));
        if self.k == 0 || self.n < self.k || self.n > 256 {
            return bad(format!("({}, {}) strips", self.n, self.k));
        }
        if self.strip != self.size.div_ceil(self.k as u64).max(1) {
            return bad(format!(
                "strips of {} bytes for {} bytes in {}",
                self.strip, self.size, self.k
            ));
        }
        if self.crcs.len() != self.n {
            return bad(format!("{} CRCs for {} strips", self.crcs.len(), self.n));
        }
        if self.sha256.len() != 64 || !self.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return bad("the SHA-256 is not 64 hex digits".into());
        }
        Ok(())
    }

    /// Whether `(n, k)` reads this file: `k` divides `K`, and `n` chunks of `K/k` strips fit.
    pub fn fits(&self, n: usize, k: usize) -> Result<usize, StripError> {
        let bad = StripError::Code {
            n,
            k,
            strips_n: self.n,
            strips_k: self.k,
        };
        if k == 0 || n < k || !self.k.is_multiple_of(k) {
            return Err(bad);
        }
        let m = self.k / k;
        if n * m > self.n {
            return Err(bad);
        }
        Ok(m)
    }

    /// The `k` this file allows: the divisors of `K` up to `k_max`, ascending.
    pub fn dimensions(strips_k: usize, k_max: usize) -> Vec<usize> {
        (1..=k_max.min(strips_k))
            .filter(|k| strips_k.is_multiple_of(*k))
            .collect()
    }

    /// The byte range of chunk `c` of the code `(·, k)` in the stored object.
    pub fn chunk_range(&self, k: usize, c: usize) -> std::ops::Range<u64> {
        let m = (self.k / k.max(1)) as u64;
        let len = m * self.strip;
        c as u64 * len..(c as u64 + 1) * len
    }

    /// The metadata value: compact JSON.
    pub fn to_metadata(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parses and checks a metadata value.
    pub fn from_metadata(value: &str) -> Result<Manifest, StripError> {
        let m: Manifest =
            serde_json::from_str(value).map_err(|e| StripError::Manifest(e.to_string()))?;
        m.validate()?;
        Ok(m)
    }
}

impl fmt::Display for Manifest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} bytes as ({}, {}) strips of {} bytes",
            self.size, self.n, self.k, self.strip
        )
    }
}

/// Codes `data` into the `(n, k)` strips of a coded file: the manifest and the file's bytes.
pub fn encode(
    codecs: &CodecCache,
    data: &[u8],
    n: usize,
    k: usize,
) -> Result<(Manifest, Vec<u8>), StripError> {
    let mut m = Manifest::shape(data.len() as u64, n, k)?;
    let strip = m.strip as usize;
    let mut file = vec![0u8; n * strip];
    file[..data.len()].copy_from_slice(data);
    if n > k {
        let codec = codecs.get(k, n - k)?;
        let (data_part, parity_part) = file.split_at_mut(k * strip);
        let shards: Vec<&[u8]> = data_part.chunks(strip).collect();
        let mut parity: Vec<&mut [u8]> = parity_part.chunks_mut(strip).collect();
        codec.encode(&shards, &mut parity)?;
    }
    m.crcs = file.chunks(strip).map(ecdn_store::crc32c).collect();
    m.sha256 = hex(&Sha256::digest(data));
    Ok((m, file))
}

/// Checks each strip of chunk `c` of the code `(·, k)` against its CRC.
pub fn check_chunk(m: &Manifest, k: usize, c: usize, chunk: &[u8]) -> Result<(), StripError> {
    let strips = m.k / k.max(1);
    let expected = strips * m.strip as usize;
    if chunk.len() != expected {
        return Err(StripError::ChunkLength {
            chunk: c,
            got: chunk.len(),
            expected,
        });
    }
    for (i, s) in chunk.chunks(m.strip as usize).enumerate() {
        let index = c * strips + i;
        if m.crcs.get(index) != Some(&ecdn_store::crc32c(s)) {
            return Err(StripError::Corrupt(index));
        }
    }
    Ok(())
}

/// The object from chunks of the code `(·, k)` (`(index, bytes)`, each already checked with
/// [`check_chunk`]; any `k` distinct ones suffice). With every data strip at hand the object is
/// those strips in order (no copy at all when one chunk holds them, `k = 1`'s first); otherwise
/// the missing ones are rebuilt from the parity, and each rebuilt strip is checked against its
/// CRC-32C (a corrupt parity strip, or a wrong rebuild, is not answered).
pub fn decode(
    codecs: &CodecCache,
    m: &Manifest,
    k: usize,
    chunks: &[(usize, Bytes)],
) -> Result<Bytes, StripError> {
    let per = m.k / k.max(1);
    let strip = m.strip as usize;
    let size = m.size as usize;
    // Strip index → its bytes, from the chunks given.
    let mut strips: Vec<Option<&[u8]>> = vec![None; m.n];
    for (c, bytes) in chunks {
        for (i, s) in bytes.chunks(strip).enumerate() {
            if let Some(slot) = strips.get_mut(c * per + i) {
                *slot = Some(s);
            }
        }
    }
    let have = strips.iter().flatten().count();
    if have < m.k {
        return Err(StripError::TooFew {
            got: chunks.len(),
            m: per,
            need: m.k,
        });
    }
    let missing: Vec<usize> = (0..m.k).filter(|&i| strips[i].is_none()).collect();
    if missing.is_empty() {
        if let Some((_, whole)) = chunks.iter().find(|(c, b)| *c == 0 && b.len() >= size) {
            return Ok(whole.slice(..size));
        }
        let mut out = Vec::with_capacity(m.k * strip);
        for s in strips[..m.k].iter().flatten() {
            out.extend_from_slice(s);
        }
        out.truncate(size);
        return Ok(Bytes::from(out));
    }
    let mut out = vec![0u8; m.k * strip];
    for (i, s) in strips[..m.k].iter().enumerate() {
        if let Some(s) = s {
            out[i * strip..(i + 1) * strip].copy_from_slice(s);
        }
    }
    let codec: std::sync::Arc<dyn Codec> = codecs.get(m.k, m.n - m.k)?;
    let mut outs = out.chunks_mut(strip);
    let mut slots: Vec<Shard<'_>> = Vec::with_capacity(m.n);
    for (i, s) in strips.iter().enumerate() {
        let out = if i < m.k { outs.next() } else { None };
        slots.push(match (s, out) {
            (Some(s), _) => Shard::Present(s),
            (None, Some(o)) => Shard::Rebuild(o),
            (None, None) => Shard::Absent,
        });
    }
    codec.reconstruct_shards(&mut slots)?;
    for i in missing {
        let rebuilt = &out[i * strip..(i + 1) * strip];
        if m.crcs.get(i) != Some(&ecdn_store::crc32c(rebuilt)) {
            return Err(StripError::Rebuilt(i));
        }
    }
    out.truncate(size);
    Ok(Bytes::from(out))
}

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ecdn_trace::Rng;

    /// Chunks `cs` of the code `(·, k)`, cut from the coded file.
    fn chunks_of(m: &Manifest, file: &[u8], k: usize, cs: &[usize]) -> Vec<(usize, Bytes)> {
        cs.iter()
            .map(|&c| {
                let r = m.chunk_range(k, c);
                (
                    c,
                    Bytes::copy_from_slice(&file[r.start as usize..r.end as usize]),
                )
            })
            .collect()
    }

    fn data(seed: u64, len: usize) -> Vec<u8> {
        let mut rng = Rng::new(seed);
        (0..len).map(|_| rng.next_u64() as u8).collect()
    }

    #[test]
    fn every_code_of_a_file_decodes_from_any_k_chunks() {
        let codecs = CodecCache::new();
        for (len, big_n, big_k) in [(3_000_001, 12, 6), (1, 12, 6), (77_777, 120, 60), (5, 4, 4)] {
            let d = data(len as u64, len);
            let (m, file) = encode(&codecs, &d, big_n, big_k).unwrap();
            assert_eq!(file.len() as u64, m.coded_size());
            assert_eq!(&file[..len], &d[..], "systematic");
            let back = Manifest::from_metadata(&m.to_metadata()).unwrap();
            assert_eq!(back, m);
            for k in Manifest::dimensions(big_k, 6) {
                let chunks_total = big_n / (big_k / k);
                // The last k chunks (parity where there is any), the first k (the data: no
                // decode), and from the second on, given last first (a data strip or more
                // rebuilt, the chunks in any order).
                let sets: [Vec<usize>; 3] = [
                    (chunks_total - k..chunks_total).collect(),
                    (0..k).collect(),
                    (1..chunks_total.min(k + 1)).rev().collect(),
                ];
                for cs in sets.iter().filter(|cs| cs.len() == k) {
                    let got = chunks_of(&m, &file, k, cs);
                    for (c, b) in &got {
                        check_chunk(&m, k, *c, b).unwrap();
                    }
                    assert_eq!(decode(&codecs, &m, k, &got).unwrap(), &d[..], "k {k}");
                }
                assert!(m.fits(chunks_total, k).is_ok());
                assert!(m.fits(chunks_total + 1, k).is_err());
            }
        }
    }

    #[test]
    fn corruption_and_bad_manifests_are_caught() {
        let codecs = CodecCache::new();
        let d = data(1, 100_000);
        let (m, mut file) = encode(&codecs, &d, 12, 6).unwrap();
        let r = m.chunk_range(3, 1);
        file[r.start as usize + 5] ^= 1;
        let c1 = &file[r.start as usize..r.end as usize];
        assert_eq!(check_chunk(&m, 3, 1, c1), Err(StripError::Corrupt(2)));
        assert!(matches!(
            check_chunk(&m, 3, 1, &c1[1..]),
            Err(StripError::ChunkLength { .. })
        ));
        file[r.start as usize + 5] ^= 1;
        // A corrupt parity strip that slipped through: the data strips rebuilt from it fail
        // their CRCs. Chunks 1, 2 and 4 of (·, 3) are strips 2–5 and 8–9: data strips 0 and 1
        // rebuilt, with strip 8 corrupted.
        let p = m.chunk_range(3, 4);
        file[p.start as usize] ^= 1;
        let chunks = chunks_of(&m, &file, 3, &[1, 2, 4]);
        assert!(matches!(
            decode(&codecs, &m, 3, &chunks),
            Err(StripError::Rebuilt(0 | 1))
        ));
        file[p.start as usize] ^= 1;
        let good = chunks_of(&m, &file, 3, &[1, 2, 4]);
        assert_eq!(decode(&codecs, &m, 3, &good).unwrap(), &d[..]);
        assert!(matches!(
            decode(&codecs, &m, 3, &chunks[..2]),
            Err(StripError::TooFew { .. })
        ));
        assert!(m.fits(4, 4).is_err(), "4 does not divide 6");
        for bad in [
            "",
            "{}",
            r#"{"size":10,"n":2,"k":3,"strip":4,"sha256":"","crcs":[]}"#,
        ] {
            assert!(Manifest::from_metadata(bad).is_err(), "{bad}");
        }
        let mut wrong = m.clone();
        wrong.strip += 1;
        assert!(wrong.validate().is_err());
        wrong = m.clone();
        wrong.crcs.pop();
        assert!(wrong.validate().is_err());
        assert!(encode(&codecs, &d, 2, 3).is_err());
        assert!(encode(&codecs, &d, 300, 3).is_err());
    }
}
