//! C2DN's serving path (C2DN §4–§5).

pub(in crate::node) mod headers;
pub(in crate::node) mod partial;
pub(in crate::node) mod read;
pub(in crate::node) mod relay;
pub(in crate::node) mod repair;
pub(in crate::node) mod whole;
pub(in crate::node) mod write;
