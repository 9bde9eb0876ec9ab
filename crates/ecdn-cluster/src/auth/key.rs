//! The cluster key as a ring of secrets (see the module documentation, "Key rotation"): one
//! signs, every one is accepted; requests, answers and values stored in etcd are signed and
//! checked here.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use hmac::{Hmac, Mac};
use hyper::header::HeaderMap;
use sha2::Sha256;

use super::headers::*;
use super::verified::{AnswerKey, BodyTagger, SignedBody, SubChunkTagger, Verified};

/// The context string of the MAC key's derivation (`blake3::derive_key`): unique to this
/// protocol and version, as BLAKE3's documentation asks.
const MAC_KEY_CONTEXT: &str = "ecdn 2026-11-27 peer protocol v3 MAC key";

/// One secret of a key ring.
pub(super) struct Secret {
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
    pub(super) fn tagger(&self, signature: &str) -> BodyTagger {
        let request_key: [u8; 32] = self
            .mac(&["ecdn-peer-v3-body", signature])
            .finalize()
            .into();
        BodyTagger {
            mac: blake3::Hasher::new_keyed(&request_key),
        }
    }

    fn answer_key(&self) -> AnswerKey {
        AnswerKey {
            mac_key: self.mac_key,
        }
    }

    /// The MAC of an answer to the request with signature `request` for `path` (see
    /// [`ClusterKey::sign_response`]).
    fn response_mac(
        &self,
        path: &str,
        request: &[u8; 32],
        time: u64,
        digest: &str,
    ) -> blake3::Hasher {
        let request = hex(request);
        self.mac(&[
            "ecdn-peer-v3-answer",
            path,
            &request,
            &time.to_string(),
            digest,
        ])
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
    pub(super) fn signing(&self) -> Arc<Secret> {
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

    /// [`ClusterKey::sign`], and the key of the tags of the sub-chunks its answer may carry:
    /// the same secret, so a rotation while the request is in flight changes neither.
    pub fn sign_expecting_sub_chunks(
        &self,
        method: &str,
        path: &str,
        to: Recipient,
        body: &[u8],
    ) -> (Signature, AnswerKey) {
        let secret = self.signing();
        let s = secret.signature(
            method,
            path,
            to,
            unix_now_ms(),
            fresh_nonce(),
            hex(&digest(body)),
        );
        (s, secret.answer_key())
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
        self.signing().answer_key().sub_chunk_tagger(signature)
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
            answers: secret.answer_key(),
        })
    }

    /// The signature headers of an answer with `body` to the request for `path` whose
    /// signature was `request` (the coordinator's JSON, a node's `has` answers, pieces and
    /// stats): version, time, digest and a MAC over a line of its own (`ecdn-peer-v3-answer`),
    /// the path, the request's signature, the time and the digest, so that no answer can pass
    /// for a request, and none for the answer to another request, even one for the same path
    /// within the clock window (an answer replayed by a man in the middle). An answer names no
    /// destination or nonce: the request's signature, unique to its nonce, stands for both.
    pub fn sign_response(&self, path: &str, request: &[u8; 32], body: &[u8]) -> HeaderMap {
        let time = unix_now_ms();
        let digest = hex(&digest(body));
        let mac = self.signing().response_mac(path, request, time, &digest);
        header_map([
            (VERSION_HEADER, VERSION.to_string()),
            (TIME, time.to_string()),
            (DIGEST, digest),
            (SIGNATURE, hex(mac.finalize().as_bytes())),
        ])
    }

    /// Checks an answer's signature (see [`ClusterKey::sign_response`]) and its body, received
    /// for the request for `path` whose signature was `request`, at `now` (UNIX milliseconds).
    pub fn verify_response(
        &self,
        path: &str,
        request: &[u8; 32],
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
            .any(|k| k.response_mac(path, request, time, &digest_hex).finalize() == sig)
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
