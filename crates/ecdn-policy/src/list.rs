//! An indexed doubly linked list: a slab of nodes threaded into a list, found by id through a
//! `hashbrown::HashTable` of slab indices. It is the shared core of LRU, FIFO and the segments
//! of S4LRU: O(1) lookup, push to head, move to head, unlink and pop from tail, about 29 bytes
//! per object (a 24-byte node plus a 4-byte index and a control byte in the table).

use hashbrown::HashTable;

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Node {
    id: u64,
    size: u64,
    prev: u32,
    next: u32,
}

/// The list: head is the most recently inserted/moved entry, tail the next victim.
#[derive(Clone)]
pub struct IndexedList {
    nodes: Vec<Node>,
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

impl Default for IndexedList {
    fn default() -> Self {
        Self::new()
    }
}

impl IndexedList {
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

    /// Inserts an absent `id` at the head. The caller guarantees it is absent.
    #[inline]
    pub fn push_head(&mut self, id: u64, size: u64) {
        debug_assert!(!self.contains(id));
        let node = Node {
            id,
            size,
            prev: NIL,
            next: NIL,
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

    /// Removes and returns the tail entry `(id, size)`.
    #[inline]
    pub fn pop_tail(&mut self) -> Option<(u64, u64)> {
        if self.tail == NIL {
            None
        } else {
            Some(self.release(self.tail))
        }
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

    /// Heap bytes held by the structure (for memory-per-object reports).
    pub fn heap_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.table.capacity() * (std::mem::size_of::<u32>() + 1)
    }
}
