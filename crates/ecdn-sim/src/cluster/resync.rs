//! Resync (beyond C2DN; `c2dn` only, on by default, `ClusterConfig::resync`): a read that writes back a
//! piece its object lacks rewrites the pieces the object still has too, when they are near
//! eviction, so that the object's pieces leave the caches together again.
//!
//! Why. In FIFO caches the pieces of an object, written together, leave together only while
//! their servers write at the same speed (C2DN §4.3 and App. 10.2: equal characteristic
//! times). When one leaves first, the next read writes it back — and that new piece outlives
//! the old ones, which leave one by one: the object becomes a fragment again, then unreadable
//! (a partial hit), and the write-back that follows leaves it out of step once more. Measured
//! on d-1 and d-2 (BENCHMARKS.md, issue 63), this cycle, more than the servers' speeds, keeps
//! objects unprotected and turns reads into partial hits.
//!
//! What. When a read (a hit or a partial hit) is about to write a piece its object lacks on an
//! available assigned server, and the oldest piece it found on the assigned servers has more
//! than the `resync` fraction of its server's FIFO written after it (`ages.rs`), those found
//! pieces are dropped and written again with the lacking ones: the object is admitted anew,
//! its pieces in step. Pieces on a slot's former servers (after a move) stay where they are.
//! The rewritten pieces count as writes and as write load, as any write does.
//!
//! **Reinsertion** (`ClusterConfig::reinsert`, 0.9 by default, every scheme): the same rewrite
//! on a hit that lacks nothing, when the oldest piece found is past the `reinsert` fraction of
//! its FIFO — FIFO with reinsertion (a read object near the FIFO's end starts again at its
//! head), for all of an object's pieces at once, so it acts before a first piece leaves.

use super::Sim;

impl Sim {
    /// `present`: which of the read's assigned pieces (`self.pieces`) it found on their
    /// servers; `lacking_age`: resync's age, `whole_age`: reinsertion's. Returns `present`
    /// without the pieces to be rewritten, which leave their caches here (the caller writes
    /// every available piece not in the result).
    pub(super) fn resync(
        &mut self,
        present: u32,
        lacking_age: Option<f64>,
        whole_age: Option<f64>,
    ) -> u32 {
        let found = |i: usize| present & (1 << i) != 0;
        let lacking = self
            .pieces
            .iter()
            .enumerate()
            .any(|(i, p)| !found(i) && self.placement.is_available(p.server));
        let Some(age) = (if lacking { lacking_age } else { whole_age }) else {
            return present;
        };
        if present == 0 {
            return present;
        }
        let oldest = self
            .pieces
            .iter()
            .enumerate()
            .filter(|&(i, _)| found(i))
            .map(|(_, p)| {
                let capacity = self.caches[p.server].capacity();
                self.ages
                    .age(p.server, p.key, self.written[p.server], capacity)
            })
            .fold(0.0, f64::max);
        if oldest <= age {
            return present;
        }
        if lacking {
            self.resyncs += 1;
        } else {
            self.reinserts += 1;
        }
        let mut left = present;
        for i in 0..self.pieces.len() {
            if !found(i) {
                continue;
            }
            let p = self.pieces[i];
            if let Some(size) = self.caches[p.server].remove(p.key) {
                self.protection.removed(p.key, Some(size));
                self.ages.dropped(p.server, p.key);
                left &= !(1 << i);
            }
        }
        left
    }
}
