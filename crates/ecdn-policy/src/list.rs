//! An indexed doubly linked list: a slab of nodes threaded into a list, found by id through a
//! `hashbrown::HashTable` of slab indices. It is the shared core of LRU, FIFO, CLOCK, SIEVE and
//! the queues of S3-FIFO: O(1) lookup, push to head, move to head, unlink and pop from tail,
//! about 29 bytes per object (a 24-byte node plus a 4-byte index and a control byte in the
//! table) when the node carries no extra value `T`, which CLOCK and SIEVE use for their
//! counters. A [`Cursor`] names a node for policies that walk the list with a hand (SIEVE).

use hashbrown::HashTable;

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Node<T> {
    id: u64,
    size: u64,
    prev: u32,
    next: u32,
    extra: T,
}

/// A node of the list, for walking it (valid until that node is removed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cursor(u32);

/// The list: head is the most recently inserted/moved entry, tail the next victim. Each entry
/// carries a value `T` besides its id and size (none by default).
#[derive(Clone)]
pub struct IndexedList<T: Copy = ()> {
    nodes: Vec<Node<T>>,
    free: u32,
    table: HashTable<u32>,
    head: u32,
    tail: u32,
    len: usize,
    bytes: u64,
}

/// The hash of an object id in the policies' hash tables: a fixed, fast mixer (ids are often
/// sequential block numbers; mix them well).
#[inline]
pub(crate) fn hash(id: u64) -> u64 {
    let x = id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^ (x >> 29)
}

impl<T: Copy + Default> Default for IndexedList<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Copy + Default> IndexedList<T> {
    pub fn new() -> Self {
        IndexedList {
            nodes: Vec::new(),
            free: NIL,
            table: HashTable::new(),
            head: NIL,
            tail: NIL,
            len: 0,
            bytes: 0,
        }
    }

    /// Number of entries.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sum of entry sizes.
    #[inline]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    #[inline]
    fn find(&self, id: u64) -> Option<u32> {
        let nodes = &self.nodes;
        self.table
            .find(hash(id), |&i| nodes[i as usize].id == id)
            .copied()
    }

    /// Size of `id` if present.
    #[inline]
    pub fn get(&self, id: u64) -> Option<u64> {
        self.find(id).map(|i| self.nodes[i as usize].size)
    }

    #[inline]
    pub fn contains(&self, id: u64) -> bool {
        self.find(id).is_some()
    }

    #[inline]
    fn unlink(&mut self, i: u32) {
        let Node { prev, next, .. } = self.nodes[i as usize];
        if prev != NIL {
            self.nodes[prev as usize].next = next;
        } else {
            self.head = next;
        }
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        } else {
            self.tail = prev;
        }
    }

    #[inline]
    fn link_head(&mut self, i: u32) {
        let old = self.head;
        {
            let n = &mut self.nodes[i as usize];
            n.prev = NIL;
            n.next = old;
        }
        if old != NIL {
            self.nodes[old as usize].prev = i;
        } else {
            self.tail = i;
        }
        self.head = i;
    }

    /// Moves `id` to the head; returns its size, or `None` if absent.
    #[inline]
    pub fn move_to_head(&mut self, id: u64) -> Option<u64> {
        let i = self.find(id)?;
        if self.head != i {
            self.unlink(i);
            self.link_head(i);
        }
        Some(self.nodes[i as usize].size)
    }

    /// [`IndexedList::move_to_head`] that also returns the entry's value.
    #[inline]
    pub fn move_to_head_entry(&mut self, id: u64) -> Option<(u64, T)> {
        let i = self.find(id)?;
        if self.head != i {
            self.unlink(i);
            self.link_head(i);
        }
        let n = &self.nodes[i as usize];
        Some((n.size, n.extra))
    }

    /// Inserts an absent `id` at the head. The caller guarantees it is absent.
    #[inline]
    pub fn push_head(&mut self, id: u64, size: u64) {
        self.push_head_with(id, size, T::default());
    }

    /// [`IndexedList::push_head`] with the entry's value.
    #[inline]
    pub fn push_head_with(&mut self, id: u64, size: u64, extra: T) {
        debug_assert!(!self.contains(id));
        let node = Node {
            id,
            size,
            prev: NIL,
            next: NIL,
            extra,
        };
        let i = if self.free != NIL {
            let i = self.free;
            self.free = self.nodes[i as usize].next;
            self.nodes[i as usize] = node;
            i
        } else {
            assert!(
                self.nodes.len() < NIL as usize,
                "more than 2^32-1 cached objects"
            );
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        };
        let nodes = &self.nodes;
        self.table
            .insert_unique(hash(id), i, |&j| hash(nodes[j as usize].id));
        self.link_head(i);
        self.len += 1;
        self.bytes += size;
    }

    fn release(&mut self, i: u32) -> (u64, u64) {
        let Node { id, size, .. } = self.nodes[i as usize];
        let nodes = &self.nodes;
        if let Ok(e) = self
            .table
            .find_entry(hash(id), |&j| nodes[j as usize].id == id)
        {
            e.remove();
        }
        self.unlink(i);
        self.nodes[i as usize].next = self.free;
        self.free = i;
        self.len -= 1;
        self.bytes -= size;
        (id, size)
    }

    /// Removes `id`; returns its size.
    pub fn remove(&mut self, id: u64) -> Option<u64> {
        let i = self.find(id)?;
        Some(self.release(i).1)
    }

    /// Removes `id`; returns its size and value.
    #[inline]
    pub fn remove_entry(&mut self, id: u64) -> Option<(u64, T)> {
        let i = self.find(id)?;
        let extra = self.nodes[i as usize].extra;
        Some((self.release(i).1, extra))
    }

    /// Removes and returns the tail entry `(id, size)`.
    #[inline]
    pub fn pop_tail(&mut self) -> Option<(u64, u64)> {
        if self.tail == NIL {
            None
        } else {
            Some(self.release(self.tail))
        }
    }

    /// Removes and returns the tail entry `(id, size, value)`.
    #[inline]
    pub fn pop_tail_entry(&mut self) -> Option<(u64, u64, T)> {
        if self.tail == NIL {
            return None;
        }
        let extra = self.nodes[self.tail as usize].extra;
        let (id, size) = self.release(self.tail);
        Some((id, size, extra))
    }

    /// A ghost list's insertion (S3-FIFO's ghost, 2Q's A1out): remembers `id` at the head,
    /// dropping the oldest entries until its size fits within `capacity` bytes; an id already
    /// remembered, or larger than `capacity`, is left as it is.
    pub fn remember(&mut self, id: u64, size: u64, capacity: u64) {
        if self.contains(id) || size > capacity {
            return;
        }
        while self.bytes + size > capacity {
            self.pop_tail();
        }
        self.push_head(id, size);
    }

    /// The tail entry without removing it.
    pub fn peek_tail(&self) -> Option<(u64, u64)> {
        (self.tail != NIL).then(|| {
            let n = &self.nodes[self.tail as usize];
            (n.id, n.size)
        })
    }

    /// Entries from head to tail.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let mut cur = self.head;
        std::iter::from_fn(move || {
            if cur == NIL {
                return None;
            }
            let n = &self.nodes[cur as usize];
            cur = n.next;
            Some((n.id, n.size))
        })
    }

    /// Entries from tail to head.
    pub fn iter_from_tail(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let mut cur = self.tail;
        std::iter::from_fn(move || {
            if cur == NIL {
                return None;
            }
            let n = &self.nodes[cur as usize];
            cur = n.prev;
            Some((n.id, n.size))
        })
    }

    /// The value of `id`, if present.
    #[inline]
    pub fn extra(&self, id: u64) -> Option<T> {
        self.find(id).map(|i| self.nodes[i as usize].extra)
    }

    /// The value of `id`, to change it, if present.
    #[inline]
    pub fn extra_mut(&mut self, id: u64) -> Option<&mut T> {
        let i = self.find(id)?;
        Some(&mut self.nodes[i as usize].extra)
    }

    /// The tail entry's value, to change it.
    #[inline]
    pub fn tail_extra_mut(&mut self) -> Option<&mut T> {
        (self.tail != NIL).then(|| &mut self.nodes[self.tail as usize].extra)
    }

    /// Moves the tail entry to the head (a FIFO's reinsertion).
    #[inline]
    pub fn tail_to_head(&mut self) {
        let i = self.tail;
        if i != NIL && i != self.head {
            self.unlink(i);
            self.link_head(i);
        }
    }

    /// The tail's cursor.
    #[inline]
    pub fn tail(&self) -> Option<Cursor> {
        (self.tail != NIL).then_some(Cursor(self.tail))
    }

    /// The cursor of `id`, if present.
    #[inline]
    pub fn cursor(&self, id: u64) -> Option<Cursor> {
        self.find(id).map(Cursor)
    }

    /// The entry before `c` (towards the head), if any.
    #[inline]
    pub fn prev(&self, c: Cursor) -> Option<Cursor> {
        let p = self.nodes[c.0 as usize].prev;
        (p != NIL).then_some(Cursor(p))
    }

    /// The value at `c`, to change it.
    #[inline]
    pub fn extra_at(&mut self, c: Cursor) -> &mut T {
        &mut self.nodes[c.0 as usize].extra
    }

    /// Moves the entry at `c` to the head; returns its size.
    #[inline]
    pub fn move_to_head_at(&mut self, c: Cursor) -> u64 {
        if self.head != c.0 {
            self.unlink(c.0);
            self.link_head(c.0);
        }
        self.nodes[c.0 as usize].size
    }

    /// Removes the entry at `c`; returns `(id, size)`.
    #[inline]
    pub fn remove_at(&mut self, c: Cursor) -> (u64, u64) {
        self.release(c.0)
    }

    /// Heap bytes held by the structure (for memory-per-object reports).
    pub fn heap_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node<T>>()
            + self.table.capacity() * (std::mem::size_of::<u32>() + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_without_a_value_stays_24_bytes() {
        assert_eq!(std::mem::size_of::<Node<()>>(), 24);
        assert_eq!(std::mem::size_of::<Node<bool>>(), 32);
    }

    #[test]
    fn cursors_walk_towards_the_head() {
        let mut l: IndexedList<u8> = IndexedList::new();
        for id in 1..=3 {
            l.push_head_with(id, 10, id as u8);
        }
        // Head 3, 2, 1 tail.
        let t = l.tail().unwrap();
        assert_eq!(*l.extra_at(t), 1);
        let p = l.prev(t).unwrap();
        assert_eq!(*l.extra_at(p), 2);
        assert_eq!(l.remove_at(p), (2, 10));
        assert_eq!(l.prev(t), l.cursor(3));
        l.tail_to_head();
        assert_eq!(l.iter().map(|x| x.0).collect::<Vec<_>>(), [1, 3]);
        *l.tail_extra_mut().unwrap() = 9;
        assert_eq!(l.extra_mut(3).copied(), Some(9));
        assert_eq!(l.extra(3), Some(9));
        // 1 is the head; moving 3 there hands back its size and value.
        assert_eq!(l.move_to_head_entry(3), Some((10, 9)));
        assert_eq!(l.iter().map(|x| x.0).collect::<Vec<_>>(), [3, 1]);
        assert_eq!(l.remove_entry(1), Some((10, 1)));
        assert_eq!(l.remove_entry(1), None);
        assert_eq!((l.len(), l.bytes()), (1, 10));
    }
}
