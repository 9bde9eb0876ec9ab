//! The ecdn HTTP node: `ecdn node`, a caching reverse proxy with a DRAM hot-object cache and a
//! disk cache ([`node`], first slice: one origin, no coding yet); the deterministic object
//! content every component can verify byte by byte ([`content`]); and `ecdn origin`, a
//! synthetic origin server for demos, tests and benchmarks ([`origin`]), like AdaptSize's
//! testbed origin that creates objects of the right size on the fly; and the `Range` parser
//! both use ([`range`]); and the reader of an origin's `multipart/byteranges` answers
//! ([`multipart`]).

// The node's stats document is one `serde_json::json!` of many fields.
#![recursion_limit = "256"]

pub mod content;
pub mod multipart;
pub mod node;
pub mod origin;
pub mod range;
