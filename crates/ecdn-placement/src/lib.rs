//! C2DN bucket placement (NSDI '22, §4.1–§4.2, Appendix 10.3): which servers hold the data
//! buckets and the parity buckets of every bucket, and how that changes when servers fail,
//! return, or the write load drifts.
//!
//! * **Buckets.** Objects map to one of `buckets` buckets ([`Placement::bucket_of`], a fixed
//!   documented hash, see [`hash`]). Each bucket is coded into `K` *data buckets* and `P`
//!   *parity buckets*, each on a distinct server.
//! * **Data buckets** follow consistent hashing with virtual nodes in proportion to server
//!   weight: server `s` gets `max(1, round(w_s / w_min · vnodes_per_unit))` virtual nodes at
//!   ring positions `hash_tuple(seed, 1, [s, v])`, a bucket sits at `hash_tuple(seed, 2, [b])`,
//!   and its data buckets go to the first `K` distinct available servers walking clockwise from
//!   there (Fig. 11; servers already chosen and unavailable ones are stepped over). The walk
//!   itself is [`Placement::ring_servers`] (what replication and C2DN-NoRebal use). When a
//!   server leaves or returns, only the data buckets it loses or regains move, and they keep
//!   their index (data chunk `i` of the bucket stays data chunk `i` on the servers that keep
//!   it), so a return restores the data placement exactly. With `K > 1` a server holds at most
//!   one data bucket per bucket, which compresses data shares somewhat toward even (a 2× server
//!   gets ≈1.8× the data buckets at `K = 3` of 10 servers); the parity budgets, proportional to
//!   weight, make up for it.
//! * **Parity buckets** are placed by *parity rebalance*, Algorithm 1 ([`rebalance`]): a
//!   maximum flow from parity buckets to the servers not holding the bucket's data, capped by
//!   each server's write budget `⌈W·w_i/Σw⌉ − l_i`, then each parity bucket to its least
//!   loaded candidate, so parity write load evens out the imbalance that consistent hashing
//!   leaves in the data write load. Two measured refinements are on by default and can be
//!   switched off ([`RebalanceOptions`]): the flow prefers each parity bucket's current server
//!   ([`Stability::SteerFlow`]: a moved parity bucket loses its cached chunks), and budgets are
//!   water-filled when a server's data load alone exceeds its share ([`Budget::WaterFill`]).
//! * **What is balanced** ([`Weigh`]). By default, as in the authors' simulator and prototype,
//!   every chunk bucket weighs 1: a server's data chunk buckets are its fixed load and parity
//!   buckets fill every server up to `⌈(K + P) · buckets / |A|⌉` chunk buckets in total, so the
//!   servers end with equal chunk-bucket counts (within one, unless a server's data buckets
//!   alone exceed its share), which are equal write loads once
//!   buckets carry similar loads (hundreds of buckets). With [`Weigh::Loads`] the loads the
//!   caller records ([`Placement::record_data_write`], [`Placement::record_parity_write`]:
//!   bytes written since the last rebalance) are balanced instead; every rebalance and every
//!   availability change consumes them and starts again from zero, and before any load is
//!   known the counts are used.
//! * **Server failure** ([`Placement::set_available`] with `false`): the failed server's data
//!   buckets move to the next server of their walk; its parity buckets `P` and the parity
//!   buckets that now share a server with their bucket's data (`P′`) are re-placed by
//!   Algorithm 1; `P` is remembered. **Server return**: it takes its data buckets back, then as
//!   many of its remembered parity buckets as its budget allows, then parity buckets from the
//!   most loaded servers while budget remains. **Periodic rebalance** ([`Placement::rebalance`])
//!   runs Algorithm 1 over all parity buckets.
//! * **Chunk ids.** Chunk `c` of object `o` is cached under [`chunk_id`]`(o, c)` (data chunks
//!   `0..K`, parity chunks `K..K+P`); a replicated object under `o` itself. The simulator and
//!   the node share this function, so both look a chunk up under the same id.
//!
//! * **Hand-over.** [`Placement::snapshot`] takes what changes and [`Placement::restore`]
//!   rebuilds the same placement from the configuration and that [`PlacementState`], so a
//!   coordinator taking over from another continues where it left off.
//!
//! `data_servers` and `parity_servers` read precomputed tables (O(1), no allocation); they are
//! on the request path. Everything is deterministic for a given configuration and seed.

pub mod hash;
mod membership;
pub mod pieces;
pub mod rebalance;
mod ring;
pub mod slices;
mod state;

use std::time::{Duration, Instant};

use thiserror::Error;

pub use hash::chunk_id;
pub use rebalance::{
    parity_rebalance, Budget, ParityAssignment, ParityProblem, RebalanceOptions, Stability, Weigh,
    FIRST_REBALANCE_AFTER, REBALANCE_EVERY_S,
};
pub use state::PlacementState;

use hash::{hash_tuple, mix64, reduce, DOMAIN_BUCKET, DOMAIN_OBJECT};
use rebalance::{budgets, lighter, quantise_weights};
use ring::{vnode_counts, weight_unit, Ring, MAX_VNODES};

/// The most buckets a placement supports (C2DN uses about ten per server): its tables are
/// per bucket and chunk, so a mistyped bucket count must be an error, not an allocation of
/// terabytes.
pub const MAX_BUCKETS: usize = 1 << 20;

/// The bucket of `object_id` among `buckets`, with the key of [`Placement::object_key`]:
/// what [`Placement::bucket_of`] computes.
#[inline]
pub fn bucket_of_key(object_key: u64, buckets: usize, object_id: u64) -> usize {
    reduce(mix64(object_id ^ object_key), buckets)
}

/// A server's index in the weights given to [`Placement::new`].
pub type ServerId = usize;

/// Marks an unplaced parity slot in the tables.
const NONE: ServerId = usize::MAX;

/// What a [`Placement`] is built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlacementConfig {
    /// Number of buckets objects hash to (the paper's production clusters use hundreds).
    pub buckets: usize,
    /// Data buckets (data chunks) per bucket, `K`.
    pub k: usize,
    /// Parity buckets (parity chunks) per bucket, `P`.
    pub p: usize,
    /// Virtual nodes of the lightest server; a server `x` times heavier gets `x` times as many.
    /// The default, 100, puts a server's share of the ring within about ±10% (one standard
    /// deviation ≈ 1/√100) of its weight share, below the sampling noise of a few dozen data
    /// buckets per server that dominates at the paper's scale (100 buckets, 10 servers).
    pub vnodes_per_unit: usize,
    /// Seeds the ring, bucket positions and `bucket_of`.
    pub seed: u64,
}

impl Default for PlacementConfig {
    fn default() -> Self {
        PlacementConfig {
            buckets: 100,
            k: 3,
            p: 1,
            vnodes_per_unit: 100,
            seed: 0,
        }
    }
}

/// Why a placement (or a parity problem) cannot be built.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum PlacementError {
    #[error("no servers")]
    NoServers,
    #[error("buckets must be at least 1")]
    ZeroBuckets,
    #[error("{buckets} buckets are too many; at most {max} are supported")]
    TooManyBuckets { buckets: usize, max: usize },
    #[error("k (data chunks per bucket) must be at least 1")]
    ZeroK,
    #[error("vnodes_per_unit must be at least 1")]
    ZeroVnodes,
    #[error("k + p = {needed} chunks need as many distinct servers, but there are only {servers}")]
    TooFewServers { needed: usize, servers: usize },
    #[error("server {server} has weight {weight}; weights must be finite and positive")]
    BadWeight { server: ServerId, weight: f64 },
    #[error("server {server} is listed twice")]
    DuplicateServer { server: ServerId },
    #[error("the weights need {vnodes} virtual nodes; at most {max} are supported")]
    TooManyVnodes { vnodes: usize, max: usize },
    #[error("the stored placement state does not fit: {0}")]
    BadState(String),
}

/// What a rebalance or an availability change did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RebalanceReport {
    /// Parity buckets (bucket, parity index) whose server changed.
    pub moved_parity: usize,
    /// Data buckets (bucket, data index) whose server changed.
    pub moved_data: usize,
    /// Wall time of the whole procedure.
    pub elapsed: Duration,
    /// Parity buckets given to Algorithm 1.
    pub replaced_parity: usize,
    /// Parity buckets a returning server got back from before its failure.
    pub restored_parity: usize,
    /// Parity buckets a returning server took from the most loaded servers.
    pub taken_parity: usize,
    /// Chunk buckets were counted ([`Weigh::Counts`], or no load was recorded since the last
    /// rebalance), not bytes.
    pub count_mode: bool,
    /// Maximum flow of the Algorithm 1 run, and the total parity load it could have carried.
    pub max_flow: u128,
    pub supply: u128,
    /// Predicted write load per unit weight after the change (the loads the decision used),
    /// max over mean across available servers; 1 when nothing was placed.
    pub predicted_max_over_mean: f64,
}

/// Loads a decision works with: recorded bytes, or chunk bucket counts (each data chunk bucket
/// and each parity bucket 1; see [`Weigh`]).
struct Loads {
    data: Vec<u64>,
    parity: Vec<u64>,
    count_mode: bool,
}

/// Data and parity bucket placement for one cluster.
#[derive(Clone, Debug)]
pub struct Placement {
    cfg: PlacementConfig,
    weights: Vec<f64>,
    /// The weight with `vnodes_per_unit` virtual nodes (the lightest at construction).
    weight_unit: f64,
    quantised: Vec<u64>,
    available: Vec<bool>,
    n_available: usize,
    ring: Ring,
    ring_start: Vec<u32>,
    object_key: u64,
    /// First `walk_len` distinct available servers of each bucket's walk, stride `walk_width`.
    walk: Vec<ServerId>,
    walk_width: usize,
    walk_len: usize,
    /// Data servers, stride `k`, first `data_len` used.
    data: Vec<ServerId>,
    data_len: usize,
    /// Parity servers, stride `p`, first `parity_len` placed.
    parity: Vec<ServerId>,
    parity_len: usize,
    data_load: Vec<u64>,
    parity_load: Vec<u64>,
    /// Bytes written to each server since it last became available (data and parity), for
    /// [`RebalanceOptions::carry_ppm`].
    written: Vec<u64>,
    /// Parity buckets (`bucket * p + index`) each server held when it last failed.
    remembered: Vec<Vec<usize>>,
    options: RebalanceOptions,
}

impl Placement {
    /// Builds the placement for servers `0..weights.len()` (all available) with the given
    /// weights (any positive scale; only ratios matter). Parity buckets start placed so that
    /// every server holds the same number of chunk buckets, data and parity (within one).
    pub fn new(weights: &[f64], cfg: PlacementConfig) -> Result<Placement, PlacementError> {
        Placement::with_unit(weights, cfg, weight_unit(weights))
    }

    /// [`Placement::new`] with the weight that gets `vnodes_per_unit` virtual nodes given
    /// (a restored placement keeps its original one).
    fn with_unit(
        weights: &[f64],
        cfg: PlacementConfig,
        unit: f64,
    ) -> Result<Placement, PlacementError> {
        if weights.is_empty() {
            return Err(PlacementError::NoServers);
        }
        if cfg.buckets == 0 {
            return Err(PlacementError::ZeroBuckets);
        }
        if cfg.buckets > MAX_BUCKETS {
            return Err(PlacementError::TooManyBuckets {
                buckets: cfg.buckets,
                max: MAX_BUCKETS,
            });
        }
        if cfg.k == 0 {
            return Err(PlacementError::ZeroK);
        }
        if cfg.vnodes_per_unit == 0 {
            return Err(PlacementError::ZeroVnodes);
        }
        if let Some((server, &weight)) = weights
            .iter()
            .enumerate()
            .find(|(_, &w)| !(w.is_finite() && w > 0.0))
        {
            return Err(PlacementError::BadWeight { server, weight });
        }
        let needed = cfg.k.saturating_add(cfg.p);
        if needed > weights.len() {
            return Err(PlacementError::TooFewServers {
                needed,
                servers: weights.len(),
            });
        }
        if !(unit.is_finite() && unit > 0.0) {
            return Err(PlacementError::BadState(format!(
                "the weight unit {unit} must be finite and positive"
            )));
        }
        let vnodes = vnode_counts(weights, unit, cfg.vnodes_per_unit);
        let total: usize = vnodes.iter().fold(0usize, |a, &v| a.saturating_add(v));
        if total > MAX_VNODES {
            return Err(PlacementError::TooManyVnodes {
                vnodes: total,
                max: MAX_VNODES,
            });
        }
        let ring = Ring::new(vnodes, cfg.seed);
        let ring_start = (0..cfg.buckets)
            .map(|b| ring.start(hash_tuple(cfg.seed, DOMAIN_BUCKET, &[b as u64])) as u32)
            .collect();
        let servers = weights.len();
        let walk_width = needed.max(3).min(servers);
        let mut placement = Placement {
            cfg,
            weights: weights.to_vec(),
            weight_unit: unit,
            quantised: quantise_weights(weights),
            available: vec![true; servers],
            n_available: servers,
            ring,
            ring_start,
            object_key: mix64(cfg.seed ^ DOMAIN_OBJECT.wrapping_mul(hash::GOLDEN_GAMMA)),
            walk: vec![NONE; cfg.buckets * walk_width],
            walk_width,
            walk_len: 0,
            data: vec![NONE; cfg.buckets * cfg.k],
            data_len: 0,
            parity: vec![NONE; cfg.buckets * cfg.p],
            parity_len: 0,
            data_load: vec![0; servers],
            parity_load: vec![0; cfg.buckets * cfg.p],
            written: vec![0; servers],
            remembered: vec![Vec::new(); servers],
            options: RebalanceOptions::default(),
        };
        placement.compute_walks();
        let mut changes = Vec::new();
        placement.update_data(&mut changes);
        placement.parity_len = placement.parity_slots();
        let loads = placement.effective_loads();
        let nodes = placement.invalid_parity();
        placement.replace_parity(&nodes, &loads);
        Ok(placement)
    }

    pub fn config(&self) -> &PlacementConfig {
        &self.cfg
    }

    /// Number of servers, available or not.
    pub fn servers(&self) -> usize {
        self.weights.len()
    }

    pub fn buckets(&self) -> usize {
        self.cfg.buckets
    }

    pub fn k(&self) -> usize {
        self.cfg.k
    }

    pub fn p(&self) -> usize {
        self.cfg.p
    }

    pub fn weight(&self, server: ServerId) -> f64 {
        self.weights[server]
    }

    /// Virtual nodes of `server` on the ring.
    pub fn vnodes(&self, server: ServerId) -> usize {
        self.ring.vnodes(server)
    }

    /// Knobs of parity rebalance (default: [`Stability::SteerFlow`], [`Budget::WaterFill`]).
    pub fn rebalance_options(&self) -> RebalanceOptions {
        self.options
    }

    pub fn set_rebalance_options(&mut self, options: RebalanceOptions) {
        self.options = options;
    }

    /// The bucket of an object: `((mix64(id ⊕ key) · buckets) ≫ 64)` with
    /// `key = mix64(seed ⊕ 3·φ)` (see [`hash`]).
    #[inline]
    pub fn bucket_of(&self, object_id: u64) -> usize {
        bucket_of_key(self.object_key, self.cfg.buckets, object_id)
    }

    /// The key `bucket_of` mixes into object ids, for [`bucket_of_key`] where no `Placement` is
    /// at hand (a live node's copy of the bucket map).
    pub fn object_key(&self) -> u64 {
        self.object_key
    }

    /// Servers of the bucket's data buckets; index `i` holds data chunk `i`. Length `K`, fewer
    /// only while fewer than `K` servers are available.
    #[inline]
    pub fn data_servers(&self, bucket: usize) -> &[ServerId] {
        let at = bucket * self.cfg.k;
        &self.data[at..at + self.data_len]
    }

    /// Servers of the bucket's parity buckets; index `j` holds parity chunk `j`. Length `P`,
    /// fewer only while fewer than `K + P` servers are available.
    #[inline]
    pub fn parity_servers(&self, bucket: usize) -> &[ServerId] {
        let at = bucket * self.cfg.p;
        &self.parity[at..at + self.parity_len]
    }

    /// The first `n` distinct available servers walking the ring clockwise from the bucket's
    /// position (fewer if fewer are available). For `n ≤ max(K + P, 3)` this reads a
    /// precomputed table. As sets, `ring_servers(b, K)` and `data_servers(b)` are equal; the
    /// order differs only after failures, because data chunks keep their index.
    pub fn ring_servers(&self, bucket: usize, n: usize) -> Vec<ServerId> {
        let mut out = Vec::with_capacity(n.min(self.n_available));
        self.ring_servers_into(bucket, n, &mut out);
        out
    }

    /// [`Placement::ring_servers`] into a caller's buffer (cleared first).
    pub fn ring_servers_into(&self, bucket: usize, n: usize, out: &mut Vec<ServerId>) {
        if n <= self.walk_len || self.walk_len == self.n_available {
            let at = bucket * self.walk_width;
            out.clear();
            out.extend_from_slice(&self.walk[at..at + n.min(self.walk_len)]);
        } else {
            self.ring
                .walk_into(self.ring_start[bucket] as usize, n, &self.available, out);
        }
    }

    #[inline]
    pub fn is_available(&self, server: ServerId) -> bool {
        self.available[server]
    }

    /// Number of available servers, `|A|`.
    pub fn available_servers(&self) -> usize {
        self.n_available
    }

    /// Counts `bytes` written to `server`'s data buckets or uncoded (replicated) objects.
    #[inline]
    pub fn record_data_write(&mut self, server: ServerId, bytes: u64) {
        let l = &mut self.data_load[server];
        *l = l.saturating_add(bytes);
        self.written[server] = self.written[server].saturating_add(bytes);
    }

    /// Counts `bytes` written to parity bucket `parity_index` of `bucket`.
    #[inline]
    pub fn record_parity_write(&mut self, bucket: usize, parity_index: usize, bytes: u64) {
        assert!(parity_index < self.cfg.p, "parity index out of range");
        let n = bucket * self.cfg.p + parity_index;
        let s = &mut self.parity_load[n];
        *s = s.saturating_add(bytes);
        if let Some(w) = self.written.get_mut(self.parity[n]) {
            *w = w.saturating_add(bytes);
        }
    }

    /// Data write load `l_i` of `server` since the last rebalance.
    pub fn data_load(&self, server: ServerId) -> u64 {
        self.data_load[server]
    }

    /// Write load `s_n` of a parity bucket since the last rebalance.
    pub fn parity_load(&self, bucket: usize, parity_index: usize) -> u64 {
        self.parity_load[bucket * self.cfg.p + parity_index]
    }

    /// Parity buckets `(bucket, parity index)` that `server` held when it last failed and has not
    /// yet been offered back.
    pub fn remembered_parity(&self, server: ServerId) -> Vec<(usize, usize)> {
        let p = self.cfg.p;
        self.remembered[server]
            .iter()
            .map(|&n| (n / p, n % p))
            .collect()
    }

    /// Marks a server failed or returned and re-places buckets as Appendix 10.3 describes (see
    /// the crate documentation), using and then resetting the loads recorded since the last
    /// rebalance. Setting the current state again changes nothing.
    ///
    /// Data loads are recorded per server, so when data buckets change server the decision
    /// estimates that each carried an even share of its old server's data load. Fewer than `K`
    /// (or `K + P`) available servers shrink `data_servers` (or `parity_servers`); in that
    /// regime data indexes follow the walk order. Panics if `server >= servers()`.
    pub fn set_available(&mut self, server: ServerId, available: bool) -> RebalanceReport {
        let started = Instant::now();
        if self.available[server] == available {
            return RebalanceReport {
                elapsed: started.elapsed(),
                predicted_max_over_mean: 1.0,
                ..RebalanceReport::default()
            };
        }
        let mut loads = self.effective_loads();
        // A failed server writes nothing; whatever was recorded for it while down is ignored.
        if available {
            loads.data[server] = 0;
            // A returning server starts level with the least-written one (carry).
            self.written[server] = (0..self.servers())
                .filter(|&s| self.available[s])
                .map(|s| self.written[s])
                .min()
                .unwrap_or(0);
        }
        let before_data = self.data.clone();
        let before_parity = self.parity.clone();
        let held = self.data_counts();

        self.available[server] = available;
        if available {
            self.n_available += 1;
        } else {
            self.n_available -= 1;
            self.remembered[server] = (0..self.cfg.buckets * self.cfg.p)
                .filter(|&n| self.parity[n] == server && n % self.cfg.p < self.parity_len)
                .collect();
        }
        self.compute_walks();
        let mut changes = Vec::new();
        self.update_data(&mut changes);
        transfer_data_load(&mut loads.data, &held, &mut changes);
        self.parity_len = self.parity_slots();

        let nodes = self.invalid_parity();
        let mut report = self.replace_parity(&nodes, &loads);
        if available {
            let (restored, taken) = self.take_back(server, &loads);
            report.restored_parity = restored;
            report.taken_parity = taken;
            report.predicted_max_over_mean = self.predicted_max_over_mean(&loads);
        }
        if loads.count_mode {
            // By count, the whole parity mapping is then solved again, as the authors' code
            // does at every availability change, so every server ends at its cap or one below.
            // With `SteerFlow` only the parity buckets of servers above their cap move: at a
            // failure, servers that took so many of the failed server's data buckets that they
            // passed the raised cap; at a return, what servers took in while it was away and
            // it could not take back.
            let settled = self.replace_parity(&self.placed_parity(), &loads);
            report.max_flow = settled.max_flow;
            report.supply = settled.supply;
            report.predicted_max_over_mean = settled.predicted_max_over_mean;
        }
        report.moved_data = count_changes(&before_data, &self.data);
        report.moved_parity = count_changes(&before_parity, &self.parity);
        self.reset_loads();
        report.elapsed = started.elapsed();
        report
    }

    /// Periodic parity rebalance: Algorithm 1 over all parity buckets with the loads recorded
    /// since the last rebalance (chunk buckets with [`Weigh::Counts`] or if none were recorded),
    /// then resets the load counters.
    pub fn rebalance(&mut self) -> RebalanceReport {
        let started = Instant::now();
        if self.options.hold_ppm > 0 && self.within_hold() {
            // Balanced enough: nothing moves, and the loads keep adding up.
            return RebalanceReport {
                elapsed: started.elapsed(),
                ..RebalanceReport::default()
            };
        }
        let mut loads = self.effective_loads();
        if self.options.carry_ppm > 0
            && self.options.budget == Budget::WaterFill
            && !loads.count_mode
        {
            self.add_carry(&mut loads);
        }
        let before = self.parity.clone();
        let mut report = self.replace_parity(&self.placed_parity(), &loads);
        report.moved_parity = count_changes(&before, &self.parity);
        self.reset_loads();
        report.elapsed = started.elapsed();
        report
    }

    // ---- internals ----

    /// Whether the write imbalance so far over the available servers is within
    /// [`RebalanceOptions::hold_ppm`] (and something was written).
    fn within_hold(&self) -> bool {
        let avail = (0..self.servers()).filter(|&s| self.available[s]);
        let (least, most) = avail.fold((u128::MAX, 0u128), |(l, m), s| {
            let w = u128::from(self.written[s]);
            (l.min(w), m.max(w))
        });
        least > 0
            && least != u128::MAX
            && most * 1_000_000 <= least * (1_000_000 + u128::from(self.options.hold_ppm))
    }

    /// [`RebalanceOptions::carry_ppm`]: raises each available server's fixed load by its excess
    /// of bytes written over the least-written available server, capped at that share of one
    /// period's mean per-server load.
    fn add_carry(&self, loads: &mut Loads) {
        let avail: Vec<usize> = (0..self.servers()).filter(|&s| self.available[s]).collect();
        let Some(least) = avail.iter().map(|&s| self.written[s]).min() else {
            return;
        };
        let period: u128 = avail
            .iter()
            .map(|&s| u128::from(loads.data[s]))
            .sum::<u128>()
            + loads.parity.iter().map(|&s| u128::from(s)).sum::<u128>();
        let mean = period / avail.len().max(1) as u128;
        let cap = u64::try_from(mean * u128::from(self.options.carry_ppm) / 1_000_000)
            .unwrap_or(u64::MAX);
        for &s in &avail {
            let excess = (self.written[s] - least).min(cap);
            loads.data[s] = loads.data[s].saturating_add(excess);
        }
    }

    fn reset_loads(&mut self) {
        self.data_load.fill(0);
        self.parity_load.fill(0);
    }

    fn effective_loads(&self) -> Loads {
        let data: u128 = (0..self.servers())
            .filter(|&s| self.available[s])
            .map(|s| self.data_load[s] as u128)
            .sum();
        let parity: u128 = self.parity_load.iter().map(|&s| s as u128).sum();
        if data + parity == 0 || self.options.weigh == Weigh::Counts {
            // Every chunk bucket weighs 1: a server's data chunk buckets are its fixed load,
            // and the flow fills it with parity buckets up to ⌈(K + P) · buckets / |A|⌉.
            let data = self.data_counts().into_iter().map(|c| c as u64).collect();
            Loads {
                data,
                parity: vec![1; self.parity_load.len()],
                count_mode: true,
            }
        } else {
            Loads {
                data: self.data_load.clone(),
                parity: self.parity_load.clone(),
                count_mode: false,
            }
        }
    }

    /// Every parity slot in use (`bucket * p + index` for indexes below `parity_len`).
    fn placed_parity(&self) -> Vec<usize> {
        (0..self.cfg.buckets)
            .flat_map(|b| (0..self.parity_len).map(move |j| b * self.cfg.p + j))
            .collect()
    }

    /// Parity slots every bucket can have with the servers available now.
    fn parity_slots(&self) -> usize {
        self.cfg.p.min(self.n_available - self.data_len)
    }

    fn compute_walks(&mut self) {
        let w = self.walk_width;
        self.walk_len = w.min(self.n_available);
        let mut buf = Vec::with_capacity(w);
        for b in 0..self.cfg.buckets {
            self.ring
                .walk_into(self.ring_start[b] as usize, w, &self.available, &mut buf);
            self.walk[b * w..b * w + buf.len()].copy_from_slice(&buf);
            self.walk[b * w + buf.len()..(b + 1) * w].fill(NONE);
        }
    }

    /// Data servers per bucket = the first `K` available servers of its walk. A server that
    /// stays keeps its data index; servers that join take the indexes of those that left, in
    /// walk order. `changes` receives `(from, to)` per moved data bucket.
    fn update_data(&mut self, changes: &mut Vec<(ServerId, ServerId)>) {
        let k = self.cfg.k;
        let new_len = k.min(self.n_available);
        let w = self.walk_width;
        if new_len == k && self.data_len == k {
            for b in 0..self.cfg.buckets {
                let new = &self.walk[b * w..b * w + k];
                let old = &mut self.data[b * k..(b + 1) * k];
                let mut joining = Vec::new();
                joining.extend(new.iter().copied().filter(|s| !old.contains(s)));
                let mut joining = joining.into_iter();
                for slot in old.iter_mut() {
                    if !new.contains(slot) {
                        let to = joining.next().expect("as many join as leave");
                        changes.push((*slot, to));
                        *slot = to;
                    }
                }
            }
        } else {
            // Fewer than K servers available (before or after): data indexes follow the walk.
            for b in 0..self.cfg.buckets {
                for i in 0..k {
                    let to = if i < new_len {
                        self.walk[b * w + i]
                    } else {
                        NONE
                    };
                    let from = self.data[b * k + i];
                    if from != to && from != NONE && to != NONE {
                        changes.push((from, to));
                    }
                    self.data[b * k + i] = to;
                }
            }
            self.data_len = new_len;
        }
    }

    fn data_counts(&self) -> Vec<usize> {
        let mut held = vec![0usize; self.servers()];
        for b in 0..self.cfg.buckets {
            for &s in self.data_servers(b) {
                held[s] += 1;
            }
        }
        held
    }

    /// Parity slots that need a server: beyond-capacity slots are cleared; slots within
    /// `parity_len` that are unplaced, on an unavailable server, on a server holding the
    /// bucket's data (P′) or on a sibling's server are returned.
    fn invalid_parity(&mut self) -> Vec<usize> {
        let p = self.cfg.p;
        let mut nodes = Vec::new();
        for b in 0..self.cfg.buckets {
            for j in 0..p {
                let n = b * p + j;
                if j >= self.parity_len {
                    self.parity[n] = NONE;
                    continue;
                }
                let s = self.parity[n];
                let invalid = s == NONE
                    || !self.available[s]
                    || self.data_servers(b).contains(&s)
                    || self.parity[b * p..n].contains(&s);
                if invalid {
                    nodes.push(n);
                }
            }
        }
        nodes
    }

    /// Algorithm 1 over parity slots `nodes`; every other placed parity slot stays and counts
    /// as fixed load on its server.
    fn replace_parity(&mut self, nodes: &[usize], loads: &Loads) -> RebalanceReport {
        let p = self.cfg.p;
        let mut report = RebalanceReport {
            replaced_parity: nodes.len(),
            count_mode: loads.count_mode,
            predicted_max_over_mean: 1.0,
            ..RebalanceReport::default()
        };
        if nodes.is_empty() {
            report.predicted_max_over_mean = self.predicted_max_over_mean(loads);
            return report;
        }
        let mut moving = vec![false; self.parity.len()];
        for &n in nodes {
            moving[n] = true;
        }
        let mut fixed: Vec<u64> = loads.data.clone();
        for (n, &s) in self.parity.iter().enumerate() {
            if s != NONE && !moving[n] {
                fixed[s] = fixed[s].saturating_add(loads.parity[n]);
            }
        }
        let mut problem = ParityProblem::new();
        for (s, &load) in fixed.iter().enumerate() {
            if self.available[s] {
                problem
                    .add_server(s, self.weights[s], load)
                    .expect("weights were validated");
            }
        }
        let mut forbidden = Vec::with_capacity(self.cfg.k + p);
        for &n in nodes {
            let b = n / p;
            forbidden.clear();
            forbidden.extend_from_slice(self.data_servers(b));
            let slots = b * p..b * p + self.parity_len;
            for (&server, &moves) in self.parity[slots.clone()].iter().zip(&moving[slots]) {
                if !moves && server != NONE {
                    forbidden.push(server);
                }
            }
            let current = self.parity[n];
            let current = (current != NONE).then_some(current);
            problem.add_parity_bucket(b, loads.parity[n], &forbidden, current);
        }
        let result = parity_rebalance(&problem, self.options);
        for (i, &n) in nodes.iter().enumerate() {
            self.parity[n] = result.server[i].unwrap_or(NONE);
        }
        report.max_flow = result.max_flow;
        report.supply = result.supply;
        report.predicted_max_over_mean = result.max_over_mean(&problem);
        report
    }

    /// Predicted loads (data plus placed parity) per server under `loads`.
    fn predicted_loads(&self, loads: &Loads) -> Vec<u128> {
        let mut total: Vec<u128> = loads.data.iter().map(|&l| l as u128).collect();
        for (n, &s) in self.parity.iter().enumerate() {
            if s != NONE {
                total[s] += loads.parity[n] as u128;
            }
        }
        total
    }

    fn predicted_max_over_mean(&self, loads: &Loads) -> f64 {
        let total = self.predicted_loads(loads);
        let avail: Vec<ServerId> = (0..self.servers()).filter(|&s| self.available[s]).collect();
        let sum_w: f64 = avail.iter().map(|&s| self.weights[s]).sum();
        let mean = avail.iter().map(|&s| total[s] as f64).sum::<f64>() / sum_w;
        if mean <= 0.0 {
            return 1.0;
        }
        avail
            .iter()
            .map(|&s| total[s] as f64 / self.weights[s])
            .fold(0.0, f64::max)
            / mean
    }

    /// Server addition, after its data buckets are back: remembered parity buckets while the
    /// budget allows (smallest first, so as many as possible come back), then parity buckets
    /// from the most loaded servers while budget remains. Returns (restored, taken).
    fn take_back(&mut self, x: ServerId, loads: &Loads) -> (usize, usize) {
        let p = self.cfg.p;
        let remembered = std::mem::take(&mut self.remembered[x]);
        if p == 0 || self.parity_len == 0 {
            return (0, 0);
        }
        let mut load = self.predicted_loads(loads);
        let avail: Vec<ServerId> = (0..self.servers()).filter(|&s| self.available[s]).collect();
        // x's budget as a full run of Algorithm 1 would compute it, less what it holds already.
        let supply: u128 = loads.parity.iter().map(|&s| s as u128).sum();
        let q: Vec<u64> = avail.iter().map(|&s| self.quantised[s]).collect();
        let fixed: Vec<u128> = avail.iter().map(|&s| loads.data[s] as u128).collect();
        let budget = budgets(self.options.budget, supply, &q, &fixed);
        let at = avail.iter().position(|&s| s == x).expect("x is available");
        let mut left = budget[at].saturating_sub(load[x] - fixed[at]);

        let fits = |this: &Placement, n: usize| {
            let b = n / p;
            n % p < this.parity_len
                && this.parity[n] != NONE
                && this.parity[n] != x
                && !this.data_servers(b).contains(&x)
                && !this.parity_servers(b).contains(&x)
        };
        let mut wanted: Vec<usize> = remembered.into_iter().filter(|&n| fits(self, n)).collect();
        wanted.sort_by_key(|&n| (loads.parity[n], n));
        let mut restored = 0;
        for n in wanted {
            let s = loads.parity[n] as u128;
            if s <= left && fits(self, n) {
                let from = self.parity[n];
                load[from] -= s;
                load[x] += s;
                left -= s;
                self.parity[n] = x;
                restored += 1;
            }
        }

        let mut on_server: Vec<Vec<usize>> = vec![Vec::new(); self.servers()];
        for (n, &s) in self.parity.iter().enumerate() {
            if s != NONE {
                on_server[s].push(n);
            }
        }
        let qx = self.quantised[x];
        let mut taken = 0;
        let mut by_load: Vec<ServerId> = avail.iter().copied().filter(|&s| s != x).collect();
        while left > 0 {
            let qs = &self.quantised;
            by_load.sort_by(|&a, &b| {
                // Heaviest per unit weight first.
                (load[b] * qs[a] as u128)
                    .cmp(&(load[a] * qs[b] as u128))
                    .then(a.cmp(&b))
            });
            let mut best: Option<(usize, usize, u128)> = None; // (server, slot, load)
            for &y in &by_load {
                if !lighter(load[x], qx, load[y], self.quantised[y]) {
                    break; // x is now at least as loaded as every server left
                }
                for &n in &on_server[y] {
                    let s = loads.parity[n] as u128;
                    if s == 0 || s > left || !fits(self, n) {
                        continue;
                    }
                    // Only moves that leave x lighter than y was.
                    if !lighter(load[x] + s, qx, load[y], self.quantised[y]) {
                        continue;
                    }
                    if best.is_none_or(|(_, _, bs)| s > bs) {
                        best = Some((y, n, s));
                    }
                }
                if best.is_some() {
                    break;
                }
            }
            let Some((y, n, s)) = best else { break };
            load[y] -= s;
            load[x] += s;
            left -= s;
            self.parity[n] = x;
            on_server[y].retain(|&m| m != n);
            on_server[x].push(n);
            taken += 1;
        }
        (restored, taken)
    }
}

/// Moves the estimated data load with the data buckets that changed server: a server losing
/// `c` of its `held` data buckets hands `l · c / held` of its load to their new servers (the
/// caller only reports per-server data loads, so per-bucket loads are estimated as even).
fn transfer_data_load(data: &mut [u64], held: &[usize], changes: &mut [(ServerId, ServerId)]) {
    changes.sort_unstable();
    let before = data.to_vec();
    let mut i = 0;
    while i < changes.len() {
        let mut j = i;
        while j < changes.len() && changes[j] == changes[i] {
            j += 1;
        }
        let (from, to) = changes[i];
        let amount = (before[from] as u128 * (j - i) as u128 / held[from].max(1) as u128) as u64;
        data[from] = data[from].saturating_sub(amount);
        data[to] = data[to].saturating_add(amount);
        i = j;
    }
}

fn count_changes(before: &[ServerId], after: &[ServerId]) -> usize {
    before.iter().zip(after).filter(|(a, b)| a != b).count()
}
