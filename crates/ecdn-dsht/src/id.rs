//! Identifiers (§4.1): 160-bit values shared by nodes and keys, the XOR distance between
//! them, and Coral's `splice`, which lets a lookup fix `b` bits of the key per hop.

use std::cmp::Ordering;
use std::fmt;

use sha1::{Digest, Sha1};

/// Bytes in an [`Id`].
pub const ID_BYTES: usize = 20;
/// Bits in an [`Id`].
pub const ID_BITS: usize = ID_BYTES * 8;

/// A 160-bit identifier: a node's id (SHA-1 of its name) or a key (SHA-1 of an object's URL).
/// Bytes are big-endian: byte 0 holds the most significant bits, which XOR distance weighs
/// most.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Id(pub [u8; ID_BYTES]);

impl Id {
    /// The all-zero id: the level-0 (global) cluster's id (§4.3).
    pub const ZERO: Id = Id([0; ID_BYTES]);

    /// SHA-1 of `bytes`: how a node's name or an object's URL becomes an id.
    pub fn hash(bytes: &[u8]) -> Id {
        let digest = Sha1::digest(bytes);
        let mut id = [0u8; ID_BYTES];
        id.copy_from_slice(&digest);
        Id(id)
    }

    /// A random id from two 64-bit draws and a counter-free fill (cluster ids, §4.3).
    pub fn random(rng: &mut ecdn_trace::rng::Rng) -> Id {
        let mut id = [0u8; ID_BYTES];
        for chunk in id.chunks_mut(8) {
            let word = rng.next_u64().to_be_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
        Id(id)
    }

    /// The XOR distance to `other`, itself an [`Id`] compared as an unsigned integer.
    pub fn distance(&self, other: &Id) -> Id {
        let mut d = [0u8; ID_BYTES];
        for (i, byte) in d.iter_mut().enumerate() {
            *byte = self.0[i] ^ other.0[i];
        }
        Id(d)
    }

    /// Which of `a` and `b` is closer to `self` (XOR distance).
    pub fn cmp_distance(&self, a: &Id, b: &Id) -> Ordering {
        self.distance(a).cmp(&self.distance(b))
    }

    /// Leading zero bits: for a distance, 160 minus its bit length.
    pub fn leading_zeros(&self) -> usize {
        for (i, byte) in self.0.iter().enumerate() {
            if *byte != 0 {
                return i * 8 + byte.leading_zeros() as usize;
            }
        }
        ID_BITS
    }

    /// The bit at position `i` (0 is the most significant).
    pub fn bit(&self, i: usize) -> bool {
        self.0[i / 8] & (0x80 >> (i % 8)) != 0
    }

    /// The first 8 hex digits, for logs.
    pub fn short(&self) -> String {
        format!(
            "{:02x}{:02x}{:02x}{:02x}",
            self.0[0], self.0[1], self.0[2], self.0[3]
        )
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Id({}…)", self.short())
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

/// An id as [`Id`]'s `Display` writes it: 40 hex digits.
impl std::str::FromStr for Id {
    type Err = String;

    fn from_str(text: &str) -> Result<Id, String> {
        let bad = || format!("{text:?} is not an id: 40 hex digits expected");
        if text.len() != 2 * ID_BYTES || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        let mut id = [0u8; ID_BYTES];
        for (i, byte) in id.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(Id(id))
    }
}

/// `splice(k, r, i)` of §4.1: the most significant `b·i` bits of `k` followed by the least
/// significant `160 − b·i` bits of `r`.
pub fn splice(k: &Id, r: &Id, bits: usize) -> Id {
    let bits = bits.min(ID_BITS);
    let mut out = r.0;
    let full = bits / 8;
    out[..full].copy_from_slice(&k.0[..full]);
    let rest = bits % 8;
    if rest != 0 {
        let mask = 0xffu8 << (8 - rest);
        out[full] = (k.0[full] & mask) | (r.0[full] & !mask);
    }
    Id(out)
}

/// The next intermediate target of a lookup for `key` that is at `t` (§4.1): `splice(key, t,
/// i)` with the smallest `i` (in digits of `b` bits) that changes `t`, or `None` when `t` is
/// the key already.
pub fn next_target(key: &Id, t: &Id, b: usize) -> Option<Id> {
    if key == t {
        return None;
    }
    let b = b.clamp(1, ID_BITS);
    // The first differing bit lies in digit `lz / b`; fixing digits up to and including it
    // is the smallest splice that changes `t`.
    let lz = key.distance(t).leading_zeros();
    let digits = lz / b + 1;
    Some(splice(key, t, digits * b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_read_back_what_display_writes() {
        let id = Id::hash(b"x");
        assert_eq!(id.to_string().parse::<Id>(), Ok(id));
        assert_eq!(id.to_string().to_uppercase().parse::<Id>(), Ok(id));
        for bad in ["", "12", &"g".repeat(40), &"é".repeat(20), &"+1".repeat(20)] {
            assert!(bad.parse::<Id>().is_err(), "{bad:?}");
        }
    }

    fn id_from_u8(v: u8) -> Id {
        // The paper's Figure 2 uses 4-bit ids; put them in the top bits.
        let mut id = [0u8; ID_BYTES];
        id[0] = v << 4;
        Id(id)
    }

    #[test]
    fn xor_distance_orders_by_shared_prefix() {
        let k = id_from_u8(4);
        // Figure 2: distances of 0, 2, 3, 13, 14 to key 4 are 4, 6, 7, 9, 10.
        for (node, d) in [
            (0u8, 4u8),
            (2, 6),
            (3, 7),
            (13, 9),
            (14, 10),
            (5, 1),
            (7, 3),
        ] {
            assert_eq!(k.distance(&id_from_u8(node)), id_from_u8(d), "node {node}");
        }
        assert_eq!(
            k.cmp_distance(&id_from_u8(5), &id_from_u8(0)),
            Ordering::Less
        );
        assert_eq!(Id::ZERO.leading_zeros(), ID_BITS);
        assert_eq!(id_from_u8(1).leading_zeros(), 3);
    }

    #[test]
    fn splice_takes_the_top_bits_of_the_key() {
        let k = Id([0xff; ID_BYTES]);
        let r = Id::ZERO;
        let s = splice(&k, &r, 12);
        assert_eq!(s.0[0], 0xff);
        assert_eq!(s.0[1], 0xf0);
        assert!(s.0[2..].iter().all(|b| *b == 0));
        assert_eq!(splice(&k, &r, 0), r);
        assert_eq!(splice(&k, &r, ID_BITS), k);
    }

    #[test]
    fn targets_fix_one_digit_per_step_and_reach_the_key() {
        let key = Id::hash(b"http://example.com/a");
        for b in [1usize, 2, 4, 8] {
            let mut t = Id::hash(b"node");
            let mut steps = 0;
            while let Some(next) = next_target(&key, &t, b) {
                // Each step strictly shortens the distance to the key.
                assert_eq!(key.cmp_distance(&next, &t), Ordering::Less);
                t = next;
                steps += 1;
                assert!(steps <= ID_BITS.div_ceil(b));
            }
            assert_eq!(t, key);
        }
    }

    #[test]
    fn ids_hash_with_sha1() {
        // SHA-1("abc") = a9993e36...
        assert_eq!(Id::hash(b"abc").short(), "a9993e36");
    }
}
