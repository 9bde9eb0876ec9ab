//! AWS Signature Version 4, checked as S3 checks it: the `Authorization` header
//! (`AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…, Signature=…`) or a presigned URL's query
//! (`X-Amz-Algorithm`, `X-Amz-Credential`, `X-Amz-Date`, `X-Amz-Expires`,
//! `X-Amz-SignedHeaders`, `X-Amz-Signature`).
//!
//! The server rebuilds what the client signed from the request it received: the **canonical
//! request** (method, the path URI-encoded once with `/` kept, the query's pairs encoded and
//! sorted, the signed headers lower-cased with their values trimmed and inner spaces folded,
//! their names, and the payload's hash as `x-amz-content-sha256` says it), the **string to
//! sign** (`AWS4-HMAC-SHA256`, the request's time, the credential's scope
//! `DATE/REGION/s3/aws4_request`, the canonical request's SHA-256), and the **signature**:
//! HMAC-SHA256 chained from `"AWS4" + secret` over the date, the region, `s3` and
//! `aws4_request`, then over the string to sign. The two signatures are compared in constant
//! time. A request's time must be within [`MAX_SKEW`] of the server's
//! (`RequestTimeTooSkewed`); a presigned URL expires `X-Amz-Expires` seconds (at most seven
//! days) after its time (`AccessDenied`, "Request has expired"). Any region is accepted: the
//! region is part of the signature, so a request signed for another one still proves its key.
//!
//! What the payload hash says is left to the caller, which sees the body: a hex SHA-256 (check
//! the body against it: `XAmzContentSHA256Mismatch`), `UNSIGNED-PAYLOAD`, or an aws-chunked
//! body (`STREAMING-…`), whose chunks `chunked.rs` decodes and, when signed, checks with the
//! [`ChunkSigner`] this returns.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::error::{Code, S3Error};
pub use crate::text::{hex, percent_decode, uri_encode};
use crate::time::{parse_amz_date, AmzDate};

/// How far a request's time may be from the server's (S3's 15 minutes).
pub const MAX_SKEW: Duration = Duration::from_secs(15 * 60);
/// The longest a presigned URL may be valid (S3's seven days).
pub const MAX_EXPIRES: u64 = 7 * 24 * 3600;

const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// The request as received, before its body: what a signature covers.
pub struct SignedParts<'a> {
    pub method: &'a str,
    /// The path as sent (percent-encoded).
    pub path: &'a str,
    /// The query as sent, without `?`.
    pub query: &'a str,
    pub headers: &'a http::HeaderMap,
}

/// What the request's payload hash says (`x-amz-content-sha256`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Payload {
    /// The body's SHA-256: the caller checks the body against it.
    Sha256([u8; 32]),
    /// `UNSIGNED-PAYLOAD` (and every presigned URL).
    Unsigned,
    /// An aws-chunked body (`STREAMING-…`): `signed` when each chunk carries a signature
    /// (`STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]`), `trailer` when trailing headers
    /// (a checksum) follow the last chunk.
    Chunked { signed: bool, trailer: bool },
}

impl Payload {
    fn parse(v: &str) -> Result<Payload, S3Error> {
        Ok(match v {
            "UNSIGNED-PAYLOAD" => Payload::Unsigned,
            "STREAMING-AWS4-HMAC-SHA256-PAYLOAD" => Payload::Chunked {
                signed: true,
                trailer: false,
            },
            "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER" => Payload::Chunked {
                signed: true,
                trailer: true,
            },
            "STREAMING-UNSIGNED-PAYLOAD-TRAILER" => Payload::Chunked {
                signed: false,
                trailer: true,
            },
            hex => Payload::Sha256(parse_hex32(hex).ok_or_else(|| {
                S3Error::new(
                    Code::InvalidArgument,
                    format!(
                        "x-amz-content-sha256 {hex:?}: neither a hex SHA-256 nor a known value"
                    ),
                )
            })?),
        })
    }
}

/// A request whose signature checked out.
#[derive(Clone, Debug)]
pub struct Verified {
    /// The access key that signed it.
    pub access_key: String,
    pub payload: Payload,
    /// For a signed aws-chunked body: what checks each chunk's signature.
    pub chunks: Option<ChunkSigner>,
}

/// Checks the signatures of an aws-chunked body's chunks: each chunk's signature signs its
/// bytes' SHA-256 and the signature before it (the request's, for the first chunk).
#[derive(Clone, Debug)]
pub struct ChunkSigner {
    key: [u8; 32],
    amz_date: String,
    scope: String,
    previous: String,
}

impl ChunkSigner {
    /// The signer of the chunks after a request signed with `seed` (its signature, hex) by
    /// `secret` at `amz_date` (`YYYYMMDDTHHMMSSZ`) for `region`.
    pub fn new(secret: &str, amz_date: &str, region: &str, seed: &str) -> ChunkSigner {
        let date = amz_date.get(..8).unwrap_or("");
        ChunkSigner {
            key: signing_key(secret, date, region, "s3"),
            amz_date: amz_date.to_string(),
            scope: format!("{date}/{region}/s3/aws4_request"),
            previous: seed.to_string(),
        }
    }

    /// Whether `signature` (hex) signs a chunk whose bytes' SHA-256 is `digest` (hex) after
    /// the previous one; the chain moves on when it does.
    pub fn check_chunk_digest(&mut self, digest: &str, signature: &str) -> bool {
        let to_sign = format!(
            "AWS4-HMAC-SHA256-PAYLOAD\n{}\n{}\n{}\n{}\n{}",
            self.amz_date, self.scope, self.previous, EMPTY_SHA256, digest
        );
        self.advance(&to_sign, signature)
    }

    /// Whether `signature` signs the trailing headers `trailer` (as sent, each
    /// `name:value\n`) after the last chunk.
    pub fn check_trailer(&mut self, trailer: &[u8], signature: &str) -> bool {
        let to_sign = format!(
            "AWS4-HMAC-SHA256-TRAILER\n{}\n{}\n{}\n{}",
            self.amz_date,
            self.scope,
            self.previous,
            hex(&Sha256::digest(trailer))
        );
        self.advance(&to_sign, signature)
    }

    fn advance(&mut self, to_sign: &str, signature: &str) -> bool {
        let want = hex(&hmac(&self.key, to_sign.as_bytes()));
        let good = constant_time_eq(want.as_bytes(), signature.as_bytes());
        if good {
            self.previous = want;
        }
        good
    }
}

/// The SHA-256 of nothing, hex.
const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// What a signature names: the key, the scope's parts and the signed headers.
struct Credential<'a> {
    access_key: &'a str,
    date: &'a str,
    region: &'a str,
    service: &'a str,
}

impl<'a> Credential<'a> {
    /// `AKID/20130524/us-east-1/s3/aws4_request`.
    fn parse(s: &'a str) -> Result<Credential<'a>, S3Error> {
        let malformed = || {
            S3Error::new(
                Code::AuthorizationHeaderMalformed,
                format!("the credential {s:?} is not KEY/DATE/REGION/s3/aws4_request"),
            )
        };
        let mut parts = s.rsplitn(5, '/');
        let (term, service, region, date, access_key) = (
            parts.next().ok_or_else(malformed)?,
            parts.next().ok_or_else(malformed)?,
            parts.next().ok_or_else(malformed)?,
            parts.next().ok_or_else(malformed)?,
            parts.next().ok_or_else(malformed)?,
        );
        if term != "aws4_request" || service != "s3" || date.len() != 8 || access_key.is_empty() {
            return Err(malformed());
        }
        Ok(Credential {
            access_key,
            date,
            region,
            service,
        })
    }

    fn scope(&self) -> String {
        format!(
            "{}/{}/{}/aws4_request",
            self.date, self.region, self.service
        )
    }
}

/// Checks the request's signature with the secret `secret_of` gives for its access key (none:
/// `InvalidAccessKeyId`), at time `now`. `Ok(None)`: the request carries no signature (an
/// anonymous request; the caller decides whether it may).
pub fn verify(
    req: &SignedParts,
    secret_of: impl Fn(&str) -> Option<String>,
    now: SystemTime,
) -> Result<Option<Verified>, S3Error> {
    let header = req
        .headers
        .get(http::header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or("\u{0}"));
    let presigned = query_value(req.query, "X-Amz-Algorithm").is_some();
    match (header, presigned) {
        (Some(_), true) => Err(S3Error::new(
            Code::InvalidArgument,
            "a request is signed by its Authorization header or its query, not both",
        )),
        (Some(h), false) => verify_header(req, h, secret_of, now).map(Some),
        (None, true) => verify_query(req, secret_of, now).map(Some),
        (None, false) => Ok(None),
    }
}

fn verify_header(
    req: &SignedParts,
    header: &str,
    secret_of: impl Fn(&str) -> Option<String>,
    now: SystemTime,
) -> Result<Verified, S3Error> {
    let Some(rest) = header.strip_prefix(ALGORITHM) else {
        return Err(S3Error::new(
            Code::AuthorizationHeaderMalformed,
            "only AWS4-HMAC-SHA256 signatures are accepted",
        ));
    };
    let (mut credential, mut signed, mut signature) = (None, None, None);
    for field in rest.split(',') {
        let field = field.trim();
        match field.split_once('=') {
            Some(("Credential", v)) => credential = Some(v),
            Some(("SignedHeaders", v)) => signed = Some(v),
            Some(("Signature", v)) => signature = Some(v),
            _ if field.is_empty() => {}
            _ => {
                return Err(S3Error::new(
                    Code::AuthorizationHeaderMalformed,
                    format!("unknown field {field:?} in the Authorization header"),
                ))
            }
        }
    }
    let missing = |what: &str| {
        S3Error::new(
            Code::AuthorizationHeaderMalformed,
            format!("the Authorization header has no {what}"),
        )
    };
    let credential = Credential::parse(credential.ok_or_else(|| missing("Credential"))?)?;
    let signed = signed.ok_or_else(|| missing("SignedHeaders"))?;
    let signature = signature.ok_or_else(|| missing("Signature"))?;
    let date = header_str(req.headers, "x-amz-date")
        .ok_or_else(|| S3Error::new(Code::AccessDenied, "the request has no x-amz-date"))?;
    let date = parse_amz_date(date)?;
    check_skew(&date, now)?;
    let payload_header = header_str(req.headers, "x-amz-content-sha256").ok_or_else(|| {
        S3Error::new(
            Code::InvalidRequest,
            "a signed request needs x-amz-content-sha256",
        )
    })?;
    let payload = Payload::parse(payload_header)?;
    let canonical = canonical_request(req, signed, payload_header, None)?;
    let key = check_signature(&credential, &date, &canonical, signature, secret_of)?;
    let chunks = matches!(payload, Payload::Chunked { signed: true, .. }).then(|| ChunkSigner {
        key,
        amz_date: date.text.clone(),
        scope: credential.scope(),
        previous: signature.to_string(),
    });
    Ok(Verified {
        access_key: credential.access_key.to_string(),
        payload,
        chunks,
    })
}

fn verify_query(
    req: &SignedParts,
    secret_of: impl Fn(&str) -> Option<String>,
    now: SystemTime,
) -> Result<Verified, S3Error> {
    let get = |name: &str| {
        query_value(req.query, name).ok_or_else(|| {
            S3Error::new(
                Code::AuthorizationQueryParametersError,
                format!("a presigned URL needs {name}"),
            )
        })
    };
    if get("X-Amz-Algorithm")? != ALGORITHM {
        return Err(S3Error::new(
            Code::AuthorizationQueryParametersError,
            "only AWS4-HMAC-SHA256 signatures are accepted",
        ));
    }
    let credential_text = get("X-Amz-Credential")?;
    let credential = Credential::parse(&credential_text)?;
    let date = parse_amz_date(&get("X-Amz-Date")?)?;
    let expires: u64 = get("X-Amz-Expires")?
        .parse()
        .ok()
        .filter(|&e| (1..=MAX_EXPIRES).contains(&e))
        .ok_or_else(|| {
            S3Error::new(
                Code::AuthorizationQueryParametersError,
                "X-Amz-Expires must be a number of seconds from 1 to 604800",
            )
        })?;
    let at = UNIX_EPOCH + Duration::from_secs(date.unix);
    if at > now + MAX_SKEW {
        return Err(S3Error::new(
            Code::AccessDenied,
            "the presigned URL's time is in the future",
        ));
    }
    if now > at + Duration::from_secs(expires) {
        return Err(S3Error::new(Code::AccessDenied, "Request has expired"));
    }
    let signed = get("X-Amz-SignedHeaders")?;
    let signature = get("X-Amz-Signature")?;
    let canonical = canonical_request(req, &signed, "UNSIGNED-PAYLOAD", Some("X-Amz-Signature"))?;
    check_signature(&credential, &date, &canonical, &signature, secret_of)?;
    Ok(Verified {
        access_key: credential.access_key.to_string(),
        payload: Payload::Unsigned,
        chunks: None,
    })
}

/// Compares `signature` with the one `canonical` makes with the key's secret; the signing key
/// when they are the same.
fn check_signature(
    credential: &Credential,
    date: &AmzDate,
    canonical: &str,
    signature: &str,
    secret_of: impl Fn(&str) -> Option<String>,
) -> Result<[u8; 32], S3Error> {
    if !date.text.starts_with(credential.date) {
        return Err(S3Error::new(
            Code::SignatureDoesNotMatch,
            "the credential's date is not the request's",
        ));
    }
    let secret = secret_of(credential.access_key).ok_or_else(|| {
        S3Error::new(
            Code::InvalidAccessKeyId,
            "the access key does not exist in this cluster",
        )
    })?;
    let key = signing_key(
        &secret,
        credential.date,
        credential.region,
        credential.service,
    );
    let to_sign = format!(
        "{ALGORITHM}\n{}\n{}\n{}",
        date.text,
        credential.scope(),
        hex(&Sha256::digest(canonical.as_bytes()))
    );
    let want = hex(&hmac(&key, to_sign.as_bytes()));
    if !constant_time_eq(want.as_bytes(), signature.as_bytes()) {
        return Err(S3Error::new(
            Code::SignatureDoesNotMatch,
            "the request signature we calculated does not match the signature you provided",
        ));
    }
    Ok(key)
}

fn check_skew(date: &AmzDate, now: SystemTime) -> Result<(), S3Error> {
    let at = UNIX_EPOCH + Duration::from_secs(date.unix);
    let off = match now.duration_since(at) {
        Ok(d) => d,
        Err(e) => e.duration(),
    };
    if off > MAX_SKEW {
        return Err(S3Error::new(
            Code::RequestTimeTooSkewed,
            "the difference between the request time and the server's time is too large",
        ));
    }
    Ok(())
}

/// The canonical request of `req` for the headers `signed` (`;`-separated, lower case, as the
/// client listed them), with `payload` as its last line; `skip`: a query parameter left out
/// (a presigned URL's own signature).
pub fn canonical_request(
    req: &SignedParts,
    signed: &str,
    payload: &str,
    skip: Option<&str>,
) -> Result<String, S3Error> {
    let malformed = |why: String| S3Error::new(Code::AuthorizationHeaderMalformed, why);
    let names: Vec<&str> = signed.split(';').collect();
    if names
        .iter()
        .any(|n| n.is_empty() || n.bytes().any(|b| b.is_ascii_uppercase()))
    {
        return Err(malformed(format!(
            "SignedHeaders {signed:?} is not a list of lower-case names"
        )));
    }
    if !names.contains(&"host") {
        return Err(malformed("SignedHeaders must include host".into()));
    }
    let mut out = String::with_capacity(256);
    out.push_str(req.method);
    out.push('\n');
    out.push_str(&uri_encode(&percent_decode(req.path.as_bytes()), false));
    out.push('\n');
    out.push_str(&canonical_query(req.query, skip));
    out.push('\n');
    for name in &names {
        let values: Vec<&str> = req
            .headers
            .get_all(*name)
            .iter()
            .map(|v| v.to_str().unwrap_or(""))
            .collect();
        if values.is_empty() {
            return Err(malformed(format!(
                "the signed header {name:?} is not in the request"
            )));
        }
        out.push_str(name);
        out.push(':');
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&fold_spaces(v));
        }
        out.push('\n');
    }
    out.push('\n');
    out.push_str(signed);
    out.push('\n');
    out.push_str(payload);
    Ok(out)
}

/// A header value trimmed, its runs of spaces folded into one.
fn fold_spaces(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for word in v.split(' ').filter(|w| !w.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// The query's pairs, each name and value decoded and encoded again as SigV4 says, sorted.
fn canonical_query(query: &str, skip: Option<&str>) -> String {
    let mut pairs: Vec<(String, String)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (n, v) = p.split_once('=').unwrap_or((p, ""));
            (
                uri_encode(&percent_decode(n.as_bytes()), true),
                uri_encode(&percent_decode(v.as_bytes()), true),
            )
        })
        .filter(|(n, _)| Some(n.as_str()) != skip)
        .collect();
    pairs.sort();
    let mut out = String::new();
    for (i, (n, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        out.push_str(n);
        out.push('=');
        out.push_str(v);
    }
    out
}

/// The value of query parameter `name` (decoded), if present.
pub fn query_value(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|p| {
        let (n, v) = p.split_once('=').unwrap_or((p, ""));
        (n == name).then(|| String::from_utf8_lossy(&percent_decode(v.as_bytes())).into_owned())
    })
}

fn header_str<'a>(h: &'a http::HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// The signing key of `secret` for one day, region and service.
pub fn signing_key(secret: &str, date: &str, region: &str, service: &str) -> [u8; 32] {
    let k_date = hmac(format!("AWS4{secret}").as_bytes(), date.as_bytes());
    let k_region = hmac(&k_date, region.as_bytes());
    let k_service = hmac(&k_region, service.as_bytes());
    hmac(&k_service, b"aws4_request")
}

fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
    m.update(data);
    m.finalize().into_bytes().into()
}

fn parse_hex32(s: &str) -> Option<[u8; 32]> {
    crate::text::unhex(s)?.try_into().ok()
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
