//! Authentication of the peer protocol: every request a node sends to another node, and every
//! request to the coordinator, is signed with the cluster key.
//!
//! **Signature version 3.** The MAC is BLAKE3 in its keyed mode, under a 32-byte key derived
//! from the cluster key ([`ClusterKey::new`]: `blake3::derive_key` with this protocol's
//! context string), and body digests are BLAKE3 hashes. A signed request carries seven headers:
//!
//! * `x-ecdn-version`: `3` ([`VERSION`]);
//! * `x-ecdn-time`: the sender's clock, UNIX **milliseconds**;
//! * `x-ecdn-digest`: BLAKE3 of the request body, lowercase hex (of the empty string when
//!   there is none);
//! * `x-ecdn-destination`: the receiver's address as the sender reaches it (`ip:port`, the
//!   peer address the map gives that node, or the coordinator's address);
//! * `x-ecdn-epoch`: the epoch of the bucket map the sender acts under (`0`: it holds none,
//!   e.g. an operator's tool talking to the coordinator);
//! * `x-ecdn-nonce`: 128 bits the sender never uses twice, lowercase hex ([`fresh_nonce`]);
//! * `x-ecdn-signature`: keyed BLAKE3 over the lines `ecdn-peer-v3`, method,
//!   path-and-query, time, digest, destination, epoch and nonce (each followed by `\n`),
//!   lowercase hex.
//!
//! [`ClusterKey::verify`] recomputes the MAC (compared in constant time) and refuses a request
//! whose time is more than [`MAX_SKEW_S`] away from its own clock (a *stale* request), before it
//! acts on anything; a request with a body is acted on only after the body's digest matched the
//! signed one ([`Verified::open_body`]). The receiver then refuses a request signed for
//! another destination, and a nonce it has already taken within the window
//! ([`crate::replay::Gate`]): a captured request can be replayed neither to the process it was
//! for nor to any other. Every refusal is a `401` on the wire and changes nothing.
//!
//! **Why BLAKE3.** Version 2 used HMAC-SHA256 over a SHA-256 digest: 1.6 GB/s per core on this
//! project's machines even with the SHA extensions, so a coded fill spent a seventh of its CPU
//! on it. BLAKE3's keyed mode is a PRF, hence a MAC, and runs at 4 GB/s per core with AVX2
//! (`cargo bench -p ecdn-cluster --bench peer_mac`). A streamed body's tag is one keyed pass
//! over its content, not a hash and then a MAC.
//!
//! **Versions.** A request of another signature version is refused before its signature is
//! looked at, with an error naming both versions ([`AuthError::Version`]); version 1 sent no
//! version header, version 2 signed with HMAC-SHA256. Every node and coordinator of a cluster
//! must run the same version. Answers are signed under version 3 too
//! ([`ClusterKey::sign_response`]), so an earlier process refuses them as of another version.
//!
//! **Streamed bodies.** A sender that starts a body before it knows all of it (a chunk encoded
//! stripe by stripe as a fill arrives) signs the literal digest [`STREAMED`] and ends the body
//! with a 32-byte *body tag*: keyed BLAKE3 over the content (the body before the tag) under a
//! key of that one request, keyed BLAKE3 of `"ecdn-peer-v3-body\n" signature "\n"`, where
//! `signature` is the request's `x-ecdn-signature` ([`BodyTagger`]). (The content is hashed
//! from its first byte, as BLAKE3 runs fastest: a prefix before it cost 30% of the speed on
//! 32 KiB.) The tag binds the content to that one signed request; a
//! body cut short, extended or changed fails it and is refused like a bad digest.
//!
//! **Sub-chunk tags.** An answer that carries sub-chunks of a piece (`GET
//! /_peer/piece/..?from=A&to=B`) is used as it arrives, sub-chunk by sub-chunk, so one tag at
//! its end would come too late: each sub-chunk is followed by a [`SUB_TAG_LEN`]-byte tag
//! ([`SubChunkTagger`]), keyed BLAKE3 under a key of that one request (derived from its
//! signature) over the sub-chunk's bytes and then its index. A reader takes a sub-chunk only once its
//! tag checks out, so no byte of a peer's answer reaches a client unauthenticated.
//!
//! **Seals.** Values stored in etcd keep version 1's HMAC-SHA256 ([`ClusterKey::seal`]), so
//! what an earlier version stored still opens.
//!
//! **Key rotation.** A [`ClusterKey`] is a ring: one secret that signs (the cluster file's
//! `key`) and the secrets also accepted (`accepted_keys`), tried in turn by every check —
//! requests, answers, seals. What a verified request leads to (its streamed body's tag, the
//! tags of the sub-chunks answered to it) is keyed with the secret that verified it, and a
//! sender keys the tags it expects with the secret it signed with, so a request in flight while
//! its sender's ring changes still checks out. A rotation from `A` to `B`, with every process
//! serving throughout: (1) every process accepts `B` (`key = A`, `accepted_keys = [B]`); (2)
//! every process signs with `B` (`key = B`, `accepted_keys = [A]`); (3) `A` goes
//! (`accepted_keys = []`). Each step is the cluster file changed and every process told to
//! reload it (`SIGHUP`; [`ClusterKey::rotate`] in a process), one process after another; the
//! next step begins when every process has taken this one. Clones of a key share its ring, so
//! one rotate reaches everything in the process that signs or checks with it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use hmac::{Hmac, Mac};
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use sha2::{Digest, Sha256};
use thiserror::Error;

/// The signature version this build signs and accepts.
pub const VERSION: u32 = 3;

/// The context string of the MAC key's derivation (`blake3::derive_key`): unique to this
/// protocol and version, as BLAKE3's documentation asks.
const MAC_KEY_CONTEXT: &str = "ecdn 2026-11-27 peer protocol v3 MAC key";

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
fn seconds(ms: u64) -> String {
    format!("{}.{}", ms / 1000, ms % 1000 / 100)
}

/// One secret of a key ring.
struct Secret {
    /// The secret as configured: version 1's seals are HMAC-SHA256 under it.
    key: Vec<u8>,
    /// The MAC key derived from it.
    mac_key: [u8; 32],
}

/// The secrets of a ring: the first signs, every one is accepted.
type Ring = Arc<[Arc<Secret>]>;

/// The cluster key: the secret that signs and, during a rotation, the secrets also accepted
/// (see the module documentation). Clones share one ring.
#[derive(Clone)]
pub struct ClusterKey {
    ring: Arc<RwLock<Ring>>,
    /// Rotations so far (see [`ClusterKey::generation`]).
    rotations: Arc<AtomicU64>,
}

impl std::fmt::Debug for ClusterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterKey(..)")
    }
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
fn header_map<const N: usize>(pairs: [(&'static str, String); N]) -> HeaderMap {
    let mut map = HeaderMap::with_capacity(N);
    for (name, value) in pairs {
        if let Ok(v) = HeaderValue::try_from(value) {
            map.insert(HeaderName::from_static(name), v);
        }
    }
    map
}

/// A request whose signature checked out; its body is still to be checked.
#[derive(Clone, Debug)]
pub struct Verified {
    body: SignedBody,
    time: u64,
    to: Recipient,
    nonce: u128,
    signature: [u8; 32],
    /// The tagger of the sub-chunks answered to this request, keyed with the secret that
    /// verified it.
    sub_chunks: SubChunkTagger,
}

/// How a verified request's body is to be checked.
#[derive(Clone)]
enum SignedBody {
    /// Its digest was signed.
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
            SignedBody::Digest(d) if digest(body) == *d => Ok(body.len()),
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
        matches!(&self.body, SignedBody::Digest(d) if *d == digest(b""))
    }

    /// When the sender signed the request, UNIX milliseconds by its clock.
    pub fn time_ms(&self) -> u64 {
        self.time
    }

    /// Whom the sender signed the request for.
    pub fn recipient(&self) -> Recipient {
        self.to
    }

    pub fn nonce(&self) -> u128 {
        self.nonce
    }

    /// The request's signature.
    pub fn signature(&self) -> &[u8; 32] {
        &self.signature
    }

    /// The tagger of the sub-chunks answered to this request (see the module documentation),
    /// keyed with the secret that verified it: the one its sender signed with.
    pub fn sub_chunk_tagger(&self) -> SubChunkTagger {
        self.sub_chunks.clone()
    }
}

/// Computes the body tag of a streamed body (see the module documentation) as its content
/// passes: the sender's to append, the receiver's to check.
#[derive(Clone)]
pub struct BodyTagger {
    mac: blake3::Hasher,
}

impl BodyTagger {
    /// Content bytes, in order.
    pub fn update(&mut self, bytes: &[u8]) {
        self.mac.update(bytes);
    }

    /// The tag over the content passed so far.
    pub fn finish(self) -> [u8; TAG_LEN] {
        self.mac.finalize().into()
    }

    /// Whether `tag` is the tag over the content passed so far (constant time).
    pub fn check(self, tag: &[u8]) -> Result<(), AuthError> {
        check_mac(self.mac, tag)
    }
}

/// The tags of the sub-chunks in one answer (see the module documentation): keyed BLAKE3
/// under a key derived from the request's signature, over a sub-chunk's bytes and its index
/// (8 bytes, little endian), cut to [`SUB_TAG_LEN`] bytes.
#[derive(Clone)]
pub struct SubChunkTagger {
    key: [u8; 32],
}

impl std::fmt::Debug for SubChunkTagger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SubChunkTagger(..)")
    }
}

impl SubChunkTagger {
    /// The tag of sub-chunk `index` with `bytes`.
    pub fn tag(&self, index: u64, bytes: &[u8]) -> [u8; SUB_TAG_LEN] {
        let mut mac = blake3::Hasher::new_keyed(&self.key);
        mac.update(bytes);
        mac.update(&index.to_le_bytes());
        let mut out = [0u8; SUB_TAG_LEN];
        mac.finalize_xof().fill(&mut out);
        out
    }

    /// Whether `tag` is sub-chunk `index`'s tag for `bytes` (constant time).
    pub fn check(&self, index: u64, bytes: &[u8], tag: &[u8]) -> bool {
        let want = self.tag(index, bytes);
        tag.len() == SUB_TAG_LEN && want.iter().zip(tag).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }
}

/// Whether `tag` is the output of `mac` (constant time: `blake3::Hash`'s comparison).
fn check_mac(mac: blake3::Hasher, tag: &[u8]) -> Result<(), AuthError> {
    let tag: [u8; 32] = tag.try_into().map_err(|_| AuthError::BodyMismatch)?;
    if mac.finalize() == tag {
        Ok(())
    } else {
        Err(AuthError::BodyMismatch)
    }
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
fn text<'h>(headers: &'h HeaderMap, name: &'static str) -> Result<Option<&'h str>, AuthError> {
    match headers.get(name) {
        None => Ok(None),
        Some(v) => v.to_str().map(Some).map_err(|_| AuthError::Malformed(name)),
    }
}

fn required<'h>(headers: &'h HeaderMap, name: &'static str) -> Result<&'h str, AuthError> {
    text(headers, name)?.ok_or(AuthError::Missing(name))
}

/// A decimal number of at most 20 digits, nothing else.
fn decimal(s: &str, name: &'static str) -> Result<u64, AuthError> {
    s.parse()
        .ok()
        .filter(|_| !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit()))
        .ok_or(AuthError::Malformed(name))
}

/// Whether the headers are of this signature version.
fn check_version(headers: &HeaderMap) -> Result<(), AuthError> {
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
fn digest_of(s: &str) -> Result<Option<[u8; 32]>, AuthError> {
    if s == STREAMED {
        return Ok(None);
    }
    unhex::<32>(s).map(Some).ok_or(AuthError::Malformed(DIGEST))
}

/// The MAC over the digest's canonical (lowercase) spelling.
fn canonical_digest(digest: &Option<[u8; 32]>) -> String {
    digest
        .as_ref()
        .map_or_else(|| STREAMED.to_string(), |d| hex(d))
}

fn check_time(time: u64, now: u64) -> Result<(), AuthError> {
    let skew_ms = time.abs_diff(now);
    if skew_ms > MAX_SKEW_MS {
        return Err(AuthError::Stale { skew_ms });
    }
    Ok(())
}

impl Secret {
    fn new(secret: &[u8]) -> Arc<Secret> {
        Arc::new(Secret {
            key: secret.to_vec(),
            mac_key: blake3::derive_key(MAC_KEY_CONTEXT, secret),
        })
    }

    /// Keyed BLAKE3 over `parts`, each followed by a newline.
    fn mac(&self, parts: &[&str]) -> blake3::Hasher {
        let mut mac = blake3::Hasher::new_keyed(&self.mac_key);
        for part in parts {
            mac.update(part.as_bytes());
            mac.update(b"\n");
        }
        mac
    }

    /// Version 1's HMAC-SHA256 with the secret over `parts`, each followed by a newline
    /// (seals only).
    fn seal_mac(&self, parts: &[&str]) -> Hmac<Sha256> {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes keys of any length");
        for part in parts {
            mac.update(part.as_bytes());
            mac.update(b"\n");
        }
        mac
    }

    /// The MAC of a request (see the module documentation); `digest` in its canonical
    /// spelling.
    fn request_mac(
        &self,
        method: &str,
        path: &str,
        time: u64,
        digest: &str,
        to: Recipient,
        nonce: u128,
    ) -> blake3::Hasher {
        self.mac(&[
            "ecdn-peer-v3",
            method,
            path,
            &time.to_string(),
            digest,
            &to.addr.to_string(),
            &to.epoch.to_string(),
            &format!("{nonce:032x}"),
        ])
    }

    fn signature(
        &self,
        method: &str,
        path: &str,
        to: Recipient,
        time: u64,
        nonce: u128,
        digest: String,
    ) -> Signature {
        let mac = self.request_mac(method, path, time, &digest, to, nonce);
        Signature {
            time,
            digest,
            to,
            nonce,
            signature: hex(mac.finalize().as_bytes()),
        }
    }

    /// The tagger of a streamed body sent with request signature `signature` (lowercase hex).
    fn tagger(&self, signature: &str) -> BodyTagger {
        let request_key: [u8; 32] = self
            .mac(&["ecdn-peer-v3-body", signature])
            .finalize()
            .into();
        BodyTagger {
            mac: blake3::Hasher::new_keyed(&request_key),
        }
    }

    fn sub_chunk_tagger(&self, signature: &[u8; 32]) -> SubChunkTagger {
        let mut mac = self.mac(&["ecdn-peer-v3-sub-chunks"]);
        mac.update(signature);
        SubChunkTagger {
            key: mac.finalize().into(),
        }
    }

    /// The MAC of an answer to a request for `path` (see [`ClusterKey::sign_response`]).
    fn response_mac(&self, path: &str, time: u64, digest: &str) -> blake3::Hasher {
        self.mac(&["ecdn-peer-v3-response", path, &time.to_string(), digest])
    }

    fn seal_input(what: &str, json: &[u8]) -> [String; 5] {
        [
            "ecdn-peer-v1".into(),
            "PUT".into(),
            what.into(),
            "0".into(),
            hex(&sha256(json)),
        ]
    }
}

impl ClusterKey {
    /// A key of one secret.
    pub fn new(secret: &[u8]) -> ClusterKey {
        ClusterKey::with_accepted(secret, &[])
    }

    /// A key that signs with `secret` and also accepts `accepted` (a rotation's window).
    pub fn with_accepted(secret: &[u8], accepted: &[&[u8]]) -> ClusterKey {
        ClusterKey {
            ring: Arc::new(RwLock::new(ring_of(secret, accepted))),
            rotations: Arc::new(AtomicU64::new(0)),
        }
    }

    /// How many times this ring was rotated: what was sealed under an earlier generation may
    /// need sealing again once its secret is no longer accepted (the etcd leader writes its map
    /// whole again when this changes).
    pub fn generation(&self) -> u64 {
        self.rotations.load(Ordering::Acquire)
    }

    /// From now on: sign with `secret`, accept it and `accepted`, for this key and every clone
    /// of it (one step of a rotation, see the module documentation).
    pub fn rotate(&self, secret: &[u8], accepted: &[&[u8]]) {
        let ring = ring_of(secret, accepted);
        *self.ring.write().unwrap_or_else(|e| e.into_inner()) = ring;
        self.rotations.fetch_add(1, Ordering::AcqRel);
    }

    /// How many secrets are accepted now (the one that signs included).
    pub fn accepted(&self) -> usize {
        self.secrets().len()
    }

    fn secrets(&self) -> Ring {
        self.ring.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The secret that signs now.
    fn signing(&self) -> Arc<Secret> {
        self.secrets()[0].clone()
    }

    /// Signs a request for `to` with body digest `digest` (see [`digest`]) at `time` (UNIX
    /// milliseconds) with `nonce`.
    pub fn sign_digest(
        &self,
        method: &str,
        path: &str,
        to: Recipient,
        time: u64,
        nonce: u128,
        digest: &[u8; 32],
    ) -> Signature {
        self.signing()
            .signature(method, path, to, time, nonce, hex(digest))
    }

    /// Signs a request for `to` with `body` now, with a fresh nonce.
    pub fn sign(&self, method: &str, path: &str, to: Recipient, body: &[u8]) -> Signature {
        self.sign_expecting_sub_chunks(method, path, to, body).0
    }

    /// [`ClusterKey::sign`], and the tagger of the sub-chunks its answer will carry, keyed
    /// with the same secret (so a rotation while the request is in flight changes neither).
    pub fn sign_expecting_sub_chunks(
        &self,
        method: &str,
        path: &str,
        to: Recipient,
        body: &[u8],
    ) -> (Signature, SubChunkTagger) {
        let secret = self.signing();
        let s = secret.signature(
            method,
            path,
            to,
            unix_now_ms(),
            fresh_nonce(),
            hex(&digest(body)),
        );
        let mac = s.mac().expect("a signature just made is 32 bytes of hex");
        (s, secret.sub_chunk_tagger(&mac))
    }

    /// Signs a request for `to` at `time` whose body is streamed: the body is its content
    /// followed by the tag of the returned [`BodyTagger`] (fed the content).
    pub fn sign_streamed(
        &self,
        method: &str,
        path: &str,
        to: Recipient,
        time: u64,
        nonce: u128,
    ) -> (Signature, BodyTagger) {
        let secret = self.signing();
        let s = secret.signature(method, path, to, time, nonce, STREAMED.to_string());
        let tagger = secret.tagger(&s.signature);
        (s, tagger)
    }

    /// The tagger of the sub-chunks answered to the request with signature `signature` (see
    /// the module documentation), keyed with the secret that signs now. The answering node
    /// uses [`Verified::sub_chunk_tagger`], the reader the tagger of
    /// [`ClusterKey::sign_expecting_sub_chunks`].
    pub fn sub_chunk_tagger(&self, signature: &[u8; 32]) -> SubChunkTagger {
        self.signing().sub_chunk_tagger(signature)
    }

    /// Checks a request's signature headers against this key's secrets and the receiver's
    /// clock `now` (UNIX milliseconds). Whether the request is for this process, and not a
    /// replay, is the receiver's to check next ([`crate::replay::Gate`]).
    pub fn verify(
        &self,
        method: &str,
        path: &str,
        headers: &HeaderMap,
        now: u64,
    ) -> Result<Verified, AuthError> {
        check_version(headers)?;
        let time = decimal(required(headers, TIME)?, TIME)?;
        let digest = digest_of(required(headers, DIGEST)?)?;
        let addr: SocketAddr = required(headers, DESTINATION)?
            .parse()
            .map_err(|_| AuthError::Malformed(DESTINATION))?;
        let epoch = decimal(required(headers, EPOCH)?, EPOCH)?;
        let nonce = unhex::<16>(required(headers, NONCE)?)
            .map(u128::from_be_bytes)
            .ok_or(AuthError::Malformed(NONCE))?;
        let sig =
            unhex::<32>(required(headers, SIGNATURE)?).ok_or(AuthError::Malformed(SIGNATURE))?;
        let to = Recipient { addr, epoch };
        let canonical = canonical_digest(&digest);
        let secrets = self.secrets();
        let secret = secrets
            .iter()
            .find(|k| {
                k.request_mac(method, path, time, &canonical, to, nonce)
                    .finalize()
                    == sig
            })
            .ok_or(AuthError::BadSignature)?;
        check_time(time, now)?;
        let body = match digest {
            Some(d) => SignedBody::Digest(d),
            None => SignedBody::Streamed(Box::new(secret.tagger(&hex(&sig)))),
        };
        Ok(Verified {
            body,
            time,
            to,
            nonce,
            signature: sig,
            sub_chunks: secret.sub_chunk_tagger(&sig),
        })
    }

    /// The signature headers of an answer with `body` to a request for `path` (the
    /// coordinator's JSON, a node's `has` answers, pieces and stats): version, time, digest
    /// and a MAC over a line of its own (`ecdn-peer-v3-response`), so that no answer can
    /// pass for a request. An answer names no destination or nonce: it goes back on the
    /// connection its request came on.
    pub fn sign_response(&self, path: &str, body: &[u8]) -> HeaderMap {
        let time = unix_now_ms();
        let digest = hex(&digest(body));
        let mac = self.signing().response_mac(path, time, &digest);
        header_map([
            (VERSION_HEADER, VERSION.to_string()),
            (TIME, time.to_string()),
            (DIGEST, digest),
            (SIGNATURE, hex(mac.finalize().as_bytes())),
        ])
    }

    /// Checks an answer's signature (see [`ClusterKey::sign_response`]) and its body, received
    /// for a request for `path`, at `now` (UNIX milliseconds).
    pub fn verify_response(
        &self,
        path: &str,
        headers: &HeaderMap,
        body: &[u8],
        now: u64,
    ) -> Result<(), AuthError> {
        check_version(headers)?;
        let time = decimal(required(headers, TIME)?, TIME)?;
        let Some(digest) = digest_of(required(headers, DIGEST)?)? else {
            return Err(AuthError::Malformed(DIGEST));
        };
        let sig =
            unhex::<32>(required(headers, SIGNATURE)?).ok_or(AuthError::Malformed(SIGNATURE))?;
        let digest_hex = hex(&digest);
        if !self
            .secrets()
            .iter()
            .any(|k| k.response_mac(path, time, &digest_hex).finalize() == sig)
        {
            return Err(AuthError::BadSignature);
        }
        check_time(time, now)?;
        if self::digest(body) != digest {
            return Err(AuthError::BodyMismatch);
        }
        Ok(())
    }

    /// The MAC of a value stored in etcd as `what` (see `crate::etcd::seal`), lowercase hex.
    /// Its input is what signature version 1 signed for a `PUT` of path `what` at time `0`,
    /// kept as it was so that values stored by an earlier version still open: a sealed value
    /// is data at rest, never a request (a request of that form is refused by its version).
    pub fn seal(&self, what: &str, json: &[u8]) -> String {
        let input = Secret::seal_input(what, json);
        let parts: Vec<&str> = input.iter().map(String::as_str).collect();
        hex(&self.signing().seal_mac(&parts).finalize().into_bytes())
    }

    /// Whether `seal` (hex) is [`ClusterKey::seal`] of `json` as `what` under one of this
    /// key's secrets (constant time for each).
    pub fn check_seal(&self, what: &str, json: &[u8], seal: &str) -> Result<(), AuthError> {
        let sig = unhex::<32>(seal).ok_or(AuthError::Malformed(SIGNATURE))?;
        let input = Secret::seal_input(what, json);
        let parts: Vec<&str> = input.iter().map(String::as_str).collect();
        self.secrets()
            .iter()
            .find(|k| k.seal_mac(&parts).verify_slice(&sig).is_ok())
            .map(|_| ())
            .ok_or(AuthError::BadSignature)
    }
}

/// The ring of `secret` (first: it signs) and `accepted` (a secret given twice is kept once).
fn ring_of(secret: &[u8], accepted: &[&[u8]]) -> Ring {
    let mut ring = vec![Secret::new(secret)];
    for a in accepted {
        if ring.iter().all(|k| k.key != *a) {
            ring.push(Secret::new(a));
        }
    }
    ring.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring accepts what any of its secrets signed, signs with the first, and keys what a
    /// request leads to (its streamed body, its answer's sub-chunks) with the secret that
    /// verified it; a rotation reaches every clone; answers and seals are checked the same way.
    #[test]
    fn a_key_ring_accepts_its_secrets_and_rotates_for_every_clone() {
        let (a, b) = (
            &b"the first key of the cluster"[..],
            &b"the second key, its successor"[..],
        );
        let old = ClusterKey::new(a);
        let new = ClusterKey::new(b);
        let window = ClusterKey::with_accepted(b, &[a]);
        let to = Recipient {
            addr: "10.0.0.1:9000".parse().unwrap(),
            epoch: 3,
        };
        let now = unix_now_ms();
        let (s, tags) = old.sign_expecting_sub_chunks("GET", "/p", to, b"");
        let v = window.verify("GET", "/p", &s.header_map(), now).unwrap();
        // The answer's sub-chunks are tagged with the old key, as the sender expects.
        let tag = v.sub_chunk_tagger().tag(1, b"bytes");
        assert!(tags.check(1, b"bytes", &tag));
        assert!(!window
            .sub_chunk_tagger(v.signature())
            .check(1, b"bytes", &tag));
        // A streamed body signed with the old key opens under the window's ring.
        let (s, mut body) = old.sign_streamed("PUT", "/p", to, now, 9);
        body.update(b"content");
        let mut wire = b"content".to_vec();
        wire.extend_from_slice(&body.finish());
        let v = window.verify("PUT", "/p", &s.header_map(), now).unwrap();
        assert_eq!(&v.open_body(wire.into()).unwrap()[..], b"content");
        // Answers and seals: either key is accepted, the first signs.
        let answer = old.sign_response("/p", b"{}");
        assert!(window.verify_response("/p", &answer, b"{}", now).is_ok());
        assert!(new.verify_response("/p", &answer, b"{}", now).is_err());
        let seal = window.seal("etcd:map", b"{}");
        assert!(new.check_seal("etcd:map", b"{}", &seal).is_ok());
        assert!(old.check_seal("etcd:map", b"{}", &seal).is_err());
        assert!(window
            .check_seal("etcd:map", b"{}", &old.seal("etcd:map", b"{}"))
            .is_ok());
        // A rotation reaches the clones.
        let clone = window.clone();
        window.rotate(b, &[]);
        assert_eq!(clone.accepted(), 1);
        let s = old.sign("GET", "/p", to, b"");
        assert_eq!(
            clone.verify("GET", "/p", &s.header_map(), now).unwrap_err(),
            AuthError::BadSignature
        );
        // A secret given twice is kept once.
        assert_eq!(ClusterKey::with_accepted(a, &[a, b, b]).accepted(), 2);
    }

    const A: &str = "10.0.0.1:9000";
    const B: &str = "10.0.0.2:9000";

    fn to(addr: &str, epoch: u64) -> Recipient {
        Recipient {
            addr: addr.parse().unwrap(),
            epoch,
        }
    }

    /// `s`'s headers with `name` set to `value` (`None`: removed).
    fn with(s: &Signature, name: &'static str, value: Option<&str>) -> HeaderMap {
        let mut h = s.header_map();
        match value {
            Some(v) => h.insert(name, HeaderValue::from_str(v).unwrap()),
            None => h.remove(name),
        };
        h
    }

    #[test]
    fn signed_requests_verify_and_anything_changed_is_refused() {
        let key = ClusterKey::new(b"0123456789abcdef-secret");
        let body = b"chunk bytes";
        let p = "/peer/chunk/7/1";
        let s = key.sign_digest("PUT", p, to(A, 5), 1_000_000, 42, &digest(body));
        let h = s.header_map();
        let v = key.verify("PUT", p, &h, 1_010_000).unwrap();
        v.check_body(body).unwrap();
        assert_eq!(v.check_body(b"chunk bytez"), Err(AuthError::BodyMismatch));
        assert!(!v.empty_body());
        assert_eq!(
            (v.time_ms(), v.nonce(), v.recipient()),
            (1_000_000, 42, to(A, 5))
        );
        // Another method, path, key, time, destination, epoch or nonce fails.
        let bad = Err(AuthError::BadSignature);
        assert_eq!(key.verify("GET", p, &h, 1_000_000).map(|_| ()), bad);
        assert_eq!(
            key.verify("PUT", "/peer/chunk/7/2", &h, 1_000_000)
                .map(|_| ()),
            bad
        );
        let other = ClusterKey::new(b"another-cluster-key!");
        assert_eq!(other.verify("PUT", p, &h, 1_000_000).map(|_| ()), bad);
        for (name, value) in [
            (TIME, "1000001"),
            (DESTINATION, B),
            (DESTINATION, "10.0.0.1:9001"),
            (EPOCH, "6"),
            (NONCE, &format!("{:032x}", 43)),
        ] {
            let changed = with(&s, name, Some(value));
            assert_eq!(
                key.verify("PUT", p, &changed, 1_000_000).map(|_| ()),
                bad,
                "{name}: {value}"
            );
        }
        // Stale, either way.
        assert_eq!(
            key.verify("PUT", p, &h, 1_030_001).unwrap_err(),
            AuthError::Stale { skew_ms: 30_001 }
        );
        assert!(key.verify("PUT", p, &h, 969_999).is_err());
        assert!(key.verify("PUT", p, &h, 970_000).is_ok());
        let e = AuthError::Stale { skew_ms: 31_250 }.to_string();
        assert!(e.contains("31.2 s") && e.contains("at most 30 s"), "{e}");
        // Uppercase hex of the same digest and nonce, and a leading zero of the epoch, verify:
        // the MAC is over the values.
        let upper = with(&s, DIGEST, Some(&s.digest.to_uppercase()));
        key.verify("PUT", p, &upper, 1_000_000).unwrap();
        let upper = with(&s, NONCE, Some(&format!("{:032X}", 42)));
        key.verify("PUT", p, &upper, 1_000_000).unwrap();
        let padded = with(&s, EPOCH, Some("05"));
        key.verify("PUT", p, &padded, 1_000_000).unwrap();
    }

    #[test]
    fn missing_or_malformed_headers_are_refused() {
        let key = ClusterKey::new(b"0123456789abcdef-secret");
        let s = key.sign_digest("GET", "/x", to(A, 0), 5, 1, &digest(b""));
        for name in [TIME, DIGEST, DESTINATION, EPOCH, NONCE] {
            assert_eq!(
                key.verify("GET", "/x", &with(&s, name, None), 5)
                    .unwrap_err(),
                AuthError::Missing(name)
            );
        }
        assert_eq!(
            key.verify("GET", "/x", &HeaderMap::new(), 5).unwrap_err(),
            AuthError::Missing(SIGNATURE)
        );
        for (name, value) in [
            (TIME, "+5"),
            (TIME, ""),
            (TIME, "123456789012345678901"),
            (DIGEST, "zz"),
            (DESTINATION, "node-1"),
            (DESTINATION, "10.0.0.1"),
            (EPOCH, "-1"),
            (NONCE, "1"),
            (NONCE, &"g".repeat(32)),
            (SIGNATURE, "x"),
        ] {
            assert_eq!(
                key.verify("GET", "/x", &with(&s, name, Some(value)), 5)
                    .unwrap_err(),
                AuthError::Malformed(name),
                "{name}: {value:?}"
            );
        }
        let mut h = s.header_map();
        h.insert(SIGNATURE, HeaderValue::from_bytes(b"\xe9").unwrap());
        assert_eq!(
            key.verify("GET", "/x", &h, 5).unwrap_err(),
            AuthError::Malformed(SIGNATURE)
        );
        assert!(key
            .verify("GET", "/x", &s.header_map(), 5)
            .unwrap()
            .empty_body());
    }

    #[test]
    fn another_signature_version_is_refused_with_both_versions_named() {
        let key = ClusterKey::new(b"0123456789abcdef-secret");
        let s = key.sign_digest("GET", "/x", to(A, 0), 5, 1, &digest(b""));
        // Version 1 sent no version header.
        let v1 = with(&s, VERSION_HEADER, None);
        let e = key.verify("GET", "/x", &v1, 5).unwrap_err();
        assert_eq!(e, AuthError::Version { got: "1".into() });
        let msg = e.to_string();
        assert!(
            msg.contains("version 1") && msg.contains("version 3"),
            "{msg}"
        );
        // Version 2 (HMAC-SHA256) and a later one.
        for other in ["2", "4"] {
            let h = with(&s, VERSION_HEADER, Some(other));
            let msg = key.verify("GET", "/x", &h, 5).unwrap_err().to_string();
            assert!(
                msg.contains(&format!("version {other}")) && msg.contains("version 3"),
                "{msg}"
            );
        }
        // An answer of another version too.
        let mut answer = key.sign_response("/x", b"{}");
        answer.insert(VERSION_HEADER, HeaderValue::from_static("1"));
        let now = unix_now_ms();
        assert_eq!(
            key.verify_response("/x", &answer, b"{}", now),
            Err(AuthError::Version { got: "1".into() })
        );
    }

    #[test]
    fn streamed_bodies_verify_by_their_tag_and_nothing_else_does() {
        let key = ClusterKey::new(b"0123456789abcdef-secret");
        let p = "/_peer/piece/1/k";
        let (s, mut tagger) = key.sign_streamed("PUT", p, to(A, 1), 1_000, 7);
        assert_eq!(s.digest, STREAMED);
        let content = b"sub-chunk one, sub-chunk two";
        tagger.update(&content[..9]);
        tagger.update(&content[9..]);
        let mut body = content.to_vec();
        body.extend_from_slice(&tagger.finish());
        let v = key.verify("PUT", p, &s.header_map(), 1_000).unwrap();
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
        // The tag binds the body to its request: another request's signature refuses it,
        // even one that differs only in its nonce.
        let (s2, _) = key.sign_streamed("PUT", p, to(A, 1), 1_000, 8);
        let v2 = key.verify("PUT", p, &s2.header_map(), 1_000).unwrap();
        assert_eq!(v2.check_body(&body), Err(AuthError::BodyMismatch));
        // "streamed" is signed like a digest: another path, destination or key fails.
        assert_eq!(
            key.verify("PUT", "/_peer/piece/2/k", &s.header_map(), 1_000)
                .unwrap_err(),
            AuthError::BadSignature
        );
        let elsewhere = with(&s, DESTINATION, Some(B));
        assert_eq!(
            key.verify("PUT", p, &elsewhere, 1_000).unwrap_err(),
            AuthError::BadSignature
        );
        let other = ClusterKey::new(b"another-cluster-key!");
        assert_eq!(
            other.verify("PUT", p, &s.header_map(), 1_000).unwrap_err(),
            AuthError::BadSignature
        );
        // A digest-signed request is not opened as a streamed one.
        let d = key.sign_digest("PUT", "/x", to(A, 1), 1_000, 9, &digest(&body));
        let v = key.verify("PUT", "/x", &d.header_map(), 1_000).unwrap();
        assert_eq!(
            v.open_body(bytes::Bytes::from(body.clone())).unwrap().len(),
            body.len()
        );
    }

    #[test]
    fn answers_are_signed_apart_from_requests() {
        let key = ClusterKey::new(b"0123456789abcdef-secret");
        let h = key.sign_response("/coord/map?after=1", b"{}");
        let now = unix_now_ms();
        key.verify_response("/coord/map?after=1", &h, b"{}", now)
            .unwrap();
        assert_eq!(
            key.verify_response("/coord/map?after=1", &h, b"{ }", now),
            Err(AuthError::BodyMismatch)
        );
        assert_eq!(
            key.verify_response("/coord/map?after=2", &h, b"{}", now),
            Err(AuthError::BadSignature)
        );
        assert!(matches!(
            key.verify_response("/coord/map?after=1", &h, b"{}", now + 31_000),
            Err(AuthError::Stale { .. })
        ));
        // An answer is no request, even with a destination and nonce added to it.
        let mut as_request = h.clone();
        let s = key.sign_digest("GET", "/x", to(A, 0), now, 1, &digest(b"{}"));
        for name in [DESTINATION, EPOCH, NONCE] {
            as_request.insert(name, s.header_map()[name].clone());
        }
        assert_eq!(
            key.verify("RESPONSE", "/coord/map?after=1", &as_request, now)
                .unwrap_err(),
            AuthError::BadSignature
        );
        // Nor a request an answer.
        assert_eq!(
            key.verify_response("/x", &s.header_map(), b"{}", now),
            Err(AuthError::BadSignature)
        );
    }

    #[test]
    fn seals_are_what_version_1_stored() {
        let key = ClusterKey::new(b"0123456789abcdef-secret");
        let json = br#"{"epoch":1}"#;
        // HMAC-SHA256 over "ecdn-peer-v1\nPUT\netcd:map\n0\n" sha256(json) "\n", as version 1
        // signed it (computed apart from this code).
        let v1 = "2ce6c5ab1626c3d15600400e4c148913acd5be37a823c913441f289ca5c3d193";
        assert_eq!(key.seal("etcd:map", json), v1);
        key.check_seal("etcd:map", json, v1).unwrap();
        assert_eq!(
            key.check_seal("etcd:object", json, v1),
            Err(AuthError::BadSignature)
        );
        assert_eq!(
            key.check_seal("etcd:map", br#"{"epoch":2}"#, v1),
            Err(AuthError::BadSignature)
        );
        assert_eq!(
            key.check_seal("etcd:map", json, "zz"),
            Err(AuthError::Malformed(SIGNATURE))
        );
    }

    #[test]
    fn version_3_is_keyed_blake3_as_documented() {
        // Computed apart from this code (Python's `blake3` package): the MAC key derived from
        // the secret, the request's lines under it, and a sub-chunk tag of that request.
        let key = ClusterKey::new(b"0123456789abcdef-secret");
        let s = key.sign_digest("GET", "/x", to(A, 0), 5, 1, &digest(b""));
        assert_eq!(
            s.digest,
            "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
        );
        assert_eq!(
            s.signature,
            "802cca43a5a06be3aece282096c8455029b2148fe9a92bca5d98cfb8c6eac3c7"
        );
        let v = key.verify("GET", "/x", &s.header_map(), 5).unwrap();
        let tagger = key.sub_chunk_tagger(v.signature());
        assert_eq!(
            hex(&tagger.tag(7, b"sub-chunk bytes")),
            "d2647a06c53c7105a2c760812a91a328"
        );
        // A streamed body's tag were this request's body streamed.
        let mut body = key.signing().tagger(&s.signature);
        body.update(b"content");
        assert_eq!(
            hex(&body.finish()),
            "490ae56ef37940be690d808fd34427b79486502971a70886e89f3cd1555c91de"
        );
    }

    #[test]
    fn a_sub_chunk_tag_checks_only_its_own_bytes_index_request_and_key() {
        let key = ClusterKey::new(b"0123456789abcdef-secret");
        let (a, b) = (
            key.sign_digest("GET", "/p", to(A, 1), 5, 1, &digest(b"")),
            key.sign_digest("GET", "/p", to(A, 1), 5, 2, &digest(b"")),
        );
        let sig = |s: &Signature| unhex::<32>(&s.signature).unwrap();
        let tagger = key.sub_chunk_tagger(&sig(&a));
        let tag = tagger.tag(3, b"bytes");
        assert!(tagger.check(3, b"bytes", &tag));
        assert!(!tagger.check(3, b"bytez", &tag));
        assert!(!tagger.check(4, b"bytes", &tag));
        assert!(!tagger.check(3, b"bytes", &tag[..SUB_TAG_LEN - 1]));
        // Another request (its nonce alone differs), or another key: another tag.
        assert!(!key.sub_chunk_tagger(&sig(&b)).check(3, b"bytes", &tag));
        let other = ClusterKey::new(b"another-cluster-key!");
        assert!(!other.sub_chunk_tagger(&sig(&a)).check(3, b"bytes", &tag));
    }

    #[test]
    fn nonces_never_repeat_within_a_process() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..10_000 {
            assert!(seen.insert(fresh_nonce()));
        }
        // One prefix per process.
        let prefixes: std::collections::HashSet<u64> =
            seen.iter().map(|n| (n >> 64) as u64).collect();
        assert_eq!(prefixes.len(), 1);
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
