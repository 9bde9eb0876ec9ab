//! `ecdn node`: the HTTP caching node (see `ecdn_node::node` for what it implements today).
//!
//! Settings come from an optional TOML file (`--config`) whose keys are the flags' names with
//! underscores (`listen`, `origin`, `hoc_size`, `hoc_policy`, `disk_path`, `disk_size`, `disk_directory_every`,
//! `origin_timeout`, `drain_timeout`, `purge_token`, `admin_listen`, `admin_token`,
//! `client_health`, `access_log`, `threads`,
//! `backend_strategy`, `backend_connections`, `backend_cache_control`, `tls_listen`,
//! `tls_cert`, `tls_key`, `h2c`, `targeted_cache_control`, `store_set_cookie`), a `tls_hosts` table of host name → `{ cert, key }` (the
//! certificates picked by SNI), plus a `routes` table of host → origin (`--route HOST=URL` on the command line, repeatable, adds to and
//! overrides the file's). A flag given on the command line overrides the file. Unknown keys
//! and bad values are errors that name the key. Cooperating sites (`--coral-listen`,
//! `--coral-seed`, `--coral-advertise`, `--coral-cluster-period`, `--coral-levels`,
//! `--coral-leakage-window`: Coral's DSHT, see `ecdn-coral`'s `site`; `--coral-dns`,
//! `--coral-domain`, `--coral-resolver-prefix`: the DNS redirector, see `ecdn-coral`'s `dns`)
//! are flags only.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use ecdn_node::node::{Node, NodeConfig};
use ecdn_trace::units::parse_size;
use serde::Deserialize;

#[derive(Args)]
#[command(after_help = "Example:\n  \
    ecdn origin --listen 127.0.0.1:8081 &\n  \
    ecdn node --listen 127.0.0.1:8080 --origin http://127.0.0.1:8081 --hoc-size 64MiB \\\n      \
    --disk-path /tmp/ecdn.disk --disk-size 1GiB\n  \
    curl -sI 'http://127.0.0.1:8080/obj/42?size=1MiB'   # X-Cache: MISS, then HIT-HOC\n\n\
    A config file holds the same settings, e.g.\n  \
    listen = \"127.0.0.1:8080\"\n  origin = \"http://127.0.0.1:8081\"\n  hoc_size = \"64MiB\"\n  \
    disk_path = \"/var/cache/ecdn.disk\"\n  disk_size = \"100GiB\"\n  \
    [routes]\n  \"img.example.com\" = \"http://10.0.0.2:8080\"")]
pub struct NodeArgs {
    /// TOML config file; flags override its values.
    #[arg(long, short = 'c', value_name = "FILE")]
    config: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1:8080].
    #[arg(long)]
    listen: Option<String>,
    /// The default origin, http://host:port, for hosts without a --route (required unless
    /// routes are given; requests for a host with neither get 421). Or an S3-compatible
    /// store, s3://BUCKET[/PREFIX], read through the backend tier (TOFEC: coded, chunked
    /// range requests); its endpoint and credentials come from AWS_ENDPOINT_URL, AWS_REGION,
    /// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
    #[arg(long)]
    origin: Option<String>,
    /// An origin for one Host: HOST=http://host:port or HOST=s3://BUCKET/PREFIX (repeatable).
    #[arg(long = "route", value_name = "HOST=URL")]
    routes: Vec<String>,
    /// DRAM hot-object cache capacity [default: 64MiB].
    #[arg(long)]
    hoc_size: Option<String>,
    /// Hot-object cache policy, EVICTION[+ADMISSION] as `ecdn sim cache --policy` takes it
    /// (evictions lru, fifo, s4lru, gdsf, lfuda, clock, sieve, s3fifo, 2q, arc, lirs, wtinylfu,
    /// lhd, hyperbolic, lecar; lirs and wtinylfu never hold an object larger than 1% of the
    /// HOC) [default: adaptsize].
    #[arg(long)]
    hoc_policy: Option<String>,
    /// Disk cache file (created if missing; its space is allocated at start) or block device
    /// (formatted if its first 4 KiB are zeros, refused if it holds anything else or is
    /// mounted); one node per disk. None for a DRAM-only node.
    #[arg(long)]
    disk_path: Option<PathBuf>,
    /// Disk cache capacity [default: 1GiB].
    #[arg(long)]
    disk_size: Option<String>,
    /// How often the disk cache's directory (its index, saved beside the ring file as
    /// `<disk-path>.dir`, which a start reads instead of the whole ring) is saved when the
    /// cache changed; also at stop [default: 60s].
    #[arg(long)]
    disk_directory_every: Option<String>,
    /// Limit on one origin exchange; 504 beyond it [default: 30s].
    #[arg(long)]
    origin_timeout: Option<String>,
    /// On SIGTERM / Ctrl-C: how long open connections may take to finish before they are cut
    /// [default: 30s].
    #[arg(long)]
    drain_timeout: Option<String>,
    /// Bearer token that authorizes `PURGE <path>` requests (or the ECDN_PURGE_TOKEN
    /// environment variable); without one, purging is disabled.
    #[arg(long, env = "ECDN_PURGE_TOKEN", hide_env_values = true)]
    purge_token: Option<String>,
    /// The admin listener: health, stats, metrics and PURGE, which the client listener refuses
    /// [default: 127.0.0.1:8090; in cluster mode the cluster file's `admin` of this node, else
    /// 127.0.0.1 with any free port]. Beyond loopback it needs --admin-token.
    #[arg(long, value_name = "ADDR")]
    admin_listen: Option<String>,
    /// Bearer token every request to the admin listener must carry (or the ECDN_ADMIN_TOKEN
    /// environment variable); it also authorizes PURGE. Required beyond loopback.
    #[arg(long, env = "ECDN_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// Mutual TLS on the admin listener: its certificate chain (PEM). With --admin-tls-key and
    /// --admin-client-ca: only clients presenting a certificate that CA signed complete the
    /// handshake (then no token is required beyond loopback).
    #[arg(long, value_name = "FILE", requires_all = ["admin_tls_key", "admin_client_ca"])]
    admin_tls_cert: Option<PathBuf>,
    /// Mutual TLS on the admin listener: its private key (PEM).
    #[arg(long, value_name = "FILE", requires = "admin_tls_cert")]
    admin_tls_key: Option<PathBuf>,
    /// Mutual TLS on the admin listener: the CA certificates (PEM) clients' certificates must
    /// chain to.
    #[arg(long, value_name = "FILE", requires = "admin_tls_cert")]
    admin_client_ca: Option<PathBuf>,
    /// Also answer GET /_ecdn/health on the client listener (a load balancer's probe); every
    /// other /_ecdn/ path there is a 404.
    #[arg(long)]
    client_health: bool,
    /// One JSON line per request on stderr.
    #[arg(long)]
    access_log: bool,
    /// Worker threads [default: all cores].
    #[arg(long, short = 'j')]
    threads: Option<usize>,
    /// S3 origins: how each read's code is chosen, tofec, tofec-tail (the delays' measured
    /// tail), greedy or static-N-K [default: tofec-tail].
    #[arg(long)]
    backend_strategy: Option<String>,
    /// S3 origins: connections to each store [default: 16].
    #[arg(long)]
    backend_connections: Option<usize>,
    /// S3 origins: the Cache-Control the node sees on their objects, empty for none
    /// [default: public, max-age=3600].
    #[arg(long)]
    backend_cache_control: Option<String>,
    /// Cluster mode: the cluster file (see `ecdn coordinator`). The node listens on its client
    /// and peer addresses from the file (not --listen) — or, for a node added with `ecdn
    /// cluster add`, from the coordinator's map —, needs --disk-path, and --disk-size is its
    /// piece cache's capacity (the ring file is made larger). When the map says it drains
    /// (`ecdn cluster drain`), it fails its health check, finishes its requests and exits.
    #[arg(long, value_name = "FILE", requires = "id")]
    cluster: Option<PathBuf>,
    /// Cluster mode: this node's id (in the cluster file, or given by `ecdn cluster add`).
    #[arg(long, requires = "cluster")]
    id: Option<usize>,
    /// Cluster mode, test bed: cap the bytes this node sends to peers (peer reads, and its
    /// own reads of object splits) at RATE bits per second, e.g. 1Gbit, 50Mbit, 800kbit.
    #[arg(long, value_name = "RATE", requires = "cluster")]
    peer_rate: Option<String>,
    /// Cluster mode, test bed: background traffic that takes this fraction of the capped
    /// peer link in bursts (on and off about a second each; EC-Cache §6.3). Needs --peer-rate.
    #[arg(long, value_name = "F", requires = "peer_rate")]
    background_load: Option<f64>,
    /// Cooperating sites (Coral): run a DSHT node on this UDP address; misses first try the
    /// sites that hold the object (levels ∞, 60 ms, 20 ms), and this node advertises what it
    /// fills.
    #[arg(long, value_name = "ADDR")]
    coral_listen: Option<SocketAddr>,
    /// A running DSHT node to join through (repeatable; none: this node starts the system).
    #[arg(long = "coral-seed", value_name = "ADDR", requires = "coral_listen")]
    coral_seeds: Vec<SocketAddr>,
    /// The `host:port` other sites fetch from (default: --listen, which then needs a port).
    #[arg(long, value_name = "HOST:PORT", requires = "coral_listen")]
    coral_advertise: Option<String>,
    /// Also run Coral's DNS redirector on this address (UDP and TCP), authoritative for
    /// --coral-domain:
    /// it answers with live proxies of the resolver's cluster level (every site's proxy is
    /// expected on the same port, as Coral's were).
    #[arg(long, value_name = "ADDR", requires_all = ["coral_listen", "coral_domain"])]
    coral_dns: Option<SocketAddr>,
    /// The domain the DNS redirector serves, e.g. cdn.example.
    #[arg(long, value_name = "DOMAIN", requires = "coral_dns")]
    coral_domain: Option<String>,
    /// How often the DSHT node reconsiders its clusters (Coral's 5 min by default; shorter
    /// lets new sites cluster sooner).
    #[arg(long, value_name = "DURATION", requires = "coral_listen")]
    coral_cluster_period: Option<String>,
    /// The DSHT's cluster levels, their RTT thresholds from level 0: `inf` for the global
    /// cluster, e.g. `inf,60ms,20ms` (Coral's three levels, the default) or `inf` (one level).
    #[arg(long, value_name = "LIST", requires = "coral_listen")]
    coral_levels: Option<String>,
    /// The window of the DSHT's leakage rate (β = 12 puts of a key per window reach a node
    /// once it is full; Coral's is a minute).
    #[arg(long, value_name = "DURATION", requires = "coral_listen")]
    coral_leakage_window: Option<String>,
    /// The DNS redirector takes a resolver whose address shares this many leading bits with
    /// the node's as its own site's (level 2, 0 ms): 24 (a /24, the default; 64 for IPv6) or,
    /// on a network where sites share a prefix (a test bed's one subnet), 32 for none but its
    /// own address. Others are placed by the DSHT's RTTs or probed.
    #[arg(long, value_name = "BITS", requires = "coral_dns")]
    coral_resolver_prefix: Option<u32>,
    /// Also listen for HTTPS on this address: HTTP/2 or HTTP/1.1 by ALPN, TLS 1.2 and 1.3.
    /// Needs --tls-cert and --tls-key; more certificates by host name (SNI) in the config's
    /// `[tls_hosts]` table. SIGHUP reloads the certificate files.
    #[arg(long, value_name = "ADDR")]
    tls_listen: Option<String>,
    /// The default certificate chain (PEM).
    #[arg(long, value_name = "FILE")]
    tls_cert: Option<PathBuf>,
    /// Its private key (PEM).
    #[arg(long, value_name = "FILE")]
    tls_key: Option<PathBuf>,
    /// Also accept HTTP/2 with prior knowledge (h2c) on the plain listener.
    #[arg(long)]
    h2c: bool,
    /// The cache-control field aimed at this node (RFC 9213), honoured before
    /// CDN-Cache-Control and Cache-Control, and never forwarded [default: Ecdn-Cache-Control].
    #[arg(long, value_name = "FIELD")]
    targeted_cache_control: Option<String>,
    /// Never store responses that set cookies (by default they are stored, and the cookie
    /// replayed as received, as RFC 9111 lets a shared cache).
    #[arg(long)]
    no_store_set_cookie: bool,
}

/// A certificate for some host names in the config file's `[tls_hosts]` table:
/// `"img.example.com" = { cert = "...", key = "..." }` (a name may be `*.example.com`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HostCert {
    cert: PathBuf,
    key: PathBuf,
}

/// The config file: every key optional, unknown keys rejected.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    listen: Option<String>,
    origin: Option<String>,
    hoc_size: Option<String>,
    hoc_policy: Option<String>,
    disk_path: Option<PathBuf>,
    disk_size: Option<String>,
    disk_directory_every: Option<String>,
    origin_timeout: Option<String>,
    drain_timeout: Option<String>,
    purge_token: Option<String>,
    admin_listen: Option<String>,
    admin_token: Option<String>,
    client_health: Option<bool>,
    access_log: Option<bool>,
    threads: Option<usize>,
    backend_strategy: Option<String>,
    backend_connections: Option<usize>,
    backend_cache_control: Option<String>,
    routes: Option<std::collections::BTreeMap<String, String>>,
    tls_listen: Option<String>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    tls_hosts: Option<std::collections::BTreeMap<String, HostCert>>,
    h2c: Option<bool>,
    targeted_cache_control: Option<String>,
    store_set_cookie: Option<bool>,
}

/// The effective settings after merging file and flags.
struct Settings {
    /// `None`: a cluster node the cluster file does not list (added since): its address is in
    /// the coordinator's map.
    listen: Option<SocketAddr>,
    node: NodeConfig,
    threads: Option<usize>,
    backend: crate::node_backend::BackendSettings,
}

fn merge(a: NodeArgs) -> Result<Settings> {
    let cluster = match (&a.cluster, a.id) {
        (Some(path), Some(id)) => {
            let cfg = ecdn_cluster::config::ClusterConfig::load(path)
                .with_context(|| format!("cluster file {}", path.display()))?;
            if a.listen.is_some() {
                bail!("--listen: in cluster mode the node listens on the cluster file's address");
            }
            let rate = match &a.peer_rate {
                Some(r) => Some((ecdn_lab::args::bit_rate("--peer-rate", r)? / 8.0) as u64),
                None => None,
            };
            let link = ecdn_node::node::PeerLink {
                rate,
                background_load: a.background_load.unwrap_or(0.0),
            };
            link.validate()
                .map_err(|e| anyhow::anyhow!("--background-load: {e}"))?;
            Some(ecdn_node::node::ClusterNode {
                cluster: cfg,
                id,
                link,
            })
        }
        _ => None,
    };
    let file = match &a.config {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("cannot read config {}", p.display()))?;
            toml::from_str::<FileConfig>(&text)
                .map_err(|e| anyhow::anyhow!("config {}: {e}", p.display()))?
        }
        None => FileConfig::default(),
    };
    let key = |name: &str| format!("invalid {name}");
    let listen = match &cluster {
        Some(c) => c.cluster.nodes.get(c.id).map(|n| n.client),
        None => {
            let listen = a
                .listen
                .or(file.listen)
                .unwrap_or_else(|| "127.0.0.1:8080".into());
            Some(listen.parse().with_context(|| {
                format!(
                    "{}: {listen:?} is not an address like 127.0.0.1:8080",
                    key("listen")
                )
            })?)
        }
    };
    let admin_addr = match (a.admin_listen.or(file.admin_listen), &cluster) {
        (Some(addr), _) => addr.parse().with_context(|| {
            format!(
                "{}: {addr:?} is not an address like 127.0.0.1:8090",
                key("admin_listen")
            )
        })?,
        (None, Some(c)) => c
            .cluster
            .nodes
            .get(c.id)
            .and_then(|n| n.admin)
            .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 0))),
        (None, None) => SocketAddr::from(([127, 0, 0, 1], 8090)),
    };
    let token_source = if a.admin_token.is_some() {
        "--admin-token (or ECDN_ADMIN_TOKEN)"
    } else {
        "admin_token in the config"
    };
    let purge_source = if a.purge_token.is_some() {
        "--purge-token (or ECDN_PURGE_TOKEN)"
    } else {
        "purge_token in the config"
    };
    let purge_token = a.purge_token.or(file.purge_token);
    if let Some(t) = &purge_token {
        ecdn_cluster::bearer::check_purge_token(t).with_context(|| purge_source.to_string())?;
    }
    let admin_token = a.admin_token.or(file.admin_token);
    if let Some(t) = &admin_token {
        ecdn_cluster::bearer::check_admin_token(t).with_context(|| token_source.to_string())?;
    }
    let admin_tls = ecdn_cluster::mtls::AdminTls::from_flags(
        a.admin_tls_cert.as_deref(),
        a.admin_tls_key.as_deref(),
        a.admin_client_ca.as_deref(),
    );
    if !admin_addr.ip().is_loopback() && admin_token.is_none() && admin_tls.is_none() {
        bail!(
            "the admin listener {admin_addr} is beyond loopback: give it --admin-token (or \
             admin_token in the config, or ECDN_ADMIN_TOKEN), or client certificates \
             (--admin-client-ca)"
        );
    }
    let mut routes = file.routes.unwrap_or_default();
    for r in &a.routes {
        let Some((host, url)) = r.split_once('=') else {
            bail!("invalid --route {r:?}: expected HOST=http://host:port");
        };
        routes.insert(host.trim().to_string(), url.trim().to_string());
    }
    let origin = a.origin.or(file.origin).unwrap_or_default();
    if origin.is_empty() && routes.is_empty() {
        bail!(
            "the origin is required: --origin http://host:port or origin = \"...\" in the config \
             (or routes for every host: --route HOST=http://host:port)"
        );
    }
    let hoc_size = a
        .hoc_size
        .or(file.hoc_size)
        .unwrap_or_else(|| "64MiB".into());
    let hoc_size =
        parse_size(&hoc_size).map_err(|e| anyhow::anyhow!("{}: {e}", key("hoc_size")))?;
    let hoc_policy = a
        .hoc_policy
        .or(file.hoc_policy)
        .unwrap_or_else(|| "adaptsize".into());
    ecdn_policy::PolicySpec::parse(&hoc_policy)
        .map_err(|e| anyhow::anyhow!("{}: {e}", key("hoc_policy")))?;
    let disk_size = a
        .disk_size
        .or(file.disk_size)
        .unwrap_or_else(|| "1GiB".into());
    let disk_size =
        parse_size(&disk_size).map_err(|e| anyhow::anyhow!("{}: {e}", key("disk_size")))?;
    let timeout = a
        .origin_timeout
        .or(file.origin_timeout)
        .unwrap_or_else(|| "30s".into());
    let timeout = ecdn_lab::args::duration(&key("origin_timeout"), &timeout)?;
    if timeout.is_zero() {
        bail!("{}: must be positive", key("origin_timeout"));
    }
    let drain = a
        .drain_timeout
        .or(file.drain_timeout)
        .unwrap_or_else(|| "30s".into());
    let drain = ecdn_lab::args::duration(&key("drain_timeout"), &drain)?;
    let directory_every = a
        .disk_directory_every
        .or(file.disk_directory_every)
        .unwrap_or_else(|| "60s".into());
    let directory_every = ecdn_lab::args::duration(&key("disk_directory_every"), &directory_every)?;
    if directory_every.is_zero() {
        bail!("{}: must be positive", key("disk_directory_every"));
    }
    let strategy = a
        .backend_strategy
        .or(file.backend_strategy)
        .unwrap_or_else(|| "tofec-tail".into());
    let backend = crate::node_backend::BackendSettings {
        strategy: ecdn_backend::tofec::Strategy::parse(&strategy)
            .map_err(|e| anyhow::anyhow!("{}: {e}", key("backend_strategy")))?,
        connections: a
            .backend_connections
            .or(file.backend_connections)
            .unwrap_or(16)
            .max(1),
        cache_control: Some(
            a.backend_cache_control
                .or(file.backend_cache_control)
                .unwrap_or_else(|| "public, max-age=3600".into()),
        )
        .filter(|c| !c.is_empty()),
        task_timeout: timeout,
    };
    let tls = match a.tls_listen.or(file.tls_listen) {
        Some(addr) => {
            let addr: SocketAddr = addr.parse().with_context(|| {
                format!(
                    "{}: {addr:?} is not an address like 0.0.0.0:443",
                    key("tls_listen")
                )
            })?;
            let (Some(cert), Some(key_file)) =
                (a.tls_cert.or(file.tls_cert), a.tls_key.or(file.tls_key))
            else {
                bail!("--tls-listen needs --tls-cert and --tls-key (or tls_cert and tls_key in the config)");
            };
            let hosts = file
                .tls_hosts
                .unwrap_or_default()
                .into_iter()
                .map(|(name, c)| {
                    (
                        name,
                        ecdn_node::node::tls::CertFiles {
                            cert: c.cert,
                            key: c.key,
                        },
                    )
                })
                .collect();
            Some(ecdn_node::node::TlsListen {
                addr,
                settings: ecdn_node::node::tls::TlsSettings {
                    default: ecdn_node::node::tls::CertFiles {
                        cert,
                        key: key_file,
                    },
                    hosts,
                },
            })
        }
        None => None,
    };
    let mut targeted = NodeConfig::default().targeted_cache_control;
    if let Some(name) = a.targeted_cache_control.or(file.targeted_cache_control) {
        targeted[0] =
            hyper::header::HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| {
                anyhow::anyhow!(
                    "{}: {name:?} is not a field name",
                    key("targeted_cache_control")
                )
            })?;
    }
    let store_set_cookie = !a.no_store_set_cookie && file.store_set_cookie.unwrap_or(true);
    Ok(Settings {
        listen,
        node: NodeConfig {
            origin,
            routes: routes.into_iter().collect(),
            hoc_size,
            disk_path: a.disk_path.or(file.disk_path),
            disk_size,
            disk_directory_every: directory_every,
            hoc_policy,
            origin_timeout: timeout,
            drain_timeout: drain,
            purge_token,
            admin: Some(ecdn_node::node::AdminListen {
                addr: admin_addr,
                token: admin_token,
                tls: admin_tls,
            }),
            client_health: a.client_health || file.client_health.unwrap_or(false),
            access_log: a.access_log || file.access_log.unwrap_or(false),
            cluster,
            tls,
            h2c: a.h2c || file.h2c.unwrap_or(false),
            targeted_cache_control: targeted,
            store_set_cookie,
            ..NodeConfig::default()
        },
        threads: a.threads.or(file.threads),
        backend,
    })
}

/// Cooperating sites: the DSHT flags of `ecdn node`.
struct CoralFlags {
    listen: SocketAddr,
    seeds: Vec<SocketAddr>,
    advertise: Option<String>,
    /// The DNS redirector's address and domain.
    dns: Option<(SocketAddr, String)>,
    cluster_period: Option<Duration>,
    /// The levels' thresholds (`None`: Coral's ∞, 60 ms, 20 ms).
    levels: Option<Vec<Option<Duration>>>,
    leakage_window: Option<Duration>,
    /// The redirector's own-site prefix, bits (`None`: /24, /64).
    resolver_prefix: Option<u32>,
}

/// `--coral-levels`: `inf` or a duration per level, comma-separated, level 0 first.
fn parse_levels(text: &str) -> Result<Vec<Option<Duration>>> {
    let levels: Vec<Option<Duration>> = text
        .split(',')
        .map(|t| match t.trim() {
            "inf" | "∞" => Ok(None),
            d => ecdn_lab::args::duration("--coral-levels", d).map(Some),
        })
        .collect::<Result<_>>()?;
    if levels.first() != Some(&None) {
        bail!("--coral-levels {text:?}: level 0 is the global cluster, `inf`");
    }
    if levels.len() > 3 {
        bail!("--coral-levels {text:?}: at most three levels");
    }
    Ok(levels)
}

/// What runs beside a cooperating node.
struct Coral {
    referrals: Arc<ecdn_coral::site::CoralReferrals>,
    dns: Option<ecdn_coral::dns::DnsServer>,
}

/// Starts the site's DSHT node, joins it, gives the node its referrals (returned, to be told
/// of the node once it runs), and starts the DNS redirector if asked.
async fn wire_coral(cfg: &mut NodeConfig, coral: CoralFlags, listen: SocketAddr) -> Result<Coral> {
    let me = match coral.advertise {
        Some(a) => a,
        None if listen.port() != 0 && !listen.ip().is_unspecified() => listen.to_string(),
        None => {
            bail!("--coral-advertise is needed when --listen has port 0 or an unspecified address")
        }
    };
    let mut dsht_cfg = ecdn_dsht::Config::new(coral.listen);
    if let Some(p) = coral.cluster_period {
        dsht_cfg.cluster_period = p;
    }
    if let Some(levels) = coral.levels {
        dsht_cfg.thresholds = levels;
    }
    if let Some(w) = coral.leakage_window {
        dsht_cfg.leakage_window = w;
    }
    let dsht = ecdn_dsht::Dsht::start(dsht_cfg)
        .await
        .with_context(|| format!("starting the DSHT node on {}", coral.listen))?;
    if !coral.seeds.is_empty() && dsht.join(&coral.seeds).await == 0 {
        eprintln!("ecdn node: no DSHT seed answered; running alone until others join");
    }
    eprintln!(
        "ecdn node: DSHT node {} on udp://{}",
        dsht.id(),
        dsht.addr()
    );
    let dsht = Arc::new(dsht);
    let referrals = Arc::new(ecdn_coral::site::CoralReferrals::new(
        dsht.clone(),
        me,
        Duration::from_secs(2),
    ));
    cfg.sites = Some(ecdn_node::node::sites::Sites(referrals.clone()));
    let dns = match coral.dns {
        Some((addr, domain)) => {
            let locate = match coral.resolver_prefix {
                Some(bits) => ecdn_coral::dns::prefix_locator_of(dsht.clone(), bits),
                None => ecdn_coral::dns::prefix_locator(dsht.clone()),
            };
            // Resolvers neither near nor DSHT peers are probed (one TCP round trip, kept).
            let wait = ecdn_coral::dns::Redirector::probe_wait(&dsht);
            let prober = Arc::new(ecdn_coral::probe::Prober::new(wait));
            let redirector =
                ecdn_coral::dns::Redirector::new(&domain, dsht, locate)?.with_prober(prober);
            referrals.set_dns(redirector.answers());
            let server = ecdn_coral::dns::DnsServer::start(addr, redirector).await?;
            eprintln!(
                "ecdn node: DNS redirector for {domain} on {} (UDP and TCP)",
                server.addr
            );
            Some(server)
        }
        None => None,
    };
    Ok(Coral { referrals, dns })
}

pub fn run(a: NodeArgs) -> Result<()> {
    let cluster_period = a
        .coral_cluster_period
        .as_deref()
        .map(|v| ecdn_lab::args::duration("--coral-cluster-period", v))
        .transpose()?;
    let levels = a.coral_levels.as_deref().map(parse_levels).transpose()?;
    let leakage_window = a
        .coral_leakage_window
        .as_deref()
        .map(|v| ecdn_lab::args::duration("--coral-leakage-window", v))
        .transpose()?
        .filter(|w| !w.is_zero());
    if let Some(bits) = a.coral_resolver_prefix {
        if bits > 128 {
            bail!("--coral-resolver-prefix {bits}: at most 32 bits (IPv4) or 128 (IPv6)");
        }
    }
    let coral = a.coral_listen.map(|listen| CoralFlags {
        listen,
        seeds: a.coral_seeds.clone(),
        advertise: a.coral_advertise.clone(),
        dns: a.coral_dns.zip(a.coral_domain.clone()),
        cluster_period,
        levels: levels.clone(),
        leakage_window,
        resolver_prefix: a.coral_resolver_prefix,
    });
    let cluster_file = a.cluster.clone();
    let s = merge(a)?;
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = s.threads {
        rt.worker_threads(n.max(1));
    }
    let rt = rt.enable_all().build().context("starting the runtime")?;
    rt.block_on(async move {
        // Before anything says it is listening: a SIGTERM from then on shuts down cleanly.
        let stop = ecdn_lab::signals::shutdown_signal();
        let hangups = ecdn_lab::signals::hangups();
        let listen = match (s.listen, &s.node.cluster) {
            (Some(l), _) => l,
            (None, Some(c)) => added_node_address(c).await?,
            (None, None) => unreachable!("merge gives an address outside a cluster"),
        };
        // How long a draining node serves on after its health check fails: what the
        // coordinator allows a silent node.
        let grace = s.node.cluster.as_ref().map_or(Duration::ZERO, |c| {
            Duration::from_millis(c.cluster.heartbeat_ms)
                .saturating_mul(c.cluster.missed_heartbeats)
        });
        // The cluster file and the configuration the node signs with: SIGHUP reloads its keys.
        let keys = cluster_file.zip(s.node.cluster.as_ref().map(|c| c.cluster.clone()));
        let mut cfg = s.node;
        let coral = match coral {
            Some(coral) => Some(wire_coral(&mut cfg, coral, listen).await?),
            None => None,
        };
        let admin_scheme = match cfg.admin.as_ref().is_some_and(|a| a.tls.is_some()) {
            true => "https",
            false => "http",
        };
        let node = match crate::node_backend::wire(&mut cfg, &s.backend)? {
            Some(connect) => Node::start_with_connector(listen, cfg, connect).await,
            None => Node::start(listen, cfg).await,
        }
        .with_context(|| format!("cannot start the node on {listen}"))?;
        eprintln!("ecdn node listening on http://{}", node.addr);
        if let Some(tls) = node.tls_addr {
            eprintln!("ecdn node listening on https://{tls} (h2, http/1.1)");
        }
        if let Some(c) = &coral {
            c.referrals.set_holder(node.holder());
            c.referrals.start_upkeep(Duration::from_secs(60));
        }
        if let Some(admin) = node.admin_addr() {
            eprintln!("ecdn node: admin listener on {admin_scheme}://{admin}");
        }
        if let Some(peer) = node.peer_addr() {
            eprintln!("ecdn node: peer listener on {peer}");
        }
        let drained = tokio::select! {
            _ = stop => false,
            _ = node.leaving() => true,
            _ = reload_on_hangup(&node, hangups, keys.as_ref()) => false,
        };
        if drained {
            // The health check fails from now on; give load balancers the time the
            // coordinator gives a silent node before stopping (requests are served meanwhile).
            eprintln!(
                "ecdn node: the bucket map says this node drains; stopping in {} ms",
                grace.as_millis()
            );
            tokio::time::sleep(grace).await;
        }
        node.stop().await?;
        if let Some(dns) = coral.and_then(|c| c.dns) {
            dns.stop().await;
        }
        eprintln!(
            "ecdn node: {}",
            if drained {
                "drained, stopped"
            } else {
                "shut down"
            }
        );
        Ok(())
    })
}

/// On every SIGHUP of `hangups` (registered before the node said it listens), reloads the TLS certificates and, in cluster mode, the cluster key and
/// the keys accepted with it from the cluster file (a step of a key rotation, see
/// `ecdn_cluster::auth`); an error is reported and the old ones stay. Never returns.
async fn reload_on_hangup(
    node: &ecdn_node::node::RunningNode,
    hangups: Option<tokio::signal::unix::Signal>,
    keys: Option<&(PathBuf, ecdn_cluster::ClusterConfig)>,
) {
    let Some(mut hangups) = hangups else {
        return std::future::pending().await;
    };
    while hangups.recv().await.is_some() {
        match node.reload_tls() {
            Ok(()) => eprintln!("ecdn node: SIGHUP: certificates reloaded"),
            Err(e) => {
                eprintln!("ecdn node: SIGHUP: certificates not reloaded, keeping the old ones: {e}")
            }
        }
        if let Some((path, cfg)) = keys {
            eprintln!(
                "ecdn node: SIGHUP: {}",
                ecdn_lab::signals::reload_cluster_keys(path, cfg)
            );
        }
    }
    std::future::pending().await
}

/// The client address of a node added since the cluster file was written: its member in the
/// control plane's map (asked for up to ten seconds).
async fn added_node_address(c: &ecdn_node::node::ClusterNode) -> Result<SocketAddr> {
    let mut last = String::new();
    for _ in 0..20 {
        match ecdn_cluster::plane::fetch_map(&c.cluster).await {
            Ok(map) => {
                return match map.member(c.id) {
                    Some(m) => Ok(m.client),
                    None => bail!(
                        "--id {}: not a member of the cluster (nodes 0..{}); add it first with \
                         `ecdn cluster add`",
                        c.id,
                        map.servers()
                    ),
                }
            }
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    bail!(
        "--id {}: not in the cluster file, and the control plane did not answer: {last}",
        c.id
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn coral_levels_parse_from_the_global_level_down() {
        let ms = |v| Some(Duration::from_millis(v));
        assert_eq!(
            parse_levels("inf,60ms,20ms").unwrap(),
            [None, ms(60), ms(20)]
        );
        assert_eq!(parse_levels("inf").unwrap(), [None]);
        for (bad, why) in [
            ("60ms,inf", "level 0"),
            ("inf,1ms,2ms,3ms", "at most three"),
            ("inf,fast", "--coral-levels"),
        ] {
            let e = format!("{:#}", parse_levels(bad).unwrap_err());
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    use super::*;
    use clap::Parser;
    use std::time::Duration;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        node: NodeArgs,
    }

    fn settings(args: &[&str]) -> Result<Settings> {
        let cli = Cli::try_parse_from(std::iter::once("node").chain(args.iter().copied()))?;
        merge(cli.node)
    }

    /// The edge's settings from a file: the TLS listener with its default certificate and
    /// those by host name, h2c, the node's targeted field, Set-Cookie storage; a flag
    /// overrides the targeted field; a TLS listener without a key, or a bad field name, is a
    /// clear error.
    #[test]
    fn the_edge_from_the_file_and_flags() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("node.toml");
        std::fs::write(
            &f,
            "origin = \"http://127.0.0.1:9001\"\ntls_listen = \"127.0.0.1:9443\"\n\
             tls_cert = \"/c.pem\"\ntls_key = \"/c.key\"\nh2c = true\n\
             targeted_cache_control = \"X-Edge-CC\"\nstore_set_cookie = false\n\
             [tls_hosts]\n\"*.img.test\" = { cert = \"/i.pem\", key = \"/i.key\" }\n",
        )
        .unwrap();
        let f = f.to_string_lossy().into_owned();
        let s = settings(&["--config", &f]).unwrap();
        let tls = s.node.tls.as_ref().unwrap();
        assert_eq!(tls.addr.port(), 9443);
        assert_eq!(tls.settings.default.key, PathBuf::from("/c.key"));
        assert_eq!(tls.settings.hosts[0].0, "*.img.test");
        assert_eq!(tls.settings.hosts[0].1.cert, PathBuf::from("/i.pem"));
        assert!(s.node.h2c && !s.node.store_set_cookie);
        assert_eq!(s.node.targeted_cache_control[0], "x-edge-cc");
        assert_eq!(s.node.targeted_cache_control[1], "cdn-cache-control");
        let s = settings(&["--config", &f, "--targeted-cache-control", "Y-CC"]).unwrap();
        assert_eq!(s.node.targeted_cache_control[0], "y-cc");
        let err = settings(&[
            "--origin",
            "http://127.0.0.1:1",
            "--tls-listen",
            "127.0.0.1:443",
            "--tls-cert",
            "/c.pem",
        ])
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("--tls-key"), "{err}");
        let err = settings(&["--config", &f, "--targeted-cache-control", "bad name"])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("targeted_cache_control"), "{err}");
    }

    #[test]
    fn flags_override_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("node.toml");
        std::fs::write(
            &f,
            "listen = \"127.0.0.1:9000\"\norigin = \"http://127.0.0.1:9001\"\nhoc_size = \"8MiB\"\n",
        )
        .unwrap();
        let f = f.to_string_lossy().into_owned();
        let s = settings(&["--config", &f]).unwrap();
        assert_eq!(s.listen.unwrap().port(), 9000);
        assert_eq!(s.node.hoc_size, 8 << 20);
        assert_eq!(s.node.hoc_policy, "adaptsize");
        let s = settings(&[
            "--config",
            &f,
            "--hoc-size",
            "1GiB",
            "--listen",
            "127.0.0.1:1",
        ])
        .unwrap();
        assert_eq!(s.node.hoc_size, 1 << 30);
        assert_eq!(s.listen.unwrap().port(), 1);
        assert_eq!(s.node.origin, "http://127.0.0.1:9001");
    }

    #[test]
    fn bad_config_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            ("origin = \"http://x\"\nhoc_sise = \"1MiB\"\n", "hoc_sise"),
            ("origin = \"http://x\"\nhoc_size = \"lots\"\n", "hoc_size"),
            ("origin = \"http://x\"\nlisten = \"nowhere\"\n", "listen"),
            (
                "origin = \"http://x\"\nhoc_policy = \"lru+magic\"\n",
                "hoc_policy",
            ),
            ("origin = [1, 2\n", "config"),
            ("hoc_size = \"1MiB\"\n", "origin is required"),
            (
                "origin = \"http://x\"\ndrain_timeout = \"-1s\"\n",
                "drain_timeout",
            ),
            // Durations past what a timer can hold are errors, not panics.
            (
                "origin = \"http://x\"\norigin_timeout = \"1e20\"\n",
                "origin_timeout",
            ),
            (
                "origin = \"http://x\"\norigin_timeout = \"1e300d\"\n",
                "origin_timeout",
            ),
            (
                "origin = \"http://x\"\ndrain_timeout = \"1e20s\"\n",
                "drain_timeout",
            ),
            ("origin = \"http://x\"\nroutes = [\"a\"]\n", "routes"),
        ];
        for (i, (text, needle)) in cases.iter().enumerate() {
            let f = dir.path().join(format!("c{i}.toml"));
            std::fs::write(&f, text).unwrap();
            let f = f.to_string_lossy().into_owned();
            let err = format!("{:#}", settings(&["--config", &f]).err().unwrap());
            assert!(err.contains(needle), "{text:?}: {err}");
        }
        assert!(settings(&["--config", "/nonexistent.toml"]).is_err());
        let err = settings(&["--route", "img.test"])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("HOST=http"), "{err}");
    }

    #[test]
    fn routes_from_file_and_flags() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("node.toml");
        std::fs::write(
            &f,
            "drain_timeout = \"5s\"\n[routes]\n\"a.test\" = \"http://127.0.0.1:1\"\n\"b.test\" = \"http://127.0.0.1:2\"\n",
        )
        .unwrap();
        let f = f.to_string_lossy().into_owned();
        // Routes alone are enough (no default origin); a flag overrides one host's route.
        let s = settings(&["--config", &f, "--route", "b.test=http://127.0.0.1:3"]).unwrap();
        assert_eq!(s.node.origin, "");
        assert_eq!(
            s.node.routes,
            vec![
                ("a.test".to_string(), "http://127.0.0.1:1".to_string()),
                ("b.test".to_string(), "http://127.0.0.1:3".to_string()),
            ]
        );
        assert_eq!(s.node.drain_timeout, Duration::from_secs(5));
    }
}
