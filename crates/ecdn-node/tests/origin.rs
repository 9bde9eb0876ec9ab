//! `ecdn origin` over real HTTP on loopback: content, ranges, validators, errors.

use std::time::Duration;

use ecdn_node::content;
use ecdn_node::origin::{Origin, OriginConfig};

mod common;

async fn fetch(
    addr: std::net::SocketAddr,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
) -> (u16, hyper::HeaderMap, Vec<u8>) {
    let r = common::fetch_with(addr, method, uri, headers).await;
    (r.status, r.headers, r.body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_verifiable_objects() {
    let origin = Origin::start("127.0.0.1:0".parse().unwrap(), OriginConfig::default())
        .await
        .unwrap();
    let a = origin.addr;

    let (s, h, body) = fetch(a, "GET", "/obj/42?size=1MiB", &[]).await;
    assert_eq!(s, 200);
    assert_eq!(body.len(), 1 << 20);
    assert_eq!(content::first_mismatch(42, 0, &body), None);
    assert_eq!(h["cache-control"], "public, max-age=3600");
    assert_eq!(h["content-length"], "1048576");
    let etag = h["etag"].to_str().unwrap().to_string();

    let (s, h, body) = fetch(a, "HEAD", "/obj/42?size=1MiB", &[]).await;
    assert_eq!((s, body.len()), (200, 0));
    assert_eq!(h["content-length"], "1048576");

    let (s, h, body) = fetch(
        a,
        "GET",
        "/obj/42?size=1MiB",
        &[("range", "bytes=1000-1999")],
    )
    .await;
    assert_eq!(s, 206);
    assert_eq!(h["content-range"], "bytes 1000-1999/1048576");
    assert_eq!(body, content::bytes(42, 1000, 1000));

    let (s, h, _) = fetch(a, "GET", "/obj/42?size=100", &[("range", "bytes=100-")]).await;
    assert_eq!(s, 416);
    assert_eq!(h["content-range"], "bytes */100");

    let (s, _, body) = fetch(a, "GET", "/obj/42?size=1MiB", &[("if-none-match", &etag)]).await;
    assert_eq!((s, body.len()), (304, 0));

    let (s, h, _) = fetch(a, "GET", "/obj/7?size=10&cc=no-store%2C+private", &[]).await;
    assert_eq!(s, 200);
    assert_eq!(h["cache-control"], "no-store, private");

    let (s, _, _) = fetch(a, "GET", "/obj/7?status=503", &[]).await;
    assert_eq!(s, 503);
    let (s, _, _) = fetch(a, "GET", "/nothing", &[]).await;
    assert_eq!(s, 404);
    let (s, _, _) = fetch(a, "POST", "/obj/7", &[]).await;
    assert_eq!(s, 405);
    let (s, _, _) = fetch(a, "GET", "/obj/7?size=lots", &[]).await;
    assert_eq!(s, 400);

    origin.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paced_body_is_still_exact() {
    let cfg = OriginConfig {
        bandwidth: Some(8 << 20),
        latency: Duration::from_millis(5),
        frame: 16 << 10,
        ..OriginConfig::default()
    };
    let origin = Origin::start("127.0.0.1:0".parse().unwrap(), cfg)
        .await
        .unwrap();
    let (s, _, body) = fetch(origin.addr, "GET", "/obj/video.mp4?size=300000", &[]).await;
    assert_eq!(s, 200);
    assert_eq!(body.len(), 300_000);
    assert_eq!(
        content::first_mismatch(content::object_id("video.mp4"), 0, &body),
        None
    );
    origin.stop().await.unwrap();
}
