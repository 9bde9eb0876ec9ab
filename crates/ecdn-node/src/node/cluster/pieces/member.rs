//! The node's side of the cluster ([`Cluster`]): its membership (the bucket map it follows,
//! its heartbeats or etcd session), its peers, its piece store and what it counts, shared by
//! its request paths and its peer listener; and how it joins ([`Cluster::join`]).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ecdn_cluster::config::ClusterConfig;
use ecdn_cluster::control::{spawn_control, Control, CoordinatorStatus, MapHandle, WriteLoads};
use ecdn_cluster::etcd::{spawn_etcd_control, EtcdStatus};
use ecdn_cluster::peer::PeerClient;
use ecdn_cluster::replay::Gate;
use ecdn_codec::CodecCache;
use ecdn_placement::pieces::Scheme;
use ecdn_policy::spec::EvictionKind;
use ecdn_policy::Cache;
use hyper::body::Incoming;
use hyper::{Method, Response, StatusCode};

use crate::node::cluster::backend;
use crate::node::cluster::pieces::names::MAX_OBJECT;
use crate::node::cluster::pieces::stats::{ClusterStats, Parity};
use crate::node::cluster::pieces::store::{self, PieceStore};
use crate::node::cluster::pieces::{demand, kinds, link, purge_log};
use crate::node::config::ClusterNode;
use crate::node::lock::lock;

/// How often [`Cluster::turned_slow`] looks (a probe's lateness grows by this much between
/// looks; the probes' own period is 50 ms).
const TURNED_SLOW_CHECK: std::time::Duration = std::time::Duration::from_millis(5);

/// The node's side of the cluster, shared by its request paths and its peer listener.
pub(in crate::node) struct Cluster {
    pub(in crate::node) id: usize,
    /// This node's peer listener address.
    pub(in crate::node) own_peer: SocketAddr,
    pub(in crate::node) cfg: ClusterConfig,
    pub(in crate::node) map: MapHandle,
    pub(in crate::node) control: Mutex<Option<Control>>,
    pub(in crate::node) peers: PeerClient,
    /// The peer listener's check of signed requests: for this node, not replayed.
    pub(in crate::node) gate: Gate,
    /// The purges this node carried out lately: no write signed before one undoes it.
    pub(in crate::node) purges: purge_log::PurgeLog,
    pub(in crate::node) pieces: PieceStore,
    /// What the start found on disk (`store.rs`, "Restart").
    pub(in crate::node) recovered: store::Recovered,
    pub(in crate::node) loads: WriteLoads,
    pub(in crate::node) stats: ClusterStats,
    pub(in crate::node) codecs: CodecCache,
    /// Limit on one peer exchange's headers (a peer that does not answer within it counts as
    /// failed and the request goes on without it).
    pub(in crate::node) peer_timeout: Duration,
    /// In etcd mode: whether this node reaches etcd, and its session failures.
    pub(in crate::node) etcd: Option<Arc<EtcdStatus>>,
    /// In embedded mode: whether this node reaches the coordinator.
    pub(in crate::node) coordinator: Option<Arc<CoordinatorStatus>>,
    /// EC-Cache's object records (`objects/api.rs`): the coordinator, or etcd.
    pub(in crate::node) objects: ecdn_cluster::objects::ObjectDirectory,
    /// The outgoing peer link: counted, and capped in a test bed (`link.rs`).
    pub(in crate::node) link: Arc<link::Link>,
    /// The smoothed link backlog that picks Δ for `GET /_objects/...?delta=auto`.
    pub(in crate::node) backlog: Mutex<ecdn_objects::backlog::Backlog>,
    /// Object records read lately (`ecdn_objects::records`).
    pub(in crate::node) records: Mutex<ecdn_objects::records::RecordCache>,
    /// The store under the object cache (`object_backend`, `cluster/backend.rs`).
    pub(in crate::node) backend: Option<backend::ObjectBackend>,
    /// Background repair (`c2dn/repair.rs`).
    pub(in crate::node) repair: demand::Repair,
    /// Objects relayed answers said were coded (`kinds.rs`): read here though no chunk is.
    pub(in crate::node) kinds: kinds::Kinds,
}

/// Bytes of object records a node keeps.
const RECORD_CACHE_BYTES: usize = 64 << 20;

/// The piece policy's share of the disk ring: the ring is this much larger than the policy's
/// capacity, for entry headers, metadata and 4 KiB alignment.
pub(in crate::node) fn ring_size(capacity: u64) -> u64 {
    capacity + capacity / 2 + (16 << 20)
}

impl Cluster {
    /// Joins the cluster: registers the pieces `disk` holds from an earlier run (see
    /// "Restart" in `store.rs`), waits for the coordinator's first map (see
    /// [`ecdn_cluster::control::spawn_control`]), then heartbeats and follows the map. Its peer
    /// listener refuses requests signed before `started` (UNIX ms, when the node began to
    /// start: requests may wait for it in the listener's backlog meanwhile).
    pub(in crate::node) async fn join(
        c: &ClusterNode,
        capacity: u64,
        disk: Option<&crate::node::disk::Disk>,
        started: u64,
    ) -> std::io::Result<Cluster> {
        let invalid = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, e);
        // Before the first heartbeat: a returning node answers for its pieces at once.
        let policy = Cache::new(EvictionKind::Fifo.build(capacity), None);
        let (pieces, recovered) = match disk {
            Some(disk) => {
                let cfg = c.cluster.clone();
                disk.write(move |s| PieceStore::recover(s, policy, &cfg))
                    .await
                    .ok_or_else(|| std::io::Error::other("the disk task failed at start"))?
            }
            None => (PieceStore::new(policy), store::Recovered::default()),
        };
        if recovered.pieces + recovered.foreign > 0 {
            eprintln!(
                "ecdn node: {} pieces ({} bytes) registered from the disk's index in {} ms; {} \
                 evicted again, {} not pieces; each checked at its first read",
                recovered.pieces,
                recovered.bytes,
                recovered.millis,
                recovered.evicted,
                recovered.foreign,
            );
        }
        // How every peer answers, for the coordinator's health verdicts (its heartbeats carry
        // the views; `ecdn_cluster::health`).
        let observer = Arc::new(ecdn_cluster::health::observer::PeerObserver::default());
        let peers = PeerClient::for_cluster(&c.cluster).with_observer(observer.clone());
        let loads = WriteLoads::for_cluster(&c.cluster);
        let etcd = Arc::new(EtcdStatus::default());
        let mut control = if c.cluster.etcd.is_empty() {
            // The coordinator's client has no breaker: its heartbeats are never skipped.
            spawn_control(&c.cluster, c.id, peers.clone(), loads.clone()).await
        } else {
            spawn_etcd_control(
                &c.cluster,
                c.id,
                loads.clone(),
                etcd.clone(),
                Some(observer),
            )
            .await
        }
        .map_err(|e| invalid(e.to_string()))?;
        let peers_client = peers.with_breaker();
        if c.cluster.health.enabled {
            let map = control.map().clone();
            control.spawn_beside(ecdn_cluster::health::probe::probe_loop(
                peers_client.clone(),
                move || map.current(),
                c.cluster.clone(),
                c.id,
                Duration::from_millis(c.cluster.health.probe_ms),
            ));
        }
        // Its own peer address: the map's member (a node added while the cluster runs is
        // only there), else the cluster file's.
        let own_peer = control
            .map()
            .current()
            .member(c.id)
            .map(|m| m.peer)
            .or_else(|| c.cluster.nodes.get(c.id).map(|n| n.peer))
            .ok_or_else(|| invalid(format!("node {} is not a member of the cluster", c.id)))?;
        // Every peer request is signed under the epoch of the map the node has.
        let mut epochs = control.map().subscribe();
        let signer = peers.clone();
        signer.set_epoch(*epochs.borrow_and_update());
        tokio::spawn(async move {
            while epochs.changed().await.is_ok() {
                signer.set_epoch(*epochs.borrow_and_update());
            }
        });
        let gate = Gate::with_memory(
            c.cluster.cluster_key(),
            &[own_peer],
            ecdn_cluster::replay::NONCE_MEMORY,
            started,
        );
        let backend =
            backend::ObjectBackend::open(&c.cluster, MAX_OBJECT as u64).map_err(invalid)?;
        Ok(Cluster {
            id: c.id,
            own_peer,
            cfg: c.cluster.clone(),
            map: control.map().clone(),
            coordinator: control.coordinator_status(),
            control: Mutex::new(Some(control)),
            peers: peers_client,
            gate,
            purges: purge_log::PurgeLog::new(purge_log::PURGE_MEMORY),
            pieces,
            recovered,
            loads,
            stats: ClusterStats::default(),
            codecs: CodecCache::new(),
            peer_timeout: Duration::from_secs(2),
            etcd: (!c.cluster.etcd.is_empty()).then_some(etcd),
            objects: ecdn_cluster::objects::ObjectDirectory::for_cluster(&c.cluster),
            link: link::Link::new(&c.link),
            backlog: Mutex::new(Default::default()),
            records: Mutex::new(ecdn_objects::records::RecordCache::new(
                Duration::from_millis(c.cluster.object_record_ttl_ms),
                RECORD_CACHE_BYTES,
            )),
            backend,
            repair: demand::Repair::default(),
            kinds: kinds::Kinds::default(),
        })
    }

    /// This node's peer listener address.
    pub(in crate::node) fn peer_addr(&self) -> SocketAddr {
        self.own_peer
    }

    /// Node `id`'s peer address: the current map's member (nodes added while the cluster
    /// runs are only there), else the cluster file's.
    pub(in crate::node) fn peer_of(&self, id: usize) -> Option<SocketAddr> {
        match self.map.current().member(id) {
            Some(m) => Some(m.peer),
            None => self.cfg.nodes.get(id).map(|n| n.peer),
        }
    }

    /// Whether this node's probes find peer `id` much slower than its peers lately
    /// (`PeerObserver::slower`): reads hedge against it and relays go around it. Never this
    /// node itself.
    pub(in crate::node) fn slower(&self, id: usize, now: std::time::Instant) -> bool {
        id != self.id
            && self
                .peers
                .observer()
                .zip(self.peer_of(id))
                .is_some_and(|(o, a)| o.slower(a, now))
    }

    /// Resolves once this node's probes find peer `id` much slower than its peers
    /// ([`Cluster::slower`]), checking every [`TURNED_SLOW_CHECK`]: what a replica read
    /// awaiting `id`'s answer races, to hedge when `id` turns slow meanwhile.
    pub(in crate::node) async fn turned_slow(&self, id: usize) {
        let mut check = tokio::time::interval(TURNED_SLOW_CHECK);
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            check.tick().await;
            if self.slower(id, std::time::Instant::now()) {
                return;
            }
        }
    }

    /// Whether the map says this node drains (or was removed): it fails its health check,
    /// finishes its requests and stops (see `ecdn_cluster::coordinator` membership).
    pub(in crate::node) fn leaving(&self) -> bool {
        self.map
            .current()
            .member(self.id)
            .is_some_and(|m| m.state != ecdn_cluster::map::MemberState::Active)
    }

    /// Whether objects of `size` bytes are coded.
    pub(in crate::node) fn coded(&self, size: u64) -> bool {
        self.cfg.scheme.coded() && size > self.cfg.threshold
    }

    /// Whether this node reads hits of other nodes' buckets itself (`c2dn/direct.rs`):
    /// `direct_reads`, unless the background repair is on (`repair_rate`): the repair rebuilds
    /// the objects requested most at their serving node, which counts only the requests it
    /// serves.
    pub(in crate::node) fn direct_reads(&self) -> bool {
        self.cfg.direct_reads && self.cfg.repair_rate == 0
    }

    pub(in crate::node) fn scheme(&self) -> Scheme {
        self.cfg.scheme
    }

    /// Whether the node stopped its heartbeats ([`Cluster::leave`]): it is stopping.
    pub(in crate::node) fn left(&self) -> bool {
        lock(&self.control).is_none()
    }

    /// Stops the heartbeats (the coordinator will mark the node unavailable).
    pub(in crate::node) fn leave(&self) {
        if let Some(c) = lock(&self.control).take() {
            c.stop();
        }
    }

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

    /// The `cluster` object of `/_ecdn/stats`.
    pub(in crate::node) fn stats_json(&self) -> serde_json::Value {
        let s = &self.stats;
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        serde_json::json!({
            "id": self.id,
            "epoch": self.map.epoch(),
            "scheme": self.cfg.scheme_name(),
            "bytes_written": self.pieces.written(),
            "pieces_capacity": self.pieces.capacity(),
            "relayed": s.relayed(),
            "relay_failovers": s.relay_failovers(),
            "relay_detours": s.relay_detours(),
            "replica_hedges": s.replica_hedges(),
            "parity_fetches": Parity::ALL
                .iter()
                .zip(&s.parity_fetches)
                .map(|(p, n)| (p.label(), get(n)))
                .collect::<std::collections::BTreeMap<_, _>>(),
            "peer_bytes_received": get(&s.peer_bytes_received),
            "relay_bytes_received": get(&s.relay_bytes_received),
            "peer_bytes_sent": get(&s.peer_bytes_sent),
            "decodes": get(&s.decodes),
            "partial_hits": get(&s.partial_hits),
            "coded_hits": get(&s.coded_hits),
            "direct_reads": get(&s.direct_reads),
            // The answers this node gave itself (as `ecdn_cluster_served_total`), and what
            // they fetched from the origin.
            "served": {
                "hit": get(&s.served[0]),
                "miss": get(&s.served[1]),
                "collapsed": get(&s.served[2]),
            },
            "origin_bytes": get(&s.origin_bytes),
            "replicated_hits": get(&s.replicated_hits),
            "repairs": get(&s.repairs),
            "repair": self.repair.stats.json(),
            "corrupt_sub_chunks": get(&s.corrupt_sub_chunks),
            "peer_errors": s.peer_errors(),
            "streamed_fills": get(&s.streamed_fills),
            // Peer requests refused as replays, and piece writes refused as filled before a
            // purge of their object (`purge_log.rs`).
            "peer_replays_refused": self.gate.replays_refused(),
            "writes_refused_after_purge": get(&s.writes_refused_after_purge),
            "budget_respends": get(&s.budget_respends),
            "dying_objects": get(&s.dying_objects),
            "dying_pieces_dropped": get(&s.dying_pieces_dropped),
            "handoffs": get(&s.handoffs),
            "handoffs_dropped": get(&s.handoffs_dropped),
            "resyncs": get(&s.resyncs),
            "reinserts": get(&s.reinserts),
            "ages_asked": get(&s.ages_asked),
            "ring_lost": self.pieces.ring_lost(),
            // The pieces held now, and what the start found on disk.
            "pieces_held": self.pieces.len(),
            "pieces_recovered": self.recovered.pieces,
            "pieces_recovered_bytes": self.recovered.bytes,
            "recovery_ms": self.recovered.millis,
            // Pieces registered at start that their first read found not this cluster's.
            "pieces_foreign": self.pieces.foreign(),
            // The peer link (`link.rs`): bytes of peer `GET` answers and own split reads, and
            // the test bed's background traffic.
            "link_bytes_sent": self.link.sent(),
            "background_bytes_sent": self.link.background_sent(),
            // In etcd mode: whether this node reaches etcd now, and its failed sessions.
            "etcd_connected": self.etcd.as_ref().map(|e| e.connected.load(Ordering::Relaxed)),
            "etcd_failures": self.etcd.as_ref().map(|e| e.failures.load(Ordering::Relaxed)),
        })
    }
}
