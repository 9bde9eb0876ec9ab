//! Mutual TLS: the server presents its certificate and accepts only clients whose certificate
//! a given CA signed. A client without a certificate, or with one the CA did not sign, fails
//! the handshake and never reaches HTTP (issue 42). Two uses:
//!
//! * [`AdminTls`] — an admin listener's (the coordinator's, the node's), from flags.
//! * [`PeerTls`] — the peer protocol's, from the cluster file's `[peer_tls]`: every listener
//!   that takes signed requests (a node's peer listener, the coordinator's) accepts only
//!   clients with a certificate of the cluster's CA, and every peer client presents its
//!   process's certificate and accepts a peer only if the CA signed its certificate for the
//!   peer's IP address (a subject alternative name). The cluster key still signs every request
//!   and answer inside: TLS adds encryption on the wire and a second factor, a stolen key alone
//!   no longer reaches a peer.
//!
//! The files are PEM: a certificate chain, its private key (PKCS#8, PKCS#1 or SEC1), and the CA
//! certificates the other side's certificate must chain to. TLS 1.3 and 1.2, ring's provider, as
//! the node's TLS listener. Certificates must be X.509 version 3: webpki refuses version 1,
//! which `openssl x509 -req` makes unless given extensions (`-extfile` with, for a client,
//! `extendedKeyUsage=clientAuth`); a client presenting one fails the handshake like a client
//! without a certificate (checked by hand with curl against `ecdn coordinator`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use serde::Deserialize;

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

fn private_key(path: &Path, what: &str) -> Result<PrivateKeyDer<'static>, String> {
    let pem = read(path, what)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| format!("{what} {}: {e}", path.display()))
}

fn roots(path: &Path, what: &str) -> Result<Arc<RootCertStore>, String> {
    let mut roots = RootCertStore::empty();
    for ca in certs(path, what)? {
        roots
            .add(ca)
            .map_err(|e| format!("{what} {}: {e}", path.display()))?;
    }
    Ok(Arc::new(roots))
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A server configuration presenting `chain` and `key`, accepting only clients whose
/// certificate chains to `client_ca`.
fn server_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    client_ca: Arc<RootCertStore>,
    ca_path: &Path,
) -> Result<ServerConfig, String> {
    let verifier = WebPkiClientVerifier::builder_with_provider(client_ca, provider())
        .build()
        .map_err(|e| format!("the client CA {}: {e}", ca_path.display()))?;
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| format!("the certificate and its key: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
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
        let chain = certs(&self.cert, "the admin certificate")?;
        let key = private_key(&self.key, "the admin key")?;
        let roots = roots(&self.client_ca, "the client CA")?;
        let config = server_config(chain, key, roots, &self.client_ca)
            .map_err(|e| format!("the admin listener: {e}"))?;
        Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
    }
}

/// The cluster file's `[peer_tls]`: where this host's files are. Every process of the cluster
/// reads the same section, each on its own host, so the paths are the same everywhere and the
/// files each host's own (relative paths are taken from the cluster file's directory).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PeerTlsFiles {
    /// The CA certificates every process's certificate must chain to.
    pub ca: PathBuf,
    /// This host's certificate chain: a client certificate for its requests, and the server
    /// certificate of its listeners, with their IP addresses among its names.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
}

impl PeerTlsFiles {
    /// The same files, relative paths taken from `dir`.
    pub fn relative_to(&self, dir: &Path) -> PeerTlsFiles {
        let at = |p: &PathBuf| match p.is_relative() {
            true => dir.join(p),
            false => p.clone(),
        };
        PeerTlsFiles {
            ca: at(&self.ca),
            cert: at(&self.cert),
            key: at(&self.key),
        }
    }

    /// Reads the files: a clear error for one that is missing or holds no usable certificate
    /// or key.
    pub fn load(&self) -> Result<PeerTls, String> {
        let chain = certs(&self.cert, "peer_tls.cert")?;
        let key = private_key(&self.key, "peer_tls.key")?;
        let roots = roots(&self.ca, "peer_tls.ca")?;
        let server = server_config(chain.clone(), key.clone_key(), roots.clone(), &self.ca)
            .map_err(|e| format!("peer_tls: {e}"))?;
        let mut client = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(|e| format!("peer_tls: the certificate and its key: {e}"))?;
        client.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(PeerTls {
            current: Arc::new(std::sync::RwLock::new(Loaded {
                client: Arc::new(client),
                server: Arc::new(server),
            })),
        })
    }
}

#[derive(Debug)]
struct Loaded {
    client: Arc<ClientConfig>,
    server: Arc<ServerConfig>,
}

/// The peer protocol's TLS, loaded: the acceptor of every listener taking signed requests and
/// the connector of every peer client, taken anew for each connection. Clones share them, and
/// [`PeerTls::replace`] changes them for all (SIGHUP: a new certificate without a restart;
/// connections already open keep theirs).
#[derive(Clone, Debug)]
pub struct PeerTls {
    current: Arc<std::sync::RwLock<Loaded>>,
}

impl PeerTls {
    fn loaded(&self) -> std::sync::RwLockReadGuard<'_, Loaded> {
        self.current.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.loaded().server.clone())
    }

    pub fn connector(&self) -> tokio_rustls::TlsConnector {
        tokio_rustls::TlsConnector::from(self.loaded().client.clone())
    }

    /// From now on, this one's clones accept and connect with `newer`'s files.
    pub fn replace(&self, newer: &PeerTls) {
        let (client, server) = {
            let n = newer.loaded();
            (n.client.clone(), n.server.clone())
        };
        let mut mine = self.current.write().unwrap_or_else(|e| e.into_inner());
        *mine = Loaded { client, server };
    }
}

/// A listener's TLS: one fixed acceptor (an admin listener's), or the peer protocol's, taken
/// anew for each connection so that a reloaded certificate serves the next one.
#[derive(Clone)]
pub enum ListenerTls {
    Fixed(tokio_rustls::TlsAcceptor),
    Peer(PeerTls),
}

impl ListenerTls {
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        match self {
            ListenerTls::Fixed(a) => a.clone(),
            ListenerTls::Peer(p) => p.acceptor(),
        }
    }
}
