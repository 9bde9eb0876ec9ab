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
//!    sites two at a time, racing (the first two at once, then the next two if neither
//!    answers `200`), marked with [`PEER_HEADER`]; the first `200` is the fill's answer, read,
//!    checked (`Content-Length`) and stored exactly as an origin's would be, and the other
//!    request is cancelled. With no referral, or none that answers `200`, the fill goes to the
//!    origin;
//! 3. **looks again, in order**, when no site answered: in a flash crowd many sites miss
//!    within the time a *filling* reference takes to become visible, and each finds none and
//!    would go to the origin (CoralCDN's lookup and insert are not atomic; its §8 names the
//!    race). So the fill waits until its own reference can be found
//!    ([`Referrals::filling_stored`]), locates again, and asks only the sites named that come
//!    after this one (by address, as [`may_join`] orders them) and were not asked yet; a site
//!    that comes first waits for their fills as long as it takes. Of the sites that missed at
//!    once and see each other, only the last goes to the origin; the others fill down the
//!    chain to it;
//! 4. tells them the fill is **filled** (the object is stored here: a long-lived reference) or
//!    **abandoned** (nothing stored).
//!
//! A request marked with [`PEER_HEADER`] comes from another site: it is answered from the
//! caches, or joins a fill in flight here, and otherwise gets `504` at once. It never goes to
//! the origin nor to other sites, so referrals cannot loop. Fills can still wait on each other:
//! in a flash crowd two sites miss at once, each finds the other's *filling* reference, and
//! each fill would join the other's, both waiting until their timeouts. So sites are ordered
//! (by address, [`may_join`]): a request joins a fill that is still asking other sites for as
//! long as it takes only when the requester comes before this site; otherwise it waits at most
//! [`SITE_JOIN_WAIT`] for the answer, then gets `504` and its fill goes on to the next site or
//! the origin. A cycle of fills waiting on each other has a site that comes after the next
//! one, so it breaks within that wait; a chain that answers sooner keeps every site in it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// The header that marks a request from another site: the value is the sending site's
/// address ([`Referrals::me`]).
pub const PEER_HEADER: &str = "ecdn-site-peer";

/// The longest a request from a site that does not come before this one waits for a fill here
/// that is still asking other sites (see the module doc).
pub const SITE_JOIN_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether a request from the site `from` (its [`PEER_HEADER`]) may wait for a fill here that
/// is still asking other sites as long as it takes, this site being `me`: only when `from`
/// comes first (else it waits at most [`SITE_JOIN_WAIT`]). A fill that asks the origin, or
/// has its answer, never waits on another site.
pub fn may_join(from: &[u8], me: &str) -> bool {
    from < me.as_bytes()
}

/// Where other sites may hold an object, and what this node tells them about its fills.
/// `url` is the cache's primary key (host, path and query).
pub trait Referrals: Send + Sync + 'static {
    /// This site's address as the others know it (`host:port` of its HTTP listener): sent in
    /// [`PEER_HEADER`] with its requests to them, and what orders sites ([`may_join`]).
    fn me(&self) -> &str;
    /// Sites (`host:port` of their HTTP listeners) that may hold or be fetching `url`,
    /// nearest first; never this node. Bounded in time by the implementation.
    fn locate<'a>(&'a self, url: &'a str)
        -> Pin<Box<dyn Future<Output = Vec<String>> + Send + 'a>>;
    /// This node started filling `url`.
    fn filling(&self, url: &str);
    /// Resolves once the reference [`Referrals::filling`] put for `url` can be found by the
    /// other sites (or the implementation's bound passed): the ordered second look waits for
    /// it (see the module doc). At once by default.
    fn filling_stored<'a>(&'a self, url: &'a str) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
        let _ = url;
        Box::pin(async {})
    }
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
