//! The coordinator's admin listener over mutual TLS (issue 42): a client with a certificate
//! the configured CA signed gets its answer; a client without a certificate, or with one
//! another CA signed, gets no HTTP answer at all (the handshake fails). Certificates are made
//! by the test (rcgen); everything on loopback, bounded in time.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ecdn_cluster::coordinator::{Coordinator, CoordinatorOptions};
use ecdn_cluster::mtls::AdminTls;
use ecdn_cluster::ClusterConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A CA and a certificate it signed for `name`.
struct Pki {
    ca: rcgen::Certificate,
    ca_key: rcgen::KeyPair,
}

impl Pki {
    fn new(cn: &str) -> Pki {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        let ca = params.self_signed(&ca_key).unwrap();
        Pki { ca, ca_key }
    }

    /// A certificate for `name` (server or client) and its key.
    fn issue(&self, name: &str) -> (rcgen::Certificate, rcgen::KeyPair) {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec![name.to_string()]).unwrap();
        let cert = params.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        (cert, key)
    }
}

fn der_key(k: &rcgen::KeyPair) -> PrivateKeyDer<'static> {
    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(k.serialize_der()))
}

/// `GET /_ecdn/health` over TLS to `addr`, presenting `cert` if given; what came back (empty
/// when the server ended the connection without an answer).
async fn health(
    addr: SocketAddr,
    server_ca: &rcgen::Certificate,
    cert: Option<(&rcgen::Certificate, &rcgen::KeyPair)>,
) -> String {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(server_ca.der().to_vec()))
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match cert {
        Some((c, k)) => builder
            .with_client_auth_cert(vec![CertificateDer::from(c.der().to_vec())], der_key(k))
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let attempt = async {
        let mut tls = connector.connect(name, tcp).await.ok()?;
        tls.write_all(b"GET /_ecdn/health HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n")
            .await
            .ok()?;
        let mut got = Vec::new();
        let _ = tls.read_to_end(&mut got).await;
        Some(String::from_utf8_lossy(&got).into_owned())
    };
    tokio::time::timeout(Duration::from_secs(10), attempt)
        .await
        .expect("the listener answers or refuses within 10 s")
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mtls_admin_listener_refuses_clients_without_a_certificate_its_ca_signed() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new("ecdn test CA");
    let (server, server_key) = pki.issue("localhost");
    let (client, client_key) = pki.issue("operator");
    let stranger_ca = Pki::new("another CA");
    let (stranger, stranger_key) = stranger_ca.issue("operator");
    let write = |name: &str, pem: String| {
        let p = dir.path().join(name);
        std::fs::write(&p, pem).unwrap();
        p
    };
    let tls = AdminTls {
        cert: write("admin.pem", server.pem()),
        key: write("admin.key", server_key.serialize_pem()),
        client_ca: write("clients.pem", pki.ca.pem()),
    };

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut text = format!(
        "scheme = \"c2dn\"\nkey = \"0123456789abcdef-mtls-test\"\ncoordinator = \"{addr}\"\n"
    );
    for i in 0..4 {
        text.push_str(&format!(
            "[[node]]\nid = {i}\nclient = \"127.0.0.1:{}\"\npeer = \"127.0.0.1:{}\"\n",
            1000 + i,
            2000 + i
        ));
    }
    let cfg = ClusterConfig::parse(&text).unwrap();
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
