//! C2DN's serving path (C2DN §4–§5), over the pieces layer (`super::pieces`): `relay.rs`
//! (to the bucket's serving node), `direct.rs` (a hit read by the node a request
//! reached, though another node serves the bucket), `read.rs` (the lookup of an object's
//! pieces and its hit, the orchestration over the leaves that follow), `placed.rs` (what the
//! bucket's servers hold), `replica.rs` (a replica read from a peer, hedged), `restore.rs`
//! (what a hit restores on its targets), `whole.rs` (a coded object read whole and answered), `partial.rs` (only the missing chunks
//! from the origin), `write.rs` (a fill's placement), `handoff.rs` (pieces whose server could
//! not take them, written where the next map puts them), `ages.rs` (how old an object's
//! pieces are on their servers), `repair.rs` (background repair), `resync.rs` (a read's
//! write-back that rewrites pieces near eviction too), and `headers.rs` (the cluster's
//! response headers).

pub(in crate::node) mod ages;
pub(in crate::node) mod direct;
pub(in crate::node) mod handoff;
pub(in crate::node) mod headers;
pub(in crate::node) mod partial;
pub(in crate::node) mod placed;
pub(in crate::node) mod read;
pub(in crate::node) mod relay;
pub(in crate::node) mod repair;
pub(in crate::node) mod replica;
pub(in crate::node) mod restore;
pub(in crate::node) mod resync;
pub(in crate::node) mod whole;
pub(in crate::node) mod write;
