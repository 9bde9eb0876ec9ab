//! `ecdn cluster demo`'s arguments ([`DemoArgs`]), as clap parses them; `plan.rs` checks them.

use std::path::PathBuf;

use clap::Args;

use super::{bed, control, routing};

#[derive(Args, Clone)]
#[command(after_help = "Examples:\n  \
    ecdn cluster demo                                  # C2DN's regime, node 2 killed at 0.5\n  \
    ecdn cluster demo --no-kill                        # the same without a failure\n  \
    ecdn cluster demo --objects 2000 --sizes lognormal:48KiB:1.2 --disk-size 8MiB  # small caches\n  \
    ecdn cluster demo --nodes 6 --kill 2@0.5 --json --plot demo.png\n  \
    ecdn cluster demo --scheme rep2 --nodes 6 --kill 2@0.5\n  \
    ecdn cluster demo --scheme c2dn-n5k3 --nodes 6 --kill 1@0.4 --kill 4@0.6\n  \
    ecdn cluster demo --nodes 6 --kill 2@0.3 --restart 2@0.6      # a node returns\n  \
    ecdn cluster demo --nodes 6 --kill 2@0.3 --restart-empty 2@0.6  # with a new disk\n  \
    ecdn cluster demo --trace t.oracleGeneral.bin --max-requests 50000\n  \
    ecdn cluster demo --sizes fixed:1MiB --objects 200 --json     # Fig. 8, coded\n  \
    ecdn cluster demo --sizes fixed:1MiB --objects 200 --threshold 2MiB --json  # replicated\n\n\
    The load driver spreads requests round-robin over the live nodes (--routing bucket: to \
    each request's bucket's serving node, as C2DN's own load balancer does); a request whose \
    connection fails (refused or reset before the answer, or broken mid-body) is retried \
    once on the next live node. --kill \
    NODE@FRACTION SIGKILLs that node once FRACTION of the requests were issued; it leaves \
    the rotation at that moment. --restart NODE@FRACTION starts a killed node again (same \
    id, ports and disk file) before that request, and it rejoins the rotation once the \
    coordinator's map has it available; --restart-empty wipes its disk file first. Without \
    --kill, --restart, --restart-empty or --no-kill, node 2 is killed at 0.5 (--kill 2@0.5) when \
    the nodes left can still run the scheme. The default workload (500 objects, sizes \
    lognormal:256KiB:1.0, 64 MiB of pieces per node) is the regime of C2DN's §6.2-6.3: the \
    surviving nodes' caches hold c2dn's working set but not rep2's; the flags of the third \
    example (the defaults before issue 37) give caches that turn over within a window. Every \
    body is checked byte by byte. The simulator runs the same trace with the same scheme, K, \
    P, threshold, buckets and seed, capacity nodes × disk size, equal weights, FIFO, without \
    failures and (with --kill) with the same kills and returns; after the run, a table sets \
    the live scheme's miss ratio, byte miss ratio, write imbalance and largest relative miss \
    increase after a kill beside the simulator's for the schemes no-rep, rep2, c2dn-norebal \
    and c2dn on the same trace, capacity and kills (JSON: `compare`). With --json the last \
    line of stdout is one JSON object.")]
pub struct DemoArgs {
    /// Nodes (processes) in the cluster.
    #[arg(long, default_value_t = 6)]
    pub(super) nodes: usize,
    /// no-rep, rep2, c2dn-norebal, c2dn; a coded scheme may name its code (c2dn-n5k3).
    #[arg(long, default_value = "c2dn")]
    pub(super) scheme: String,
    /// Data chunks of coded schemes (unless the scheme names its code).
    #[arg(long, default_value_t = 3)]
    pub(super) k: usize,
    /// Parity chunks of coded schemes (unless the scheme names its code).
    #[arg(long, default_value_t = 1)]
    pub(super) p: usize,
    /// Requests of the generated trace.
    #[arg(long, default_value_t = 10_000, conflicts_with = "trace")]
    pub(super) requests: u64,
    /// Distinct objects of the generated trace (Zipf popularity).
    #[arg(long, default_value_t = 500)]
    pub(super) objects: u64,
    /// Zipf exponent of the generated trace.
    #[arg(long, default_value_t = 0.9)]
    pub(super) alpha: f64,
    /// Object sizes of the generated trace: fixed:SIZE, lognormal:MEDIAN:SIGMA,
    /// pareto:ALPHA:MIN, web-video. The default makes about three quarters of the objects
    /// larger than the coding threshold, and most bytes coded.
    #[arg(long, default_value = "lognormal:256KiB:1.0")]
    pub(super) sizes: String,
    /// Replay this trace instead (oracleGeneral, .zst, text or CSV by its name).
    #[arg(long, value_name = "FILE")]
    pub(super) trace: Option<PathBuf>,
    /// With --trace: replay at most R requests.
    #[arg(long, value_name = "R", requires = "trace")]
    pub(super) max_requests: Option<u64>,
    /// Kill NODE (SIGKILL) when FRACTION of the requests were issued; repeatable. Without it
    /// (and without --restart, --restart-empty and --no-kill) node 2 is killed at 0.5, if the
    /// nodes left can run the scheme.
    #[arg(long, value_name = "NODE@FRACTION")]
    pub(super) kill: Vec<String>,
    /// Kill no node: turns the default kill (node 2 at 0.5) off.
    #[arg(long, conflicts_with_all = ["kill", "restart", "restart_empty"])]
    pub(super) no_kill: bool,
    /// Start NODE, killed earlier by --kill, again before FRACTION of the requests are issued:
    /// same id, ports and disk file, so it returns with what it held (C2DN App. 10.3; the
    /// simulator keeps a returning server's cache). It rejoins the rotation once the
    /// coordinator's map has it available. At most once per kill; repeatable.
    #[arg(long, value_name = "NODE@FRACTION")]
    pub(super) restart: Vec<String>,
    /// As --restart, with the node's disk file wiped first: a replaced disk, returning empty
    /// (the simulator empties that server's cache on its return).
    #[arg(long, value_name = "NODE@FRACTION")]
    pub(super) restart_empty: Vec<String>,
    /// C2DN's optional periodic parity rebalance, before every N-th request: the driver waits
    /// for the requests in flight, the coordinator rebalances from the loads so far and every
    /// node takes the new map; the simulator rebalances before the same requests. Off by
    /// default: parity is rebalanced only when a node fails or returns (§4.2, §5).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(super) rebalance_every: u64,
    /// Background repair (c2dn, beyond the paper): bytes each node may write per request of
    /// the trace (its trace time) to rebuild the pieces the objects it serves lost; 0, the
    /// default, turns it off. The driver stops before every --repair-every-th request and has
    /// every live node run a round (`POST /_ecdn/repair`); the simulator repairs before the
    /// same requests.
    #[arg(long, value_name = "BYTES", default_value = "0")]
    pub(super) repair_rate: String,
    /// Requests between repair rounds.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub(super) repair_every: u64,
    /// The peer protocol over mutual TLS: the demo makes a CA and a certificate naming every
    /// address its processes listen on, and the cluster file's `[peer_tls]` names them.
    #[arg(long)]
    pub(super) peer_tls: bool,
    /// Concurrent requests of the load driver.
    #[arg(long, default_value_t = 16)]
    pub(super) concurrency: usize,
    /// Print one JSON object as the last line of stdout.
    #[arg(long)]
    pub(super) json: bool,
    /// Draw per-window miss ratios (live and simulated, kills marked), bytes written per node
    /// and the latency CDFs of coded and replicated hits to FILE (.png or .svg).
    #[arg(long, value_name = "FILE")]
    pub(super) plot: Option<PathBuf>,
    /// Write every request's outcome to FILE as CSV, in trace order: the node that answered,
    /// whether it was a hit (and from the hot-object cache), of a coded object, a miss, its
    /// time to first byte and to the last, ms.
    #[arg(long, value_name = "FILE")]
    pub(super) records: Option<PathBuf>,
    /// Requests per window of the table (default: a tenth of the requests).
    #[arg(long, value_name = "REQUESTS")]
    pub(super) window: Option<u64>,
    /// Each node's DRAM hot-object cache.
    #[arg(long, default_value = "1MiB")]
    pub(super) hoc_size: String,
    /// Each node's cache capacity for pieces (the simulator's per-server capacity).
    #[arg(long, default_value = "64MiB")]
    pub(super) disk_size: String,
    /// Objects larger than this are coded (C2DN schemes).
    #[arg(long, default_value = "128KiB")]
    pub(super) threshold: String,
    /// Objects larger than this are cached as range slices of this size, each a cache object
    /// of its own (the cluster file's `slice_size`; the simulator slices the same way); 0
    /// slices nothing.
    #[arg(long, default_value = "4MiB")]
    pub(super) slice_size: String,
    /// Whole-object eviction (coded schemes): a piece a node's policy evicts takes its
    /// object's other pieces off every node (the cluster file's `evict_together`; the
    /// simulator's `--evict-together`, the same rule): true or false (on by default, as the
    /// cluster file's).
    #[arg(long, value_name = "BOOL", default_value_t = ecdn_placement::pieces::EVICT_TOGETHER, action = clap::ArgAction::Set)]
    pub(super) evict_together: bool,
    /// Resync (`c2dn`): a read that writes back a lacking piece also rewrites the pieces found
    /// when the oldest has more than this fraction of its FIFO written after it (the cluster
    /// file's `resync`; the simulator's `--resync`, the same rule), or off.
    #[arg(long, value_name = "FRACTION|off", default_value = "0.5", value_parser = resync)]
    pub(super) resync: Resync,
    /// Reinsertion: a hit that finds every piece rewrites them all when the oldest has more
    /// than this fraction of its FIFO written after it (the cluster file's `reinsert`; the
    /// simulator's `--reinsert`, the same rule), or off; 0.9 by default, as the cluster file's.
    #[arg(long, value_name = "FRACTION|off", default_value = "0.9", value_parser = resync)]
    pub(super) reinsert: Resync,
    /// Buckets objects are hashed to.
    #[arg(long, default_value_t = 100)]
    pub(super) buckets: usize,
    /// Sub-chunk size of coded objects.
    #[arg(long, default_value = "32KiB")]
    pub(super) sub_chunk: String,
    /// Seed of the generated trace and of the placement.
    #[arg(long, default_value_t = 1)]
    pub(super) seed: u64,
    /// The origin's delay before its response headers.
    #[arg(long, default_value = "0s")]
    pub(super) origin_latency: String,
    /// How long the cluster may take to come up.
    #[arg(long, default_value = "30s")]
    pub(super) ready_timeout: String,
    /// Limit on one attempt of one request, connect to last byte.
    #[arg(long, default_value = "30s")]
    pub(super) request_timeout: String,
    /// Limit on a silence within one attempt (no response head or no body byte for this
    /// long): the load driver gives the attempt up and retries on another node, as a load
    /// balancer does with a node it can no longer reach. Keep it above --origin-latency.
    #[arg(long, default_value = "10s")]
    pub(super) idle_timeout: String,
    /// Also report the download times of hits through modeled client access links of these
    /// rates (bits per second, comma-separated, e.g. `1Gbit,10Gbit`): each answer's frames, as
    /// they arrived, pass a FIFO link of that rate (C2DN's Fig. 8 clients reach the cluster over
    /// a WAN). The measured times are reported as well.
    #[arg(long, value_name = "RATES")]
    pub(super) client_link: Option<String>,
    /// Where the load balancer sends a request: `round-robin` over the live nodes (a node
    /// relays a request for a bucket it does not serve to the node that does, as an anycast
    /// CDN's servers do), or `bucket`: to the bucket's serving node in the coordinator's map,
    /// fetched every 250 ms, as C2DN's prototype's DNS-based local load balancer does (§2).
    #[arg(long, value_enum, default_value_t = routing::Routing::RoundRobin)]
    pub(super) routing: routing::Routing,
    /// Direct reads (the cluster file's `direct_reads`): a node reads a fresh hit of an object
    /// it holds a piece of (or learned is coded) itself rather than relaying the request to
    /// the bucket's serving node: true or false (on by default, as the cluster file's; off
    /// with --repair-rate).
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub(super) direct_reads: bool,
    /// C2DN's delayed parity fetch (§5): parity is asked for when the stripe waited for still
    /// lacks a data sub-chunk F × the first peer sub-chunk's latency later (the cluster file's
    /// `parity_delay`; default 0.2, the paper's 20%).
    #[arg(long, value_name = "F")]
    pub(super) parity_delay: Option<f64>,
    /// Keep the run's directory (cluster file, logs, disk files) and print where it is.
    #[arg(long)]
    pub(super) keep_dir: bool,
    /// The cluster file's `[health]` (when a node is unavailable beyond missed heartbeats,
    /// `ecdn_cluster::health`): `off` (heartbeats alone decide), or settings such as
    /// `slow_ms=20,return_after_ms=1000` [default: the cluster file's defaults].
    #[arg(long, value_name = "off|KEY=VALUE,...")]
    pub(super) health: Option<String>,
    #[command(flatten)]
    pub(super) control: control::ControlArgs,
    #[command(flatten)]
    pub(super) testbed: bed::TestbedArgs,
}

/// `--resync`, `--reinsert`: an age (a fraction of the FIFO), or none (`off`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Resync(pub(super) Option<f64>);

fn resync(s: &str) -> Result<Resync, String> {
    ecdn_sim::cluster::parse_fifo_age(s).map(Resync)
}
