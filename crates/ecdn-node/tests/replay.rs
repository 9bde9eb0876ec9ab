//! Replays on the peer listener (issue 45): a captured, signed peer request is taken once, by
//! the node it was signed for, under the signature version this build speaks; a write of bytes
//! filled before a purge of its object cannot bring the object back, whether the purge came
//! from a peer's `DELETE` or a `PURGE` the node received itself; and neither a replayed nor a
//! late `DELETE` drops a fresh fill — ordered by the cluster's purge sequence, whatever the
//! senders' clocks say (issue 65).

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use ecdn_cluster::auth::{digest, fresh_nonce, unix_now_ms, ClusterKey, Recipient};
use ecdn_cluster::piece::PieceMeta;
use ecdn_cluster::wire::{self, PieceName};
use ecdn_node::node::meta;
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
    sign_at(method, path, to, body, unix_now_ms())
}

/// [`sign`] by a clock that says `time` (UNIX ms).
fn sign_at(method: &str, path: &str, to: SocketAddr, body: &[u8], time: u64) -> Captured {
    let key = ClusterKey::new(KEY.as_bytes());
    let to = Recipient { addr: to, epoch: 0 };
    key.sign_digest(method, path, to, time, fresh_nonce(), &digest(body))
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

/// A replica's trailing frame: 1000 bytes and metadata without a code, its bytes filled at
/// purge number `filled` (the node's metadata block).
fn replica_frame(filled: u64) -> Vec<u8> {
    let http = meta::encode(&meta::DiskMeta {
        status: StatusCode::OK,
        lifetime_secs: 3600,
        stored_at_unix: unix_now_ms() / 1000,
        age_at_store_secs: 0,
        filled,
        headers: Vec::new(),
    });
    let meta = PieceMeta { coding: None, http }.encode();
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
    // Purge number 1000 of the cluster's sequence; bytes filled before it, and after.
    let (put_path, purge_path) = (
        wire::piece_path(PieceName::Replica, key, None),
        wire::purge_path(key, 1000),
    );
    let (frame, fresh) = (replica_frame(999), replica_frame(1000));
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
    let delete = sign("DELETE", &purge_path, a, b"");
    let (s, text) = send(a, "DELETE", &purge_path, &delete, b"").await;
    assert_eq!((s, text.trim()), (StatusCode::OK, "purged"));
    assert_eq!(holds(a, key).await, None);
    // The write signed before the purge, never delivered until now: refused, the purge
    // stays in effect.
    let (s, text) = send(a, "PUT", &put_path, &held_back, &frame).await;
    assert_eq!(s, StatusCode::CONFLICT, "{text}");
    assert!(text.contains("purge"), "{text}");
    assert_eq!(holds(a, key).await, None);
    // A fresh fill, filled after the purge, is stored; the DELETE replayed does not drop it.
    next_ms().await;
    let fill = sign("PUT", &put_path, a, &fresh);
    let (s, text) = send(a, "PUT", &put_path, &fill, &fresh).await;
    assert_eq!((s, text.trim()), (StatusCode::OK, "stored"));
    let (s, text) = send(a, "DELETE", &purge_path, &delete, b"").await;
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
    let frame = replica_frame(0);
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
    // Numbered by the coordinator's sequence.
    let number = answer["sequence"].as_u64().expect("a numbered purge");
    for (peer, headers) in &held_back {
        let (s, text) = send(*peer, "PUT", &put_path, headers, &frame).await;
        assert_eq!(s, StatusCode::CONFLICT, "{peer}: {text}");
        assert_eq!(holds(*peer, &key).await, None, "{peer}");
    }
    // So is one signed after it of bytes filled before it; those filled at its number are
    // taken.
    next_ms().await;
    for i in [0, 2] {
        let late = sign("PUT", &put_path, c.peer(i), &frame);
        let (s, text) = send(c.peer(i), "PUT", &put_path, &late, &frame).await;
        assert_eq!(s, StatusCode::CONFLICT, "node {i}: {text}");
        let filled = replica_frame(number);
        let fresh = sign("PUT", &put_path, c.peer(i), &filled);
        let (s, text) = send(c.peer(i), "PUT", &put_path, &fresh, &filled).await;
        assert_eq!(s, StatusCode::OK, "node {i}: {text}");
    }
    // A second purge gets a later number.
    let (s, text) = send(c.admin(1), "PURGE", uri, &auth, b"").await;
    assert_eq!(s, StatusCode::OK, "{text}");
    let answer: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(answer["sequence"].as_u64().unwrap() > number, "{answer}");
    assert_eq!(answer["purged"], true, "{answer}");
    c.stop_all().await;
}

/// Issue 65: the order of a purge and a write is the cluster's purge sequence, not the times
/// their senders' clocks signed them at. Each step here went the other way when the times
/// decided: a stale write signed by a clock ahead was taken, a fresh one signed by a clock
/// behind the purger's was refused, and a late `DELETE` dropped the fresh fill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purges_and_writes_are_ordered_by_the_purge_sequence_not_by_the_senders_clocks() {
    let c = TestCluster::start(3, "c2dn", 2, 1).await;
    let key = "cdn.test/obj/4503?size=1000";
    let put_path = wire::piece_path(PieceName::Replica, key, None);
    let purge_path = wire::purge_path(key, 2000);
    let a = c.peer(1);
    let now = unix_now_ms();
    let (stale, fresh) = (replica_frame(1999), replica_frame(2000));
    // The purge, signed by a clock 20 s ahead (within the signature window).
    let delete = sign_at("DELETE", &purge_path, a, b"", now + 20_000);
    let (s, text) = send(a, "DELETE", &purge_path, &delete, b"").await;
    assert_eq!((s, text.trim()), (StatusCode::OK, "not held"));
    // Bytes filled before it, signed by a clock further ahead still: refused.
    let ahead = sign_at("PUT", &put_path, a, &stale, now + 25_000);
    let (s, text) = send(a, "PUT", &put_path, &ahead, &stale).await;
    assert_eq!(s, StatusCode::CONFLICT, "{text}");
    assert!(
        text.contains("filled at purge 1999") && text.contains("purge 2000"),
        "{text}"
    );
    assert_eq!(holds(a, key).await, None);
    // Bytes filled after it, signed by a clock 20 s behind the purger's: stored.
    let behind = sign_at("PUT", &put_path, a, &fresh, now + 1);
    let (s, text) = send(a, "PUT", &put_path, &behind, &fresh).await;
    assert_eq!((s, text.trim()), (StatusCode::OK, "stored"));
    // The same purge, sent to node 2 too but delivered late, after a fresh fill there: the
    // fill stays; bytes filled before it that were stored earlier go.
    let b = c.peer(2);
    let late_delete = sign("DELETE", &purge_path, b, b"");
    let other = "cdn.test/obj/4504?size=1000";
    let (other_put, other_purge) = (
        wire::piece_path(PieceName::Replica, other, None),
        wire::purge_path(other, 2000),
    );
    let old_fill = sign("PUT", &other_put, b, &stale);
    let (s, _) = send(b, "PUT", &other_put, &old_fill, &stale).await;
    assert_eq!(s, StatusCode::OK);
    let fill = sign("PUT", &put_path, b, &fresh);
    let (s, text) = send(b, "PUT", &put_path, &fill, &fresh).await;
    assert_eq!((s, text.trim()), (StatusCode::OK, "stored"));
    let (s, text) = send(b, "DELETE", &purge_path, &late_delete, b"").await;
    assert_eq!(s, StatusCode::OK, "{text}");
    assert_eq!(holds(b, key).await, Some(vec![PieceName::Replica]));
    let other_delete = sign("DELETE", &other_purge, b, b"");
    let (s, text) = send(b, "DELETE", &other_purge, &other_delete, b"").await;
    assert_eq!((s, text.trim()), (StatusCode::OK, "purged"));
    assert_eq!(holds(b, other).await, None);
    assert_eq!(counter(&c, 1, "writes_refused_after_purge").await, 1);
    c.stop_all().await;
}
