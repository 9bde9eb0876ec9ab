//! Trace formats, and opening or creating a trace by format or file name.

use std::fmt;
use std::path::Path;

use crate::csv::{CsvReader, CsvSpec, CsvWriter};
use crate::oracle::{OracleReader, OracleWriter};
use crate::text::{TextReader, TextWriter};
use crate::{RequestReader, RequestWriter, TraceError};

/// The trace formats ecdn reads and writes. (Not `Copy`, so that formats may grow options
/// that own data; cloning is cheap.)
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Format {
    /// libCacheSim oracleGeneral, uncompressed.
    OracleGeneral,
    /// libCacheSim oracleGeneral, zstd-compressed.
    OracleGeneralZst,
    /// Whitespace-separated `time id size` lines (see [`crate::text`]).
    Text,
    /// [`Format::Text`], zstd-compressed.
    TextZst,
    /// CSV with a column mapping (see [`crate::csv`]). Written CSV always uses the default
    /// layout `time,id,size` with a header.
    Csv(CsvSpec),
    /// [`Format::Csv`], zstd-compressed.
    CsvZst(CsvSpec),
}

/// Format names accepted by [`Format::parse`], for help texts and error messages.
pub const FORMAT_NAMES: &str = "oracleGeneral, oracleGeneral.zst, text, text.zst, csv, csv.zst";

impl Format {
    /// Guesses the format from a file name (case-insensitive), after removing a `.zst` suffix,
    /// which selects the compressed variant:
    /// `*.txt`, `*.tr` → text; `*.csv` → CSV with [`CsvSpec::default`];
    /// `*.bin`, or a name containing `oracleGeneral` → oracleGeneral.
    pub fn from_path(path: &Path) -> Option<Format> {
        let name = path.file_name()?.to_string_lossy().to_ascii_lowercase();
        let (stem, zstd) = match name.strip_suffix(".zst") {
            Some(stem) => (stem, true),
            None => (name.as_str(), false),
        };
        let plain = if stem.ends_with(".txt") || stem.ends_with(".tr") {
            Format::Text
        } else if stem.ends_with(".csv") {
            Format::Csv(CsvSpec::default())
        } else if stem.ends_with(".bin") || stem.contains("oraclegeneral") {
            Format::OracleGeneral
        } else {
            return None;
        };
        Some(if zstd { plain.compressed() } else { plain })
    }

    /// Parses a format name as given to `--format`/`--to` (case-insensitive):
    /// `oracleGeneral` (also `oracle`, `bin`), `oracleGeneral.zst`, `text` (also `txt`),
    /// `text.zst`, `csv` (with [`CsvSpec::default`]) and `csv.zst`.
    pub fn parse(name: &str) -> Result<Format, String> {
        let lower = name.trim().to_ascii_lowercase();
        let (base, zstd) = match lower.strip_suffix(".zst") {
            Some(b) => (b, true),
            None => (lower.as_str(), false),
        };
        let plain = match base {
            "oraclegeneral" | "oracle" | "bin" => Format::OracleGeneral,
            "text" | "txt" => Format::Text,
            "csv" => Format::Csv(CsvSpec::default()),
            _ => {
                return Err(format!(
                    "unknown trace format {name:?}: expected one of {FORMAT_NAMES}"
                ))
            }
        };
        Ok(if zstd { plain.compressed() } else { plain })
    }

    /// The zstd-compressed variant of this format.
    pub fn compressed(self) -> Format {
        match self {
            Format::OracleGeneral | Format::OracleGeneralZst => Format::OracleGeneralZst,
            Format::Text | Format::TextZst => Format::TextZst,
            Format::Csv(s) | Format::CsvZst(s) => Format::CsvZst(s),
        }
    }

    /// Whether the format is zstd-compressed.
    pub fn is_zstd(&self) -> bool {
        matches!(
            self,
            Format::OracleGeneralZst | Format::TextZst | Format::CsvZst(_)
        )
    }

    /// The column mapping of a CSV format.
    pub fn csv_spec(&self) -> Option<CsvSpec> {
        match self {
            Format::Csv(s) | Format::CsvZst(s) => Some(*s),
            _ => None,
        }
    }

    /// Replaces the column mapping of a CSV format; other formats are returned unchanged.
    pub fn with_csv_spec(self, spec: CsvSpec) -> Format {
        match self {
            Format::Csv(_) => Format::Csv(spec),
            Format::CsvZst(_) => Format::CsvZst(spec),
            other => other,
        }
    }
}

impl fmt::Display for Format {
    /// The name [`Format::parse`] accepts (the CSV column mapping is not shown).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::OracleGeneral => "oracleGeneral",
            Format::OracleGeneralZst => "oracleGeneral.zst",
            Format::Text => "text",
            Format::TextZst => "text.zst",
            Format::Csv(_) => "csv",
            Format::CsvZst(_) => "csv.zst",
        })
    }
}

impl std::str::FromStr for Format {
    type Err = String;

    /// See [`Format::parse`].
    fn from_str(s: &str) -> Result<Self, String> {
        Format::parse(s)
    }
}

/// Options for [`open`].
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    /// Forced format; `None` guesses from the file name.
    pub format: Option<Format>,
}

/// Resolves the format of `path`: `forced` if given, else guessed from the name.
pub fn resolve(path: &Path, forced: Option<&Format>) -> Result<Format, TraceError> {
    match forced {
        Some(f) => Ok(f.clone()),
        None => Format::from_path(path).ok_or_else(|| {
            TraceError::Config(format!(
                "{}: cannot tell the trace format from the file name (known: *.bin, \
                 *.oracleGeneral, *.txt, *.tr, *.csv, each optionally with .zst); pass --format",
                path.display()
            ))
        }),
    }
}

/// Opens a trace for streaming.
pub fn open(path: &Path, opts: &OpenOptions) -> Result<Box<dyn RequestReader>, TraceError> {
    Ok(match resolve(path, opts.format.as_ref())? {
        Format::OracleGeneral => Box::new(OracleReader::open(path, false)?),
        Format::OracleGeneralZst => Box::new(OracleReader::open(path, true)?),
        Format::Text => Box::new(TextReader::open(path, false)?),
        Format::TextZst => Box::new(TextReader::open(path, true)?),
        Format::Csv(spec) => Box::new(CsvReader::open(path, spec, false)?),
        Format::CsvZst(spec) => Box::new(CsvReader::open(path, spec, true)?),
    })
}

/// Creates (truncates) a trace for streaming output in `format`. The oracleGeneral writer
/// computes next-access indices itself when finished (see [`OracleWriter`]).
pub fn create(path: &Path, format: &Format) -> Result<Box<dyn RequestWriter>, TraceError> {
    Ok(match format {
        Format::OracleGeneral => Box::new(OracleWriter::create(path, false)?),
        Format::OracleGeneralZst => Box::new(OracleWriter::create(path, true)?),
        Format::Text => Box::new(TextWriter::create(path, false)?),
        Format::TextZst => Box::new(TextWriter::create(path, true)?),
        Format::Csv(_) => Box::new(CsvWriter::create(path, false)?),
        Format::CsvZst(_) => Box::new(CsvWriter::create(path, true)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{read_all, Request};

    #[test]
    fn guesses_from_path() {
        let g = |s: &str| Format::from_path(Path::new(s));
        assert_eq!(
            g("cloudPhysicsIO.oracleGeneral.bin"),
            Some(Format::OracleGeneral)
        );
        assert_eq!(g("a/b/w.oracleGeneral"), Some(Format::OracleGeneral));
        assert_eq!(g("x.bin.zst"), Some(Format::OracleGeneralZst));
        assert_eq!(g("x.oracleGeneral.zst"), Some(Format::OracleGeneralZst));
        assert_eq!(g("x.TXT"), Some(Format::Text));
        assert_eq!(g("x.tr"), Some(Format::Text));
        assert_eq!(g("x.tr.zst"), Some(Format::TextZst));
        assert_eq!(g("x.csv"), Some(Format::Csv(CsvSpec::default())));
        assert_eq!(g("x.csv.zst"), Some(Format::CsvZst(CsvSpec::default())));
        assert_eq!(g("x.oracleGeneral.txt"), Some(Format::Text));
        assert_eq!(g("x.json"), None);
        assert_eq!(g("x.zst"), None);
    }

    #[test]
    fn parses_names() {
        for f in [
            Format::OracleGeneral,
            Format::OracleGeneralZst,
            Format::Text,
            Format::TextZst,
            Format::Csv(CsvSpec::default()),
            Format::CsvZst(CsvSpec::default()),
        ] {
            assert_eq!(Format::parse(&f.to_string()), Ok(f));
        }
        assert_eq!(Format::parse("ORACLEGENERAL"), Ok(Format::OracleGeneral));
        assert_eq!(Format::parse("txt"), Ok(Format::Text));
        let e = Format::parse("parquet").unwrap_err();
        assert!(e.contains("oracleGeneral.zst"), "{e}");
    }

    #[test]
    fn unknown_name_needs_format() {
        let e = open(Path::new("x.dat"), &OpenOptions::default())
            .err()
            .unwrap();
        assert!(e.to_string().contains("--format"), "{e}");
    }

    #[test]
    fn create_then_open_every_format() {
        let dir = tempfile::tempdir().unwrap();
        let reqs: Vec<Request> = (0..3000u64)
            .map(|i| Request {
                time: i / 10,
                id: i * i % 101,
                size: 1 + i % 777,
                next_access: -1,
            })
            .collect();
        for name in [
            "t.bin",
            "t.bin.zst",
            "t.txt",
            "t.txt.zst",
            "t.csv",
            "t.csv.zst",
        ] {
            let path = dir.path().join(name);
            let format = Format::from_path(&path).unwrap();
            let mut w = create(&path, &format).unwrap();
            w.write_batch(&reqs[..1000]).unwrap();
            w.write_batch(&reqs[1000..]).unwrap();
            assert_eq!(w.finish().unwrap(), 3000);
            let back = read_all(&mut open(&path, &OpenOptions::default()).unwrap()).unwrap();
            let mut want = reqs.clone();
            if matches!(format, Format::OracleGeneral | Format::OracleGeneralZst) {
                crate::compute_next_access(&mut want);
            }
            assert_eq!(back, want, "{name}");
        }
    }
}
