//! What relayed answers taught this node of the objects it holds no piece of: which ones are
//! coded whole. A node that knows an object is coded reads its hits itself (`c2dn/direct.rs`)
//! even without a chunk of it: it asks the bucket's servers who holds what, then reads K
//! chunks, the object once over the network. Of any other object it knows nothing worth a
//! round of questions (a replica held elsewhere crosses the network once relayed too; a miss
//! goes to the serving node anyway), so its requests are relayed, as before this node learned
//! anything. Bounded: forgotten all at once when full, as the slice directory is.

use std::collections::HashSet;
use std::sync::Mutex;

use crate::node::lock::lock;

/// Objects remembered at most.
const KINDS_MAX: usize = 100_000;

/// The objects (by key id) relayed answers said were coded whole.
#[derive(Default)]
pub(in crate::node) struct Kinds {
    coded: Mutex<HashSet<u64>>,
}

impl Kinds {
    /// Whether a relayed answer said the object with key id `id` is coded whole.
    pub(in crate::node) fn coded(&self, id: u64) -> bool {
        lock(&self.coded).contains(&id)
    }

    /// A relayed answer for the object with key id `id` said it is `coded` whole (or not).
    pub(in crate::node) fn learn(&self, id: u64, coded: bool) {
        let mut set = lock(&self.coded);
        if !coded {
            set.remove(&id);
            return;
        }
        if set.len() >= KINDS_MAX {
            set.clear();
        }
        set.insert(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learned_forgotten_and_bounded() {
        let k = Kinds::default();
        assert!(!k.coded(1));
        k.learn(1, true);
        assert!(k.coded(1));
        k.learn(1, false);
        assert!(!k.coded(1));
        for id in 0..KINDS_MAX as u64 + 1 {
            k.learn(id, true);
        }
        assert!(lock(&k.coded).len() <= KINDS_MAX);
        assert!(k.coded(KINDS_MAX as u64));
    }
}
