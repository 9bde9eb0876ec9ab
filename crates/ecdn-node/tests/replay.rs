//! Replays on the peer listener (issue 45): a captured, signed peer request is taken once, by
//! the node it was signed for, under the signature version this build speaks; a write signed
//! before a purge of its object cannot bring the object back, whether the purge came from a
//! peer's `DELETE` or a `PURGE` the node received itself; and a replayed `DELETE` does not drop
//! a fresh fill.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use ecdn_cluster::auth::{digest, fresh_nonce, unix_now_ms, ClusterKey, Recipient};
use ecdn_cluster::piece::PieceMeta;
use ecdn_cluster::wire::{self, PieceName};
use http_body_util::{BodyExt, Full};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;

#[path = "common/cluster.rs"]
mod harness;
use harness::{holds, TestCluster, KEY, PURGE_TOKEN};

/// Headers of a signed request, as captured on the wire.
type Captured = Vec<(&'static str, String)>;

/// The headers of `method path` with `body`, signed for `to` now with a fresh nonce.
fn sign(method: &str, path: &str, to: SocketAddr, body: &[u8]) -> Captured {
    let key = ClusterKey::new(KEY.as_bytes());
    let to = Recipient { addr: to, epoch: 0 };
    key.sign_digest(
        method,
        path,
        to,
        unix_now_ms(),
        fresh_nonce(),
        &digest(body),
    )
    .headers()
    .to_vec()
}

/// Sends `method path` with exactly `headers` and `body` to `addr` on a fresh connection: the
/// status and the body as text.
async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> (StatusCode, String) {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut req = Request::builder().method(method).uri(path);
    if !headers.iter().any(|(n, _)| *n == "host") {
        req = req.header("host", addr.to_string());
    }
    for (n, v) in headers {
        req = req.header(*n, v.as_str());
    }
    let req = req.body(Full::new(Bytes::copy_from_slice(body))).unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// A replica's trailing frame: 1000 bytes and metadata without a code.
fn replica_frame() -> Vec<u8> {
    let meta = PieceMeta {
        coding: None,
        http: Vec::new(),
    }
    .encode();
    let mut frame = vec![7u8; 1000];
    frame.extend_from_slice(&wire::frame_tail(&meta));
    frame
}

/// Node `i`'s `cluster` counter `name` from `/_ecdn/stats`.
async fn counter(c: &TestCluster, i: usize, name: &str) -> u64 {
    let (s, body) = send(c.admin(i), "GET", "/_ecdn/stats", &[], b"").await;
    assert_eq!(s, StatusCode::OK);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["cluster"][name].as_u64().unwrap()
}

/// Lets the clock move past the millisecond of what was signed last.
async fn next_ms() {
    tokio::time::sleep(Duration::from_millis(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replayed_puts_and_deletes_are_refused_and_a_purge_stays_in_effect() {
    let c = TestCluster::start(3, "c2dn", 2, 1).await;
    let key = "cdn.test/obj/4501?size=1000";
    let (put_path, has_path) = (
        wire::piece_path(PieceName::Replica, key, None),
        wire::has_path(key),
    );
    let frame = replica_frame();
    let (a, b) = (c.peer(1), c.peer(2));

    // A write signed for node 1 and kept back by whoever is on the path: sent only later.
    let held_back = sign("PUT", &put_path, a, &frame);
    next_ms().await;
    // A write for node 1, taken once.
    let put = sign("PUT", &put_path, a, &frame);
    let (s, text) = send(a, "PUT", &put_path, &put, &frame).await;
    assert_eq!((s, text.trim()), (StatusCode::OK, "stored"));
    assert_eq!(holds(a, key).await, Some(vec![PieceName::Replica]));
    // The same request again: refused as a replay.
    let (s, text) = send(a, "PUT", &put_path, &put, &frame).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{text}");
    assert!(text.contains("replayed"), "{text}");
    // At another node: refused there too (it names node 1), and nothing is stored.
    let (s, text) = send(b, "PUT", &put_path, &put, &frame).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{text}");
    assert!(text.contains(&format!("signed for {a}")), "{text}");
    assert_eq!(holds(b, key).await, None);
    // Signature version 1's headers (no version): refused, both versions named.
    let v1: Captured = put
        .iter()
        .filter(|(n, _)| *n != "x-ecdn-version")
        .cloned()
        .collect();
    let (s, text) = send(a, "PUT", &put_path, &v1, &frame).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{text}");
    assert!(
        text.contains("version 1") && text.contains("version 3"),
        "{text}"
    );
    // Version 2's (HMAC-SHA256): refused the same way.
    let mut v2 = put.clone();
    for (n, v) in v2.iter_mut() {
        if *n == "x-ecdn-version" {
            *v = "2".into();
        }
    }
    let (s, text) = send(a, "PUT", &put_path, &v2, &frame).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{text}");
    assert!(
        text.contains("version 2") && text.contains("version 3"),
        "{text}"
    );

    // A peer's DELETE purges it at node 1.
    next_ms().await;
    let delete = sign("DELETE", &has_path, a, b"");
    let (s, text) = send(a, "DELETE", &has_path, &delete, b"").await;
    assert_eq!((s, text.trim()), (StatusCode::OK, "purged"));
    assert_eq!(holds(a, key).await, None);
    // The write signed before the purge, never delivered until now: refused, the purge
    // stays in effect.
    let (s, text) = send(a, "PUT", &put_path, &held_back, &frame).await;
    assert_eq!(s, StatusCode::CONFLICT, "{text}");
    assert!(text.contains("purge"), "{text}");
    assert_eq!(holds(a, key).await, None);
    // A fresh fill, signed after the purge, is stored; the DELETE replayed does not drop it.
    next_ms().await;
    let fill = sign("PUT", &put_path, a, &frame);
    let (s, text) = send(a, "PUT", &put_path, &fill, &frame).await;
    assert_eq!((s, text.trim()), (StatusCode::OK, "stored"));
    let (s, text) = send(a, "DELETE", &has_path, &delete, b"").await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{text}");
    assert!(text.contains("replayed"), "{text}");
    assert_eq!(holds(a, key).await, Some(vec![PieceName::Replica]));

    // Counted: node 1 refused two replays and one write older than a purge; node 2 the
    // request for node 1.
    assert_eq!(counter(&c, 1, "peer_replays_refused").await, 2);
    assert_eq!(counter(&c, 1, "writes_refused_after_purge").await, 1);
    assert_eq!(counter(&c, 2, "peer_replays_refused").await, 1);
    c.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_through_the_admin_listener_is_not_undone_by_an_older_write() {
    let c = TestCluster::start(3, "c2dn", 2, 1).await;
    let uri = "/obj/4502?size=1000";
    let key = format!("cdn.test{uri}");
    let put_path = wire::piece_path(PieceName::Replica, &key, None);
    let frame = replica_frame();
    // Writes signed for node 0 (which takes the PURGE) and node 2 (which gets its DELETE),
    // held back until after the purge.
    let held_back: Vec<(SocketAddr, Captured)> = [0, 2]
        .into_iter()
        .map(|i| (c.peer(i), sign("PUT", &put_path, c.peer(i), &frame)))
        .collect();
    next_ms().await;
    let auth = [
        ("host", "cdn.test".to_string()),
        ("authorization", format!("Bearer {PURGE_TOKEN}")),
    ];
    let (s, text) = send(c.admin(0), "PURGE", uri, &auth, b"").await;
    assert_eq!(s, StatusCode::OK, "{text}");
    let answer: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["unreached"], serde_json::json!([]), "{answer}");
    for (peer, headers) in &held_back {
        let (s, text) = send(*peer, "PUT", &put_path, headers, &frame).await;
        assert_eq!(s, StatusCode::CONFLICT, "{peer}: {text}");
        assert_eq!(holds(*peer, &key).await, None, "{peer}");
    }
    // Writes signed after it are taken.
    next_ms().await;
    for i in [0, 2] {
        let fresh = sign("PUT", &put_path, c.peer(i), &frame);
        let (s, text) = send(c.peer(i), "PUT", &put_path, &fresh, &frame).await;
        assert_eq!(s, StatusCode::OK, "node {i}: {text}");
    }
    c.stop_all().await;
}
