//! A test PKI for mutual TLS: the admin listeners' (the coordinator's, in this crate's
//! `admin_mtls.rs`, and the node's, in `crates/ecdn-node/tests/admin_mtls.rs`, which includes
//! this file) and the peer protocol's (`peer_mtls.rs` here and in `ecdn-node`): a CA,
//! certificates it signs, the files of a `[peer_tls]`, and a `GET /_ecdn/health` over TLS
//! with or without a client certificate.

#![allow(dead_code)] // each test binary uses part of it

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A CA and a certificate it signed for `name`.
pub struct Pki {
    pub ca: rcgen::Certificate,
    pub ca_key: rcgen::KeyPair,
}

impl Pki {
    pub fn new(cn: &str) -> Pki {
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
    pub fn issue(&self, name: &str) -> (rcgen::Certificate, rcgen::KeyPair) {
        self.issue_for(&[name])
    }

    /// A certificate for `names` (IP addresses and host names) and its key.
    pub fn issue_for(&self, names: &[&str]) -> (rcgen::Certificate, rcgen::KeyPair) {
        let key = rcgen::KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let params = rcgen::CertificateParams::new(names).unwrap();
        let cert = params.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        (cert, key)
    }
}

fn der_key(k: &rcgen::KeyPair) -> PrivateKeyDer<'static> {
    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(k.serialize_der()))
}

/// `GET /_ecdn/health` over TLS to `addr`, presenting `cert` if given; what came back (empty
/// when the server ended the connection without an answer).
pub async fn health(
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

/// The three files of an admin listener's mutual TLS, written in `dir`: a server certificate
/// for `localhost` that `pki` signed, its key, and `pki`'s CA as the clients' CA.
pub fn admin_files(
    dir: &std::path::Path,
    pki: &Pki,
) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let (server, server_key) = pki.issue("localhost");
    let write = |name: &str, pem: String| {
        let p = dir.join(name);
        std::fs::write(&p, pem).unwrap();
        p
    };
    (
        write("admin.pem", server.pem()),
        write("admin.key", server_key.serialize_pem()),
        write("clients.pem", pki.ca.pem()),
    )
}

/// The files of the peer protocol's mutual TLS, written in `dir` as `{stem}-ca.pem`,
/// `{stem}.pem` and `{stem}.key`: `ca`'s certificate, and a certificate `pki` signed for
/// `names` (IP addresses and host names) with its key. Returns the cluster file's
/// `[peer_tls]` section that names them.
pub fn peer_files(
    dir: &std::path::Path,
    stem: &str,
    ca: &Pki,
    pki: &Pki,
    names: &[&str],
) -> String {
    let (cert, key) = pki.issue_for(names);
    let write = |name: String, pem: String| {
        let p = dir.join(name);
        std::fs::write(&p, pem).unwrap();
        p.display().to_string()
    };
    format!(
        "[peer_tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\n",
        write(format!("{stem}-ca.pem"), ca.ca.pem()),
        write(format!("{stem}.pem"), cert.pem()),
        write(format!("{stem}.key"), key.serialize_pem())
    )
}
