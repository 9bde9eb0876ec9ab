//! The control plane on etcd (the cluster file's `etcd` endpoints): what nodes and
//! coordinators keep there, and a node's side of it.
//!
//! Keys, under the cluster's `etcd_prefix` (default `/ecdn/`):
//!
//! * `nodes/{id}` — a node's registration (its addresses), put under the node's lease
//!   (`etcd_lease_s`, kept alive every third of it). The lease lapsing deletes the key: the
//!   node is unavailable. This replaces the embedded coordinator's heartbeats.
//! * `loads/{id}` — the node's write loads (§4.2's inputs: data bytes, and bytes per parity
//!   bucket), **cumulative** since the node process started ([`LoadReport`], with a random
//!   incarnation number), put every `heartbeat_ms` when they changed, under the same lease. The
//!   leader records the growth since the values it consumed last, so a report read twice, or a
//!   leader taking over, counts nothing twice.
//! * `leader` — the leading coordinator's address, put under its lease by a transaction that
//!   succeeds only if the key does not exist (see `coordinator::etcd`).
//! * `map` and `map-diff` — the bucket map: the last whole map and the diff from it to the
//!   current one, compressed and signed with the cluster key (`crate::etcd_map`); a map's
//!   **epoch is the etcd revision that wrote it** (`mod_revision`), so epochs only grow,
//!   across leaders too.
//! * `state` — what the leader needs to continue: the placement's state and the loads it
//!   consumed (`coordinator::etcd`), written in the same transaction as `map`.
//!
//! A node ([`spawn_etcd_control`]) registers, reports its loads and watches `map`. When etcd
//! cannot be reached it keeps serving with the last map it has, says so on stderr and in
//! [`EtcdStatus`], and registers again and catches up on the map when etcd returns.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{
    Client, ConnectOptions, EventType, GetOptions, LeaseKeepAliveStream, LeaseKeeper, PutOptions,
    WatchOptions,
};
use serde::{Deserialize, Serialize};

use crate::auth::ClusterKey;
use crate::config::ClusterConfig;
use crate::control::{Control, ControlError, MapHandle, MapRejected, WriteLoads};
pub use crate::etcd_keys::Keys;
pub(crate) use crate::etcd_keys::{open, seal};
use crate::etcd_map::{Gap, MapFollower};
use crate::health::observer::PeerObserver;
use crate::health::PeerView;
use crate::map::BucketMap;

/// A node's registration value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Registration {
    pub node: usize,
    pub client: String,
    pub peer: String,
}

/// A node's cumulative write loads (`loads/{id}`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    pub node: usize,
    /// Random per node process: totals of another incarnation start again from zero.
    pub incarnation: u64,
    pub data_bytes: u64,
    /// `[bucket, parity_index, bytes]`, totals.
    pub parity: Vec<(usize, usize, u64)>,
}

/// Connects to etcd with the timeouts a control plane wants: a request that cannot be
/// answered fails within seconds instead of hanging, and an idle connection (a map watch) is
/// pinged every 10 s. etcd closes connections that ping more often than its
/// `--grpc-keepalive-min-time` (5 s by default), so no shorter interval.
///
/// One member at a time: starting from a random one, the first member that answers a status
/// request. (A client balanced over every endpoint keeps sending some requests to a member
/// that died until it notices, and each such failure costs a node its session; with one live
/// member per client, a session that fails reconnects to another at once.)
pub async fn connect(endpoints: &[String]) -> Result<Client, etcd_client::Error> {
    let opts = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(2))
        .with_timeout(Duration::from_secs(3))
        .with_keep_alive(Duration::from_secs(10), Duration::from_secs(5))
        .with_keep_alive_while_idle(true);
    let n = endpoints.len().max(1);
    let start = (rand_u64() % n as u64) as usize;
    let mut last = None;
    for i in 0..endpoints.len() {
        let ep = &endpoints[(start + i) % n];
        match Client::connect([ep], Some(opts.clone())).await {
            Ok(mut c) => match c.status().await {
                Ok(_) => return Ok(c),
                Err(e) => last = Some(e),
            },
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| etcd_client::Error::InvalidArgs("no etcd endpoints".into())))
}

/// A lease kept alive: granted with a TTL, refreshed every third of it. Nodes hold their
/// registration and load keys under one, the leading coordinator its `leader` key.
pub(crate) struct Lease {
    pub(crate) id: i64,
    keeper: LeaseKeeper,
    acks: LeaseKeepAliveStream,
    tick: tokio::time::Interval,
}

impl Lease {
    /// Connects to the cluster's etcd and takes a lease of its `etcd_lease_s`.
    pub(crate) async fn connect(cfg: &ClusterConfig) -> Result<(Client, Lease), String> {
        let mut client = connect(&cfg.etcd)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let lease = Lease::grant(&mut client, cfg.etcd_lease_s).await?;
        Ok((client, lease))
    }

    /// Keeps lease `id` (taken in a session that failed) if etcd still has it, else takes a
    /// new one; `(lease, resumed)`. A node that reconnects within its TTL keeps its
    /// registration: the leader sees no unavailability.
    pub(crate) async fn resume(
        client: &mut Client,
        id: Option<i64>,
        ttl_s: u64,
    ) -> Result<(Lease, bool), String> {
        if let Some(id) = id {
            let (keeper, acks) = client
                .lease_keep_alive(id)
                .await
                .map_err(|e| format!("keep-alive: {e}"))?;
            let mut lease = Lease::from_parts(id, keeper, acks, ttl_s);
            if lease.keeper.keep_alive().await.is_ok() {
                if let Ok(Some(a)) = lease.acks.message().await {
                    if a.ttl() > 0 {
                        return Ok((lease, true));
                    }
                }
            }
        }
        Ok((Lease::grant(client, ttl_s).await?, false))
    }

    fn from_parts(id: i64, keeper: LeaseKeeper, acks: LeaseKeepAliveStream, ttl_s: u64) -> Lease {
        let every = Duration::from_millis((ttl_s * 1000 / 3).max(100));
        Lease {
            id,
            keeper,
            acks,
            tick: tokio::time::interval(every),
        }
    }

    async fn grant(client: &mut Client, ttl_s: u64) -> Result<Lease, String> {
        let ttl = i64::try_from(ttl_s).map_err(|_| "a lease TTL out of range")?;
        let id = client
            .lease_grant(ttl, None)
            .await
            .map_err(|e| format!("lease: {e}"))?
            .id();
        let (keeper, acks) = client
            .lease_keep_alive(id)
            .await
            .map_err(|e| format!("keep-alive: {e}"))?;
        Ok(Lease::from_parts(id, keeper, acks, ttl_s))
    }

    /// Keeps the lease alive; returns only when it is lost, saying why. Meant to be one
    /// branch of a `select!`: dropping it between refreshes loses nothing.
    pub(crate) async fn lost(&mut self) -> String {
        loop {
            tokio::select! {
                _ = self.tick.tick() => {
                    if let Err(e) = self.keeper.keep_alive().await {
                        return format!("keep-alive: {e}");
                    }
                }
                ack = self.acks.message() => match ack {
                    Ok(Some(a)) if a.ttl() > 0 => {}
                    Ok(Some(_)) => return "the lease expired".into(),
                    Ok(None) => return "the keep-alive stream ended".into(),
                    Err(e) => return format!("keep-alive: {e}"),
                },
            }
        }
    }
}

/// What a node's etcd session reports (for its log and metrics).
#[derive(Debug, Default)]
pub struct EtcdStatus {
    /// etcd answered the node's last request.
    pub connected: AtomicBool,
    /// Sessions that failed (etcd unreachable, lease lost) since start.
    pub failures: AtomicU64,
    /// Load reports put.
    pub load_puts: AtomicU64,
}

/// The current map in etcd, if there is one (one connection, one read).
pub(crate) async fn fetch_map(cfg: &ClusterConfig) -> Result<Option<BucketMap>, String> {
    let mut client = connect(&cfg.etcd)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let (map, _) = get_map(
        &mut client,
        &Keys::new(cfg),
        &cfg.cluster_key(),
        &mut MapFollower::default(),
    )
    .await?;
    Ok(map)
}

/// The leading coordinator's name (its API address), if one leads.
pub async fn leader_name(cfg: &ClusterConfig) -> Result<Option<String>, String> {
    let mut client = connect(&cfg.etcd)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let resp = client
        .get(Keys::new(cfg).leader(), None)
        .await
        .map_err(|e| format!("get leader: {e}"))?;
    Ok(resp
        .kvs()
        .first()
        .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()))
}

/// Gets the current map from etcd, if there is one: both map keys read at one revision
/// (see `crate::etcd_map`); the revision read at, for a watch to start after.
async fn get_map(
    client: &mut Client,
    keys: &Keys,
    key: &ClusterKey,
    follower: &mut MapFollower,
) -> Result<(Option<BucketMap>, i64), String> {
    let (kvs, rev) = get_prefix(client, &keys.map())
        .await
        .map_err(|e| format!("get map: {e}"))?;
    Ok((follower.snapshot(keys, key, &kvs)?, rev))
}

/// Offers `m` to the node's handle; true if it was taken or not newer.
fn offer(node: usize, handle: &MapHandle, m: BucketMap) {
    let epoch = m.epoch;
    match handle.offer(m) {
        Ok(_) | Err(MapRejected::NotNewer { .. }) => {}
        Err(e) => eprintln!("ecdn node {node}: etcd map epoch {epoch} ignored: {e}"),
    }
}

/// The first map from etcd (retrying until there is a valid one of this cluster's shape), then
/// the registration-and-loads task and the map watcher of node `node`.
pub async fn spawn_etcd_control(
    cfg: &ClusterConfig,
    node: usize,
    loads: WriteLoads,
    status: Arc<EtcdStatus>,
    observer: Option<Arc<PeerObserver>>,
) -> Result<Control, ControlError> {
    let keys = Keys::new(cfg);
    let key = cfg.cluster_key();
    let mut failures = 0u64;
    let first = loop {
        let got = match connect(&cfg.etcd).await {
            Ok(mut c) => get_map(&mut c, &keys, &key, &mut MapFollower::default())
                .await
                .map(|(m, _)| m),
            Err(e) => Err(format!("connect: {e}")),
        };
        match got {
            Ok(Some(m)) => match crate::control::fits(cfg, &m) {
                Ok(()) => match MapHandle::new(m) {
                    Ok(h) => break h,
                    Err(e) => log_failure(node, &mut failures, &e.to_string()),
                },
                Err(e) => log_failure(node, &mut failures, &format!("another cluster's: {e}")),
            },
            Ok(None) => {}
            Err(e) => log_failure(node, &mut failures, &e),
        }
        tokio::time::sleep(Duration::from_millis(cfg.heartbeat_ms)).await;
    };
    let current = first.current();
    let (client, peer) = match (current.member(node), cfg.nodes.get(node)) {
        (Some(m), _) => (m.client, m.peer),
        (None, Some(n)) if n.id == node => (n.client, n.peer),
        _ => {
            let nodes = current.servers();
            return Err(ControlError::UnknownNode { node, nodes });
        }
    };
    eprintln!("ecdn node {node}: map epoch {} from etcd", first.epoch());
    let registration = Registration {
        node,
        client: client.to_string(),
        peer: peer.to_string(),
    };
    let health = observer.filter(|_| cfg.health.enabled).map(|o| Health {
        observer: o,
        map: first.clone(),
        last: None,
        ticks: 0,
    });
    let session = tokio::spawn(session_loop(
        cfg.clone(),
        registration,
        loads,
        status.clone(),
        health,
    ));
    let watcher = tokio::spawn(map_loop(cfg.clone(), node, first.clone(), status));
    Ok(Control::from_parts(first, vec![session, watcher]))
}

fn log_failure(node: usize, failures: &mut u64, msg: &str) {
    if failures.is_multiple_of(20) {
        eprintln!("ecdn node {node}: etcd: {msg} (failure {})", *failures + 1);
    }
    *failures += 1;
}

/// Cumulative load totals of this node process.
struct Totals {
    report: LoadReport,
    parity: BTreeMap<(usize, usize), u64>,
    changed: bool,
}

impl Totals {
    fn add(&mut self, loads: &WriteLoads) {
        let t = loads.take();
        if t.is_empty() {
            return;
        }
        self.report.data_bytes = self.report.data_bytes.saturating_add(t.data_bytes);
        for &(b, j, n) in &t.parity {
            let e = self.parity.entry((b, j)).or_default();
            *e = e.saturating_add(n);
        }
        self.changed = true;
    }

    fn json(&mut self) -> Vec<u8> {
        self.report.parity = self.parity.iter().map(|(&(b, j), &n)| (b, j, n)).collect();
        serde_json::to_vec(&self.report).expect("a load report serializes")
    }
}

/// A node's health views and when it last put them (`health/{id}`).
struct Health {
    observer: Arc<PeerObserver>,
    map: MapHandle,
    /// The views last put.
    last: Option<Vec<PeerView>>,
    /// Report ticks since.
    ticks: u32,
}

/// Views are put again at least every this many report ticks, unchanged or not.
const HEALTH_REFRESH: u32 = 20;

impl Health {
    /// The views to put now, if they changed enough since the last put (a peer's reachability,
    /// or its service time by a quarter), or the refresh is due.
    fn due(&mut self, cfg: &ClusterConfig) -> Option<Vec<PeerView>> {
        let views = self.observer.views(
            &crate::health::probe::peer_ids(&self.map.current(), cfg),
            std::time::Instant::now(),
        );
        self.ticks += 1;
        let changed = match &self.last {
            None => true,
            Some(last) => {
                last.len() != views.len()
                    || last.iter().zip(&views).any(|(a, b)| {
                        a.node != b.node
                            || a.reachable != b.reachable
                            || match (a.service_us, b.service_us) {
                                (Some(x), Some(y)) => {
                                    (x as f64 - y as f64).abs() > 0.25 * x.max(1) as f64
                                }
                                (x, y) => x.is_some() != y.is_some(),
                            }
                    })
            }
        };
        (changed || self.ticks >= HEALTH_REFRESH).then_some(views)
    }
}

/// Registers the node under a lease, keeps it alive and puts the load totals (and its views of
/// its peers), again and again as sessions fail.
async fn session_loop(
    cfg: ClusterConfig,
    reg: Registration,
    loads: WriteLoads,
    status: Arc<EtcdStatus>,
    mut health: Option<Health>,
) {
    let keys = Keys::new(&cfg);
    let mut totals = Totals {
        report: LoadReport {
            node: reg.node,
            incarnation: rand_u64(),
            ..LoadReport::default()
        },
        parity: BTreeMap::new(),
        changed: true,
    };
    let mut failures = 0u64;
    // The lease of the last session, kept by the next one if it is still alive.
    let mut lease_id = None;
    loop {
        let began = std::time::Instant::now();
        let err = session(
            &cfg,
            &keys,
            &reg,
            &loads,
            &mut totals,
            &status,
            &mut lease_id,
            health.as_mut(),
        )
        .await;
        if let Some(h) = health.as_mut() {
            // The next session puts its views at once (the lease may have taken the key).
            h.last = None;
        }
        status.connected.store(false, Ordering::Relaxed);
        status.failures.fetch_add(1, Ordering::Relaxed);
        // Loads taken in the failed session stay in the totals; the next session puts them.
        totals.changed = true;
        log_failure(
            reg.node,
            &mut failures,
            &format!("session: {err}; keeping the last map"),
        );
        // A session that had been working is retried at once (another member may answer);
        // one that failed from the start, every heartbeat.
        if began.elapsed() < Duration::from_secs(1) {
            tokio::time::sleep(Duration::from_millis(cfg.heartbeat_ms.max(200))).await;
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn session(
    cfg: &ClusterConfig,
    keys: &Keys,
    reg: &Registration,
    loads: &WriteLoads,
    totals: &mut Totals,
    status: &EtcdStatus,
    lease_id: &mut Option<i64>,
    mut health: Option<&mut Health>,
) -> String {
    let mut client = match connect(&cfg.etcd).await {
        Ok(c) => c,
        Err(e) => return format!("connect: {e}"),
    };
    let (mut lease, resumed) = match Lease::resume(&mut client, *lease_id, cfg.etcd_lease_s).await {
        Ok(l) => l,
        Err(e) => return e,
    };
    *lease_id = Some(lease.id);
    let value = serde_json::to_vec(reg).expect("a registration serializes");
    let lease_id = lease.id;
    let with_lease = || Some(PutOptions::new().with_lease(lease_id));
    if let Err(e) = client.put(keys.node(reg.node), value, with_lease()).await {
        return format!("register: {e}");
    }
    status.connected.store(true, Ordering::Relaxed);
    eprintln!(
        "ecdn node {}: registered in etcd (lease {:x}, {} s{})",
        reg.node,
        lease.id,
        cfg.etcd_lease_s,
        if resumed { ", kept" } else { "" }
    );
    let mut report = tokio::time::interval(Duration::from_millis(cfg.heartbeat_ms));
    report.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            why = lease.lost() => return why,
            _ = report.tick() => {
                totals.add(loads);
                if totals.changed {
                    let v = totals.json();
                    if let Err(e) = client.put(keys.load(reg.node), v, with_lease()).await {
                        return format!("load report: {e}");
                    }
                    totals.changed = false;
                    status.load_puts.fetch_add(1, Ordering::Relaxed);
                }
                if let Some(h) = health.as_deref_mut() {
                    if let Some(views) = h.due(cfg) {
                        let v = serde_json::to_vec(&views).expect("views serialize");
                        if let Err(e) = client.put(keys.health(reg.node), v, with_lease()).await {
                            return format!("health report: {e}");
                        }
                        h.last = Some(views);
                        h.ticks = 0;
                    }
                }
            }
        }
    }
}

/// Watches both map keys and offers every new map to the node, reconnecting (and reading the
/// map afresh) whenever the watch fails or a diff comes on a base the node does not hold.
async fn map_loop(cfg: ClusterConfig, node: usize, handle: MapHandle, status: Arc<EtcdStatus>) {
    let keys = Keys::new(&cfg);
    let key = cfg.cluster_key();
    let mut failures = 0u64;
    loop {
        let err = async {
            let mut client = connect(&cfg.etcd)
                .await
                .map_err(|e| format!("connect: {e}"))?;
            let mut follower = MapFollower::default();
            let (map, rev) = get_map(&mut client, &keys, &key, &mut follower).await?;
            if let Some(m) = map {
                offer(node, &handle, m);
            }
            let opts = WatchOptions::new()
                .with_prefix()
                .with_start_revision(rev + 1);
            let mut stream = client
                .watch(keys.map(), Some(opts))
                .await
                .map_err(|e| format!("watch map: {e}"))?;
            status.connected.store(true, Ordering::Relaxed);
            loop {
                let msg = stream
                    .message()
                    .await
                    .map_err(|e| format!("watch map: {e}"))?
                    .ok_or("the map watch ended")?;
                if msg.canceled() {
                    return Err::<(), String>(format!(
                        "map watch canceled: {}",
                        msg.cancel_reason()
                    ));
                }
                for ev in msg.events() {
                    let (EventType::Put, Some(kv)) = (ev.event_type(), ev.kv()) else {
                        continue;
                    };
                    match follower.put(&keys, &key, kv.key(), kv.value(), kv.mod_revision()) {
                        Ok(Some(m)) => offer(node, &handle, m),
                        Ok(None) => {}
                        // Read both keys again, at once (no wait: nothing failed).
                        Err(gap @ Gap::Base { .. }) => {
                            eprintln!("ecdn node {node}: etcd: {gap}; reading the whole map");
                            let (map, _) = get_map(&mut client, &keys, &key, &mut follower).await?;
                            if let Some(m) = map {
                                offer(node, &handle, m);
                            }
                        }
                        Err(Gap::Bad(e)) => eprintln!("ecdn node {node}: etcd: {e}"),
                    }
                }
            }
        }
        .await;
        if let Err(e) = err {
            status.connected.store(false, Ordering::Relaxed);
            log_failure(
                node,
                &mut failures,
                &format!("{e}; keeping map epoch {}", handle.epoch()),
            );
        }
        tokio::time::sleep(Duration::from_millis(cfg.heartbeat_ms.max(200))).await;
    }
}

/// A random number for an incarnation (the clock and the process id, mixed).
fn rand_u64() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let x = t ^ (u64::from(std::process::id()) << 32);
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// All `(key, value, mod_revision)` under `prefix`, and the revision they were read at.
pub async fn get_prefix(
    client: &mut Client,
    prefix: &str,
) -> Result<(Vec<(Vec<u8>, Vec<u8>, i64)>, i64), etcd_client::Error> {
    let resp = client
        .get(prefix, Some(GetOptions::new().with_prefix()))
        .await?;
    let rev = resp.header().map_or(0, |h| h.revision());
    Ok((
        resp.kvs()
            .iter()
            .map(|kv| (kv.key().to_vec(), kv.value().to_vec(), kv.mod_revision()))
            .collect(),
        rev,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_ids() {
        let text = |etcd: &str, prefix: &str| {
            format!(
                "scheme = \"c2dn\"\nkey = \"0123456789abcdef-secret\"\n\
                 coordinator = \"127.0.0.1:1\"\netcd = [\"{etcd}\"]\netcd_prefix = \"{prefix}\"\n\
                 [[node]]\nid = 0\nclient = \"127.0.0.1:2\"\npeer = \"127.0.0.1:3\"\n\
                 [[node]]\nid = 1\nclient = \"127.0.0.1:4\"\npeer = \"127.0.0.1:5\"\n\
                 [[node]]\nid = 2\nclient = \"127.0.0.1:6\"\npeer = \"127.0.0.1:7\"\n\
                 [[node]]\nid = 3\nclient = \"127.0.0.1:8\"\npeer = \"127.0.0.1:9\"\n"
            )
        };
        for (etcd, prefix, want) in [
            ("127.0.0.1:2379", "/c1/", "expected http://HOST:PORT"),
            (
                "http://127.0.0.1:2379",
                "c1/",
                "must start and end with '/'",
            ),
        ] {
            let e = ClusterConfig::parse(&text(etcd, prefix))
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{e}");
        }
        let cfg = ClusterConfig::parse(&text("http://127.0.0.1:2379", "/c1/")).unwrap();
        let k = Keys::new(&cfg);
        assert_eq!(k.node(3), "/c1/nodes/3");
        assert_eq!(k.id_of(b"/c1/nodes/3", &k.nodes()), Some(3));
        assert_eq!(k.id_of(b"/c1/loads/12", &k.loads()), Some(12));
        for bad in [
            &b"/c1/nodes/"[..],
            b"/c1/nodes/x",
            b"/c1/nodes/-1",
            b"/c2/nodes/1",
            b"/c1/nodes/99999999",
        ] {
            assert_eq!(k.id_of(bad, &k.nodes()), None, "{bad:?}");
        }
    }
}
