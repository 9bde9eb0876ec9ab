//! The coordinators' listeners (the embedded one's and the etcd-backed API's): an accept loop
//! that serves HTTP/1.1, through a mutual-TLS handshake first when the cluster file asks for
//! one, each connection until it ends or the coordinator stops; and their plain and JSON
//! answers (a JSON answer is signed on its way out, [`crate::peer::sign_answer`]).

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::stopped;
use crate::auth::ClusterKey;
use crate::peer::ToSign;
use crate::replay::ArrivedAt;

/// How long a client has to finish a TLS handshake (mutual TLS, `crate::mtls`).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves HTTP/1.1 on `listener` with `handler` until `shutdown` says stop, then lets the
/// connections finish their requests. With `tls` (mutual TLS, `crate::mtls`: an admin
/// listener's, or the peer protocol's), each connection goes through its handshake first; one
/// that fails (no client certificate, one the CA did not sign) closes the connection before
/// any HTTP.
pub(crate) async fn accept_loop_tls<H, F>(
    shutdown: watch::Receiver<bool>,
    listener: TcpListener,
    tls: Option<crate::mtls::ListenerTls>,
    handler: H,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: std::future::Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let mut conns = JoinSet::new();
    let stop = stopped(shutdown.clone());
    tokio::pin!(stop);
    loop {
        let stream = tokio::select! {
            _ = &mut stop => break,
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    // Out of file descriptors and the like: wait a little, go on.
                    eprintln!("ecdn coordinator: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
        };
        let _ = stream.set_nodelay(true);
        let arrived = stream.local_addr().ok().map(ArrivedAt);
        let handler = handler.clone();
        let shutdown = shutdown.clone();
        let tls = tls.clone();
        conns.spawn(async move {
            let svc = service_fn(move |mut req: Request<Incoming>| {
                // Where the connection arrived: an address this process answers as.
                if let Some(a) = arrived {
                    req.extensions_mut().insert(a);
                }
                let answer = handler(req);
                async move { Ok::<_, Infallible>(answer.await) }
            });
            match tls {
                None => serve_connection(stream, svc, shutdown).await,
                Some(tls) => {
                    let hs = tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.acceptor().accept(stream))
                        .await;
                    if let Ok(Ok(stream)) = hs {
                        serve_connection(stream, svc, shutdown).await;
                    }
                }
            }
        });
    }
    drop(listener);
    while conns.join_next().await.is_some() {}
}

/// Serves HTTP/1.1 on one connection until it ends, or gracefully once `shutdown` says so.
async fn serve_connection<IO, S>(io: IO, svc: S, shutdown: watch::Receiver<bool>)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    S: hyper::service::HttpService<Incoming, ResBody = Full<Bytes>> + Send,
    S::Future: Send,
{
    let conn = http1::Builder::new().serve_connection(TokioIo::new(io), svc);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = stopped(shutdown) => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

pub(crate) fn text(status: StatusCode, msg: impl Into<String>) -> Response<Full<Bytes>> {
    let mut body = msg.into();
    body.push('\n');
    Response::builder()
        .status(status)
        .header("content-type", "text/plain; charset=utf-8")
        .body(Full::new(Bytes::from(body)))
        .expect("a valid response")
}

/// A JSON answer, to be signed for the request's path and query and signature when it leaves
/// the coordinator's `handle` ([`crate::peer::sign_answer`]).
pub(super) fn json(_key: &ClusterKey, _path_and_query: &str, body: Bytes) -> Response<Full<Bytes>> {
    let mut resp = Response::builder()
        .header("content-type", "application/json")
        .body(Full::new(body.clone()))
        .expect("a valid response");
    resp.extensions_mut().insert(ToSign(body));
    resp
}

pub(crate) fn json_of<T: Serialize>(
    key: &ClusterKey,
    path_and_query: &str,
    value: &T,
) -> Response<Full<Bytes>> {
    let body = Bytes::from(serde_json::to_vec(value).expect("status types serialize"));
    json(key, path_and_query, body)
}
