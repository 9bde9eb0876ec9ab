//! libCacheSim's *oracleGeneral* binary format: 24-byte little-endian records
//! `u32 timestamp, u64 obj_id, u32 obj_size, i64 next_access_vtime`, optionally zstd-compressed.
//!
//! `next_access_vtime` is libCacheSim's *virtual time* of the next request to the same object:
//! the 1-based request number (libCacheSim counts requests from 1), or -1 if there is none.
//! In memory, [`Request::next_access`] is the 0-based request index instead (as produced by
//! [`crate::compute_next_access`]); the reader subtracts one and [`encode`] adds one, so files
//! written here match the ones libCacheSim's `traceConv` produces and the published traces.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::sink::{io_error, Sink};
use crate::{Request, RequestReader, RequestWriter, TraceError};

/// Size of one oracleGeneral record in bytes.
pub const RECORD_SIZE: usize = 24;

/// Streaming oracleGeneral reader (plain or zstd); memory use is one read buffer.
pub struct OracleReader {
    inner: Box<dyn Read + Send>,
    path: PathBuf,
    record: u64,
    bytes: Vec<u8>,
}

impl OracleReader {
    /// Opens `path`; `zstd` selects zstd decompression.
    pub fn open(path: &Path, zstd: bool) -> Result<Self, TraceError> {
        let io = |error| TraceError::Io {
            path: path.to_path_buf(),
            error,
        };
        let file = File::open(path).map_err(io)?;
        let inner: Box<dyn Read + Send> = if zstd {
            Box::new(zstd::stream::read::Decoder::new(file).map_err(io)?)
        } else {
            Box::new(BufReader::with_capacity(0, file))
        };
        Ok(Self::from_reader(inner, path))
    }

    /// Wraps any byte stream; `path` is used in error messages.
    pub fn from_reader(inner: Box<dyn Read + Send>, path: &Path) -> Self {
        OracleReader {
            inner,
            path: path.to_path_buf(),
            record: 0,
            bytes: Vec::new(),
        }
    }
}

/// Reads until `buf` is full or EOF; returns the number of bytes read.
fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

impl RequestReader for OracleReader {
    fn read_batch(&mut self, buf: &mut Vec<Request>, max: usize) -> Result<usize, TraceError> {
        buf.clear();
        self.bytes.resize(max * RECORD_SIZE, 0);
        let got = read_full(&mut self.inner, &mut self.bytes).map_err(|error| TraceError::Io {
            path: self.path.clone(),
            error,
        })?;
        let whole = got / RECORD_SIZE;
        if got % RECORD_SIZE != 0 {
            return Err(TraceError::Record {
                path: self.path.clone(),
                record: self.record + whole as u64,
                msg: format!(
                    "truncated record: {} of {RECORD_SIZE} bytes at end of file",
                    got % RECORD_SIZE
                ),
            });
        }
        buf.reserve(whole);
        for rec in self.bytes[..whole * RECORD_SIZE].chunks_exact(RECORD_SIZE) {
            buf.push(Request {
                time: u32::from_le_bytes(rec[0..4].try_into().unwrap()) as u64,
                id: u64::from_le_bytes(rec[4..12].try_into().unwrap()),
                size: u32::from_le_bytes(rec[12..16].try_into().unwrap()) as u64,
                next_access: vtime_to_index(i64::from_le_bytes(rec[16..24].try_into().unwrap())),
            });
        }
        self.record += whole as u64;
        Ok(whole)
    }
}

/// Converts a stored `next_access_vtime` (1-based, -1 for none; libCacheSim also treats
/// `i64::MAX` as none) to a 0-based [`Request::next_access`] index (-1 for none).
pub fn vtime_to_index(vtime: i64) -> i64 {
    if vtime <= 0 || vtime == i64::MAX {
        -1
    } else {
        vtime - 1
    }
}

/// Converts a 0-based [`Request::next_access`] index (negative for none) to the stored 1-based
/// `next_access_vtime` (-1 for none).
pub fn index_to_vtime(index: i64) -> i64 {
    if index < 0 || index == i64::MAX {
        -1
    } else {
        index + 1
    }
}

/// Encodes one request as an oracleGeneral record (`next_access` is stored as a 1-based vtime,
/// see the module docs). Fails if time or size does not fit in u32.
pub fn encode(req: &Request, out: &mut [u8; RECORD_SIZE]) -> Result<(), String> {
    let time = u32::try_from(req.time)
        .map_err(|_| format!("timestamp {} does not fit in u32", req.time))?;
    let size =
        u32::try_from(req.size).map_err(|_| format!("size {} does not fit in u32", req.size))?;
    out[0..4].copy_from_slice(&time.to_le_bytes());
    out[4..12].copy_from_slice(&req.id.to_le_bytes());
    out[12..16].copy_from_slice(&size.to_le_bytes());
    out[16..24].copy_from_slice(&index_to_vtime(req.next_access).to_le_bytes());
    Ok(())
}

/// Writes requests held in memory (whose `next_access` must already be filled, see
/// [`crate::compute_next_access`]) as oracleGeneral, zstd-compressed when `zstd` is set.
/// For traces that do not fit in memory use [`OracleWriter`], which computes next-access
/// indices itself.
pub fn write(path: &Path, reqs: &[Request], zstd: bool) -> Result<(), TraceError> {
    let io = |error| TraceError::Io {
        path: path.to_path_buf(),
        error,
    };
    let file = File::create(path).map_err(io)?;
    let mut w: Box<dyn Write> = if zstd {
        Box::new(
            zstd::stream::write::Encoder::new(file, 3)
                .map_err(io)?
                .auto_finish(),
        )
    } else {
        Box::new(BufWriter::new(file))
    };
    let mut rec = [0u8; RECORD_SIZE];
    for (i, r) in reqs.iter().enumerate() {
        encode(r, &mut rec).map_err(|msg| TraceError::Record {
            path: path.to_path_buf(),
            record: i as u64,
            msg,
        })?;
        w.write_all(&rec).map_err(io)?;
    }
    w.flush().map_err(io)?;
    Ok(())
}

/// Records per chunk of the backward next-access pass (1.5 MiB of I/O buffer).
const PATCH_CHUNK: usize = 64 * 1024;

/// Streaming oracleGeneral writer for traces of any length.
///
/// The next-access column needs a backward pass over the trace, so the writer works in two
/// passes over a file instead of holding the trace in memory:
///
/// 1. [`RequestWriter::write_batch`] appends records (with placeholder next-access) to the output
///    file — or, for zstd output, to a temporary file `.NAME.ecdn-tmp-PID` next to it;
/// 2. [`RequestWriter::finish`] walks the records from the end in chunks of 64 Ki records,
///    computes each record's next access with a hash map from object id to its next request
///    index and rewrites the chunk in place; for zstd output it then compresses the temporary
///    file into the output and removes it.
///
/// Memory is O(unique objects) (the id map, ~24 bytes per object) plus fixed buffers; disk
/// traffic is about three times the uncompressed trace size. The incoming `next_access` values
/// are ignored. An unfinished writer removes its temporary file when dropped.
pub struct OracleWriter {
    /// Pass-1 output; `None` once finished.
    w: Option<BufWriter<File>>,
    /// Final output path.
    path: PathBuf,
    /// Temporary uncompressed file (zstd output only).
    temp: Option<PathBuf>,
    count: u64,
    bytes: Vec<u8>,
}

impl OracleWriter {
    /// Creates (truncates) `path`; `zstd` compresses the output.
    pub fn create(path: &Path, zstd: bool) -> Result<Self, TraceError> {
        let temp = if zstd {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "trace".to_string());
            Some(path.with_file_name(format!(".{name}.ecdn-tmp-{}", std::process::id())))
        } else {
            None
        };
        let records = temp.as_deref().unwrap_or(path);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(records)
            .map_err(|e| io_error(records, e))?;
        if zstd {
            // Fail early if the final output cannot be created.
            File::create(path).map_err(|e| io_error(path, e))?;
        }
        Ok(OracleWriter {
            w: Some(BufWriter::with_capacity(256 * 1024, file)),
            path: path.to_path_buf(),
            temp,
            count: 0,
            bytes: Vec::new(),
        })
    }

    /// Path of the uncompressed records file.
    fn records_path(&self) -> &Path {
        self.temp.as_deref().unwrap_or(&self.path)
    }

    /// Pass 2: fills in next-access vtimes from the end of the file to the start.
    fn patch_next_access(&mut self, file: &mut File) -> Result<(), TraceError> {
        let path = self.records_path().to_path_buf();
        let io = |e| io_error(&path, e);
        let mut next: hashbrown::HashMap<u64, u64, foldhash::fast::FixedState> =
            hashbrown::HashMap::with_hasher(foldhash::fast::FixedState::with_seed(0));
        let mut end = self.count;
        while end > 0 {
            let start = end.saturating_sub(PATCH_CHUNK as u64);
            let n = (end - start) as usize;
            self.bytes.resize(n * RECORD_SIZE, 0);
            file.seek(SeekFrom::Start(start * RECORD_SIZE as u64))
                .map_err(io)?;
            file.read_exact(&mut self.bytes).map_err(io)?;
            for k in (0..n).rev() {
                let rec = &mut self.bytes[k * RECORD_SIZE..(k + 1) * RECORD_SIZE];
                let id = u64::from_le_bytes(rec[4..12].try_into().unwrap());
                let index = start + k as u64;
                let na = match next.insert(id, index) {
                    Some(j) => j as i64,
                    None => -1,
                };
                rec[16..24].copy_from_slice(&index_to_vtime(na).to_le_bytes());
            }
            file.seek(SeekFrom::Start(start * RECORD_SIZE as u64))
                .map_err(io)?;
            file.write_all(&self.bytes).map_err(io)?;
            end = start;
        }
        file.flush().map_err(io)?;
        Ok(())
    }
}

impl RequestWriter for OracleWriter {
    fn write_batch(&mut self, reqs: &[Request]) -> Result<(), TraceError> {
        let Some(w) = self.w.as_mut() else {
            return Err(TraceError::Config(format!(
                "{}: write after finish",
                self.path.display()
            )));
        };
        let mut rec = [0u8; RECORD_SIZE];
        for (i, r) in reqs.iter().enumerate() {
            let placeholder = Request {
                next_access: -1,
                ..*r
            };
            encode(&placeholder, &mut rec).map_err(|msg| TraceError::Record {
                path: self.path.clone(),
                record: self.count + i as u64,
                msg,
            })?;
            let records = self.temp.as_deref().unwrap_or(&self.path);
            w.write_all(&rec).map_err(|e| io_error(records, e))?;
        }
        self.count += reqs.len() as u64;
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<u64, TraceError> {
        let Some(w) = self.w.take() else {
            return Ok(self.count);
        };
        let records = self.records_path().to_path_buf();
        let mut file = w
            .into_inner()
            .map_err(|e| io_error(&records, e.into_error()))?;
        self.patch_next_access(&mut file)?;
        if self.temp.is_some() {
            file.seek(SeekFrom::Start(0))
                .map_err(|e| io_error(&records, e))?;
            let mut sink = Sink::create(&self.path, true)?;
            self.bytes.resize(PATCH_CHUNK * RECORD_SIZE, 0);
            loop {
                let got =
                    read_full(&mut file, &mut self.bytes).map_err(|e| io_error(&records, e))?;
                if got == 0 {
                    break;
                }
                sink.write_all(&self.bytes[..got])?;
            }
            sink.finish()?;
            drop(file);
            if let Some(temp) = self.temp.take() {
                std::fs::remove_file(&temp).map_err(|e| io_error(&temp, e))?;
            }
        }
        Ok(self.count)
    }
}

impl Drop for OracleWriter {
    fn drop(&mut self) {
        if let Some(temp) = self.temp.take() {
            self.w = None;
            let _ = std::fs::remove_file(temp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{compute_next_access, read_all};

    fn sample(n: u64) -> Vec<Request> {
        let mut reqs: Vec<Request> = (0..n)
            .map(|i| Request {
                time: i / 7,
                id: (i * 2654435761) % 113,
                size: 1 + (i * 31) % 100_000,
                next_access: -1,
            })
            .collect();
        compute_next_access(&mut reqs);
        reqs
    }

    #[test]
    fn vtime_conversion() {
        assert_eq!(vtime_to_index(-1), -1);
        assert_eq!(vtime_to_index(0), -1);
        assert_eq!(vtime_to_index(i64::MAX), -1);
        assert_eq!(vtime_to_index(1), 0);
        assert_eq!(index_to_vtime(0), 1);
        assert_eq!(index_to_vtime(-1), -1);
        for i in [0, 1, 99, 1 << 40] {
            assert_eq!(vtime_to_index(index_to_vtime(i)), i);
        }
    }

    #[test]
    fn roundtrip_plain_and_zstd() {
        let dir = tempfile::tempdir().unwrap();
        let reqs = sample(50_000);
        for zstd in [false, true] {
            let path = dir.path().join(if zstd { "t.bin.zst" } else { "t.bin" });
            write(&path, &reqs, zstd).unwrap();
            let mut r = OracleReader::open(&path, zstd).unwrap();
            assert_eq!(read_all(&mut r).unwrap(), reqs);
        }
        // Compressed output really is compressed.
        let plain = std::fs::metadata(dir.path().join("t.bin")).unwrap().len();
        let zst = std::fs::metadata(dir.path().join("t.bin.zst"))
            .unwrap()
            .len();
        assert_eq!(plain, 50_000 * RECORD_SIZE as u64);
        assert!(zst < plain / 2, "{zst} vs {plain}");
    }

    #[test]
    fn stores_one_based_vtimes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.bin");
        let reqs = sample(3);
        let mut reqs = vec![reqs[0], reqs[1], reqs[0]];
        compute_next_access(&mut reqs);
        write(&path, &reqs, false).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let vt = |k: usize| i64::from_le_bytes(bytes[k * 24 + 16..k * 24 + 24].try_into().unwrap());
        assert_eq!((vt(0), vt(1), vt(2)), (3, -1, -1));
    }

    #[test]
    fn truncated_file_names_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let reqs = sample(10_000);
        for zstd in [false, true] {
            let path = dir.path().join("t.bin");
            let mut bytes = Vec::new();
            let mut rec = [0u8; RECORD_SIZE];
            for r in &reqs {
                encode(r, &mut rec).unwrap();
                bytes.extend_from_slice(&rec);
            }
            bytes.truncate(bytes.len() - 5);
            if zstd {
                bytes = zstd::encode_all(&bytes[..], 3).unwrap();
            }
            std::fs::write(&path, &bytes).unwrap();
            let mut r = OracleReader::open(&path, zstd).unwrap();
            let mut buf = Vec::new();
            let mut seen = 0;
            let err = loop {
                match r.read_batch(&mut buf, 4096) {
                    Ok(0) => panic!("no error for a truncated file"),
                    Ok(n) => seen += n,
                    Err(e) => break e,
                }
            };
            assert_eq!(seen, 8192);
            match err {
                TraceError::Record { record, msg, .. } => {
                    assert_eq!(record, 9_999);
                    assert!(msg.contains("truncated record: 19 of 24"), "{msg}");
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn corrupt_zstd_is_an_io_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.bin.zst");
        std::fs::write(&path, b"this is not zstd at all, not even close").unwrap();
        let mut r = OracleReader::open(&path, true).unwrap();
        match read_all(&mut r) {
            Err(TraceError::Io { path: p, .. }) => assert_eq!(p, path),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn out_of_range_fields_name_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let mut reqs = sample(10);
        reqs[7].size = 1 << 32;
        match write(&dir.path().join("a.bin"), &reqs, false) {
            Err(TraceError::Record { record: 7, msg, .. }) => assert!(msg.contains("size")),
            other => panic!("{other:?}"),
        }
        let mut w = Box::new(OracleWriter::create(&dir.path().join("b.bin"), false).unwrap());
        w.write_batch(&reqs[..5]).unwrap();
        reqs[6].time = 1 << 32;
        match w.write_batch(&reqs[5..]) {
            Err(TraceError::Record { record: 6, msg, .. }) => assert!(msg.contains("timestamp")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn streaming_writer_computes_next_access() {
        let dir = tempfile::tempdir().unwrap();
        // More than one patch chunk, and ids that recur across chunk boundaries.
        let want = sample(PATCH_CHUNK as u64 * 2 + 123);
        for zstd in [false, true] {
            let path = dir.path().join(if zstd { "s.bin.zst" } else { "s.bin" });
            let mut w = Box::new(OracleWriter::create(&path, zstd).unwrap());
            for chunk in want.chunks(10_000) {
                let blank: Vec<Request> = chunk
                    .iter()
                    .map(|r| Request {
                        next_access: 42,
                        ..*r
                    })
                    .collect();
                w.write_batch(&blank).unwrap();
            }
            assert_eq!(w.finish().unwrap(), want.len() as u64);
            let got = read_all(&mut OracleReader::open(&path, zstd).unwrap()).unwrap();
            assert_eq!(got, want);
            let leftovers: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().contains("ecdn-tmp"))
                .collect();
            assert!(leftovers.is_empty());
        }
        // An empty trace is an empty file.
        let path = dir.path().join("empty.bin.zst");
        let w = Box::new(OracleWriter::create(&path, true).unwrap());
        assert_eq!(w.finish().unwrap(), 0);
        assert!(read_all(&mut OracleReader::open(&path, true).unwrap())
            .unwrap()
            .is_empty());
    }

    #[test]
    fn dropped_writer_removes_its_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.bin.zst");
        let mut w = OracleWriter::create(&path, true).unwrap();
        w.write_batch(&sample(100)).unwrap();
        drop(w);
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["d.bin.zst".to_string()]);
    }

    #[test]
    fn published_trace_matches_compute_next_access() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/data/cloudPhysicsIO.oracleGeneral.bin");
        let reqs = read_all(&mut OracleReader::open(&path, false).unwrap()).unwrap();
        assert_eq!(reqs.len(), 113_872);
        let mut recomputed = reqs.clone();
        compute_next_access(&mut recomputed);
        assert_eq!(reqs, recomputed);
    }
}
