//! The top-level fields of `ecdn cluster demo --json` that the command-line contract
//! names; shared by the demo's unit tests and its end-to-end test
//! (`crates/ecdn/tests/cluster_demo.rs`).

pub const CONTRACT_FIELDS: [&str; 20] = [
    "scheme",
    "nodes",
    "requests",
    "failed_requests",
    "wrong_bytes",
    "miss_ratio",
    "byte_miss_ratio",
    "write_imbalance",
    "bytes_written",
    "windows",
    "max_relative_miss_increase",
    "decode_fraction",
    "partial_hits",
    "intra_cluster_bytes",
    "ttfb_ms",
    "download_ms",
    "sim",
    // Issue 11: the control plane.
    "control",
    "coordinator_failovers",
    "epoch_changes",
];
