//! The backend store under EC-Cache's object cache (issue 12: "the object cache sits over a
//! store that holds the original"): when fewer than `k` of an object's splits can be read, a
//! node with `object_backend = "http://HOST:PORT[/PREFIX]"` in the cluster file fetches
//! `GET PREFIX/<name>` from it and answers with those bytes, if they are the object the record
//! describes (its size and SHA-256). The cached splits are not rebuilt from it (a `PUT` writes
//! the object again).

use std::time::Duration;

use bytes::Bytes;
use ecdn_objects::meta::ObjectMeta;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use sha2::{Digest, Sha256};

/// Time limit of a backend fetch (connect, headers and body).
const FETCH_TIMEOUT: Duration = Duration::from_secs(60);

/// The object of `meta` from the backend at `url`: its bytes, or why not.
pub(in crate::node) async fn fetch(url: &str, meta: &ObjectMeta) -> Result<Bytes, String> {
    let (authority, prefix) = ecdn_cluster::config::parse_backend(url)?;
    let path = match prefix.is_empty() {
        true => format!("/{}", meta.name),
        false => format!("/{prefix}/{}", meta.name),
    };
    let go = async {
        let stream = tokio::net::TcpStream::connect(&authority)
            .await
            .map_err(|e| format!("connecting to {authority}: {e}"))?;
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let req = Request::get(&path)
            .header(hyper::header::HOST, &authority)
            .body(Empty::<Bytes>::new())
            .map_err(|e| e.to_string())?;
        let resp = send.send_request(req).await.map_err(|e| e.to_string())?;
        if resp.status() != StatusCode::OK {
            return Err(format!("{path}: {}", resp.status()));
        }
        let limit = usize::try_from(meta.size)
            .unwrap_or(usize::MAX)
            .saturating_add(1);
        let body = Limited::new(resp.into_body(), limit)
            .collect()
            .await
            .map_err(|e| format!("{path}: body: {e}"))?
            .to_bytes();
        Ok(body)
    };
    let body = tokio::time::timeout(FETCH_TIMEOUT, go)
        .await
        .map_err(|_| format!("no answer within {FETCH_TIMEOUT:?}"))??;
    if body.len() as u64 != meta.size
        || ecdn_cluster::auth::hex(&Sha256::digest(&body)) != meta.sha256
    {
        return Err(format!(
            "{path}: the backend's copy ({} bytes) is not the object the record describes",
            body.len()
        ));
    }
    Ok(body)
}
