//! Whitespace-separated text traces in the style of webcachesim: one request per line,
//! `time id size`.
//!
//! * Fields are separated by any run of ASCII whitespace; columns after the third are ignored.
//! * Blank lines and lines whose first non-blank character is `#` are skipped.
//! * `time` is a non-negative integer (a decimal fraction is rounded down to whole seconds).
//! * `id` is used as is when it is a decimal number that fits in u64, otherwise it is hashed with
//!   [`crate::hash_id`] (so names, URLs or hex digests work too).
//! * `size` is a non-negative integer number of bytes.
//!
//! Malformed lines are reported as [`TraceError::Line`] with the 1-based line number.

use std::io::BufRead;
use std::path::Path;

use crate::lines::{check_utf8, parse_time, parse_u64, Lines};
use crate::sink::{push_u64, Sink};
use crate::{parse_id, Request, RequestReader, RequestWriter, TraceError};

/// Streaming reader of `time id size` text traces (plain or zstd); memory use is one line
/// buffer plus the read buffer.
pub struct TextReader {
    lines: Lines,
}

impl TextReader {
    /// Opens `path`; `zstd` selects zstd decompression.
    pub fn open(path: &Path, zstd: bool) -> Result<Self, TraceError> {
        Ok(TextReader {
            lines: Lines::open(path, zstd)?,
        })
    }

    /// Wraps any buffered byte stream; `path` is used in error messages.
    pub fn from_reader(inner: Box<dyn BufRead + Send>, path: &Path) -> Self {
        TextReader {
            lines: Lines::from_reader(inner, path),
        }
    }
}

/// Parses one line; `Ok(None)` for blank and comment lines.
fn parse_line(line: &[u8]) -> Result<Option<Request>, String> {
    let mut fields = line
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty());
    let Some(first) = fields.next() else {
        return Ok(None);
    };
    if first[0] == b'#' {
        return Ok(None);
    }
    check_utf8(line)?;
    let (Some(id), Some(size)) = (fields.next(), fields.next()) else {
        let n = line
            .split(|b| b.is_ascii_whitespace())
            .filter(|f| !f.is_empty())
            .count();
        return Err(format!(
            "expected `time id size`, found {n} field{}",
            if n == 1 { "" } else { "s" }
        ));
    };
    Ok(Some(Request {
        time: parse_time(first)?,
        id: parse_id(id),
        size: parse_u64(size, "size")?,
        next_access: -1,
    }))
}

impl RequestReader for TextReader {
    fn read_batch(&mut self, buf: &mut Vec<Request>, max: usize) -> Result<usize, TraceError> {
        buf.clear();
        while buf.len() < max {
            let Some(line) = self.lines.next_line()? else {
                break;
            };
            match parse_line(line) {
                Ok(Some(r)) => buf.push(r),
                Ok(None) => {}
                Err(msg) => return Err(self.lines.error(msg)),
            }
        }
        Ok(buf.len())
    }
}

/// Streaming writer of `time id size` text traces (plain or zstd). `next_access` is not written.
pub struct TextWriter {
    sink: Sink,
    line: Vec<u8>,
    count: u64,
}

impl TextWriter {
    /// Creates (truncates) `path`; `zstd` compresses the output.
    pub fn create(path: &Path, zstd: bool) -> Result<Self, TraceError> {
        Ok(TextWriter {
            sink: Sink::create(path, zstd)?,
            line: Vec::with_capacity(64 * 1024),
            count: 0,
        })
    }

    /// Writes one request.
    pub fn write(&mut self, req: &Request) -> Result<(), TraceError> {
        self.write_batch(std::slice::from_ref(req))
    }
}

impl RequestWriter for TextWriter {
    fn write_batch(&mut self, reqs: &[Request]) -> Result<(), TraceError> {
        for r in reqs {
            push_u64(&mut self.line, r.time);
            self.line.push(b' ');
            push_u64(&mut self.line, r.id);
            self.line.push(b' ');
            push_u64(&mut self.line, r.size);
            self.line.push(b'\n');
            if self.line.len() >= 60 * 1024 {
                self.sink.write_all(&self.line)?;
                self.line.clear();
            }
        }
        self.count += reqs.len() as u64;
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<u64, TraceError> {
        self.sink.write_all(&self.line)?;
        self.sink.finish()?;
        Ok(self.count)
    }
}

/// Writes `reqs` as a text trace (convenience for small traces and tests).
pub fn write(path: &Path, reqs: &[Request], zstd: bool) -> Result<(), TraceError> {
    let mut w = Box::new(TextWriter::create(path, zstd)?);
    w.write_batch(reqs)?;
    w.finish()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{read_all, BATCH};

    fn read_str(s: &'static str) -> Result<Vec<Request>, TraceError> {
        let mut r = TextReader::from_reader(Box::new(s.as_bytes()), Path::new("t.txt"));
        read_all(&mut r)
    }

    fn req(time: u64, id: u64, size: u64) -> Request {
        Request {
            time,
            id,
            size,
            next_access: -1,
        }
    }

    #[test]
    fn parses_lines_comments_and_extra_columns() {
        let reqs = read_str(
            "# webcachesim trace\n\n1 10 100\n  2\t20   200 extra cols\r\n   # indented comment\n3 obj 300\n4.7 10 0",
        )
        .unwrap();
        assert_eq!(
            reqs,
            vec![
                req(1, 10, 100),
                req(2, 20, 200),
                req(3, crate::hash_id(b"obj"), 300),
                req(4, 10, 0),
            ]
        );
    }

    #[test]
    fn huge_numeric_ids_are_hashed() {
        let reqs = read_str("1 123456789012345678901234567890 5\n").unwrap();
        assert_eq!(
            reqs[0].id,
            crate::hash_id(b"123456789012345678901234567890")
        );
    }

    fn err_of(s: &'static str) -> (u64, String) {
        match read_str(s) {
            Err(TraceError::Line { line, msg, .. }) => (line, msg),
            other => panic!("expected a line error, got {other:?}"),
        }
    }

    #[test]
    fn malformed_lines_name_the_line() {
        let (line, msg) = err_of("1 2 3\n# c\n1 2 x\n");
        assert_eq!(line, 3);
        assert!(
            msg.contains("size") && msg.contains("not a number"),
            "{msg}"
        );
        let (line, msg) = err_of("1 2\n");
        assert_eq!(line, 1);
        assert!(msg.contains("found 2 fields"), "{msg}");
        let (_, msg) = err_of("1 2 -5\n");
        assert!(msg.contains("negative size"), "{msg}");
        let (_, msg) = err_of("1 2 99999999999999999999999\n");
        assert!(msg.contains("out of range"), "{msg}");
        let (_, msg) = err_of("-1 2 3\n");
        assert!(msg.contains("negative timestamp"), "{msg}");
        let (_, msg) = err_of("t 2 3\n");
        assert!(msg.contains("timestamp"), "{msg}");
    }

    #[test]
    fn invalid_utf8_is_an_error() {
        let data: &'static [u8] = b"1 2 3\n1 \xff\xfe 3\n";
        let mut r = TextReader::from_reader(Box::new(data), Path::new("t.txt"));
        match read_all(&mut r) {
            Err(TraceError::Line { line: 2, msg, .. }) => assert!(msg.contains("UTF-8"), "{msg}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn batches_respect_max() {
        let mut r =
            TextReader::from_reader(Box::new("1 1 1\n2 2 2\n3 3 3\n".as_bytes()), Path::new("t"));
        let mut buf = Vec::new();
        assert_eq!(r.read_batch(&mut buf, 2).unwrap(), 2);
        assert_eq!(r.read_batch(&mut buf, 2).unwrap(), 1);
        assert_eq!(buf, vec![req(3, 3, 3)]);
        assert_eq!(r.read_batch(&mut buf, BATCH).unwrap(), 0);
    }

    #[test]
    fn roundtrip_plain_and_zstd() {
        let dir = tempfile::tempdir().unwrap();
        let reqs: Vec<Request> = (0..20_000u64)
            .map(|i| req(i / 3, i * 7919 % 1000, i % 5000 + 1))
            .collect();
        for zstd in [false, true] {
            let path = dir.path().join(if zstd { "t.txt.zst" } else { "t.txt" });
            write(&path, &reqs, zstd).unwrap();
            let mut r = TextReader::open(&path, zstd).unwrap();
            assert_eq!(read_all(&mut r).unwrap(), reqs);
        }
    }
}
