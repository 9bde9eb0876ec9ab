//! libCacheSim's *oracleGeneral* binary format: 24-byte little-endian records
//! `u32 timestamp, u64 obj_id, u32 obj_size, i64 next_access_vtime`, optionally zstd-compressed.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crate::{Request, RequestReader, TraceError};

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
        let io = |source| TraceError::Io {
            path: path.to_path_buf(),
            source,
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
        let got = read_full(&mut self.inner, &mut self.bytes).map_err(|source| TraceError::Io {
            path: self.path.clone(),
            source,
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
                next_access: i64::from_le_bytes(rec[16..24].try_into().unwrap()),
            });
        }
        self.record += whole as u64;
        Ok(whole)
    }
}

/// Encodes one request as an oracleGeneral record. Fails if time or size does not fit in u32.
pub fn encode(req: &Request, out: &mut [u8; RECORD_SIZE]) -> Result<(), String> {
    let time = u32::try_from(req.time)
        .map_err(|_| format!("timestamp {} does not fit in u32", req.time))?;
    let size =
        u32::try_from(req.size).map_err(|_| format!("size {} does not fit in u32", req.size))?;
    out[0..4].copy_from_slice(&time.to_le_bytes());
    out[4..12].copy_from_slice(&req.id.to_le_bytes());
    out[12..16].copy_from_slice(&size.to_le_bytes());
    out[16..24].copy_from_slice(&req.next_access.to_le_bytes());
    Ok(())
}

/// Writes requests (whose `next_access` must already be filled, see
/// [`crate::compute_next_access`]) as oracleGeneral, zstd-compressed when `zstd` is set.
pub fn write(path: &Path, reqs: &[Request], zstd: bool) -> Result<(), TraceError> {
    let io = |source| TraceError::Io {
        path: path.to_path_buf(),
        source,
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
