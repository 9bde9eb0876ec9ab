//! The raw fuzz input is one client connection's byte stream (HTTP/1.1 requests, possibly
//! pipelined, possibly malformed) into the real node: `RunningNode::serve_io` over an
//! in-memory duplex pipe, with the same hyper settings and request handler as a TCP
//! connection. The origin is live and in the same process: `ecdn origin`'s handler
//! ([`ecdn_node::origin::handle`]) served over in-memory pipes opened by the node's connector
//! ([`Node::start_with_connector`]), so misses are stored and later inputs hit them: HOC and
//! disk hits, ranges and multipart answers, `Vary` variants (`vary=` in the query), validation
//! with `304` merging (`cc=` in the query, e.g. `max-age=1` entries go stale as the paused
//! clock advances), `PURGE` and invalidation. The HOC is small (64 KiB) and the disk ring
//! (a temporary file, 16 MiB) takes the rest, so larger objects are served by the mapped disk
//! path. A request with `size=` above 2 MiB, or with `bw=`, is answered `400` by the origin
//! wrapper, to keep each execution fast; `status=` gives error answers. The node keeps its
//! caches from one input to the next, as a long-running node does.
//!
//! The runtime's clock is paused, so it jumps ahead whenever every task is idle: the client
//! writes the input, waits `IDLE` (i.e. until the node has answered all it can: hyper drops a
//! request in progress once it reads EOF, so half-closing at once would cut every miss
//! short), half-closes, and reads to EOF. Any panic in the node aborts the process
//! (libfuzzer-sys's panic hook, also for panics in spawned tasks); a connection still open
//! `DEADLINE` (virtual time) after the half-close is reported as a hang (a panic).
//! `ECDN_FUZZ_PRINT=1` prints each response (for replaying an input).
#![no_main]

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ecdn_node::node::{Connecting, Connector, Node, NodeConfig, OriginIo, RunningNode};
use ecdn_node::origin::{self, OriginConfig};
use hyper_util::rt::TokioIo;
use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::runtime::Runtime;

const IDLE: Duration = Duration::from_millis(100);
const DEADLINE: Duration = Duration::from_secs(2);

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

fn node() -> &'static (Runtime, RunningNode, bool) {
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
            purge_token: Some("fuzz".into()),
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

fuzz_target!(|data: &[u8]| {
    let (rt, node, print) = node();
    let remote: SocketAddr = "192.0.2.1:40000".parse().unwrap();
    rt.block_on(async {
        let (client, server) = tokio::io::duplex(64 << 10);
        let conn = tokio::spawn(node.serve_io(server, remote));
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
});
