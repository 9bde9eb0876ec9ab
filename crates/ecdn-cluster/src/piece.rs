//! What a node stores with each piece of an object, and sends with it to a peer: whether the
//! object is coded and how (C2DN §5, "Metadata lookups"), a checksum of every sub-chunk of
//! every chunk (so the node that reads a coded object can tell a wrong sub-chunk from a peer
//! and decode that stripe from the others instead), and the object's HTTP metadata (opaque
//! here; the node's own encoding).
//!
//! Since version 2, a chunk's metadata also holds every sub-chunk's **digest** (BLAKE3,
//! truncated to [`DIGEST_LEN`] bytes), made once when the object is coded. A reader whose
//! metadata came from its own disk or a signed peer answer checks a peer's sub-chunk against
//! its digest, which proves its bytes as the per-request tags of `crate::auth` do, with no
//! work at the holder: the holder sends such sub-chunks untagged (`wire`'s `untagged` piece
//! reads). A piece written without digests (version 1, or an EC-Cache split its client
//! coded) is read with tags.
//!
//! Encoding (all integers little-endian):
//!
//! | field | bytes |
//! |---|---|
//! | magic `ECPM` | 4 |
//! | version (1, or 2 with digests) | 1 |
//! | kind: 0 replica, 1 chunk | 1 |
//! | chunk only: K u16, P u16, chunk index u16, sub-chunk size u32, object size u64, then `(K + P) · stripes` CRC-32C u32 values, chunk-major (chunk 0's stripes first) | 18 + 4·n |
//! | version 2, chunk only: the `n` digests, in the same order | 16·n |
//! | HTTP metadata length u32, then its bytes | 4 + m |
//!
//! `stripes = ceil(ceil(size / K) / sub_chunk)`: the sub-chunks per chunk (the stripe-major
//! layout of `ecdn-codec`'s FORMAT.md keeps chunk sizes at `ceil(size / K)`). [`PieceMeta::decode`]
//! checks every length against the bytes it has and against [`MAX_META`]; bad input is an
//! error, never a panic or a huge allocation.

use thiserror::Error;

/// The most bytes a piece's metadata may take (a 64 GiB object coded (3, 1) in 32 KiB
/// sub-chunks needs 32 MiB of checksums; objects that large are refused long before).
pub const MAX_META: usize = 16 << 20;

const MAGIC: &[u8; 4] = b"ECPM";
/// Without digests.
const VERSION: u8 = 1;
/// With digests.
const VERSION_DIGESTS: u8 = 2;

/// Bytes of a sub-chunk's digest.
pub const DIGEST_LEN: usize = 16;

/// A sub-chunk's digest: its BLAKE3 hash, truncated.
pub type Digest = [u8; DIGEST_LEN];

/// The digest of a sub-chunk of `bytes`.
pub fn digest(bytes: &[u8]) -> Digest {
    let mut out = [0u8; DIGEST_LEN];
    out.copy_from_slice(&blake3::hash(bytes).as_bytes()[..DIGEST_LEN]);
    out
}

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum PieceMetaError {
    #[error("piece metadata: {0}")]
    Bad(&'static str),
}

/// How a coded object is coded, and the checksums of all its sub-chunks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Coding {
    pub k: u16,
    pub p: u16,
    /// This piece's chunk index (`0..K` data, `K..K+P` parity).
    pub chunk: u16,
    pub sub_chunk: u32,
    pub size: u64,
    /// CRC-32C of sub-chunk `j` of chunk `c` at `c · stripes + j`.
    pub crcs: Vec<u32>,
    /// The digests of the same sub-chunks, in the same order, or none (see the module
    /// documentation).
    pub digests: Vec<Digest>,
}

impl Coding {
    /// Sub-chunks per chunk.
    pub fn stripes(&self) -> u64 {
        stripes(self.size, self.k, self.sub_chunk)
    }

    /// Bytes of every chunk.
    pub fn chunk_size(&self) -> u64 {
        self.size.div_ceil(u64::from(self.k.max(1)))
    }

    /// The expected CRC-32C of sub-chunk `j` of chunk `c`.
    pub fn crc(&self, c: usize, j: u64) -> Option<u32> {
        self.crcs.get(self.at(c, j)?).copied()
    }

    /// The digest of sub-chunk `j` of chunk `c`, if the metadata has digests.
    pub fn digest(&self, c: usize, j: u64) -> Option<&Digest> {
        self.digests.get(self.at(c, j)?)
    }

    /// Where sub-chunk `j` of chunk `c` is in the tables (chunk-major).
    fn at(&self, c: usize, j: u64) -> Option<usize> {
        let n = self.stripes();
        if j >= n {
            return None;
        }
        usize::try_from((c as u64).checked_mul(n)?.checked_add(j)?).ok()
    }
}

/// Sub-chunks per chunk of an object of `size` bytes coded with `k` data chunks.
pub fn stripes(size: u64, k: u16, sub_chunk: u32) -> u64 {
    size.div_ceil(u64::from(k.max(1)))
        .div_ceil(u64::from(sub_chunk.max(1)))
}

/// The metadata of one stored piece.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PieceMeta {
    /// `None` for a replica (the whole object).
    pub coding: Option<Coding>,
    /// The object's HTTP metadata, in the node's encoding.
    pub http: Vec<u8>,
}

impl PieceMeta {
    pub fn encode(&self) -> Vec<u8> {
        let crcs = self.coding.as_ref().map_or(0, |c| c.crcs.len());
        let digests = self.coding.as_ref().map_or(0, |c| c.digests.len());
        let mut out = Vec::with_capacity(32 + 4 * crcs + DIGEST_LEN * digests + self.http.len());
        out.extend_from_slice(MAGIC);
        // Digests only with a digest per checksum (else the version without).
        let with_digests = digests > 0 && digests == crcs;
        out.push(if with_digests {
            VERSION_DIGESTS
        } else {
            VERSION
        });
        match &self.coding {
            None => out.push(0),
            Some(c) => {
                out.push(1);
                out.extend_from_slice(&c.k.to_le_bytes());
                out.extend_from_slice(&c.p.to_le_bytes());
                out.extend_from_slice(&c.chunk.to_le_bytes());
                out.extend_from_slice(&c.sub_chunk.to_le_bytes());
                out.extend_from_slice(&c.size.to_le_bytes());
                for crc in &c.crcs {
                    out.extend_from_slice(&crc.to_le_bytes());
                }
                if with_digests {
                    for d in &c.digests {
                        out.extend_from_slice(d);
                    }
                }
            }
        }
        out.extend_from_slice(&(self.http.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.http);
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<PieceMeta, PieceMetaError> {
        let bad = |m| Err(PieceMetaError::Bad(m));
        if bytes.len() > MAX_META {
            return bad("too long");
        }
        let mut r = Reader(bytes);
        if r.take(4)? != MAGIC {
            return bad("bad magic");
        }
        let with_digests = match r.u8()? {
            VERSION => false,
            VERSION_DIGESTS => true,
            _ => return bad("unknown version"),
        };
        // Bytes per sub-chunk in the table.
        let each = if with_digests { 4 + DIGEST_LEN } else { 4 };
        let coding = match r.u8()? {
            0 => None,
            1 => {
                let k = r.u16()?;
                let p = r.u16()?;
                let chunk = r.u16()?;
                let sub_chunk = r.u32()?;
                let size = r.u64()?;
                if k == 0 || usize::from(k) + usize::from(p) > 256 {
                    return bad("invalid code shape");
                }
                if chunk >= k + p {
                    return bad("chunk index out of range");
                }
                if sub_chunk == 0 {
                    return bad("zero sub-chunk size");
                }
                let n = stripes(size, k, sub_chunk)
                    .checked_mul(u64::from(k + p))
                    .filter(|&n| n <= (MAX_META / each) as u64)
                    .ok_or(PieceMetaError::Bad("too many sub-chunks"))?;
                let raw = r.take(4 * n as usize)?;
                let crcs = raw
                    .chunks_exact(4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
                let digests = if with_digests {
                    let raw = r.take(DIGEST_LEN * n as usize)?;
                    raw.chunks_exact(DIGEST_LEN)
                        .map(|b| {
                            let mut d = [0u8; DIGEST_LEN];
                            d.copy_from_slice(b);
                            d
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                Some(Coding {
                    k,
                    p,
                    chunk,
                    sub_chunk,
                    size,
                    crcs,
                    digests,
                })
            }
            _ => return bad("unknown piece kind"),
        };
        let len = r.u32()? as usize;
        let http = r.take(len)?.to_vec();
        if !r.0.is_empty() {
            return bad("trailing bytes");
        }
        Ok(PieceMeta { coding, http })
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], PieceMetaError> {
        if n > self.0.len() {
            return Err(PieceMetaError::Bad("truncated"));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, PieceMetaError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, PieceMetaError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, PieceMetaError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, PieceMetaError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn coded(size: u64) -> PieceMeta {
        let n = stripes(size, 3, 1000) as usize * 4;
        PieceMeta {
            coding: Some(Coding {
                k: 3,
                p: 1,
                chunk: 2,
                sub_chunk: 1000,
                size,
                crcs: (0..n as u32).collect(),
                digests: Vec::new(),
            }),
            http: b"status: 200".to_vec(),
        }
    }

    /// [`coded`] with digests (version 2).
    fn digested(size: u64) -> PieceMeta {
        let mut m = coded(size);
        let c = m.coding.as_mut().unwrap();
        c.digests = c.crcs.iter().map(|x| digest(&x.to_le_bytes())).collect();
        m
    }

    #[test]
    fn round_trips() {
        for m in [
            coded(0),
            coded(1),
            coded(3000),
            coded(3001),
            digested(0),
            digested(3001),
            PieceMeta {
                coding: None,
                http: vec![],
            },
        ] {
            assert_eq!(PieceMeta::decode(&m.encode()).unwrap(), m);
        }
        let m = coded(10_000);
        let c = m.coding.as_ref().unwrap();
        assert_eq!(c.stripes(), 4); // chunk 3334 bytes, 4 sub-chunks of <= 1000
        assert_eq!(c.crc(1, 2), Some(6));
        assert_eq!(c.crc(1, 4), None);
        assert_eq!(c.crc(4, 0), None);
        assert_eq!(c.digest(1, 2), None);
        let m = digested(10_000);
        let c = m.coding.as_ref().unwrap();
        assert_eq!(m.encode()[4], VERSION_DIGESTS);
        assert_eq!(c.digest(1, 2), Some(&digest(&6u32.to_le_bytes())));
        assert_eq!(c.digest(1, 4), None);
        // Digests not one per checksum are not written: version 1.
        let mut m = digested(10_000);
        m.coding.as_mut().unwrap().digests.pop();
        let back = PieceMeta::decode(&m.encode()).unwrap();
        assert_eq!(back, coded(10_000));
    }

    #[test]
    fn refuses_bad_metadata() {
        for good in [coded(5000).encode(), digested(5000).encode()] {
            for cut in 0..good.len() {
                assert!(PieceMeta::decode(&good[..cut]).is_err(), "cut at {cut}");
            }
            let mut v = good.clone();
            v[4] = 3; // an unknown version
            assert!(PieceMeta::decode(&v).is_err());
        }
        let good = coded(5000).encode();
        let mut v = good.clone();
        v.push(0);
        assert!(PieceMeta::decode(&v).is_err());
        let mut v = good.clone();
        v[10] = 9; // chunk index 9 of 4
        assert!(PieceMeta::decode(&v).is_err());
        let mut v = good.clone();
        v[6] = 0; // K = 0
        v[7] = 0;
        assert!(PieceMeta::decode(&v).is_err());
        // A huge size whose checksum table could not be there.
        let mut v = good.clone();
        v[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(PieceMeta::decode(&v).is_err());
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = PieceMeta::decode(&bytes);
            for head in [b"ECPM\x01\x01", b"ECPM\x02\x01"] {
                let mut v = head.to_vec();
                v.extend_from_slice(&bytes);
                let _ = PieceMeta::decode(&v);
            }
        }
    }
}
