//! The operator's side of the coordinator's API (`ecdn cluster status|add|drain|remove`, the
//! cluster demo): signed requests, signed answers, and the way to the leader.
//!
//! In embedded mode the API is at the cluster file's `coordinator` address. In etcd mode it is
//! at the leading coordinator's address, which the `leader` key in etcd names; a coordinator
//! that does not lead answers `503` with `x-ecdn-leader`, which the client follows once.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use hyper::{Method, StatusCode};
use serde::de::DeserializeOwned;

use ecdn_objects::meta::{Listed, ObjectMeta, ObjectName};

use super::objects::{self, VersionReply};
use super::{
    HeartbeatReply, MemberOp, MemberReply, Status, BALANCER_PATH, DRAIN_PATH, MEMBERS_PATH,
    REBALANCE_PATH, REMOVE_PATH, STATUS_PATH, UNDRAIN_PATH,
};
use crate::auth::{unix_now_ms, ClusterKey};
use crate::config::ClusterConfig;
use crate::peer::{read_body, verify_response, PeerClient};

/// Why a call failed: the coordinator's refusal (with its status), or no usable answer.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct CallError {
    /// The status the coordinator answered with, if it answered.
    pub status: Option<StatusCode>,
    pub message: String,
}

impl From<String> for CallError {
    fn from(message: String) -> CallError {
        CallError {
            status: None,
            message,
        }
    }
}

impl From<&str> for CallError {
    fn from(message: &str) -> CallError {
        CallError::from(message.to_string())
    }
}

/// A client of one cluster's coordinator API.
#[derive(Clone)]
pub struct CoordinatorClient {
    peers: PeerClient,
    addr: SocketAddr,
}

/// Limit on an answer's body (a status of thousands of nodes fits).
const ANSWER_LIMIT: usize = 16 << 20;
/// Time limit of an object metadata request.
const T: Duration = Duration::from_secs(5);

impl CoordinatorClient {
    /// A client of the coordinator at `addr`, over plain TCP.
    pub fn new(key: &[u8], addr: SocketAddr) -> CoordinatorClient {
        CoordinatorClient {
            peers: PeerClient::new(ClusterKey::new(key)),
            addr,
        }
    }

    /// A client of the embedded coordinator of the cluster of `cfg` (its `coordinator`
    /// address), with its key ring and its `[peer_tls]`.
    pub fn of_embedded(cfg: &ClusterConfig) -> CoordinatorClient {
        CoordinatorClient {
            peers: PeerClient::for_cluster(cfg),
            addr: cfg.coordinator,
        }
    }

    /// A client of the cluster's leading coordinator: the `coordinator` address, or in etcd
    /// mode the address the `leader` key names.
    pub async fn for_cluster(cfg: &ClusterConfig) -> Result<CoordinatorClient, CallError> {
        let addr = if cfg.etcd.is_empty() {
            cfg.coordinator
        } else {
            let name = crate::etcd::leader_name(cfg)
                .await?
                .ok_or("no coordinator leads (the leader key in etcd is empty)")?;
            name.parse().map_err(|_| {
                format!(
                    "the leader is {name:?}, not an API address (a coordinator started with \
                     --listen names itself by it)"
                )
            })?
        };
        Ok(CoordinatorClient {
            peers: PeerClient::for_cluster(cfg),
            addr,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A signed request and its signed JSON answer; follows a non-leader's `x-ecdn-leader`
    /// once.
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path_and_query: &str,
        body: Bytes,
        timeout: Duration,
    ) -> Result<T, CallError> {
        let mut addr = self.addr;
        for attempt in 0..2 {
            let resp = self
                .peers
                .send(
                    addr,
                    method.clone(),
                    path_and_query,
                    body.clone(),
                    &[],
                    timeout,
                )
                .await
                .map_err(|e| format!("{addr}{path_and_query}: {e}"))?;
            let (parts, resp_body) = resp.into_parts();
            let leader = parts
                .headers
                .get("x-ecdn-leader")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<SocketAddr>().ok());
            let resp_body = read_body(resp_body, ANSWER_LIMIT)
                .await
                .map_err(|e| format!("{path_and_query}: {e}"))?;
            match (parts.status, leader) {
                (StatusCode::SERVICE_UNAVAILABLE, Some(l)) if attempt == 0 && l != addr => {
                    addr = l;
                    continue;
                }
                (s, _) if !s.is_success() => {
                    return Err(CallError {
                        status: Some(s),
                        message: format!(
                            "{path_and_query} answered {s}: {}",
                            String::from_utf8_lossy(&resp_body).trim()
                        ),
                    })
                }
                _ => {}
            }
            verify_response(
                self.peers.key(),
                path_and_query,
                &parts,
                &resp_body,
                unix_now_ms(),
            )
            .map_err(|e| format!("{path_and_query}: the answer's signature: {e}"))?;
            return serde_json::from_slice(&resp_body)
                .map_err(|e| format!("{path_and_query}: not the expected JSON: {e}").into());
        }
        Err(format!("{path_and_query}: the leader moved twice").into())
    }

    /// `GET /coord/status`.
    pub async fn status(&self) -> Result<Status, CallError> {
        let t = Duration::from_secs(5);
        self.call(Method::GET, STATUS_PATH, Bytes::new(), t).await
    }

    /// `POST /coord/balancer`: a load balancer's view of the nodes' client listeners; the
    /// current epoch.
    pub async fn balancer_report(
        &self,
        report: &crate::health::BalancerReport,
    ) -> Result<u64, CallError> {
        let body = Bytes::from(serde_json::to_vec(report).expect("a report serializes"));
        let reply: HeartbeatReply = self.call(Method::POST, BALANCER_PATH, body, T).await?;
        Ok(reply.epoch)
    }

    /// `POST /coord/rebalance`; the epoch of the map it published.
    pub async fn rebalance(&self) -> Result<u64, CallError> {
        let t = Duration::from_secs(15);
        let reply: HeartbeatReply = self
            .call(Method::POST, REBALANCE_PATH, Bytes::new(), t)
            .await?;
        Ok(reply.epoch)
    }

    /// `/coord/objects/begin`: a new version of `name`, invisible until committed.
    pub async fn object_begin(&self, name: &ObjectName) -> Result<u64, CallError> {
        let path = format!("{}?name={name}", objects::BEGIN_PATH);
        let r: VersionReply = self.call(Method::POST, &path, Bytes::new(), T).await?;
        Ok(r.version)
    }

    /// `/coord/objects/commit`: makes the record visible.
    pub async fn object_commit(&self, meta: &ObjectMeta) -> Result<u64, CallError> {
        self.post_record(objects::COMMIT_PATH, meta).await
    }

    /// `/coord/objects/update`: the committed record of the same version, other parities.
    pub async fn object_update(&self, meta: &ObjectMeta) -> Result<u64, CallError> {
        self.post_record(objects::UPDATE_PATH, meta).await
    }

    /// A record posted to `path`; the version the coordinator answers.
    async fn post_record(&self, path: &str, meta: &ObjectMeta) -> Result<u64, CallError> {
        let body = Bytes::from(serde_json::to_vec(meta).expect("a record serializes"));
        let r: VersionReply = self.call(Method::POST, path, body, T).await?;
        Ok(r.version)
    }

    /// `/coord/objects/abort`: the begun version will not be committed.
    pub async fn object_abort(&self, name: &ObjectName, version: u64) -> Result<(), CallError> {
        let path = format!("{}?name={name}&version={version}", objects::ABORT_PATH);
        let _: VersionReply = self.call(Method::POST, &path, Bytes::new(), T).await?;
        Ok(())
    }

    /// `/coord/objects/sequence`: a number never handed out before, above every one that was.
    pub async fn object_sequence(&self) -> Result<u64, CallError> {
        let path = objects::SEQUENCE_PATH;
        let r: VersionReply = self.call(Method::POST, path, Bytes::new(), T).await?;
        Ok(r.version)
    }

    /// `/coord/objects/get`: the committed record (an error naming `404` when there is none).
    pub async fn object_get(&self, name: &ObjectName) -> Result<ObjectMeta, CallError> {
        let path = format!("{}?name={name}", objects::GET_PATH);
        self.call(Method::GET, &path, Bytes::new(), T).await
    }

    /// `/coord/objects/list`: up to `limit` records whose names begin with `prefix`, after
    /// `after`, in name order.
    pub async fn object_list(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Listed>, CallError> {
        let mut path = format!(
            "{}?prefix={}&limit={limit}",
            objects::LIST_PATH,
            objects::encode(prefix)
        );
        if let Some(a) = after {
            path.push_str(&format!("&after={}", objects::encode(a)));
        }
        self.call(Method::GET, &path, Bytes::new(), T).await
    }

    /// `/coord/objects/remove`: the removed record.
    pub async fn object_remove(&self, name: &ObjectName) -> Result<ObjectMeta, CallError> {
        let path = format!("{}?name={name}", objects::REMOVE_PATH);
        self.call(Method::POST, &path, Bytes::new(), T).await
    }

    /// A membership change (see `members.rs`).
    pub async fn member(&self, op: &MemberOp) -> Result<MemberReply, CallError> {
        let (path, body) = match op {
            MemberOp::Add(new) => (
                MEMBERS_PATH.to_string(),
                Bytes::from(serde_json::to_vec(new).expect("a new member serializes")),
            ),
            MemberOp::Drain(n) => (format!("{DRAIN_PATH}?node={n}"), Bytes::new()),
            MemberOp::Undrain(n) => (format!("{UNDRAIN_PATH}?node={n}"), Bytes::new()),
            MemberOp::Remove(n) => (format!("{REMOVE_PATH}?node={n}"), Bytes::new()),
        };
        let t = Duration::from_secs(15);
        self.call(Method::POST, &path, body, t).await
    }
}
