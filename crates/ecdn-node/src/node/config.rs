//! The node's settings ([`NodeConfig`]), as `ecdn node` reads them from its flags and its TOML
//! file.

use std::path::PathBuf;
use std::time::Duration;

use ecdn_cluster::config::ClusterConfig;

/// Node settings.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// The default origin, `http://host:port` (port 80 if omitted; no path), for requests
    /// whose Host has no route; empty for none (such requests then get `421 Misdirected
    /// Request`).
    pub origin: String,
    /// Origins chosen by the request's Host: (host name, `http://host:port`). The host name is
    /// matched case-insensitively, without the port.
    pub routes: Vec<(String, String)>,
    /// HOC capacity in bytes.
    pub hoc_size: u64,
    /// The disk cache file (or block device); `None` for no disk cache.
    pub disk_path: Option<PathBuf>,
    /// Disk ring capacity in bytes (rounded down to a multiple of 4 KiB).
    pub disk_size: u64,
    /// How often the disk's directory (its index, which a start reads instead of the ring) is
    /// saved when the disk changed; it is saved at stop too. A start after a crash reads the
    /// entries written since the last save from the ring, header by header. (60 s: Traffic
    /// Server's `proxy.config.cache.dir.sync_frequency`.)
    pub disk_directory_every: Duration,
    /// HOC policy in `ecdn_policy::PolicySpec` syntax.
    pub hoc_policy: String,
    /// Limit on the origin's response headers (connect included; `504` beyond it), and on the
    /// wait for each body frame (the response is aborted beyond it). A buffered exchange (`HEAD`
    /// miss, other methods) must complete within it.
    pub origin_timeout: Duration,
    /// Limit on a request head (request line + headers), in bytes; beyond it the client gets
    /// `431 Request Header Fields Too Large` and the connection is closed. This is hyper's
    /// `max_buf_size`, so it also caps the per-connection read and write buffers (raised to
    /// hyper's minimum of 8 KiB if lower). Default 64 KiB.
    pub max_header_bytes: usize,
    /// Limit on the number of request header fields; beyond it `431` and the connection is
    /// closed. Default 100.
    pub max_headers: usize,
    /// Limit on the request target (authority + path + query), in bytes; beyond it `414 URI
    /// Too Long`. Only effective below `max_header_bytes` (a longer request line is a `431`).
    /// Default 8 KiB.
    pub max_uri_len: usize,
    /// Limit on concurrent client connections. Beyond it a new connection is accepted and
    /// closed at once, without a response (the client sees EOF or a reset), rather than left
    /// waiting in the listen backlog. Default 10,000.
    pub max_connections: usize,
    /// Limit on the wait for a complete request head (slowloris defence): a client that has
    /// not sent a whole request head within it is disconnected, without a response. The
    /// clock starts whenever the connection waits for a request, i.e. when it opens and again
    /// after each response, so this is also the idle timeout of a keep-alive connection
    /// between requests (hyper has no separate idle timer). A forwarded request body (a pass)
    /// is paced by its exchange with the origin; a body the node does not forward (e.g. a
    /// `GET`'s) is read and discarded before the answer for at most this long, after which
    /// the answer closes the connection. Default 10 s.
    pub header_read_timeout: Duration,
    /// The bearer token that authorises `PURGE` requests; `None` (the default) disables purging
    /// (`403`).
    pub purge_token: Option<String>,
    /// The admin listener, where health, stats, metrics and `PURGE` are answered (never on the
    /// client listener): see [`AdminListen`]. Default: loopback, any free port. `None`: none.
    pub admin: Option<AdminListen>,
    /// Whether the client listener also answers `GET /_ecdn/health` (an unauthenticated probe
    /// for load balancers in front of the client port). Default false: every `/_ecdn/` path on
    /// the client listener is a counted `404`.
    pub client_health: bool,
    /// Whether to write one JSON line per proxied request to stderr. Default `false`.
    pub access_log: bool,
    /// On [`super::RunningNode::stop`]: how long open connections may take to finish the exchange
    /// in progress (idle keep-alive connections close at once, busy ones after their current
    /// response) before they are cut. Default 30 s.
    pub drain_timeout: Duration,
    /// Cluster mode (see `cluster/mod.rs`): the cluster file and this node's id. The node then
    /// listens on its client and peer addresses from the file, needs a disk, and uses
    /// `disk_size` as its piece policy's capacity (the ring is made larger).
    pub cluster: Option<ClusterNode>,
    /// Cooperating sites (Coral): misses first try the sites these referrals name
    /// ([`super::sites`]). None by default.
    pub sites: Option<super::sites::Sites>,
    /// A TLS listener beside the plain one: its address and certificates ([`super::tls`]);
    /// HTTP/2 or HTTP/1.1 by ALPN. None by default.
    pub tls: Option<TlsListen>,
    /// HTTP/2 with prior knowledge (h2c) on the plain listener, beside HTTP/1.1. Off by
    /// default.
    pub h2c: bool,
    /// HTTP/2's limits against abuse.
    pub h2: H2Limits,
    /// The targeted cache-control fields this node honours, first applicable first
    /// ([`super::targeted`], RFC 9213): by default `Ecdn-Cache-Control`, then
    /// `CDN-Cache-Control`.
    pub targeted_cache_control: Vec<hyper::header::HeaderName>,
    /// Whether responses with `Set-Cookie` may be stored (RFC 9111 lets a shared cache;
    /// the cookie is replayed as received). Default true.
    pub store_set_cookie: bool,
}

/// The admin listener: its address, the bearer token its requests need, and optionally mutual
/// TLS. A listener bound beyond loopback must have a token or mutual TLS
/// ([`super::Node::start`] refuses to start otherwise); on loopback the token is optional, and
/// required when set.
#[derive(Clone, Debug)]
pub struct AdminListen {
    pub addr: std::net::SocketAddr,
    pub token: Option<String>,
    /// Only clients with a certificate this CA signed complete the handshake.
    pub tls: Option<ecdn_cluster::mtls::AdminTls>,
}

impl AdminListen {
    /// `127.0.0.1`, any free port, no token.
    pub fn loopback() -> AdminListen {
        AdminListen {
            addr: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            token: None,
            tls: None,
        }
    }
}

/// Where the TLS listener listens, and with which certificates.
#[derive(Clone, Debug)]
pub struct TlsListen {
    pub addr: std::net::SocketAddr,
    pub settings: super::tls::TlsSettings,
}

/// HTTP/2's limits (the request head's size limit is `max_header_bytes`, as for HTTP/1.1).
#[derive(Clone, Debug)]
pub struct H2Limits {
    /// Streams a client may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS). Default 100.
    pub max_concurrent_streams: u32,
    /// Flow-control windows: of a stream, and of the connection. Defaults 1 MiB and 4 MiB.
    pub stream_window: u32,
    pub connection_window: u32,
    /// Streams a client may open and reset before the node reads them, at once (the
    /// "rapid reset" attack); beyond it the connection is closed with GOAWAY. Default 20.
    pub max_pending_resets: usize,
    /// Streams the node resets for a client's protocol errors before it closes the
    /// connection. Default 256.
    pub max_error_resets: usize,
}

impl Default for H2Limits {
    fn default() -> Self {
        H2Limits {
            max_concurrent_streams: 100,
            stream_window: 1 << 20,
            connection_window: 4 << 20,
            max_pending_resets: 20,
            max_error_resets: 256,
        }
    }
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            origin: "http://127.0.0.1:8080".into(),
            routes: Vec::new(),
            hoc_size: 64 << 20,
            disk_path: None,
            disk_size: 1 << 30,
            disk_directory_every: Duration::from_secs(60),
            hoc_policy: "adaptsize".into(),
            origin_timeout: Duration::from_secs(30),
            max_header_bytes: 64 << 10,
            max_headers: 100,
            max_uri_len: 8 << 10,
            max_connections: 10_000,
            header_read_timeout: Duration::from_secs(10),
            purge_token: None,
            admin: Some(AdminListen::loopback()),
            client_health: false,
            access_log: false,
            drain_timeout: Duration::from_secs(30),
            cluster: None,
            sites: None,
            tls: None,
            h2c: false,
            h2: H2Limits::default(),
            targeted_cache_control: vec![
                hyper::header::HeaderName::from_static(super::targeted::OWN_FIELD),
                hyper::header::HeaderName::from_static(super::targeted::CDN_FIELD),
            ],
            store_set_cookie: true,
        }
    }
}

/// What a node needs to join a cluster.
#[derive(Clone, Debug)]
pub struct ClusterNode {
    /// The cluster file.
    pub cluster: ClusterConfig,
    /// This node's id in it.
    pub id: usize,
    /// The test bed's model of its outgoing peer link (none by default).
    pub link: PeerLink,
}

/// How the link is modelled (node flags `--peer-rate`, `--background-load`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PeerLink {
    /// Bytes per second; `None`: loopback's own speed.
    pub rate: Option<u64>,
    /// Fraction of the link background traffic takes during its bursts (needs `rate`).
    pub background_load: f64,
}

impl PeerLink {
    /// Checks the settings.
    pub fn validate(&self) -> Result<(), String> {
        if self.rate == Some(0) {
            return Err("the peer rate must be above 0".into());
        }
        let f = self.background_load;
        if !(0.0..1.0).contains(&f) {
            return Err(format!("background load {f}: need 0 <= F < 1"));
        }
        if f > 0.0 && self.rate.is_none() {
            return Err("background load needs a peer rate".into());
        }
        Ok(())
    }
}
