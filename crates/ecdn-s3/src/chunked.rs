//! aws-chunked bodies (`Content-Encoding: aws-chunked`, `x-amz-content-sha256: STREAMING-…`):
//! the object's bytes in chunks, each `HEX-SIZE[;chunk-signature=SIG]\r\n` + bytes + `\r\n`,
//! ended by a chunk of size 0, then, with a trailer, headers such as
//! `x-amz-checksum-crc32:…` (and `x-amz-trailer-signature:…` when signed), then `\r\n`.
//!
//! [`Dechunker`] takes the body as it arrives and gives back the object's bytes. When the
//! chunks are signed, each chunk's signature is checked once the chunk is whole (the bytes
//! given back before it are the caller's to discard when an error follows: nothing is stored
//! until [`Dechunker::finish`] says the body was whole and every signature good). The
//! trailing headers are returned for the caller to check (the checksum of what it stored).

use sha2::{Digest, Sha256};

use crate::error::{Code, S3Error};
use crate::sigv4::ChunkSigner;
use crate::text::hex;

/// The longest chunk header or trailer line taken.
const MAX_LINE: usize = 4096;
/// The most trailing headers taken.
const MAX_TRAILERS: usize = 16;

#[derive(Debug)]
enum State {
    /// Reading a chunk's header line.
    Header,
    /// Inside a chunk: bytes left, and its signature (if signed).
    Data {
        left: u64,
        signature: Option<String>,
    },
    /// The `\r\n` after a chunk's bytes.
    DataEnd {
        signature: Option<String>,
    },
    /// After the last chunk: trailing header lines until an empty one.
    Trailer,
    /// After the last chunk, without a trailer: the empty line that ends the body.
    Final,
    Done,
}

/// Decodes one aws-chunked body (see the module documentation).
#[derive(Debug)]
pub struct Dechunker {
    signer: Option<ChunkSigner>,
    trailer: bool,
    state: State,
    line: Vec<u8>,
    chunk: Sha256,
    trailers: Vec<(String, String)>,
    /// The trailer lines as sent, for their signature.
    trailer_text: Vec<u8>,
    /// The object bytes decoded so far.
    pub decoded: u64,
}

fn incomplete(why: impl Into<String>) -> S3Error {
    S3Error::new(Code::IncompleteBody, why)
}

impl Dechunker {
    /// A decoder checking chunk signatures with `signer` (none: unsigned chunks), expecting
    /// trailing headers when `trailer`.
    pub fn new(signer: Option<ChunkSigner>, trailer: bool) -> Dechunker {
        Dechunker {
            signer,
            trailer,
            state: State::Header,
            line: Vec::new(),
            chunk: Sha256::new(),
            trailers: Vec::new(),
            trailer_text: Vec::new(),
            decoded: 0,
        }
    }

    /// Takes the next bytes of the body; the object's bytes among them are appended to `out`.
    pub fn push(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> Result<(), S3Error> {
        while !input.is_empty() {
            match &mut self.state {
                State::Data { left, signature } => {
                    let n = (*left).min(input.len() as u64) as usize;
                    let (data, rest) = input.split_at(n);
                    out.extend_from_slice(data);
                    if self.signer.is_some() {
                        self.chunk.update(data);
                    }
                    *left -= n as u64;
                    self.decoded += n as u64;
                    input = rest;
                    if *left == 0 {
                        let signature = signature.take();
                        self.state = State::DataEnd { signature };
                    }
                }
                State::Done => {
                    return Err(S3Error::new(
                        Code::InvalidRequest,
                        "bytes after the end of an aws-chunked body",
                    ))
                }
                _ => {
                    // A line: up to its `\n`.
                    let (line, rest, whole) = match input.iter().position(|&b| b == b'\n') {
                        Some(i) => (&input[..=i], &input[i + 1..], true),
                        None => (input, &input[input.len()..], false),
                    };
                    if self.line.len() + line.len() > MAX_LINE {
                        return Err(incomplete("an aws-chunked line is too long"));
                    }
                    self.line.extend_from_slice(line);
                    input = rest;
                    if whole {
                        let line = std::mem::take(&mut self.line);
                        self.line_done(&line)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// A whole line (with its `\r\n`) in a line state.
    fn line_done(&mut self, line: &[u8]) -> Result<(), S3Error> {
        let text = line
            .strip_suffix(b"\r\n")
            .ok_or_else(|| incomplete("an aws-chunked line does not end in CRLF"))?;
        let text =
            std::str::from_utf8(text).map_err(|_| incomplete("an aws-chunked line is not text"))?;
        match std::mem::replace(&mut self.state, State::Done) {
            State::Header => {
                let (size, ext) = text.split_once(';').unwrap_or((text, ""));
                let size = u64::from_str_radix(size.trim(), 16)
                    .map_err(|_| incomplete(format!("chunk size {size:?} is not hex")))?;
                let signature = match ext.split_once('=') {
                    Some(("chunk-signature", s)) => Some(s.to_string()),
                    None if ext.is_empty() => None,
                    _ => return Err(incomplete(format!("unknown chunk extension {ext:?}"))),
                };
                if self.signer.is_some() != signature.is_some() {
                    return Err(S3Error::new(
                        Code::SignatureDoesNotMatch,
                        "a chunk's signature is missing, or a signature came on unsigned chunks",
                    ));
                }
                self.state = if size == 0 {
                    self.check_chunk(signature.as_deref())?;
                    if self.trailer {
                        State::Trailer
                    } else {
                        State::Final
                    }
                } else {
                    State::Data {
                        left: size,
                        signature,
                    }
                };
            }
            State::DataEnd { signature } => {
                if !text.is_empty() {
                    return Err(incomplete("a chunk is longer than its size says"));
                }
                self.check_chunk(signature.as_deref())?;
                self.state = State::Header;
            }
            State::Final => {
                if !text.is_empty() {
                    return Err(incomplete("bytes after the last chunk"));
                }
                self.state = State::Done;
            }
            State::Trailer => {
                if text.is_empty() {
                    self.state = State::Done;
                    return Ok(());
                }
                let (name, value) = text
                    .split_once(':')
                    .ok_or_else(|| incomplete(format!("trailer line {text:?} has no ':'")))?;
                let name = name.trim().to_ascii_lowercase();
                if name == "x-amz-trailer-signature" {
                    let good = match &mut self.signer {
                        Some(s) => s.check_trailer(&self.trailer_text, value.trim()),
                        None => false,
                    };
                    if !good {
                        return Err(S3Error::new(
                            Code::SignatureDoesNotMatch,
                            "the trailer's signature does not match",
                        ));
                    }
                } else {
                    if self.trailers.len() == MAX_TRAILERS {
                        return Err(incomplete("too many trailing headers"));
                    }
                    self.trailer_text.extend_from_slice(name.as_bytes());
                    self.trailer_text.push(b':');
                    self.trailer_text.extend_from_slice(value.trim().as_bytes());
                    self.trailer_text.push(b'\n');
                    self.trailers.push((name, value.trim().to_string()));
                }
                self.state = State::Trailer;
            }
            // `push` reads lines only in the states above.
            State::Data { .. } | State::Done => {
                return Err(S3Error::new(
                    Code::InternalError,
                    "aws-chunked: not at a line",
                ))
            }
        }
        Ok(())
    }

    /// Checks the chunk just read against `signature` (signed bodies), and starts the next.
    fn check_chunk(&mut self, signature: Option<&str>) -> Result<(), S3Error> {
        let digest = std::mem::take(&mut self.chunk).finalize();
        if let (Some(s), Some(sig)) = (&mut self.signer, signature) {
            if !s.check_chunk_digest(&hex(&digest), sig) {
                return Err(S3Error::new(
                    Code::SignatureDoesNotMatch,
                    "a chunk's signature does not match",
                ));
            }
        }
        Ok(())
    }

    /// The body's end: whether it was whole, and its trailing headers (lower-case names).
    pub fn finish(self) -> Result<Vec<(String, String)>, S3Error> {
        match self.state {
            State::Done => Ok(self.trailers),
            _ => Err(incomplete(
                "the aws-chunked body ended before its last chunk",
            )),
        }
    }
}
