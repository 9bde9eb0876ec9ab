//! A store starts from its directory and the entries written after it, and falls back to the
//! full scan, saying why, whenever the directory cannot be trusted: missing, torn, damaged, of
//! another ring, or naming entries the ring does not hold. Either way it serves the same bytes
//! as a scan of the same ring, and never a removed or damaged entry.

mod common;
use common::flip;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use ecdn_store::{directory_path, EntryKey, Started, Store, StoreConfig};
use proptest::prelude::*;

const CAP: u64 = 256 << 10;

fn key(id: u64) -> EntryKey {
    if id.is_multiple_of(3) {
        EntryKey::chunk(format!("/obj/{id}"), (id % 7) as u16, 0)
    } else {
        EntryKey::object(format!("/obj/{id}"))
    }
}

fn payload(id: u64, version: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u64 ^ id.wrapping_mul(131) ^ version.wrapping_mul(7)) as u8)
        .collect()
}

fn open(path: &Path) -> Store {
    Store::open(StoreConfig::new(path, CAP)).unwrap()
}

/// What `store` serves for each key in `0..ids`: its metadata and the payload's length and
/// checksum, or nothing.
fn served(store: &mut Store, ids: u64) -> Vec<Option<(String, usize, u32)>> {
    (0..ids)
        .map(|id| {
            store.get(&key(id)).unwrap().map(|e| {
                let meta = String::from_utf8_lossy(&e.meta).into_owned();
                (meta, e.payload.len(), ecdn_store::crc32c(&e.payload))
            })
        })
        .collect()
}

/// The same ring opened by a scan: a copy of the file, without its directory.
fn scanned_copy(path: &Path, dir: &Path) -> (Store, PathBuf) {
    let copy = dir.join(format!(
        "copy-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::copy(path, &copy).unwrap();
    let s = open(&copy);
    assert!(
        matches!(s.started(), Started::Scan { .. }),
        "{}",
        s.started()
    );
    (s, copy)
}

fn fill(s: &mut Store, ids: std::ops::Range<u64>, version: u64, len: usize) {
    for id in ids {
        let meta = format!("v{version}");
        s.put(&key(id), meta.as_bytes(), &payload(id, version, len))
            .unwrap();
    }
}

#[test]
fn a_start_reads_the_directory_and_rolls_forward_what_came_after() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let mut s = open(&path);
    assert_eq!(s.started(), &Started::Formatted);
    fill(&mut s, 0..20, 1, 5000);
    s.save_directory().unwrap();
    // After the directory: new keys, new versions, a removal; past the ring's end, and the
    // FIFO pops entries the directory named.
    fill(&mut s, 20..40, 1, 7000);
    fill(&mut s, 30..35, 2, 3000);
    assert!(s.remove(&key(34)).unwrap());
    let before = served(&mut s, 50);
    let (used, next, len) = (s.used(), s.next_seq(), s.len());
    drop(s);

    let mut s = open(&path);
    let Started::Directory {
        slots,
        rolled_forward,
    } = s.started().clone()
    else {
        panic!("{}", s.started());
    };
    assert_eq!(slots, 20);
    assert_eq!(rolled_forward, 25);
    assert_eq!((s.used(), s.next_seq(), s.len()), (used, next, len));
    assert_eq!(served(&mut s, 50), before);
    let (mut scan, _) = scanned_copy(&path, dir.path());
    assert_eq!(served(&mut scan, 50), before);
    // The index gives every live entry's payload length without a read (what a cluster node
    // registers its pieces from), the same from the directory as from the scan.
    let lens: Vec<(u64, u64)> = s.live_seqs().map(|(seq, _, len)| (seq, len)).collect();
    assert_eq!(lens.len(), len);
    assert_eq!(
        lens,
        scan.live_seqs()
            .map(|(seq, _, len)| (seq, len))
            .collect::<Vec<_>>()
    );
    let want = |id: u64| match id {
        0..20 => 5000,
        30..35 => 3000,
        _ => 7000,
    };
    for (seq, tag, len) in s.live_seqs() {
        let id = (0..40).find(|&i| key(i).tag() == tag).unwrap();
        assert_eq!(len, want(id), "key {id} at {seq}");
    }
    // Both go on alike: the same evictions for the same puts.
    for id in 50..60 {
        let k = key(id);
        let a = s.put(&k, b"x", &payload(id, 3, 9000)).unwrap();
        let b = scan.put(&k, b"x", &payload(id, 3, 9000)).unwrap();
        assert_eq!(a, b);
    }
}

#[test]
fn a_removal_after_the_directory_is_never_served() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let mut s = open(&path);
    fill(&mut s, 0..10, 1, 2000);
    s.save_directory().unwrap();
    assert!(s.remove(&key(3)).unwrap());
    drop(s);
    let mut s = open(&path);
    assert!(matches!(s.started(), Started::Directory { .. }));
    assert_eq!(s.get(&key(3)).unwrap(), None);
    assert_eq!(
        s.get(&key(4)).unwrap().unwrap().payload,
        payload(4, 1, 2000)
    );
}

/// Starts on a ring after `damage` changed it or its directory: a scan, for `reason`, serving
/// what a scan of the same ring serves (which, when only the directory was damaged, is what
/// the store served before).
fn falls_back(damage: impl FnOnce(&Path, &Path), reason: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let mut s = open(&path);
    fill(&mut s, 0..12, 1, 6000);
    s.save_directory().unwrap();
    fill(&mut s, 12..16, 1, 6000);
    let before = served(&mut s, 200);
    drop(s);
    damage(&path, dir.path());
    let (mut scan, _) = scanned_copy(&path, dir.path());
    let mut s = open(&path);
    match s.started() {
        Started::Scan { reason: r } => assert!(r.contains(reason), "{r}"),
        other => panic!("{other}"),
    }
    let after = served(&mut s, 200);
    assert_eq!(after, served(&mut scan, 200));
    if reason != "newest entry" && reason != "moved on" {
        assert_eq!(after, before);
    }
}

#[test]
fn a_torn_directory_is_refused() {
    falls_back(
        |ring, _| {
            let d = directory_path(ring);
            let len = std::fs::metadata(&d).unwrap().len();
            let f = std::fs::OpenOptions::new().write(true).open(&d).unwrap();
            f.set_len(len - 30).unwrap();
        },
        "torn",
    );
}

#[test]
fn a_damaged_directory_is_refused() {
    falls_back(
        |ring, _| flip(&directory_path(ring), 64 + 24 * 5 + 3),
        "checksum",
    );
}

#[test]
fn a_directory_of_another_ring_is_refused() {
    falls_back(
        |ring, dir| {
            let other = dir.join("other");
            let mut s = open(&other);
            fill(&mut s, 0..12, 1, 6000);
            s.save_directory().unwrap();
            drop(s);
            std::fs::copy(directory_path(&other), directory_path(ring)).unwrap();
        },
        "another ring",
    );
}

#[test]
fn a_directory_naming_entries_the_ring_lost_is_refused() {
    // The ring's newest entries never reached the disk (a directory newer than the ring):
    // here their headers are zeroed.
    falls_back(
        |ring, _| {
            let s = open(ring);
            let newest = s.live_seqs().last().unwrap().0;
            drop(s);
            let f = std::fs::OpenOptions::new().write(true).open(ring).unwrap();
            // Entries of 6000 bytes take two 4 KiB blocks; the four after the directory and
            // the directory's newest one.
            for back in 0..5u64 {
                let off = 4096 + ((newest - back - 1) * 8192) % CAP;
                f.write_all_at(&[0u8; 64], off).unwrap();
            }
        },
        "newest entry",
    );
}

#[test]
fn a_directory_goes_when_the_ring_passes_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let mut s = open(&path);
    fill(&mut s, 0..12, 1, 6000);
    s.save_directory().unwrap();
    // Almost a ring's bytes after it: still there.
    fill(&mut s, 12..44, 1, 6000);
    assert!(directory_path(&path).exists());
    // The FIFO pops the first entry written after it: it goes before that entry's bytes are
    // written over.
    fill(&mut s, 44..45, 1, 6000);
    assert!(!directory_path(&path).exists());
    drop(s);
    let s = open(&path);
    assert_eq!(
        s.started(),
        &Started::Scan {
            reason: "no directory".into()
        }
    );
}

#[test]
fn a_directory_the_ring_went_around_past_is_refused() {
    // Should an outdated directory be back (here: copied back), the walk finds the ring
    // went around since.
    falls_back(
        |ring, dir| {
            let mut s = open(ring);
            assert!(matches!(s.started(), Started::Directory { .. }));
            let kept = dir.join("kept.dir");
            std::fs::copy(directory_path(ring), &kept).unwrap();
            fill(&mut s, 100..140, 1, 6000);
            drop(s);
            std::fs::copy(&kept, directory_path(ring)).unwrap();
        },
        "moved on",
    );
}

#[test]
fn a_damaged_header_after_the_directory_ends_the_walk_there() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let mut s = open(&path);
    fill(&mut s, 0..4, 1, 3000);
    s.save_directory().unwrap();
    fill(&mut s, 4..8, 1, 3000);
    let before = served(&mut s, 8);
    let at = s.locate(&key(6)).unwrap().offset;
    drop(s);
    // A byte of entry 6's header.
    flip(&path, at + 17);
    let mut s = open(&path);
    assert_eq!(
        s.started(),
        &Started::Directory {
            slots: 4,
            rolled_forward: 2
        }
    );
    // What came before it is served as it was; it and what came after are lost, never
    // served wrong.
    let after = served(&mut s, 8);
    assert_eq!(after[..6], before[..6]);
    assert_eq!(after[6..], [None, None]);
}

#[test]
fn a_directory_write_cut_short_leaves_the_previous_one() {
    // `kill -9` during a save leaves the temporary file; the directory is the previous one.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let mut s = open(&path);
    fill(&mut s, 0..8, 1, 3000);
    s.save_directory().unwrap();
    fill(&mut s, 8..12, 1, 3000);
    let before = served(&mut s, 12);
    drop(s);
    let mut tmp = directory_path(&path).into_os_string();
    tmp.push(".tmp");
    std::fs::write(&tmp, b"ECDNDIR\0 half a directory").unwrap();
    let mut s = open(&path);
    assert_eq!(
        s.started(),
        &Started::Directory {
            slots: 8,
            rolled_forward: 4
        }
    );
    assert_eq!(served(&mut s, 12), before);
    // The next save replaces the leftover.
    s.save_directory().unwrap();
    assert!(!Path::new(&tmp).exists());
}

#[test]
fn a_format_replaces_the_old_directory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let mut s = open(&path);
    fill(&mut s, 0..4, 1, 3000);
    s.save_directory().unwrap();
    drop(s);
    let s = Store::create(StoreConfig::new(&path, CAP)).unwrap();
    assert!(s.is_empty());
    drop(s);
    // In its place, the new store's empty one: a start reads no ring.
    let s = open(&path);
    assert_eq!(
        s.started(),
        &Started::Directory {
            slots: 0,
            rolled_forward: 0
        }
    );
    assert!(s.is_empty());
}

#[test]
fn a_new_store_killed_before_its_first_save_starts_without_a_scan() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let mut s = open(&path);
    assert_eq!(s.started(), &Started::Formatted);
    fill(&mut s, 0..5, 1, 3000);
    let before = served(&mut s, 5);
    // No save: as after `kill -9`.
    drop(s);
    let mut s = open(&path);
    assert_eq!(
        s.started(),
        &Started::Directory {
            slots: 0,
            rolled_forward: 5
        }
    );
    assert_eq!(served(&mut s, 5), before);
}

#[derive(Clone, Debug)]
enum Op {
    Put(u64, usize),
    Remove(u64),
    Evict(u64),
    Save,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u64..24, 0usize..20_000).prop_map(|(id, len)| Op::Put(id, len)),
        1 => (0u64..24).prop_map(Op::Remove),
        1 => (0u64..24).prop_map(Op::Evict),
        1 => Just(Op::Save),
        1 => Just(Op::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// At every restart, a start from the directory serves what a scan of the same ring
    /// serves, except entries evicted (an eviction writes nothing) before the directory was
    /// saved, which a scan brings back and the directory does not; and it counts the same
    /// bytes in the ring.
    #[test]
    fn a_directory_start_serves_what_a_scan_serves(ops in proptest::collection::vec(op(), 1..120)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ring");
        let mut s = open(&path);
        let mut version = 0;
        // Keys evicted since their last put.
        let mut evicted = std::collections::HashSet::new();
        for op in ops {
            match op {
                Op::Put(id, len) => {
                    version += 1;
                    evicted.remove(&id);
                    s.put(&key(id), b"m", &payload(id, version, len)).unwrap();
                }
                Op::Remove(id) => {
                    s.remove(&key(id)).unwrap();
                }
                Op::Evict(id) => {
                    evicted.insert(id);
                    s.evict(&key(id));
                }
                Op::Save => s.save_directory().unwrap(),
                Op::Reopen => {
                    drop(s);
                    let (mut scan, copy) = scanned_copy(&path, dir.path());
                    s = open(&path);
                    let from_dir = matches!(s.started(), Started::Directory { .. });
                    prop_assert!(
                        from_dir || !directory_path(&path).exists(),
                        "{}", s.started()
                    );
                    let (a, b) = (served(&mut s, 24), served(&mut scan, 24));
                    for id in 0..24 {
                        let (a, b) = (&a[id as usize], &b[id as usize]);
                        prop_assert!(
                            a == b || (a.is_none() && evicted.contains(&id)),
                            "key {}: directory {:?}, scan {:?}", id,
                            a.as_ref().map(|e| &e.0), b.as_ref().map(|e| &e.0)
                        );
                    }
                    prop_assert_eq!(s.used(), scan.used());
                    prop_assert_eq!(s.next_seq(), scan.next_seq());
                    // Payload lengths from the index: the directory's equal the scan's (save
                    // the entries the scan brings back).
                    let lens = |st: &Store| -> std::collections::HashMap<u64, u64> {
                        st.live_seqs().map(|(seq, _, len)| (seq, len)).collect()
                    };
                    let (la, lb) = (lens(&s), lens(&scan));
                    for (seq, len) in &la {
                        prop_assert_eq!(lb.get(seq), Some(len), "sequence {}", seq);
                    }
                    drop(scan);
                    std::fs::remove_file(copy).unwrap();
                }
            }
        }
    }
}
