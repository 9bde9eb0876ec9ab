//! EC-Cache's object API (EC-Cache §3–§4).

pub(in crate::node) mod api;
pub(in crate::node) mod budget;
pub(in crate::node) mod record;
pub(in crate::node) mod stat;
