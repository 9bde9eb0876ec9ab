//! `RunningNode::serve_io`: one connection over an in-memory pipe (what the fuzz target
//! `http_request` uses) gets the same handling as a TCP connection.

use std::time::Duration;

use ecdn_node::node::{Node, NodeConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test]
async fn serves_a_connection_over_any_byte_stream() {
    let cfg = NodeConfig {
        origin: "http://127.0.0.1:9".into(),
        hoc_size: 1 << 20,
        origin_timeout: Duration::from_secs(2),
        ..NodeConfig::default()
    };
    let node = Node::start("127.0.0.1:0".parse().unwrap(), cfg)
        .await
        .unwrap();
    let exchange = |input: &'static [u8]| {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let conn = tokio::spawn(node.serve_io(server, "192.0.2.1:1".parse().unwrap()));
        async move {
            // No half-close: hyper drops a request in progress when it reads EOF. The last
            // request says `Connection: close` instead.
            client.write_all(input).await.unwrap();
            let mut out = String::new();
            client.read_to_string(&mut out).await.unwrap();
            conn.await.unwrap();
            out
        }
    };
    // Two pipelined requests: the health check, then a miss on the unreachable origin.
    let out = exchange(
        b"GET /_ecdn/health HTTP/1.1\r\nHost: x\r\n\r\n\
          GET /obj/1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
    assert!(out.contains("\r\n\r\nok\nHTTP/1.1 502 "), "{out}");
    // A path above the root is refused by the same request sanitising as over TCP.
    let out =
        exchange(b"GET /../etc/passwd HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
    assert!(out.starts_with("HTTP/1.1 400 "), "{out}");
    node.stop().await.unwrap();
}
