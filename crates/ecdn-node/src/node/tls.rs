//! TLS at the edge: rustls with the ring provider (no system OpenSSL), TLS 1.2 and 1.3.
//!
//! * **Certificates**: a default chain and key (PEM files), and more per host name, picked by
//!   the client's SNI: the exact name first, then a wildcard one level up (`*.example.com`
//!   for `a.example.com`), else the default. A missing or unreadable file, a file with no
//!   certificate or no key, or a key that does not match its certificate is an error that
//!   names the file, at start and at reload.
//! * **ALPN**: `h2` and `http/1.1`, in that order of preference; a client that offers neither
//!   gets HTTP/1.1.
//! * **Session resumption**: session ids (an in-memory cache of 4,096 sessions) and stateless
//!   tickets (TLS 1.3 tickets and TLS 1.2 session tickets, keys rotated by rustls). Both
//!   survive a reload, so a client resumes across a certificate renewal.
//! * **Reload** ([`TlsAcceptor::reload`]; `ecdn node` calls it on SIGHUP): the files are read
//!   again and, if they are all valid, new handshakes use them; connections already open keep
//!   their session. A reload that fails changes nothing and reports why.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ProducesTickets, ResolvesServerCert, StoresServerSessions};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;

/// ALPN protocol ids, most preferred first.
pub const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];
/// Sessions kept for resumption by session id.
const SESSION_CACHE: usize = 4096;

/// A certificate chain and its key, as PEM files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The certificates a TLS listener serves: the default, and more by host name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsSettings {
    pub default: CertFiles,
    /// Host names (exact, or `*.` and a domain) and the certificate for them.
    pub hosts: Vec<(String, CertFiles)>,
}

/// Why certificates could not be loaded.
#[derive(Debug)]
pub struct TlsError(String);

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TlsError {}

impl From<TlsError> for std::io::Error {
    fn from(e: TlsError) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, e)
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads one chain and key and checks that they belong together.
fn load_pair(files: &CertFiles, provider: &CryptoProvider) -> Result<CertifiedKey, TlsError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|e| TlsError(format!("reading {}: {e}", path.display())))
    };
    let cert_pem = read(&files.cert)?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| {
            TlsError(format!(
                "{}: not PEM certificates: {e}",
                files.cert.display()
            ))
        })?;
    if chain.is_empty() {
        return Err(TlsError(format!(
            "{}: no certificate in the file",
            files.cert.display()
        )));
    }
    let key_pem = read(&files.key)?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        TlsError(format!(
            "{}: no usable private key: {e}",
            files.key.display()
        ))
    })?;
    let certified = CertifiedKey::from_der(chain, key, provider).map_err(|e| {
        TlsError(format!(
            "{} and {}: {e}",
            files.cert.display(),
            files.key.display()
        ))
    })?;
    // `from_der` lets an unknown consistency pass; a known mismatch is refused above.
    Ok(certified)
}

/// Certificates by SNI name.
#[derive(Debug)]
struct Certificates {
    default: Arc<CertifiedKey>,
    exact: HashMap<String, Arc<CertifiedKey>>,
    /// `*.example.com` is kept as `example.com`.
    wildcard: HashMap<String, Arc<CertifiedKey>>,
}

impl Certificates {
    fn load(settings: &TlsSettings, provider: &CryptoProvider) -> Result<Certificates, TlsError> {
        let default = Arc::new(load_pair(&settings.default, provider)?);
        let (mut exact, mut wildcard) = (HashMap::new(), HashMap::new());
        for (name, files) in &settings.hosts {
            let pair = Arc::new(load_pair(files, provider)?);
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            match name.strip_prefix("*.") {
                Some(domain) => wildcard.insert(domain.to_string(), pair),
                None => exact.insert(name, pair),
            };
        }
        Ok(Certificates {
            default,
            exact,
            wildcard,
        })
    }

    fn pick(&self, sni: Option<&str>) -> Arc<CertifiedKey> {
        let Some(name) = sni.map(|n| n.trim_end_matches('.').to_ascii_lowercase()) else {
            return self.default.clone();
        };
        if let Some(c) = self.exact.get(&name) {
            return c.clone();
        }
        name.split_once('.')
            .and_then(|(_, parent)| self.wildcard.get(parent))
            .unwrap_or(&self.default)
            .clone()
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.pick(hello.server_name()))
    }
}

/// The TLS side of a listener: the current server configuration, replaced on reload.
pub struct TlsAcceptor {
    settings: TlsSettings,
    provider: Arc<CryptoProvider>,
    sessions: Arc<dyn StoresServerSessions>,
    tickets: Arc<dyn ProducesTickets>,
    current: RwLock<Arc<ServerConfig>>,
}

impl fmt::Debug for TlsAcceptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsAcceptor")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl TlsAcceptor {
    /// Loads the certificates of `settings`; an error names the file at fault.
    pub fn new(settings: TlsSettings) -> Result<TlsAcceptor, TlsError> {
        let provider = provider();
        let tickets = rustls::crypto::ring::Ticketer::new()
            .map_err(|e| TlsError(format!("making the session ticket keys: {e}")))?;
        let sessions: Arc<dyn StoresServerSessions> =
            rustls::server::ServerSessionMemoryCache::new(SESSION_CACHE);
        let config = Self::build(&settings, &provider, &sessions, &tickets)?;
        Ok(TlsAcceptor {
            settings,
            provider,
            sessions,
            tickets,
            current: RwLock::new(config),
        })
    }

    fn build(
        settings: &TlsSettings,
        provider: &Arc<CryptoProvider>,
        sessions: &Arc<dyn StoresServerSessions>,
        tickets: &Arc<dyn ProducesTickets>,
    ) -> Result<Arc<ServerConfig>, TlsError> {
        let certificates = Certificates::load(settings, provider)?;
        let mut config = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| TlsError(format!("TLS versions: {e}")))?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(certificates));
        config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
        config.session_storage = sessions.clone();
        // The same stores in every configuration: sessions resume across reloads.
        config.ticketer = tickets.clone();
        Ok(Arc::new(config))
    }

    /// Reads the certificate files again; new handshakes use them once they all load. On an
    /// error nothing changes.
    pub fn reload(&self) -> Result<(), TlsError> {
        let config = Self::build(
            &self.settings,
            &self.provider,
            &self.sessions,
            &self.tickets,
        )?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = config;
        Ok(())
    }

    /// The configuration a new handshake uses.
    pub fn config(&self) -> Arc<ServerConfig> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// An acceptor for one new connection.
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.config())
    }
}
