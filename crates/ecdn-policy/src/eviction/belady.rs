//! Belady's MIN, the offline optimum for objects of one size: evict the cached object whose
//! next request is farthest in the future (never requested again: farthest of all). With
//! objects of different sizes it is no longer optimal, but remains the classic yardstick; the
//! size-aware bounds are elsewhere.
//!
//! It needs each request's next access, which only oracleGeneral traces carry
//! ([`ecdn_trace::Request::next_access`]): the [`crate::Cache`] tells it after every hit and
//! insertion ([`Eviction::next_access`]). Ties (objects never requested again, above all) go to
//! the largest id first. This is libCacheSim's `Belady`, up to that tie order, which its
//! priority queue leaves to its heap's layout.

use std::collections::BinaryHeap;

use foldhash::fast::FixedState;
use hashbrown::HashMap;

use crate::{Evicted, Eviction};

/// The next access of an object never requested again.
const NEVER: i64 = i64::MAX;

#[derive(Clone)]
pub struct Belady {
    capacity: u64,
    used: u64,
    /// Cached objects: size and next access.
    objects: HashMap<u64, (u64, i64), FixedState>,
    /// (next access, id), farthest first; an entry whose next access is no longer the object's
    /// is stale and skipped.
    heap: BinaryHeap<(i64, u64)>,
}

impl Belady {
    pub fn new(capacity: u64) -> Self {
        Belady {
            capacity,
            used: 0,
            objects: HashMap::with_hasher(FixedState::default()),
            heap: BinaryHeap::new(),
        }
    }

    fn evict_one(&mut self) -> Option<Evicted> {
        while let Some((next, id)) = self.heap.pop() {
            match self.objects.get(&id) {
                Some(&(size, current)) if current == next => {
                    self.objects.remove(&id);
                    self.used -= size;
                    return Some(Evicted { id, size });
                }
                _ => {}
            }
        }
        None
    }
}

impl Eviction for Belady {
    fn name(&self) -> &'static str {
        "belady"
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn used(&self) -> u64 {
        self.used
    }
    fn len(&self) -> usize {
        self.objects.len()
    }
    fn peek(&self, id: u64) -> Option<u64> {
        self.objects.get(&id).map(|o| o.0)
    }
    fn touch(&mut self, id: u64, _now: u64, _evicted: &mut Vec<Evicted>) -> Option<u64> {
        self.peek(id)
    }
    fn insert(&mut self, id: u64, size: u64, _now: u64, evicted: &mut Vec<Evicted>) {
        while self.used + size > self.capacity {
            match self.evict_one() {
                Some(e) => evicted.push(e),
                None => break,
            }
        }
        // Its next access arrives with `next_access`, right after.
        self.objects.insert(id, (size, NEVER));
        self.heap.push((NEVER, id));
        self.used += size;
    }
    fn next_access(&mut self, id: u64, next: i64) {
        let next = if next < 0 { NEVER } else { next };
        if let Some(o) = self.objects.get_mut(&id) {
            if o.1 != next {
                o.1 = next;
                self.heap.push((next, id));
            }
        }
        // Stale entries accumulate with hits: rebuild when they outnumber the live ones.
        if self.heap.len() > 2 * self.objects.len() + 1024 {
            let objects = &self.objects;
            self.heap
                .retain(|&(next, id)| objects.get(&id).is_some_and(|o| o.1 == next));
        }
    }
    fn remove(&mut self, id: u64) -> Option<u64> {
        let (size, _) = self.objects.remove(&id)?;
        self.used -= size;
        Some(size)
    }
    fn clone_box(&self) -> Box<dyn Eviction> {
        Box::new(self.clone())
    }
    fn heap_bytes(&self) -> usize {
        self.objects.capacity() * (8 + 16 + 1) + self.heap.capacity() * 16
    }
    fn offline(&self) -> bool {
        true
    }
}
