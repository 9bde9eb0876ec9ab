//! Taking entries out of the index: a caller's eviction (by key, tag or sequence number, which
//! writes nothing), a removal that must survive a crash (a tombstone written through `O_DSYNC`,
//! then the index entry dropped), and a corrupt entry found on read.

use super::*;

impl Store {
    /// Drops `key` from the index if its entry is still the one with sequence number `seq`
    /// (one that [`Store::lookup`] or [`Store::read_payload`] found corrupt); a newer version
    /// is kept.
    pub fn drop_corrupt(&mut self, key: &EntryKey, seq: u64) {
        self.drop_seq(key.tag(), seq);
    }

    /// Drops the entry with sequence number `seq` from the index if it is still live (one
    /// that [`Store::open_seq`] found corrupt, or that its caller's policy evicted), without
    /// writing anything, as [`Store::evict`] does; whether it was.
    pub fn evict_seq(&mut self, seq: u64) -> bool {
        match self.ring.slot(seq).filter(|s| s.live()) {
            Some(slot) => self.drop_seq(slot.key, seq),
            None => false,
        }
    }

    fn drop_seq(&mut self, tag: KeyTag, seq: u64) -> bool {
        let live = self.ring.get(&tag).is_some_and(|(s, _)| s == seq);
        if live {
            self.ring.remove(&tag);
        }
        live
    }

    /// Drops `key` from the index without writing anything (its bytes stay in the ring as a
    /// ghost until the FIFO reaches them); whether it was present. Unlike [`Store::remove`]
    /// this is not durable: after a restart the entry is found again. For a caller whose own
    /// policy decided the eviction (a cluster node's piece policy), where finding a valid
    /// entry again after a crash is harmless.
    /// (By tag, without reading: should another key share `key`'s tag, a 64-bit hash
    /// collision, its entry goes instead, which a cache may lose.)
    pub fn evict(&mut self, key: &EntryKey) -> bool {
        self.evict_tag(&key.tag())
    }

    /// [`Store::evict`] of the entry whose key has tag `tag`.
    pub fn evict_tag(&mut self, tag: &KeyTag) -> bool {
        self.ring.remove(tag).is_some()
    }

    /// Removes `key`, durably: marks its entry dead on disk (the tombstone: the 4 magic bytes
    /// of its header) and returns only once that write is on stable storage, so no crash,
    /// `kill -9` or power loss after the return can bring the entry back. The entry's bytes
    /// stay in the ring as a ghost until the FIFO reaches them.
    ///
    /// * `Ok(true)`: it was present, and is now removed for good.
    /// * `Ok(false)`: it was not present (nothing is written).
    /// * `Err(_)`: the tombstone could not be written or made durable. The index is left as
    ///   it was (the entry stays present, so a retry tries again and does not answer "not
    ///   present"), and the caller must report the removal as failed. If the write reached
    ///   the page cache but not the disk, a later read of the entry finds the dead magic and
    ///   reports it corrupt, so it is not served by this process either.
    ///
    /// Cost: one synchronous write of one block (the write and a device cache flush: a median
    /// of 2.4 to 3.9 ms, p99 8 ms, on the project's virtual ext4 disk, see `benches/remove.rs`;
    /// a put stays in the page cache, tens of µs), nothing for an absent key. A caller
    /// that keeps the store behind a read-write lock can hold only the read lock during that
    /// wait: [`Store::tombstone`] then [`Store::forget`] do the same in two steps.
    pub fn remove(&mut self, key: &EntryKey) -> Result<bool, StoreError> {
        match self.tombstone(key)? {
            Some(t) => {
                self.forget(t);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// The slow half of [`Store::remove`], through a shared reference: durably marks the live
    /// entry of `key` dead on disk (returning once the write is on stable storage) and
    /// returns what [`Store::forget`] needs to drop it from the index; `Ok(None)` if `key` is
    /// not present. From the return on, the entry is never served: reading it reports it
    /// corrupt (its header's magic is dead), and no restart brings it back. `Err` as for
    /// [`Store::remove`] (the index unchanged).
    pub fn tombstone(&self, key: &EntryKey) -> Result<Option<Tombstone>, StoreError> {
        let mut t = self.tombstone_tag(&key.tag())?;
        if let Some(t) = &mut t {
            t.key = Some(key.clone());
        }
        Ok(t)
    }

    /// [`Store::tombstone`] of the live entry whose key has tag `tag`, for a caller that keeps
    /// tags, not keys (a cluster node's piece policy): `Ok(None)` when there is none.
    pub fn tombstone_tag(&self, tag: &KeyTag) -> Result<Option<Tombstone>, StoreError> {
        let Some((seq, slot)) = self.ring.get(tag) else {
            return Ok(None);
        };
        // `off` is aligned and align >= 64, so the 4 magic bytes never wrap. Written through
        // the O_DSYNC descriptor: the write returns once the block is on stable storage.
        self.write_ring_through(&self.dsync, slot.off(), &MAGIC_DEAD.to_le_bytes())?;
        Ok(Some(Tombstone {
            key: None,
            tag: *tag,
            seq,
        }))
    }

    /// Drops a tombstoned entry from the index, unless a newer version of its key was put
    /// since [`Store::tombstone`] (that one is kept).
    pub fn forget(&mut self, t: Tombstone) {
        self.drop_seq(t.tag, t.seq);
    }
}
