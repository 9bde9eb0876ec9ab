//! Clients of ecdn's EC-Cache object API (`/_objects/<name>` on any node of a cluster; see
//! `ecdn_node`'s `node/cluster/objects/api.rs`), two of them:
//!
//! * [`ObjectClient`]: one node does the work: put an object with an optional code, get it
//!   back, stat it, delete it. For a client that is not ours, the same is plain HTTP.
//! * [`SplitClient`] (`splits.rs`, `late_binding.rs`): the client reads the splits from their
//!   servers itself, as EC-Cache's client does, so a read is spread over `k + Δ` servers'
//!   links instead of crossing one node's twice; every byte checked against the record's
//!   window digests, with no cluster key.
//!
//! Connections are pooled; every call has a time limit.
//!
//! ```no_run
//! # async fn demo() -> Result<(), ecdn_client::ClientError> {
//! let c = ecdn_client::ObjectClient::new("127.0.0.1:8000".parse().unwrap());
//! let meta = c.put("models/resnet.bin", b"...".to_vec().into(), None).await?;
//! let bytes = c.get("models/resnet.bin").await?;
//! assert_eq!(bytes.len() as u64, meta.size);
//! # Ok(()) }
//! ```

pub mod late_binding;
pub mod located;
pub mod split_write;
pub mod splits;
pub mod stragglers;

pub use late_binding::{ObjectRead, ReadReport};
pub use located::Located;
pub use splits::{Delta, ServerUse, SplitClient};

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use ecdn_objects::meta::{ObjectMeta, ObjectName};
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{0}")]
    BadName(String),
    #[error("no object {0:?}")]
    NotFound(String),
    #[error("the node answered {status}: {message}")]
    Refused { status: u16, message: String },
    #[error("the node at {addr}: {why}")]
    Unreachable { addr: SocketAddr, why: String },
    #[error("the node's answer is not an object record: {0}")]
    BadAnswer(String),
    /// A read from the splits could not get `k` of some window.
    #[error("{0}")]
    TooFewSplits(String),
    /// The object's record has no window digests (written before they were kept): a client
    /// cannot check its splits, so it is read through a node.
    #[error("object {0:?}: its record has no split digests")]
    NoDigests(String),
}

/// A code for [`ObjectClient::put`]: `k` data and `r` parity splits (`k = 1`: replication).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Code {
    pub k: usize,
    pub r: usize,
}

/// What `GET /_objects/<name>?stat` tells: the record, and per split whether its server holds
/// it now (`None`: the server is unavailable or did not answer).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectStat {
    pub record: ObjectMeta,
    pub held: Vec<Option<bool>>,
}

impl ObjectStat {
    /// Splits known to be held: a read can decode the object with at least `k`.
    pub fn readable(&self) -> usize {
        self.held.iter().filter(|h| **h == Some(true)).count()
    }
}

/// A client of one node's object API.
#[derive(Clone)]
pub struct ObjectClient {
    addr: SocketAddr,
    http: Client<HttpConnector, Full<Bytes>>,
    timeout: Duration,
}

impl ObjectClient {
    /// A client of the node whose client port is `addr` (a minute per call).
    pub fn new(addr: SocketAddr) -> ObjectClient {
        ObjectClient {
            addr,
            http: Client::builder(TokioExecutor::new()).build_http(),
            timeout: Duration::from_secs(60),
        }
    }

    /// The same client with another time limit per call.
    pub fn with_timeout(mut self, timeout: Duration) -> ObjectClient {
        self.timeout = timeout;
        self
    }

    async fn call(
        &self,
        method: Method,
        name: &str,
        query: &str,
        body: Bytes,
    ) -> Result<(StatusCode, Bytes), ClientError> {
        let name = ObjectName::parse(name).map_err(|e| ClientError::BadName(e.to_string()))?;
        call(
            &self.http,
            self.addr,
            self.timeout,
            method,
            &name,
            query,
            body,
        )
        .await
    }

    fn record(body: &[u8]) -> Result<ObjectMeta, ClientError> {
        serde_json::from_slice(body).map_err(|e| ClientError::BadAnswer(e.to_string()))
    }

    /// Stores `data` as `name` (with `code`, or the node's default); the committed record.
    pub async fn put(
        &self,
        name: &str,
        data: Bytes,
        code: Option<Code>,
    ) -> Result<ObjectMeta, ClientError> {
        let query = code.map_or(String::new(), |c| format!("?k={}&r={}", c.k, c.r));
        let (_, body) = self.call(Method::PUT, name, &query, data).await?;
        Self::record(&body)
    }

    /// The object's bytes (decoded from the first `k` splits to arrive of `k + 1` asked).
    pub async fn get(&self, name: &str) -> Result<Bytes, ClientError> {
        Ok(self.call(Method::GET, name, "", Bytes::new()).await?.1)
    }

    /// The object's bytes, reading `k + delta` splits (late binding: the first `k` to arrive
    /// are decoded); `delta`: a number (`0` reads exactly `k`), or `auto` (the node picks it
    /// from its backlog).
    pub async fn get_with_delta(&self, name: &str, delta: &str) -> Result<Bytes, ClientError> {
        let query = format!("?delta={delta}");
        Ok(self.call(Method::GET, name, &query, Bytes::new()).await?.1)
    }

    /// The object's record (size, code, where its splits are) and which splits their servers
    /// hold now.
    pub async fn stat(&self, name: &str) -> Result<ObjectStat, ClientError> {
        let (_, body) = self.call(Method::GET, name, "?stat", Bytes::new()).await?;
        let bad = |e: String| ClientError::BadAnswer(e);
        let mut v: serde_json::Value =
            serde_json::from_slice(&body).map_err(|e| bad(e.to_string()))?;
        let o = v
            .as_object_mut()
            .ok_or_else(|| bad("the stat answer is not a JSON object".into()))?;
        let held = o
            .remove("held")
            .ok_or_else(|| bad("the stat answer has no \"held\"".into()))?;
        let held: Vec<Option<bool>> =
            serde_json::from_value(held).map_err(|e| bad(e.to_string()))?;
        o.remove("readable");
        let record: ObjectMeta = serde_json::from_value(v).map_err(|e| bad(e.to_string()))?;
        if held.len() != record.splits.len() {
            return Err(bad(format!(
                "the stat answer lists {} splits held, its record {}",
                held.len(),
                record.splits.len()
            )));
        }
        Ok(ObjectStat { record, held })
    }

    /// Gives the object `units` splits (EC-Cache: `k` data and `units − k` parities;
    /// replicated objects: `units` copies), never fewer than it was written with: the parity
    /// budget re-spent by hand (the coordinator does it from measured reads when
    /// `object_budget_every_s` is set). The new record.
    pub async fn set_units(&self, name: &str, units: usize) -> Result<ObjectMeta, ClientError> {
        let query = format!("?units={units}");
        let (_, body) = self.call(Method::POST, name, &query, Bytes::new()).await?;
        Self::record(&body)
    }

    /// Deletes the object everywhere; its record as it was.
    pub async fn delete(&self, name: &str) -> Result<ObjectMeta, ClientError> {
        let (_, body) = self.call(Method::DELETE, name, "", Bytes::new()).await?;
        Self::record(&body)
    }
}

/// One call of the object API on the node at `addr`: its status and body (`Err` for
/// `404`, another failure status, or no answer within `timeout`).
pub(crate) async fn call(
    http: &Client<HttpConnector, Full<Bytes>>,
    addr: SocketAddr,
    timeout: Duration,
    method: Method,
    name: &ObjectName,
    query: &str,
    body: Bytes,
) -> Result<(StatusCode, Bytes), ClientError> {
    let uri = format!("http://{addr}/_objects/{name}{query}");
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .body(Full::new(body))
        .map_err(|e| ClientError::BadName(e.to_string()))?;
    let unreachable = |why: String| ClientError::Unreachable { addr, why };
    let go = async {
        let resp = http
            .request(req)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let status = resp.status();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| unreachable(e.to_string()))?
            .to_bytes();
        Ok((status, body))
    };
    let (status, body) = tokio::time::timeout(timeout, go)
        .await
        .map_err(|_| unreachable(format!("no answer within {timeout:?}")))??;
    match status {
        s if s.is_success() => Ok((s, body)),
        StatusCode::NOT_FOUND => Err(ClientError::NotFound(name.to_string())),
        s => Err(ClientError::Refused {
            status: s.as_u16(),
            message: String::from_utf8_lossy(&body).trim().to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bad_names_and_absent_nodes_are_clear_errors() {
        // A port nothing listens on: bound, not listening (connections are refused), and held
        // so that no other listener can take it meanwhile.
        let closed = tokio::net::TcpSocket::new_v4().unwrap();
        closed.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let port = closed.local_addr().unwrap().port();
        let c = ObjectClient::new(format!("127.0.0.1:{port}").parse().unwrap())
            .with_timeout(Duration::from_secs(2));
        assert!(matches!(
            c.get("a/../b").await,
            Err(ClientError::BadName(_))
        ));
        let e = c.stat("fine/name").await.unwrap_err();
        assert!(matches!(e, ClientError::Unreachable { .. }), "{e}");
    }
}
