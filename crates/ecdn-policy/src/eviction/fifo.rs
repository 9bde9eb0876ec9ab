//! First in, first out: hits change nothing; the oldest insertion is evicted. This is the order
//! of a log-structured disk ring, so the node's disk store and the simulator agree byte for byte.

use crate::list::IndexedList;
use crate::{Evicted, Eviction};

#[derive(Clone)]
pub struct Fifo {
    capacity: u64,
    list: IndexedList,
}

impl Fifo {
    pub fn new(capacity: u64) -> Self {
        Fifo {
            capacity,
            list: IndexedList::new(),
        }
    }

    /// Objects from newest to oldest.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.list.iter()
    }
}

impl Eviction for Fifo {
    fn name(&self) -> &'static str {
        "fifo"
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
        self.list.get(id)
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
