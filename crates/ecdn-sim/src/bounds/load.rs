//! The cache's occupancy over time under a schedule: for every gap between two requests, the
//! bytes of the intervals held across it. A segment tree with lazy range additions answers
//! "the most bytes held anywhere in `[from, to)`" and takes "hold `size` more bytes over
//! `[from, to)`" in O(log n) each, which is what checking an interval against the capacity
//! and adding it to a schedule cost (PFOO-U, `upper.rs`).

/// Occupancy per gap, `0..len`.
pub(super) struct Load {
    /// Leaves in the tree (a power of two, at least `len`).
    leaves: usize,
    /// The largest occupancy in each node's range, its pending additions included.
    max: Vec<i64>,
    /// Additions to the whole range of a node, not yet pushed to its children.
    pending: Vec<i64>,
}

impl Load {
    /// An empty cache over `len` gaps.
    pub(super) fn new(len: usize) -> Load {
        let leaves = len.max(1).next_power_of_two();
        Load {
            leaves,
            max: vec![0; 2 * leaves],
            pending: vec![0; 2 * leaves],
        }
    }

    /// Adds `delta` bytes over `[from, to)`.
    pub(super) fn add(&mut self, from: usize, to: usize, delta: i64) {
        if from < to {
            self.add_in(1, 0, self.leaves, from, to, delta);
        }
    }

    /// The most bytes held in `[from, to)` (0 for an empty range).
    pub(super) fn max(&self, from: usize, to: usize) -> i64 {
        if from >= to {
            return 0;
        }
        self.max_in(1, 0, self.leaves, from, to)
    }

    fn add_in(&mut self, node: usize, lo: usize, hi: usize, from: usize, to: usize, delta: i64) {
        if to <= lo || hi <= from {
            return;
        }
        if from <= lo && hi <= to {
            self.max[node] += delta;
            self.pending[node] += delta;
            return;
        }
        let mid = (lo + hi) / 2;
        self.add_in(2 * node, lo, mid, from, to, delta);
        self.add_in(2 * node + 1, mid, hi, from, to, delta);
        self.max[node] = self.pending[node] + self.max[2 * node].max(self.max[2 * node + 1]);
    }

    fn max_in(&self, node: usize, lo: usize, hi: usize, from: usize, to: usize) -> i64 {
        if to <= lo || hi <= from {
            return i64::MIN;
        }
        if from <= lo && hi <= to {
            return self.max[node];
        }
        let mid = (lo + hi) / 2;
        let below = self.max_in(2 * node, lo, mid, from, to).max(self.max_in(
            2 * node + 1,
            mid,
            hi,
            from,
            to,
        ));
        below + self.pending[node]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn it_agrees_with_an_array(
            len in 1usize..40,
            ops in prop::collection::vec((0usize..40, 0usize..40, -50i64..50), 0..60),
        ) {
            let mut load = Load::new(len);
            let mut plain = vec![0i64; len];
            for (a, b, delta) in ops {
                let (from, to) = (a.min(b).min(len), a.max(b).min(len));
                load.add(from, to, delta);
                for x in &mut plain[from..to] {
                    *x += delta;
                }
                for f in 0..len {
                    for t in f + 1..=len {
                        let want = plain[f..t].iter().copied().max().unwrap();
                        prop_assert_eq!(load.max(f, t), want);
                    }
                }
            }
        }
    }
}
