//! Reading an origin's `206 Partial Content` answers (RFC 9110 §14.4, §14.6): the
//! `Content-Range` of a single part, and the parts of a `multipart/byteranges` body.
//!
//! A cluster node asks the origin for several byte ranges at once when a partial hit lacks some
//! data chunks (their bytes are one range per stripe). The origin is not trusted to frame its
//! answer well: every part must carry a `Content-Range` whose length matches its body, the
//! body must be followed by the next delimiter, and anything else is a [`MultipartError`],
//! never a panic or a wrong byte (the fuzz target `multipart` feeds this parser arbitrary
//! input).

use std::ops::Range;

use thiserror::Error;

/// Why an answer could not be read as the byte ranges it claims to be.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum MultipartError {
    #[error("Content-Type is not multipart/byteranges with a boundary")]
    NotByteranges,
    #[error("invalid boundary (1 to 70 characters, RFC 2046 §5.1.1)")]
    BadBoundary,
    #[error("no opening delimiter")]
    NoDelimiter,
    #[error("part {0}: headers not terminated by an empty line")]
    UnterminatedHeaders(usize),
    #[error("part {0}: no Content-Range")]
    NoContentRange(usize),
    #[error("invalid Content-Range {0:?}")]
    BadContentRange(String),
    #[error("part {0}: body shorter than its Content-Range")]
    Truncated(usize),
    #[error("part {0}: body not followed by the next delimiter")]
    NoNextDelimiter(usize),
    #[error("more than {0} parts")]
    TooManyParts(usize),
}

/// A `Content-Range: bytes FIRST-LAST/LENGTH` value: the range and the complete length
/// (`None` for `*`).
pub fn parse_content_range(value: &str) -> Result<(Range<u64>, Option<u64>), MultipartError> {
    let bad = || MultipartError::BadContentRange(value.chars().take(80).collect());
    let rest = value.trim();
    let (unit, rest) = rest.split_once(' ').ok_or_else(bad)?;
    if !unit.eq_ignore_ascii_case("bytes") {
        return Err(bad());
    }
    let (range, length) = rest.trim().split_once('/').ok_or_else(bad)?;
    let (first, last) = range.split_once('-').ok_or_else(bad)?;
    let num = |s: &str| -> Result<u64, MultipartError> {
        if s.is_empty() || s.len() > 19 || !s.bytes().all(|c| c.is_ascii_digit()) {
            return Err(bad());
        }
        s.parse().map_err(|_| bad())
    };
    let (first, last) = (num(first)?, num(last)?);
    if last < first {
        return Err(bad());
    }
    let length = match length {
        "*" => None,
        n => Some(num(n)?),
    };
    if length.is_some_and(|n| last >= n) {
        return Err(bad());
    }
    Ok((first..last + 1, length))
}

/// The boundary of a `multipart/byteranges` `Content-Type` value.
pub fn boundary(content_type: &str) -> Result<String, MultipartError> {
    let mut params = content_type.split(';');
    let media = params.next().unwrap_or("").trim();
    if !media.eq_ignore_ascii_case("multipart/byteranges") {
        return Err(MultipartError::NotByteranges);
    }
    for p in params {
        let Some((name, value)) = p.split_once('=') else {
            continue;
        };
        if !name.trim().eq_ignore_ascii_case("boundary") {
            continue;
        }
        let v = value.trim();
        let v = v
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(v);
        if v.is_empty() || v.len() > 70 || v.bytes().any(|c| c.is_ascii_control()) {
            return Err(MultipartError::BadBoundary);
        }
        return Ok(v.to_string());
    }
    Err(MultipartError::NotByteranges)
}

/// One part of a `multipart/byteranges` body.
#[derive(Debug, PartialEq, Eq)]
pub struct Part<'a> {
    pub range: Range<u64>,
    /// The complete length its `Content-Range` names (`None` for `*`).
    pub complete_length: Option<u64>,
    pub body: &'a [u8],
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The parts of a `multipart/byteranges` body with `boundary`, at most `max_parts` of them.
/// Each part's length comes from its `Content-Range` and must be followed by CRLF and the next
/// delimiter (RFC 2046 §5.1.1); the preamble before the first delimiter and the epilogue after
/// the closing one are ignored.
pub fn parse_byteranges<'a>(
    body: &'a [u8],
    boundary: &str,
    max_parts: usize,
) -> Result<Vec<Part<'a>>, MultipartError> {
    if boundary.is_empty() || boundary.len() > 70 {
        return Err(MultipartError::BadBoundary);
    }
    let delimiter = format!("--{boundary}");
    let delimiter = delimiter.as_bytes();
    let mut at = find(body, delimiter).ok_or(MultipartError::NoDelimiter)? + delimiter.len();
    let mut parts = Vec::new();
    loop {
        let i = parts.len();
        let rest = &body[at..];
        if rest.starts_with(b"--") {
            return Ok(parts);
        }
        if parts.len() == max_parts {
            return Err(MultipartError::TooManyParts(max_parts));
        }
        // Transport padding (spaces, tabs) may follow a delimiter before its CRLF.
        let pad = rest
            .iter()
            .take_while(|&&c| c == b' ' || c == b'\t')
            .count();
        let rest = rest[pad..]
            .strip_prefix(b"\r\n")
            .ok_or(MultipartError::NoNextDelimiter(i.saturating_sub(1)))?;
        at += pad + 2;
        let end = find(rest, b"\r\n\r\n").ok_or(MultipartError::UnterminatedHeaders(i))?;
        let headers = &rest[..end];
        let mut content_range = None;
        for line in headers.split(|&c| c == b'\n') {
            let line = String::from_utf8_lossy(line);
            if let Some((name, value)) = line.trim_end_matches('\r').split_once(':') {
                if name.trim().eq_ignore_ascii_case("content-range") {
                    content_range = Some(parse_content_range(value)?);
                }
            }
        }
        let (range, complete_length) = content_range.ok_or(MultipartError::NoContentRange(i))?;
        let start = at + end + 4;
        let len =
            usize::try_from(range.end - range.start).map_err(|_| MultipartError::Truncated(i))?;
        let stop = start.checked_add(len).filter(|&s| s <= body.len());
        let stop = stop.ok_or(MultipartError::Truncated(i))?;
        let after = &body[stop..];
        if !(after.starts_with(b"\r\n") && after[2..].starts_with(delimiter)) {
            return Err(MultipartError::NoNextDelimiter(i));
        }
        parts.push(Part {
            range,
            complete_length,
            body: &body[start..stop],
        });
        at = stop + 2 + delimiter.len();
    }
}

/// A `multipart/byteranges` body of `parts` (range and bytes) of a representation of `size`
/// bytes, and its `Content-Type` value.
pub fn write_byteranges(
    parts: &[(Range<u64>, &[u8])],
    size: u64,
    part_type: Option<&str>,
    boundary: &str,
) -> (Vec<u8>, String) {
    let mut out = Vec::new();
    for (r, bytes) in parts {
        out.extend_from_slice(format!("\r\n--{boundary}\r\n").as_bytes());
        if let Some(t) = part_type {
            out.extend_from_slice(format!("Content-Type: {t}\r\n").as_bytes());
        }
        out.extend_from_slice(
            format!(
                "Content-Range: {}\r\n\r\n",
                crate::range::content_range(r, size)
            )
            .as_bytes(),
        );
        out.extend_from_slice(bytes);
    }
    out.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (out, format!("multipart/byteranges; boundary={boundary}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_ranges() {
        assert_eq!(parse_content_range("bytes 0-9/100"), Ok((0..10, Some(100))));
        assert_eq!(parse_content_range(" bytes 5-5/*"), Ok((5..6, None)));
        for bad in [
            "bytes 9-3/100",
            "bytes 0-100/100",
            "bytes -1/100",
            "items 0-1/2",
            "bytes 0-1",
            "bytes 0-99999999999999999999/*",
            "bytes */100",
            "",
        ] {
            assert!(parse_content_range(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn boundaries() {
        assert_eq!(
            boundary("multipart/byteranges; boundary=abc").as_deref(),
            Ok("abc")
        );
        assert_eq!(
            boundary("Multipart/Byteranges;charset=x; Boundary=\"a b\"").as_deref(),
            Ok("a b")
        );
        assert_eq!(
            boundary("text/plain; boundary=x"),
            Err(MultipartError::NotByteranges)
        );
        assert_eq!(
            boundary("multipart/byteranges"),
            Err(MultipartError::NotByteranges)
        );
        assert_eq!(
            boundary("multipart/byteranges; boundary=\"\""),
            Err(MultipartError::BadBoundary)
        );
    }

    #[test]
    fn writes_and_reads_back_the_parts() {
        let a = b"hello".to_vec();
        let b = b"\r\n--xyz not a delimiter inside a part".to_vec();
        let (body, ct) = write_byteranges(
            &[(10..15, &a), (100..100 + b.len() as u64, &b)],
            1000,
            Some("application/octet-stream"),
            "xyz",
        );
        let bd = boundary(&ct).unwrap();
        let parts = parse_byteranges(&body, &bd, 16).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!((parts[0].range.clone(), parts[0].body), (10..15, &a[..]));
        assert_eq!(parts[1].body, &b[..]);
        assert_eq!(parts[1].complete_length, Some(1000));
        assert_eq!(
            parse_byteranges(&body, &bd, 1),
            Err(MultipartError::TooManyParts(1))
        );
    }

    #[test]
    fn malformed_bodies_are_errors() {
        let (good, _) = write_byteranges(&[(0..4, b"abcd")], 10, None, "B");
        // Every truncation before the end of the closing delimiter is an error, never a panic
        // (the CRLF after it is optional).
        assert!(parse_byteranges(&good[..good.len() - 2], "B", 16).is_ok());
        for n in 0..good.len() - 2 {
            assert!(parse_byteranges(&good[..n], "B", 16).is_err(), "cut at {n}");
        }
        let cases: [(&[u8], MultipartError); 4] = [
            (b"no delimiter", MultipartError::NoDelimiter),
            (
                b"--B\r\nContent-Type: x\r\n\r\nabcd\r\n--B--",
                MultipartError::NoContentRange(0),
            ),
            (
                b"--B\r\nContent-Range: bytes 0-3/10\r\n\r\nabcdEXTRA\r\n--B--",
                MultipartError::NoNextDelimiter(0),
            ),
            (
                b"--B\r\nContent-Range: bytes 0-3/10\r\n\r\nab",
                MultipartError::Truncated(0),
            ),
        ];
        for (body, want) in cases {
            assert_eq!(parse_byteranges(body, "B", 16), Err(want));
        }
    }
}
