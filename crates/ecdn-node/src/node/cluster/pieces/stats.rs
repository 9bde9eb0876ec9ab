//! The cluster's counters ([`ClusterStats`]: `/_ecdn/stats`'s `cluster` object) and their
//! Prometheus exposition, the `ecdn_cluster_*` series of `/_ecdn/metrics` (every one is listed
//! in `admin.rs`'s documentation). Like the node's own metrics (`ops.rs`), written by hand from
//! atomics: no global recorder.
//!
//! Series with a label of fixed values (`kind`, `protection`, `result`, `reason`) are written
//! for every value from the start, zeros included, so that sums and ratios over nodes see every
//! node; per-peer series (`peer="3"`) appear once this node first talked to that peer.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ecdn_cluster::wire::PieceName;
use hyper::body::Incoming;
use hyper::{Method, Response, StatusCode};

use crate::node::cluster::pieces::member::Cluster;
use crate::node::ops::{help, Histogram};
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
    pub(in crate::node) replicated_hits: AtomicU64,
    pub(in crate::node) repairs: AtomicU64,
    pub(in crate::node) corrupt_sub_chunks: AtomicU64,
    /// Fills of coded objects whose chunks were encoded and sent stripe by stripe.
    pub(in crate::node) streamed_fills: AtomicU64,
    /// Signed piece writes refused as signed before a purge of their object (`purges.rs`).
    pub(in crate::node) writes_refused_after_purge: AtomicU64,
    /// Per [`Parity`] reason, read windows that asked for parity chunks.
    parity_fetches: [AtomicU64; Parity::ALL.len()],
    /// Payload bytes this node's piece store accepted, per [`WrittenKind`].
    written: [AtomicU64; 3],
    /// Reads of cached objects by the serving node: (coded, replicated) × (protected,
    /// unprotected).
    cached_reads: [[AtomicU64; 2]; 2],
    /// `GET` / `HEAD` answers this node gave itself (not relayed): hits, misses (origin
    /// fetches), collapsed (waited on another request's fill: no origin fetch).
    served: [AtomicU64; 3],
    served_bytes: AtomicU64,
    origin_bytes: AtomicU64,
    /// Per peer id, what this node did with that peer.
    peers: Mutex<BTreeMap<usize, Arc<PeerStats>>>,
}

/// What one node did with one peer.
#[derive(Default)]
pub(in crate::node) struct PeerStats {
    /// Piece fetches sent (`has` questions and piece reads), answered or not.
    fetches: AtomicU64,
    /// The answered ones' time to the response headers.
    latency: Histogram,
    /// Failed fetches and piece writes (see [`ClusterStats::peer_error`]).
    errors: AtomicU64,
    /// Client requests relayed to it (it answered).
    relayed: AtomicU64,
    /// Relays to it that failed (refused, reset, timed out): the next candidate was tried.
    relay_failovers: AtomicU64,
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
}

impl Parity {
    const ALL: [Parity; 4] = [
        Parity::Delayed,
        Parity::Missing,
        Parity::Failed,
        Parity::Corrupt,
    ];

    fn label(self) -> &'static str {
        match self {
            Parity::Delayed => "delayed",
            Parity::Missing => "missing",
            Parity::Failed => "failed",
            Parity::Corrupt => "corrupt",
        }
    }
}

/// A counter with one label: name, help, label name, (label value, count) per value.
type Labelled = (
    &'static str,
    &'static str,
    &'static str,
    Vec<(&'static str, u64)>,
);
/// A per-peer counter: name, help, which of a peer's counters.
type PerPeer = (&'static str, &'static str, fn(&PeerStats) -> &AtomicU64);

/// The `kind` label of written bytes, by piece: `data` (a data chunk, index below K),
/// `parity`, `replica`.
const WRITTEN_KINDS: [&str; 3] = ["data", "parity", "replica"];

impl ClusterStats {
    pub(in crate::node) fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }

    /// Peer `id`'s counters.
    fn peer(&self, id: usize) -> Arc<PeerStats> {
        let mut peers = crate::node::lock::lock(&self.peers);
        peers.entry(id).or_default().clone()
    }

    fn peer_sum(&self, f: impl Fn(&PeerStats) -> &AtomicU64) -> u64 {
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

    /// Relayed requests (all peers).
    pub(in crate::node) fn relayed(&self) -> u64 {
        self.peer_sum(|p| &p.relayed)
    }

    pub(in crate::node) fn relay_failovers(&self) -> u64 {
        self.peer_sum(|p| &p.relay_failovers)
    }

    pub(in crate::node) fn peer_errors(&self) -> u64 {
        self.peer_sum(|p| &p.errors)
    }
}

impl Cluster {
    /// `GET path` from node `server`'s peer listener, counted as a peer fetch (its latency to
    /// the response headers; a failure, or an answer other than `200` / `404`, as a peer
    /// error). `None` when no answer came.
    pub(in crate::node) async fn peer_get(
        &self,
        server: usize,
        path: &str,
    ) -> Option<Response<Incoming>> {
        let addr = self.peer_of(server)?;
        let p = self.stats.peer(server);
        ClusterStats::add(&p.fetches, 1);
        let started = Instant::now();
        let body = bytes::Bytes::new();
        let sent = self
            .peers
            .send(addr, Method::GET, path, body, &[], self.peer_timeout);
        match sent.await {
            Ok(r) => {
                p.latency.observe(started.elapsed());
                if r.status() != StatusCode::OK && r.status() != StatusCode::NOT_FOUND {
                    ClusterStats::add(&p.errors, 1);
                }
                Some(r)
            }
            Err(_) => {
                ClusterStats::add(&p.errors, 1);
                None
            }
        }
    }

    /// The `ecdn_cluster_*` series, appended to the node's exposition.
    pub(in crate::node) fn render_metrics(&self, o: &mut String) {
        let s = &self.stats;
        let get = ClusterStats::get;
        let map = self.map.current();
        let line = |o: &mut String, name: &str, labels: &str, v: u64| {
            let _ = match labels {
                "" => writeln!(o, "{name} {v}"),
                _ => writeln!(o, "{name}{{{labels}}} {v}"),
            };
        };
        help(
            o,
            "ecdn_cluster_info",
            "gauge",
            "This node's id and the cluster's scheme and code.",
        );
        let _ = writeln!(
            o,
            "ecdn_cluster_info{{node=\"{}\",scheme=\"{}\",k=\"{}\",p=\"{}\"}} 1",
            self.id,
            self.cfg.scheme_name(),
            self.cfg.k,
            self.cfg.p
        );
        let reachable = match (&self.etcd, &self.coordinator) {
            (Some(e), _) => e.connected.load(Ordering::Relaxed),
            (None, Some(c)) => c.reachable.load(Ordering::Relaxed),
            (None, None) => false,
        };
        let gauges: [(&str, &str, u64); 5] = [
            (
                "ecdn_cluster_epoch",
                "Epoch of the bucket map this node uses.",
                map.epoch,
            ),
            (
                "ecdn_cluster_nodes",
                "Nodes in the bucket map.",
                map.servers() as u64,
            ),
            (
                "ecdn_cluster_nodes_available",
                "Nodes the bucket map has available.",
                map.available.iter().filter(|&&a| a).count() as u64,
            ),
            (
                "ecdn_cluster_control_reachable",
                "1 if this node reaches its control plane (etcd mode: etcd answered its last \
                 request; else: the coordinator answered its last heartbeat), else 0.",
                u64::from(reachable),
            ),
            (
                "ecdn_cluster_pieces_capacity_bytes",
                "Capacity of this node's piece policy.",
                self.pieces.capacity(),
            ),
        ];
        for (name, text, v) in gauges {
            help(o, name, "gauge", text);
            line(o, name, "", v);
        }
        let mut counters: Vec<(&str, &str, u64)> = vec![
            (
                "ecdn_cluster_peer_received_bytes_total",
                "Bytes received from peers: pieces read, pieces stored here, relayed answers.",
                get(&s.peer_bytes_received),
            ),
            (
                "ecdn_cluster_relay_received_bytes_total",
                "The part of ecdn_cluster_peer_received_bytes_total that relayed answers carried.",
                get(&s.relay_bytes_received),
            ),
            (
                "ecdn_cluster_peer_sent_bytes_total",
                "Bytes sent to peers: pieces read by them, pieces stored on them.",
                get(&s.peer_bytes_sent),
            ),
            (
                "ecdn_cluster_decodes_total",
                "Coded answers that needed a Reed-Solomon decode.",
                get(&s.decodes),
            ),
            (
                "ecdn_cluster_partial_hits_total",
                "Lookups that found 1 to K-1 chunks of a coded object (answered as misses).",
                get(&s.partial_hits),
            ),
            (
                "ecdn_cluster_repairs_total",
                "Hits after which pieces the targets lacked were written back.",
                get(&s.repairs),
            ),
            (
                "ecdn_cluster_repair_objects_total",
                "Objects the background repair made whole.",
                get(&self.repair.stats.objects),
            ),
            (
                "ecdn_cluster_repair_pieces_total",
                "Pieces the background repair wrote.",
                get(&self.repair.stats.pieces),
            ),
            (
                "ecdn_cluster_repair_written_bytes_total",
                "Payload bytes the background repair wrote.",
                get(&self.repair.stats.written),
            ),
            (
                "ecdn_cluster_repair_read_bytes_total",
                "Payload bytes the background repair read to rebuild them.",
                get(&self.repair.stats.read),
            ),
            (
                "ecdn_cluster_corrupt_sub_chunks_total",
                "Sub-chunks that failed their CRC-32C when read.",
                get(&s.corrupt_sub_chunks),
            ),
            (
                "ecdn_cluster_streamed_fills_total",
                "Fills of coded objects encoded and sent stripe by stripe.",
                get(&s.streamed_fills),
            ),
            (
                "ecdn_cluster_ring_lost_total",
                "Pieces the disk ring overwrote while the piece policy still held them.",
                self.pieces.ring_lost(),
            ),
            (
                "ecdn_cluster_peer_replays_refused_total",
                "Peer requests refused as replays: for another node, nonce taken, or too old.",
                self.gate.replays_refused(),
            ),
            (
                "ecdn_cluster_writes_refused_after_purge_total",
                "Signed piece writes refused as signed before a purge of their object.",
                get(&s.writes_refused_after_purge),
            ),
            (
                "ecdn_cluster_link_sent_bytes_total",
                "Bytes through the outgoing peer link: peer GET answers and own object split reads.",
                self.link.sent(),
            ),
            (
                "ecdn_cluster_link_background_bytes_total",
                "Bytes the test bed's background traffic took of the peer link.",
                self.link.background_sent(),
            ),
            (
                "ecdn_cluster_served_bytes_total",
                "Body bytes of the GET / HEAD answers this node gave itself (not relayed ones).",
                get(&s.served_bytes),
            ),
            (
                "ecdn_cluster_origin_bytes_total",
                "Bytes this node's own answers fetched from the origin (X-Ecdn-Origin-Bytes).",
                get(&s.origin_bytes),
            ),
        ];
        if let Some(e) = &self.etcd {
            counters.push((
                "ecdn_cluster_etcd_failures_total",
                "Sessions with etcd that failed (etcd unreachable, lease lost).",
                e.failures.load(Ordering::Relaxed),
            ));
        } else if let Some(c) = &self.coordinator {
            counters.push((
                "ecdn_cluster_heartbeat_failures_total",
                "Heartbeats to the coordinator that failed.",
                c.failures.load(Ordering::Relaxed),
            ));
        }
        for (name, text, v) in counters {
            help(o, name, "counter", text);
            line(o, name, "", v);
        }
        let labelled: [Labelled; 4] = [
            (
                "ecdn_cluster_hits_total",
                "Hits from the cluster's pieces (after the HOC), by object kind.",
                "object",
                vec![
                    ("coded", get(&s.coded_hits)),
                    ("replicated", get(&s.replicated_hits)),
                ],
            ),
            (
                "ecdn_cluster_parity_fetches_total",
                "Read windows that asked for the parity chunks, by reason (delayed: C2DN's \
                 delayed parity fetch).",
                "reason",
                Parity::ALL
                    .iter()
                    .zip(&s.parity_fetches)
                    .map(|(p, c)| (p.label(), get(c)))
                    .collect(),
            ),
            (
                "ecdn_cluster_written_bytes_total",
                "Payload bytes this node's piece store accepted, by piece kind.",
                "kind",
                WRITTEN_KINDS
                    .iter()
                    .zip(&s.written)
                    .map(|(k, c)| (*k, get(c)))
                    .collect(),
            ),
            (
                "ecdn_cluster_served_total",
                "GET / HEAD answers this node gave itself (not relayed ones): each client \
                 request counts once in the cluster. miss: an origin fetch; collapsed: it \
                 waited on another request's fill (no origin fetch).",
                "result",
                vec![
                    ("hit", get(&s.served[0])),
                    ("miss", get(&s.served[1])),
                    ("collapsed", get(&s.served[2])),
                ],
            ),
        ];
        for (name, text, label, values) in labelled {
            help(o, name, "counter", text);
            for (v, n) in values {
                line(o, name, &format!("{label}=\"{v}\""), n);
            }
        }
        let name = "ecdn_cluster_cached_reads_total";
        help(
            o,
            name,
            "counter",
            "Reads of cached objects by the serving node, by object kind and whether the object \
             survives one more unavailable node (replicas on 2+ nodes; K+1+ distinct chunks).",
        );
        for (object, reads) in ["coded", "replicated"].iter().zip(&s.cached_reads) {
            for (protection, n) in ["protected", "unprotected"].iter().zip(reads) {
                let labels = format!("object=\"{object}\",protection=\"{protection}\"");
                line(o, name, &labels, get(n));
            }
        }
        let peers: Vec<(usize, Arc<PeerStats>)> = crate::node::lock::lock(&s.peers)
            .iter()
            .map(|(&id, p)| (id, p.clone()))
            .collect();
        let per_peer: [PerPeer; 4] = [
            (
                "ecdn_cluster_peer_fetches_total",
                "Piece fetches sent to a peer (has questions, piece reads), answered or not.",
                |p| &p.fetches,
            ),
            (
                "ecdn_cluster_peer_errors_total",
                "Failed exchanges with a peer: fetches without an answer or with a bad one, \
                 bodies cut short, piece writes that failed.",
                |p| &p.errors,
            ),
            (
                "ecdn_cluster_relayed_total",
                "Client requests relayed to the peer serving their bucket, which answered.",
                |p| &p.relayed,
            ),
            (
                "ecdn_cluster_relay_failovers_total",
                "Relays to a peer that failed (the next candidate was tried).",
                |p| &p.relay_failovers,
            ),
        ];
        for (name, text, f) in per_peer {
            help(o, name, "counter", text);
            for (id, p) in &peers {
                line(o, name, &format!("peer=\"{id}\""), get(f(p)));
            }
        }
        let name = "ecdn_cluster_peer_fetch_duration_seconds";
        help(
            o,
            name,
            "histogram",
            "Time from sending a piece fetch to the peer's response headers.",
        );
        for (id, p) in &peers {
            p.latency.render(o, name, &format!("peer=\"{id}\""));
        }
    }
}
