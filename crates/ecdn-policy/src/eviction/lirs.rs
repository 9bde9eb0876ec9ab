//! LIRS (Jiang and Zhang, SIGMETRICS '02), in bytes: objects are ranked by their *inter-reference
//! recency* (IRR), the number of other objects seen between their last two accesses, rather than
//! by recency alone. Most of the cache (the LIR set, 99% of the bytes) holds objects with a low
//! IRR; the rest holds HIR objects, resident only briefly unless they come back soon.
//!
//! Three LRU lists:
//! * **Stack S** holds every LIR object, plus the resident and non-resident HIR objects seen
//!   more recently than the oldest LIR object (*stack pruning* drops HIR entries from S's
//!   bottom, so its bottom is always an LIR object). An HIR object found in S has an IRR lower
//!   than the bottom LIR object's recency, so it becomes LIR.
//! * **List Q** holds the resident HIR objects (1% of the capacity, the `hirs_limit`); its
//!   bottom is the next victim.
//! * **NH** holds the non-resident HIR entries of S, oldest first out: when S's entries add up
//!   to more than twice the capacity, the oldest of them leave S (`limit_stack`), which bounds
//!   the metadata.
//!
//! The rules, with the paper's names for the cases:
//! * Hit on an LIR object: to S's top, then prune.
//! * Hit on a resident HIR object in S: it leaves Q and becomes LIR; LIR objects leave S's
//!   bottom for Q (*evict LIR*: demoted to resident HIR, making room in Q by evicting its
//!   bottom; pruning after each) until it fits in the LIR set.
//! * Hit on a resident HIR object not in S: to Q's top, and into S's top as resident HIR.
//! * Miss on a non-resident HIR object in S: LIR objects are demoted until it fits, and it
//!   comes back as LIR.
//! * Any other miss: LIR while the LIR set has room, else resident HIR at the top of S and Q
//!   (evicting Q's bottom until it fits).
//! * Evicting Q's bottom (*evict HIR*) leaves its entry in S, if any, as non-resident.
//!
//! This follows libCacheSim's `LIRS` (its choices where the paper, written for pages, is
//! silent): the HIR set is 1% of the bytes (at least one byte); a new object larger than the LIR
//! or the HIR set is not admitted; a demoted LIR object larger than the HIR set leaves the cache;
//! a hit on a resident HIR object not in S first demotes LIR objects until the LIR set has
//! room for it as if it were to become LIR (it stays HIR). One difference: in that last case,
//! the demotions can push the object itself out of Q; libCacheSim then keeps it in S as
//! resident without counting its bytes (later requests hit an object the cache does not hold),
//! where this module puts it back at Q's top, evicting older HIR objects to make room (on the
//! CloudPhysics trace of the golden tests the case does not occur at 1, 16 or 256 MiB).
//!
//! **Size-aware option** (`lirs:max-object=SIZE`, [`Lirs::with_max_object`], issue 43): the
//! 1% rule caps what LIRS caches at 1% of its capacity (a 1 GiB cache never holds an object
//! over 10 MiB), which rules it out for a hot-object cache of large objects. With the option
//! the HIR set is the larger of 1% of the capacity and SIZE (at most half the capacity), so
//! every object up to SIZE is cached; the rules are the same. Without it, nothing changes.

use crate::list::IndexedList;
use crate::{Evicted, Eviction};

/// What an entry of stack S is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Status {
    /// In the LIR set (resident).
    #[default]
    Lir,
    /// A resident HIR object (also in Q).
    Hir,
    /// A non-resident HIR object (also in NH).
    Ghost,
}

#[derive(Clone)]
pub struct Lirs {
    capacity: u64,
    /// Bytes of the HIR set (Q); the LIR set has the rest.
    hirs_limit: u64,
    lirs_limit: u64,
    /// Bytes and objects in the LIR set.
    lirs_bytes: u64,
    lirs_objects: usize,
    stack: IndexedList<Status>,
    /// Resident HIR objects; its bytes are the HIR set's.
    queue: IndexedList,
    /// The non-resident entries of S, for `limit_stack`.
    nonresident: IndexedList,
}

impl Lirs {
    pub fn new(capacity: u64) -> Self {
        Self::with_max_object(capacity, None)
    }

    /// With the size-aware option (see the module documentation): objects up to
    /// `max_object` bytes are cached (and up to half the capacity); `None` is [`Lirs::new`].
    pub fn with_max_object(capacity: u64, max_object: Option<u64>) -> Self {
        let one_percent = ((capacity as f64 * 0.01) as u64).max(1);
        let hirs_limit = match max_object {
            None => one_percent,
            Some(m) => one_percent.max(m).min(capacity / 2).max(1),
        };
        Lirs {
            capacity,
            hirs_limit,
            lirs_limit: capacity.saturating_sub(hirs_limit),
            lirs_bytes: 0,
            lirs_objects: 0,
            stack: IndexedList::new(),
            queue: IndexedList::new(),
            nonresident: IndexedList::new(),
        }
    }

    /// Stack pruning: drops HIR entries from S's bottom until an LIR one is there (S's top
    /// entry stays, whatever it is).
    fn prune(&mut self) {
        while self.stack.len() > 1 {
            match self.stack.tail_extra_mut() {
                Some(Status::Lir) | None => break,
                Some(Status::Ghost) => {
                    if let Some((id, _, _)) = self.stack.pop_tail_entry() {
                        self.nonresident.remove(id);
                    }
                }
                Some(Status::Hir) => {
                    self.stack.pop_tail();
                }
            }
        }
    }

    /// Evicts Q's bottom object: it leaves the cache; its entry in S, if any, becomes
    /// non-resident. False if Q is empty.
    fn evict_hir(&mut self, evicted: &mut Vec<Evicted>) -> bool {
        let Some((id, size)) = self.queue.pop_tail() else {
            return false;
        };
        if let Some(status) = self.stack.extra_mut(id) {
            *status = Status::Ghost;
            self.nonresident.push_head(id, size);
        }
        evicted.push(Evicted { id, size });
        true
    }

    /// Demotes S's bottom LIR object to a resident HIR object at Q's top (evicting from Q until
    /// it fits; one larger than the HIR set leaves the cache), then prunes. False if S is empty.
    fn evict_lir(&mut self, evicted: &mut Vec<Evicted>) -> bool {
        let Some((id, size, status)) = self.stack.pop_tail_entry() else {
            return false;
        };
        match status {
            Status::Lir => {
                self.lirs_bytes -= size;
                self.lirs_objects -= 1;
                if size <= self.hirs_limit {
                    while self.queue.bytes() + size > self.hirs_limit && self.evict_hir(evicted) {}
                    self.queue.push_head(id, size);
                } else {
                    evicted.push(Evicted { id, size });
                }
            }
            // Pruning stops at S's top, so an HIR entry alone in S stays, and is at the bottom
            // once others are pushed above it: it leaves S as pruning would have removed it,
            // and stays what it was elsewhere (libCacheSim would count its bytes out of the
            // LIR set).
            Status::Hir => {}
            Status::Ghost => {
                self.nonresident.remove(id);
            }
        }
        self.prune();
        true
    }

    /// Demotes LIR objects until `size` more bytes fit in the LIR set.
    fn make_lir_room(&mut self, size: u64, evicted: &mut Vec<Evicted>) {
        while self.lirs_bytes + size > self.lirs_limit && self.evict_lir(evicted) {}
    }

    /// Bounds S: while its entries add up to more than twice the capacity, the oldest
    /// non-resident ones leave it.
    fn limit_stack(&mut self) {
        while self.stack.bytes() > 2 * self.capacity {
            let Some((id, _)) = self.nonresident.pop_tail() else {
                break;
            };
            self.stack.remove(id);
        }
    }
}

impl Eviction for Lirs {
    fn name(&self) -> &'static str {
        "lirs"
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn used(&self) -> u64 {
        self.lirs_bytes + self.queue.bytes()
    }
    fn len(&self) -> usize {
        self.lirs_objects + self.queue.len()
    }
    fn peek(&self, id: u64) -> Option<u64> {
        match self.stack.extra(id) {
            Some(Status::Lir) => self.stack.get(id),
            _ => self.queue.get(id),
        }
    }
    fn can_insert(&self, _id: u64, size: u64) -> bool {
        size <= self.hirs_limit && size <= self.lirs_limit
    }
    fn touch(&mut self, id: u64, _now: u64, evicted: &mut Vec<Evicted>) -> Option<u64> {
        // One look-up in S for the common case, an LIR hit.
        let in_stack = self
            .stack
            .cursor(id)
            .map(|at| (at, *self.stack.extra_at(at)));
        let size = match in_stack {
            // An LIR hit: to S's top; the bottom may have been this object.
            Some((at, Status::Lir)) => {
                let size = self.stack.move_to_head_at(at);
                self.prune();
                size
            }
            // A resident HIR object in S: its IRR is below the bottom LIR object's recency,
            // so it joins the LIR set.
            Some((at, Status::Hir)) => {
                let size = self.stack.move_to_head_at(at);
                self.queue.remove(id);
                self.make_lir_room(size, evicted);
                *self.stack.extra_mut(id)? = Status::Lir;
                self.lirs_bytes += size;
                self.lirs_objects += 1;
                size
            }
            Some((_, Status::Ghost)) => return None,
            // A resident HIR object not in S: to Q's top, and S's top as HIR (after making room
            // in the LIR set, as libCacheSim does).
            None => {
                let size = self.queue.move_to_head(id)?;
                let before = evicted.len();
                self.make_lir_room(size, evicted);
                if !self.queue.contains(id) {
                    // The demotions pushed it out of Q; it stays, the older ones make room.
                    if let Some(at) = evicted[before..].iter().position(|e| e.id == id) {
                        evicted.remove(before + at);
                    }
                    while self.queue.bytes() + size > self.hirs_limit && self.evict_hir(evicted) {}
                    self.queue.push_head(id, size);
                }
                self.stack.push_head_with(id, size, Status::Hir);
                size
            }
        };
        self.limit_stack();
        Some(size)
    }
    fn insert(&mut self, id: u64, size: u64, _now: u64, evicted: &mut Vec<Evicted>) {
        if self.stack.extra(id) == Some(Status::Ghost) {
            // A non-resident HIR object in S: to S's top, and into the LIR set once it has
            // room.
            self.stack.remove(id);
            self.nonresident.remove(id);
            self.stack.push_head_with(id, size, Status::Ghost);
            self.make_lir_room(size, evicted);
            if let Some(status) = self.stack.extra_mut(id) {
                *status = Status::Lir;
                self.lirs_bytes += size;
                self.lirs_objects += 1;
            }
        } else if self.lirs_bytes + size <= self.lirs_limit {
            // The LIR set is not full: every new object is LIR.
            self.stack.push_head_with(id, size, Status::Lir);
            self.lirs_bytes += size;
            self.lirs_objects += 1;
        } else {
            while self.queue.bytes() + size > self.hirs_limit && self.evict_hir(evicted) {}
            self.stack.push_head_with(id, size, Status::Hir);
            self.queue.push_head(id, size);
        }
        self.limit_stack();
    }
    fn remove(&mut self, id: u64) -> Option<u64> {
        match self.stack.extra(id) {
            Some(Status::Lir) => {
                let size = self.stack.remove(id)?;
                self.lirs_bytes -= size;
                self.lirs_objects -= 1;
                self.prune();
                Some(size)
            }
            Some(Status::Ghost) => {
                self.stack.remove(id);
                self.nonresident.remove(id);
                None
            }
            Some(Status::Hir) => {
                self.stack.remove(id);
                self.queue.remove(id)
            }
            None => self.queue.remove(id),
        }
    }
    fn clone_box(&self) -> Box<dyn Eviction> {
        Box::new(self.clone())
    }
    fn heap_bytes(&self) -> usize {
        self.stack.heap_bytes() + self.queue.heap_bytes() + self.nonresident.heap_bytes()
    }
}
