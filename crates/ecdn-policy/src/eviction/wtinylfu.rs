//! W-TinyLFU (Einziger, Friedman and Manes, ACM TOS '17), in bytes: a small LRU *window*
//! (1% of the capacity) in front of a *main* segmented LRU (a probation segment of 20% of the
//! rest and a protected one of 80%), and the TinyLFU admission filter between them: a
//! count-min *frequency sketch* of the recent requests decides whether the window's victim
//! replaces the main cache's victim (it does only if it is strictly more frequent).
//!
//! * A miss enters the window's head. A window hit moves the object to the window's head; a
//!   main hit promotes it (probation → protected, or to the protected head), and a protected
//!   segment over its size *cools* its tail down to probation, whose overflow is evicted.
//! * Room for a miss, while the cache is full: the window's LRU object moves to the main cache
//!   if that has room (and the next one is considered), else it meets the main victim (the
//!   probation tail, or the protected tail if probation is empty): the more frequent one stays.
//!   With the window empty, the main victim goes.
//! * An object larger than the window (1% of the capacity) or the probation segment is not
//!   cached (libCacheSim's rule: it could never pass through them).
//! * The sketch (4 rows, conservative update: only the smallest counters of an id grow) counts
//!   each miss, each main hit and each window victim considered. Its width follows the number
//!   of cached objects (a power of two at least that number; it is cleared when it grows), and
//!   after 10 × width counts every counter is halved (the *reset* that ages old popularity).
//!
//! This is libCacheSim's `WTinyLFU` with its default main cache (`SLRU` with segments 1:4): the
//! same window and segment sizes, the same order of moves, the same moments the sketch counts.
//! libCacheSim's filter differs: a counting Bloom filter sized by the cache's *bytes* (one
//! entry per byte at 0.1% error), which on traces of a few million requests counts almost
//! exactly and never ages; with [`WTinyLfu::with_sketch`] set the same way, this module gives
//! libCacheSim's miss ratios exactly (see the golden tests), and with its default sketch it
//! is a W-TinyLFU a cache can run: metadata proportional to the objects it holds.
//!
//! **Size-aware option** (`wtinylfu:max-object=SIZE`, [`WTinyLfu::with_max_object`], issue
//! 43): the window and the probation segment are each at least SIZE (at most half the
//! capacity, and probation at most the main cache), so every object up to SIZE is cached, in
//! place of libCacheSim's 1% rule. Admission then weighs a candidate against every victim it
//! would displace, as Caffeine does for weighted entries: the window's victim enters the main
//! cache only if it is more frequent than each of the main victims that must leave to make
//! room for it (one large object no longer evicts many more popular small ones on the
//! strength of beating the first). Without the option, nothing changes.

use super::sketch::{Sketch, MIN_WIDTH};
use crate::list::IndexedList;
use crate::{Evicted, Eviction};

#[derive(Clone)]
pub struct WTinyLfu {
    capacity: u64,
    window_capacity: u64,
    main_capacity: u64,
    probation_capacity: u64,
    protected_capacity: u64,
    window: IndexedList,
    probation: IndexedList,
    protected: IndexedList,
    sketch: Sketch,
    /// The size-aware option: admission weighs every victim a candidate displaces.
    size_aware: bool,
}

impl WTinyLfu {
    pub fn new(capacity: u64) -> Self {
        Self::with_sketch(capacity, None)
    }

    /// With a fixed sketch of `width` counters per row that never halves its counters (as
    /// libCacheSim's filter on short traces), instead of the default growing and ageing one.
    pub fn with_sketch(capacity: u64, fixed_width: Option<usize>) -> Self {
        let window_capacity = (capacity as f64 * 0.01) as u64;
        let main_capacity = capacity - window_capacity;
        let sketch = match fixed_width {
            Some(w) => Sketch::new(w, false, None),
            None => Sketch::new(MIN_WIDTH, true, Some(10 * MIN_WIDTH as u64)),
        };
        WTinyLfu {
            capacity,
            window_capacity,
            main_capacity,
            probation_capacity: (1.0 / 5.0 * main_capacity as f64) as u64,
            protected_capacity: (4.0 / 5.0 * main_capacity as f64) as u64,
            window: IndexedList::new(),
            probation: IndexedList::new(),
            protected: IndexedList::new(),
            sketch,
            size_aware: false,
        }
    }

    /// With the size-aware option (see the module documentation): objects up to
    /// `max_object` bytes are cached (and up to half the capacity); `None` is
    /// [`WTinyLfu::new`].
    pub fn with_max_object(capacity: u64, max_object: Option<u64>) -> Self {
        let mut w = Self::new(capacity);
        let Some(m) = max_object else {
            return w;
        };
        let room = m.min(capacity / 2);
        w.window_capacity = w.window_capacity.max(room);
        w.main_capacity = capacity - w.window_capacity;
        w.probation_capacity = w.probation_capacity.max(room).min(w.main_capacity);
        w.protected_capacity = w.main_capacity - w.probation_capacity;
        w.size_aware = true;
        w
    }

    /// Whether `candidate` (`size` bytes) beats every main victim that must leave for it to
    /// fit: probation's from its tail, then protected's (the size-aware option's admission).
    fn beats_every_victim(&self, candidate: u64, size: u64) -> bool {
        let mut needed = (self.main_used() + size).saturating_sub(self.main_capacity);
        let frequency = self.sketch.estimate(candidate);
        let victims = self
            .probation
            .iter_from_tail()
            .chain(self.protected.iter_from_tail());
        for (victim, victim_size) in victims {
            if needed == 0 {
                break;
            }
            if frequency <= self.sketch.estimate(victim) {
                return false;
            }
            needed = needed.saturating_sub(victim_size);
        }
        true
    }

    fn main_used(&self) -> u64 {
        self.probation.bytes() + self.protected.bytes()
    }

    /// The main cache's next victim: probation's tail, or protected's if probation is empty.
    fn main_victim(&self) -> Option<(u64, u64)> {
        self.probation
            .peek_tail()
            .or_else(|| self.protected.peek_tail())
    }

    /// Evicts the main cache's victim.
    fn main_evict(&mut self, evicted: &mut Vec<Evicted>) -> bool {
        let victim = if self.probation.is_empty() {
            self.protected.pop_tail()
        } else {
            self.probation.pop_tail()
        };
        if let Some((id, size)) = victim {
            evicted.push(Evicted { id, size });
        }
        victim.is_some()
    }

    /// Into the main cache: the lowest segment with room, else probation after evicting until
    /// the main cache has room.
    fn main_insert(&mut self, id: u64, size: u64, evicted: &mut Vec<Evicted>) {
        if self.probation.bytes() + size <= self.probation_capacity {
            self.probation.push_head(id, size);
        } else if self.protected.bytes() + size <= self.protected_capacity {
            self.protected.push_head(id, size);
        } else {
            while self.main_used() + size > self.main_capacity && self.main_evict(evicted) {}
            self.probation.push_head(id, size);
        }
    }

    /// A main hit: to the protected head; protected's overflow cools to probation's head, and
    /// probation's overflow is evicted.
    fn main_hit(&mut self, id: u64, evicted: &mut Vec<Evicted>) -> Option<u64> {
        if let Some(size) = self.protected.move_to_head(id) {
            return Some(size);
        }
        let size = self.probation.remove(id)?;
        self.protected.push_head(id, size);
        while self.protected.bytes() > self.protected_capacity {
            let Some((cooled, s)) = self.protected.pop_tail() else {
                break;
            };
            self.probation.push_head(cooled, s);
            while self.probation.bytes() > self.probation_capacity && self.main_evict(evicted) {}
        }
        Some(size)
    }

    /// One eviction step of a full cache (see the module documentation); false if the cache
    /// is empty.
    fn evict(&mut self, evicted: &mut Vec<Evicted>) -> bool {
        while let Some((candidate, size)) = self.window.peek_tail() {
            if self.main_used() + size <= self.main_capacity {
                self.window.pop_tail();
                self.main_insert(candidate, size, evicted);
                self.sketch.add(candidate);
                continue;
            }
            let admitted = if self.size_aware {
                self.main_victim().is_some() && self.beats_every_victim(candidate, size)
            } else {
                self.main_victim().is_some_and(|(victim, _)| {
                    self.sketch.estimate(candidate) > self.sketch.estimate(victim)
                })
            };
            self.window.pop_tail();
            if admitted {
                self.main_evict(evicted);
                self.main_insert(candidate, size, evicted);
            } else {
                evicted.push(Evicted {
                    id: candidate,
                    size,
                });
            }
            self.sketch.add(candidate);
            return true;
        }
        self.main_evict(evicted)
    }
}

impl Eviction for WTinyLfu {
    fn name(&self) -> &'static str {
        "wtinylfu"
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn used(&self) -> u64 {
        self.window.bytes() + self.main_used()
    }
    fn len(&self) -> usize {
        self.window.len() + self.probation.len() + self.protected.len()
    }
    fn peek(&self, id: u64) -> Option<u64> {
        self.window
            .get(id)
            .or_else(|| self.probation.get(id))
            .or_else(|| self.protected.get(id))
    }
    fn can_insert(&self, _id: u64, size: u64) -> bool {
        size <= self.window_capacity && size <= self.probation_capacity
    }
    #[inline]
    fn touch(&mut self, id: u64, _now: u64, evicted: &mut Vec<Evicted>) -> Option<u64> {
        if let Some(size) = self.window.move_to_head(id) {
            return Some(size);
        }
        let size = self.main_hit(id, evicted)?;
        self.sketch.add(id);
        Some(size)
    }
    fn insert(&mut self, id: u64, size: u64, _now: u64, evicted: &mut Vec<Evicted>) {
        while self.used() + size > self.capacity && self.evict(evicted) {}
        self.window.push_head(id, size);
        self.sketch.fit(self.len());
        self.sketch.add(id);
    }
    fn remove(&mut self, id: u64) -> Option<u64> {
        self.window
            .remove(id)
            .or_else(|| self.probation.remove(id))
            .or_else(|| self.protected.remove(id))
    }
    fn clone_box(&self) -> Box<dyn Eviction> {
        Box::new(self.clone())
    }
    fn heap_bytes(&self) -> usize {
        self.window.heap_bytes()
            + self.probation.heap_bytes()
            + self.protected.heap_bytes()
            + self.sketch.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full cache of 1,000 bytes with `max-object=300` (window 300 B, main 700 B:
    /// probation 300 B, protected 400 B) of 10-byte objects 1..=70 in main, each requested
    /// `hits(id)` more times, and the window holding object 1000 (300 bytes) requested `big`
    /// more times: whether 1000 is still cached once a new object pushes it out of the window
    /// (it needs 300 bytes of the main cache: probation's 30 objects, 1 to 30, oldest first).
    /// `size_aware` false: libCacheSim's one-victim admission with the same segments.
    fn large_candidate_admitted(size_aware: bool, big: u32, hits: impl Fn(u64) -> u32) -> bool {
        let mut w = WTinyLfu::with_max_object(1000, Some(300));
        assert_eq!((w.window_capacity, w.probation_capacity), (300, 300));
        w.size_aware = size_aware;
        let mut ev = Vec::new();
        for id in 1..=70u64 {
            w.insert(id, 10, 0, &mut ev);
        }
        for id in 1..=70u64 {
            for _ in 0..hits(id) {
                w.sketch.add(id);
            }
        }
        w.insert(1000, 300, 0, &mut ev);
        for _ in 0..big {
            w.sketch.add(1000);
        }
        assert_eq!(w.peek(1000), Some(300));
        assert!(ev.is_empty(), "nothing left the cache yet");
        w.insert(2000, 10, 0, &mut ev);
        w.peek(1000).is_some()
    }

    #[test]
    fn a_large_candidate_must_beat_every_victim_it_displaces() {
        // More frequent than every small object: admitted either way.
        assert!(large_candidate_admitted(true, 10, |_| 0));
        assert!(large_candidate_admitted(false, 10, |_| 0));
        // More frequent than the first victim but not than the 29 after it: the one-victim
        // rule admits it (evicting 30 objects more popular than it), the size-aware one not.
        let popular_but_the_first = |id| if id == 1 { 0 } else { 20 };
        assert!(large_candidate_admitted(false, 10, popular_but_the_first));
        assert!(!large_candidate_admitted(true, 10, popular_but_the_first));
    }
}
