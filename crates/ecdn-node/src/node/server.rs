//! The server: opening the caches, the accept loop, connections and their limits, and the
//! graceful stop.
//!
//! * Listeners: the plain one (HTTP/1.1, and HTTP/2 with prior knowledge when
//!   [`NodeConfig::h2c`] is set) and, with [`NodeConfig::tls`], a TLS one ([`super::tls`])
//!   where ALPN picks HTTP/2 or HTTP/1.1. Every request takes the same path whatever the
//!   protocol. A TLS handshake must end within `header_read_timeout`.
//! * HTTP/2's limits ([`super::H2Limits`]): concurrent streams, flow-control windows, the
//!   header list size (`max_header_bytes`), and resets (pending accepted ones, the "rapid
//!   reset" attack, and those the node sends for protocol errors) beyond which the
//!   connection is closed.
//! * Shutdown ([`RunningNode::stop`]; `ecdn node` on SIGTERM or Ctrl-C): stop accepting, close
//!   idle keep-alive connections, let busy ones finish their response (at most
//!   [`NodeConfig::drain_timeout`]), stop the peer and admin listeners, then sync and close
//!   the disk cache.
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
use super::config::{AdminListen, NodeConfig};
use super::disk::Disk;
use super::gather::{gather, Records, Sender};
use super::h2_streams::{Batched, StreamExecutor};
use super::head_deadline::{Counted, HeadDeadline, Requests};
use super::hoc::Hoc;
use super::ops::Metrics;
use super::request::handle;
use super::state::State;
use super::tls::TlsAcceptor;
use super::upstream::{tcp_connector, Connector, Upstream};
use super::vary::VaryIndex;

/// hyper's smallest accepted `max_buf_size`.
const MIN_HEADER_BYTES: usize = 8192;
/// How many request headers hyper's HTTP/1 parser accepts when no `max_headers` is set.
const HYPER_MAX_HEADERS: usize = 100;

/// The node: see the module documentation. `/_ecdn/stats` reports `requests` (proxied, not
/// counting `/_ecdn/`) and, from each request's [`super::Outcome`]: `hoc_hits`, `disk_hits`,
/// `misses` (answers that went to the origin for a `GET` / `HEAD`, the paper's misses:
/// misses, revalidations, and our `502` / `504` for them), `collapsed` (requests that waited on
/// another request's origin fetch: not in `misses`), `passes` (other methods), `origin_errors` (our `502` / `504`, and
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
        // Peer requests signed before this are refused as possible replays: none can be for
        // this process (see `ecdn_cluster::replay`).
        let started = ecdn_cluster::auth::unix_now_ms();
        let upstream = Upstream::new(&cfg, connect)?;
        let invalid = |e: String| io::Error::new(io::ErrorKind::InvalidInput, e);
        let spec = ecdn_policy::PolicySpec::parse(&cfg.hoc_policy).map_err(invalid)?;
        let cache = spec.build(cfg.hoc_size.max(1), 0x5eed_ecd0);
        if cache.eviction().offline() {
            return Err(invalid(format!(
                "HOC policy {:?}: an offline policy needs the future, which a live node does \
                 not know",
                cfg.hoc_policy
            )));
        }
        let hoc = Hoc::new(cache);
        // Before anything is opened or bound: a token nobody can send, or anyone can guess.
        if let Some(AdminListen {
            addr,
            token: Some(t),
            ..
        }) = &cfg.admin
        {
            ecdn_cluster::bearer::check_admin_token(t)
                .map_err(|e| invalid(format!("admin listener {addr}: {e}")))?;
        }
        if let Some(t) = &cfg.purge_token {
            ecdn_cluster::bearer::check_purge_token(t).map_err(|e| invalid(e.to_string()))?;
        }
        if cfg.cluster.is_some() && cfg.disk_path.is_none() {
            return Err(invalid("cluster mode needs a disk (disk_path)".into()));
        }
        // In cluster mode `disk_size` is the piece policy's capacity; the ring is larger.
        let ring = match &cfg.cluster {
            Some(_) => super::cluster::pieces::member::ring_size(cfg.disk_size),
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
                let t = std::time::Instant::now();
                let shown = path.display().to_string();
                let store = tokio::task::spawn_blocking(move || {
                    Store::open(StoreConfig::new(path, capacity))
                })
                .await
                .map_err(io::Error::other)?
                .map_err(io::Error::other)?;
                eprintln!(
                    "ecdn node: disk cache {shown}: {} entries, started {} in {} ms",
                    store.len(),
                    store.started(),
                    t.elapsed().as_millis()
                );
                let disk = Disk::new(store);
                disk.save_directory_every(cfg.disk_directory_every);
                Some(disk)
            }
            None => None,
        };
        // Listen before joining: once the coordinator hears from the node, clients and peers
        // sent to it must find it listening (a connection waits in the backlog until the
        // accept loops run). A node added since the cluster file was written learns its peer
        // address from the map, so binds its peer listener right after joining.
        let listener = TcpListener::bind(listen).await?;
        let tls = match &cfg.tls {
            Some(t) => {
                let acceptor = Arc::new(TlsAcceptor::new(t.settings.clone())?);
                Some((TcpListener::bind(t.addr).await?, acceptor))
            }
            None => None,
        };
        let admin_listener = match &cfg.admin {
            Some(a) => {
                if !a.addr.ip().is_loopback() && a.token.is_none() && a.tls.is_none() {
                    return Err(invalid(format!(
                        "the admin listener {} is beyond loopback: it needs a token or \
                         client certificates",
                        a.addr
                    )));
                }
                let tls = match &a.tls {
                    Some(t) => Some(t.acceptor().map_err(invalid)?),
                    None => None,
                };
                Some((TcpListener::bind(a.addr).await?, a.token.clone(), tls))
            }
            None => None,
        };
        let mut peer_listener = match &cfg.cluster {
            Some(c) => match c.cluster.nodes.get(c.id) {
                Some(n) if n.id == c.id => Some(TcpListener::bind(n.peer).await?),
                _ => None,
            },
            None => None,
        };
        let cluster = match &cfg.cluster {
            Some(c) => Some(Arc::new(
                super::cluster::pieces::member::Cluster::join(
                    c,
                    cfg.disk_size,
                    disk.as_ref(),
                    started,
                )
                .await?,
            )),
            None => None,
        };
        let state = Arc::new(State {
            upstream,
            hoc: Mutex::new(hoc),
            disk,
            flights: Arc::new(Mutex::new(HashMap::new())),
            vary: VaryIndex::new(),
            metrics: Metrics::default(),
            max_uri_len: cfg.max_uri_len,
            unread_body_timeout: cfg.header_read_timeout,
            purge_token: cfg.purge_token.clone(),
            client_health: cfg.client_health,
            access_log: cfg.access_log,
            cluster: cluster.clone(),
            sites: cfg.sites.clone(),
            store_set_cookie: cfg.store_set_cookie,
            status: Default::default(),
            slices: super::slice_range::Slices::new(
                cluster
                    .as_ref()
                    .map_or(Default::default(), |c| c.cfg.slicing()),
            ),
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
                super::cluster::c2dn::repair::spawn_rounds(state.clone(), c.clone());
                Some((addr, task))
            }
            None => None,
        };
        let admin = match admin_listener {
            Some((listener, token, tls)) => {
                let addr = listener.local_addr()?;
                let token = token.map(Arc::from);
                let task = tokio::spawn(super::admin::serve(listener, state.clone(), token, tls));
                Some((addr, task))
            }
            None => None,
        };
        let addr = listener.local_addr()?;
        let tls_addr = match &tls {
            Some((l, _)) => Some(l.local_addr()?),
            None => None,
        };
        let tls_acceptor = tls.as_ref().map(|(_, a)| a.clone());
        let (tx, rx) = tokio::sync::oneshot::channel();
        let protocols = Arc::new(Protocols::new(&cfg));
        let limit = Arc::new(Semaphore::new(
            cfg.max_connections.min(Semaphore::MAX_PERMITS),
        ));
        let task = tokio::spawn(serve(
            Listeners {
                plain: listener,
                tls,
            },
            state.clone(),
            protocols.clone(),
            limit,
            rx,
            cfg.drain_timeout,
        ));
        Ok(RunningNode {
            addr,
            tls_addr,
            tls: tls_acceptor,
            peer,
            admin,
            stop: Some(tx),
            task,
            state,
            protocols,
        })
    }
}

/// How connections speak HTTP: the settings of each protocol.
struct Protocols {
    http1: hyper::server::conn::http1::Builder,
    http2: hyper::server::conn::http2::Builder<StreamExecutor>,
    /// The plain listener with h2c: HTTP/1.1 or HTTP/2 by the connection's first bytes.
    auto: Option<hyper_util::server::conn::auto::Builder<StreamExecutor>>,
    /// The longest a TLS handshake may take, and an HTTP/1.1 connection may wait for a request
    /// head (`head_deadline.rs`).
    header_read_timeout: Duration,
}

impl Protocols {
    fn new(cfg: &NodeConfig) -> Protocols {
        // The same settings for the HTTP/1.1 and HTTP/2 builders and for h2c's, whose
        // builders are other types with the same methods.
        macro_rules! http1_settings {
            ($b:expr) => {
                $b.keep_alive(true)
                    // A client that shuts its sending side after the request still gets the
                    // answer.
                    .half_close(true)
                    .max_buf_size(cfg.max_header_bytes.max(MIN_HEADER_BYTES))
                    .timer(TokioTimer::new());
                // hyper parses into a buffer on the stack for its default count, and into one
                // built per request (about 2% of a 1 KiB TLS hit) for any count set here,
                // the same count included.
                if cfg.max_headers != HYPER_MAX_HEADERS {
                    $b.max_headers(cfg.max_headers);
                }
            };
        }
        macro_rules! http2_settings {
            ($b:expr) => {
                $b.timer(TokioTimer::new())
                    .max_concurrent_streams(cfg.h2.max_concurrent_streams)
                    .initial_stream_window_size(cfg.h2.stream_window)
                    .initial_connection_window_size(cfg.h2.connection_window)
                    .max_header_list_size(u32::try_from(cfg.max_header_bytes).unwrap_or(u32::MAX))
                    .max_pending_accept_reset_streams(cfg.h2.max_pending_resets)
                    .max_local_error_reset_streams(Some(cfg.h2.max_error_resets))
                    // Idle connections are pinged, and closed when the client stops answering.
                    .keep_alive_interval(Some(cfg.header_read_timeout.max(Duration::from_secs(1))))
                    .keep_alive_timeout(cfg.header_read_timeout.max(Duration::from_secs(1)))
            };
        }
        let mut http1 = hyper::server::conn::http1::Builder::new();
        http1_settings!(http1);
        // The connection's head deadline keeps hyper's rule instead (`head_deadline.rs`);
        // hyper's own, 30 s by default, would cost a timer per request.
        http1.header_read_timeout(None);
        let mut http2 = hyper::server::conn::http2::Builder::new(StreamExecutor);
        http2_settings!(http2);
        let auto = cfg.h2c.then(|| {
            let mut auto = hyper_util::server::conn::auto::Builder::new(StreamExecutor);
            http1_settings!(auto.http1());
            auto.http1().header_read_timeout(cfg.header_read_timeout);
            http2_settings!(auto.http2());
            auto
        });
        Protocols {
            http1,
            http2,
            auto,
            header_read_timeout: cfg.header_read_timeout,
        }
    }
}

/// The node's listeners.
struct Listeners {
    plain: TcpListener,
    tls: Option<(TcpListener, Arc<TlsAcceptor>)>,
}

/// A new connection, from either listener.
enum Accepted {
    Plain(tokio::net::TcpStream, SocketAddr),
    Tls(tokio::net::TcpStream, SocketAddr, Arc<TlsAcceptor>),
    Stop,
    Failed,
}

impl Listeners {
    async fn accept(&self, stop: &mut tokio::sync::oneshot::Receiver<()>) -> Accepted {
        let tls = async {
            match &self.tls {
                Some((l, a)) => (l.accept().await, a.clone()),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = stop => Accepted::Stop,
            r = self.plain.accept() => match r {
                Ok((s, remote)) => Accepted::Plain(s, remote),
                Err(_) => Accepted::Failed,
            },
            (r, acceptor) = tls => match r {
                Ok((s, remote)) => Accepted::Tls(s, remote, acceptor),
                Err(_) => Accepted::Failed,
            },
        }
    }
}

async fn serve(
    listeners: Listeners,
    st: Arc<State>,
    protocols: Arc<Protocols>,
    limit: Arc<Semaphore>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
    drain_timeout: Duration,
) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let (stream, remote, tls) = match listeners.accept(&mut stop).await {
            Accepted::Stop => break,
            Accepted::Plain(s, remote) => (s, remote, None),
            Accepted::Tls(s, remote, acceptor) => (s, remote, Some(acceptor)),
            // Out of file descriptors and the like: back off instead of spinning.
            Accepted::Failed => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        // Over the connection limit: close it at once (dropping the stream).
        let Ok(permit) = limit.clone().try_acquire_owned() else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (st, protocols, watcher) = (st.clone(), protocols.clone(), graceful.watcher());
        tokio::spawn(async move {
            let _permit = permit;
            let how = if tls.is_some() {
                Speak::Tls
            } else if protocols.auto.is_some() {
                Speak::Auto
            } else {
                Speak::Http1
            };
            serve_one(st, &protocols, stream, remote, how, tls, Some(watcher)).await;
        });
    }
    // Drain: no new connections; idle ones close now, busy ones after their response.
    drop(listeners);
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
}

/// How a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Speak {
    /// HTTP/1.1.
    Http1,
    /// HTTP/2 with prior knowledge.
    Http2,
    /// HTTP/1.1 or HTTP/2 by the first bytes (h2c on the plain listener).
    Auto,
    /// TLS, then HTTP/2 or HTTP/1.1 by ALPN.
    Tls,
}

/// Serves one client connection in the way `how` says until it closes; watched by the
/// graceful shutdown when `watcher` is given. A TLS handshake must end within
/// `header_read_timeout`; `tls` is the listener's acceptor.
async fn serve_one<I>(
    st: Arc<State>,
    protocols: &Protocols,
    io: I,
    remote: SocketAddr,
    how: Speak,
    tls: Option<Arc<TlsAcceptor>>,
    watcher: Option<hyper_util::server::graceful::Watcher>,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    if how == Speak::Http1 {
        // Plain HTTP/1.1 sends one response at a time, its head and body in one `writev`
        // already: nothing to gather, and no copy.
        return serve_http(st, protocols, TokioIo::new(io), None, remote, how, watcher).await;
    }
    if how != Speak::Tls {
        let (io, sender) = gather(io, Records::AsWritten);
        return serve_http(
            st,
            protocols,
            TokioIo::new(io),
            Some(sender),
            remote,
            how,
            watcher,
        )
        .await;
    }
    let Some(acceptor) = tls else {
        return;
    };
    let handshake = acceptor.acceptor().accept(io);
    let Ok(Ok(stream)) = tokio::time::timeout(protocols.header_read_timeout, handshake).await
    else {
        return;
    };
    let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
    let how = if h2 { Speak::Http2 } else { Speak::Http1 };
    // A batch of responses as one TLS record and one system call (see `gather.rs`).
    let records = if h2 {
        Records::Whole
    } else {
        Records::AsWritten
    };
    let (stream, sender) = gather(stream, records);
    serve_http(
        st,
        protocols,
        TokioIo::new(stream),
        Some(sender),
        remote,
        how,
        watcher,
    )
    .await
}

/// The HTTP part of [`serve_one`]: `sender` sends what the connection's writes to `io` left
/// gathered, if `io` gathers them.
async fn serve_http<I>(
    st: Arc<State>,
    protocols: &Protocols,
    io: I,
    sender: Option<Sender>,
    remote: SocketAddr,
    how: Speak,
    watcher: Option<hyper_util::server::graceful::Watcher>,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    // HTTP/1.1 connections are closed when a request head does not come in time (see
    // `head_deadline.rs`); hyper keeps that rule itself where the protocol may be HTTP/1.1 or
    // HTTP/2 (h2c).
    let deadline = (how == Speak::Http1).then(|| HeadDeadline::new(protocols.header_read_timeout));
    // The connection, watched for the drain or not, until it ends or its head deadline passes.
    macro_rules! run {
        ($conn:expr) => {{
            let conn = async {
                match watcher {
                    Some(w) => {
                        let _ = Batched::new(w.watch($conn), sender).await;
                    }
                    None => {
                        let _ = Batched::new($conn, sender).await;
                    }
                }
            };
            match &deadline {
                Some(d) => tokio::select! {
                    biased;
                    () = conn => {}
                    () = d.passed() => {}
                },
                None => conn.await,
            }
        }};
    }
    let service = service(st, remote, deadline.as_ref().map(HeadDeadline::requests));
    match (how, &protocols.auto) {
        (Speak::Http2, _) => run!(protocols.http2.serve_connection(io, service)),
        (Speak::Auto, Some(auto)) => run!(auto.serve_connection(io, service)),
        _ => run!(protocols.http1.serve_connection(io, service)),
    }
}

/// The per-connection service: [`handle`] for every request, each counted in `requests`
/// (the connection's head deadline) from its head to its response's end.
fn service(
    st: Arc<State>,
    remote: SocketAddr,
    requests: Option<Requests>,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response<Counted<NodeBody>>,
    Error = Infallible,
    Future = impl std::future::Future<Output = Result<Response<Counted<NodeBody>>, Infallible>> + Send,
> + Clone {
    hyper::service::service_fn(move |req: Request<Incoming>| {
        let st = st.clone();
        let in_flight = requests.as_ref().map(Requests::request);
        // Boxed: the request's future is moved (into its HTTP/2 stream's task, or hyper's
        // HTTP/1 dispatcher) as a pointer, not as the kilobytes of its state.
        Box::pin(async move {
            let r = handle(st, req, remote).await;
            Ok::<_, Infallible>(r.map(|b| Counted::new(b, in_flight)))
        })
    })
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
        if super::lock::lock(&st.hoc).holds(id, url, std::time::Instant::now()) {
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
    /// The TLS listener's address, with [`NodeConfig::tls`].
    pub tls_addr: Option<SocketAddr>,
    tls: Option<Arc<TlsAcceptor>>,
    /// Cluster mode: the peer listener's address and task.
    peer: Option<(SocketAddr, tokio::task::JoinHandle<()>)>,
    /// The admin listener's address and task ([`NodeConfig::admin`]).
    admin: Option<(SocketAddr, tokio::task::JoinHandle<()>)>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
    state: Arc<State>,
    protocols: Arc<Protocols>,
}

impl RunningNode {
    /// Reads the TLS certificates again (`ecdn node` does on SIGHUP): new handshakes use them,
    /// open connections go on. On an error nothing changes. Without TLS, nothing to do.
    pub fn reload_tls(&self) -> Result<(), super::tls::TlsError> {
        match &self.tls {
            Some(t) => t.reload(),
            None => Ok(()),
        }
    }

    /// A handle that tells whether this node still holds a URL.
    pub fn holder(&self) -> Holder {
        Holder(self.state.clone())
    }

    /// Stops accepting connections and drains the open ones: idle keep-alive connections are
    /// closed, busy ones after the response in progress, within
    /// [`NodeConfig::drain_timeout`]; then the disk cache is synced and closed (its file and
    /// lock released). Returns when all that is done.
    ///
    /// In cluster mode the heartbeats stop first; the peer listener keeps answering while the
    /// client connections drain (their requests may still read pieces through peers, and peers
    /// may still read pieces here), and is closed last. The admin listener, too, answers until
    /// the end (its health says `draining` in a cluster).
    pub async fn stop(mut self) -> io::Result<()> {
        if let Some(c) = &self.state.cluster {
            c.leave();
        }
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let served = (&mut self.task).await.map_err(io::Error::other);
        for (_, task) in [self.peer.take(), self.admin.take()].into_iter().flatten() {
            task.abort();
            let _ = task.await;
        }
        // Last, the disk cache: synced and closed, so its file is free for the next opener
        // when this returns (a background fill still running then writes nothing).
        if let Some(disk) = &self.state.disk {
            disk.close().await;
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

    /// The admin listener's address (health, stats, metrics, `PURGE`), unless
    /// [`NodeConfig::admin`] is `None`.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().map(|(a, _)| *a)
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
        self.serve_io_as(io, remote, Speak::Http1)
    }

    /// [`RunningNode::serve_io`] speaking as `how` says: HTTP/2 with prior knowledge, or TLS
    /// as the TLS listener does (nothing is served without [`NodeConfig::tls`]).
    pub fn serve_io_as<I>(
        &self,
        io: I,
        remote: SocketAddr,
        how: Speak,
    ) -> impl std::future::Future<Output = ()> + Send + 'static
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (st, protocols, tls) = (self.state.clone(), self.protocols.clone(), self.tls.clone());
        async move { serve_one(st, &protocols, io, remote, how, tls, None).await }
    }
}
