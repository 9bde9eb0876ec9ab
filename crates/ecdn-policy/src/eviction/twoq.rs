//! 2Q (Johnson and Shasha, VLDB '94), the full version: `A1in`, a FIFO of first-time objects
//! (25% of the capacity); `A1out`, a ghost FIFO of the ids `A1in` evicted (50%, in the sizes it
//! remembers); `Am`, an LRU of objects requested again after leaving `A1in` (the rest).
//!
//! * A hit in `A1in` changes nothing (correlated references); a hit in `Am` moves the object to
//!   its head.
//! * A miss whose id is in `A1out` goes into `Am` (which first evicts its own LRU objects to stay
//!   within its share), else into `A1in`. Nothing larger than `A1in`'s share is cached.
//! * Room is made from `A1in` while it holds more than its share (its oldest object is evicted
//!   and its id enters `A1out`), else from `Am`'s LRU end.
//!
//! This is libCacheSim's `TwoQ` with its defaults (`Ain-size-ratio=0.25,Aout-size-ratio=0.5`).

use crate::list::IndexedList;
use crate::{Evicted, Eviction};

/// `A1in`'s share of the capacity.
pub const IN_SHARE: f64 = 0.25;
/// `A1out`'s share (of the capacity, in the sizes of the objects it remembers).
pub const OUT_SHARE: f64 = 0.5;

#[derive(Clone)]
pub struct TwoQ {
    capacity: u64,
    in_capacity: u64,
    out_capacity: u64,
    main_capacity: u64,
    a1in: IndexedList,
    a1out: IndexedList,
    am: IndexedList,
    /// The last [`Eviction::touch`] found its id in `A1out` (and took it out).
    recalled: bool,
}

impl TwoQ {
    pub fn new(capacity: u64) -> Self {
        let in_capacity = (capacity as f64 * IN_SHARE) as u64;
        TwoQ {
            capacity,
            in_capacity,
            out_capacity: (capacity as f64 * OUT_SHARE) as u64,
            main_capacity: capacity - in_capacity,
            a1in: IndexedList::new(),
            a1out: IndexedList::new(),
            am: IndexedList::new(),
            recalled: false,
        }
    }
}

impl Eviction for TwoQ {
    fn name(&self) -> &'static str {
        "2q"
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn used(&self) -> u64 {
        self.a1in.bytes() + self.am.bytes()
    }
    fn len(&self) -> usize {
        self.a1in.len() + self.am.len()
    }
    fn peek(&self, id: u64) -> Option<u64> {
        self.a1in.get(id).or_else(|| self.am.get(id))
    }
    fn can_insert(&self, _id: u64, size: u64) -> bool {
        size <= self.in_capacity && size <= self.capacity
    }
    #[inline]
    fn touch(&mut self, id: u64, _now: u64, _evicted: &mut Vec<Evicted>) -> Option<u64> {
        self.recalled = false;
        if let Some(size) = self.a1in.get(id) {
            return Some(size);
        }
        if self.a1out.remove(id).is_some() {
            self.recalled = true;
        }
        self.am.move_to_head(id)
    }
    #[inline]
    fn insert(&mut self, id: u64, size: u64, _now: u64, evicted: &mut Vec<Evicted>) {
        while self.used() + size > self.capacity {
            if self.a1in.bytes() > self.in_capacity {
                let (id, size) = self.a1in.pop_tail().expect("A1in holds bytes");
                self.a1out.remember(id, size, self.out_capacity);
                evicted.push(Evicted { id, size });
            } else {
                match self.am.pop_tail() {
                    Some((id, size)) => evicted.push(Evicted { id, size }),
                    None => break,
                }
            }
        }
        if std::mem::take(&mut self.recalled) {
            // Am stays within its share on its own.
            while self.am.bytes() + size > self.main_capacity {
                match self.am.pop_tail() {
                    Some((id, size)) => evicted.push(Evicted { id, size }),
                    None => break,
                }
            }
            self.am.push_head(id, size);
        } else {
            self.a1in.push_head(id, size);
        }
    }
    fn remove(&mut self, id: u64) -> Option<u64> {
        self.a1out.remove(id);
        self.a1in.remove(id).or_else(|| self.am.remove(id))
    }
    fn clone_box(&self) -> Box<dyn Eviction> {
        Box::new(self.clone())
    }
    fn heap_bytes(&self) -> usize {
        self.a1in.heap_bytes() + self.a1out.heap_bytes() + self.am.heap_bytes()
    }
}
