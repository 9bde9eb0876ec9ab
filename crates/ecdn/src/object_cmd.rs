//! `ecdn object put | get | stat | rm | units`: EC-Cache's object API from scripts, through
//! [`ecdn_client::ObjectClient`] to any node of a cluster.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use ecdn_client::{Code, ObjectClient};

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
                let c = ObjectClient::new(a.target.node);
                let meta = c.put(&a.target.name, data.into(), code).await?;
                outln!("{}", serde_json::to_string_pretty(&meta)?)?;
            }
            ObjectCmd::Get(a) => {
                let c = ObjectClient::new(a.target.node);
                let bytes = c.get(&a.target.name).await?;
                match &a.output {
                    Some(p) => std::fs::write(p, &bytes)
                        .with_context(|| format!("writing {}", p.display()))?,
                    None => std::io::stdout().write_all(&bytes)?,
                }
            }
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
