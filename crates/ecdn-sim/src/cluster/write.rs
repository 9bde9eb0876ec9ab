//! A piece written to its server's cache, and what that write evicts: the protection count
//! and the pieces' ages follow every eviction and insertion, the bytes count as the server's
//! writes and as write load (data, or the bucket's parity), and with `evict_together` an object
//! one of whose pieces was evicted from the server the map assigns it leaves every available
//! server once the cache object being written has all its pieces. (A copy left on a former
//! server — a parity move leaves the old chunk where it was until its FIFO reaches it — takes
//! nothing with it: the piece is, or will be written, where the map puts it now.)

use ecdn_placement::{chunk_id, pieces};
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
        let mut gone = std::mem::take(&mut self.gone);
        gone.clear();
        gone.extend(cache.evicted().iter().map(|e| (e.id, e.size)));
        cache.clear_evicted();
        for &(id, size) in &gone {
            if together {
                let dying = if let Some(object) = self.protection.object_of_chunk(id) {
                    Some(Dying::Coded(object))
                } else if self.protection.is_replica(id) {
                    Some(Dying::Replica(id))
                } else {
                    None
                };
                if let Some(d) = dying.filter(|&d| self.assigned(piece.server, d, id)) {
                    self.dying.push(d);
                }
            }
            self.protection.removed(id, Some(size));
            if ages {
                self.ages.dropped(piece.server, id);
            }
        }
        self.gone = gone;
        let cache = &self.caches[piece.server];
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

    /// Whether the map assigns `server` the piece `key` of `dying`'s object (a chunk: that
    /// chunk; a replica: one of the copies). The nodes apply the same rule to what their
    /// policies evict (`ecdn-node`'s `pieces/together.rs`).
    pub(super) fn assigned(&mut self, server: usize, dying: Dying, key: u64) -> bool {
        let (object, coded) = match dying {
            Dying::Coded(o) => (o, true),
            Dying::Replica(o) => (o, false),
        };
        let bucket = self.placement.bucket_of(object);
        let mut placed = std::mem::take(&mut self.evicted_placed);
        pieces::pieces(
            &self.placement,
            self.cfg.scheme,
            self.cfg.k,
            self.cfg.p,
            bucket,
            coded,
            self.cfg.scheme.replicas(),
            &mut placed,
            &mut self.ring,
        );
        let here = placed
            .iter()
            .any(|pc| pc.server == server && (!coded || chunk_id(object, pc.chunk) == key));
        self.evicted_placed = placed;
        here
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
