//! The node under fuzz, shared by the targets that feed it client connections
//! (`http_request`, `h2`, `tls`): a real node in a paused-clock runtime, its origin in the
//! same process over in-memory pipes, and one exchange per input. See `http_request.rs` for
//! what the node holds and how an exchange runs.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ecdn_node::node::{
    Connecting, Connector, Node, NodeConfig, OriginIo, RunningNode, Speak, TlsListen,
};
use ecdn_node::origin::{self, OriginConfig};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::runtime::Runtime;

pub const IDLE: Duration = Duration::from_millis(100);
pub const DEADLINE: Duration = Duration::from_secs(2);

/// The largest object the fuzz origin creates.
const MAX_SIZE: u64 = 2 << 20;

/// Whether the origin wrapper refuses a request (too large, or paced).
fn refused(query: &str) -> bool {
    query.split('&').any(|kv| match kv.split_once('=') {
        Some(("size", v)) => v.parse::<u64>().map_or(true, |n| n > MAX_SIZE),
        Some(("bw", _)) => true,
        _ => false,
    })
}

/// Opens an in-memory connection to a fresh origin connection task.
fn in_memory_origin() -> Connector {
    let cfg = Arc::new(OriginConfig {
        frame: 16 << 10,
        ..OriginConfig::default()
    });
    Arc::new(move |_authority: String| -> Connecting {
        let cfg = cfg.clone();
        Box::pin(async move {
            let (node_end, origin_end) = tokio::io::duplex(64 << 10);
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let cfg = cfg.clone();
                        async move {
                            if refused(req.uri().query().unwrap_or("")) {
                                let mut r = hyper::Response::new(origin::OriginBody::Fixed(None));
                                *r.status_mut() = hyper::StatusCode::BAD_REQUEST;
                                return Ok::<_, std::convert::Infallible>(r);
                            }
                            Ok(origin::handle(req, cfg).await)
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(origin_end), svc)
                    .await;
            });
            Ok(Box::new(node_end) as Box<dyn OriginIo>)
        })
    })
}

/// The node of this process (`tls`: makes the certificates of its TLS side, called once).
pub fn node(
    tls: impl FnOnce() -> Option<ecdn_node::node::tls::TlsSettings>,
) -> &'static (Runtime, RunningNode, bool) {
    static NODE: OnceLock<(Runtime, RunningNode, bool)> = OnceLock::new();
    NODE.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("runtime");
        // Kept for the life of the process; removed by the OS's temp cleaning, not here.
        let disk = std::env::temp_dir().join(format!("ecdn-fuzz-disk-{}", std::process::id()));
        let cfg = NodeConfig {
            origin: "http://origin.fuzz:80".into(),
            hoc_size: 64 << 10,
            disk_path: Some(disk),
            disk_size: 16 << 20,
            origin_timeout: Duration::from_millis(300),
            header_read_timeout: Duration::from_secs(1),
            max_header_bytes: 16 << 10,
            purge_token: Some("fuzz-purge-token".into()),
            tls: tls().map(|settings| TlsListen {
                addr: "127.0.0.1:0".parse().unwrap(),
                settings,
            }),
            ..NodeConfig::default()
        };
        let node = rt
            .block_on(Node::start_with_connector(
                "127.0.0.1:0".parse().unwrap(),
                cfg,
                in_memory_origin(),
            ))
            .expect("node starts");
        (rt, node, std::env::var_os("ECDN_FUZZ_PRINT").is_some())
    })
}

/// One client connection speaking `how`, whose bytes are `data`, served to the end.
pub fn exchange(node: &(Runtime, RunningNode, bool), data: &[u8], how: Speak) {
    let (rt, node, print) = node;
    let remote: SocketAddr = "192.0.2.1:40000".parse().unwrap();
    rt.block_on(async {
        let (client, server) = tokio::io::duplex(64 << 10);
        let conn = tokio::spawn(node.serve_io_as(server, remote, how));
        let (mut rd, mut wr) = tokio::io::split(client);
        let write = async {
            // The node may close early (e.g. after a `400`): a failed write is fine.
            let _ = wr.write_all(data).await;
            tokio::time::sleep(IDLE).await;
            let _ = wr.shutdown().await;
        };
        let read = async {
            let mut out = Vec::new();
            let _ = rd.read_to_end(&mut out).await;
            out
        };
        let exchange = async { tokio::join!(write, read) };
        match tokio::time::timeout(IDLE + DEADLINE, exchange).await {
            Err(_) => panic!("the node did not close the connection {DEADLINE:?} after EOF"),
            Ok((_, out)) if *print => eprintln!("{}", String::from_utf8_lossy(&out)),
            Ok(_) => {}
        }
        match tokio::time::timeout(DEADLINE, conn).await {
            Err(_) => panic!("the connection task did not end within {DEADLINE:?} after EOF"),
            Ok(Err(e)) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Ok(_) => {}
        }
    });
}
