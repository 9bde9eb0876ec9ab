//! How the cluster names an object (the id the bucket map places it by), and the largest
//! object of the object API (which the backend store under it is told too).

/// The URL part of a cache key (a variant key is the primary key, a newline, then the variant).
pub(in crate::node) fn primary_of(key: &str) -> &str {
    key.split('\n').next().unwrap_or(key)
}

/// The object id the bucket map places by: the hash of the primary key (every variant of a URL
/// lives in the URL's bucket); for a slice, the slice's id of that object
/// ([`ecdn_placement::slices::slice_id`], the simulator's id of the same slice).
pub(in crate::node) fn object_id(key: &str) -> u64 {
    if let Some((primary, index)) = crate::node::key::slice_of(key) {
        return ecdn_placement::slices::slice_id(ecdn_trace::hash_id(primary.as_bytes()), index);
    }
    ecdn_trace::hash_id(primary_of(key).as_bytes())
}

/// Largest object a `PUT` takes (its record must also hold at most
/// `ecdn_objects::meta::MAX_CRCS` sub-chunk checksums).
pub const MAX_OBJECT: usize = 1 << 30;
