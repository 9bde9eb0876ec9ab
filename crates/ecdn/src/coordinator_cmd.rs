//! `ecdn coordinator`: the embedded control plane of a live cluster (see
//! [`ecdn_cluster::coordinator`]).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use ecdn_cluster::{ClusterConfig, Coordinator};

#[derive(Args)]
#[command(
    after_help = "Listens on the cluster file's `coordinator` address. Nodes send it signed \
    heartbeats with their write loads and long-poll the bucket map; a node missing \
    `missed_heartbeats` heartbeats is marked unavailable, its data buckets move along the ring \
    and parity is rebalanced; its next heartbeat brings it back. Runs until SIGINT or SIGTERM.\n\n\
    Example:\n  ecdn coordinator --cluster cluster.toml"
)]
pub struct CoordinatorArgs {
    /// The cluster file (TOML).
    #[arg(long)]
    cluster: PathBuf,
}

pub fn run(a: CoordinatorArgs) -> Result<()> {
    let cfg = ClusterConfig::load(&a.cluster)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    rt.block_on(async move {
        let coord = Coordinator::start(cfg).await?;
        crate::origin_cmd::shutdown_signal().await;
        coord.shutdown().await;
        eprintln!("ecdn coordinator: shut down");
        Ok(())
    })
}
