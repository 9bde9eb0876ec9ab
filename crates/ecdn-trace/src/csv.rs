//! CSV traces with a column mapping ([`CsvSpec`]).
//!
//! * One request per line; blank lines are skipped. Columns are numbered from 0.
//! * Fields are separated by a one-byte delimiter (`,` by default). A field may be enclosed in
//!   double quotes, inside which the delimiter is literal and `""` stands for one `"`; quoted
//!   fields cannot span lines. Spaces and tabs around a field are ignored.
//! * The id column is used as is when it is a decimal number that fits in u64, otherwise it is
//!   hashed with [`crate::hash_id`].
//! * Without a time column the request index (0, 1, 2, ...) is the timestamp; without a size
//!   column every object has size 1 (request-count caching). Time and size columns follow the
//!   rules of the text format: non-negative integers (fractional times are rounded down).
//! * A header line is skipped when [`CsvHeader::Yes`]; with [`CsvHeader::Auto`] the first line is a
//!   header if its size field (or, without a size column, its time field) is not a number.
//!
//! Malformed lines are reported as [`TraceError::Line`] with the 1-based line number.

use std::io::BufRead;
use std::path::Path;

use crate::lines::{check_utf8, parse_time, parse_u64, Lines};
use crate::sink::{push_u64, Sink};
use crate::{parse_id, Request, RequestReader, RequestWriter, TraceError};

/// Whether a CSV trace starts with a header line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CsvHeader {
    /// Decide from the first line: it is a header if its size field (or, without a size column,
    /// its time field) is not a number. Without time and size columns there is no way to tell
    /// and the first line is read as a request.
    #[default]
    Auto,
    /// The first non-blank line is a header and is skipped.
    Yes,
    /// There is no header; every line is a request.
    No,
}

impl std::str::FromStr for CsvHeader {
    type Err = String;

    /// Parses `auto`, `yes`/`true`/`1` or `no`/`false`/`0`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(CsvHeader::Auto),
            "yes" | "y" | "true" | "1" => Ok(CsvHeader::Yes),
            "no" | "n" | "false" | "0" => Ok(CsvHeader::No),
            _ => Err(format!(
                "invalid CSV header setting {s:?}: use yes, no or auto"
            )),
        }
    }
}

/// Which CSV columns hold what (0-based), the delimiter and the header setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CsvSpec {
    /// Timestamp column; `None` uses the request index as the time.
    pub time_col: Option<usize>,
    /// Object id column.
    pub id_col: usize,
    /// Size column (bytes); `None` gives every object size 1.
    pub size_col: Option<usize>,
    /// Field delimiter byte.
    pub delimiter: u8,
    /// Header line handling.
    pub header: CsvHeader,
}

impl Default for CsvSpec {
    /// `time,id,size` in columns 0, 1, 2, comma-separated, header auto-detected.
    fn default() -> Self {
        CsvSpec {
            time_col: Some(0),
            id_col: 1,
            size_col: Some(2),
            delimiter: b',',
            header: CsvHeader::Auto,
        }
    }
}

impl CsvSpec {
    /// Checks that the spec can be read: distinct columns and a delimiter that is not a quote,
    /// a line break or a space used for trimming.
    pub fn validate(&self) -> Result<(), TraceError> {
        let bad = |m: String| Err(TraceError::Config(m));
        if matches!(self.delimiter, b'"' | b'\n' | b'\r') {
            return bad(format!(
                "invalid CSV delimiter {:?}",
                self.delimiter as char
            ));
        }
        let cols = [
            ("time", self.time_col),
            ("id", Some(self.id_col)),
            ("size", self.size_col),
        ];
        for (i, (a, ca)) in cols.iter().enumerate() {
            for (b, cb) in &cols[i + 1..] {
                if ca.is_some() && ca == cb {
                    return bad(format!(
                        "CSV {a} and {b} columns are both column {}",
                        ca.unwrap_or(0)
                    ));
                }
            }
        }
        Ok(())
    }

    fn max_col(&self) -> usize {
        self.id_col
            .max(self.time_col.unwrap_or(0))
            .max(self.size_col.unwrap_or(0))
    }
}

/// Splits one CSV line into fields. Field contents (unquoted and trimmed) are appended to
/// `scratch`; `fields` receives each field's range in `scratch`.
fn split_fields(
    line: &[u8],
    delim: u8,
    scratch: &mut Vec<u8>,
    fields: &mut Vec<(usize, usize)>,
) -> Result<(), String> {
    scratch.clear();
    fields.clear();
    let is_pad = |b: u8| (b == b' ' || b == b'\t') && b != delim;
    let n = line.len();
    let mut i = 0;
    loop {
        let start = scratch.len();
        let mut j = i;
        while j < n && is_pad(line[j]) {
            j += 1;
        }
        if j < n && line[j] == b'"' {
            j += 1;
            loop {
                if j >= n {
                    return Err(format!(
                        "unterminated quoted field in column {} (quoted fields cannot span lines)",
                        fields.len()
                    ));
                }
                if line[j] == b'"' {
                    if j + 1 < n && line[j + 1] == b'"' {
                        scratch.push(b'"');
                        j += 2;
                    } else {
                        j += 1;
                        break;
                    }
                } else {
                    scratch.push(line[j]);
                    j += 1;
                }
            }
            while j < n && is_pad(line[j]) {
                j += 1;
            }
            if j < n && line[j] != delim {
                return Err(format!(
                    "unexpected {:?} after the closing quote of column {}",
                    line[j] as char,
                    fields.len()
                ));
            }
        } else {
            let end = line[j..]
                .iter()
                .position(|&b| b == delim)
                .map_or(n, |p| j + p);
            let mut e = end;
            while e > j && is_pad(line[e - 1]) {
                e -= 1;
            }
            scratch.extend_from_slice(&line[j..e]);
            j = end;
        }
        fields.push((start, scratch.len()));
        if j >= n {
            return Ok(());
        }
        i = j + 1;
    }
}

/// Streaming CSV trace reader (plain or zstd); memory use is one line plus the read buffer.
pub struct CsvReader {
    lines: Lines,
    spec: CsvSpec,
    /// Index of the next request (the time when there is no time column).
    index: u64,
    /// Whether the first non-blank line has been seen (header detection).
    started: bool,
    scratch: Vec<u8>,
    fields: Vec<(usize, usize)>,
}

impl CsvReader {
    /// Opens `path` with column mapping `spec`; `zstd` selects zstd decompression.
    pub fn open(path: &Path, spec: CsvSpec, zstd: bool) -> Result<Self, TraceError> {
        spec.validate()?;
        Ok(Self::new(Lines::open(path, zstd)?, spec))
    }

    /// Wraps any buffered byte stream; `path` is used in error messages.
    pub fn from_reader(
        inner: Box<dyn BufRead + Send>,
        path: &Path,
        spec: CsvSpec,
    ) -> Result<Self, TraceError> {
        spec.validate()?;
        Ok(Self::new(Lines::from_reader(inner, path), spec))
    }

    fn new(lines: Lines, spec: CsvSpec) -> Self {
        CsvReader {
            lines,
            spec,
            index: 0,
            started: false,
            scratch: Vec::new(),
            fields: Vec::new(),
        }
    }
}

/// The content of field `col`, or an error naming the missing column.
fn field<'a>(
    scratch: &'a [u8],
    fields: &[(usize, usize)],
    col: usize,
    what: &str,
) -> Result<&'a [u8], String> {
    match fields.get(col) {
        Some(&(s, e)) => Ok(&scratch[s..e]),
        None => Err(format!(
            "no {what} column {col} (0-based): the line has only {} field{}",
            fields.len(),
            if fields.len() == 1 { "" } else { "s" }
        )),
    }
}

impl CsvReader {
    /// Parses the current line (already split); `Ok(None)` for a detected header.
    fn parse(&mut self, first: bool) -> Result<Option<Request>, String> {
        let spec = self.spec;
        let (scratch, fields) = (&self.scratch[..], &self.fields[..]);
        if first {
            match spec.header {
                CsvHeader::Yes => return Ok(None),
                CsvHeader::No => {}
                CsvHeader::Auto => {
                    let probe = match (spec.size_col, spec.time_col) {
                        (Some(c), _) => fields
                            .get(c)
                            .map(|&(s, e)| parse_u64(&scratch[s..e], "").is_ok()),
                        (None, Some(c)) => fields
                            .get(c)
                            .map(|&(s, e)| parse_time(&scratch[s..e]).is_ok()),
                        (None, None) => Some(true),
                    };
                    if probe == Some(false) {
                        return Ok(None);
                    }
                }
            }
        }
        if fields.len() <= spec.max_col() {
            // Name the first missing column in the error.
            for (what, col) in [
                ("time", spec.time_col),
                ("id", Some(spec.id_col)),
                ("size", spec.size_col),
            ] {
                if let Some(c) = col {
                    field(scratch, fields, c, what)?;
                }
            }
        }
        let id = field(scratch, fields, spec.id_col, "id")?;
        if id.is_empty() {
            return Err(format!("empty id in column {}", spec.id_col));
        }
        let time = match spec.time_col {
            Some(c) => parse_time(field(scratch, fields, c, "time")?)?,
            None => self.index,
        };
        let size = match spec.size_col {
            Some(c) => parse_u64(field(scratch, fields, c, "size")?, "size")?,
            None => 1,
        };
        Ok(Some(Request {
            time,
            id: parse_id(id),
            size,
            next_access: -1,
        }))
    }
}

impl RequestReader for CsvReader {
    fn read_batch(&mut self, buf: &mut Vec<Request>, max: usize) -> Result<usize, TraceError> {
        buf.clear();
        while buf.len() < max {
            let Some(line) = self.lines.next_line()? else {
                break;
            };
            if line.iter().all(|b| b.is_ascii_whitespace()) {
                continue;
            }
            let split = check_utf8(line).and_then(|()| {
                split_fields(
                    line,
                    self.spec.delimiter,
                    &mut self.scratch,
                    &mut self.fields,
                )
            });
            if let Err(msg) = split {
                return Err(self.lines.error(msg));
            }
            let first = !self.started;
            self.started = true;
            match self.parse(first) {
                Ok(Some(r)) => {
                    buf.push(r);
                    self.index += 1;
                }
                Ok(None) => {}
                Err(msg) => return Err(self.lines.error(msg)),
            }
        }
        Ok(buf.len())
    }
}

/// Streaming CSV writer: a `time,id,size` header, then one comma-separated line per request
/// (readable with [`CsvSpec::default`]). `next_access` is not written.
pub struct CsvWriter {
    sink: Sink,
    line: Vec<u8>,
    count: u64,
}

impl CsvWriter {
    /// Creates (truncates) `path`; `zstd` compresses the output.
    pub fn create(path: &Path, zstd: bool) -> Result<Self, TraceError> {
        let mut sink = Sink::create(path, zstd)?;
        sink.write_all(b"time,id,size\n")?;
        Ok(CsvWriter {
            sink,
            line: Vec::with_capacity(64 * 1024),
            count: 0,
        })
    }
}

impl RequestWriter for CsvWriter {
    fn write_batch(&mut self, reqs: &[Request]) -> Result<(), TraceError> {
        for r in reqs {
            push_u64(&mut self.line, r.time);
            self.line.push(b',');
            push_u64(&mut self.line, r.id);
            self.line.push(b',');
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

/// Parses a delimiter as typed on a command line: one ASCII character, or `tab`/`\t`, `space`,
/// `comma`, `semicolon`, `pipe`.
pub fn parse_delimiter(s: &str) -> Result<u8, String> {
    let d = match s {
        "tab" | "\\t" | "\t" => b'\t',
        "space" | " " => b' ',
        "comma" => b',',
        "semicolon" => b';',
        "pipe" => b'|',
        _ if s.len() == 1 && s.is_ascii() => s.as_bytes()[0],
        _ => {
            return Err(format!(
                "invalid CSV delimiter {s:?}: use one ASCII character, or tab, space, comma, semicolon, pipe"
            ))
        }
    };
    if matches!(d, b'"' | b'\n' | b'\r') {
        return Err(format!("invalid CSV delimiter {s:?}"));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read_all;

    fn read(data: &'static str, spec: CsvSpec) -> Result<Vec<Request>, TraceError> {
        let mut r = CsvReader::from_reader(Box::new(data.as_bytes()), Path::new("t.csv"), spec)?;
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

    fn split(line: &str, d: u8) -> Result<Vec<String>, String> {
        let mut scratch = Vec::new();
        let mut fields = Vec::new();
        split_fields(line.as_bytes(), d, &mut scratch, &mut fields)?;
        Ok(fields
            .iter()
            .map(|&(s, e)| String::from_utf8(scratch[s..e].to_vec()).unwrap())
            .collect())
    }

    #[test]
    fn splitting_and_quotes() {
        assert_eq!(split("a,b,c", b',').unwrap(), ["a", "b", "c"]);
        assert_eq!(split("a,,c,", b',').unwrap(), ["a", "", "c", ""]);
        assert_eq!(split("", b',').unwrap(), [""]);
        assert_eq!(split(" a , b ", b',').unwrap(), ["a", "b"]);
        assert_eq!(
            split(r#""x,y",  "say ""hi""" ,z"#, b',').unwrap(),
            ["x,y", r#"say "hi""#, "z"]
        );
        assert_eq!(split("a\tb\t c", b'\t').unwrap(), ["a", "b", "c"]);
        assert_eq!(split(r#""""#, b',').unwrap(), [""]);
        assert!(split(r#""open,b"#, b',')
            .unwrap_err()
            .contains("unterminated"));
        assert!(split(r#""a"b,c"#, b',')
            .unwrap_err()
            .contains("after the closing quote"));
    }

    #[test]
    fn default_spec_with_auto_header() {
        let reqs = read(
            "time,id,size\n1,10,100\n\n2,\"obj,1\",200\n",
            CsvSpec::default(),
        )
        .unwrap();
        assert_eq!(
            reqs,
            vec![req(1, 10, 100), req(2, crate::hash_id(b"obj,1"), 200)]
        );
        // No header: the first line is data.
        let reqs = read("1,10,100\n2,11,200\n", CsvSpec::default()).unwrap();
        assert_eq!(reqs.len(), 2);
    }

    #[test]
    fn column_mapping_without_time_and_size() {
        let spec = CsvSpec {
            time_col: None,
            id_col: 2,
            size_col: None,
            delimiter: b';',
            header: CsvHeader::Yes,
        };
        let reqs = read("a;b;key;d\nx;y;5;z\nx;y;7\nx;y;5;z;extra\n", spec).unwrap();
        assert_eq!(reqs, vec![req(0, 5, 1), req(1, 7, 1), req(2, 5, 1)]);
    }

    #[test]
    fn header_detection_on_time_column() {
        let spec = CsvSpec {
            time_col: Some(1),
            id_col: 0,
            size_col: None,
            ..CsvSpec::default()
        };
        let reqs = read("key,ts\nk1,5\nk2,6\n", spec).unwrap();
        assert_eq!(reqs.len(), 2);
        assert_eq!(reqs[1].time, 6);
    }

    #[test]
    fn header_no_reads_first_line_as_data() {
        let spec = CsvSpec {
            header: CsvHeader::No,
            ..CsvSpec::default()
        };
        match read("time,id,size\n", spec) {
            Err(TraceError::Line { line: 1, msg, .. }) => {
                assert!(msg.contains("timestamp"), "{msg}")
            }
            other => panic!("{other:?}"),
        }
    }

    fn err_of(data: &'static str) -> (u64, String) {
        match read(data, CsvSpec::default()) {
            Err(TraceError::Line { line, msg, .. }) => (line, msg),
            other => panic!("expected a line error, got {other:?}"),
        }
    }

    #[test]
    fn malformed_lines_name_the_line() {
        let (line, msg) = err_of("time,id,size\n1,2,3\n1,2\n");
        assert_eq!(line, 3);
        assert!(msg.contains("no size column 2"), "{msg}");
        let (line, msg) = err_of("1,2,3\n\n1,2,-3\n");
        assert_eq!(line, 3);
        assert!(msg.contains("negative size"), "{msg}");
        let (_, msg) = err_of("1,2,3\n1,2,1e3\n");
        assert!(msg.contains("not an integer"), "{msg}");
        let (_, msg) = err_of("1,2,3\n1,2,99999999999999999999\n");
        assert!(msg.contains("out of range"), "{msg}");
        let (_, msg) = err_of("1,2,3\n1,,3\n");
        assert!(msg.contains("empty id"), "{msg}");
        let (_, msg) = err_of("1,2,3\n1,\"2,3\n");
        assert!(msg.contains("unterminated"), "{msg}");
        let (_, msg) = err_of("1,2,3\nx,2,3\n");
        assert!(msg.contains("timestamp"), "{msg}");
    }

    #[test]
    fn invalid_utf8_is_an_error() {
        let data: &'static [u8] = b"1,2,3\n1,\xc3\x28,3\n";
        let mut r =
            CsvReader::from_reader(Box::new(data), Path::new("t.csv"), CsvSpec::default()).unwrap();
        match read_all(&mut r) {
            Err(TraceError::Line { line: 2, msg, .. }) => assert!(msg.contains("UTF-8"), "{msg}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn invalid_specs() {
        let spec = CsvSpec {
            size_col: Some(1),
            ..CsvSpec::default()
        };
        assert!(spec.validate().is_err());
        let spec = CsvSpec {
            delimiter: b'"',
            ..CsvSpec::default()
        };
        assert!(spec.validate().is_err());
        assert_eq!(parse_delimiter("tab"), Ok(b'\t'));
        assert_eq!(parse_delimiter(";"), Ok(b';'));
        assert!(parse_delimiter("ab").is_err());
        assert!(parse_delimiter("\"").is_err());
        assert_eq!("YES".parse::<CsvHeader>(), Ok(CsvHeader::Yes));
        assert!("maybe".parse::<CsvHeader>().is_err());
    }

    #[test]
    fn writer_roundtrip_plain_and_zstd() {
        let dir = tempfile::tempdir().unwrap();
        let reqs: Vec<Request> = (0..5000u64).map(|i| req(i, i % 97, i + 1)).collect();
        for zstd in [false, true] {
            let path = dir.path().join("t.csv");
            let mut w = Box::new(CsvWriter::create(&path, zstd).unwrap());
            w.write_batch(&reqs).unwrap();
            assert_eq!(w.finish().unwrap(), 5000);
            let mut r = CsvReader::open(&path, CsvSpec::default(), zstd).unwrap();
            assert_eq!(read_all(&mut r).unwrap(), reqs);
        }
    }
}
