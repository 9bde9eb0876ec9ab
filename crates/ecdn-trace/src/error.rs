//! Errors of trace reading and writing.

use std::path::PathBuf;

/// Everything that can go wrong reading or writing a trace. Every variant names the file and,
/// where it applies, the record or line number, so a malformed trace is easy to find.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: record {record}: {msg}")]
    Record {
        path: PathBuf,
        record: u64,
        msg: String,
    },
    #[error("{path}: line {line}: {msg}")]
    Line {
        path: PathBuf,
        line: u64,
        msg: String,
    },
    #[error("{0}")]
    Config(String),
}
