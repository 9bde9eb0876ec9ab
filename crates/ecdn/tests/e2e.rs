//! End-to-end tests: the real `ecdn` binary (`ecdn origin`, `ecdn node`) and Debian's nginx as
//! processes on loopback, driven by `curl` and by a small HTTP/1.1 client written here.
//!
//! Every child process is held by a [`Proc`] guard that kills it when dropped, so a failing
//! assertion never leaves a server behind.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// A child process, killed (SIGKILL) and reaped when dropped.
struct Proc {
    child: Option<Child>,
}

impl Proc {
    fn spawn(cmd: &mut Command) -> Proc {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
        Proc { child: Some(child) }
    }

    /// SIGTERM, then wait (bounded) for a clean exit.
    fn terminate(mut self) {
        let mut child = self.child.take().expect("running");
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM failed");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(st) = child.try_wait().expect("wait") {
                assert!(st.success(), "exited with {st} after SIGTERM");
                return;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("did not exit within 10 s of SIGTERM");
            }
            sleep(Duration::from_millis(20));
        }
    }

    /// Waits (bounded) for the process to exit on its own.
    fn wait_exit(&mut self, timeout: Duration) {
        let child = self.child.as_mut().expect("running");
        let deadline = Instant::now() + timeout;
        while child.try_wait().expect("wait").is_none() {
            assert!(Instant::now() < deadline, "did not exit within {timeout:?}");
            sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL and reap.
    fn kill9(mut self) {
        let mut child = self.child.take().expect("running");
        child.kill().expect("kill -9");
        child.wait().expect("wait");
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A free loopback port: bind port 0, read it, release it. The tests of this file run in
/// parallel and the kernel may hand a released port out again, so a port is never handed to
/// two of them.
fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr")
            .port();
        let mut given = GIVEN.lock().unwrap();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// A parsed HTTP response.
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn x_cache(&self) -> &str {
        self.header("x-cache").unwrap_or("")
    }
}

/// One `GET` over a fresh connection (`Connection: close`), read to the end.
fn http_get(port: u16, path: &str) -> std::io::Result<Resp> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    Ok(parse_response(&raw))
}

fn parse_response(raw: &[u8]) -> Resp {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("complete response head");
    let head = std::str::from_utf8(&raw[..end]).expect("ASCII head");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().expect("status line");
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    let rest = &raw[end + 4..];
    let chunked = headers.iter().any(|(n, v)| {
        n.eq_ignore_ascii_case("transfer-encoding") && v.to_ascii_lowercase().contains("chunked")
    });
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_vec()
    };
    Resp {
        status,
        headers,
        body,
    }
}

/// Decodes a complete `chunked` body (trailers ignored).
fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("chunk size line");
        let line = std::str::from_utf8(&b[..eol]).expect("chunk size");
        let size = usize::from_str_radix(line.split(';').next().unwrap().trim(), 16)
            .expect("hex chunk size");
        b = &b[eol + 2..];
        if size == 0 {
            return out;
        }
        assert!(b.len() >= size + 2, "truncated chunk");
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

/// Polls `path` until it answers 200 (bounded: 10 s).
fn wait_ready(port: u16, path: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(r) = http_get(port, path) {
            if r.status == 200 {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "127.0.0.1:{port}{path} not ready within 10 s"
        );
        sleep(Duration::from_millis(20));
    }
}

fn ecdn() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ecdn"))
}

/// `ecdn origin` on a free port, ready.
fn start_origin(extra: &[&str]) -> (Proc, u16) {
    // A port from `free_port` can be taken before the origin binds it (another test's
    // outgoing connection may get it as its ephemeral port): the origin then exits, and it
    // starts again on another port.
    for _ in 0..3 {
        let port = free_port();
        let mut p = Proc::spawn(
            ecdn()
                .args([
                    "origin",
                    "--listen",
                    &format!("127.0.0.1:{port}"),
                    "-j",
                    "2",
                ])
                .args(extra),
        );
        if wait_ready_while_running(&mut p, port, "/obj/1?size=1") {
            return (p, port);
        }
    }
    panic!("ecdn origin exited at start on 3 ports in a row");
}

/// Polls `path` until it answers 200 (`true`), or until `p` exits (`false`); fails after 10 s.
fn wait_ready_while_running(p: &mut Proc, port: u16, path: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(r) = http_get(port, path) {
            if r.status == 200 {
                return true;
            }
        }
        let child = p.child.as_mut().expect("running");
        if child.try_wait().expect("wait").is_some() {
            return false;
        }
        assert!(
            Instant::now() < deadline,
            "127.0.0.1:{port}{path} not ready within 10 s"
        );
        sleep(Duration::from_millis(20));
    }
}

/// `ecdn node` on `port` in front of `origin_port`, ready (its health probe let through on the
/// client listener). Its admin listener is on any free port unless `extra` names one.
fn start_node(port: u16, origin_port: u16, extra: &[&str]) -> Proc {
    let admin: &[&str] = if extra.contains(&"--admin-listen") {
        &[]
    } else {
        &["--admin-listen", "127.0.0.1:0"]
    };
    let p = Proc::spawn(
        ecdn()
            .args([
                "node",
                "--client-health",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--origin",
                &format!("http://127.0.0.1:{origin_port}"),
                "-j",
                "2",
            ])
            .args(extra)
            .args(admin),
    );
    wait_ready(port, "/_ecdn/health");
    p
}

/// A disk-backed node: tiny HOC (so large objects live only on disk), a 64 MiB ring.
fn disk_args(disk: &Path) -> Vec<String> {
    vec![
        "--hoc-size".into(),
        "64KiB".into(),
        "--disk-path".into(),
        disk.to_string_lossy().into_owned(),
        "--disk-size".into(),
        "64MiB".into(),
    ]
}

fn start_disk_node(port: u16, origin_port: u16, disk: &Path) -> Proc {
    let args = disk_args(disk);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    start_node(port, origin_port, &args)
}

/// `curl -sS -D <head> -o <body> [extra] url`; returns (head text, body bytes).
fn curl(dir: &Path, name: &str, url: &str, extra: &[&str]) -> (String, Vec<u8>) {
    let head = dir.join(format!("{name}.head"));
    let body = dir.join(format!("{name}.body"));
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "20", "-D"])
        .arg(&head)
        .arg("-o")
        .arg(&body)
        .args(extra)
        .arg(url)
        .output()
        .expect("run curl (install Debian's curl)");
    assert!(
        out.status.success(),
        "curl {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let h = std::fs::read_to_string(&head).expect("curl head file");
    let b = std::fs::read(&body).unwrap_or_default();
    (h, b)
}

/// A header's value from a `curl -D` dump (the last response in it).
fn head_value(head: &str, name: &str) -> Option<String> {
    head.lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(n, _)| n.trim().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim().to_string())
        .next_back()
}

fn head_status(head: &str) -> u16 {
    head.lines()
        .rfind(|l| l.starts_with("HTTP/"))
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status line in curl head")
}

#[test]
fn curl_miss_then_hoc_hit_with_origin_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (_origin, op) = start_origin(&[]);
    let np = free_port();
    let _node = start_node(np, op, &["--hoc-size", "16MiB"]);
    let path = "/obj/42?size=300000";
    let url = format!("http://127.0.0.1:{np}{path}");

    let (h1, b1) = curl(dir.path(), "first", &url, &[]);
    let (h2, b2) = curl(dir.path(), "second", &url, &[]);
    let (ho, bo) = curl(
        dir.path(),
        "origin",
        &format!("http://127.0.0.1:{op}{path}"),
        &[],
    );
    assert_eq!(head_status(&h1), 200);
    assert_eq!(head_value(&h1, "x-cache").as_deref(), Some("MISS"), "{h1}");
    assert_eq!(
        head_value(&h2, "x-cache").as_deref(),
        Some("HIT-HOC"),
        "{h2}"
    );
    assert_eq!(head_status(&ho), 200);
    assert_eq!(bo.len(), 300_000);
    // Compare the files curl wrote, byte for byte.
    assert_eq!(
        std::fs::read(dir.path().join("first.body")).unwrap(),
        std::fs::read(dir.path().join("second.body")).unwrap()
    );
    assert!(b1 == bo, "MISS body differs from the origin's bytes");
    assert!(b2 == bo, "HIT body differs from the origin's bytes");
}

#[test]
fn curl_range_on_a_cached_object() {
    let dir = tempfile::tempdir().unwrap();
    let (_origin, op) = start_origin(&[]);
    let np = free_port();
    let _node = start_node(np, op, &["--hoc-size", "16MiB"]);
    let url = format!("http://127.0.0.1:{np}/obj/43?size=300000");
    let (h, full) = curl(dir.path(), "full", &url, &[]);
    assert_eq!(head_value(&h, "x-cache").as_deref(), Some("MISS"), "{h}");
    assert_eq!(full.len(), 300_000);

    // Exactly bytes 1000..=1999 of the full body, from the cache.
    let (hr, br) = curl(dir.path(), "range", &url, &["-r", "1000-1999"]);
    assert_eq!(head_status(&hr), 206, "{hr}");
    assert_eq!(
        head_value(&hr, "content-range").as_deref(),
        Some("bytes 1000-1999/300000")
    );
    assert!(
        head_value(&hr, "x-cache")
            .unwrap_or_default()
            .starts_with("HIT"),
        "{hr}"
    );
    assert_eq!(br.len(), 1000);
    assert!(br[..] == full[1000..2000], "range bytes differ");
}

/// Origin + disk node; GETs a 1 MiB object (MISS, then HIT-DISK) and stops the node with
/// SIGTERM. Returns what the restart needs.
struct DiskSetup {
    dir: tempfile::TempDir,
    origin: Proc,
    origin_port: u16,
    node_port: u16,
    disk: PathBuf,
    reference: Vec<u8>,
}

const DISK_PATH: &str = "/obj/7?size=1048576";

fn disk_setup() -> DiskSetup {
    let dir = tempfile::tempdir().unwrap();
    let disk = dir.path().join("ecdn.disk");
    let (origin, op) = start_origin(&[]);
    let reference = http_get(op, DISK_PATH).unwrap().body;
    assert_eq!(reference.len(), 1 << 20);
    let np = free_port();
    let node = start_disk_node(np, op, &disk);
    let r = http_get(np, DISK_PATH).unwrap();
    assert_eq!((r.status, r.x_cache()), (200, "MISS"));
    assert!(r.body == reference, "MISS bytes differ");
    // The store write completes with the origin body; poll until the disk serves it.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = http_get(np, DISK_PATH).unwrap();
        assert!(r.body == reference, "bytes differ ({})", r.x_cache());
        if r.x_cache() == "HIT-DISK" {
            break;
        }
        assert!(Instant::now() < deadline, "never became HIT-DISK");
        sleep(Duration::from_millis(20));
    }
    node.terminate();
    DiskSetup {
        dir,
        origin,
        origin_port: op,
        node_port: np,
        disk,
        reference,
    }
}

#[test]
fn restart_keeps_the_disk_cache() {
    let s = disk_setup();
    let _node = start_disk_node(s.node_port, s.origin_port, &s.disk);
    let r = http_get(s.node_port, DISK_PATH).unwrap();
    assert_eq!((r.status, r.x_cache()), (200, "HIT-DISK"));
    assert!(r.body == s.reference, "HIT-DISK bytes differ after restart");
    drop(s.origin);
    drop(s.dir);
}

#[test]
fn flipped_byte_on_disk_is_detected_and_refetched() {
    let s = disk_setup();
    // Find the payload in the ring by a 64-byte window of the object's content, flip one byte.
    let mut ring = std::fs::read(&s.disk).unwrap();
    let window = &s.reference[512 * 1024..512 * 1024 + 64];
    let at = ring
        .windows(64)
        .position(|w| w == window)
        .expect("the object's payload is in the disk file");
    assert!(
        ring[at + 64..].windows(64).all(|w| w != window),
        "window not unique"
    );
    ring[at + 32] ^= 0x5a;
    {
        use std::io::{Seek, SeekFrom};
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&s.disk)
            .unwrap();
        f.seek(SeekFrom::Start((at + 32) as u64)).unwrap();
        f.write_all(&ring[at + 32..at + 33]).unwrap();
        f.sync_all().unwrap();
    }

    let _node = start_disk_node(s.node_port, s.origin_port, &s.disk);
    let r = http_get(s.node_port, DISK_PATH).unwrap();
    assert_eq!((r.status, r.x_cache()), (200, "MISS"));
    assert!(r.body == s.reference, "refetched bytes differ");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = http_get(s.node_port, DISK_PATH).unwrap();
        assert!(r.body == s.reference, "bytes differ ({})", r.x_cache());
        if r.x_cache().starts_with("HIT") {
            break;
        }
        assert!(Instant::now() < deadline, "never became a HIT again");
        sleep(Duration::from_millis(20));
    }
    drop(s.origin);
    drop(s.dir);
}

#[test]
fn kill_9_during_a_miss_leaves_no_partial_object() {
    let dir = tempfile::tempdir().unwrap();
    let disk = dir.path().join("ecdn.disk");
    let size = 8usize << 20;
    let path = format!("/obj/99?size={size}");
    // A paced origin (8 MiB takes 4 s) for the interrupted miss...
    let (_slow, slow_port) = start_origin(&["--bandwidth", "2MiB"]);
    // ...and an unpaced one (same content: a function of id and offset) for after the restart.
    let (_fast, fast_port) = start_origin(&[]);
    let np = free_port();
    let node = start_disk_node(np, slow_port, &disk);
    let mut client = Proc::spawn(
        Command::new("curl")
            .args(["-sS", "-o"])
            .arg(dir.path().join("partial.body"))
            .arg(format!("http://127.0.0.1:{np}{path}")),
    );
    sleep(Duration::from_millis(500));
    node.kill9();
    // The client saw the transfer cut short: the kill really happened mid-miss.
    client.wait_exit(Duration::from_secs(5));
    let got = std::fs::metadata(dir.path().join("partial.body")).map_or(0, |m| m.len());
    assert!(got < size as u64, "the miss finished before the kill");

    // Same port (the cache key includes Host) and disk file, fast origin.
    let _node = start_disk_node(np, fast_port, &disk);
    let reference = http_get(fast_port, &path).unwrap().body;
    assert_eq!(reference.len(), size);
    let r = http_get(np, &path).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.x_cache(), "MISS", "a partial object was kept");
    assert_eq!(r.body.len(), size);
    assert!(r.body == reference, "bytes differ");
}

/// One request with `method` and extra header lines over a fresh connection to `port`, read to
/// the end, for the site the node serves on `site_port` (its `Host`, part of the cache key): a
/// `PURGE` on the admin listener of what clients got on the client listener.
fn http_request_for(
    port: u16,
    site_port: u16,
    method: &str,
    path: &str,
    headers: &[&str],
) -> std::io::Result<Resp> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{site_port}\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("Connection: close\r\n\r\n");
    s.write_all(req.as_bytes())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    Ok(parse_response(&raw))
}

/// GETs `path` until the node serves it from its disk (bounded: 5 s), checking the bytes.
fn wait_disk_hit(port: u16, path: &str, reference: &[u8]) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = http_get(port, path).unwrap();
        assert_eq!(r.status, 200, "{}", r.x_cache());
        assert!(r.body == reference, "bytes differ ({})", r.x_cache());
        if r.x_cache() == "HIT-DISK" {
            return;
        }
        assert!(Instant::now() < deadline, "{path} never became HIT-DISK");
        sleep(Duration::from_millis(20));
    }
}

/// Runs `cmd` to its exit (bounded: it is killed and the test fails after `timeout`);
/// returns its exit status and what it wrote to stderr.
fn run_to_exit(
    cmd: &mut Command,
    dir: &Path,
    timeout: Duration,
) -> (std::process::ExitStatus, String) {
    let err_path = dir.join("run_to_exit.stderr");
    let err = std::fs::File::create(&err_path).unwrap();
    let mut p = Proc {
        child: Some(
            cmd.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(err)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}")),
        ),
    };
    p.wait_exit(timeout);
    let status = p.child.take().unwrap().wait().unwrap();
    (status, std::fs::read_to_string(&err_path).unwrap())
}

#[test]
fn a_second_node_on_the_same_disk_file_is_refused_and_the_first_keeps_serving() {
    let s = disk_setup();
    let _node = start_disk_node(s.node_port, s.origin_port, &s.disk);
    let args = disk_args(&s.disk);
    let (status, stderr) = run_to_exit(
        ecdn()
            .args([
                "node",
                "--admin-listen",
                "127.0.0.1:0",
                "--listen",
                &format!("127.0.0.1:{}", free_port()),
                "--origin",
                &format!("http://127.0.0.1:{}", s.origin_port),
            ])
            .args(&args),
        s.dir.path(),
        Duration::from_secs(10),
    );
    assert!(!status.success(), "the second node started: {stderr}");
    assert!(
        stderr.contains("is in use by another process") && stderr.contains("ecdn.disk"),
        "unclear message: {stderr}"
    );
    // The first node was not disturbed: its disk still serves the object, byte for byte.
    let r = http_get(s.node_port, DISK_PATH).unwrap();
    assert_eq!((r.status, r.x_cache()), (200, "HIT-DISK"));
    assert!(r.body == s.reference, "HIT-DISK bytes differ");
}

/// A PURGE acknowledged with 200 is durable: `kill -9` right after it, restart on the same disk
/// with the origin gone, and the purged object is not served from the disk (the origin error
/// shows through), while an object that was not purged still is.
#[test]
fn a_purge_survives_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let disk = dir.path().join("ecdn.disk");
    let (origin, op) = start_origin(&[]);
    let (np, admin) = (free_port(), free_port());
    let mut args = disk_args(&disk);
    let admin_listen = format!("127.0.0.1:{admin}");
    args.extend(
        [
            "--purge-token",
            "sekrit-purge-token",
            "--admin-listen",
            &admin_listen,
        ]
        .map(String::from),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let node = start_node(np, op, &args);
    let purged = "/obj/31?size=1048576";
    let kept = "/obj/32?size=1048576";
    let mut reference = Vec::new();
    for path in [purged, kept] {
        let body = http_get(op, path).unwrap().body;
        assert_eq!(body.len(), 1 << 20);
        let r = http_get(np, path).unwrap();
        assert_eq!((r.status, r.x_cache()), (200, "MISS"));
        wait_disk_hit(np, path, &body);
        reference.push(body);
    }
    let auth = ["Authorization: Bearer sekrit-purge-token"];
    let r = http_request_for(admin, np, "PURGE", purged, &auth).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, br#"{"purged":true}"#);
    node.kill9();
    drop(origin);

    let _node = start_node(np, op, &args);
    let r = http_get(np, purged).unwrap();
    assert!(
        !r.x_cache().starts_with("HIT"),
        "the purged object came back from the disk: {} {}",
        r.status,
        r.x_cache()
    );
    assert_ne!(r.status, 200, "served without an origin: {}", r.x_cache());
    let r = http_get(np, kept).unwrap();
    assert_eq!((r.status, r.x_cache()), (200, "HIT-DISK"));
    assert!(r.body == reference[1], "HIT-DISK bytes differ");
}

/// A loop device over a zero-filled file, detached when dropped; the test fails (through
/// [`missing`]) when loop devices cannot be set up here.
struct LoopDev {
    dev: PathBuf,
    _dir: tempfile::TempDir,
}

impl LoopDev {
    fn new(size: u64) -> LoopDev {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("img");
        std::fs::File::create(&img).unwrap().set_len(size).unwrap();
        let out = match Command::new("losetup")
            .args(["-f", "--show"])
            .arg(&img)
            .output()
        {
            Ok(o) => o,
            Err(e) => missing(format!("cannot run losetup (install mount): {e}")),
        };
        if !out.status.success() {
            missing(format!(
                "losetup -f --show failed (needs root and loop devices): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let dev = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
        LoopDev { dev, _dir: dir }
    }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
        let st = Command::new("losetup").arg("-d").arg(&self.dev).status();
        if !matches!(st, Ok(s) if s.success()) && !std::thread::panicking() {
            panic!("losetup -d {} failed: {st:?}", self.dev.display());
        }
    }
}

/// `--disk-path` on a block device: a zeroed loop device is formatted, serves disk hits, keeps
/// them across a restart; a disk size beyond the device is a clear error at start.
#[test]
fn a_node_on_a_block_device() {
    let lo = LoopDev::new(64 << 20);
    let dir = tempfile::tempdir().unwrap();
    let (_origin, op) = start_origin(&[]);
    let np = free_port();
    let dev = lo.dev.to_string_lossy().into_owned();
    let (status, stderr) = run_to_exit(
        ecdn().args([
            "node",
            "--admin-listen",
            "127.0.0.1:0",
            "--listen",
            &format!("127.0.0.1:{np}"),
            "--origin",
            &format!("http://127.0.0.1:{op}"),
            "--disk-path",
            &dev,
            "--disk-size",
            "64MiB",
        ]),
        dir.path(),
        Duration::from_secs(10),
    );
    assert!(
        !status.success(),
        "a ring as large as the device was accepted"
    );
    assert!(
        stderr.contains("the device holds 67108864 bytes"),
        "{stderr}"
    );

    let args = [
        "--hoc-size",
        "64KiB",
        "--disk-path",
        &dev,
        "--disk-size",
        "60MiB",
    ];
    let reference = http_get(op, DISK_PATH).unwrap().body;
    let node = start_node(np, op, &args);
    let r = http_get(np, DISK_PATH).unwrap();
    assert_eq!((r.status, r.x_cache()), (200, "MISS"));
    wait_disk_hit(np, DISK_PATH, &reference);
    node.terminate();
    let _node = start_node(np, op, &args);
    let r = http_get(np, DISK_PATH).unwrap();
    assert_eq!((r.status, r.x_cache()), (200, "HIT-DISK"));
    assert!(r.body == reference, "HIT-DISK bytes differ after restart");
}

/// A PURGE the disk cannot record is an error answer (`500`), counted in
/// `ecdn_disk_errors_total`, never `{"purged":false}`: the node's disk is a loop device set
/// read-only under it. Once the device is writable again, the same PURGE succeeds.
#[test]
fn a_purge_the_disk_cannot_record_is_an_error() {
    let lo = LoopDev::new(64 << 20);
    let (_origin, op) = start_origin(&[]);
    let (np, admin) = (free_port(), free_port());
    let dev = lo.dev.to_string_lossy().into_owned();
    let admin_listen = format!("127.0.0.1:{admin}");
    let args = [
        "--hoc-size",
        "64KiB",
        "--disk-path",
        &dev,
        "--disk-size",
        "60MiB",
        "--purge-token",
        "sekrit-purge-token",
        "--admin-listen",
        &admin_listen,
    ];
    let reference = http_get(op, DISK_PATH).unwrap().body;
    let _node = start_node(np, op, &args);
    assert_eq!(http_get(np, DISK_PATH).unwrap().x_cache(), "MISS");
    wait_disk_hit(np, DISK_PATH, &reference);
    let blockdev = |flag: &str| {
        let st = Command::new("blockdev").arg(flag).arg(&lo.dev).status();
        assert!(
            matches!(st, Ok(s) if s.success()),
            "blockdev {flag}: {st:?}"
        );
    };
    blockdev("--setro");
    let auth = ["Authorization: Bearer sekrit-purge-token"];
    let r = http_request_for(admin, np, "PURGE", DISK_PATH, &auth).unwrap();
    blockdev("--setrw");
    assert_eq!(r.status, 500, "{}", String::from_utf8_lossy(&r.body));
    let metrics = String::from_utf8(http_get(admin, "/_ecdn/metrics").unwrap().body).unwrap();
    let errors: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("ecdn_disk_errors_total "))
        .expect("ecdn_disk_errors_total")
        .parse()
        .unwrap();
    assert!(errors >= 1.0, "{metrics}");
    // Not acknowledged, so not forgotten: the entry is still there, and a retry purges it.
    let r = http_request_for(admin, np, "PURGE", DISK_PATH, &auth).unwrap();
    assert_eq!(
        (r.status, r.body.as_slice()),
        (200, &br#"{"purged":true}"#[..])
    );
    assert_eq!(http_get(np, DISK_PATH).unwrap().x_cache(), "MISS");
}

/// A system dependency of a test is missing: the test fails, saying what and how to get it
/// (./test.sh installs every package the tests need). A test never passes without running.
fn missing(why: String) -> ! {
    panic!("this test cannot run: {why}");
}

/// Debian's nginx, whether or not `/usr/sbin` is on `PATH`.
fn nginx_binary() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain(["/usr/sbin".into(), "/usr/local/sbin".into()])
        .map(|d| d.join("nginx"))
        .find(|p| p.is_file())
}

#[test]
fn nginx_origin_miss_hit_range_head() {
    let Some(nginx) = nginx_binary() else {
        missing("nginx is not installed (./test.sh installs nginx-light)".into());
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let www = d.join("www");
    std::fs::create_dir(&www).unwrap();
    let file: Vec<u8> = (0..200 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(www.join("file.bin"), &file).unwrap();
    let port = free_port();
    let conf = format!(
        "daemon off;\n\
         master_process off;\n\
         worker_processes 1;\n\
         pid {d}/nginx.pid;\n\
         error_log {d}/error.log;\n\
         events {{ worker_connections 64; }}\n\
         http {{\n\
           access_log off;\n\
           client_body_temp_path {d}/body;\n\
           proxy_temp_path {d}/proxy;\n\
           fastcgi_temp_path {d}/fastcgi;\n\
           uwsgi_temp_path {d}/uwsgi;\n\
           scgi_temp_path {d}/scgi;\n\
           server {{\n\
             listen 127.0.0.1:{port};\n\
             root {www};\n\
             etag on;\n\
             add_header Cache-Control \"public, max-age=3600\";\n\
           }}\n\
         }}\n",
        d = d.display(),
        www = www.display(),
    );
    std::fs::write(d.join("nginx.conf"), conf).unwrap();
    let _nginx = Proc::spawn(
        Command::new(&nginx)
            .arg("-p")
            .arg(d)
            .arg("-c")
            .arg(d.join("nginx.conf"))
            .arg("-e")
            .arg(d.join("error.log")),
    );
    wait_ready(port, "/file.bin");

    let np = free_port();
    let _node = start_node(np, port, &["--hoc-size", "16MiB"]);
    let url = format!("http://127.0.0.1:{np}/file.bin");
    let (h1, b1) = curl(d, "n1", &url, &[]);
    let (h2, b2) = curl(d, "n2", &url, &[]);
    assert_eq!(head_status(&h1), 200, "{h1}");
    assert_eq!(head_value(&h1, "x-cache").as_deref(), Some("MISS"), "{h1}");
    assert_eq!(
        head_value(&h2, "x-cache").as_deref(),
        Some("HIT-HOC"),
        "{h2}"
    );
    assert!(b1 == file, "MISS bytes differ from the file");
    assert!(b2 == file, "HIT bytes differ from the file");
    assert!(head_value(&h2, "etag").is_some(), "{h2}");

    let (hr, br) = curl(d, "nr", &url, &["-r", "1000-1999"]);
    assert_eq!(head_status(&hr), 206, "{hr}");
    assert_eq!(
        head_value(&hr, "content-range").as_deref(),
        Some("bytes 1000-1999/204800")
    );
    assert!(br[..] == file[1000..2000], "range bytes differ");

    // `curl -I` writes the head to both -D and -o, never a body.
    let (hh, bh) = curl(d, "nh", &url, &["-I"]);
    assert_eq!(head_status(&hh), 200, "{hh}");
    assert_eq!(head_value(&hh, "content-length").as_deref(), Some("204800"));
    assert!(head_value(&hh, "x-cache")
        .unwrap_or_default()
        .starts_with("HIT"));
    assert!(bh.len() < 4096 && !bh.windows(64).any(|w| w == &file[..64]));
}

/// `ecdn origin --s3` (the storage-cloud emulator, no delays) on a free port, answering.
fn start_s3_emulator() -> (Proc, u16) {
    for _ in 0..3 {
        let port = free_port();
        let mut p = Proc::spawn(ecdn().args([
            "origin",
            "--s3",
            "--s3-delays",
            "none",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "-j",
            "2",
        ]));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            // Any S3 answer will do (a missing key is a 404).
            if http_get(port, "/probe/none").is_ok() {
                return (p, port);
            }
            if p.child
                .as_mut()
                .expect("running")
                .try_wait()
                .expect("wait")
                .is_some()
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the S3 emulator did not answer within 10 s"
            );
            sleep(Duration::from_millis(20));
        }
    }
    panic!("ecdn origin --s3 exited at start on 3 ports in a row");
}

#[test]
fn an_s3_origin_read_through_the_backend_tier() {
    let (_s3, s3_port) = start_s3_emulator();
    let endpoint = format!("http://127.0.0.1:{s3_port}");
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..300_001u32).map(|i| (i * 7 + i / 255) as u8).collect();
    let file = dir.path().join("file.bin");
    std::fs::write(&file, &data).unwrap();
    // Uploaded coded by `ecdn backend put`.
    let put = ecdn()
        .args([
            "backend",
            "put",
            "--store",
            "s3://ecdn-e2e/site",
            "--endpoint",
            &endpoint,
        ])
        .args(["--strategy", "static-4-2", "videos/a.bin"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        put.status.success(),
        "{}",
        String::from_utf8_lossy(&put.stderr)
    );
    // A node whose origin is the bucket: a miss reads the coded file, a second GET hits.
    let port = free_port();
    let _node = Proc::spawn(
        ecdn()
            .env("AWS_ENDPOINT_URL", &endpoint)
            .args(["node", "--client-health", "--admin-listen", "127.0.0.1:0"])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--origin", "s3://ecdn-e2e/site", "-j", "2"]),
    );
    wait_ready(port, "/_ecdn/health");
    let miss = http_get(port, "/videos/a.bin").unwrap();
    assert_eq!((miss.status, miss.x_cache()), (200, "MISS"));
    assert!(miss.body == data, "the bytes of the miss");
    let hit = http_get(port, "/videos/a.bin").unwrap();
    assert!(hit.x_cache().starts_with("HIT"), "{}", hit.x_cache());
    assert!(hit.body == data);
    assert_eq!(http_get(port, "/videos/none.bin").unwrap().status, 404);
    // And `ecdn backend get` reads the same bytes.
    let out = dir.path().join("back.bin");
    let get = ecdn()
        .args([
            "backend",
            "get",
            "--store",
            "s3://ecdn-e2e/site",
            "--endpoint",
            &endpoint,
        ])
        .args(["videos/a.bin", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        get.status.success(),
        "{}",
        String::from_utf8_lossy(&get.stderr)
    );
    assert!(std::fs::read(&out).unwrap() == data);
    // A bad store URL is a clear error.
    let bad = ecdn()
        .args(["backend", "get", "--store", "http://x", "k"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("s3://BUCKET"));
}

/// A self-signed certificate for `name` made by `openssl` (`./test.sh` installs it), written as
/// `<file>.pem` and `<file>.key` in `dir`.
fn openssl_cert(dir: &Path, file: &str, name: &str) -> (PathBuf, PathBuf) {
    let (cert, key) = (
        dir.join(format!("{file}.pem")),
        dir.join(format!("{file}.key")),
    );
    let out = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args(["-nodes", "-days", "2", "-subj", &format!("/CN={name}")])
        .args(["-addext", &format!("subjectAltName=DNS:{name}")])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap_or_else(|e| missing(format!("openssl is needed (Debian: openssl): {e}")));
    assert!(out.status.success(), "openssl: {out:?}");
    (cert, key)
}

/// `ecdn node --tls-listen` from the command line: curl gets objects over HTTPS with HTTP/2
/// and HTTP/1.1; after the files are replaced by a new certificate and the node gets SIGHUP,
/// a new connection is served with it (curl trusting only the new one succeeds), and a broken
/// file at the next SIGHUP leaves the node serving.
#[test]
fn https_from_the_command_line_and_a_certificate_reloaded_on_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let (origin, origin_port) = start_origin(&[]);
    let (cert, key) = openssl_cert(dir.path(), "site", "site.test");
    let first_cert = dir.path().join("first.pem");
    std::fs::copy(&cert, &first_cert).unwrap();
    let (port, tls_port) = (free_port(), free_port());
    let node = start_node(
        port,
        origin_port,
        &[
            "--tls-listen",
            &format!("127.0.0.1:{tls_port}"),
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    let https = |trust: &Path, flag: &str, name: &str| -> (String, Vec<u8>) {
        let resolve = format!("site.test:{tls_port}:127.0.0.1");
        let url = format!("https://site.test:{tls_port}/obj/7?size=20000");
        curl(
            dir.path(),
            name,
            &url,
            &[
                flag,
                "--cacert",
                trust.to_str().unwrap(),
                "--resolve",
                &resolve,
            ],
        )
    };
    let (head, body) = https(&first_cert, "--http2", "h2");
    assert!(head.starts_with("HTTP/2 200"), "{head}");
    assert_eq!(body.len(), 20_000);
    let (head, _) = https(&first_cert, "--http1.1", "h1");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(head_value(&head, "x-cache").as_deref(), Some("HIT-HOC"));

    // Renewal: new files, SIGHUP; curl trusting only the new certificate connects.
    let (new_cert, _) = openssl_cert(dir.path(), "site", "site.test");
    let hup = |pid: u32| {
        let st = Command::new("kill")
            .args(["-HUP", &pid.to_string()])
            .status()
            .unwrap();
        assert!(st.success());
    };
    let pid = node.child.as_ref().unwrap().id();
    hup(pid);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = Command::new("curl")
            .args(["-sS", "-o", "/dev/null", "--max-time", "5", "--cacert"])
            .arg(&new_cert)
            .args(["--resolve", &format!("site.test:{tls_port}:127.0.0.1")])
            .arg(format!("https://site.test:{tls_port}/obj/7?size=20000"))
            .status()
            .unwrap();
        if out.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new certificate was not served"
        );
        sleep(Duration::from_millis(100));
    }
    // A broken key at the next SIGHUP: the node keeps the certificate it has.
    std::fs::write(&key, "not a key").unwrap();
    hup(pid);
    sleep(Duration::from_millis(300));
    let (head, _) = https(&new_cert, "--http2", "after");
    assert!(head.starts_with("HTTP/2 200"), "{head}");
    node.terminate();
    origin.terminate();
}
