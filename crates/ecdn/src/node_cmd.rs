//! `ecdn node`: the HTTP caching node (first slice: see `ecdn_node::node`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use ecdn_node::node::{Node, NodeConfig};
use ecdn_trace::units::{parse_seconds, parse_size};

#[derive(Args)]
#[command(after_help = "Example:\n  \
    ecdn origin --listen 127.0.0.1:8081 &\n  \
    ecdn node --listen 127.0.0.1:8080 --origin http://127.0.0.1:8081 --hoc-size 64MiB \\\n      \
    --disk-path /tmp/ecdn.disk --disk-size 1GiB\n  \
    curl -sI 'http://127.0.0.1:8080/obj/42?size=1MiB'   # X-Cache: MISS, then HIT-HOC")]
pub struct NodeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// The origin, http://host:port.
    #[arg(long)]
    origin: String,
    /// DRAM hot-object cache capacity.
    #[arg(long, default_value = "64MiB")]
    hoc_size: String,
    /// Hot-object cache policy (EVICTION[+ADMISSION], e.g. adaptsize, lru, s4lru).
    #[arg(long, default_value = "adaptsize")]
    hoc_policy: String,
    /// Disk cache file (or block device); none for a DRAM-only node.
    #[arg(long)]
    disk_path: Option<PathBuf>,
    /// Disk cache capacity.
    #[arg(long, default_value = "1GiB")]
    disk_size: String,
    /// Limit on one origin exchange; 504 beyond it.
    #[arg(long, default_value = "30s")]
    origin_timeout: String,
    /// Worker threads (default: all cores).
    #[arg(long, short = 'j')]
    threads: Option<usize>,
}

pub fn run(a: NodeArgs) -> Result<()> {
    ecdn_policy::PolicySpec::parse(&a.hoc_policy).map_err(anyhow::Error::msg)?;
    let cfg = NodeConfig {
        origin: a.origin,
        hoc_size: parse_size(&a.hoc_size).map_err(anyhow::Error::msg)?,
        disk_path: a.disk_path,
        disk_size: parse_size(&a.disk_size).map_err(anyhow::Error::msg)?,
        hoc_policy: a.hoc_policy,
        origin_timeout: Duration::from_secs_f64(
            parse_seconds(&a.origin_timeout).map_err(anyhow::Error::msg)?,
        ),
    };
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = a.threads {
        rt.worker_threads(n.max(1));
    }
    let rt = rt.enable_all().build().context("starting the runtime")?;
    rt.block_on(async move {
        let node = Node::start(a.listen, cfg)
            .await
            .with_context(|| format!("cannot start the node on {}", a.listen))?;
        eprintln!("ecdn node listening on http://{}", node.addr);
        crate::origin_cmd::shutdown_signal().await;
        node.stop().await?;
        eprintln!("ecdn node: shut down");
        Ok(())
    })
}
