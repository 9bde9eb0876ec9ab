//! The cache key of a request.
//!
//! The cache key is Host + path + query (the *primary* key; for answers with `Vary`, see
//! `vary.rs`); its 64-bit FNV-1a hash ([`ecdn_trace::hash_id`], the same id the traces and the
//! simulator use) indexes the HOC, and the full key is kept in the entry and compared on
//! lookup. The disk store is keyed by the full key.
//!
//! A slice of a large object (`super::slices`) is cached under the primary key, a newline,
//! `\u{1}slice ` and the slice's index: a key no variant key can be (a variant's part after
//! the newline is built from header values, which hold no control character).

use hyper::Request;

use super::state::State;
use super::upstream::request_host;

/// What follows the primary key in a slice's key, before the slice's index.
const SLICE_MARK: &str = "\n\u{1}slice ";

/// The primary key and the slice index of a slice's key; `None` for any other key.
pub(super) fn slice_of(key: &str) -> Option<(&str, u64)> {
    let at = key.find(SLICE_MARK)?;
    let index = key[at + SLICE_MARK.len()..].parse().ok()?;
    Some((&key[..at], index))
}

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
        let key = format!("{primary}{SLICE_MARK}{index}");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_key_names_its_object_and_index_and_no_variant_is_one() {
        let s = CacheKey::slice("h/o?x=1", 12);
        assert_eq!(slice_of(&s.key), Some(("h/o?x=1", 12)));
        assert_eq!(s.primary, "h/o?x=1");
        assert_eq!(s.id, ecdn_trace::hash_id(s.key.as_bytes()));
        assert_eq!(slice_of("h/o?x=1"), None);
        assert_eq!(slice_of("h/o\naccept-encoding: gzip"), None);
    }
}
