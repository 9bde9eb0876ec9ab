//! The node's admin listener over mutual TLS (issue 42): a client with a certificate the
//! configured CA signed gets its answer, a client without one gets no HTTP answer; beyond
//! loopback, client certificates stand in for the token. The test PKI is the coordinator's
//! test's (`crates/ecdn-cluster/tests/common/pki.rs`).

use ecdn_cluster::mtls::AdminTls;
use ecdn_node::node::{AdminListen, Node, NodeConfig};
use ecdn_node::origin::{Origin, OriginConfig};

#[path = "../../ecdn-cluster/tests/common/pki.rs"]
mod pki;
use pki::{admin_files, health, Pki};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nodes_mtls_admin_listener_refuses_clients_without_a_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new("ecdn test CA");
    let (client, client_key) = pki.issue("operator");
    let (cert, key, client_ca) = admin_files(dir.path(), &pki);
    let tls = AdminTls {
        cert,
        key,
        client_ca,
    };
    let any = "127.0.0.1:0".parse().unwrap();
    let origin = Origin::start(any, OriginConfig::default()).await.unwrap();
    let config = |admin: AdminListen| NodeConfig {
        origin: format!("http://{}", origin.addr),
        hoc_size: 1 << 20,
        admin: Some(admin),
        ..NodeConfig::default()
    };
    // A wildcard admin listener with client certificates and no token starts.
    let n = Node::start(
        any,
        config(AdminListen {
            addr: "0.0.0.0:0".parse().unwrap(),
            token: None,
            tls: Some(tls.clone()),
        }),
    )
    .await
    .unwrap();
    let at = std::net::SocketAddr::from(([127, 0, 0, 1], n.admin_addr().unwrap().port()));
    let with_cert = health(at, &pki.ca, Some((&client, &client_key))).await;
    assert!(with_cert.starts_with("HTTP/1.1 200"), "{with_cert:?}");
    let without = health(at, &pki.ca, None).await;
    assert!(!without.contains("HTTP/1.1"), "{without:?}");
    n.stop().await.unwrap();
    // A key file that is not there: the node does not start, and says why.
    let bad = AdminTls {
        key: dir.path().join("none.key"),
        ..tls
    };
    let e = Node::start(
        any,
        config(AdminListen {
            addr: any,
            token: None,
            tls: Some(bad),
        }),
    )
    .await
    .err()
    .expect("a missing key file");
    assert!(e.to_string().contains("the admin key"), "{e}");
}
