//! `ecdn-lab`: the instruments that run ecdn's systems live and measure them, and the
//! command-line plumbing they share with the `ecdn` binary, which parses the arguments and
//! calls in here.
//!
//! * [`cluster_demo`] — `ecdn cluster demo`: an origin, the coordinator (or etcd) and N node
//!   processes, a trace replayed through them with nodes killed on schedule, beside the
//!   simulator; on loopback or on a test bed of network namespaces ([`cluster_demo::bed`]).
//! * [`coral_demo`] — `ecdn coral demo`: Coral's DSHT and cooperating proxies, in-process or as
//!   processes on a test bed.
//! * [`object_bench`] — `ecdn object bench`: EC-Cache against selective replication on a live
//!   cluster.
//! * [`backend_bench`] — `ecdn backend bench`: the backend tier (TOFEC) against an emulated or
//!   real S3.
//! * [`plot`] — the figures of all of them and of `ecdn sim`.
//! * [`certs`] — a run's CA and peer certificate for `--peer-tls` (mutual TLS between peers).
//! * The plumbing: [`args`] (argument parsers and progress bars), [`out`](mod@out) (output that ends
//!   quietly on a closed pipe: [`outln!`], [`out!`]) and [`signals`] (Ctrl-C and SIGTERM).
//!
//! The demos start the processes they measure from the running executable
//! (`std::env::current_exe()`): they are meant to be called from `ecdn`.

#[macro_use]
pub mod out;
pub mod args;
pub mod backend_bench;
pub mod certs;
pub mod cluster_demo;
pub mod coral_demo;
pub mod object_bench;
pub mod plot;
pub mod signals;
