//! S3-FIFO (Yang et al., SOSP '23): three FIFO queues. A small queue (10% of the capacity)
//! takes new objects; a main queue (the rest) keeps the ones that proved themselves; a ghost
//! queue (ids only, up to 90% of the capacity in the sizes it remembers) recalls what the small
//! queue evicted lately.
//!
//! * A hit adds one to the object's counter; nothing moves.
//! * A miss whose id is in the ghost goes into the main queue (and leaves the ghost); any other
//!   goes into the small queue — or, until the first eviction, into the main queue once the
//!   small one is full. The small queue never takes an object as large as itself: such an
//!   object is not cached (unless the ghost recalls it; larger than the small queue, never).
//! * Room is made from the main queue when it holds more than its share or the small queue is
//!   empty, else from the small queue. From the small queue: the oldest object moves to the main
//!   queue (counter reset) if it was hit twice or more, else it is evicted and its id enters the
//!   ghost; this repeats until one object was evicted. From the main queue: the oldest object
//!   with a counter above 0 goes back to the head with its counter, capped at 3, less one (a
//!   two-bit CLOCK); the first with 0 is evicted.
//!
//! This is libCacheSim's `S3FIFO` (the version that fills the main queue before the first
//! eviction; small-size-ratio 0.10, ghost-size-ratio 0.90, move-to-main-threshold 2). One
//! difference, which does not arise when object sizes and the small queue's size share no
//! multiple: an object exactly the small queue's size, not recalled by the ghost, is refused
//! here before any eviction, where libCacheSim evicts to make room and then does not insert it.

use crate::list::IndexedList;
use crate::{Evicted, Eviction};

/// The small queue's share of the capacity.
pub const SMALL_SHARE: f64 = 0.10;
/// The ghost's share (of the capacity, in the sizes of the objects it remembers).
pub const GHOST_SHARE: f64 = 0.90;
/// Hits an object needs in the small queue to move to the main queue.
pub const MOVE_TO_MAIN: u8 = 2;

#[derive(Clone)]
pub struct S3Fifo {
    capacity: u64,
    small_capacity: u64,
    main_capacity: u64,
    ghost_capacity: u64,
    /// Counters: hits while cached (saturating; only `>= 2` and `min(3)` matter).
    small: IndexedList<u8>,
    main: IndexedList<u8>,
    ghost: IndexedList,
    /// The last [`Eviction::touch`] found its id in the ghost (and took it out).
    recalled: bool,
    /// Whether anything was evicted yet (before that, a full small queue spills to main).
    has_evicted: bool,
}

impl S3Fifo {
    pub fn new(capacity: u64) -> Self {
        let small_capacity = (capacity as f64 * SMALL_SHARE) as u64;
        S3Fifo {
            capacity,
            small_capacity,
            main_capacity: capacity - small_capacity,
            ghost_capacity: (capacity as f64 * GHOST_SHARE) as u64,
            small: IndexedList::new(),
            main: IndexedList::new(),
            ghost: IndexedList::new(),
            recalled: false,
            has_evicted: false,
        }
    }

    /// From the small queue: promotes hit objects until one is evicted (or it is empty).
    fn evict_small(&mut self, evicted: &mut Vec<Evicted>) {
        while let Some((id, size, hits)) = self.small.pop_tail_entry() {
            if hits >= MOVE_TO_MAIN {
                self.main.push_head_with(id, size, 0);
            } else {
                self.ghost.remember(id, size, self.ghost_capacity);
                evicted.push(Evicted { id, size });
                return;
            }
        }
    }

    /// From the main queue: a two-bit CLOCK until one object is evicted.
    fn evict_main(&mut self, evicted: &mut Vec<Evicted>) {
        while let Some(hits) = self.main.tail_extra_mut() {
            if *hits >= 1 {
                *hits = (*hits).min(3) - 1;
                self.main.tail_to_head();
            } else {
                let (id, size) = self.main.pop_tail().expect("a tail");
                evicted.push(Evicted { id, size });
                return;
            }
        }
    }
}

impl Eviction for S3Fifo {
    fn name(&self) -> &'static str {
        "s3fifo"
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn used(&self) -> u64 {
        self.small.bytes() + self.main.bytes()
    }
    fn len(&self) -> usize {
        self.small.len() + self.main.len()
    }
    fn peek(&self, id: u64) -> Option<u64> {
        self.small.get(id).or_else(|| self.main.get(id))
    }
    fn can_insert(&self, _id: u64, size: u64) -> bool {
        size <= self.capacity
            && (size < self.small_capacity || (size == self.small_capacity && self.recalled))
    }
    #[inline]
    fn touch(&mut self, id: u64, _now: u64, _evicted: &mut Vec<Evicted>) -> Option<u64> {
        self.recalled = false;
        if let Some(hits) = self.small.extra_mut(id) {
            *hits = hits.saturating_add(1);
            return self.small.get(id);
        }
        if self.ghost.remove(id).is_some() {
            self.recalled = true;
        }
        let hits = self.main.extra_mut(id)?;
        *hits = hits.saturating_add(1);
        self.main.get(id)
    }
    #[inline]
    fn insert(&mut self, id: u64, size: u64, _now: u64, evicted: &mut Vec<Evicted>) {
        while self.used() + size > self.capacity {
            if self.small.is_empty() && self.main.is_empty() {
                break;
            }
            self.has_evicted = true;
            if self.main.bytes() > self.main_capacity || self.small.is_empty() {
                self.evict_main(evicted);
            } else {
                self.evict_small(evicted);
            }
        }
        if std::mem::take(&mut self.recalled)
            || (!self.has_evicted && self.small.bytes() >= self.small_capacity)
        {
            self.main.push_head_with(id, size, 0);
        } else {
            self.small.push_head_with(id, size, 0);
        }
    }
    fn remove(&mut self, id: u64) -> Option<u64> {
        self.ghost.remove(id);
        self.small.remove(id).or_else(|| self.main.remove(id))
    }
    fn clone_box(&self) -> Box<dyn Eviction> {
        Box::new(self.clone())
    }
    fn heap_bytes(&self) -> usize {
        self.small.heap_bytes() + self.main.heap_bytes() + self.ghost.heap_bytes()
    }
}
