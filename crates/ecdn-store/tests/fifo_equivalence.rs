//! The store evicts exactly what the simulator's FIFO evicts over the same footprints:
//! `ecdn_policy::eviction::Fifo` for distinct keys, and `ecdn_store::RingFifo` (Fifo whose
//! removed entries keep their bytes until reached) for any mix of puts, new versions, removals
//! and restarts.

use std::collections::HashMap;

use ecdn_policy::eviction::Fifo;
use ecdn_policy::{Evicted, Eviction};
use ecdn_store::{footprint, Entry, EntryKey, KeyTag, RingFifo, Store, StoreConfig};
use proptest::prelude::*;

fn key(id: u64) -> EntryKey {
    // Every third id is a chunk of a coded object, the others whole objects.
    match id % 3 {
        0 => EntryKey::chunk(format!("obj{}", id / 3), (id % 5) as u16, id as u32),
        _ => EntryKey::object(format!("/objects/{id}")),
    }
}

/// The id whose key has tag `t` (the store reports evictions by tag).
fn id_of(t: &KeyTag) -> u64 {
    (0..1000).find(|&id| key(id).tag() == *t).unwrap()
}

fn data(id: u64, version: u64, len: usize) -> Entry {
    Entry {
        meta: format!("v{version}").into_bytes(),
        payload: (0..len)
            .map(|i| (i as u64 ^ id.wrapping_mul(7) ^ version) as u8)
            .collect(),
    }
}

const ALIGN: u32 = 512;

#[derive(Clone, Debug)]
enum Op {
    Put { id: u64, len: usize },
    Remove { id: u64 },
    Get { id: u64 },
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u64..24, 0usize..3000).prop_map(|(id, len)| Op::Put { id, len }),
        1 => (0u64..24).prop_map(|id| Op::Remove { id }),
        2 => (0u64..24).prop_map(|id| Op::Get { id }),
        1 => Just(Op::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Distinct keys, no removals: byte-for-byte the simulator's plain `Fifo`.
    #[test]
    fn store_equals_plain_fifo(
        blocks in 1u64..40,
        lens in proptest::collection::vec(0usize..6000, 1..150),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let capacity = blocks * u64::from(ALIGN);
        let mut store = Store::open(StoreConfig {
            path: dir.path().join("ring"),
            capacity,
            align: ALIGN,
        })
        .unwrap();
        let mut fifo = Fifo::new(capacity);
        for (i, &len) in lens.iter().enumerate() {
            let id = i as u64;
            let k = key(id);
            let d = data(id, 0, len);
            let fp = footprint(ALIGN, &k, d.meta.len(), len);
            if fp > capacity {
                prop_assert!(store.put(&k, &d.meta, &d.payload).is_err());
                continue;
            }
            let out = store.put(&k, &d.meta, &d.payload).unwrap();
            prop_assert_eq!(out.footprint, fp);
            let mut ev = Vec::new();
            fifo.insert(id, fp, 0, &mut ev);
            let got: Vec<Evicted> = out
                .evicted
                .iter()
                .map(|(k, size)| Evicted { id: id_of(k), size: *size })
                .collect();
            prop_assert_eq!(got, ev);
            prop_assert_eq!(store.used(), fifo.used());
            prop_assert_eq!(store.len(), fifo.len());
        }
        let mut oldest_first: Vec<u64> = fifo.iter().map(|(id, _)| id).collect();
        oldest_first.reverse();
        prop_assert_eq!(store.live_seqs().map(|(_, t, _)| id_of(&t)).collect::<Vec<_>>(), oldest_first);
    }

    /// Any mix of puts (new versions of repeated keys), removals, reads and restarts: the
    /// store's evictions equal `RingFifo`'s, and it serves exactly the latest live versions.
    #[test]
    fn store_equals_ring_fifo(
        blocks in 1u64..30,
        ops in proptest::collection::vec(op(), 1..200),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let capacity = blocks * u64::from(ALIGN);
        let cfg = StoreConfig {
            path: dir.path().join("ring"),
            capacity,
            align: ALIGN,
        };
        let mut store = Store::open(cfg.clone()).unwrap();
        let mut model = RingFifo::new(capacity);
        let mut content: HashMap<u64, Entry> = HashMap::new();
        // A second, independent model: the simulator's plain Fifo fed every write under a fresh
        // id and never told about removals; a removed or replaced write is merely marked dead,
        // and its eviction is not reported. This is the same rule as RingFifo, spelled with Fifo.
        let mut fifo = Fifo::new(capacity);
        let mut write_of: HashMap<u64, u64> = HashMap::new(); // key id -> live write id
        let mut key_of_write: HashMap<u64, u64> = HashMap::new(); // live write id -> key id
        let mut writes = 0u64;
        for (version, op) in ops.into_iter().enumerate() {
            match op {
                Op::Put { id, len } => {
                    let k = key(id);
                    let d = data(id, version as u64, len);
                    let fp = footprint(ALIGN, &k, d.meta.len(), len);
                    if fp > capacity {
                        prop_assert!(store.put(&k, &d.meta, &d.payload).is_err());
                        continue;
                    }
                    let out = store.put(&k, &d.meta, &d.payload).unwrap();
                    // What ecdn_policy::Cache does with a new version: remove, then insert.
                    model.remove(id);
                    let mut ev = Vec::new();
                    model.insert(id, fp, 0, &mut ev);
                    let got: Vec<Evicted> = out
                        .evicted
                        .iter()
                        .map(|(k, size)| Evicted { id: id_of(k), size: *size })
                        .collect();
                    prop_assert_eq!(&got, &ev);
                    for e in &ev {
                        content.remove(&e.id);
                    }
                    if let Some(w) = write_of.remove(&id) {
                        key_of_write.remove(&w);
                    }
                    writes += 1;
                    let mut fev = Vec::new();
                    fifo.insert(writes, fp, 0, &mut fev);
                    let fev: Vec<Evicted> = fev
                        .into_iter()
                        .filter_map(|e| {
                            let kid = key_of_write.remove(&e.id)?;
                            write_of.remove(&kid);
                            Some(Evicted { id: kid, size: e.size })
                        })
                        .collect();
                    prop_assert_eq!(&got, &fev);
                    write_of.insert(id, writes);
                    key_of_write.insert(writes, id);
                    content.insert(id, d);
                }
                Op::Remove { id } => {
                    let was = store.remove(&key(id)).unwrap();
                    prop_assert_eq!(was, model.remove(id).is_some());
                    content.remove(&id);
                    if let Some(w) = write_of.remove(&id) {
                        key_of_write.remove(&w);
                    }
                }
                Op::Get { id } => {
                    let got = store.get(&key(id)).unwrap();
                    prop_assert_eq!(got.as_ref(), content.get(&id));
                }
                Op::Reopen => {
                    drop(store);
                    store = Store::open(cfg.clone()).unwrap();
                }
            }
            prop_assert_eq!(store.used(), model.used());
            prop_assert_eq!(store.used(), fifo.used());
            prop_assert_eq!(store.live_bytes(), model.live_bytes());
            prop_assert_eq!(store.len(), model.len());
            prop_assert_eq!(store.live_seqs().map(|(_, t, _)| id_of(&t)).collect::<Vec<_>>(), model.iter().collect::<Vec<_>>());
        }
        for (id, d) in &content {
            let got = store.get(&key(*id)).unwrap();
            prop_assert_eq!(got.as_ref(), Some(d));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The simulator's own path: `ecdn_policy::Cache` over `RingFifo`, requests sized by
    /// footprint (a cached id requested with another footprint is a new version), next to a
    /// store that puts on every admitted miss. Same hits, same evictions.
    #[test]
    fn simulator_cache_over_ring_fifo_matches_store(
        blocks in 1u64..30,
        reqs in proptest::collection::vec((0u64..16, 0usize..2500), 1..300),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let capacity = blocks * u64::from(ALIGN);
        let mut store = Store::open(StoreConfig {
            path: dir.path().join("ring"),
            capacity,
            align: ALIGN,
        })
        .unwrap();
        let mut cache = ecdn_policy::Cache::new(Box::new(RingFifo::new(capacity)), None);
        for (i, (id, len)) in reqs.into_iter().enumerate() {
            let k = key(id);
            let d = data(id, i as u64, len);
            let fp = footprint(ALIGN, &k, d.meta.len(), len);
            let req = ecdn_policy::Request { time: i as u64, id, size: fp, next_access: -1 };
            let outcome = cache.access(&req);
            let store_hit = store.locate(&k).is_some_and(|l| l.footprint == fp);
            prop_assert_eq!(outcome.is_hit(), store_hit);
            let mut got = Vec::new();
            if !store_hit && fp > capacity {
                // Too large to admit; like Cache, drop the now stale old version.
                store.remove(&k).unwrap();
            } else if !store_hit {
                let out = store.put(&k, &d.meta, &d.payload).unwrap();
                got = out
                    .evicted
                    .iter()
                    .map(|(k, size)| Evicted { id: id_of(k), size: *size })
                    .collect();
            }
            prop_assert_eq!(cache.evicted(), &got[..]);
            cache.clear_evicted();
            prop_assert_eq!(cache.used(), store.used());
        }
    }
}
