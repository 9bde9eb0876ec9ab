//! Stopping on Ctrl-C or SIGTERM, and SIGHUP reloading the cluster keys.
//!
//! A process announces it is ready ("listening on …") and a supervisor (a test, systemd, the
//! cluster demo) may signal it the next moment. Until a handler is registered, SIGTERM's
//! default action kills the process outright, without its clean shutdown. So the handlers are
//! registered when [`shutdown_signal`] and [`hangups`] are *called*, not when a future is
//! first polled: call them before printing that line.

use std::future::Future;

use tokio::signal::unix::{signal, SignalKind};

/// Registers handlers for SIGINT and SIGTERM now; the returned future completes on the first
/// of them. Must be called inside a tokio runtime. A signal that cannot be registered is
/// reported and never completes the future (the other still does).
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    let mut interrupt = registered(SignalKind::interrupt(), "SIGINT");
    let mut terminate = registered(SignalKind::terminate(), "SIGTERM");
    async move {
        tokio::select! {
            _ = recv(&mut interrupt) => {}
            _ = recv(&mut terminate) => {}
        }
    }
}

fn registered(kind: SignalKind, name: &str) -> Option<tokio::signal::unix::Signal> {
    signal(kind)
        .map_err(|e| eprintln!("ecdn: cannot handle {name}: {e}"))
        .ok()
}

async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
    match s {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending().await,
    }
}

/// Reads the cluster file at `path` again and gives its keys to `cfg`'s key ring (what
/// SIGHUP does in `ecdn node --cluster` and `ecdn coordinator`: one step of a key rotation,
/// see `ecdn_cluster::auth`), and its `[peer_tls]` files to the peer protocol's TLS (the next
/// connections present the new certificate). Returns the line to log; on an error nothing
/// changes.
pub fn reload_cluster_keys(path: &std::path::Path, cfg: &ecdn_cluster::ClusterConfig) -> String {
    match ecdn_cluster::ClusterConfig::load(path) {
        Ok(newer) => {
            let n = cfg.reload_keys(&newer);
            let tls = match cfg.reload_peer_tls(&newer) {
                Ok(true) => "; the peer certificate reloaded".to_string(),
                Ok(false) => String::new(),
                Err(e) => format!("; the peer TLS kept: {e}"),
            };
            format!(
                "cluster keys reloaded from {}: {n} accepted, the first signs{tls}",
                path.display()
            )
        }
        Err(e) => format!("cluster keys not reloaded, keeping the old ones: {e}"),
    }
}

/// Registers a handler for SIGHUP now, as [`shutdown_signal`] does for the others (call it
/// before saying "listening": a supervisor may send SIGHUP the next moment, and one sent
/// before the handler exists would end the process, or be lost). The stream of hangups; `None`
/// when SIGHUP cannot be handled (reported).
pub fn hangups() -> Option<tokio::signal::unix::Signal> {
    registered(SignalKind::hangup(), "SIGHUP")
}

/// On every SIGHUP of `hangups` ([`hangups`]), [`reload_cluster_keys`] and logs it as `who`.
/// Never returns.
pub async fn reload_keys_on_hangup(
    who: &str,
    hangups: Option<tokio::signal::unix::Signal>,
    path: &std::path::Path,
    cfg: &ecdn_cluster::ClusterConfig,
) {
    let Some(mut hangups) = hangups else {
        return std::future::pending().await;
    };
    while hangups.recv().await.is_some() {
        eprintln!("{who}: SIGHUP: {}", reload_cluster_keys(path, cfg));
    }
    std::future::pending().await
}
