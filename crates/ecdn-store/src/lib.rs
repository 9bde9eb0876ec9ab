//! The ecdn node's disk cache: a log-structured FIFO ring on a file (or a block device) of a
//! configured size.
//!
//! Entries carry a key ([`EntryKey`]: a whole object, or one (chunk, sub-chunk) of a coded
//! object), HTTP metadata (opaque bytes), a payload and checksums. The index lives in memory,
//! 16 bytes of [`KeyTag`] per entry instead of its key (the key is on disk beside the data and
//! compared on every open), and is saved beside the ring as a [`directory`], which
//! [`Store::open`] reads with the entries written after it; without a usable directory it
//! rebuilds the index by scanning the whole ring. A torn or corrupt entry is dropped and
//! never served: opening an entry verifies its header, key, metadata and block table, and
//! every payload read verifies the checksum of each 64 KiB block it touches, so a byte range
//! (or a stream, a batch of blocks at a time) costs only the blocks it reads.
//!
//! Payloads are read either as a verified copy ([`Store::read_payload`]) or, for bytes that
//! are about to be sent and dropped, mapped from the page cache with their blocks verified as
//! they are consumed ([`Store::read_payload_shared`], [`MappedPayload`], [`BlockVerifier`]):
//! a disk hit then costs one copy (the socket's) and one checksum pass over bytes already in
//! the CPU cache. Mapped reads stay correct while the ring overwrites their bytes
//! (copy-on-overwrite; see [`MappedPayload`]). A hot range's mapping, reused from the store's
//! cache of recent ones, is locked in memory, and its blocks are checked once while it lives
//! ([`BlockVerifier::skipped`]): a hot disk hit then costs its socket copy alone.
//!
//! # Eviction: the simulator's FIFO over footprints
//!
//! Each entry occupies its [`footprint`] in the ring: `64`-byte header + key + metadata +
//! block table (4 bytes per 64 KiB payload block) + payload, rounded up to the store's alignment (`align`, a power of two from 64 B to 1 MiB;
//! default [`DEFAULT_ALIGN`] = 4 KiB, one page). The ring area is exactly `capacity` bytes
//! (a multiple of `align`), and an entry may **straddle its end** (the write and read simply
//! wrap to ring offset 0), so wrap-around wastes nothing: the bytes the ring holds are
//! exactly the sum of the footprints between tail and head.
//!
//! A put of footprint `f` first pops the oldest entries while `used + f > capacity`, then
//! appends. That is [`ecdn_policy::eviction::Fifo`]'s rule, and for a sequence of puts of
//! distinct keys the store evicts exactly what `Fifo::new(capacity)` evicts when fed
//! `(key, footprint)`, in the same order (tested by a property test).
//!
//! One thing a log cannot do is give back bytes in its middle: a removed entry, or the old
//! version of a key written again, stays in the ring as a *ghost* that still counts in
//! [`Store::used`] until the FIFO reaches it; it then leaves silently (it is not reported as an
//! eviction). Plain `Fifo` frees such bytes at once, so the simulator-visible rule is
//! [`RingFifo`], an [`ecdn_policy::Eviction`] in this crate: feed it `insert(id, footprint)` for
//! each put and `remove(id)` for each removal or replaced version (which is what
//! `ecdn_policy::Cache` does on a new version) and it evicts the same entries in the same order
//! as the store. The store itself makes its decisions with the same code (`ring::Ring`).
//! Equivalently, in terms of the plain simulator FIFO: the store evicts what `Fifo` evicts when
//! fed every *write* under a fresh id (e.g. the entry's sequence number) and never told about
//! removals, minus the writes that were already removed or replaced (the property test checks
//! the store against both formulations, across restarts).
//!
//! ```
//! use ecdn_store::{EntryKey, Store, StoreConfig};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let mut store = Store::open(StoreConfig::new(dir.path().join("disk.ring"), 64 << 20)).unwrap();
//! let key = EntryKey::chunk("/video.mp4", 2, 0); // chunk 2, sub-chunk 0 of a coded object
//! let out = store.put(&key, b"content-type: video/mp4", b"...bytes...").unwrap();
//! assert_eq!(out.footprint, 4096);
//! assert!(out.evicted.is_empty());
//! assert_eq!(store.get(&key).unwrap().unwrap().payload, b"...bytes...");
//! ```
//!
//! # FORMAT
//!
//! All integers little-endian. The file is `align + capacity` bytes:
//!
//! * **Superblock** (offset 0, one aligned block, zero-padded): `"ECDNSTOR"`, format version
//!   u32 (= 2; a file of another version is refused with a clear error), align u32, capacity u64, store id u64 (random, chosen at format time), CRC-32C
//!   of the preceding 32 bytes. Opening with another align or capacity is an error.
//! * **Ring area** (offset `align`, `capacity` bytes): entries back to back in write order,
//!   each starting at an aligned ring offset, possibly wrapping past the end to offset 0.
//!
//! Entry header (64 bytes):
//!
//! | offset | field |
//! |---|---|
//! | 0 | magic u32: `"ECEN"` live, `"ECDD"` removed (the only bytes a removal rewrites) |
//! | 4 | format version u8 (= 2) |
//! | 5 | kind u8: 0 whole object, 1 chunk of a coded object |
//! | 6 | header length u16 (= 64) |
//! | 8 | key length u32 |
//! | 12 | metadata length u32 |
//! | 16 | payload length u64 |
//! | 24 | sequence number u64 (+1 per write, never reused; gives FIFO order after wrap) |
//! | 32 | store id u64 (from the superblock; entries of another store are ignored) |
//! | 40 | sub-chunk index u32 (0 for objects) |
//! | 44 | chunk index u16 (0 for objects) |
//! | 46 | block shift u8: payload blocks are `1 << shift` bytes (16 = 64 KiB; 12..=24 valid) |
//! | 47 | reserved u8 (0) |
//! | 48 | key hash u32: CRC-32C of the key bytes |
//! | 52 | reserved u32 (0) |
//! | 56 | entry checksum u32: CRC-32C over header bytes 4..56, key, metadata and block table |
//! | 60 | header checksum u32: CRC-32C over header bytes 4..60 |
//!
//! then the key, the metadata, the **block table** (for each `1 << shift`-byte block of the
//! payload, the last one possibly shorter, its CRC-32C as u32), the payload, and padding up to
//! the footprint (whatever bytes were there: no aligned offset falls inside it). Checksums are
//! CRC-32C (Castagnoli, the iSCSI/ext4 one; computed by carry-less-multiply folding with AVX-512
//! VPCLMULQDQ, the SSE4.2 instruction, or our own tables, whichever the CPU allows). None covers
//! the magic, so a removal flips the magic to "dead" without rewriting anything else.
//!
//! # Restart
//!
//! [`Store::open`] first tries the [`directory`] (see there: it checks the directory against
//! the ring and rolls forward the entries written after it). Without a usable one, it scans:
//! it reads the ring area and, at every aligned offset, accepts a header whose
//! magic, version, header checksum and store id are valid. The one with the highest sequence
//! number is the newest write; the log is then walked backwards: the predecessor of an entry
//! with sequence `s` at offset `o` is the header with sequence `s - 1` that ends exactly at `o`,
//! and the walk stops before the total footprint would exceed `capacity` (an entry the FIFO
//! popped always fails that test, so the rebuilt ring — ghosts included — equals the one before
//! the restart). The header, key, metadata and block table of each entry of the chain are then
//! read (not the payload): it is live if its magic is live, its entry checksum matches and no later entry in the chain has the same key (later versions
//! win; a later *corrupt* entry with the same key hash also hides older ones, so a stale version
//! is never resurrected). Others become ghosts. A torn last write either has no valid header
//! (it is not in the chain), fails its entry checksum (a ghost), or has a payload block that
//! fails its checksum when read (then it is dropped at that read); none is ever served. A header
//! destroyed in the middle of the log ends the walk there: older entries are dropped.
//!
//! # Ownership, space and durability
//!
//! * **One owner.** [`Store::open`] takes an exclusive `flock` on the file (and opens a block
//!   device with `O_EXCL`, which also refuses a mounted one) before reading or writing
//!   anything; a second opener, in another process or the same one, gets
//!   [`StoreError::InUse`] at once. The mapped read path relies on it: no other writer
//!   changes the bytes behind a [`MappedPayload`]. The lock lives as long as the open file:
//!   dropping the store closes it (a [`MappedPayload`] a reader still holds then becomes a
//!   private copy of its bytes, so it keeps neither the file nor its lock), but a child
//!   process holds a copy of the descriptor from its fork to its exec (descriptors are
//!   close-on-exec), so a process that spawns children may briefly see `InUse` when it reopens
//!   a store it has just dropped.
//! * **Unformatted.** A new or empty file, or a file or device whose first aligned block (the
//!   superblock's place) is all zeros, is formatted: a crash during the first format (after the
//!   file was sized, before the superblock was written) leaves such a file, and the next open
//!   formats it again. Anything else that is not one of our superblocks is refused
//!   ([`StoreError::NotAStore`]), so the store never overwrites a file or device it did not
//!   write.
//! * **Space.** On a regular file the whole `align + capacity` bytes are allocated when the
//!   store opens (`fallocate`, after checking the filesystem's free space), so a store larger
//!   than the free space fails at open ([`StoreError::NoSpace`]) instead of failing puts later.
//!   A filesystem without `fallocate` keeps a sparse file, as before. A block device is used
//!   as it is: its size must hold `align + capacity` ([`StoreError::DeviceTooSmall`]).
//! * **Durability.** A put is written to the page cache and reaches the disk with the kernel's
//!   writeback (or [`Store::sync`]); a crash may lose recent puts, never serve a torn one (see
//!   "Restart"). A removal is durable when [`Store::remove`] returns: its tombstone is written
//!   through an `O_DSYNC` descriptor, so a removed entry is never resurrected by a crash.
//! * **Errors.** Every failed operation returns an error; [`Store::io_errors`] counts the I/O
//!   errors met since open, for the node's metrics.

/// The directory: the index saved beside the ring, read at start instead of the ring.
pub mod directory;
/// The on-disk layout: entry headers and the superblock (public for fuzzing their decoders).
pub mod format;
mod mapped;
mod open;
mod read;
mod remove;
mod ring;

use std::collections::{HashSet, VecDeque};
use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Seek, SeekFrom};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use directory::{directory_path, DirectoryWriter, Started};
pub use format::{crc32c, BLOCK_SHIFT, DEFAULT_ALIGN, HEADER_LEN, MAX_ALIGN, MIN_ALIGN};
pub use mapped::MappedPayload;
pub use ring::RingFifo;

use format::{Header, Superblock, KIND_CHUNK, KIND_OBJECT, MAGIC_DEAD};
use ring::{Ring, Slot};

/// The bytes an entry with this key, metadata and payload occupies in a ring aligned to
/// `align`: `HEADER_LEN + key + meta + payload`, rounded up to `align`. This is the size the
/// FIFO (and a simulator using [`RingFifo`]) sees.
pub fn footprint(align: u32, key: &EntryKey, meta_len: usize, payload_len: usize) -> u64 {
    format::footprint(align, key.bytes().len(), meta_len, payload_len)
}

/// Where the store lives and how big it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreConfig {
    /// A regular file (created if missing) or a block device.
    pub path: PathBuf,
    /// Bytes of the ring area; a non-zero multiple of `align`. The file is `align + capacity`
    /// bytes (one aligned block of superblock first).
    pub capacity: u64,
    /// Entry alignment: a power of two in [`MIN_ALIGN`]..=[`MAX_ALIGN`].
    pub align: u32,
}

impl StoreConfig {
    /// A config with the default 4 KiB alignment.
    pub fn new(path: impl Into<PathBuf>, capacity: u64) -> Self {
        StoreConfig {
            path: path.into(),
            capacity,
            align: DEFAULT_ALIGN,
        }
    }

    fn validate(&self) -> Result<(), StoreError> {
        let a = self.align;
        if !a.is_power_of_two() || !(MIN_ALIGN..=MAX_ALIGN).contains(&a) {
            return Err(StoreError::BadConfig(format!(
                "align {a} is not a power of two in {MIN_ALIGN}..={MAX_ALIGN}"
            )));
        }
        if self.capacity == 0 || self.capacity & (u64::from(a) - 1) != 0 {
            return Err(StoreError::BadConfig(format!(
                "capacity {} is not a non-zero multiple of align {a}",
                self.capacity
            )));
        }
        if self.capacity.checked_add(u64::from(a)).is_none() || self.capacity > i64::MAX as u64 {
            return Err(StoreError::BadConfig(format!(
                "capacity {} is too large",
                self.capacity
            )));
        }
        Ok(())
    }
}

/// What an entry is: a whole object, or one sub-chunk of one chunk of a coded object.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntryKey {
    Object {
        key: Vec<u8>,
    },
    Chunk {
        key: Vec<u8>,
        chunk: u16,
        sub_chunk: u32,
    },
}

impl EntryKey {
    pub fn object(key: impl Into<Vec<u8>>) -> Self {
        EntryKey::Object { key: key.into() }
    }

    pub fn chunk(key: impl Into<Vec<u8>>, chunk: u16, sub_chunk: u32) -> Self {
        EntryKey::Chunk {
            key: key.into(),
            chunk,
            sub_chunk,
        }
    }

    /// The cache key bytes.
    pub fn bytes(&self) -> &[u8] {
        match self {
            EntryKey::Object { key } | EntryKey::Chunk { key, .. } => key,
        }
    }

    fn kind(&self) -> (u8, u16, u32) {
        match self {
            EntryKey::Object { .. } => (KIND_OBJECT, 0, 0),
            EntryKey::Chunk {
                chunk, sub_chunk, ..
            } => (KIND_CHUNK, *chunk, *sub_chunk),
        }
    }

    /// The entry's identity in the store's index ([`KeyTag`]).
    pub fn tag(&self) -> KeyTag {
        let (kind, chunk, sub_chunk) = self.kind();
        KeyTag {
            hash: ecdn_trace::hash_id(self.bytes()),
            sub_chunk,
            chunk,
            kind,
        }
    }

    fn from_parts(kind: u8, key: Vec<u8>, chunk: u16, sub_chunk: u32) -> Self {
        if kind == KIND_CHUNK {
            EntryKey::chunk(key, chunk, sub_chunk)
        } else {
            EntryKey::Object { key }
        }
    }
}

/// An entry's identity in the store's index, in 16 bytes: the 64-bit FNV-1a hash of its key
/// (`ecdn_trace::hash_id`, which is also the simulator's object id, so a caller can name the
/// object without reading its key back) and which part of the object it holds. The full key
/// lives on disk beside the data and is compared on every open, so a lookup never serves
/// another key's bytes; two keys with one tag (a hash collision) replace each other in the
/// index like two versions of one key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyTag {
    /// `ecdn_trace::hash_id` of the key bytes.
    pub hash: u64,
    /// The sub-chunk index (0 for objects).
    pub sub_chunk: u32,
    /// The chunk index (0 for objects).
    pub chunk: u16,
    /// 0: a whole object, 1: a chunk of a coded object.
    pub kind: u8,
}

/// What [`Store::lookup`] found.
#[derive(Debug)]
pub enum Lookup {
    Hit(Entry),
    Miss,
    /// The entry failed its checks (never served); its sequence number, for
    /// [`Store::drop_corrupt`].
    Corrupt {
        seq: u64,
    },
}

/// What [`Store::open_entry`] found.
#[derive(Debug)]
pub enum Opened {
    Hit(EntryHandle),
    Miss,
    /// The entry's header, key, metadata or block table failed its checks (never served); its
    /// sequence number, for [`Store::drop_corrupt`].
    Corrupt {
        seq: u64,
    },
}

/// An entry whose header, key, metadata and block table were verified: read its payload, or
/// any byte range of it, with [`Store::read_payload`].
#[derive(Clone, Debug)]
pub struct EntryHandle {
    key: EntryKey,
    tag: KeyTag,
    seq: u64,
    /// Ring offset of the first payload byte.
    payload_off: u64,
    payload_len: u64,
    block_shift: u8,
    blocks: Vec<u32>,
    meta: Vec<u8>,
}

impl EntryHandle {
    /// The entry's metadata.
    pub fn meta(&self) -> &[u8] {
        &self.meta
    }

    pub fn payload_len(&self) -> u64 {
        self.payload_len
    }

    /// Bytes per payload block (each verified on its own).
    pub fn block_size(&self) -> u64 {
        1 << self.block_shift
    }

    /// The entry's sequence number.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    pub fn key(&self) -> &EntryKey {
        &self.key
    }

    /// For a payload byte `range`: the index of its first block, and the range rounded out to
    /// whole blocks (what must be read to verify it). An error if `range` is not inside the
    /// payload.
    fn block_span(&self, range: &Range<u64>) -> Result<(u64, u64, u64), StoreError> {
        if range.start > range.end || range.end > self.payload_len {
            return Err(StoreError::BadRange {
                start: range.start,
                end: range.end,
                len: self.payload_len,
            });
        }
        let shift = self.block_shift;
        let first = range.start >> shift;
        let end = (range.end.div_ceil(1 << shift) << shift).min(self.payload_len);
        Ok((first, first << shift, end))
    }
}

/// Fills `buf` from `file` at `offset` with `pread`, retrying short reads and `EINTR`.
fn read_exact_uninit(
    file: &File,
    mut buf: &mut [std::mem::MaybeUninit<u8>],
    mut offset: u64,
) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    while !buf.is_empty() {
        let off = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes; pread writes at most that
        // many and reports how many it wrote.
        let n = unsafe { libc::pread(file.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), off) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let n = n as usize;
        buf = &mut buf[n..];
        offset += n as u64;
    }
    Ok(())
}

/// The most bytes [`Store::read_payload_shared`] copies when it cannot map.
pub const SHARED_COPY_MAX: u64 = 1 << 20;

/// Payload bytes read by [`Store::read_payload_shared`]: mapped from the page cache when
/// possible (and verified as they are consumed), copied and verified otherwise.
#[derive(Debug)]
pub enum SharedPayload {
    Mapped(MappedBlocks),
    Owned(Vec<u8>),
}

/// A payload range mapped from the ring file ([`MappedPayload`], rounded out to whole
/// checksum blocks) with the checksums of its blocks, not yet verified: a [`BlockVerifier`]
/// clears it for use block by block. Verifying a block just before sending it leaves its bytes
/// in the CPU cache for the socket's copy, so the check costs almost nothing more than the
/// send; verifying everything first would stream the range through the cache twice.
#[derive(Debug)]
pub struct MappedBlocks {
    map: MappedPayload,
    verifier: BlockVerifier,
}

impl MappedBlocks {
    /// The mapping (to share, e.g. with `bytes::Bytes::from_owner`) and its verifier.
    pub fn into_parts(self) -> (MappedPayload, BlockVerifier) {
        (self.map, self.verifier)
    }

    /// Verifies every block and returns the requested bytes' range in the mapping, or `None`
    /// when a block fails its checksum.
    pub fn verify_all(self) -> Option<(MappedPayload, Range<usize>)> {
        let (map, mut v) = self.into_parts();
        let mut r = v.requested();
        r.end = r.start;
        while let Some(next) = v.next(&map, usize::MAX) {
            r.end = next.ok()?.end;
        }
        Some((map, r))
    }
}

/// Clears the blocks of a [`MappedBlocks`] mapping in order; see [`BlockVerifier::next`].
#[derive(Debug)]
pub struct BlockVerifier {
    crcs: Vec<u32>,
    shift: u8,
    /// The requested bytes, as offsets into the mapping.
    want: Range<usize>,
    /// Offset into the mapping of the first block not yet verified.
    next: usize,
    map_len: usize,
    /// The mapping's blocks that passed while its pages were locked: not checked again.
    marks: Arc<mapped::Marks>,
    /// Blocks cleared by their mark, without a checksum.
    skipped: usize,
}

/// A block of a mapped payload failed its checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadBlock;

impl BlockVerifier {
    /// The requested bytes, as a range of the mapping.
    pub fn requested(&self) -> Range<usize> {
        self.want.clone()
    }

    /// Whether every requested byte has been cleared.
    pub fn is_done(&self) -> bool {
        self.next >= self.want.end
    }

    /// Blocks cleared so far by an earlier check of the same locked mapping, without a
    /// checksum (see [`MappedPayload`]'s module documentation).
    pub fn skipped(&self) -> usize {
        self.skipped
    }

    /// Verifies the next whole blocks of `map` (the bytes of the [`MappedPayload`] this
    /// verifier came with), at least one and at most `max` bytes' worth when `max` covers a
    /// block, and returns the range of the mapping they clear (requested bytes only). `None`
    /// once all requested bytes were cleared; `Some(Err(BadBlock))` when a block fails (the
    /// entry must then be dropped, see [`Store::drop_corrupt`], and nothing more sent).
    pub fn next(&mut self, map: &[u8], max: usize) -> Option<Result<Range<usize>, BadBlock>> {
        assert_eq!(map.len(), self.map_len, "a verifier checks its own mapping");
        if self.is_done() {
            return None;
        }
        let block = 1usize << self.shift;
        let n = (max / block).max(1);
        let start = self.next;
        let end = start
            .saturating_add(n.saturating_mul(block))
            .min(self.map_len);
        // (Whether the pages were locked is read before the bytes are.)
        let locked = self.marks.locked();
        for (i, b) in map[start..end].chunks(block).enumerate() {
            let at = start / block + i;
            if self.marks.is_marked(at) {
                self.skipped += 1;
                continue;
            }
            if crc32c(b) != self.crcs[at] {
                self.next = self.map_len;
                return Some(Err(BadBlock));
            }
            self.marks.mark(at, locked);
        }
        self.next = end;
        Some(Ok(start.max(self.want.start)..end.min(self.want.end)))
    }
}

/// A stored entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub meta: Vec<u8>,
    pub payload: Vec<u8>,
}

/// What a [`Store::put`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PutOutcome {
    /// Sequence number of the new entry.
    pub seq: u64,
    /// Its footprint in the ring.
    pub footprint: u64,
    /// Live entries evicted to make room, oldest first, with their footprints. Ghosts
    /// (removed or replaced entries) that left the ring are not listed.
    pub evicted: Vec<(KeyTag, u64)>,
}

/// An entry durably marked dead by [`Store::tombstone`], still to be dropped from the index
/// with [`Store::forget`].
#[derive(Debug)]
#[must_use = "pass it to Store::forget"]
pub struct Tombstone {
    /// `None` from [`Store::tombstone_seq`] (the index keeps no keys).
    key: Option<EntryKey>,
    tag: KeyTag,
    seq: u64,
}

impl Tombstone {
    /// The key it was asked for by ([`Store::tombstone`]).
    pub fn key(&self) -> Option<&EntryKey> {
        self.key.as_ref()
    }
}

/// Where an entry sits in the file (see [`Store::locate`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    pub offset: u64,
    pub footprint: u64,
    pub seq: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{op} {}: {source}", .path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("bad store config: {0}")]
    BadConfig(String),
    #[error("{}: not an ecdn store: {reason}", .path.display())]
    NotAStore { path: PathBuf, reason: String },
    #[error(
        "{}: formatted with align {found_align} and capacity {found_capacity}, \
         but the config asks for align {align} and capacity {capacity}",
        .path.display()
    )]
    ConfigMismatch {
        path: PathBuf,
        found_align: u32,
        found_capacity: u64,
        align: u32,
        capacity: u64,
    },
    #[error(
        "{}: the device holds {size} bytes, a ring of {capacity} bytes needs {needed} with its \
         superblock block",
        .path.display()
    )]
    DeviceTooSmall {
        path: PathBuf,
        size: u64,
        needed: u64,
        /// The ring capacity asked for (`needed` minus the superblock's aligned block).
        capacity: u64,
    },
    /// Another open store (another process, or another [`Store`] in this one) holds the file,
    /// or the block device is mounted or opened exclusively by someone else.
    #[error("disk cache {} is in use by another process ({reason})", .path.display())]
    InUse { path: PathBuf, reason: &'static str },
    /// The filesystem cannot hold the store's file.
    #[error(
        "{}: the disk cache needs {needed} bytes on its filesystem, only {available} are free \
         (choose a smaller disk size, or free space)",
        .path.display()
    )]
    NoSpace {
        path: PathBuf,
        needed: u64,
        available: u64,
    },
    #[error("entry footprint {footprint} exceeds the ring capacity {capacity}")]
    TooLarge { footprint: u64, capacity: u64 },
    #[error("range {start}..{end} is not inside a payload of {len} bytes")]
    BadRange { start: u64, end: u64, len: u64 },
}

/// Bytes [`Store::open_entry`] reads at once from an entry's start: its header and the prefix
/// of entries of chunks up to about 5 MiB (a 16 MiB object's, K = 3), whose block checksums and
/// metadata take about 8 KiB.
const OPEN_READ: u64 = 16 << 10;

/// The disk store. See the crate documentation for the format and the eviction rule.
pub struct Store {
    file: File,
    path: PathBuf,
    align: u32,
    capacity: u64,
    store_id: u64,
    /// The same file opened `O_DSYNC`: removals are written through it.
    dsync: File,
    /// A block device (not sized or allocated by the store) rather than a regular file.
    device: bool,
    ring: Ring<KeyTag>,
    /// Where the directory is saved and read (`<path>.dir`; none for a block device).
    directory: Option<PathBuf>,
    /// How the store started.
    started: Started,
    /// The sequence number of the first entry written after the directory on disk, while
    /// that directory is usable (see [`Store::guard_directory`]).
    directory_next: Option<u64>,
    /// Live [`MappedPayload`]s, detached before the writer overwrites their bytes.
    maps: Arc<mapped::Mappings>,
    /// I/O errors met since open (see [`Store::io_errors`]).
    io_errors: AtomicU64,
}

impl Drop for Store {
    fn drop(&mut self) {
        self.maps.clear_cache();
        // A mapping refers to the open file, and with it to the file's lock: readers still
        // holding one get private copies of their bytes, so the lock goes with the store (a
        // reopen right after the drop is not refused). A copy that fails (the old bytes do not
        // read back) leaves that mapping, and the lock, until the reader drops it.
        let _ = self.maps.detach_overlapping(&self.file, 0, u64::MAX);
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.path)
            .field("align", &self.align)
            .field("capacity", &self.capacity)
            .field("len", &self.len())
            .field("used", &self.used())
            .finish()
    }
}

impl Store {
    /// Turns an I/O error of operation `op` into a [`StoreError`], counting it.
    fn io(&self, op: &'static str) -> impl FnOnce(io::Error) -> StoreError + '_ {
        move |source| {
            self.io_errors.fetch_add(1, Ordering::Relaxed);
            StoreError::Io {
                op,
                path: self.path.clone(),
                source,
            }
        }
    }

    /// Reads `buf.len() <= capacity` bytes at ring offset `off`, wrapping at the end.
    fn read_ring(&self, off: u64, buf: &mut [u8]) -> Result<(), StoreError> {
        let base = u64::from(self.align);
        let first = (buf.len() as u64).min(self.capacity - off) as usize;
        let (a, b) = buf.split_at_mut(first);
        self.file
            .read_exact_at(a, base + off)
            .map_err(self.io("read"))?;
        if !b.is_empty() {
            self.file.read_exact_at(b, base).map_err(self.io("read"))?;
        }
        Ok(())
    }

    /// Reads `len <= capacity` bytes at ring offset `off` into a new buffer, without zeroing
    /// it first (a disk hit is bounded by memory bandwidth: zeroing would cost a third pass).
    fn read_ring_new(&self, off: u64, len: u64) -> Result<Vec<u8>, StoreError> {
        let len = usize::try_from(len).map_err(|_| StoreError::TooLarge {
            footprint: len,
            capacity: self.capacity,
        })?;
        let mut buf = Vec::with_capacity(len);
        let base = u64::from(self.align);
        let first = (len as u64).min(self.capacity - off) as usize;
        read_exact_uninit(
            &self.file,
            &mut buf.spare_capacity_mut()[..first],
            base + off,
        )
        .map_err(self.io("read"))?;
        read_exact_uninit(&self.file, &mut buf.spare_capacity_mut()[first..len], base)
            .map_err(self.io("read"))?;
        // SAFETY: both reads above initialised their parts, `..first` and `first..len`, in full
        // (they return an error otherwise).
        unsafe { buf.set_len(len) };
        Ok(buf)
    }

    /// Writes `buf.len() <= capacity` bytes at ring offset `off`, wrapping at the end. Mapped
    /// payloads showing any of those bytes are detached first (copy-on-overwrite, see
    /// [`MappedPayload`]).
    fn write_ring(&self, off: u64, buf: &[u8]) -> Result<(), StoreError> {
        self.write_ring_through(&self.file, off, buf)
    }

    /// [`Store::write_ring`] through `file`: the store's file, or its `O_DSYNC` descriptor.
    fn write_ring_through(&self, file: &File, off: u64, buf: &[u8]) -> Result<(), StoreError> {
        let base = u64::from(self.align);
        let first = (buf.len() as u64).min(self.capacity - off) as usize;
        let (a, b) = buf.split_at(first);
        let detach = |start: u64, len: usize| {
            let end = start + len as u64;
            self.maps.uncache_overlapping(start, end);
            self.maps
                .detach_overlapping(&self.file, start, end)
                .map_err(self.io("detach a mapped read of"))
        };
        detach(base + off, a.len())?;
        if !b.is_empty() {
            detach(base, b.len())?;
        }
        file.write_all_at(a, base + off).map_err(self.io("write"))?;
        if !b.is_empty() {
            file.write_all_at(b, base).map_err(self.io("write"))?;
        }
        Ok(())
    }

    /// Writes an entry, evicting the oldest entries (FIFO over footprints) to make room. A live
    /// entry with the same key becomes a ghost (later versions win).
    pub fn put(
        &mut self,
        key: &EntryKey,
        meta: &[u8],
        payload: &[u8],
    ) -> Result<PutOutcome, StoreError> {
        let fp = footprint(self.align, key, meta.len(), payload.len());
        if fp > self.capacity
            || key.bytes().len() > u32::MAX as usize
            || meta.len() > u32::MAX as usize
            || !directory::fits_a_slot(self.align, fp, payload.len() as u64)
        {
            return Err(StoreError::TooLarge {
                footprint: fp,
                capacity: self.capacity,
            });
        }
        let (kind, chunk, sub_chunk) = key.kind();
        let kb = key.bytes();
        let tag = key.tag();
        self.ring.remove(&tag);
        let mut evicted = Vec::new();
        let (seq, off) = self
            .ring
            .insert(tag, fp, payload.len() as u64, &mut evicted);
        // Before the bytes are written: a directory whose log this write breaks goes first.
        if let Err(e) = self.guard_directory() {
            self.ring.remove(&tag);
            return Err(e);
        }
        let table = format::block_table(payload, BLOCK_SHIFT);
        let mut h = Header {
            kind,
            key_len: kb.len() as u32,
            meta_len: meta.len() as u32,
            payload_len: payload.len() as u64,
            seq,
            store_id: self.store_id,
            chunk,
            sub_chunk,
            key_hash: crc32c(kb),
            block_shift: BLOCK_SHIFT,
            entry_crc: 0,
        };
        h.entry_crc = h.entry_crc_of(kb, meta, &table);
        // Header, key, metadata and block table in one buffer, the payload written from where
        // it is (no copy); the padding up to the footprint is left as it was: no aligned offset
        // falls inside it, so it can never be mistaken for a header.
        let mut buf = vec![0u8; HEADER_LEN as usize];
        h.encode(&mut buf);
        for part in [kb, meta, &table] {
            buf.extend_from_slice(part);
        }
        let written = self
            .write_ring(off, &buf)
            .and_then(|()| self.write_ring((off + buf.len() as u64) % self.capacity, payload));
        if let Err(e) = written {
            // The slot keeps its place in the FIFO (its bytes may be half written) but is
            // never served.
            self.ring.remove(&tag);
            return Err(e);
        }
        Ok(PutOutcome {
            seq,
            footprint: fp,
            evicted,
        })
    }

    /// Where the live entry of `key` sits: byte offset in the file (superblock included),
    /// footprint and sequence number. The entry wraps to file offset `align` if
    /// `offset + footprint > align + capacity`.
    pub fn locate(&self, key: &EntryKey) -> Option<Location> {
        self.ring.get(&key.tag()).map(|(seq, s)| Location {
            offset: u64::from(self.align) + s.off(),
            footprint: s.footprint,
            seq,
        })
    }

    /// Whether an entry with `key`'s tag is indexed (without reading it: a key that shares
    /// its tag with an indexed one, a 64-bit hash collision, also answers `true`; a read of it
    /// finds the other key and misses).
    pub fn contains(&self, key: &EntryKey) -> bool {
        self.ring.get(&key.tag()).is_some()
    }

    /// Live entries.
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Ring bytes in use: footprints of live entries and of ghosts not yet reached by the FIFO.
    pub fn used(&self) -> u64 {
        self.ring.used()
    }

    /// Footprints of live entries only.
    pub fn live_bytes(&self) -> u64 {
        self.ring.live_bytes()
    }

    /// Bytes of the ring area.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    pub fn align(&self) -> u32 {
        self.align
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sequence number the next put gets.
    pub fn next_seq(&self) -> u64 {
        self.ring.next_seq()
    }

    /// Live entries' sequence numbers, tags and payload lengths, oldest first (the order in
    /// which the FIFO will evict them); open one with [`Store::open_seq`]. The index keeps no
    /// key: a key is read back from disk when its entry is opened.
    pub fn live_seqs(&self) -> impl Iterator<Item = (u64, KeyTag, u64)> + '_ {
        self.ring
            .live_seqs()
            .filter_map(|seq| self.ring.slot(seq).map(|s| (seq, s.key, s.payload)))
    }

    /// Heap bytes of the index (the ring's slots and the table of live entries).
    pub fn index_bytes(&self) -> usize {
        self.ring.heap_bytes()
    }

    /// Flushes written entries to stable storage.
    pub fn sync(&self) -> Result<(), StoreError> {
        self.file.sync_data().map_err(self.io("sync"))
    }

    /// I/O errors this store met since it was opened (each also returned to its caller as a
    /// [`StoreError::Io`]): reads, writes, syncs, mappings. Checksum failures are not I/O
    /// errors (they come back as [`Lookup::Corrupt`], [`Opened::Corrupt`] or `Ok(None)`), nor
    /// are a caller's mistakes ([`StoreError::TooLarge`], [`StoreError::BadRange`]).
    pub fn io_errors(&self) -> u64 {
        self.io_errors.load(Ordering::Relaxed)
    }

    /// Whether the store lives on a block device (rather than a regular file).
    pub fn is_device(&self) -> bool {
        self.device
    }
}
