//! LFU with Dynamic Aging (Arlitt, Cherkasova, Dilley, Friedrich and Jin, "Evaluating content
//! management techniques for Web proxy caches", 1999/2000).
//!
//! Each cached object has key `K = frequency + L`, where `frequency` counts the requests it
//! received while cached (1 on insertion) and `L` is the key of the last evicted object (0
//! initially). The object with the smallest `K` is evicted; a hit increments the frequency and
//! recomputes `K` with the current `L`. Ties are broken in LRU order: among equal keys, the
//! least recently requested (inserted or hit) object goes first.

use super::priority::PriorityIndex;
use crate::{Evicted, Eviction};

#[derive(Clone)]
pub struct LfuDa {
    capacity: u64,
    /// Age `L`: the key of the last evicted object.
    age: u64,
    index: PriorityIndex,
}

impl LfuDa {
    pub fn new(capacity: u64) -> Self {
        LfuDa {
            capacity,
            age: 0,
            index: PriorityIndex::new(),
        }
    }

    /// The current age `L`.
    pub fn age(&self) -> u64 {
        self.age
    }

    /// The key `K` of `id`, if cached.
    pub fn key(&self, id: u64) -> Option<u64> {
        self.index.get(id).map(|e| e.key)
    }
}

impl Eviction for LfuDa {
    fn name(&self) -> &'static str {
        "lfuda"
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn used(&self) -> u64 {
        self.index.bytes()
    }
    fn len(&self) -> usize {
        self.index.len()
    }
    fn peek(&self, id: u64) -> Option<u64> {
        self.index.get(id).map(|e| e.size)
    }
    #[inline]
    fn touch(&mut self, id: u64, _now: u64, _evicted: &mut Vec<Evicted>) -> Option<u64> {
        let age = self.age;
        self.index.hit(id, |e| e.freq.saturating_add(age))
    }
    #[inline]
    fn insert(&mut self, id: u64, size: u64, _now: u64, evicted: &mut Vec<Evicted>) {
        while self.index.bytes() + size > self.capacity {
            match self.index.pop_min() {
                Some(e) => {
                    self.age = e.key;
                    evicted.push(Evicted {
                        id: e.id,
                        size: e.size,
                    });
                }
                None => break,
            }
        }
        self.index.insert(id, size, self.age.saturating_add(1));
    }
    fn remove(&mut self, id: u64) -> Option<u64> {
        self.index.remove(id).map(|e| e.size)
    }
    fn clone_box(&self) -> Box<dyn Eviction> {
        Box::new(self.clone())
    }
    fn heap_bytes(&self) -> usize {
        self.index.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(ev: &[Evicted]) -> Vec<u64> {
        ev.iter().map(|e| e.id).collect()
    }

    #[test]
    fn evicts_least_frequent_then_least_recent() {
        let mut c = LfuDa::new(30);
        let mut ev = Vec::new();
        c.insert(1, 10, 1, &mut ev); // K = 1
        c.insert(2, 10, 2, &mut ev); // K = 1
        c.insert(3, 10, 3, &mut ev); // K = 1
        assert_eq!(c.touch(1, 4, &mut Vec::new()), Some(10)); // K = 2
        assert_eq!(c.touch(2, 5, &mut Vec::new()), Some(10)); // K = 2
        assert_eq!(c.touch(1, 6, &mut Vec::new()), Some(10)); // K = 3
        c.insert(4, 10, 7, &mut ev); // evicts 3 (K = 1): L = 1, 4 gets K = 2
        assert_eq!(ids(&ev), vec![3]);
        assert_eq!(c.age(), 1);
        assert_eq!(c.key(4), Some(2));
        // 2 and 4 both have K = 2; 2 was requested less recently.
        ev.clear();
        c.insert(5, 10, 8, &mut ev);
        assert_eq!(ids(&ev), vec![2]);
        assert_eq!(c.age(), 2);
        assert_eq!(c.key(5), Some(3));
        // A hit now recomputes with L = 2: 4 gets 2 + 2 = 4.
        assert_eq!(c.touch(4, 9, &mut Vec::new()), Some(10));
        assert_eq!(c.key(4), Some(4));
        ev.clear();
        c.insert(6, 20, 10, &mut ev); // K: 1 → 3, 5 → 3, 4 → 4; 1 is older
        assert_eq!(ids(&ev), vec![1, 5]);
        assert_eq!(c.used(), 30);
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn aging_lets_new_objects_displace_old_popular_ones() {
        let mut c = LfuDa::new(20);
        let mut ev = Vec::new();
        c.insert(1, 10, 0, &mut ev);
        for t in 1..=3 {
            c.touch(1, t, &mut Vec::new()); // K = 4
        }
        // A stream of one-hit objects pushes L up until 1 is the minimum.
        let mut id = 100;
        while c.peek(1).is_some() {
            c.insert(id, 10, id, &mut ev);
            c.touch(id, id, &mut Vec::new());
            c.touch(id, id, &mut Vec::new());
            id += 1;
            assert!(id < 120, "object 1 never aged out");
        }
        assert!(ev.iter().any(|e| e.id == 1));
        assert_eq!(c.touch(1, 1000, &mut Vec::new()), None);
        assert_eq!(c.remove(id - 1), Some(10));
        assert_eq!(c.used(), 10);
        assert_eq!(c.len(), 1);
    }
}
