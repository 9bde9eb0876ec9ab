//! One owner per file, durable removals, reserved space, unformatted files and block devices
//! (see "Ownership, space and durability" in the crate documentation).

use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use ecdn_store::{Store, StoreConfig, StoreError};

mod common;
use common::{missing, obj};

#[test]
fn a_second_open_of_the_same_file_is_refused_until_the_first_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let cfg = StoreConfig::new(&path, 1 << 20);
    let mut first = Store::open(cfg.clone()).unwrap();
    first.put(&obj("a"), b"m", b"payload").unwrap();
    for second in [Store::open(cfg.clone()), Store::create(cfg.clone())] {
        let err = second.unwrap_err();
        assert!(matches!(err, StoreError::InUse { .. }), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains("in use by another process") && msg.contains("ring"),
            "{msg}"
        );
    }
    // The refused `create` did not format anything: the first store's entry is intact.
    assert_eq!(first.get(&obj("a")).unwrap().unwrap().payload, b"payload");
    drop(first);
    let mut again = Store::open(cfg).unwrap();
    assert_eq!(again.get(&obj("a")).unwrap().unwrap().payload, b"payload");
}

#[test]
fn a_mapped_read_held_past_the_drop_keeps_its_bytes_but_not_the_lock() {
    use ecdn_store::{Opened, SharedPayload};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let cfg = StoreConfig::new(&path, 1 << 20);
    let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut first = Store::open(cfg.clone()).unwrap();
    first.put(&obj("a"), b"m", &data).unwrap();
    let Opened::Hit(h) = first.open_entry(&obj("a")).unwrap() else {
        panic!("entry not found")
    };
    let Some(SharedPayload::Mapped(m)) = first.read_payload_shared(&h, 0..200_000).unwrap() else {
        panic!("not mapped")
    };
    // A slow reader still holds its mapping when its store is dropped (a node stopping).
    drop(first);
    let mut again = Store::open(cfg).expect("the dropped store's lock is released");
    // The reopened store overwrites the entry's bytes; the old reader's copy is unaffected.
    again.remove(&obj("a")).unwrap();
    for i in 0..8 {
        again
            .put(&obj(&format!("b{i}")), b"", &vec![i as u8; 150_000])
            .unwrap();
    }
    let (map, range) = m.verify_all().expect("the held bytes still verify");
    assert_eq!(&map[range], &data[..]);
}

/// `cachestat(2)` (Linux 6.5): pages of `range` of `file` in the page cache, and how many of
/// them are dirty (not yet written back). `None` if the kernel lacks the call.
fn dirty_pages(file: &std::fs::File, off: u64, len: u64) -> Option<u64> {
    #[repr(C)]
    struct Range {
        off: u64,
        len: u64,
    }
    #[repr(C)]
    #[derive(Default)]
    struct Stat {
        nr_cache: u64,
        nr_dirty: u64,
        nr_writeback: u64,
        nr_evicted: u64,
        nr_recently_evicted: u64,
    }
    const SYS_CACHESTAT: libc::c_long = 451;
    let range = Range { off, len };
    let mut st = Stat::default();
    // SAFETY: the kernel reads `range` and writes `st`, both live and of the layout it expects.
    let r = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            file.as_raw_fd(),
            &range as *const Range,
            &mut st as *mut Stat,
            0u32,
        )
    };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSYS), "cachestat: {e}");
        return None;
    }
    Some(st.nr_dirty + st.nr_writeback)
}

/// A put leaves its header's page dirty in the page cache (the kernel writes it back later);
/// `remove` returns only after the tombstone's page was written to the device. Watching the
/// page's dirty state with `cachestat` is what tells a durable removal from one that merely
/// survives `kill -9` (the page cache outlives the process either way).
#[test]
fn remove_returns_only_once_its_tombstone_is_written_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let mut s = Store::open(StoreConfig::new(&path, 16 << 20)).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    let page = 4096;
    let mut observed = 0;
    for i in 0..20 {
        let key = obj(&format!("k{i}"));
        s.put(&key, b"meta", &vec![i as u8; 10_000]).unwrap();
        let at = s.locate(&key).unwrap().offset;
        let Some(before) = dirty_pages(&file, at, page) else {
            missing("no cachestat(2) in this kernel (Linux >= 6.5)");
        };
        if before == 0 {
            // The kernel's flusher wrote it back already: nothing to observe this round.
            continue;
        }
        assert!(s.remove(&key).unwrap());
        assert_eq!(
            dirty_pages(&file, at, page),
            Some(0),
            "the tombstone's page is still dirty after remove returned"
        );
        observed += 1;
    }
    assert!(observed > 0, "never saw a put's page dirty: cannot judge");
    eprintln!("observed {observed} dirty-then-written-back tombstone pages");
    drop(s);
    let s = Store::open(StoreConfig::new(&path, 16 << 20)).unwrap();
    assert!(s.is_empty());
}

#[test]
fn removals_survive_a_reopen_and_absent_keys_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let cfg = StoreConfig::new(&path, 1 << 20);
    let mut s = Store::open(cfg.clone()).unwrap();
    s.put(&obj("a"), b"", b"old").unwrap();
    s.put(&obj("a"), b"", b"new").unwrap();
    s.put(&obj("b"), b"", b"kept").unwrap();
    assert!(s.remove(&obj("a")).unwrap());
    assert!(!s.remove(&obj("a")).unwrap());
    assert!(!s.remove(&obj("never")).unwrap());
    assert_eq!(s.io_errors(), 0);
    // Dropped without a sync, like a killed process: neither version of "a" comes back.
    drop(s);
    let mut s = Store::open(cfg).unwrap();
    assert_eq!(s.get(&obj("a")).unwrap(), None);
    assert_eq!(s.get(&obj("b")).unwrap().unwrap().payload, b"kept");
}

/// Bytes an unprivileged user may still allocate where `dir` lives.
fn free_bytes(dir: &Path) -> u64 {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: a valid C string and a struct statvfs fills on success.
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) }, 0);
    // SAFETY: filled by the successful call above.
    let st = unsafe { st.assume_init() };
    st.f_bavail * st.f_frsize
}

#[test]
fn a_store_larger_than_the_free_space_fails_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let capacity = (free_bytes(dir.path()) + (1 << 40)) / 4096 * 4096;
    let err = Store::open(StoreConfig::new(&path, capacity)).unwrap_err();
    let StoreError::NoSpace {
        needed, available, ..
    } = &err
    else {
        panic!("expected NoSpace, got {err}");
    };
    assert_eq!(*needed, capacity + 4096);
    assert!(*available < *needed);
    let msg = err.to_string();
    assert!(msg.contains("ring") && msg.contains("free"), "{msg}");
    // Nothing was allocated, and the empty file is "unformatted" for a later open.
    let m = std::fs::metadata(&path).unwrap();
    assert_eq!((m.len(), m.blocks()), (0, 0));
    let s = Store::open(StoreConfig::new(&path, 1 << 20)).unwrap();
    assert_eq!(s.capacity(), 1 << 20);
}

#[test]
fn the_whole_file_is_allocated_at_format_and_at_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let cfg = StoreConfig::new(&path, 8 << 20);
    let needed = (8 << 20) + 4096;
    let s = Store::open(cfg.clone()).unwrap();
    let m = std::fs::metadata(&path).unwrap();
    assert_eq!(m.len(), needed);
    assert!(m.blocks() * 512 >= needed, "{} blocks", m.blocks());
    drop(s);
    // A sparse file (as an older version formatted it) is allocated when it is reopened.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let sb = {
        use std::os::unix::fs::FileExt;
        let mut b = vec![0u8; 4096];
        f.read_exact_at(&mut b, 0).unwrap();
        f.set_len(0).unwrap();
        f.set_len(needed).unwrap();
        f.write_all_at(&b, 0).unwrap();
        b
    };
    assert!(std::fs::metadata(&path).unwrap().blocks() * 512 < needed);
    let _s = Store::open(cfg).unwrap();
    assert!(std::fs::metadata(&path).unwrap().blocks() * 512 >= needed);
    assert_ne!(sb, vec![0u8; 4096]);
}

/// What a crash during the first format leaves: a sized file whose superblock was never
/// written (all zeros), or a shorter one. Both are formatted, not refused.
#[test]
fn an_all_zero_superblock_is_unformatted() {
    let dir = tempfile::tempdir().unwrap();
    let cap = 1u64 << 20;
    let zero_sized = dir.path().join("sized");
    std::fs::File::create(&zero_sized)
        .unwrap()
        .set_len(cap + 4096)
        .unwrap();
    let short = dir.path().join("short");
    std::fs::write(&short, [0u8; 20]).unwrap();
    // Zeros where the superblock goes, stale bytes after it: still unformatted.
    let stale = dir.path().join("stale");
    let mut bytes = vec![0u8; 4096];
    bytes.extend((0..100_000u32).map(|i| (i % 251) as u8));
    std::fs::write(&stale, &bytes).unwrap();
    for path in [zero_sized, short, stale] {
        let cfg = StoreConfig::new(&path, cap);
        let mut s = Store::open(cfg.clone()).unwrap_or_else(|e| panic!("{e}"));
        assert!(s.is_empty());
        s.put(&obj("x"), b"", b"hello").unwrap();
        drop(s);
        let mut s = Store::open(cfg).unwrap();
        assert_eq!(s.get(&obj("x")).unwrap().unwrap().payload, b"hello");
    }
    // One non-zero byte in the superblock's block, and it is not ours: refused.
    let junk = dir.path().join("junk");
    let mut bytes = vec![0u8; 8192];
    bytes[100] = 1;
    std::fs::write(&junk, &bytes).unwrap();
    let err = Store::open(StoreConfig::new(&junk, cap)).unwrap_err();
    assert!(matches!(err, StoreError::NotAStore { .. }), "{err}");
    assert_eq!(
        std::fs::read(&junk).unwrap(),
        bytes,
        "a refused file is untouched"
    );
}

/// The two-step removal: the tombstone under a shared reference (the entry is never served
/// from then on), the index afterwards; a version put in between is kept.
#[test]
fn tombstone_then_forget() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let cfg = StoreConfig::new(&path, 1 << 20);
    let mut s = Store::open(cfg.clone()).unwrap();
    s.put(&obj("a"), b"", b"v1").unwrap();
    s.put(&obj("b"), b"", b"v1").unwrap();
    let shared: &Store = &s;
    let ta = shared.tombstone(&obj("a")).unwrap().expect("present");
    let tb = shared.tombstone(&obj("b")).unwrap().expect("present");
    assert!(shared.tombstone(&obj("none")).unwrap().is_none());
    assert_eq!(ta.key(), Some(&obj("a")));
    // Between the steps: still indexed, but reported corrupt, never served.
    assert!(matches!(
        shared.lookup(&obj("a")).unwrap(),
        ecdn_store::Lookup::Corrupt { .. }
    ));
    // A new version of "b" is put before its tombstone is forgotten: it stays.
    s.put(&obj("b"), b"", b"v2").unwrap();
    s.forget(ta);
    s.forget(tb);
    assert!(!s.contains(&obj("a")));
    assert_eq!(s.get(&obj("b")).unwrap().unwrap().payload, b"v2");
    drop(s);
    let mut s = Store::open(cfg).unwrap();
    assert_eq!(s.get(&obj("a")).unwrap(), None);
    assert_eq!(s.get(&obj("b")).unwrap().unwrap().payload, b"v2");
}
