//! The pieces layer: what C2DN's serving path (`super::c2dn`) and EC-Cache's object API
//! (`super::objects`) both stand on. From the bottom up:
//!
//! * `names.rs` (the id the map places an object by), `link.rs` (the peer link model),
//!   `purge_log.rs` (recent purges), `stats.rs` (the counters), `demand.rs` (requests per
//!   object, for repair), `kinds.rs` (objects relayed answers said were coded), `store.rs` (the piece store under its piece policy);
//! * `member.rs`: the node's [`member::Cluster`], which holds all of the above;
//! * over it: `metrics.rs` (the counters' exposition), `holders.rs` (who holds which piece,
//!   and the signed peer `GET`), `local.rs` (a piece stored here), `together.rs` (whole-object
//!   eviction), `chunk_streams.rs` (chunks streamed to their servers as they are encoded),
//!   `coded/` (the coded read: stripes, delayed parity, late binding), `purge.rs` (a `PURGE`
//!   across the cluster).

pub(in crate::node) mod chunk_streams;
pub(in crate::node) mod coded;
pub(in crate::node) mod demand;
pub(in crate::node) mod holders;
pub(in crate::node) mod kinds;
pub(in crate::node) mod link;
pub(in crate::node) mod local;
pub(in crate::node) mod member;
pub(in crate::node) mod metrics;
pub(in crate::node) mod names;
pub(in crate::node) mod purge;
pub(in crate::node) mod purge_log;
pub(in crate::node) mod stats;
pub(in crate::node) mod store;
pub(in crate::node) mod together;
