use std::fs::OpenOptions;
mod common;
use common::flip;
use std::os::unix::fs::FileExt;
use std::path::Path;

use ecdn_store::{footprint, Entry, EntryKey, Store, StoreConfig, StoreError};

fn cfg(path: &Path, capacity: u64, align: u32) -> StoreConfig {
    StoreConfig {
        path: path.to_path_buf(),
        capacity,
        align,
    }
}

fn obj(k: &str) -> EntryKey {
    EntryKey::object(k.as_bytes())
}

/// The live entries' keys, oldest first, read back from disk (the index keeps tags only).
fn keys_of(s: &Store) -> Vec<EntryKey> {
    s.live_seqs()
        .map(|(seq, _, _)| match s.open_seq(seq).unwrap() {
            ecdn_store::Opened::Hit(h) => h.key().clone(),
            other => panic!("entry {seq}: {other:?}"),
        })
        .collect()
}

fn payload(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn entry(meta: &[u8], payload: Vec<u8>) -> Entry {
    Entry {
        meta: meta.to_vec(),
        payload,
    }
}

#[test]
fn round_trip_objects_and_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let mut s = Store::open(StoreConfig::new(&path, 1 << 20)).unwrap();
    assert_eq!(s.capacity(), 1 << 20);
    assert_eq!(s.align(), 4096);
    let o = obj("/a.jpg");
    let c0 = EntryKey::chunk("/a.jpg", 0, 0);
    let c1 = EntryKey::chunk("/a.jpg", 0, 1);
    let c2 = EntryKey::chunk("/a.jpg", 2, 1);
    s.put(&o, b"content-type: image/jpeg", &payload(1, 10_000))
        .unwrap();
    s.put(&c0, b"m0", &payload(2, 3000)).unwrap();
    s.put(&c1, b"", &payload(3, 0)).unwrap();
    s.put(&c2, b"m2", &payload(4, 1)).unwrap();
    assert_eq!(s.len(), 4);
    assert_eq!(
        s.get(&o).unwrap(),
        Some(entry(b"content-type: image/jpeg", payload(1, 10_000)))
    );
    assert_eq!(s.get(&c0).unwrap(), Some(entry(b"m0", payload(2, 3000))));
    assert_eq!(s.get(&c1).unwrap(), Some(entry(b"", vec![])));
    assert_eq!(s.get(&c2).unwrap(), Some(entry(b"m2", payload(4, 1))));
    assert_eq!(s.get(&EntryKey::chunk("/a.jpg", 1, 0)).unwrap(), None);
    assert_eq!(s.get(&obj("/b")).unwrap(), None);
    assert_eq!(
        s.read_range(&o, 100..110).unwrap(),
        Some(payload(1, 10_000)[100..110].to_vec())
    );
    assert!(matches!(
        s.read_range(&o, 9_990..10_001),
        Err(StoreError::BadRange { .. })
    ));
    let fp = footprint(4096, &o, 24, 10_000);
    assert_eq!(fp, 12_288);
    assert_eq!(s.locate(&o).unwrap().footprint, fp);
    assert_eq!(s.used(), fp + 3 * 4096);
    s.sync().unwrap();
}

#[test]
fn eviction_is_fifo_and_hits_do_not_matter() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let mut s = Store::open(cfg(&path, 4 * 512, 512)).unwrap();
    for i in 0..4 {
        let out = s.put(&obj(&format!("k{i}")), b"", &[i as u8; 100]).unwrap();
        assert!(out.evicted.is_empty());
        assert_eq!(out.footprint, 512);
    }
    // A hit on the oldest does not protect it.
    assert!(s.get(&obj("k0")).unwrap().is_some());
    let out = s.put(&obj("k4"), b"", &[4; 100]).unwrap();
    assert_eq!(out.evicted, vec![(obj("k0").tag(), 512)]);
    // Two blocks: evicts the next two oldest.
    let out = s.put(&obj("big"), b"", &[9; 600]).unwrap();
    assert_eq!(out.footprint, 1024);
    assert_eq!(
        out.evicted,
        vec![(obj("k1").tag(), 512), (obj("k2").tag(), 512)]
    );
    let keys: Vec<_> = keys_of(&s);
    assert_eq!(keys, vec![obj("k3"), obj("k4"), obj("big")]);
    assert_eq!(s.get(&obj("k0")).unwrap(), None);
    assert_eq!(s.get(&obj("big")).unwrap().unwrap().payload, vec![9; 600]);
    // A full-ring entry evicts everything.
    // Header, 4-byte key, 4-byte block table, payload.
    let out = s.put(&obj("full"), b"", &[1; 2048 - 64 - 4 - 4]).unwrap();
    assert_eq!(out.footprint, 2048);
    assert_eq!(out.evicted.len(), 3);
    assert_eq!(s.len(), 1);
    assert_eq!(s.get(&obj("full")).unwrap().unwrap().payload.len(), 1976);
}

#[test]
fn entries_straddle_the_end_and_survive_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let c = cfg(&path, 5 * 512, 512);
    let mut s = Store::open(c.clone()).unwrap();
    // 2 + 2 blocks, then a 2-block entry must wrap: it starts at block 4 and ends in block 0.
    s.put(&obj("a"), b"ma", &payload(1, 900)).unwrap();
    s.put(&obj("b"), b"mb", &payload(2, 900)).unwrap();
    let out = s.put(&obj("c"), b"mc", &payload(3, 900)).unwrap();
    assert_eq!(out.evicted, vec![(obj("a").tag(), 1024)]);
    let loc = s.locate(&obj("c")).unwrap();
    assert_eq!(loc.offset, 512 + 4 * 512);
    assert_eq!(
        s.get(&obj("c")).unwrap(),
        Some(entry(b"mc", payload(3, 900)))
    );
    drop(s);
    let mut s = Store::open(c).unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(s.used(), 2048);
    assert_eq!(keys_of(&s), vec![obj("b"), obj("c")]);
    assert_eq!(
        s.get(&obj("b")).unwrap(),
        Some(entry(b"mb", payload(2, 900)))
    );
    assert_eq!(
        s.get(&obj("c")).unwrap(),
        Some(entry(b"mc", payload(3, 900)))
    );
    // The next write continues at the head, after "c".
    let out = s.put(&obj("d"), b"", &payload(4, 10)).unwrap();
    assert_eq!(out.seq, loc.seq + 1);
    assert_eq!(s.locate(&obj("d")).unwrap().offset, 512 + 512);
    assert!(out.evicted.is_empty());
    assert_eq!(s.used(), 2560);
}

#[test]
fn an_entry_whose_prefix_outgrows_the_first_read_opens_whole() {
    // The store opens an entry with one read of its first 16 KiB; metadata of 20,000 bytes
    // (and a block table) takes a second read, across the ring's end too.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let c = cfg(&path, 64 * 1024, 512);
    let mut s = Store::open(c.clone()).unwrap();
    let meta: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
    for round in 0..3u8 {
        let key = obj(&format!("big{round}"));
        s.put(&key, &meta, &payload(round, 30_000)).unwrap();
        assert_eq!(
            s.get(&key).unwrap(),
            Some(entry(&meta, payload(round, 30_000)))
        );
    }
    drop(s);
    let mut s = Store::open(c).unwrap();
    assert_eq!(
        s.get(&obj("big2")).unwrap(),
        Some(entry(&meta, payload(2, 30_000)))
    );
}

#[test]
fn restart_keeps_contents_versions_and_removals() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let c = cfg(&path, 64 * 1024, 1024);
    let mut s = Store::open(c.clone()).unwrap();
    for i in 0..40u8 {
        s.put(
            &obj(&format!("k{}", i % 17)),
            &[i],
            &payload(i, 500 + 97 * i as usize),
        )
        .unwrap();
    }
    s.put(&EntryKey::chunk("k1", 3, 4), b"chunk", &payload(7, 777))
        .unwrap();
    assert!(s.remove(&obj("k5")).unwrap());
    assert!(!s.remove(&obj("k5")).unwrap());
    let keys: Vec<EntryKey> = keys_of(&s);
    let contents: Vec<_> = keys.iter().map(|k| s.get(k).unwrap().unwrap()).collect();
    let (used, live, next) = (s.used(), s.live_bytes(), s.next_seq());
    assert!(
        used > live,
        "replaced versions and the removal leave ghosts"
    );
    s.sync().unwrap();
    drop(s);

    let mut s = Store::open(c).unwrap();
    assert_eq!(keys_of(&s), keys);
    assert_eq!((s.used(), s.live_bytes(), s.next_seq()), (used, live, next));
    for (k, e) in keys.iter().zip(&contents) {
        assert_eq!(s.get(k).unwrap().as_ref(), Some(e));
    }
    assert_eq!(s.get(&obj("k5")).unwrap(), None);
    // k3 was last written at i = 37.
    assert_eq!(s.get(&obj("k3")).unwrap().unwrap().meta, vec![37]);
}

#[test]
fn flipped_payload_byte_is_never_served_and_others_survive() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let c = cfg(&path, 16 * 512, 512);
    let mut s = Store::open(c.clone()).unwrap();
    for i in 0..5u8 {
        s.put(&obj(&format!("k{i}")), b"meta", &payload(i, 700))
            .unwrap();
    }
    let loc = s.locate(&obj("k2")).unwrap();
    flip(&path, loc.offset + 64 + 2 + 4 + 300);
    // At run time: the checksum catches it and the entry is dropped.
    assert_eq!(s.get(&obj("k2")).unwrap(), None);
    assert!(!s.contains(&obj("k2")));
    assert_eq!(s.get(&obj("k2")).unwrap(), None);
    assert_eq!(s.len(), 4);
    let used = s.used();
    drop(s);
    // After a restart: still dropped, its footprint still held, older and newer entries kept.
    let mut s = Store::open(c).unwrap();
    assert_eq!(s.get(&obj("k2")).unwrap(), None);
    assert_eq!(s.used(), used);
    for i in [0u8, 1, 3, 4] {
        assert_eq!(
            s.get(&obj(&format!("k{i}"))).unwrap(),
            Some(entry(b"meta", payload(i, 700)))
        );
    }
}

#[test]
fn flipped_key_or_meta_byte_detected_at_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let c = cfg(&path, 16 * 512, 512);
    let mut s = Store::open(c.clone()).unwrap();
    for i in 0..4u8 {
        s.put(&obj(&format!("k{i}")), b"meta", &payload(i, 100))
            .unwrap();
    }
    // Corrupt k1's key ("k1" -> other bytes) and k2's metadata.
    flip(&path, s.locate(&obj("k1")).unwrap().offset + 64 + 1);
    flip(&path, s.locate(&obj("k2")).unwrap().offset + 64 + 2 + 1);
    drop(s);
    let mut s = Store::open(c).unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(s.get(&obj("k1")).unwrap(), None);
    assert_eq!(s.get(&obj("k2")).unwrap(), None);
    assert!(s.get(&obj("k0")).unwrap().is_some());
    assert!(s.get(&obj("k3")).unwrap().is_some());
}

#[test]
fn flipped_header_byte_drops_that_entry_and_older_ones_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let c = cfg(&path, 16 * 512, 512);
    let mut s = Store::open(c.clone()).unwrap();
    for i in 0..5u8 {
        s.put(&obj(&format!("k{i}")), b"", &payload(i, 300))
            .unwrap();
    }
    // Payload length field of k2's header.
    flip(&path, s.locate(&obj("k2")).unwrap().offset + 17);
    assert_eq!(s.get(&obj("k2")).unwrap(), None);
    assert!(s.get(&obj("k1")).unwrap().is_some());
    drop(s);
    // The scan's rule (without the directory, whose walk would end at k2 instead and keep the
    // older ones: `tests/directory.rs`).
    std::fs::remove_file(ecdn_store::directory_path(&path)).unwrap();
    let mut s = Store::open(c).unwrap();
    for k in ["k0", "k1", "k2"] {
        assert_eq!(s.get(&obj(k)).unwrap(), None);
    }
    assert!(s.get(&obj("k3")).unwrap().is_some());
    assert!(s.get(&obj("k4")).unwrap().is_some());
    assert_eq!(s.used(), 1024);
}

#[test]
fn torn_final_write_is_dropped_on_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let c = cfg(&path, 32 * 512, 512);
    let mut s = Store::open(c.clone()).unwrap();
    for i in 0..3u8 {
        s.put(&obj(&format!("k{i}")), b"m", &payload(i, 1500))
            .unwrap();
    }
    let last = s.locate(&obj("k2")).unwrap();
    drop(s);
    // The crash wrote the header and the first 1000 bytes only (the rest is stale zeros).
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all_at(&vec![0u8; 1024], last.offset + 1000)
        .unwrap();
    drop(f);
    let mut s = Store::open(c.clone()).unwrap();
    assert_eq!(s.get(&obj("k2")).unwrap(), None);
    assert_eq!(s.len(), 2);
    assert_eq!(
        s.get(&obj("k1")).unwrap().unwrap().payload,
        payload(1, 1500)
    );
    // The store goes on writing after the torn entry.
    s.put(&obj("k3"), b"", b"x").unwrap();
    drop(s);
    let mut s = Store::open(c).unwrap();
    assert_eq!(s.get(&obj("k3")).unwrap().unwrap().payload, b"x".to_vec());
    assert_eq!(s.get(&obj("k2")).unwrap(), None);
    assert_eq!(s.len(), 3);
}

#[test]
fn truncated_file_drops_the_cut_entry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let c = cfg(&path, 32 * 512, 512);
    let mut s = Store::open(c.clone()).unwrap();
    s.put(&obj("a"), b"", &payload(1, 1000)).unwrap();
    s.put(&obj("b"), b"", &payload(2, 1000)).unwrap();
    let b = s.locate(&obj("b")).unwrap();
    drop(s);
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(b.offset + 200).unwrap();
    drop(f);
    let mut s = Store::open(c).unwrap();
    assert_eq!(s.get(&obj("b")).unwrap(), None);
    assert_eq!(s.get(&obj("a")).unwrap().unwrap().payload, payload(1, 1000));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 33 * 512);
}

#[test]
fn bad_configs_and_sizes_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    for (cap, align) in [
        (0, 512),
        (1000, 512),
        (4096, 1000),
        (4096, 32),
        (1 << 22, 1 << 21),
    ] {
        assert!(
            matches!(
                Store::open(cfg(&path, cap, align)),
                Err(StoreError::BadConfig(_))
            ),
            "{cap} {align}"
        );
    }
    let mut s = Store::open(cfg(&path, 4096, 512)).unwrap();
    let err = s.put(&obj("x"), b"", &[0; 4096]).unwrap_err();
    assert!(matches!(
        err,
        StoreError::TooLarge {
            footprint: 4608,
            capacity: 4096
        }
    ));
    assert!(err.to_string().contains("4608"));
    drop(s);
    assert!(matches!(
        Store::open(cfg(&path, 8192, 512)),
        Err(StoreError::ConfigMismatch { .. })
    ));
    assert!(matches!(
        Store::open(cfg(&path, 4096, 1024)),
        Err(StoreError::ConfigMismatch { .. })
    ));
    // Formatting anew is allowed explicitly.
    let s = Store::create(cfg(&path, 8192, 512)).unwrap();
    assert_eq!(s.capacity(), 8192);
    drop(s);

    let junk = dir.path().join("junk");
    std::fs::write(&junk, b"definitely not a store").unwrap();
    let err = Store::open(cfg(&junk, 4096, 512)).unwrap_err();
    assert!(matches!(err, StoreError::NotAStore { .. }), "{err}");
    assert!(err.to_string().contains("junk"));

    let missing = dir.path().join("no/such/dir/ring");
    let err = Store::open(cfg(&missing, 4096, 512)).unwrap_err();
    assert!(matches!(err, StoreError::Io { .. }));
    assert!(err.to_string().contains("no/such/dir"), "{err}");
}

#[test]
fn entries_of_another_store_are_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let c = cfg(&path, 8 * 512, 512);
    let mut s = Store::open(c.clone()).unwrap();
    s.put(&obj("a"), b"", b"1").unwrap();
    drop(s);
    // Re-format: the old entry bytes are gone with the truncation, and even copied back in
    // they would carry the old store id.
    let mut s = Store::create(c.clone()).unwrap();
    assert!(s.is_empty());
    assert_eq!(s.get(&obj("a")).unwrap(), None);
    s.put(&obj("b"), b"", b"2").unwrap();
    drop(s);
    let mut s = Store::open(c).unwrap();
    assert_eq!(s.len(), 1);
    assert!(s.get(&obj("b")).unwrap().is_some());
}

#[test]
fn a_cached_copy_of_the_store_itself_does_not_confuse_the_scan() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let c = cfg(&path, 64 * 512, 512);
    let mut s = Store::open(c.clone()).unwrap();
    for i in 0..4u8 {
        s.put(&obj(&format!("k{i}")), b"m", &payload(i, 700))
            .unwrap();
    }
    s.remove(&obj("k1")).unwrap();
    // An object whose payload is the raw ring so far, placed so that the copied headers land
    // on aligned offsets: valid headers, checksums and store id, but not part of the log.
    let image = std::fs::read(&path).unwrap()[512..512 + s.used() as usize].to_vec();
    let key = obj("img");
    let pad = 512 - 64 - key.bytes().len() - 1;
    let mut body = vec![0xAA; pad];
    body.extend_from_slice(&image);
    s.put(&key, b"i", &body).unwrap();
    s.put(&obj("k0"), b"m2", b"new version").unwrap();
    let keys: Vec<_> = keys_of(&s);
    let (used, live) = (s.used(), s.live_bytes());
    drop(s);
    let mut s = Store::open(c).unwrap();
    assert_eq!(keys_of(&s), keys);
    assert_eq!((s.used(), s.live_bytes()), (used, live));
    assert_eq!(s.get(&obj("k1")).unwrap(), None);
    assert_eq!(
        s.get(&obj("k0")).unwrap().unwrap().payload,
        b"new version".to_vec()
    );
    assert_eq!(s.get(&key).unwrap().unwrap().payload, body);
}

#[test]
fn ranges_verify_only_their_blocks_and_a_bad_block_is_never_served() {
    use ecdn_store::Opened;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let mut s = Store::open(cfg(&path, 4 << 20, 4096)).unwrap();
    let block = 1u64 << ecdn_store::BLOCK_SHIFT;
    let data = payload(7, (3 * block + 1000) as usize); // 4 blocks, the last one short
    s.put(&obj("v"), b"m", &data).unwrap();
    let Opened::Hit(h) = s.open_entry(&obj("v")).unwrap() else {
        panic!("entry not found")
    };
    assert_eq!(
        (h.payload_len(), h.block_size(), h.meta()),
        (data.len() as u64, block, &b"m"[..])
    );
    for r in [
        0..0,
        0..1,
        5..block + 3,
        block..2 * block,
        3 * block - 1..data.len() as u64,
    ] {
        let got = s.read_payload(&h, r.clone()).unwrap().unwrap();
        assert_eq!(got, data[r.start as usize..r.end as usize], "{r:?}");
    }
    assert!(matches!(
        s.read_payload(&h, 10..data.len() as u64 + 1),
        Err(StoreError::BadRange { .. })
    ));
    // Corrupt one byte of block 2: ranges inside blocks 0, 1 and 3 still read, any range
    // touching block 2 is refused, and so is the whole entry.
    let loc = s.locate(&obj("v")).unwrap();
    let payload_start = loc.offset + 64 + 1 + 1 + 4 * 4;
    flip(&path, payload_start + 2 * block + 17);
    assert!(s.read_payload(&h, 0..2 * block).unwrap().is_some());
    assert!(s
        .read_payload(&h, 3 * block..3 * block + 10)
        .unwrap()
        .is_some());
    assert!(s
        .read_payload(&h, 2 * block - 1..2 * block + 1)
        .unwrap()
        .is_none());
    assert!(matches!(
        s.lookup(&obj("v")).unwrap(),
        ecdn_store::Lookup::Corrupt { .. }
    ));
    assert_eq!(
        s.read_range(&obj("v"), 2 * block..2 * block + 5).unwrap(),
        None
    );
    assert!(!s.contains(&obj("v")), "a corrupt entry is dropped");
    // A handle outlives its entry: once replaced, it reads nothing.
    s.put(&obj("w"), b"", b"first").unwrap();
    let Opened::Hit(old) = s.open_entry(&obj("w")).unwrap() else {
        panic!("entry not found")
    };
    s.put(&obj("w"), b"", b"second").unwrap();
    assert_eq!(s.read_payload(&old, 0..5).unwrap(), None);
}

/// The bytes of a [`SharedPayload`] after full verification, or `None` when a block fails.
fn shared_bytes(p: ecdn_store::SharedPayload) -> Option<Vec<u8>> {
    match p {
        ecdn_store::SharedPayload::Owned(v) => Some(v),
        ecdn_store::SharedPayload::Mapped(m) => {
            let (map, r) = m.verify_all()?;
            Some(map[r].to_vec())
        }
    }
}

#[test]
fn mapped_reads_return_exactly_the_range_and_verify_lazily() {
    use ecdn_store::{Opened, SharedPayload};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    // align 64: payloads start and end in the middle of pages and blocks.
    let mut s = Store::open(cfg(&path, 4 << 20, 64)).unwrap();
    let block = 1u64 << ecdn_store::BLOCK_SHIFT;
    let data = payload(3, (5 * block + 333) as usize);
    s.put(&obj("a"), b"meta", b"x").unwrap();
    s.put(&obj("v"), b"meta", &data).unwrap();
    let Opened::Hit(h) = s.open_entry(&obj("v")).unwrap() else {
        panic!("entry not found")
    };
    let len = data.len() as u64;
    for r in [
        0..1,
        0..len,
        7..block,
        block - 1..block + 1,
        2 * block..4 * block,
        len - 1..len,
    ] {
        let p = s.read_payload_shared(&h, r.clone()).unwrap().unwrap();
        assert!(matches!(p, SharedPayload::Mapped(_)), "{r:?} is mapped");
        assert_eq!(
            shared_bytes(p).unwrap(),
            data[r.start as usize..r.end as usize]
        );
    }
    assert_eq!(s.mapped_reads(), 0, "no reader holds a mapping");
    assert!(matches!(
        s.read_payload_shared(&h, 0..len + 1),
        Err(StoreError::BadRange { .. })
    ));

    // Pieces come out in order, verified one step at a time: with block 3 corrupt, blocks
    // 0..3 are cleared and the step reaching block 3 fails.
    let loc = s.locate(&obj("v")).unwrap();
    let payload_start = loc.offset + 64 + 1 + 4 + 4 * 6;
    flip(&path, payload_start + 3 * block + 5);
    let Some(SharedPayload::Mapped(m)) = s.read_payload_shared(&h, 10..len).unwrap() else {
        panic!("not mapped")
    };
    let (map, mut v) = m.into_parts();
    let mut cleared = Vec::new();
    let failed = loop {
        match v.next(&map, block as usize) {
            Some(Ok(r)) => cleared.extend_from_slice(&map[r]),
            Some(Err(ecdn_store::BadBlock)) => break true,
            None => break false,
        }
    };
    assert!(failed, "the corrupt block is caught");
    assert_eq!(cleared, data[10..3 * block as usize]);
    assert_eq!(
        v.next(&map, block as usize),
        None,
        "nothing after a bad block"
    );
}

#[test]
fn a_mapped_read_keeps_its_bytes_while_the_ring_overwrites_them() {
    use ecdn_store::{Opened, SharedPayload};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let mut s = Store::open(cfg(&path, 1 << 20, 4096)).unwrap();
    let old = payload(9, 300_000);
    s.put(&obj("old"), b"", &old).unwrap();
    let Opened::Hit(h) = s.open_entry(&obj("old")).unwrap() else {
        panic!("entry not found")
    };
    let Some(SharedPayload::Mapped(m)) = s.read_payload_shared(&h, 1000..250_000).unwrap() else {
        panic!("not mapped")
    };
    let (map, mut v) = m.into_parts();
    // A second read of the same range reuses the mapping (no new mmap).
    let Some(SharedPayload::Mapped(again)) = s.read_payload_shared(&h, 1000..250_000).unwrap()
    else {
        panic!("not mapped")
    };
    assert_eq!(again.verify_all().unwrap().0.as_ptr(), map.as_ptr());
    // Half the bytes cleared (and "sent"), then the ring wraps over the entry several times.
    let first = v.next(&map, 128 << 10).unwrap().unwrap();
    assert_eq!(map[first.clone()], old[1000..1000 + first.len()]);
    for i in 0..12u8 {
        s.put(&obj(&format!("new{i}")), b"", &payload(100 + i, 200_000))
            .unwrap();
    }
    assert!(!s.contains(&obj("old")), "the entry was evicted");
    assert_eq!(s.read_payload_shared(&h, 0..10).unwrap().map(|_| ()), None);
    // The reader still sees the old bytes, and they still verify.
    let mut rest = Vec::new();
    while let Some(r) = v.next(&map, 128 << 10) {
        rest.extend_from_slice(&map[r.unwrap()]);
    }
    assert_eq!(rest, old[first.end + 1000 - first.start..250_000]);
    assert_eq!(s.mapped_reads(), 1);
    drop(map);
    assert_eq!(s.mapped_reads(), 0);
    // The new entries were written intact, and read mapped they are the new bytes.
    for i in 10..12u8 {
        let key = obj(&format!("new{i}"));
        assert!(s.get(&key).unwrap().unwrap().payload == payload(100 + i, 200_000));
        let Opened::Hit(h) = s.open_entry(&key).unwrap() else {
            panic!("entry not found")
        };
        let p = s.read_payload_shared(&h, 0..200_000).unwrap().unwrap();
        assert!(shared_bytes(p).unwrap() == payload(100 + i, 200_000));
    }
}

/// Whether this process may lock `bytes` of memory: with `CAP_IPC_LOCK` (bit 14 of
/// `CapEff`), or within `RLIMIT_MEMLOCK`.
fn may_lock(bytes: usize) -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let caps = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
        .unwrap();
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid rlimit to fill.
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) },
        0
    );
    caps & (1 << 14) != 0
        || limit.rlim_cur == libc::RLIM_INFINITY
        || limit.rlim_cur >= 2 * bytes as u64
}

/// A hot range's mapping is locked in memory at its first reuse, and its blocks that pass
/// then are not checked again (`mapped.rs`, "Verified once, while locked"). A process that may
/// not lock memory checks every block every time.
#[test]
fn a_hot_range_is_checked_once_while_its_pages_are_locked() {
    use ecdn_store::{Opened, SharedPayload};
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(cfg(&dir.path().join("ring"), 4 << 20, 4096)).unwrap();
    let block = 1usize << ecdn_store::BLOCK_SHIFT;
    let data = payload(4, 5 * block + 100);
    s.put(&obj("hot"), b"", &data).unwrap();
    let Opened::Hit(h) = s.open_entry(&obj("hot")).unwrap() else {
        panic!("entry not found")
    };
    // Reads the range as a sender does; its bytes, whether the mapping is locked, and how
    // many blocks were cleared without a checksum.
    let read = |r: std::ops::Range<u64>| {
        let Some(SharedPayload::Mapped(m)) = s.read_payload_shared(&h, r).unwrap() else {
            panic!("not mapped")
        };
        let (map, mut v) = m.into_parts();
        let mut got = Vec::new();
        while let Some(r) = v.next(&map, block) {
            got.extend_from_slice(&map[r.unwrap()]);
        }
        (got, map.is_locked(), v.skipped())
    };
    let all = 0..data.len() as u64;
    let (got, locked, skipped) = read(all.clone());
    assert!(got == data);
    assert_eq!(
        (locked, skipped),
        (false, 0),
        "a first read checks every block"
    );
    // The second read reuses the mapping and locks it: it checks every block once more.
    let (got, locked, skipped) = read(all.clone());
    assert!(got == data);
    assert_eq!(skipped, 0);
    assert_eq!(locked, may_lock(data.len()), "locked as the system allows");
    // The third clears its six blocks by their marks, when locked.
    let (got, _, skipped) = read(all.clone());
    assert!(got == data);
    assert_eq!(skipped, if locked { 6 } else { 0 });
    // Another range of the entry is another mapping: checked.
    let (got, _, skipped) = read(block as u64..2 * block as u64);
    assert!(got == data[block..2 * block]);
    assert_eq!(skipped, 0);
}

#[test]
fn a_range_wrapping_past_the_ring_end_is_read_as_a_verified_copy() {
    use ecdn_store::{Opened, SharedPayload};
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(cfg(&dir.path().join("ring"), 1 << 20, 4096)).unwrap();
    s.put(&obj("a"), b"", &payload(1, 700_000)).unwrap();
    let data = payload(2, 500_000); // starts near the end of the ring and wraps
    s.put(&obj("b"), b"", &data).unwrap();
    let Opened::Hit(h) = s.open_entry(&obj("b")).unwrap() else {
        panic!("entry not found")
    };
    let whole = s.read_payload_shared(&h, 0..500_000).unwrap().unwrap();
    assert!(matches!(whole, SharedPayload::Owned(_)));
    assert!(shared_bytes(whole).unwrap() == data);
    // A range entirely after the wrap point is mapped again.
    let tail = s
        .read_payload_shared(&h, 400_000..500_000)
        .unwrap()
        .unwrap();
    assert!(matches!(tail, SharedPayload::Mapped(_)));
    assert!(shared_bytes(tail).unwrap() == data[400_000..]);
    // A copy stops after SHARED_COPY_MAX bytes: a prefix of the range.
    let mut s = Store::open(cfg(&dir.path().join("ring2"), 4 << 20, 4096)).unwrap();
    s.put(&obj("a"), b"", &payload(1, 3_000_000)).unwrap();
    let data = payload(3, 2_500_000);
    s.put(&obj("b"), b"", &data).unwrap();
    let Opened::Hit(h) = s.open_entry(&obj("b")).unwrap() else {
        panic!("entry not found")
    };
    let SharedPayload::Owned(first) = s.read_payload_shared(&h, 5..2_500_000).unwrap().unwrap()
    else {
        panic!("a wrapping range is copied")
    };
    assert_eq!(first.len() as u64, ecdn_store::SHARED_COPY_MAX);
    assert!(first == data[5..5 + first.len()]);
}

#[test]
fn evict_drops_from_the_index_only_and_a_restart_finds_the_entry_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ring");
    let mut s = Store::open(cfg(&path, 1 << 20, 4096)).unwrap();
    s.put(&obj("a"), b"m", &payload(1, 5000)).unwrap();
    s.put(&obj("b"), b"m", &payload(2, 5000)).unwrap();
    let used = s.used();
    assert!(s.evict(&obj("a")));
    assert!(!s.evict(&obj("a")));
    assert!(!s.contains(&obj("a")));
    assert!(s.get(&obj("b")).unwrap().is_some());
    // A ghost: its bytes still count until the FIFO reaches them.
    assert_eq!(s.used(), used);
    drop(s);
    let mut s = Store::open(cfg(&path, 1 << 20, 4096)).unwrap();
    assert_eq!(s.get(&obj("a")).unwrap().unwrap().payload, payload(1, 5000));
}
