//! A cluster whose peer protocol runs over mutual TLS (issue 42, the cluster file's
//! `[peer_tls]`): heartbeats, maps, piece writes and reads, relays all go over TLS; coded and
//! replicated objects are byte-exact through every node, and still after a node stops (its
//! chunks decoded from the others'); a peer listener gives no HTTP answer to a client without
//! a certificate of the cluster's CA, and the cluster's own client gets signed answers. And a
//! certificate rotated to a new CA while the cluster serves: after the reload SIGHUP does,
//! the peer listeners present the new certificate and objects are still byte-exact. One
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peer_certificate_rotates_to_a_new_ca_while_the_cluster_serves() {
    let files = tempfile::tempdir().unwrap();
    let (old, new) = (Pki::new("the old CA"), Pki::new("the new CA"));
    let section = peer_files(
        files.path(),
        "peer",
        &old,
        &old,
        &["127.0.0.1", "localhost"],
    );
    let mut c = TestCluster::start_with(4, "c2dn", 2, 1, &section).await;
    let objects = [(1u64, 300_000u64), (2, 10_000)];
    for &(id, size) in &objects {
        check_whole(
            &get(c.client(1), &uri(id, size), &[]).await.unwrap(),
            id,
            size,
        );
    }
    let (cert, key) = new.issue_for(&["127.0.0.1"]);
    assert_eq!(health(c.peer(0), &new.ca, Some((&cert, &key))).await, "");
    // Step 1 of a CA rotation: every process trusts both CAs. Step 2: the certificates are
    // the new CA's. Each step is the files replaced and the configuration reloaded.
    let bundle = |first: &Pki, second: &Pki| format!("{}{}", first.ca.pem(), second.ca.pem());
    std::fs::write(files.path().join("peer-ca.pem"), bundle(&old, &new)).unwrap();
    let reload = |c: &TestCluster| {
        // The same section in a file of its own: its files as they are now.
        let text = format!(
            "scheme = \"rep2\"\nkey = \"{KEY}\"\ncoordinator = \"127.0.0.1:1\"\n{section}\
             [[node]]\nid = 0\nclient = \"127.0.0.1:2\"\npeer = \"127.0.0.1:3\"\n\
             [[node]]\nid = 1\nclient = \"127.0.0.1:4\"\npeer = \"127.0.0.1:5\"\n"
        );
        let newer = ecdn_cluster::ClusterConfig::parse(&text).unwrap();
        assert_eq!(c.cfg.reload_peer_tls(&newer), Ok(true));
    };
    reload(&c);
    peer_files(
        files.path(),
        "peer",
        &new,
        &new,
        &["127.0.0.1", "localhost"],
    );
    std::fs::write(files.path().join("peer-ca.pem"), bundle(&new, &old)).unwrap();
    reload(&c);
    // The listeners present the new CA's certificate now (a client trusting only the new CA
    // gets an HTTP answer), and the cluster serves on: new connections between its nodes
    // use the new certificate.
    let answer = health(c.peer(0), &new.ca, Some((&cert, &key))).await;
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    for &(id, size) in &objects {
        for node in 0..4 {
            check_whole(
                &get(c.client(node), &uri(id, size), &[]).await.unwrap(),
                id,
                size,
            );
        }
    }
    check_whole(
        &get(c.client(2), &uri(3, 500_000), &[]).await.unwrap(),
        3,
        500_000,
    );
    c.stop(3).await;
    c.wait_available(&[true, true, true, false]).await;
    check_whole(
        &get(c.client(0), &uri(3, 500_000), &[]).await.unwrap(),
        3,
        500_000,
    );
    c.stop_all().await;
}
