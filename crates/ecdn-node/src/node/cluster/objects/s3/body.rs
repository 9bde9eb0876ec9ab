//! A `PutObject`'s body on its way into the object cache: decoded when it comes aws-chunked
//! (`ecdn_s3::chunked`, each chunk's signature checked when signed), and checked once whole
//! against what the request said of it — `x-amz-content-sha256` (a SHA-256), `Content-MD5`,
//! `x-amz-decoded-content-length`, and an aws-chunked body's trailing checksum
//! (`x-amz-checksum-crc32`, `-crc32c`, `-crc64nvme`, `-sha256`). A body that fails is refused
//! before anything is stored (`objects/write.rs`), with S3's code ([`S3Body::failure`]). The
//! MD5 of the bytes is the object's `ETag`.

use std::sync::{Arc, Mutex};

use crate::node::client_body::ClientBody;
use base64::Engine;
use bytes::Bytes;
use ecdn_s3::chunked::Dechunker;
use ecdn_s3::sigv4::{Payload, Verified};
use ecdn_s3::{Code, S3Error};
use http_body_util::BodyExt;
use hyper::body::Body;
use hyper::HeaderMap;
use md5::{Digest as _, Md5};
use sha2::{Digest, Sha256};

use crate::node::cluster::objects::write::PutBody;

/// A checksum an aws-chunked body's trailer carries, computed as the bytes pass.
enum Checksum {
    Crc32(crc_fast::Digest),
    Crc32c(crc_fast::Digest),
    Crc64(crc_fast::Digest),
    Sha256(Sha256),
}

impl Checksum {
    /// The checksum the `x-amz-trailer` header names (lower case).
    fn named(name: &str) -> Result<Option<Checksum>, S3Error> {
        use crc_fast::CrcAlgorithm::{Crc32Iscsi, Crc32IsoHdlc, Crc64Nvme};
        Ok(Some(match name {
            "x-amz-checksum-crc32" => Checksum::Crc32(crc_fast::Digest::new(Crc32IsoHdlc)),
            "x-amz-checksum-crc32c" => Checksum::Crc32c(crc_fast::Digest::new(Crc32Iscsi)),
            "x-amz-checksum-crc64nvme" => Checksum::Crc64(crc_fast::Digest::new(Crc64Nvme)),
            "x-amz-checksum-sha256" => Checksum::Sha256(Sha256::new()),
            "" => return Ok(None),
            other => {
                return Err(S3Error::new(
                    Code::InvalidRequest,
                    format!("the trailing checksum {other:?} is not one this store checks"),
                ))
            }
        }))
    }

    fn update(&mut self, b: &[u8]) {
        match self {
            Checksum::Crc32(d) | Checksum::Crc32c(d) | Checksum::Crc64(d) => d.update(b),
            Checksum::Sha256(s) => s.update(b),
        }
    }

    /// The value as the trailer writes it: the big-endian bytes in base64.
    fn value(&self) -> String {
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        match self {
            Checksum::Crc32(d) | Checksum::Crc32c(d) => b64(&(d.finalize() as u32).to_be_bytes()),
            Checksum::Crc64(d) => b64(&d.finalize().to_be_bytes()),
            Checksum::Sha256(s) => b64(&s.clone().finalize()),
        }
    }
}

/// A `PutObject`'s body (see the module documentation).
pub(in crate::node) struct S3Body {
    inner: ClientBody,
    dechunk: Option<Dechunker>,
    /// The body's SHA-256 as the request signed it.
    sha256: Option<([u8; 32], Sha256)>,
    /// `Content-MD5`, decoded.
    content_md5: Option<Vec<u8>>,
    md5: Md5,
    /// `x-amz-decoded-content-length` of an aws-chunked body.
    decoded_length: Option<u64>,
    trailer: Option<(String, Checksum)>,
    seen: u64,
    ended: bool,
    /// Why the body was refused, with S3's code.
    failure: Arc<Mutex<Option<S3Error>>>,
}

impl S3Body {
    /// The body of a request with `headers`, signed as `verified` says (unsigned: `None`).
    pub(in crate::node) fn new(
        inner: ClientBody,
        headers: &HeaderMap,
        verified: Option<&Verified>,
    ) -> Result<S3Body, S3Error> {
        let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
        let payload = verified.map_or(Payload::Unsigned, |v| v.payload.clone());
        let chunked_encoding = header("content-encoding")
            .is_some_and(|e| e.split(',').any(|p| p.trim() == "aws-chunked"));
        let (dechunk, sha256) = match &payload {
            Payload::Chunked { signed, trailer } => {
                let signer = verified.and_then(|v| v.chunks.clone());
                if *signed && signer.is_none() {
                    return Err(S3Error::new(
                        Code::AccessDenied,
                        "signed chunks need a signed request",
                    ));
                }
                (Some(Dechunker::new(signer, *trailer)), None)
            }
            // An unsigned request may still send aws-chunked bytes with a trailer.
            Payload::Unsigned if chunked_encoding => (
                Some(Dechunker::new(None, header("x-amz-trailer").is_some())),
                None,
            ),
            Payload::Unsigned => (None, None),
            Payload::Sha256(h) => (None, Some((*h, Sha256::new()))),
        };
        let content_md5 = match header("content-md5") {
            Some(v) => Some(
                base64::engine::general_purpose::STANDARD
                    .decode(v.trim())
                    .ok()
                    .filter(|d| d.len() == 16)
                    .ok_or_else(|| {
                        S3Error::new(Code::InvalidDigest, "Content-MD5 is not a base64 MD5")
                    })?,
            ),
            None => None,
        };
        let decoded_length = match header("x-amz-decoded-content-length") {
            Some(v) => Some(v.trim().parse().map_err(|_| {
                S3Error::new(
                    Code::InvalidArgument,
                    "x-amz-decoded-content-length is not a number",
                )
            })?),
            None => None,
        };
        let trailer = match header("x-amz-trailer").map(|t| t.trim().to_ascii_lowercase()) {
            Some(name) if dechunk.is_some() => Checksum::named(&name)?.map(|c| (name, c)),
            _ => None,
        };
        if dechunk.is_none() && body_size(&inner).is_none() {
            return Err(S3Error::new(
                Code::MissingContentLength,
                "a PUT needs a Content-Length (or an aws-chunked body)",
            ));
        }
        Ok(S3Body {
            inner,
            dechunk,
            sha256,
            content_md5,
            md5: Md5::new(),
            decoded_length,
            trailer,
            seen: 0,
            ended: false,
            failure: Arc::new(Mutex::new(None)),
        })
    }

    /// Where the body's refusal is kept, for its caller once the body has been given away.
    pub(in crate::node) fn failure(&self) -> Arc<Mutex<Option<S3Error>>> {
        self.failure.clone()
    }

    /// The MD5 of the bytes, hex: the object's `ETag`.
    pub(in crate::node) fn md5_hex(&self) -> String {
        ecdn_s3::sigv4::hex(&self.md5.clone().finalize())
    }

    fn fail(&self, e: S3Error) -> String {
        let why = e.to_string();
        *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
        why
    }

    fn take(&mut self, b: &[u8]) {
        self.md5.update(b);
        if let Some((_, s)) = &mut self.sha256 {
            s.update(b);
        }
        if let Some((_, c)) = &mut self.trailer {
            c.update(b);
        }
        self.seen += b.len() as u64;
    }

    /// The checks of a whole body.
    fn at_end(&mut self) -> Result<(), S3Error> {
        if let Some(d) = self.dechunk.take() {
            let trailers = d.finish()?;
            if let Some((name, sum)) = &self.trailer {
                let sent = trailers
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| v.as_str());
                if sent != Some(sum.value().as_str()) {
                    return Err(S3Error::new(
                        Code::BadDigest,
                        format!("the body does not match its {name}"),
                    ));
                }
            }
        }
        if let Some(n) = self.decoded_length.filter(|&n| n != self.seen) {
            return Err(S3Error::new(
                Code::IncompleteBody,
                format!(
                    "x-amz-decoded-content-length says {n} bytes; the body held {}",
                    self.seen
                ),
            ));
        }
        if let Some((want, sha)) = &self.sha256 {
            if sha.clone().finalize().as_slice() != want {
                return Err(S3Error::new(
                    Code::XAmzContentSHA256Mismatch,
                    "the body's SHA-256 is not the one x-amz-content-sha256 signed",
                ));
            }
        }
        if let Some(want) = &self.content_md5 {
            if self.md5.clone().finalize().as_slice() != want.as_slice() {
                return Err(S3Error::new(
                    Code::BadDigest,
                    "the body does not match Content-MD5",
                ));
            }
        }
        Ok(())
    }
}

/// The exact length a body says it has, if it says.
fn body_size(b: &ClientBody) -> Option<u64> {
    Body::size_hint(b).exact()
}

impl PutBody for S3Body {
    fn size_hint(&self) -> u64 {
        match &self.dechunk {
            Some(_) => self.decoded_length.unwrap_or(0),
            None => Body::size_hint(&self.inner).lower(),
        }
    }

    async fn next(&mut self) -> Option<Result<Bytes, String>> {
        loop {
            if self.ended {
                return None;
            }
            let frame = match self.inner.frame().await {
                None => {
                    self.ended = true;
                    return match self.at_end() {
                        Ok(()) => None,
                        Err(e) => Some(Err(self.fail(e))),
                    };
                }
                Some(Err(e)) => {
                    let e = S3Error::new(Code::IncompleteBody, format!("the body failed: {e}"));
                    self.ended = true;
                    return Some(Err(self.fail(e)));
                }
                Some(Ok(f)) => f,
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let out = match &mut self.dechunk {
                None => data,
                Some(d) => {
                    let mut out = Vec::with_capacity(data.len());
                    if let Err(e) = d.push(&data, &mut out) {
                        self.ended = true;
                        return Some(Err(self.fail(e)));
                    }
                    if out.is_empty() {
                        continue;
                    }
                    Bytes::from(out)
                }
            };
            self.take(&out);
            return Some(Ok(out));
        }
    }
}
