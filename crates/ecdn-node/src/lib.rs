//! The ecdn HTTP node. Today it holds what the node and its tests stand on: the deterministic
//! object content every component can verify byte by byte ([`content`]) and `ecdn origin`, a
//! synthetic origin server for demos, tests and benchmarks ([`origin`]), like AdaptSize's
//! testbed origin that creates objects of the right size on the fly.

pub mod content;
pub mod origin;
