//! `ecdn object put | get | stat | rm | units`: EC-Cache's object API from scripts. `get` and
//! `put` code and read the splits here, on their servers ([`ecdn_client::SplitClient`]: the
//! node given only tells where they are and grants the writes), unless `--via-node`; the
//! others, and `--via-node`, go through [`ecdn_client::ObjectClient`] to the node given.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use ecdn_client::{ClientError, Code, Delta, ObjectClient, SplitClient};

#[derive(Subcommand)]
pub enum ObjectCmd {
    /// Store FILE (or standard input) as NAME: coded into k + r splits on random nodes,
    /// readable once k are stored. Prints the record (JSON).
    Put(PutArgs),
    /// Write NAME's bytes to FILE (or standard output).
    Get(GetArgs),
    /// Print NAME's record (JSON): size, k, r, where its splits are, its SHA-256.
    Stat(NameArgs),
    /// Delete NAME everywhere. Prints the record it had.
    Rm(NameArgs),
    /// Give NAME UNITS splits (k data + UNITS − k parities; copies when k = 1), never fewer
    /// than it was written with: the parity budget re-spent by hand. Prints the new record.
    Units(UnitsArgs),
    /// EC-Cache's evaluation on loopback: N nodes with capped peer links, objects written
    /// with the memory budget spent by popularity, Zipf reads; λ and read latency. Or
    /// `--simulate`: the same placement code without a cluster.
    Bench(ecdn_lab::object_bench::BenchArgs),
}

#[derive(Args)]
pub struct NameArgs {
    /// A node's client address.
    #[arg(long, default_value = "127.0.0.1:8000")]
    node: SocketAddr,
    /// The object's name (A-Z a-z 0-9 . _ - ~ /).
    name: String,
}

#[derive(Args)]
pub struct PutArgs {
    #[command(flatten)]
    target: NameArgs,
    /// The file to store; `-` or none: standard input.
    file: Option<PathBuf>,
    /// Data splits (1: replication); with --r. Default: the node's (10 from 1 MiB on).
    #[arg(long, requires = "r")]
    k: Option<usize>,
    /// Parity splits (extra copies when k = 1).
    #[arg(long, requires = "k")]
    r: Option<usize>,
    /// Send the bytes to the node, which codes them and sends the splits on (without it,
    /// the object is coded here and each split put on its server).
    #[arg(long)]
    via_node: bool,
}

#[derive(Args)]
pub struct UnitsArgs {
    #[command(flatten)]
    target: NameArgs,
    /// Splits (replicas) the object is to have.
    units: usize,
}

#[derive(Args)]
pub struct GetArgs {
    #[command(flatten)]
    target: NameArgs,
    /// Where to write the object; none: standard output.
    #[arg(long, short = 'o')]
    output: Option<PathBuf>,
    /// Extra splits to ask beyond k (late binding: the first k to arrive are decoded), or
    /// `auto` (from this client's backlog).
    #[arg(long, default_value = "1")]
    delta: String,
    /// Ask the node for the object (it reads the splits from its peers and decodes); without
    /// it, the splits are read here from their servers.
    #[arg(long)]
    via_node: bool,
    /// Print what the read did to standard error (JSON): Δ, the splits asked, those that
    /// failed and why, and the splits each window was decoded from.
    #[arg(long, conflicts_with = "via_node")]
    report: bool,
}

pub fn run(cmd: ObjectCmd) -> Result<()> {
    let cmd = match cmd {
        // The bench builds its own runtime (on a test bed, on the readers' host).
        ObjectCmd::Bench(a) => return ecdn_lab::object_bench::main(a),
        other => other,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    rt.block_on(async move {
        match cmd {
            ObjectCmd::Put(a) => {
                let data = match &a.file {
                    Some(p) if p.as_os_str() != "-" => {
                        std::fs::read(p).with_context(|| format!("reading {}", p.display()))?
                    }
                    _ => {
                        let mut v = Vec::new();
                        std::io::stdin().read_to_end(&mut v)?;
                        v
                    }
                };
                let code = a.k.zip(a.r).map(|(k, r)| Code { k, r });
                let meta = match a.via_node {
                    true => {
                        ObjectClient::new(a.target.node)
                            .put(&a.target.name, data.into(), code)
                            .await?
                    }
                    false => {
                        SplitClient::new(vec![a.target.node])
                            .put(&a.target.name, data.into(), code)
                            .await?
                    }
                };
                outln!("{}", serde_json::to_string_pretty(&meta)?)?;
            }
            ObjectCmd::Get(a) => get(a).await?,
            ObjectCmd::Stat(a) => {
                // The record, with which splits their servers hold now.
                let stat = ObjectClient::new(a.node).stat(&a.name).await?;
                let mut v = serde_json::to_value(&stat.record)?;
                if let Some(o) = v.as_object_mut() {
                    o.insert("held".into(), serde_json::json!(stat.held));
                    o.insert("readable".into(), serde_json::json!(stat.readable()));
                }
                outln!("{}", serde_json::to_string_pretty(&v)?)?;
            }
            ObjectCmd::Rm(a) => {
                let meta = ObjectClient::new(a.node).delete(&a.name).await?;
                outln!("{}", serde_json::to_string_pretty(&meta)?)?;
            }
            ObjectCmd::Units(a) => {
                let c = ObjectClient::new(a.target.node);
                let meta = c.set_units(&a.target.name, a.units).await?;
                outln!("{}", serde_json::to_string_pretty(&meta)?)?;
            }
            ObjectCmd::Bench(_) => anyhow::bail!("the bench runs before this runtime starts"),
        }
        Ok(())
    })
}

/// `ecdn object get`: the object streamed to its output window by window as the splits come
/// in (a file left half-written by a failed read is removed); through the node with
/// `--via-node`, or when its splits cannot be read from here (a record without digests, fewer
/// than k splits reachable), said on standard error.
async fn get(a: GetArgs) -> Result<()> {
    let name = &a.target.name;
    let via_node = || async {
        let bytes = ObjectClient::new(a.target.node).get(name).await?;
        write_all(&a.output, &[bytes])
    };
    if a.via_node {
        return via_node().await;
    }
    let delta = match a.delta.as_str() {
        "auto" => Delta::Auto,
        d => Delta::Fixed(
            d.parse()
                .map_err(|_| anyhow::anyhow!("--delta {d:?}: need a number or auto"))?,
        ),
    };
    let client = SplitClient::new(vec![a.target.node]).with_delta(delta);
    let mut read = match client.read(name).await {
        Ok(r) => r,
        Err(e @ (ClientError::NoDigests(_) | ClientError::TooFewSplits(_))) => {
            eprintln!("ecdn object get: {e}; reading through the node");
            return via_node().await;
        }
        Err(e) => return Err(e.into()),
    };
    let mut out: Box<dyn Write> = match &a.output {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        )),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut failed = None;
    while let Some(b) = read.next().await {
        match b {
            Ok(b) => out.write_all(&b)?,
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    out.flush()?;
    drop(out);
    if a.report {
        let r = read.report();
        let failed: Vec<serde_json::Value> = r
            .failed
            .iter()
            .map(|(i, why)| serde_json::json!({"split": i, "why": why}))
            .collect();
        let v = serde_json::json!({"delta": r.delta, "asked": r.asked, "failed": failed, "used": r.used});
        eprintln!("{v}");
    }
    if let Some(e) = failed {
        if let Some(p) = &a.output {
            let _ = std::fs::remove_file(p);
        }
        return Err(e.into());
    }
    Ok(())
}

/// `parts` to `output` (a file, or standard output).
fn write_all(output: &Option<PathBuf>, parts: &[bytes::Bytes]) -> Result<()> {
    match output {
        Some(p) => {
            let mut f =
                std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?;
            for b in parts {
                f.write_all(b)?;
            }
        }
        None => {
            let mut o = std::io::stdout().lock();
            for b in parts {
                o.write_all(b)?;
            }
            o.flush()?;
        }
    }
    Ok(())
}
