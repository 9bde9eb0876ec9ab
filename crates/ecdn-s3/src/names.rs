//! How an S3 object is named among EC-Cache's objects: `s3/BUCKET/HEX`, `HEX` the key's UTF-8
//! bytes in lower-case hex. Object names take only `A-Z a-z 0-9 . _ - ~ /` and no empty
//! segment, while a key may hold any character (`a//b`, spaces, `..`); hex takes every key,
//! and keeps its order and its prefixes (two hex digits per byte, `0-9` before `a-f`): the
//! names of a bucket's keys in name order are its keys in S3's order, and the keys that begin
//! with a prefix are the names that begin with its hex. So a listing is one range read of
//! the object directory.
//!
//! A listing's cursor after a common prefix (the prefix's bytes then `0xFF`) maps to its hex
//! too (`…ff`), past every name under the prefix.

use crate::text::hex;

/// What every S3 object's name begins with.
pub const PREFIX: &str = "s3/";

/// The object name of `key` in `bucket`.
pub fn object_name(bucket: &str, key: &str) -> String {
    format!("{PREFIX}{bucket}/{}", hex(key.as_bytes()))
}

/// The prefix of the object names of `bucket`'s keys that begin with `prefix` (bytes: a
/// listing's cursor may end in `0xFF`).
pub fn name_prefix(bucket: &str, prefix: &[u8]) -> String {
    format!("s3/{bucket}/{}", hex(prefix))
}

/// The key an object name of `bucket` names (`None`: not one of its keys).
pub fn key_of(bucket: &str, name: &str) -> Option<String> {
    let h = name
        .strip_prefix("s3/")?
        .strip_prefix(bucket)?
        .strip_prefix('/')?;
    // Only the names `object_name` writes: lower-case hex, a key of a byte at least.
    if h.is_empty() || h.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    String::from_utf8(crate::text::unhex(h)?).ok()
}

/// The longest object name of a key: `s3/`, a bucket of 63, `/`, 1,024 bytes in hex.
pub const MAX_OBJECT_NAME: usize = 3 + 63 + 1 + 2 * crate::request::MAX_KEY;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keep_the_keys_order_and_prefixes() {
        let mut keys = vec![
            "a", "a b", "a/b", "a//b", "a/../c", "ä", "Z", "a\u{1}", "~x", "a0",
        ];
        keys.sort();
        let names: Vec<String> = keys.iter().map(|k| object_name("bkt", k)).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "name order is key order");
        for (k, n) in keys.iter().zip(&names) {
            assert_eq!(key_of("bkt", n).as_deref(), Some(*k));
            assert!(n.starts_with(&name_prefix("bkt", &k.as_bytes()[..1])));
            assert!(n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'/'));
        }
        // Past a common prefix: after every name under it.
        let past = name_prefix("bkt", b"a/\xff");
        assert!(names
            .iter()
            .filter(|n| key_of("bkt", n).unwrap().starts_with("a/"))
            .all(|n| *n < past));
        assert!(key_of("other", &names[0]).is_none());
        assert!(key_of("bkt", "s3/bkt/6").is_none());
        assert!(key_of("bkt", "s3/bkt/ff").is_none(), "not UTF-8");
        assert!(key_of("bkt", "s3/bkt/").is_none());
        assert_eq!(
            object_name(&"b".repeat(63), &"k".repeat(1024)).len(),
            MAX_OBJECT_NAME
        );
    }
}
