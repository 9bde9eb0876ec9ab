//! What a cluster simulation reports: per window ([`ClusterWindow`]) and for the run
//! ([`ClusterResult`]); see the module documentation of [`super`] for what each measure counts.

use serde::Serialize;

use super::repair::RepairStats;

/// Counters of one window (a window with at least one request).
#[derive(Clone, Debug, Default, Serialize)]
pub struct ClusterWindow {
    /// Which window: trace time (or request index) over the window length.
    pub index: usize,
    /// Index of the window's first request.
    pub start: u64,
    pub requests: u64,
    pub misses: u64,
    pub partial_hits: u64,
    pub bytes: u128,
    pub origin_bytes: u128,
    pub miss_ratio: f64,
    pub byte_miss_ratio: f64,
    /// Servers unavailable at the window's first request.
    pub unavailable: Vec<usize>,
    /// Objects with a piece cached on an available server, at the window's end.
    pub cached_objects: u64,
    /// Of those, the fraction unprotected (one replica, or fewer than K + 1 distinct chunks),
    /// at the window's end (C2DN Fig. 6b/c).
    pub unprotected_fraction: f64,
}

/// What a cluster simulation measured.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterResult {
    pub scheme: String,
    pub cache_size: u64,
    pub servers: usize,
    pub k: usize,
    pub p: usize,
    pub requests: u64,
    pub miss_ratio: f64,
    pub byte_miss_ratio: f64,
    pub partial_hit_ratio: f64,
    /// The slice size (0: objects were not sliced).
    pub slice_size: u64,
    /// Cache objects served: one per request for an object that is not sliced, one per slice
    /// for a sliced one (equal to `requests` when nothing was sliced).
    pub slice_requests: u64,
    /// Of those, the fraction that fetched bytes from the origin. `miss_ratio` counts a
    /// request as a miss if any of its slices missed: that is the one the papers' figures
    /// compare with (their requests are for whole objects).
    pub slice_miss_ratio: f64,
    /// Max/min bytes written per server, over the servers available for the whole run
    /// (`always_available`).
    pub write_imbalance: f64,
    /// Max/min bytes read per server, over the same servers.
    pub read_imbalance: f64,
    /// The servers never unavailable during the run; all of them if every server was
    /// unavailable at some point (then the imbalances are over all servers).
    pub always_available: Vec<usize>,
    /// Of the objects cached in the cluster, the fraction unprotected (a single replica, or
    /// fewer than K + 1 distinct chunks cached on available servers; C2DN Fig. 6b/c): the
    /// mean of the per-window values, each sampled at its window's end.
    pub unprotected_fraction: f64,
    /// The same, at the end of the run.
    pub unprotected_fraction_end: f64,
    /// Objects cached on available servers at the end of the run.
    pub cached_objects: u64,
    /// Of those, the coded ones by how many distinct chunks of each are cached (entry `n`:
    /// objects with `n` chunks), at the end of the run: what the redundancy costs in
    /// capacity (an object with K + P chunks stores P chunks a read does not need).
    pub coded_by_chunks: Vec<u64>,
    /// Of the requests whose object had a piece cached, the fraction whose object was
    /// unprotected at that moment (before the request's own writes repaired it); with slices,
    /// of the slices requested.
    pub unprotected_request_fraction: f64,
    pub bytes_written: Vec<u128>,
    pub bytes_read: Vec<u128>,
    pub origin_bytes: u128,
    /// Bytes that partial hits (misses) read from the caches: what they did not fetch from the
    /// origin. `(origin_bytes + partial_hit_bytes) / bytes` is the byte miss ratio if every
    /// miss fetched its whole object.
    pub partial_hit_bytes: u128,
    pub rebalances: u64,
    /// Total time spent in placement rebalances, seconds.
    pub rebalance_s: f64,
    /// What the background repair did (all zero when it is off).
    pub repair: RepairStats,
    /// Objects whose found pieces a read wrote again with the lacking ones (`resync`).
    pub resyncs: u64,
    /// Objects whose pieces a hit wrote again (`reinsert`).
    pub reinserts: u64,
    pub elapsed_s: f64,
    pub requests_per_s: f64,
    /// The windows with requests, in order (a window without requests is left out).
    pub windows: Vec<ClusterWindow>,
}
