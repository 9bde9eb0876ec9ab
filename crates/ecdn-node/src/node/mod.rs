//! `ecdn node`: an HTTP/1.1 caching reverse proxy in front of origins chosen by Host, with a
//! DRAM hot-object cache (HOC) driven by an [`ecdn_policy::Cache`] (AdaptSize by default) and an
//! optional disk cache ([`ecdn_store::Store`]).
//!
//! # A request's life
//!
//! `request.rs` reads top-down as one request's life; each step is one function, and every path
//! ends in one [`Outcome`]:
//!
//! 1. **receive** (`handle`): a request arrives on a connection (`server.rs`).
//! 2. **sanitize** (`sanitize.rs`): the target's length and path are checked and normalised.
//! 3. **route**: the node's own endpoints and `PURGE` (`admin.rs`); a Host without an origin is a
//!    `421 Misdirected Request`.
//! 4. **lookup** (`lookup.rs`), for `GET` / `HEAD`: the HOC, then the disk (`disk.rs`), as the
//!    request's `Cache-Control` allows.
//! 5. **hit** (`hit.rs`: ranges, `If-Range`, streaming a stored entry), **miss** (`fill.rs`: the
//!    origin fetch driven into the tiers, shared by concurrent misses in a flight, `flight.rs`;
//!    with cooperating sites, the fill first tries the sites that hold the object, and another
//!    site's request is answered only from the caches or a flight, `sites.rs`), or **pass**
//!    (`pass`) for any other method.
//! 6. **deliver** (`deliver`): `X-Cache`, `Via`, the metrics and the access log, all from the
//!    [`Outcome`].
//!
//! Mechanisms are leaves beside it: `upstream.rs` (origins and exchanges with them), `vary.rs`
//! (the Vary index), `body.rs` (live response bodies), [`freshness`] (RFC 9111 rules), [`hoc`],
//! [`meta`] (disk metadata), [`normalize`] (paths), [`ops`] (metrics), `config.rs`.
//!
//! # Requests
//!
//! * The origin is the route of the request's Host ([`NodeConfig::routes`], matched without
//!   port and case), else the default origin; with neither, `421 Misdirected Request`. The
//!   cache key starts with the Host, so hosts never share entries.
//! * `GET` / `HEAD`: looked up in the HOC, then on disk, then fetched from the origin (without
//!   the request's content, if it has any: it has no defined meaning there). Answers
//!   carry `Via: 1.1 ecdn` and `X-Cache: HIT-HOC`, `HIT-DISK`, `MISS` or `MISS-COLLAPSED` (a
//!   miss that joined another request's origin fetch), `REVALIDATED` or `STALE` (see
//!   `fill.rs`); hits also carry `Age`. A `HEAD` miss is forwarded as `HEAD` and not stored.
//! * Any other method is passed through (`X-Cache: PASS`), never stored; an unsafe one (not
//!   `OPTIONS` / `TRACE`) answered `2xx` or `3xx` removes the cached entry of its URL, and of
//!   its answer's `Location` / `Content-Location` URLs on the same host, from the HOC and the
//!   disk (RFC 9111 §4.4); an error answer invalidates nothing. The disk removal is durable
//!   before the answer is sent.
//! * `/_ecdn/` paths and `PURGE` are the node's own, answered on its admin listener
//!   (`admin.rs`); the client listener refuses them (a counted `404` / `405`) and never proxies
//!   them.
//! * Request bodies (`client_body.rs`): only a pass forwards one. Any other answer waits until
//!   the request's body, if any, has been read and discarded (up to 64 KiB, within
//!   [`NodeConfig::header_read_timeout`]); when it has not (too large, too slow, cut), and when
//!   a pass's origin answered before the body was read to its end, the answer says
//!   `Connection: close`. hyper must never hold a complete response while the request body is
//!   still being read on a connection that stays open (see `client_body.rs` for why).
//! * [`NodeConfig::access_log`]: one JSON line per proxied request on stderr (`ts_unix_ms`,
//!   `method`, `path`, `status`, `tier`, `bytes` — `null` when the body length is not known at
//!   the headers, `duration_ms` to the response headers, `remote`).
//!
//! # Storage and concurrency
//!
//! The HOC ([`hoc::Hoc`]) sits behind a `std::sync::Mutex` held only for one lookup or one
//! admission, never across an await. An object larger than the HOC is refused by the policy
//! but still written to disk if it fits. The disk is reached through the blocking pool (see
//! `disk.rs`). A stored miss finishes its disk write before its clients get the last frame, so
//! the next request sees the object.

mod admin;
mod answer;
mod body;
mod client_body;
mod cluster;
mod config;
mod disk;
mod fill;
mod flight;
pub mod freshness;
mod gather;
mod h2_streams;
mod head_deadline;
mod hit;
pub mod hoc;
mod key;
mod lock;
mod lookup;
pub mod meta;
pub mod normalize;
pub mod ops;
mod outcome;
mod request;
pub(crate) mod request_id;
mod sanitize;
mod server;
pub mod sites;
mod slice_range;
mod slices;
mod snapshot;
mod state;
pub mod status;
pub mod targeted;
pub mod tls;
mod upstream;
mod vary;

pub use body::{LiveBody, NodeBody};
pub use cluster::pieces::names::MAX_OBJECT;
pub use config::{AdminListen, ClusterNode, H2Limits, NodeConfig, PeerLink, TlsListen};
pub use outcome::Outcome;
pub use server::{Holder, Node, RunningNode, Speak};
pub use upstream::{tcp_connector, Connecting, Connector, OriginIo};
