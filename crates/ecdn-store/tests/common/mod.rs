//! Helpers shared by the store's test binaries.

use ecdn_store::EntryKey;

/// An object key.
pub fn obj(k: &str) -> EntryKey {
    EntryKey::object(k.as_bytes())
}

/// A test needs something this machine may lack: under `CI=true` that is a failure with `why`
/// (CI must provide it); elsewhere the test prints "skipped: why" and the caller returns.
pub fn missing(why: &str) {
    assert!(
        std::env::var("CI").map_or(true, |v| v != "true"),
        "CI=true and {why}"
    );
    eprintln!("skipped: {why}");
}
