//! `ecdn backend`: the backend tier (TOFEC) against an S3-compatible store — write and read
//! objects through it, serve it as an HTTP origin, and measure it (`bench`).
//!
//! The store is `--store s3://BUCKET[/PREFIX]`; its endpoint, region and credentials come from
//! the usual AWS environment variables (`AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`) or the flags. Without credentials, requests go
//! unsigned (a public bucket, or the emulator: `ecdn origin --s3`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use bytes::Bytes;
use clap::{Args, Subcommand};
use ecdn_backend::gateway::{self, GatewayConfig};
use ecdn_backend::proxy::{Proxy, ProxyConfig};
use ecdn_backend::store::{S3Config, S3Store, Store};
use ecdn_backend::tofec::Strategy;

#[derive(Subcommand)]
pub enum BackendCmd {
    /// Upload a file coded into (2K, K) strips (multipart; answers after k parts, waits for
    /// the rest), or as it is (--plain).
    Put(PutArgs),
    /// Read an object (coded files decoded and checked; plain objects in k ranges).
    Get(GetArgs),
    /// Serve the store as an HTTP origin (GET and HEAD /KEY) through the backend tier.
    Gateway(GatewayArgs),
    /// TOFEC's throughput-delay evaluation against the storage-cloud emulator.
    Bench(Box<ecdn_lab::backend_bench::BenchArgs>),
}

/// Where the store is and how the proxy reads it.
#[derive(Args, Clone)]
pub struct StoreArgs {
    /// The store: s3://BUCKET[/PREFIX].
    #[arg(long, value_name = "URL")]
    store: String,
    /// The S3 endpoint (http://host:port or https://…) [default: $AWS_ENDPOINT_URL, else
    /// AWS's for the region].
    #[arg(long)]
    endpoint: Option<String>,
    /// The region [default: $AWS_REGION, else us-east-1].
    #[arg(long)]
    region: Option<String>,
    /// How each request's code is chosen: tofec-tail (the delays' measured tail), tofec (the
    /// paper's thresholds), greedy, static-N-K.
    #[arg(long, default_value = "tofec-tail")]
    strategy: String,
    /// L: connections to the store.
    #[arg(long, default_value_t = 16)]
    connections: usize,
    /// K of the files written (N = 2K).
    #[arg(long, default_value_t = 6)]
    strips: usize,
    /// Limit on one task (a range read or a part).
    #[arg(long, default_value = "30s")]
    task_timeout: String,
}

impl StoreArgs {
    fn s3(&self) -> Result<S3Config> {
        let mut c = S3Config::from_url(&self.store)?;
        if let Some(e) = &self.endpoint {
            c.endpoint = Some(e.clone());
        }
        if let Some(r) = &self.region {
            c.region = Some(r.clone());
        }
        Ok(c)
    }

    /// The store and a proxy in front of it (in the current runtime).
    pub fn start(&self) -> Result<(Arc<dyn Store>, Proxy)> {
        let timeout = ecdn_lab::args::duration("--task-timeout", &self.task_timeout)?;
        let store: Arc<dyn Store> = Arc::new(S3Store::new(&self.s3()?, timeout)?);
        let cfg = ProxyConfig {
            strategy: Strategy::parse(&self.strategy).map_err(anyhow::Error::msg)?,
            connections: self.connections.max(1),
            strips_k: self.strips.max(1),
            task_timeout: timeout,
            ..ProxyConfig::default()
        };
        Ok((store.clone(), Proxy::start(store, cfg)))
    }
}

#[derive(Args)]
pub struct PutArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// The object's key (under the prefix).
    key: String,
    /// The file to upload.
    file: PathBuf,
    /// Upload it as it is, in one PUT, not coded (what another S3 client would store).
    #[arg(long)]
    plain: bool,
}

#[derive(Args)]
pub struct GetArgs {
    #[command(flatten)]
    store: StoreArgs,
    key: String,
    /// Where to write it [default: stdout].
    #[arg(long, short = 'o')]
    output: Option<PathBuf>,
}

#[derive(Args)]
pub struct GatewayArgs {
    #[command(flatten)]
    store: StoreArgs,
    #[arg(long, default_value = "127.0.0.1:8082")]
    listen: SocketAddr,
    /// Cache-Control of every answer (empty for none).
    #[arg(long, default_value = "public, max-age=3600")]
    cache_control: String,
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")
}

pub fn run(cmd: BackendCmd) -> Result<()> {
    // The bench builds its own runtime, inside the test bed's proxy host when it has one.
    let cmd = match cmd {
        BackendCmd::Bench(a) => return ecdn_lab::backend_bench::main(*a),
        cmd => cmd,
    };
    let rt = runtime()?;
    rt.block_on(async move {
        match cmd {
            BackendCmd::Put(a) => {
                let data = std::fs::read(&a.file)
                    .with_context(|| format!("cannot read {}", a.file.display()))?;
                let (store, proxy) = a.store.start()?;
                if a.plain {
                    store.put(&a.key, Bytes::from(data), None).await?;
                    eprintln!("{}: stored as it is", a.key);
                    return Ok(());
                }
                let w = proxy.write(&a.key, Bytes::from(data)).await?;
                let s = w.served;
                eprintln!(
                    "{}: acknowledged after {} of {} parts ({:.0} ms); completing the upload",
                    a.key,
                    s.k,
                    s.n,
                    (s.queued + s.service).as_secs_f64() * 1e3
                );
                w.finished().await?;
                eprintln!("{}: stored", a.key);
                Ok(())
            }
            BackendCmd::Get(a) => {
                let (_, proxy) = a.store.start()?;
                let (bytes, s) = proxy.read(&a.key).await?;
                eprintln!(
                    "{}: {} bytes with ({}, {}) in {:.0} ms",
                    a.key,
                    bytes.len(),
                    s.n,
                    s.k,
                    (s.queued + s.service).as_secs_f64() * 1e3
                );
                match &a.output {
                    Some(p) => std::fs::write(p, &bytes)
                        .with_context(|| format!("cannot write {}", p.display()))?,
                    None => {
                        use std::io::Write;
                        std::io::stdout().write_all(&bytes)?;
                    }
                }
                Ok(())
            }
            BackendCmd::Gateway(a) => {
                let (_, proxy) = a.store.start()?;
                let stop = ecdn_lab::signals::shutdown_signal();
                let listener = tokio::net::TcpListener::bind(a.listen)
                    .await
                    .with_context(|| format!("cannot listen on {}", a.listen))?;
                eprintln!(
                    "ecdn backend gateway on http://{} for {}",
                    listener.local_addr()?,
                    a.store.store
                );
                let cfg = GatewayConfig {
                    cache_control: Some(a.cache_control).filter(|c| !c.is_empty()),
                };
                gateway::serve(listener, proxy, cfg, stop).await;
                Ok(())
            }
            BackendCmd::Bench(_) => unreachable!("run by backend_bench::main"),
        }
    })
}
