//! The headers of a signed request or answer: their names, the errors a check gives, the
//! [`Signature`] a sender puts on a request, and the parsing and encoding every check shares.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use sha2::{Digest, Sha256};
use thiserror::Error;

/// The signature version this build signs and accepts.
pub const VERSION: u32 = 3;

/// Header names of a signed request.
pub const VERSION_HEADER: &str = "x-ecdn-version";
pub const TIME: &str = "x-ecdn-time";
pub const DIGEST: &str = "x-ecdn-digest";
pub const DESTINATION: &str = "x-ecdn-destination";
pub const EPOCH: &str = "x-ecdn-epoch";
pub const NONCE: &str = "x-ecdn-nonce";
pub const SIGNATURE: &str = "x-ecdn-signature";

/// The `x-ecdn-digest` of a request whose body ends with a body tag (see the module
/// documentation).
pub const STREAMED: &str = "streamed";
/// Bytes of a body tag.
pub const TAG_LEN: usize = 32;
/// Bytes of a sub-chunk's tag (128 bits, as a MAC's tag is commonly cut).
pub const SUB_TAG_LEN: usize = 16;

/// How far a request's time may be from the receiver's clock, seconds: the signature window.
pub const MAX_SKEW_S: u64 = 30;
/// [`MAX_SKEW_S`] in milliseconds, the unit of `x-ecdn-time`.
pub const MAX_SKEW_MS: u64 = MAX_SKEW_S * 1000;

/// Why a request was refused.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum AuthError {
    #[error("unsigned request: header {0} is missing")]
    Missing(&'static str),
    #[error("malformed header {0}")]
    Malformed(&'static str),
    #[error(
        "peer signature version {got}, but this process signs and accepts version {VERSION} \
         only: every node and coordinator of a cluster must run the same signature version"
    )]
    Version { got: String },
    #[error(
        "stale request: its time is {} s from this process's clock (at most {MAX_SKEW_S} s \
         allowed)", seconds(*skew_ms)
    )]
    Stale { skew_ms: u64 },
    #[error("bad signature")]
    BadSignature,
    #[error("the body does not match its signed digest")]
    BodyMismatch,
    #[error("request signed for {to}, which is not this process: refused as a replay")]
    Misdirected { to: SocketAddr },
    #[error("replayed request: its nonce was already taken within the signature window")]
    Replayed,
    #[error(
        "request signed at {time_ms} ms, before {floor_ms} ms, the oldest this process \
         remembers (it started later, or its replay memory was full): refused as a possible \
         replay"
    )]
    Forgotten { time_ms: u64, floor_ms: u64 },
}

/// Milliseconds as seconds with one decimal.
pub(super) fn seconds(ms: u64) -> String {
    format!("{}.{}", ms / 1000, ms % 1000 / 100)
}

/// Whom a request is for: the receiver's address as the sender reaches it, and the epoch of
/// the map the sender acts under (`0`: none). Signed, so a request cannot be presented to
/// another process, or as made under another map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recipient {
    pub addr: SocketAddr,
    pub epoch: u64,
}

/// The headers of a signed request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    /// UNIX milliseconds.
    pub time: u64,
    pub digest: String,
    pub to: Recipient,
    pub nonce: u128,
    pub signature: String,
}

impl Signature {
    /// `(name, value)` pairs to add to the request.
    pub fn headers(&self) -> [(&'static str, String); 7] {
        [
            (VERSION_HEADER, VERSION.to_string()),
            (TIME, self.time.to_string()),
            (DIGEST, self.digest.clone()),
            (DESTINATION, self.to.addr.to_string()),
            (EPOCH, self.to.epoch.to_string()),
            (NONCE, format!("{:032x}", self.nonce)),
            (SIGNATURE, self.signature.clone()),
        ]
    }

    /// The signature's MAC as bytes.
    pub fn mac(&self) -> Option<[u8; 32]> {
        unhex::<32>(&self.signature)
    }

    /// [`Signature::headers`] as a header map.
    pub fn header_map(&self) -> HeaderMap {
        header_map(self.headers())
    }
}

/// A header map of `(name, value)` pairs made by this module (digits, hex, addresses: always
/// valid header values).
pub(super) fn header_map<const N: usize>(pairs: [(&'static str, String); N]) -> HeaderMap {
    let mut map = HeaderMap::with_capacity(N);
    for (name, value) in pairs {
        if let Ok(v) = HeaderValue::try_from(value) {
            map.insert(HeaderName::from_static(name), v);
        }
    }
    map
}

/// The digest of a body as signature version 3 signs it: its BLAKE3 hash.
pub fn digest(bytes: &[u8]) -> [u8; 32] {
    blake3::hash(bytes).into()
}

/// SHA-256 (version 1's seals, and the backend's object checksums).
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

pub(crate) fn unhex<const N: usize>(s: &str) -> Option<[u8; N]> {
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

/// Milliseconds since the UNIX epoch by this machine's clock.
pub fn unix_now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// A nonce this process has not used before: a random 64-bit prefix drawn once per process,
/// then a counter. A nonce need not be secret (the signature covers it, so nobody without the
/// key can make a request with a new one), only never repeated by any sender within the
/// signature window: the counter never repeats within a process, and two processes share a
/// prefix with a chance of 2^-64.
pub fn fresh_nonce() -> u128 {
    static PREFIX: OnceLock<u64> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let prefix = *PREFIX.get_or_init(|| {
        let mut b = [0u8; 8];
        match getrandom::getrandom(&mut b) {
            Ok(()) => u64::from_le_bytes(b),
            // No system randomness: the start time and the process id still differ between
            // the processes of one cluster.
            Err(_) => unix_now_ms().rotate_left(17) ^ u64::from(std::process::id()),
        }
    });
    u128::from(prefix) << 64 | u128::from(COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// A header's value as text: `None` when absent, malformed when not visible ASCII.
pub(super) fn text<'h>(
    headers: &'h HeaderMap,
    name: &'static str,
) -> Result<Option<&'h str>, AuthError> {
    match headers.get(name) {
        None => Ok(None),
        Some(v) => v.to_str().map(Some).map_err(|_| AuthError::Malformed(name)),
    }
}

pub(super) fn required<'h>(
    headers: &'h HeaderMap,
    name: &'static str,
) -> Result<&'h str, AuthError> {
    text(headers, name)?.ok_or(AuthError::Missing(name))
}

/// A decimal number of at most 20 digits, nothing else.
pub(super) fn decimal(s: &str, name: &'static str) -> Result<u64, AuthError> {
    s.parse()
        .ok()
        .filter(|_| !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit()))
        .ok_or(AuthError::Malformed(name))
}

/// Whether the headers are of this signature version.
pub(super) fn check_version(headers: &HeaderMap) -> Result<(), AuthError> {
    match text(headers, VERSION_HEADER)? {
        Some(v) if v == VERSION.to_string() => Ok(()),
        Some(v) => Err(AuthError::Version {
            got: v.chars().take(16).collect(),
        }),
        // Version 1 sent its signature without a version header.
        None if headers.contains_key(SIGNATURE) => Err(AuthError::Version { got: "1".into() }),
        None => Err(AuthError::Missing(SIGNATURE)),
    }
}

/// A signed digest header: the digest, or `None` for [`STREAMED`].
pub(super) fn digest_of(s: &str) -> Result<Option<[u8; 32]>, AuthError> {
    if s == STREAMED {
        return Ok(None);
    }
    unhex::<32>(s).map(Some).ok_or(AuthError::Malformed(DIGEST))
}

/// The MAC over the digest's canonical (lowercase) spelling.
pub(super) fn canonical_digest(digest: &Option<[u8; 32]>) -> String {
    digest
        .as_ref()
        .map_or_else(|| STREAMED.to_string(), |d| hex(d))
}

pub(super) fn check_time(time: u64, now: u64) -> Result<(), AuthError> {
    let skew_ms = time.abs_diff(now);
    if skew_ms > MAX_SKEW_MS {
        return Err(AuthError::Stale { skew_ms });
    }
    Ok(())
}
