//! The cache key of a request.
//!
//! The cache key is Host + path + query (the *primary* key; for answers with `Vary`, see
//! `vary.rs`); its 64-bit FNV-1a hash ([`ecdn_trace::hash_id`], the same id the traces and the
//! simulator use) indexes the HOC, and the full key is kept in the entry and compared on
//! lookup. The disk store is keyed by the full key.
//!
//! A slice of a large object (`super::slices`) is cached under a key of its own
//! (`cluster::pieces::names::slice_key`).

use hyper::Request;

use super::state::State;
use super::upstream::request_host;

/// A request's key in the caches.
#[derive(Clone, Debug)]
pub(super) struct CacheKey {
    /// Host + path + query.
    pub(super) primary: String,
    /// The key looked up and stored under: the primary key, or a variant key when the URL's
    /// answers vary ([`super::vary`]).
    pub(super) key: String,
    /// Its hash, the HOC's (and the policy's) object id.
    pub(super) id: u64,
}

impl CacheKey {
    /// Host + path + query of a request.
    pub(super) fn primary<B>(req: &Request<B>) -> String {
        let host = request_host(req);
        let pq = req.uri().path_and_query().map_or("/", |p| p.as_str());
        let mut primary = String::with_capacity(host.len() + pq.len());
        primary.push_str(host);
        primary.make_ascii_lowercase();
        primary.push_str(pq);
        primary
    }

    /// The key a request is looked up under.
    pub(super) fn of<B>(st: &State, req: &Request<B>) -> CacheKey {
        let primary = Self::primary(req);
        let key = st.vary.lookup_key(&primary, req.headers());
        CacheKey {
            id: ecdn_trace::hash_id(key.as_bytes()),
            key,
            primary,
        }
    }

    /// The key of slice `index` of the object at `primary`.
    pub(super) fn slice(primary: &str, index: u64) -> CacheKey {
        let key = super::cluster::pieces::names::slice_key(primary, index);
        CacheKey {
            primary: primary.to_string(),
            id: ecdn_trace::hash_id(key.as_bytes()),
            key,
        }
    }

    /// The key `key` of the URL `primary`.
    pub(super) fn variant(primary: &str, key: String) -> CacheKey {
        CacheKey {
            primary: primary.to_string(),
            id: ecdn_trace::hash_id(key.as_bytes()),
            key,
        }
    }
}
