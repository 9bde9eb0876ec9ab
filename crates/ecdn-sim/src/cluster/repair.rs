//! Background repair (beyond C2DN): pieces the cluster lost — a chunk evicted on one server
//! while the object's other chunks stay, a replica evicted while its twin stays, pieces on a
//! server that failed — are written again to the servers the placement assigns them, without
//! waiting for the next request for the object (which writes back what its object lacks).
//!
//! The live nodes run the same rules (`ecdn-node`, `node/cluster/c2dn/repair.rs`), each for the buckets
//! it serves; the cluster demo's driver gives them this schedule, so live and simulated runs
//! stay equal with repair on.
//!
//! * **Who repairs what.** Every available server repairs the objects of the buckets it serves
//!   (a bucket's serving node: its first data server), from the requests it served for them:
//!   a request is counted at the server that serves its bucket at the time.
//! * **Order.** Per round, a server looks at its objects requested at least
//!   [`RepairConfig::min_requests`] times whose bucket it serves now, most requested first
//!   (ties: the lower id), at most [`RepairConfig::scan`] of them. Servers take their rounds
//!   one after the other, in id order.
//! * **What is repaired.** Asking the bucket's servers and the slots' former servers (those
//!   available) what they hold: an object that can be read (K distinct chunks, or a copy) and
//!   whose assigned available servers lack pieces gets those pieces written. Skipped: an object
//!   whose oldest piece has more than [`RepairConfig::max_age`] of its server's FIFO written
//!   after it — in FIFO caches it is dying, and a piece written for it now would outlive the
//!   rest (measured: repairing those raises the unprotected fraction).
//! * **Rate.** Each server may write [`RepairConfig::rate`] × [`RepairConfig::every`] bytes per
//!   round, plus what its last round left, at most two rounds' worth. The first object whose
//!   pieces do not fit ends the server's round (it goes first next round, with the carried
//!   budget), unless they cost more than two rounds: such an object is never repaired. Rounds fall at `every`, `2·every`, … trace
//!   seconds, each before the first request at or after its time (all due rounds run).
//! * **Cost.** What it writes counts as the servers' writes (bytes written, write imbalance, the
//!   write load parity rebalance sees) and may evict other pieces, as any write does. What it
//!   reads (K chunks per coded object, one copy per replicated one) is counted apart.
//!
//! Only `c2dn` repairs; the other schemes are the paper's baselines.

use ecdn_placement::chunk_id;
use ecdn_placement::pieces::{self, NO_SERVER};

use super::{Map, Piece, Scheme, Sim};

/// Settings of the background repair.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RepairConfig {
    /// Bytes per trace second each server may write; 0 turns it off.
    pub rate: u64,
    /// Trace seconds between repair rounds.
    pub every: f64,
    /// Only objects requested at least this many times are repaired.
    pub min_requests: u32,
    /// Only objects whose oldest piece has less than this fraction of its server's FIFO
    /// written after it are repaired.
    pub max_age: f64,
    /// Objects a server looks at per round (its most requested).
    pub scan: usize,
}

impl RepairConfig {
    /// No repair (the other fields are the live cluster's defaults).
    pub const OFF: RepairConfig = RepairConfig {
        rate: 0,
        every: 60.0,
        min_requests: 2,
        max_age: 0.5,
        scan: 1000,
    };
}

/// What the repair did in a run.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct RepairStats {
    /// Server rounds that wrote something.
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

/// The repair's state.
pub(super) struct Repair {
    cfg: RepairConfig,
    /// Rounds done (the next falls at `(done + 1) · every`).
    done: u64,
    /// Per server: bytes its last round left.
    carry: Vec<u64>,
    /// Per server: requests it served per object (size, count).
    requests: Vec<Map<(u64, u32)>>,
    pub(super) stats: RepairStats,
}

fn map<V>(seed: u64) -> Map<V> {
    Map::with_hasher(foldhash::fast::FixedState::with_seed(seed))
}

/// Why an object's repair did not write.
enum Skip {
    Nothing,
    OverBudget,
}

impl Repair {
    pub(super) fn new(cfg: RepairConfig, scheme: Scheme, servers: usize) -> Repair {
        let cfg = if scheme == Scheme::C2dn {
            cfg
        } else {
            RepairConfig::OFF
        };
        Repair {
            cfg,
            done: 0,
            carry: vec![0; servers],
            requests: (0..servers).map(|s| map(40 + s as u64)).collect(),
            stats: RepairStats::default(),
        }
    }

    #[inline]
    pub(super) fn on(&self) -> bool {
        self.cfg.rate > 0
    }

    /// Server `server` serves a request for `object` of `size` bytes.
    #[inline]
    pub(super) fn requested(&mut self, server: usize, object: u64, size: u64) {
        if let Some(m) = self.requests.get_mut(server) {
            let e = m.entry(object).or_insert((size, 0));
            *e = (size, e.1.saturating_add(1));
        }
    }
}

impl Sim {
    /// The repair rounds due at trace time `time`, if any.
    pub(super) fn repair_if_due(&mut self, time: f64) {
        if !self.repair.on() {
            return;
        }
        while time >= (self.repair.done + 1) as f64 * self.repair.cfg.every {
            self.repair.done += 1;
            for server in 0..self.caches.len() {
                if self.placement.is_available(server) {
                    self.repair_round(server, time);
                }
            }
        }
    }

    /// One round of `server` (see the module documentation).
    fn repair_round(&mut self, server: usize, time: f64) {
        let cfg = self.repair.cfg;
        let round = (cfg.rate as f64 * cfg.every) as u64;
        let mut left = self.repair.carry[server]
            .saturating_add(round)
            .min(round.saturating_mul(2));
        let mut candidates: Vec<(u32, u64, u64)> = self.repair.requests[server]
            .iter()
            .filter(|(_, &(_, n))| n >= cfg.min_requests)
            .filter(|(&o, _)| self.serving(self.placement.bucket_of(o)) == Some(server))
            .map(|(&o, &(size, n))| (n, o, size))
            .collect();
        let order = |a: &(u32, u64, u64), b: &(u32, u64, u64)| b.0.cmp(&a.0).then(a.1.cmp(&b.1));
        if candidates.len() > cfg.scan && cfg.scan > 0 {
            candidates.select_nth_unstable_by(cfg.scan - 1, order);
        }
        candidates.truncate(cfg.scan);
        candidates.sort_unstable_by(order);
        let mut wrote = false;
        for (_, object, size) in candidates {
            match self.repair_object(object, size, time, left) {
                Ok(bytes) => {
                    left -= bytes.min(left);
                    wrote = true;
                }
                Err(Skip::Nothing) => {}
                Err(Skip::OverBudget) => break,
            }
        }
        if wrote {
            self.repair.stats.rounds += 1;
        }
        self.repair.carry[server] = left;
    }

    /// The serving server of `bucket` (its first data server), as the live map's `serving`.
    fn serving(&self, bucket: usize) -> Option<usize> {
        self.placement.data_servers(bucket).first().copied()
    }

    /// Writes the pieces `object` (of `size` bytes) lacks on its assigned servers if it may
    /// and `budget` covers them: `Ok(bytes written)`.
    fn repair_object(
        &mut self,
        object: u64,
        size: u64,
        time: f64,
        budget: u64,
    ) -> Result<u64, Skip> {
        let coded = size > self.cfg.threshold;
        let (k, p) = (self.cfg.k, self.cfg.p);
        let width = k + p;
        let bucket = self.placement.bucket_of(object);
        // The servers asked, as a node asks them: the bucket's servers of both kinds of
        // pieces and the slots' former servers, those available.
        let mut servers = Vec::with_capacity(2 * width + 4);
        for c in [false, true] {
            pieces::pieces(
                &self.placement,
                self.cfg.scheme,
                k,
                p,
                bucket,
                c,
                2,
                &mut self.placed,
                &mut self.ring,
            );
            servers.extend(self.placed.iter().map(|pc| pc.server));
        }
        for c in 0..width.max(2) {
            servers.extend(
                self.former
                    .former(bucket, c)
                    .into_iter()
                    .filter(|&s| s != NO_SERVER),
            );
        }
        servers.sort_unstable();
        servers.dedup();
        servers.retain(|&s| self.placement.is_available(s));
        // What they hold: distinct chunks (or copies), and the oldest piece.
        let mut chunks: u32 = 0;
        let mut copies = 0;
        let mut oldest: f64 = 0.0;
        for &s in &servers {
            let capacity = self.caches[s].capacity();
            let keys = std::iter::once((object, None))
                .chain((0..width).map(|c| (chunk_id(object, c), Some(c))));
            for (key, chunk) in keys {
                if self.caches[s].eviction().peek(key).is_none() {
                    continue;
                }
                match chunk {
                    Some(c) => chunks |= 1 << c,
                    None => copies += 1,
                }
                oldest = oldest.max(self.ages.age(s, key, self.written[s], capacity));
            }
        }
        let readable = if coded {
            chunks.count_ones() as usize >= k
        } else {
            copies > 0
        };
        if !readable || oldest > self.repair.cfg.max_age {
            return Err(Skip::Nothing);
        }
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
        let mut missing = Vec::with_capacity(self.placed.len());
        for pc in &self.placed {
            let key = if coded {
                chunk_id(object, pc.chunk)
            } else {
                object
            };
            if self.placement.is_available(pc.server)
                && self.caches[pc.server].eviction().peek(key).is_none()
            {
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
            return Err(Skip::Nothing);
        }
        let cost = piece_size.saturating_mul(missing.len() as u64);
        if cost > budget {
            // What two rounds cannot pay for is never repaired; anything else waits.
            let most = (self.repair.cfg.rate as f64 * self.repair.cfg.every) as u64;
            return Err(if cost > most.saturating_mul(2) {
                Skip::Nothing
            } else {
                Skip::OverBudget
            });
        }
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
        self.drop_dying();
        Ok(cost)
    }
}
