//! Signature Version 4 against botocore's signer (`data/sigv4_vectors.json`, made by
//! `data/sigv4_vectors.py`): every request it signed checks out, and any change to what was
//! signed, the key, or the time is refused with S3's code. aws-chunked bodies against the
//! example in AWS's documentation of streaming uploads.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ecdn_s3::chunked::Dechunker;
use ecdn_s3::sigv4::{verify, ChunkSigner, Payload, SignedParts};
use ecdn_s3::Code;

struct Vector {
    method: String,
    path: String,
    query: String,
    headers: http::HeaderMap,
}

fn vectors() -> (u64, String, String, Vec<Vector>) {
    let v: serde_json::Value =
        serde_json::from_str(include_str!("data/sigv4_vectors.json")).unwrap();
    let list = v["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            let url = x["url"].as_str().unwrap();
            let rest = url.strip_prefix("http://127.0.0.1:9000").unwrap();
            let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
            let mut headers = http::HeaderMap::new();
            headers.insert("host", "127.0.0.1:9000".parse().unwrap());
            for h in x["headers"].as_array().unwrap() {
                let name = http::HeaderName::from_bytes(h[0].as_str().unwrap().as_bytes());
                headers.append(name.unwrap(), h[1].as_str().unwrap().parse().unwrap());
            }
            Vector {
                method: x["method"].as_str().unwrap().into(),
                path: path.into(),
                query: query.into(),
                headers,
            }
        })
        .collect();
    (
        v["now"].as_u64().unwrap(),
        v["access_key"].as_str().unwrap().into(),
        v["secret_key"].as_str().unwrap().into(),
        list,
    )
}

fn check(v: &Vector, secret: &str, now: SystemTime) -> Result<String, Code> {
    let parts = SignedParts {
        method: &v.method,
        path: &v.path,
        query: &v.query,
        headers: &v.headers,
    };
    let key = "AKIDECDNTEST00000001";
    match verify(&parts, |k| (k == key).then(|| secret.to_string()), now) {
        Ok(Some(ok)) => Ok(ok.access_key),
        Ok(None) => Err(Code::AccessDenied),
        Err(e) => Err(e.code),
    }
}

#[test]
fn botocores_signatures_check_out() {
    let (now, key, secret, vs) = vectors();
    let now = UNIX_EPOCH + Duration::from_secs(now);
    assert_eq!(vs.len(), 5);
    for v in &vs {
        assert_eq!(
            check(v, &secret, now),
            Ok(key.clone()),
            "{} {}",
            v.method,
            v.path
        );
        // A minute later is fine too.
        assert!(check(v, &secret, now + Duration::from_secs(60)).is_ok());
    }
}

#[test]
fn anything_changed_is_refused_with_s3s_code() {
    let (now, _, secret, vs) = vectors();
    let now = UNIX_EPOCH + Duration::from_secs(now);
    for v in &vs {
        let presigned = v.query.contains("X-Amz-Signature");
        // Another secret.
        assert_eq!(
            check(v, "not-the-secret", now),
            Err(Code::SignatureDoesNotMatch)
        );
        // Another path, method or query.
        let mut w = Vector {
            path: format!("{}x", v.path),
            ..clone(v)
        };
        assert_eq!(check(&w, &secret, now), Err(Code::SignatureDoesNotMatch));
        w = Vector {
            method: "DELETE".into(),
            ..clone(v)
        };
        assert_eq!(check(&w, &secret, now), Err(Code::SignatureDoesNotMatch));
        w = Vector {
            query: format!("{}&extra=1", v.query),
            ..clone(v)
        };
        assert_eq!(check(&w, &secret, now), Err(Code::SignatureDoesNotMatch));
        // Another host.
        w = clone(v);
        w.headers.insert("host", "127.0.0.2:9000".parse().unwrap());
        assert_eq!(check(&w, &secret, now), Err(Code::SignatureDoesNotMatch));
        if presigned {
            // Past its X-Amz-Expires (3600 s).
            assert_eq!(
                check(v, &secret, now + Duration::from_secs(3601)),
                Err(Code::AccessDenied)
            );
            assert!(check(v, &secret, now + Duration::from_secs(3599)).is_ok());
        } else {
            // A signed header changed.
            w = clone(v);
            w.headers
                .insert("x-amz-date", "20261205T103001Z".parse().unwrap());
            assert_eq!(check(&w, &secret, now), Err(Code::SignatureDoesNotMatch));
            // Too far from the server's time.
            assert_eq!(
                check(v, &secret, now + Duration::from_secs(16 * 60)),
                Err(Code::RequestTimeTooSkewed)
            );
            assert_eq!(
                check(v, &secret, now - Duration::from_secs(16 * 60)),
                Err(Code::RequestTimeTooSkewed)
            );
            // A header left out of the list of signed ones is not checked; one on the list
            // missing from the request is refused.
            w = clone(v);
            w.headers.insert("x-not-signed", "1".parse().unwrap());
            assert!(check(&w, &secret, now).is_ok());
            w = clone(v);
            w.headers.remove("x-amz-content-sha256");
            assert!(check(&w, &secret, now).is_err());
        }
        // An unknown key.
        let parts = SignedParts {
            method: &v.method,
            path: &v.path,
            query: &v.query,
            headers: &v.headers,
        };
        let e = verify(&parts, |_| None, now).unwrap_err();
        assert_eq!(e.code, Code::InvalidAccessKeyId);
    }
}

#[test]
fn unsigned_and_malformed_authorizations() {
    let (now, _, secret, vs) = vectors();
    let now = UNIX_EPOCH + Duration::from_secs(now);
    let mut w = clone(&vs[0]);
    w.headers.remove("authorization");
    assert_eq!(
        check(&w, &secret, now),
        Err(Code::AccessDenied),
        "anonymous"
    );
    for bad in [
        "AWS AKIDECDNTEST00000001:abc",
        "AWS4-HMAC-SHA256 Credential=AKIDECDNTEST00000001/20261205/us-east-1/s3, SignedHeaders=host, Signature=00",
        "AWS4-HMAC-SHA256 Credential=AKIDECDNTEST00000001/20261205/us-east-1/s3/aws4_request, Signature=00",
        "AWS4-HMAC-SHA256 Credential=AKIDECDNTEST00000001/20261205/us-east-1/s3/aws4_request, SignedHeaders=range, Signature=00",
        "AWS4-HMAC-SHA256 Credential=AKIDECDNTEST00000001/20261205/us-east-1/s3/aws4_request, SignedHeaders=Host, Signature=00",
        "AWS4-HMAC-SHA256 Nonsense=1",
    ] {
        w = clone(&vs[0]);
        w.headers.insert("authorization", bad.parse().unwrap());
        assert_eq!(
            check(&w, &secret, now),
            Err(Code::AuthorizationHeaderMalformed),
            "{bad}"
        );
    }
}

fn clone(v: &Vector) -> Vector {
    Vector {
        method: v.method.clone(),
        path: v.path.clone(),
        query: v.query.clone(),
        headers: v.headers.clone(),
    }
}

/// AWS's example of a signed streaming upload ("Signature Calculations for the
/// Authorization Header: Transferring Payload in Multiple Chunks"): 66,560 bytes of `a` in
/// chunks of 65,536 and 1,024, then the last chunk, each signed after the request's seed
/// signature.
fn aws_streaming_example() -> (Vec<u8>, ChunkSigner) {
    let signer = ChunkSigner::new(
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "20130524T000000Z",
        "us-east-1",
        "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9",
    );
    let mut body = Vec::new();
    for (size, sig) in [
        (
            65_536,
            "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
        ),
        (
            1_024,
            "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
        ),
        (
            0,
            "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
        ),
    ] {
        body.extend_from_slice(format!("{size:x};chunk-signature={sig}\r\n").as_bytes());
        body.extend(std::iter::repeat_n(b'a', size));
        body.extend_from_slice(b"\r\n");
    }
    (body, signer)
}

#[test]
fn a_signed_streaming_body_decodes_in_any_pieces_and_a_changed_byte_fails() {
    let (body, signer) = aws_streaming_example();
    for step in [1usize, 7, 4096, body.len()] {
        let mut d = Dechunker::new(Some(signer.clone()), false);
        let mut out = Vec::new();
        for piece in body.chunks(step) {
            d.push(piece, &mut out).unwrap();
        }
        assert_eq!(d.finish().unwrap(), Vec::<(String, String)>::new());
        assert_eq!(out, vec![b'a'; 66_560]);
    }
    // One byte of the data changed: that chunk's signature fails.
    let mut bad = body.clone();
    bad[100] = b'b';
    let mut d = Dechunker::new(Some(signer.clone()), false);
    let e = d.push(&bad, &mut Vec::new()).unwrap_err();
    assert_eq!(e.code, Code::SignatureDoesNotMatch);
    // Cut short: the end says so.
    let mut d = Dechunker::new(Some(signer), false);
    d.push(&body[..body.len() - 10], &mut Vec::new()).unwrap();
    assert_eq!(d.finish().unwrap_err().code, Code::IncompleteBody);
}

#[test]
fn an_unsigned_body_with_a_trailer_gives_its_checksum() {
    let body = b"5\r\nhello\r\n6\r\n world\r\n0\r\nx-amz-checksum-crc32:DUoRhQ==\r\n\r\n";
    let mut d = Dechunker::new(None, true);
    let mut out = Vec::new();
    d.push(body, &mut out).unwrap();
    assert_eq!(out, b"hello world");
    assert_eq!(
        d.finish().unwrap(),
        vec![("x-amz-checksum-crc32".to_string(), "DUoRhQ==".to_string())]
    );
    for bad in [
        &b"5\r\nhello!\r\n0\r\n\r\n"[..],
        b"z\r\nhello\r\n",
        b"5;chunk-signature=00\r\nhello\r\n",
        b"5;other=1\r\nhello\r\n",
        b"5\nhello\r\n",
    ] {
        let mut d = Dechunker::new(None, false);
        let r = d
            .push(bad, &mut Vec::new())
            .and_then(|()| d.finish().map(|_| ()));
        assert!(r.is_err(), "{}", String::from_utf8_lossy(bad));
    }
    let mut d = Dechunker::new(None, false);
    d.push(&vec![b'1'; 5000], &mut Vec::new()).unwrap_err();
    let _ = Payload::Unsigned;
}
