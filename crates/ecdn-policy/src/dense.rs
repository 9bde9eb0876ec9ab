//! The cached objects of a sampling policy (Hyperbolic, LHD), packed in a `Vec` so that a
//! uniformly random object is one random index, with an id index to find them. Removal moves
//! the last entry into the hole, so the positions the samples draw from follow insertions and
//! removals deterministically.

use hashbrown::HashTable;

use crate::list::hash;

/// An entry that knows its object id.
pub(crate) trait Keyed {
    fn id(&self) -> u64;
}

#[derive(Clone)]
pub(crate) struct Dense<T> {
    items: Vec<T>,
    /// Position in `items` by id.
    index: HashTable<u32>,
}

impl<T: Keyed> Dense<T> {
    pub(crate) fn new() -> Self {
        Dense {
            items: Vec::new(),
            index: HashTable::new(),
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Where `id` is, if present.
    #[inline]
    pub(crate) fn position(&self, id: u64) -> Option<usize> {
        let items = &self.items;
        self.index
            .find(hash(id), |&i| items[i as usize].id() == id)
            .map(|&i| i as usize)
    }

    #[inline]
    pub(crate) fn at(&self, i: usize) -> &T {
        &self.items[i]
    }

    #[inline]
    pub(crate) fn at_mut(&mut self, i: usize) -> &mut T {
        &mut self.items[i]
    }

    /// Appends `item`, whose id must be absent; returns its position.
    pub(crate) fn push(&mut self, item: T) -> usize {
        debug_assert!(self.position(item.id()).is_none());
        assert!(
            self.items.len() < u32::MAX as usize,
            "more than 2^32-1 cached objects"
        );
        let i = self.items.len();
        let id = item.id();
        self.items.push(item);
        let items = &self.items;
        self.index
            .insert_unique(hash(id), i as u32, |&j| hash(items[j as usize].id()));
        i
    }

    /// Removes the entry at `i`; the last one moves into its place.
    pub(crate) fn swap_remove(&mut self, i: usize) -> T {
        let gone = self.items.swap_remove(i);
        if let Ok(e) = self.index.find_entry(hash(gone.id()), |&j| j as usize == i) {
            e.remove();
        }
        let last = self.items.len();
        if i < last {
            let moved = self.items[i].id();
            if let Some(j) = self.index.find_mut(hash(moved), |&j| j as usize == last) {
                *j = i as u32;
            }
        }
        gone
    }

    /// The entries, in sampling order (for the policies' tests).
    #[cfg(test)]
    pub(crate) fn iter(&self) -> std::slice::Iter<'_, T> {
        self.items.iter()
    }

    /// Heap bytes of the entries and the index.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.items.capacity() * std::mem::size_of::<T>()
            + self.index.capacity() * (std::mem::size_of::<u32>() + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Keyed for (u64, u32) {
        fn id(&self) -> u64 {
            self.0
        }
    }

    #[test]
    fn removal_moves_the_last_entry_into_the_hole() {
        let mut d = Dense::new();
        for id in [10u64, 20, 30, 40] {
            d.push((id, 0u32));
        }
        assert_eq!(d.swap_remove(1), (20, 0));
        assert_eq!((d.len(), d.at(1).0), (3, 40));
        assert_eq!(d.position(40), Some(1));
        assert_eq!(d.position(20), None);
        assert_eq!(d.swap_remove(2), (30, 0));
        assert_eq!(d.swap_remove(0), (10, 0));
        assert_eq!((d.len(), d.position(40)), (1, Some(0)));
        d.at_mut(0).1 = 7;
        assert_eq!(d.swap_remove(0), (40, 7));
        assert!(d.is_empty());
    }
}
