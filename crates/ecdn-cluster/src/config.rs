//! The cluster file: one TOML file every process of a cluster reads.
//!
//! ```toml
//! scheme = "c2dn"            # no-rep | rep2 | rep3 | c2dn-norebal | c2dn
//! k = 3                      # data chunks per coded object
//! p = 1                      # parity chunks
//! threshold = "128KiB"       # objects larger than this are coded (C2DN schemes)
//! slice_size = "4MiB"        # objects larger than this are cached as range slices of
//!                            # this size, each its own cache object; 0: none
//! evict_together = true      # a piece the policy evicts takes its object's others along
//! resync = 0.5               # c2dn: a read that writes back a lacking piece also rewrites
//!                            # those found past this fraction of their FIFO ("off": none)
//! reinsert = 0.9             # a hit rewrites its pieces past this fraction ("off": none)
//! buckets = 100
//! sub_chunk = "32KiB"        # unit of coding, transfer and streaming
//! direct_reads = true        # a node reads a hit of an object it holds a piece of (or
//!                            # learned is coded) itself, instead of relaying the request
//!                            # to the bucket's serving node (off while repair_rate is set)
//! key = "a long random secret shared by the cluster"
//! # accepted_keys = ["the previous key"]   # also accepted while a key rotation runs
//! coordinator = "127.0.0.1:7400"
//! heartbeat_ms = 500         # a node missing `missed_heartbeats` of them is unavailable
//! missed_heartbeats = 3
//! parity_delay = 0.2         # delayed parity fetch: wait 20% past the first data sub-chunk
//! rebalance_every_s = 3600   # periodic parity rebalance (and on availability changes); 0: off
//! weigh = "loads"            # what it balances: bytes written since the last one, or
//!                            # "counts" (every chunk bucket 1, the authors' rule)
//! carry = 1.0                # with loads: the imbalance so far, up to this many periods'
//!                            # mean load per node, is paid back (0: each period on its own)
//! hold = 0.02                # periodic rebalances move nothing while the write imbalance
//!                            # so far is at most 1 + hold (0: every period)
//! repair_rate = 0            # background repair, bytes per second per node ("4MiB"): off
//! repair_every_s = 60        # its rounds (0: only when asked, POST /_ecdn/repair)
//! repair_min_requests = 2    # it rebuilds objects requested at least this often,
//! repair_max_age = 0.5       # whose oldest piece is younger than this fraction of a FIFO,
//! repair_scan = 1000         # looking at this many of the most requested objects per round
//! seed = 1                   # placement seed
//! object_record_ttl_ms = 1000 # how long a node reuses an EC-Cache object's record
//! object_scheme = "ec-cache" # EC-Cache objects' default code: ec-cache | selective-replication
//! object_budget = 0.15       # their memory overhead budget, a fraction of their size
//! object_budget_every_s = 0  # re-spend it from measured reads this often: off
//! object_backend = "http://127.0.0.1:9100/objects"  # (optional) where the originals are,
//!                            # or "s3://BUCKET/PREFIX": written through, coded (TOFEC)
//! object_backend_endpoint = "http://127.0.0.1:9200"  # (optional) the S3 endpoint
//! etcd = []                  # etcd endpoints ("http://127.0.0.1:2379"): the HA control plane
//! etcd_prefix = "/ecdn/"     # where this cluster's keys live in etcd
//! etcd_lease_s = 3           # a node whose lease lapses this long is unavailable
//!
//! [peer_tls]                 # (optional) mutual TLS on the peer protocol (crate::mtls)
//! ca = "ca.pem"              # the CA of every process's certificate
//! cert = "peer.pem"          # this host's certificate, its IP addresses among its names
//! key = "peer.key"           # (relative paths: from the cluster file's directory)
//!
//! [health]                  # (optional) unavailable beyond missed heartbeats (crate::health)
//! enabled = true            # judge nodes by what their peers and load balancers see
//! cut_quorum = 0.5          # cut off: more than this fraction of its peers cannot reach it
//! slow_ms = 15              # slow: its service time (probe round trip, median over peers)
//! slow_factor = 4           #   above max(slow_ms, slow_factor x the median node's)
//! slow_for_ms = 3000        #   for this long
//! return_after_ms = 2000    # back once well this long, doubled per exit within
//! flap_window_s = 300       #   this window, at most
//! max_return_ms = 60000     #   this long
//! max_out = 0               # nodes out for health at once (0: a third, at least 1)
//! probe_ms = 50             # how often each node probes its peers
//! probe_fanout = 16         # peers each node probes per probe period
//! probe_timeout_ms = 500    # an unanswered probe is a failure after this long
//!
//! [s3]                      # (optional) the object cache's S3 face (crate::s3_face)
//! domains = ["s3.example.com"]
//! [[s3.keys]]
//! access_key = "AKIDEXAMPLE0001"
//! secret_key = "at least sixteen characters"
//! buckets = ["models"]
//! [[s3.buckets]]
//! name = "models"
//!
//! [[node]]
//! id = 0
//! client = "127.0.0.1:8000"  # where clients (or the front load balancer) connect
//! peer = "127.0.0.1:9000"    # the peer listener: nodes and the coordinator only
//! admin = "127.0.0.1:9100"   # (optional) health, stats, metrics, PURGE, the status page
//! weight = 1.0
//! ```
//!
//! Node ids are `0..N` in any order of the file, each once: they are the placement's server
//! indexes. Every error names the field and says what is expected.

use std::net::SocketAddr;
use std::path::Path;

use crate::auth::ClusterKey;
use crate::health::HealthConfig;
use crate::mtls::{PeerTls, PeerTlsFiles};
use crate::s3_face::S3Face;
use ecdn_placement::pieces::Scheme;
use ecdn_trace::units::parse_size;
use serde::{Deserialize, Deserializer};
use thiserror::Error;

/// Why a cluster file was refused.
#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read the cluster file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("cluster file: {0}")]
    Parse(String),
    #[error("cluster file: {0}")]
    Invalid(String),
}

/// One node of the cluster.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NodeEntry {
    pub id: usize,
    /// The client listener.
    pub client: SocketAddr,
    /// The peer listener (node-to-node and coordinator traffic, authenticated).
    pub peer: SocketAddr,
    /// The admin listener (health, stats, metrics, `PURGE`, the status page); `None`: loopback,
    /// any free port, unless the node's `--admin-listen` says otherwise.
    #[serde(default)]
    pub admin: Option<SocketAddr>,
    #[serde(default = "one")]
    pub weight: f64,
}

fn one() -> f64 {
    1.0
}

/// A size written as bytes (`131072`) or with a unit (`"128KiB"`).
fn size<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Size {
        Bytes(u64),
        Text(String),
    }
    match Size::deserialize(d)? {
        Size::Bytes(b) => Ok(b),
        Size::Text(t) => parse_size(&t).map_err(serde::de::Error::custom),
    }
}

/// `resync`, `reinsert`: a number (a fraction of the FIFO), or "off".
fn resync<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Resync {
        Age(f64),
        Text(String),
    }
    match Resync::deserialize(d)? {
        Resync::Age(a) => Ok(Some(a)),
        Resync::Text(t) if t == "off" => Ok(None),
        Resync::Text(t) => Err(serde::de::Error::custom(format!(
            "{t:?}: need a fraction of the FIFO, or \"off\""
        ))),
    }
}

fn default_resync() -> Option<f64> {
    Some(ecdn_placement::pieces::RESYNC_AGE)
}

fn default_reinsert() -> Option<f64> {
    Some(ecdn_placement::pieces::REINSERT_AGE)
}

fn scheme<'de, D: Deserializer<'de>>(d: D) -> Result<Scheme, D::Error> {
    let s = String::deserialize(d)?;
    Scheme::parse(&s).map_err(serde::de::Error::custom)
}

/// The cluster file, parsed and checked.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    #[serde(deserialize_with = "scheme")]
    pub scheme: Scheme,
    #[serde(default = "default_k")]
    pub k: usize,
    #[serde(default = "default_p")]
    pub p: usize,
    #[serde(default = "default_threshold", deserialize_with = "size")]
    pub threshold: u64,
    /// Objects larger than this are cached as fixed-size range slices, each a cache object of
    /// its own with its own bucket (`ecdn_placement::slices`); 0: none are. Default
    /// [`Slicing::DEFAULT`](ecdn_placement::slices::Slicing::DEFAULT), 4 MiB, as the simulator's.
    #[serde(default = "default_slice_size", deserialize_with = "size")]
    pub slice_size: u64,
    /// Whole-object eviction (coded schemes): when a node's piece policy evicts a piece of a
    /// cached object, the writer that caused it has every other node drop the object's other
    /// pieces too, so an object leaves the cluster whole instead of a piece at a time
    /// (`ecdn sim cluster --evict-together`, the same rule). Only an eviction from the node
    /// the map assigns the piece counts. On by default
    /// ([`ecdn_placement::pieces::EVICT_TOGETHER`]); with reinsertion it leaves at most 0.9%
    /// of the cached objects unprotected on four Akamai classes (BENCHMARKS.md, issue 63).
    #[serde(default = "default_evict_together")]
    pub evict_together: bool,
    /// Resync (beyond C2DN, `c2dn` only; other schemes ignore it): a read that writes back a
    /// piece its object lacks also rewrites the pieces it found on the object's assigned
    /// servers when the oldest of them has more than this fraction of its server's FIFO
    /// written after it, so that the object's pieces leave the caches together again (`ecdn
    /// sim cluster --resync`, the same rule; see `ecdn_sim::cluster`'s `resync.rs`). Default
    /// [`ecdn_placement::pieces::RESYNC_AGE`]; `"off"` (`None`): only the lacking pieces are
    /// written. [`ClusterConfig::resync_age`] is what the nodes use.
    #[serde(default = "default_resync", deserialize_with = "resync")]
    pub resync: Option<f64>,
    /// Reinsertion (beyond C2DN, every scheme; `ecdn sim cluster --reinsert`, the same rule):
    /// a hit that finds every piece of its object on its assigned servers rewrites them all
    /// when the oldest has more than this fraction of its server's FIFO written after it (FIFO
    /// with reinsertion, an object's pieces at once). Default
    /// [`ecdn_placement::pieces::REINSERT_AGE`]; `"off"` (`None`): none. The ages come with
    /// the `has?ages` answers a hit's lookup awaits anyway.
    #[serde(default = "default_reinsert", deserialize_with = "resync")]
    pub reinsert: Option<f64>,
    #[serde(default = "default_buckets")]
    pub buckets: usize,
    #[serde(default = "default_sub_chunk", deserialize_with = "size")]
    pub sub_chunk: u64,
    /// Direct reads (beyond C2DN's prototype, which routes every request to its bucket's
    /// server): a node that receives a `GET` for a bucket another node serves reads a hit
    /// itself from the pieces' servers instead of relaying the request, when it holds a piece
    /// of the object or has learned that it is coded, so the object crosses the cluster once.
    /// Misses, partial hits and stale entries are still relayed, and so is every request
    /// while the background repair is on (`repair_rate`: it is ordered by the requests each
    /// serving node counted). On by default; `false`: every such request is relayed.
    #[serde(default = "default_direct_reads")]
    pub direct_reads: bool,
    /// The cluster key: every peer request is signed with it.
    pub key: String,
    /// Keys also accepted when checking signatures and seals, never used to sign: the window
    /// of a key rotation (see `crate::auth`, "Key rotation"). Default: none.
    #[serde(default)]
    pub accepted_keys: Vec<String>,
    /// The key ring of this configuration, made when it was parsed and shared by its clones,
    /// so that everything in a process that signs or checks with it sees a rotation
    /// ([`ClusterConfig::cluster_key`], [`ClusterConfig::reload_keys`]).
    #[serde(skip)]
    ring: Option<ClusterKey>,
    /// The coordinator's address (it listens there; nodes send heartbeats and watch the map).
    pub coordinator: SocketAddr,
    #[serde(default = "default_heartbeat_ms")]
    pub heartbeat_ms: u64,
    #[serde(default = "default_missed")]
    pub missed_heartbeats: u32,
    /// Delayed parity fetch: parity sub-chunks are asked for when, this fraction of the time to
    /// the first data sub-chunk later, fewer than K data sub-chunks have arrived.
    #[serde(default = "default_parity_delay")]
    pub parity_delay: f64,
    /// Periodic parity rebalance, seconds; 0 = only on availability changes (the paper's).
    /// Default [`ecdn_placement::REBALANCE_EVERY_S`], as `ecdn sim cluster`'s.
    #[serde(default = "default_rebalance_every")]
    pub rebalance_every_s: f64,
    /// What parity rebalance balances: `"loads"` (bytes written since the last rebalance,
    /// Algorithm 1 as C2DN §4.2 states it; the default) or `"counts"` (every chunk bucket
    /// weighs 1, the authors' simulator and prototype).
    #[serde(default = "default_weigh")]
    pub weigh: String,
    /// With `weigh = "loads"`: a rebalance also pays back the write imbalance so far, up to
    /// this fraction of a period's mean load per node (0: the paper's inputs; default 1, see
    /// [`ecdn_placement::RebalanceOptions::CLUSTER`]).
    #[serde(default = "default_carry")]
    pub carry: f64,
    /// Periodic rebalances move nothing while the write imbalance so far is at most 1 + this
    /// ([`ecdn_placement::RebalanceOptions::hold_ppm`]; default
    /// [`ecdn_placement::rebalance::HOLD_PPM`], 0.02; 0 rebalances every period).
    #[serde(default = "default_hold")]
    pub hold: f64,
    /// Background repair (beyond C2DN, `c2dn` only): bytes per second each node may write to
    /// rebuild the lost pieces of the objects it serves; 0 = off. See `ecdn_sim::cluster::repair`,
    /// the same rules in the simulator.
    #[serde(default, deserialize_with = "size")]
    pub repair_rate: u64,
    /// Seconds between a node's repair rounds; 0 = rounds only when asked (`POST
    /// /_ecdn/repair` on its admin listener, as the cluster demo's driver does).
    #[serde(default = "default_repair_every")]
    pub repair_every_s: f64,
    /// Only objects requested at least this many times (at their serving node) are repaired.
    #[serde(default = "default_repair_min_requests")]
    pub repair_min_requests: u32,
    /// Only objects whose oldest piece has less than this fraction of its server's FIFO
    /// written after it (a piece is evicted at 1) are repaired.
    #[serde(default = "default_repair_max_age")]
    pub repair_max_age: f64,
    /// Objects a round looks at: the most requested ones the node serves.
    #[serde(default = "default_repair_scan")]
    pub repair_scan: usize,
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// How long a node reuses an EC-Cache object's record before asking the directory again
    /// (`ecdn_objects::records`); 0: every read asks.
    #[serde(default = "default_record_ttl")]
    pub object_record_ttl_ms: u64,
    /// The default code of an EC-Cache object written without `k`/`r`.
    #[serde(default)]
    pub object_scheme: ObjectScheme,
    /// The objects' memory overhead budget beyond one copy, a fraction of their size (§6.1).
    #[serde(default = "default_object_budget")]
    pub object_budget: f64,
    /// How often the coordinator re-spends the budget from the reads nodes report; 0 = never.
    #[serde(default)]
    pub object_budget_every_s: f64,
    /// The store that holds the objects' originals: a read with fewer than `k` splits
    /// readable fetches `PREFIX/<name>` from it. `http://HOST:PORT[/PREFIX]`: a store the
    /// operator fills, only read; `s3://BUCKET[/PREFIX]`: an S3-compatible store behind the
    /// backend tier (TOFEC), which every `PUT` also writes through and every `DELETE` removes
    /// from.
    #[serde(default)]
    pub object_backend: Option<String>,
    /// The endpoint of an `s3://` `object_backend` (`http://HOST:PORT` or `https://…`);
    /// without it, `AWS_ENDPOINT_URL`, else AWS's own. Region and credentials come from the
    /// AWS environment variables.
    #[serde(default)]
    pub object_backend_endpoint: Option<String>,
    /// etcd endpoints: with them nodes register under leases and watch the map in etcd, and
    /// coordinators elect a leader there (`coordinator::etcd`); without them the embedded
    /// coordinator at `coordinator` is the control plane.
    #[serde(default)]
    pub etcd: Vec<String>,
    /// The key prefix of this cluster in etcd (several clusters may share one etcd).
    #[serde(default = "default_etcd_prefix")]
    pub etcd_prefix: String,
    /// TTL of the nodes' and the leader's etcd leases, seconds.
    #[serde(default = "default_etcd_lease_s")]
    pub etcd_lease_s: u64,
    /// Mutual TLS on the peer protocol: where this host's files are (`None`: plain TCP).
    #[serde(default)]
    pub peer_tls: Option<PeerTlsFiles>,
    /// Those files, loaded when the configuration was parsed (shared by its clones).
    #[serde(skip)]
    tls: Option<PeerTls>,
    /// When a node is unavailable beyond missed heartbeats ([`crate::health`]).
    #[serde(default)]
    pub health: HealthConfig,
    /// The S3 face of the object cache ([`crate::s3_face`]); `None`: no S3 face.
    #[serde(default)]
    pub s3: Option<S3Face>,
    #[serde(rename = "node", default)]
    pub nodes: Vec<NodeEntry>,
}

fn default_direct_reads() -> bool {
    true
}
fn default_k() -> usize {
    3
}
fn default_p() -> usize {
    1
}
fn default_threshold() -> u64 {
    128 << 10
}
fn default_buckets() -> usize {
    100
}
fn default_sub_chunk() -> u64 {
    32 << 10
}
fn default_etcd_prefix() -> String {
    "/ecdn/".into()
}
fn default_etcd_lease_s() -> u64 {
    3
}
fn default_heartbeat_ms() -> u64 {
    500
}
fn default_missed() -> u32 {
    3
}
fn default_parity_delay() -> f64 {
    0.2
}
fn default_slice_size() -> u64 {
    ecdn_placement::slices::Slicing::DEFAULT.size()
}
fn default_hold() -> f64 {
    f64::from(ecdn_placement::rebalance::HOLD_PPM) / 1e6
}

fn default_evict_together() -> bool {
    ecdn_placement::pieces::EVICT_TOGETHER
}
fn default_rebalance_every() -> f64 {
    ecdn_placement::REBALANCE_EVERY_S
}
fn default_weigh() -> String {
    "loads".into()
}
fn default_carry() -> f64 {
    f64::from(ecdn_placement::RebalanceOptions::CLUSTER.carry_ppm) / 1e6
}
fn default_repair_every() -> f64 {
    60.0
}
fn default_repair_min_requests() -> u32 {
    2
}
fn default_repair_max_age() -> f64 {
    0.5
}
fn default_repair_scan() -> usize {
    1000
}
fn default_seed() -> u64 {
    1
}
fn default_record_ttl() -> u64 {
    1000
}
/// Where an `object_backend` is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackendUrl {
    /// `http://HOST:PORT[/PREFIX]`: the address to connect to (and the `Host`), and the path
    /// prefix without its slashes.
    Http { authority: String, prefix: String },
    /// `s3://BUCKET[/PREFIX]`, as written (the backend tier checks the bucket's name).
    S3(String),
}

/// Parses `object_backend`.
pub fn parse_backend(url: &str) -> Result<BackendUrl, String> {
    let bad = || {
        format!(
            "object_backend {url:?}: expected http://HOST:PORT[/PREFIX] or s3://BUCKET[/PREFIX]"
        )
    };
    if let Some(rest) = url.strip_prefix("s3://") {
        let bucket = rest.split('/').next().unwrap_or("");
        return match bucket.is_empty() {
            true => Err(bad()),
            false => Ok(BackendUrl::S3(url.to_string())),
        };
    }
    let rest = url.strip_prefix("http://").ok_or_else(bad)?;
    let (authority, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    match authority.split_once(':') {
        Some((host, port)) if !host.is_empty() && !port.is_empty() => Ok(BackendUrl::Http {
            authority: authority.to_string(),
            prefix: prefix.trim_matches('/').to_string(),
        }),
        _ => Err(bad()),
    }
}

fn default_object_budget() -> f64 {
    0.15
}

/// How EC-Cache objects are coded by default (issue 12's `--scheme` switch, cluster-wide).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ObjectScheme {
    /// `k` = 10, `r` = 1 from 1 MiB on (two copies below); the budget adds parities.
    #[default]
    EcCache,
    /// One copy of every object; the budget adds replicas.
    SelectiveReplication,
}

/// The shortest cluster key accepted, in bytes.
pub const MIN_KEY_LEN: usize = 16;

/// Replaces the file at `path` with `bytes`, atomically: written to a temporary file beside it,
/// synced, renamed over it, and the directory synced, so a crash at any point leaves the old
/// file or the new one, whole. For the cluster file and the coordinator's state file.
pub fn replace_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("the path has no file name"))?;
    let mut tmp_name = name.to_os_string();
    tmp_name.push(".tmp");
    let tmp = dir.join(tmp_name);
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(dir)?.sync_all()
}

impl ClusterConfig {
    /// How the cluster cuts large objects into slices (`slice_size`, checked at load).
    pub fn slicing(&self) -> ecdn_placement::slices::Slicing {
        ecdn_placement::slices::Slicing::new(self.slice_size)
            .unwrap_or(ecdn_placement::slices::Slicing::OFF)
    }

    pub fn load(path: &Path) -> Result<ClusterConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse_in(&text, path.parent())
    }

    /// Parses and checks a cluster file's text; the nodes come back sorted by id. The files of
    /// `[peer_tls]` are read now, relative paths from the working directory.
    pub fn parse(text: &str) -> Result<ClusterConfig, ConfigError> {
        Self::parse_in(text, None)
    }

    /// [`ClusterConfig::parse`], relative paths taken from `dir` (the file's directory).
    fn parse_in(text: &str, dir: Option<&Path>) -> Result<ClusterConfig, ConfigError> {
        let mut cfg: ClusterConfig =
            toml::from_str(text).map_err(|e| ConfigError::Parse(e.to_string()))?;
        cfg.nodes.sort_by_key(|n| n.id);
        cfg.check()?;
        cfg.ring = Some(cfg.new_ring());
        if let (Some(files), Some(dir)) = (&cfg.peer_tls, dir) {
            cfg.peer_tls = Some(files.relative_to(dir));
        }
        if let Some(files) = &cfg.peer_tls {
            cfg.tls = Some(files.load().map_err(ConfigError::Invalid)?);
        }
        Ok(cfg)
    }

    /// The peer protocol's mutual TLS, when the file has `[peer_tls]`.
    pub fn peer_tls(&self) -> Option<&PeerTls> {
        self.tls.as_ref()
    }

    fn new_ring(&self) -> ClusterKey {
        let accepted: Vec<&[u8]> = self.accepted_keys.iter().map(|k| k.as_bytes()).collect();
        ClusterKey::with_accepted(self.key.as_bytes(), &accepted)
    }

    /// The cluster key: `key` signs, it and `accepted_keys` are accepted. Every call on this
    /// configuration and its clones returns the same ring, which
    /// [`ClusterConfig::reload_keys`] changes for all of them.
    pub fn cluster_key(&self) -> ClusterKey {
        self.ring.clone().unwrap_or_else(|| self.new_ring())
    }

    /// A copy of this configuration with a key ring of its own (the same keys), as another
    /// process reading the same file would have: a rotation of one does not reach the other.
    pub fn with_own_keys(&self) -> ClusterConfig {
        ClusterConfig {
            ring: Some(self.new_ring()),
            ..self.clone()
        }
    }

    /// Takes `newer`'s keys (the cluster file read again): this configuration's ring, shared
    /// by everything made from it, signs with `newer.key` and accepts `newer.accepted_keys`
    /// from now on. Returns how many keys are accepted.
    pub fn reload_keys(&self, newer: &ClusterConfig) -> usize {
        let ring = self.cluster_key();
        let accepted: Vec<&[u8]> = newer.accepted_keys.iter().map(|k| k.as_bytes()).collect();
        ring.rotate(newer.key.as_bytes(), &accepted);
        ring.accepted()
    }

    /// Takes `newer`'s `[peer_tls]` files (the cluster file read again): every listener and
    /// client made from this configuration uses them for its next connection. `Ok(false)`
    /// when neither has the section; an error when one has it and the other not (switching
    /// the peer protocol to or from TLS takes a restart of every process).
    pub fn reload_peer_tls(&self, newer: &ClusterConfig) -> Result<bool, String> {
        match (&self.tls, &newer.tls) {
            (Some(mine), Some(theirs)) => {
                mine.replace(theirs);
                Ok(true)
            }
            (None, None) => Ok(false),
            _ => Err("[peer_tls] added or removed: that takes a restart".into()),
        }
    }

    fn check(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(m));
        if self.nodes.is_empty() {
            return bad("no [[node]] entries".into());
        }
        for (i, n) in self.nodes.iter().enumerate() {
            if n.id != i {
                return bad(format!(
                    "node ids must be 0..{} each once; found {} where {i} was expected",
                    self.nodes.len(),
                    n.id
                ));
            }
            if !(n.weight.is_finite() && n.weight > 0.0) {
                return bad(format!("node {}: weight must be positive", n.id));
            }
        }
        if self.k == 0 || self.k + self.p > 256 {
            return bad(format!(
                "k = {}, p = {}: need k >= 1 and k + p <= 256",
                self.k, self.p
            ));
        }
        let needed = self.scheme.servers_needed(self.k, self.p);
        if needed > self.nodes.len() {
            return bad(format!(
                "scheme {} with k = {}, p = {} needs {needed} nodes; the file lists {}",
                self.scheme.name(),
                self.k,
                self.p,
                self.nodes.len()
            ));
        }
        if self.buckets == 0 || self.buckets > ecdn_placement::MAX_BUCKETS {
            return bad(format!(
                "buckets = {}: need 1 ..= {}",
                self.buckets,
                ecdn_placement::MAX_BUCKETS
            ));
        }
        if let Err(e) = ecdn_placement::slices::Slicing::new(self.slice_size) {
            return bad(format!("slice_size: {e}"));
        }
        if self.sub_chunk == 0 || self.sub_chunk > 64 << 20 {
            return bad(format!(
                "sub_chunk = {}: need 1 byte ..= 64 MiB",
                self.sub_chunk
            ));
        }
        if self.key.len() < MIN_KEY_LEN {
            return bad(format!(
                "key is {} bytes; a cluster key needs at least {MIN_KEY_LEN}",
                self.key.len()
            ));
        }
        if let Some((i, k)) = self
            .accepted_keys
            .iter()
            .enumerate()
            .find(|(_, k)| k.len() < MIN_KEY_LEN)
        {
            return bad(format!(
                "accepted_keys[{i}] is {} bytes; a cluster key needs at least {MIN_KEY_LEN}",
                k.len()
            ));
        }
        if self.etcd_lease_s == 0 || self.etcd_lease_s > 3600 {
            return bad("etcd_lease_s must be between 1 and 3600".into());
        }
        if let Some(e) = self
            .etcd
            .iter()
            .find(|e| !(e.starts_with("http://") || e.starts_with("https://")) || e.len() < 10)
        {
            return bad(format!("etcd endpoint {e:?}: expected http://HOST:PORT"));
        }
        if !self.etcd_prefix.starts_with('/') || !self.etcd_prefix.ends_with('/') {
            return bad(format!(
                "etcd_prefix {:?} must start and end with '/'",
                self.etcd_prefix
            ));
        }
        if self.heartbeat_ms == 0 || self.missed_heartbeats == 0 {
            return bad("heartbeat_ms and missed_heartbeats must be at least 1".into());
        }
        self.health.validate().map_err(ConfigError::Invalid)?;
        if let Some(s3) = &self.s3 {
            s3.validate().map_err(ConfigError::Invalid)?;
        }
        if !(self.parity_delay.is_finite() && self.parity_delay >= 0.0) {
            return bad(format!(
                "parity_delay = {}: need a fraction >= 0",
                self.parity_delay
            ));
        }
        if !(self.rebalance_every_s.is_finite() && self.rebalance_every_s >= 0.0) {
            return bad("rebalance_every_s must be >= 0 (0 = off)".into());
        }
        if let Err(e) = self.weigh.parse::<ecdn_placement::Weigh>() {
            return bad(format!("weigh: {e}"));
        }
        for (what, age) in [("resync", self.resync), ("reinsert", self.reinsert)] {
            if let Some(r) = age {
                if !(r.is_finite() && r >= 0.0) {
                    return bad(format!(
                        "{what} = {r}: need a fraction of the FIFO, 0 or above"
                    ));
                }
            }
        }
        if !(0.0..=1.0).contains(&self.hold) {
            return bad(format!("hold = {}: need a fraction in [0, 1]", self.hold));
        }
        if !(0.0..=1.0).contains(&self.carry) {
            return bad(format!("carry = {}: need a fraction in [0, 1]", self.carry));
        }
        if !(self.repair_every_s.is_finite() && self.repair_every_s >= 0.0) {
            return bad("repair_every_s must be >= 0 (0 = rounds only when asked)".into());
        }
        if !(self.repair_max_age.is_finite() && self.repair_max_age > 0.0) {
            return bad(format!(
                "repair_max_age = {}: need a fraction of the FIFO above 0",
                self.repair_max_age
            ));
        }
        if self.repair_rate > 0 && self.scheme != Scheme::C2dn {
            return bad(format!(
                "repair_rate needs scheme = \"c2dn\" (it is {:?})",
                self.scheme.name()
            ));
        }
        if !(self.object_budget.is_finite() && self.object_budget >= 0.0) {
            return bad("object_budget must be a fraction >= 0".into());
        }
        if !(self.object_budget_every_s.is_finite() && self.object_budget_every_s >= 0.0) {
            return bad("object_budget_every_s must be >= 0 (0 = off)".into());
        }
        let s3 = match &self.object_backend {
            Some(b) => matches!(
                parse_backend(b).map_err(ConfigError::Invalid)?,
                BackendUrl::S3(_)
            ),
            None => false,
        };
        if let Some(e) = &self.object_backend_endpoint {
            if !s3 {
                return bad("object_backend_endpoint is for an s3:// object_backend".into());
            }
            if !(e.starts_with("http://") || e.starts_with("https://")) {
                return bad(format!(
                    "object_backend_endpoint {e:?}: expected http://HOST:PORT or https://..."
                ));
            }
        }
        Ok(())
    }

    pub fn weights(&self) -> Vec<f64> {
        self.nodes.iter().map(|n| n.weight).collect()
    }

    /// Resync's age when it is on and the scheme is `c2dn` (the only one that resyncs, as in
    /// the simulator).
    pub fn resync_age(&self) -> Option<f64> {
        self.resync.filter(|_| self.scheme == Scheme::C2dn)
    }

    /// How parity rebalance weighs, carries and holds (`weigh`, `carry`, `hold`; checked at
    /// load), as `ecdn sim cluster --weigh --carry --hold` builds them.
    pub fn rebalance_options(&self) -> ecdn_placement::RebalanceOptions {
        ecdn_placement::RebalanceOptions {
            weigh: self.weigh.parse().unwrap_or_default(),
            carry_ppm: (self.carry.clamp(0.0, 1.0) * 1e6).round() as u32,
            hold_ppm: (self.hold.clamp(0.0, 1.0) * 1e6).round() as u32,
            ..ecdn_placement::RebalanceOptions::CLUSTER
        }
    }

    /// The (K, P) the placement is built with (replication schemes use the ring walk only).
    pub fn placement_code(&self) -> (usize, usize) {
        self.scheme.placement_code(self.k, self.p)
    }

    /// The scheme's name as `ecdn sim cluster` prints it (`c2dn-n5k3` for K = 3, P = 2).
    pub fn scheme_name(&self) -> String {
        self.scheme.name_with_code(self.k, self.p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
scheme = "c2dn"
key = "0123456789abcdef-secret"
coordinator = "127.0.0.1:7400"
threshold = "128KiB"

[[node]]
id = 1
client = "127.0.0.1:8001"
peer = "127.0.0.1:9001"

[[node]]
id = 0
client = "127.0.0.1:8000"
peer = "127.0.0.1:9000"
weight = 2

[[node]]
id = 2
client = "127.0.0.1:8002"
peer = "127.0.0.1:9002"

[[node]]
id = 3
client = "127.0.0.1:8003"
peer = "127.0.0.1:9003"
"#;

    /// `accepted_keys` are checked like `key`; the ring is shared by clones, so a reload
    /// reaches everything made from one configuration, and not a copy with its own keys.
    #[test]
    fn accepted_keys_and_their_reload() {
        use crate::auth::Recipient;
        let with = |accepted: &str| {
            let text = FILE.replace(
                "threshold = \"128KiB\"",
                &format!("threshold = \"128KiB\"\naccepted_keys = [{accepted}]"),
            );
            ClusterConfig::parse(&text)
        };
        let e = with("\"short\"").unwrap_err().to_string();
        assert!(e.contains("accepted_keys[0] is 5 bytes"), "{e}");
        let old = ClusterConfig::parse(FILE).unwrap();
        assert!(old.accepted_keys.is_empty());
        let clone = old.clone();
        let other_process = old.with_own_keys();
        let to = Recipient {
            addr: "127.0.0.1:9000".parse().unwrap(),
            epoch: 0,
        };
        let signed_new = crate::auth::ClusterKey::new(b"the next key of this cluster!!")
            .sign("GET", "/x", to, b"")
            .header_map();
        let now = crate::auth::unix_now_ms();
        assert!(clone
            .cluster_key()
            .verify("GET", "/x", &signed_new, now)
            .is_err());
        // Step 1 of a rotation, reloaded in this process: the next key is accepted here, by the
        // clone too, and not by the other process until it reloads.
        let step1 = with("\"the next key of this cluster!!\"").unwrap();
        assert_eq!(old.reload_keys(&step1), 2);
        assert!(clone
            .cluster_key()
            .verify("GET", "/x", &signed_new, now)
            .is_ok());
        assert!(other_process
            .cluster_key()
            .verify("GET", "/x", &signed_new, now)
            .is_err());
    }

    #[test]
    fn parses_with_defaults() {
        let c = ClusterConfig::parse(FILE).unwrap();
        assert_eq!(c.scheme, Scheme::C2dn);
        assert_eq!((c.k, c.p, c.buckets), (3, 1, 100));
        assert_eq!(c.threshold, 128 << 10);
        assert_eq!(c.sub_chunk, 32 << 10);
        assert_eq!(c.nodes.len(), 4);
        assert_eq!(c.nodes[0].weight, 2.0);
        assert_eq!(c.nodes[1].peer.port(), 9001);
        assert_eq!(c.rebalance_every_s, 3600.0);
        assert_eq!(
            c.rebalance_options(),
            ecdn_placement::RebalanceOptions::CLUSTER
        );
        assert_eq!(c.scheme_name(), "c2dn");
    }

    #[test]
    fn backend_urls() {
        let http = |a: &str, p: &str| BackendUrl::Http {
            authority: a.into(),
            prefix: p.into(),
        };
        assert_eq!(
            parse_backend("http://127.0.0.1:9000/bucket/").unwrap(),
            http("127.0.0.1:9000", "bucket")
        );
        assert_eq!(
            parse_backend("http://store:80").unwrap(),
            http("store:80", "")
        );
        assert_eq!(
            parse_backend("s3://originals/objects").unwrap(),
            BackendUrl::S3("s3://originals/objects".into())
        );
        for bad in [
            "s3://",
            "s3:///x",
            "https://a:1",
            "http://",
            "http://host/x",
            "ftp://a:1",
            "http://:9",
            "http://h:",
        ] {
            assert!(parse_backend(bad).is_err(), "{bad}");
        }
    }

    /// Resync: on at its default age unless the file says "off" or another age; only `c2dn`
    /// uses it.
    #[test]
    fn resync_is_on_by_default_for_c2dn_and_can_be_turned_off() {
        let age = ecdn_placement::pieces::RESYNC_AGE;
        let parse = |text: &str| ClusterConfig::parse(text).unwrap();
        assert_eq!(parse(FILE).resync_age(), Some(age));
        assert_eq!(
            parse(&format!("resync = \"off\"\n{FILE}")).resync_age(),
            None
        );
        assert_eq!(
            parse(&format!("resync = 0.8\n{FILE}")).resync_age(),
            Some(0.8)
        );
        assert_eq!(
            parse(&format!("resync = 1\n{FILE}")).resync_age(),
            Some(1.0)
        );
        let rep2 = parse(&FILE.replace("scheme = \"c2dn\"", "scheme = \"rep2\""));
        assert_eq!(rep2.resync, Some(age));
        assert_eq!(rep2.resync_age(), None);
        // Reinsertion and whole-object eviction: on unless set off.
        let on = parse(FILE);
        assert_eq!(on.reinsert, Some(ecdn_placement::pieces::REINSERT_AGE));
        assert!(on.evict_together);
        assert_eq!(
            parse(&format!("reinsert = 0.8\n{FILE}")).reinsert,
            Some(0.8)
        );
        let off = parse(&format!(
            "reinsert = \"off\"\nevict_together = false\n{FILE}"
        ));
        assert_eq!(off.reinsert, None);
        assert!(!off.evict_together);
    }

    #[test]
    fn refuses_bad_files_with_a_reason() {
        let cases = [
            (FILE.replace("id = 2", "id = 7"), "node ids"),
            (
                FILE.replace("scheme = \"c2dn\"", "scheme = \"raid5\""),
                "unknown scheme",
            ),
            (
                FILE.replace("0123456789abcdef-secret", "short"),
                "at least 16",
            ),
            (format!("k = 4\n{FILE}"), "needs 5 nodes"),
            (
                FILE.replace("threshold = \"128KiB\"", "threshold = \"lots\""),
                "size",
            ),
            (format!("bogus = 1\n{FILE}"), "unknown field"),
            (FILE.replace("weight = 2", "weight = -1"), "weight"),
            (format!("sub_chunk = 0\n{FILE}"), "sub_chunk"),
            (format!("weigh = \"bytes\"\n{FILE}"), "weigh"),
            (format!("carry = 1.5\n{FILE}"), "carry"),
            (format!("hold = 2\n{FILE}"), "hold"),
            (format!("hold = -0.5\n{FILE}"), "hold"),
            (format!("resync = -0.5\n{FILE}"), "resync"),
            (format!("resync = \"never\"\n{FILE}"), "resync"),
            (format!("reinsert = -1\n{FILE}"), "reinsert"),
            (format!("reinsert = \"later\"\n{FILE}"), "reinsert"),
            (format!("carry = -0.1\n{FILE}"), "carry"),
            ("scheme = \"c2dn\"".to_string(), "missing field"),
            (format!("object_budget = -0.1\n{FILE}"), "object_budget"),
            (
                format!("object_budget_every_s = -1\n{FILE}"),
                "object_budget_every_s",
            ),
            (
                format!("object_scheme = \"raid\"\n{FILE}"),
                "unknown variant",
            ),
            (
                format!("object_backend = \"https://s3:443\"\n{FILE}"),
                "object_backend",
            ),
            (
                format!("object_backend = \"http://:9\"\n{FILE}"),
                "object_backend",
            ),
            (
                format!("object_backend_endpoint = \"http://127.0.0.1:9\"\n{FILE}"),
                "is for an s3:// object_backend",
            ),
            (
                format!(
                    "object_backend = \"s3://b-1/p\"\nobject_backend_endpoint = \"127.0.0.1:9\"\n{FILE}"
                ),
                "object_backend_endpoint",
            ),
        ];
        for (text, want) in cases {
            let e = ClusterConfig::parse(&text).unwrap_err().to_string();
            assert!(e.contains(want), "{want:?} not in {e:?}");
        }
    }
}
