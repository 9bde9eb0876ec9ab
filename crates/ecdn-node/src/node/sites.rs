//! Cooperation between sites (CoralCDN §3.2): on a miss, a nearby site that holds the object
//! (or is fetching it) serves the fill instead of the origin.
//!
//! The node knows nothing of how sites find each other: it is given [`Referrals`] (the `ecdn`
//! binary implements them with Coral's DSHT, `ecdn-dsht`) and, for each fill it leads:
//!
//! 1. tells them it is **filling** the URL (Coral puts a short-lived reference to this node,
//!    renewed until the fill ends, so sites that miss meanwhile fetch from it: concurrent
//!    misses form a tree instead of all going to the origin);
//! 2. asks them where the URL may be (**locate**, nearest first) and sends the request to those
//!    sites in turn, marked with [`PEER_HEADER`]; the first `200` is the fill's answer, read,
//!    checked (`Content-Length`) and stored exactly as an origin's would be. With no
//!    referral, or none that answers `200`, the fill goes to the origin;
//! 3. tells them the fill is **filled** (the object is stored here: a long-lived reference) or
//!    **abandoned** (nothing stored).
//!
//! A request marked with [`PEER_HEADER`] comes from another site: it is answered from the
//! caches, or joins a fill in flight here, and otherwise gets `504` at once. It never goes to
//! the origin nor to other sites, so referrals cannot loop.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// The header that marks a request from another site: the value is the sending site's
/// address, for logs.
pub const PEER_HEADER: &str = "ecdn-site-peer";

/// Where other sites may hold an object, and what this node tells them about its fills.
/// `url` is the cache's primary key (host, path and query).
pub trait Referrals: Send + Sync + 'static {
    /// Sites (`host:port` of their HTTP listeners) that may hold or be fetching `url`,
    /// nearest first; never this node. Bounded in time by the implementation.
    fn locate<'a>(&'a self, url: &'a str)
        -> Pin<Box<dyn Future<Output = Vec<String>> + Send + 'a>>;
    /// This node started filling `url`.
    fn filling(&self, url: &str);
    /// The fill of `url` is stored here.
    fn filled(&self, url: &str);
    /// The fill of `url` ended without storing it.
    fn abandoned(&self, url: &str);
}

/// The referrals a node uses ([`super::NodeConfig::sites`]).
#[derive(Clone)]
pub struct Sites(pub Arc<dyn Referrals>);

impl fmt::Debug for Sites {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Sites(..)")
    }
}
