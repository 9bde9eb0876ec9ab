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
//! do not make the object decodable from fewer servers).
//!
//! Memory: one entry per distinct piece id cached anywhere (at most K + P per coded object, one
//! per replicated object) and one per object with a piece on an available server — bounded by
//! the number of cached objects times K + P.

use ecdn_policy::Cache;

type Map<V> = hashbrown::HashMap<u64, V, foldhash::fast::FixedState>;

/// The `chunk` of a replica (the object cached whole, under its own id).
const REPLICA: u16 = u16::MAX;

/// One piece id (a replica, or one chunk of one object) and where it is cached.
struct Piece {
    object: u64,
    /// Chunk index, or [`REPLICA`].
    chunk: u16,
    /// Servers whose cache holds it.
    total: u32,
    /// Of those, the available ones.
    available: u32,
}

/// What the available servers hold of one object.
#[derive(Clone, Copy, Default)]
struct Object {
    /// Distinct chunk indices cached on at least one available server.
    chunks: u32,
    /// Copies of the whole object on available servers.
    replicas: u32,
}

impl Object {
    fn cached(self) -> bool {
        self.chunks > 0 || self.replicas > 0
    }

    /// Survives one more unavailability: two copies, or K + 1 distinct chunks.
    fn protected(self, k: u32) -> bool {
        self.replicas >= 2 || self.chunks > k
    }
}

/// The protection state of every object cached in the cluster.
pub(crate) struct Protection {
    k: u32,
    pieces: Map<Piece>,
    objects: Map<Object>,
    /// Objects with a piece on an available server.
    cached: u64,
    /// Of those, the unprotected ones.
    unprotected: u64,
}

impl Protection {
    /// `k`: data chunks of a coded object (it needs K + 1 distinct chunks to be protected).
    pub(crate) fn new(k: usize) -> Protection {
        Protection {
            k: k.try_into().unwrap_or(u32::MAX),
            pieces: Map::with_hasher(foldhash::fast::FixedState::with_seed(5)),
            objects: Map::with_hasher(foldhash::fast::FixedState::with_seed(6)),
            cached: 0,
            unprotected: 0,
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

    /// An available server's cache now holds piece `key` of `object`: chunk `chunk`, or the
    /// whole object (`None`).
    pub(crate) fn added(&mut self, key: u64, object: u64, chunk: Option<usize>) {
        let chunk = chunk.map_or(REPLICA, |c| c.min(usize::from(REPLICA - 1)) as u16);
        let piece = self.pieces.entry(key).or_insert(Piece {
            object,
            chunk,
            total: 0,
            available: 0,
        });
        piece.total += 1;
        piece.available += 1;
        let (object, chunk, available) = (piece.object, piece.chunk, piece.available);
        Self::count(
            &mut self.objects,
            &mut self.cached,
            &mut self.unprotected,
            self.k,
            object,
            chunk,
            available,
            true,
        );
    }

    /// An available server's cache no longer holds piece `key` (evicted or removed). Unknown
    /// ids are ignored.
    pub(crate) fn removed(&mut self, key: u64) {
        let Some(piece) = self.pieces.get_mut(&key) else {
            return;
        };
        piece.total -= 1;
        piece.available = piece.available.saturating_sub(1);
        let (object, chunk, available) = (piece.object, piece.chunk, piece.available);
        if piece.total == 0 {
            self.pieces.remove(&key);
        }
        Self::count(
            &mut self.objects,
            &mut self.cached,
            &mut self.unprotected,
            self.k,
            object,
            chunk,
            available,
            false,
        );
    }

    /// A server became unavailable (`available` false) or returned: the pieces its cache
    /// holds stop or start counting. One pass over the tracked pieces (availability changes
    /// are rare).
    pub(crate) fn server_changed(&mut self, cache: &Cache, available: bool) {
        let Protection {
            k,
            pieces,
            objects,
            cached,
            unprotected,
        } = self;
        for (key, piece) in pieces.iter_mut() {
            if cache.eviction().peek(*key).is_none() {
                continue;
            }
            if available {
                piece.available += 1;
            } else {
                piece.available -= 1;
            }
            Self::count(
                objects,
                cached,
                unprotected,
                *k,
                piece.object,
                piece.chunk,
                piece.available,
                available,
            );
        }
    }

    /// Piece `chunk` of `object` gained (`up`) or lost one available holder and now has
    /// `available`: updates the object and the counters.
    #[allow(clippy::too_many_arguments)]
    fn count(
        objects: &mut Map<Object>,
        cached: &mut u64,
        unprotected: &mut u64,
        k: u32,
        object: u64,
        chunk: u16,
        available: u32,
        up: bool,
    ) {
        let (dc, dr): (i32, i32) = match (chunk == REPLICA, up) {
            (true, true) => (0, 1),
            (true, false) => (0, -1),
            // A chunk index counts once, however many servers hold it.
            (false, true) if available == 1 => (1, 0),
            (false, false) if available == 0 => (-1, 0),
            _ => return,
        };
        let entry = objects.entry(object).or_default();
        let before = *entry;
        entry.chunks = entry.chunks.saturating_add_signed(dc);
        entry.replicas = entry.replicas.saturating_add_signed(dr);
        let after = *entry;
        if !after.cached() {
            objects.remove(&object);
        }
        let unprot = |o: Object| o.cached() && !o.protected(k);
        *cached = *cached + u64::from(after.cached()) - u64::from(before.cached());
        *unprotected = *unprotected + u64::from(unprot(after)) - u64::from(unprot(before));
    }

    /// Checks the mirror against the caches (tests): every tracked piece is held by exactly
    /// `total` caches (`available` of them on available servers), the caches hold nothing
    /// else, and the object counters agree with a recount.
    #[cfg(test)]
    pub(crate) fn check(&self, caches: &[Cache], available: &[bool]) -> Result<(), String> {
        let mut held = 0u64;
        for (key, piece) in &self.pieces {
            let on: Vec<usize> = (0..caches.len())
                .filter(|&s| caches[s].eviction().peek(*key).is_some())
                .collect();
            let avail = on.iter().filter(|&&s| available[s]).count() as u32;
            if on.len() as u32 != piece.total || avail != piece.available {
                return Err(format!(
                    "piece {key:x}: tracked {}/{}, cached on {on:?}",
                    piece.available, piece.total
                ));
            }
            held += u64::from(piece.total);
        }
        let in_caches: u64 = caches.iter().map(|c| c.eviction().len() as u64).sum();
        if held != in_caches {
            return Err(format!(
                "tracked {held} pieces, the caches hold {in_caches}"
            ));
        }
        let mut recount: Map<Object> = Map::default();
        for piece in self.pieces.values() {
            if piece.available == 0 {
                continue;
            }
            let o = recount.entry(piece.object).or_default();
            if piece.chunk == REPLICA {
                o.replicas += piece.available;
            } else {
                o.chunks += 1;
            }
        }
        let cached = recount.len() as u64;
        let unprotected = recount.values().filter(|o| !o.protected(self.k)).count() as u64;
        if (cached, unprotected) != (self.cached, self.unprotected)
            || self.objects.len() != recount.len()
        {
            return Err(format!(
                "counters {}/{} ({} objects), recount {unprotected}/{cached}",
                self.unprotected,
                self.cached,
                self.objects.len()
            ));
        }
        Ok(())
    }
}
