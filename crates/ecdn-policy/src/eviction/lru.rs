//! Least recently used: a hit moves the object to the head; the tail is evicted.

use crate::list::IndexedList;
use crate::{Evicted, Eviction};

#[derive(Clone)]
pub struct Lru {
    capacity: u64,
    list: IndexedList,
}

impl Lru {
    pub fn new(capacity: u64) -> Self {
        Lru {
            capacity,
            list: IndexedList::new(),
        }
    }

    /// Objects from most to least recently used.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.list.iter()
    }
}

impl Eviction for Lru {
    fn name(&self) -> &'static str {
        "lru"
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
        self.list.move_to_head(id)
    }
    #[inline]
    fn insert(&mut self, id: u64, size: u64, _now: u64, evicted: &mut Vec<Evicted>) {
        while self.list.bytes() + size > self.capacity {
            match self.list.pop_tail() {
                Some((id, size)) => evicted.push(Evicted { id, size }),
                None => break,
            }
        }
        self.list.push_head(id, size);
    }
    fn remove(&mut self, id: u64) -> Option<u64> {
        self.list.remove(id)
    }
    fn clone_box(&self) -> Box<dyn Eviction> {
        Box::new(self.clone())
    }
    fn heap_bytes(&self) -> usize {
        self.list.heap_bytes()
    }
}
