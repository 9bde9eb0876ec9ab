//! The directory: the ring's index saved beside it, so a start reads the index and the entries
//! written after it instead of the whole ring.
//!
//! # What it borrows from Traffic Server, and where it differs
//!
//! Traffic Server keeps its cache directory (10 bytes an entry: a tag of the key's hash, the
//! offset, an approximate size, flags) in memory, writes it back every
//! `proxy.config.cache.dir.sync_frequency` seconds (60) and at shutdown, and at start reads it
//! instead of the content; what was written after the last sync is found by reading the span
//! from the directory's write position on. Two copies (A and B) with a serial number at head
//! and foot let it tell a torn directory from a whole one.
//!
//! Here the directory is a file beside the ring (`<ring>.dir`), written whole into a temporary
//! file, flushed, and renamed over the old one: the rename is atomic, so the file is always a
//! whole directory, the previous one or the new one (the filesystem plays the A/B copies). A
//! checksum over the header and another over the slots (repeated at the foot) still catch a
//! torn or damaged file. An entry costs 24 bytes on disk (the [`KeyTag`], a live flag, the
//! footprint in units of the ring's align and the bytes of it that are not payload, 4 bytes
//! each — the store refuses an entry that would not fit them: one over 2^32 aligns, or with over
//! 4 GiB of key, metadata and block table; offsets follow from the footprints, since the ring's
//! slots are back to back). The payload's length is there so that a caller's policy can count every
//! entry the start found without reading one ([`Store::live_seqs`]: a cluster node registers
//! its pieces from it).
//! Before the directory is written the ring is flushed (`fdatasync`), so the directory never
//! names an entry the disk does not hold.
//!
//! # Start
//!
//! [`Store::open`] loads the directory when it exists and matches the ring (magic, version,
//! both checksums, the superblock's align, capacity and store id), then **rolls forward**:
//! from the directory's head it reads the entries written after it, header by header, each
//! with the next sequence number, as a put would have made them (the FIFO pops what each one
//! overwrote). The walk ends at the first header that is not this ring's or is older than the
//! log's newest entry; a newer one there means the ring went around past the directory since
//! it was saved (then the directory is no use: a scan). Last it reads the header of the newest slot the directory named (if the ring still holds it): it must
//! carry that slot's sequence number and footprint. Whatever does not hold (no directory, a
//! torn or foreign one, one from another format of the ring, one the ring does not match, an
//! entry written after it whose key cannot be read) falls back to the full scan, which needs
//! nothing but the ring; the store says which start it made ([`Store::started`]).
//!
//! What a directory cannot know, and why that serves no wrong byte:
//! * an entry removed after it was written: removals write a tombstone into the entry's header
//!   (`O_DSYNC`), and every open checks the header, so the entry is found dead on first read
//!   and dropped ([`crate::Opened::Corrupt`]);
//! * an entry evicted by its caller's policy after it (an eviction writes nothing): it comes
//!   back live, as it does after a scan;
//! * payload bytes: every read verifies its blocks' checksums, as always.

use super::*;

/// The directory file's magic.
pub const DIR_MAGIC: [u8; 8] = *b"ECDNDIR\0";
/// The directory format this build writes and reads.
pub const DIR_VERSION: u32 = 2;
/// Bytes of the directory's header.
pub const DIR_HEADER_LEN: usize = 64;
/// Bytes per slot.
pub const DIR_SLOT_LEN: usize = 24;
/// Bytes of the foot: the slots' checksum and the header's again.
pub const DIR_FOOT_LEN: usize = 8;

const LIVE: u8 = 1;

/// Whether an entry of footprint `footprint` and `payload` payload bytes in a ring aligned to
/// `align` fits a directory slot: its footprint at most 2^32 − 1 aligns, at most 2^32 − 1 bytes
/// of it not payload ([`Store::put`] refuses any other).
pub(crate) fn fits_a_slot(align: u32, footprint: u64, payload: u64) -> bool {
    footprint / u64::from(align.max(1)) <= u64::from(u32::MAX)
        && footprint.saturating_sub(payload) <= u64::from(u32::MAX)
}

/// A slot's footprint in aligns and its bytes besides the payload, as [`fits_a_slot`] says
/// fit. An entry of a ring written by an earlier build that does not is saturated: the start
/// then finds the directory's slots do not match the ring, and scans.
fn slot_sizes(align: u32, footprint: u64, payload: u64) -> (u32, u32) {
    let units = footprint / u64::from(align.max(1));
    let rest = footprint.saturating_sub(payload);
    (
        u32::try_from(units).unwrap_or(u32::MAX),
        u32::try_from(rest).unwrap_or(u32::MAX),
    )
}

/// One slot of a directory: an entry (live) or a ghost, oldest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirSlot {
    pub tag: KeyTag,
    pub footprint: u64,
    /// Payload bytes (at most the footprint).
    pub payload: u64,
    pub live: bool,
}

/// A decoded directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Directory {
    pub align: u32,
    pub capacity: u64,
    pub store_id: u64,
    /// Sequence number of `slots[0]` (of the next write if there are no slots).
    pub first_seq: u64,
    /// Ring offset of the next write.
    pub head_off: u64,
    pub slots: Vec<DirSlot>,
}

use format::{le16, le32, le64};

impl Directory {
    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(DIR_HEADER_LEN + self.slots.len() * DIR_SLOT_LEN + DIR_FOOT_LEN);
        out.extend_from_slice(&DIR_MAGIC);
        out.extend_from_slice(&DIR_VERSION.to_le_bytes());
        out.extend_from_slice(&self.align.to_le_bytes());
        out.extend_from_slice(&self.capacity.to_le_bytes());
        out.extend_from_slice(&self.store_id.to_le_bytes());
        out.extend_from_slice(&self.first_seq.to_le_bytes());
        out.extend_from_slice(&self.head_off.to_le_bytes());
        out.extend_from_slice(&(self.slots.len() as u64).to_le_bytes());
        out.extend_from_slice(&[0u8; 4]);
        let head_crc = crc32c(&out[..60]);
        out.extend_from_slice(&head_crc.to_le_bytes());
        for s in &self.slots {
            out.extend_from_slice(&s.tag.hash.to_le_bytes());
            out.extend_from_slice(&s.tag.sub_chunk.to_le_bytes());
            out.extend_from_slice(&s.tag.chunk.to_le_bytes());
            out.push(s.tag.kind);
            out.push(if s.live { LIVE } else { 0 });
            let (units, rest) = slot_sizes(self.align, s.footprint, s.payload);
            out.extend_from_slice(&units.to_le_bytes());
            out.extend_from_slice(&rest.to_le_bytes());
        }
        let slots_crc = crc32c(&out[DIR_HEADER_LEN..]);
        out.extend_from_slice(&slots_crc.to_le_bytes());
        out.extend_from_slice(&head_crc.to_le_bytes());
        out
    }

    /// Decodes and checks a directory file: its magic, version, checksums and lengths, and
    /// that its slots fit a ring of its capacity (each footprint a non-zero multiple of its
    /// align, their sum at most the capacity, the head inside the ring and aligned). The
    /// message says what failed.
    pub fn decode(b: &[u8]) -> Result<Directory, String> {
        let (head, body) = DirHead::decode(b)?;
        let mut slots = Vec::with_capacity(body.len() / DIR_SLOT_LEN);
        let mut total = 0u64;
        for (i, s) in body.chunks_exact(DIR_SLOT_LEN).enumerate() {
            let slot = head.slot(i, s)?;
            total = total.saturating_add(slot.footprint);
            if total > head.capacity {
                return Err("slots hold more than the capacity".into());
            }
            slots.push(slot);
        }
        Ok(Directory {
            align: head.align,
            capacity: head.capacity,
            store_id: head.store_id,
            first_seq: head.first_seq,
            head_off: head.head_off,
            slots,
        })
    }
}

/// A directory's header, checked, without its slots (see [`DirHead::decode`]).
struct DirHead {
    align: u32,
    capacity: u64,
    store_id: u64,
    first_seq: u64,
    head_off: u64,
}

impl DirHead {
    /// The header of directory file `b`, checked, and the bytes of its slots, whose checksum
    /// and length are checked (each slot's fields are checked by [`DirHead::slot`]).
    fn decode(b: &[u8]) -> Result<(DirHead, &[u8]), String> {
        if b.len() < DIR_HEADER_LEN + DIR_FOOT_LEN {
            return Err(format!("{} bytes is too short for a directory", b.len()));
        }
        if b[..8] != DIR_MAGIC {
            return Err("not a directory (bad magic)".into());
        }
        let head_crc = le32(b, 60);
        if crc32c(&b[..60]) != head_crc {
            return Err("header checksum mismatch".into());
        }
        let version = le32(b, 8);
        if version != DIR_VERSION {
            return Err(format!(
                "directory format {version}, this build reads {DIR_VERSION}"
            ));
        }
        let head = DirHead {
            align: le32(b, 12),
            capacity: le64(b, 16),
            store_id: le64(b, 24),
            first_seq: le64(b, 32),
            head_off: le64(b, 40),
        };
        let count = le64(b, 48);
        let align = head.align;
        if !align.is_power_of_two() || !(MIN_ALIGN..=MAX_ALIGN).contains(&align) {
            return Err(format!("align {align} is not a valid one"));
        }
        let a = u64::from(align);
        let (capacity, head_off) = (head.capacity, head.head_off);
        if capacity == 0
            || capacity > i64::MAX as u64
            || !capacity.is_multiple_of(a)
            || head_off >= capacity
            || !head_off.is_multiple_of(a)
        {
            return Err(format!(
                "capacity {capacity} or head {head_off} does not fit align {align}"
            ));
        }
        let body = b.len() - DIR_HEADER_LEN - DIR_FOOT_LEN;
        if !body.is_multiple_of(DIR_SLOT_LEN) || (body / DIR_SLOT_LEN) as u64 != count {
            return Err(format!(
                "{count} slots in the header, {body} bytes of slots (torn?)"
            ));
        }
        let foot = b.len() - DIR_FOOT_LEN;
        if le32(b, foot + 4) != head_crc {
            return Err("foot does not match the header (torn?)".into());
        }
        if crc32c(&b[DIR_HEADER_LEN..foot]) != le32(b, foot) {
            return Err("slots checksum mismatch".into());
        }
        if head.first_seq.checked_add(count).is_none() {
            return Err("sequence numbers overflow".into());
        }
        Ok((head, &b[DIR_HEADER_LEN..foot]))
    }

    /// Slot `i`, from its bytes `s`.
    fn slot(&self, i: usize, s: &[u8]) -> Result<DirSlot, String> {
        let (kind, flags) = (s[14], s[15]);
        let footprint = u64::from(le32(s, 16)) * u64::from(self.align);
        let payload = footprint.wrapping_sub(u64::from(le32(s, 20)));
        if kind != KIND_OBJECT && kind != KIND_CHUNK {
            return Err(format!("slot {i}: kind {kind}"));
        }
        if flags & !LIVE != 0 {
            return Err(format!("slot {i}: flags {flags:#x}"));
        }
        if footprint == 0 || !footprint.is_multiple_of(u64::from(self.align)) {
            return Err(format!("slot {i}: footprint {footprint}"));
        }
        if payload >= footprint {
            let rest = le32(s, 20);
            return Err(format!(
                "slot {i}: {rest} bytes besides the payload of a footprint of {footprint}"
            ));
        }
        Ok(DirSlot {
            tag: KeyTag {
                hash: le64(s, 0),
                sub_chunk: le32(s, 8),
                chunk: le16(s, 12),
                kind,
            },
            footprint,
            payload,
            live: flags & LIVE != 0,
        })
    }
}

/// How a store started ([`Store::started`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Started {
    /// A new or unformatted file: formatted, empty.
    Formatted,
    /// From the directory, and the entries written after it.
    Directory {
        /// Slots the directory named.
        slots: u64,
        /// Entries written after it, read from the ring.
        rolled_forward: u64,
    },
    /// From a scan of the whole ring; why the directory was not used.
    Scan { reason: String },
}

impl std::fmt::Display for Started {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Started::Formatted => write!(f, "formatted (empty)"),
            Started::Directory {
                slots,
                rolled_forward,
            } => write!(
                f,
                "from its directory ({slots} slots) and {rolled_forward} entries written after it"
            ),
            Started::Scan { reason } => write!(f, "from a scan of the whole ring ({reason})"),
        }
    }
}

/// Removes the file at `path` (if there is one) and flushes its folder, so that no crash
/// brings it back.
pub(crate) fn remove_durably(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        r => r?,
    }
    match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(parent) => File::open(parent)?.sync_all(),
        None => Ok(()),
    }
}

/// The path of the directory of the ring at `ring`: `<ring>.dir`.
pub fn directory_path(ring: &Path) -> PathBuf {
    let mut p = ring.as_os_str().to_owned();
    p.push(".dir");
    PathBuf::from(p)
}

/// A directory taken from a store ([`Store::directory`]), to be saved without holding the
/// store: [`DirectoryWriter::save`].
pub struct DirectoryWriter {
    /// The ring file (a second descriptor), flushed before the directory is written.
    ring: File,
    path: PathBuf,
    bytes: Vec<u8>,
    /// Slots it names.
    pub slots: u64,
    /// The sequence number of the first entry written after it.
    next_seq: u64,
}

impl DirectoryWriter {
    /// Flushes the ring, then writes the directory into `<dir>.tmp`, flushes it, renames it
    /// over the directory and flushes the folder: after a crash at any point the directory
    /// file is the old one or the new one, each naming only entries on disk.
    pub fn save(&self) -> Result<(), StoreError> {
        let io = |op: &'static str| {
            let path = self.path.clone();
            move |source| StoreError::Io { op, path, source }
        };
        self.ring.sync_data().map_err(io("sync the ring before"))?;
        let mut tmp = self.path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let mut f = File::create(&tmp).map_err(io("create"))?;
        std::io::Write::write_all(&mut f, &self.bytes).map_err(io("write"))?;
        f.sync_all().map_err(io("sync"))?;
        drop(f);
        std::fs::rename(&tmp, &self.path).map_err(io("rename"))?;
        if let Some(parent) = self.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            File::open(parent)
                .and_then(|d| d.sync_all())
                .map_err(io("sync the folder of"))?;
        }
        Ok(())
    }
}

impl Store {
    /// How this store started: formatted, from its directory, or from a scan (and why).
    pub fn started(&self) -> &Started {
        &self.started
    }

    /// The directory of the ring as it is now, ready to be saved with
    /// [`DirectoryWriter::save`] (which flushes the ring first and may take a while: the
    /// store need not be held meanwhile). `None` for a store without a directory (a block
    /// device).
    pub fn directory(&self) -> Result<Option<DirectoryWriter>, StoreError> {
        let Some(path) = self.directory.clone() else {
            return Ok(None);
        };
        let (first_seq, head_off, slots) = self.ring.layout();
        let dir = Directory {
            align: self.align,
            capacity: self.capacity,
            store_id: self.store_id,
            first_seq,
            head_off,
            slots: slots
                .iter()
                .map(|s| DirSlot {
                    tag: s.key,
                    footprint: s.footprint,
                    payload: s.payload,
                    live: s.live(),
                })
                .collect(),
        };
        let ring = self.file.try_clone().map_err(self.io("clone"))?;
        Ok(Some(DirectoryWriter {
            ring,
            path,
            slots: dir.slots.len() as u64,
            next_seq: self.ring.next_seq(),
            bytes: dir.encode(),
        }))
    }

    /// Writes the directory now ([`Store::directory`], [`DirectoryWriter::save`] and
    /// [`Store::directory_saved`]).
    pub fn save_directory(&mut self) -> Result<(), StoreError> {
        match self.directory()? {
            Some(w) => {
                w.save()?;
                self.directory_saved(&w)
            }
            None => Ok(()),
        }
    }

    /// Records that `w` was saved: from now on the store keeps it usable, or removes it once
    /// the FIFO pops the first entry written after it (a start could no longer walk the log
    /// from its head).
    pub fn directory_saved(&mut self, w: &DirectoryWriter) -> Result<(), StoreError> {
        self.directory_next = Some(w.next_seq);
        self.guard_directory()
    }

    /// A directory is usable while the first entry written after it is still in the ring: a
    /// start walks the log from there. Once the FIFO pops that entry (its bytes are about to
    /// be written over), the directory goes, before the write, and a start until the next
    /// save scans. Called by every put.
    pub(crate) fn guard_directory(&mut self) -> Result<(), StoreError> {
        let (Some(next), Some(path)) = (self.directory_next, &self.directory) else {
            return Ok(());
        };
        let (first, _, _) = self.ring.layout();
        if first <= next {
            return Ok(());
        }
        self.directory_next = None;
        remove_durably(path).map_err(self.io("remove the outdated directory"))
    }

    /// Rebuilds the ring from the directory and the entries written after it (see the module
    /// docs); `Err` with the reason to scan instead.
    pub(crate) fn start_from_directory(&mut self) -> Result<Started, String> {
        let path = self.directory.clone().ok_or("no directory for a device")?;
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err("no directory".into()),
            Err(e) => return Err(format!("reading {}: {e}", path.display())),
        };
        let (dir, body) = DirHead::decode(&bytes).map_err(|e| format!("directory: {e}"))?;
        if (dir.align, dir.capacity) != (self.align, self.capacity) {
            return Err("the directory is of a ring of another size".into());
        }
        if dir.store_id != self.store_id {
            return Err("the directory is of another ring (store id)".into());
        }
        let cap = self.capacity;
        // Straight into the ring's slots, newest first: offsets follow from the head
        // backwards, the slots lying back to back with the newest ending at the head.
        let count = body.len() / DIR_SLOT_LEN;
        let mut slots = Vec::with_capacity(count);
        let (mut end, mut total) = (dir.head_off, 0u64);
        for (i, s) in body.chunks_exact(DIR_SLOT_LEN).enumerate().rev() {
            let d = dir.slot(i, s).map_err(|e| format!("directory: {e}"))?;
            total = total.saturating_add(d.footprint);
            if total > cap {
                return Err("directory: slots hold more than the capacity".into());
            }
            let off = (end + cap - d.footprint % cap) % cap;
            slots.push(Slot::new(d.tag, off, d.footprint, d.payload, d.live));
            end = off;
        }
        drop(bytes);
        slots.reverse();
        let newest = slots
            .last()
            .map(|s| (dir.first_seq + slots.len() as u64 - 1, s.off()));
        let named = slots.len() as u64;
        self.ring = Ring::restore(cap, dir.first_seq, dir.head_off, slots);
        let rolled_forward = self.roll_forward()?;
        self.directory_next = Some(dir.first_seq + named);
        if let Some((seq, off)) = newest {
            if let Some(slot) = self.ring.slot(seq) {
                let mut head = [0u8; HEADER_LEN as usize];
                self.read_ring(off, &mut head).map_err(|e| e.to_string())?;
                let fits = Header::decode(&head).is_some_and(|(h, _)| {
                    h.seq == seq
                        && h.store_id == self.store_id
                        && h.footprint(self.align) == slot.footprint
                });
                if !fits {
                    return Err(format!(
                        "the ring does not hold the directory's newest entry (sequence {seq})"
                    ));
                }
            }
        }
        Ok(Started::Directory {
            slots: named,
            rolled_forward,
        })
    }

    /// Adds the entries written after the directory, from its head on (see the module docs);
    /// how many. `Err` when one of them cannot be read well enough to know its key.
    fn roll_forward(&mut self) -> Result<u64, String> {
        let cap = self.capacity;
        let (_, mut off, _) = self.ring.layout();
        let mut seq = self.ring.next_seq();
        let mut walked = 0u64;
        let mut added = 0;
        let mut ignored = Vec::new();
        loop {
            let mut head = [0u8; HEADER_LEN as usize];
            self.read_ring(off, &mut head).map_err(|e| e.to_string())?;
            let Some((h, live)) = Header::decode(&head) else {
                break;
            };
            if h.store_id != self.store_id || h.seq < seq {
                // The end of the log: what follows its newest entry is older, or not ours.
                break;
            }
            let raw = HEADER_LEN
                .checked_add(u64::from(h.key_len))
                .and_then(|x| x.checked_add(u64::from(h.meta_len)))
                .and_then(|x| x.checked_add(h.payload_len));
            if h.seq != seq || raw.is_none_or(|r| r > cap) {
                // A newer entry where the next one should be: the ring was written over more
                // than once around since the directory (or the log is damaged here).
                return Err(format!(
                    "sequence {} where {seq} was expected: the ring moved on past the directory",
                    h.seq
                ));
            }
            let fp = h.footprint(self.align);
            walked += fp;
            if walked > cap {
                return Err("the entries after the directory hold more than the ring".into());
            }
            let mut body = vec![0u8; h.prefix_len() as usize];
            self.read_ring((off + HEADER_LEN) % cap, &mut body)
                .map_err(|e| e.to_string())?;
            let kl = h.key_len as usize;
            let ml = h.meta_len as usize;
            let kb = &body[..kl];
            let ok = h.entry_crc_of(kb, &body[kl..kl + ml], &body[kl + ml..]) == h.entry_crc;
            if !ok && crc32c(kb) != h.key_hash {
                return Err(format!(
                    "an entry written after the directory (sequence {seq}) has no readable key"
                ));
            }
            let tag = EntryKey::from_parts(h.kind, kb.to_vec(), h.chunk, h.sub_chunk).tag();
            // As a put does: an older version of the key becomes a ghost, the FIFO pops what
            // the new entry overwrote. A dead or torn entry still takes its place.
            self.ring.remove(&tag);
            let (got, at) = self.ring.insert(tag, fp, h.payload_len, &mut ignored);
            ignored.clear();
            debug_assert_eq!((got, at), (seq, off));
            if !(live && ok) {
                self.ring.remove(&tag);
            }
            added += 1;
            seq += 1;
            off = (off + fp) % cap;
        }
        Ok(added)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_keeps_its_footprint_and_payload_in_eight_bytes_and_refuses_what_does_not_fit() {
        let slot = |footprint, payload| DirSlot {
            tag: EntryKey::object("k").tag(),
            footprint,
            payload,
            live: true,
        };
        let dir = Directory {
            align: 64,
            capacity: 1 << 40,
            store_id: 7,
            first_seq: 3,
            head_off: 0,
            slots: vec![slot(128, 1), slot(64 << 20, (64 << 20) - 4160), slot(64, 0)],
        };
        let b = dir.encode();
        assert_eq!(b.len(), DIR_HEADER_LEN + 3 * DIR_SLOT_LEN + DIR_FOOT_LEN);
        assert_eq!(Directory::decode(&b), Ok(dir));
        // What a slot cannot hold, the store does not take.
        assert!(fits_a_slot(64, 64 * u64::from(u32::MAX), 1 << 40));
        assert!(!fits_a_slot(64, 64 * (u64::from(u32::MAX) + 1), 1 << 40));
        assert!(!fits_a_slot(4096, 8 << 30, (8 << 30) - (5 << 30)));
        // A slot whose bytes besides the payload are none, or more than its footprint: refused.
        for rest in [0u32, 129] {
            let mut bad = Directory::decode(&b).unwrap().encode();
            let at = DIR_HEADER_LEN + 20;
            bad[at..at + 4].copy_from_slice(&rest.to_le_bytes());
            let n = bad.len();
            let crc = crc32c(&bad[DIR_HEADER_LEN..n - DIR_FOOT_LEN]);
            bad[n - DIR_FOOT_LEN..n - 4].copy_from_slice(&crc.to_le_bytes());
            let e = Directory::decode(&bad).unwrap_err();
            assert!(e.contains("besides the payload"), "{e}");
        }
    }
}
