//! Cluster mode (C2DN §4–§5): the node as one server of a C2DN cluster, and of EC-Cache's
//! object cache on the same pieces.
//!
//! With [`super::NodeConfig::cluster`] set, the node joins the cluster of its cluster file
//! (`ecdn_cluster::config`): it sends heartbeats with its write loads to the coordinator and
//! follows the bucket map the coordinator publishes (`ecdn_cluster::control`), answers its
//! peers on a second listener (`peer_server.rs`), and a `GET` / `HEAD` goes this way:
//!
//! 1. **relay** (`c2dn/relay.rs`): a request for a bucket another node serves is passed,
//!    signed, to that node's peer listener and its answer streamed back. When that node
//!    refuses, resets or times out, the next candidate of the bucket is tried, and at the end
//!    this node serves it itself. The serving node keeps the bucket's decoded copies in its HOC
//!    and collapses concurrent misses: one origin fetch per object per cluster.
//! 2. at the serving node, the **HOC**, then the **pieces** (`c2dn/read.rs`): a replica of a
//!    small object, or the K data chunks of a coded one, here or on peers (a `has` question to
//!    the bucket's servers and the slots' former servers finds them, `pieces/holders.rs`);
//!    coded objects stream stripe by stripe (`pieces/coded/`) with delayed parity fetch and
//!    decode. The HOC holds a coded object it admits as its decoded stripes
//!    ([`super::hoc::Striped`]), each kept as a read passes it: a range reads and keeps only
//!    the stripes it overlaps, and an answer whose stripes are all held touches no peer.
//! 3. a **miss** is filled from the origin as without a cluster (`fill.rs`), and the object is
//!    then placed (`c2dn/write.rs`): two replicas, or K + P chunks encoded stripe-major, on the
//!    bucket's servers; pieces a hit found missing are written back the same way. Too few
//!    chunks for a hit is a **partial hit** (`c2dn/partial.rs`).
//!
//! Every node keeps its pieces under a piece policy (`pieces/store.rs`): the simulator's
//! per-server cache (FIFO), fed the same ids and sizes, so the node holds what the simulator's
//! server holds. With `repair_rate` set, a node also rebuilds in the background the pieces the
//! objects it serves have lost (`c2dn/repair.rs`).
//!
//! # Layers
//!
//! Each folder imports only from the ones below it, never from a sibling:
//!
//! * `peer_server.rs`: the peer listener, serving both services' peer requests.
//! * `c2dn/` — C2DN's serving path: relay, read, partial hits, fill placement, repair, the
//!   cluster's response headers. `objects/` — EC-Cache's object API (`/_objects/`): `PUT` /
//!   `GET` / `DELETE`, late binding, the parity budget, records and `stat`.
//! * `pieces/` — what both stand on: the node's [`Cluster`](pieces::member::Cluster) (its
//!   membership, peers and counters), the piece store, who holds which piece, the coded read
//!   (with EC-Cache's late binding), chunk streams, local piece writes, the peer link model,
//!   purges, the counters and their metrics.
//! * `backend.rs` — the glue to the store under the object cache (the backend tier); it
//!   imports nothing else of this folder.
//!
//! What the cluster paths do is counted in [`ClusterStats`](pieces::stats::ClusterStats)
//! (`pieces/metrics.rs` writes the `ecdn_cluster_*` series of `/_ecdn/metrics`, listed in
//! `admin.rs`; `/_ecdn/stats`'s `cluster` object comes from the same counters).
//!
//! Response headers of a cluster node (for load drivers and operators; `c2dn/headers.rs`):
//! `X-Ecdn-Object` (`coded` / `replicated`), `X-Ecdn-Origin-Bytes` (what this request's fetch
//! took from the origin), `X-Ecdn-Partial: 1` (a partial hit: some chunks were cached, too
//! few), `X-Ecdn-Decoded: 1` (a Reed-Solomon decode was needed), `X-Ecdn-Served-By` (the
//! serving node's id).

pub(in crate::node) mod backend;
pub(in crate::node) mod c2dn;
pub(in crate::node) mod objects;
pub(in crate::node) mod peer_server;
pub(in crate::node) mod pieces;
