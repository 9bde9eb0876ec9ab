//! TLS with client certificates (mutual TLS) for an admin listener: the server presents its
//! certificate and accepts only clients whose certificate a given CA signed. A client without
//! a certificate, or with one the CA did not sign, fails the handshake and never reaches HTTP
//! (issue 42: the bearer token alone guarded the coordinator's admin listener).
//!
//! The files are PEM: the server's certificate chain, its private key (PKCS#8, PKCS#1 or
//! SEC1), and the CA certificates client certificates must chain to. TLS 1.3 and 1.2, ring's
//! provider, as the node's TLS listener. Certificates must be X.509 version 3: webpki refuses
//! version 1, which `openssl x509 -req` makes unless given extensions (`-extfile` with, for a
//! client, `extendedKeyUsage=clientAuth`); a client presenting one fails the handshake like a
//! client without a certificate (checked by hand with curl against `ecdn coordinator`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

/// An admin listener's mutual TLS: its certificate and key, and the CA of its clients.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdminTls {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_ca: PathBuf,
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{what} {}: {e}", path.display()))
}

fn certs(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read(path, what)?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{what} {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{what} {}: no certificate in it", path.display()));
    }
    Ok(certs)
}

impl AdminTls {
    /// The three files given as flags (`--admin-tls-cert`, `--admin-tls-key`,
    /// `--admin-client-ca`), or `None` unless all three are.
    pub fn from_flags(
        cert: Option<&Path>,
        key: Option<&Path>,
        client_ca: Option<&Path>,
    ) -> Option<AdminTls> {
        Some(AdminTls {
            cert: cert?.to_path_buf(),
            key: key?.to_path_buf(),
            client_ca: client_ca?.to_path_buf(),
        })
    }

    /// The acceptor of these files; a clear error for a file that is missing or holds no
    /// usable certificate or key.
    pub fn acceptor(&self) -> Result<tokio_rustls::TlsAcceptor, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain = certs(&self.cert, "the admin certificate")?;
        let key_pem = read(&self.key, "the admin key")?;
        let key = PrivateKeyDer::from_pem_slice(&key_pem)
            .map_err(|e| format!("the admin key {}: {e}", self.key.display()))?;
        let mut roots = RootCertStore::empty();
        for ca in certs(&self.client_ca, "the client CA")? {
            roots
                .add(ca)
                .map_err(|e| format!("the client CA {}: {e}", self.client_ca.display()))?;
        }
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|e| format!("the client CA {}: {e}", self.client_ca.display()))?;
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .map_err(|e| format!("the admin certificate and key: {e}"))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
    }
}
