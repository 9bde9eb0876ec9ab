//! Which cached objects are protected (C2DN §6, Fig. 6b/c): an object is **unprotected** if it
//! is cached in the cluster but could not be served after one more server becomes unavailable —
//! a replicated object with a single copy cached, a coded object with fewer than K + 1 distinct
//! chunks cached.
//!
//! [`Protection`] mirrors what the servers' caches hold: the cluster simulator reports every
//! piece a cache admits and every piece a cache drops (evictions the policy reports, and the
//! removal of an entry whose size changed), and every server that becomes unavailable or
//! returns. "Cached" counts only pieces on available servers (a piece on an unavailable server
//! can serve nothing until it returns); what the caches hold is counted whether or not a lookup
//! of the object would try that server. Two copies of the same chunk count as one chunk (they
//! do not make the object decodable from fewer servers). An object cached both whole and coded
//! (its size crossed the coding threshold and both versions are still cached) counts once per
//! form.
//!
//! Memory: one entry per replicated object cached anywhere, one per distinct chunk id cached
//! anywhere (at most K + P per coded object) and one per coded object with a chunk on an
//! available server — bounded by the number of cached objects times K + P. Speed: a piece's
//! admission or eviction costs one or two hash-table probes (entries are updated in place).

use ecdn_policy::Cache;
use hashbrown::hash_map::Entry;

type Map<V> = hashbrown::HashMap<u64, V, foldhash::fast::FixedState>;

/// Where a piece id is cached: on how many servers, how many of them available.
#[derive(Clone, Copy, Default)]
struct Held {
    total: u32,
    available: u32,
}

/// One chunk id of a coded object.
struct Chunk {
    object: u64,
    held: Held,
}

/// The protection state of every object cached in the cluster.
pub(crate) struct Protection {
    k: u32,
    /// The largest replicated piece (the coding threshold in coded schemes): a larger piece
    /// is a chunk, so its eviction needs no probe of `replicas`.
    replica_max: u64,
    /// Replicated objects (cached whole, under their own id).
    replicas: Map<Held>,
    /// Chunk ids of coded objects.
    chunks: Map<Chunk>,
    /// Coded objects: distinct chunks cached on available servers (entries above 0 only).
    coded: Map<u32>,
    /// Objects with a piece on an available server.
    cached: u64,
    /// Of those, the unprotected ones.
    unprotected: u64,
    /// Coded objects by distinct chunks cached on available servers: entry `n` counts those
    /// with `n` (entry 0 unused; grows as needed).
    coded_by_chunks: Vec<u64>,
}

impl Protection {
    /// `k`: data chunks of a coded object (it needs K + 1 distinct chunks to be protected);
    /// `replica_max`: no replicated piece is larger (`u64::MAX` if unknown).
    pub(crate) fn new(k: usize, replica_max: u64) -> Protection {
        Protection {
            k: k.try_into().unwrap_or(u32::MAX),
            replica_max,
            replicas: Map::with_hasher(foldhash::fast::FixedState::with_seed(5)),
            chunks: Map::with_hasher(foldhash::fast::FixedState::with_seed(6)),
            coded: Map::with_hasher(foldhash::fast::FixedState::with_seed(7)),
            cached: 0,
            unprotected: 0,
            coded_by_chunks: vec![0; k + 2],
        }
    }

    /// Objects with at least one piece on an available server.
    pub(crate) fn cached_objects(&self) -> u64 {
        self.cached
    }

    /// Unprotected objects over cached objects (0 when nothing is cached).
    pub(crate) fn unprotected_fraction(&self) -> f64 {
        if self.cached == 0 {
            0.0
        } else {
            self.unprotected as f64 / self.cached as f64
        }
    }

    /// Counts an object whose copies (replicated: `protect_at` = 2) or distinct chunks
    /// (coded: K + 1) on available servers went from `before` to `after`.
    #[inline]
    fn transition(&mut self, before: u32, after: u32, protect_at: u32) {
        let unprot = |n: u32| n > 0 && n < protect_at;
        self.cached = self.cached + u64::from(after > 0) - u64::from(before > 0);
        self.unprotected = self.unprotected + u64::from(unprot(after)) - u64::from(unprot(before));
    }

    /// Coded object `object` gained (`up`) or lost a distinct chunk on available servers.
    fn coded_changed(&mut self, object: u64, up: bool) {
        let (before, after) = match self.coded.entry(object) {
            Entry::Occupied(mut e) => {
                let before = *e.get();
                let after = if up { before + 1 } else { before - 1 };
                if after == 0 {
                    e.remove();
                } else {
                    *e.get_mut() = after;
                }
                (before, after)
            }
            Entry::Vacant(e) => {
                if !up {
                    return;
                }
                e.insert(1);
                (0, 1)
            }
        };
        for (n, d) in [(before, -1i64), (after, 1)] {
            let n = n as usize;
            if n > 0 {
                if n >= self.coded_by_chunks.len() {
                    self.coded_by_chunks.resize(n + 1, 0);
                }
                self.coded_by_chunks[n] = self.coded_by_chunks[n].wrapping_add_signed(d);
            }
        }
        self.transition(before, after, self.k.saturating_add(1));
    }

    /// Whether a replicated object is cached under `key`.
    pub(crate) fn is_replica(&self, key: u64) -> bool {
        self.replicas.contains_key(&key)
    }

    /// The coded object whose chunk is cached under `key`, if one is.
    pub(crate) fn object_of_chunk(&self, key: u64) -> Option<u64> {
        self.chunks.get(&key).map(|c| c.object)
    }

    /// Coded objects cached, by how many distinct chunks of each are cached on available
    /// servers (entry `n`: objects with `n` chunks; entry 0 is always 0).
    pub(crate) fn coded_by_chunks(&self) -> &[u64] {
        &self.coded_by_chunks
    }

    /// An available server's cache now holds piece `key` of `object`: chunk `chunk` (its id is
    /// `key`), or the whole object (`None`; then `key` is `object`).
    pub(crate) fn added(&mut self, key: u64, object: u64, chunk: Option<usize>) {
        if chunk.is_none() {
            let h = self.replicas.entry(key).or_default();
            h.total += 1;
            h.available += 1;
            let after = h.available;
            self.transition(after - 1, after, 2);
            return;
        }
        let c = self.chunks.entry(key).or_insert(Chunk {
            object,
            held: Held::default(),
        });
        c.held.total += 1;
        c.held.available += 1;
        if c.held.available == 1 {
            let object = c.object;
            self.coded_changed(object, true);
        }
    }

    /// An available server's cache no longer holds piece `key` of `size` bytes (evicted or
    /// removed; `None` if the size is not known). Unknown ids are ignored.
    pub(crate) fn removed(&mut self, key: u64, size: Option<u64>) {
        // A piece larger than any replica is a chunk: no probe of `replicas`.
        let replica = if size.is_some_and(|s| s > self.replica_max) {
            None
        } else {
            match self.replicas.entry(key) {
                Entry::Occupied(e) => Some(e),
                Entry::Vacant(_) => None,
            }
        };
        if let Some(mut e) = replica {
            let h = e.get_mut();
            h.total -= 1;
            h.available -= 1;
            let after = h.available;
            if h.total == 0 {
                e.remove();
            }
            self.transition(after + 1, after, 2);
            return;
        }
        if let Entry::Occupied(mut e) = self.chunks.entry(key) {
            let c = e.get_mut();
            c.held.total -= 1;
            c.held.available -= 1;
            let (object, lost) = (c.object, c.held.available == 0);
            if c.held.total == 0 {
                e.remove();
            }
            if lost {
                self.coded_changed(object, false);
            }
        }
    }

    /// A server became unavailable (`available` false) or returned: the pieces its cache
    /// holds stop or start counting. One pass over the tracked pieces (availability changes
    /// are rare).
    pub(crate) fn server_changed(&mut self, cache: &Cache, available: bool) {
        let held = |key: u64| cache.eviction().peek(key).is_some();
        let mut replica_moves = Vec::new();
        for (key, h) in self.replicas.iter_mut() {
            if held(*key) {
                let before = h.available;
                h.available = if available { before + 1 } else { before - 1 };
                replica_moves.push((before, h.available));
            }
        }
        for (before, after) in replica_moves {
            self.transition(before, after, 2);
        }
        let mut coded_moves = Vec::new();
        for (key, c) in self.chunks.iter_mut() {
            if held(*key) {
                if available {
                    c.held.available += 1;
                    if c.held.available == 1 {
                        coded_moves.push(c.object);
                    }
                } else {
                    c.held.available -= 1;
                    if c.held.available == 0 {
                        coded_moves.push(c.object);
                    }
                }
            }
        }
        for object in coded_moves {
            self.coded_changed(object, available);
        }
    }

    /// The cache of an unavailable server is about to be emptied (it returns without what it
    /// held: [`crate::unavailability::Unavailability::returns_empty`]): its pieces stop counting
    /// where they are cached. While the server was away they counted as cached, not as
    /// available, so no object's protection changes.
    pub(crate) fn server_emptied(&mut self, cache: &Cache) {
        let held = |key: u64| cache.eviction().peek(key).is_some();
        self.replicas.retain(|&key, h| {
            if held(key) {
                h.total -= 1;
            }
            h.total > 0
        });
        self.chunks.retain(|&key, c| {
            if held(key) {
                c.held.total -= 1;
            }
            c.held.total > 0
        });
    }

    /// Checks the mirror against the caches (tests): every tracked piece is held by exactly
    /// `total` caches (`available` of them on available servers), the caches hold nothing
    /// else, and the object counters agree with a recount.
    #[cfg(test)]
    pub(crate) fn check(&self, caches: &[Cache], available: &[bool]) -> Result<(), String> {
        let count = |key: u64, h: Held| -> Result<(), String> {
            let on: Vec<usize> = (0..caches.len())
                .filter(|&s| caches[s].eviction().peek(key).is_some())
                .collect();
            let avail = on.iter().filter(|&&s| available[s]).count() as u32;
            if on.len() as u32 != h.total || avail != h.available {
                return Err(format!(
                    "piece {key:x}: tracked {}/{}, cached on {on:?}",
                    h.available, h.total
                ));
            }
            Ok(())
        };
        let mut held = 0u64;
        for (key, h) in &self.replicas {
            count(*key, *h)?;
            held += u64::from(h.total);
        }
        for (key, c) in &self.chunks {
            count(*key, c.held)?;
            held += u64::from(c.held.total);
        }
        let in_caches: u64 = caches.iter().map(|c| c.eviction().len() as u64).sum();
        if held != in_caches {
            return Err(format!(
                "tracked {held} pieces, the caches hold {in_caches}"
            ));
        }
        let mut distinct: Map<u32> = Map::default();
        for c in self.chunks.values().filter(|c| c.held.available > 0) {
            *distinct.entry(c.object).or_default() += 1;
        }
        if distinct != self.coded {
            return Err("coded objects' chunk counts differ from a recount".into());
        }
        let mut by_chunks = vec![0u64; self.coded_by_chunks.len()];
        for &n in distinct.values() {
            by_chunks[n as usize] += 1;
        }
        if by_chunks != self.coded_by_chunks {
            return Err(format!(
                "coded objects by chunks {:?}, recount {by_chunks:?}",
                self.coded_by_chunks
            ));
        }
        let reps = self.replicas.values().filter(|h| h.available > 0);
        let cached = reps.clone().count() + distinct.len();
        let unprotected = reps.filter(|h| h.available < 2).count()
            + distinct.values().filter(|&&n| n <= self.k).count();
        if (cached as u64, unprotected as u64) != (self.cached, self.unprotected) {
            return Err(format!(
                "counters {}/{}, recount {unprotected}/{cached}",
                self.unprotected, self.cached
            ));
        }
        Ok(())
    }
}
