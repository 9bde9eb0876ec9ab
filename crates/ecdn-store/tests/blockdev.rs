//! The store on a block device (a loop device over a temporary file). In a test binary of
//! its own: it runs `losetup` and `blockdev`, and a child process holds copies of this
//! process's descriptors (the store's locked one among them) from its fork to its exec, which
//! would make another test's immediate reopen of its own store see `InUse`.

use std::path::PathBuf;
use std::process::Command;

use ecdn_store::{Store, StoreConfig, StoreError};

mod common;
use common::{missing, obj};

/// A loop device over a file in a temporary directory, detached when dropped.
struct Loop {
    dev: PathBuf,
    _dir: tempfile::TempDir,
}

impl Loop {
    /// A loop device over a new image of `size` bytes of `fill`; the test fails (through
    /// [`missing`]) when loop devices cannot be set up here.
    fn new(size: u64, fill: u8) -> Loop {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("img");
        std::fs::write(&img, vec![fill; size as usize]).unwrap();
        let out = match Command::new("losetup")
            .args(["-f", "--show"])
            .arg(&img)
            .output()
        {
            Ok(o) => o,
            Err(e) => missing(&format!("cannot run losetup (install mount): {e}")),
        };
        if !out.status.success() {
            missing(&format!(
                "losetup -f --show failed (needs root and loop devices): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let dev = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
        Loop { dev, _dir: dir }
    }

    fn blockdev(&self, flag: &str) {
        let st = Command::new("blockdev")
            .arg(flag)
            .arg(&self.dev)
            .status()
            .expect("run blockdev (util-linux)");
        assert!(st.success(), "blockdev {flag} failed");
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let st = Command::new("losetup").arg("-d").arg(&self.dev).status();
        if !matches!(st, Ok(s) if s.success()) && !std::thread::panicking() {
            panic!("losetup -d {} failed: {st:?}", self.dev.display());
        }
    }
}

#[test]
fn a_block_device_is_formatted_when_zeroed_used_and_reopened() {
    let size = 8u64 << 20;
    let lo = Loop::new(size, 0);
    let junk = Loop::new(1 << 20, 0x5a);
    let cap = size - 4096;
    // Larger than the device: refused, with the sizes.
    let err = Store::open(StoreConfig::new(&lo.dev, size)).unwrap_err();
    assert!(
        matches!(err, StoreError::DeviceTooSmall { size: s, .. } if s == size),
        "{err}"
    );
    let cfg = StoreConfig::new(&lo.dev, cap);
    let mut s = Store::open(cfg.clone()).unwrap_or_else(|e| panic!("{e}"));
    assert!(s.is_device());
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    s.put(&obj("big"), b"meta", &big).unwrap();
    s.put(&obj("gone"), b"", b"x").unwrap();
    // One owner: a second open (O_EXCL on the device) is refused.
    let err = Store::open(cfg.clone()).unwrap_err();
    assert!(matches!(err, StoreError::InUse { .. }), "{err}");

    // A tombstone that cannot be written is an error, and the entry stays indexed.
    lo.blockdev("--setro");
    let failed = s.remove(&obj("gone"));
    lo.blockdev("--setrw");
    let err = failed.unwrap_err();
    assert!(matches!(err, StoreError::Io { .. }), "{err}");
    assert!(s.contains(&obj("gone")));
    assert_eq!(s.io_errors(), 1);
    assert!(s.remove(&obj("gone")).unwrap());
    drop(s);

    let mut s = Store::open(cfg).unwrap();
    assert_eq!(s.get(&obj("big")).unwrap().unwrap().payload, big);
    assert_eq!(s.get(&obj("gone")).unwrap(), None);
    assert_eq!(s.len(), 1);
    drop(s);

    // A device holding something else is refused and left untouched.
    let err = Store::open(StoreConfig::new(&junk.dev, (1 << 20) - 4096)).unwrap_err();
    assert!(matches!(err, StoreError::NotAStore { .. }), "{err}");
    assert!(err.to_string().contains("zero its first 4 KiB"), "{err}");
    let bytes = std::fs::read(&junk.dev).unwrap();
    assert!(bytes.iter().all(|&b| b == 0x5a));
}
