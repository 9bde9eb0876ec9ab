//! `ecdn origin`: the synthetic origin server.

use std::net::SocketAddr;

use anyhow::{Context, Result};
use clap::Args;
use ecdn_node::origin::{serve, OriginConfig};
use ecdn_trace::units::parse_size;

use ecdn_lab::signals::shutdown_signal;

#[derive(Args)]
#[command(
    after_help = "Serves GET/HEAD /obj/<id>?size=<bytes>[&cc=<cache-control>][&status=<code>] \
    with deterministic content derived from the id, so any byte can be verified.\n\n\
    Example:\n  ecdn origin --listen 127.0.0.1:8081 --latency 20ms --bandwidth 100MiB"
)]
pub struct OriginArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8081")]
    listen: SocketAddr,
    /// Cache-Control of every response (a request's cc= replaces it; empty for none).
    #[arg(long, default_value = "public, max-age=3600")]
    cache_control: String,
    /// Object size when a request has no size=.
    #[arg(long, default_value = "16KiB")]
    default_size: String,
    /// Delay before the response headers (e.g. 20ms).
    #[arg(long, default_value = "0s")]
    latency: String,
    /// Body pacing per response in bytes per second (e.g. 100MiB); 0 for unpaced.
    #[arg(long, default_value = "0")]
    bandwidth: String,
    /// Serve the storage-cloud emulator instead: an S3-compatible server (path-style
    /// /BUCKET/KEY, objects in memory) whose answers take as long as S3's
    /// (`ecdn_backend::emulator`); --bandwidth paces each connection's bodies.
    #[arg(long)]
    s3: bool,
    /// With --s3: the delays: `paper` (TOFEC's model with S3's parameters from its numbers),
    /// `none`, or a source TOFEC did not design: `empirical:FILE`, `heavy-tail[:pareto:A |
    /// :lognormal:S]`, `slow-periods[:keys|:connections]` (`ecdn_backend::emulator::delays`).
    #[arg(long, default_value = "paper", requires = "s3")]
    s3_delays: String,
    /// With --s3: the least size of a multipart upload's parts but the last (S3's 5MiB; 0 for
    /// any).
    #[arg(long, default_value = "5MiB", requires = "s3")]
    s3_min_part: String,
    #[command(flatten)]
    threads: ecdn_lab::args::ThreadsArg,
}

pub fn run(a: OriginArgs) -> Result<()> {
    if a.s3 {
        return run_s3(a);
    }
    let cfg = OriginConfig {
        cache_control: a.cache_control.clone(),
        default_size: parse_size(&a.default_size).map_err(anyhow::Error::msg)?,
        latency: ecdn_lab::args::duration("--latency", &a.latency)?,
        bandwidth: match parse_size(&a.bandwidth).map_err(anyhow::Error::msg)? {
            0 => None,
            b => Some(b),
        },
        ..OriginConfig::default()
    };
    listen_and_serve(&a, "ecdn origin", |l, stop| serve(l, cfg, stop))
}

/// Stops a server: Ctrl-C or SIGTERM.
type BoxFuture = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Binds `--listen` in a runtime of `--threads` workers and serves with `serve` until it
/// returns (on Ctrl-C or SIGTERM, whose handlers are in place before the listening line).
fn listen_and_serve<F>(
    a: &OriginArgs,
    what: &str,
    serve: impl FnOnce(tokio::net::TcpListener, BoxFuture) -> F,
) -> Result<()>
where
    F: std::future::Future<Output = std::io::Result<()>>,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(a.threads.get())
        .enable_all()
        .build()
        .context("starting the runtime")?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(a.listen)
            .await
            .with_context(|| format!("cannot listen on {}", a.listen))?;
        let stop = Box::pin(shutdown_signal());
        eprintln!("{what} listening on http://{}", listener.local_addr()?);
        serve(listener, stop).await?;
        eprintln!("ecdn origin: shut down");
        Ok(())
    })
}

/// `--s3`: the storage-cloud emulator.
fn run_s3(a: OriginArgs) -> Result<()> {
    use ecdn_backend::emulator::{serve, DelaySource, EmulatorConfig};
    let source = match a.s3_delays.as_str() {
        "paper" => Some(DelaySource::parse("model").map_err(anyhow::Error::msg)?),
        "none" => None,
        other => Some(
            DelaySource::parse(other)
                .map_err(|e| anyhow::anyhow!("--s3-delays: {e} (or paper, none)"))?,
        ),
    };
    let cfg = EmulatorConfig {
        read: source.clone(),
        write: source,
        min_part: parse_size(&a.s3_min_part).map_err(anyhow::Error::msg)?,
        bandwidth: match parse_size(&a.bandwidth).map_err(anyhow::Error::msg)? {
            0 => None,
            b => Some(b),
        },
        ..EmulatorConfig::default()
    };
    let what = format!("ecdn origin (S3 emulator, delays {})", a.s3_delays);
    listen_and_serve(&a, &what, |l, stop| serve(l, cfg, stop))
}
