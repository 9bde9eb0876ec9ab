//! The status page's history: one [`Sample`] of the node's counters a second, for the last
//! [`HISTORY`] seconds.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Instant;

use crate::node::outcome::Outcome;

/// Samples kept: five minutes at one a second.
pub const HISTORY: usize = 300;

/// The node's counters at one moment: the page draws rates from consecutive samples.
#[derive(Clone)]
pub struct Sample {
    /// UNIX time, milliseconds.
    pub t_ms: u64,
    pub requests: u64,
    /// Responses by tier, in the order of `tier_names`.
    pub tiers: [u64; Outcome::TIERS.len()],
    pub bytes_served: u64,
    /// AdaptSize's c (`None` for a policy without one, or while it admits everything).
    pub c: Option<f64>,
    pub hoc_used: u64,
}

impl Sample {
    pub(in crate::node) fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "t_ms": self.t_ms,
            "requests": self.requests,
            "tiers": self.tiers,
            "bytes_served": self.bytes_served,
            "c": self.c,
            "hoc_used": self.hoc_used,
        })
    }
}

/// The samples of the last [`HISTORY`] seconds, and when the node started.
pub(in crate::node) struct History {
    pub(in crate::node) started: Instant,
    pub(in crate::node) samples: Mutex<VecDeque<Sample>>,
}

impl Default for History {
    fn default() -> History {
        History {
            started: Instant::now(),
            samples: Mutex::new(VecDeque::with_capacity(HISTORY)),
        }
    }
}
