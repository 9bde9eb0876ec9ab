//! [`SplitClient`]: a client that reads (and writes) an object's splits on their servers
//! itself, as EC-Cache's client does (§4.2, §4.3), instead of through the node it calls.
//!
//! A read: the object's record and its split servers' addresses from any node (`?locate`,
//! cached for [`SplitClient::with_record_ttl`]), then late binding over `k + Δ` splits read
//! straight from their servers (`late_binding.rs`), every byte checked against the record's
//! window digests. Δ is fixed, or (`Delta::Auto`) chosen per read from this client's own
//! backlog by the nodes' rule (`ecdn_objects::backlog`): the bytes it has asked of split servers
//! and not yet received, in splits of this object per split server. A read asks one more split
//! for each split server in its plan that this client's reads found slow (`stragglers.rs`).
//!
//! A read that cannot be done this way (a record written without digests, fewer than `k`
//! splits readable from here) is done through a node (`GET /_objects/<name>`, which can also
//! ask the directory again and the backend store): [`SplitClient::get`] counts those in
//! [`SplitClient::via_node_reads`].

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use ecdn_codec::CodecCache;
use ecdn_objects::backlog::{Backlog, DeltaRule};
use ecdn_objects::meta::ObjectName;
use http_body_util::Full;
use hyper::{Method, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::late_binding::{self, ObjectRead};
use crate::located::{located, Located, LocatedCache, ServerView};
use crate::stragglers::Stragglers;
use crate::{ClientError, ObjectClient};

/// Δ of a client's reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delta {
    Fixed(usize),
    /// From the client's backlog, per read (TOFEC's thresholds, `ecdn_objects::backlog`).
    Auto,
}

/// A client that reads the splits itself (see the module documentation).
pub struct SplitClient {
    nodes: Vec<SocketAddr>,
    http: Client<HttpConnector, Full<Bytes>>,
    located: LocatedCache,
    codecs: CodecCache,
    delta: Delta,
    backlog: Mutex<Backlog>,
    outstanding: Arc<AtomicU64>,
    timeout: Duration,
    /// Reads begun (which node to ask next, and each read's seed).
    reads: AtomicU64,
    via_node: AtomicUsize,
    /// Per split server (cluster id): split reads asked, windows used, reads failed.
    servers: Mutex<std::collections::BTreeMap<usize, ServerUse>>,
    /// The split servers found slow, for one more split in reads that ask them.
    stragglers: Mutex<Stragglers>,
    /// The split servers' addresses and availability, for the node asked for a record.
    servers_seen: ServerView,
}

/// What a client's reads asked of one split server, and took from it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ServerUse {
    /// Split reads sent to it.
    pub asked: u64,
    /// Windows decoded with its split.
    pub used_windows: u64,
    /// Split reads to it that failed.
    pub failed: u64,
}

impl SplitClient {
    /// A client that learns records from `nodes` (any of a cluster's nodes' client addresses;
    /// asked in turn), Δ = 1, records kept 2 s, a minute per read.
    pub fn new(nodes: Vec<SocketAddr>) -> SplitClient {
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        SplitClient {
            nodes,
            http: Client::builder(TokioExecutor::new()).build(http),
            located: LocatedCache::new(Duration::from_secs(2)),
            codecs: CodecCache::new(),
            delta: Delta::Fixed(1),
            backlog: Mutex::new(Backlog::default()),
            outstanding: Arc::new(AtomicU64::new(0)),
            timeout: Duration::from_secs(60),
            reads: AtomicU64::new(0),
            via_node: AtomicUsize::new(0),
            servers: Mutex::new(Default::default()),
            stragglers: Mutex::new(Stragglers::default()),
            servers_seen: ServerView::default(),
        }
    }

    pub fn with_delta(mut self, delta: Delta) -> SplitClient {
        self.delta = delta;
        self
    }

    pub fn with_timeout(mut self, timeout: Duration) -> SplitClient {
        self.timeout = timeout;
        self
    }

    /// How long a located record is used before a node is asked again.
    pub fn with_record_ttl(mut self, ttl: Duration) -> SplitClient {
        self.located = LocatedCache::new(ttl);
        self
    }

    /// Reads done through a node instead (see the module documentation).
    pub fn via_node_reads(&self) -> usize {
        self.via_node.load(Ordering::Relaxed)
    }

    /// Per split server (its cluster id): what this client's reads from the splits asked of it
    /// and used (late binding leaves a slow server's splits: asked, seldom used).
    pub fn server_use(&self) -> Vec<(usize, ServerUse)> {
        let s = self.servers.lock().unwrap_or_else(|p| p.into_inner());
        s.iter().map(|(&id, &u)| (id, u)).collect()
    }

    /// The split servers this client's reads found slow now (`stragglers.rs`).
    pub fn slow_servers(&self) -> Vec<usize> {
        self.stragglers().slow()
    }

    fn stragglers(&self) -> std::sync::MutexGuard<'_, Stragglers> {
        self.stragglers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Folds a finished read's report into [`SplitClient::server_use`] and the stragglers.
    fn count(&self, meta: &ecdn_objects::meta::ObjectMeta, r: &crate::ReadReport) {
        self.stragglers().observe(meta, r);
        let mut s = self.servers.lock().unwrap_or_else(|p| p.into_inner());
        for &i in &r.asked {
            s.entry(meta.splits[i]).or_default().asked += 1;
        }
        for &(i, _) in &r.failed {
            s.entry(meta.splits[i]).or_default().failed += 1;
        }
        for &i in r.used.iter().flatten() {
            s.entry(meta.splits[i]).or_default().used_windows += 1;
        }
    }

    /// Bytes asked of split servers and not yet received, over this client's reads.
    pub fn backlog_bytes(&self) -> u64 {
        self.outstanding.load(Ordering::Relaxed)
    }

    fn node(&self, n: u64) -> Result<SocketAddr, ClientError> {
        if self.nodes.is_empty() {
            return Err(ClientError::BadName("a split client needs a node".into()));
        }
        Ok(self.nodes[(n % self.nodes.len() as u64) as usize])
    }

    /// The object's record and split servers' addresses: cached, or from a node (the next
    /// one if a node cannot be reached; nodes out of the map or found slow last, `ServerView`).
    pub async fn locate(&self, name: &str) -> Result<Arc<Located>, ClientError> {
        let parsed = ObjectName::parse(name).map_err(|e| ClientError::BadName(e.to_string()))?;
        if let Some(l) = self.located.get(&parsed) {
            return Ok(l);
        }
        let first = self.reads.load(Ordering::Relaxed);
        let turn = (0..self.nodes.len().max(1) as u64)
            .map(|n| self.node(first + n))
            .collect::<Result<Vec<_>, _>>()?;
        let mut last = None;
        for addr in self.servers_seen.order(turn, &self.slow_servers()) {
            match self.ask_locate(addr, &parsed).await {
                Ok(l) => {
                    self.servers_seen.learn(&l);
                    self.located.insert(parsed, l.clone());
                    return Ok(l);
                }
                Err(e @ ClientError::Unreachable { .. }) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.expect("at least one node was asked"))
    }

    async fn ask_locate(
        &self,
        addr: SocketAddr,
        name: &ObjectName,
    ) -> Result<Arc<Located>, ClientError> {
        let (_, body) = self
            .call(addr, Method::GET, name, "?locate", Bytes::new())
            .await?;
        located(&body)
    }

    /// One call of the object API on the node at `addr`.
    pub(crate) async fn call(
        &self,
        addr: SocketAddr,
        method: Method,
        name: &ObjectName,
        query: &str,
        body: Bytes,
    ) -> Result<(StatusCode, Bytes), ClientError> {
        crate::call(&self.http, addr, self.timeout, method, name, query, body).await
    }

    /// The node to ask next (in turn).
    pub(crate) fn next_node(&self) -> Result<SocketAddr, ClientError> {
        self.node(self.reads.fetch_add(1, Ordering::Relaxed))
    }

    pub(crate) fn http(&self) -> Client<HttpConnector, Full<Bytes>> {
        self.http.clone()
    }

    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The codec of (`k`, `p`).
    pub(crate) fn codec(
        &self,
        k: usize,
        p: usize,
    ) -> Result<Arc<dyn ecdn_codec::Codec>, ClientError> {
        self.codecs
            .get(k, p)
            .map_err(|e| ClientError::BadAnswer(format!("the record's code: {e}")))
    }

    /// Δ for a read of `at`'s object now.
    fn delta_for(&self, at: &Located) -> usize {
        match self.delta {
            Delta::Fixed(d) => d,
            Delta::Auto => {
                let split = at.meta.split_len().max(1) as f64;
                let servers = at.meta.splits.len().max(1) as f64;
                let queued = self.backlog_bytes() as f64 / servers / split;
                let mut b = self.backlog.lock().unwrap_or_else(|p| p.into_inner());
                b.arrival(&DeltaRule::default(), queued)
            }
        }
    }

    /// Starts reading the object from its splits' servers: its bytes come window by window
    /// ([`ObjectRead::next`]). Fails at once if it cannot be read this way (no digests in its
    /// record, fewer than `k` splits with an address).
    pub async fn read(&self, name: &str) -> Result<ObjectRead, ClientError> {
        let at = self.locate(name).await?;
        if !at.meta.has_digests() {
            return Err(ClientError::NoDigests(name.to_string()));
        }
        let n = self.reads.fetch_add(1, Ordering::Relaxed);
        let codec = self.codec(at.meta.k, at.meta.splits.len() - at.meta.k)?;
        let seed = n.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ at.meta.version ^ now_nanos();
        let slow = self.stragglers().slow();
        late_binding::start(
            self.http.clone(),
            codec,
            &at,
            self.delta_for(&at),
            |id| slow.contains(&id),
            self.outstanding.clone(),
            seed,
        )
    }

    /// The whole object, read from its splits' servers; through a node when that cannot be
    /// done (see the module documentation).
    pub async fn get(&self, name: &str) -> Result<Bytes, ClientError> {
        let direct = async {
            let mut read = self.read(name).await?;
            let got = read.collect().await;
            self.count(&read.meta, &read.report());
            got
        };
        let e = match tokio::time::timeout(self.timeout, direct).await {
            Ok(Ok(b)) => return Ok(b),
            Ok(Err(e)) => e,
            Err(_) => ClientError::TooFewSplits(format!(
                "object {name}: not read within {:?}",
                self.timeout
            )),
        };
        match e {
            ClientError::NoDigests(_)
            | ClientError::TooFewSplits(_)
            | ClientError::BadAnswer(_) => {
                // The record may be stale: the node asks the directory again.
                if let Ok(n) = ObjectName::parse(name) {
                    self.located.remove(&n);
                }
                self.via_node.fetch_add(1, Ordering::Relaxed);
                let n = self.reads.fetch_add(1, Ordering::Relaxed);
                ObjectClient::new(self.node(n)?)
                    .with_timeout(self.timeout)
                    .get(name)
                    .await
            }
            e => Err(e),
        }
    }
}

fn now_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
