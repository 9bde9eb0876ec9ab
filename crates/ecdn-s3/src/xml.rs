//! The XML S3 speaks: the answers written here (a listing, the buckets, a multipart upload's
//! start and end, a batch delete's outcome), and the two bodies a client sends that are read
//! here, with quick-xml: `CompleteMultipartUpload` (the parts, in order) and `Delete` (the
//! keys). A body that is not well-formed, or not the document asked for, is `MalformedXML`.

use quick_xml::events::Event;
use quick_xml::Reader;

use crate::error::{Code, S3Error};
pub use crate::text::escape;
use crate::text::uri_encode;
use crate::time::iso8601;

const HEAD: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
const NS: &str = "http://s3.amazonaws.com/doc/2006-03-01/";

/// One object of a listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListEntry {
    pub key: String,
    pub size: u64,
    /// With its quotes.
    pub etag: String,
    pub last_modified_ms: u64,
}

/// A `ListObjectsV2` answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListV2 {
    pub bucket: String,
    pub prefix: String,
    pub delimiter: Option<String>,
    pub start_after: Option<String>,
    pub continuation_token: Option<String>,
    pub next_continuation_token: Option<String>,
    /// `ListObjects` (V1), truncated: the last key or common prefix of the page.
    pub next_marker: Option<String>,
    pub max_keys: usize,
    pub is_truncated: bool,
    pub entries: Vec<ListEntry>,
    pub common_prefixes: Vec<String>,
    /// `encoding-type=url`: keys and prefixes URL-encoded.
    pub url_encoded: bool,
}

impl ListV2 {
    pub fn xml(&self) -> String {
        let enc = |s: &str| self.enc(s);
        let mut x = self.head();
        if let Some(d) = &self.delimiter {
            x.push_str(&format!("<Delimiter>{}</Delimiter>", enc(d)));
        }
        if let Some(s) = &self.start_after {
            x.push_str(&format!("<StartAfter>{}</StartAfter>", enc(s)));
        }
        if let Some(t) = &self.continuation_token {
            x.push_str(&format!(
                "<ContinuationToken>{}</ContinuationToken>",
                escape(t)
            ));
        }
        if let Some(t) = &self.next_continuation_token {
            x.push_str(&format!(
                "<NextContinuationToken>{}</NextContinuationToken>",
                escape(t)
            ));
        }
        x.push_str(&format!(
            "<KeyCount>{}</KeyCount><MaxKeys>{}</MaxKeys><IsTruncated>{}</IsTruncated>",
            self.entries.len() + self.common_prefixes.len(),
            self.max_keys,
            self.is_truncated
        ));
        if self.url_encoded {
            x.push_str("<EncodingType>url</EncodingType>");
        }
        self.contents(&mut x, &enc);
        x.push_str("</ListBucketResult>");
        x
    }
}

impl ListV2 {
    /// A key or prefix as the page writes it: URL-encoded (`encoding-type=url`) or escaped.
    fn enc(&self, s: &str) -> String {
        if self.url_encoded {
            uri_encode(s.as_bytes(), false)
        } else {
            escape(s)
        }
    }

    /// The page's start, to its `Prefix`.
    fn head(&self) -> String {
        let mut x = String::with_capacity(256 + self.entries.len() * 256);
        x.push_str(HEAD);
        x.push_str(&format!("<ListBucketResult xmlns=\"{NS}\">"));
        x.push_str(&format!("<Name>{}</Name>", escape(&self.bucket)));
        x.push_str(&format!("<Prefix>{}</Prefix>", self.enc(&self.prefix)));
        x
    }

    /// The page as `ListObjects` (version 1) answers it: `Marker` and `NextMarker` instead
    /// of tokens.
    pub fn xml_v1(&self) -> String {
        let enc = |s: &str| self.enc(s);
        let mut x = self.head();
        x.push_str(&format!(
            "<Marker>{}</Marker>",
            enc(self.start_after.as_deref().unwrap_or(""))
        ));
        if let Some(m) = &self.next_marker {
            x.push_str(&format!("<NextMarker>{}</NextMarker>", enc(m)));
        }
        if let Some(d) = &self.delimiter {
            x.push_str(&format!("<Delimiter>{}</Delimiter>", enc(d)));
        }
        x.push_str(&format!(
            "<MaxKeys>{}</MaxKeys><IsTruncated>{}</IsTruncated>",
            self.max_keys, self.is_truncated
        ));
        if self.url_encoded {
            x.push_str("<EncodingType>url</EncodingType>");
        }
        self.contents(&mut x, &enc);
        x.push_str("</ListBucketResult>");
        x
    }

    fn contents(&self, x: &mut String, enc: &dyn Fn(&str) -> String) {
        for e in &self.entries {
            x.push_str(&format!(
                "<Contents><Key>{}</Key><LastModified>{}</LastModified><ETag>{}</ETag>\
                 <Size>{}</Size><StorageClass>STANDARD</StorageClass></Contents>",
                enc(&e.key),
                iso8601(e.last_modified_ms),
                escape(&e.etag),
                e.size
            ));
        }
        for p in &self.common_prefixes {
            x.push_str(&format!(
                "<CommonPrefixes><Prefix>{}</Prefix></CommonPrefixes>",
                enc(p)
            ));
        }
    }
}

/// A `ListBuckets` answer: the buckets `names` (created at `created_ms`), owned by `owner`.
pub fn list_buckets(owner: &str, names: &[(String, u64)]) -> String {
    let mut x = format!(
        "{HEAD}<ListAllMyBucketsResult xmlns=\"{NS}\"><Owner><ID>{0}</ID><DisplayName>{0}</DisplayName></Owner><Buckets>",
        escape(owner)
    );
    for (name, created) in names {
        x.push_str(&format!(
            "<Bucket><Name>{}</Name><CreationDate>{}</CreationDate></Bucket>",
            escape(name),
            iso8601(*created)
        ));
    }
    x.push_str("</Buckets></ListAllMyBucketsResult>");
    x
}

/// A `CreateMultipartUpload` answer.
pub fn initiate_multipart(bucket: &str, key: &str, upload_id: &str) -> String {
    format!(
        "{HEAD}<InitiateMultipartUploadResult xmlns=\"{NS}\"><Bucket>{}</Bucket><Key>{}</Key>\
         <UploadId>{}</UploadId></InitiateMultipartUploadResult>",
        escape(bucket),
        escape(key),
        escape(upload_id)
    )
}

/// A `CompleteMultipartUpload` answer (`etag` with its quotes).
pub fn complete_multipart(location: &str, bucket: &str, key: &str, etag: &str) -> String {
    format!(
        "{HEAD}<CompleteMultipartUploadResult xmlns=\"{NS}\"><Location>{}</Location>\
         <Bucket>{}</Bucket><Key>{}</Key><ETag>{}</ETag></CompleteMultipartUploadResult>",
        escape(location),
        escape(bucket),
        escape(key),
        escape(etag)
    )
}

/// One upload in progress, as `ListMultipartUploads` lists it: its key, id, and when it was
/// begun (milliseconds since 1970).
pub struct UploadListed {
    pub key: String,
    pub upload_id: String,
    pub initiated_ms: u64,
}

/// A `ListMultipartUploads` answer: `uploads` (in key, then id order) of `bucket` for `q`;
/// `truncated`: more follow the last.
pub fn list_uploads(
    bucket: &str,
    q: &crate::request::UploadsQuery,
    uploads: &[UploadListed],
    truncated: bool,
) -> String {
    let last = uploads.last();
    let mut x = format!(
        "{HEAD}<ListMultipartUploadsResult xmlns=\"{NS}\"><Bucket>{}</Bucket>\
         <KeyMarker>{}</KeyMarker><UploadIdMarker>{}</UploadIdMarker>\
         <NextKeyMarker>{}</NextKeyMarker><NextUploadIdMarker>{}</NextUploadIdMarker>\
         <Prefix>{}</Prefix><MaxUploads>{}</MaxUploads><IsTruncated>{truncated}</IsTruncated>",
        escape(bucket),
        escape(&q.key_marker),
        escape(&q.upload_id_marker),
        escape(last.map_or("", |u| u.key.as_str())),
        escape(last.map_or("", |u| u.upload_id.as_str())),
        escape(&q.prefix),
        q.max_uploads
    );
    for u in uploads {
        x.push_str(&format!(
            "<Upload><Key>{}</Key><UploadId>{}</UploadId><Initiated>{}</Initiated>\
             <StorageClass>STANDARD</StorageClass></Upload>",
            escape(&u.key),
            escape(&u.upload_id),
            crate::time::iso8601(u.initiated_ms)
        ));
    }
    x.push_str("</ListMultipartUploadsResult>");
    x
}

/// A `CopyObject` answer (`etag` with its quotes; `modified` an ISO 8601 time).
pub fn copy_object(etag: &str, modified: &str) -> String {
    copy_result("CopyObjectResult", etag, modified)
}

/// An `UploadPartCopy` answer (`etag` with its quotes; `modified` an ISO 8601 time).
pub fn copy_part(etag: &str, modified: &str) -> String {
    copy_result("CopyPartResult", etag, modified)
}

fn copy_result(element: &str, etag: &str, modified: &str) -> String {
    format!(
        "{HEAD}<{element} xmlns=\"{NS}\"><LastModified>{}</LastModified>\
         <ETag>{}</ETag></{element}>",
        escape(modified),
        escape(etag)
    )
}

/// A `DeleteObjects` answer: the keys deleted (unless `quiet`) and those that failed.
pub fn delete_result(deleted: &[String], failed: &[(String, S3Error)], quiet: bool) -> String {
    let mut x = format!("{HEAD}<DeleteResult xmlns=\"{NS}\">");
    if !quiet {
        for k in deleted {
            x.push_str(&format!("<Deleted><Key>{}</Key></Deleted>", escape(k)));
        }
    }
    for (k, e) in failed {
        x.push_str(&format!(
            "<Error><Key>{}</Key><Code>{}</Code><Message>{}</Message></Error>",
            escape(k),
            e.code.as_str(),
            escape(&e.message)
        ));
    }
    x.push_str("</DeleteResult>");
    x
}

/// One part a `CompleteMultipartUpload` body lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompletedPart {
    pub number: u32,
    /// As sent, quotes removed.
    pub etag: String,
}

/// What a small document a client sends holds, in order: each element's start (its path of
/// element names from the root, `None`) and each text node (`Some`, its text with references
/// resolved; text split by references is one node).
type Items = Vec<(Vec<String>, Option<String>)>;

/// The [`Items`] of `body`, which must be one `<root>` element.
fn items(body: &[u8], root: &str) -> Result<Items, S3Error> {
    let malformed = |why: String| S3Error::new(Code::MalformedXML, why);
    let text = std::str::from_utf8(body).map_err(|_| malformed("the body is not UTF-8".into()))?;
    let mut r = Reader::from_str(text);
    let mut path: Vec<String> = Vec::new();
    let mut out: Items = Vec::new();
    let mut seen_root = false;
    loop {
        let ev = r
            .read_event()
            .map_err(|e| malformed(format!("not well-formed XML: {e}")))?;
        match ev {
            Event::Start(ref s) | Event::Empty(ref s) => {
                let name = String::from_utf8_lossy(s.local_name().as_ref()).into_owned();
                if path.is_empty() {
                    if seen_root || name != root {
                        return Err(malformed(format!("the document is not one <{root}>")));
                    }
                    seen_root = true;
                }
                path.push(name);
                if path.len() > 8 {
                    return Err(malformed("elements nested too deep".into()));
                }
                out.push((path.clone(), None));
                if matches!(ev, Event::Empty(_)) {
                    path.pop();
                }
            }
            Event::End(_) => {
                path.pop();
            }
            Event::Text(t) => {
                let s = t
                    .xml10_content()
                    .map_err(|e| malformed(format!("bad text: {e}")))?;
                append(&mut out, &path, &s)?;
            }
            Event::CData(c) => append(&mut out, &path, &String::from_utf8_lossy(&c))?,
            Event::GeneralRef(g) => {
                let name = g
                    .decode()
                    .map_err(|e| malformed(format!("bad reference: {e}")))?;
                let s = match g.resolve_char_ref() {
                    Ok(Some(c)) => c.to_string(),
                    Ok(None) => quick_xml::escape::resolve_predefined_entity(&name)
                        .ok_or_else(|| malformed(format!("unknown entity &{name};")))?
                        .to_string(),
                    Err(e) => return Err(malformed(format!("bad character reference: {e}"))),
                };
                append(&mut out, &path, &s)?;
            }
            Event::Eof => break,
            Event::Decl(_) | Event::Comment(_) | Event::PI(_) | Event::DocType(_) => {}
        }
    }
    if !seen_root || !path.is_empty() {
        return Err(malformed(format!(
            "the document is not one complete <{root}>"
        )));
    }
    Ok(out)
}

/// Adds text `s` at `path`: to the text node just before it when that one is at the same
/// path (text split by a reference), else as a node of its own.
fn append(out: &mut Items, path: &[String], s: &str) -> Result<(), S3Error> {
    if path.is_empty() {
        if s.trim().is_empty() {
            return Ok(());
        }
        return Err(S3Error::new(
            Code::MalformedXML,
            "text outside the document",
        ));
    }
    match out.last_mut() {
        Some((p, Some(t))) if p.as_slice() == path => t.push_str(s),
        _ => out.push((path.to_vec(), Some(s.to_string()))),
    }
    Ok(())
}

/// The parts a `CompleteMultipartUpload` body lists, in its order (at most `max`).
pub fn parse_complete(body: &[u8], max: usize) -> Result<Vec<CompletedPart>, S3Error> {
    let malformed = |why: &str| S3Error::new(Code::MalformedXML, why);
    let incomplete = || malformed("each <Part> needs one <PartNumber> and one <ETag>");
    // Per <Part>: its number and ETag.
    let mut current: Option<(Option<u32>, Option<String>)> = None;
    let mut parts: Vec<CompletedPart> = Vec::new();
    let mut finish = |part: Option<(Option<u32>, Option<String>)>| match part {
        None => Ok(()),
        Some((Some(number), Some(etag))) => {
            parts.push(CompletedPart {
                number,
                etag: etag.trim().trim_matches('"').to_string(),
            });
            Ok(())
        }
        Some(_) => Err(incomplete()),
    };
    for (path, text) in items(body, "CompleteMultipartUpload")? {
        let names: Vec<&str> = path.iter().map(String::as_str).collect();
        match (names.as_slice(), text) {
            (["CompleteMultipartUpload", "Part"], None) => {
                finish(current.take())?;
                current = Some((None, None));
            }
            (["CompleteMultipartUpload", "Part", "PartNumber"], Some(t)) => {
                let part = current.as_mut().ok_or_else(incomplete)?;
                let n = t
                    .trim()
                    .parse()
                    .ok()
                    .filter(|n| (1..=10_000).contains(n))
                    .ok_or_else(|| malformed("a PartNumber is a number from 1 to 10000"))?;
                if part.0.replace(n).is_some() {
                    return Err(incomplete());
                }
            }
            (["CompleteMultipartUpload", "Part", "ETag"], Some(t)) => {
                let part = current.as_mut().ok_or_else(incomplete)?;
                if part.1.replace(t).is_some() {
                    return Err(incomplete());
                }
            }
            // The parts' checksums are not kept: ignored, as fields S3 added later are.
            (["CompleteMultipartUpload", "Part", ..], _) | (_, None) => {}
            (_, Some(t)) if t.trim().is_empty() => {}
            _ => return Err(malformed("unexpected text in CompleteMultipartUpload")),
        }
    }
    finish(current.take())?;
    if parts.is_empty() {
        return Err(malformed("CompleteMultipartUpload lists no part"));
    }
    if parts.len() > max {
        return Err(malformed("CompleteMultipartUpload lists too many parts"));
    }
    Ok(parts)
}

/// A `DeleteObjects` body: the keys (at most `max`), and whether the answer is quiet.
pub fn parse_delete(body: &[u8], max: usize) -> Result<(Vec<String>, bool), S3Error> {
    let malformed = |why: &str| S3Error::new(Code::MalformedXML, why);
    let (mut keys, mut quiet) = (Vec::new(), false);
    // Per <Object>: its key.
    let mut current: Option<Option<String>> = None;
    let finish = |object: Option<Option<String>>, keys: &mut Vec<String>| match object {
        None => Ok(()),
        Some(Some(k)) => {
            keys.push(k);
            Ok(())
        }
        Some(None) => Err(malformed("each <Object> needs one <Key>")),
    };
    for (path, text) in items(body, "Delete")? {
        let names: Vec<&str> = path.iter().map(String::as_str).collect();
        match (names.as_slice(), text) {
            (["Delete", "Object"], None) => {
                finish(current.take(), &mut keys)?;
                current = Some(None);
            }
            (["Delete", "Object", "Key"], Some(t)) => {
                let object = current
                    .as_mut()
                    .ok_or_else(|| malformed("a <Key> outside an <Object>"))?;
                if object.replace(t).is_some() {
                    return Err(malformed("each <Object> needs one <Key>"));
                }
            }
            (["Delete", "Object", "VersionId"], _) => {
                return Err(S3Error::new(
                    Code::NotImplemented,
                    "this store keeps no versions",
                ))
            }
            (["Delete", "Quiet"], Some(t)) => {
                quiet = match t.trim() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(malformed("Quiet is true or false")),
                }
            }
            (_, None) => {}
            (_, Some(t)) if t.trim().is_empty() => {}
            _ => return Err(malformed("unexpected text in Delete")),
        }
        if keys.len() > max {
            return Err(malformed("a Delete names too many keys"));
        }
    }
    finish(current.take(), &mut keys)?;
    if keys.is_empty() {
        return Err(malformed("Delete names no key"));
    }
    if keys.len() > max {
        return Err(malformed("a Delete names too many keys"));
    }
    Ok((keys, quiet))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_complete_body_lists_its_parts_in_order() {
        let body = br#"<?xml version="1.0" encoding="UTF-8"?>
<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Part><ETag>"a54357aff0632cce46d942af68356b38"</ETag><PartNumber>1</PartNumber></Part>
  <Part><PartNumber>2</PartNumber><ETag>&quot;0c78aef83f66abc1fa1e8477f296d394&quot;</ETag><ChecksumCRC32>AAAAAA==</ChecksumCRC32></Part>
</CompleteMultipartUpload>"#;
        let parts = parse_complete(body, 10_000).unwrap();
        assert_eq!(
            parts,
            vec![
                CompletedPart {
                    number: 1,
                    etag: "a54357aff0632cce46d942af68356b38".into()
                },
                CompletedPart {
                    number: 2,
                    etag: "0c78aef83f66abc1fa1e8477f296d394".into()
                },
            ]
        );
    }

    #[test]
    fn malformed_bodies_are_malformed_xml() {
        for bad in [
            &b""[..],
            b"<CompleteMultipartUpload>",
            b"<CompleteMultipartUpload></CompleteMultipartUpload>",
            b"<Other><Part><PartNumber>1</PartNumber><ETag>x</ETag></Part></Other>",
            b"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part></CompleteMultipartUpload>",
            b"<CompleteMultipartUpload><Part><PartNumber>0</PartNumber><ETag>x</ETag></Part></CompleteMultipartUpload>",
            b"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>&bogus;</ETag></Part></CompleteMultipartUpload>",
            b"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>x</ETag></Part></CompleteMultipartUpload><X/>",
            b"\xff\xfe",
            b"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>x</ETag></Part>",
        ] {
            let e = parse_complete(bad, 10_000).unwrap_err();
            assert_eq!(e.code, Code::MalformedXML, "{}", String::from_utf8_lossy(bad));
        }
        let many: String = (1..=5)
            .map(|n| format!("<Part><PartNumber>{n}</PartNumber><ETag>e</ETag></Part>"))
            .collect();
        let body = format!("<CompleteMultipartUpload>{many}</CompleteMultipartUpload>");
        assert!(parse_complete(body.as_bytes(), 4).is_err());
        assert_eq!(parse_complete(body.as_bytes(), 5).unwrap().len(), 5);
    }

    #[test]
    fn a_delete_body_names_its_keys() {
        let body = b"<Delete><Quiet>true</Quiet><Object><Key>a&amp;b</Key></Object><Object><Key>c/d &#x41;</Key></Object></Delete>";
        assert_eq!(
            parse_delete(body, 1000).unwrap(),
            (vec!["a&b".to_string(), "c/d A".to_string()], true)
        );
        assert_eq!(
            parse_delete(b"<Delete/>", 1000).unwrap_err().code,
            Code::MalformedXML
        );
        assert_eq!(
            parse_delete(
                b"<Delete><Object><Key>a</Key><VersionId>v</VersionId></Object></Delete>",
                1000
            )
            .unwrap_err()
            .code,
            Code::NotImplemented
        );
    }

    #[test]
    fn a_listing_escapes_or_url_encodes_its_keys() {
        let mut l = ListV2 {
            bucket: "b".into(),
            prefix: "a <".into(),
            max_keys: 1000,
            entries: vec![ListEntry {
                key: "a <&>/x".into(),
                size: 3,
                etag: "\"e\"".into(),
                last_modified_ms: 0,
            }],
            common_prefixes: vec!["a </".into()],
            ..ListV2::default()
        };
        let x = l.xml();
        assert!(x.contains("<Key>a &lt;&amp;&gt;/x</Key>"), "{x}");
        assert!(x.contains("<ETag>&quot;e&quot;</ETag>"), "{x}");
        assert!(x.contains("<KeyCount>2</KeyCount>"), "{x}");
        assert!(x.contains("<LastModified>1970-01-01T00:00:00.000Z</LastModified>"));
        l.url_encoded = true;
        let x = l.xml();
        assert!(x.contains("<Key>a%20%3C%26%3E/x</Key>"), "{x}");
        assert!(x.contains("<Prefix>a%20%3C/</Prefix>"), "{x}");
        assert!(x.contains("<EncodingType>url</EncodingType>"));
    }
}
