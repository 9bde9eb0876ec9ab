//! Authentication of the peer protocol: every request a node sends to another node, and every
//! request to the coordinator, is signed with the cluster key.
//!
//! A signed request carries three headers:
//!
//! * `x-ecdn-time`: the sender's clock, UNIX seconds;
//! * `x-ecdn-digest`: SHA-256 of the request body, lowercase hex (of the empty string when
//!   there is none);
//! * `x-ecdn-signature`: HMAC-SHA256 with the cluster key over
//!   `"ecdn-peer-v1\n" method "\n" path-and-query "\n" time "\n" digest`, lowercase hex.
//!
//! The receiver recomputes the HMAC (compared in constant time) and refuses a request whose time
//! is more than [`MAX_SKEW_S`] away from its own clock (a *stale* request), before it acts on
//! anything; a request with a body is acted on only after the body's SHA-256 matched the signed
//! digest ([`Verified::check_body`]). Every refusal is a `401` on the wire and changes nothing.
//! Within the skew window a captured request can be replayed; every peer operation is
//! idempotent (a chunk is stored once per key, fetches only read), so a replay changes nothing
//! either.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use thiserror::Error;

/// Header names of a signed request.
pub const TIME: &str = "x-ecdn-time";
pub const DIGEST: &str = "x-ecdn-digest";
pub const SIGNATURE: &str = "x-ecdn-signature";

/// How far a request's time may be from the receiver's clock, seconds.
pub const MAX_SKEW_S: u64 = 30;

/// Why a request was refused.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum AuthError {
    #[error("unsigned request: header {0} is missing")]
    Missing(&'static str),
    #[error("malformed header {0}")]
    Malformed(&'static str),
    #[error("stale request: its time is {skew_s} s from this node's clock (at most {MAX_SKEW_S} s allowed)")]
    Stale { skew_s: u64 },
    #[error("bad signature")]
    BadSignature,
    #[error("the body does not match its signed digest")]
    BodyMismatch,
}

/// The cluster key.
#[derive(Clone)]
pub struct ClusterKey {
    key: Vec<u8>,
}

impl std::fmt::Debug for ClusterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterKey(..)")
    }
}

/// The three headers of a signed request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    pub time: u64,
    pub digest: String,
    pub signature: String,
}

impl Signature {
    /// `(name, value)` pairs to add to the request.
    pub fn headers(&self) -> [(&'static str, String); 3] {
        [
            (TIME, self.time.to_string()),
            (DIGEST, self.digest.clone()),
            (SIGNATURE, self.signature.clone()),
        ]
    }
}

/// A request whose signature checked out; its body is still to be checked.
#[derive(Clone, Debug)]
pub struct Verified {
    digest: [u8; 32],
}

impl Verified {
    /// Whether `body` is the body the sender signed.
    pub fn check_body(&self, body: &[u8]) -> Result<(), AuthError> {
        if sha256(body) == self.digest {
            Ok(())
        } else {
            Err(AuthError::BodyMismatch)
        }
    }

    /// Whether the signed body is empty.
    pub fn empty_body(&self) -> bool {
        self.digest == sha256(b"")
    }
}

pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(HEX[usize::from(b >> 4)] as char);
        s.push(HEX[usize::from(b & 15)] as char);
    }
    s
}

fn unhex<const N: usize>(s: &str) -> Option<[u8; N]> {
    let b = s.as_bytes();
    if b.len() != 2 * N {
        return None;
    }
    let nib = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = nib(b[2 * i])? << 4 | nib(b[2 * i + 1])?;
    }
    Some(out)
}

/// Seconds since the UNIX epoch by this machine's clock.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl ClusterKey {
    pub fn new(secret: &[u8]) -> ClusterKey {
        ClusterKey {
            key: secret.to_vec(),
        }
    }

    fn mac(&self, method: &str, path: &str, time: u64, digest: &str) -> Hmac<Sha256> {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes keys of any length");
        for part in ["ecdn-peer-v1", method, path, &time.to_string(), digest] {
            mac.update(part.as_bytes());
            mac.update(b"\n");
        }
        mac
    }

    /// Signs a request with body digest `digest` (see [`sha256`]) at `time`.
    pub fn sign_digest(&self, method: &str, path: &str, time: u64, digest: &[u8; 32]) -> Signature {
        let digest = hex(digest);
        let signature = hex(&self
            .mac(method, path, time, &digest)
            .finalize()
            .into_bytes());
        Signature {
            time,
            digest,
            signature,
        }
    }

    /// Signs a request with `body` now.
    pub fn sign(&self, method: &str, path: &str, body: &[u8]) -> Signature {
        self.sign_digest(method, path, unix_now(), &sha256(body))
    }

    /// Checks a request's signature headers (`None` where a header is absent) against this key
    /// and the receiver's clock `now` (UNIX seconds).
    pub fn verify(
        &self,
        method: &str,
        path: &str,
        time: Option<&str>,
        digest: Option<&str>,
        signature: Option<&str>,
        now: u64,
    ) -> Result<Verified, AuthError> {
        let time_s = time.ok_or(AuthError::Missing(TIME))?;
        let digest_s = digest.ok_or(AuthError::Missing(DIGEST))?;
        let sig_s = signature.ok_or(AuthError::Missing(SIGNATURE))?;
        let time: u64 = time_s
            .parse()
            .ok()
            .filter(|_| time_s.bytes().all(|b| b.is_ascii_digit()))
            .ok_or(AuthError::Malformed(TIME))?;
        let digest = unhex::<32>(digest_s).ok_or(AuthError::Malformed(DIGEST))?;
        let sig = unhex::<32>(sig_s).ok_or(AuthError::Malformed(SIGNATURE))?;
        // The MAC is over the digest's canonical (lowercase) spelling.
        self.mac(method, path, time, &hex(&digest))
            .verify_slice(&sig)
            .map_err(|_| AuthError::BadSignature)?;
        let skew_s = time.abs_diff(now);
        if skew_s > MAX_SKEW_S {
            return Err(AuthError::Stale { skew_s });
        }
        Ok(Verified { digest })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(
        k: &ClusterKey,
        m: &str,
        p: &str,
        s: &Signature,
        now: u64,
    ) -> Result<Verified, AuthError> {
        k.verify(
            m,
            p,
            Some(&s.time.to_string()),
            Some(&s.digest),
            Some(&s.signature),
            now,
        )
    }

    #[test]
    fn signed_requests_verify_and_anything_changed_is_refused() {
        let key = ClusterKey::new(b"0123456789abcdef-secret");
        let body = b"chunk bytes";
        let s = key.sign_digest("PUT", "/peer/chunk/7/1", 1_000_000, &sha256(body));
        let v = check(&key, "PUT", "/peer/chunk/7/1", &s, 1_000_010).unwrap();
        v.check_body(body).unwrap();
        assert_eq!(v.check_body(b"chunk bytez"), Err(AuthError::BodyMismatch));
        assert!(!v.empty_body());
        // Another method, path, key or time fails.
        assert_eq!(
            check(&key, "GET", "/peer/chunk/7/1", &s, 1_000_000).unwrap_err(),
            AuthError::BadSignature
        );
        assert_eq!(
            check(&key, "PUT", "/peer/chunk/7/2", &s, 1_000_000).unwrap_err(),
            AuthError::BadSignature
        );
        let other = ClusterKey::new(b"another-cluster-key!");
        assert_eq!(
            check(&other, "PUT", "/peer/chunk/7/1", &s, 1_000_000).unwrap_err(),
            AuthError::BadSignature
        );
        let mut later = s.clone();
        later.time += 1;
        assert_eq!(
            check(&key, "PUT", "/peer/chunk/7/1", &later, 1_000_000).unwrap_err(),
            AuthError::BadSignature
        );
        // Stale, either way.
        assert_eq!(
            check(&key, "PUT", "/peer/chunk/7/1", &s, 1_000_031).unwrap_err(),
            AuthError::Stale { skew_s: 31 }
        );
        assert!(check(&key, "PUT", "/peer/chunk/7/1", &s, 999_969).is_err());
        // Uppercase hex of the same digest verifies.
        let mut upper = s.clone();
        upper.digest = upper.digest.to_uppercase();
        check(&key, "PUT", "/peer/chunk/7/1", &upper, 1_000_000).unwrap();
    }

    #[test]
    fn missing_or_malformed_headers_are_refused() {
        let key = ClusterKey::new(b"0123456789abcdef-secret");
        let s = key.sign_digest("GET", "/x", 5, &sha256(b""));
        let t = s.time.to_string();
        type Case<'a> = (Option<&'a str>, Option<&'a str>, Option<&'a str>, AuthError);
        let cases: [Case; 6] = [
            (
                None,
                Some(&s.digest),
                Some(&s.signature),
                AuthError::Missing(TIME),
            ),
            (
                Some(&t),
                None,
                Some(&s.signature),
                AuthError::Missing(DIGEST),
            ),
            (
                Some(&t),
                Some(&s.digest),
                None,
                AuthError::Missing(SIGNATURE),
            ),
            (
                Some("+5"),
                Some(&s.digest),
                Some(&s.signature),
                AuthError::Malformed(TIME),
            ),
            (
                Some(&t),
                Some("zz"),
                Some(&s.signature),
                AuthError::Malformed(DIGEST),
            ),
            (
                Some(&t),
                Some(&s.digest),
                Some("é"),
                AuthError::Malformed(SIGNATURE),
            ),
        ];
        for (time, digest, sig, want) in cases {
            assert_eq!(
                key.verify("GET", "/x", time, digest, sig, 5).unwrap_err(),
                want
            );
        }
        let v = key.verify(
            "GET",
            "/x",
            Some(&t),
            Some(&s.digest),
            Some(&s.signature),
            5,
        );
        assert!(v.unwrap().empty_body());
    }

    #[test]
    fn hex_round_trips() {
        let d = sha256(b"abc");
        assert_eq!(
            hex(&d),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(unhex::<32>(&hex(&d)), Some(d));
        assert_eq!(unhex::<2>("0g00"), None);
    }
}
