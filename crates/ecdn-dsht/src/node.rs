//! A DSHT node: one UDP socket, the state of each level (routing table, sloppy store,
//! cluster), and the RPC plumbing that the lookups ([`crate::lookup`]) and cluster
//! management run on.
//!
//! # How a packet is handled
//!
//! The receive task reads a datagram, checks the sender's rate limit, decodes it (a malformed
//! one is counted and dropped), and then:
//!
//! * a **reply** is handed to the RPC waiting for its txid, but only if it came from the
//!   address the request went to; anything else is dropped as unsolicited;
//! * a **request** first teaches the node about its sender (level 0 always; level `i` if the
//!   sender's header names the node's own level-`i` cluster, and the sender is removed from
//!   that level's table if it names another), then is answered under the state lock, which
//!   never awaits.
//!
//! # Test beds on one machine
//!
//! [`Config::latency`] delays every packet the node sends by a one-way latency chosen per
//! destination, so a hundred nodes on loopback see the RTTs of a generated topology.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ecdn_trace::rng::Rng;
use tokio::net::UdpSocket;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::id::Id;
use crate::limit::PeerLimits;
use crate::routing::RoutingTable;
use crate::sloppy::{PutProbe, SloppyStore};
use crate::wire::{
    Body, ClusterInfo, Contact, Op, Packet, MAX_CONTACTS, MAX_LEVELS, MAX_PACKET, MAX_VALUES,
};

/// One-way latency to inject on a packet from the first address to the second.
pub type Latency = Arc<dyn Fn(SocketAddr, SocketAddr) -> Duration + Send + Sync>;

/// A node's parameters. [`Config::new`] gives the paper's.
#[derive(Clone)]
pub struct Config {
    /// Where the node listens.
    pub bind: SocketAddr,
    /// What the node's id is the SHA-1 of (§4.1 hashes the IP address; on loopback many
    /// nodes share one, so the default is `ip:port`).
    pub name: Option<String>,
    /// RTT threshold (diameter) of each level, level 0 first and unbounded: ∞, 60 ms, 20 ms.
    pub thresholds: Vec<Option<Duration>>,
    /// Bits of the key a lookup fixes per hop (`b`, 1 in the paper's experiments).
    pub bits_per_hop: usize,
    /// Values held per key before a node can be full (`l` = 4).
    pub full_values: usize,
    /// Puts per minute a node lets through for a key before it is loaded (`β` = 12).
    pub leakage: usize,
    /// The leakage rate's window: a minute (shorter only to test it in seconds).
    pub leakage_window: Duration,
    /// Contacts per routing-table bucket (`k`).
    pub bucket_size: usize,
    /// Most RPCs a lookup has outstanding at once.
    pub window: usize,
    /// Longest wait for a reply (shorter for peers whose RTT is known: 3 RTT + 20 ms).
    pub rpc_timeout: Duration,
    /// How often a node reconsiders its clusters (5 min in the paper).
    pub cluster_period: Duration,
    /// Longest TTL a node stores.
    pub max_ttl: Duration,
    /// Keys a level's store holds at most.
    pub max_keys: usize,
    /// Packets a second each peer may send (and bursts of twice that).
    pub peer_rate: f64,
    /// Injected one-way latencies (a test bed), none by default.
    pub latency: Option<Latency>,
    /// Seed of the node's random numbers (txids, cluster ids); from the OS when `None`.
    pub seed: Option<u64>,
}

impl Config {
    /// The paper's parameters, listening on `bind`.
    pub fn new(bind: SocketAddr) -> Config {
        Config {
            bind,
            name: None,
            thresholds: vec![
                None,
                Some(Duration::from_millis(60)),
                Some(Duration::from_millis(20)),
            ],
            bits_per_hop: 1,
            full_values: 4,
            leakage: 12,
            leakage_window: crate::sloppy::LEAKAGE_WINDOW,
            bucket_size: 8,
            window: 3,
            rpc_timeout: Duration::from_millis(500),
            cluster_period: Duration::from_secs(300),
            max_ttl: Duration::from_secs(24 * 3600),
            max_keys: 100_000,
            peer_rate: 1000.0,
            latency: None,
            seed: None,
        }
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("bind", &self.bind)
            .field("thresholds", &self.thresholds)
            .field("bits_per_hop", &self.bits_per_hop)
            .field("full_values", &self.full_values)
            .field("leakage", &self.leakage)
            .field("latency", &self.latency.is_some())
            .finish_non_exhaustive()
    }
}

/// Why a node could not start or an operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum DshtError {
    #[error("binding {addr}: {source}")]
    Bind { addr: SocketAddr, source: io::Error },
    #[error("a hierarchy has 1 to {MAX_LEVELS} levels, level 0 unbounded; got {0:?}")]
    Levels(Vec<Option<Duration>>),
    #[error("values are at most {max} bytes; got {len}")]
    ValueTooLong { len: usize, max: usize },
    #[error("l (values a key) is 1 to {MAX_VALUES}; got {0}")]
    FullValues(usize),
    #[error("no level {0} in a {1}-level hierarchy")]
    NoLevel(usize, usize),
    #[error("the cluster period is at least {MIN_PERIOD:?}; got {0:?}")]
    Period(Duration),
}

/// What the node knows of a peer.
#[derive(Clone, Debug)]
pub(crate) struct Peer {
    pub addr: SocketAddr,
    /// Least RTT measured (§4.4 records minimum RTTs).
    pub rtt: Option<Duration>,
    /// The peer's clusters at levels 1.. as its last packet said.
    pub clusters: Vec<ClusterInfo>,
    pub last_seen: Instant,
}

/// One level of the hierarchy on this node.
#[derive(Debug)]
pub(crate) struct Level {
    pub threshold: Option<Duration>,
    pub table: RoutingTable,
    pub store: SloppyStore,
    /// The cluster's id (zero at level 0) and when it was created.
    pub cluster: Id,
    pub created: Instant,
    /// RPCs to members of this cluster this period, and how many missed the threshold.
    pub accesses: u32,
    pub slow: u32,
}

/// Counters, for reports and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub packets_in: u64,
    pub malformed: u64,
    pub rate_limited: u64,
    pub unsolicited: u64,
    pub rpcs_sent: u64,
    pub rpcs_timed_out: u64,
    /// Walk RPCs sent only because the hops already asked were late (hedges).
    pub hedges: u64,
    /// `put` probes received (forward phases that reached this node).
    pub put_probes: u64,
    pub stores: u64,
    pub gets: u64,
}

/// The shortest cluster period (the upkeep runs once a period).
pub const MIN_PERIOD: Duration = Duration::from_millis(100);

/// Most keys whose `put` probes a node counts one by one ([`Dsht::put_probes`]).
const TRACKED_KEYS: usize = 1024;
/// Most peers a node remembers.
const MAX_PEERS: usize = 4096;

pub(crate) struct State {
    pub levels: Vec<Level>,
    pub peers: HashMap<Id, Peer>,
    pub limits: PeerLimits,
    pub rng: Rng,
    pub stats: Stats,
    pub probes_by_key: HashMap<Id, u64>,
}

struct Pending {
    to: SocketAddr,
    reply: oneshot::Sender<Packet>,
}

pub(crate) struct Inner {
    pub cfg: Config,
    pub id: Id,
    pub addr: SocketAddr,
    socket: UdpSocket,
    state: Mutex<State>,
    pending: Mutex<HashMap<u64, Pending>>,
}

/// A running DSHT node. Dropping it (or [`Dsht::shutdown`]) stops its tasks.
pub struct Dsht {
    pub(crate) inner: Arc<Inner>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Dsht {
    /// Binds the socket and starts answering packets, without upkeep: what
    /// [`Dsht::start`] (in `manage.rs`) builds on.
    pub(crate) async fn open(cfg: Config) -> Result<Dsht, DshtError> {
        if cfg.thresholds.is_empty()
            || cfg.thresholds.len() > MAX_LEVELS
            || cfg.thresholds[0].is_some()
            || cfg.thresholds[1..].iter().any(|t| t.is_none())
        {
            return Err(DshtError::Levels(cfg.thresholds.clone()));
        }
        if cfg.full_values == 0 || cfg.full_values > MAX_VALUES {
            return Err(DshtError::FullValues(cfg.full_values));
        }
        if cfg.cluster_period < MIN_PERIOD {
            return Err(DshtError::Period(cfg.cluster_period));
        }
        let socket = UdpSocket::bind(cfg.bind)
            .await
            .map_err(|source| DshtError::Bind {
                addr: cfg.bind,
                source,
            })?;
        let addr = socket.local_addr().map_err(|source| DshtError::Bind {
            addr: cfg.bind,
            source,
        })?;
        let name = cfg.name.clone().unwrap_or_else(|| addr.to_string());
        let id = Id::hash(name.as_bytes());
        let seed = cfg.seed.unwrap_or_else(os_seed);
        let mut rng = Rng::new(seed ^ u64::from_be_bytes(id.0[..8].try_into().unwrap()));
        let now = Instant::now();
        let levels = cfg
            .thresholds
            .iter()
            .enumerate()
            .map(|(i, threshold)| Level {
                threshold: *threshold,
                table: RoutingTable::new(id, cfg.bucket_size),
                store: SloppyStore::with_window(
                    cfg.full_values,
                    cfg.leakage,
                    cfg.leakage_window,
                    cfg.max_keys,
                ),
                // Every node starts in a singleton cluster at each non-global level (§6).
                cluster: if i == 0 {
                    Id::ZERO
                } else {
                    Id::random(&mut rng)
                },
                created: now,
                accesses: 0,
                slow: 0,
            })
            .collect();
        let state = State {
            levels,
            peers: HashMap::new(),
            limits: PeerLimits::new(cfg.peer_rate, 2.0 * cfg.peer_rate, MAX_PEERS),
            rng,
            stats: Stats::default(),
            probes_by_key: HashMap::new(),
        };
        let inner = Arc::new(Inner {
            cfg,
            id,
            addr,
            socket,
            state: Mutex::new(state),
            pending: Mutex::new(HashMap::new()),
        });
        let receiver = tokio::spawn(receive(inner.clone()));
        Ok(Dsht {
            inner,
            tasks: Mutex::new(vec![receiver]),
        })
    }

    /// The node's id.
    pub fn id(&self) -> Id {
        self.inner.id
    }

    /// The address the node listens on.
    pub fn addr(&self) -> SocketAddr {
        self.inner.addr
    }

    /// The node as others reach it.
    pub fn contact(&self) -> Contact {
        Contact {
            id: self.inner.id,
            addr: self.inner.addr,
        }
    }

    /// `levels()` of §2.3: the number of levels and their RTT thresholds (level 0: none).
    pub fn levels(&self) -> Vec<Option<Duration>> {
        self.inner.cfg.thresholds.clone()
    }

    /// The node's cluster id at each level (level 0: zero).
    pub fn clusters(&self) -> Vec<Id> {
        self.inner.lock().levels.iter().map(|l| l.cluster).collect()
    }

    /// Contacts in each level's routing table.
    pub fn table_sizes(&self) -> Vec<usize> {
        self.inner
            .lock()
            .levels
            .iter()
            .map(|l| l.table.len())
            .collect()
    }

    /// The node's counters.
    pub fn stats(&self) -> Stats {
        self.inner.lock().stats.clone()
    }

    /// `put` probes this node received for `key` so far (for hot-spot measurements).
    pub fn put_probes(&self, key: &Id) -> u64 {
        self.inner
            .lock()
            .probes_by_key
            .get(key)
            .copied()
            .unwrap_or(0)
    }

    /// `nodes(level, count, target)` of §2.3: up to `count` members of the node's cluster at
    /// `level` (the node itself first; the others are in its routing table, so they answered
    /// their last RPC); with a `target`, those whose address shares the longest prefix with it first (the
    /// subnet hints this crate uses in place of traceroute), then by RTT.
    pub fn nodes(
        &self,
        level: usize,
        count: usize,
        target: Option<std::net::IpAddr>,
    ) -> Result<Vec<Contact>, DshtError> {
        self.inner.nodes(level, count, target)
    }

    /// When the node last heard from `id` (a packet from it or an answer), if it knows it.
    pub fn last_heard(&self, id: &Id) -> Option<Instant> {
        self.inner.lock().peers.get(id).map(|p| p.last_seen)
    }

    /// The least RTT measured to a peer at `ip`, if the node knows one there.
    pub fn rtt_to(&self, ip: std::net::IpAddr) -> Option<Duration> {
        self.inner
            .lock()
            .peers
            .values()
            .filter(|p| p.addr.ip() == ip)
            .filter_map(|p| p.rtt)
            .min()
    }

    /// Pings `contact`: whether it answered within the RPC timeout.
    pub async fn ping(&self, contact: &Contact) -> bool {
        self.inner
            .call(contact.addr, Some(contact.id), Body::Ping)
            .await
            .is_some()
    }

    /// Adds a task to those the node stops with it.
    pub(crate) fn keep(&self, task: JoinHandle<()>) {
        self.tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(task);
    }

    /// Stops the node's tasks; the socket closes when the last handle is dropped.
    pub fn shutdown(&self) {
        for t in self
            .tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            t.abort();
        }
    }
}

impl Drop for Dsht {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn os_seed() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

async fn receive(inner: Arc<Inner>) {
    let mut buf = vec![0u8; MAX_PACKET + 1];
    loop {
        match inner.socket.recv_from(&mut buf).await {
            Ok((n, from)) => inner.handle(&buf[..n], from),
            // ICMP errors surface as errors on a UDP socket; nothing to do but go on.
            Err(_) => tokio::task::yield_now().await,
        }
    }
}

impl Inner {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn handle(self: &Arc<Inner>, bytes: &[u8], from: SocketAddr) {
        let now = Instant::now();
        let packet = {
            let mut st = self.lock();
            st.stats.packets_in += 1;
            if !st.limits.allow(from, now) {
                st.stats.rate_limited += 1;
                return;
            }
            match Packet::decode(bytes) {
                Ok(p) if p.sender != self.id => p,
                _ => {
                    st.stats.malformed += 1;
                    return;
                }
            }
        };
        if packet.body.is_reply() {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            match pending.remove(&packet.txid) {
                Some(p) if p.to == from => {
                    let _ = p.reply.send(packet);
                }
                Some(p) => {
                    pending.insert(packet.txid, p);
                    drop(pending);
                    self.lock().stats.unsolicited += 1;
                }
                None => {
                    drop(pending);
                    self.lock().stats.unsolicited += 1;
                }
            }
            return;
        }
        let reply = {
            let mut st = self.lock();
            st.learn(packet.sender, from, &packet.clusters, None, now);
            let body = st.answer(&self.cfg, self.id, &packet, now);
            Packet {
                txid: packet.txid,
                sender: self.id,
                clusters: st.header(now),
                body,
            }
        };
        self.send(from, reply.encode());
    }

    /// Sends a datagram, after the injected latency if any. Best effort, as UDP is.
    pub(crate) fn send(self: &Arc<Inner>, to: SocketAddr, bytes: Vec<u8>) {
        let delay = self
            .cfg
            .latency
            .as_ref()
            .map_or(Duration::ZERO, |l| l(self.addr, to));
        if delay.is_zero() {
            let _ = self.socket.try_send_to(&bytes, to);
        } else {
            // A packet in flight does not keep a stopped node alive.
            let node = Arc::downgrade(self);
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                if let Some(node) = node.upgrade() {
                    let _ = node.socket.try_send_to(&bytes, to);
                }
            });
        }
    }

    /// The RPC timeout for a peer: 3 RTT + 20 ms when its RTT is known, capped by
    /// [`Config::rpc_timeout`].
    pub(crate) fn timeout_for(&self, id: Option<&Id>) -> Duration {
        let rtt = id.and_then(|id| self.lock().peers.get(id).and_then(|p| p.rtt));
        match rtt {
            Some(rtt) => (rtt * 3 + Duration::from_millis(20)).min(self.cfg.rpc_timeout),
            None => self.cfg.rpc_timeout,
        }
    }

    /// Sends `body` to `to` and waits for the reply. `id` is who the node expects to answer
    /// (`None` for a seed it only knows by address). A reply from another id, or none within
    /// the timeout, is a failure: the contact is marked failed in every table.
    pub(crate) async fn call(
        self: &Arc<Inner>,
        to: SocketAddr,
        id: Option<Id>,
        body: Body,
    ) -> Option<(Packet, Duration)> {
        let (tx, rx) = oneshot::channel();
        let now = Instant::now();
        let (txid, bytes) = {
            let mut st = self.lock();
            st.stats.rpcs_sent += 1;
            let txid = st.rng.next_u64();
            let packet = Packet {
                txid,
                sender: self.id,
                clusters: st.header(now),
                body,
            };
            (txid, packet.encode())
        };
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(txid, Pending { to, reply: tx });
        let timeout = self.timeout_for(id.as_ref());
        self.send(to, bytes);
        let answer = tokio::time::timeout(timeout, rx).await;
        let rtt = now.elapsed();
        match answer {
            Ok(Ok(reply)) if id.is_none_or(|id| id == reply.sender) => {
                let mut st = self.lock();
                st.learn(reply.sender, to, &reply.clusters, Some(rtt), Instant::now());
                Some((reply, rtt))
            }
            _ => {
                self.pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&txid);
                let mut st = self.lock();
                st.stats.rpcs_timed_out += 1;
                if let Some(id) = id {
                    st.failed(&id);
                }
                None
            }
        }
    }

    fn nodes(
        &self,
        level: usize,
        count: usize,
        target: Option<std::net::IpAddr>,
    ) -> Result<Vec<Contact>, DshtError> {
        let st = self.lock();
        let n = st.levels.len();
        let lvl = st.levels.get(level).ok_or(DshtError::NoLevel(level, n))?;
        let mut all: Vec<(u32, Duration, Contact)> = lvl
            .table
            .contacts()
            .map(|c| {
                let rtt = st.peers.get(&c.id).and_then(|p| p.rtt);
                let shared = target.map_or(0, |t| common_prefix(&t, &c.addr.ip()));
                (shared, rtt.unwrap_or(Duration::MAX), c)
            })
            .collect();
        all.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut out = vec![Contact {
            id: self.id,
            addr: self.addr,
        }];
        out.extend(all.into_iter().map(|(_, _, c)| c));
        out.truncate(count);
        Ok(out)
    }
}

/// Leading bits two addresses share (0 across families).
pub fn common_prefix(a: &std::net::IpAddr, b: &std::net::IpAddr) -> u32 {
    use std::net::IpAddr;
    match (a, b) {
        (IpAddr::V4(a), IpAddr::V4(b)) => (u32::from(*a) ^ u32::from(*b)).leading_zeros(),
        (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(*a) ^ u128::from(*b)).leading_zeros(),
        _ => 0,
    }
}

impl State {
    /// The header's cluster information: each non-global level's id, age and size estimate
    /// (the routing table's contacts and the node itself).
    pub(crate) fn header(&self, now: Instant) -> Vec<ClusterInfo> {
        self.levels[1..]
            .iter()
            .map(|l| ClusterInfo {
                id: l.cluster,
                age_s: now.duration_since(l.created).as_secs().min(u32::MAX as u64) as u32,
                size: l.table.len() as u32 + 1,
            })
            .collect()
    }

    /// Whether a sender whose header says `clusters` shares the node's cluster at `level`.
    pub(crate) fn shares(&self, clusters: &[ClusterInfo], level: usize) -> bool {
        match level {
            0 => true,
            i => self
                .levels
                .get(i)
                .is_some_and(|l| clusters.get(i - 1).is_some_and(|c| c.id == l.cluster)),
        }
    }

    /// Learns from a packet of `id` at `addr`: its clusters, its RTT if one was measured, and
    /// the routing tables of the levels it shares (removing it from those it no longer does).
    pub(crate) fn learn(
        &mut self,
        id: Id,
        addr: SocketAddr,
        clusters: &[ClusterInfo],
        rtt: Option<Duration>,
        now: Instant,
    ) {
        if !self.peers.contains_key(&id) && self.peers.len() >= MAX_PEERS {
            // Forget the peer heard from least recently.
            if let Some(old) = self
                .peers
                .iter()
                .min_by_key(|(_, p)| p.last_seen)
                .map(|(k, _)| *k)
            {
                self.peers.remove(&old);
            }
        }
        let peer = self.peers.entry(id).or_insert(Peer {
            addr,
            rtt: None,
            clusters: Vec::new(),
            last_seen: now,
        });
        peer.addr = addr;
        peer.clusters = clusters.to_vec();
        peer.last_seen = now;
        if let Some(rtt) = rtt {
            peer.rtt = Some(peer.rtt.map_or(rtt, |r| r.min(rtt)));
        }
        let contact = Contact { id, addr };
        for i in 0..self.levels.len() {
            if self.shares(clusters, i) {
                let level = &mut self.levels[i];
                level.table.heard(contact, now);
                if let (Some(rtt), Some(threshold)) = (rtt, level.threshold) {
                    level.accesses += 1;
                    if rtt > threshold {
                        level.slow += 1;
                    }
                }
            } else {
                self.levels[i].table.remove(&id);
            }
        }
    }

    /// A failed RPC to `id`: marked in every table; a slow access for its clusters.
    pub(crate) fn failed(&mut self, id: &Id) {
        let clusters = self
            .peers
            .get(id)
            .map(|p| p.clusters.clone())
            .unwrap_or_default();
        for i in 0..self.levels.len() {
            if i > 0 && self.shares(&clusters, i) {
                self.levels[i].accesses += 1;
                self.levels[i].slow += 1;
            }
            self.levels[i].table.failed(id);
        }
    }

    /// The answer to a request to the node `own`.
    fn answer(&mut self, cfg: &Config, own: Id, packet: &Packet, now: Instant) -> Body {
        match &packet.body {
            Body::Ping => Body::Pong,
            Body::Probe {
                level,
                op,
                key,
                target,
                ..
            } => {
                let level = *level as usize;
                if !self.shares(&packet.clusters, level) {
                    return not_member_probe(level);
                }
                let (values, probe) = match op {
                    Op::Get => {
                        self.stats.gets += 1;
                        let mut v = self.levels[level].store.get(key, now);
                        v.truncate(MAX_VALUES);
                        (v, None)
                    }
                    Op::Put => {
                        self.stats.put_probes += 1;
                        if let Some(n) = self.probes_by_key.get_mut(key) {
                            *n += 1;
                        } else if self.probes_by_key.len() < TRACKED_KEYS {
                            self.probes_by_key.insert(*key, 1);
                        }
                        // The values come too: a put learns whom it meets on its way
                        // (`PutResult::found`).
                        let store = &mut self.levels[level].store;
                        let probe = store.probe_put(key, now);
                        let mut v = store.get(key, now);
                        v.truncate(MAX_VALUES);
                        (v, Some(probe))
                    }
                    Op::Find => (Vec::new(), None),
                };
                // A get that found values stops here; a put's walk goes on, to the nodes
                // nearest the target among those closer to the key than this one (§4.1: "its
                // peers that are half-way closer to k"; none when this one is the closest it
                // knows). A find (joining, refreshing) gets the nodes nearest the target.
                let contacts = if values.is_empty() || *op == Op::Put {
                    let closer = |c: &Contact| key.distance(&c.id) < key.distance(&own);
                    let toward_key = *op != Op::Find;
                    self.levels[level]
                        .table
                        .closest(target, usize::MAX)
                        .into_iter()
                        .filter(|c| c.id != packet.sender && (!toward_key || closer(c)))
                        .take(MAX_CONTACTS)
                        .collect()
                } else {
                    Vec::new()
                };
                let probe = probe.unwrap_or(PutProbe {
                    loaded: false,
                    count: values.len(),
                    min_ttl: Duration::ZERO,
                });
                Body::ProbeReply {
                    level: level as u8,
                    member: true,
                    loaded: probe.loaded,
                    count: probe.count.min(u8::MAX as usize) as u8,
                    min_ttl_s: probe.min_ttl.as_secs().min(u32::MAX as u64) as u32,
                    values,
                    contacts,
                }
            }
            Body::Store {
                level,
                key,
                ttl_s,
                value,
            } => {
                let lvl = *level as usize;
                if !self.shares(&packet.clusters, lvl) {
                    return Body::StoreReply {
                        level: *level,
                        member: false,
                        stored: false,
                        values: Vec::new(),
                    };
                }
                self.stats.stores += 1;
                // What was held before, read under the same lock as the store: the store's
                // return status (a test-and-set, §8).
                let mut before = self.levels[lvl].store.get(key, now);
                before.retain(|v| v.data != *value);
                before.truncate(MAX_VALUES);
                let stored = if *ttl_s == 0 {
                    // A withdrawal: the sender's value goes.
                    self.levels[lvl].store.remove(key, value);
                    true
                } else {
                    let ttl = Duration::from_secs(*ttl_s as u64).min(cfg.max_ttl);
                    self.levels[lvl].store.store(key, value, ttl, now)
                };
                Body::StoreReply {
                    level: *level,
                    member: true,
                    stored,
                    values: before,
                }
            }
            // Replies never get here (see `handle`).
            Body::Pong | Body::ProbeReply { .. } | Body::StoreReply { .. } => Body::Pong,
        }
    }
}

fn not_member_probe(level: usize) -> Body {
    Body::ProbeReply {
        level: level.min(u8::MAX as usize) as u8,
        member: false,
        loaded: false,
        count: 0,
        min_ttl_s: 0,
        values: Vec::new(),
        contacts: Vec::new(),
    }
}
