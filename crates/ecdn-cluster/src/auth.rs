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
//! digest ([`Verified::open_body`]). Every refusal is a `401` on the wire and changes nothing.
//!
//! **Streamed bodies.** A sender that starts a body before it knows all of it (a chunk encoded
//! stripe by stripe as a fill arrives) signs the literal digest [`STREAMED`] and ends the body
//! with a 32-byte *body tag*: HMAC-SHA256 with the cluster key over
//! `"ecdn-peer-v1-body\n" signature "\n" sha256(content)` (hex), where `signature` is the
//! request's `x-ecdn-signature` and `content` the body before the tag ([`BodyTagger`]). The tag
//! binds the content to that one signed request; a body cut short, extended or changed fails it
//! and is refused like a bad digest.
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

/// The `x-ecdn-digest` of a request whose body ends with a body tag (see the module
/// documentation).
pub const STREAMED: &str = "streamed";
/// Bytes of a body tag.
pub const TAG_LEN: usize = 32;

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
    body: SignedBody,
}

/// How a verified request's body is to be checked.
#[derive(Clone)]
enum SignedBody {
    /// Its SHA-256 was signed.
    Digest([u8; 32]),
    /// It ends with a body tag; the tagger for its content.
    Streamed(Box<BodyTagger>),
}

impl std::fmt::Debug for SignedBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SignedBody::Digest(d) => write!(f, "Digest({})", hex(d)),
            SignedBody::Streamed(_) => f.write_str("Streamed"),
        }
    }
}

impl Verified {
    /// Whether `body` is the body the sender signed (for a streamed body: the content and its
    /// tag, as received).
    pub fn check_body(&self, body: &[u8]) -> Result<(), AuthError> {
        self.content_len(body).map(|_| ())
    }

    /// The content of a received `body` the sender signed: all of it, or for a streamed body
    /// the bytes before its tag.
    pub fn open_body(&self, body: bytes::Bytes) -> Result<bytes::Bytes, AuthError> {
        let n = self.content_len(&body)?;
        Ok(body.slice(..n))
    }

    fn content_len(&self, body: &[u8]) -> Result<usize, AuthError> {
        match &self.body {
            SignedBody::Digest(d) if sha256(body) == *d => Ok(body.len()),
            SignedBody::Digest(_) => Err(AuthError::BodyMismatch),
            SignedBody::Streamed(tagger) => {
                let n = body
                    .len()
                    .checked_sub(TAG_LEN)
                    .ok_or(AuthError::BodyMismatch)?;
                let mut t = BodyTagger::clone(tagger);
                t.update(&body[..n]);
                t.check(&body[n..])?;
                Ok(n)
            }
        }
    }

    /// Whether the signed body is empty (a streamed body never is: it has its tag).
    pub fn empty_body(&self) -> bool {
        matches!(&self.body, SignedBody::Digest(d) if *d == sha256(b""))
    }
}

/// Computes the body tag of a streamed body (see the module documentation) as its content
/// passes: the sender's to append, the receiver's to check.
#[derive(Clone)]
pub struct BodyTagger {
    mac: Hmac<Sha256>,
    content: Sha256,
}

impl BodyTagger {
    /// Content bytes, in order.
    pub fn update(&mut self, bytes: &[u8]) {
        self.content.update(bytes);
    }

    /// The tag over the content passed so far.
    pub fn finish(self) -> [u8; TAG_LEN] {
        let mut mac = self.mac;
        mac.update(hex(&self.content.finalize()).as_bytes());
        mac.finalize().into_bytes().into()
    }

    /// Whether `tag` is the tag over the content passed so far (constant time).
    pub fn check(self, tag: &[u8]) -> Result<(), AuthError> {
        let mut mac = self.mac;
        mac.update(hex(&self.content.finalize()).as_bytes());
        mac.verify_slice(tag).map_err(|_| AuthError::BodyMismatch)
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

    /// Signs a request at `time` whose body is streamed: the body is its content followed by
    /// the tag of the returned [`BodyTagger`] (fed the content).
    pub fn sign_streamed(&self, method: &str, path: &str, time: u64) -> (Signature, BodyTagger) {
        let signature = hex(&self
            .mac(method, path, time, STREAMED)
            .finalize()
            .into_bytes());
        let tagger = self.tagger(&signature);
        let s = Signature {
            time,
            digest: STREAMED.to_string(),
            signature,
        };
        (s, tagger)
    }

    /// The tagger of a streamed body sent with request signature `signature` (lowercase hex).
    fn tagger(&self, signature: &str) -> BodyTagger {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes keys of any length");
        for part in ["ecdn-peer-v1-body", signature] {
            mac.update(part.as_bytes());
            mac.update(b"\n");
        }
        BodyTagger {
            mac,
            content: Sha256::new(),
        }
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
        let digest = if digest_s == STREAMED {
            None
        } else {
            Some(unhex::<32>(digest_s).ok_or(AuthError::Malformed(DIGEST))?)
        };
        let sig = unhex::<32>(sig_s).ok_or(AuthError::Malformed(SIGNATURE))?;
        // The MAC is over the digest's canonical (lowercase) spelling.
        let canonical = digest
            .as_ref()
            .map_or_else(|| STREAMED.to_string(), |d| hex(d));
        self.mac(method, path, time, &canonical)
            .verify_slice(&sig)
            .map_err(|_| AuthError::BadSignature)?;
        let skew_s = time.abs_diff(now);
        if skew_s > MAX_SKEW_S {
            return Err(AuthError::Stale { skew_s });
        }
        let body = match digest {
            Some(d) => SignedBody::Digest(d),
            None => SignedBody::Streamed(Box::new(self.tagger(&hex(&sig)))),
        };
        Ok(Verified { body })
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
    fn streamed_bodies_verify_by_their_tag_and_nothing_else_does() {
        let key = ClusterKey::new(b"0123456789abcdef-secret");
        let (s, mut tagger) = key.sign_streamed("PUT", "/_peer/piece/1/k", 1_000);
        assert_eq!(s.digest, STREAMED);
        let content = b"sub-chunk one, sub-chunk two";
        tagger.update(&content[..9]);
        tagger.update(&content[9..]);
        let mut body = content.to_vec();
        body.extend_from_slice(&tagger.finish());
        let v = check(&key, "PUT", "/_peer/piece/1/k", &s, 1_000).unwrap();
        assert!(!v.empty_body());
        let opened = v.open_body(bytes::Bytes::from(body.clone())).unwrap();
        assert_eq!(&opened[..], &content[..]);
        // Cut short, extended, changed, or too short for a tag: refused.
        for bad in [
            body[..body.len() - 1].to_vec(),
            [&body[..], b"x"].concat(),
            [&b"X"[..], &body[1..]].concat(),
            body[..TAG_LEN - 1].to_vec(),
            Vec::new(),
        ] {
            assert_eq!(v.check_body(&bad), Err(AuthError::BodyMismatch));
        }
        // The tag binds the body to its request: another request's signature refuses it.
        let (s2, _) = key.sign_streamed("PUT", "/_peer/piece/2/k", 1_000);
        let v2 = check(&key, "PUT", "/_peer/piece/2/k", &s2, 1_000).unwrap();
        assert_eq!(v2.check_body(&body), Err(AuthError::BodyMismatch));
        // "streamed" is signed like a digest: another path or key fails.
        assert_eq!(
            check(&key, "PUT", "/_peer/piece/2/k", &s, 1_000).unwrap_err(),
            AuthError::BadSignature
        );
        let other = ClusterKey::new(b"another-cluster-key!");
        assert_eq!(
            check(&other, "PUT", "/_peer/piece/1/k", &s, 1_000).unwrap_err(),
            AuthError::BadSignature
        );
        // A digest-signed request is not opened as a streamed one.
        let d = key.sign_digest("PUT", "/x", 1_000, &sha256(&body));
        let v = check(&key, "PUT", "/x", &d, 1_000).unwrap();
        assert_eq!(
            v.open_body(bytes::Bytes::from(body.clone())).unwrap().len(),
            body.len()
        );
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
