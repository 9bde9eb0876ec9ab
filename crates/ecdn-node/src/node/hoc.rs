//! The DRAM hot-object cache: an [`ecdn_policy::Cache`] decides admission and eviction, a map
//! keeps the bytes. The two are kept in step: an object is in the map exactly when the policy
//! holds it (evictions reported by the policy are removed from the map at once).
//!
//! An object is held whole ([`StoredResponse`]) or, in the cluster, **in stripes**
//! ([`Striped`]): a coded object read from its chunks is kept as the decoded bytes of each of
//! its stripes (C2DN §5: the HOC holds decoded sub-chunks), each kept as it is read, so a
//! range of a large object fetches and keeps only the stripes it overlaps, and a popular object
//! is served from DRAM without touching peers. The policy accounts a striped object at its
//! whole size from its admission on, however many stripes it holds yet.
//!
//! The node holds the HOC behind a mutex for one lookup or one insert at a time. An admission
//! policy that re-tunes itself (AdaptSize) is switched to background mode here: a request only
//! logs itself with the policy, and the model is solved on the policy's own thread, never under
//! the mutex.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use ecdn_policy::{Cache, Request};

use super::freshness::StoredResponse;

/// What [`Hoc::lookup`] found.
pub enum Found {
    Nothing,
    Fresh(Arc<StoredResponse>),
    Stale(Arc<StoredResponse>),
    /// A fresh object held in stripes (counted as a hit by the policy), possibly not all of
    /// them yet.
    Striped(Arc<Striped>),
}

/// An object held in stripes: its response's head and, per stripe of `width` object bytes
/// (the last one shorter), its bytes once read.
pub struct Striped {
    /// The stored response, with an empty body.
    pub head: StoredResponse,
    size: u64,
    width: u64,
    stripes: Mutex<Vec<Option<Bytes>>>,
}

impl Striped {
    /// An object of `size` bytes (`head`: its response, body empty) in stripes of `width`
    /// bytes, none held yet.
    pub fn new(head: StoredResponse, size: u64, width: u64) -> Self {
        let width = width.max(1);
        let n = usize::try_from(size.div_ceil(width)).unwrap_or(0);
        Striped {
            head,
            size,
            width,
            stripes: Mutex::new(vec![None; n]),
        }
    }

    /// The object's length.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Object bytes of stripe `j`.
    fn stripe_range(&self, j: u64) -> Range<u64> {
        let start = j * self.width;
        start..(start + self.width).min(self.size)
    }

    /// Keeps the object bytes `bytes` that start at offset `at`: every stripe they cover
    /// whole (a zero-copy slice each).
    pub fn keep(&self, at: u64, bytes: &Bytes) {
        let end = at + bytes.len() as u64;
        let mut stripes = super::lock::lock(&self.stripes);
        for j in at.div_ceil(self.width)..end.div_ceil(self.width) {
            let r = self.stripe_range(j);
            if r.end > end || r.start < at {
                continue;
            }
            if let Some(slot) = stripes.get_mut(j as usize) {
                if slot.is_none() {
                    *slot = Some(bytes.slice((r.start - at) as usize..(r.end - at) as usize));
                }
            }
        }
    }

    /// The bytes of `range`, as slices of the stripes it overlaps, if all of them are held.
    pub fn range(&self, range: Range<u64>) -> Option<Vec<Bytes>> {
        if range.end > self.size || range.start > range.end {
            return None;
        }
        if range.is_empty() {
            return Some(Vec::new());
        }
        let stripes = super::lock::lock(&self.stripes);
        let mut out = Vec::new();
        for j in range.start / self.width..range.end.div_ceil(self.width) {
            let r = self.stripe_range(j);
            let b = stripes.get(j as usize)?.as_ref()?;
            let from = range.start.max(r.start) - r.start;
            let to = range.end.min(r.end) - r.start;
            out.push(b.slice(from as usize..to as usize));
        }
        Some(out)
    }

    /// Bytes of the stripes held.
    pub fn held_bytes(&self) -> u64 {
        let stripes = super::lock::lock(&self.stripes);
        stripes.iter().flatten().map(|b| b.len() as u64).sum()
    }
}

/// What the HOC holds of an object.
enum Held {
    Whole(Arc<StoredResponse>),
    Striped(Arc<Striped>),
}

impl Held {
    fn key(&self) -> &str {
        match self {
            Held::Whole(e) => &e.key,
            Held::Striped(s) => &s.head.key,
        }
    }
}

pub struct Hoc {
    cache: Cache,
    objects: HashMap<u64, Held>,
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
    /// A striped object that is no longer fresh is dropped (it can be neither validated nor
    /// served stale without its bytes) and the lookup finds nothing.
    pub fn lookup(&mut self, id: u64, key: &str, now: Instant) -> Found {
        let (found, size) = match self.objects.get(&id) {
            None => return Found::Nothing,
            // A 64-bit hash collision: the cached object is another one.
            Some(h) if h.key() != key => return Found::Nothing,
            Some(Held::Whole(e)) if !e.is_fresh(now) => return Found::Stale(e.clone()),
            Some(Held::Whole(e)) => (Found::Fresh(e.clone()), e.body.len() as u64),
            Some(Held::Striped(s)) if !s.head.is_fresh(now) => {
                self.remove(id);
                return Found::Nothing;
            }
            Some(Held::Striped(s)) => (Found::Striped(s.clone()), s.size),
        };
        let req = self.request(id, size, now);
        let hit = self.cache.lookup(&req);
        self.drop_evicted();
        if hit {
            found
        } else {
            // The policy no longer holds it (it cannot disagree with the map, but if it did,
            // the policy wins).
            self.objects.remove(&id);
            Found::Nothing
        }
    }

    /// Whether a fresh copy of `key` is held (not counted by the policy: nobody asked for it).
    pub fn holds(&self, id: u64, key: &str, now: Instant) -> bool {
        match self.objects.get(&id) {
            Some(h) if h.key() == key => match h {
                Held::Whole(e) => e.is_fresh(now),
                Held::Striped(s) => s.head.is_fresh(now),
            },
            _ => false,
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
        if self.objects.get(&id).is_some_and(|e| e.key() != key) {
            // Collision with a cached object: keep the one we have.
            return false;
        }
        let req = self.request(id, size, now);
        let admitted = self.cache.lookup(&req) || self.cache.admit(&req);
        self.drop_evicted();
        if !admitted {
            self.objects.remove(&id);
        }
        admitted
    }

    /// Drops the bytes of the objects the policy evicted (to make room for a miss, or on a hit:
    /// LIRS makes room for the object it promotes).
    fn drop_evicted(&mut self) {
        for ev in self.cache.evicted() {
            self.objects.remove(&ev.id);
        }
        self.cache.clear_evicted();
    }

    /// The bytes of an object [`Hoc::admit`] admitted (ignored if the policy has evicted it
    /// since).
    pub fn insert(&mut self, id: u64, entry: Arc<StoredResponse>) {
        let size = (entry.body.len() as u64).max(1);
        if self.cache.eviction().peek(id) == Some(size) {
            self.objects.insert(id, Held::Whole(entry));
        }
    }

    /// Like [`Hoc::insert`], for an object to be held in stripes.
    pub fn insert_striped(&mut self, id: u64, entry: Arc<Striped>) {
        if self.cache.eviction().peek(id) == Some(entry.size.max(1)) {
            self.objects.insert(id, Held::Striped(entry));
        }
    }

    /// The object `id` held in stripes for `key`, if it is (not counted by the policy: the
    /// request was, by [`Hoc::lookup`] or [`Hoc::admit`]).
    pub fn striped(&self, id: u64, key: &str) -> Option<Arc<Striped>> {
        match self.objects.get(&id) {
            Some(Held::Striped(s)) if s.head.key == key => Some(s.clone()),
            _ => None,
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
            filled: 0,
        })
    }

    #[test]
    fn a_striped_object_keeps_whole_stripes_and_answers_ranges_it_holds() {
        let now = Instant::now();
        let head = |key: &str| {
            let e = entry(key, 0, now);
            Arc::try_unwrap(e).unwrap()
        };
        // 10 bytes in stripes of 4: [0, 4), [4, 8), [8, 10).
        let s = Striped::new(head("a"), 10, 4);
        let bytes: Vec<u8> = (0..10).collect();
        // Bytes 2..10 cover stripes 1 and 2 whole, stripe 0 only in part.
        s.keep(2, &Bytes::copy_from_slice(&bytes[2..]));
        assert_eq!(s.held_bytes(), 6);
        assert_eq!(s.range(0..4), None);
        assert_eq!(s.range(3..5), None);
        let got = s.range(5..10).unwrap();
        assert_eq!(got.concat(), bytes[5..10]);
        assert_eq!(got.len(), 2, "one slice per stripe");
        assert_eq!(s.range(7..7), Some(Vec::new()));
        assert_eq!(s.range(8..11), None, "past the end");
        s.keep(0, &Bytes::copy_from_slice(&bytes[..4]));
        assert_eq!(s.range(0..10).unwrap().concat(), bytes);

        // In the HOC: admitted at its whole size, found while fresh, dropped when stale.
        let policy = ecdn_policy::PolicySpec::parse("lru")
            .unwrap()
            .build(1000, 1);
        let mut hoc = Hoc::new(policy);
        assert!(hoc.admit(7, "a", 10, now));
        let s = Arc::new(s);
        hoc.insert_striped(7, s.clone());
        assert!(matches!(hoc.lookup(7, "a", now), Found::Striped(_)));
        assert!(matches!(hoc.lookup(7, "b", now), Found::Nothing));
        assert!(hoc.striped(7, "a").is_some());
        let later = now + Duration::from_secs(7200);
        assert!(matches!(hoc.lookup(7, "a", later), Found::Nothing));
        assert!(hoc.striped(7, "a").is_none());
        assert_eq!(hoc.used(), 0);
    }

    #[test]
    fn what_a_hit_evicts_leaves_the_hoc() {
        // LIRS over 1000 bytes: an LIR set of 990 and an HIR set (Q) of 10.
        let policy = ecdn_policy::PolicySpec::parse("lirs")
            .unwrap()
            .build(1000, 1);
        let mut hoc = Hoc::new(policy);
        let now = Instant::now();
        let key = |id: u64| format!("o{id}");
        let get = |hoc: &mut Hoc, id: u64| match hoc.lookup(id, &key(id), now) {
            Found::Nothing => {
                assert!(hoc.offer(id, entry(&key(id), 10, now), now));
                false
            }
            _ => true,
        };
        // 0..=98 fill the LIR set; 99, then 100, take Q in turn (99 is evicted).
        for id in 0..=100 {
            assert!(!get(&mut hoc, id));
        }
        // A hit on 100 (HIR, in S) makes it LIR: 0 is demoted into Q.
        assert!(get(&mut hoc, 100));
        // A hit on 0 (in Q only) demotes 1 to make LIR room; Q, full, evicts 1 on this hit.
        assert_eq!(hoc.objects(), 100);
        assert!(get(&mut hoc, 0));
        assert_eq!(hoc.objects(), 99, "the evicted object's bytes are dropped");
        assert!(!hoc.holds(1, &key(1), now));
        assert_eq!(hoc.used(), 990);
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
