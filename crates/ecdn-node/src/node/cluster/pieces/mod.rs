//! The pieces layer: what C2DN's serving path (`super::c2dn`) and EC-Cache's object API
//! (`super::objects`) both stand on.

pub(in crate::node) mod chunk_streams;
pub(in crate::node) mod coded;
pub(in crate::node) mod demand;
pub(in crate::node) mod holders;
pub(in crate::node) mod link;
pub(in crate::node) mod local;
pub(in crate::node) mod member;
pub(in crate::node) mod metrics;
pub(in crate::node) mod names;
pub(in crate::node) mod purge;
pub(in crate::node) mod purge_log;
pub(in crate::node) mod stats;
pub(in crate::node) mod store;
