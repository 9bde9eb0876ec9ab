//! Background repair (beyond C2DN): pieces the cluster lost — a chunk evicted on one server
//! while the object's other chunks stay, a replica evicted while its twin stays, pieces on a
//! server that failed — are written again to the servers the placement assigns them, without
//! waiting for the next request for the object (which writes back what its object lacks).
//!
//! * **What is repaired** ([`Protection::repairable`]). A coded object with at least K distinct
//!   chunks cached on available servers (it can be decoded) but fewer than K + P: every chunk
//!   cached on no available server is re-encoded from any K and written to its assigned server.
//!   A replicated object with one copy: a copy goes to each assigned server that lacks it.
//! * **Order.** Most requested first (requests so far; ties by the lower id), so the bytes go
//!   where a failure would cost the most misses.
//! * **Rate.** A token bucket of [`RepairConfig::rate`] bytes per trace second, filled and spent
//!   in rounds every [`RepairConfig::every`] trace seconds. A round writes pieces while its
//!   budget covers the next one and carries at most one round's budget over; an object whose
//!   pieces do not all fit waits for the next round, and the round ends there.
//! * **Cost.** What it writes counts as the servers' writes (bytes written, write imbalance, the
//!   write load parity rebalance sees) and may evict other pieces, as any write does. What it
//!   reads (K chunks per coded object, one copy per replicated one) is counted apart.
//!
//! Only `c2dn` repairs; the other schemes are the paper's baselines.

use ecdn_placement::chunk_id;
use ecdn_placement::pieces;

use super::{Piece, Scheme, Sim};

/// Settings of the background repair.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RepairConfig {
    /// Bytes per trace second the repair may write, cluster-wide; 0 turns it off.
    pub rate: u64,
    /// Trace seconds between repair rounds.
    pub every: f64,
    /// Only objects requested at least this many times are repaired.
    pub min_requests: u32,
    /// Only objects whose oldest cached piece is younger than this fraction of the cluster's
    /// characteristic time are repaired (see the module documentation).
    pub max_age: f64,
}

impl RepairConfig {
    /// No repair.
    pub const OFF: RepairConfig = RepairConfig {
        rate: 0,
        every: 60.0,
        min_requests: 2,
        max_age: 0.5,
    };
}

/// What the repair did in a run.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct RepairStats {
    /// Rounds that found something to repair.
    pub rounds: u64,
    /// Pieces (chunks or replicas) written.
    pub pieces: u64,
    /// Objects made whole.
    pub objects: u64,
    /// Bytes written.
    pub written: u128,
    /// Bytes read to rebuild them (K chunks per coded object, one copy per replicated one).
    pub read: u128,
}

/// The repair's state: its budget and when the next round is due. (Popularity and sizes are
/// the simulator's per-object request counts.)
pub(super) struct Repair {
    cfg: RepairConfig,
    next: f64,
    last: f64,
    budget: f64,
    /// Bytes the servers had written at the last round (for the write rate).
    written_last: u128,
    /// Scratch: the objects of one round.
    candidates: Vec<u64>,
    pub(super) stats: RepairStats,
}

impl Repair {
    pub(super) fn new(cfg: RepairConfig, scheme: Scheme) -> Repair {
        let cfg = if scheme == Scheme::C2dn {
            cfg
        } else {
            RepairConfig::OFF
        };
        Repair {
            cfg,
            next: cfg.every,
            last: 0.0,
            budget: 0.0,
            written_last: 0,
            candidates: Vec::new(),
            stats: RepairStats::default(),
        }
    }

    #[inline]
    pub(super) fn on(&self) -> bool {
        self.cfg.rate > 0
    }

    /// Whether a round is due at trace time `time`.
    #[inline]
    fn due(&self, time: f64) -> bool {
        self.on() && time >= self.next
    }

    /// Starts a round at trace time `time`: fills the budget for the time since the last round
    /// (at most one round's worth carried over) and returns the cluster's characteristic time
    /// since then: the capacity of the available servers over the bytes they wrote per second
    /// (infinite while nothing is written).
    fn start_round(&mut self, time: f64, written: u128, capacity: u64) -> f64 {
        let rate = self.cfg.rate as f64;
        let round = rate * self.cfg.every;
        let elapsed = time - self.last;
        self.budget = (self.budget + rate * elapsed).min(2.0 * round);
        let per_second = written.saturating_sub(self.written_last) as f64 / elapsed.max(1e-9);
        self.written_last = written;
        self.last = time;
        self.next = time + self.cfg.every;
        if per_second > 0.0 {
            capacity as f64 / per_second
        } else {
            f64::INFINITY
        }
    }
}

impl Sim {
    /// A repair round, if one is due at trace time `time`.
    pub(super) fn repair_if_due(&mut self, time: f64) {
        if !self.repair.due(time) {
            return;
        }
        let written: u128 = self.written.iter().sum();
        let capacity: u64 = (0..self.caches.len())
            .filter(|&s| self.placement.is_available(s))
            .map(|s| self.caches[s].capacity())
            .sum();
        let characteristic = self.repair.start_round(time, written, capacity);
        let max_age = characteristic * self.repair.cfg.max_age;
        let width = (self.cfg.k + self.cfg.p) as u32;
        let mut candidates = std::mem::take(&mut self.repair.candidates);
        self.protection.repairable(width, &mut candidates);
        let objects = &self.popularity;
        let popularity = |o: &u64| objects.get(o).map_or(0, |&(_, n)| n);
        let min = self.repair.cfg.min_requests;
        candidates.retain(|o| popularity(o) >= min);
        candidates.sort_unstable_by(|a, b| popularity(b).cmp(&popularity(a)).then(a.cmp(b)));
        let mut wrote = false;
        for &object in &candidates {
            let Some(&(size, _)) = self.popularity.get(&object) else {
                continue;
            };
            match self.repair_object(object, size, time, max_age) {
                Some(any) => wrote |= any,
                None => break, // out of budget
            }
        }
        if wrote {
            self.repair.stats.rounds += 1;
        }
        self.repair.candidates = candidates;
    }

    /// Writes the pieces `object` (of `size` bytes) lacks on its assigned servers, if its
    /// oldest cached piece is younger than `max_age` trace seconds and the budget covers them
    /// all. `None`: it does not (the round ends); `Some(wrote anything)`.
    fn repair_object(&mut self, object: u64, size: u64, time: f64, max_age: f64) -> Option<bool> {
        let coded = size > self.cfg.threshold;
        let (k, p) = (self.cfg.k, self.cfg.p);
        let bucket = self.placement.bucket_of(object);
        pieces::pieces(
            &self.placement,
            self.cfg.scheme,
            k,
            p,
            bucket,
            coded,
            2,
            &mut self.placed,
            &mut self.ring,
        );
        let piece_size = if coded { size.div_ceil(k as u64) } else { size };
        // The oldest piece cached: an object near the end of its life in FIFO caches loses its
        // pieces one by one anyway, and a piece written for it now would outlive the others.
        let oldest = if coded {
            (0..k + p)
                .filter_map(|c| self.protection.held(chunk_id(object, c)))
                .min()
        } else {
            self.protection.held(object)
        };
        match oldest {
            Some(w) if time - w as f64 <= max_age => {}
            _ => return Some(false),
        }
        let mut missing = Vec::with_capacity(self.placed.len());
        for pc in &self.placed {
            if !self.placement.is_available(pc.server) {
                continue;
            }
            let key = if coded {
                chunk_id(object, pc.chunk)
            } else {
                object
            };
            let lacks = if coded {
                // Cached anywhere available counts (a former server of a moved slot).
                self.protection.held(key).is_none()
            } else {
                self.caches[pc.server].eviction().peek(key).is_none()
            };
            if lacks {
                missing.push(Piece {
                    server: pc.server,
                    key,
                    size: piece_size,
                    index: pc.chunk,
                    parity: pc.parity,
                });
            }
        }
        if missing.is_empty() {
            return Some(false);
        }
        let cost = piece_size as f64 * missing.len() as f64;
        if cost > self.repair.budget {
            return None;
        }
        self.repair.budget -= cost;
        let read = if coded { k as u64 } else { 1 } * piece_size;
        self.repair.stats.read += u128::from(read);
        self.repair.stats.objects += 1;
        let template = ecdn_policy::Request {
            time: time as u64,
            id: object,
            size,
            next_access: -1,
        };
        for piece in missing {
            if self.store(piece, &template, coded, bucket) {
                self.repair.stats.pieces += 1;
                self.repair.stats.written += u128::from(piece.size);
            }
        }
        Some(true)
    }
}
