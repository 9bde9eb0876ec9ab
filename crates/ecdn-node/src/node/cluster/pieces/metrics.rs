//! The Prometheus exposition of the cluster's counters ([`super::stats::ClusterStats`]) and
//! state: the `ecdn_cluster_*` series of `/_ecdn/metrics` (every one is listed in `admin.rs`'s
//! documentation).
//!
//! Series with a label of fixed values (`kind`, `protection`, `result`, `reason`) are written
//! for every value from the start, zeros included, so that sums and ratios over nodes see every
//! node; per-peer series (`peer="3"`) appear once this node first talked to that peer.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::stats::{
    ClusterStats, Labelled, Parity, PeerStats, PerPeer, WRITTEN_KINDS,
};
use crate::node::ops::help;

impl Cluster {
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
                "ecdn_cluster_direct_reads_total",
                "Coded hits this node read from the chunks' servers though another node serves \
                 their bucket (not relayed).",
                get(&s.direct_reads),
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
                "ecdn_cluster_dying_objects_total",
                "Objects to drop whole (evict_together): a piece of them evicted somewhere.",
                get(&s.dying_objects),
            ),
            (
                "ecdn_cluster_dying_pieces_dropped_total",
                "Pieces this node dropped because another piece of their object was evicted.",
                get(&s.dying_pieces_dropped),
            ),
            (
                "ecdn_cluster_handoffs_total",
                "Pieces written where a newer map put them after their server could not take them.",
                get(&s.handoffs),
            ),
            (
                "ecdn_cluster_resyncs_total",
                "Objects whose pieces near eviction a read wrote again with the lacking ones.",
                get(&s.resyncs),
            ),
            (
                "ecdn_cluster_reinserts_total",
                "Objects whose pieces near eviction a hit wrote again (reinsert).",
                get(&s.reinserts),
            ),
            (
                "ecdn_cluster_ages_asked_total",
                "Reads that asked how old their pieces are, not having heard it in their lookup.",
                get(&s.ages_asked),
            ),
            (
                "ecdn_cluster_handoffs_dropped_total",
                "Pieces not handed off: the node held its handoff budget of object bytes.",
                get(&s.handoffs_dropped),
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
                "Piece writes refused as filled before a purge of their object.",
                get(&s.writes_refused_after_purge),
            ),
            (
                "ecdn_cluster_budget_respends_total",
                "The coordinator's re-spends of the parity budget this node carried out.",
                get(&s.budget_respends),
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
        let per_peer: [PerPeer; 6] = [
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
            (
                "ecdn_cluster_relay_detours_total",
                "Requests for a bucket a peer serves sent to its next candidate instead, \
                 because this node's probes found that peer much slower than the others.",
                |p| &p.relay_detours,
            ),
            (
                "ecdn_cluster_replica_hedges_total",
                "Replica reads from a peer joined by another holder's, because that peer \
                 turned much slower than the others while its answer was awaited, or failed.",
                |p| &p.replica_hedges,
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
