//! A keyed min-priority index shared by the priority-based policies (GDSF, LFU-DA).
//!
//! Objects live in a `hashbrown::HashTable` (id, size, frequency, key, sequence number); the
//! order lives in a binary min-heap of `(key, seq, id)` with lazy deletion: re-keying an object
//! pushes a fresh heap entry and bumps its sequence number, so the old entry becomes stale and
//! is skipped when it surfaces. When stale entries outnumber live ones the heap is rebuilt from
//! the table, which keeps every operation amortized O(log n) and the heap at most about twice
//! the live size.
//!
//! Keys are `u64`s compared as unsigned integers (non-negative `f64`s keep their order when
//! compared by bit pattern, so GDSF stores `h.to_bits()`). Ties are broken by the sequence
//! number: the object whose key was set least recently goes first, which makes the order fully
//! deterministic.

use crate::list::hash;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use hashbrown::HashTable;

/// One cached object.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry {
    pub id: u64,
    pub size: u64,
    /// Requests seen while cached (1 on insertion).
    pub freq: u64,
    /// The eviction key; the minimum goes first.
    pub key: u64,
    /// When the key was last set (global counter); breaks key ties, older first.
    pub seq: u64,
}

type HeapItem = Reverse<(u64, u64, u64)>;

#[derive(Clone, Default)]
pub(crate) struct PriorityIndex {
    table: HashTable<Entry>,
    heap: BinaryHeap<HeapItem>,
    seq: u64,
    bytes: u64,
}

impl PriorityIndex {
    pub fn new() -> Self {
        Self::default()
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.table.len()
    }

    #[inline]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    #[inline]
    pub fn get(&self, id: u64) -> Option<&Entry> {
        self.table.find(hash(id), |e| e.id == id)
    }

    /// Inserts an absent object with frequency 1 and `key`.
    #[inline]
    pub fn insert(&mut self, id: u64, size: u64, key: u64) {
        self.insert_with_freq(id, size, 1, key)
    }

    /// Inserts an absent object with frequency `freq` and `key`.
    #[inline]
    pub fn insert_with_freq(&mut self, id: u64, size: u64, freq: u64, key: u64) {
        debug_assert!(self.get(id).is_none());
        self.seq += 1;
        let seq = self.seq;
        self.table.insert_unique(
            hash(id),
            Entry {
                id,
                size,
                freq,
                key,
                seq,
            },
            |e| hash(e.id),
        );
        self.bytes += size;
        self.push_heap(key, seq, id);
    }

    /// A hit: increments the frequency, sets the key to `rekey(&entry)` (which sees the new
    /// frequency) and returns the size; `None` and no change if absent.
    #[inline]
    pub fn hit(&mut self, id: u64, rekey: impl FnOnce(&Entry) -> u64) -> Option<u64> {
        let e = self.table.find_mut(hash(id), |e| e.id == id)?;
        self.seq += 1;
        e.freq += 1;
        e.key = rekey(e);
        e.seq = self.seq;
        let (key, seq, size) = (e.key, e.seq, e.size);
        self.push_heap(key, seq, id);
        Some(size)
    }

    #[inline]
    fn push_heap(&mut self, key: u64, seq: u64, id: u64) {
        if self.heap.len() >= 2 * self.table.len() + 32 {
            self.rebuild();
        }
        self.heap.push(Reverse((key, seq, id)));
    }

    /// Drops stale heap entries by rebuilding the heap from the live objects.
    fn rebuild(&mut self) {
        let mut items = std::mem::take(&mut self.heap).into_vec();
        items.clear();
        items.extend(self.table.iter().map(|e| Reverse((e.key, e.seq, e.id))));
        self.heap = BinaryHeap::from(items);
    }

    #[inline]
    fn is_live(&self, seq: u64, id: u64) -> bool {
        self.get(id).is_some_and(|e| e.seq == seq)
    }

    /// Removes and returns the object with the smallest `(key, seq)`.
    #[inline]
    pub fn pop_min(&mut self) -> Option<Entry> {
        while let Some(Reverse((_, seq, id))) = self.heap.pop() {
            if self.is_live(seq, id) {
                return self.remove(id);
            }
        }
        None
    }

    /// Removes `id`; its heap entries become stale.
    #[inline]
    pub fn remove(&mut self, id: u64) -> Option<Entry> {
        let e = self.table.find_entry(hash(id), |e| e.id == id).ok()?;
        let (e, _) = e.remove();
        self.bytes -= e.size;
        if self.table.is_empty() {
            self.heap.clear();
        }
        Some(e)
    }

    /// Live objects in eviction order (first victim first). O(n log n); for tests and reports.
    #[allow(dead_code)]
    pub fn in_order(&self) -> Vec<Entry> {
        let mut v: Vec<Entry> = self.table.iter().copied().collect();
        v.sort_unstable_by_key(|e| (e.key, e.seq));
        v
    }

    pub fn heap_bytes(&self) -> usize {
        self.table.capacity() * (std::mem::size_of::<Entry>() + 1)
            + self.heap.capacity() * std::mem::size_of::<HeapItem>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_key_then_seq_order_and_skips_stale() {
        let mut p = PriorityIndex::new();
        p.insert(1, 10, 5);
        p.insert(2, 20, 3);
        p.insert(3, 30, 5);
        assert_eq!(p.bytes(), 60);
        // Re-key 2 above everything: its old entry is stale.
        assert_eq!(p.hit(2, |e| e.key + 10 * e.freq), Some(20));
        assert_eq!(p.get(2).unwrap().freq, 2);
        assert_eq!(p.get(2).unwrap().key, 23);
        assert_eq!(p.pop_min().unwrap().id, 1);
        assert_eq!(p.remove(3).unwrap().size, 30);
        assert_eq!(p.pop_min().unwrap().id, 2);
        assert!(p.pop_min().is_none());
        assert_eq!(p.bytes(), 0);
        assert_eq!(p.hit(9, |_| 0), None);
    }

    #[test]
    fn pops_in_order_under_mixed_operations() {
        let mut p = PriorityIndex::new();
        let mut x = 7u64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..5000 {
            let id = rnd() % 64;
            match rnd() % 4 {
                0 if p.get(id).is_none() => p.insert(id, 1 + rnd() % 10, rnd() % 100),
                1 => {
                    let delta = rnd() % 7;
                    p.hit(id, |e| (e.key + delta).saturating_sub(3));
                }
                2 => {
                    p.remove(id);
                }
                _ => {
                    let want = p.in_order().first().map(|e| e.id);
                    assert_eq!(p.pop_min().map(|e| e.id), want);
                }
            }
            assert!(p.heap.len() <= 2 * p.len() + 33);
        }
        let live = p.in_order();
        assert_eq!(p.bytes(), live.iter().map(|e| e.size).sum::<u64>());
        let popped: Vec<u64> = std::iter::from_fn(|| p.pop_min().map(|e| e.id)).collect();
        assert_eq!(popped, live.iter().map(|e| e.id).collect::<Vec<_>>());
    }

    #[test]
    fn heap_stays_bounded_under_many_hits() {
        let mut p = PriorityIndex::new();
        for id in 0..10 {
            p.insert(id, 1, id);
        }
        for i in 0..10_000u64 {
            p.hit(i % 10, |e| e.key + 1);
        }
        assert!(p.heap.len() <= 2 * p.len() + 33);
        let order: Vec<u64> = std::iter::from_fn(|| p.pop_min().map(|e| e.key)).collect();
        assert!(order.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(order.len(), 10);
    }
}
