//! `ecdn coordinator`: the control plane of a live cluster — the embedded coordinator (see
//! [`ecdn_cluster::coordinator`]), or, when the cluster file names etcd endpoints, one of
//! several coordinators that elect a leader in etcd ([`ecdn_cluster::coordinator::etcd`]).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use ecdn_cluster::coordinator::etcd::EtcdCoordinator;
use ecdn_cluster::{ClusterConfig, Coordinator, CoordinatorOptions};
use ecdn_lab::signals::reload_keys_on_hangup;

#[derive(Args)]
#[command(
    after_help = "Listens on the cluster file's `coordinator` address. Nodes send it signed \
    heartbeats with their write loads and long-poll the bucket map; a node missing \
    `missed_heartbeats` heartbeats is marked unavailable, its data buckets move along the ring \
    and parity is rebalanced; its next heartbeat brings it back. Runs until SIGINT or SIGTERM.\n\n\
    With `etcd` endpoints in the cluster file, run several: they elect a leader in etcd, \
    nodes register there under leases, and the leader writes the map there; the others take \
    over within a lease time when it dies. Each serves the operator's API on --listen (the \
    leader answers; `ecdn cluster status` finds it through etcd).\n\n\
    The embedded coordinator keeps its state (members added, drained and removed, the \
    placement, the epoch) in a file beside the cluster file (--state), so a restart goes on \
    from there; delete the file to start again from the cluster file alone.\n\n\
    Example:\n  ecdn coordinator --cluster cluster.toml"
)]
pub struct CoordinatorArgs {
    /// The cluster file (TOML).
    #[arg(long)]
    cluster: PathBuf,
    /// etcd mode: where this coordinator serves the operator's API (status, add, drain,
    /// remove, rebalance; only the leader answers). Its name in the `leader` key. Default:
    /// the cluster file's `coordinator` address (give each coordinator its own).
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Serve the cluster's status page (`/_ecdn/status`, and its data `/_ecdn/status.json`)
    /// on this address. In etcd mode every coordinator serves it: the leader its own state,
    /// the others what etcd holds, read-only, and who leads. Beyond loopback it needs
    /// --admin-token.
    #[arg(long, value_name = "ADDR")]
    admin_listen: Option<SocketAddr>,
    /// Mutual TLS on the admin listener: its certificate chain (PEM). With --admin-tls-key and
    /// --admin-client-ca: only clients presenting a certificate that CA signed complete the
    /// handshake (then no token is required beyond loopback).
    #[arg(long, value_name = "FILE", requires_all = ["admin_tls_key", "admin_client_ca", "admin_listen"])]
    admin_tls_cert: Option<PathBuf>,
    /// Mutual TLS on the admin listener: its private key (PEM).
    #[arg(long, value_name = "FILE", requires = "admin_tls_cert")]
    admin_tls_key: Option<PathBuf>,
    /// Mutual TLS on the admin listener: the CA certificates (PEM) clients' certificates must
    /// chain to.
    #[arg(long, value_name = "FILE", requires = "admin_tls_cert")]
    admin_client_ca: Option<PathBuf>,
    /// Bearer token every request to the admin listener but the page itself must carry (or
    /// ECDN_ADMIN_TOKEN). Required beyond loopback, unless the listener has mutual TLS.
    #[arg(long, env = "ECDN_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// Embedded mode: the file the coordinator keeps its state in (the members added, drained
    /// and removed, the placement, the epoch), replaced atomically after every change and read
    /// at start, so a restart goes on from there. Default: beside the cluster file, its name
    /// with `.state.json` for its extension.
    #[arg(long, value_name = "FILE")]
    state: Option<PathBuf>,
    /// Keep the state in memory only: a restart starts from the cluster file.
    #[arg(long, conflicts_with = "state")]
    no_state: bool,
}

pub fn run(a: CoordinatorArgs) -> Result<()> {
    // Refused whether or not a listener will use it: a token given is meant to guard one.
    if let Some(t) = &a.admin_token {
        ecdn_cluster::bearer::check_admin_token(t)
            .context("--admin-token (or ECDN_ADMIN_TOKEN)")?;
    }
    let admin_tls = ecdn_cluster::mtls::AdminTls::from_flags(
        a.admin_tls_cert.as_deref(),
        a.admin_tls_key.as_deref(),
        a.admin_client_ca.as_deref(),
    );
    let cfg = ClusterConfig::load(&a.cluster)?;
    // Shares the key ring of everything the coordinator makes from `cfg`: SIGHUP reloads it.
    let cfg_keys = cfg.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    rt.block_on(async move {
        // Before anything says it is listening: a SIGTERM from then on shuts down cleanly.
        let stop = ecdn_lab::signals::shutdown_signal();
        let hangups = ecdn_lab::signals::hangups();
        if !cfg.etcd.is_empty() {
            if a.state.is_some() {
                anyhow::bail!("--state: in etcd mode the leader keeps the state in etcd");
            }
            let addr = a.listen.unwrap_or(cfg.coordinator);
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr}"))?;
            let mut coord =
                EtcdCoordinator::start_with_api(cfg, CoordinatorOptions::default(), listener)?;
            eprintln!("ecdn coordinator: etcd mode, API on {addr}");
            if let Some(addr) = a.admin_listen {
                serve_page(addr, admin_tls.is_some(), |l| {
                    coord.serve_admin_with(l, a.admin_token, admin_tls.as_ref())
                })
                .await?;
            }
            until_stopped(stop, hangups, &a.cluster, &cfg_keys).await;
            coord.stop();
            eprintln!("ecdn coordinator: shut down");
            return Ok(());
        }
        let state_file = (!a.no_state).then(|| {
            a.state
                .clone()
                .unwrap_or_else(|| a.cluster.with_extension("state.json"))
        });
        let opts = CoordinatorOptions {
            state_file,
            ..CoordinatorOptions::default()
        };
        let mut coord = Coordinator::start_with(cfg, opts).await?;
        if let Some(addr) = a.admin_listen {
            serve_page(addr, admin_tls.is_some(), |l| {
                coord.serve_admin_with(l, a.admin_token, admin_tls.as_ref())
            })
            .await?;
        }
        until_stopped(stop, hangups, &a.cluster, &cfg_keys).await;
        coord.shutdown().await;
        eprintln!("ecdn coordinator: shut down");
        Ok(())
    })
}

/// Binds the status page's listener at `addr`, hands it to `serve` and says where the page is
/// (`https` with mutual TLS).
async fn serve_page<E: std::error::Error + Send + Sync + 'static>(
    addr: SocketAddr,
    https: bool,
    serve: impl FnOnce(tokio::net::TcpListener) -> Result<SocketAddr, E>,
) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let at = serve(listener)?;
    let scheme = if https { "https" } else { "http" };
    eprintln!("ecdn coordinator: status page on {scheme}://{at}/_ecdn/status");
    Ok(())
}

/// Until `stop` (SIGTERM or SIGINT); every SIGHUP meanwhile reloads the cluster keys of
/// `cfg` from the cluster file at `path`.
async fn until_stopped(
    stop: impl std::future::Future<Output = ()>,
    hangups: Option<tokio::signal::unix::Signal>,
    path: &std::path::Path,
    cfg: &ClusterConfig,
) {
    tokio::select! {
        _ = stop => {}
        _ = reload_keys_on_hangup("ecdn coordinator", hangups, path, cfg) => {}
    }
}
