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

use crate::list::IndexedList;
use crate::{Evicted, Eviction};

/// Sketch rows.
const ROWS: usize = 4;
/// Smallest sketch width.
const MIN_WIDTH: usize = 64;

/// The count-min frequency sketch with conservative update and periodic halving.
#[derive(Clone)]
struct Sketch {
    /// `ROWS` rows of `width` counters, row after row.
    counters: Vec<u16>,
    /// Power of two.
    width: usize,
    /// Whether the width follows the cached objects ([`Sketch::fit`]).
    grows: bool,
    /// Counts since the last halving, and how many trigger one (`None`: never).
    counted: u64,
    period: Option<u64>,
}

impl Sketch {
    fn new(width: usize, grows: bool, period: Option<u64>) -> Self {
        let width = width.max(MIN_WIDTH).next_power_of_two();
        Sketch {
            counters: vec![0; ROWS * width],
            width,
            grows,
            counted: 0,
            period,
        }
    }

    /// The counter index of `id` in each row (double hashing of one 64-bit mix).
    #[inline]
    fn slots(&self, id: u64) -> [usize; ROWS] {
        let h1 = crate::list::hash(id ^ 0x5851_F42D_4C95_7F2D);
        let h2 = crate::list::hash(h1) | 1;
        let mask = self.width - 1;
        std::array::from_fn(|r| {
            r * self.width + (h1.wrapping_add((r as u64).wrapping_mul(h2)) as usize & mask)
        })
    }

    #[inline]
    fn estimate(&self, id: u64) -> u16 {
        let slots = self.slots(id);
        slots.iter().map(|&i| self.counters[i]).min().unwrap_or(0)
    }

    /// One more request of `id`: the counters at the current minimum grow by one.
    #[inline]
    fn add(&mut self, id: u64) {
        let slots = self.slots(id);
        let min = slots.iter().map(|&i| self.counters[i]).min().unwrap_or(0);
        if min < u16::MAX {
            for &i in &slots {
                if self.counters[i] == min {
                    self.counters[i] = min + 1;
                }
            }
        }
        self.counted += 1;
        if self.period.is_some_and(|p| self.counted >= p) {
            for c in &mut self.counters {
                *c /= 2;
            }
            self.counted /= 2;
        }
    }

    /// A growing sketch at least as wide as `objects`: doubled (and cleared) when it is not.
    fn fit(&mut self, objects: usize) {
        if self.grows && objects > self.width {
            *self = Sketch::new(objects, true, Some(10 * objects.next_power_of_two() as u64));
        }
    }

    fn heap_bytes(&self) -> usize {
        self.counters.capacity() * std::mem::size_of::<u16>()
    }
}

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
        }
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
            let admitted = self.main_victim().is_some_and(|(victim, _)| {
                self.sketch.estimate(candidate) > self.sketch.estimate(victim)
            });
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

    #[test]
    fn the_sketch_counts_halves_and_grows() {
        let mut s = Sketch::new(64, true, Some(640));
        for _ in 0..5 {
            s.add(1);
        }
        s.add(2);
        assert_eq!((s.estimate(1), s.estimate(2), s.estimate(3)), (5, 1, 0));
        // The 640th count halves every counter (and the count so far).
        for _ in 0..633 {
            s.add(7);
        }
        assert_eq!(s.estimate(7), 633);
        s.add(1);
        assert_eq!((s.estimate(1), s.estimate(2), s.estimate(7)), (3, 0, 316));
        assert_eq!(s.counted, 320);
        // As wide as the cached objects: growing to 65 objects doubles the width and clears.
        s.fit(64);
        assert_eq!(s.width, 64);
        s.fit(65);
        assert_eq!((s.width, s.estimate(7), s.period), (128, 0, Some(1280)));
    }

    #[test]
    fn conservative_update_grows_only_the_smallest_counters() {
        // Two rows' worth of collisions: a counter shared with a frequent id is not raised
        // by a rare one.
        let mut s = Sketch::new(64, false, None);
        for id in 0..2000u64 {
            s.add(id);
        }
        let total: u64 = s.counters.iter().map(|&c| u64::from(c)).sum();
        assert!(
            total < 4 * 2000,
            "every add raised all {ROWS} counters: {total}"
        );
        for id in 0..2000u64 {
            assert!(s.estimate(id) >= 1, "an estimate is never below the count");
        }
    }
}
