//! Trace formats and opening a trace by format or file name.

use std::path::Path;

use crate::oracle::OracleReader;
use crate::{RequestReader, TraceError};

/// The trace formats ecdn reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// libCacheSim oracleGeneral, uncompressed.
    OracleGeneral,
    /// libCacheSim oracleGeneral, zstd-compressed.
    OracleGeneralZst,
}

impl Format {
    /// Guesses the format from a file name: `*.oracleGeneral*.zst` / `*.bin.zst`, `*.oracleGeneral*`
    /// / `*.bin`.
    pub fn from_path(path: &Path) -> Option<Format> {
        let name = path.file_name()?.to_string_lossy().to_ascii_lowercase();
        if name.ends_with(".zst") {
            let stem = name.trim_end_matches(".zst");
            if stem.ends_with(".bin") || stem.contains("oraclegeneral") {
                return Some(Format::OracleGeneralZst);
            }
            return None;
        }
        if name.ends_with(".bin") || name.contains("oraclegeneral") {
            return Some(Format::OracleGeneral);
        }
        None
    }
}

/// Options for [`open`].
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    /// Forced format; `None` guesses from the file name.
    pub format: Option<Format>,
}

/// Opens a trace for streaming.
pub fn open(path: &Path, opts: &OpenOptions) -> Result<Box<dyn RequestReader>, TraceError> {
    let format = match opts.format {
        Some(f) => f,
        None => Format::from_path(path).ok_or_else(|| {
            TraceError::Config(format!(
                "{}: cannot tell the trace format from the file name; pass --format",
                path.display()
            ))
        })?,
    };
    Ok(match format {
        Format::OracleGeneral => Box::new(OracleReader::open(path, false)?),
        Format::OracleGeneralZst => Box::new(OracleReader::open(path, true)?),
    })
}
