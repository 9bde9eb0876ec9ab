//! `ecdn node` over real HTTP on loopback, in front of an `ecdn origin`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use ecdn_node::content;
use ecdn_node::node::{Node, NodeConfig, RunningNode};
use ecdn_node::origin::{Origin, OriginConfig};
use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper_util::rt::TokioIo;

struct Reply {
    status: u16,
    headers: hyper::HeaderMap,
    body: Vec<u8>,
}

impl Reply {
    fn x_cache(&self) -> &str {
        self.headers
            .get("x-cache")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

async fn fetch(addr: SocketAddr, method: &str, uri: &str) -> Reply {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("host", "cdn.test")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let resp = send.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    Reply {
        status,
        headers,
        body,
    }
}

fn any() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

async fn origin() -> Origin {
    Origin::start(any(), OriginConfig::default()).await.unwrap()
}

fn config(origin: SocketAddr, hoc_size: u64, disk: Option<PathBuf>) -> NodeConfig {
    NodeConfig {
        origin: format!("http://{origin}"),
        hoc_size,
        disk_path: disk,
        disk_size: 16 << 20,
        ..NodeConfig::default()
    }
}

async fn node(cfg: NodeConfig) -> RunningNode {
    Node::start(any(), cfg).await.unwrap()
}

fn assert_object(r: &Reply, name: &str, size: usize) {
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), size);
    assert_eq!(
        content::first_mismatch(content::object_id(name), 0, &r.body),
        None
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_get_is_a_hoc_hit() {
    let o = origin().await;
    let n = node(config(o.addr, 8 << 20, None)).await;
    let first = fetch(n.addr, "GET", "/obj/a?size=100000").await;
    assert_object(&first, "a", 100_000);
    assert_eq!(first.x_cache(), "MISS");
    assert_eq!(first.headers["via"], "1.1 ecdn");
    let second = fetch(n.addr, "GET", "/obj/a?size=100000").await;
    assert_object(&second, "a", 100_000);
    assert_eq!(second.x_cache(), "HIT-HOC");
    assert_eq!(second.headers["age"], "0");
    assert_eq!(second.headers["content-length"], "100000");
    assert_eq!(second.headers["etag"], first.headers["etag"]);
    assert_eq!(second.body, first.body);
    let head = fetch(n.addr, "HEAD", "/obj/a?size=100000").await;
    assert_eq!((head.status, head.x_cache()), (200, "HIT-HOC"));
    assert_eq!(head.headers["content-length"], "100000");
    assert!(head.body.is_empty());
    // Another query is another object.
    let other = fetch(n.addr, "GET", "/obj/a?size=100001").await;
    assert_eq!(other.x_cache(), "MISS");
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uncacheable_answers_are_never_hits() {
    let o = origin().await;
    let dir = tempfile::tempdir().unwrap();
    let n = node(config(o.addr, 8 << 20, Some(dir.path().join("disk")))).await;
    for uri in [
        "/obj/b?size=1000&cc=no-store",
        "/obj/b?size=1000&cc=private%2C+max-age%3D60",
        "/obj/b?size=1000&cc=",
        "/obj/b?status=503",
    ] {
        for _ in 0..3 {
            let r = fetch(n.addr, "GET", uri).await;
            assert_eq!(r.x_cache(), "MISS", "{uri}");
        }
    }
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_objects_and_restarts_hit_the_disk() {
    let o = origin().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disk.ring");
    let n = node(config(o.addr, 64 << 10, Some(path.clone()))).await;
    let uri = "/obj/big?size=1MiB";
    let first = fetch(n.addr, "GET", uri).await;
    assert_object(&first, "big", 1 << 20);
    assert_eq!(first.x_cache(), "MISS");
    for _ in 0..2 {
        // Larger than the HOC: never admitted there, served from disk each time.
        let r = fetch(n.addr, "GET", uri).await;
        assert_object(&r, "big", 1 << 20);
        assert_eq!(r.x_cache(), "HIT-DISK");
        assert_eq!(r.headers["etag"], first.headers["etag"]);
    }
    let small = fetch(n.addr, "GET", "/obj/small?size=1000").await;
    assert_eq!(small.x_cache(), "MISS");
    n.stop().await.unwrap();

    // A new node over the same file: its HOC is empty, its disk is not.
    let n = node(config(o.addr, 64 << 10, Some(path))).await;
    let r = fetch(n.addr, "GET", uri).await;
    assert_object(&r, "big", 1 << 20);
    assert_eq!(r.x_cache(), "HIT-DISK");
    let r = fetch(n.addr, "GET", "/obj/small?size=1000").await;
    assert_object(&r, "small", 1000);
    assert_eq!(r.x_cache(), "HIT-DISK");
    // The disk hit was offered to the HOC (AdaptSize admits everything at first).
    let r = fetch(n.addr, "GET", "/obj/small?size=1000").await;
    assert_object(&r, "small", 1000);
    assert_eq!(r.x_cache(), "HIT-HOC");
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_objects_are_refetched() {
    let o = origin().await;
    let dir = tempfile::tempdir().unwrap();
    let n = node(config(o.addr, 8 << 20, Some(dir.path().join("disk")))).await;
    let uri = "/obj/c?size=1000&cc=max-age%3D1";
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "MISS");
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "HIT-HOC");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let r = fetch(n.addr, "GET", uri).await;
    assert_object(&r, "c", 1000);
    assert_eq!(r.x_cache(), "MISS");
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "HIT-HOC");
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_failures_are_502_and_504() {
    // A port nobody listens on.
    let closed = tokio::net::TcpListener::bind(any()).await.unwrap();
    let down = closed.local_addr().unwrap();
    drop(closed);
    let n = node(config(down, 1 << 20, None)).await;
    let r = fetch(n.addr, "GET", "/obj/d").await;
    assert_eq!(r.status, 502);
    assert_eq!(fetch(n.addr, "GET", "/obj/d").await.status, 502);
    n.stop().await.unwrap();

    let slow = Origin::start(
        any(),
        OriginConfig {
            latency: Duration::from_secs(5),
            ..OriginConfig::default()
        },
    )
    .await
    .unwrap();
    let n = node(NodeConfig {
        origin_timeout: Duration::from_millis(150),
        ..config(slow.addr, 1 << 20, None)
    })
    .await;
    assert_eq!(fetch(n.addr, "GET", "/obj/e").await.status, 504);
    n.stop().await.unwrap();
    slow.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_methods_pass_through_and_invalidate() {
    let o = origin().await;
    let dir = tempfile::tempdir().unwrap();
    let n = node(config(o.addr, 8 << 20, Some(dir.path().join("disk")))).await;
    let uri = "/obj/f?size=5000";
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "MISS");
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "HIT-HOC");
    let r = fetch(n.addr, "POST", uri).await;
    assert_eq!(r.status, 405);
    assert_eq!(r.x_cache(), "PASS");
    assert_eq!(r.headers["allow"], "GET, HEAD");
    // Gone from the HOC and from the disk.
    let r = fetch(n.addr, "GET", uri).await;
    assert_object(&r, "f", 5000);
    assert_eq!(r.x_cache(), "MISS");
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "HIT-HOC");
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_stats() {
    let o = origin().await;
    let dir = tempfile::tempdir().unwrap();
    let n = node(config(o.addr, 1 << 20, Some(dir.path().join("disk")))).await;
    let h = fetch(n.addr, "GET", "/_ecdn/health").await;
    assert_eq!((h.status, h.body.as_slice()), (200, &b"ok\n"[..]));
    fetch(n.addr, "GET", "/obj/g?size=1000").await;
    fetch(n.addr, "GET", "/obj/g?size=1000").await;
    fetch(n.addr, "GET", "/obj/h?size=2MiB").await;
    fetch(n.addr, "GET", "/obj/h?size=2MiB").await;
    let s = fetch(n.addr, "GET", "/_ecdn/stats").await;
    assert_eq!(s.status, 200);
    let v: serde_json::Value = serde_json::from_slice(&s.body).unwrap();
    assert_eq!(v["requests"], 4);
    assert_eq!(v["hoc_hits"], 1);
    assert_eq!(v["disk_hits"], 1);
    assert_eq!(v["misses"], 2);
    assert_eq!(v["bytes_served"], 2 * 1000 + 2 * (2 << 20));
    assert_eq!(v["hoc"]["capacity"], 1 << 20);
    assert_eq!(v["hoc"]["used"], 1000);
    assert_eq!(v["hoc"]["policy"], "lru+adaptsize");
    assert!(v["hoc"].get("c").is_some());
    assert_eq!(v["disk"]["objects"], 2);
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_disk_metadata_is_a_miss() {
    let o = origin().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disk");
    {
        // The ring the node will open (same size), holding an entry with garbage metadata.
        let mut store =
            ecdn_store::Store::open(ecdn_store::StoreConfig::new(&path, 16 << 20)).unwrap();
        let key = ecdn_store::EntryKey::object("cdn.test/obj/z?size=10");
        store.put(&key, b"ECNM\x01garbage", b"0123456789").unwrap();
    }
    let n = node(config(o.addr, 1 << 20, Some(path))).await;
    let r = fetch(n.addr, "GET", "/obj/z?size=10").await;
    assert_object(&r, "z", 10);
    assert_eq!(r.x_cache(), "MISS");
    assert_eq!(
        fetch(n.addr, "GET", "/obj/z?size=10").await.x_cache(),
        "HIT-HOC"
    );
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}
