//! Segmented LRU with four segments (S4LRU), as described by Huang et al., "An analysis of
//! Facebook photo caching" (SOSP 2013) and used as a baseline by AdaptSize.
//!
//! The cache is split into segments 0..=3, each an LRU list with a byte share of about
//! `capacity / 4` (the shares sum to the capacity exactly). A missed object enters at the head
//! of segment 0. A hit in segment `i` moves the object to the head of segment `min(i + 1, 3)`.
//! When a segment holds more than its share, its tail objects are demoted to the head of the
//! segment below, cascading down; objects falling out of segment 0 leave the cache.
//!
//! Rules for what the textbook description leaves open:
//!
//! * **Objects larger than a share.** Shares are soft targets; only the total capacity is
//!   hard. A segment may exceed its share only while it holds a single object, so an object
//!   larger than `capacity / 4` (but at most `capacity`) is cached and promoted like any other,
//!   occupying its segment alone.
//! * **Evictions happen only on insertion.** A hit can push objects down into segment 0 but
//!   cannot report evictions ([`Eviction::touch`] has no eviction output), and it never changes
//!   the bytes held, so segment 0 may temporarily exceed its share after hits. Inserting an
//!   object of `size` first evicts segment 0's tail while segment 0 is non-empty and its bytes
//!   plus `size` exceed its share; then, if the total still does not fit (only possible when
//!   upper segments hold lone oversized objects), it evicts the tail of the lowest non-empty
//!   segment until `used + size <= capacity`.

use crate::list::hash;
use hashbrown::HashTable;

use crate::{Evicted, Eviction};

const NIL: u32 = u32::MAX;
/// Number of segments.
pub const SEGMENTS: usize = 4;

#[derive(Clone, Copy, Debug)]
struct Node {
    id: u64,
    size: u64,
    prev: u32,
    next: u32,
    seg: u8,
}

/// S4LRU: one slab of nodes threaded into four lists, one hash table for all of them.
#[derive(Clone)]
pub struct S4lru {
    capacity: u64,
    shares: [u64; SEGMENTS],
    nodes: Vec<Node>,
    free: u32,
    table: HashTable<u32>,
    head: [u32; SEGMENTS],
    tail: [u32; SEGMENTS],
    bytes: [u64; SEGMENTS],
    lens: [usize; SEGMENTS],
    used: u64,
}

impl S4lru {
    pub fn new(capacity: u64) -> Self {
        // capacity / 4 each; the remainder goes one byte each to the top segments.
        let r = capacity % SEGMENTS as u64;
        let shares =
            std::array::from_fn(|i| capacity / 4 + u64::from(i as u64 >= SEGMENTS as u64 - r));
        S4lru {
            capacity,
            shares,
            nodes: Vec::new(),
            free: NIL,
            table: HashTable::new(),
            head: [NIL; SEGMENTS],
            tail: [NIL; SEGMENTS],
            bytes: [0; SEGMENTS],
            lens: [0; SEGMENTS],
            used: 0,
        }
    }

    /// Byte share of each segment (they sum to the capacity).
    pub fn shares(&self) -> [u64; SEGMENTS] {
        self.shares
    }

    /// Bytes held by each segment.
    pub fn segment_bytes(&self) -> [u64; SEGMENTS] {
        self.bytes
    }

    /// The segment holding `id`, if cached.
    pub fn segment_of(&self, id: u64) -> Option<usize> {
        self.find(id).map(|i| self.nodes[i as usize].seg as usize)
    }

    /// Objects `(id, size)` of segment `seg`, from head to tail.
    pub fn iter_segment(&self, seg: usize) -> impl Iterator<Item = (u64, u64)> + '_ {
        let mut cur = self.head[seg];
        std::iter::from_fn(move || {
            if cur == NIL {
                return None;
            }
            let n = &self.nodes[cur as usize];
            cur = n.next;
            Some((n.id, n.size))
        })
    }

    #[inline]
    fn find(&self, id: u64) -> Option<u32> {
        let nodes = &self.nodes;
        self.table
            .find(hash(id), |&i| nodes[i as usize].id == id)
            .copied()
    }

    #[inline]
    fn unlink(&mut self, i: u32) {
        let Node {
            prev,
            next,
            seg,
            size,
            ..
        } = self.nodes[i as usize];
        let s = seg as usize;
        if prev != NIL {
            self.nodes[prev as usize].next = next;
        } else {
            self.head[s] = next;
        }
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        } else {
            self.tail[s] = prev;
        }
        self.bytes[s] -= size;
        self.lens[s] -= 1;
    }

    #[inline]
    fn link_head(&mut self, s: usize, i: u32) {
        let old = self.head[s];
        let size = {
            let n = &mut self.nodes[i as usize];
            n.prev = NIL;
            n.next = old;
            n.seg = s as u8;
            n.size
        };
        if old != NIL {
            self.nodes[old as usize].prev = i;
        } else {
            self.tail[s] = i;
        }
        self.head[s] = i;
        self.bytes[s] += size;
        self.lens[s] += 1;
    }

    /// Demotes tails from segment `top` down to segment 1 while a segment is over its share
    /// and holds more than one object.
    #[inline]
    fn cascade(&mut self, top: usize) {
        for s in (1..=top).rev() {
            while self.bytes[s] > self.shares[s] && self.lens[s] > 1 {
                let t = self.tail[s];
                self.unlink(t);
                self.link_head(s - 1, t);
            }
        }
    }

    /// Evicts the tail of segment `s` (non-empty).
    #[inline]
    fn evict_tail(&mut self, s: usize, evicted: &mut Vec<Evicted>) {
        let i = self.tail[s];
        debug_assert_ne!(i, NIL);
        let Node { id, size, .. } = self.nodes[i as usize];
        self.release(i);
        evicted.push(Evicted { id, size });
    }

    fn release(&mut self, i: u32) {
        let Node { id, size, .. } = self.nodes[i as usize];
        let nodes = &self.nodes;
        if let Ok(e) = self
            .table
            .find_entry(hash(id), |&j| nodes[j as usize].id == id)
        {
            e.remove();
        }
        self.unlink(i);
        self.nodes[i as usize].next = self.free;
        self.free = i;
        self.used -= size;
    }
}

impl Eviction for S4lru {
    fn name(&self) -> &'static str {
        "s4lru"
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn used(&self) -> u64 {
        self.used
    }
    fn len(&self) -> usize {
        self.table.len()
    }
    fn peek(&self, id: u64) -> Option<u64> {
        self.find(id).map(|i| self.nodes[i as usize].size)
    }
    #[inline]
    fn touch(&mut self, id: u64, _now: u64, _evicted: &mut Vec<Evicted>) -> Option<u64> {
        let i = self.find(id)?;
        let Node { seg, size, .. } = self.nodes[i as usize];
        let s = seg as usize;
        let to = (s + 1).min(SEGMENTS - 1);
        if to != s || self.head[s] != i {
            self.unlink(i);
            self.link_head(to, i);
        }
        if to != s {
            self.cascade(to);
        }
        Some(size)
    }
    #[inline]
    fn insert(&mut self, id: u64, size: u64, _now: u64, evicted: &mut Vec<Evicted>) {
        debug_assert!(self.find(id).is_none());
        while self.lens[0] > 0 && self.bytes[0] + size > self.shares[0] {
            self.evict_tail(0, evicted);
        }
        while self.used + size > self.capacity {
            match (1..SEGMENTS).find(|&s| self.lens[s] > 0) {
                Some(s) => self.evict_tail(s, evicted),
                None => break,
            }
        }
        let node = Node {
            id,
            size,
            prev: NIL,
            next: NIL,
            seg: 0,
        };
        let i = if self.free != NIL {
            let i = self.free;
            self.free = self.nodes[i as usize].next;
            self.nodes[i as usize] = node;
            i
        } else {
            assert!(
                self.nodes.len() < NIL as usize,
                "more than 2^32-1 cached objects"
            );
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        };
        let nodes = &self.nodes;
        self.table
            .insert_unique(hash(id), i, |&j| hash(nodes[j as usize].id));
        self.link_head(0, i);
        self.used += size;
    }
    fn remove(&mut self, id: u64) -> Option<u64> {
        let i = self.find(id)?;
        let size = self.nodes[i as usize].size;
        self.release(i);
        Some(size)
    }
    fn clone_box(&self) -> Box<dyn Eviction> {
        Box::new(self.clone())
    }
    fn heap_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.table.capacity() * (std::mem::size_of::<u32>() + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(c: &S4lru, s: usize) -> Vec<u64> {
        c.iter_segment(s).map(|(id, _)| id).collect()
    }

    fn ids(ev: &[Evicted]) -> Vec<u64> {
        ev.iter().map(|e| e.id).collect()
    }

    #[test]
    fn shares_sum_to_capacity() {
        assert_eq!(S4lru::new(40).shares(), [10; 4]);
        assert_eq!(S4lru::new(43).shares(), [10, 11, 11, 11]);
        assert_eq!(S4lru::new(2).shares(), [0, 0, 1, 1]);
    }

    #[test]
    fn promotes_on_hits_and_demotes_on_overflow() {
        // Shares of 20 bytes; objects of 10 bytes: two per segment.
        let mut c = S4lru::new(80);
        let mut ev = Vec::new();
        c.insert(1, 10, 0, &mut ev);
        c.insert(2, 10, 0, &mut ev);
        c.insert(3, 10, 0, &mut ev); // segment 0 holds 2 objects: evicts 1
        assert_eq!(ids(&ev), vec![1]);
        assert_eq!(seg(&c, 0), vec![3, 2]);
        assert_eq!(c.touch(2, 0, &mut Vec::new()), Some(10));
        assert_eq!(c.segment_of(2), Some(1));
        assert_eq!(c.touch(3, 0, &mut Vec::new()), Some(10));
        assert_eq!(seg(&c, 1), vec![3, 2]);
        c.insert(4, 10, 0, &mut ev);
        c.touch(4, 0, &mut Vec::new()); // segment 1 = [4, 3, 2] overflows: 2 goes to segment 0's head
        assert_eq!(seg(&c, 1), vec![4, 3]);
        assert_eq!(seg(&c, 0), vec![2]);
        c.touch(3, 0, &mut Vec::new());
        c.touch(3, 0, &mut Vec::new()); // 3 climbs to segment 3
        c.touch(3, 0, &mut Vec::new());
        assert_eq!(c.segment_of(3), Some(3));
        c.touch(4, 0, &mut Vec::new());
        c.touch(4, 0, &mut Vec::new());
        assert_eq!(seg(&c, 3), vec![4, 3]);
        c.touch(3, 0, &mut Vec::new()); // a hit in segment 3 moves to its head
        assert_eq!(seg(&c, 3), vec![3, 4]);
        assert_eq!(c.segment_bytes(), [10, 0, 0, 20]);
        assert_eq!(c.used(), 30);
        assert_eq!(c.len(), 3);
        // Fill segment 2 and 3 and cascade one object all the way down.
        for id in [5, 6] {
            c.insert(id, 10, 0, &mut ev);
            c.touch(id, 0, &mut Vec::new());
            c.touch(id, 0, &mut Vec::new());
        }
        assert_eq!(seg(&c, 2), vec![6, 5]);
        c.touch(6, 0, &mut Vec::new()); // segment 3 = [6, 3, 4]: 4 demoted to 2 = [4, 6... ]
        assert_eq!(seg(&c, 3), vec![6, 3]);
        assert_eq!(seg(&c, 2), vec![4, 5]);
        assert_eq!(c.used(), 50);
    }

    #[test]
    fn cascade_reaches_segment_zero_and_eviction_waits_for_insert() {
        let mut c = S4lru::new(8); // shares of 2
        let mut ev = Vec::new();
        // (id, size, hits): segment 3 = [1(2)], 2 = [3, 2], 1 = [5, 4], 0 = [8, 7].
        for (id, size, hits) in [(1, 2, 3), (2, 1, 2), (3, 1, 2), (4, 1, 1), (5, 1, 1)] {
            c.insert(id, size, 0, &mut ev);
            for _ in 0..hits {
                c.touch(id, 0, &mut Vec::new());
            }
        }
        c.insert(7, 1, 0, &mut ev);
        c.insert(8, 1, 0, &mut ev);
        assert!(ev.is_empty());
        assert_eq!(c.segment_bytes(), [2, 2, 2, 2]);
        assert_eq!(seg(&c, 2), vec![3, 2]);
        // A hit on 2 lifts it into segment 3, which pushes 1 (2 bytes) down; segment 2 then
        // pushes 3 down, segment 1 pushes 4 down: segment 0 is over its share until the next
        // insertion.
        c.touch(2, 0, &mut Vec::new());
        assert_eq!(seg(&c, 3), vec![2]);
        assert_eq!(seg(&c, 2), vec![1]);
        assert_eq!(seg(&c, 1), vec![3, 5]);
        assert_eq!(seg(&c, 0), vec![4, 8, 7]);
        assert_eq!(c.segment_bytes(), [3, 2, 2, 1]);
        assert_eq!(c.used(), 8);
        c.insert(100, 1, 0, &mut ev);
        assert_eq!(ids(&ev), vec![7, 8]);
        assert_eq!(seg(&c, 0), vec![100, 4]);
        assert_eq!(c.used(), 7);
    }

    #[test]
    fn oversized_objects_fit_and_capacity_holds() {
        let mut c = S4lru::new(100); // shares of 25
        let mut ev = Vec::new();
        c.insert(1, 10, 0, &mut ev);
        c.touch(1, 0, &mut Vec::new());
        c.touch(1, 0, &mut Vec::new()); // segment 2
        c.insert(2, 10, 0, &mut ev);
        c.touch(2, 0, &mut Vec::new()); // segment 1
        c.insert(3, 60, 0, &mut ev); // larger than a share: alone in segment 0
        assert!(ev.is_empty());
        assert_eq!(c.used(), 80);
        c.touch(3, 0, &mut Vec::new()); // to segment 1, which now holds [3, 2] > 25: 2 demoted to 0
        assert_eq!(seg(&c, 1), vec![3]);
        assert_eq!(seg(&c, 0), vec![2]);
        c.touch(3, 0, &mut Vec::new());
        c.touch(3, 0, &mut Vec::new()); // segment 3, alone
        assert_eq!(c.segment_of(3), Some(3));
        c.insert(4, 90, 0, &mut ev); // evicts 2 (segment 0), then 1 (segment 2), then 3
        assert_eq!(ids(&ev), vec![2, 1, 3]);
        assert_eq!(c.used(), 90);
        assert_eq!(c.len(), 1);
        assert_eq!(c.remove(4), Some(90));
        assert_eq!(c.used(), 0);
        assert!(c.is_empty());
        assert_eq!(c.touch(4, 0, &mut Vec::new()), None);
    }
}
