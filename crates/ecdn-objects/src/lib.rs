//! EC-Cache (Rashmi et al., OSDI '16) for ecdn: the decisions of an object cache that codes
//! each object into `k` data and `r` parity **splits** on distinct servers, apart from the
//! network. The object API, the metadata at the coordinator and the live bench build on them.
//!
//! * [`split`] — where an object's splits go ([`split::place_splits`]: `k + r` distinct
//!   servers chosen uniformly at random, §4.2) and which of them a read asks
//!   ([`split::read_plan`]: `k + Δ` of the reachable ones chosen uniformly at random, to
//!   finish with the first `k` to arrive — *late binding*, §4.3).
//! * [`budget`] — the memory overhead budget (§6.1's setup, 15% by default) spent by
//!   popularity: EC-Cache gives each object its `r` parities, then extra parities to the most
//!   popular objects; the baseline, **selective replication**, spends the same budget on extra
//!   replicas of the most popular objects. Both flatten the popularity skew starting from the
//!   most popular object until the budget is spent, by the same rule.
//! * [`backlog`] — Δ per read from the node's smoothed backlog, by TOFEC's thresholds: extra
//!   reads when the servers are idle, none near capacity.
//! * [`meta`] — an object's record (name, version, size, `k`, `r`, split locations, the
//!   splits stored, SHA-256, sub-chunk CRCs) and the coordinator's table, in which a write is invisible until
//!   it is committed with at least `k` splits stored.
//! * [`digest`] — the SHA-256 of every window of every split, in the record: a client that
//!   reads the splits from their servers checks each byte against the record alone.
//! * [`records`] — a node's cache of records, so a read asks the directory nothing while its
//!   record is fresh.
//! * [`writes`] — the messages of a write by a client that codes the object and puts the
//!   splits itself: the node's grant, the split server's receipt, the commit.
//! * [`model`] — loads on servers: the percent imbalance λ of §6 over bytes read per server,
//!   a request-by-request simulation of both schemes with the same placement and read code,
//!   and §5.1's variance ratio `Var(L_EC) / Var(L_SR) = 1/k`.
//!
//! Everything is deterministic for a given seed ([`ecdn_trace::Rng`]).

pub mod backlog;
pub mod budget;
pub mod digest;
pub mod meta;
pub mod model;
pub mod records;
pub mod split;
pub mod writes;

/// A server of the cluster, by index.
pub type ServerId = usize;
