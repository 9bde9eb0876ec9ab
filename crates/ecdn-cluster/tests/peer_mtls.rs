//! The peer protocol over mutual TLS (issue 42, the cluster file's `[peer_tls]`), against the
//! coordinator's listener: a peer client of the cluster (its certificate, the cluster's CA)
//! gets signed answers; a client without TLS, without a certificate, or with a certificate
//! another CA signed gets no HTTP answer; a client refuses a listener whose certificate does
//! not name the address it connected to, or that another CA signed. Relative paths are the
//! cluster file's directory's; a missing file is a clear error when the cluster file is read.
//! Certificates are made by the test (rcgen); everything on loopback, bounded in time.

use std::time::Duration;

use bytes::Bytes;
use ecdn_cluster::auth::ClusterKey;
use ecdn_cluster::coordinator::client::CoordinatorClient;
use ecdn_cluster::coordinator::{Coordinator, CoordinatorOptions};
use ecdn_cluster::peer::PeerClient;
use ecdn_cluster::{ClusterConfig, PeerError};
use hyper::Method;
use tokio::net::TcpListener;

mod common;
#[path = "common/pki.rs"]
mod pki;
use pki::{health, peer_files, Pki};

const KEY: &str = "0123456789abcdef-peer-mtls-test";

/// A cluster file of 5 nodes whose coordinator is at `addr`, with `tls` (a `[peer_tls]`).
fn cluster_file(addr: std::net::SocketAddr, tls: &str) -> String {
    common::cluster_text(KEY, &format!("coordinator = \"{addr}\"\n{tls}"))
}

/// A client of `file`'s cluster asks the coordinator at `addr` for its status.
async fn status(file: &str, addr: std::net::SocketAddr) -> Result<usize, String> {
    let cfg = ClusterConfig::parse(file).map_err(|e| e.to_string())?;
    let c = CoordinatorClient::of_embedded(&cfg);
    assert_eq!(c.addr(), addr);
    let s = tokio::time::timeout(Duration::from_secs(10), c.status())
        .await
        .map_err(|_| "no answer within 10 s".to_string())?;
    s.map(|s| s.nodes.len()).map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peer_protocol_over_mtls_admits_only_the_clusters_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cluster = Pki::new("ecdn cluster CA");
    let stranger = Pki::new("another CA");
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Every process of this cluster on 127.0.0.1: one certificate naming it (and `localhost`,
    // the name the raw TLS client below checks).
    let good = peer_files(d, "peer", &cluster, &cluster, &["127.0.0.1", "localhost"]);
    let file = cluster_file(addr, &good);
    let cfg = ClusterConfig::parse(&file).unwrap();
    let coord = Coordinator::start_on(cfg.clone(), listener, CoordinatorOptions::default())
        .await
        .unwrap();

    // The cluster's client: signed answers over TLS.
    assert_eq!(status(&file, addr).await, Ok(5));
    let ask = |client: PeerClient| async move {
        let t = Duration::from_secs(10);
        client
            .send(addr, Method::GET, "/coord/status", Bytes::new(), &[], t)
            .await
    };
    let r = ask(PeerClient::for_cluster(&cfg)).await.unwrap();
    assert_eq!(r.status(), 200);

    // The right key over plain TCP: the listener speaks only TLS.
    let e = ask(PeerClient::new(ClusterKey::new(KEY.as_bytes())))
        .await
        .unwrap_err();
    assert!(
        matches!(e, PeerError::Reset(_) | PeerError::Other(..)),
        "{e}"
    );

    // The right key and the cluster's CA, but a certificate another CA signed: refused by
    // the listener.
    let rogue = peer_files(d, "rogue", &cluster, &stranger, &["127.0.0.1"]);
    assert!(status(&cluster_file(addr, &rogue), addr).await.is_err());
    // Without a certificate: no HTTP answer. With the cluster's: an HTTP answer (401: the
    // raw request is not signed).
    let (cert, cert_key) = cluster.issue_for(&["127.0.0.1"]);
    assert_eq!(health(addr, &cluster.ca, None).await, "");
    let answer = health(addr, &cluster.ca, Some((&cert, &cert_key))).await;
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    let (foreign, foreign_key) = stranger.issue_for(&["127.0.0.1"]);
    assert_eq!(
        health(addr, &cluster.ca, Some((&foreign, &foreign_key))).await,
        ""
    );

    // The client checks the listener: a certificate of the cluster's CA for another address
    // (its own certificate is the cluster's), or one of another CA.
    let elsewhere = peer_files(d, "elsewhere", &cluster, &cluster, &["127.0.0.2"]);
    let l2 = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr2 = l2.local_addr().unwrap();
    let cfg2 = ClusterConfig::parse(&cluster_file(addr2, &elsewhere)).unwrap();
    let coord2 = Coordinator::start_on(cfg2, l2, CoordinatorOptions::default())
        .await
        .unwrap();
    let e = status(&cluster_file(addr2, &good), addr2)
        .await
        .unwrap_err();
    assert!(e.contains("not valid for name"), "{e}");
    let trusts_another = peer_files(d, "trusts-another", &stranger, &cluster, &["127.0.0.1"]);
    let e = status(&cluster_file(addr, &trusts_another), addr)
        .await
        .unwrap_err();
    assert!(e.contains("UnknownIssuer"), "{e}");

    // Relative paths are the cluster file's directory's.
    let relative = "[peer_tls]\nca = \"peer-ca.pem\"\ncert = \"peer.pem\"\nkey = \"peer.key\"\n";
    let path = d.join("cluster.toml");
    std::fs::write(&path, cluster_file(addr, relative)).unwrap();
    let loaded = ClusterConfig::load(&path).unwrap();
    assert_eq!(loaded.peer_tls.as_ref().unwrap().key, d.join("peer.key"));
    assert!(loaded.peer_tls().is_some());
    assert!(ClusterConfig::parse(&cluster_file(addr, relative)).is_err());
    // A missing file: a clear error when the cluster file is read.
    let missing = good.replace("peer.key", "no-such.key");
    let e = ClusterConfig::parse(&cluster_file(addr, &missing))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("peer_tls.key") && e.contains("no-such.key"),
        "{e}"
    );
    coord.shutdown().await;
    coord2.shutdown().await;
}

/// A new certificate without a restart: the cluster file's `[peer_tls]` files are replaced
/// (here by a certificate of a new CA, with both CAs trusted) and the configuration reloaded,
/// as SIGHUP does; the listener presents the new certificate from its next connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reloaded_peer_certificate_serves_the_next_connection() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (old, new) = (Pki::new("the old CA"), Pki::new("the new CA"));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let path = d.join("cluster.toml");
    std::fs::write(
        &path,
        cluster_file(addr, &peer_files(d, "peer", &old, &old, &["127.0.0.1"])),
    )
    .unwrap();
    let cfg = ClusterConfig::load(&path).unwrap();
    let coord = Coordinator::start_on(cfg.clone(), listener, CoordinatorOptions::default())
        .await
        .unwrap();
    // A client that trusts only the new CA (and presents one of its certificates).
    let client = cluster_file(addr, &peer_files(d, "client", &new, &new, &["127.0.0.1"]));
    let e = status(&client, addr).await.unwrap_err();
    assert!(e.contains("UnknownIssuer"), "{e}");
    // The same paths now hold a certificate of the new CA; both CAs are trusted.
    peer_files(d, "peer", &new, &new, &["127.0.0.1"]);
    let bundle = format!("{}{}", new.ca.pem(), old.ca.pem());
    std::fs::write(d.join("peer-ca.pem"), bundle).unwrap();
    let newer = ClusterConfig::load(&path).unwrap();
    assert_eq!(cfg.reload_peer_tls(&newer), Ok(true));
    assert_eq!(status(&client, addr).await, Ok(5));
    // Turning TLS off takes a restart: refused, and nothing changes.
    let plain = ClusterConfig::parse(&cluster_file(addr, "")).unwrap();
    assert!(cfg.reload_peer_tls(&plain).is_err());
    assert_eq!(status(&client, addr).await, Ok(5));
    coord.shutdown().await;
}
