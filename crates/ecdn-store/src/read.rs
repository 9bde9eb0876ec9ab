//! Reading entries: opening one (its header, key, metadata and block table verified), and
//! its payload or any range of it, every block it touches verified; copied or mapped from the
//! page cache.

use super::*;

impl Store {
    /// Opens the entry of `key`: reads and verifies its header, key, metadata and block table
    /// (not the payload; see [`Store::read_payload`]). A failed check is reported as
    /// [`Opened::Corrupt`] with the entry's sequence number, for [`Store::drop_corrupt`].
    /// Needs only a shared reference, so readers run concurrently behind a read lock.
    pub fn open_entry(&self, key: &EntryKey) -> Result<Opened, StoreError> {
        let Some((seq, _)) = self.ring.get(&key.tag()) else {
            return Ok(Opened::Miss);
        };
        self.open_slot(seq, Some(key))
    }

    /// Opens the live entry whose key has tag `tag`, its key read back from disk (and checked
    /// to hash to `tag`): [`Store::open_entry`] for a caller that keeps tags, not keys (a
    /// cluster node's piece policy); it compares the key itself.
    pub fn open_tag(&self, tag: &KeyTag) -> Result<Opened, StoreError> {
        let Some((seq, _)) = self.ring.get(tag) else {
            return Ok(Opened::Miss);
        };
        self.open_slot(seq, None)
    }

    /// Opens the entry with sequence number `seq` if the ring still holds it live (see
    /// [`Store::live_seqs`]), its key read back from disk: what [`Store::open_entry`] does
    /// for a key, for a caller that walks the store (a node registering what it holds at
    /// start).
    pub fn open_seq(&self, seq: u64) -> Result<Opened, StoreError> {
        self.open_slot(seq, None)
    }

    /// Opens live slot `seq`. With `want`, the entry must hold that key (its bytes compared:
    /// another key with the same tag, a hash collision, is a miss); without, the key read
    /// back must hash to the slot's tag.
    fn open_slot(&self, seq: u64, want: Option<&EntryKey>) -> Result<Opened, StoreError> {
        let Some(slot) = self.ring.slot(seq).filter(|s| s.live()) else {
            return Ok(Opened::Miss);
        };
        let (off, fp, tag) = (slot.off(), slot.footprint, slot.key);
        // The header and, in the same read, as much of the prefix (key, metadata, block
        // checksums) as [`OPEN_READ`] covers: one system call for most entries, not two.
        let mut head = vec![0u8; fp.clamp(HEADER_LEN, OPEN_READ) as usize];
        self.read_ring(off, &mut head)?;
        let corrupt = Ok(Opened::Corrupt { seq });
        let Some((h, true)) = Header::decode(&head[..HEADER_LEN as usize]) else {
            return corrupt;
        };
        if h.seq != seq
            || h.store_id != self.store_id
            || h.footprint(self.align) != fp
            || (h.kind, h.chunk, h.sub_chunk) != (tag.kind, tag.chunk, tag.sub_chunk)
        {
            return corrupt;
        }
        let end = (HEADER_LEN + h.prefix_len()) as usize;
        if head.len() < end {
            let have = head.len();
            head.resize(end, 0);
            self.read_ring((off + have as u64) % self.capacity, &mut head[have..])?;
        }
        let prefix = &head[HEADER_LEN as usize..end];
        let kl = h.key_len as usize;
        let ml = h.meta_len as usize;
        let (kb, rest) = prefix.split_at(kl);
        let (meta, table) = rest.split_at(ml);
        if h.entry_crc_of(kb, meta, table) != h.entry_crc {
            return corrupt;
        }
        let key = match want {
            Some(key) if key.bytes() != kb => return Ok(Opened::Miss),
            Some(key) => key.clone(),
            None if ecdn_trace::hash_id(kb) != tag.hash => return corrupt,
            None => EntryKey::from_parts(h.kind, kb.to_vec(), h.chunk, h.sub_chunk),
        };
        let blocks = table
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
            .collect();
        Ok(Opened::Hit(EntryHandle {
            key,
            tag,
            seq,
            payload_off: (off + HEADER_LEN + h.prefix_len()) % self.capacity,
            payload_len: h.payload_len,
            block_shift: h.block_shift,
            blocks,
            meta: meta.to_vec(),
        }))
    }

    /// Bytes `range` of an opened entry's payload, after verifying the checksum of every block
    /// the range touches. `Ok(None)` when the entry is no longer the live one (evicted or
    /// replaced since [`Store::open_entry`]) or a block fails its checksum; in the second case
    /// drop it with [`Store::drop_corrupt`] (which leaves a newer version alone). Under a
    /// read lock the writer cannot overwrite the entry while it is read.
    pub fn read_payload(
        &self,
        h: &EntryHandle,
        range: Range<u64>,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let (first, start, end) = h.block_span(&range)?;
        if self.ring.get(&h.tag).map(|(seq, _)| seq) != Some(h.seq) {
            return Ok(None);
        }
        if range.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let shift = h.block_shift;
        let mut buf = self.read_ring_new((h.payload_off + start) % self.capacity, end - start)?;
        for (i, block) in buf.chunks(1 << shift).enumerate() {
            if crc32c(block) != h.blocks[first as usize + i] {
                return Ok(None);
            }
        }
        buf.truncate((range.end - start) as usize);
        if range.start > start {
            buf.drain(..(range.start - start) as usize);
        }
        Ok(Some(buf))
    }

    /// Like [`Store::read_payload`], but without copying when it can: the bytes are mapped
    /// from the file ([`SharedPayload::Mapped`]: populated, resident, and safe to hold while
    /// the ring overwrites them, see [`MappedPayload`]) and **not yet verified**: use its
    /// [`BlockVerifier`] (or [`MappedBlocks::verify_all`]) before using them. Falls back to a
    /// verified copy ([`SharedPayload::Owned`]) for a range that wraps past the ring's end, or
    /// pages that could not be made resident; a copy covers only the first
    /// [`SHARED_COPY_MAX`] bytes of the range (read the rest with another call), so a caller
    /// streaming large ranges holds bounded memory either way. `Ok(None)` as for
    /// [`Store::read_payload`].
    pub fn read_payload_shared(
        &self,
        h: &EntryHandle,
        range: Range<u64>,
    ) -> Result<Option<SharedPayload>, StoreError> {
        let (first, start, end) = h.block_span(&range)?;
        let shift = h.block_shift;
        let off = (h.payload_off + start) % self.capacity;
        let live = self.ring.get(&h.tag).map(|(seq, _)| seq) == Some(h.seq);
        let copy = |s: &Self| {
            let end = range.end.min(range.start.saturating_add(SHARED_COPY_MAX));
            Ok(s.read_payload(h, range.start..end)?
                .map(SharedPayload::Owned))
        };
        if !live || range.is_empty() || off + (end - start) > self.capacity {
            return copy(self);
        }
        let len = usize::try_from(end - start).map_err(|_| StoreError::TooLarge {
            footprint: end - start,
            capacity: self.capacity,
        })?;
        let file_off = u64::from(self.align) + off;
        let last = end.div_ceil(1 << shift);
        let blocks = (last - first) as usize;
        let Some(map) = MappedPayload::map(&self.file, &self.maps, (file_off, len), h.seq, blocks)
            .map_err(self.io("map"))?
        else {
            return copy(self);
        };
        let verifier = BlockVerifier {
            crcs: h.blocks[first as usize..last as usize].to_vec(),
            shift,
            want: (range.start - start) as usize..(range.end - start) as usize,
            next: 0,
            map_len: len,
            marks: map.marks(),
            skipped: 0,
        };
        Ok(Some(SharedPayload::Mapped(MappedBlocks { map, verifier })))
    }

    /// [`MappedPayload`]s of this store held by readers (not counting the store's own cache
    /// of recently used mappings, which it reuses for the next read of the same range).
    pub fn mapped_reads(&self) -> usize {
        self.maps.in_use()
    }

    /// The entry for `key`, after verifying its header, entry checksum and every payload
    /// block. Like [`Store::get`] but through a shared reference, so several readers can read
    /// and verify entries at once (behind a read lock): a corrupt entry is reported, with its
    /// sequence number, instead of being dropped; drop it with [`Store::drop_corrupt`].
    pub fn lookup(&self, key: &EntryKey) -> Result<Lookup, StoreError> {
        let h = match self.open_entry(key)? {
            Opened::Hit(h) => h,
            Opened::Miss => return Ok(Lookup::Miss),
            Opened::Corrupt { seq } => return Ok(Lookup::Corrupt { seq }),
        };
        Ok(match self.read_payload(&h, 0..h.payload_len)? {
            Some(payload) => Lookup::Hit(Entry {
                meta: h.meta,
                payload,
            }),
            None => Lookup::Corrupt { seq: h.seq },
        })
    }

    /// The entry for `key`, after verifying all its checksums. A mismatch drops the entry from
    /// the index (it becomes a ghost) and returns `Ok(None)`.
    pub fn get(&mut self, key: &EntryKey) -> Result<Option<Entry>, StoreError> {
        match self.lookup(key)? {
            Lookup::Hit(e) => Ok(Some(e)),
            Lookup::Miss => Ok(None),
            Lookup::Corrupt { seq } => {
                self.drop_corrupt(key, seq);
                Ok(None)
            }
        }
    }

    /// Bytes `range` of the payload of `key` (`Ok(None)` if absent or corrupt; a corrupt entry
    /// is dropped). Only the blocks the range touches are read and verified.
    pub fn read_range(
        &mut self,
        key: &EntryKey,
        range: Range<u64>,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let h = match self.open_entry(key)? {
            Opened::Hit(h) => h,
            Opened::Miss => return Ok(None),
            Opened::Corrupt { seq } => {
                self.drop_corrupt(key, seq);
                return Ok(None);
            }
        };
        let out = self.read_payload(&h, range)?;
        if out.is_none() {
            self.drop_corrupt(key, h.seq);
        }
        Ok(out)
    }
}
