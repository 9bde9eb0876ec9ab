//! Cooperation between sites (CoralCDN §3.2): on a miss, a nearby site that holds the object
//! (or is fetching it) serves the fill instead of the origin.
//!
//! The node knows nothing of how sites find each other: it is given [`Referrals`] (the `ecdn`
//! binary implements them with Coral's DSHT, `ecdn-dsht`) and, for each fill it leads:
//!
//! 1. **claims** the URL: tells the referrals it is filling it (Coral puts a short-lived
//!    reference to this node, renewed until the fill ends, so sites that miss meanwhile fetch
//!    from it: concurrent misses form a tree instead of all going to the origin) and learns
//!    which sites held or claimed it before ([`Referrals::claim`]). A plain lookup followed by
//!    a put would race: in a flash crowd many sites miss within the time a reference takes to
//!    become visible, find none, and all go to the origin (CoralCDN §8 names the race and its
//!    cure, a store that returns what it found, like a test-and-set). Of the sites that claim
//!    one URL at once, one learns of none and goes to the origin; every other learns of sites
//!    that claimed before it;
//! 2. sends the request to those sites, nearest first, two at a time, racing (the first two at
//!    once, then the next two if neither answers `200`), marked with [`PEER_HEADER`]; the
//!    first `200` is the fill's answer, read, checked (`Content-Length`) and stored exactly
//!    as an origin's would be, and the other request is cancelled. With no site named, or
//!    none that answers `200`, the fill goes to the origin;
//! 3. tells them the fill is **filled** (the object is stored here: a long-lived reference) or
//!    **abandoned** (nothing stored).
//!
//! A request marked with [`PEER_HEADER`] comes from another site: it is answered from the
//! caches, or joins a fill in flight here, and otherwise gets `504` at once. It never goes to
//! the origin nor to other sites, so referrals cannot loop. A fill that is itself waiting on
//! other sites keeps such a request waiting as long as it takes: the sites a claim names came
//! before it, so the waits follow the order of the claims and never close a circle. The one
//! request that could close one, from a site this fill's claim named (a referral
//! implementation that broke the order), is refused at once.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// The header that marks a request from another site: the value is the sending site's
/// address ([`Referrals::me`]).
pub const PEER_HEADER: &str = "ecdn-site-peer";

/// Where other sites may hold an object, and what this node tells them about its fills.
/// `url` is the cache's primary key (host, path and query).
pub trait Referrals: Send + Sync + 'static {
    /// This site's address as the others know it (`host:port` of its HTTP listener): sent in
    /// [`PEER_HEADER`] with its requests to them.
    fn me(&self) -> &str;
    /// This node starts filling `url`: claims it (tells the other sites, until
    /// [`Referrals::filled`] or [`Referrals::abandoned`]) and returns the sites (`host:port`
    /// of their HTTP listeners) that held or claimed it before, nearest first; never this
    /// node. Of claims of one URL made at once, one returns no site, and no claim returns a
    /// site whose own claim returned it (see the module doc). Bounded in time by the
    /// implementation.
    fn claim<'a>(&'a self, url: &'a str) -> Pin<Box<dyn Future<Output = Vec<String>> + Send + 'a>>;
    /// The fill of `url` is stored here.
    fn filled(&self, url: &str);
    /// The fill of `url` ended without storing it.
    fn abandoned(&self, url: &str);
    /// What the referrals count (lookups, their latency, ...), shown as `sites` in
    /// `/_ecdn/stats`; `null` if nothing.
    fn stats(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
    /// An admin request under `/_ecdn/sites` (`op`: the rest of the path, `""` for
    /// `/_ecdn/sites` itself; `query`: the raw query string; `post`: a `POST`, else a `GET`),
    /// answered on the node's admin listener only: the status and a JSON body, or `None` for
    /// an operation the referrals do not have.
    fn admin<'a>(&'a self, op: &'a str, query: &'a str, post: bool) -> AdminAnswer<'a> {
        let _ = (op, query, post);
        Box::pin(async { None })
    }
}

/// The answer of [`Referrals::admin`]: a status code and a JSON body, or `None` (not found).
pub type AdminAnswer<'a> =
    Pin<Box<dyn Future<Output = Option<(u16, serde_json::Value)>> + Send + 'a>>;

/// The referrals a node uses ([`super::NodeConfig::sites`]).
#[derive(Clone)]
pub struct Sites(pub Arc<dyn Referrals>);

impl fmt::Debug for Sites {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Sites(..)")
    }
}
