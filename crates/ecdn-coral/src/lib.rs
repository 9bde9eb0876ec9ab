//! CoralCDN's cooperating sites (Freedman, Freudenthal & Mazières, NSDI 2004, §3) on
//! ecdn nodes, over the DSHT of `ecdn-dsht`.
//!
//! * [`site`] — a site's referrals: on a miss, a hierarchical `get` for sites that hold the
//!   object (or are filling it) before the origin; while filling and once filled, a sloppy
//!   `put` of a reference to this site; references of objects no longer held are withdrawn.
//!   The node calls them through its [`Referrals`](ecdn_node::node::sites::Referrals) trait.
//! * [`dns`] — the DNS redirector (§3.1): an authoritative server that answers a name in its
//!   domain with live proxies of the cluster level of the client's resolver, and nameservers
//!   for the zone of that level.
//! * [`probe`] — how the redirector places a resolver it knows nothing of: one TCP round trip
//!   to it, cached.
//! * [`stats`] — what a site counts for its node's `/_ecdn/stats`: its lookups (levels,
//!   latency, hops) and its redirector's answers by level.
//!
//! Layering: above `ecdn-node` and `ecdn-dsht`, below the `ecdn` binary (`ecdn node
//! --coral-*`, `ecdn coral demo`). The DNS request path is fuzzed (`fuzz/fuzz_targets/dns.rs`)
//! through [`dns::Redirector::answer`].

pub mod dns;
pub mod probe;
pub mod site;
pub mod stats;

pub use dns::{DnsServer, Locator, Redirector};
pub use site::CoralReferrals;
