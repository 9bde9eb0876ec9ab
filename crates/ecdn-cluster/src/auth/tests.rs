//! The signature protocol's tests: requests, answers, bodies, sub-chunks, seals and the key
//! ring, and vectors that pin the wire format.

use hyper::header::{HeaderMap, HeaderValue};

/// The signature of the request an answer in these tests answers.
const REQUEST: [u8; 32] = [7; 32];

use super::headers::*;
use super::key::*;

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
    let (s, answers) = old.sign_expecting_sub_chunks("GET", "/p", to, b"");
    let tags = answers.sub_chunk_tagger(&s.mac().unwrap());
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
    let answer = old.sign_response("/p", &REQUEST, b"{}");
    assert!(window
        .verify_response("/p", &REQUEST, &answer, b"{}", now)
        .is_ok());
    assert!(new
        .verify_response("/p", &REQUEST, &answer, b"{}", now)
        .is_err());
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
    let mut answer = key.sign_response("/x", &REQUEST, b"{}");
    answer.insert(VERSION_HEADER, HeaderValue::from_static("1"));
    let now = unix_now_ms();
    assert_eq!(
        key.verify_response("/x", &REQUEST, &answer, b"{}", now),
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
    let h = key.sign_response("/coord/map?after=1", &REQUEST, b"{}");
    let now = unix_now_ms();
    key.verify_response("/coord/map?after=1", &REQUEST, &h, b"{}", now)
        .unwrap();
    assert_eq!(
        key.verify_response("/coord/map?after=1", &REQUEST, &h, b"{ }", now),
        Err(AuthError::BodyMismatch)
    );
    assert_eq!(
        key.verify_response("/coord/map?after=2", &REQUEST, &h, b"{}", now),
        Err(AuthError::BadSignature)
    );
    assert!(matches!(
        key.verify_response("/coord/map?after=1", &REQUEST, &h, b"{}", now + 31_000),
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
        key.verify_response("/x", &REQUEST, &s.header_map(), b"{}", now),
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
    let prefixes: std::collections::HashSet<u64> = seen.iter().map(|n| (n >> 64) as u64).collect();
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

#[test]
fn an_answer_answers_only_the_request_it_was_signed_for() {
    let key = ClusterKey::new(b"0123456789abcdef0123");
    let now = unix_now_ms();
    let answer = key.sign_response("/coord/map?after=1", &REQUEST, b"{}");
    key.verify_response("/coord/map?after=1", &REQUEST, &answer, b"{}", now)
        .unwrap();
    // The same answer given to another request for the same path, within the clock window:
    // refused (issue 65; before, the MAC covered the path alone and this passed).
    let other = [8u8; 32];
    assert_eq!(
        key.verify_response("/coord/map?after=1", &other, &answer, b"{}", now),
        Err(AuthError::BadSignature)
    );
}
