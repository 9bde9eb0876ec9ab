//! The server: opening the caches, the accept loop, connections and their limits, and the
//! graceful stop.
//!
//! * Shutdown ([`RunningNode::stop`]; `ecdn node` on SIGTERM or Ctrl-C): stop accepting, close
//!   idle keep-alive connections, let busy ones finish their response (at most
//!   [`NodeConfig::drain_timeout`]), then sync the disk cache.
//! * Connections beyond [`NodeConfig::max_connections`] are accepted and closed at once;
//!   hyper enforces the head size, header count and head read timeout (see
//!   [`super::sanitize`]).

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ecdn_store::{Store, StoreConfig, DEFAULT_ALIGN};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::body::NodeBody;
use super::disk::Disk;
use super::hoc::Hoc;
use super::ops::Metrics;
use super::upstream::{tcp_connector, Connector, Upstream};
use super::vary::VaryIndex;
use super::{handle, NodeConfig, State};

/// hyper's smallest accepted `max_buf_size`.
const MIN_HEADER_BYTES: usize = 8192;

/// The node: see the module documentation. `/_ecdn/stats` reports `requests` (proxied, not
/// counting `/_ecdn/`) and, from each request's [`super::Outcome`]: `hoc_hits`, `disk_hits`,
/// `misses` (answers that needed the origin for a `GET` / `HEAD`: misses, collapsed ones,
/// revalidations, and our `502` / `504` for them), `collapsed` (misses served by another
/// request's origin fetch), `passes` (other methods), `origin_errors` (our `502` / `504`, and
/// origin bodies aborted mid-transfer), `revalidated` / `stale` (stale entries served after a
/// `304` / without the origin), `bytes_served` (response bodies of known length); then
/// `disk_errors` (failed disk store operations), `hoc` (`policy`, `used`, `capacity`,
/// `objects`, `c`: AdaptSize's size parameter, `null` while it admits everything or for
/// policies without one) and `disk` (`null` without a disk).
pub struct Node;

impl Node {
    /// Opens the caches, binds `listen` (port 0 for any free port) and serves on the current
    /// Tokio runtime.
    pub async fn start(listen: SocketAddr, cfg: NodeConfig) -> io::Result<RunningNode> {
        Self::start_with_connector(listen, cfg, tcp_connector()).await
    }

    /// [`Node::start`], with origin connections opened by `connect` instead of TCP (e.g.
    /// in-memory pipes to an origin in the same process, for tests and fuzzing).
    pub async fn start_with_connector(
        listen: SocketAddr,
        cfg: NodeConfig,
        connect: Connector,
    ) -> io::Result<RunningNode> {
        let upstream = Upstream::new(&cfg, connect)?;
        let invalid = |e: String| io::Error::new(io::ErrorKind::InvalidInput, e);
        let spec = ecdn_policy::PolicySpec::parse(&cfg.hoc_policy).map_err(invalid)?;
        let hoc = Hoc::new(spec.build(cfg.hoc_size.max(1), 0x5eed_ecd0));
        if cfg.cluster.is_some() && cfg.disk_path.is_none() {
            return Err(invalid("cluster mode needs a disk (disk_path)".into()));
        }
        // In cluster mode `disk_size` is the piece policy's capacity; the ring is larger.
        let ring = match &cfg.cluster {
            Some(_) => super::cluster::ring_size(cfg.disk_size),
            None => cfg.disk_size,
        };
        let disk = match cfg.disk_path.clone() {
            Some(path) => {
                let align = u64::from(DEFAULT_ALIGN);
                let capacity = ring / align * align;
                if capacity == 0 {
                    return Err(invalid(format!(
                        "disk size {} is below 4 KiB",
                        cfg.disk_size
                    )));
                }
                let store = tokio::task::spawn_blocking(move || {
                    Store::open(StoreConfig::new(path, capacity))
                })
                .await
                .map_err(io::Error::other)?
                .map_err(io::Error::other)?;
                Some(Disk::new(store))
            }
            None => None,
        };
        // Listen before joining: once the coordinator hears from the node, clients and peers
        // sent to it must find it listening (a connection waits in the backlog until the
        // accept loops run). A node added since the cluster file was written learns its peer
        // address from the map, so binds its peer listener right after joining.
        let listener = TcpListener::bind(listen).await?;
        let mut peer_listener = match &cfg.cluster {
            Some(c) => match c.cluster.nodes.get(c.id) {
                Some(n) if n.id == c.id => Some(TcpListener::bind(n.peer).await?),
                _ => None,
            },
            None => None,
        };
        let cluster = match &cfg.cluster {
            Some(c) => Some(Arc::new(
                super::cluster::Cluster::join(c, cfg.disk_size).await?,
            )),
            None => None,
        };
        let state = Arc::new(State {
            upstream,
            hoc: Mutex::new(hoc),
            disk,
            flights: Mutex::new(HashMap::new()),
            vary: VaryIndex::new(),
            metrics: Metrics::default(),
            max_uri_len: cfg.max_uri_len,
            unread_body_timeout: cfg.header_read_timeout,
            purge_token: cfg.purge_token.clone(),
            access_log: cfg.access_log,
            cluster: cluster.clone(),
            sites: cfg.sites.clone(),
        });
        let peer = match &cluster {
            Some(c) => {
                let listener = match peer_listener.take() {
                    Some(l) => l,
                    None => TcpListener::bind(c.peer_addr()).await?,
                };
                let addr = listener.local_addr()?;
                let task = tokio::spawn(super::cluster::peer_server::serve(
                    listener,
                    state.clone(),
                    c.clone(),
                ));
                Some((addr, task))
            }
            None => None,
        };
        let addr = listener.local_addr()?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let mut http = hyper::server::conn::http1::Builder::new();
        http.keep_alive(true)
            // A client that shuts its sending side after the request still gets the answer.
            .half_close(true)
            .max_buf_size(cfg.max_header_bytes.max(MIN_HEADER_BYTES))
            .max_headers(cfg.max_headers)
            .timer(TokioTimer::new())
            .header_read_timeout(cfg.header_read_timeout);
        let limit = Arc::new(Semaphore::new(
            cfg.max_connections.min(Semaphore::MAX_PERMITS),
        ));
        let task = tokio::spawn(serve(
            listener,
            state.clone(),
            http.clone(),
            limit,
            rx,
            cfg.drain_timeout,
        ));
        Ok(RunningNode {
            addr,
            peer,
            stop: Some(tx),
            task,
            state,
            http,
        })
    }
}

async fn serve(
    listener: TcpListener,
    st: Arc<State>,
    http: hyper::server::conn::http1::Builder,
    limit: Arc<Semaphore>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
    drain_timeout: Duration,
) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let stream = tokio::select! {
            _ = &mut stop => break,
            r = listener.accept() => match r {
                Ok(s) => s,
                // Out of file descriptors and the like: back off instead of spinning.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        // Over the connection limit: close it at once (dropping the stream).
        let (stream, remote) = stream;
        let Ok(permit) = limit.clone().try_acquire_owned() else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let st = st.clone();
        let conn = http.serve_connection(TokioIo::new(stream), service(st, remote));
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _permit = permit;
            let _ = conn.await;
        });
    }
    // Drain: no new connections; idle ones close now, busy ones after their response.
    drop(listener);
    let open = graceful.count();
    if tokio::time::timeout(drain_timeout, graceful.shutdown())
        .await
        .is_err()
    {
        eprintln!(
            "ecdn node: drain timeout ({drain_timeout:?}) reached; cutting the connections left \
             of {open}"
        );
    }
    if let Some(disk) = &st.disk {
        disk.sync().await;
    }
}

/// The per-connection service: [`handle`] for every request.
fn service(
    st: Arc<State>,
    remote: SocketAddr,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response<NodeBody>,
    Error = Infallible,
    Future = impl std::future::Future<Output = Result<Response<NodeBody>, Infallible>> + Send,
> + Clone {
    hyper::service::service_fn(move |req: Request<Incoming>| {
        let st = st.clone();
        async move { Ok::<_, Infallible>(handle(st, req, remote).await) }
    })
}

/// Serves one client connection with [`handle`] until it closes.
async fn serve_connection<I>(
    st: Arc<State>,
    http: &hyper::server::conn::http1::Builder,
    io: I,
    remote: SocketAddr,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let _ = http.serve_connection(io, service(st, remote)).await;
}

/// Whether a running node still holds a URL: what cooperating sites check before they renew
/// a reference to it ([`super::sites`]).
#[derive(Clone)]
pub struct Holder(Arc<State>);

impl Holder {
    /// Whether the node holds `url` (its cache's primary key: host, path and query): a fresh
    /// copy in the HOC, or an entry on disk.
    pub async fn holds(&self, url: &str) -> bool {
        let st = &self.0;
        let id = ecdn_trace::hash_id(url.as_bytes());
        if super::lock(&st.hoc).holds(id, url, std::time::Instant::now()) {
            return true;
        }
        match &st.disk {
            Some(d) => d.contains(url).await,
            None => false,
        }
    }
}

/// A running node: its address and a handle that stops it.
pub struct RunningNode {
    pub addr: SocketAddr,
    /// Cluster mode: the peer listener's address and task.
    peer: Option<(SocketAddr, tokio::task::JoinHandle<()>)>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
    state: Arc<State>,
    http: hyper::server::conn::http1::Builder,
}

impl RunningNode {
    /// A handle that tells whether this node still holds a URL.
    pub fn holder(&self) -> Holder {
        Holder(self.state.clone())
    }

    /// Stops accepting connections and drains the open ones: idle keep-alive connections are
    /// closed, busy ones after the response in progress, within
    /// [`NodeConfig::drain_timeout`]; then the disk cache is synced. Returns when all that is
    /// done.
    ///
    /// In cluster mode the heartbeats stop first; the peer listener keeps answering while the
    /// client connections drain (their requests may still read pieces through peers, and peers
    /// may still read pieces here), and is closed last.
    pub async fn stop(mut self) -> io::Result<()> {
        if let Some(c) = &self.state.cluster {
            c.leave();
        }
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let served = (&mut self.task).await.map_err(io::Error::other);
        if let Some((_, task)) = self.peer.take() {
            task.abort();
        }
        served
    }

    /// Cluster mode: resolves when the bucket map says this node drains or was removed (see
    /// `ecdn cluster drain`); the caller then stops it. Never resolves outside a cluster.
    pub async fn leaving(&self) {
        let Some(c) = &self.state.cluster else {
            return std::future::pending().await;
        };
        let mut epochs = c.map.subscribe();
        while !c.leaving() {
            if epochs.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }

    /// Cluster mode: the peer listener's address.
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.peer.as_ref().map(|(a, _)| *a)
    }

    /// Serves one client connection over `io` (any byte stream, e.g. one end of
    /// `tokio::io::duplex`) as if accepted from `remote`: the same HTTP settings and request
    /// handling as a TCP connection, but not counted against `max_connections`. The future
    /// ends when the connection closes; for tests and fuzzing.
    pub fn serve_io<I>(
        &self,
        io: I,
        remote: SocketAddr,
    ) -> impl std::future::Future<Output = ()> + Send + 'static
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (st, http) = (self.state.clone(), self.http.clone());
        async move { serve_connection(st, &http, TokioIo::new(io), remote).await }
    }
}
