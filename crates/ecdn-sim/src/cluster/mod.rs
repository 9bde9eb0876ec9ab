//! The C2DN cluster simulator (C2DN NSDI '22, §4 and §6): N cache servers, each a [`Cache`]
//! from the policy crate (FIFO by default, as C2DN's Traffic Server), objects mapped to buckets
//! and buckets to servers by [`ecdn_placement::Placement`] — the same placement code the live
//! cluster will run.
//!
//! Schemes:
//! - `no-rep`: one copy, on the bucket's first available server;
//! - `rep2`, `rep3`: copies on the bucket's first 2 or 3 distinct available servers;
//! - `rep2-popular`: two copies for objects requested at least `popular_min` times so far,
//!   else one;
//! - `c2dn-norebal`: objects larger than the threshold are Reed-Solomon coded into K data and P
//!   parity chunks, chunk i on the i-th server of the bucket's ring walk; smaller objects get
//!   two replicas;
//! - `c2dn`: as `c2dn-norebal`, but data chunks go to the bucket's K data servers (ring) and
//!   parity chunks to its P parity servers, placed by parity rebalance (Algorithm 1); small
//!   objects get two replicas on the first two data servers.
//!
//! When parity rebalance runs (C2DN): as in C2DN §4.2 and §5 ("only when there is an
//! unavailability event") and as the live cluster does, on every availability change; what it
//! balances is chunk-bucket counts by default, as the authors' code does, or the write loads
//! recorded since the last change (`rebalance.weigh`, see `ecdn_placement::Weigh`). Two more
//! rebalances are options, both off by default:
//! `rebalance_at` (one at that trace time, e.g. App. 10.3's initial Phase 2 once the first
//! loads are known) and `rebalance_every` (periodic; its first one at `rebalance_at`, or after
//! a tenth of the period).
//!
//! A server that returns from an unavailability keeps what its cache held (C2DN App. 10.3,
//! "Server addition"), unless it is listed in `Unavailability::returns_empty` (a replaced disk:
//! it returns empty).
//!
//! A request goes to its bucket's first available server, which serves from its own piece and
//! the pieces on peers. A replicated object hits if any available target holds a copy. A coded
//! object hits if at least K of its chunks are cached on available servers; with 1..K−1 it is a
//! **partial hit** (counted as a miss in the miss ratio): only the missing chunks come from the
//! origin. After serving, every available target that lacks its piece has it written (chunks
//! are re-encoded from the decoded object), which is how a moved bucket is refilled. With
//! `resync` (`c2dn`, on by default), that write also rewrites the pieces the object still has
//! when they are near eviction (`resync.rs`).
//!
//! Pieces in the caches: chunk c of object o is cached under [`ecdn_placement::chunk_id`]`(o,
//! c)`, the id the node uses; a replica under o itself.
//!
//! Where chunks are looked for (C2DN schemes): a target server serves any chunk of the object
//! it holds, not only the one its assignment names (a server that held a bucket's parity and
//! now holds its data after a move still has the parity chunks); and in `c2dn`, a (bucket,
//! chunk) slot that moved remembers its last two former servers, whose caches still hold its
//! chunks until they are evicted there. Without this, every parity move of a rebalance would
//! strip the moved bucket's objects of a chunk, and a rebalance during an unavailability would
//! turn hits into partial hits. The node will keep the same lookup table.
//!
//! Accounting: origin bytes (byte miss ratio); per-server bytes written (admissions) and read
//! (pieces used to serve), whose max/min ratios — the write and read imbalance — are taken over
//! the servers available for the whole run (all of them without unavailability); and the
//! **unprotected fraction** as in C2DN Fig. 6b/c: of the objects cached in the cluster (a piece
//! on an available server), those that could not survive one more unavailability — a single
//! replica, or fewer than K + 1 distinct chunks cached. It is tracked per object from every
//! admission and every eviction the servers' caches report (module `protection`), sampled at
//! each window's end; the run's value is the mean of those samples (windows that ended with
//! nothing cached left out), and the value at the end is reported too. The older per-request
//! measure (of the requests whose object was cached, those whose object was unprotected at that
//! moment) is kept as `unprotected_request_fraction`. Byte sums are `u128`, so no trace's sizes
//! can overflow them.
//!
//! Per-window series: a window is kept only if a request fell in it (each window carries its
//! index), so a gap in the trace's timestamps costs nothing, however long it is; memory stays
//! bounded by the number of requests. [`crate::cluster_sweep`] runs many (scheme, size) pairs on
//! all cores.

use std::time::Instant;

use ecdn_codec::ObjectLayout;
use ecdn_placement::pieces::{self, SlotHistory};
use ecdn_placement::slices::Slicing;
use ecdn_placement::{chunk_id, Placement, PlacementConfig, RebalanceOptions};
use ecdn_policy::spec::EvictionKind;
use ecdn_policy::{Cache, Request};
use ecdn_trace::{RequestReader, BATCH};

use crate::protection::Protection;
use crate::unavailability::{Unavailability, Window};
use crate::SimError;
use ages::PieceAges;
use repair::Repair;
pub use repair::{RepairConfig, RepairStats};
use write::Dying;

pub use ecdn_placement::pieces::Scheme;

/// Cluster simulation settings.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    pub scheme: Scheme,
    /// Server weights (relative capacities); their count is the number of servers.
    pub weights: Vec<f64>,
    /// Total cluster cache capacity in bytes, split by weight.
    pub capacity: u64,
    pub eviction: EvictionKind,
    pub k: usize,
    pub p: usize,
    /// Objects larger than this are coded (C2DN schemes).
    pub threshold: u64,
    /// Objects above the slice size are cached as fixed-size range slices, each a cache object
    /// of its own with its own bucket (`ecdn_placement::slices`); [`Slicing::OFF`] slices
    /// nothing. Default [`Slicing::DEFAULT`] (4 MiB), as the cluster file's.
    pub slicing: Slicing,
    /// Sub-chunk size of the coding (`ecdn_codec::ObjectLayout`): a partial hit fetches the
    /// exact object bytes of the missing data chunks, which depend on it in the last stripe.
    pub sub_chunk: u64,
    pub buckets: usize,
    /// Periodic parity rebalance (C2DN), every this many trace seconds; 0 never. C2DN
    /// rebalances parity only on availability changes (§4.2, §5), which the simulator always
    /// does; the periodic one (default [`ecdn_placement::REBALANCE_EVERY_S`], with
    /// [`RebalanceOptions::CLUSTER`]) is what balances writes where buckets write unequally.
    pub rebalance_every: f64,
    /// The first load-based parity rebalance (C2DN), at this trace time in seconds (App. 10.3:
    /// the initial assignment's Phase 2 once write loads are known); periodic rebalances
    /// follow every `rebalance_every`. `None` (the default): a tenth of `rebalance_every` when
    /// periodic rebalance is on, else none.
    pub rebalance_at: Option<f64>,
    /// What parity rebalance weighs and how it trades balance for stability (see
    /// `ecdn_placement`; default [`RebalanceOptions::CLUSTER`], as the live cluster's).
    pub rebalance: RebalanceOptions,
    /// Background repair of lost pieces (`c2dn` only; see [`repair`]).
    pub repair: RepairConfig,
    /// Coded schemes: when a server's policy evicts a chunk (or a replica), the object's other
    /// chunks (or replica) are dropped from every available server too, once the cache object
    /// being written has all its pieces: an object leaves the cluster whole instead of a piece
    /// at a time as the servers' FIFOs move at different speeds. The nodes' `evict_together`
    /// (`ecdn-node`'s `pieces/together.rs`) drops at the same point. Only an eviction from the
    /// server the map assigns the piece counts (a stale copy on a former server leaving takes
    /// nothing). On by default, as the cluster file's
    /// ([`ecdn_placement::pieces::EVICT_TOGETHER`]).
    pub evict_together: bool,
    /// Resync (beyond C2DN, `c2dn` only; see `resync.rs`): a read that writes back a piece its object lacks
    /// also rewrites the pieces found on the object's assigned servers when the oldest of them
    /// has more than this fraction of its server's FIFO written after it, so the object's
    /// pieces start again together. By default [`ecdn_placement::pieces::RESYNC_AGE`], as the
    /// cluster file's; `None`: only the lacking pieces are written.
    pub resync: Option<f64>,
    /// Reinsertion (beyond C2DN, every scheme; see `resync.rs`): a hit that finds every piece
    /// on its assigned servers rewrites them all when the oldest has more than this fraction of
    /// its server's FIFO written after it — FIFO with reinsertion, for the object's pieces at
    /// once. An eviction change, so the baselines get it too. By default
    /// [`ecdn_placement::pieces::REINSERT_AGE`], as the cluster file's; `None`: off.
    pub reinsert: Option<f64>,
    /// `rep2-popular`: requests after which an object counts as popular.
    pub popular_min: u32,
    /// Window of the per-window series (and of the unavailability record).
    pub window: Window,
    pub unavailability: Unavailability,
    pub seed: u64,
    /// Stop after this many requests (0: whole trace).
    pub max_requests: u64,
}

impl ClusterConfig {
    /// C2DN's defaults: 10 equal servers, FIFO, n4k3 (K = 3, P = 1), 128 KiB threshold,
    /// 100 buckets, 4 MiB slices; parity rebalanced by bytes written on availability changes
    /// and every hour (as a live cluster file's defaults); 300 s windows.
    pub fn new(scheme: Scheme, capacity: u64) -> Self {
        ClusterConfig {
            scheme,
            weights: vec![1.0; 10],
            capacity,
            eviction: EvictionKind::Fifo,
            k: 3,
            p: 1,
            threshold: 128 << 10,
            slicing: Slicing::DEFAULT,
            sub_chunk: ecdn_codec::DEFAULT_SUB_CHUNK,
            buckets: 100,
            rebalance_every: ecdn_placement::REBALANCE_EVERY_S,
            rebalance_at: None,
            rebalance: RebalanceOptions::CLUSTER,
            repair: RepairConfig::OFF,
            evict_together: ecdn_placement::pieces::EVICT_TOGETHER,
            resync: Some(ecdn_placement::pieces::RESYNC_AGE),
            reinsert: Some(ecdn_placement::pieces::REINSERT_AGE),
            popular_min: 2,
            window: Window::Seconds(300.0),
            unavailability: Unavailability::default(),
            seed: 1,
            max_requests: 0,
        }
    }
}

fn imbalance(v: &[u128]) -> f64 {
    let max = v.iter().copied().max().unwrap_or(0);
    let min = v.iter().copied().min().unwrap_or(0);
    if min == 0 {
        if max == 0 {
            1.0
        } else {
            f64::INFINITY
        }
    } else {
        max as f64 / min as f64
    }
}

/// Looks piece `key` (of `size` bytes, for `req`) up in `cache`; a hit refreshes its order. An
/// entry the cache drops because its size changed, or evicts on a hit, is reported to
/// `protection`.
#[inline]
fn probe(
    cache: &mut Cache,
    protection: &mut Protection,
    req: &Request,
    key: u64,
    size: u64,
) -> bool {
    let before = cache.eviction().len();
    let hit = cache.lookup(&Request {
        id: key,
        size,
        ..*req
    });
    if !hit && cache.eviction().len() < before {
        // The dropped entry's size is not the probe's.
        protection.removed(key, None);
    }
    // What a hit evicted (LIRS makes room for the object it promotes).
    for e in cache.evicted() {
        protection.removed(e.id, Some(e.size));
    }
    cache.clear_evicted();
    hit
}

/// What serving one cache object (or a request, summed over its slices) came to.
#[derive(Clone, Copy, Default)]
struct Served {
    /// Some bytes came from the origin.
    miss: bool,
    /// Some bytes came from the caches (a piece was found): with `miss`, a partial hit.
    some_hit: bool,
    /// Bytes fetched from the origin.
    origin: u128,
}

/// One piece of an object on one server.
#[derive(Clone, Copy)]
struct Piece {
    server: usize,
    key: u64,
    size: u64,
    /// Chunk index (0..K data, K.. parity); 0 for replicas.
    index: usize,
    /// `Some(j)`: parity chunk j (its writes count as parity load of the bucket).
    parity: Option<usize>,
}

struct Sim {
    cfg: ClusterConfig,
    placement: Placement,
    caches: Vec<Cache>,
    written: Vec<u128>,
    read: Vec<u128>,
    /// Per object requested, its requests so far: kept for `rep2-popular` (which objects are
    /// popular).
    popularity: Map<u32>,
    pieces: Vec<Piece>,
    /// Scratch: where [`pieces::pieces`] puts the pieces before they get ids and sizes.
    placed: Vec<pieces::Piece>,
    ring: Vec<usize>,
    /// C2DN: per (bucket, chunk index) slot, the servers it was assigned to before its last
    /// moves — their caches still hold its chunks, so lookups try them too.
    former: SlotHistory,
    unavailable: Vec<usize>,
    next_unavailable: Vec<usize>,
    /// Servers that were unavailable at some point of the run.
    ever_unavailable: Vec<bool>,
    /// What the caches hold of every object, for the unprotected fraction.
    protection: Protection,
    requests: u64,
    misses: u64,
    partial: u64,
    bytes: u128,
    origin: u128,
    cached_requests: u64,
    unprotected: u64,
    /// Cache objects served: a request for an object that is not sliced is one, a request for
    /// a sliced one is one per slice.
    slice_requests: u64,
    slice_misses: u64,
    partial_hit_bytes: u128,
    /// Scratch: objects a piece of which a store evicted (`evict_together`).
    dying: Vec<Dying>,
    /// Scratch: what a store's policy evicted (ids, sizes), and an evicted piece's placement.
    gone: Vec<(u64, u64)>,
    evicted_placed: Vec<pieces::Piece>,
    windows: Vec<ClusterWindow>,
    /// Background repair (`c2dn`).
    repair: Repair,
    /// How old each cached piece is (kept for repair and resync).
    ages: PieceAges,
    /// Objects resynced and reinserted (`resync.rs`).
    resyncs: u64,
    reinserts: u64,
    /// Trace time of the next load-based parity rebalance (infinite: none).
    next_rebalance: f64,
    rebalances: u64,
    rebalance_s: f64,
}

impl Sim {
    fn new(cfg: ClusterConfig) -> Result<Sim, SimError> {
        let n = cfg.weights.len();
        if !(cfg.rebalance_every.is_finite() && cfg.rebalance_every >= 0.0) {
            return Err(SimError::Config(format!(
                "invalid rebalance period {}: trace seconds, 0 for none",
                cfg.rebalance_every
            )));
        }
        if !(cfg.repair.every.is_finite() && cfg.repair.every > 0.0) {
            return Err(SimError::Config(format!(
                "invalid repair period {}: trace seconds above 0",
                cfg.repair.every
            )));
        }
        if !(cfg.repair.max_age.is_finite() && cfg.repair.max_age > 0.0) {
            return Err(SimError::Config(format!(
                "invalid repair age limit {}: a fraction of the FIFO above 0",
                cfg.repair.max_age
            )));
        }
        if let Some(at) = cfg.rebalance_at {
            if !(at.is_finite() && at >= 0.0) {
                return Err(SimError::Config(format!(
                    "invalid first rebalance time {at}: trace seconds"
                )));
            }
        }
        // Replication schemes only use the ring walk; K+P just has to fit the cluster.
        let (k, p) = cfg.scheme.placement_code(cfg.k, cfg.p);
        let placement = Placement::new(
            &cfg.weights,
            PlacementConfig {
                buckets: cfg.buckets,
                k,
                p,
                seed: cfg.seed,
                ..PlacementConfig::default()
            },
        )
        .map_err(|e| SimError::Config(e.to_string()))?;
        let mut placement = placement;
        placement.set_rebalance_options(cfg.rebalance);
        let needed = cfg.scheme.servers_needed(cfg.k, cfg.p);
        if needed > n {
            return Err(SimError::Config(format!(
                "{} needs {needed} servers; the cluster has {n}",
                cfg.scheme.name()
            )));
        }
        let total_w: f64 = cfg.weights.iter().sum();
        let caches = cfg
            .weights
            .iter()
            .map(|w| {
                let cap = (cfg.capacity as f64 * w / total_w).floor() as u64;
                Cache::new(cfg.eviction.build(cap), None)
            })
            .collect();
        for (what, age) in [("resync", cfg.resync), ("reinsert", cfg.reinsert)] {
            if let Some(r) = age {
                if !(r.is_finite() && r >= 0.0) {
                    return Err(SimError::Config(format!(
                        "invalid {what} age {r}: a fraction of the FIFO, 0 or above"
                    )));
                }
            }
        }
        // Only `c2dn` repairs and resyncs: the other schemes are the paper's baselines.
        let mut cfg = cfg;
        if cfg.scheme != Scheme::C2dn {
            cfg.resync = None;
        }
        let repair = Repair::new(cfg.repair, cfg.scheme, n);
        let ages = PieceAges::new(
            repair.on() || cfg.resync.is_some() || cfg.reinsert.is_some(),
            n,
        );
        Ok(Sim {
            placement,
            caches,
            written: vec![0; n],
            read: vec![0; n],
            popularity: Map::with_hasher(foldhash::fast::FixedState::with_seed(3)),
            pieces: Vec::with_capacity(16),
            placed: Vec::with_capacity(16),
            ring: Vec::with_capacity(8),
            former: SlotHistory::new(cfg.buckets, cfg.k, cfg.p),
            unavailable: Vec::new(),
            next_unavailable: Vec::new(),
            ever_unavailable: vec![false; n],
            // In coded schemes only objects up to the threshold are replicated.
            protection: Protection::new(
                cfg.k,
                if cfg.scheme.coded() {
                    cfg.threshold
                } else {
                    u64::MAX
                },
            ),
            requests: 0,
            misses: 0,
            partial: 0,
            bytes: 0,
            origin: 0,
            cached_requests: 0,
            unprotected: 0,
            slice_requests: 0,
            slice_misses: 0,
            partial_hit_bytes: 0,
            dying: Vec::new(),
            gone: Vec::new(),
            evicted_placed: Vec::with_capacity(16),
            windows: Vec::new(),
            // Until the first periodic rebalance the parity buckets are placed by chunk-bucket
            // count; by default it comes after a tenth of the period.
            next_rebalance: match cfg.rebalance_at {
                Some(at) => at,
                None if cfg.rebalance_every > 0.0 => {
                    cfg.rebalance_every * ecdn_placement::FIRST_REBALANCE_AFTER
                }
                None => f64::INFINITY,
            },
            rebalances: 0,
            rebalance_s: 0.0,
            repair,
            ages,
            resyncs: 0,
            reinserts: 0,
            cfg,
        })
    }

    /// Applies availability changes and periodic rebalances due at this request.
    fn advance(&mut self, time: f64) {
        let w = self.cfg.window.index(self.requests, time);
        if self.windows.last().is_none_or(|last| last.index < w) {
            // The window that ends here: its protection sample.
            self.sample_protection();
            // A new window: availability follows the record and the failure events. Windows
            // no request fell in are not kept.
            self.cfg
                .unavailability
                .at(self.requests, time, &mut self.next_unavailable);
            self.apply_availability();
            self.windows.push(ClusterWindow {
                index: w,
                start: self.requests,
                unavailable: self.unavailable.clone(),
                ..ClusterWindow::default()
            });
        } else if !self.cfg.unavailability.events.is_empty() {
            // Failure events may start or end inside a window.
            self.cfg
                .unavailability
                .at(self.requests, time, &mut self.next_unavailable);
            if self.next_unavailable != self.unavailable {
                self.apply_availability();
            }
        }
        if self.cfg.scheme == Scheme::C2dn && time >= self.next_rebalance {
            self.next_rebalance = if self.cfg.rebalance_every > 0.0 {
                time + self.cfg.rebalance_every
            } else {
                f64::INFINITY
            };
            let before = self.holders();
            let report = self.placement.rebalance();
            self.remember_moves(&before);
            self.rebalances += 1;
            self.rebalance_s += report.elapsed.as_secs_f64();
        }
        self.repair_if_due(time);
    }

    fn apply_availability(&mut self) {
        if self.next_unavailable == self.unavailable {
            return;
        }
        let servers = self.cfg.weights.len();
        for s in 0..servers {
            let down_now = self.unavailable.contains(&s);
            let down_next = self.next_unavailable.contains(&s);
            if down_now != down_next {
                if down_now && self.cfg.unavailability.returns_empty.contains(&s) {
                    // It returns with an empty cache (a replaced disk).
                    self.protection.server_emptied(&self.caches[s]);
                    self.ages.emptied(s);
                    let capacity = self.caches[s].capacity();
                    self.caches[s] = Cache::new(self.cfg.eviction.build(capacity), None);
                }
                self.protection.server_changed(&self.caches[s], !down_next);
                if down_next {
                    self.ever_unavailable[s] = true;
                }
                let before = self.holders();
                let report = self.placement.set_available(s, !down_next);
                self.remember_moves(&before);
                self.rebalances += 1;
                self.rebalance_s += report.elapsed.as_secs_f64();
            }
        }
        std::mem::swap(&mut self.unavailable, &mut self.next_unavailable);
    }

    /// The server assigned to every (bucket, chunk index) slot (C2DN; empty otherwise).
    fn holders(&self) -> Vec<usize> {
        if self.cfg.scheme != Scheme::C2dn {
            return Vec::new();
        }
        self.former.holders(&self.placement)
    }

    /// After a placement change: every slot whose server changed remembers the server it
    /// left, where its chunks are still cached (up to two former servers per slot).
    fn remember_moves(&mut self, before: &[usize]) {
        let after = self.holders();
        self.former.record(before, &after);
    }

    /// The pieces of `req` and the servers they belong on.
    fn targets(&mut self, req: &Request, bucket: usize) -> (bool, usize) {
        let coded = self.cfg.scheme.coded() && req.size > self.cfg.threshold;
        let replicas = match self.cfg.scheme {
            Scheme::Rep2Popular => {
                let requests = self.popularity.get(&req.id).copied().unwrap_or(0);
                if requests >= self.cfg.popular_min {
                    2
                } else {
                    1
                }
            }
            s => s.replicas(),
        };
        let (k, p) = (self.cfg.k, self.cfg.p);
        pieces::pieces(
            &self.placement,
            self.cfg.scheme,
            k,
            p,
            bucket,
            coded,
            replicas,
            &mut self.placed,
            &mut self.ring,
        );
        let size = if coded {
            req.size.div_ceil(k as u64)
        } else {
            req.size
        };
        self.pieces.clear();
        self.pieces.extend(self.placed.iter().map(|pc| Piece {
            server: pc.server,
            key: if coded {
                chunk_id(req.id, pc.chunk)
            } else {
                req.id
            },
            size,
            index: pc.chunk,
            parity: pc.parity,
        }));
        if coded {
            (true, k)
        } else {
            (false, 1)
        }
    }

    /// One request of the trace: served whole, or slice by slice when its object is sliced
    /// (each slice a cache object of its own, served as a request for it). The request misses
    /// if any of its slices misses.
    fn request(&mut self, req: &Request, time: f64) {
        self.advance(time);
        let slicing = self.cfg.slicing;
        let mut served = Served::default();
        if slicing.slices_object(req.size) {
            for slice in slicing.slices(req.id, req.size) {
                let s = self.serve(&Request {
                    id: slice.id,
                    size: slice.len,
                    ..*req
                });
                served.miss |= s.miss;
                served.some_hit |= s.some_hit;
                served.origin += s.origin;
            }
        } else {
            served = self.serve(req);
        }
        let w = self.windows.last_mut().expect("advance opened a window");
        w.requests += 1;
        w.bytes += u128::from(req.size);
        w.origin_bytes += served.origin;
        self.requests += 1;
        self.bytes += u128::from(req.size);
        self.origin += served.origin;
        if served.miss {
            w.misses += 1;
            self.misses += 1;
            if served.some_hit {
                w.partial_hits += 1;
                self.partial += 1;
            }
        }
    }

    /// Serves one cache object (an object that is not sliced, or one slice): looks its pieces
    /// up, reads what it hits, fetches what it misses and writes every piece its targets lack.
    fn serve(&mut self, req: &Request) -> Served {
        self.slice_requests += 1;
        if self.cfg.scheme == Scheme::Rep2Popular {
            let n = self.popularity.entry(req.id).or_insert(0);
            *n = n.saturating_add(1);
        }
        let bucket = self.placement.bucket_of(req.id);
        if self.repair.on() {
            if let Some(server) = self.placement.data_servers(bucket).first() {
                self.repair.requested(*server, req.id, req.size);
            }
        }
        let (coded, need) = self.targets(req, bucket);
        // Which pieces are cached on available servers (a lookup also refreshes LRU order).
        // `present`: piece i is on its assigned server; `have`: distinct chunk indices (or, for
        // replicas, copies) reachable, with `source[c]` the server to read chunk c from.
        let mut present: u32 = 0;
        let mut have: u32 = 0;
        let mut copies = 0usize;
        let mut source = [usize::MAX; 32];
        for (i, piece) in self.pieces.iter().enumerate() {
            if !self.placement.is_available(piece.server) {
                continue;
            }
            if probe(
                &mut self.caches[piece.server],
                &mut self.protection,
                req,
                piece.key,
                piece.size,
            ) {
                present |= 1 << i;
                copies += 1;
                if have & (1 << piece.index) == 0 {
                    have |= 1 << piece.index;
                    source[piece.index] = piece.server;
                }
            }
        }
        if coded && present.count_ones() < self.pieces.len() as u32 {
            // A server serves any chunk of the object it holds, not only the one its bucket
            // assignment names: after a bucket moves, a server that held the bucket's parity
            // and now holds its data still has the old parity chunks.
            let chunks = self.cfg.k + self.cfg.p;
            for (i, piece) in self.pieces.iter().enumerate() {
                if present & (1 << i) != 0 || !self.placement.is_available(piece.server) {
                    continue;
                }
                for (c, src) in source.iter_mut().enumerate().take(chunks) {
                    if have & (1 << c) != 0 || c == piece.index {
                        continue;
                    }
                    if probe(
                        &mut self.caches[piece.server],
                        &mut self.protection,
                        req,
                        chunk_id(req.id, c),
                        piece.size,
                    ) {
                        have |= 1 << c;
                        *src = piece.server;
                    }
                }
            }
        }
        if self.cfg.scheme == Scheme::C2dn {
            // Chunks (or replicas) of slots that moved are still on their former servers.
            let width = self.cfg.k + self.cfg.p;
            let slots = if coded { width } else { self.pieces.len() };
            for c in 0..slots {
                let missing = if coded {
                    have & (1 << c) == 0
                } else {
                    copies == 0
                };
                if !missing {
                    continue;
                }
                for f in self.former.former(bucket, c) {
                    if f == usize::MAX
                        || !self.placement.is_available(f)
                        || self.pieces.iter().any(|p| p.server == f)
                    {
                        continue;
                    }
                    if probe(
                        &mut self.caches[f],
                        &mut self.protection,
                        req,
                        if coded { chunk_id(req.id, c) } else { req.id },
                        self.pieces[0].size,
                    ) {
                        if coded {
                            have |= 1 << c;
                            source[c] = f;
                        } else {
                            copies += 1;
                            source[0] = f;
                        }
                        break;
                    }
                }
            }
        }
        let count = if coded {
            have.count_ones() as usize
        } else {
            copies
        };
        let total_pieces = self.pieces.len();
        if count > 0 {
            self.cached_requests += 1;
            let protected = if coded { count > need } else { count >= 2 };
            if !protected {
                self.unprotected += 1;
            }
        }
        let origin = if count >= need {
            // Hit: read `need` pieces, data chunks first (they need no decoding).
            if coded {
                let chunk = self.pieces[0].size;
                let mut used = 0;
                for (c, &server) in source.iter().enumerate() {
                    if used == need {
                        break;
                    }
                    if have & (1 << c) != 0 {
                        self.read[server] += u128::from(chunk);
                        used += 1;
                    }
                }
            } else if let Some(piece) = (0..self.pieces.len())
                .find(|&i| present & (1 << i) != 0)
                .map(|i| self.pieces[i])
            {
                self.read[piece.server] += u128::from(piece.size);
            } else if source[0] != usize::MAX {
                self.read[source[0]] += u128::from(req.size);
            }
            0
        } else {
            self.slice_misses += 1;
            if count > 0 {
                // Partial hit: the cached chunks are read, only the missing ones come from
                // the origin: the object bytes of the first K − found missing data chunks, as
                // the node fetches them.
                let chunk = self.pieces[0].size;
                for (c, &server) in source.iter().enumerate() {
                    if have & (1 << c) != 0 {
                        self.read[server] += u128::from(chunk);
                    }
                }
                let missing = (0..self.cfg.k).filter(|&c| have & (1 << c) == 0);
                let fetched: u64 =
                    match ObjectLayout::new(req.size, self.cfg.k, self.cfg.p, self.cfg.sub_chunk) {
                        Ok(layout) => missing
                            .take(need - count)
                            .map(|c| layout.data_bytes(c).unwrap_or(chunk))
                            .sum(),
                        Err(_) => ((need - count) as u64).saturating_mul(chunk),
                    };
                let fetched = fetched.min(req.size);
                self.partial_hit_bytes += u128::from(req.size - fetched);
                u128::from(fetched)
            } else {
                u128::from(req.size)
            }
        };
        if count > 0 && (self.cfg.resync.is_some() || self.cfg.reinsert.is_some()) {
            present = self.resync(present, self.cfg.resync, self.cfg.reinsert);
        }
        // Every available target that lacks its piece gets it.
        for i in 0..total_pieces {
            let piece = self.pieces[i];
            if present & (1 << i) != 0 || !self.placement.is_available(piece.server) {
                continue;
            }
            self.store(piece, req, coded, bucket);
        }
        self.drop_dying();
        Served {
            miss: count < need,
            some_hit: count > 0,
            origin,
        }
    }

    /// Records the protection state in the current window (called at its end).
    fn sample_protection(&mut self) {
        if let Some(w) = self.windows.last_mut() {
            w.cached_objects = self.protection.cached_objects();
            w.unprotected_fraction = self.protection.unprotected_fraction();
        }
    }

    fn finish(mut self, elapsed: f64) -> ClusterResult {
        self.sample_protection();
        for w in &mut self.windows {
            w.miss_ratio = ratio(w.misses, w.requests);
            w.byte_miss_ratio = ratio(w.origin_bytes, w.bytes);
        }
        // The mean over the windows that ended with something cached.
        let (sum, n) = self
            .windows
            .iter()
            .filter(|w| w.cached_objects > 0)
            .fold((0.0, 0u32), |(s, n), w| (s + w.unprotected_fraction, n + 1));
        let unprotected_fraction = if n == 0 { 0.0 } else { sum / f64::from(n) };
        let mut always: Vec<usize> = (0..self.written.len())
            .filter(|&s| !self.ever_unavailable[s])
            .collect();
        if always.is_empty() {
            always = (0..self.written.len()).collect();
        }
        let over = |v: &[u128]| imbalance(&always.iter().map(|&s| v[s]).collect::<Vec<_>>());
        let write_imbalance = over(&self.written);
        let read_imbalance = over(&self.read);
        ClusterResult {
            scheme: self.cfg.scheme.name_with_code(self.cfg.k, self.cfg.p),
            cache_size: self.cfg.capacity,
            servers: self.cfg.weights.len(),
            k: self.cfg.k,
            p: self.cfg.p,
            requests: self.requests,
            miss_ratio: ratio(self.misses, self.requests),
            byte_miss_ratio: ratio(self.origin, self.bytes),
            partial_hit_ratio: ratio(self.partial, self.requests),
            slice_size: self.cfg.slicing.size(),
            slice_requests: self.slice_requests,
            slice_miss_ratio: ratio(self.slice_misses, self.slice_requests),
            write_imbalance,
            read_imbalance,
            always_available: always,
            unprotected_fraction,
            unprotected_fraction_end: self.protection.unprotected_fraction(),
            cached_objects: self.protection.cached_objects(),
            coded_by_chunks: self.protection.coded_by_chunks().to_vec(),
            unprotected_request_fraction: ratio(self.unprotected, self.cached_requests),
            bytes_written: self.written,
            bytes_read: self.read,
            origin_bytes: self.origin,
            partial_hit_bytes: self.partial_hit_bytes,
            rebalances: self.rebalances,
            rebalance_s: self.rebalance_s,
            repair: self.repair.stats,
            resyncs: self.resyncs,
            reinserts: self.reinserts,
            elapsed_s: elapsed,
            requests_per_s: if elapsed > 0.0 {
                self.requests as f64 / elapsed
            } else {
                0.0
            },
            windows: self.windows,
        }
    }
}

fn ratio(a: impl Into<u128>, b: impl Into<u128>) -> f64 {
    let (a, b) = (a.into(), b.into());
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// An age setting of resync or reinsertion as the command lines write it (`--resync`,
/// `--reinsert`): `off` (`None`), or a fraction of the FIFO, 0 or above.
pub fn parse_fifo_age(s: &str) -> Result<Option<f64>, String> {
    if s == "off" {
        return Ok(None);
    }
    match s.parse::<f64>() {
        Ok(a) if a.is_finite() && a >= 0.0 => Ok(Some(a)),
        _ => Err(format!(
            "{s:?}: off, or a fraction of the FIFO (0 or above)"
        )),
    }
}

/// Runs one cluster simulation over `reader`; `progress` gets processed-request counts.
pub fn simulate_cluster(
    reader: &mut dyn RequestReader,
    cfg: &ClusterConfig,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<ClusterResult, SimError> {
    let mut sim = Sim::new(cfg.clone())?;
    let limit = if cfg.max_requests == 0 {
        u64::MAX
    } else {
        cfg.max_requests
    };
    let start = Instant::now();
    let mut buf = Vec::with_capacity(BATCH);
    let mut t0: Option<u64> = None;
    loop {
        let want = (limit - sim.requests).min(BATCH as u64) as usize;
        if want == 0 || reader.read_batch(&mut buf, want)? == 0 {
            break;
        }
        let first = *t0.get_or_insert(buf[0].time);
        for req in &buf {
            sim.request(req, req.time.saturating_sub(first) as f64);
        }
        progress(buf.len() as u64);
    }
    Ok(sim.finish(start.elapsed().as_secs_f64()))
}

mod ages;
mod compare;
pub mod repair;
mod result;
mod resync;
mod write;
pub use compare::{compare, UnavailabilityResult};
pub use result::{ClusterResult, ClusterWindow};

/// A per-object (or per-piece) table of the simulator.
type Map<V> = hashbrown::HashMap<u64, V, foldhash::fast::FixedState>;
#[cfg(test)]
mod tests;
