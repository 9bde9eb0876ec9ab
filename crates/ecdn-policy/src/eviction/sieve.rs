//! SIEVE (Zhang et al., NSDI '24): a FIFO queue with a visited bit per entry and a hand. A hit
//! sets the bit; nothing moves. To evict, the hand walks from where it stopped towards the head
//! (from the tail at first, and again after passing the head), clearing set bits, and evicts the
//! first entry whose bit is clear; it then rests on the entry before it. New entries go in at
//! the head, unvisited. This is libCacheSim's `Sieve`.

use crate::list::{Cursor, IndexedList};
use crate::{Evicted, Eviction};

#[derive(Clone)]
pub struct Sieve {
    capacity: u64,
    list: IndexedList<bool>,
    /// Where the next eviction starts looking; `None`: at the tail.
    hand: Option<Cursor>,
}

impl Sieve {
    pub fn new(capacity: u64) -> Self {
        Sieve {
            capacity,
            list: IndexedList::new(),
            hand: None,
        }
    }

    /// Evicts one entry; `None` when empty.
    fn evict_one(&mut self) -> Option<(u64, u64)> {
        let mut at = self.hand.or_else(|| self.list.tail())?;
        loop {
            let visited = self.list.extra_at(at);
            if !*visited {
                break;
            }
            *visited = false;
            at = self.list.prev(at).or_else(|| self.list.tail())?;
        }
        self.hand = self.list.prev(at);
        Some(self.list.remove_at(at))
    }
}

impl Eviction for Sieve {
    fn name(&self) -> &'static str {
        "sieve"
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn used(&self) -> u64 {
        self.list.bytes()
    }
    fn len(&self) -> usize {
        self.list.len()
    }
    fn peek(&self, id: u64) -> Option<u64> {
        self.list.get(id)
    }
    #[inline]
    fn touch(&mut self, id: u64, _now: u64, _evicted: &mut Vec<Evicted>) -> Option<u64> {
        *self.list.extra_mut(id)? = true;
        self.list.get(id)
    }
    #[inline]
    fn insert(&mut self, id: u64, size: u64, _now: u64, evicted: &mut Vec<Evicted>) {
        while self.list.bytes() + size > self.capacity {
            match self.evict_one() {
                Some((id, size)) => evicted.push(Evicted { id, size }),
                None => break,
            }
        }
        self.list.push_head_with(id, size, false);
    }
    fn remove(&mut self, id: u64) -> Option<u64> {
        let at = self.list.cursor(id)?;
        if self.hand == Some(at) {
            self.hand = self.list.prev(at);
        }
        Some(self.list.remove_at(at).1)
    }
    fn clone_box(&self) -> Box<dyn Eviction> {
        Box::new(self.clone())
    }
    fn heap_bytes(&self) -> usize {
        self.list.heap_bytes()
    }
}
