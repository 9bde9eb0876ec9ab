//! Helpers shared by the store's test binaries.

use ecdn_store::EntryKey;

/// An object key.
pub fn obj(k: &str) -> EntryKey {
    EntryKey::object(k.as_bytes())
}

/// A test needs something this machine may lack: under CI (`CI` set to anything but empty,
/// `0` or `false`, as the plot tests read it) that is a failure with `why`
/// (CI must provide it); elsewhere the test prints "skipped: why" and the caller returns.
pub fn missing(why: &str) {
    assert!(
        !std::env::var("CI").is_ok_and(|v| {
            let v = v.to_ascii_lowercase();
            !v.is_empty() && v != "false" && v != "0"
        }),
        "under CI (CI={:?}) and {why}",
        std::env::var("CI").unwrap_or_default()
    );
    eprintln!("skipped: {why}");
}
