//! Request bodies and the connection's framing (see `src/node/client_body.rs`): an answer is
//! handed to hyper only once the request's body has been read, or with `Connection: close`.
//!
//! The first two tests replay the fuzz finding
//! `fuzz/seeds/http_request/pipelined-after-chunked-trailer-field` deterministically: a body
//! left unread by an answer made in the same poll (a HOC hit, a node endpoint), a client that
//! has not read the answer yet (a pipe smaller than the answer), then a malformed pipelined
//! request. Before the
//! fix hyper went idle with the answer's tail still buffered when it drained the body, parsed
//! `G\n`, and failed its assertion `self.can_write_head()` writing the `400` (in a release
//! build the `400` would have been sent inside the `200`'s body).

use std::time::Duration;

use ecdn_node::node::{Node, NodeConfig, RunningNode};
use ecdn_node::origin::{self, OriginConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn node() -> RunningNode {
    let cfg = NodeConfig {
        origin: "http://origin.test".into(),
        hoc_size: 4 << 20,
        header_read_timeout: Duration::from_secs(1),
        ..NodeConfig::default()
    };
    Node::start_with_connector(
        "127.0.0.1:0".parse().unwrap(),
        cfg,
        origin::in_memory_connector(OriginConfig::default()),
    )
    .await
    .unwrap()
}

/// Writes `input` on one connection through a pipe of `pipe` bytes, then (if `half_close`)
/// waits 100 ms and half-closes; reads until the node closes the connection (at most 30 s of
/// the paused clock). Fails if the connection task panicked.
async fn exchange(node: &RunningNode, input: &[u8], pipe: usize, half_close: bool) -> Vec<u8> {
    let (client, server) = tokio::io::duplex(pipe);
    let conn = tokio::spawn(node.serve_io(server, "192.0.2.1:1".parse().unwrap()));
    let (mut rd, mut wr) = tokio::io::split(client);
    let input = input.to_vec();
    let write = async move {
        wr.write_all(&input).await.unwrap();
        if half_close {
            tokio::time::sleep(Duration::from_millis(100)).await;
            wr.shutdown().await.unwrap();
        }
        wr
    };
    let read = async move {
        let mut out = Vec::new();
        rd.read_to_end(&mut out).await.unwrap();
        out
    };
    let (_wr, out) =
        tokio::time::timeout(Duration::from_secs(30), async { tokio::join!(write, read) })
            .await
            .expect("the node closes the connection");
    match conn.await {
        Err(e) if e.is_panic() => {
            let p = e.into_panic();
            let msg = p
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| p.downcast_ref::<&str>().copied())
                .unwrap_or("?");
            panic!("the connection task panicked: {msg}");
        }
        r => r.unwrap(),
    }
    out
}

/// One response off the front of `out`: its head (lower-cased) and body, by its
/// `content-length`.
fn response(out: &mut Vec<u8>) -> (String, Vec<u8>) {
    let end = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no response head in {:?}", String::from_utf8_lossy(out)))
        + 4;
    let head = String::from_utf8_lossy(&out[..end]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .map_or(0, |v| v.trim().parse().unwrap());
    assert!(out.len() >= end + len, "short body: {head}");
    let rest = out.split_off(end + len);
    let body = out[end..].to_vec();
    *out = rest;
    (head, body)
}

const GET_WITH_TRAILER: &str = "HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
                                3\r\nabc\r\n0\r\n8T: 1\r\n\r\nG\n";

#[tokio::test(start_paused = true)]
async fn a_hoc_hit_for_a_get_with_content_then_garbage_is_answered_in_order() {
    let node = node().await;
    let uri = "/obj/h?size=200000";
    let get = format!("GET {uri} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let mut out = exchange(&node, get.as_bytes(), 1 << 16, true).await;
    let (head, want) = response(&mut out);
    assert!(head.contains("x-cache: miss"), "{head}");
    assert_eq!(want.len(), 200_000);
    // The hit is answered in the poll that sees the request; the client has not read yet.
    let input = format!("GET {uri} {GET_WITH_TRAILER}");
    let mut out = exchange(&node, input.as_bytes(), 4096, true).await;
    let (head, body) = response(&mut out);
    assert!(head.starts_with("http/1.1 200 ok\r\n"), "{head}");
    assert!(head.contains("x-cache: hit-hoc"), "{head}");
    assert!(!head.contains("connection: close"), "{head}");
    assert!(body == want, "the hit's body differs from the miss's");
    // Then the malformed request's 400, and the end of the connection.
    let (head, _) = response(&mut out);
    assert!(head.starts_with("http/1.1 400 "), "{head}");
    assert!(out.is_empty(), "{:?}", String::from_utf8_lossy(&out));
    node.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_refused_node_endpoint_with_content_then_garbage_is_answered_in_order() {
    let node = node().await;
    // An admin path on the client listener: the node's own answer, a 404.
    let input = format!("GET /_ecdn/metrics {GET_WITH_TRAILER}");
    // The answer (about 200 bytes) does not fit the 64-byte pipe.
    let mut out = exchange(&node, input.as_bytes(), 64, true).await;
    let (head, body) = response(&mut out);
    assert!(head.starts_with("http/1.1 404 not found\r\n"), "{head}");
    assert!(head.len() + body.len() > 64);
    assert!(String::from_utf8_lossy(&body).contains("admin listener"));
    let (head, _) = response(&mut out);
    assert!(head.starts_with("http/1.1 400 "), "{head}");
    assert!(out.is_empty());
    node.stop().await.unwrap();
}

/// A small body on a `GET` is read and dropped: the connection stays open for the next
/// pipelined request.
#[tokio::test(start_paused = true)]
async fn a_small_body_on_a_get_keeps_the_connection() {
    let node = node().await;
    let input = b"GET /obj/k?size=1000 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello\
                  GET /obj/k?size=1000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let mut out = exchange(&node, input, 1 << 16, false).await;
    let (head, first) = response(&mut out);
    assert!(head.contains("x-cache: miss"), "{head}");
    assert!(!head.contains("connection: close"), "{head}");
    let (head, second) = response(&mut out);
    assert!(head.contains("x-cache: hit-hoc"), "{head}");
    assert_eq!(first, second);
    assert_eq!(first.len(), 1000);
    assert!(out.is_empty());
    node.stop().await.unwrap();
}

/// A body above the 64 KiB the node reads to keep a connection, one cut by the client, one
/// that does not arrive within `header_read_timeout`, or malformed chunking: answered, with
/// `Connection: close`; the request pipelined after it is never read.
#[tokio::test(start_paused = true)]
async fn an_unread_body_on_a_get_closes_the_connection() {
    let node = node().await;
    let next = "GET /_ecdn/health HTTP/1.1\r\nHost: x\r\n\r\n";
    let cases = [
        // Announced larger than the limit: not read at all.
        (
            format!("GET /obj/u?size=10 HTTP/1.1\r\nHost: x\r\nContent-Length: 70000\r\n\r\n{next}"),
            true,
        ),
        // Chunked, more than the limit in one chunk.
        (
            format!(
                "GET /obj/u?size=10 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
                 11171\r\n{}\r\n0\r\n\r\n{next}",
                "x".repeat(70_001)
            ),
            true,
        ),
        // Cut: the client half-closes after 3 of 10 bytes.
        (
            "GET /obj/u?size=10 HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc".into(),
            true,
        ),
        // Slow: 3 of 10 bytes, and the connection held open.
        (
            "GET /obj/u?size=10 HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc".into(),
            false,
        ),
        // Malformed chunking.
        (
            format!("GET /obj/u?size=10 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{next}"),
            true,
        ),
    ];
    for (input, half_close) in cases {
        let start = tokio::time::Instant::now();
        let mut out = exchange(&node, input.as_bytes(), 1 << 20, half_close).await;
        let what = &input[..input.len().min(120)];
        let (head, body) = response(&mut out);
        assert!(head.starts_with("http/1.1 200 ok\r\n"), "{what:?}: {head}");
        assert_eq!(body.len(), 10, "{what:?}");
        assert!(head.contains("connection: close"), "{what:?}: {head}");
        assert!(out.is_empty(), "{what:?}: the next request was answered");
        if !half_close {
            // Answered when `header_read_timeout` (1 s) ran out.
            let waited = start.elapsed();
            assert!(waited >= Duration::from_secs(1), "{waited:?}");
            assert!(waited < Duration::from_secs(2), "{waited:?}");
        }
    }
    node.stop().await.unwrap();
}

/// A pass forwards the body; when it was read to its end the connection stays open.
#[tokio::test(start_paused = true)]
async fn a_forwarded_body_keeps_the_connection() {
    let node = node().await;
    let input = b"POST /obj/p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello\
                  GET /obj/p?size=10 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let mut out = exchange(&node, input, 1 << 16, false).await;
    let (head, _) = response(&mut out);
    // `ecdn origin` answers other methods with 405.
    assert!(head.starts_with("http/1.1 405 "), "{head}");
    assert!(head.contains("x-cache: pass"), "{head}");
    assert!(!head.contains("connection: close"), "{head}");
    let (head, body) = response(&mut out);
    assert!(head.contains("x-cache: miss"), "{head}");
    assert_eq!(body.len(), 10);
    node.stop().await.unwrap();
}

/// A pass whose origin answers before the body has arrived (here `ecdn origin`'s 405, which
/// reads no body): the answer closes the connection instead of leaving hyper to read the rest
/// of the body behind a finished response.
#[tokio::test(start_paused = true)]
async fn a_pass_answered_before_its_body_was_read_closes_the_connection() {
    let node = node().await;
    let input = b"POST /obj/p HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc";
    let mut out = exchange(&node, input, 1 << 16, false).await;
    let (head, _) = response(&mut out);
    assert!(head.starts_with("http/1.1 405 "), "{head}");
    assert!(head.contains("connection: close"), "{head}");
    assert!(out.is_empty());
    node.stop().await.unwrap();
}
