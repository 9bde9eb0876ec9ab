//! The raw fuzz input is one client connection's byte stream (HTTP/1.1 requests, possibly
//! pipelined, possibly malformed) into the real node: `RunningNode::serve_io` over an
//! in-memory duplex pipe, with the same hyper settings and request handler as a TCP
//! connection. The origin is a closed loopback port (every miss is a fast `502`), there is no
//! disk, and the HOC is small.
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
use std::sync::OnceLock;
use std::time::Duration;

use ecdn_node::node::{Node, NodeConfig, RunningNode};
use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::runtime::Runtime;

const IDLE: Duration = Duration::from_millis(100);
const DEADLINE: Duration = Duration::from_secs(2);

fn node() -> &'static (Runtime, RunningNode, bool) {
    static NODE: OnceLock<(Runtime, RunningNode, bool)> = OnceLock::new();
    NODE.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("runtime");
        let cfg = NodeConfig {
            origin: "http://127.0.0.1:9".into(),
            hoc_size: 1 << 20,
            disk_path: None,
            origin_timeout: Duration::from_millis(300),
            header_read_timeout: Duration::from_secs(1),
            max_header_bytes: 16 << 10,
            purge_token: Some("fuzz".into()),
            ..NodeConfig::default()
        };
        let node = rt
            .block_on(Node::start("127.0.0.1:0".parse().unwrap(), cfg))
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
