//! ARC (Megiddo and Modha, FAST '03), in bytes: two LRU lists of cached objects, T1 (seen once
//! lately) and T2 (seen twice or more), each with a ghost list of ids it evicted, B1 and B2, and
//! a target size p for T1 that ghost hits move: a hit in B1 raises p by max(|B2| / |B1|, 1), a
//! hit in B2 lowers it by max(|B1| / |B2|, 1) (sizes in bytes, p a real number between 0 and the
//! capacity).
//!
//! * A hit in T1 or T2 moves the object to T2's head.
//! * A miss recalled by a ghost list goes to T2's head, any other to T1's.
//! * REPLACE evicts T1's LRU object into B1 when T1 is not empty and larger than p (or equal
//!   to p, after a B2 hit), or when T2 is empty; else T2's LRU object into B2.
//! * Room for a miss not recalled (the paper's case IV): if T1 + B1 would exceed the capacity
//!   with the new object, drop B1's oldest id and REPLACE, or with B1 empty evict T1's LRU
//!   object outright; else, if all four lists hold twice the capacity, drop B2's oldest id, then
//!   REPLACE. For a recalled miss, REPLACE.
//!
//! This is libCacheSim's `ARC` for objects of different sizes (its choices where the paper,
//! written for pages, is silent: p and the deltas are real numbers; B1's emptiness, not T1 < c,
//! decides case IV.A; a B2 that is empty is not trimmed). As there, the ghost-hit flags that
//! REPLACE's tie rule reads are cleared by a request that finds its object (cached or ghost)
//! and by the insertion of a recalled object.

use crate::list::IndexedList;
use crate::{Evicted, Eviction};

#[derive(Clone)]
pub struct Arc {
    capacity: u64,
    t1: IndexedList,
    t2: IndexedList,
    b1: IndexedList,
    b2: IndexedList,
    /// T1's target size, bytes.
    p: f64,
    /// The last request that found its id in B1 / B2 (see the module documentation).
    in_b1: bool,
    in_b2: bool,
    /// The current request was recalled by a ghost list.
    recalled_now: bool,
}

impl Arc {
    pub fn new(capacity: u64) -> Self {
        Arc {
            capacity,
            t1: IndexedList::new(),
            t2: IndexedList::new(),
            b1: IndexedList::new(),
            b2: IndexedList::new(),
            p: 0.0,
            in_b1: false,
            in_b2: false,
            recalled_now: false,
        }
    }

    /// REPLACE: T1's or T2's LRU object becomes a ghost.
    fn replace(&mut self, evicted: &mut Vec<Evicted>) {
        let t1 = self.t1.bytes();
        let from_t1 = (t1 > 0 && (t1 as f64 > self.p || (t1 as f64 == self.p && self.in_b2)))
            || self.t2.is_empty();
        let (from, ghost) = if from_t1 {
            (&mut self.t1, &mut self.b1)
        } else {
            (&mut self.t2, &mut self.b2)
        };
        if let Some((id, size)) = from.pop_tail() {
            ghost.push_head(id, size);
            evicted.push(Evicted { id, size });
        }
    }

    /// Makes room for one object of `size` (one step of the loop in `insert`).
    fn evict_step(&mut self, size: u64, evicted: &mut Vec<Evicted>) {
        if self.recalled_now && (self.in_b1 || self.in_b2) {
            return self.replace(evicted);
        }
        if self.t1.bytes() + self.b1.bytes() + size > self.capacity {
            if !self.b1.is_empty() {
                self.b1.pop_tail();
                self.replace(evicted);
            } else if let Some((id, size)) = self.t1.pop_tail() {
                evicted.push(Evicted { id, size });
            }
        } else {
            let all = self.t1.bytes() + self.b1.bytes() + self.t2.bytes() + self.b2.bytes();
            if all >= 2 * self.capacity && !self.b2.is_empty() {
                self.b2.pop_tail();
            }
            self.replace(evicted);
        }
    }
}

impl Eviction for Arc {
    fn name(&self) -> &'static str {
        "arc"
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn used(&self) -> u64 {
        self.t1.bytes() + self.t2.bytes()
    }
    fn len(&self) -> usize {
        self.t1.len() + self.t2.len()
    }
    fn peek(&self, id: u64) -> Option<u64> {
        self.t1.get(id).or_else(|| self.t2.get(id))
    }
    #[inline]
    fn touch(&mut self, id: u64, _now: u64, _evicted: &mut Vec<Evicted>) -> Option<u64> {
        self.recalled_now = false;
        if let Some(size) = self.t1.remove(id) {
            self.in_b1 = false;
            self.in_b2 = false;
            self.t2.push_head(id, size);
            return Some(size);
        }
        if let Some(size) = self.t2.move_to_head(id) {
            self.in_b1 = false;
            self.in_b2 = false;
            return Some(size);
        }
        let (b1, b2) = (self.b1.bytes() as f64, self.b2.bytes() as f64);
        if self.b1.remove(id).is_some() {
            self.p = (self.p + (b2 / b1).max(1.0)).min(self.capacity as f64);
            (self.in_b1, self.in_b2, self.recalled_now) = (true, false, true);
        } else if self.b2.remove(id).is_some() {
            self.p = (self.p - (b1 / b2).max(1.0)).max(0.0);
            (self.in_b1, self.in_b2, self.recalled_now) = (false, true, true);
        }
        None
    }
    #[inline]
    fn insert(&mut self, id: u64, size: u64, _now: u64, evicted: &mut Vec<Evicted>) {
        while self.used() + size > self.capacity && !(self.t1.is_empty() && self.t2.is_empty()) {
            self.evict_step(size, evicted);
        }
        if std::mem::take(&mut self.recalled_now) && (self.in_b1 || self.in_b2) {
            self.in_b1 = false;
            self.in_b2 = false;
            self.t2.push_head(id, size);
        } else {
            self.t1.push_head(id, size);
        }
    }
    fn remove(&mut self, id: u64) -> Option<u64> {
        self.b1.remove(id);
        self.b2.remove(id);
        self.t1.remove(id).or_else(|| self.t2.remove(id))
    }
    fn clone_box(&self) -> Box<dyn Eviction> {
        Box::new(self.clone())
    }
    fn heap_bytes(&self) -> usize {
        self.t1.heap_bytes() + self.t2.heap_bytes() + self.b1.heap_bytes() + self.b2.heap_bytes()
    }
}
