//! How a proxied request was answered: the one value every request path returns.
//!
//! A path never writes `X-Cache` or counts itself: it returns an [`Outcome`] with its response,
//! and the edge (`request.rs`'s `deliver`) renders everything from it, in one place: the `X-Cache`
//! header, the access log's `tier`, the Prometheus `tier` label and the `/_ecdn/stats` counters.
//! A new tier (the cluster's coded reads, for example) is a new variant here, and the compiler
//! then lists every place that must say how to show it.

/// The header an answer's outcome is rendered in ([`Outcome::x_cache`]).
pub(crate) const X_CACHE: hyper::header::HeaderName =
    hyper::header::HeaderName::from_static("x-cache");

/// Where a proxied request was answered from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A fresh entry of the DRAM hot-object cache.
    HitHoc,
    /// A fresh entry of the disk cache.
    HitDisk,
    /// The origin's answer, fetched by this request (alone, or leading the flight others
    /// join); also the `504` of an `only-if-cached` request without a usable entry.
    Miss,
    /// The origin's answer, fetched by another request's flight this one joined.
    MissCollapsed,
    /// A stale entry validated by the origin (`304`) and served from the cache.
    Revalidated,
    /// A stale entry served: the origin failed (`stale-if-error`), it is being validated in
    /// the background (`stale-while-revalidate`), or the request accepted it (`max-stale`).
    Stale,
    /// Another method, passed through to the origin.
    Pass,
    /// Our own `502` / `504` for a `GET` / `HEAD` the cache could not answer.
    MissError,
    /// Our own `502` / `504` for a passed-through request.
    PassError,
    /// Cluster mode: passed to the bucket's serving node, whose answer (and `X-Cache`) is
    /// streamed back as it is.
    Relayed,
}

impl Outcome {
    pub const ALL: [Outcome; 10] = [
        Outcome::HitHoc,
        Outcome::HitDisk,
        Outcome::Miss,
        Outcome::MissCollapsed,
        Outcome::Revalidated,
        Outcome::Stale,
        Outcome::Pass,
        Outcome::MissError,
        Outcome::PassError,
        Outcome::Relayed,
    ];

    /// The `X-Cache` header value. Our `502` / `504` say `MISS`: nothing was served from
    /// the cache.
    pub fn x_cache(self) -> &'static str {
        match self {
            Outcome::HitHoc => "HIT-HOC",
            Outcome::HitDisk => "HIT-DISK",
            Outcome::Miss | Outcome::MissError | Outcome::PassError => "MISS",
            Outcome::MissCollapsed => "MISS-COLLAPSED",
            Outcome::Revalidated => "REVALIDATED",
            Outcome::Stale => "STALE",
            Outcome::Pass => "PASS",
            Outcome::Relayed => "RELAYED",
        }
    }

    /// The outcome an `X-Cache` value ([`Outcome::x_cache`]) says (`MISS` a [`Outcome::Miss`]).
    pub fn of_x_cache(v: &str) -> Option<Outcome> {
        Self::ALL.into_iter().find(|o| o.x_cache() == v)
    }

    /// The tier: the access log's `tier` and the Prometheus `tier` label, one of
    /// [`Outcome::TIERS`].
    pub fn tier(self) -> &'static str {
        Self::TIERS[self.tier_index()]
    }

    /// Every tier label, in the order the metrics list them.
    pub const TIERS: [&'static str; 9] = [
        "hoc",
        "disk",
        "miss",
        "collapsed",
        "pass",
        "error",
        "revalidated",
        "stale",
        "relayed",
    ];

    /// The position of [`Outcome::tier`] in [`Outcome::TIERS`].
    pub fn tier_index(self) -> usize {
        match self {
            Outcome::HitHoc => 0,
            Outcome::HitDisk => 1,
            Outcome::Miss => 2,
            Outcome::MissCollapsed => 3,
            Outcome::Pass => 4,
            Outcome::MissError | Outcome::PassError => 5,
            Outcome::Revalidated => 6,
            Outcome::Stale => 7,
            Outcome::Relayed => 8,
        }
    }

    /// Whether the answer went to the origin for a `GET` / `HEAD` (the `misses` of
    /// `/_ecdn/stats`, the paper's miss): a miss, a revalidation, or our error for one. A
    /// collapsed miss waited on another request's fetch and is counted apart (`collapsed`).
    pub fn is_miss(self) -> bool {
        matches!(
            self,
            Outcome::Miss | Outcome::Revalidated | Outcome::MissError
        )
    }

    /// Whether it was a passed-through method (the `passes` of `/_ecdn/stats`).
    pub fn is_pass(self) -> bool {
        matches!(self, Outcome::Pass | Outcome::PassError)
    }

    /// Whether it is our own `502` / `504`.
    pub fn is_origin_error(self) -> bool {
        matches!(self, Outcome::MissError | Outcome::PassError)
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outcome_has_a_tier_and_a_label() {
        for (i, o) in Outcome::ALL.into_iter().enumerate() {
            assert_eq!(o.index(), i);
            assert!(Outcome::TIERS.contains(&o.tier()));
            assert!(!o.x_cache().is_empty());
        }
        for t in Outcome::TIERS {
            assert!(Outcome::ALL.iter().any(|o| o.tier() == t), "{t}");
        }
    }
}
