//! The coordinator's admin listener over mutual TLS (issue 42): a client with a certificate
//! the configured CA signed gets its answer; a client without a certificate, or with one
//! another CA signed, gets no HTTP answer at all (the handshake fails). Certificates are made
//! by the test (rcgen); everything on loopback, bounded in time.

use ecdn_cluster::coordinator::{Coordinator, CoordinatorOptions};
use ecdn_cluster::mtls::AdminTls;
use tokio::net::TcpListener;

mod common;
#[path = "common/pki.rs"]
mod pki;
use pki::{admin_files, health, Pki};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mtls_admin_listener_refuses_clients_without_a_certificate_its_ca_signed() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new("ecdn test CA");
    let (client, client_key) = pki.issue("operator");
    let stranger_ca = Pki::new("another CA");
    let (stranger, stranger_key) = stranger_ca.issue("operator");
    let (cert, key, client_ca) = admin_files(dir.path(), &pki);
    let tls = AdminTls {
        cert,
        key,
        client_ca,
    };

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cfg = common::cluster(
        "0123456789abcdef-mtls-test",
        &format!("coordinator = \"{addr}\""),
    );
    let mut coord = Coordinator::start_on(cfg, listener, CoordinatorOptions::default())
        .await
        .unwrap();
    // Beyond loopback, client certificates stand in for the token.
    let wild = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    wild.set_nonblocking(true).unwrap();
    let wild = TcpListener::from_std(wild).unwrap();
    assert!(coord.serve_admin_with(wild, None, Some(&tls)).is_ok());
    // A file that is not there: a clear error.
    let missing = AdminTls {
        client_ca: dir.path().join("none.pem"),
        ..tls.clone()
    };
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let e = coord.serve_admin_with(l, None, Some(&missing)).unwrap_err();
    assert!(e.to_string().contains("the client CA"), "{e}");

    let admin = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = coord.serve_admin_with(admin, None, Some(&tls)).unwrap();
    let with_cert = health(at, &pki.ca, Some((&client, &client_key))).await;
    assert!(with_cert.starts_with("HTTP/1.1 200"), "{with_cert:?}");
    assert!(with_cert.ends_with("ok\n"), "{with_cert:?}");
    let without = health(at, &pki.ca, None).await;
    assert!(!without.contains("HTTP/1.1"), "{without:?}");
    let other_ca = health(at, &pki.ca, Some((&stranger, &stranger_key))).await;
    assert!(!other_ca.contains("HTTP/1.1"), "{other_ca:?}");
    // The same listener still serves a good client after refusing the others.
    let again = health(at, &pki.ca, Some((&client, &client_key))).await;
    assert!(again.starts_with("HTTP/1.1 200"), "{again:?}");
    coord.shutdown().await;
}
