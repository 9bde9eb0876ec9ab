//! Coral's distributed sloppy hash table (DSHT; Freedman, Freudenthal & Mazières, NSDI 2004,
//! §2.3 and §4): how ecdn sites find a nearby site holding an object, and nearby proxies for
//! a client.
//!
//! A DSHT stores soft-state key/value pairs, many values per key, and serves a `get` from any
//! node that holds some, not only from the node closest to the key. Each node belongs to one
//! DSHT per *level*, the clusters, whose RTT diameters are ∞, 60 ms and 20 ms; lookups start
//! in the fastest cluster and continue in slower ones from where they stopped.
//!
//! * [`id`] — 160-bit ids, XOR distance, `splice` (§4.1).
//! * [`wire`] — the RPC packets over UDP: compact, versioned, bounded; malformed ones are
//!   refused with an error, never a panic.
//! * [`routing`] — a level's Kademlia routing table.
//! * [`sloppy`] — a level's sloppy store: `l` values a key, *full* and *loaded* (§4.2).
//! * [`lookup`] — the walk that fixes `b` bits per hop, `get`, the two-phase `put`, and their
//!   hierarchical forms (§4.1–§4.3).
//! * [`cluster`] — which cluster to belong to (§4.4): acceptability, the δ preference,
//!   singletons.
//! * [`node`] — a running node ([`Dsht`]): the socket, the RPCs, per-peer rate limits, and
//!   injected latencies for test beds; [`manage`] — joining and the periodic upkeep.
//!
//! Layering: depends only on `ecdn-trace` (its random numbers); the node and the `ecdn`
//! binary build cooperating sites on it.

pub mod cluster;
pub mod id;
mod limit;
pub mod lookup;
pub mod manage;
pub mod node;
pub mod routing;
pub mod sloppy;
pub mod wire;

pub use id::Id;
pub use lookup::{GetResult, PutResult};
pub use node::{Config, Dsht, DshtError, Latency, Stats};
pub use wire::{Contact, Value};
