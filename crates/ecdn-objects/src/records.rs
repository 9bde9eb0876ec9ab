//! A node's cache of object records (issue 12: "cached on nodes; a reader needs one metadata
//! lookup at most"): a read whose record is cached asks the directory nothing.
//!
//! A record is kept for a time to live (the cluster's `object_record_ttl_ms`, 1 s by default)
//! and the cache holds at most a byte budget of them (a record's size is mostly its sub-chunk
//! checksums), the oldest dropped first. The node that writes or deletes an object updates its
//! own cache at once; another node may go on reading the version it cached for up to the time
//! to live (an overwrite leaves the earlier version's splits in place for the piece stores to
//! evict, so such a read still succeeds). A read that fails with a cached record asks the
//! directory again before giving up (the object was deleted, or its splits moved).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::meta::{ObjectMeta, ObjectName};

/// See the module documentation.
#[derive(Debug)]
pub struct RecordCache {
    ttl: Duration,
    max_bytes: usize,
    bytes: usize,
    records: HashMap<ObjectName, (Arc<ObjectMeta>, Instant)>,
    /// Names in the order they were cached (a name may appear again after a newer entry:
    /// only the entry whose time matches is dropped).
    order: VecDeque<(ObjectName, Instant)>,
}

/// What a record takes in the cache, roughly.
fn cost(m: &ObjectMeta) -> usize {
    256 + m.name.as_str().len() + 9 * m.splits.len() + 4 * m.crcs.len()
}

impl RecordCache {
    /// A cache keeping records `ttl` long, at most `max_bytes` of them (a zero `ttl` keeps
    /// nothing).
    pub fn new(ttl: Duration, max_bytes: usize) -> RecordCache {
        RecordCache {
            ttl,
            max_bytes,
            bytes: 0,
            records: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    /// The record of `name`, if cached less than the time to live before `now`.
    pub fn get(&self, name: &ObjectName, now: Instant) -> Option<Arc<ObjectMeta>> {
        let (m, at) = self.records.get(name)?;
        (now.saturating_duration_since(*at) < self.ttl).then(|| m.clone())
    }

    /// Caches `meta` as of `now` (it replaces an older version; an older one never replaces
    /// a newer).
    pub fn insert(&mut self, meta: Arc<ObjectMeta>, now: Instant) {
        if self.ttl.is_zero() || cost(&meta) > self.max_bytes {
            return;
        }
        if let Some((old, _)) = self.records.get(&meta.name) {
            if old.version > meta.version {
                return;
            }
        }
        self.remove(&meta.name);
        self.bytes += cost(&meta);
        self.order.push_back((meta.name.clone(), now));
        self.records.insert(meta.name.clone(), (meta, now));
        while self.bytes > self.max_bytes {
            let Some((name, at)) = self.order.pop_front() else {
                break;
            };
            if self.records.get(&name).is_some_and(|(_, t)| *t == at) {
                self.remove(&name);
            }
        }
        // Expired entries go as the order list is walked from its oldest end.
        while let Some((name, at)) = self.order.front() {
            if now.saturating_duration_since(*at) < self.ttl {
                break;
            }
            let (name, at) = (name.clone(), *at);
            self.order.pop_front();
            if self.records.get(&name).is_some_and(|(_, t)| *t == at) {
                self.remove(&name);
            }
        }
    }

    /// Forgets `name`'s record (deleted, or found wrong).
    pub fn remove(&mut self, name: &ObjectName) {
        if let Some((m, _)) = self.records.remove(name) {
            self.bytes -= cost(&m);
        }
        // Its `order` entry stays until it reaches the front; it no longer matches.
        if self.order.len() > 2 * self.records.len() + 64 {
            let records = &self.records;
            self.order
                .retain(|(n, at)| records.get(n).is_some_and(|(_, t)| t == at));
        }
    }

    /// Records cached (expired ones included until they are dropped).
    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(name: &str, version: u64, crcs: usize) -> Arc<ObjectMeta> {
        Arc::new(ObjectMeta {
            name: ObjectName::parse(name).unwrap(),
            version,
            size: 10,
            k: 1,
            r: 1,
            splits: vec![0, 1],
            stored: vec![true, true],
            sha256: "0".repeat(64),
            sub_chunk: 1,
            crcs: vec![0; crcs],
            window_stripes: 0,
            digests: Vec::new(),
            s3: None,
        })
    }

    #[test]
    fn records_expire_are_replaced_by_newer_versions_and_fit_the_budget() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut c = RecordCache::new(s, 10_000);
        let a = ObjectName::parse("a").unwrap();
        c.insert(meta("a", 2, 20), t0);
        assert_eq!(c.get(&a, t0 + s / 2).unwrap().version, 2);
        assert!(c.get(&a, t0 + s).is_none(), "expired");
        // An older version does not replace a newer one; a newer does.
        c.insert(meta("a", 1, 20), t0);
        assert_eq!(c.get(&a, t0).unwrap().version, 2);
        c.insert(meta("a", 3, 20), t0);
        assert_eq!(c.get(&a, t0).unwrap().version, 3);
        c.remove(&a);
        assert!(c.get(&a, t0).is_none() && c.is_empty());
        // The budget: each record costs ~ 256 + 4 per checksum; the oldest go first.
        for i in 0..20 {
            c.insert(meta(&format!("o{i}"), 1, 500), t0);
        }
        assert!(c.len() < 20 && c.len() >= 3, "{}", c.len());
        assert!(c.get(&ObjectName::parse("o19").unwrap(), t0).is_some());
        assert!(c.get(&ObjectName::parse("o0").unwrap(), t0).is_none());
        // Expired entries are dropped as newer ones come in.
        c.insert(meta("late", 1, 1), t0 + 2 * s);
        assert_eq!(c.len(), 1);
        // A zero time to live keeps nothing.
        let mut off = RecordCache::new(Duration::ZERO, 10_000);
        off.insert(meta("a", 1, 1), t0);
        assert!(off.is_empty());
    }
}
