//! The live C2DN cluster's shared parts (C2DN, NSDI '22, §4–§5, App. 10.3), used by the nodes,
//! the coordinator and the demo alike:
//!
//! * [`config`] — the cluster file (TOML): the nodes (id, client address, peer address,
//!   weight), the code (K, P), the coding threshold, the bucket count, the scheme, the sub-chunk
//!   size, the cluster key and the timing of heartbeats and parity fetches.
//! * [`map`] — the [`BucketMap`]: what the coordinator publishes with an epoch number, built
//!   from an [`ecdn_placement::Placement`]: for every bucket its data servers, parity servers,
//!   ring walk and the servers its slots moved away from, and which nodes are available. A node
//!   answers "which servers hold which piece of this object" from it alone, with the same
//!   [`ecdn_placement::pieces`] code the simulator runs.
//! * [`auth`] — the peer protocol's authentication: every request between nodes (and to the
//!   coordinator) carries a keyed BLAKE3 MAC (signature version 3) over its method, path, time,
//!   body digest, destination, map epoch and nonce, made with the cluster key; a missing, wrong or stale signature, or one
//!   of another signature version, is refused. [`replay`] — the receiver's [`replay::Gate`]:
//!   a request signed for another process, or whose nonce was already taken, is refused too.
//! * [`mtls`] — mutual TLS: an admin listener's, and the peer protocol's (the cluster file's
//!   `[peer_tls]`), which [`peer_connector`] speaks for the [`PeerClient`].
//! * [`bearer`] — the admin listeners' bearer tokens: compared in constant time, and refused
//!   at start when empty, short or unsendable.
//! * [`piece`] — the metadata stored and sent with every piece: replica or chunk, the code,
//!   the object size and a checksum of every sub-chunk.
//! * [`wire`] — the peer requests' paths (which piece of which object) and the frame a piece
//!   travels in.
//! * [`relayed`] — a relayed answer's head tag and tagged body segments, so a relaying node
//!   passes on only what the serving node sent.
//! * [`peer`] — the signed, pooled HTTP/1.1 [`PeerClient`] (its errors say refused, reset or
//!   timed out, so a caller fails over at once) and the receiving side's checks.
//! * [`coordinator`] — `ecdn coordinator`, the embedded control plane: heartbeats with write
//!   loads, availability, App. 10.3's failure and return procedures and parity rebalance
//!   through the placement, and the epoch-numbered map, long-polled by the nodes.
//! * [`control`] — a node's side of it: the [`MapHandle`] (the newest valid map), the
//!   [`WriteLoads`] it reports, and [`spawn_control`] (heartbeats and the map watcher).
//! * [`etcd`] — the control plane on etcd (the cluster file's `etcd`): the keys, a node's
//!   registration under a lease, its load reports and map watch ([`etcd::spawn_etcd_control`]);
//!   the coordinators' leader election is `coordinator::etcd`; [`etcd_local`] starts etcd
//!   members on loopback for the demo, tests and benchmarks.
//! * [`health`] — unavailable as C2DN means it: what nodes see of their peers (their requests
//!   and probes), reported with their heartbeats, and the coordinator's verdicts (cut off,
//!   unreachable from clients, slow) with hysteresis and a cap.
//! * [`heartbeat`] — the heartbeat protocol between a node's control and the coordinator.
//! * [`plane`] — the current map, asked once from whichever control plane the file names.
//! * [`objects`] — where EC-Cache's object records live: the embedded coordinator or etcd.

pub mod auth;
pub mod bearer;
pub mod breaker;
pub mod config;
pub mod control;
pub mod coordinator;
pub mod etcd;
pub mod etcd_keys;
pub mod etcd_local;
pub mod etcd_map;
pub mod health;
pub mod heartbeat;
pub mod map;
pub mod mtls;
pub mod objects;
pub mod peer;
pub mod peer_connector;
pub mod piece;
pub mod plane;
pub mod relayed;
pub mod replay;
pub mod s3_face;
pub mod wire;

pub use auth::{AuthError, ClusterKey, Signature};
pub use config::{ClusterConfig, ConfigError, NodeEntry};
pub use control::{spawn_control, Control, MapHandle, WriteLoads};
pub use coordinator::{Coordinator, CoordinatorOptions, RunningCoordinator};
pub use map::BucketMap;
pub use peer::{PeerClient, PeerError};
pub use piece::{Coding, PieceMeta};
