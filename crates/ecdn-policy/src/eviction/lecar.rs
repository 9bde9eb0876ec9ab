//! LeCaR (Vietri et al., HotStorage '18): eviction as regret minimisation over two experts,
//! LRU and LFU. Each expert has a weight (`w_LRU`, `w_LFU`, 0.5 each at first); to make room,
//! LeCaR asks both for their victim (LRU's: the least recently requested object; LFU's: the
//! one with the fewest requests while cached, ties to the one that reached that count first)
//! and evicts the victim of an expert drawn with probability equal to its weight. The evicted
//! id goes into that expert's history (`H_LRU` or `H_LFU`) with the time of its eviction. A
//! miss on an id found in expert `e`'s history means `e` erred: the id leaves the history and
//! `w_e ← w_e · e^(−λ·r)` with the regret `r = d^t`, where `t` is the time since the eviction
//! (in requests), `λ` the learning rate and `d` the discount rate; then the weights are
//! normalised to sum to 1.
//!
//! Parameters, as libCacheSim's `LeCaR` sets them: `λ = 0.45`, `d = 0.005^(1/N)`, with `N` the
//! capacity in bytes (the paper's `N` is the cache size in pages; in bytes `d` is so close to 1
//! that the regret barely decays over the distances that matter), and each history holds at
//! most half the capacity in bytes, oldest ids dropped first (an id larger than that leaves its
//! history empty). Also as there:
//!
//! * when both experts name the same victim it is evicted with no draw and goes into neither
//!   history;
//! * the draw is quantised: a number `k` uniform in 0..100, LRU when `k / 100 < w_LRU`;
//! * the weight update adds 1e-10 to each weight in the normalisation (no weight reaches 0):
//!   `w_e ← w_e · e^(−λ·r) + 1e-10`, then `w_e ← w_e / s` and `w_o ← (w_o + 1e-10) / s` with
//!   `s = w_e + w_o + 2e-10`;
//! * a recalled id comes back as a new object (one request), like any miss.
//!
//! The draws come from the generator seeded by [`LeCaR::new`]'s seed (equal seeds, equal
//! decisions); libCacheSim draws from its process-wide generator. LRU is the indexed list;
//! LFU is frequency classes in a linked list of their own (O(1) per request, as the O(1) LFU of
//! Shah, Mitra and Matani); each history is an indexed list.

use ecdn_trace::gen::Rng;

use crate::list::IndexedList;
use crate::{Evicted, Eviction};

/// `λ`: how much one regret lowers an expert's weight.
pub const LEARNING_RATE: f64 = 0.45;
/// The discount rate is `DISCOUNT_BASE^(1/N)`: a regret `N` requests after its eviction weighs
/// this much.
pub const DISCOUNT_BASE: f64 = 0.005;

/// One of the two experts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expert {
    Lru,
    Lfu,
}

#[derive(Clone)]
pub struct LeCaR {
    capacity: u64,
    /// LRU's order, most recent at the head; each entry's value is its member in `frequency`.
    recency: IndexedList<u32>,
    /// LFU's order.
    frequency: FrequencyClasses,
    /// `H_LRU` and `H_LFU`: ids each expert evicted, newest at the head, each with the request
    /// index of its eviction.
    lru_history: IndexedList<u64>,
    lfu_history: IndexedList<u64>,
    w_lru: f64,
    w_lfu: f64,
    /// `d`.
    discount: f64,
    rng: Rng,
}

impl LeCaR {
    /// LeCaR with libCacheSim's parameters, drawing from a generator seeded with `seed`.
    pub fn new(capacity: u64, seed: u64) -> Self {
        LeCaR {
            capacity,
            recency: IndexedList::new(),
            frequency: FrequencyClasses::default(),
            lru_history: IndexedList::new(),
            lfu_history: IndexedList::new(),
            w_lru: 0.5,
            w_lfu: 0.5,
            discount: DISCOUNT_BASE.powf(1.0 / capacity as f64),
            rng: Rng::new(seed),
        }
    }

    /// The experts' weights `(w_LRU, w_LFU)`.
    pub fn weights(&self) -> (f64, f64) {
        (self.w_lru, self.w_lfu)
    }

    /// Requests of a cached `id` while cached (1 on insertion).
    pub fn frequency(&self, id: u64) -> Option<u64> {
        let member = self.recency.extra(id)?;
        Some(self.frequency.freq(member))
    }

    /// Whose history holds `id`, if any.
    pub fn in_history(&self, id: u64) -> Option<Expert> {
        if self.lru_history.contains(id) {
            Some(Expert::Lru)
        } else if self.lfu_history.contains(id) {
            Some(Expert::Lfu)
        } else {
            None
        }
    }

    /// `expert` erred `t` requests after its eviction: lower its weight, then normalise.
    fn regret(&mut self, expert: Expert, t: u64) {
        let r = self.discount.powf(t as f64);
        let (erred, other) = match expert {
            Expert::Lru => (&mut self.w_lru, &mut self.w_lfu),
            Expert::Lfu => (&mut self.w_lfu, &mut self.w_lru),
        };
        *erred = *erred * (-LEARNING_RATE * r).exp() + 1e-10;
        let s = *erred + *other + 2e-10;
        *erred /= s;
        *other = (*other + 1e-10) / s;
    }

    /// Evicts one object; `None` when empty.
    fn evict_one(&mut self, now: u64) -> Option<(u64, u64)> {
        let (lru_victim, _) = self.recency.peek_tail()?;
        let (lfu_member, lfu_victim) = self.frequency.min()?;
        let expert = if lru_victim == lfu_victim {
            None
        } else if (self.rng.below(100) as f64 / 100.0) < self.w_lru {
            Some(Expert::Lru)
        } else {
            Some(Expert::Lfu)
        };
        let (id, size) = if expert == Some(Expert::Lfu) {
            let (size, _) = self.recency.remove_entry(lfu_victim)?;
            self.frequency.remove(lfu_member);
            (lfu_victim, size)
        } else {
            let (id, size, member) = self.recency.pop_tail_entry()?;
            self.frequency.remove(member);
            (id, size)
        };
        let history = match expert {
            None => return Some((id, size)),
            Some(Expert::Lru) => &mut self.lru_history,
            Some(Expert::Lfu) => &mut self.lfu_history,
        };
        history.push_head_with(id, size, now);
        while history.bytes() > self.capacity / 2 {
            history.pop_tail();
        }
        Some((id, size))
    }
}

impl Eviction for LeCaR {
    fn name(&self) -> &'static str {
        "lecar"
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn used(&self) -> u64 {
        self.recency.bytes()
    }
    fn len(&self) -> usize {
        self.recency.len()
    }
    fn peek(&self, id: u64) -> Option<u64> {
        self.recency.get(id)
    }
    #[inline]
    fn touch(&mut self, id: u64, now: u64, _evicted: &mut Vec<Evicted>) -> Option<u64> {
        if let Some((size, member)) = self.recency.move_to_head_entry(id) {
            self.frequency.hit(member);
            return Some(size);
        }
        if let Some((_, evicted_at)) = self.lru_history.remove_entry(id) {
            self.regret(Expert::Lru, now.saturating_sub(evicted_at));
        } else if let Some((_, evicted_at)) = self.lfu_history.remove_entry(id) {
            self.regret(Expert::Lfu, now.saturating_sub(evicted_at));
        }
        None
    }
    #[inline]
    fn insert(&mut self, id: u64, size: u64, now: u64, evicted: &mut Vec<Evicted>) {
        // Only an insertion without the request's `touch` could find it there.
        self.lru_history.remove(id);
        self.lfu_history.remove(id);
        while self.recency.bytes() + size > self.capacity {
            match self.evict_one(now) {
                Some((id, size)) => evicted.push(Evicted { id, size }),
                None => break,
            }
        }
        let member = self.frequency.insert(id);
        self.recency.push_head_with(id, size, member);
    }
    fn remove(&mut self, id: u64) -> Option<u64> {
        self.lru_history.remove(id);
        self.lfu_history.remove(id);
        let (size, member) = self.recency.remove_entry(id)?;
        self.frequency.remove(member);
        Some(size)
    }
    fn clone_box(&self) -> Box<dyn Eviction> {
        Box::new(self.clone())
    }
    fn heap_bytes(&self) -> usize {
        self.recency.heap_bytes()
            + self.frequency.heap_bytes()
            + self.lru_history.heap_bytes()
            + self.lfu_history.heap_bytes()
    }
}

const NIL: u32 = u32::MAX;

/// An object in a frequency class.
#[derive(Clone, Copy, Debug)]
struct Member {
    id: u64,
    class: u32,
    /// Neighbours in the class: `older` entered it before, `newer` after. A free member's
    /// `newer` links the free list.
    older: u32,
    newer: u32,
}

/// The objects with `freq` requests, oldest (first to have reached `freq`) to newest.
#[derive(Clone, Copy, Debug)]
struct Class {
    freq: u64,
    oldest: u32,
    newest: u32,
    /// Neighbouring classes, by frequency. A free class's `higher` links the free list.
    lower: u32,
    higher: u32,
}

/// LFU's order: the non-empty frequency classes in a list from the lowest frequency up, each a
/// list of its members in the order they entered it. Insertion, a hit (a member moves to the
/// next class, created if missing) and removal are O(1); the victim is the lowest class's
/// oldest member.
#[derive(Clone)]
struct FrequencyClasses {
    members: Vec<Member>,
    free_member: u32,
    classes: Vec<Class>,
    free_class: u32,
    lowest: u32,
}

impl Default for FrequencyClasses {
    fn default() -> Self {
        FrequencyClasses {
            members: Vec::new(),
            free_member: NIL,
            classes: Vec::new(),
            free_class: NIL,
            lowest: NIL,
        }
    }
}

impl FrequencyClasses {
    fn freq(&self, m: u32) -> u64 {
        self.classes[self.members[m as usize].class as usize].freq
    }

    /// The lowest class's oldest member and its id.
    #[inline]
    fn min(&self) -> Option<(u32, u64)> {
        if self.lowest == NIL {
            return None;
        }
        let m = self.classes[self.lowest as usize].oldest;
        Some((m, self.members[m as usize].id))
    }

    /// A new, empty class of `freq` just above `below` (`NIL`: at the bottom).
    fn new_class(&mut self, freq: u64, below: u32) -> u32 {
        let higher = if below == NIL {
            self.lowest
        } else {
            self.classes[below as usize].higher
        };
        let class = Class {
            freq,
            oldest: NIL,
            newest: NIL,
            lower: below,
            higher,
        };
        let c = if self.free_class != NIL {
            let c = self.free_class;
            self.free_class = self.classes[c as usize].higher;
            self.classes[c as usize] = class;
            c
        } else {
            assert!(self.classes.len() < NIL as usize, "too many classes");
            self.classes.push(class);
            (self.classes.len() - 1) as u32
        };
        if below == NIL {
            self.lowest = c;
        } else {
            self.classes[below as usize].higher = c;
        }
        if higher != NIL {
            self.classes[higher as usize].lower = c;
        }
        c
    }

    /// Appends member `m` to class `c` as its newest.
    #[inline]
    fn append(&mut self, c: u32, m: u32) {
        let newest = self.classes[c as usize].newest;
        {
            let member = &mut self.members[m as usize];
            member.class = c;
            member.older = newest;
            member.newer = NIL;
        }
        if newest != NIL {
            self.members[newest as usize].newer = m;
        } else {
            self.classes[c as usize].oldest = m;
        }
        self.classes[c as usize].newest = m;
    }

    /// Takes member `m` out of its class, dropping the class if it empties.
    #[inline]
    fn detach(&mut self, m: u32) {
        let Member {
            class,
            older,
            newer,
            ..
        } = self.members[m as usize];
        if older != NIL {
            self.members[older as usize].newer = newer;
        } else {
            self.classes[class as usize].oldest = newer;
        }
        if newer != NIL {
            self.members[newer as usize].older = older;
        } else {
            self.classes[class as usize].newest = older;
        }
        let c = self.classes[class as usize];
        if c.oldest == NIL {
            if c.lower != NIL {
                self.classes[c.lower as usize].higher = c.higher;
            } else {
                self.lowest = c.higher;
            }
            if c.higher != NIL {
                self.classes[c.higher as usize].lower = c.lower;
            }
            self.classes[class as usize].higher = self.free_class;
            self.free_class = class;
        }
    }

    /// A new object with one request; returns its member.
    #[inline]
    fn insert(&mut self, id: u64) -> u32 {
        let member = Member {
            id,
            class: NIL,
            older: NIL,
            newer: NIL,
        };
        let m = if self.free_member != NIL {
            let m = self.free_member;
            self.free_member = self.members[m as usize].newer;
            self.members[m as usize] = member;
            m
        } else {
            assert!(self.members.len() < NIL as usize, "too many objects");
            self.members.push(member);
            (self.members.len() - 1) as u32
        };
        let c = if self.lowest != NIL && self.classes[self.lowest as usize].freq == 1 {
            self.lowest
        } else {
            self.new_class(1, NIL)
        };
        self.append(c, m);
        m
    }

    /// A hit: member `m` moves up to the next frequency's class, as its newest.
    #[inline]
    fn hit(&mut self, m: u32) {
        let c = self.members[m as usize].class;
        let Class { freq, higher, .. } = self.classes[c as usize];
        let next = freq.saturating_add(1);
        let target = if higher != NIL && self.classes[higher as usize].freq == next {
            higher
        } else {
            self.new_class(next, c)
        };
        self.detach(m);
        self.append(target, m);
    }

    #[inline]
    fn remove(&mut self, m: u32) {
        self.detach(m);
        self.members[m as usize].newer = self.free_member;
        self.free_member = m;
    }

    fn heap_bytes(&self) -> usize {
        self.members.capacity() * std::mem::size_of::<Member>()
            + self.classes.capacity() * std::mem::size_of::<Class>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(ev: &[Evicted]) -> Vec<u64> {
        ev.iter().map(|e| e.id).collect()
    }

    #[test]
    fn frequency_classes_keep_lfu_order() {
        let mut f = FrequencyClasses::default();
        let a = f.insert(1);
        let b = f.insert(2);
        let c = f.insert(3);
        f.hit(a); // 1: 2
        f.hit(b); // 2: 2
        f.hit(a); // 1: 3
        assert_eq!(f.min(), Some((c, 3)));
        f.remove(c);
        // 2 reached 2 requests after 1 did, but 1 has left for 3.
        assert_eq!(f.min(), Some((b, 2)));
        let d = f.insert(4);
        assert_eq!(f.min(), Some((d, 4)));
        f.hit(d); // 4: 2, after 2
        f.remove(b);
        assert_eq!(f.min(), Some((d, 4)));
        assert_eq!((f.freq(a), f.freq(d)), (3, 2));
        f.remove(d);
        f.remove(a);
        assert_eq!(f.min(), None);
        // Freed slots are reused.
        let e = f.insert(5);
        assert!(e == a || e == b || e == c || e == d);
        assert_eq!(f.min(), Some((e, 5)));
        assert!(f.classes.len() <= 4);
    }

    #[test]
    fn agreeing_experts_evict_without_a_draw_or_history() {
        let mut c = LeCaR::new(30, 1);
        let mut ev = Vec::new();
        for (now, id) in (1..=3).zip(1..=3) {
            c.insert(id, 10, now, &mut ev);
        }
        c.touch(2, 4, &mut Vec::new());
        c.touch(3, 5, &mut Vec::new());
        // 1 is both least recent and least frequent.
        let before = c.rng.clone().next_u64();
        c.insert(4, 10, 6, &mut ev);
        assert_eq!(ids(&ev), [1]);
        assert_eq!(c.rng.clone().next_u64(), before, "no draw");
        assert_eq!(c.in_history(1), None);
        assert_eq!(c.weights(), (0.5, 0.5));
        assert_eq!(
            (c.frequency(2), c.frequency(4), c.frequency(1)),
            (Some(2), Some(1), None)
        );
    }

    /// 1 (requested twice, least recently) is LRU's victim, 2 (requested once, before 3) is
    /// LFU's; the draw decides, and the victim's return lowers the weight of the expert that
    /// chose it by exactly the regret `d^t`.
    #[test]
    fn a_recalled_victim_lowers_its_experts_weight() {
        let mut chosen = Vec::new();
        for seed in 0..20 {
            let mut c = LeCaR::new(30, seed);
            let mut ev = Vec::new();
            c.insert(1, 10, 1, &mut ev);
            c.touch(1, 2, &mut Vec::new());
            c.insert(2, 10, 3, &mut ev);
            c.insert(3, 10, 4, &mut ev);
            c.insert(4, 10, 5, &mut ev);
            let expert = match ids(&ev)[..] {
                [1] => Expert::Lru,
                [2] => Expert::Lfu,
                ref other => panic!("evicted {other:?}"),
            };
            chosen.push(expert);
            let victim = ev[0].id;
            assert_eq!(c.in_history(victim), Some(expert));
            assert_eq!(c.weights(), (0.5, 0.5));
            assert_eq!(c.touch(victim, 15, &mut Vec::new()), None);
            assert_eq!(c.in_history(victim), None);
            let (w_lru, w_lfu) = c.weights();
            assert!((w_lru + w_lfu - 1.0).abs() < 1e-9);
            // t = 10, d = 0.005^(1/30).
            let r = 0.005f64.powf(1.0 / 30.0).powf(10.0);
            let kept = 0.5 * (-0.45 * r).exp() + 1e-10;
            let want = kept / (kept + 0.5 + 2e-10);
            let got = if expert == Expert::Lru { w_lru } else { w_lfu };
            assert!((got - want).abs() < 1e-12, "{got} {want}");
            assert!(got < 0.5);
            // An id in no history changes nothing.
            assert_eq!(c.touch(99, 16, &mut Vec::new()), None);
            assert_eq!(c.weights(), (w_lru, w_lfu));
        }
        assert!(chosen.contains(&Expert::Lru) && chosen.contains(&Expert::Lfu));
    }

    #[test]
    fn histories_hold_half_the_capacity() {
        let mut c = LeCaR::new(100, 3);
        let mut ev = Vec::new();
        let mut x = 7u64;
        for now in 1..=2000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Half the requests to 5 objects, half to 40.
            let id = (x >> 33) % if x >> 63 == 1 { 5 } else { 40 };
            if c.touch(id, now, &mut Vec::new()).is_none() {
                c.insert(id, 10 + id % 7, now, &mut ev);
            }
            assert!(c.lru_history.bytes() <= 50 && c.lfu_history.bytes() <= 50);
            assert!(c.used() <= 100);
        }
        assert!(!c.lru_history.is_empty() || !c.lfu_history.is_empty());
        // An id larger than half the capacity empties the history it goes into: 1 (60 bytes,
        // LRU's victim) leaves H_LRU empty; 2 (40, LFU's) stays in H_LFU.
        let mut seen = [false; 2];
        for seed in 0..20 {
            let mut c = LeCaR::new(100, seed);
            c.insert(1, 60, 1, &mut ev);
            c.touch(1, 2, &mut Vec::new());
            c.insert(2, 40, 3, &mut ev);
            ev.clear();
            c.insert(3, 10, 4, &mut ev);
            match ids(&ev)[..] {
                [1] => {
                    assert!(c.lru_history.is_empty() && c.lfu_history.is_empty());
                    seen[0] = true;
                }
                [2] => {
                    assert_eq!(c.in_history(2), Some(Expert::Lfu));
                    seen[1] = true;
                }
                ref other => panic!("evicted {other:?}"),
            }
        }
        assert_eq!(seen, [true, true]);
    }
}
