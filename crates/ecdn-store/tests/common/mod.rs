//! Helpers shared by the store's test binaries.

use ecdn_store::EntryKey;

/// An object key.
pub fn obj(k: &str) -> EntryKey {
    EntryKey::object(k.as_bytes())
}

/// True when `CI` is set to anything but empty, `0` or `false` (as the plot tests read it).
fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| {
        let v = v.to_ascii_lowercase();
        !v.is_empty() && v != "false" && v != "0"
    })
}

/// A test needs something this machine may lack: under CI that is a failure with `why` (CI
/// must provide it); elsewhere the test prints "skipped: why" and the caller returns.
pub fn missing(why: &str) {
    if under_ci() {
        panic!("under CI and {why}: CI must provide it");
    }
    eprintln!("skipped: {why}");
}
