//! The backend store under EC-Cache's object cache (issue 12: "the object cache sits over a
//! store that holds the original"), named by `object_backend` in the cluster file:
//!
//! * `http://HOST:PORT[/PREFIX]`: a store the operator fills. A read with fewer than `k` of
//!   an object's splits readable fetches `GET PREFIX/<name>` from it.
//! * `s3://BUCKET[/PREFIX]`: an S3-compatible store behind the backend tier (issue 13,
//!   `ecdn_backend::proxy`: TOFEC's request and task queues over `L` connections). Every `PUT`
//!   **writes through**: the object is also written to the store as a TOFEC coded file under
//!   `PREFIX/<name>`, acknowledged once `k` of its parts are stored (the speculative write of
//!   TOFEC §II-A; the upload is completed in the background, and a failure then is logged),
//!   and the object's record is committed only after that. Every `DELETE` removes it there
//!   too. A read with fewer than `k` splits readable reads it back with coded, chunked range
//!   requests.
//!
//! Either way, the bytes fetched are answered only if they are the object the record
//! describes (its size and SHA-256). The cached splits are not rebuilt from them (a `PUT`
//! writes the object again).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ecdn_backend::proxy::{Proxy, ProxyConfig};
use ecdn_backend::store::{S3Config, S3Store};
use ecdn_cluster::config::{BackendUrl, ClusterConfig};
use ecdn_objects::meta::ObjectMeta;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use sha2::{Digest, Sha256};

/// Time limit of an HTTP backend fetch (connect, headers and body).
const FETCH_TIMEOUT: Duration = Duration::from_secs(60);

/// The store under the object cache.
pub(in crate::node) enum ObjectBackend {
    /// Read only.
    Http { authority: String, prefix: String },
    /// Written through, coded; the proxy's store holds the prefix.
    Tier(Proxy),
}

impl ObjectBackend {
    /// The backend of the cluster file, if it names one, for objects of at most `max_object`
    /// bytes. Must run inside the node's runtime (the tier's proxy is a task).
    pub(in crate::node) fn open(
        cfg: &ClusterConfig,
        max_object: u64,
    ) -> Result<Option<ObjectBackend>, String> {
        let Some(url) = &cfg.object_backend else {
            return Ok(None);
        };
        Ok(Some(match ecdn_cluster::config::parse_backend(url)? {
            BackendUrl::Http { authority, prefix } => ObjectBackend::Http { authority, prefix },
            BackendUrl::S3(url) => {
                let mut s3 =
                    S3Config::from_url(&url).map_err(|e| format!("object_backend: {e}"))?;
                if let Some(e) = &cfg.object_backend_endpoint {
                    s3.endpoint = Some(e.clone());
                }
                let proxy_cfg = ProxyConfig {
                    max_object,
                    ..ProxyConfig::default()
                };
                let store = S3Store::new(&s3, proxy_cfg.task_timeout)
                    .map_err(|e| format!("object_backend: {e}"))?;
                ObjectBackend::Tier(Proxy::start(Arc::new(store), proxy_cfg))
            }
        }))
    }

    /// Whether a `PUT` writes the object here too.
    pub(in crate::node) fn writes_through(&self) -> bool {
        matches!(self, ObjectBackend::Tier(_))
    }

    /// The object of `meta`: its bytes, or why not.
    pub(in crate::node) async fn fetch(&self, meta: &ObjectMeta) -> Result<Bytes, String> {
        let body = match self {
            ObjectBackend::Http { authority, prefix } => {
                let path = match prefix.is_empty() {
                    true => format!("/{}", meta.name),
                    false => format!("/{prefix}/{}", meta.name),
                };
                tokio::time::timeout(FETCH_TIMEOUT, http_get(authority, &path, meta.size))
                    .await
                    .map_err(|_| format!("no answer within {FETCH_TIMEOUT:?}"))??
            }
            ObjectBackend::Tier(proxy) => {
                proxy
                    .read(meta.name.as_str())
                    .await
                    .map_err(|e| e.to_string())?
                    .0
            }
        };
        if body.len() as u64 != meta.size
            || ecdn_cluster::auth::hex(&Sha256::digest(&body)) != meta.sha256
        {
            return Err(format!(
                "{}: the backend's copy ({} bytes) is not the object the record describes",
                meta.name,
                body.len()
            ));
        }
        Ok(body)
    }

    /// Writes `data` as object `name` through the tier; returns once TOFEC acknowledges it
    /// (`k` parts stored). Nothing to do for a read-only store.
    pub(in crate::node) async fn write(&self, name: &str, data: Bytes) -> Result<(), String> {
        let ObjectBackend::Tier(proxy) = self else {
            return Ok(());
        };
        let written = proxy.write(name, data).await.map_err(|e| e.to_string())?;
        let name = name.to_string();
        ecdn_cluster::peer::spawn_traced(async move {
            if let Err(e) = written.finished().await {
                eprintln!(
                    "ecdn node: object {name}: the backend's upload failed after its \
                     acknowledgement: {e}{}",
                    ecdn_cluster::peer::request_note()
                );
            }
        });
        Ok(())
    }

    /// Removes object `name` from a store the node writes to.
    pub(in crate::node) async fn remove(&self, name: &str) -> Result<(), String> {
        match self {
            ObjectBackend::Http { .. } => Ok(()),
            ObjectBackend::Tier(proxy) => proxy.delete(name).await.map_err(|e| e.to_string()),
        }
    }
}

/// `GET path` from `authority`, a body of at most `size` bytes (one more is read, so a
/// longer one is seen as not the object).
async fn http_get(authority: &str, path: &str, size: u64) -> Result<Bytes, String> {
    let stream = tokio::net::TcpStream::connect(authority)
        .await
        .map_err(|e| format!("connecting to {authority}: {e}"))?;
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let req = Request::get(path)
        .header(hyper::header::HOST, authority)
        .body(Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    let resp = send.send_request(req).await.map_err(|e| e.to_string())?;
    if resp.status() != StatusCode::OK {
        return Err(format!("{path}: {}", resp.status()));
    }
    let limit = usize::try_from(size)
        .unwrap_or(usize::MAX)
        .saturating_add(1);
    Ok(Limited::new(resp.into_body(), limit)
        .collect()
        .await
        .map_err(|e| format!("{path}: body: {e}"))?
        .to_bytes())
}
