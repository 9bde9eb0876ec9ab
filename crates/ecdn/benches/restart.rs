//! How long a cluster node takes to start on a full disk of pieces, and the memory each
//! registered piece costs (issue 45: a restarted node keeps what it held).
//!
//! `cargo bench -p ecdn --bench restart` (environment: `DISK_SIZE`, the node's `--disk-size`,
//! default 8 GiB; `BENCH_DIR`, where the disk file goes, default the system's temp dir; it
//! needs `ring` bytes of free space, half again the disk size).
//!
//! It writes a node's disk file the way a node writes pieces (`ecdn_store` entries under piece
//! keys with `ecdn_cluster::piece` metadata for a (3, 1) cluster): replicas of small objects
//! (8 to 128 KiB) and chunks of coded ones (objects of 1 to 8 MiB), about half the bytes each,
//! until their payloads fill the piece policy's capacity. It then starts `ecdn node` on it
//! (with `ecdn coordinator`), and measures the time until the node answers `/_ecdn/stats`
//! with its pieces registered, the registration's own time (the node's log), and the node's
//! resident memory; the same for a node on an empty disk file of the same size (the
//! difference over the pieces is the memory per registered piece); and, when the page cache
//! can be dropped (root), the full disk's start again from a cold cache.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ecdn_cluster::piece::{Coding, PieceMeta};
use ecdn_store::{EntryKey, Store, StoreConfig};
use ecdn_trace::Rng;

const KEY: &str = "restart-bench-cluster-key-012345";
const SUB_CHUNK: u32 = 32 << 10;

/// The node's ring for a piece capacity: it must equal `ring_size` in the node's
/// `cluster/mod.rs` (else the node refuses the file: another capacity).
fn ring_size(capacity: u64) -> u64 {
    let ring = capacity + capacity / 2 + (16 << 20);
    ring / 4096 * 4096
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(args: &[&str], log: &Path) -> Proc {
    Proc(
        Command::new(env!("CARGO_BIN_EXE_ecdn"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap(),
    )
}

/// `GET path` on `port`: the body of a `200`.
fn get(port: u16, path: &str) -> Option<Vec<u8>> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    raw.starts_with(b"HTTP/1.1 200")
        .then(|| raw[end + 4..].to_vec())
}

/// Writes pieces into a store at `path` until their payloads fill `capacity` bytes: their
/// number and payload bytes.
fn fill(path: &Path, capacity: u64) -> (u64, u64) {
    let mut store = Store::open(StoreConfig::new(path, ring_size(capacity))).unwrap();
    let mut rng = Rng::new(45);
    let buf: Vec<u8> = (0..(8u32 << 20) / 3 + 1).map(|i| (i * 7) as u8).collect();
    let (mut n, mut bytes) = (0u64, 0u64);
    let http = b"content-type: application/octet-stream".to_vec();
    loop {
        let large = rng.chance(0.043);
        let key = format!("/obj/{n}");
        let (entry, meta, len) = if large {
            let size = (1 << 20) + rng.below(7 << 20);
            let chunk = (n % 4) as u16;
            let stripes = ecdn_cluster::piece::stripes(size, 3, SUB_CHUNK);
            let coding = Coding {
                k: 3,
                p: 1,
                chunk,
                sub_chunk: SUB_CHUNK,
                size,
                crcs: vec![0; 4 * stripes as usize],
                digests: Vec::new(),
            };
            let len = coding.chunk_size();
            let meta = PieceMeta {
                coding: Some(coding),
                http: http.clone(),
            };
            (EntryKey::chunk(key, chunk, 0), meta, len)
        } else {
            let len = (8 << 10) + rng.below(120 << 10);
            let meta = PieceMeta {
                coding: None,
                http: http.clone(),
            };
            (EntryKey::object(key), meta, len)
        };
        if bytes + len > capacity {
            break;
        }
        store
            .put(&entry, &meta.encode(), &buf[..len as usize])
            .unwrap();
        n += 1;
        bytes += len;
    }
    // As a node that ran saves it (every 60 s and at stop): the start reads it, not the ring.
    store.save_directory().unwrap();
    (n, bytes)
}

struct Start {
    ready: Duration,
    registration_ms: Option<u64>,
    pieces: u64,
    rss_kib: u64,
}

/// Starts node 0 on `disk` and waits until its stats answer with `want` pieces registered.
fn start(dir: &Path, cluster: &str, admin: u16, disk: &Path, capacity: u64, want: u64) -> Start {
    let log = dir.join("node.log");
    let t = Instant::now();
    let node = spawn(
        &[
            "node",
            "--cluster",
            cluster,
            "--id",
            "0",
            "--admin-listen",
            &format!("127.0.0.1:{admin}"),
            "--origin",
            "http://127.0.0.1:9",
            "--disk-path",
            disk.to_str().unwrap(),
            "--disk-size",
            &capacity.to_string(),
            "-j",
            "1",
        ],
        &log,
    );
    let pieces = loop {
        if let Some(body) = get(admin, "/_ecdn/stats") {
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
            break v["cluster"]["pieces_held"].as_u64().unwrap();
        }
        assert!(
            t.elapsed() < Duration::from_secs(600),
            "the node did not start: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let ready = t.elapsed();
    assert_eq!(pieces, want, "pieces registered");
    let status = std::fs::read_to_string(format!("/proc/{}/status", node.0.id())).unwrap();
    let rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    // "... pieces (B bytes) registered from the disk's index in N ms; ..."
    let registration_ms = text
        .split(" registered from the disk's index in ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok());
    drop(node);
    Start {
        ready,
        registration_ms,
        pieces,
        rss_kib,
    }
}

/// Drops the page cache (root only): whether it could.
fn drop_caches() -> bool {
    let _ = Command::new("sync").status();
    std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not, and must not write
    // gigabytes.
    if !std::env::args().any(|a| a == "--bench") {
        println!("restart: a benchmark; run it with `cargo bench -p ecdn --bench restart`");
        return;
    }
    let capacity: u64 = std::env::var("DISK_SIZE")
        .ok()
        .map(|s| s.parse().expect("DISK_SIZE: bytes"))
        .unwrap_or(8 << 30);
    let base: PathBuf = std::env::var_os("BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::tempdir_in(base).unwrap();
    let (coord, admin) = (free_port(), free_port());
    let mut text = format!(
        "scheme = \"c2dn\"\nk = 3\np = 1\nkey = \"{KEY}\"\ncoordinator = \"127.0.0.1:{coord}\"\n"
    );
    for i in 0..4 {
        text.push_str(&format!(
            "[[node]]\nid = {i}\nclient = \"127.0.0.1:{}\"\npeer = \"127.0.0.1:{}\"\n",
            free_port(),
            free_port()
        ));
    }
    let cluster = dir.path().join("cluster.toml");
    std::fs::write(&cluster, text).unwrap();
    let cluster = cluster.to_str().unwrap().to_string();
    let _coord = spawn(
        &["coordinator", "--cluster", &cluster],
        &dir.path().join("coord.log"),
    );

    let full = dir.path().join("full.disk");
    let t = Instant::now();
    let (n, bytes) = fill(&full, capacity);
    let ring = ring_size(capacity);
    println!(
        "disk: --disk-size {capacity} (ring {ring} bytes); {n} pieces, {bytes} payload bytes, \
         written in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let empty = dir.path().join("empty.disk");
    let report = |what: &str, s: &Start| {
        println!(
            "{what:<28} ready in {:>7.2} s; registration {:>6} ms; {:>7} pieces; RSS {:>8} KiB",
            s.ready.as_secs_f64(),
            s.registration_ms.map_or("-".to_string(), |m| m.to_string()),
            s.pieces,
            s.rss_kib
        );
    };
    // The empty disk first: its file is formatted by the node's first start, then started
    // again as a node that had held nothing.
    let first = start(dir.path(), &cluster, admin, &empty, capacity, 0);
    report("empty disk, new file", &first);
    let e = start(dir.path(), &cluster, admin, &empty, capacity, 0);
    report("empty disk, restart", &e);
    let f = start(dir.path(), &cluster, admin, &full, capacity, n);
    report("full disk, warm cache", &f);
    let f2 = start(dir.path(), &cluster, admin, &full, capacity, n);
    report("full disk, warm cache again", &f2);
    if drop_caches() {
        let c = start(dir.path(), &cluster, admin, &full, capacity, n);
        report("full disk, cold cache", &c);
        // Without its directory: the scan of the whole ring (a node killed before its first
        // save, or whose directory could not be used).
        std::fs::remove_file(ecdn_store::directory_path(&full)).unwrap();
        drop_caches();
        let c = start(dir.path(), &cluster, admin, &full, capacity, n);
        report("full disk, cold, scan", &c);
    } else {
        println!("full disk, cold cache: not measured (cannot write /proc/sys/vm/drop_caches)");
    }
    let per_piece = (f2.rss_kib.saturating_sub(e.rss_kib) * 1024) as f64 / n as f64;
    println!("memory per registered piece: {per_piece:.0} bytes (RSS, full minus empty, / pieces)");
}
