//! What a durable removal costs: [`Store::remove`] writes its tombstone through an `O_DSYNC`
//! descriptor, so it waits for the disk. Times `remove` of a present key (after a put of 16 KiB,
//! not timed), of an absent key, and a plain put for comparison, on a store in
//! `ECDN_BENCH_DIR` (default: the system temporary directory, so the disk under it).
//!
//! `cargo bench -p ecdn-store --bench remove` (`ROUNDS=N` to change the 300 rounds).

use std::time::{Duration, Instant};

use ecdn_store::{EntryKey, Store, StoreConfig};

fn summary(name: &str, mut t: Vec<Duration>) {
    t.sort();
    let at = |q: f64| t[((t.len() - 1) as f64 * q).round() as usize];
    println!(
        "{name:<28} n={:<5} p50={:>9.1?} p90={:>9.1?} p99={:>9.1?} max={:>9.1?}",
        t.len(),
        at(0.5),
        at(0.9),
        at(0.99),
        t[t.len() - 1]
    );
}

fn main() {
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let dir = match std::env::var_os("ECDN_BENCH_DIR") {
        Some(d) => tempfile::tempdir_in(d),
        None => tempfile::tempdir(),
    }
    .expect("temporary directory");
    println!("store in {}", dir.path().display());
    let mut s = Store::open(StoreConfig::new(dir.path().join("ring"), 256 << 20)).expect("open");
    let payload = vec![7u8; 16 << 10];
    let (mut put, mut remove, mut absent) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..rounds {
        let key = EntryKey::object(format!("/obj/{i}").into_bytes());
        let t = Instant::now();
        s.put(&key, b"meta", &payload).expect("put");
        put.push(t.elapsed());
        let t = Instant::now();
        assert!(s.remove(&key).expect("remove"));
        remove.push(t.elapsed());
        let t = Instant::now();
        assert!(!s.remove(&key).expect("remove"));
        absent.push(t.elapsed());
    }
    summary("put 16 KiB (page cache)", put);
    summary("remove, present (durable)", remove);
    summary("remove, absent", absent);
}
