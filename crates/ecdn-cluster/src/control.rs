//! The node side of the control plane: the map a node answers from, the write loads it
//! reports, and the tasks that talk to the coordinator.
//!
//! * [`MapHandle`] — the newest valid [`BucketMap`] this node has seen. Reading it is one
//!   read-lock and an `Arc` clone; a map replaces it only if its epoch is higher and it passes
//!   [`BucketMap::validate`] and has this cluster's shape (nodes, buckets, K, P, scheme), so a
//!   late or stray answer can never take a node back in time.
//! * [`WriteLoads`] — bytes this node wrote since its last heartbeat, to its data buckets and
//!   per parity bucket; atomic counters, no lock on the write path.
//! * [`spawn_control`] — fetches the first map (retrying until the coordinator answers), then
//!   runs the heartbeat loop (every `heartbeat_ms`: the loads since the previous heartbeat; a
//!   heartbeat that fails keeps them for the next) and the map watcher (a long poll for the
//!   next epoch) as tokio tasks; [`CoordinatorStatus`] says whether the last heartbeat was
//!   answered.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use hyper::{Method, StatusCode};
use thiserror::Error;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::auth::unix_now_ms;
use crate::config::ClusterConfig;
pub use crate::heartbeat::MAX_OBJECT_READS;
use crate::heartbeat::{Heartbeat, HeartbeatReply, HEARTBEAT_PATH, LONG_POLL, MAP_PATH};
use crate::map::BucketMap;
use crate::peer::{read_body, verify_response, PeerClient};

/// The newest map a node has seen. Clones share it.
#[derive(Clone)]
pub struct MapHandle {
    inner: Arc<MapInner>,
}

struct MapInner {
    current: RwLock<Arc<BucketMap>>,
    epoch: watch::Sender<u64>,
}

impl std::fmt::Debug for MapHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MapHandle(epoch {})", self.epoch())
    }
}

/// Why an offered map was not taken.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum MapRejected {
    #[error("map epoch {offered} is not newer than the current {current}")]
    NotNewer { offered: u64, current: u64 },
    #[error("invalid map: {0}")]
    Invalid(String),
    #[error("the map is for another cluster: {0}")]
    OtherCluster(String),
}

impl MapHandle {
    /// A handle holding `first` (which must be valid).
    pub fn new(first: BucketMap) -> Result<MapHandle, MapRejected> {
        first.validate().map_err(MapRejected::Invalid)?;
        let (epoch, _) = watch::channel(first.epoch);
        Ok(MapHandle {
            inner: Arc::new(MapInner {
                current: RwLock::new(Arc::new(first)),
                epoch,
            }),
        })
    }

    /// The current map.
    pub fn current(&self) -> Arc<BucketMap> {
        self.inner
            .current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn epoch(&self) -> u64 {
        *self.inner.epoch.borrow()
    }

    /// Takes `map` if its epoch is higher than the current one, it is valid and it has this
    /// cluster's shape; returns its epoch.
    pub fn offer(&self, map: BucketMap) -> Result<u64, MapRejected> {
        map.validate().map_err(MapRejected::Invalid)?;
        let mut current = self
            .inner
            .current
            .write()
            .unwrap_or_else(|e| e.into_inner());
        if map.epoch <= current.epoch {
            return Err(MapRejected::NotNewer {
                offered: map.epoch,
                current: current.epoch,
            });
        }
        // Members are added, never taken away (a removed one stays, unavailable).
        if shape(&map) != shape(&current) || map.servers() < current.servers() {
            return Err(MapRejected::OtherCluster(format!(
                "(buckets, k, p, scheme) = {:?} with {} nodes, this cluster's are {:?} with {}",
                shape(&map),
                map.servers(),
                shape(&current),
                current.servers()
            )));
        }
        let epoch = map.epoch;
        *current = Arc::new(map);
        // Under the lock, so epochs are announced in order.
        self.inner.epoch.send_replace(epoch);
        Ok(epoch)
    }

    /// A receiver of the current epoch, to await changes (`changed()` / `wait_for`).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.epoch.subscribe()
    }

    /// Waits until the epoch is above `epoch`; returns the new epoch.
    pub async fn wait_newer(&self, epoch: u64) -> u64 {
        let mut rx = self.subscribe();
        // The sender lives in `self`, so the channel cannot close while we wait.
        let newer = rx.wait_for(|&e| e > epoch).await.map(|e| *e);
        newer.unwrap_or_else(|_| self.epoch())
    }
}

/// What must stay the same between the maps of one cluster.
fn shape(m: &BucketMap) -> (usize, usize, usize, String) {
    (m.buckets, m.k, m.p, m.scheme.name())
}

/// Whether `m` is a map of the cluster of `cfg`: the same buckets, code and scheme, and at
/// least the cluster file's nodes (nodes added since come on top).
pub fn fits(cfg: &ClusterConfig, m: &BucketMap) -> Result<(), String> {
    let ours = (cfg.buckets, cfg.k, cfg.p, cfg.scheme.name());
    if shape(m) != ours || m.servers() < cfg.nodes.len() {
        return Err(format!(
            "the map has (buckets, k, p, scheme) = {:?} and {} nodes; the cluster file {ours:?} \
             and {} nodes",
            shape(m),
            m.servers(),
            cfg.nodes.len()
        ));
    }
    Ok(())
}

/// The embedded coordinator's current map, asked once (`None`: it has none yet); the
/// control-plane-neutral ask is [`crate::plane::fetch_map`].
pub(crate) async fn fetch_coordinator_map(
    cfg: &ClusterConfig,
) -> Result<Option<BucketMap>, String> {
    let fetch = Fetch {
        client: PeerClient::for_cluster(cfg),
        addr: cfg.coordinator,
        limit: map_limit(cfg),
        node: usize::MAX,
    };
    fetch.map(None, Duration::from_secs(5)).await
}

/// Bytes written since the last heartbeat. Clones share the counters.
#[derive(Clone)]
pub struct WriteLoads {
    inner: Arc<LoadsInner>,
}

struct LoadsInner {
    buckets: usize,
    p: usize,
    data: AtomicU64,
    /// `bucket * p + parity_index`.
    parity: Box<[AtomicU64]>,
    /// EC-Cache object reads by name, for the coordinator's parity budget, counted in splits
    /// read (a read through a node counts its `k`; a client reading the splits itself, each
    /// split it asks).
    object_reads: std::sync::Mutex<std::collections::HashMap<String, u64>>,
}

/// What [`WriteLoads::take`] took: the body of a heartbeat.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TakenLoads {
    pub data_bytes: u64,
    /// `(bucket, parity_index, bytes)`, only non-zero ones.
    pub parity: Vec<(usize, usize, u64)>,
    /// `(object name, reads)`, at most [`MAX_OBJECT_READS`].
    pub object_reads: Vec<(String, u64)>,
}

impl TakenLoads {
    pub fn is_empty(&self) -> bool {
        self.data_bytes == 0 && self.parity.is_empty() && self.object_reads.is_empty()
    }
}

impl WriteLoads {
    /// Counters for `buckets` buckets of `p` parity buckets each.
    pub fn new(buckets: usize, p: usize) -> WriteLoads {
        WriteLoads {
            inner: Arc::new(LoadsInner {
                buckets,
                p,
                data: AtomicU64::new(0),
                parity: (0..buckets * p).map(|_| AtomicU64::new(0)).collect(),
                object_reads: Default::default(),
            }),
        }
    }

    /// Counters for the cluster's placement (no parity buckets in the replication schemes).
    pub fn for_cluster(cfg: &ClusterConfig) -> WriteLoads {
        WriteLoads::new(cfg.buckets, cfg.placement_code().1)
    }

    /// Counts bytes written to a data bucket or a replicated (uncoded) object.
    #[inline]
    pub fn record_data(&self, bytes: u64) {
        self.inner.data.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts bytes written to parity bucket `parity_index` of `bucket`; returns false (and
    /// counts nothing) when either is out of range.
    #[inline]
    pub fn record_parity(&self, bucket: usize, parity_index: usize, bytes: u64) -> bool {
        let i = &self.inner;
        if bucket >= i.buckets || parity_index >= i.p {
            return false;
        }
        i.parity[bucket * i.p + parity_index].fetch_add(bytes, Ordering::Relaxed);
        true
    }

    /// Counts `n` reads of the EC-Cache object `name`.
    pub fn record_object_reads(&self, name: &str, n: u64) {
        let mut reads = self
            .inner
            .object_reads
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match reads.get_mut(name) {
            Some(c) => *c += n,
            None => {
                reads.insert(name.to_string(), n);
            }
        }
    }

    /// Takes the counts and resets them to zero.
    pub fn take(&self) -> TakenLoads {
        let i = &self.inner;
        let mut parity = Vec::new();
        for (n, c) in i.parity.iter().enumerate() {
            if c.load(Ordering::Relaxed) != 0 {
                let bytes = c.swap(0, Ordering::Relaxed);
                if bytes != 0 {
                    parity.push((n / i.p, n % i.p, bytes));
                }
            }
        }
        let mut reads = i.object_reads.lock().unwrap_or_else(|p| p.into_inner());
        let names: Vec<String> = reads.keys().take(MAX_OBJECT_READS).cloned().collect();
        let object_reads = names
            .into_iter()
            .filter_map(|n| reads.remove_entry(&n))
            .collect();
        TakenLoads {
            data_bytes: i.data.swap(0, Ordering::Relaxed),
            parity,
            object_reads,
        }
    }

    /// Adds taken counts back (their heartbeat failed).
    pub fn restore(&self, taken: &TakenLoads) {
        self.record_data(taken.data_bytes);
        for &(b, j, bytes) in &taken.parity {
            self.record_parity(b, j, bytes);
        }
        for (name, n) in &taken.object_reads {
            self.record_object_reads(name, *n);
        }
    }
}

/// Why the control plane could not start.
#[derive(Debug, Error)]
pub enum ControlError {
    #[error(
        "node {node} is not a member of the cluster (nodes 0..{nodes}); a new node is added \
         with `ecdn cluster add` first"
    )]
    UnknownNode { node: usize, nodes: usize },
}

/// Whether a node reaches the coordinator (the embedded control plane; etcd mode has
/// [`crate::etcd::EtcdStatus`]), for its metrics.
#[derive(Debug)]
pub struct CoordinatorStatus {
    /// The coordinator answered the node's last heartbeat (a signed reply). True from the
    /// first map on, until a heartbeat fails.
    pub reachable: AtomicBool,
    /// Heartbeats that failed since start (not answered, refused, or not the coordinator's).
    pub failures: AtomicU64,
}

/// The running control tasks of one node.
pub struct Control {
    map: MapHandle,
    tasks: Vec<JoinHandle<()>>,
    /// Embedded mode only.
    coordinator: Option<Arc<CoordinatorStatus>>,
}

impl Control {
    /// A control of `map` run by `tasks` (the etcd mode's, `crate::etcd`).
    pub(crate) fn from_parts(map: MapHandle, tasks: Vec<JoinHandle<()>>) -> Control {
        Control {
            map,
            tasks,
            coordinator: None,
        }
    }

    pub fn map(&self) -> &MapHandle {
        &self.map
    }

    /// Runs `task` beside the control's own, stopped with them ([`Control::stop`]).
    pub fn spawn_beside<F>(&mut self, task: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.tasks.push(tokio::spawn(task));
    }

    /// Whether the node reaches the coordinator (embedded mode; `None` in etcd mode).
    pub fn coordinator_status(&self) -> Option<Arc<CoordinatorStatus>> {
        self.coordinator.clone()
    }

    /// Stops the heartbeats and the map watcher (the node will be marked unavailable).
    /// Dropping a `Control` does not stop them.
    pub fn stop(self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// How long a map request may take beyond the coordinator's long poll.
const MAP_MARGIN: Duration = Duration::from_secs(5);

/// A node's limit for a map's JSON: far above any map of this cluster's size.
fn map_limit(cfg: &ClusterConfig) -> usize {
    (1 << 20) + cfg.buckets * (cfg.k + cfg.p + 4) * 128
}

/// Fetches the first map from the coordinator (retrying every heartbeat period until it
/// answers with a valid map of this cluster), then spawns the heartbeat loop and the map
/// watcher of node `node`.
pub async fn spawn_control(
    cfg: &ClusterConfig,
    node: usize,
    client: PeerClient,
    loads: WriteLoads,
) -> Result<Control, ControlError> {
    let period = Duration::from_millis(cfg.heartbeat_ms);
    let fetch = Fetch {
        client: client.clone(),
        addr: cfg.coordinator,
        limit: map_limit(cfg),
        node,
    };
    let mut failures = 0u64;
    let map = loop {
        match fetch.map(None, period.max(Duration::from_secs(1))).await {
            Ok(Some(m)) => match fits(cfg, &m) {
                Ok(()) => match MapHandle::new(m) {
                    Ok(h) => break h,
                    Err(e) => fetch.log(&mut failures, &e.to_string()),
                },
                Err(e) => fetch.log(&mut failures, &e),
            },
            Ok(None) => {}
            Err(e) => fetch.log(&mut failures, &e),
        }
        tokio::time::sleep(period).await;
    };
    let nodes = map.current().servers();
    if node >= nodes {
        return Err(ControlError::UnknownNode { node, nodes });
    }
    eprintln!(
        "ecdn node {node}: map epoch {} from the coordinator",
        map.epoch()
    );
    let status = Arc::new(CoordinatorStatus {
        reachable: AtomicBool::new(true),
        failures: AtomicU64::new(0),
    });
    let heartbeat = tokio::spawn(heartbeat_loop(
        client,
        cfg.clone(),
        node,
        map.clone(),
        loads,
        status.clone(),
    ));
    let watcher = tokio::spawn(watch_loop(fetch, period, map.clone()));
    Ok(Control {
        map,
        tasks: vec![heartbeat, watcher],
        coordinator: Some(status),
    })
}

struct Fetch {
    client: PeerClient,
    addr: std::net::SocketAddr,
    limit: usize,
    node: usize,
}

impl Fetch {
    /// `GET /coord/map[?after=E]`: `Ok(None)` on 204 (no newer map within the long poll).
    async fn map(
        &self,
        after: Option<u64>,
        timeout: Duration,
    ) -> Result<Option<BucketMap>, String> {
        let path = match after {
            Some(e) => format!("{MAP_PATH}?after={e}"),
            None => MAP_PATH.to_string(),
        };
        let resp = self
            .client
            .send(self.addr, Method::GET, &path, Bytes::new(), &[], timeout)
            .await
            .map_err(|e| e.to_string())?;
        let (parts, body) = resp.into_parts();
        if parts.status == StatusCode::NO_CONTENT {
            return Ok(None);
        }
        let body = read_body(body, self.limit)
            .await
            .map_err(|e| format!("map: {e}"))?;
        if parts.status != StatusCode::OK {
            return Err(format!(
                "map: {}: {}",
                parts.status,
                String::from_utf8_lossy(&body[..body.len().min(200)]).trim()
            ));
        }
        verify_response(self.client.key(), &path, &parts, &body, unix_now_ms())
            .map_err(|e| format!("map: the answer is not the coordinator's: {e}"))?;
        serde_json::from_slice(&body)
            .map(Some)
            .map_err(|e| format!("map: not a bucket map: {e}"))
    }

    /// Logs the first failure of a run and then every 100th.
    fn log(&self, failures: &mut u64, msg: &str) {
        if failures.is_multiple_of(100) {
            eprintln!(
                "ecdn node {}: coordinator {}: {msg} (failure {})",
                self.node,
                self.addr,
                *failures + 1
            );
        }
        *failures += 1;
    }
}

async fn watch_loop(fetch: Fetch, period: Duration, map: MapHandle) {
    let mut failures = 0u64;
    loop {
        let after = map.epoch();
        match fetch.map(Some(after), LONG_POLL + MAP_MARGIN).await {
            Ok(Some(m)) => {
                let epoch = m.epoch;
                match map.offer(m) {
                    Ok(_) => failures = 0,
                    // Another task (or a caller) took a newer one meanwhile.
                    Err(crate::control::MapRejected::NotNewer { .. }) => {}
                    Err(e) => {
                        fetch.log(&mut failures, &format!("map epoch {epoch} ignored: {e}"));
                        tokio::time::sleep(period).await;
                    }
                }
            }
            Ok(None) => failures = 0,
            Err(e) => {
                fetch.log(&mut failures, &e);
                tokio::time::sleep(period).await;
            }
        }
    }
}

async fn heartbeat_loop(
    client: PeerClient,
    cfg: ClusterConfig,
    node: usize,
    map: MapHandle,
    loads: WriteLoads,
    status: Arc<CoordinatorStatus>,
) {
    let (addr, period) = (cfg.coordinator, Duration::from_millis(cfg.heartbeat_ms));
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let timeout = period.max(Duration::from_millis(200));
    let mut failures = 0u64;
    loop {
        interval.tick().await;
        let taken = loads.take();
        let current = map.current();
        let peers = match client.observer() {
            Some(o) if cfg.health.enabled => o.views(
                &crate::health::probe::peer_ids(&current, &cfg),
                std::time::Instant::now(),
            ),
            _ => Vec::new(),
        };
        let hb = Heartbeat {
            node,
            epoch: current.epoch,
            data_bytes: taken.data_bytes,
            parity: taken.parity.clone(),
            object_reads: taken.object_reads.clone(),
            peers,
        };
        let body = Bytes::from(serde_json::to_vec(&hb).expect("a heartbeat serializes"));
        let result = client
            .send(addr, Method::POST, HEARTBEAT_PATH, body, &[], timeout)
            .await;
        let outcome = match result {
            Err(e) => Err((true, e.to_string())),
            Ok(resp) => {
                let (parts, body) = resp.into_parts();
                let body = read_body(body, 4096).await;
                match (parts.status, body) {
                    (StatusCode::OK, Ok(b)) => {
                        // An answer not signed by the coordinator: the heartbeat may not have
                        // reached it, so its loads are kept.
                        verify_response(client.key(), HEARTBEAT_PATH, &parts, &b, unix_now_ms())
                            .map_err(|e| {
                                (true, format!("heartbeat reply not the coordinator's: {e}"))
                            })
                            .and_then(|()| {
                                serde_json::from_slice::<HeartbeatReply>(&b)
                                    .map(|_| ())
                                    .map_err(|e| (false, format!("heartbeat reply: {e}")))
                            })
                    }
                    // The coordinator refused these loads as out of range: resending them
                    // cannot help.
                    (StatusCode::BAD_REQUEST, b) => Err((
                        false,
                        format!(
                            "heartbeat refused: {}",
                            b.map(|b| String::from_utf8_lossy(&b).trim().to_string())
                                .unwrap_or_default()
                        ),
                    )),
                    (s, b) => Err((
                        true,
                        format!(
                            "heartbeat: {s}: {}",
                            b.map(|b| String::from_utf8_lossy(&b).trim().to_string())
                                .unwrap_or_default()
                        ),
                    )),
                }
            }
        };
        status.reachable.store(outcome.is_ok(), Ordering::Relaxed);
        match outcome {
            Ok(()) => {
                if failures > 0 {
                    eprintln!(
                        "ecdn node {node}: heartbeats answered again after {failures} failures"
                    );
                }
                failures = 0;
            }
            Err((keep, msg)) => {
                status.failures.fetch_add(1, Ordering::Relaxed);
                if keep {
                    loads.restore(&taken);
                }
                if failures.is_multiple_of(100) {
                    eprintln!("ecdn node {node}: coordinator {addr}: {msg}");
                }
                failures += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ecdn_placement::pieces::Scheme;
    use ecdn_placement::{Placement, PlacementConfig};

    fn map(epoch: u64, servers: usize) -> BucketMap {
        let pl = Placement::new(
            &vec![1.0; servers],
            PlacementConfig {
                buckets: 20,
                k: 3,
                p: 1,
                seed: 1,
                ..PlacementConfig::default()
            },
        )
        .unwrap();
        BucketMap::from_placement(epoch, Scheme::C2dn, 3, 1, &pl, None)
    }

    #[tokio::test]
    async fn only_a_newer_valid_map_of_this_cluster_replaces_the_current_one() {
        let h = MapHandle::new(map(5, 5)).unwrap();
        let other = h.clone();
        let mut rx = h.subscribe();
        assert_eq!(h.epoch(), 5);
        assert_eq!(
            h.offer(map(5, 5)),
            Err(MapRejected::NotNewer {
                offered: 5,
                current: 5
            })
        );
        assert!(matches!(
            h.offer(map(4, 5)),
            Err(MapRejected::NotNewer { .. })
        ));
        // Fewer nodes: not this cluster's (members are never taken away).
        assert!(matches!(
            h.offer(map(9, 4)),
            Err(MapRejected::OtherCluster(_))
        ));
        // A map with a server index out of range (edited on the wire) is refused.
        let mut v = serde_json::to_value(map(9, 5)).unwrap();
        v["walk"][0] = serde_json::json!(17);
        let bad: BucketMap = serde_json::from_value(v).unwrap();
        assert!(matches!(h.offer(bad.clone()), Err(MapRejected::Invalid(_))));
        assert!(matches!(MapHandle::new(bad), Err(MapRejected::Invalid(_))));
        assert_eq!(other.epoch(), 5);
        assert!(!rx.has_changed().unwrap());
        // A newer one replaces it for every clone and wakes the waiters.
        let waiter = tokio::spawn({
            let h = h.clone();
            async move { h.wait_newer(5).await }
        });
        assert_eq!(h.offer(map(7, 5)), Ok(7));
        assert_eq!(other.epoch(), 7);
        assert_eq!(other.current().epoch, 7);
        assert!(rx.has_changed().unwrap());
        assert_eq!(*rx.borrow_and_update(), 7);
        assert_eq!(waiter.await.unwrap(), 7);
        assert_eq!(h.wait_newer(6).await, 7);
        // A node added: the map grows.
        assert_eq!(h.offer(map(8, 6)), Ok(8));
        assert_eq!(other.current().servers(), 6);
    }

    #[test]
    fn write_loads_count_take_reset_and_restore() {
        let loads = WriteLoads::new(10, 2);
        loads.record_data(100);
        loads.record_data(5);
        assert!(loads.record_parity(3, 1, 40));
        assert!(loads.record_parity(3, 1, 2));
        assert!(loads.record_parity(9, 0, 7));
        assert!(!loads.record_parity(10, 0, 1));
        assert!(!loads.record_parity(0, 2, 1));
        loads.record_object_reads("a/b", 2);
        loads.record_object_reads("a/b", 3);
        let t = loads.take();
        assert_eq!(
            t,
            TakenLoads {
                data_bytes: 105,
                parity: vec![(3, 1, 42), (9, 0, 7)],
                object_reads: vec![("a/b".into(), 5)],
            }
        );
        assert!(loads.take().is_empty());
        loads.record_data(1);
        loads.restore(&t);
        let t2 = loads.take();
        assert_eq!(t2.data_bytes, 106);
        assert_eq!(t2.parity, t.parity);
        assert_eq!(t2.object_reads, t.object_reads);
        // A heartbeat carries at most MAX_OBJECT_READS names; the rest wait.
        for i in 0..MAX_OBJECT_READS + 5 {
            loads.record_object_reads(&format!("o{i}"), 1);
        }
        assert_eq!(loads.take().object_reads.len(), MAX_OBJECT_READS);
        assert_eq!(loads.take().object_reads.len(), 5);
        // No parity buckets (replication): every parity record is refused.
        let rep = WriteLoads::new(10, 0);
        assert!(!rep.record_parity(0, 0, 1));
        assert!(rep.take().is_empty());
    }

    #[test]
    fn write_loads_lose_nothing_under_concurrent_writers() {
        let loads = WriteLoads::new(4, 1);
        let mut total = TakenLoads::default();
        std::thread::scope(|s| {
            for _ in 0..4 {
                let l = loads.clone();
                s.spawn(move || {
                    for i in 0..10_000u64 {
                        l.record_data(1);
                        l.record_parity((i % 4) as usize, 0, 2);
                    }
                });
            }
            // Take while they write.
            for _ in 0..50 {
                let t = loads.take();
                total.data_bytes += t.data_bytes;
                total.parity.extend(t.parity);
            }
        });
        let t = loads.take();
        total.data_bytes += t.data_bytes;
        total.parity.extend(t.parity);
        assert_eq!(total.data_bytes, 40_000);
        let parity: u64 = total.parity.iter().map(|x| x.2).sum();
        assert_eq!(parity, 80_000);
    }
}
