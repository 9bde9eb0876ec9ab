//! Disk-hit read path of the store: `open_entry` + `read_payload` of an 8 MiB entry whose
//! pages are in the page cache (a hot disk hit), whole and in 1 MiB batches as the node streams
//! it, and mapped (`read_payload_shared`, the zero-copy path the node streams disk hits with),
//! next to the memory bandwidth bounds (a plain copy, a CRC-32C pass).
//!
//! `cargo bench -p ecdn-store --bench read`

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use ecdn_store::{crc32c, EntryKey, Opened, SharedPayload, Store, StoreConfig};

const SIZE: usize = 8 << 20;
const BATCH: u64 = 1 << 20;

fn read(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut store =
        Store::open(StoreConfig::new(dir.path().join("ring"), 64 << 20)).expect("store");
    let payload: Vec<u8> = (0..SIZE).map(|i| (i * 31 + i / 4096) as u8).collect();
    let key = EntryKey::object("bench/obj/8MiB");
    store.put(&key, b"meta", &payload).expect("put");
    let mut g = c.benchmark_group("disk_hit_8MiB");
    g.throughput(Throughput::Bytes(SIZE as u64));
    g.sample_size(30);
    g.bench_function("open+read_payload whole", |b| {
        b.iter(|| {
            let Opened::Hit(h) = store.open_entry(&key).expect("open") else {
                panic!("missing")
            };
            black_box(store.read_payload(&h, 0..h.payload_len()).expect("read"))
        })
    });
    g.bench_function("open+read_payload 1MiB batches", |b| {
        b.iter(|| {
            let Opened::Hit(h) = store.open_entry(&key).expect("open") else {
                panic!("missing")
            };
            let mut at = 0;
            while at < h.payload_len() {
                let end = (at + BATCH).min(h.payload_len());
                black_box(store.read_payload(&h, at..end).expect("read"));
                at = end;
            }
        })
    });
    g.bench_function("open+read_payload_shared whole (mapped, verified)", |b| {
        b.iter(|| {
            let Opened::Hit(h) = store.open_entry(&key).expect("open") else {
                panic!("missing")
            };
            let p = store
                .read_payload_shared(&h, 0..h.payload_len())
                .expect("read");
            let Some(SharedPayload::Mapped(m)) = p else {
                panic!("not mapped")
            };
            black_box(m.verify_all().expect("verified"))
        })
    });
    g.bench_function("bound: memcpy into a new buffer", |b| {
        b.iter(|| black_box(payload.clone()))
    });
    g.bench_function("bound: crc32c pass", |b| {
        b.iter(|| black_box(crc32c(&payload)))
    });
    g.finish();
    let mut g = c.benchmark_group("crc32c_64KiB_block");
    g.throughput(Throughput::Bytes(1 << 16));
    g.bench_function("crc32c (in cache)", |b| {
        b.iter(|| black_box(crc32c(&payload[..1 << 16])))
    });
    g.finish();
}

criterion_group!(benches, read);
criterion_main!(benches);
