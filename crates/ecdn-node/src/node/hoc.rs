//! The DRAM hot-object cache: an [`ecdn_policy::Cache`] decides admission and eviction, a map
//! keeps the bytes. The two are kept in step: an object is in the map exactly when the policy
//! holds it (evictions reported by the policy are removed from the map at once).
//!
//! The node holds the HOC behind a mutex for one lookup or one insert at a time. An admission
//! policy that re-tunes itself (AdaptSize) is switched to background mode here: a request only
//! logs itself with the policy, and the model is solved on the policy's own thread, never under
//! the mutex.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use ecdn_policy::{Cache, Request};

use super::freshness::StoredResponse;

/// What [`Hoc::lookup`] found.
pub enum Found {
    Nothing,
    Fresh(Arc<StoredResponse>),
    Stale(Arc<StoredResponse>),
}

pub struct Hoc {
    cache: Cache,
    objects: HashMap<u64, Arc<StoredResponse>>,
    started: Instant,
    background: bool,
}

impl Hoc {
    /// The HOC over `cache`; an admission policy that re-tunes itself is moved to background
    /// re-tuning (see the module docs).
    pub fn new(mut cache: Cache) -> Self {
        let background = cache.tune_in_background();
        Hoc {
            cache,
            objects: HashMap::new(),
            started: Instant::now(),
            background,
        }
    }

    /// Whether the admission policy re-tunes on a thread of its own.
    pub fn tunes_in_background(&self) -> bool {
        self.background
    }

    /// The size the policy accounts for an object: its body (at least 1 byte).
    fn request(&self, id: u64, size: u64, now: Instant) -> Request {
        Request {
            time: now.saturating_duration_since(self.started).as_secs(),
            id,
            size: size.max(1),
            next_access: -1,
        }
    }

    /// The cached response for `key`. A fresh one is counted as a hit by the policy. A stale
    /// one is returned as [`Found::Stale`] and kept (not counted), so that it can be validated
    /// with the origin or served on an origin error; a successful fetch replaces it
    /// ([`Hoc::offer`]). When nothing is cached the policy is not consulted yet: the object's
    /// size is unknown until it is fetched, so [`Hoc::offer`] records the miss.
    pub fn lookup(&mut self, id: u64, key: &str, now: Instant) -> Found {
        let Some(entry) = self.objects.get(&id).cloned() else {
            return Found::Nothing;
        };
        if entry.key != key {
            // A 64-bit hash collision: the cached object is another one.
            return Found::Nothing;
        }
        if !entry.is_fresh(now) {
            return Found::Stale(entry);
        }
        let req = self.request(id, entry.body.len() as u64, now);
        if self.cache.lookup(&req) {
            Found::Fresh(entry)
        } else {
            // The policy no longer holds it (it cannot disagree with the map, but if it did,
            // the policy wins).
            self.objects.remove(&id);
            Found::Nothing
        }
    }

    /// After a miss: records it with the policy and asks admission. Returns whether the
    /// object is now cached.
    pub fn offer(&mut self, id: u64, entry: Arc<StoredResponse>, now: Instant) -> bool {
        let admitted = self.admit(id, &entry.key, entry.body.len() as u64, now);
        if admitted {
            self.insert(id, entry);
        }
        admitted
    }

    /// The first half of [`Hoc::offer`], for a body not in memory yet (a disk hit decides
    /// whether to read the object into memory or stream it): records the request with the
    /// policy and asks admission for `size` bytes. When it returns `true` the policy holds the
    /// object; give it the bytes with [`Hoc::insert`], or take it back with [`Hoc::remove`].
    pub fn admit(&mut self, id: u64, key: &str, size: u64, now: Instant) -> bool {
        if self.objects.get(&id).is_some_and(|e| e.key != key) {
            // Collision with a cached object: keep the one we have.
            return false;
        }
        let req = self.request(id, size, now);
        let admitted = self.cache.lookup(&req) || self.cache.admit(&req);
        for ev in self.cache.evicted() {
            self.objects.remove(&ev.id);
        }
        self.cache.clear_evicted();
        if !admitted {
            self.objects.remove(&id);
        }
        admitted
    }

    /// The bytes of an object [`Hoc::admit`] admitted (ignored if the policy has evicted it
    /// since).
    pub fn insert(&mut self, id: u64, entry: Arc<StoredResponse>) {
        let size = (entry.body.len() as u64).max(1);
        if self.cache.eviction().peek(id) == Some(size) {
            self.objects.insert(id, entry);
        }
    }

    /// Drops an object (invalidation, staleness); whether it was held.
    pub fn remove(&mut self, id: u64) -> bool {
        self.cache.remove(id);
        self.objects.remove(&id).is_some()
    }

    pub fn used(&self) -> u64 {
        self.cache.used()
    }

    pub fn capacity(&self) -> u64 {
        self.cache.capacity()
    }

    pub fn objects(&self) -> usize {
        self.objects.len()
    }

    pub fn policy(&self) -> String {
        self.cache.name()
    }

    /// The admission policy's size parameter c, if it has one (possibly infinite).
    pub fn raw_parameter(&self) -> Option<f64> {
        self.cache.admission().and_then(|a| a.parameter())
    }

    /// The admission policy's size parameter c, if it has one and it is finite.
    pub fn parameter(&self) -> Option<f64> {
        self.cache
            .admission()
            .and_then(|a| a.parameter())
            .filter(|c| c.is_finite())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use bytes::Bytes;
    use hyper::StatusCode;

    fn entry(key: &str, size: usize, now: Instant) -> Arc<StoredResponse> {
        Arc::new(StoredResponse {
            key: key.to_string(),
            status: StatusCode::OK,
            headers: Vec::new(),
            body: Bytes::from(vec![0u8; size]),
            stored_at: now,
            age_at_store: Duration::ZERO,
            lifetime: Duration::from_secs(3600),
        })
    }

    #[test]
    fn adaptsize_re_tunes_in_the_background() {
        let policy = |s: &str| ecdn_policy::PolicySpec::parse(s).unwrap().build(100_000, 1);
        assert!(!Hoc::new(policy("lru")).tunes_in_background());
        let mut hoc = Hoc::new(policy("lru+adaptsize:window=500:guard=off"));
        assert!(hoc.tunes_in_background());
        assert_eq!(hoc.raw_parameter(), Some(f64::INFINITY));
        // Equally popular small and large objects in a cache too small for the large ones:
        // the model limits admission to the small ones. The new c is published by the solver
        // thread and taken up by a later request; keep requesting until it is.
        let now = Instant::now();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut i = 0u64;
        while hoc.parameter().is_none() {
            assert!(Instant::now() < deadline, "c never left infinity");
            let n = i % 400;
            let (key, size) = if n.is_multiple_of(2) {
                (format!("small{n}"), 100)
            } else {
                (format!("large{n}"), 20_000)
            };
            let id = i % 400;
            if let Found::Nothing = hoc.lookup(id, &key, now) {
                hoc.offer(id, entry(&key, size, now), now);
            }
            i += 1;
            if i.is_multiple_of(500) {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        let c = hoc.parameter().unwrap();
        assert!(c < 20_000.0, "c {c}");
    }
}
