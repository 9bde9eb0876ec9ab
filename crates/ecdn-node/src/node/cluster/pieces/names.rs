//! How the cluster names an object (the id the bucket map places it by), and the largest
//! object of the object API (which the backend store under it is told too).

/// What follows the primary key in a slice's key, before the slice's index: a newline (as a
/// variant key has) and a control character no variant's part after the newline can hold (it
/// is built from header values).
const SLICE_MARK: &str = "\n\u{1}slice ";

/// The cache key of slice `index` of the object at `primary` (`crate::node::slices`).
pub(in crate::node) fn slice_key(primary: &str, index: u64) -> String {
    format!("{primary}{SLICE_MARK}{index}")
}

/// The primary key and the slice index of a slice's key; `None` for any other key.
pub(in crate::node) fn slice_of(key: &str) -> Option<(&str, u64)> {
    let at = key.find(SLICE_MARK)?;
    let index = key[at + SLICE_MARK.len()..].parse().ok()?;
    Some((&key[..at], index))
}

/// The URL part of a cache key (a variant key is the primary key, a newline, then the variant).
pub(in crate::node) fn primary_of(key: &str) -> &str {
    key.split('\n').next().unwrap_or(key)
}

/// The object id the bucket map places by: the hash of the primary key (every variant of a URL
/// lives in the URL's bucket); for a slice, the slice's id of that object
/// ([`ecdn_placement::slices::slice_id`], the simulator's id of the same slice).
pub(in crate::node) fn object_id(key: &str) -> u64 {
    if let Some((primary, index)) = slice_of(key) {
        return ecdn_placement::slices::slice_id(ecdn_trace::hash_id(primary.as_bytes()), index);
    }
    ecdn_trace::hash_id(primary_of(key).as_bytes())
}

/// Largest object a `PUT` takes (its record must also hold at most
/// `ecdn_objects::meta::MAX_CRCS` sub-chunk checksums).
pub const MAX_OBJECT: usize = 1 << 30;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_key_names_its_object_and_index_and_no_variant_is_one() {
        let k = slice_key("h/o?x=1", 12);
        assert_eq!(slice_of(&k), Some(("h/o?x=1", 12)));
        assert_eq!(primary_of(&k), "h/o?x=1");
        assert_eq!(slice_of("h/o?x=1"), None);
        assert_eq!(slice_of("h/o\naccept-encoding: gzip"), None);
        // Placed as the simulator places the slice.
        assert_eq!(
            object_id(&k),
            ecdn_placement::slices::slice_id(ecdn_trace::hash_id(b"h/o?x=1"), 12)
        );
    }
}
