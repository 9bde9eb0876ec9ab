//! Errors of trace reading and writing.

use std::path::PathBuf;

/// Everything that can go wrong reading or writing a trace. Every variant names the file and,
/// where it applies, the record or line number, so a malformed trace is easy to find.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// An I/O error (including corrupt zstd streams). The message includes the underlying
    /// error, which is therefore not also returned by `source()` (error reporters that print the
    /// chain, like anyhow's `{:#}`, would show it twice).
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        error: std::io::Error,
    },
    /// A bad binary record (oracleGeneral): truncated, or a value that does not fit the format.
    #[error("{path}: record {record}: {msg}")]
    Record {
        /// The file.
        path: PathBuf,
        /// 0-based record (request) number.
        record: u64,
        /// What is wrong.
        msg: String,
    },
    /// A malformed line of a text or CSV trace.
    #[error("{path}: line {line}: {msg}")]
    Line {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// What is wrong.
        msg: String,
    },
    /// An invalid setting (format, column mapping, generator parameter, ...).
    #[error("{0}")]
    Config(String),
}
