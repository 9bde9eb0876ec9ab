//! Line-oriented input shared by the text and CSV readers: opening (plain or zstd), reading one
//! line at a time into a reused buffer, line numbers and the parsing of numeric fields.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use crate::TraceError;

/// Buffered input capacity of line readers.
const READ_BUF: usize = 256 * 1024;

/// A stream of lines with 1-based line numbers.
pub(crate) struct Lines {
    inner: Box<dyn BufRead + Send>,
    pub(crate) path: PathBuf,
    /// Number of the line last returned by [`Lines::next_line`] (1-based; 0 before the first).
    pub(crate) line: u64,
    buf: Vec<u8>,
}

impl Lines {
    /// Opens `path`, decompressing zstd when `zstd` is set.
    pub(crate) fn open(path: &Path, zstd: bool) -> Result<Self, TraceError> {
        let io = |error| TraceError::Io {
            path: path.to_path_buf(),
            error,
        };
        let file = File::open(path).map_err(io)?;
        let inner: Box<dyn BufRead + Send> = if zstd {
            let dec = zstd::stream::read::Decoder::new(file).map_err(io)?;
            Box::new(BufReader::with_capacity(READ_BUF, dec))
        } else {
            Box::new(BufReader::with_capacity(READ_BUF, file))
        };
        Ok(Self::from_reader(inner, path))
    }

    /// Wraps any buffered byte stream; `path` is used in error messages.
    pub(crate) fn from_reader(inner: Box<dyn BufRead + Send>, path: &Path) -> Self {
        Lines {
            inner,
            path: path.to_path_buf(),
            line: 0,
            buf: Vec::new(),
        }
    }

    /// Reads the next line without its line terminator (`\n` or `\r\n`); `None` at end of input.
    pub(crate) fn next_line(&mut self) -> Result<Option<&[u8]>, TraceError> {
        self.buf.clear();
        let n = self
            .inner
            .read_until(b'\n', &mut self.buf)
            .map_err(|error| TraceError::Io {
                path: self.path.clone(),
                error,
            })?;
        if n == 0 {
            return Ok(None);
        }
        self.line += 1;
        let mut end = self.buf.len();
        if end > 0 && self.buf[end - 1] == b'\n' {
            end -= 1;
        }
        if end > 0 && self.buf[end - 1] == b'\r' {
            end -= 1;
        }
        Ok(Some(&self.buf[..end]))
    }

    /// An error about the line last read.
    pub(crate) fn error(&self, msg: String) -> TraceError {
        line_error(&self.path, self.line, msg)
    }
}

/// A [`TraceError::Line`].
pub(crate) fn line_error(path: &Path, line: u64, msg: String) -> TraceError {
    TraceError::Line {
        path: path.to_path_buf(),
        line,
        msg,
    }
}

/// Shows a field in an error message (lossy UTF-8, shortened to 40 characters).
pub(crate) fn show(field: &[u8]) -> String {
    let s = String::from_utf8_lossy(field);
    if s.chars().count() > 40 {
        let short: String = s.chars().take(40).collect();
        format!("{short:?}...")
    } else {
        format!("{s:?}")
    }
}

/// Checks that a line is valid UTF-8 (traces are text; anything else is reported, not guessed).
pub(crate) fn check_utf8(line: &[u8]) -> Result<(), String> {
    std::str::from_utf8(line)
        .map(|_| ())
        .map_err(|e| format!("invalid UTF-8 at byte {}", e.valid_up_to() + 1))
}

/// Parses a non-negative decimal integer; `what` names the field in error messages.
pub(crate) fn parse_u64(field: &[u8], what: &str) -> Result<u64, String> {
    let digits = field.strip_prefix(b"+").unwrap_or(field);
    if digits.is_empty() {
        return Err(format!("empty {what}"));
    }
    if digits.iter().all(u8::is_ascii_digit) {
        let mut v: u64 = 0;
        for &b in digits {
            v = v
                .checked_mul(10)
                .and_then(|v| v.checked_add((b - b'0') as u64))
                .ok_or_else(|| {
                    format!("{what} {} is out of range (max {})", show(field), u64::MAX)
                })?;
        }
        return Ok(v);
    }
    if field.first() == Some(&b'-') && field.len() > 1 {
        return Err(format!("negative {what} {}", show(field)));
    }
    if std::str::from_utf8(field)
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .is_some()
    {
        return Err(format!("{what} {} is not an integer", show(field)));
    }
    Err(format!("{what} {} is not a number", show(field)))
}

/// Parses a timestamp: a non-negative integer, or a non-negative decimal number that is rounded
/// down to whole seconds (some traces carry fractional times).
pub(crate) fn parse_time(field: &[u8]) -> Result<u64, String> {
    match parse_u64(field, "timestamp") {
        Ok(v) => Ok(v),
        Err(e) => {
            let Some(f) = std::str::from_utf8(field)
                .ok()
                .and_then(|s| s.parse::<f64>().ok())
            else {
                return Err(e);
            };
            if f.is_nan() {
                return Err(e);
            }
            if f < 0.0 {
                return Err(format!("negative timestamp {}", show(field)));
            }
            if !f.is_finite() || f >= u64::MAX as f64 {
                return Err(format!("timestamp {} is out of range", show(field)));
            }
            Ok(f.floor() as u64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(parse_u64(b"0", "size"), Ok(0));
        assert_eq!(parse_u64(b"+12", "size"), Ok(12));
        assert_eq!(
            parse_u64(b"18446744073709551615", "size"),
            Ok(18446744073709551615)
        );
        assert!(parse_u64(b"18446744073709551616", "size")
            .unwrap_err()
            .contains("out of range"));
        assert!(parse_u64(b"-5", "size").unwrap_err().contains("negative"));
        assert!(parse_u64(b"1.5", "size")
            .unwrap_err()
            .contains("not an integer"));
        assert!(parse_u64(b"abc", "size")
            .unwrap_err()
            .contains("not a number"));
        assert!(parse_u64(b"", "size").unwrap_err().contains("empty"));
        assert!(parse_u64(b"+", "size").is_err());
        assert_eq!(parse_time(b"12.9"), Ok(12));
        assert_eq!(parse_time(b"7"), Ok(7));
        assert!(parse_time(b"-1").is_err());
        assert!(parse_time(b"1e300").is_err());
        assert!(parse_time(b"nan").is_err());
        assert!(parse_time(b"x").is_err());
    }

    #[test]
    fn lines_strip_terminators() {
        let data: &[u8] = b"a b\r\nc\n\nlast";
        let mut l = Lines::from_reader(Box::new(data), Path::new("t"));
        assert_eq!(l.next_line().unwrap(), Some(&b"a b"[..]));
        assert_eq!(l.next_line().unwrap(), Some(&b"c"[..]));
        assert_eq!(l.next_line().unwrap(), Some(&b""[..]));
        assert_eq!(l.next_line().unwrap(), Some(&b"last"[..]));
        assert_eq!(l.line, 4);
        assert_eq!(l.next_line().unwrap(), None);
    }
}
