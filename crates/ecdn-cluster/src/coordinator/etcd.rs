//! `ecdn coordinator` in etcd mode: several coordinators, one leading.
//!
//! Every coordinator campaigns for the `leader` key (`crate::etcd::Keys`): a transaction puts
//! it under the coordinator's lease only if it does not exist, so at most one holds it; the
//! others watch it and campaign again when it is deleted (the leader's lease lapsed: it died,
//! or lost etcd). The leader
//!
//! 1. continues from the `state` key if there is one (the placement's state, the moved slots,
//!    the counters, and the load totals consumed — [`Stored`]), else starts a fresh placement
//!    as the embedded coordinator does (nodes get the start grace to register);
//! 2. reads the registrations (`nodes/`) and load totals (`loads/`) and watches both from the
//!    revision it read them at: a registration appearing makes a node available, its deletion
//!    (the node's lease lapsed) unavailable — each through the same `State` decisions (the
//!    placement's App. 10.3 procedures and parity rebalance) — and a load total's growth since
//!    the consumed one is recorded for the next rebalance;
//! 3. writes every new map, sealed with the cluster key, together with `state`, in one
//!    transaction that succeeds only while `leader` is still under its own lease: a coordinator
//!    that lost the leadership can never overwrite a newer leader's map. The map's epoch is
//!    the revision of that write.
//!
//! A leader whose lease keep-alive or watch fails (most often: the etcd member it talks to
//! died) reconnects to another member and resumes its lease; if etcd still has the lease and
//! the leader key is still its own, it goes on leading, watching from where it stopped, with no
//! new term and no wait for the lease to lapse. Otherwise, and when a write fails, it stops
//! leading and campaigns again; the nodes keep serving with the last map meanwhile. While etcd cannot be reached,
//! campaigns back off up to the lease time and a streak of failures is logged at its 1st, 2nd,
//! 4th… failure, not at every attempt (`campaign_backoff.rs`). A term that panics (a bug) is
//! caught (`catch_panic.rs`): its lease is revoked, so leadership passes at once rather than
//! when the lease lapses, the panic is logged, and the coordinator campaigns again.
//!
//! With [`EtcdCoordinator::start_with_api`] every coordinator also serves the operator's API
//! (`etcd_api.rs`): status and membership changes, answered by the leader's term loop between
//! its etcd events, so they are ordered with them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ecdn_placement::pieces::Scheme;
use etcd_client::{
    Client, Compare, CompareOp, EventType, PutOptions, Txn, TxnOp, TxnOpResponse, WatchOptions,
};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use super::campaign_backoff::CampaignBackoff;
use super::catch_panic::catch_panic;
use super::etcd_api::{Answer, Api, Ask, Command};
pub use super::etcd_api::{EtcdCoordinatorStatus, MapWrites};
pub use super::etcd_stored::{Consumed, Stored};
use super::state::State;
use super::status_source::{EtcdView, Source};
use super::{accept_loop_tls, CoordinatorOptions, MemberReply, RebalanceEvent};
use crate::auth::ClusterKey;
use crate::config::ClusterConfig;
use crate::etcd::{get_prefix, Keys, Lease, LoadReport};
use crate::etcd_map::MapPublisher;
use crate::replay::Gate;

/// A running etcd-mode coordinator; dropping it stops it (its lease then lapses).
pub struct EtcdCoordinator {
    status: Arc<Mutex<EtcdCoordinatorStatus>>,
    task: tokio::task::JoinHandle<()>,
    /// What its status page reads (`status_source.rs`).
    view: Arc<EtcdView>,
    /// Tells the API's and the status page's listeners to stop.
    stop: watch::Sender<bool>,
    api: Option<std::net::SocketAddr>,
    /// The API's and the status page's accept loops.
    listeners: Vec<tokio::task::JoinHandle<()>>,
}

impl EtcdCoordinator {
    /// Starts campaigning with the cluster file's `etcd` endpoints; `name` is what the
    /// `leader` key will say. No API: see [`EtcdCoordinator::start_with_api`].
    pub fn start(cfg: ClusterConfig, opts: CoordinatorOptions, name: String) -> EtcdCoordinator {
        EtcdCoordinator::launch(cfg, opts, name)
    }

    /// Starts campaigning and serves the operator's API (`etcd_api.rs`) on `listener`; its
    /// address is this coordinator's name in the `leader` key. Requests signed before this
    /// call are refused (see [`crate::replay`]).
    pub fn start_with_api(
        cfg: ClusterConfig,
        opts: CoordinatorOptions,
        listener: TcpListener,
    ) -> std::io::Result<EtcdCoordinator> {
        let addr = listener.local_addr()?;
        let mut c = EtcdCoordinator::launch(cfg, opts, addr.to_string());
        let api = Arc::new(Api {
            key: c.view.cfg.cluster_key(),
            gate: Gate::new(c.view.cfg.cluster_key(), &[addr]),
            status: c.status.clone(),
            asks: c.view.asks.clone(),
        });
        let handler = move |req| {
            let api = api.clone();
            async move { super::etcd_api::handle(&api, req).await }
        };
        let shutdown = c.view.shutdown.clone();
        let tls = c
            .view
            .cfg
            .peer_tls()
            .cloned()
            .map(crate::mtls::ListenerTls::Peer);
        c.listeners.push(tokio::spawn(accept_loop_tls(
            shutdown, listener, tls, handler,
        )));
        c.api = Some(addr);
        Ok(c)
    }

    fn launch(cfg: ClusterConfig, opts: CoordinatorOptions, name: String) -> EtcdCoordinator {
        let status = Arc::new(Mutex::new(EtcdCoordinatorStatus::default()));
        let (tx, asks) = mpsc::channel(64);
        let (stop, shutdown) = watch::channel(false);
        let view = Arc::new(EtcdView {
            cfg: cfg.clone(),
            opts: opts.clone(),
            name: name.clone(),
            status: status.clone(),
            asks: tx,
            client: tokio::sync::Mutex::new(None),
            shutdown,
        });
        let task = tokio::spawn(campaign_loop(cfg, opts, name, status.clone(), asks));
        EtcdCoordinator {
            status,
            task,
            view,
            stop,
            api: None,
            listeners: Vec::new(),
        }
    }

    /// Serves the cluster's status page on `listener` (`status_page.rs`), whether this
    /// coordinator leads or not (see `status_source.rs`), until it stops; as
    /// [`super::RunningCoordinator::serve_admin`]: beyond loopback it needs `token`.
    pub fn serve_admin(
        &mut self,
        listener: TcpListener,
        token: Option<String>,
    ) -> Result<std::net::SocketAddr, super::CoordError> {
        self.serve_admin_with(listener, token, None)
    }

    /// [`EtcdCoordinator::serve_admin`] over mutual TLS when `tls` is given (see
    /// [`super::RunningCoordinator::serve_admin_with`]).
    pub fn serve_admin_with(
        &mut self,
        listener: TcpListener,
        token: Option<String>,
        tls: Option<&crate::mtls::AdminTls>,
    ) -> Result<std::net::SocketAddr, super::CoordError> {
        let source = Source::Etcd(self.view.clone());
        let (addr, page) = super::admin_page(listener, token, tls, source)?;
        self.listeners.push(tokio::spawn(page));
        Ok(addr)
    }

    /// The API's address, with [`EtcdCoordinator::start_with_api`].
    pub fn api_addr(&self) -> Option<std::net::SocketAddr> {
        self.api
    }

    pub fn status(&self) -> EtcdCoordinatorStatus {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Stops at once (as a crash would, but the process lives on).
    pub fn stop(self) {
        // Drop does it.
    }
}

impl Drop for EtcdCoordinator {
    fn drop(&mut self) {
        self.task.abort();
        self.stop.send_replace(true);
        for t in &self.listeners {
            t.abort();
        }
    }
}

async fn campaign_loop(
    cfg: ClusterConfig,
    opts: CoordinatorOptions,
    name: String,
    status: Arc<Mutex<EtcdCoordinatorStatus>>,
    mut asks: mpsc::Receiver<Ask>,
) {
    let set = |f: &dyn Fn(&mut EtcdCoordinatorStatus)| {
        f(&mut status.lock().unwrap_or_else(|e| e.into_inner()))
    };
    let mut backoff = CampaignBackoff::new(
        Duration::from_millis(cfg.heartbeat_ms.max(200)),
        Duration::from_secs(cfg.etcd_lease_s),
    );
    loop {
        let (err, reached) = match Lease::connect(&cfg).await {
            Ok((client, lease)) => {
                let id = lease.id;
                let term = term(&cfg, &opts, &name, &status, &mut asks, client, lease);
                match catch_panic(term).await {
                    Ok(why) => (why, true),
                    Err(panic) => {
                        // A bug: leadership ends now (the lease is revoked, so another
                        // coordinator need not wait for it to lapse), and the loop goes on.
                        revoke(&cfg, id).await;
                        (
                            format!("the term panicked ({panic}); its lease revoked"),
                            true,
                        )
                    }
                }
            }
            Err(e) => (e, false),
        };
        let (wait, log) = backoff.ended(reached, &err);
        for line in log {
            eprintln!("ecdn coordinator {name}: {line}");
        }
        set(&|s| {
            s.leading = false;
            s.last_error = Some(err.clone());
        });
        tokio::time::sleep(wait).await;
    }
}

/// Revokes lease `id` (its keys go with it), if etcd can be reached within its timeouts.
async fn revoke(cfg: &ClusterConfig, id: i64) {
    if let Ok(mut client) = crate::etcd::connect(&cfg.etcd).await {
        if let Err(e) = client.lease_revoke(id).await {
            eprintln!("ecdn coordinator: etcd: revoking lease {id:x}: {e}");
        }
    }
}

/// One lease (taken by the caller): campaign, and lead while it lasts. Returns why it ended.
async fn term(
    cfg: &ClusterConfig,
    opts: &CoordinatorOptions,
    name: &str,
    status: &Mutex<EtcdCoordinatorStatus>,
    asks: &mut mpsc::Receiver<Ask>,
    mut client: Client,
    mut lease: Lease,
) -> String {
    let keys = Keys::new(cfg);
    // Campaign.
    loop {
        let txn = Txn::new()
            .when([Compare::create_revision(keys.leader(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                keys.leader(),
                name.as_bytes(),
                Some(PutOptions::new().with_lease(lease.id)),
            )])
            .or_else([TxnOp::get(keys.leader(), None)]);
        let resp = match client.txn(txn).await {
            Ok(r) => r,
            Err(e) => return format!("campaign: {e}"),
        };
        if resp.succeeded() {
            break;
        }
        let leader = resp.op_responses().into_iter().find_map(|r| match r {
            TxnOpResponse::Get(g) => g
                .kvs()
                .first()
                .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()),
            _ => None,
        });
        status.lock().unwrap_or_else(|e| e.into_inner()).leader = leader;
        let rev = resp.header().map_or(0, |h| h.revision());
        let mut watch = match client
            .watch(
                keys.leader(),
                Some(WatchOptions::new().with_start_revision(rev + 1)),
            )
            .await
        {
            Ok(w) => w,
            Err(e) => return format!("watch leader: {e}"),
        };
        // Wait for the leader key to go, keeping this lease alive meanwhile.
        loop {
            tokio::select! {
                why = lease.lost() => return why,
                msg = watch.message() => {
                    let msg = match msg {
                        Ok(Some(m)) => m,
                        Ok(None) => return "the leader watch ended".into(),
                        Err(e) => return format!("watch leader: {e}"),
                    };
                    if msg.events().iter().any(|e| e.event_type() == EventType::Delete) {
                        status.lock().unwrap_or_else(|e| e.into_inner()).leader = None;
                        break;
                    }
                }
            }
        }
    }
    {
        let mut s = status.lock().unwrap_or_else(|e| e.into_inner());
        s.leading = true;
        s.terms += 1;
        s.leader = Some(name.to_string());
    }
    eprintln!("ecdn coordinator {name}: leading (lease {:x})", lease.id);
    let mut leader = match Leader::begin(cfg, opts, &keys, &mut client, lease.id).await {
        Ok(l) => l,
        Err(e) => return e,
    };
    match leader.publish(&mut client, &[]).await {
        Ok(written) => note_written(status, leader.state.epoch, &written),
        Err(e) => return e,
    }
    let mut watch = match watch_cluster(&mut client, cfg, leader.read_at).await {
        Ok(w) => w,
        Err(e) => return format!("watch: {e}"),
    };
    let mut grace = tokio::time::interval(Duration::from_millis(cfg.heartbeat_ms.max(100)));
    // Every event up to this revision has been applied (a resumed watch starts after it).
    let mut seen = leader.read_at;
    loop {
        let lost = tokio::select! {
            why = lease.lost() => why,
            _ = grace.tick() => {
                let mut events = leader.end_of_grace();
                if leader.grace_until.is_none() {
                    events.extend(leader.state.judge_tick(Instant::now()));
                }
                if let Err(e) = publish(&mut leader, &mut client, status, &events).await {
                    return e;
                }
                if leader.key.generation() != leader.sealed_under {
                    // The key rotated (SIGHUP): the map goes whole again, sealed with the key
                    // that signs now, so it opens once the old key is no longer accepted.
                    leader.sealed_under = leader.key.generation();
                    leader.maps.rebase();
                    match leader.publish(&mut client, &[]).await {
                        Ok(written) => note_written(status, leader.state.epoch, &written),
                        Err(e) => return e,
                    }
                    eprintln!(
                        "ecdn coordinator {name}: the cluster key rotated; the map written \
                         whole again at epoch {}",
                        leader.state.epoch
                    );
                    // And EC-Cache's object records, in the background.
                    let (mut c, keys, key) =
                        (client.clone(), leader.keys.clone(), leader.key.clone());
                    let who = name.to_string();
                    tokio::spawn(async move {
                        match crate::objects::reseal(&mut c, &keys, &key).await {
                            Ok(r) => eprintln!(
                                "ecdn coordinator {who}: {} object records sealed again with \
                                 the new key ({} already were, {} skipped)",
                                r.records, r.current, r.skipped
                            ),
                            Err(e) => eprintln!(
                                "ecdn coordinator {who}: sealing the object records again \
                                 failed: {e} (they open until the old key is dropped; \
                                 rotate again to retry)"
                            ),
                        }
                    });
                }
                continue;
            }
            Some((command, reply)) = asks.recv() => {
                let (answer, events) = leader.command(command, name);
                if events.is_empty() {
                    let _ = reply.send(answer);
                    continue;
                }
                match leader.publish(&mut client, &events).await {
                    Ok(written) => note_written(status, leader.state.epoch, &written),
                    Err(e) => return e,
                }
                let answer = match answer {
                    Answer::Member(Ok(r)) => Answer::Member(Ok(MemberReply {
                        node: r.node,
                        epoch: leader.state.epoch,
                    })),
                    Answer::Epoch(_) => Answer::Epoch(leader.state.epoch),
                    other => other,
                };
                let _ = reply.send(answer);
                continue;
            }
            msg = watch.message() => match msg {
                Ok(Some(msg)) if msg.canceled() => {
                    format!("watch canceled: {}", msg.cancel_reason())
                }
                Ok(Some(msg)) => {
                    let mut events = Vec::new();
                    for ev in msg.events() {
                        if let Some(kv) = ev.kv() {
                            let put = ev.event_type() == EventType::Put;
                            events.extend(leader.apply(kv.key(), put.then(|| kv.value())));
                        }
                    }
                    if let Some(h) = msg.header() {
                        seen = seen.max(h.revision());
                    }
                    if let Err(e) = publish(&mut leader, &mut client, status, &events).await {
                        return e;
                    }
                    continue;
                }
                Ok(None) => "the watch ended".into(),
                Err(e) => format!("watch: {e}"),
            },
        };
        // The lease's keep-alive or the watch failed: most often the etcd member this
        // coordinator talks to died. If the lease is still alive and still holds the leader
        // key, go on leading through another member, watching from where this watch stopped.
        let Some((mut c, l)) = resume_leadership(cfg, &keys, name, lease.id).await else {
            return lost;
        };
        match watch_cluster(&mut c, cfg, seen).await {
            Ok(w) => {
                eprintln!(
                    "ecdn coordinator {name}: etcd: {lost}; lease {:x} resumed, still leading",
                    l.id
                );
                status.lock().unwrap_or_else(|e| e.into_inner()).resumed += 1;
                (client, lease, watch) = (c, l, w);
            }
            Err(e) => return format!("{lost}; then watch: {e}"),
        }
    }
}

/// Watches every key of the cluster's prefix written after revision `after`.
async fn watch_cluster(
    client: &mut Client,
    cfg: &ClusterConfig,
    after: i64,
) -> Result<etcd_client::WatchStream, etcd_client::Error> {
    let from = WatchOptions::new()
        .with_prefix()
        .with_start_revision(after + 1);
    client.watch(cfg.etcd_prefix.as_bytes(), Some(from)).await
}

/// Publishes what `events` changed, if anything, and records when it was decided.
async fn publish(
    leader: &mut Leader,
    client: &mut Client,
    status: &Mutex<EtcdCoordinatorStatus>,
    events: &[RebalanceEvent],
) -> Result<(), String> {
    if events.is_empty() {
        return Ok(());
    }
    let decided = Instant::now();
    let written = leader.publish(client, events).await?;
    note_written(status, leader.state.epoch, &written);
    status.lock().unwrap_or_else(|e| e.into_inner()).decided_at = Some(decided);
    Ok(())
}

/// Reconnects to etcd (any member) and resumes lease `id`; `Some` only if etcd still has the
/// lease and the leader key is still this coordinator's under it.
async fn resume_leadership(
    cfg: &ClusterConfig,
    keys: &Keys,
    name: &str,
    id: i64,
) -> Option<(Client, Lease)> {
    let mut client = crate::etcd::connect(&cfg.etcd).await.ok()?;
    let (lease, resumed) = Lease::resume(&mut client, Some(id), cfg.etcd_lease_s)
        .await
        .ok()?;
    if !resumed {
        // A new lease holding nothing: it lapses by itself.
        return None;
    }
    let got = client.get(keys.leader(), None).await.ok()?;
    let kv = got.kvs().first()?;
    (kv.lease() == id && kv.value() == name.as_bytes()).then_some((client, lease))
}

/// The status after a write of the map of `epoch`.
fn note_written(status: &Mutex<EtcdCoordinatorStatus>, epoch: u64, written: &Written) {
    let mut s = status.lock().unwrap_or_else(|e| e.into_inner());
    s.epoch = epoch;
    let w = &mut s.writes;
    if written.whole {
        w.whole_maps += 1;
        w.whole_map_bytes += written.map_bytes;
    } else {
        w.diffs += 1;
        w.diff_bytes += written.map_bytes;
    }
    w.state_bytes += written.state_bytes;
}

/// The leader's state during one term.
struct Leader {
    keys: Keys,
    key: ClusterKey,
    lease: i64,
    state: State,
    consumed: BTreeMap<usize, Consumed>,
    /// Nodes registered now.
    registered: Vec<bool>,
    /// A fresh placement: nodes not registered by then become unavailable.
    grace_until: Option<Instant>,
    /// The revision the registrations and loads were read at.
    read_at: i64,
    /// The whole map in etcd, which the next maps are diffs from.
    maps: MapPublisher,
    /// The key's generation the whole map in etcd was sealed under.
    sealed_under: u64,
}

impl Leader {
    async fn begin(
        cfg: &ClusterConfig,
        opts: &CoordinatorOptions,
        keys: &Keys,
        client: &mut Client,
        lease: i64,
    ) -> Result<Leader, String> {
        let now = Instant::now();
        let stored = client
            .get(keys.state(), None)
            .await
            .map_err(|e| format!("get state: {e}"))?;
        let (state, consumed, grace_until) = match stored.kvs().first() {
            Some(kv) => {
                let s = Stored::from_value(kv.value())?;
                let st = State::from_stored(cfg, opts, &s.state, now)
                    .map_err(|e| format!("the stored state: {e}"))?;
                (st, s.consumed, None)
            }
            None => {
                let st = State::new(cfg, opts, now).map_err(|e| format!("placement: {e}"))?;
                let grace = st.deadline.max(opts.start_grace);
                (st, BTreeMap::new(), Some(now + grace))
            }
        };
        let whole = client
            .get(keys.map(), None)
            .await
            .map_err(|e| format!("get map: {e}"))?;
        let maps = MapPublisher::continuing(
            &cfg.cluster_key(),
            whole
                .kvs()
                .first()
                .map(|kv| (kv.value(), kv.mod_revision())),
        );
        let n = state.members.len();
        let mut leader = Leader {
            keys: keys.clone(),
            key: cfg.cluster_key(),
            lease,
            state,
            consumed,
            registered: vec![false; n],
            grace_until,
            read_at: 0,
            maps,
            sealed_under: cfg.cluster_key().generation(),
        };
        let (nodes, rev) = get_prefix(client, &keys.nodes())
            .await
            .map_err(|e| format!("get nodes: {e}"))?;
        let (loads, _) = get_prefix(client, &keys.loads())
            .await
            .map_err(|e| format!("get loads: {e}"))?;
        let (healths, _) = get_prefix(client, &keys.healths())
            .await
            .map_err(|e| format!("get health: {e}"))?;
        leader.read_at = rev;
        for (k, v, _) in healths.iter().chain(&nodes).chain(&loads) {
            leader.apply(k, Some(v));
        }
        if leader.grace_until.is_none() {
            // Continuing: whoever is not registered now is unavailable now.
            for node in 0..n {
                if !leader.registered[node] {
                    leader.state.set_presence(node, false);
                }
            }
        }
        Ok(leader)
    }

    /// Applies one key's put (`Some(value)`) or deletion; returns the availability change.
    fn apply(&mut self, key: &[u8], value: Option<&[u8]>) -> Option<RebalanceEvent> {
        if let Some(node) = self.keys.id_of(key, &self.keys.nodes()) {
            let present = value.is_some();
            *self.registered.get_mut(node)? = present;
            return self.state.set_presence(node, present);
        }
        if let Some(node) = self.keys.id_of(key, &self.keys.healths()) {
            if node < self.state.members.len() {
                // A deleted key (its lease lapsed) is no view at all.
                let views: Vec<crate::health::PeerView> = match value {
                    None => Vec::new(),
                    Some(v) => match serde_json::from_slice(v) {
                        Ok(views) => views,
                        Err(e) => {
                            eprintln!("ecdn coordinator: etcd: health of node {node}: {e}");
                            return None;
                        }
                    },
                };
                self.state.peer_views(node, &views);
            }
            return None;
        }
        if let (Some(node), Some(v)) = (self.keys.id_of(key, &self.keys.loads()), value) {
            let report: LoadReport = match serde_json::from_slice(v) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("ecdn coordinator: etcd: load report of node {node}: {e}");
                    return None;
                }
            };
            if report.node != node {
                return None;
            }
            let mut consumed = self.consumed.get(&node).cloned().unwrap_or_default();
            let hb = consumed.take_growth(&report);
            match self.state.record_loads(&hb) {
                Ok(()) => {
                    self.consumed.insert(node, consumed);
                }
                Err(e) => eprintln!("ecdn coordinator: etcd: load report of node {node}: {e}"),
            }
        }
        None
    }

    /// Carries out an operator's command; returns the answer (its epoch is filled in after
    /// the publication) and the events to publish.
    fn command(&mut self, command: Command, name: &str) -> (Answer, Vec<RebalanceEvent>) {
        match command {
            Command::Status => {
                let mut status = self.state.status(Instant::now());
                status.leader = Some(name.to_string());
                (Answer::Status(Box::new(status)), Vec::new())
            }
            Command::Page => {
                let mut status = self.state.status(Instant::now());
                status.leader = Some(name.to_string());
                let map = Box::new(self.state.map());
                (Answer::Page(Box::new(status), map), Vec::new())
            }
            Command::Member(op) => match self.state.apply_op(&op, Instant::now()) {
                Ok((node, event)) => {
                    let n = self.state.members.len();
                    self.registered.resize(n, false);
                    let reply = MemberReply {
                        node,
                        epoch: event.epoch,
                    };
                    (Answer::Member(Ok(reply)), vec![event])
                }
                Err(e) => (Answer::Member(Err(e)), Vec::new()),
            },
            Command::Rebalance if self.state.scheme != Scheme::C2dn => (
                Answer::Refused(format!(
                    "parity rebalance is C2DN's; this cluster runs {}",
                    self.state.scheme.name()
                )),
                Vec::new(),
            ),
            Command::Rebalance => {
                let event = self.state.change("requested".into(), |pl| pl.rebalance());
                (Answer::Epoch(event.epoch), vec![event])
            }
            Command::Balancer(report) => match self.state.balancer_report(report, Instant::now()) {
                Ok(()) => (Answer::Epoch(self.state.epoch), Vec::new()),
                Err(e) => (Answer::Refused(e), Vec::new()),
            },
        }
    }

    /// At the end of a fresh placement's start grace: the nodes not registered are unavailable.
    fn end_of_grace(&mut self) -> Vec<RebalanceEvent> {
        match self.grace_until {
            Some(t) if Instant::now() >= t => {
                self.grace_until = None;
                (0..self.registered.len())
                    .filter(|&n| !self.registered[n])
                    .filter_map(|n| self.state.set_presence(n, false))
                    .collect()
            }
            _ => Vec::new(),
        }
    }

    /// Writes the map (a diff from the whole map in etcd while it is small, see
    /// `crate::etcd_map`) and the state while this coordinator still leads; the map's epoch is
    /// the revision written. Returns what was written.
    async fn publish(
        &mut self,
        client: &mut Client,
        events: &[RebalanceEvent],
    ) -> Result<Written, String> {
        let map = self.state.map();
        let stored = Stored {
            state: self.state.stored(),
            consumed: self.consumed.clone(),
        };
        let prepared = self.maps.prepare(&self.key, map);
        let state = stored.to_value();
        let written = Written {
            whole: prepared.whole,
            map_bytes: prepared.value.len() as u64,
            state_bytes: state.len() as u64,
        };
        let mut ops = prepared.ops(&self.keys);
        ops.push(TxnOp::put(self.keys.state(), state, None));
        let txn = Txn::new()
            .when([Compare::lease(
                self.keys.leader(),
                CompareOp::Equal,
                self.lease,
            )])
            .and_then(ops);
        let resp = client
            .txn(txn)
            .await
            .map_err(|e| format!("write map: {e}"))?;
        if !resp.succeeded() {
            return Err("no longer the leader".into());
        }
        let rev = resp.header().map_or(0, |h| h.revision());
        self.maps.written(prepared, rev);
        self.state.epoch = u64::try_from(rev).unwrap_or(0);
        for e in events {
            eprintln!(
                "ecdn coordinator: epoch {rev}: {}: moved {} data and {} parity buckets in {} us; \
                 wrote {} ({} bytes) and the state ({} bytes)",
                e.trigger,
                e.moved_data,
                e.moved_parity,
                e.elapsed_us,
                if written.whole {
                    "the whole map"
                } else {
                    "a map diff"
                },
                written.map_bytes,
                written.state_bytes,
            );
        }
        Ok(written)
    }
}

/// What one publication wrote.
struct Written {
    whole: bool,
    map_bytes: u64,
    state_bytes: u64,
}
