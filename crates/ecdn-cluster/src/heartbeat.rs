//! The heartbeat protocol between a node ([`crate::control`]) and the embedded coordinator
//! ([`crate::coordinator`]): the paths, what a heartbeat carries and what answers it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A node's signed `POST` of its [`Heartbeat`].
pub const HEARTBEAT_PATH: &str = "/coord/heartbeat";
/// A node's long poll of the bucket map.
pub const MAP_PATH: &str = "/coord/map";

/// How long a map request waits for a newer epoch before it answers `204`.
pub const LONG_POLL: Duration = Duration::from_secs(10);

/// Most object read counts one heartbeat carries (the rest wait for the next).
pub const MAX_OBJECT_READS: usize = 1024;

/// A node's heartbeat: it is alive, has seen map `epoch`, and wrote these bytes since its
/// previous heartbeat that was answered.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Heartbeat {
    pub node: usize,
    /// The epoch of the map the node uses.
    pub epoch: u64,
    /// Bytes written to the node's data buckets and replicated (uncoded) objects.
    #[serde(default)]
    pub data_bytes: u64,
    /// `[bucket, parity_index, bytes]` written to parity buckets.
    #[serde(default)]
    pub parity: Vec<(usize, usize, u64)>,
    /// `[object name, reads]` of EC-Cache objects (`object_budget.rs`), at most
    /// [`MAX_OBJECT_READS`].
    #[serde(default)]
    pub object_reads: Vec<(String, u64)>,
    /// How the node currently sees its peers ([`crate::health`]): the coordinator's evidence
    /// for its verdicts beyond silence.
    #[serde(default)]
    pub peers: Vec<crate::health::PeerView>,
}

/// The coordinator's answer to a heartbeat.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeartbeatReply {
    /// The epoch of the current map.
    pub epoch: u64,
}
