//! What a request whose signature checked out leads to: its body's check ([`Verified`]), a
//! streamed body's tag ([`BodyTagger`]) and the tags of the sub-chunks answered to it
//! ([`SubChunkTagger`]).

use super::headers::{digest, hex, AuthError, Recipient, SUB_TAG_LEN, TAG_LEN};

/// A request whose signature checked out; its body is still to be checked.
#[derive(Clone, Debug)]
pub struct Verified {
    pub(super) body: SignedBody,
    pub(super) time: u64,
    pub(super) to: Recipient,
    pub(super) nonce: u128,
    pub(super) signature: [u8; 32],
    /// The key of the tags of the sub-chunks answered to this request: the secret that
    /// verified it.
    pub(super) answers: AnswerKey,
}

/// How a verified request's body is to be checked.
#[derive(Clone)]
pub(super) enum SignedBody {
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
        self.answers.sub_chunk_tagger(&self.signature)
    }
}

/// What keys the tags of the sub-chunks answered to requests signed, or verified, with one
/// secret of the ring (its MAC key): kept with a request so that the tagger is derived only
/// for an answer that carries sub-chunks.
#[derive(Clone)]
pub struct AnswerKey {
    pub(super) mac_key: [u8; 32],
}

impl std::fmt::Debug for AnswerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AnswerKey(..)")
    }
}

impl AnswerKey {
    /// The tagger of the sub-chunks answered to the request with `signature` (see the module
    /// documentation): keyed BLAKE3 under the MAC key of `"ecdn-peer-v3-sub-chunks\n"` and
    /// the signature.
    pub fn sub_chunk_tagger(&self, signature: &[u8; 32]) -> SubChunkTagger {
        let mut mac = blake3::Hasher::new_keyed(&self.mac_key);
        mac.update(b"ecdn-peer-v3-sub-chunks\n");
        mac.update(signature);
        SubChunkTagger {
            key: mac.finalize().into(),
        }
    }
}

/// Computes the body tag of a streamed body (see the module documentation) as its content
/// passes: the sender's to append, the receiver's to check.
#[derive(Clone)]
pub struct BodyTagger {
    pub(super) mac: blake3::Hasher,
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
    pub(super) key: [u8; 32],
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
pub(super) fn check_mac(mac: blake3::Hasher, tag: &[u8]) -> Result<(), AuthError> {
    let tag: [u8; 32] = tag.try_into().map_err(|_| AuthError::BodyMismatch)?;
    if mac.finalize() == tag {
        Ok(())
    } else {
        Err(AuthError::BodyMismatch)
    }
}
