//! Which S3 operation a request is: its bucket and key (path-style `/bucket/key`, or
//! virtual-hosted `bucket.BASE/key` for a configured base domain), and the operation its
//! method and query name, with the query's arguments parsed and checked.
//!
//! Anything S3 defines that this store does not do (versions, ACLs, policies, tagging,
//! lifecycle, copies, …) is `NotImplemented`, never taken for a plain read or write.

use crate::error::{Code, S3Error};
use crate::text::percent_decode;

/// S3's longest key, in bytes of UTF-8.
pub const MAX_KEY: usize = 1024;
/// Most keys a listing returns per page (S3's).
pub const MAX_LIST_KEYS: usize = 1000;
/// Most parts of a multipart upload (S3's).
pub const MAX_PARTS: u32 = 10_000;

/// A listing's arguments (`ListObjectsV2`, and `ListObjects` with `marker` as its start).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListQuery {
    pub prefix: String,
    pub delimiter: Option<String>,
    pub max_keys: usize,
    /// V2's `start-after`, V1's `marker`.
    pub start_after: Option<String>,
    pub continuation_token: Option<String>,
    pub url_encoded: bool,
    /// `ListObjects` (version 1) rather than V2.
    pub v1: bool,
}

/// An S3 operation, with its arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    ListBuckets,
    CreateBucket,
    HeadBucket,
    DeleteBucket,
    GetBucketLocation,
    ListObjects(ListQuery),
    ListMultipartUploads(UploadsQuery),
    PutObject,
    GetObject,
    HeadObject,
    DeleteObject,
    DeleteObjects,
    CreateMultipartUpload,
    UploadPart { upload_id: String, part: u32 },
    CompleteMultipartUpload { upload_id: String },
    AbortMultipartUpload { upload_id: String },
    ListParts { upload_id: String },
}

/// A request's bucket, key and operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Request {
    pub bucket: Option<String>,
    pub key: Option<String>,
    pub op: Op,
}

/// Sub-resources S3 defines that select operations this store does not do.
const NOT_DONE: &[&str] = &[
    "accelerate",
    "acl",
    "analytics",
    "attributes",
    "cors",
    "encryption",
    "intelligent-tiering",
    "inventory",
    "legal-hold",
    "lifecycle",
    "logging",
    "metrics",
    "notification",
    "object-lock",
    "ownershipControls",
    "policy",
    "policyStatus",
    "publicAccessBlock",
    "replication",
    "requestPayment",
    "restore",
    "retention",
    "select",
    "tagging",
    "torrent",
    "versionId",
    "versioning",
    "versions",
    "website",
];

/// The request's query, decoded: (name, value) pairs.
fn query_pairs(query: &str) -> Result<Vec<(String, String)>, S3Error> {
    let mut out = Vec::new();
    for p in query.split('&').filter(|p| !p.is_empty()) {
        let (n, v) = p.split_once('=').unwrap_or((p, ""));
        let dec = |s: &str| {
            String::from_utf8(percent_decode(s.replace('+', " ").as_bytes())).map_err(|_| {
                S3Error::new(Code::InvalidArgument, "the query is not UTF-8 once decoded")
            })
        };
        out.push((dec(n)?, dec(v)?));
    }
    Ok(out)
}

/// Whether `name` is a bucket name S3 accepts: 3 to 63 of `a-z 0-9 . -`, beginning and ending
/// with a letter or digit, no `..`, not an IP address.
pub fn valid_bucket(name: &str) -> bool {
    let b = name.as_bytes();
    (3..=63).contains(&b.len())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'.' || *c == b'-')
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && !name.contains("..")
        && name.parse::<std::net::Ipv4Addr>().is_err()
}

/// The bucket and key of a `CopyObject`'s `x-amz-copy-source` (`BUCKET/KEY`, with or without
/// a leading `/`, percent-encoded; `?versionId=null` is the only version there is here).
pub fn copy_source(value: &[u8]) -> Result<(String, String), S3Error> {
    let bad = |why: &str| S3Error::new(Code::InvalidArgument, format!("x-amz-copy-source: {why}"));
    let (path, version) = match value.iter().position(|&b| b == b'?') {
        Some(i) => (&value[..i], Some(&value[i + 1..])),
        None => (value, None),
    };
    if version.is_some_and(|v| v != b"versionId=null") {
        return Err(S3Error::new(
            Code::NotImplemented,
            "objects have no versions here: x-amz-copy-source takes no versionId but null",
        ));
    }
    let decoded = String::from_utf8(percent_decode(path)).map_err(|_| bad("not UTF-8"))?;
    let (bucket, key) = decoded
        .strip_prefix('/')
        .unwrap_or(&decoded)
        .split_once('/')
        .ok_or_else(|| bad("not BUCKET/KEY"))?;
    if !valid_bucket(bucket) {
        return Err(bad("not a bucket name"));
    }
    if key.is_empty() || key.len() > MAX_KEY {
        return Err(bad("a key of 1 to 1,024 bytes"));
    }
    Ok((bucket.to_string(), key.to_string()))
}

/// The bytes an `UploadPartCopy` copies (`x-amz-copy-source-range: bytes=FIRST-LAST`, both
/// offsets given, zero-based and inclusive) of a source of `size` bytes: `(first, last)`.
/// A range past the source's end is refused, as S3 refuses it (no clamping: a part is
/// exactly what was asked).
pub fn copy_source_range(value: &[u8], size: u64) -> Result<(u64, u64), S3Error> {
    let form = || {
        S3Error::new(
            Code::InvalidArgument,
            "The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy",
        )
    };
    let offset = |d: &[u8]| -> Option<u64> {
        if d.is_empty() || !d.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(d).ok()?.parse().ok()
    };
    let spec = value.strip_prefix(b"bytes=").ok_or_else(form)?;
    let dash = spec.iter().position(|&b| b == b'-').ok_or_else(form)?;
    let (first, last) = (
        offset(&spec[..dash]).ok_or_else(form)?,
        offset(&spec[dash + 1..]).ok_or_else(form)?,
    );
    if first > last || last >= size {
        return Err(S3Error::new(
            Code::InvalidArgument,
            format!("Range specified is not valid for source object of size: {size}"),
        ));
    }
    Ok((first, last))
}

impl S3Request {
    /// The operation of a request with `method`, `path` and `query` as sent (encoded) and its
    /// `Host` header; `base_domains`: the domains under which `bucket.DOMAIN` names a bucket
    /// (virtual-hosted style; empty: path-style only).
    pub fn parse(
        method: &str,
        path: &str,
        query: &str,
        host: Option<&str>,
        base_domains: &[String],
    ) -> Result<S3Request, S3Error> {
        let host = host.map(|h| {
            h.rsplit_once(':')
                .map_or(h, |(n, _)| n)
                .to_ascii_lowercase()
        });
        let virtual_bucket = host.as_deref().and_then(|h| {
            base_domains
                .iter()
                .find_map(|d| h.strip_suffix(d.as_str())?.strip_suffix('.'))
                .filter(|b| !b.is_empty())
                .map(str::to_string)
        });
        let raw = path
            .strip_prefix('/')
            .ok_or_else(|| S3Error::new(Code::InvalidRequest, "the path must begin with /"))?;
        let (bucket, key_raw) = match virtual_bucket {
            Some(b) => (Some(b), Some(raw)),
            None => match raw.split_once('/') {
                Some((b, k)) => (Some(b.to_string()), Some(k)),
                None if raw.is_empty() => (None, None),
                None => (Some(raw.to_string()), None),
            },
        };
        let bucket = match bucket {
            Some(b) => {
                let b = String::from_utf8(percent_decode(b.as_bytes())).unwrap_or_default();
                if !valid_bucket(&b) {
                    return Err(S3Error::new(
                        Code::InvalidBucketName,
                        "a bucket name is 3 to 63 of a-z 0-9 . - and begins and ends with a letter or digit",
                    ));
                }
                Some(b)
            }
            None => None,
        };
        let key = match key_raw.filter(|k| !k.is_empty()) {
            Some(k) => {
                let k = String::from_utf8(percent_decode(k.as_bytes())).map_err(|_| {
                    S3Error::new(Code::InvalidArgument, "the key is not UTF-8 once decoded")
                })?;
                if k.len() > MAX_KEY {
                    return Err(S3Error::new(
                        Code::KeyTooLongError,
                        "a key is at most 1024 bytes",
                    ));
                }
                Some(k)
            }
            None => None,
        };
        let q = query_pairs(query)?;
        let has = |name: &str| q.iter().any(|(n, _)| n == name);
        let get = |name: &str| q.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
        if let Some(n) = NOT_DONE.iter().find(|n| has(n)) {
            return Err(S3Error::new(
                Code::NotImplemented,
                format!("?{n} is not implemented by this store"),
            ));
        }
        let upload_id = || {
            get("uploadId")
                .filter(|u| !u.is_empty())
                .ok_or_else(|| S3Error::new(Code::InvalidArgument, "uploadId is empty"))
        };
        let op = match (method, &bucket, &key) {
            ("GET", None, None) => Op::ListBuckets,
            (_, None, _) => {
                return Err(S3Error::new(
                    Code::MethodNotAllowed,
                    format!("{method} is not allowed on the service"),
                ))
            }
            ("PUT", Some(_), None) => Op::CreateBucket,
            ("HEAD", Some(_), None) => Op::HeadBucket,
            ("DELETE", Some(_), None) => Op::DeleteBucket,
            ("GET", Some(_), None) if has("location") => Op::GetBucketLocation,
            ("GET", Some(_), None) if has("uploads") => {
                Op::ListMultipartUploads(uploads_query(&q)?)
            }
            ("GET", Some(_), None) => Op::ListObjects(list_query(&q)?),
            ("POST", Some(_), None) if has("delete") => Op::DeleteObjects,
            ("PUT", Some(_), Some(_)) if has("partNumber") || has("uploadId") => {
                let part = get("partNumber")
                    .and_then(|p| p.parse().ok())
                    .filter(|p| (1..=MAX_PARTS).contains(p))
                    .ok_or_else(|| {
                        S3Error::new(
                            Code::InvalidArgument,
                            "partNumber must be a number from 1 to 10000",
                        )
                    })?;
                Op::UploadPart {
                    upload_id: upload_id()?,
                    part,
                }
            }
            ("PUT", Some(_), Some(_)) => Op::PutObject,
            ("GET", Some(_), Some(_)) if has("uploadId") => Op::ListParts {
                upload_id: upload_id()?,
            },
            ("GET", Some(_), Some(_)) => Op::GetObject,
            ("HEAD", Some(_), Some(_)) => Op::HeadObject,
            ("DELETE", Some(_), Some(_)) if has("uploadId") => Op::AbortMultipartUpload {
                upload_id: upload_id()?,
            },
            ("DELETE", Some(_), Some(_)) => Op::DeleteObject,
            ("POST", Some(_), Some(_)) if has("uploads") => Op::CreateMultipartUpload,
            ("POST", Some(_), Some(_)) if has("uploadId") => Op::CompleteMultipartUpload {
                upload_id: upload_id()?,
            },
            _ => {
                return Err(S3Error::new(
                    Code::MethodNotAllowed,
                    format!("{method} is not allowed on this resource"),
                ))
            }
        };
        Ok(S3Request { bucket, key, op })
    }
}

/// A `ListMultipartUploads` query: `prefix`, `key-marker` and `upload-id-marker` (the
/// uploads after that key, or after that upload of it), `max-uploads` (1 to 1000; more is
/// 1000). (`delimiter` is not taken: every upload is listed.)
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UploadsQuery {
    pub prefix: String,
    pub key_marker: String,
    pub upload_id_marker: String,
    pub max_uploads: usize,
}

fn uploads_query(q: &[(String, String)]) -> Result<UploadsQuery, S3Error> {
    let get = |name: &str| q.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
    let max_uploads = match get("max-uploads") {
        None => MAX_LIST_KEYS,
        Some(m) => m
            .parse::<usize>()
            .ok()
            .filter(|&m| m >= 1)
            .map(|m| m.min(MAX_LIST_KEYS))
            .ok_or_else(|| {
                S3Error::new(
                    Code::InvalidArgument,
                    "max-uploads must be a positive number",
                )
            })?,
    };
    Ok(UploadsQuery {
        prefix: get("prefix").unwrap_or_default(),
        key_marker: get("key-marker").unwrap_or_default(),
        upload_id_marker: get("upload-id-marker").unwrap_or_default(),
        max_uploads,
    })
}

/// A listing's query: `list-type=2` (V2: `continuation-token`, `start-after`) or V1
/// (`marker`); `prefix`, `delimiter`, `max-keys` (0 to 1000; more is 1000, as S3 does),
/// `encoding-type=url`.
fn list_query(q: &[(String, String)]) -> Result<ListQuery, S3Error> {
    let get = |name: &str| q.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
    let v1 = match get("list-type").as_deref() {
        None => true,
        Some("2") => false,
        Some(t) => {
            return Err(S3Error::new(
                Code::InvalidArgument,
                format!("list-type {t:?}: only 2 (or none) is known"),
            ))
        }
    };
    let max_keys = match get("max-keys") {
        None => MAX_LIST_KEYS,
        Some(m) => m
            .parse::<usize>()
            .map_err(|_| S3Error::new(Code::InvalidArgument, "max-keys must be a number"))?
            .min(MAX_LIST_KEYS),
    };
    let url_encoded = match get("encoding-type").as_deref() {
        None => false,
        Some("url") => true,
        Some(_) => {
            return Err(S3Error::new(
                Code::InvalidArgument,
                "encoding-type can only be url",
            ))
        }
    };
    Ok(ListQuery {
        prefix: get("prefix").unwrap_or_default(),
        delimiter: get("delimiter").filter(|d| !d.is_empty()),
        max_keys,
        start_after: if v1 {
            get("marker")
        } else {
            get("start-after")
        }
        .filter(|s| !s.is_empty()),
        continuation_token: if v1 { None } else { get("continuation-token") },
        url_encoded,
        v1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(method: &str, target: &str) -> Result<S3Request, S3Error> {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        S3Request::parse(
            method,
            path,
            query,
            Some("s3.test:9000"),
            &["s3.test".into()],
        )
    }

    #[test]
    fn copy_sources() {
        let ok = |v: &str, b: &str, k: &str| {
            assert_eq!(
                copy_source(v.as_bytes()).unwrap(),
                (b.into(), k.into()),
                "{v}"
            )
        };
        ok("models/a/b.bin", "models", "a/b.bin");
        ok("/models/a%20b/%C3%A9", "models", "a b/é");
        ok("models/k?versionId=null", "models", "k");
        for bad in [
            "models",
            "/models/",
            "x/k",
            "models/%FF",
            "models/k?versionId=3",
        ] {
            assert!(copy_source(bad.as_bytes()).is_err(), "{bad}");
        }
        let long = format!("models/{}", "k".repeat(MAX_KEY + 1));
        assert!(copy_source(long.as_bytes()).is_err());
    }

    #[test]
    fn copy_source_ranges() {
        assert_eq!(copy_source_range(b"bytes=0-9", 10).unwrap(), (0, 9));
        assert_eq!(copy_source_range(b"bytes=5-5", 10).unwrap(), (5, 5));
        let last = u64::MAX - 1;
        assert_eq!(
            copy_source_range(format!("bytes=0-{last}").as_bytes(), u64::MAX).unwrap(),
            (0, last)
        );
        for bad in [
            "bytes=0-10",
            "bytes=3-2",
            "bytes=-5",
            "bytes=5-",
            "bytes=0-1,3-4",
            "bytes=+1-2",
            "bytes= 1-2",
            "0-5",
            "bytes=99999999999999999999999-1",
            "",
        ] {
            let e = copy_source_range(bad.as_bytes(), 10).unwrap_err();
            assert_eq!(e.code, Code::InvalidArgument, "{bad}");
        }
        assert!(copy_source_range(b"bytes=0-0", 0).is_err());
    }

    #[test]
    fn operations_by_method_path_and_query() {
        assert_eq!(op("GET", "/").unwrap().op, Op::ListBuckets);
        let r = op("PUT", "/models/llama%20v2/w.bin").unwrap();
        assert_eq!(
            (r.bucket.as_deref(), r.key.as_deref(), r.op),
            (Some("models"), Some("llama v2/w.bin"), Op::PutObject)
        );
        assert_eq!(op("PUT", "/models").unwrap().op, Op::CreateBucket);
        assert_eq!(op("PUT", "/models/").unwrap().op, Op::CreateBucket);
        assert_eq!(
            op("PUT", "/bk1/k?partNumber=3&uploadId=u1").unwrap().op,
            Op::UploadPart {
                upload_id: "u1".into(),
                part: 3
            }
        );
        assert_eq!(
            op("POST", "/bk1/k?uploads").unwrap().op,
            Op::CreateMultipartUpload
        );
        assert_eq!(
            op("POST", "/bk1/k?uploadId=u2").unwrap().op,
            Op::CompleteMultipartUpload {
                upload_id: "u2".into()
            }
        );
        assert_eq!(op("POST", "/bk1?delete").unwrap().op, Op::DeleteObjects);
        match op("GET", "/bk1?list-type=2&prefix=a%2Fb&delimiter=%2F&max-keys=5000&encoding-type=url&continuation-token=t").unwrap().op {
            Op::ListObjects(l) => {
                assert_eq!(l.prefix, "a/b");
                assert_eq!(l.delimiter.as_deref(), Some("/"));
                assert_eq!(l.max_keys, 1000);
                assert!(l.url_encoded && !l.v1);
                assert_eq!(l.continuation_token.as_deref(), Some("t"));
            }
            o => panic!("{o:?}"),
        }
        match op("GET", "/bk1?marker=m").unwrap().op {
            Op::ListObjects(l) => assert!(l.v1 && l.start_after.as_deref() == Some("m")),
            o => panic!("{o:?}"),
        }
        // Virtual-hosted: the bucket from the host, the whole path the key.
        let r =
            S3Request::parse("GET", "/a/b", "", Some("data.s3.test"), &["s3.test".into()]).unwrap();
        assert_eq!(
            (r.bucket.as_deref(), r.key.as_deref()),
            (Some("data"), Some("a/b"))
        );
    }

    #[test]
    fn what_is_not_done_or_not_valid_is_refused() {
        for (m, t, code) in [
            ("GET", "/bk1/k?acl", Code::NotImplemented),
            ("PUT", "/bk1?versioning", Code::NotImplemented),
            ("GET", "/bk1/k?versionId=3", Code::NotImplemented),
            ("PUT", "/", Code::MethodNotAllowed),
            ("PATCH", "/bk1/k", Code::MethodNotAllowed),
            ("GET", "/B1/k", Code::InvalidBucketName),
            ("GET", "/ab/k", Code::InvalidBucketName),
            ("GET", "/192.168.1.1/k", Code::InvalidBucketName),
            ("GET", "/bk1/%FF", Code::InvalidArgument),
            (
                "PUT",
                "/bk1/k?partNumber=0&uploadId=u",
                Code::InvalidArgument,
            ),
            (
                "PUT",
                "/bk1/k?partNumber=10001&uploadId=u",
                Code::InvalidArgument,
            ),
            (
                "PUT",
                "/bk1/k?partNumber=1&uploadId=",
                Code::InvalidArgument,
            ),
            ("GET", "/bk1?list-type=3", Code::InvalidArgument),
            ("GET", "/bk1?max-keys=-1", Code::InvalidArgument),
            ("GET", "/bk1?encoding-type=xml", Code::InvalidArgument),
            ("GET", "b1/k", Code::InvalidRequest),
        ] {
            assert_eq!(op(m, t).unwrap_err().code, code, "{m} {t}");
        }
        let long = format!("/bk1/{}", "k".repeat(1025));
        assert_eq!(op("GET", &long).unwrap_err().code, Code::KeyTooLongError);
        assert!(op("GET", &format!("/bk1/{}", "k".repeat(1024))).is_ok());
    }
}
