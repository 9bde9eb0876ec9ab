//! Helpers shared by the store's test binaries (each uses some of them).
#![allow(dead_code)]

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

/// Flips a bit of the byte at `offset` of the file at `path` (damage, for the tests that
/// check it is never served).
pub fn flip(path: &std::path::Path, offset: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, offset).unwrap();
    b[0] ^= 0x40;
    f.write_all_at(&b, offset).unwrap();
}
