//! The ring's eviction rule, shared by the [`crate::Store`] and the simulator-facing
//! [`RingFifo`] so that both make the same decisions by construction.
//!
//! A ring of `capacity` bytes holds slots in write order, oldest first. Every slot has the
//! footprint of its entry. A slot is *live* (indexed by key, can be served) or a *ghost* (its
//! key was removed or replaced, its bytes still sit in the log). Inserting an entry of
//! footprint `f` pops slots from the tail while `used + f > capacity`, where `used` counts live
//! and ghost slots alike; popped live slots are reported as evictions, popped ghosts silently
//! vanish. Entries may straddle the physical end of the file, so there is no wrap-around waste.

use std::collections::VecDeque;
use std::hash::{BuildHasher, Hash};

use ecdn_policy::{Evicted, Eviction};
use hashbrown::HashTable;

/// The index's hasher: fixed, so a ring's layout does not depend on the process.
type IndexHasher = foldhash::fast::FixedState;

/// The top bit of [`Slot`]'s `off_live`: the slot is live. Ring offsets are below the
/// capacity, itself below 2^63.
const LIVE_BIT: u64 = 1 << 63;

#[derive(Clone, Debug)]
pub(crate) struct Slot<K> {
    pub key: K,
    /// Byte offset of the entry inside the ring area, `0 .. capacity`, and the live flag in
    /// the top bit: with a 16-byte key tag a slot takes 40 bytes, not 48.
    off_live: u64,
    pub footprint: u64,
    /// The entry's payload bytes (what a caller's policy counts it as, known without a read).
    pub payload: u64,
}

impl<K> Slot<K> {
    pub fn new(key: K, off: u64, footprint: u64, payload: u64, live: bool) -> Self {
        debug_assert!(off < LIVE_BIT);
        Slot {
            key,
            off_live: off | if live { LIVE_BIT } else { 0 },
            footprint,
            payload,
        }
    }

    /// Byte offset of the entry inside the ring area.
    pub fn off(&self) -> u64 {
        self.off_live & !LIVE_BIT
    }

    /// Live (indexed by key, can be served), or a ghost.
    pub fn live(&self) -> bool {
        self.off_live & LIVE_BIT != 0
    }

    fn set_ghost(&mut self) {
        self.off_live &= !LIVE_BIT;
    }
}

/// The FIFO ring bookkeeping. Slot `i` of `slots` has sequence number `first_seq + i`.
///
/// The index holds only sequence numbers (8 bytes and a control byte per live slot): a key
/// is hashed again from its slot, so it is kept once, in the slot.
#[derive(Clone, Debug)]
pub(crate) struct Ring<K: Hash + Eq + Clone> {
    capacity: u64,
    slots: VecDeque<Slot<K>>,
    first_seq: u64,
    /// The sequence number of every live slot, found by its key's hash.
    index: HashTable<u64>,
    hasher: IndexHasher,
    used: u64,
    live_bytes: u64,
    /// Where the next entry is written.
    head_off: u64,
}

impl<K: Hash + Eq + Clone> Ring<K> {
    pub fn new(capacity: u64) -> Self {
        Ring {
            capacity,
            slots: VecDeque::new(),
            first_seq: 1,
            index: HashTable::new(),
            hasher: IndexHasher::default(),
            used: 0,
            live_bytes: 0,
            head_off: 0,
        }
    }

    /// Rebuilds a ring from recovered slots (oldest first, contiguous in the ring, sum of
    /// footprints at most `capacity`). `first_seq` is the sequence number of `slots[0]` (or of
    /// the next write if `slots` is empty); `head_off` is where the next entry goes. A slot
    /// marked live whose key appears again in a later slot is turned into a ghost.
    pub fn restore(capacity: u64, first_seq: u64, head_off: u64, slots: Vec<Slot<K>>) -> Self {
        let mut ring = Ring {
            capacity,
            slots: slots.into(),
            first_seq,
            index: HashTable::new(),
            hasher: IndexHasher::default(),
            used: 0,
            live_bytes: 0,
            head_off,
        };
        let live = ring.slots.iter().filter(|s| s.live()).count();
        ring.index.reserve(live, |_| 0);
        // Newest first: a key's newest live slot is indexed, older ones become ghosts. One
        // probe of the table per slot (the start of a store of millions of entries is mostly
        // this loop).
        let Ring {
            slots,
            index,
            hasher,
            ..
        } = &mut ring;
        let mut used = 0;
        let mut live_bytes = 0;
        for i in (0..slots.len()).rev() {
            used += slots[i].footprint;
            if !slots[i].live() {
                continue;
            }
            let seq = first_seq + i as u64;
            let h = hasher.hash_one(&slots[i].key);
            let key = &slots[i].key;
            let found = index.entry(
                h,
                |&s| slots[(s - first_seq) as usize].key == *key,
                |&s| hasher.hash_one(&slots[(s - first_seq) as usize].key),
            );
            match found {
                hashbrown::hash_table::Entry::Occupied(_) => slots[i].set_ghost(),
                hashbrown::hash_table::Entry::Vacant(v) => {
                    v.insert(seq);
                    live_bytes += slots[i].footprint;
                }
            }
        }
        ring.used = used;
        ring.live_bytes = live_bytes;
        ring
    }

    fn hash(&self, key: &K) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Indexes the live slot `seq` (its key not indexed yet).
    fn index_insert(&mut self, seq: u64) {
        let (slots, first) = (&self.slots, self.first_seq);
        let h = self.hasher.hash_one(&slots[(seq - first) as usize].key);
        let hasher = &self.hasher;
        self.index.insert_unique(h, seq, |&s| {
            hasher.hash_one(&slots[(s - first) as usize].key)
        });
    }

    /// Drops slot `seq`, whose key is `key`, from the index.
    fn index_remove(&mut self, key: &K, seq: u64) {
        let h = self.hash(key);
        if let Ok(e) = self.index.find_entry(h, |&s| s == seq) {
            e.remove();
        }
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }
    /// Bytes of live and ghost slots.
    pub fn used(&self) -> u64 {
        self.used
    }
    /// Bytes of live slots.
    pub fn live_bytes(&self) -> u64 {
        self.live_bytes
    }
    /// Live entries.
    pub fn len(&self) -> usize {
        self.index.len()
    }
    /// Sequence number the next insert gets.
    pub fn next_seq(&self) -> u64 {
        self.first_seq + self.slots.len() as u64
    }

    /// The live slot of `key` and its sequence number.
    pub fn get(&self, key: &K) -> Option<(u64, &Slot<K>)> {
        let first = self.first_seq;
        let seq = *self.index.find(self.hash(key), |&s| {
            self.slots[(s - first) as usize].key == *key
        })?;
        Some((seq, &self.slots[(seq - first) as usize]))
    }

    /// The slot of sequence number `seq`, live or ghost, if the ring still holds it.
    pub fn slot(&self, seq: u64) -> Option<&Slot<K>> {
        self.slots
            .get(usize::try_from(seq.checked_sub(self.first_seq)?).ok()?)
    }

    /// Sequence number of the oldest slot (of the next write if the ring is empty), where the
    /// next entry is written, and the slots, oldest first: what a directory records.
    pub fn layout(&self) -> (u64, u64, &VecDeque<Slot<K>>) {
        (self.first_seq, self.head_off, &self.slots)
    }

    /// Live slots' sequence numbers, oldest first.
    pub fn live_seqs(&self) -> impl Iterator<Item = u64> + '_ {
        let first = self.first_seq;
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.live())
            .map(move |(i, _)| first + i as u64)
    }

    /// Live keys, oldest first.
    pub fn live_keys(&self) -> impl Iterator<Item = &K> + '_ {
        self.slots.iter().filter(|s| s.live()).map(|s| &s.key)
    }

    /// Turns the live slot of `key` into a ghost; returns its footprint.
    pub fn remove(&mut self, key: &K) -> Option<u64> {
        // One probe: found and taken out of the table at once (every put removes its key).
        let (first, h) = (self.first_seq, self.hasher.hash_one(key));
        let slots = &self.slots;
        let found = self
            .index
            .find_entry(h, |&s| slots[(s - first) as usize].key == *key);
        let (seq, _) = found.ok()?.remove();
        let slot = &mut self.slots[(seq - self.first_seq) as usize];
        slot.set_ghost();
        self.live_bytes -= slot.footprint;
        Some(slot.footprint)
    }

    /// Appends `key` (which must not be live) with `footprint <= capacity`, first popping the
    /// oldest slots until it fits; live popped slots are appended to `evicted`. Returns the new
    /// slot's sequence number and ring offset.
    pub fn insert(
        &mut self,
        key: K,
        footprint: u64,
        payload: u64,
        evicted: &mut Vec<(K, u64)>,
    ) -> (u64, u64) {
        debug_assert!(footprint <= self.capacity);
        debug_assert!(self.get(&key).is_none());
        while self.used + footprint > self.capacity {
            let Some(slot) = self.slots.front() else {
                break;
            };
            if slot.live() {
                let (key, seq) = (slot.key.clone(), self.first_seq);
                self.index_remove(&key, seq);
            }
            let slot = self.slots.pop_front().expect("a front slot");
            self.first_seq += 1;
            self.used -= slot.footprint;
            if slot.live() {
                self.live_bytes -= slot.footprint;
                evicted.push((slot.key, slot.footprint));
            }
        }
        let seq = self.next_seq();
        let off = self.head_off;
        self.slots
            .push_back(Slot::new(key, off, footprint, payload, true));
        self.index_insert(seq);
        self.used += footprint;
        self.live_bytes += footprint;
        self.head_off = if self.capacity == 0 {
            0
        } else {
            (off + footprint) % self.capacity
        };
        (seq, off)
    }

    pub fn heap_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot<K>>() + self.index.allocation_size()
    }
}

/// The store's eviction rule as an [`Eviction`] policy over `u64` ids, for the simulator.
///
/// Feed it what the store is fed: `insert(id, footprint(..))` for every put and `remove(id)`
/// for every removal or replaced version, and it evicts exactly the entries the store evicts,
/// in the same order. It differs from [`ecdn_policy::eviction::Fifo`] in one way only: a
/// removed entry (a purge, or the old version of an object written again) keeps occupying its
/// footprint until the FIFO reaches it, because a log cannot reuse bytes in its middle. Hence
/// [`Eviction::used`] counts those ghost bytes too. With no removals the two are identical.
#[derive(Clone, Debug)]
pub struct RingFifo {
    ring: Ring<u64>,
}

impl RingFifo {
    pub fn new(capacity: u64) -> Self {
        RingFifo {
            ring: Ring::new(capacity),
        }
    }

    /// Bytes of live entries (`used()` minus ghost bytes).
    pub fn live_bytes(&self) -> u64 {
        self.ring.live_bytes()
    }

    /// Live ids, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.ring.live_keys().copied()
    }
}

impl Eviction for RingFifo {
    fn name(&self) -> &'static str {
        "ring-fifo"
    }
    fn capacity(&self) -> u64 {
        self.ring.capacity()
    }
    fn used(&self) -> u64 {
        self.ring.used()
    }
    fn len(&self) -> usize {
        self.ring.len()
    }
    fn peek(&self, id: u64) -> Option<u64> {
        self.ring.get(&id).map(|(_, s)| s.footprint)
    }
    fn touch(&mut self, id: u64, _now: u64, _evicted: &mut Vec<Evicted>) -> Option<u64> {
        self.peek(id)
    }
    fn insert(&mut self, id: u64, size: u64, _now: u64, evicted: &mut Vec<Evicted>) {
        let mut ev = Vec::new();
        // A contract breach (size > capacity) is clamped rather than trusted: the ring still
        // empties itself, as Fifo does.
        self.ring
            .insert(id, size.min(self.ring.capacity()), size, &mut ev);
        evicted.extend(ev.into_iter().map(|(id, size)| Evicted { id, size }));
    }
    fn remove(&mut self, id: u64) -> Option<u64> {
        self.ring.remove(&id)
    }
    fn clone_box(&self) -> Box<dyn Eviction> {
        Box::new(self.clone())
    }
    fn heap_bytes(&self) -> usize {
        self.ring.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ecdn_policy::eviction::Fifo;

    fn ins(p: &mut dyn Eviction, id: u64, size: u64) -> Vec<u64> {
        let mut ev = Vec::new();
        p.insert(id, size, 0, &mut ev);
        ev.into_iter().map(|e| e.id).collect()
    }

    #[test]
    fn ghosts_hold_bytes_until_reached() {
        let mut r = RingFifo::new(10);
        assert!(ins(&mut r, 1, 4).is_empty());
        assert!(ins(&mut r, 2, 4).is_empty());
        assert_eq!(r.remove(1), Some(4));
        assert_eq!(r.used(), 8);
        assert_eq!(r.live_bytes(), 4);
        assert_eq!(r.len(), 1);
        // Needs 4 more: the ghost of 1 is popped silently, nothing is reported.
        assert!(ins(&mut r, 3, 4).is_empty());
        assert_eq!(r.used(), 8);
        assert_eq!(ins(&mut r, 4, 4), vec![2]);
        assert_eq!(r.iter().collect::<Vec<_>>(), vec![3, 4]);
    }

    #[test]
    fn equals_fifo_without_removals() {
        let mut r = RingFifo::new(1000);
        let mut f = Fifo::new(1000);
        let mut x = 12345u64;
        for id in 0..2000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let size = 1 + (x >> 33) % 300;
            assert_eq!(ins(&mut r, id, size), ins(&mut f, id, size));
            assert_eq!(r.used(), f.used());
        }
    }
}
