//! A cluster in one process for the node's tests: the embedded coordinator and N nodes, each
//! with its client and peer listener and its own disk, in front of an in-memory origin.

#![allow(dead_code)] // each test binary uses part of it

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;

use ecdn_cluster::config::ClusterConfig;
use ecdn_cluster::coordinator::{Coordinator, RunningCoordinator};
use ecdn_node::content;
use ecdn_node::node::{ClusterNode, Node, NodeConfig, PeerLink, RunningNode};
use ecdn_node::origin::{in_memory_connector, OriginConfig};
use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper_util::rt::TokioIo;

pub const KEY: &str = "0123456789abcdef0123456789abcdef";
pub const PURGE_TOKEN: &str = "purge-token-of-the-test";
/// Each node's disk cache unless a test says (`TestCluster::start_with_disks`).
pub const DISK_SIZE: u64 = 64 << 20;

/// Free loopback ports (bound, then released).
pub fn free_ports(n: usize) -> Vec<u16> {
    let ls: Vec<_> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    ls.iter().map(|l| l.local_addr().unwrap().port()).collect()
}

/// Every node of `cfg` (disks in `dir`, a FIFO HOC of `hoc_size` bytes, the in-memory origin),
/// started at once; each returns once it has its first map. Or the first error (the nodes that
/// did start are stopped): a port that [`free_ports`] released can be taken by another test
/// before its node binds it, and the caller starts again on new ones.
pub async fn try_start_nodes(
    cfg: &ClusterConfig,
    dir: &std::path::Path,
    hoc_size: u64,
) -> std::io::Result<Vec<RunningNode>> {
    try_start_nodes_with(cfg, dir, hoc_size, OriginConfig::default()).await
}

/// [`try_start_nodes`] with an origin of `origin`'s latency and bandwidth.
pub async fn try_start_nodes_with(
    cfg: &ClusterConfig,
    dir: &std::path::Path,
    hoc_size: u64,
    origin: OriginConfig,
) -> std::io::Result<Vec<RunningNode>> {
    Ok(
        start_nodes_keyed(cfg, dir, hoc_size, DISK_SIZE, origin, PeerLink::default())
            .await?
            .0,
    )
}

/// [`try_start_nodes_with`], each node with a key ring of its own, as a process of its own
/// has ([`ClusterConfig::with_own_keys`]); also returns each node's configuration, whose
/// ring a test rotates as SIGHUP would in that node's process.
pub async fn start_nodes_keyed(
    cfg: &ClusterConfig,
    dir: &std::path::Path,
    hoc_size: u64,
    disk_size: u64,
    origin: OriginConfig,
    link: PeerLink,
) -> std::io::Result<(Vec<RunningNode>, Vec<ClusterConfig>)> {
    let cfgs: Vec<ClusterConfig> = cfg.nodes.iter().map(|_| cfg.with_own_keys()).collect();
    let mut starts = Vec::new();
    for (i, own) in cfgs.iter().enumerate() {
        let node = node_config(own, i, dir, (hoc_size, disk_size), link);
        let listen = cfg.nodes[i].client;
        let origin = origin.clone();
        starts.push(tokio::spawn(async move {
            Node::start_with_connector(listen, node, in_memory_connector(origin)).await
        }));
    }
    let (mut nodes, mut failed) = (Vec::new(), None);
    for s in starts {
        match s.await.unwrap() {
            Ok(n) => nodes.push(n),
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    match failed {
        None => Ok((nodes, cfgs)),
        Some(e) => {
            for n in nodes {
                n.stop().await.unwrap();
            }
            Err(e)
        }
    }
}

/// Node `i`'s settings: cluster file `own` (its key ring), its disk of `disk_size` bytes in
/// `dir`, a FIFO HOC of `hoc_size` bytes, its peer link.
fn node_config(
    own: &ClusterConfig,
    i: usize,
    dir: &std::path::Path,
    (hoc_size, disk_size): (u64, u64),
    link: PeerLink,
) -> NodeConfig {
    NodeConfig {
        origin: "http://origin.test".into(),
        hoc_size,
        hoc_policy: "fifo".into(),
        disk_path: Some(dir.join(format!("node-{i}.disk"))),
        disk_size,
        purge_token: Some(PURGE_TOKEN.into()),
        cluster: Some(ClusterNode {
            cluster: own.clone(),
            id: i,
            link,
        }),
        ..NodeConfig::default()
    }
}

pub struct TestCluster {
    /// The cluster file as the coordinator has it (its key ring is the coordinator's).
    pub cfg: ClusterConfig,
    /// Each node's configuration: its key ring is that node's.
    pub node_cfgs: Vec<ClusterConfig>,
    pub coordinator: RunningCoordinator,
    pub nodes: Vec<Option<RunningNode>>,
    pub dir: tempfile::TempDir,
    /// What the nodes started with (for [`TestCluster::restart`]).
    hoc_size: u64,
    disk_size: u64,
    origin: OriginConfig,
    link: PeerLink,
}

impl TestCluster {
    pub async fn start(n: usize, scheme: &str, k: usize, p: usize) -> TestCluster {
        Self::start_with(n, scheme, k, p, "").await
    }

    /// `extra`: more settings of the cluster file.
    pub async fn start_with(
        n: usize,
        scheme: &str,
        k: usize,
        p: usize,
        extra: &str,
    ) -> TestCluster {
        Self::start_full(n, scheme, k, p, extra, 1, OriginConfig::default()).await
    }

    /// [`TestCluster::start_with`], each node's disk cache of `disk_size` bytes.
    pub async fn start_with_disks(
        n: usize,
        scheme: &str,
        k: usize,
        p: usize,
        extra: &str,
        disk_size: u64,
    ) -> TestCluster {
        let (origin, link) = (OriginConfig::default(), PeerLink::default());
        Self::start_inner(n, scheme, k, p, extra, (1, disk_size), origin, link).await
    }

    /// Nodes whose peer links (and own split reads) are capped at `rate` bytes per second.
    pub async fn start_linked(
        n: usize,
        scheme: &str,
        k: usize,
        p: usize,
        rate: u64,
    ) -> TestCluster {
        let link = PeerLink {
            rate: Some(rate),
            background_load: 0.0,
        };
        let origin = OriginConfig::default();
        Self::start_inner(n, scheme, k, p, "", (1, DISK_SIZE), origin, link).await
    }

    /// Nodes with a FIFO HOC of `hoc_size` bytes and an in-memory origin of `origin`'s latency
    /// and bandwidth.
    pub async fn start_full(
        n: usize,
        scheme: &str,
        k: usize,
        p: usize,
        extra: &str,
        hoc_size: u64,
        origin: OriginConfig,
    ) -> TestCluster {
        let link = PeerLink::default();
        Self::start_inner(n, scheme, k, p, extra, (hoc_size, DISK_SIZE), origin, link).await
    }

    #[allow(clippy::too_many_arguments)]
    async fn start_inner(
        n: usize,
        scheme: &str,
        k: usize,
        p: usize,
        extra: &str,
        (hoc_size, disk_size): (u64, u64),
        origin: OriginConfig,
        link: PeerLink,
    ) -> TestCluster {
        // Every port of the cluster (admin listeners included) comes from one batch; one that
        // another test took meanwhile fails a bind, and the cluster starts again on new ones.
        let mut attempts = 0;
        let (cfg, coordinator, dir, (nodes, node_cfgs)) = loop {
            attempts += 1;
            let ports = free_ports(3 * n + 1);
            // One mechanism at a time: reinsertion and whole-object eviction (on by default)
            // only where a test sets them (the demo's tests run the defaults). Top-level keys,
            // before `extra`, which may open a table.
            let mut pinned = String::new();
            if !extra.contains("reinsert") {
                pinned.push_str("reinsert = \"off\"\n");
            }
            if !extra.contains("evict_together") {
                pinned.push_str("evict_together = false\n");
            }
            let mut text = format!(
                "scheme = \"{scheme}\"\nk = {k}\np = {p}\nkey = \"{KEY}\"\n\
                 coordinator = \"127.0.0.1:{}\"\nheartbeat_ms = 100\nbuckets = 50\n\
                 {pinned}{extra}",
                ports[0]
            );
            for i in 0..n {
                text.push_str(&format!(
                    "[[node]]\nid = {i}\nclient = \"127.0.0.1:{}\"\npeer = \"127.0.0.1:{}\"\n\
                     admin = \"127.0.0.1:{}\"\n",
                    ports[1 + i],
                    ports[1 + n + i],
                    ports[1 + 2 * n + i]
                ));
            }
            let cfg = ClusterConfig::parse(&text).unwrap();
            let coordinator = match Coordinator::start(cfg.clone()).await {
                Ok(c) => c,
                Err(e) if attempts < 3 => {
                    eprintln!("coordinator: {e}; again on other ports");
                    continue;
                }
                Err(e) => panic!("coordinator: {e}"),
            };
            let dir = tempfile::tempdir().unwrap();
            let sizes = (hoc_size, disk_size);
            match start_nodes_keyed(&cfg, dir.path(), sizes.0, sizes.1, origin.clone(), link).await
            {
                Ok(nodes) => break (cfg, coordinator, dir, nodes),
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && attempts < 3 => {
                    eprintln!("nodes: {e}; again on other ports");
                    coordinator.shutdown().await;
                }
                Err(e) => panic!("nodes: {e}"),
            }
        };
        let nodes = nodes.into_iter().map(Some).collect();
        let c = TestCluster {
            cfg,
            node_cfgs,
            coordinator,
            nodes,
            dir,
            hoc_size,
            disk_size,
            origin,
            link,
        };
        c.wait_available(&vec![true; n]).await;
        c
    }

    /// Waits until the coordinator's map says exactly `want` (and every node has that map).
    pub async fn wait_available(&self, want: &[bool]) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let map = self.coordinator.map();
            if map.available == want {
                // Give the nodes' map watchers a moment to take it.
                tokio::time::sleep(Duration::from_millis(300)).await;
                return;
            }
            assert!(
                Instant::now() < deadline,
                "availability {:?}",
                map.available
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn client(&self, i: usize) -> SocketAddr {
        self.cfg.nodes[i].client
    }

    /// Node `i`'s admin listener (it must be running).
    pub fn admin(&self, i: usize) -> SocketAddr {
        self.nodes[i]
            .as_ref()
            .and_then(RunningNode::admin_addr)
            .expect("node i runs, with an admin listener")
    }

    pub fn peer(&self, i: usize) -> SocketAddr {
        self.cfg.nodes[i].peer
    }

    pub async fn stop(&mut self, i: usize) {
        if let Some(n) = self.nodes[i].take() {
            n.stop().await.unwrap();
        }
    }

    /// Starts the stopped node `i` again on its disk, as it started first.
    pub async fn restart(&mut self, i: usize) {
        assert!(self.nodes[i].is_none(), "node {i} runs");
        let node = node_config(
            &self.node_cfgs[i],
            i,
            self.dir.path(),
            (self.hoc_size, self.disk_size),
            self.link,
        );
        let connector = in_memory_connector(self.origin.clone());
        let n = Node::start_with_connector(self.cfg.nodes[i].client, node, connector)
            .await
            .unwrap();
        self.nodes[i] = Some(n);
    }

    pub async fn stop_all(mut self) {
        for i in 0..self.nodes.len() {
            self.stop(i).await;
        }
        self.coordinator.shutdown().await;
        drop(self.dir);
    }
}

/// A counter of the `cluster` section of node `i`'s `/_ecdn/stats` (`a/b` for one inside an
/// object).
pub async fn node_counter(c: &TestCluster, i: usize, name: &str) -> u64 {
    let s = get(c.admin(i), "/_ecdn/stats", &[]).await.unwrap();
    let v: serde_json::Value = serde_json::from_slice(&s.body).unwrap();
    let field = name.split('/').fold(&v["cluster"], |v, f| &v[f]);
    field
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {name} in {v}"))
}

/// Which pieces of the object `key` (a cache key) the node at peer address `peer` holds, by
/// its signed `has` answer: `None` when it holds none.
pub async fn holds(peer: SocketAddr, key: &str) -> Option<Vec<ecdn_cluster::wire::PieceName>> {
    let client =
        ecdn_cluster::peer::PeerClient::new(ecdn_cluster::auth::ClusterKey::new(KEY.as_bytes()));
    holds_by(&client, peer, key).await
}

/// Distinct chunks of the object `key` the nodes `live` hold (by their `has` answers).
pub async fn distinct_chunks(c: &TestCluster, live: &[usize], key: &str) -> usize {
    let mut chunks = Vec::new();
    for &i in live {
        chunks.extend(holds(c.peer(i), key).await.unwrap_or_default());
    }
    chunks.sort_by_key(|p| match p {
        ecdn_cluster::wire::PieceName::Chunk(ch) => *ch,
        ecdn_cluster::wire::PieceName::Replica => u16::MAX,
    });
    chunks.dedup();
    chunks.len()
}

/// [`holds`], asked by `client`.
pub async fn holds_by(
    client: &ecdn_cluster::peer::PeerClient,
    peer: SocketAddr,
    key: &str,
) -> Option<Vec<ecdn_cluster::wire::PieceName>> {
    let path = ecdn_cluster::wire::has_path(key);
    let t = Duration::from_secs(5);
    let r = client
        .send(peer, hyper::Method::GET, &path, bytes::Bytes::new(), &[], t)
        .await
        .unwrap();
    if r.status() == hyper::StatusCode::NOT_FOUND {
        return None;
    }
    assert_eq!(r.status(), hyper::StatusCode::OK);
    let body = http_body_util::BodyExt::collect(r.into_body())
        .await
        .unwrap()
        .to_bytes();
    let (_, held) = ecdn_cluster::wire::split_frame(&body).unwrap();
    Some(ecdn_cluster::wire::decode_held(held).unwrap())
}

pub struct Reply {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

/// One request on a fresh connection; an error instead of a panic when the node is gone or
/// the body is cut.
pub async fn get(addr: SocketAddr, uri: &str, extra: &[(&str, &str)]) -> Result<Reply, String> {
    request(addr, "GET", uri, extra).await
}

/// [`get`] with another method.
pub async fn request(
    addr: SocketAddr,
    method: &str,
    uri: &str,
    extra: &[(&str, &str)],
) -> Result<Reply, String> {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let mut req = Request::builder()
        .method(method)
        .uri(uri)
        .header("host", "cdn.test");
    for (k, v) in extra {
        req = req.header(*k, *v);
    }
    let resp = send
        .send_request(req.body(Empty::<Bytes>::new()).unwrap())
        .await
        .map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = tokio::time::timeout(Duration::from_secs(20), resp.into_body().collect())
        .await
        .map_err(|_| "body timed out".to_string())?
        .map_err(|e| e.to_string())?
        .to_bytes()
        .to_vec();
    Ok(Reply {
        status,
        headers,
        body,
    })
}

pub fn uri(id: u64, size: u64) -> String {
    format!("/obj/{id}?size={size}")
}

/// Checks a whole object's bytes.
pub fn check_whole(r: &Reply, id: u64, size: u64) {
    assert_eq!(r.status, 200, "{:?}", r.headers);
    assert_eq!(r.body.len() as u64, size);
    assert_eq!(
        content::first_mismatch(content::object_id(&id.to_string()), 0, &r.body),
        None
    );
}

/// `PURGE uri` with the bearer token: the status and the JSON answer.
pub async fn purge(addr: SocketAddr, uri: &str) -> (u16, serde_json::Value) {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = Request::builder()
        .method("PURGE")
        .uri(uri)
        .header("host", "cdn.test")
        .header("authorization", format!("Bearer {PURGE_TOKEN}"))
        .body(Empty::<Bytes>::new())
        .unwrap();
    let resp = send.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&body).unwrap())
}
