//! CLOCK (second chance, FIFO with reinsertion): a FIFO queue whose entries carry a small
//! counter. A hit raises the counter (up to its maximum, 1 with one bit); at eviction the tail
//! is looked at: with a counter above 0 it is decremented and the entry goes back to the head,
//! else the entry is evicted. libCacheSim's `Clock` with its default `n-bit-counter=1`.

use crate::list::IndexedList;
use crate::{Evicted, Eviction};

#[derive(Clone)]
pub struct Clock {
    capacity: u64,
    /// The counter's largest value: 2^bits − 1.
    max: u8,
    list: IndexedList<u8>,
}

impl Clock {
    /// CLOCK with a one-bit counter (a reference bit).
    pub fn new(capacity: u64) -> Self {
        Self::with_bits(capacity, 1)
    }

    /// CLOCK with a `bits`-bit counter (1 to 8).
    pub fn with_bits(capacity: u64, bits: u32) -> Self {
        let bits = bits.clamp(1, 8);
        Clock {
            capacity,
            max: ((1u32 << bits) - 1) as u8,
            list: IndexedList::new(),
        }
    }
}

impl Eviction for Clock {
    fn name(&self) -> &'static str {
        "clock"
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
        let max = self.max;
        let count = self.list.extra_mut(id)?;
        *count = (*count + 1).min(max);
        self.list.get(id)
    }
    #[inline]
    fn insert(&mut self, id: u64, size: u64, _now: u64, evicted: &mut Vec<Evicted>) {
        while self.list.bytes() + size > self.capacity {
            // Every pass over a referenced tail lowers its counter: this ends.
            match self.list.tail_extra_mut() {
                None => break,
                Some(count) if *count > 0 => {
                    *count -= 1;
                    self.list.tail_to_head();
                }
                Some(_) => {
                    let (id, size) = self.list.pop_tail().expect("a tail");
                    evicted.push(Evicted { id, size });
                }
            }
        }
        self.list.push_head_with(id, size, 0);
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
