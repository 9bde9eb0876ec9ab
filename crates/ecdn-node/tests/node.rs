//! `ecdn node` over real HTTP on loopback, in front of an `ecdn origin`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use ecdn_node::content;
use ecdn_node::node::{AdminListen, Node, NodeConfig, RunningNode};
use ecdn_node::origin::{Origin, OriginConfig};

use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper_util::rt::TokioIo;

mod common;
use common::{admin, fetch, fetch_with, Reply};

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
        "/obj/b?size=1000&cc=no-cache",
        "/obj/b?status=503",
    ] {
        for _ in 0..3 {
            let r = fetch(n.addr, "GET", uri).await;
            assert_eq!(r.x_cache(), "MISS", "{uri}");
        }
    }
    // No Cache-Control and no Expires, but a Last-Modified: heuristically fresh.
    let uri = "/obj/b?size=1000&cc=";
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "MISS");
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "HIT-HOC");
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

    // A new node over the same file: its HOC is empty, its disk is not. The node that stopped
    // saved the disk's directory, so the start read it, not the ring.
    assert!(ecdn_store::directory_path(&path).exists());
    let n = node(config(o.addr, 64 << 10, Some(path))).await;
    let s = fetch(admin(&n), "GET", "/_ecdn/stats").await;
    let v: serde_json::Value = serde_json::from_slice(&s.body).unwrap();
    let started = v["disk"]["started"].as_str().unwrap();
    assert!(
        started.starts_with("from its directory (2 slots)"),
        "{started}"
    );
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
async fn stale_objects_are_revalidated_after_max_age() {
    let o = origin().await;
    let dir = tempfile::tempdir().unwrap();
    let n = node(config(o.addr, 8 << 20, Some(dir.path().join("disk")))).await;
    let uri = "/obj/c?size=1000&cc=max-age%3D1";
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "MISS");
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "HIT-HOC");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    // Stale with an `ETag`: validated with the origin (`304`), not refetched.
    let r = fetch(n.addr, "GET", uri).await;
    assert_object(&r, "c", 1000);
    assert_eq!(r.x_cache(), "REVALIDATED");
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "HIT-HOC");
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_failures_are_502_and_504() {
    // A port nobody listens on: bound, not listening (connections are refused), and held so
    // that no listener started meanwhile (the node's own) can take it.
    let closed = tokio::net::TcpSocket::new_v4().unwrap();
    closed.bind(any()).unwrap();
    let down = closed.local_addr().unwrap();
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
    // An error answer changed nothing: the entry stays.
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "HIT-HOC");
    let other = "/obj/g?size=100";
    assert_eq!(fetch(n.addr, "GET", other).await.x_cache(), "MISS");
    // A successful POST whose answer points at another URL of the host.
    let r = fetch_with(
        n.addr,
        "POST",
        uri,
        &[("x-origin-status", "201"), ("x-origin-location", other)],
    )
    .await;
    assert_eq!((r.status, r.x_cache()), (201, "PASS"));
    assert_eq!(fetch(n.addr, "GET", other).await.x_cache(), "MISS");
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
    let h = fetch(admin(&n), "GET", "/_ecdn/health").await;
    assert_eq!((h.status, h.body.as_slice()), (200, &b"ok\n"[..]));
    fetch(n.addr, "GET", "/obj/g?size=1000").await;
    fetch(n.addr, "GET", "/obj/g?size=1000").await;
    fetch(n.addr, "GET", "/obj/h?size=2MiB").await;
    fetch(n.addr, "GET", "/obj/h?size=2MiB").await;
    let s = fetch(admin(&n), "GET", "/_ecdn/stats").await;
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

fn assert_part(r: &Reply, name: &str, start: u64, len: usize, size: u64) {
    assert_eq!(r.status, 206);
    assert_eq!(r.body.len(), len);
    assert_eq!(
        content::first_mismatch(content::object_id(name), start, &r.body),
        None
    );
    assert_eq!(r.headers["content-length"], len.to_string());
    assert_eq!(
        r.headers["content-range"],
        format!("bytes {start}-{}/{size}", start + len as u64 - 1)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranges_on_hoc_hits() {
    let o = origin().await;
    let n = node(config(o.addr, 8 << 20, None)).await;
    let uri = "/obj/r?size=100000";
    let first = fetch(n.addr, "GET", uri).await;
    assert_object(&first, "r", 100_000);
    let etag = first.headers["etag"].to_str().unwrap().to_string();

    let r = fetch_with(n.addr, "GET", uri, &[("range", "bytes=1000-1999")]).await;
    assert_eq!(r.x_cache(), "HIT-HOC");
    assert_part(&r, "r", 1000, 1000, 100_000);
    let r = fetch_with(n.addr, "GET", uri, &[("range", "bytes=-10")]).await;
    assert_part(&r, "r", 99_990, 10, 100_000);
    let r = fetch_with(n.addr, "GET", uri, &[("range", "bytes=99000-200000")]).await;
    assert_part(&r, "r", 99_000, 1000, 100_000);

    // HEAD: the 206 headers, no body.
    let r = fetch_with(n.addr, "HEAD", uri, &[("range", "bytes=0-99")]).await;
    assert_eq!((r.status, r.x_cache()), (206, "HIT-HOC"));
    assert_eq!(r.headers["content-range"], "bytes 0-99/100000");
    assert_eq!(r.headers["content-length"], "100");
    assert!(r.body.is_empty());

    // Unsatisfiable.
    let r = fetch_with(n.addr, "GET", uri, &[("range", "bytes=100000-")]).await;
    assert_eq!((r.status, r.x_cache()), (416, "HIT-HOC"));
    assert_eq!(r.headers["content-range"], "bytes */100000");
    assert!(r.body.is_empty());

    // If-Range: a matching ETag or date applies the range, anything else gets the full 200.
    let r = fetch_with(
        n.addr,
        "GET",
        uri,
        &[("range", "bytes=0-9"), ("if-range", &etag)],
    )
    .await;
    assert_part(&r, "r", 0, 10, 100_000);
    let r = fetch_with(
        n.addr,
        "GET",
        uri,
        &[
            ("range", "bytes=0-9"),
            ("if-range", ecdn_node::origin::LAST_MODIFIED),
        ],
    )
    .await;
    assert_part(&r, "r", 0, 10, 100_000);
    for wrong in ["\"nope\"", "Fri, 02 Jan 2026 00:00:00 GMT"] {
        let r = fetch_with(
            n.addr,
            "GET",
            uri,
            &[("range", "bytes=0-9"), ("if-range", wrong)],
        )
        .await;
        assert_object(&r, "r", 100_000);
        assert_eq!(r.x_cache(), "HIT-HOC");
        assert!(r.headers.get("content-range").is_none());
    }

    // Abusive range lists are ignored: the full 200.
    let many = format!("bytes={}", vec!["0-0"; 17].join(","));
    for abusive in [many.as_str(), "bytes=0-99999,0-99999"] {
        let r = fetch_with(n.addr, "GET", uri, &[("range", abusive)]).await;
        assert_object(&r, "r", 100_000);
    }

    // Several ranges: multipart/byteranges.
    let r = fetch_with(n.addr, "GET", uri, &[("range", "bytes=0-9, 500-504")]).await;
    assert_eq!(r.status, 206);
    let ct = r.headers["content-type"].to_str().unwrap().to_string();
    let boundary = ct.strip_prefix("multipart/byteranges; boundary=").unwrap();
    assert_eq!(r.headers["content-length"], r.body.len().to_string());
    let id = content::object_id("r");
    let mut expected = Vec::new();
    for (start, len) in [(0u64, 10usize), (500, 5)] {
        expected.extend_from_slice(
            format!(
                "\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n\
                 Content-Range: bytes {start}-{}/100000\r\n\r\n",
                start + len as u64 - 1
            )
            .as_bytes(),
        );
        expected.extend_from_slice(&content::bytes(id, start, len));
    }
    expected.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    assert_eq!(r.body, expected);
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranges_on_disk_hits() {
    let o = origin().await;
    let dir = tempfile::tempdir().unwrap();
    let n = node(config(o.addr, 64 << 10, Some(dir.path().join("disk")))).await;
    let uri = "/obj/rd?size=1MiB";
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "MISS");
    let r = fetch_with(n.addr, "GET", uri, &[("range", "bytes=500000-700000")]).await;
    assert_eq!(r.x_cache(), "HIT-DISK");
    assert_part(&r, "rd", 500_000, 200_001, 1 << 20);
    let r = fetch_with(n.addr, "GET", uri, &[("range", "bytes=2000000-3000000")]).await;
    assert_eq!((r.status, r.x_cache()), (416, "HIT-DISK"));
    assert_eq!(r.headers["content-range"], "bytes */1048576");
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_cache_control() {
    let o = origin().await;
    let dir = tempfile::tempdir().unwrap();
    let n = node(config(o.addr, 8 << 20, Some(dir.path().join("disk")))).await;
    let uri = "/obj/cc?size=2000";
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "MISS");
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "HIT-HOC");
    for h in [
        ("cache-control", "no-cache"),
        ("pragma", "no-cache"),
        ("cache-control", "max-age=0"),
    ] {
        let r = fetch_with(n.addr, "GET", uri, &[h]).await;
        assert_object(&r, "cc", 2000);
        assert_eq!(r.x_cache(), "MISS", "{h:?}");
    }
    // A generous max-age and only-if-cached are happy with the cached copy.
    for h in [
        ("cache-control", "max-age=3600"),
        ("cache-control", "only-if-cached"),
    ] {
        let r = fetch_with(n.addr, "GET", uri, &[h]).await;
        assert_object(&r, "cc", 2000);
        assert_eq!(r.x_cache(), "HIT-HOC", "{h:?}");
    }

    // no-store: served, not stored (neither in the HOC nor on disk).
    let fresh = "/obj/ns?size=3000";
    let r = fetch_with(n.addr, "GET", fresh, &[("cache-control", "no-store")]).await;
    assert_object(&r, "ns", 3000);
    assert_eq!(r.x_cache(), "MISS");
    assert_eq!(fetch(n.addr, "GET", fresh).await.x_cache(), "MISS");
    assert_eq!(fetch(n.addr, "GET", fresh).await.x_cache(), "HIT-HOC");

    // only-if-cached never reaches the origin: stop it first.
    o.stop().await.unwrap();
    let r = fetch_with(
        n.addr,
        "GET",
        "/obj/never?size=10",
        &[("cache-control", "only-if-cached")],
    )
    .await;
    assert_eq!((r.status, r.x_cache()), (504, "MISS"));
    // Still a hit for what is cached.
    let r = fetch_with(n.addr, "GET", uri, &[("cache-control", "only-if-cached")]).await;
    assert_object(&r, "cc", 2000);
    let s = fetch(admin(&n), "GET", "/_ecdn/stats").await;
    let v: serde_json::Value = serde_json::from_slice(&s.body).unwrap();
    assert_eq!(v["origin_errors"], 0);
    n.stop().await.unwrap();
}

/// Sends a GET and returns the response with its body unread, plus the connection task.
async fn start_get(
    addr: SocketAddr,
    uri: &str,
) -> (
    hyper::Response<hyper::body::Incoming>,
    tokio::task::JoinHandle<hyper::Result<()>>,
) {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    let conn = tokio::spawn(conn);
    let req = Request::builder()
        .uri(uri)
        .header("host", "cdn.test")
        .body(Empty::<Bytes>::new())
        .unwrap();
    (send.send_request(req).await.unwrap(), conn)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misses_stream_from_the_origin() {
    let o = Origin::start(
        any(),
        OriginConfig {
            bandwidth: Some(4 << 20),
            ..OriginConfig::default()
        },
    )
    .await
    .unwrap();
    let n = node(config(o.addr, 16 << 20, None)).await;
    let uri = "/obj/stream?size=8MiB";
    let t0 = std::time::Instant::now();
    let (resp, _conn) = start_get(n.addr, uri).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-cache"], "MISS");
    assert_eq!(resp.headers()["content-length"], (8u64 << 20).to_string());
    let mut body = resp.into_body();
    let mut data = Vec::new();
    let first = loop {
        let f = body.frame().await.unwrap().unwrap();
        if let Ok(d) = f.into_data() {
            data.extend_from_slice(&d);
            break t0.elapsed();
        }
    };
    while let Some(f) = body.frame().await {
        if let Ok(d) = f.unwrap().into_data() {
            data.extend_from_slice(&d);
        }
    }
    let total = t0.elapsed();
    eprintln!("8 MiB miss at 4 MiB/s: first frame {first:?}, whole body {total:?}");
    // 8 MiB at 4 MiB/s: about 2 s in all, the first frame long before.
    assert!(
        first < Duration::from_secs(1),
        "first frame after {first:?}"
    );
    assert!(
        total > Duration::from_millis(1500),
        "whole body in {total:?}"
    );
    assert_eq!(data.len(), 8 << 20);
    assert_eq!(
        content::first_mismatch(content::object_id("stream"), 0, &data),
        None
    );
    let r = fetch(n.addr, "GET", uri).await;
    assert_object(&r, "stream", 8 << 20);
    assert_eq!(r.x_cache(), "HIT-HOC");
    assert_eq!(o.requests(), 1);
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_misses_collapse_into_one_origin_fetch() {
    let o = Origin::start(
        any(),
        OriginConfig {
            latency: Duration::from_millis(200),
            bandwidth: Some(16 << 20),
            ..OriginConfig::default()
        },
    )
    .await
    .unwrap();
    let n = node(config(o.addr, 16 << 20, None)).await;
    for (uri, name, size, stored) in [
        ("/obj/together?size=1MiB", "together", 1 << 20, true),
        // Not storable: the followers that joined before the headers still share it.
        (
            "/obj/nostore?size=100000&cc=no-store",
            "nostore",
            100_000,
            false,
        ),
    ] {
        let before = o.requests();
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let addr = n.addr;
                tokio::spawn(async move { fetch(addr, "GET", uri).await })
            })
            .collect();
        let mut labels = Vec::new();
        for t in tasks {
            let r = t.await.unwrap();
            assert_object(&r, name, size);
            labels.push(r.x_cache().to_string());
        }
        labels.sort();
        assert_eq!(labels[0], "MISS", "{labels:?}");
        assert!(
            labels[1..].iter().all(|l| l == "MISS-COLLAPSED"),
            "{labels:?}"
        );
        assert_eq!(o.requests() - before, 1, "{uri}");
        let r = fetch(n.addr, "GET", uri).await;
        assert_object(&r, name, size);
        assert_eq!(r.x_cache(), if stored { "HIT-HOC" } else { "MISS" });
    }
    let s = fetch(admin(&n), "GET", "/_ecdn/stats").await;
    let v: serde_json::Value = serde_json::from_slice(&s.body).unwrap();
    // Misses are origin fetches (the paper's): the collapsed requests are counted apart.
    assert_eq!(v["collapsed"], 14);
    assert_eq!(v["misses"].as_u64(), Some(o.requests()));
    assert_eq!(v["misses"], 3);
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_leaving_mid_transfer_never_leaves_a_partial_object() {
    let o = Origin::start(
        any(),
        OriginConfig {
            bandwidth: Some(8 << 20),
            ..OriginConfig::default()
        },
    )
    .await
    .unwrap();
    let n = node(config(o.addr, 16 << 20, None)).await;
    let uri = "/obj/left?size=4MiB";
    let (resp, conn) = start_get(n.addr, uri).await;
    assert_eq!(resp.headers()["x-cache"], "MISS");
    let mut body = resp.into_body();
    body.frame().await.unwrap().unwrap();
    drop(body);
    conn.abort();
    // The fetch goes on without the client (4 MiB at 8 MiB/s) and fills the cache.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let r = fetch(n.addr, "GET", uri).await;
    assert_object(&r, "left", 4 << 20);
    assert_eq!(r.x_cache(), "HIT-HOC");
    assert_eq!(o.requests(), 1);
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origin_dying_mid_body_aborts_the_client_and_stores_nothing() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // An origin that promises 100000 bytes and closes after 50000.
    let listener = tokio::net::TcpListener::bind(any()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = listener.accept().await.unwrap();
            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tokio::spawn(async move {
                let mut req = Vec::new();
                let mut buf = [0u8; 1024];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    let n = s.read(&mut buf).await.unwrap();
                    if n == 0 {
                        return;
                    }
                    req.extend_from_slice(&buf[..n]);
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-length: 100000\r\n\
                            cache-control: max-age=3600\r\n\r\n";
                s.write_all(head.as_bytes()).await.unwrap();
                s.write_all(&[7u8; 50_000]).await.unwrap();
                tokio::time::sleep(Duration::from_millis(50)).await;
            });
        }
    });
    let n = node(config(addr, 16 << 20, None)).await;
    for _ in 0..2 {
        let (resp, _conn) = start_get(n.addr, "/obj/dies").await;
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["x-cache"], "MISS");
        assert!(resp.into_body().collect().await.is_err());
    }
    assert_eq!(accepted.load(std::sync::atomic::Ordering::Relaxed), 2);
    n.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Hostile clients
// ---------------------------------------------------------------------------------------------

/// Writes `bytes` on a fresh connection and reads until the node closes it (or `limit`
/// passes): what was read, and whether the connection was closed (EOF or reset).
async fn raw(addr: SocketAddr, bytes: &[u8], limit: Duration) -> (String, bool) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    // The node may answer and close before taking everything: ignore write errors.
    let _ = s.write_all(bytes).await;
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    let closed = tokio::time::timeout(limit, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .is_ok();
    (String::from_utf8_lossy(&out).into_owned(), closed)
}

const SECOND: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_heads_and_targets_are_refused() {
    let o = origin().await;
    let n = node(NodeConfig {
        max_header_bytes: 16 << 10,
        ..config(o.addr, 8 << 20, None)
    })
    .await;
    // A 20 KB header block: hyper answers 431 and closes.
    let big = format!(
        "GET /obj/h?size=10 HTTP/1.1\r\nHost: cdn.test\r\nX-Big: {}\r\n\r\n",
        "a".repeat(20_000)
    );
    let (resp, closed) = raw(n.addr, big.as_bytes(), SECOND).await;
    assert!(resp.starts_with("HTTP/1.1 431"), "{resp:?}");
    assert!(closed);
    // 101 headers (default limit 100): 431 too.
    let mut many = String::from("GET /obj/h?size=10 HTTP/1.1\r\nHost: cdn.test\r\n");
    for i in 0..100 {
        many.push_str(&format!("X-H{i}: v\r\n"));
    }
    many.push_str("\r\n");
    let (resp, closed) = raw(n.addr, many.as_bytes(), SECOND).await;
    assert!(resp.starts_with("HTTP/1.1 431"), "{resp:?}");
    assert!(closed);
    // 50 are fine (not 100 here: the node adds `Via` and the origin also allows 100).
    let mut ok = String::from("GET /obj/h?size=10 HTTP/1.1\r\nHost: cdn.test\r\n");
    for i in 0..50 {
        ok.push_str(&format!("X-H{i}: v\r\n"));
    }
    ok.push_str("\r\n");
    let (resp, _) = raw(n.addr, ok.as_bytes(), Duration::from_millis(300)).await;
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp:?}");
    // A 9 KB request target (limit 8 KiB): 414, and the connection is closed.
    let long = format!("/obj/h?size=10&pad={}", "p".repeat(9000));
    let r = fetch(n.addr, "GET", &long).await;
    assert_eq!(r.status, 414);
    let (resp, closed) = raw(
        n.addr,
        format!("GET {long} HTTP/1.1\r\nHost: cdn.test\r\n\r\n").as_bytes(),
        SECOND,
    )
    .await;
    assert!(resp.starts_with("HTTP/1.1 414"), "{resp:?}");
    assert!(closed);
    let r = fetch(n.addr, "GET", "/obj/h?size=10").await;
    assert_eq!(r.status, 200);
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_clients_are_disconnected() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let o = origin().await;
    let n = node(NodeConfig {
        header_read_timeout: Duration::from_millis(500),
        ..config(o.addr, 8 << 20, None)
    })
    .await;
    let start = tokio::time::Instant::now();
    let s = tokio::net::TcpStream::connect(n.addr).await.unwrap();
    let (mut rd, mut wr) = s.into_split();
    let trickle = tokio::spawn(async move {
        for b in b"GET /obj/slow?size=10 HTTP/1.1\r\nHost: cdn.test\r\n\r\n" {
            if wr.write_all(&[*b]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    // A well-behaved client is served meanwhile.
    let r = fetch(n.addr, "GET", "/obj/fast?size=10").await;
    assert_eq!(r.status, 200);
    let mut out = Vec::new();
    let closed = tokio::time::timeout(Duration::from_millis(1500), async {
        let mut buf = [0u8; 1024];
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    let took = start.elapsed();
    assert!(closed.is_ok(), "slow client still connected");
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_millis(1100),
        "{took:?}"
    );
    // Never answered with a 200.
    assert!(!String::from_utf8_lossy(&out).contains(" 200 "));
    trickle.abort();
    // An idle connection that sends nothing is closed after the same timeout.
    let (resp, closed) = raw(n.addr, b"", SECOND).await;
    assert!(closed && !resp.contains(" 200 "), "{resp:?}");
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

/// One response from `s`: its head and its `Content-Length` bytes of body, as text.
async fn read_response(s: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = out.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&out[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if out.len() >= end + 4 + len {
                return String::from_utf8_lossy(&out).into_owned();
            }
        }
        let n = s.read(&mut buf).await.unwrap();
        assert!(
            n > 0,
            "closed mid-response: {:?}",
            String::from_utf8_lossy(&out)
        );
        out.extend_from_slice(&buf[..n]);
    }
}

/// The head deadline counts from the end of the previous response: a response slower than
/// `header_read_timeout` is sent whole, the next request sent within the timeout is served on
/// the same connection, and the connection closes once idle past it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_head_deadline_counts_from_the_last_response() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let slow = Origin::start(
        any(),
        OriginConfig {
            latency: Duration::from_millis(800),
            ..OriginConfig::default()
        },
    )
    .await
    .unwrap();
    let n = node(NodeConfig {
        header_read_timeout: Duration::from_millis(300),
        ..config(slow.addr, 8 << 20, None)
    })
    .await;
    let mut s = tokio::net::TcpStream::connect(n.addr).await.unwrap();
    let get = b"GET /obj/long?size=10 HTTP/1.1\r\nHost: cdn.test\r\n\r\n";
    // A miss the origin answers after 800 ms, past the deadline: answered whole.
    s.write_all(get).await.unwrap();
    let r = read_response(&mut s).await;
    assert!(r.starts_with("HTTP/1.1 200"), "{r:?}");
    assert!(r.to_ascii_lowercase().contains("x-cache: miss"), "{r:?}");
    // 150 ms later the same connection still serves.
    tokio::time::sleep(Duration::from_millis(150)).await;
    s.write_all(get).await.unwrap();
    let r = read_response(&mut s).await;
    assert!(r.to_ascii_lowercase().contains("x-cache: hit"), "{r:?}");
    // Then idle: closed about 300 ms after that response.
    let idle = tokio::time::Instant::now();
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(SECOND, s.read(&mut buf)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "{read:?}");
    let took = idle.elapsed();
    assert!(took >= Duration::from_millis(200), "{took:?}");
    n.stop().await.unwrap();
    slow.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ambiguous_framing_is_never_smuggled() {
    let o = origin().await;
    let n = node(config(o.addr, 8 << 20, None)).await;
    // Two differing Content-Lengths: 400, connection closed.
    let (resp, closed) = raw(
        n.addr,
        b"POST /obj/s HTTP/1.1\r\nHost: cdn.test\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
        SECOND,
    )
    .await;
    assert!(resp.starts_with("HTTP/1.1 400"), "{resp:?}");
    assert!(closed);
    // A Transfer-Encoding not ending in chunked: 400, connection closed.
    let (resp, closed) = raw(
        n.addr,
        b"POST /obj/s HTTP/1.1\r\nHost: cdn.test\r\nTransfer-Encoding: gzip\r\n\r\n",
        SECOND,
    )
    .await;
    assert!(resp.starts_with("HTTP/1.1 400"), "{resp:?}");
    assert!(closed);
    // Content-Length and Transfer-Encoding, in either order, with a request smuggled after
    // the chunked body: hyper lets chunked win (RFC 9112 §6.3), answers that one request with
    // `Connection: close` and closes; the smuggled request is never read.
    for framing in [
        "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n",
    ] {
        let req = format!(
            "POST /obj/s HTTP/1.1\r\nHost: cdn.test\r\n{framing}\r\n0\r\n\r\n\
             GET /obj/smuggled?size=10 HTTP/1.1\r\nHost: cdn.test\r\n\r\n"
        );
        let (resp, closed) = raw(n.addr, req.as_bytes(), SECOND).await;
        assert!(closed, "{resp:?}");
        assert_eq!(resp.matches("HTTP/1.1 ").count(), 1, "{resp:?}");
        assert!(
            resp.to_ascii_lowercase().contains("connection: close"),
            "{resp:?}"
        );
    }
    let stats = fetch(admin(&n), "GET", "/_ecdn/stats").await;
    let stats: serde_json::Value = serde_json::from_slice(&stats.body).unwrap();
    assert_eq!(stats["requests"], 2, "the smuggled GETs were never served");
    assert_eq!(stats["misses"], 0);
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_limit_are_closed() {
    use tokio::io::AsyncWriteExt;
    let o = origin().await;
    let n = node(NodeConfig {
        max_connections: 2,
        ..config(o.addr, 8 << 20, None)
    })
    .await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let stream = tokio::net::TcpStream::connect(n.addr).await.unwrap();
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(conn);
        held.push(send);
    }
    async fn get(send: &mut hyper::client::conn::http1::SendRequest<Empty<Bytes>>) -> u16 {
        let req = Request::builder()
            .uri("/obj/c?size=10")
            .header("host", "cdn.test")
            .body(Empty::new())
            .unwrap();
        // The connection takes the next request once it has finished the previous exchange.
        send.ready().await.unwrap();
        let resp = send.send_request(req).await.unwrap();
        let status = resp.status().as_u16();
        resp.into_body().collect().await.unwrap();
        status
    }
    for send in &mut held {
        assert_eq!(get(send).await, 200);
    }
    // A third concurrent connection is accepted and closed at once, unanswered.
    let (resp, closed) = raw(
        n.addr,
        b"GET /obj/c?size=10 HTTP/1.1\r\nHost: cdn.test\r\n\r\n",
        SECOND,
    )
    .await;
    assert!(closed && resp.is_empty(), "{resp:?}");
    // The first two still work.
    for send in &mut held {
        assert_eq!(get(send).await, 200);
    }
    // Once one closes, a new connection gets its slot.
    held.pop();
    let mut served = false;
    for _ in 0..50 {
        let mut s = tokio::net::TcpStream::connect(n.addr).await.unwrap();
        s.write_all(b"GET /obj/c?size=10 HTTP/1.1\r\nHost: cdn.test\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut out = Vec::new();
        let _ = tokio::io::AsyncReadExt::read_to_end(&mut s, &mut out).await;
        if out.starts_with(b"HTTP/1.1 200") {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(served);
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_are_normalised() {
    let o = origin().await;
    let n = node(config(o.addr, 8 << 20, None)).await;
    let first = fetch(n.addr, "GET", "/obj/./42/../42?size=100").await;
    assert_object(&first, "42", 100);
    assert_eq!(first.x_cache(), "MISS");
    let second = fetch(n.addr, "GET", "/obj/42?size=100").await;
    assert_object(&second, "42", 100);
    assert_eq!(second.x_cache(), "HIT-HOC");
    // Escaped unreserved characters are decoded: `%34%32` is `42`.
    let third = fetch(n.addr, "GET", "/%6fbj/%34%32?size=100").await;
    assert_eq!(third.x_cache(), "HIT-HOC");
    // The query is kept as is.
    let other = fetch(n.addr, "GET", "/obj/42?size=%3100").await;
    assert_eq!(other.x_cache(), "MISS");
    for bad in [
        "/../etc/passwd",
        "/obj/../../etc/passwd",
        "/%2e%2e/x",
        "/obj/a%00b",
        "/obj/%zz",
    ] {
        let r = fetch(n.addr, "GET", bad).await;
        assert_eq!(r.status, 400, "{bad}");
    }
    let (resp, closed) = raw(
        n.addr,
        b"GET /../etc/passwd HTTP/1.1\r\nHost: cdn.test\r\n\r\n",
        SECOND,
    )
    .await;
    assert!(resp.starts_with("HTTP/1.1 400") && closed, "{resp:?}");
    // Raw control characters never make it past the parser.
    let (resp, _) = raw(
        n.addr,
        b"GET /obj/a\x01b HTTP/1.1\r\nHost: cdn.test\r\n\r\n",
        SECOND,
    )
    .await;
    assert!(resp.starts_with("HTTP/1.1 400"), "{resp:?}");
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

/// The value of the exposition line `name` (series name with labels), exactly.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|l| {
        let (name, value) = l.rsplit_once(' ')?;
        (name == series).then(|| value.parse().unwrap())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_tiers_and_latencies() {
    let o = origin().await;
    let n = node(config(o.addr, 8 << 20, None)).await;
    assert_eq!(
        fetch(n.addr, "GET", "/obj/m?size=1000").await.x_cache(),
        "MISS"
    );
    assert_eq!(
        fetch(n.addr, "GET", "/obj/m?size=1000").await.x_cache(),
        "HIT-HOC"
    );
    let r = fetch(admin(&n), "GET", "/_ecdn/metrics").await;
    assert_eq!(r.status, 200);
    assert!(r.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain; version=0.0.4"));
    let m = String::from_utf8(r.body).unwrap();
    assert!(m
        .lines()
        .any(|l| l == "ecdn_responses_total{tier=\"hoc\"} 1"));
    assert!(m
        .lines()
        .any(|l| l == "ecdn_responses_total{tier=\"miss\"} 1"));
    assert_eq!(sample(&m, "ecdn_requests_total"), Some(2.0));
    assert_eq!(sample(&m, "ecdn_bytes_served_total"), Some(2000.0));
    assert_eq!(
        sample(&m, "ecdn_hoc_capacity_bytes"),
        Some(f64::from(8 << 20))
    );
    assert!(sample(&m, "ecdn_hoc_used_bytes").unwrap() >= 1000.0);
    assert!(m.contains("# TYPE ecdn_request_duration_seconds histogram"));
    for (tier, expected) in [("hoc", 1.0), ("miss", 1.0), ("disk", 0.0), ("error", 0.0)] {
        let buckets: Vec<(String, f64)> = m
            .lines()
            .filter(|l| {
                l.starts_with(&format!(
                    "ecdn_request_duration_seconds_bucket{{tier=\"{tier}\",le="
                ))
            })
            .map(|l| {
                let (name, v) = l.rsplit_once(' ').unwrap();
                (name.to_string(), v.parse().unwrap())
            })
            .collect();
        assert_eq!(buckets.len(), 15, "{tier}");
        assert!(buckets.last().unwrap().0.contains("le=\"+Inf\""));
        assert!(
            buckets.windows(2).all(|w| w[0].1 <= w[1].1),
            "{tier}: {buckets:?}"
        );
        let count = sample(
            &m,
            &format!("ecdn_request_duration_seconds_count{{tier=\"{tier}\"}}"),
        );
        assert_eq!(count, Some(expected), "{tier}");
        assert_eq!(buckets.last().unwrap().1, expected, "{tier}");
        assert!(
            sample(
                &m,
                &format!("ecdn_request_duration_seconds_sum{{tier=\"{tier}\"}}")
            )
            .is_some(),
            "{tier}"
        );
    }
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

/// Issue 65: a purge token anyone could guess is refused before the node starts, as an admin
/// token is (a purge on the client listener empties an object for every client).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_purge_token_is_refused_at_start() {
    let o = origin().await;
    for (token, says) in [
        ("s3cret", "6 bytes"),
        ("", "empty"),
        ("a purge token!!!", "space"),
    ] {
        let cfg = NodeConfig {
            purge_token: Some(token.into()),
            ..config(o.addr, 8 << 20, None)
        };
        let e = Node::start("127.0.0.1:0".parse().unwrap(), cfg)
            .await
            .err()
            .expect("refused");
        let e = e.to_string();
        assert!(e.contains("purge token") && e.contains(says), "{e}");
    }
    o.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_needs_the_token() {
    let o = origin().await;
    let dir = tempfile::tempdir().unwrap();
    let n = node(NodeConfig {
        purge_token: Some("s3cret-purge-token".into()),
        ..config(o.addr, 8 << 20, Some(dir.path().join("disk")))
    })
    .await;
    let uri = "/obj/p?size=5000";
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "MISS");
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "HIT-HOC");
    assert_eq!(fetch(admin(&n), "PURGE", uri).await.status, 401);
    let wrong = fetch_with(
        admin(&n),
        "PURGE",
        uri,
        &[("authorization", "Bearer s3cres")],
    )
    .await;
    assert_eq!(wrong.status, 401);
    let basic = fetch_with(
        admin(&n),
        "PURGE",
        uri,
        &[("authorization", "Basic s3cret-purge-token")],
    )
    .await;
    assert_eq!(basic.status, 401);
    // Refused purges left the entry alone.
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "HIT-HOC");
    let ok = fetch_with(
        admin(&n),
        "PURGE",
        uri,
        &[("authorization", "Bearer s3cret-purge-token")],
    )
    .await;
    assert_eq!(ok.status, 200);
    let v: serde_json::Value = serde_json::from_slice(&ok.body).unwrap();
    assert_eq!(v["purged"], true);
    // Gone from the HOC and the disk alike.
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "MISS");
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "HIT-HOC");
    let absent = fetch_with(
        admin(&n),
        "PURGE",
        "/obj/never",
        &[("authorization", "Bearer s3cret-purge-token")],
    )
    .await;
    assert_eq!(absent.status, 200);
    let v: serde_json::Value = serde_json::from_slice(&absent.body).unwrap();
    assert_eq!(v["purged"], false);
    n.stop().await.unwrap();

    // No token configured: purging is disabled, whatever the request carries.
    let n = node(config(o.addr, 8 << 20, None)).await;
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "MISS");
    let off = fetch_with(
        admin(&n),
        "PURGE",
        uri,
        &[("authorization", "Bearer s3cret-purge-token")],
    )
    .await;
    assert_eq!(off.status, 403);
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "HIT-HOC");
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

/// The HOC runs every eviction policy the simulator has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hoc_takes_every_eviction_policy() {
    let o = origin().await;
    // An offline policy needs the future: refused.
    let e = Node::start(
        any(),
        NodeConfig {
            hoc_policy: "belady".into(),
            ..config(o.addr, 8 << 20, None)
        },
    )
    .await
    .err()
    .expect("belady refused");
    assert!(e.to_string().contains("offline"), "{e}");
    for policy in ecdn_policy::eviction::NAMES {
        let n = node(NodeConfig {
            hoc_policy: policy.into(),
            ..config(o.addr, 8 << 20, None)
        })
        .await;
        let uri = format!("/obj/{policy}?size=1000");
        assert_eq!(
            fetch(n.addr, "GET", &uri).await.x_cache(),
            "MISS",
            "{policy}"
        );
        let hit = fetch(n.addr, "GET", &uri).await;
        assert_eq!(hit.x_cache(), "HIT-HOC", "{policy}");
        assert_object(&hit, policy, 1000);
        n.stop().await.unwrap();
    }
    o.stop().await.unwrap();
}

/// Every answer carries the request's id, which the origin also got: the client's own when
/// valid, else a new one for each request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_ids_reach_the_origin_and_come_back() {
    let o = origin().await;
    let n = node(config(o.addr, 8 << 20, None)).await;
    let id = |r: &Reply, h: &str| {
        r.headers
            .get(h)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default()
    };
    let saw = ecdn_node::origin::SAW_REQUEST_ID;
    // None sent: a new one, 16 hex digits, the same at the origin.
    let miss = fetch(n.addr, "GET", "/obj/r?size=100").await;
    let new = id(&miss, "x-request-id");
    assert!(
        new.len() == 16 && new.bytes().all(|b| b.is_ascii_hexdigit()),
        "{new}"
    );
    assert_eq!(id(&miss, saw), new);
    // A hit gets its own.
    let hit = fetch(n.addr, "GET", "/obj/r?size=100").await;
    assert_eq!(hit.x_cache(), "HIT-HOC");
    assert!(!id(&hit, "x-request-id").is_empty() && id(&hit, "x-request-id") != new);
    // The client's valid id is kept, to the origin and back; an invalid one is replaced.
    let mine = "0af7651916cd43dd8448eb211c80319c";
    let r = fetch_with(n.addr, "GET", "/obj/s?size=100", &[("x-request-id", mine)]).await;
    assert_eq!(
        (id(&r, "x-request-id"), id(&r, saw)),
        (mine.into(), mine.into())
    );
    let r = fetch_with(
        n.addr,
        "GET",
        "/obj/t?size=100",
        &[("x-request-id", "two words")],
    )
    .await;
    let got = id(&r, "x-request-id");
    assert!(got != "two words" && got.len() == 16, "{got}");
    assert_eq!(id(&r, saw), got);
    // A pass, too.
    let r = fetch_with(n.addr, "POST", "/obj/u?size=10", &[("x-request-id", mine)]).await;
    assert_eq!(id(&r, "x-request-id"), mine);
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

/// The node's own endpoints are on its admin listener only: on the client listener they are a
/// counted `404` (`PURGE`: `405`), never proxied, unless the health probe is let through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_listener_refuses_the_admin_endpoints() {
    let o = origin().await;
    let n = node(NodeConfig {
        purge_token: Some("s3cret-purge-token".into()),
        ..config(o.addr, 8 << 20, None)
    })
    .await;
    assert_ne!(admin(&n), n.addr);
    for path in [
        "/_ecdn/health",
        "/_ecdn/stats",
        "/_ecdn/metrics",
        "/_ecdn/status",
    ] {
        let r = fetch(n.addr, "GET", path).await;
        assert_eq!(r.status, 404, "{path}");
        assert!(String::from_utf8_lossy(&r.body).contains("admin listener"));
    }
    let auth = [("authorization", "Bearer s3cret-purge-token")];
    let p = fetch_with(n.addr, "PURGE", "/obj/a", &auth).await;
    assert_eq!(p.status, 405);
    assert!(p.headers.contains_key("allow"));
    // Counted, and none reached the origin or the request counters.
    let s = stats(admin(&n)).await;
    assert_eq!(
        (s["admin_refused"].as_u64(), s["requests"].as_u64()),
        (Some(5), Some(0))
    );
    assert_eq!(o.requests(), 0);
    let m = String::from_utf8(fetch(admin(&n), "GET", "/_ecdn/metrics").await.body).unwrap();
    assert_eq!(sample(&m, "ecdn_admin_refused_total"), Some(5.0));
    // The admin listener answers what it knows and nothing else.
    assert_eq!(fetch(admin(&n), "GET", "/obj/a").await.status, 404);
    assert_eq!(
        fetch_with(admin(&n), "PURGE", "/obj/a", &auth).await.status,
        200
    );
    n.stop().await.unwrap();

    // With the probe let through: health on the client listener, and only health.
    let n = node(NodeConfig {
        client_health: true,
        ..config(o.addr, 8 << 20, None)
    })
    .await;
    let h = fetch(n.addr, "GET", "/_ecdn/health").await;
    assert_eq!((h.status, h.body.as_slice()), (200, &b"ok\n"[..]));
    assert_eq!(fetch(n.addr, "GET", "/_ecdn/stats").await.status, 404);
    assert_eq!(stats(admin(&n)).await["admin_refused"], 1);
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

/// An admin listener beyond loopback must have a token, and then every request needs it (it
/// also authorises `PURGE`, with no purge token configured). Traffic goes to loopback only: the
/// listener binds the wildcard address, the test connects to 127.0.0.1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_listener_beyond_loopback_needs_its_token() {
    let o = origin().await;
    let wildcard = SocketAddr::from(([0, 0, 0, 0], 0));
    let refused = Node::start(
        any(),
        NodeConfig {
            admin: Some(AdminListen {
                addr: wildcard,
                token: None,
                tls: None,
            }),
            ..config(o.addr, 8 << 20, None)
        },
    )
    .await;
    let e = refused
        .err()
        .expect("a wildcard admin listener without a token");
    assert!(e.to_string().contains("needs a token"), "{e}");
    // A token nobody can send, or anyone could guess, is refused as well.
    for (token, why) in [
        ("", "empty"),
        ("adm1n", "5 bytes"),
        ("sixteen bytes!!!", "space"),
    ] {
        let refused = Node::start(
            any(),
            NodeConfig {
                admin: Some(AdminListen {
                    addr: wildcard,
                    token: Some(token.into()),
                    tls: None,
                }),
                ..config(o.addr, 8 << 20, None)
            },
        )
        .await;
        let e = refused.err().expect("a bad admin token");
        assert!(e.to_string().contains(why), "{token:?}: {e}");
    }

    let n = node(NodeConfig {
        admin: Some(AdminListen {
            addr: wildcard,
            token: Some("adm1n-token-of-16".into()),
            tls: None,
        }),
        ..config(o.addr, 8 << 20, None)
    })
    .await;
    let at = SocketAddr::from(([127, 0, 0, 1], admin(&n).port()));
    let uri = "/obj/t?size=3000";
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "MISS");
    for headers in [
        &[][..],
        &[("authorization", "Bearer adm1m-token-of-16")][..],
        &[("authorization", "Basic adm1n-token-of-16")][..],
    ] {
        for (method, path) in [
            ("GET", "/_ecdn/stats"),
            ("GET", "/_ecdn/health"),
            ("PURGE", uri),
        ] {
            let r = fetch_with(at, method, path, headers).await;
            assert_eq!(r.status, 401, "{method} {path} {headers:?}");
            assert!(r.headers.contains_key("www-authenticate"));
        }
    }
    // Refused requests changed nothing.
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "HIT-HOC");
    let token = [("authorization", "Bearer adm1n-token-of-16")];
    let s = fetch_with(at, "GET", "/_ecdn/stats", &token).await;
    assert_eq!(s.status, 200);
    let v: serde_json::Value = serde_json::from_slice(&s.body).unwrap();
    assert_eq!(v["requests"], 2);
    let p = fetch_with(at, "PURGE", uri, &token).await;
    assert_eq!(p.status, 200);
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "MISS");
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_failures_are_the_error_tier() {
    let closed = tokio::net::TcpListener::bind(any()).await.unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let n = node(config(addr, 8 << 20, None)).await;
    assert_eq!(fetch(n.addr, "GET", "/obj/e?size=10").await.status, 502);
    let m = String::from_utf8(fetch(admin(&n), "GET", "/_ecdn/metrics").await.body).unwrap();
    assert_eq!(
        sample(&m, "ecdn_responses_total{tier=\"error\"}"),
        Some(1.0)
    );
    assert_eq!(sample(&m, "ecdn_responses_total{tier=\"miss\"}"), Some(0.0));
    assert_eq!(
        sample(&m, "ecdn_request_duration_seconds_count{tier=\"error\"}"),
        Some(1.0)
    );
    // The default policy is AdaptSize, which admits everything until it has tuned c.
    assert!(m.lines().any(|l| l.starts_with("ecdn_adaptsize_c_bytes ")));
    n.stop().await.unwrap();
}

async fn stats(addr: SocketAddr) -> serde_json::Value {
    serde_json::from_slice(&fetch(addr, "GET", "/_ecdn/stats").await.body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_entries_are_revalidated_with_the_origin() {
    let o = origin().await;
    let n = node(config(o.addr, 8 << 20, None)).await;
    let uri = "/obj/rv?size=5000&cc=max-age%3D1";
    let first = fetch(n.addr, "GET", uri).await;
    assert_object(&first, "rv", 5000);
    assert_eq!(first.x_cache(), "MISS");
    assert_eq!(o.requests(), 1);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let r = fetch(n.addr, "GET", uri).await;
    assert_object(&r, "rv", 5000);
    assert_eq!(r.x_cache(), "REVALIDATED");
    assert_eq!(r.headers["content-length"], "5000");
    assert_eq!(r.headers["etag"], first.headers["etag"]);
    assert_eq!(r.headers["age"], "0");
    // One conditional request, answered `304` (anything else would not be REVALIDATED).
    assert_eq!(o.requests(), 2);
    let hit = fetch(n.addr, "GET", uri).await;
    assert_object(&hit, "rv", 5000);
    assert_eq!(hit.x_cache(), "HIT-HOC");
    assert_eq!(o.requests(), 2);
    let s = stats(admin(&n)).await;
    assert_eq!(s["revalidated"], 1);
    let m = fetch(admin(&n), "GET", "/_ecdn/metrics").await;
    let m = String::from_utf8(m.body).unwrap();
    assert_eq!(
        sample(&m, "ecdn_responses_total{tier=\"revalidated\"}"),
        Some(1.0)
    );
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_disk_entries_are_revalidated_and_written_back() {
    let o = origin().await;
    let dir = tempfile::tempdir().unwrap();
    // The object is larger than the HOC: it lives on disk only. Fresh for 2 s: the origin's
    // `Date` has whole seconds, so a written-back entry may look up to a second old at once,
    // and with `max-age=1` a busy machine's next request found it stale again (seen once).
    let n = node(config(o.addr, 1000, Some(dir.path().join("disk")))).await;
    let uri = "/obj/rd?size=20000&cc=max-age%3D2";
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "MISS");
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "HIT-DISK");
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let r = fetch(n.addr, "GET", uri).await;
    assert_object(&r, "rd", 20_000);
    assert_eq!(r.x_cache(), "REVALIDATED");
    assert_eq!(o.requests(), 2);
    let hit = fetch(n.addr, "GET", uri).await;
    assert_object(&hit, "rd", 20_000);
    assert_eq!(hit.x_cache(), "HIT-DISK");
    assert_eq!(o.requests(), 2);
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_if_error_serves_stale_entries_when_the_origin_is_down() {
    let o = origin().await;
    let n = node(config(o.addr, 8 << 20, None)).await;
    let sie = "/obj/se?size=3000&cc=max-age%3D1%2C+stale-if-error%3D60";
    let mr = "/obj/mr?size=3000&cc=max-age%3D1%2C+stale-if-error%3D60%2C+must-revalidate";
    let plain = "/obj/pl?size=3000&cc=max-age%3D1";
    for uri in [sie, mr, plain] {
        assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "MISS");
    }
    tokio::time::sleep(Duration::from_millis(1200)).await;
    o.stop().await.unwrap();
    let r = fetch(n.addr, "GET", sie).await;
    assert_object(&r, "se", 3000);
    assert_eq!(r.x_cache(), "STALE");
    assert!(!r.headers.contains_key("warning"));
    // Still stale, still served while the origin is down.
    assert_eq!(fetch(n.addr, "GET", sie).await.x_cache(), "STALE");
    // `must-revalidate` forbids serving it stale; no `stale-if-error`: neither.
    assert_eq!(fetch(n.addr, "GET", mr).await.status, 502);
    assert_eq!(fetch(n.addr, "GET", plain).await.status, 502);
    let s = stats(admin(&n)).await;
    assert_eq!(s["stale"], 2);
    n.stop().await.unwrap();
}

async fn get_with(addr: SocketAddr, uri: &str, name: &str, value: &str) -> Reply {
    fetch_with(addr, "GET", uri, &[(name, value)]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vary_stores_one_variant_per_request_header_value() {
    let o = origin().await;
    let n = node(NodeConfig {
        purge_token: Some("purge-token-of-the-test".into()),
        ..config(o.addr, 8 << 20, None)
    })
    .await;
    let uri = "/obj/v?size=2000&vary=Accept-Encoding";
    let get = |ae: &'static str| get_with(n.addr, uri, "accept-encoding", ae);
    let gzip = get("gzip").await;
    assert_object(&gzip, "v", 2000);
    assert_eq!(gzip.x_cache(), "MISS");
    assert_eq!(gzip.headers["vary"], "Accept-Encoding");
    assert_eq!(get("br").await.x_cache(), "MISS");
    assert_eq!(o.requests(), 2);
    let hit = get("gzip").await;
    assert_object(&hit, "v", 2000);
    assert_eq!(hit.x_cache(), "HIT-HOC");
    assert_eq!(get("br").await.x_cache(), "HIT-HOC");
    // Values are compared after trimming and collapsing whitespace.
    assert_eq!(get("  gzip ").await.x_cache(), "HIT-HOC");
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "MISS");
    assert_eq!(o.requests(), 3);
    // A purge removes every variant.
    let p = fetch_with(
        admin(&n),
        "PURGE",
        uri,
        &[("authorization", "Bearer purge-token-of-the-test")],
    )
    .await;
    assert_eq!(p.status, 200);
    assert_eq!(get("gzip").await.x_cache(), "MISS");
    assert_eq!(get("br").await.x_cache(), "MISS");
    assert_eq!(get("br").await.x_cache(), "HIT-HOC");
    // `Vary: *` is never stored.
    let star = "/obj/v?size=2000&vary=*";
    assert_eq!(fetch(n.addr, "GET", star).await.x_cache(), "MISS");
    assert_eq!(fetch(n.addr, "GET", star).await.x_cache(), "MISS");
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_misses_of_other_variants_do_not_share_an_answer() {
    let o = Origin::start(
        any(),
        OriginConfig {
            latency: Duration::from_millis(300),
            ..OriginConfig::default()
        },
    )
    .await
    .unwrap();
    let n = node(config(o.addr, 8 << 20, None)).await;
    let uri = "/obj/w?size=1000&vary=accept-language";
    let get = |l: &'static str| get_with(n.addr, uri, "accept-language", l);
    // The first answer is not known to vary yet, so both start under the same key; the
    // second must not be given the first one's variant.
    let (a, (b, c)) = tokio::join!(get("en"), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        tokio::join!(get("fr"), get("en"))
    });
    for r in [&a, &b, &c] {
        assert_object(r, "w", 1000);
    }
    assert_eq!(a.headers["vary"], "accept-language");
    assert_eq!(
        [a.x_cache(), b.x_cache(), c.x_cache()],
        ["MISS", "MISS", "MISS-COLLAPSED"]
    );
    assert_eq!(o.requests(), 2);
    assert_eq!(get("en").await.x_cache(), "HIT-HOC");
    assert_eq!(get("fr").await.x_cache(), "HIT-HOC");
    assert_eq!(o.requests(), 2);
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

/// Sends `GET uri` on a raw connection and reads to EOF: (head, body bytes received).
async fn raw_get(addr: SocketAddr, uri: &str) -> (String, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {uri} HTTP/1.1\r\nHost: cdn.test\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await;
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    let body = out.split_off(split + 4);
    (String::from_utf8_lossy(&out).into_owned(), body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_disk_hits_stream_in_verified_batches() {
    let o = origin().await;
    let dir = tempfile::tempdir().unwrap();
    let disk = dir.path().join("disk");
    let n = node(config(o.addr, 64 << 10, Some(disk.clone()))).await;
    // Two mapped batches (8 MiB and the rest), each sent in verified 1 MiB pieces.
    let size: u64 = (9 << 20) + 12_345;
    let uri = format!("/obj/big?size={size}");
    assert_eq!(fetch(n.addr, "GET", &uri).await.x_cache(), "MISS");
    let r = fetch(n.addr, "GET", &uri).await;
    assert_eq!(r.x_cache(), "HIT-DISK");
    assert_object(&r, "big", size as usize);
    // A range across the batch boundary, and a HEAD.
    let r = fetch_with(n.addr, "GET", &uri, &[("range", "bytes=8388000-8400000")]).await;
    assert_eq!(r.x_cache(), "HIT-DISK");
    assert_part(&r, "big", 8_388_000, 12_001, size);
    let r = fetch(n.addr, "HEAD", &uri).await;
    assert_eq!((r.status, r.x_cache()), (200, "HIT-DISK"));
    assert_eq!(r.headers["content-length"], size.to_string());
    assert!(r.body.is_empty());
    // Two ranges in different batches: multipart, each part exact.
    let r = fetch_with(
        n.addr,
        "GET",
        &uri,
        &[("range", "bytes=10-19,9000000-9000009")],
    )
    .await;
    assert_eq!(r.status, 206);
    assert_eq!(r.headers["content-length"], r.body.len().to_string());
    let id = content::object_id("big");
    for (start, len) in [(10u64, 10usize), (9_000_000, 10)] {
        let want = content::bytes(id, start, len);
        assert!(
            r.body.windows(len).any(|w| w == want.as_slice()),
            "part at {start} missing"
        );
    }

    // Flip one byte in the second batch's first MiB on disk: the first batch still streams,
    // then the response is cut short (never a wrong byte), and the entry is dropped.
    let ring = std::fs::read(&disk).unwrap();
    let probe = content::bytes(id, 8_700_000, 64);
    let at = ring
        .windows(64)
        .position(|w| w == probe.as_slice())
        .expect("payload on disk");
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&disk).unwrap();
        f.write_all_at(&[ring[at] ^ 0x20], at as u64).unwrap();
    }
    let (head, body) = raw_get(n.addr, &uri).await;
    assert!(head.contains("HIT-DISK"), "{head}");
    assert!(
        body.len() < size as usize,
        "a corrupt block must cut the body"
    );
    assert!(body.len() >= 8 << 20, "the good batch was sent");
    assert_eq!(
        content::first_mismatch(id, 0, &body),
        None,
        "a wrong byte was served"
    );
    let r = fetch(n.addr, "GET", &uri).await;
    assert_eq!(r.x_cache(), "MISS", "the corrupt entry was dropped");
    assert_object(&r, "big", size as usize);
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_while_revalidate_answers_at_once_and_validates_in_the_background() {
    let o = origin().await;
    let n = node(config(o.addr, 8 << 20, None)).await;
    let uri = "/obj/swr?size=3000&cc=max-age%3D1%2C%20stale-while-revalidate%3D60";
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "MISS");
    assert_eq!(o.requests(), 1);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    // Stale but within the window: served from the cache at once.
    let r = fetch(n.addr, "GET", uri).await;
    assert_object(&r, "swr", 3000);
    assert_eq!(r.x_cache(), "STALE");
    // The background validation(s) reach the origin and make the copy fresh again.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let r = fetch(n.addr, "GET", uri).await;
        assert_object(&r, "swr", 3000);
        if r.x_cache() == "HIT-HOC" {
            assert_eq!(r.headers["age"], "0");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never revalidated");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let validations = o.requests() - 1;
    assert!((1..=2).contains(&validations), "{validations} validations");
    // Without stale-while-revalidate, max-stale lets a client take a stale copy.
    let uri = "/obj/ms?size=3000&cc=max-age%3D1";
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "MISS");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let before = o.requests();
    let r = fetch_with(n.addr, "GET", uri, &[("cache-control", "max-stale=60")]).await;
    assert_eq!((r.status, r.x_cache()), (200, "STALE"));
    let r = fetch_with(n.addr, "GET", uri, &[("cache-control", "max-stale=0")]).await;
    assert_eq!(r.x_cache(), "REVALIDATED");
    assert_eq!(o.requests(), before + 1);
    // min-fresh asks for more freshness than a 1 s lifetime can have.
    let r = fetch_with(n.addr, "GET", uri, &[("cache-control", "min-fresh=5")]).await;
    assert_ne!(r.x_cache(), "HIT-HOC");
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origins_are_chosen_by_host() {
    let (a, b) = (origin().await, origin().await);
    let cfg = NodeConfig {
        origin: String::new(),
        routes: vec![
            ("img.test".into(), format!("http://{}", a.addr)),
            ("VIDEO.test".into(), format!("http://{}", b.addr)),
        ],
        ..config(a.addr, 8 << 20, None)
    };
    let n = node(cfg).await;
    let get = |host: &'static str| async move {
        fetch_with(n.addr, "GET", "/obj/h?size=100", &[("host", host)]).await
    };
    assert_eq!(get("img.test").await.x_cache(), "MISS");
    assert_eq!((a.requests(), b.requests()), (1, 0));
    // Case-insensitive, port ignored; the cache key keeps hosts apart.
    assert_eq!(get("video.TEST:8080").await.x_cache(), "MISS");
    assert_eq!((a.requests(), b.requests()), (1, 1));
    assert_eq!(get("img.test").await.x_cache(), "HIT-HOC");
    // No route and no default origin: 421, nothing fetched.
    let r = get("other.test").await;
    assert_eq!(r.status, 421);
    assert_eq!((a.requests(), b.requests()), (1, 1));
    n.stop().await.unwrap();
    a.stop().await.unwrap();
    b.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_drains_the_response_in_progress() {
    // A slow origin: 1 MB at 4 MB/s takes ~250 ms.
    let o = Origin::start(
        any(),
        OriginConfig {
            bandwidth: Some(4_000_000),
            frame: 16 << 10,
            ..OriginConfig::default()
        },
    )
    .await
    .unwrap();
    let n = node(config(o.addr, 8 << 20, None)).await;
    let addr = n.addr;
    let (resp, _conn) = start_get(addr, "/obj/d?size=1000000").await;
    assert_eq!(resp.status(), 200);
    let started = std::time::Instant::now();
    let stopping = tokio::spawn(n.stop());
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Not accepting any more.
    let refused = tokio::time::timeout(SECOND, tokio::net::TcpStream::connect(addr)).await;
    assert!(
        matches!(refused, Ok(Err(_))),
        "a new connection was accepted"
    );
    // The response in progress completes, whole.
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body.len(), 1_000_000);
    assert_eq!(
        content::first_mismatch(content::object_id("d"), 0, &body),
        None
    );
    stopping.await.unwrap().unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    o.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_node_frees_its_disk_even_with_a_client_stalled_on_a_disk_hit() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let o = origin().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disk.ring");
    let cfg = NodeConfig {
        drain_timeout: Duration::from_millis(300),
        ..config(o.addr, 64 << 10, Some(path.clone()))
    };
    let n = node(cfg.clone()).await;
    let uri = "/obj/big?size=12MiB";
    assert_eq!(fetch(n.addr, "GET", uri).await.x_cache(), "MISS");
    // A disk hit whose client reads its head and stops reading: the node's read task and the
    // mapped bytes it sends wait on the full socket.
    let mut s = tokio::net::TcpStream::connect(n.addr).await.unwrap();
    s.write_all(format!("GET {uri} HTTP/1.1\r\nHost: cdn.test\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut head = vec![0u8; 4096];
    let got = s.read(&mut head).await.unwrap();
    assert!(String::from_utf8_lossy(&head[..got]).contains("HIT-DISK"));
    // The drain gives up on it after `drain_timeout`; the store is closed all the same.
    n.stop().await.unwrap();
    let n = node(cfg).await;
    let r = fetch(n.addr, "GET", uri).await;
    assert_object(&r, "big", 12 << 20);
    assert_eq!(r.x_cache(), "HIT-DISK");
    drop(s);
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_half_closes_still_gets_its_miss() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let o = origin().await;
    let n = node(config(o.addr, 8 << 20, None)).await;
    let mut s = tokio::net::TcpStream::connect(n.addr).await.unwrap();
    s.write_all(b"GET /obj/hc?size=100 HTTP/1.1\r\nHost: cdn.test\r\n\r\n")
        .await
        .unwrap();
    s.shutdown().await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("x-cache: MISS"), "{text}");
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}
