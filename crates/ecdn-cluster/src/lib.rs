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
//!   coordinator) carries an HMAC-SHA256 over its method, path, time and body digest, made with
//!   the cluster key; a missing, wrong or stale signature is refused.

pub mod auth;
pub mod config;
pub mod coordinator;
pub mod map;
pub mod peer;

pub use auth::{AuthError, ClusterKey, Signature};
pub use config::{ClusterConfig, ConfigError, NodeEntry};
pub use coordinator::{Coordinator, CoordinatorOptions, RunningCoordinator};
pub use map::BucketMap;
pub use peer::{PeerClient, PeerError};
