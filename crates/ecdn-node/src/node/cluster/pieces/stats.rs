//! The cluster's counters ([`ClusterStats`]: `/_ecdn/stats`'s `cluster` object, and the
//! `ecdn_cluster_*` series `metrics.rs` writes). Like the node's own metrics (`ops.rs`), kept
//! in atomics: no global recorder.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ecdn_cluster::wire::PieceName;

use crate::node::ops::Histogram;
use crate::node::outcome::Outcome;

/// Counters of the cluster paths (in `/_ecdn/stats` as `cluster`, and `/_ecdn/metrics`).
#[derive(Default)]
pub(in crate::node) struct ClusterStats {
    pub(in crate::node) peer_bytes_received: AtomicU64,
    /// The part of `peer_bytes_received` that relayed answers carried.
    pub(in crate::node) relay_bytes_received: AtomicU64,
    pub(in crate::node) peer_bytes_sent: AtomicU64,
    pub(in crate::node) decodes: AtomicU64,
    pub(in crate::node) partial_hits: AtomicU64,
    pub(in crate::node) coded_hits: AtomicU64,
    /// Coded hits this node read though another node serves their bucket (`c2dn/direct.rs`).
    pub(in crate::node) direct_reads: AtomicU64,
    pub(in crate::node) replicated_hits: AtomicU64,
    pub(in crate::node) repairs: AtomicU64,
    pub(in crate::node) corrupt_sub_chunks: AtomicU64,
    /// Fills of coded objects whose chunks were encoded and sent stripe by stripe.
    pub(in crate::node) streamed_fills: AtomicU64,
    /// Piece writes refused as filled before a purge of their object (`purge_log.rs`).
    pub(in crate::node) writes_refused_after_purge: AtomicU64,
    /// The coordinator's re-spends of EC-Cache's parity budget this node carried out (signed
    /// `POST /_peer/units/`).
    pub(in crate::node) budget_respends: AtomicU64,
    /// Whole-object eviction (`together.rs`): objects this node was told (or told itself) to
    /// drop, and the pieces of them it held and dropped.
    pub(in crate::node) dying_objects: AtomicU64,
    pub(in crate::node) dying_pieces_dropped: AtomicU64,
    /// Handoffs (`c2dn/handoff.rs`): pieces written where a newer map put them after their
    /// server could not take them; pieces not handed off for want of memory; the object bytes
    /// held for handoffs now.
    pub(in crate::node) handoffs: AtomicU64,
    pub(in crate::node) handoffs_dropped: AtomicU64,
    pub(in crate::node) handoff_bytes: AtomicU64,
    /// Resync (`c2dn/resync.rs`): objects whose found pieces this node's reads wrote again.
    pub(in crate::node) resyncs: AtomicU64,
    /// Reinsertion (`c2dn/resync.rs`): objects whose pieces this node's hits wrote again.
    pub(in crate::node) reinserts: AtomicU64,
    /// Reads that wrote back but had not heard every counted piece's age, and asked for them
    /// (`c2dn/ages.rs`): a round the lookup's answers did not spare.
    pub(in crate::node) ages_asked: AtomicU64,
    /// Per [`Parity`] reason, read windows that asked for parity chunks.
    pub(in crate::node) parity_fetches: [AtomicU64; Parity::ALL.len()],
    /// Payload bytes this node's piece store accepted, per kind ([`WRITTEN_KINDS`]).
    pub(in crate::node) written: [AtomicU64; 3],
    /// Reads of cached objects by the serving node: (coded, replicated) × (protected,
    /// unprotected).
    pub(in crate::node) cached_reads: [[AtomicU64; 2]; 2],
    /// `GET` / `HEAD` answers this node gave itself (not relayed): hits, misses (origin
    /// fetches), collapsed (waited on another request's fill: no origin fetch).
    pub(in crate::node) served: [AtomicU64; 3],
    pub(in crate::node) served_bytes: AtomicU64,
    pub(in crate::node) origin_bytes: AtomicU64,
    /// Per peer id, what this node did with that peer.
    pub(in crate::node) peers: Mutex<BTreeMap<usize, Arc<PeerStats>>>,
}

/// What one node did with one peer.
#[derive(Default)]
pub(in crate::node) struct PeerStats {
    /// Piece fetches sent (`has` questions and piece reads), answered or not.
    pub(in crate::node) fetches: AtomicU64,
    /// The answered ones' time to the response headers.
    pub(in crate::node) latency: Histogram,
    /// Failed fetches and piece writes (see [`ClusterStats::peer_error`]).
    pub(in crate::node) errors: AtomicU64,
    /// Client requests relayed to it (it answered).
    pub(in crate::node) relayed: AtomicU64,
    /// Relays to it that failed (refused, reset, timed out): the next candidate was tried.
    pub(in crate::node) relay_failovers: AtomicU64,
    /// Requests for a bucket it serves sent to the next candidate instead, because this
    /// node's probes found it much slower than its peers (`c2dn/relay.rs`).
    pub(in crate::node) relay_detours: AtomicU64,
    /// Replica reads from it joined by another holder's, because its answer was awaited when
    /// this node's probes found it much slower than its peers, or its read failed
    /// (`c2dn/read.rs`).
    pub(in crate::node) replica_hedges: AtomicU64,
}

/// Why a read window asked for the parity chunks (C2DN §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::node) enum Parity {
    /// Delayed parity fetch: the stripe waited for still lacked a data sub-chunk
    /// `parity_delay` × (time to the first peer sub-chunk) later.
    Delayed,
    /// A data chunk had no source when the window started.
    Missing,
    /// Every data chunk's reader ended and a stripe was still incomplete (a peer failed,
    /// answered `404` or cut its answer short).
    Failed,
    /// A data sub-chunk failed its CRC-32C.
    Corrupt,
    /// A data chunk's holder answers this node's probes much slower than its peers do (a
    /// hedge: `ecdn_cluster::health::observer::PeerObserver::slower`).
    Slow,
}

impl Parity {
    pub(in crate::node) const ALL: [Parity; 5] = [
        Parity::Delayed,
        Parity::Missing,
        Parity::Failed,
        Parity::Corrupt,
        Parity::Slow,
    ];

    pub(in crate::node) fn label(self) -> &'static str {
        match self {
            Parity::Delayed => "delayed",
            Parity::Missing => "missing",
            Parity::Failed => "failed",
            Parity::Corrupt => "corrupt",
            Parity::Slow => "slow",
        }
    }
}

/// A counter with one label: name, help, label name, (label value, count) per value.
pub(in crate::node) type Labelled = (
    &'static str,
    &'static str,
    &'static str,
    Vec<(&'static str, u64)>,
);
/// A per-peer counter: name, help, which of a peer's counters.
pub(in crate::node) type PerPeer = (&'static str, &'static str, fn(&PeerStats) -> &AtomicU64);

/// The `kind` label of written bytes, by piece: `data` (a data chunk, index below K),
/// `parity`, `replica`.
pub(in crate::node) const WRITTEN_KINDS: [&str; 3] = ["data", "parity", "replica"];

impl ClusterStats {
    pub(in crate::node) fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    pub(in crate::node) fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }

    /// Peer `id`'s counters.
    pub(in crate::node) fn peer(&self, id: usize) -> Arc<PeerStats> {
        let mut peers = crate::node::lock::lock(&self.peers);
        peers.entry(id).or_default().clone()
    }

    pub(in crate::node) fn peer_sum(&self, f: impl Fn(&PeerStats) -> &AtomicU64) -> u64 {
        let peers = crate::node::lock::lock(&self.peers);
        peers.values().map(|p| Self::get(f(p))).sum()
    }

    /// A failed exchange with peer `id`: a fetch without an answer, an answer that is not
    /// `200` / `404` or fails its signature, a body cut short; a piece write that failed.
    pub(in crate::node) fn peer_error(&self, id: usize) {
        Self::add(&self.peer(id).errors, 1);
    }

    /// A client request relayed to peer `id` (`ok`: it answered; else the next candidate is
    /// tried).
    pub(in crate::node) fn relay(&self, id: usize, ok: bool) {
        let p = self.peer(id);
        Self::add(if ok { &p.relayed } else { &p.relay_failovers }, 1);
    }

    pub(in crate::node) fn relay_detour(&self, id: usize) {
        Self::add(&self.peer(id).relay_detours, 1);
    }

    pub(in crate::node) fn replica_hedge(&self, id: usize) {
        Self::add(&self.peer(id).replica_hedges, 1);
    }

    pub(in crate::node) fn parity_fetch(&self, why: Parity) {
        let i = Parity::ALL.iter().position(|&p| p == why).unwrap_or(0);
        Self::add(&self.parity_fetches[i], 1);
    }

    /// `bytes` of piece `name` accepted by this node's piece store (`k`: the cluster's K).
    pub(in crate::node) fn written(&self, name: PieceName, k: usize, bytes: u64) {
        let i = match name {
            PieceName::Chunk(ch) if usize::from(ch) < k => 0,
            PieceName::Chunk(_) => 1,
            PieceName::Replica => 2,
        };
        Self::add(&self.written[i], bytes);
    }

    /// The serving node read a cached object, `coded` or replicated (see `admin.rs`:
    /// unprotected fraction).
    pub(in crate::node) fn cached_read(&self, coded: bool, protected: bool) {
        Self::add(
            &self.cached_reads[usize::from(!coded)][usize::from(!protected)],
            1,
        );
    }

    /// An answer this node delivered (outcome `o`, `bytes` of body when known, its headers):
    /// a `GET` / `HEAD` it answered itself, not relayed, counts as served, with the origin
    /// bytes its `X-Ecdn-Origin-Bytes` says it fetched.
    pub(in crate::node) fn delivered(&self, o: Outcome, bytes: Option<u64>, h: &hyper::HeaderMap) {
        if h.contains_key("x-ecdn-sliced") || h.contains_key("x-ecdn-slice") {
            // Counted when its last slice is sent (`sliced`), by the node that sent it (a
            // slice answered to a peer is part of the peer's answer).
            return;
        }
        let result = match o {
            Outcome::Relayed | Outcome::Pass | Outcome::PassError => return,
            Outcome::HitHoc | Outcome::HitDisk | Outcome::Stale => 0,
            Outcome::Miss | Outcome::Revalidated | Outcome::MissError => 1,
            Outcome::MissCollapsed => 2,
        };
        Self::add(&self.served[result], 1);
        Self::add(&self.served_bytes, bytes.unwrap_or(0));
        let origin = h
            .get("x-ecdn-origin-bytes")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        Self::add(&self.origin_bytes, origin);
    }

    /// An answer made of slices, once its last slice was sent: a miss if any slice was
    /// filled from the origin, with the origin bytes of all of them.
    pub(in crate::node) fn sliced(&self, miss: bool, bytes: u64, origin: u64) {
        Self::add(&self.served[usize::from(miss)], 1);
        Self::add(&self.served_bytes, bytes);
        Self::add(&self.origin_bytes, origin);
    }

    /// Relayed requests (all peers).
    pub(in crate::node) fn relayed(&self) -> u64 {
        self.peer_sum(|p| &p.relayed)
    }

    pub(in crate::node) fn relay_failovers(&self) -> u64 {
        self.peer_sum(|p| &p.relay_failovers)
    }

    pub(in crate::node) fn relay_detours(&self) -> u64 {
        self.peer_sum(|p| &p.relay_detours)
    }

    pub(in crate::node) fn replica_hedges(&self) -> u64 {
        self.peer_sum(|p| &p.replica_hedges)
    }

    pub(in crate::node) fn peer_errors(&self) -> u64 {
        self.peer_sum(|p| &p.errors)
    }
}
