//! Output byte streams for trace writers: a buffered file, optionally zstd-compressed, whose
//! `finish` reports every error (unlike dropping an encoder, which would swallow them).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::TraceError;

/// zstd compression level of written traces (zstd's default, a good speed/ratio balance).
pub(crate) const ZSTD_LEVEL: i32 = 3;

/// Buffered output capacity.
const WRITE_BUF: usize = 256 * 1024;

enum Inner {
    Plain(BufWriter<File>),
    Zstd(BufWriter<zstd::stream::write::Encoder<'static, File>>),
}

/// A buffered output file, plain or zstd-compressed.
pub(crate) struct Sink {
    inner: Inner,
    pub(crate) path: PathBuf,
}

impl Sink {
    /// Creates (truncates) `path`.
    pub(crate) fn create(path: &Path, zstd: bool) -> Result<Self, TraceError> {
        let file = File::create(path).map_err(|e| io_error(path, e))?;
        Self::from_file(file, path, zstd)
    }

    /// Writes to an already open file; `path` is used in error messages.
    pub(crate) fn from_file(file: File, path: &Path, zstd: bool) -> Result<Self, TraceError> {
        let inner = if zstd {
            let enc = zstd::stream::write::Encoder::new(file, ZSTD_LEVEL)
                .map_err(|e| io_error(path, e))?;
            Inner::Zstd(BufWriter::with_capacity(WRITE_BUF, enc))
        } else {
            Inner::Plain(BufWriter::with_capacity(WRITE_BUF, file))
        };
        Ok(Sink {
            inner,
            path: path.to_path_buf(),
        })
    }

    /// Writes all of `bytes`.
    pub(crate) fn write_all(&mut self, bytes: &[u8]) -> Result<(), TraceError> {
        let r = match &mut self.inner {
            Inner::Plain(w) => w.write_all(bytes),
            Inner::Zstd(w) => w.write_all(bytes),
        };
        r.map_err(|e| io_error(&self.path, e))
    }

    /// Flushes everything, ends the zstd frame and returns the underlying file.
    pub(crate) fn finish(self) -> Result<File, TraceError> {
        let path = self.path;
        let file = match self.inner {
            Inner::Plain(w) => w
                .into_inner()
                .map_err(|e| io_error(&path, e.into_error()))?,
            Inner::Zstd(w) => {
                let enc = w
                    .into_inner()
                    .map_err(|e| io_error(&path, e.into_error()))?;
                enc.finish().map_err(|e| io_error(&path, e))?
            }
        };
        Ok(file)
    }
}

/// A [`TraceError::Io`] for `path`.
pub(crate) fn io_error(path: &Path, error: std::io::Error) -> TraceError {
    TraceError::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// Appends the decimal digits of `v` to `out` (faster than `write!` for the millions of numbers
/// a trace holds).
pub(crate) fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal() {
        for v in [0, 1, 9, 10, 99, 100, 12345, u64::MAX] {
            let mut out = Vec::new();
            push_u64(&mut out, v);
            assert_eq!(String::from_utf8(out).unwrap(), v.to_string());
        }
    }
}
