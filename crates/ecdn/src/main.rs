//! `ecdn`: the command-line entry point of the erasure-coded content-delivery cache.
//! `ecdn sim` (trace-driven simulation of caches and of a C2DN cluster), `ecdn trace` (trace
//! tools), `ecdn node` (the caching node), `ecdn origin` (a synthetic origin server), the
//! cluster's commands (`coordinator`, `cluster`, `object`), the backend tier (`backend`),
//! Coral's cooperating sites (`coral demo`), and the test bed of network namespaces the demos
//! can run on (`testbed`). Each command parses its arguments and calls a library; the demos and
//! benchmarks are in `ecdn_lab`.

// `outln!` and `out!`: output that ends quietly on a closed pipe.
#[macro_use]
extern crate ecdn_lab;

use clap::{Parser, Subcommand};
use ecdn_lab::out;

mod backend_cmd;
mod cluster_cmd;
mod cluster_ops;
mod coordinator_cmd;
mod demo_cmd;
mod footprint_cmd;
mod node_backend;
mod node_cmd;
mod object_cmd;
mod origin_cmd;
mod sim_cmd;
mod testbed_cmd;
mod trace_cmd;

#[derive(Parser)]
#[command(name = "ecdn", version, about = "ecdn: an erasure-coded content-delivery cache", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Trace-driven simulation: cache policies, AdaptSize's model, the C2DN cluster.
    #[command(subcommand)]
    Sim(sim_cmd::SimCmd),
    /// Trace tools: statistics, conversion, synthetic workload generation.
    #[command(subcommand)]
    Trace(trace_cmd::TraceCmd),
    /// Demo: an origin and a node on loopback, a generated workload through real HTTP, and
    /// the node's hit ratios per tier, bytes and latency percentiles.
    Demo(demo_cmd::DemoArgs),
    /// The HTTP caching node: a reverse proxy with a DRAM hot-object cache and a disk cache.
    Node(Box<node_cmd::NodeArgs>),
    /// A synthetic origin server: objects of any size with verifiable content.
    Origin(origin_cmd::OriginArgs),
    /// The cluster's coordinator: heartbeats, availability, the bucket map.
    Coordinator(coordinator_cmd::CoordinatorArgs),
    /// The live cluster: `ecdn cluster demo` runs an origin, the coordinator and N nodes on
    /// loopback, replays a trace through them, kills nodes, and compares with the simulator.
    #[command(subcommand)]
    Cluster(cluster_ops::ClusterCmd),
    /// EC-Cache's object API: put, get, stat and rm objects on a cluster node.
    #[command(subcommand)]
    Object(object_cmd::ObjectCmd),
    /// The backend tier (TOFEC): coded reads and writes of an S3-compatible store, an HTTP
    /// origin in front of it, and its benchmark.
    #[command(subcommand)]
    Backend(backend_cmd::BackendCmd),
    /// Cooperating sites (Coral): `ecdn coral demo` runs Coral's DSHT and cooperating proxies
    /// on loopback with injected RTTs.
    #[command(subcommand)]
    Coral(ecdn_lab::coral_demo::CoralCmd),
    /// A test bed of real hosts on this machine: network namespaces on a bridge, links shaped
    /// by tc (rate, delay, loss), fault verbs (cut, partition, slow); needs root.
    #[command(subcommand)]
    Testbed(testbed_cmd::TestbedCmd),
}

fn main() {
    let cli = Cli::parse();
    out::quiet_print_panics();
    let result =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || match cli.command {
            Command::Sim(cmd) => sim_cmd::run(cmd),
            Command::Trace(cmd) => trace_cmd::run(cmd),
            Command::Node(a) => node_cmd::run(*a),
            Command::Demo(a) => demo_cmd::run(a),
            Command::Origin(a) => origin_cmd::run(a),
            Command::Coordinator(a) => coordinator_cmd::run(a),
            Command::Cluster(cmd) => cluster_ops::run(cmd),
            Command::Object(cmd) => object_cmd::run(cmd),
            Command::Backend(cmd) => backend_cmd::run(cmd),
            Command::Coral(cmd) => ecdn_lab::coral_demo::run(cmd),
            Command::Testbed(cmd) => testbed_cmd::run(cmd),
        }));
    match result {
        Ok(Ok(())) => {}
        // The reader of our output went away (`ecdn ... | head`): nothing to say, and nobody
        // to say it to.
        Ok(Err(e)) if out::is_broken_pipe(&e) => std::process::exit(out::BROKEN_PIPE_STATUS),
        Ok(Err(e)) => {
            eprintln!("error: {e:#}");
            std::process::exit(1);
        }
        Err(_) if out::printing_failed() => std::process::exit(out::BROKEN_PIPE_STATUS),
        Err(panic) => std::panic::resume_unwind(panic),
    }
}
