//! Helpers shared by the store's test binaries.

use ecdn_store::EntryKey;

/// An object key.
pub fn obj(k: &str) -> EntryKey {
    EntryKey::object(k.as_bytes())
}

/// A test needs something this machine lacks: it fails, saying what and how to get it (./test.sh
/// installs every package the tests need). A test never passes without running.
pub fn missing(why: &str) -> ! {
    panic!("this test cannot run: {why}");
}
