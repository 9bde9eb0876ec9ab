//! `ecdn coordinator`: the embedded control plane of a live cluster (C2DN, NSDI '22, §4.2, §5,
//! App. 10.3).
//!
//! It owns the cluster's [`Placement`](ecdn_placement::Placement) (built from the cluster file exactly as `ecdn sim
//! cluster` builds it: the weights, the bucket count, the scheme's placement code and the seed)
//! and, for `c2dn`, the [`SlotHistory`](ecdn_placement::pieces::SlotHistory) of moved slots, and publishes them as a [`BucketMap`]
//! with an epoch number. Every request must be signed with the cluster key, for this
//! coordinator's address, with a nonce not taken before ([`crate::replay::Gate`]); anything else
//! gets `401` with a short reason, is counted in [`Status::unauthorized`] and changes nothing.
//!
//! * `POST /coord/heartbeat` with a JSON [`Heartbeat`]: the node is alive, and these are the
//!   bytes it wrote since its previous heartbeat (data, and per parity bucket). The loads feed
//!   parity rebalance (`Placement::record_data_write`, `Placement::record_parity_write`);
//!   an id or index out of range is a `400`. Answers `{"epoch": current}`.
//! * `GET /coord/map?after=E`: long poll; the current map as JSON as soon as its epoch is above
//!   `E` (at once without `after`), else `204` after [`CoordinatorOptions::long_poll`].
//! * `GET /coord/status`: a JSON [`Status`].
//! * `POST /coord/rebalance` (`c2dn` only, else `409`): an operator's parity rebalance now,
//!   from the loads written so far. It first waits for two heartbeats from every available
//!   node (at most the heartbeat deadline), so the loads of every write finished before the
//!   request are counted, then rebalances like the periodic one and answers
//!   `{"epoch": new}`. The cluster demo uses it to rebalance at a given request, where the
//!   simulator does.
//! * `POST /coord/members` with a JSON [`NewMember`], `POST /coord/drain?node=N`,
//!   `POST /coord/remove?node=N`: membership changes while the cluster serves (see
//!   `members.rs`); answers a [`MemberReply`] (`409` when the member's state forbids it).
//! * `/coord/objects/...`: the records of EC-Cache's object API ([`objects`]).
//!
//! Every JSON answer is signed too ([`crate::peer::sign_response`]): a node takes a map only
//! from a holder of the cluster key.
//!
//! **Availability.** A node that sent no heartbeat for `missed_heartbeats × heartbeat_ms` is
//! unavailable (checked five times per heartbeat period). At start every node is available and
//! gets a grace of `max(that deadline, start_grace)` for its first heartbeat. A heartbeat from
//! an unavailable node makes it available again (App. 10.3's return). Every change goes through
//! `Placement::set_available` — which re-places the data buckets by the ring and runs parity
//! rebalance, as §4.2 says ("only when there is an unavailability event") — records the moved
//! slots, increments the epoch, publishes the new map and logs one line on stderr. A periodic
//! parity rebalance (`Placement::rebalance`, `c2dn` only) runs every `rebalance_every_s`
//! seconds when that is above 0 (an hour by default, as in the simulator), the first a tenth of
//! a period after the start, once the first write loads are known (App. 10.3's Phase 2), as
//! the simulator's first.
//!
//! **Epochs** start at the coordinator's start time in UNIX milliseconds (unless
//! [`CoordinatorOptions::first_epoch`] says otherwise) and grow by one per change, so a
//! restarted coordinator's maps are newer than the ones its nodes hold (nodes only ever take a
//! map with a higher epoch than their own).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ecdn_placement::pieces::Scheme;
use ecdn_placement::PlacementError;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde::{Deserialize, Serialize};
use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::auth::{unix_now_ms, ClusterKey, Verified};
use crate::config::ClusterConfig;
use crate::map::BucketMap;
use crate::peer::{read_verified_body, BodyError};
use crate::replay::Gate;

mod campaign_backoff;
mod catch_panic;
pub mod client;
pub mod etcd;
mod etcd_api;
mod etcd_stored;
mod members;
mod object_budget;
pub mod objects;
mod serve;
mod state;
mod state_file;
pub mod status_page;
mod status_source;

pub use members::{MemberError, MemberOp, MemberReply, NewMember};
use serve::json;
pub(crate) use serve::{accept_loop_tls, json_of, text};
use state::State;
pub use state::StoredState;

// The heartbeat protocol, which the nodes' side (`crate::control`) shares.
pub use crate::heartbeat::{Heartbeat, HeartbeatReply, HEARTBEAT_PATH, LONG_POLL, MAP_PATH};

/// An admin listener's address and token, checked: beyond loopback it needs a token or mutual
/// TLS, and a token must pass [`crate::bearer::check_admin_token`].
fn admin_listener(
    listener: &TcpListener,
    token: Option<String>,
    mtls: bool,
) -> Result<(SocketAddr, Option<Arc<str>>), CoordError> {
    let addr = listener.local_addr()?;
    let invalid =
        |msg: String| CoordError::Io(std::io::Error::new(std::io::ErrorKind::InvalidInput, msg));
    if !addr.ip().is_loopback() && token.is_none() && !mtls {
        return Err(invalid(format!(
            "the admin listener {addr} is beyond loopback: it needs a token or client certificates"
        )));
    }
    if let Some(t) = &token {
        crate::bearer::check_admin_token(t)
            .map_err(|e| invalid(format!("admin listener {addr}: {e}")))?;
    }
    Ok((addr, token.map(Arc::from)))
}

/// The status page on an admin listener, checked ([`admin_listener`], and the mutual TLS
/// files when given): its address and the task that serves it until the coordinator stops.
fn admin_page(
    listener: TcpListener,
    token: Option<String>,
    tls: Option<&crate::mtls::AdminTls>,
    source: status_source::Source,
) -> Result<(SocketAddr, impl std::future::Future<Output = ()>), CoordError> {
    let (addr, token) = admin_listener(&listener, token, tls.is_some())?;
    let tls = tls
        .map(|t| {
            t.acceptor().map_err(|e| {
                CoordError::Io(std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
            })
        })
        .transpose()?;
    Ok((
        addr,
        status_page::serve(listener, Arc::new(source), token, tls),
    ))
}

/// Paths of the coordinator's API.
pub const STATUS_PATH: &str = "/coord/status";
pub const REBALANCE_PATH: &str = "/coord/rebalance";
pub const MEMBERS_PATH: &str = "/coord/members";
pub const DRAIN_PATH: &str = "/coord/drain";
pub const UNDRAIN_PATH: &str = "/coord/undrain";
pub const REMOVE_PATH: &str = "/coord/remove";
/// A load balancer's [`crate::health::BalancerReport`] (embedded coordinator).
pub const BALANCER_PATH: &str = "/coord/balancer";

/// The least time a node has for its first heartbeat after the coordinator started.
pub const START_GRACE: Duration = Duration::from_secs(10);
/// Limit on a `POST /coord/members` body.
pub(crate) const MEMBER_LIMIT: usize = 4096;
/// Rebalances kept in [`Status::recent_rebalances`].
pub(crate) const RECENT: usize = 64;

/// One node as `GET /coord/status` shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeStatus {
    pub id: usize,
    pub client: SocketAddr,
    pub peer: SocketAddr,
    pub weight: f64,
    /// `active`, `draining` or `removed` ([`crate::map::MemberState`]).
    pub state: String,
    pub available: bool,
    /// Data buckets and parity buckets it holds in the current map.
    pub data_buckets: usize,
    pub parity_buckets: usize,
    /// Milliseconds since its last heartbeat; `None` if never heard from.
    pub ms_since_heartbeat: Option<u64>,
    pub heartbeats: u64,
    /// The map epoch its last heartbeat reported.
    pub seen_epoch: Option<u64>,
    /// Data bytes recorded for it since the last rebalance (every availability change is
    /// one).
    pub data_load: u64,
    /// Bytes recorded for the parity buckets it holds, since the last rebalance.
    pub parity_load: u64,
    /// How its peers and the load balancers see it, and why it is out of the map
    /// ([`crate::health`]).
    #[serde(default)]
    pub health: crate::health::judge::NodeHealth,
    /// Silent to the coordinator but reached by its peers: kept in the map.
    #[serde(default)]
    pub control_cut: bool,
}

/// One availability change or periodic rebalance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RebalanceEvent {
    /// The epoch of the map it published.
    pub epoch: u64,
    /// `"node 3 unavailable"`, `"node 3 available"` or `"periodic"`.
    pub trigger: String,
    pub moved_parity: usize,
    pub moved_data: usize,
    pub elapsed_us: u64,
    /// Why a node left, beyond silence (cut off, unreachable from clients, slow; see
    /// [`crate::health::judge::OutReason`]); `None` for other events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `GET /coord/status`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub epoch: u64,
    pub scheme: String,
    pub nodes: Vec<NodeStatus>,
    /// Heartbeats accepted.
    pub heartbeats: u64,
    pub availability_changes: u64,
    /// Availability changes plus periodic rebalances.
    pub rebalances: u64,
    /// The last few rebalances, oldest first.
    pub recent_rebalances: Vec<RebalanceEvent>,
    /// Parity bytes recorded since the last rebalance, over all parity buckets.
    pub parity_load: u64,
    /// Write load per unit of weight, max over mean across the available nodes, since the
    /// last rebalance (§3.3's write imbalance); `None` before any write was recorded.
    pub write_imbalance: Option<f64>,
    /// In etcd mode: the leading coordinator's name (its API address).
    #[serde(default)]
    pub leader: Option<String>,
    /// Requests refused with 401, and with 400.
    pub unauthorized: u64,
    pub bad_requests: u64,
    /// EC-Cache objects committed (embedded mode), and how many times the parity budget
    /// re-coded one (`object_budget.rs`).
    #[serde(default)]
    pub objects: usize,
    #[serde(default)]
    pub object_budget_changes: u64,
    /// The objects of the budget's current batch not re-coded yet (0: no batch running).
    #[serde(default)]
    pub object_budget_pending: usize,
}

/// Knobs the cluster file does not carry (tests shorten them).
#[derive(Clone, Debug)]
pub struct CoordinatorOptions {
    /// See [`LONG_POLL`].
    pub long_poll: Duration,
    /// See [`START_GRACE`].
    pub start_grace: Duration,
    /// The first map's epoch; `None`: the start time in UNIX milliseconds.
    pub first_epoch: Option<u64>,
    /// Embedded mode: where the coordinator keeps its state (`state_file.rs`). Read at start
    /// when it exists: the members added, drained and removed since the cluster file was
    /// written, the placement and the epoch go on from there (the first map's epoch is the
    /// later of the stored one plus one and the start's). Replaced after every change.
    /// `None`: the state lives in memory only.
    pub state_file: Option<std::path::PathBuf>,
}

impl Default for CoordinatorOptions {
    fn default() -> Self {
        CoordinatorOptions {
            long_poll: LONG_POLL,
            start_grace: START_GRACE,
            first_epoch: None,
            state_file: None,
        }
    }
}

/// Why the coordinator could not start.
#[derive(Debug, Error)]
pub enum CoordError {
    #[error("placement: {0}")]
    Placement(#[from] PlacementError),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    StateFile(String),
}

/// Why a heartbeat was refused (a `400`).
#[derive(Debug, Error, PartialEq)]
pub enum HeartbeatError {
    #[error("node {node} is not in the cluster (nodes 0..{nodes})")]
    UnknownNode { node: usize, nodes: usize },
    #[error("parity entry [{bucket}, {index}, _] is out of range ({buckets} buckets, {p} parity buckets each)")]
    BadParity {
        bucket: usize,
        index: usize,
        buckets: usize,
        p: usize,
    },
    #[error("node {node} was removed from the cluster for good")]
    Removed { node: usize },
}

/// The published map and its JSON.
#[derive(Clone)]
struct Published {
    map: Arc<BucketMap>,
    json: Bytes,
    /// When it was published.
    at: Instant,
}

struct Shared {
    key: ClusterKey,
    /// The peer protocol's mutual TLS (the cluster file's `[peer_tls]`).
    peer_tls: Option<crate::mtls::PeerTls>,
    /// Checks the signed requests: this coordinator's addresses, the nonces taken.
    gate: Gate,
    opts: CoordinatorOptions,
    heartbeat_limit: usize,
    state: Mutex<State>,
    published: watch::Sender<Published>,
    shutdown: watch::Receiver<bool>,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock would be a bug; the state stays usable either way.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publishes the state's current map and logs the events that led to it. Called with the
    /// state locked, so maps are published in epoch order.
    fn publish(&self, state: &State, events: &[RebalanceEvent]) {
        for e in events {
            eprintln!(
                "ecdn coordinator: epoch {}: {}: moved {} data and {} parity buckets in {} us",
                e.epoch, e.trigger, e.moved_data, e.moved_parity, e.elapsed_us
            );
        }
        self.published.send_replace(publish(state));
        self.keep(state);
    }

    /// Writes `state` to the state file, if there is one. A failure is logged and the
    /// coordinator goes on (its maps are still right; a restart would start from the last
    /// state written).
    fn keep(&self, state: &State) {
        if let Some(path) = &self.opts.state_file {
            if let Err(e) = state_file::write(path, &state.stored()) {
                eprintln!(
                    "ecdn coordinator: cannot write the state file {}: {e}",
                    path.display()
                );
            }
        }
    }
}

fn publish(state: &State) -> Published {
    let map = state.map();
    let json = Bytes::from(serde_json::to_vec(&map).expect("a bucket map serializes"));
    Published {
        map: Arc::new(map),
        json,
        at: Instant::now(),
    }
}

/// The coordinator: see the module documentation.
pub struct Coordinator;

impl Coordinator {
    /// Binds the cluster file's `coordinator` address and starts serving.
    pub async fn start(cfg: ClusterConfig) -> Result<RunningCoordinator, CoordError> {
        Self::start_with(cfg, CoordinatorOptions::default()).await
    }

    /// [`Coordinator::start`] with `opts` (a state file, say).
    pub async fn start_with(
        cfg: ClusterConfig,
        opts: CoordinatorOptions,
    ) -> Result<RunningCoordinator, CoordError> {
        // Before the listener exists: every request it will get is signed later.
        let started = unix_now_ms();
        let addr = cfg.coordinator;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| CoordError::Listen { addr, source })?;
        Self::serve(cfg, listener, opts, started).await
    }

    /// Starts serving on an already bound listener (tests bind port 0). Requests signed
    /// before this call are refused (see [`crate::replay`]): start it before sending any.
    pub async fn start_on(
        cfg: ClusterConfig,
        listener: TcpListener,
        opts: CoordinatorOptions,
    ) -> Result<RunningCoordinator, CoordError> {
        Self::serve(cfg, listener, opts, unix_now_ms()).await
    }

    /// Serves on `listener`, refusing requests signed before `started` (UNIX ms).
    async fn serve(
        cfg: ClusterConfig,
        listener: TcpListener,
        opts: CoordinatorOptions,
        started: u64,
    ) -> Result<RunningCoordinator, CoordError> {
        let addr = listener.local_addr()?;
        let now = Instant::now();
        let mut state = State::new(&cfg, &opts, now)?;
        if let Some(path) = &opts.state_file {
            if let Some(stored) = state_file::read(path).map_err(CoordError::StateFile)? {
                let start = state.epoch;
                state = State::from_stored(&cfg, &opts, &stored, now)?;
                state.epoch = start.max(stored.epoch.saturating_add(1));
                eprintln!(
                    "ecdn coordinator: state from {} ({} members)",
                    path.display(),
                    state.members.len()
                );
            }
        }
        let first = publish(&state);
        eprintln!(
            "ecdn coordinator: {} nodes, scheme {}, {} buckets; epoch {}; listening on {addr}",
            cfg.nodes.len(),
            cfg.scheme_name(),
            cfg.buckets,
            state.epoch
        );
        let (published, _) = watch::channel(first);
        let (stop, shutdown) = watch::channel(false);
        let heartbeat_limit = 4096
            + cfg.buckets * cfg.p.max(1) * 64
            + crate::heartbeat::MAX_OBJECT_READS * (ecdn_objects::meta::MAX_NAME + 32);
        let shared = Arc::new(Shared {
            key: cfg.cluster_key(),
            peer_tls: cfg.peer_tls().cloned(),
            gate: Gate::with_memory(
                cfg.cluster_key(),
                &[addr, cfg.coordinator],
                crate::replay::NONCE_MEMORY,
                started,
            ),
            opts,
            heartbeat_limit,
            state: Mutex::new(state),
            published,
            shutdown,
        });
        // The state as this start made it (the stored one, or the cluster file's).
        shared.keep(&shared.state());
        let mut tasks = JoinSet::new();
        let tick = Duration::from_millis((cfg.heartbeat_ms / 5).max(1));
        tasks.spawn(expiry_loop(shared.clone(), tick));
        if cfg.scheme == Scheme::C2dn && cfg.rebalance_every_s > 0.0 {
            let every = Duration::from_secs_f64(cfg.rebalance_every_s);
            tasks.spawn(rebalance_loop(shared.clone(), every));
        }
        if cfg.object_budget_every_s > 0.0 {
            let every = Duration::from_secs_f64(cfg.object_budget_every_s);
            let peers = crate::peer::PeerClient::for_cluster(&cfg);
            let fraction = cfg.object_budget;
            tasks.spawn(object_budget::budget_loop(
                shared.clone(),
                peers,
                every,
                fraction,
            ));
        }
        let handler = {
            let shared = shared.clone();
            move |req| {
                let shared = shared.clone();
                async move { handle(&shared, req).await }
            }
        };
        // Nodes and operators sign their requests; with `[peer_tls]` they also present a
        // certificate of the cluster's CA.
        let tls = shared.peer_tls.clone().map(crate::mtls::ListenerTls::Peer);
        tasks.spawn(accept_loop_tls(
            shared.shutdown.clone(),
            listener,
            tls,
            handler,
        ));
        Ok(RunningCoordinator {
            addr,
            shared,
            stop,
            tasks,
        })
    }
}

/// A coordinator serving in the background; dropping it stops it too.
pub struct RunningCoordinator {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
}

impl RunningCoordinator {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The current map.
    pub fn map(&self) -> Arc<BucketMap> {
        self.shared.published.borrow().map.clone()
    }

    /// The current map's epoch and when it was published.
    pub fn published(&self) -> (u64, Instant) {
        let p = self.shared.published.borrow();
        (p.map.epoch, p.at)
    }

    /// Serves the cluster's status page on `listener` (see `status_page.rs`) until the
    /// coordinator stops; a listener beyond loopback needs `token`, and a token must pass
    /// [`crate::bearer::check_admin_token`].
    pub fn serve_admin(
        &mut self,
        listener: TcpListener,
        token: Option<String>,
    ) -> Result<SocketAddr, CoordError> {
        self.serve_admin_with(listener, token, None)
    }

    /// [`RunningCoordinator::serve_admin`], over mutual TLS when `tls` is given (only clients
    /// with a certificate its CA signed get past the handshake; then no token is needed beyond
    /// loopback).
    pub fn serve_admin_with(
        &mut self,
        listener: TcpListener,
        token: Option<String>,
        tls: Option<&crate::mtls::AdminTls>,
    ) -> Result<SocketAddr, CoordError> {
        let source = status_source::Source::Embedded(self.shared.clone());
        let (addr, page) = admin_page(listener, token, tls, source)?;
        self.tasks.spawn(page);
        Ok(addr)
    }

    /// The current status (what `GET /coord/status` answers).
    pub fn status(&self) -> Status {
        self.shared.state().status(Instant::now())
    }

    /// Stops accepting, answers the requests in flight (long polls with `503`) and waits for
    /// the connections to close (at most about two seconds).
    pub async fn shutdown(mut self) {
        self.stop.send_replace(true);
        let drain = async { while self.tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(Duration::from_secs(3), drain)
            .await
            .is_err()
        {
            self.tasks.abort_all();
        }
    }
}

impl Drop for RunningCoordinator {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        self.tasks.abort_all();
    }
}

pub(crate) async fn stopped(mut rx: watch::Receiver<bool>) {
    // An error means the sender is gone: stop as well.
    let _ = rx.wait_for(|&s| s).await;
}

/// Runs `step` on the state at every tick of `interval` (publishing what it changed) until
/// the coordinator stops.
async fn on_ticks(
    shared: Arc<Shared>,
    mut interval: tokio::time::Interval,
    step: impl Fn(&mut State) -> Vec<RebalanceEvent>,
) {
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let stop = stopped(shared.shutdown.clone());
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => return,
            _ = interval.tick() => {}
        }
        let mut state = shared.state();
        let events = step(&mut state);
        if !events.is_empty() {
            shared.publish(&state, &events);
        }
    }
}

/// Marks nodes whose heartbeats stopped unavailable.
async fn expiry_loop(shared: Arc<Shared>, tick: Duration) {
    on_ticks(shared, tokio::time::interval(tick), |state| {
        state.expire(Instant::now())
    })
    .await
}

/// The periodic parity rebalance: the first a tenth of a period after the start, as the
/// simulator's ([`ecdn_placement::FIRST_REBALANCE_AFTER`]), then every period.
async fn rebalance_loop(shared: Arc<Shared>, every: Duration) {
    let first = tokio::time::Instant::now() + every.mul_f64(ecdn_placement::FIRST_REBALANCE_AFTER);
    on_ticks(shared, tokio::time::interval_at(first, every), |state| {
        vec![state.periodic_rebalance()]
    })
    .await
}

async fn handle(shared: &Shared, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let verified = match shared.gate.admit(&parts, unix_now_ms()) {
        Ok(v) => v,
        Err(e) => {
            shared.state().unauthorized += 1;
            return text(StatusCode::UNAUTHORIZED, e.to_string());
        }
    };
    // Every JSON answer is bound to the request it answers.
    let request = *verified.signature();
    let pq = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path().to_string(), |p| p.as_str().to_string());
    let mut resp = handle_admitted(shared, parts, body, verified).await;
    crate::peer::sign_answer(&shared.key, &pq, &request, &mut resp);
    resp
}

/// A request [`handle`] admitted.
async fn handle_admitted(
    shared: &Shared,
    parts: hyper::http::request::Parts,
    body: Incoming,
    verified: Verified,
) -> Response<Full<Bytes>> {
    let path = parts.uri.path();
    if path.starts_with(objects::OBJECTS_PREFIX) {
        return object_request(shared, &parts, body, verified).await;
    }
    let limit = match (&parts.method, parts.uri.path()) {
        (&Method::POST, HEARTBEAT_PATH) => shared.heartbeat_limit,
        (&Method::POST, MEMBERS_PATH) => MEMBER_LIMIT,
        (&Method::POST, BALANCER_PATH) => crate::health::BALANCER_LIMIT,
        (&Method::GET, MAP_PATH | STATUS_PATH)
        | (&Method::POST, REBALANCE_PATH | DRAIN_PATH | UNDRAIN_PATH | REMOVE_PATH) => 0,
        (
            _,
            HEARTBEAT_PATH | MAP_PATH | STATUS_PATH | REBALANCE_PATH | MEMBERS_PATH | DRAIN_PATH
            | UNDRAIN_PATH | REMOVE_PATH | BALANCER_PATH,
        ) => return text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed"),
        _ => return text(StatusCode::NOT_FOUND, "no such coordinator endpoint"),
    };
    let body = match read_verified_body(body, limit, &verified).await {
        Ok(b) => b,
        Err(BodyError::Auth(e)) => {
            shared.state().unauthorized += 1;
            return text(StatusCode::UNAUTHORIZED, e.to_string());
        }
        Err(e @ BodyError::TooLarge(_)) => {
            shared.state().bad_requests += 1;
            return text(StatusCode::PAYLOAD_TOO_LARGE, e.to_string());
        }
        Err(e) => return text(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let pq = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or(parts.uri.path());
    match parts.uri.path() {
        HEARTBEAT_PATH => heartbeat(shared, pq, &body),
        BALANCER_PATH => balancer(shared, pq, &body),
        MAP_PATH => map(shared, pq, parts.uri.query()).await,
        REBALANCE_PATH => rebalance_now(shared, pq).await,
        MEMBERS_PATH | DRAIN_PATH | UNDRAIN_PATH | REMOVE_PATH => {
            member_change(shared, pq, parts.uri.path(), parts.uri.query(), &body)
        }
        _ => {
            let status = shared.state().status(Instant::now());
            json_of(&shared.key, pq, &status)
        }
    }
}

fn heartbeat(shared: &Shared, pq: &str, body: &[u8]) -> Response<Full<Bytes>> {
    let hb: Heartbeat = match serde_json::from_slice(body) {
        Ok(hb) => hb,
        Err(e) => {
            shared.state().bad_requests += 1;
            return text(StatusCode::BAD_REQUEST, format!("heartbeat: {e}"));
        }
    };
    let mut state = shared.state();
    match state.heartbeat(&hb, Instant::now()) {
        Ok(event) => {
            if let Some(event) = event {
                shared.publish(&state, &[event]);
            }
            let reply = HeartbeatReply { epoch: state.epoch };
            drop(state);
            json_of(&shared.key, pq, &reply)
        }
        Err(e) => {
            state.bad_requests += 1;
            text(StatusCode::BAD_REQUEST, format!("heartbeat: {e}"))
        }
    }
}

/// A load balancer's report: what it sees of the nodes' client listeners, for the judge
/// ([`crate::health`]). Answers `{"epoch": current}`.
fn balancer(shared: &Shared, pq: &str, body: &[u8]) -> Response<Full<Bytes>> {
    let report: crate::health::BalancerReport = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => {
            shared.state().bad_requests += 1;
            return text(StatusCode::BAD_REQUEST, format!("balancer report: {e}"));
        }
    };
    let mut state = shared.state();
    if let Err(e) = state.balancer_report(report, Instant::now()) {
        state.bad_requests += 1;
        return text(StatusCode::BAD_REQUEST, e);
    }
    let reply = HeartbeatReply { epoch: state.epoch };
    drop(state);
    json_of(&shared.key, pq, &reply)
}

/// `/coord/objects/...` (see [`objects`]).
async fn object_request(
    shared: &Shared,
    parts: &hyper::http::request::Parts,
    body: Incoming,
    verified: crate::auth::Verified,
) -> Response<Full<Bytes>> {
    use ecdn_objects::meta::MetaError;
    use objects::{ObjectAnswer, ObjectOp, VersionReply};
    let path = parts.uri.path();
    match ObjectOp::method_of(path) {
        None => return text(StatusCode::NOT_FOUND, "no such object endpoint"),
        Some(m) if m != parts.method => {
            return text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
        }
        Some(_) => {}
    }
    let body = match read_verified_body(body, ObjectOp::body_limit(path), &verified).await {
        Ok(b) => b,
        Err(BodyError::Auth(e)) => {
            shared.state().unauthorized += 1;
            return text(StatusCode::UNAUTHORIZED, e.to_string());
        }
        Err(e) => {
            shared.state().bad_requests += 1;
            return text(StatusCode::BAD_REQUEST, e.to_string());
        }
    };
    let op = match ObjectOp::from_request(path, parts.uri.query(), &body) {
        Ok(op) => op,
        Err(e) => {
            shared.state().bad_requests += 1;
            return text(StatusCode::BAD_REQUEST, e);
        }
    };
    let pq = parts.uri.path_and_query().map_or(path, |p| p.as_str());
    let answer = shared.state().object_op(op);
    match answer {
        Ok(ObjectAnswer::Version(version)) => json_of(&shared.key, pq, &VersionReply { version }),
        Ok(ObjectAnswer::Record(meta)) => json_of(&shared.key, pq, &*meta),
        Ok(ObjectAnswer::Listed(listed)) => json_of(&shared.key, pq, &listed),
        Err(e @ MetaError::NotFound(_)) => text(StatusCode::NOT_FOUND, e.to_string()),
        Err(e @ MetaError::Stale { .. }) => text(StatusCode::CONFLICT, e.to_string()),
        Err(e) => text(StatusCode::BAD_REQUEST, e.to_string()),
    }
}

/// A membership change's answer: the [`MemberReply`], or why it was refused.
pub(crate) fn member_answer(
    key: &ClusterKey,
    pq: &str,
    result: Result<MemberReply, MemberError>,
) -> Response<Full<Bytes>> {
    match result {
        Ok(reply) => json_of(key, pq, &reply),
        Err(e) if e.is_conflict() => text(StatusCode::CONFLICT, e.to_string()),
        Err(e) => text(StatusCode::BAD_REQUEST, e.to_string()),
    }
}

/// `POST /coord/members`, `/coord/drain?node=N`, `/coord/remove?node=N` (see `members.rs`).
fn member_change(
    shared: &Shared,
    pq: &str,
    path: &str,
    query: Option<&str>,
    body: &[u8],
) -> Response<Full<Bytes>> {
    let op = match MemberOp::from_request(path, query, body) {
        Ok(op) => op,
        Err(e) => {
            shared.state().bad_requests += 1;
            return text(StatusCode::BAD_REQUEST, e);
        }
    };
    let mut state = shared.state();
    let result = state.apply_op(&op, Instant::now()).map(|(node, event)| {
        shared.publish(&state, std::slice::from_ref(&event));
        MemberReply {
            node,
            epoch: state.epoch,
        }
    });
    drop(state);
    member_answer(&shared.key, pq, result)
}

/// `POST /coord/rebalance`: waits for two more heartbeats from every available node (so their
/// loads cover every write that finished before the request; at most the heartbeat deadline),
/// then rebalances parity and publishes the map.
async fn rebalance_now(shared: &Shared, pq: &str) -> Response<Full<Bytes>> {
    let (start, deadline) = {
        let state = shared.state();
        if state.scheme != Scheme::C2dn {
            return text(
                StatusCode::CONFLICT,
                format!(
                    "parity rebalance is C2DN's; this cluster runs {}",
                    state.scheme.name()
                ),
            );
        }
        (state.heard(), state.deadline)
    };
    let until = Instant::now() + deadline;
    let mut stop = std::pin::pin!(stopped(shared.shutdown.clone()));
    loop {
        let now = shared.state().heard();
        let reported = start.iter().zip(&now).all(|(a, b)| match (a, b) {
            (Some(a), Some(b)) => *b >= a + 2,
            // Unavailable now (or before): nothing to wait for.
            _ => true,
        });
        if reported || Instant::now() >= until {
            break;
        }
        tokio::select! {
            _ = &mut stop => {
                return text(StatusCode::SERVICE_UNAVAILABLE, "coordinator shutting down")
            }
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
    }
    let mut state = shared.state();
    let event = state.change("requested".into(), |pl| pl.rebalance());
    shared.publish(&state, std::slice::from_ref(&event));
    let reply = HeartbeatReply { epoch: state.epoch };
    drop(state);
    json_of(&shared.key, pq, &reply)
}

/// `after=E` of a map request's query; `None` without it.
fn after_epoch(query: Option<&str>) -> Result<Option<u64>, String> {
    let mut after = None;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("after", v)) => {
                after = Some(
                    v.parse::<u64>()
                        .map_err(|_| format!("after={v:?}: need an epoch number"))?,
                )
            }
            _ => return Err(format!("unknown query parameter {pair:?}")),
        }
    }
    Ok(after)
}

async fn map(shared: &Shared, pq: &str, query: Option<&str>) -> Response<Full<Bytes>> {
    let after = match after_epoch(query) {
        Ok(a) => a,
        Err(e) => {
            shared.state().bad_requests += 1;
            return text(StatusCode::BAD_REQUEST, e);
        }
    };
    let Some(after) = after else {
        let body = shared.published.borrow().json.clone();
        return json(&shared.key, pq, body);
    };
    let mut rx = shared.published.subscribe();
    let newer = async {
        rx.wait_for(|p| p.map.epoch > after)
            .await
            .map(|p| p.json.clone())
    };
    tokio::select! {
        r = tokio::time::timeout(shared.opts.long_poll, newer) => match r {
            Ok(Ok(body)) => json(&shared.key, pq, body),
            Ok(Err(_)) => text(StatusCode::SERVICE_UNAVAILABLE, "coordinator shutting down"),
            Err(_) => Response::builder()
                .status(StatusCode::NO_CONTENT)
                .body(Full::new(Bytes::new()))
                .expect("a valid response"),
        },
        _ = stopped(shared.shutdown.clone()) => {
            text(StatusCode::SERVICE_UNAVAILABLE, "coordinator shutting down")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_epoch_parses_the_query() {
        assert_eq!(after_epoch(None), Ok(None));
        assert_eq!(after_epoch(Some("after=12")), Ok(Some(12)));
        assert!(after_epoch(Some("after=-1")).is_err());
        assert!(after_epoch(Some("before=1")).is_err());
    }
}
