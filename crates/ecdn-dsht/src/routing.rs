//! A cluster's routing table (§4.1): Kademlia's buckets by shared prefix length with the own
//! id, each holding at most `k` contacts.
//!
//! A node keeps one table per level: the members of its cluster at that level that it has
//! heard from, and those its lookups learned of (offered: inserted only where a bucket has
//! room). A node that fails two RPCs in a row is removed. A full
//! bucket keeps its old live contacts and refuses the new one (Kademlia's preference for
//! long-lived nodes), unless one of them has failed since it was last heard.

use std::time::Instant;

use crate::id::{Id, ID_BITS};
use crate::wire::Contact;

/// Consecutive failed RPCs after which a contact is removed.
pub const MAX_FAILURES: u32 = 2;

#[derive(Clone, Debug)]
struct Entry {
    contact: Contact,
    last_seen: Instant,
    failures: u32,
}

/// One level's routing table.
#[derive(Clone, Debug)]
pub struct RoutingTable {
    own: Id,
    k: usize,
    buckets: Vec<Vec<Entry>>,
    len: usize,
}

impl RoutingTable {
    /// An empty table for the node `own`, buckets of `k` contacts.
    pub fn new(own: Id, k: usize) -> RoutingTable {
        RoutingTable {
            own,
            k: k.max(1),
            buckets: vec![Vec::new(); ID_BITS],
            len: 0,
        }
    }

    fn bucket(&self, id: &Id) -> Option<usize> {
        let lz = self.own.distance(id).leading_zeros();
        (lz < ID_BITS).then_some(lz)
    }

    /// Records that `contact` was heard from at `now`: refreshes it, or inserts it if its
    /// bucket has room (or holds a contact that has failed). Returns whether it is in the table.
    pub fn heard(&mut self, contact: Contact, now: Instant) -> bool {
        let Some(b) = self.bucket(&contact.id) else {
            return false; // ourselves
        };
        let k = self.k;
        let bucket = &mut self.buckets[b];
        if let Some(pos) = bucket.iter().position(|e| e.contact.id == contact.id) {
            let mut e = bucket.remove(pos);
            e.contact.addr = contact.addr;
            e.last_seen = now;
            e.failures = 0;
            bucket.push(e);
            return true;
        }
        let entry = Entry {
            contact,
            last_seen: now,
            failures: 0,
        };
        if bucket.len() < k {
            bucket.push(entry);
            self.len += 1;
            return true;
        }
        if let Some(pos) = bucket.iter().position(|e| e.failures > 0) {
            bucket.remove(pos);
            bucket.push(entry);
            return true;
        }
        false
    }

    /// Offers a contact another node named (§4.1: a lookup inserts the references it learns):
    /// inserted only if new and its bucket has room; never refreshes a known one. A bogus
    /// contact is removed once it fails its RPCs.
    pub fn offer(&mut self, contact: Contact, now: Instant) -> bool {
        let Some(b) = self.bucket(&contact.id) else {
            return false;
        };
        if self.buckets[b].len() >= self.k
            || self.buckets[b].iter().any(|e| e.contact.id == contact.id)
        {
            return false;
        }
        self.buckets[b].push(Entry {
            contact,
            last_seen: now,
            failures: 0,
        });
        self.len += 1;
        true
    }

    /// Records a failed RPC to `id`; removes it after [`MAX_FAILURES`] in a row.
    pub fn failed(&mut self, id: &Id) {
        let Some(b) = self.bucket(id) else { return };
        let bucket = &mut self.buckets[b];
        if let Some(pos) = bucket.iter().position(|e| e.contact.id == *id) {
            bucket[pos].failures += 1;
            if bucket[pos].failures >= MAX_FAILURES {
                bucket.remove(pos);
                self.len -= 1;
            }
        }
    }

    /// Removes `id` (it left this cluster).
    pub fn remove(&mut self, id: &Id) {
        let Some(b) = self.bucket(id) else { return };
        let bucket = &mut self.buckets[b];
        if let Some(pos) = bucket.iter().position(|e| e.contact.id == *id) {
            bucket.remove(pos);
            self.len -= 1;
        }
    }

    /// Whether `id` is in the table.
    pub fn contains(&self, id: &Id) -> bool {
        self.bucket(id)
            .is_some_and(|b| self.buckets[b].iter().any(|e| e.contact.id == *id))
    }

    /// Contacts in the table.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Empties the table (the node left the cluster).
    pub fn clear(&mut self) {
        for b in &mut self.buckets {
            b.clear();
        }
        self.len = 0;
    }

    /// Up to `n` contacts closest to `target` (XOR), closest first.
    pub fn closest(&self, target: &Id, n: usize) -> Vec<Contact> {
        let mut all: Vec<Contact> = self.contacts().collect();
        all.sort_by(|a, b| target.cmp_distance(&a.id, &b.id));
        all.truncate(n);
        all
    }

    /// Every contact, in no particular order.
    pub fn contacts(&self) -> impl Iterator<Item = Contact> + '_ {
        self.buckets.iter().flatten().map(|e| e.contact)
    }

    /// Contacts not heard from since `before`, oldest first (to refresh them with a ping).
    pub fn stale(&self, before: Instant) -> Vec<Contact> {
        let mut old: Vec<&Entry> = self
            .buckets
            .iter()
            .flatten()
            .filter(|e| e.last_seen < before)
            .collect();
        old.sort_by_key(|e| e.last_seen);
        old.into_iter().map(|e| e.contact).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn contact(i: u32) -> Contact {
        Contact {
            id: Id::hash(&i.to_be_bytes()),
            addr: SocketAddr::from(([127, 0, 0, 1], 1000 + i as u16)),
        }
    }

    #[test]
    fn closest_sorts_by_xor_distance() {
        let mut t = RoutingTable::new(Id::hash(b"own"), 8);
        let now = Instant::now();
        for i in 0..200 {
            t.heard(contact(i), now);
        }
        assert!(t.len() > 8 && t.len() <= 200);
        let key = Id::hash(b"key");
        let got = t.closest(&key, 5);
        assert_eq!(got.len(), 5);
        for w in got.windows(2) {
            assert!(key.distance(&w[0].id) < key.distance(&w[1].id));
        }
        // Nothing in the table is closer than the first.
        assert!(t
            .contacts()
            .all(|c| key.distance(&c.id) >= key.distance(&got[0].id)));
    }

    #[test]
    fn full_buckets_keep_live_contacts_and_failures_remove() {
        let own = Id::ZERO;
        let mut t = RoutingTable::new(own, 2);
        let now = Instant::now();
        // Ids with the top bit set all land in bucket 0.
        let far: Vec<Contact> = (0..200u32)
            .map(contact)
            .filter(|c| c.id.bit(0))
            .take(3)
            .collect();
        assert!(t.heard(far[0], now));
        assert!(t.heard(far[1], now));
        assert!(!t.heard(far[2], now), "a full bucket refuses a newcomer");
        t.failed(&far[0].id);
        assert!(t.heard(far[2], now), "a failed contact gives way");
        assert!(!t.contains(&far[0].id));
        t.failed(&far[1].id);
        assert!(t.contains(&far[1].id));
        t.failed(&far[1].id);
        assert!(!t.contains(&far[1].id), "two failures in a row remove");
        assert_eq!(t.len(), 1);
        assert!(
            !t.heard(
                Contact {
                    id: own,
                    addr: far[0].addr
                },
                now
            ),
            "never ourselves"
        );
    }
}
