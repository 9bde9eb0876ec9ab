//! Where a coordinator's status page (`status_page.rs`) gets what it shows, in either mode.
//!
//! * **Embedded**: the coordinator's own state and the map it publishes.
//! * **etcd, leading**: the leader's term loop answers, between its etcd events, with its
//!   state's status and map ([`Command::Page`]), as it answers the operator's API.
//! * **etcd, not leading** (issue 42): read-only data from etcd, the source of truth: the
//!   state the leader last wrote (restored as a new leader would restore it, then asked for its
//!   status), the current map (the whole map and its diff, `crate::etcd_map`) and the leader's
//!   name. A follower's page therefore shows what the next leader would start from, and says
//!   who leads; it needs no answer from the leader, so it works while the leader is down.
//!
//! [`Role`] says which of these a page shows, so the operator knows whether the node table's
//! live columns (heartbeats, loads since the last write) are the leader's or stored ones.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::{mpsc, oneshot, watch};

use super::etcd_api::{Answer, Ask, Command, EtcdCoordinatorStatus};
use super::etcd_stored::Stored;
use super::state::State;
use super::{CoordinatorOptions, Shared, Status};
use crate::config::ClusterConfig;
use crate::etcd::{connect, get_prefix, Keys};
use crate::etcd_map::MapFollower;
use crate::map::BucketMap;
use crate::peer::PeerClient;

/// How long a page waits for the leader's term loop or for etcd.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// Which coordinator's view a page shows.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Role {
    /// `embedded`, `leader` (etcd mode, this coordinator leads) or `follower` (etcd mode,
    /// read-only data from etcd).
    pub mode: &'static str,
    /// This coordinator's name (etcd mode: what the `leader` key says when it leads).
    pub name: Option<String>,
    /// The leading coordinator's name, as etcd says (etcd mode).
    pub leader: Option<String>,
}

/// What a page shows.
pub(super) struct Snapshot {
    pub(super) status: Status,
    pub(super) map: Arc<BucketMap>,
    pub(super) role: Role,
}

/// An etcd-mode coordinator's side of its page.
pub(super) struct EtcdView {
    pub(super) cfg: ClusterConfig,
    pub(super) opts: CoordinatorOptions,
    pub(super) name: String,
    pub(super) status: Arc<Mutex<EtcdCoordinatorStatus>>,
    pub(super) asks: mpsc::Sender<Ask>,
    /// Kept between polls; reconnected after an error.
    pub(super) client: tokio::sync::Mutex<Option<etcd_client::Client>>,
    pub(super) shutdown: watch::Receiver<bool>,
}

/// Where a page's data comes from.
pub(super) enum Source {
    Embedded(Arc<Shared>),
    Etcd(Arc<EtcdView>),
}

impl Source {
    /// The client the page asks the nodes with: the cluster's key ring and `[peer_tls]`.
    pub(super) fn peers(&self) -> PeerClient {
        match self {
            Source::Embedded(s) => PeerClient::with_tls(s.key.clone(), s.peer_tls.as_ref()),
            Source::Etcd(v) => PeerClient::for_cluster(&v.cfg),
        }
    }

    pub(super) fn shutdown(&self) -> watch::Receiver<bool> {
        match self {
            Source::Embedded(s) => s.shutdown.clone(),
            Source::Etcd(v) => v.shutdown.clone(),
        }
    }

    /// The status and map to show now.
    pub(super) async fn snapshot(&self) -> Result<Snapshot, String> {
        match self {
            Source::Embedded(shared) => Ok(Snapshot {
                status: shared.state().status(Instant::now()),
                map: shared.published.borrow().map.clone(),
                role: Role {
                    mode: "embedded",
                    name: None,
                    leader: None,
                },
            }),
            Source::Etcd(view) => view.snapshot().await,
        }
    }
}

impl EtcdView {
    fn leading(&self) -> bool {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .leading
    }

    async fn snapshot(&self) -> Result<Snapshot, String> {
        if self.leading() {
            if let Some(s) = self.leaders_view().await {
                return Ok(s);
            }
            // The term ended meanwhile: what etcd holds is what a follower shows.
        }
        let got = tokio::time::timeout(ANSWER_TIMEOUT, self.stored_view()).await;
        let got = got.unwrap_or_else(|_| Err("etcd did not answer in time".into()));
        if got.is_err() {
            // The next poll connects afresh (perhaps to another member).
            *self.client.lock().await = None;
        }
        got
    }

    /// The leader's own state, from its term loop; `None` if the term ended.
    async fn leaders_view(&self) -> Option<Snapshot> {
        let (tx, rx) = oneshot::channel();
        self.asks.send((Command::Page, tx)).await.ok()?;
        match tokio::time::timeout(ANSWER_TIMEOUT, rx).await {
            Ok(Ok(Answer::Page(status, map))) => Some(Snapshot {
                status: *status,
                map: Arc::new(*map),
                role: Role {
                    mode: "leader",
                    name: Some(self.name.clone()),
                    leader: Some(self.name.clone()),
                },
            }),
            _ => None,
        }
    }

    /// Read-only data from etcd: the stored state, the map, the leader's name.
    async fn stored_view(&self) -> Result<Snapshot, String> {
        let mut slot = self.client.lock().await;
        if slot.is_none() {
            *slot = Some(
                connect(&self.cfg.etcd)
                    .await
                    .map_err(|e| format!("connect to etcd: {e}"))?,
            );
        }
        let client = slot.as_mut().expect("connected above");
        let keys = Keys::new(&self.cfg);
        let key = self.cfg.cluster_key();
        let (kvs, _) = get_prefix(client, &keys.map())
            .await
            .map_err(|e| format!("get map: {e}"))?;
        let map = MapFollower::default()
            .snapshot(&keys, &key, &kvs)?
            .ok_or("etcd holds no map yet (no coordinator has led)")?;
        let stored = client
            .get(keys.state(), None)
            .await
            .map_err(|e| format!("get state: {e}"))?;
        let value = stored
            .kvs()
            .first()
            .ok_or("etcd holds no state yet (no coordinator has led)")?
            .value();
        let stored = Stored::from_value(value)?;
        let now = Instant::now();
        let state = State::from_stored(&self.cfg, &self.opts, &stored.state, now)
            .map_err(|e| format!("the stored state: {e}"))?;
        let leader = client
            .get(keys.leader(), None)
            .await
            .map_err(|e| format!("get leader: {e}"))?
            .kvs()
            .first()
            .map(|kv| String::from_utf8_lossy(kv.value()).into_owned());
        let mut status = state.status(now);
        status.epoch = map.epoch;
        status.leader.clone_from(&leader);
        Ok(Snapshot {
            status,
            map: Arc::new(map),
            role: Role {
                mode: "follower",
                name: Some(self.name.clone()),
                leader,
            },
        })
    }
}
