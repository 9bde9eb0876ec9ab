//! A cluster whose peer protocol runs over mutual TLS (issue 42, the cluster file's
//! `[peer_tls]`): heartbeats, maps, piece writes and reads, relays all go over TLS; coded and
//! replicated objects are byte-exact through every node, and still after a node stops (its
//! chunks decoded from the others'); a peer listener gives no HTTP answer to a client without
//! a certificate of the cluster's CA, and the cluster's own client gets signed answers. One
//! process on loopback; the test PKI is `crates/ecdn-cluster/tests/common/pki.rs`.

use std::time::Duration;

use bytes::Bytes;
use ecdn_cluster::auth::ClusterKey;
use ecdn_cluster::peer::PeerClient;
use hyper::Method;

#[path = "../../ecdn-cluster/tests/common/pki.rs"]
mod pki;
use pki::{health, peer_files, Pki};

#[path = "common/cluster.rs"]
mod harness;
use harness::{check_whole, get, holds_by, uri, TestCluster, KEY};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_over_mutual_tls_serves_every_object_and_refuses_peers_without_a_certificate() {
    let files = tempfile::tempdir().unwrap();
    let ca = Pki::new("ecdn cluster CA");
    let tls = peer_files(files.path(), "peer", &ca, &ca, &["127.0.0.1", "localhost"]);
    // K = 2, P = 1 on 4 nodes; 10 KiB replicated, the rest coded.
    let mut c = TestCluster::start_with(4, "c2dn", 2, 1, &tls).await;
    let objects = [(1u64, 300_000u64), (2, 1 << 20), (3, 10_000), (4, 700_001)];
    for &(id, size) in &objects {
        for node in 0..4 {
            let r = get(c.client(node), &uri(id, size), &[]).await.unwrap();
            check_whole(&r, id, size);
        }
    }
    // The coded object's three pieces are on three nodes, as their signed `has` answers say.
    let client = PeerClient::for_cluster(&c.cfg);
    let key = format!("cdn.test{}", uri(2, 1 << 20));
    let mut pieces = 0;
    for i in 0..4 {
        pieces += holds_by(&client, c.peer(i), &key)
            .await
            .map_or(0, |h| h.len());
    }
    assert_eq!(pieces, 3);

    // Peer listeners: the right key without TLS gets no answer; a raw TLS client gets one
    // only with a certificate of the cluster's CA (401: its request is not signed).
    let plain = PeerClient::new(ClusterKey::new(KEY.as_bytes()));
    let t = Duration::from_secs(10);
    for i in 0..4 {
        let sent = plain
            .send(c.peer(i), Method::GET, "/_peer/stats", Bytes::new(), &[], t)
            .await;
        assert!(sent.is_err(), "node {i} answered a plain request");
        assert_eq!(health(c.peer(i), &ca.ca, None).await, "");
    }
    let (cert, cert_key) = ca.issue_for(&["127.0.0.1"]);
    let answer = health(c.peer(1), &ca.ca, Some((&cert, &cert_key))).await;
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    let stranger = Pki::new("another CA");
    let (foreign, foreign_key) = stranger.issue_for(&["127.0.0.1"]);
    assert_eq!(
        health(c.peer(1), &ca.ca, Some((&foreign, &foreign_key))).await,
        ""
    );

    // A node stops: the coordinator hears it over TLS, and every object is still whole
    // through the others (a coded one's missing chunk decoded from the parity).
    c.stop(3).await;
    c.wait_available(&[true, true, true, false]).await;
    for &(id, size) in &objects {
        for node in 0..3 {
            let r = get(c.client(node), &uri(id, size), &[]).await.unwrap();
            check_whole(&r, id, size);
        }
    }
    c.stop_all().await;
}
