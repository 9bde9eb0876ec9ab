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
//! ([`ClusterKey::sign_response`]), so an earlier process refuses them as of another version;
//! an answer's MAC covers the signature of the request it answers, so it answers that request
//! only (until issue 65 it covered the path alone, and an answer captured within the clock
//! window could be given again to another request for the same path).
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
//!
//! **Files.** `headers.rs`: the header names, the errors, [`Signature`] and the header parsing
//! and encoding every check shares; `verified.rs`: what a request that checked out leads to
//! ([`Verified`], [`BodyTagger`], [`SubChunkTagger`]); `key.rs`: the key ring
//! ([`ClusterKey`]) that signs and checks.

mod headers;
mod key;
mod verified;

pub(crate) use headers::unhex;
pub use headers::{
    digest, fresh_nonce, hex, sha256, unix_now_ms, AuthError, Recipient, Signature, DESTINATION,
    DIGEST, EPOCH, MAX_SKEW_MS, MAX_SKEW_S, NONCE, SIGNATURE, STREAMED, SUB_TAG_LEN, TAG_LEN, TIME,
    VERSION, VERSION_HEADER,
};
pub use key::ClusterKey;
pub use verified::{AnswerKey, BodyTagger, SubChunkTagger, Verified};

#[cfg(test)]
mod tests;
