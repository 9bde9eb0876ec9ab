//! [`ByteStack`]: a sequence of sized entries that supports insertion at a *byte* offset from
//! the front, for the "future LRU stack" of model-driven trace generation.
//!
//! JEDI / TRAGEN (IMC'21, IMC'22) generate a trace from a footprint-descriptor model by keeping
//! the objects in the order in which they will be requested next: the front object is the next
//! request. Each step pops the front object and either re-inserts it at a sampled stack distance
//! — the number of bytes of distinct objects requested before it comes back — or drops it and
//! pushes fresh objects at the back. The sequence holds tens of millions of objects and up to
//! ~10¹³ bytes, and a generator runs millions of steps per second, so every operation must be
//! O(log n) with few cache misses.
//!
//! # Structure
//!
//! A counted B+tree whose nodes live in two arenas (`Vec`s indexed by `u32`, with free lists):
//!
//! * a leaf holds up to [`LEAF_CAP`] entries `(size, value)` in order;
//! * an internal node holds up to [`INNER_CAP`] children together with each child's byte total
//!   (`u64`), so [`ByteStack::insert_at`] descends by subtracting whole-child totals from the
//!   offset, and [`ByteStack::pop_front`] walks the leftmost path.
//!
//! 64 slots per node measured best on pop + insert steps with 16 million entries: 32 to 128
//! were no faster, and larger leaves clearly slower. A step is bound by the cache misses on the
//! leaf of a deep insertion.
//!
//! Full nodes split in halves, except when the new entry goes at the very end (appends), where
//! the full node is kept and the new node starts with just that entry, so that `push_back` fills
//! leaves completely. Nodes are never merged: a node is freed when it becomes empty (which only
//! happens on the leftmost path, by `pop_front`) and a root with a single child is collapsed.
//! Every node off the leftmost and rightmost paths is therefore at least half full, and the
//! depth stays O(log n).

/// Maximum number of entries of a leaf.
const LEAF_CAP: usize = 64;
/// Maximum number of children of an internal node.
const INNER_CAP: usize = 64;

/// Sentinel id of a root that does not exist yet (no entry was ever stored).
const NIL: u32 = u32::MAX;

/// One node: `len` used slots of parallel arrays. Leaves store `(size, value)`, internal nodes
/// `(byte total of the child, child id)`. `len` comes first and nodes are cache-line aligned,
/// so that `len` shares a cache line with the first keys.
#[repr(C, align(64))]
struct Node<K: Copy, V: Copy, const N: usize> {
    len: u32,
    keys: [K; N],
    vals: [V; N],
}

impl<K: Copy + Into<u64>, V: Copy, const N: usize> Node<K, V, N> {
    /// A node holding just `(k, v)`; the unused slots are filled with copies of it.
    fn single(k: K, v: V) -> Self {
        Node {
            len: 1,
            keys: [k; N],
            vals: [v; N],
        }
    }

    fn len(&self) -> usize {
        self.len as usize
    }

    /// Sum of the keys (byte total of the node).
    fn total(&self) -> u64 {
        self.keys[..self.len()].iter().map(|&k| k.into()).sum()
    }

    /// Inserts at `pos`; the node must not be full.
    fn insert(&mut self, pos: usize, k: K, v: V) {
        let n = self.len();
        self.keys.copy_within(pos..n, pos + 1);
        self.vals.copy_within(pos..n, pos + 1);
        self.keys[pos] = k;
        self.vals[pos] = v;
        self.len += 1;
    }

    /// Removes and returns the first slot; the node must not be empty.
    fn remove_front(&mut self) -> (K, V) {
        let n = self.len();
        let front = (self.keys[0], self.vals[0]);
        self.keys.copy_within(1..n, 0);
        self.vals.copy_within(1..n, 0);
        self.len -= 1;
        front
    }
}

/// The nodes of one kind, indexed by `u32` id, with a free list.
struct Arena<K: Copy, V: Copy, const N: usize> {
    nodes: Vec<Node<K, V, N>>,
    free: Vec<u32>,
    /// Split threshold: `N`, smaller only in tests (to exercise deep trees).
    cap: usize,
}

impl<K: Copy + Into<u64>, V: Copy, const N: usize> Arena<K, V, N> {
    fn new(cap: usize) -> Self {
        assert!((2..=N).contains(&cap));
        Arena {
            nodes: Vec::new(),
            free: Vec::new(),
            cap,
        }
    }

    /// Stores `node` in a free slot (or a new one) and returns its id.
    fn alloc(&mut self, node: Node<K, V, N>) -> u32 {
        if let Some(id) = self.free.pop() {
            self.nodes[id as usize] = node;
            return id;
        }
        assert!(self.nodes.len() < NIL as usize, "ByteStack: too many nodes");
        self.nodes.push(node);
        (self.nodes.len() - 1) as u32
    }

    /// Inserts `(k, v)` at `pos` of node `id`, splitting the node if it is full. After a split,
    /// returns the new right sibling and its byte total. `append` says that the node is on the
    /// rightmost path and `(k, v)` goes to the back of the sequence.
    fn insert(&mut self, id: u32, pos: usize, k: K, v: V, append: bool) -> Option<(u32, u64)> {
        let node = &mut self.nodes[id as usize];
        let n = node.len();
        if n < self.cap {
            node.insert(pos, k, v);
            return None;
        }
        // Appending: keep the full node and start the new one with just (k, v).
        let mut right = Node::single(k, v);
        if !(append && pos == n) {
            // Move the upper half to `right`, then insert into the half that holds `pos`.
            let half = n / 2;
            right.keys[..n - half].copy_from_slice(&node.keys[half..n]);
            right.vals[..n - half].copy_from_slice(&node.vals[half..n]);
            right.len = (n - half) as u32;
            node.len = half as u32;
            if pos <= half {
                node.insert(pos, k, v);
            } else {
                right.insert(pos - half, k, v);
            }
        }
        let total = right.total();
        Some((self.alloc(right), total))
    }
}

impl<K: Copy, V: Copy, const N: usize> std::ops::Index<u32> for Arena<K, V, N> {
    type Output = Node<K, V, N>;
    fn index(&self, id: u32) -> &Self::Output {
        &self.nodes[id as usize]
    }
}

impl<K: Copy, V: Copy, const N: usize> std::ops::IndexMut<u32> for Arena<K, V, N> {
    fn index_mut(&mut self, id: u32) -> &mut Self::Output {
        &mut self.nodes[id as usize]
    }
}

/// A sequence of sized entries with insertion at a byte offset from the front.
///
/// See the [module documentation](self) for the structure. All operations are O(log n).
pub(crate) struct ByteStack<T: Copy> {
    leaves: Arena<u32, T, LEAF_CAP>,
    inners: Arena<u64, u32, INNER_CAP>,
    /// Root node id: a leaf if `height == 0`, [`NIL`] before the first insertion.
    root: u32,
    /// Number of internal levels above the leaves.
    height: usize,
    len: usize,
    bytes: u64,
    /// Scratch: the internal nodes and child indices on the path of the current operation.
    path: Vec<(u32, usize)>,
}

impl<T: Copy> ByteStack<T> {
    /// An empty stack.
    pub(crate) fn new() -> Self {
        Self::with_caps(LEAF_CAP, INNER_CAP)
    }

    /// An empty stack whose leaves and internal nodes split at `leaf_cap` and `inner_cap` slots.
    fn with_caps(leaf_cap: usize, inner_cap: usize) -> Self {
        ByteStack {
            leaves: Arena::new(leaf_cap),
            inners: Arena::new(inner_cap),
            root: NIL,
            height: 0,
            len: 0,
            bytes: 0,
            path: Vec::new(),
        }
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// True if there are no entries.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sum of the sizes of all entries.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Appends an entry at the back.
    pub(crate) fn push_back(&mut self, size: u32, value: T) {
        if self.root == NIL {
            return self.init_root(size, value);
        }
        self.path.clear();
        let mut node = self.root;
        for _ in 0..self.height {
            let inner = &mut self.inners[node];
            let last = inner.len() - 1;
            inner.keys[last] += u64::from(size);
            self.path.push((node, last));
            node = inner.vals[last];
        }
        let pos = self.leaves[node].len();
        self.insert_in_leaf(node, pos, size, value);
    }

    /// Removes and returns the front entry (size, value).
    pub(crate) fn pop_front(&mut self) -> Option<(u32, T)> {
        if self.len == 0 {
            return None;
        }
        self.path.clear();
        let mut node = self.root;
        for _ in 0..self.height {
            self.path.push((node, 0));
            node = self.inners[node].vals[0];
        }
        let leaf = &mut self.leaves[node];
        let (size, value) = leaf.remove_front();
        // Walk up: free the emptied nodes, then subtract the size from the front totals.
        let mut emptied = leaf.len == 0 && self.height > 0;
        if emptied {
            self.leaves.free.push(node);
        }
        for &(id, _) in self.path.iter().rev() {
            let inner = &mut self.inners[id];
            if emptied {
                inner.remove_front();
                emptied = inner.len == 0;
                if emptied {
                    self.inners.free.push(id);
                }
            } else {
                inner.keys[0] -= u64::from(size);
            }
        }
        // The root (which has ≥ 2 children) never empties; collapse it while it has one child.
        while self.height > 0 && self.inners[self.root].len == 1 {
            self.inners.free.push(self.root);
            self.root = self.inners[self.root].vals[0];
            self.height -= 1;
        }
        self.len -= 1;
        self.bytes -= u64::from(size);
        Some((size, value))
    }

    /// Inserts so that the entries ahead of the new one are exactly the longest prefix whose
    /// total size is <= `offset`. offset 0 => new front (ahead of a front entry of any size);
    /// offset >= bytes() => back. Zero-size entries: those whose prefix end is <= offset are
    /// ahead. Returns the number of bytes ahead of the inserted entry (that prefix's total).
    #[cfg(test)]
    pub(crate) fn insert_at(&mut self, offset: u64, size: u32, value: T) -> u64 {
        self.insert(offset, size, value, None)
    }

    /// Inserts at `offset` like [`ByteStack::insert_at`], except that the entry straddling it
    /// (starting before `offset` and ending after it) is also ahead with probability
    /// (offset − its start) / its size: ahead iff `coin % size < offset − start`. With a random
    /// `coin` the bytes ahead are `offset` in expectation; always rounding down instead would
    /// put every offset that falls inside a large entry in front of it. Returns the bytes ahead.
    pub(crate) fn insert_near(&mut self, offset: u64, size: u32, value: T, coin: u64) -> u64 {
        self.insert(offset, size, value, Some(coin))
    }

    fn insert(&mut self, offset: u64, size: u32, value: T, coin: Option<u64>) -> u64 {
        if self.root == NIL {
            self.init_root(size, value);
            return 0;
        }
        self.path.clear();
        let mut rest = offset;
        let mut node = self.root;
        for _ in 0..self.height {
            let inner = &mut self.inners[node];
            // Skip the children that lie entirely within the offset (the last one is taken
            // regardless: `rest` may exceed it when inserting at the back).
            let last = inner.len() - 1;
            let mut i = 0;
            while i < last && inner.keys[i] <= rest {
                rest -= inner.keys[i];
                i += 1;
            }
            inner.keys[i] += u64::from(size);
            self.path.push((node, i));
            node = inner.vals[i];
        }
        let leaf = &self.leaves[node];
        // Software prefetch: load every cache line of the values now, so that their cache misses
        // overlap the scan of the sizes instead of following it in the shift of the insertion
        // (a leaf deep in the stack is usually cold; this makes random insertions ~20% faster).
        for i in (0..leaf.len()).step_by((64 / std::mem::size_of::<T>().max(1)).max(1)) {
            std::hint::black_box(leaf.vals[i]);
        }
        let mut pos = 0;
        while pos < leaf.len() && u64::from(leaf.keys[pos]) <= rest {
            rest -= u64::from(leaf.keys[pos]);
            pos += 1;
        }
        // The straddling entry, if any, is `pos` (it is larger than `rest`, hence not empty).
        if let Some(coin) = coin {
            if pos < leaf.len() && rest > 0 && coin % u64::from(leaf.keys[pos]) < rest {
                rest = rest.wrapping_sub(u64::from(leaf.keys[pos]));
                pos += 1;
            }
        }
        self.insert_in_leaf(node, pos, size, value);
        offset.wrapping_sub(rest)
    }

    /// Creates the first root leaf (a node needs a value to fill its slots with).
    fn init_root(&mut self, size: u32, value: T) {
        self.root = self.leaves.alloc(Node::single(size, value));
        self.len = 1;
        self.bytes = u64::from(size);
    }

    /// Inserts into leaf `leaf` at `pos`, after the totals on `self.path` (leading to the leaf)
    /// have been increased by `size`; splits nodes up the path as needed.
    fn insert_in_leaf(&mut self, leaf: u32, pos: usize, size: u32, value: T) {
        self.len += 1;
        self.bytes += u64::from(size);
        // An append (at the end of the rightmost leaf) splits unevenly all the way up. The end
        // of another leaf can be reached too (by `insert_near`, when the straddling entry is the
        // leaf's last): that is no append.
        let append = pos == self.leaves[leaf].len()
            && self
                .path
                .iter()
                .all(|&(id, i)| i + 1 == self.inners[id].len());
        let mut split = self.leaves.insert(leaf, pos, size, value, append);
        for &(id, i) in self.path.iter().rev() {
            let Some((new, total)) = split else {
                return;
            };
            self.inners[id].keys[i] -= total;
            split = self.inners.insert(id, i + 1, total, new, append);
        }
        if let Some((new, total)) = split {
            let mut root = Node::single(self.bytes - total, self.root);
            root.insert(1, total, new);
            self.root = self.inners.alloc(root);
            self.height += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    /// The naive reference: entries in order, O(n) per operation.
    #[derive(Default)]
    struct Model(VecDeque<(u32, u64)>);

    impl Model {
        fn bytes(&self) -> u64 {
            self.prefix(self.0.len())
        }
        fn insert_at(&mut self, offset: u64, size: u32, value: u64) -> u64 {
            self.insert_near(offset, size, value, None)
        }
        fn insert_near(&mut self, offset: u64, size: u32, value: u64, coin: Option<u64>) -> u64 {
            let (mut pos, mut ahead) = (0, 0u64);
            while pos < self.0.len() && ahead + u64::from(self.0[pos].0) <= offset {
                ahead += u64::from(self.0[pos].0);
                pos += 1;
            }
            if let (Some(coin), Some(&(s, _))) = (coin, self.0.get(pos)) {
                if offset > ahead && coin % u64::from(s) < offset - ahead {
                    ahead += u64::from(s);
                    pos += 1;
                }
            }
            self.0.insert(pos, (size, value));
            ahead
        }
        /// Byte offset of the end of the first `n` entries.
        fn prefix(&self, n: usize) -> u64 {
            self.0.iter().take(n).map(|&(s, _)| u64::from(s)).sum()
        }
    }

    /// Checks the tree invariants: exact totals, uniform depth, no empty non-root node, nodes
    /// off the leftmost and rightmost paths at least half full (as far as `cap / 2` goes).
    fn check<T: Copy>(s: &ByteStack<T>) {
        fn walk<T: Copy>(s: &ByteStack<T>, id: u32, h: usize, ends: [bool; 2]) -> (usize, u64) {
            let spine = ends[0] || ends[1];
            if h == 0 {
                let leaf = &s.leaves[id];
                assert!(spine || leaf.len() >= s.leaves.cap / 2, "underfull leaf");
                return (leaf.len(), leaf.total());
            }
            let inner = &s.inners[id];
            assert!(inner.len() >= 1 && inner.len() <= s.inners.cap);
            assert!(spine || inner.len() >= s.inners.cap / 2, "underfull node");
            let mut acc = (0, 0);
            for i in 0..inner.len() {
                let ends = [ends[0] && i == 0, ends[1] && i + 1 == inner.len()];
                let (n, b) = walk(s, inner.vals[i], h - 1, ends);
                assert!(n > 0, "empty non-root node");
                assert_eq!(b, inner.keys[i], "wrong child total");
                acc = (acc.0 + n, acc.1 + b);
            }
            acc
        }
        if s.root == NIL {
            return assert_eq!((s.len, s.bytes), (0, 0));
        }
        if s.height > 0 {
            assert!(s.inners[s.root].len() >= 2, "uncollapsed root");
        }
        assert_eq!(walk(s, s.root, s.height, [true; 2]), (s.len, s.bytes));
    }

    #[derive(Clone, Debug)]
    enum Op {
        Push(u32),
        Pop,
        /// `Insert(how, x, size, coin)`: `how` picks the kind of offset derived from `x` when run;
        /// with a coin, [`ByteStack::insert_near`].
        Insert(u8, u64, u32, Option<u64>),
    }

    fn size() -> impl Strategy<Value = u32> {
        prop_oneof![Just(0u32), 1..100u32, Just(u32::MAX), any::<u32>()]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            2 => size().prop_map(Op::Push),
            2 => Just(Op::Pop),
            5 => (0..4u8, any::<u64>(), size(), proptest::option::of(any::<u64>()))
                .prop_map(|(how, x, size, coin)| Op::Insert(how, x, size, coin)),
        ]
    }

    /// Runs `ops` on a stack with node capacity `cap` and on the model, comparing every result.
    fn run(cap: usize, ops: &[Op]) {
        let mut s = ByteStack::with_caps(cap, cap);
        let mut m = Model::default();
        for (id, op) in ops.iter().enumerate() {
            if id % 64 == 0 {
                check(&s);
            }
            let id = id as u64;
            match *op {
                Op::Push(size) => {
                    s.push_back(size, id);
                    m.0.push_back((size, id));
                }
                Op::Pop => assert_eq!(s.pop_front(), m.0.pop_front()),
                Op::Insert(how, x, size, coin) => {
                    let offset = match how {
                        0 => x % (m.bytes() + 2),
                        // Exactly at an entry boundary, or one byte before it.
                        1 | 2 => m
                            .prefix((x % (m.0.len() as u64 + 1)) as usize)
                            .saturating_sub(u64::from(how - 1)),
                        _ => x,
                    };
                    let ahead = match coin {
                        None => s.insert_at(offset, size, id),
                        Some(c) => s.insert_near(offset, size, id, c),
                    };
                    assert_eq!(ahead, m.insert_near(offset, size, id, coin));
                }
            }
            assert_eq!(
                (s.len(), s.bytes(), s.is_empty()),
                (m.0.len(), m.bytes(), m.0.is_empty())
            );
        }
        check(&s);
        while let Some(e) = s.pop_front() {
            assert_eq!(Some(e), m.0.pop_front());
        }
        assert!(m.0.is_empty() && s.bytes() == 0);
        check(&s);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn byte_stack_matches_model(cap in prop_oneof![2..6usize, Just(LEAF_CAP.min(INNER_CAP))],
                                    ops in proptest::collection::vec(op(), 0..3000)) {
            run(cap, &ops);
        }
    }

    #[test]
    fn byte_stack_edge_cases() {
        let mut s = ByteStack::new();
        assert_eq!((s.pop_front(), s.len(), s.bytes()), (None, 0, 0));
        assert_eq!(s.insert_at(5, 10, 'a'), 0);
        assert_eq!(s.insert_at(0, 0, 'b'), 0); // new front, ahead of a front entry of any size
        assert_eq!(s.insert_at(0, 3, 'c'), 0); // zero-size front entry ends at 0 <= 0: ahead
        assert_eq!(s.insert_at(u64::MAX, 4, 'd'), 13); // b c a | d
        s.push_back(0, 'e');
        assert_eq!(s.insert_at(12, 1, 'f'), 3); // 'a' ends at 13 > 12
        assert_eq!(s.insert_at(14, 2, 'g'), 14); // 'f' 'a' end at 4, 14
        assert_eq!(s.insert_at(20, 5, 'h'), 20); // 'd' ends at 20; zero-size 'e' ends at 20 too
        assert_eq!((s.len(), s.bytes()), (8, 25));
        let order: String = std::iter::from_fn(|| s.pop_front().map(|(_, c)| c)).collect();
        assert_eq!(order, "bcfagdeh");
        assert_eq!((s.len(), s.bytes(), s.is_empty()), (0, 0, true));
        assert_eq!(s.insert_at(7, 1, 'i'), 0);
        assert_eq!(s.pop_front(), Some((1, 'i')));
    }

    #[test]
    fn byte_stack_large_deterministic() {
        let mut rng = Rng::new(7);
        let mut s = ByteStack::new();
        let mut m = Model::default();
        let mut next = 0u64;
        let size = |rng: &mut Rng| match rng.below(10) {
            0 => 0,
            1 => u32::MAX,
            _ => rng.below(1 << 20) as u32,
        };
        while s.len() < 200_000 {
            let sz = size(&mut rng);
            s.push_back(sz, next);
            m.0.push_back((sz, next));
            next += 1;
        }
        for step in 0..100_000 {
            let (sz, v) = s.pop_front().unwrap();
            assert_eq!(m.0.pop_front(), Some((sz, v)));
            // Mostly near the front (cheap for the model), sometimes anywhere or at the back.
            let offset = match rng.below(100) {
                0 => rng.below(s.bytes() + 1),
                1 => u64::MAX,
                _ => rng.below(1 << 30),
            };
            if step % 3 == 0 {
                let sz = size(&mut rng);
                s.push_back(sz, next);
                m.0.push_back((sz, next));
                next += 1;
            } else {
                assert_eq!(s.insert_at(offset, sz, v), m.insert_at(offset, sz, v));
            }
        }
        check(&s);
        assert_eq!((s.len(), s.bytes()), (m.0.len(), m.bytes()));
        assert!(s.len() >= 200_000);
        for e in m.0 {
            assert_eq!(s.pop_front(), Some(e));
        }
        assert!(s.is_empty());
    }

    /// Throughput of the JEDI step (pop the front, re-insert at a sampled stack distance).
    /// Run with `cargo test --release -p ecdn-trace byte_stack_speed -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn byte_stack_speed() {
        const ENTRIES: usize = 16_000_000;
        const STEPS: usize = 5_000_000;
        let mut rng = Rng::new(1);
        let mut s = ByteStack::new();
        let start = std::time::Instant::now();
        let (lo, hi) = ((1u64 << 10) as f64, (2u64 << 20) as f64);
        for i in 0..ENTRIES as u64 {
            let size = (lo * (hi / lo).powf(rng.f64())) as u32;
            s.push_back(size, [i, !i]);
        }
        println!(
            "fill: {ENTRIES} entries, {} bytes, {:.2?}",
            s.bytes(),
            start.elapsed()
        );
        let start = std::time::Instant::now();
        let mut ahead_sum = 0u64;
        for _ in 0..STEPS {
            let (size, v) = s.pop_front().unwrap();
            let offset = if rng.chance(0.6) {
                rng.below(200_000_000)
            } else {
                rng.below(s.bytes())
            };
            ahead_sum = ahead_sum.wrapping_add(s.insert_at(offset, size, v));
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "{STEPS} steps in {secs:.2} s: {:.2} M steps/s (height {}, {} leaves, {} inner; checksum {ahead_sum})",
            STEPS as f64 / secs / 1e6,
            s.height,
            s.leaves.nodes.len() - s.leaves.free.len(),
            s.inners.nodes.len() - s.inners.free.len(),
        );
    }
}
