//! The S3 face's parsers on arbitrary input (issue 67): a request's bucket, key and operation
//! from its method, path, query and host; a signature check with arbitrary headers and query
//! (never a pass without the secret); an aws-chunked body, signed and unsigned, fed in pieces
//! (never more bytes out than in); the XML bodies clients send; a listing's continuation
//! token; a copy's source and a part copy's range. Each either parses or gives an S3 error, never a panic.
#![no_main]

use std::time::{Duration, UNIX_EPOCH};

use ecdn_s3::chunked::Dechunker;
use ecdn_s3::list::Lister;
use ecdn_s3::request::ListQuery;
use ecdn_s3::sigv4::{verify, ChunkSigner, SignedParts};
use ecdn_s3::{xml, S3Request};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut fields = text.splitn(5, '\n');
    let (method, path, query, host, rest) = (
        fields.next().unwrap_or(""),
        fields.next().unwrap_or(""),
        fields.next().unwrap_or(""),
        fields.next().unwrap_or(""),
        fields.next().unwrap_or(""),
    );
    let _ = S3Request::parse(method, path, query, Some(host), &["s3.test".to_string()]);
    let _ = ecdn_s3::request::copy_source(path.as_bytes());
    let _ = ecdn_s3::request::copy_source_range(query.as_bytes(), host.len() as u64);
    // Headers from the rest, one `name: value` per line; a signature made without the secret
    // never checks out.
    let mut headers = http::HeaderMap::new();
    for line in rest.lines().take(32) {
        if let Some((n, v)) = line.split_once(':') {
            if let (Ok(n), Ok(v)) = (
                http::HeaderName::from_bytes(n.trim().as_bytes()),
                http::HeaderValue::from_str(v.trim()),
            ) {
                headers.append(n, v);
            }
        }
    }
    let parts = SignedParts {
        method,
        path,
        query,
        headers: &headers,
    };
    let now = UNIX_EPOCH + Duration::from_secs(1_796_466_600);
    if let Ok(Some(v)) = verify(&parts, |_| Some("the secret no input knows".into()), now) {
        panic!("a signature checked out without the secret: {v:?}");
    }
    for (signed, trailer) in [(false, false), (false, true), (true, true)] {
        let signer = signed.then(|| ChunkSigner::new("k", "20261205T103000Z", "us-east-1", "00"));
        let mut d = Dechunker::new(signer, trailer);
        let mut out = Vec::new();
        let mut ok = true;
        for piece in data.chunks(7) {
            if d.push(piece, &mut out).is_err() {
                ok = false;
                break;
            }
        }
        assert!(out.len() <= data.len());
        if ok {
            let _ = d.finish();
        }
    }
    let _ = xml::parse_complete(data, 10_000);
    let _ = xml::parse_delete(data, 1000);
    let q = ListQuery {
        continuation_token: Some(text.to_string()),
        max_keys: 5,
        ..ListQuery::default()
    };
    if let Ok(l) = Lister::new("bucket", q) {
        assert!(l.next_batch().is_some());
    }
});
