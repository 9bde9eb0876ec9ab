//! A piece written to its server's cache, and what that write evicts: the protection count
//! and the pieces' ages follow every eviction and insertion, the bytes count as the server's
//! writes and as write load (data, or the bucket's parity), and with `evict_together` an object
//! one of whose pieces was evicted leaves every available server once the cache object being
//! written has all its pieces.

use ecdn_placement::chunk_id;
use ecdn_policy::Request;

use super::{Piece, Sim};

/// An object one of whose pieces a server's policy evicted (`evict_together`).
#[derive(Clone, Copy)]
pub(super) enum Dying {
    /// A coded object (by its id).
    Coded(u64),
    /// A replicated object (by its id, which is its replicas' id).
    Replica(u64),
}

impl Sim {
    /// Writes `piece` of `req`'s object (of `bucket`) to its server's cache: what the policy
    /// evicts leaves the protection count, the piece joins it, and the bytes count as the
    /// server's writes and as write load. Returns whether the cache admitted it.
    pub(super) fn store(
        &mut self,
        piece: Piece,
        req: &Request,
        coded: bool,
        bucket: usize,
    ) -> bool {
        let probe = Request {
            id: piece.key,
            size: piece.size,
            ..*req
        };
        let cache = &mut self.caches[piece.server];
        let before = cache.eviction().len();
        let admitted = cache.admit(&probe);
        // What the policy evicted to make room, then the piece itself if it was inserted
        // (not if the cache already held it).
        let evicted = cache.evicted().len();
        let ages = self.ages.on();
        let together = self.cfg.evict_together && self.cfg.scheme.coded();
        for e in cache.evicted() {
            if together {
                if let Some(object) = self.protection.object_of_chunk(e.id) {
                    self.dying.push(Dying::Coded(object));
                } else if self.protection.is_replica(e.id) {
                    self.dying.push(Dying::Replica(e.id));
                }
            }
            self.protection.removed(e.id, Some(e.size));
            if ages {
                self.ages.dropped(piece.server, e.id);
            }
        }
        cache.clear_evicted();
        let inserted = admitted && cache.eviction().len() + evicted == before + 1;
        if inserted {
            self.protection
                .added(piece.key, req.id, coded.then_some(piece.index));
        }
        if admitted {
            self.written[piece.server] += u128::from(piece.size);
            if ages && inserted {
                let clock = self.written[piece.server];
                self.ages.stored(piece.server, piece.key, clock);
            }
            match piece.parity {
                Some(j) => self.placement.record_parity_write(bucket, j, piece.size),
                None => self.placement.record_data_write(piece.server, piece.size),
            }
        }
        admitted
    }

    /// After a cache object's pieces are stored (`evict_together`): every object a piece of
    /// which a store evicted leaves every available server. The nodes drop at the same point:
    /// the writer collects what each holder evicted and has them dropped once all of the
    /// object's pieces are written.
    pub(super) fn drop_dying(&mut self) {
        let mut dying = std::mem::take(&mut self.dying);
        for d in dying.drain(..) {
            self.drop_everywhere(d);
        }
        self.dying = dying;
    }

    /// Drops every cached piece of an object one of whose pieces a server's policy evicted,
    /// from every available server (`evict_together`).
    fn drop_everywhere(&mut self, dying: Dying) {
        let (object, pieces) = match dying {
            Dying::Coded(object) => (object, self.cfg.k + self.cfg.p),
            Dying::Replica(object) => (object, 1),
        };
        for c in 0..pieces {
            let id = match dying {
                Dying::Coded(_) => chunk_id(object, c),
                Dying::Replica(_) => object,
            };
            // An unavailable server is not told (and its pieces count again when it returns).
            for (s, cache) in self.caches.iter_mut().enumerate() {
                if !self.placement.is_available(s) {
                    continue;
                }
                if let Some(size) = cache.remove(id) {
                    self.protection.removed(id, Some(size));
                    self.ages.dropped(s, id);
                }
            }
        }
    }
}
