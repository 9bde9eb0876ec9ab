//! GreedyDual-Size-Frequency (Cherkasova, "Improving WWW proxies performance with
//! Greedy-Dual-Size-Frequency caching policy", HP Labs 1998), with cost 1 so that it maximizes
//! the object hit ratio.
//!
//! Each cached object has priority `H = L + frequency / size`, where `frequency` counts the
//! requests it received while cached (1 on insertion) and `L` is the inflation value: the
//! priority of the last evicted object (0 initially). The object with the smallest `H` is
//! evicted; a hit increments the frequency and recomputes `H` with the current `L`. Ties are
//! broken deterministically: the object whose priority was set least recently goes first.
//! Zero-byte objects are treated as one byte for the priority.
//!
//! **With history** (`gdsf:history`, [`Gdsf::with_history`], issue 43): GDSF forgets an
//! object's requests when it evicts it, so an object that returns starts again at frequency 1
//! beside objects that were merely lucky to stay. With the option every request is also
//! counted in W-TinyLFU's frequency sketch (`sketch.rs`: four times as wide as the cached
//! objects, halved every ten widths of requests), and an object enters with the sketch's
//! estimate of its recent requests, at most 16, as its frequency instead of 1. Both numbers
//! were chosen on footprint traces (BENCHMARKS.md, "GDSF with history"): a sketch as wide as
//! the cached objects forgets the objects GDSF evicted too soon (d-1 at 8 GiB: 0.5589 object
//! hit ratio against 0.5777), and without the cap a few very popular large objects stay for
//! good (tc-0 at 256 MiB: 0.9188 against 0.9251; plain GDSF 0.9214). Without the option,
//! nothing changes.

use super::priority::PriorityIndex;
use super::sketch::{Sketch, MIN_WIDTH};
use crate::{Evicted, Eviction};

/// The history's sketch is this many times as wide as the cached objects.
const HISTORY_WIDTH: usize = 4;
/// The most requests an object enters with.
const HISTORY_CAP: u64 = 16;

#[derive(Clone)]
pub struct Gdsf {
    capacity: u64,
    /// Inflation value `L`.
    inflation: f64,
    index: PriorityIndex,
    /// The request history of the option (`None`: plain GDSF).
    history: Option<Sketch>,
}

impl Gdsf {
    pub fn new(capacity: u64) -> Self {
        Gdsf {
            capacity,
            inflation: 0.0,
            index: PriorityIndex::new(),
            history: None,
        }
    }

    /// GDSF whose objects enter with their recent request count (see the module
    /// documentation).
    pub fn with_history(capacity: u64) -> Self {
        Gdsf {
            history: Some(Sketch::new(MIN_WIDTH, true, Some(10 * MIN_WIDTH as u64))),
            ..Self::new(capacity)
        }
    }

    /// The current inflation value `L`.
    pub fn inflation(&self) -> f64 {
        self.inflation
    }

    /// The priority `H` of `id`, if cached.
    pub fn priority(&self, id: u64) -> Option<f64> {
        self.index.get(id).map(|e| f64::from_bits(e.key))
    }

    /// Request count of `id` while cached, if cached.
    pub fn frequency(&self, id: u64) -> Option<u64> {
        self.index.get(id).map(|e| e.freq)
    }

    #[inline]
    fn key(inflation: f64, freq: u64, size: u64) -> u64 {
        let h = inflation + freq as f64 / size.max(1) as f64;
        // H is finite and non-negative, so its bit pattern orders like the value.
        h.to_bits()
    }
}

impl Eviction for Gdsf {
    fn name(&self) -> &'static str {
        "gdsf"
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
        if let Some(history) = &mut self.history {
            history.add(id);
        }
        let l = self.inflation;
        self.index.hit(id, |e| Self::key(l, e.freq, e.size))
    }
    #[inline]
    fn insert(&mut self, id: u64, size: u64, _now: u64, evicted: &mut Vec<Evicted>) {
        while self.index.bytes() + size > self.capacity {
            match self.index.pop_min() {
                Some(e) => {
                    self.inflation = f64::from_bits(e.key);
                    evicted.push(Evicted {
                        id: e.id,
                        size: e.size,
                    });
                }
                None => break,
            }
        }
        let freq = match &mut self.history {
            Some(history) => {
                history.fit(HISTORY_WIDTH * (self.index.len() + 1));
                u64::from(history.estimate(id)).clamp(1, HISTORY_CAP)
            }
            None => 1,
        };
        self.index
            .insert_with_freq(id, size, freq, Self::key(self.inflation, freq, size));
    }
    fn remove(&mut self, id: u64) -> Option<u64> {
        self.index.remove(id).map(|e| e.size)
    }
    fn clone_box(&self) -> Box<dyn Eviction> {
        Box::new(self.clone())
    }
    fn heap_bytes(&self) -> usize {
        self.index.heap_bytes() + self.history.as_ref().map_or(0, Sketch::heap_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(ev: &[Evicted]) -> Vec<u64> {
        ev.iter().map(|e| e.id).collect()
    }

    #[test]
    fn evicts_large_before_small_and_inflates() {
        let mut g = Gdsf::new(100);
        let mut ev = Vec::new();
        g.insert(1, 50, 1, &mut ev); // H = 1/50 = 0.02
        g.insert(2, 10, 2, &mut ev); // H = 0.1
        g.insert(3, 40, 3, &mut ev); // H = 0.025
        assert_eq!(g.used(), 100);
        g.insert(4, 20, 4, &mut ev); // evicts 1 (0.02): L = 0.02
        assert_eq!(ids(&ev), vec![1]);
        assert!((g.inflation() - 0.02).abs() < 1e-12);
        assert!((g.priority(4).unwrap() - (0.02 + 1.0 / 20.0)).abs() < 1e-12);
        assert_eq!(g.used(), 70);
        assert_eq!(g.len(), 3);
    }

    #[test]
    fn hits_raise_priority_with_current_inflation() {
        let mut g = Gdsf::new(100);
        let mut ev = Vec::new();
        g.insert(1, 50, 1, &mut ev); // 0.02
        g.insert(2, 50, 2, &mut ev); // 0.02, newer
        assert_eq!(g.touch(1, 3, &mut Vec::new()), Some(50)); // 1: 0.04
        assert_eq!(g.frequency(1), Some(2));
        g.insert(3, 50, 4, &mut ev); // evicts 2 (0.02): L = 0.02
        assert_eq!(ids(&ev), vec![2]);
        // 3: H = 0.02 + 0.02 = 0.04 ties with 1 (0.04), but 1's priority was set earlier.
        ev.clear();
        g.insert(4, 10, 5, &mut ev);
        assert_eq!(ids(&ev), vec![1]);
        assert!((g.inflation() - 0.04).abs() < 1e-12);
        assert_eq!(g.touch(9, 6, &mut Vec::new()), None);
        assert_eq!(g.peek(3), Some(50));
    }

    #[test]
    fn with_history_a_returning_object_enters_with_its_recent_requests() {
        // A 100-byte cache: object 1 (50 bytes) is requested three times, pushed out by a
        // 100-byte object, then requested again.
        let run = |mut g: Gdsf| {
            let mut ev = Vec::new();
            for (t, id) in [1u64, 1, 1].into_iter().enumerate() {
                if g.touch(id, t as u64, &mut ev).is_none() {
                    g.insert(id, 50, t as u64, &mut ev);
                }
            }
            g.touch(5, 3, &mut ev);
            g.insert(5, 100, 3, &mut ev);
            assert_eq!(g.peek(1), None);
            g.touch(1, 9, &mut ev);
            g.insert(1, 50, 9, &mut ev);
            g.frequency(1).unwrap()
        };
        // Plain GDSF starts it again at 1; with history, at its 4 requests so far.
        assert_eq!(run(Gdsf::new(100)), 1);
        assert_eq!(run(Gdsf::with_history(100)), 4);
    }

    #[test]
    fn the_history_is_capped() {
        let mut g = Gdsf::with_history(1000);
        let mut ev = Vec::new();
        for _ in 0..100 {
            g.touch(7, 0, &mut ev);
        }
        g.insert(7, 10, 0, &mut ev);
        assert_eq!(g.frequency(7), Some(HISTORY_CAP));
        assert!(g.heap_bytes() > Gdsf::new(1000).heap_bytes());
    }

    #[test]
    fn ties_go_to_the_older_entry() {
        let mut g = Gdsf::new(30);
        let mut ev = Vec::new();
        for id in 1..=3 {
            g.insert(id, 10, id, &mut ev);
        }
        g.insert(4, 20, 4, &mut ev);
        assert_eq!(ids(&ev), vec![1, 2]);
        assert_eq!(g.remove(3), Some(10));
        assert_eq!(g.remove(3), None);
        assert_eq!(g.used(), 20);
        let c = g.clone_box();
        assert_eq!(c.peek(4), Some(20));
        assert!(g.heap_bytes() > 0);
    }
}
