//! How long a store takes to start, and the memory its index costs per entry (issue 65: a
//! start from the directory instead of a scan of the ring).
//!
//! `cargo bench -p ecdn-store --bench start` (environment: `ENTRIES`, default 1,000,000, a
//! comma-separated list for several runs; `PAYLOAD`, bytes per entry, default 64; `ALIGN`,
//! default 64, so that ten million small entries fit a ring of about 1.3 GB; `BENCH_DIR`,
//! where the ring goes, default the system's temp dir; `SCAN=0` skips the scan's start, which
//! reads the whole ring).
//!
//! For each count it writes a store of that many entries (keys like a node's, `/obj/<n>` with
//! chunk numbers for a third of them), saves its directory and drops it. Then, each in a fresh
//! process (this binary again, so the numbers are not the writer's): a start from the
//! directory, and a start by a scan of the whole ring (the directory moved aside). When it can
//! (root), it drops the page cache before each start. Each start reports the time to open, the
//! time to the first verified read of an entry (the oldest one), the resident memory before and
//! after the open, and the index's own heap bytes ([`Store::index_bytes`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use ecdn_store::{directory_path, EntryKey, Store, StoreConfig};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(default)
}

fn key(i: u64) -> EntryKey {
    if i.is_multiple_of(3) {
        EntryKey::chunk(format!("/obj/{i}"), (i % 4) as u16, 0)
    } else {
        EntryKey::object(format!("/obj/{i}"))
    }
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn drop_caches() -> bool {
    let _ = Command::new("sync").status();
    std::fs::write("/proc/sys/vm/drop_caches", "3\n").is_ok()
}

fn config(path: &Path, capacity: u64, align: u32) -> StoreConfig {
    StoreConfig {
        path: path.to_path_buf(),
        capacity,
        align,
    }
}

/// The child: opens the store, reads entry 0, prints one line of JSON.
fn child(path: &Path, capacity: u64, align: u32, how: &str) {
    let before = rss_kib();
    let t = Instant::now();
    let store = Store::open(config(path, capacity, align)).unwrap();
    let open_ms = t.elapsed().as_secs_f64() * 1e3;
    let e = store.lookup(&key(0)).unwrap();
    let first_ms = t.elapsed().as_secs_f64() * 1e3;
    assert!(
        matches!(e, ecdn_store::Lookup::Hit(_)),
        "entry 0 is not served"
    );
    let after = rss_kib();
    let n = store.len() as f64;
    println!(
        "{{\"start\":\"{how}\",\"entries\":{},\"open_ms\":{open_ms:.1},\"first_hit_ms\":{first_ms:.1},\
         \"rss_before_kib\":{before},\"rss_after_kib\":{after},\"rss_per_entry\":{:.1},\
         \"index_bytes_per_entry\":{:.1},\"started\":\"{}\"}}",
        store.len(),
        (after - before) as f64 * 1024.0 / n,
        store.index_bytes() as f64 / n,
        store.started()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let path = PathBuf::from(&args[i + 1]);
        let capacity: u64 = args[i + 2].parse().unwrap();
        let align: u32 = args[i + 3].parse().unwrap();
        child(&path, capacity, align, &args[i + 4]);
        return;
    }
    if args.iter().any(|a| a == "--list") {
        return;
    }
    let counts: Vec<u64> = std::env::var("ENTRIES")
        .unwrap_or_else(|_| "1000000".into())
        .split(',')
        .map(|c| c.trim().replace('_', "").parse().expect("ENTRIES: numbers"))
        .collect();
    let payload = vec![0x5au8; env_u64("PAYLOAD", 64) as usize];
    let align = env_u64("ALIGN", 64) as u32;
    let base = std::env::var("BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir());
    let scan = std::env::var("SCAN").map_or(true, |v| v != "0");
    for n in counts {
        let dir = tempfile::tempdir_in(&base).unwrap();
        let path = dir.path().join("ring");
        let fp = ecdn_store::footprint(align, &key(n), 0, payload.len());
        // Room for every entry, and a tenth more, so none is evicted.
        let capacity = (fp * n + fp * n / 10) / u64::from(align) * u64::from(align);
        let t = Instant::now();
        let mut store = Store::open(config(&path, capacity, align)).unwrap();
        for i in 0..n {
            store.put(&key(i), b"", &payload).unwrap();
        }
        let fill_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        store.save_directory().unwrap();
        let save_ms = t.elapsed().as_secs_f64() * 1e3;
        let dir_bytes = std::fs::metadata(directory_path(&path)).unwrap().len();
        drop(store);
        eprintln!(
            "{n} entries: ring {capacity} bytes written in {fill_s:.1} s; directory {dir_bytes} \
             bytes saved in {save_ms:.0} ms"
        );
        let exe = std::env::current_exe().unwrap();
        let run = |how: &str| {
            let cold = drop_caches();
            let out = Command::new(&exe)
                .args([
                    "--child",
                    path.to_str().unwrap(),
                    &capacity.to_string(),
                    &align.to_string(),
                    how,
                ])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let line = String::from_utf8_lossy(&out.stdout);
            println!(
                "{}",
                line.trim().replacen(
                    '{',
                    &format!("{{\"cold\":{cold},\"ring_bytes\":{capacity},"),
                    1
                )
            );
        };
        run("directory");
        if scan {
            let aside = dir.path().join("dir.aside");
            std::fs::rename(directory_path(&path), &aside).unwrap();
            run("scan");
            std::fs::rename(&aside, directory_path(&path)).unwrap();
        }
    }
}
