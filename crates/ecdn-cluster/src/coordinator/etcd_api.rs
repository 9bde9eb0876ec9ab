//! The HTTP API of an etcd-mode coordinator (`ecdn coordinator --listen ADDR` with etcd).
//!
//! Every coordinator serves it; only the leader answers. The leader's decisions live in its
//! term loop (`etcd.rs`), so a request becomes a [`Command`] sent there with a reply channel,
//! and is answered in the loop's order with the map writes — a membership change is answered
//! after the map that carries it is in etcd, with that map's epoch. A coordinator that does not
//! lead answers `503` naming the leader (body, and header `x-ecdn-leader`), so a client that
//! found any coordinator can find the leader. Requests are signed with the cluster key like
//! the embedded coordinator's; the nodes' endpoints (heartbeat, map) do not exist here: nodes
//! register and watch the map in etcd.
//!
//! * `GET /coord/status`: the leader's [`Status`], with `leader` set.
//! * `POST /coord/members`, `/coord/drain?node=N`, `/coord/remove?node=N`: see `members.rs`.
//! * `POST /coord/rebalance` (`c2dn` only): a parity rebalance now, from the loads the
//!   nodes' load reports brought so far.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use super::{
    json_of, member_answer, text, HeartbeatReply, MemberError, MemberOp, MemberReply, Status,
    BALANCER_PATH, DRAIN_PATH, MEMBERS_PATH, MEMBER_LIMIT, REBALANCE_PATH, REMOVE_PATH,
    STATUS_PATH, UNDRAIN_PATH,
};
use crate::auth::{unix_now_ms, ClusterKey};
use crate::map::BucketMap;
use crate::peer::read_verified_body;
use crate::replay::Gate;

/// What an etcd-mode coordinator reports about itself.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EtcdCoordinatorStatus {
    pub leading: bool,
    /// Times this coordinator became the leader.
    pub terms: u64,
    /// Times it lost its etcd connection while leading and went on leading: its lease resumed
    /// through another etcd member, the leader key still its own.
    #[serde(default)]
    pub resumed: u64,
    /// The epoch (etcd revision) of the last map it wrote.
    pub epoch: u64,
    pub last_error: Option<String>,
    /// The leader's name as this coordinator last saw it (its own while it leads).
    pub leader: Option<String>,
    /// What it wrote to etcd while leading.
    #[serde(default)]
    pub writes: MapWrites,
    /// When it decided the map of `epoch` after an availability change (before writing it),
    /// for measuring how long the map takes to reach the nodes.
    #[serde(skip)]
    pub decided_at: Option<Instant>,
}

/// The maps and states a leader wrote to etcd (see `crate::etcd_map`), over all its terms.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MapWrites {
    /// Whole maps written, and their bytes (compressed and sealed, as put).
    pub whole_maps: u64,
    pub whole_map_bytes: u64,
    /// Diffs written, and their bytes.
    pub diffs: u64,
    pub diff_bytes: u64,
    /// The state's bytes, over every write (one per map).
    pub state_bytes: u64,
}

/// What the API asks of the leader's term loop.
#[derive(Debug)]
pub(super) enum Command {
    Status,
    /// What the status page shows (`status_source.rs`): the status and the map.
    Page,
    Member(MemberOp),
    Rebalance,
    /// A load balancer's view of the nodes ([`crate::health::BalancerReport`]).
    Balancer(crate::health::BalancerReport),
}

/// The term loop's answer.
#[derive(Debug)]
pub(super) enum Answer {
    Status(Box<Status>),
    Page(Box<Status>, Box<BucketMap>),
    Member(Result<MemberReply, MemberError>),
    Epoch(u64),
    Refused(String),
}

/// A command and where its answer goes.
pub(super) type Ask = (Command, oneshot::Sender<Answer>);

/// How long a request waits for the term loop.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

pub(super) struct Api {
    pub(super) key: ClusterKey,
    /// Checks the signed requests: this coordinator's address, the nonces taken.
    pub(super) gate: Gate,
    pub(super) status: Arc<Mutex<EtcdCoordinatorStatus>>,
    pub(super) asks: mpsc::Sender<Ask>,
}

impl Api {
    fn leader(&self) -> (bool, Option<String>) {
        let s = self.status.lock().unwrap_or_else(|e| e.into_inner());
        (s.leading, s.leader.clone())
    }
}

fn not_leading(leader: Option<String>) -> Response<Full<Bytes>> {
    let mut resp = text(
        StatusCode::SERVICE_UNAVAILABLE,
        match &leader {
            Some(l) => format!("this coordinator does not lead; the leader is {l}"),
            None => "this coordinator does not lead; no leader is known".into(),
        },
    );
    if let Some(value) = leader.and_then(|l| l.parse().ok()) {
        resp.headers_mut().insert("x-ecdn-leader", value);
    }
    resp
}

pub(super) async fn handle(api: &Api, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let verified = match api.gate.admit(&parts, unix_now_ms()) {
        Ok(v) => v,
        Err(e) => return text(StatusCode::UNAUTHORIZED, e.to_string()),
    };
    // Every JSON answer is bound to the request it answers.
    let request = *verified.signature();
    let pq = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path().to_string(), |p| p.as_str().to_string());
    let mut resp = handle_admitted(api, parts, body, verified).await;
    crate::peer::sign_answer(&api.key, &pq, &request, &mut resp);
    resp
}

/// A request [`handle`] admitted.
async fn handle_admitted(
    api: &Api,
    parts: hyper::http::request::Parts,
    body: Incoming,
    verified: crate::auth::Verified,
) -> Response<Full<Bytes>> {
    let path = parts.uri.path();
    let limit = match (&parts.method, path) {
        (&Method::GET, STATUS_PATH)
        | (&Method::POST, REBALANCE_PATH | DRAIN_PATH | UNDRAIN_PATH | REMOVE_PATH) => 0,
        (&Method::POST, MEMBERS_PATH) => MEMBER_LIMIT,
        (&Method::POST, BALANCER_PATH) => crate::health::BALANCER_LIMIT,
        (
            _,
            STATUS_PATH | REBALANCE_PATH | DRAIN_PATH | UNDRAIN_PATH | REMOVE_PATH | MEMBERS_PATH
            | BALANCER_PATH,
        ) => return text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed"),
        _ => {
            return text(
                StatusCode::NOT_FOUND,
                "no such endpoint of an etcd-mode coordinator (nodes use etcd)",
            )
        }
    };
    let body = match read_verified_body(body, limit, &verified).await {
        Ok(b) => b,
        Err(e) => return text(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let pq = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or(path);
    let command = match path {
        STATUS_PATH => Command::Status,
        REBALANCE_PATH => Command::Rebalance,
        BALANCER_PATH => match serde_json::from_slice(&body) {
            Ok(r) => Command::Balancer(r),
            Err(e) => return text(StatusCode::BAD_REQUEST, format!("balancer report: {e}")),
        },
        _ => match MemberOp::from_request(path, parts.uri.query(), &body) {
            Ok(op) => Command::Member(op),
            Err(e) => return text(StatusCode::BAD_REQUEST, e),
        },
    };
    let (leading, leader) = api.leader();
    if !leading {
        return not_leading(leader);
    }
    let (tx, rx) = oneshot::channel();
    if api.asks.send((command, tx)).await.is_err() {
        return text(StatusCode::SERVICE_UNAVAILABLE, "coordinator stopping");
    }
    match tokio::time::timeout(ANSWER_TIMEOUT, rx).await {
        Ok(Ok(Answer::Status(s))) => json_of(&api.key, pq, &*s),
        Ok(Ok(Answer::Member(r))) => member_answer(&api.key, pq, r),
        Ok(Ok(Answer::Epoch(epoch))) => json_of(&api.key, pq, &HeartbeatReply { epoch }),
        Ok(Ok(Answer::Refused(why))) => text(StatusCode::CONFLICT, why),
        // The API never asks for a page.
        Ok(Ok(Answer::Page(..))) => text(StatusCode::INTERNAL_SERVER_ERROR, "a page answer"),
        // The term ended before it answered.
        Ok(Err(_)) => not_leading(api.leader().1),
        Err(_) => text(
            StatusCode::GATEWAY_TIMEOUT,
            "the leader did not answer in time",
        ),
    }
}
