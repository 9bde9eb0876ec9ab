//! What the multi-process tests of this crate share: the `ecdn` binary as a child process
//! that is stopped when dropped, or run to its end within a time limit, free loopback ports, a one-shot HTTP/1.1 client, and the
//! coordinator's status through `ecdn cluster status`.

// Each test binary uses its own part of this module.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// `ecdn cluster demo`'s workload before issue 37, caches that turn over within a window: the
/// demo runs written for it keep it.
pub const SMALL_CACHES: [&str; 6] = [
    "--objects",
    "2000",
    "--sizes",
    "lognormal:48KiB:1.2",
    "--disk-size",
    "8MiB",
];

/// An `ecdn` process (its stderr in a log file), killed (SIGKILL) and reaped when dropped, so
/// a failing assertion never leaves a server behind.
pub struct Proc(Option<Child>);

impl Proc {
    pub fn spawn(args: &[&str], log: &Path) -> Proc {
        let child = Command::new(env!("CARGO_BIN_EXE_ecdn"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap();
        Proc(Some(child))
    }

    /// Waits (bounded) for the process to exit by itself; its status.
    pub fn wait_exit(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let child = self.0.as_mut().unwrap();
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                return st;
            }
            assert!(Instant::now() < deadline, "did not exit within {timeout:?}");
            sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, then waits (at most 10 s) for a clean exit.
    pub fn terminate(mut self) {
        let pid = self.0.as_ref().unwrap().id();
        let status = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM failed");
        let st = self.wait_exit(Duration::from_secs(10));
        assert!(st.success(), "exited with {st} after SIGTERM");
        self.0 = None;
    }

    /// SIGKILL (`kill -9`) and reap.
    pub fn kill9(mut self) {
        let mut child = self.0.take().unwrap();
        child.kill().expect("kill -9");
        child.wait().expect("wait");
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `n` distinct free loopback ports (all bound at once, then released).
pub fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    held.iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

/// A response read to its end.
pub struct Reply {
    pub status: u16,
    /// Header lines, names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One request over a fresh connection (`Connection: close`), read to the end (the tests'
/// origin and nodes answer with a `Content-Length` or close).
pub fn request(port: u16, method: &str, path: &str, body: &[u8]) -> std::io::Result<Reply> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: demo\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )?;
    s.write_all(body)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no header end"))?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[end + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = unchunk(&body)?;
    }
    Ok(Reply {
        status,
        headers,
        body,
    })
}

/// A chunked body's bytes.
fn unchunk(mut b: &[u8]) -> std::io::Result<Vec<u8>> {
    let bad = || std::io::Error::other("bad chunked body");
    let mut out = Vec::new();
    loop {
        let line = b.windows(2).position(|w| w == b"\r\n").ok_or_else(bad)?;
        let size = std::str::from_utf8(&b[..line]).map_err(|_| bad())?;
        let size = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| bad())?;
        b = &b[line + 2..];
        if size == 0 {
            return Ok(out);
        }
        out.extend_from_slice(b.get(..size).ok_or_else(bad)?);
        b = b.get(size + 2..).ok_or_else(bad)?;
    }
}

/// One GET (`Connection: close`): the status and the body.
pub fn get(port: u16, path: &str) -> std::io::Result<(u16, Vec<u8>)> {
    request(port, "GET", path, &[]).map(|r| (r.status, r.body))
}

/// `ecdn cluster ...`: its stdout (the command must succeed).
pub fn cli(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_ecdn"))
        .arg("cluster")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ecdn cluster {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The coordinator's status (`ecdn cluster status --json`).
pub fn status(file: &str) -> serde_json::Value {
    serde_json::from_str(&cli(&["status", "--cluster", file, "--json"])).unwrap()
}

/// Waits (at most `secs`) until the coordinator's status satisfies `f`; a coordinator that
/// does not answer yet (still starting) is waited for too.
pub fn until_status(file: &str, secs: u64, what: &str, f: impl Fn(&serde_json::Value) -> bool) {
    let t = Instant::now();
    loop {
        let out = Command::new(env!("CARGO_BIN_EXE_ecdn"))
            .args(["cluster", "status", "--cluster", file, "--json"])
            .output()
            .unwrap();
        let s = if out.status.success() {
            serde_json::from_slice(&out.stdout).unwrap()
        } else {
            serde_json::Value::String(String::from_utf8_lossy(&out.stderr).into_owned())
        };
        if out.status.success() && f(&s) {
            return;
        }
        assert!(t.elapsed() < Duration::from_secs(secs), "{what}: {s:#}");
        sleep(Duration::from_millis(100));
    }
}

/// Node `id` in a status report.
pub fn node(s: &serde_json::Value, id: usize) -> &serde_json::Value {
    &s["status"]["nodes"][id]
}

/// Writes `dir/cluster.toml`: the `settings` lines, then one `[[node]]` per pair of client and
/// peer ports (ids from 0); its path.
pub fn cluster_file(dir: &Path, settings: &str, client: &[u16], peer: &[u16]) -> String {
    let mut text = settings.to_string();
    for (i, (c, p)) in client.iter().zip(peer).enumerate() {
        text.push_str(&format!(
            "[[node]]\nid = {i}\nclient = \"127.0.0.1:{c}\"\npeer = \"127.0.0.1:{p}\"\n"
        ));
    }
    let file = dir.join("cluster.toml");
    std::fs::write(&file, text).unwrap();
    file.to_str().unwrap().to_string()
}

/// The synthetic origin on `origin` and the embedded coordinator of the cluster `file`, their
/// logs in `dir`.
pub fn origin_and_coordinator(dir: &Path, origin: u16, file: &str) -> (Proc, Proc) {
    let o = Proc::spawn(
        &[
            "origin",
            "--listen",
            &format!("127.0.0.1:{origin}"),
            "-j",
            "1",
        ],
        &dir.join("origin.log"),
    );
    let c = Proc::spawn(&["coordinator", "--cluster", file], &dir.join("coord.log"));
    (o, c)
}

/// What [`cluster_node`] starts: node `id` of the cluster `file`, its admin listener on
/// `admin`, the origin at `origin` (a URL), its disk `dir/disk{id}` of `disk_size` pieces and a
/// HOC of `hoc_size`; its log `dir/{log}`.
pub struct NodeSpec<'a> {
    pub dir: &'a Path,
    pub file: &'a str,
    pub origin: &'a str,
    pub disk_size: &'a str,
    pub hoc_size: &'a str,
}

/// Starts node `id` as `spec` says, with its admin listener on `admin` and its log in `log`.
pub fn cluster_node(spec: &NodeSpec, id: usize, admin: u16, log: &str) -> Proc {
    let disk = spec.dir.join(format!("disk{id}"));
    Proc::spawn(
        &[
            "node",
            "--admin-listen",
            &format!("127.0.0.1:{admin}"),
            "--cluster",
            spec.file,
            "--id",
            &id.to_string(),
            "--origin",
            spec.origin,
            "--disk-path",
            disk.to_str().unwrap(),
            "--disk-size",
            spec.disk_size,
            "--hoc-size",
            spec.hoc_size,
            "-j",
            "1",
        ],
        &spec.dir.join(log),
    )
}

/// Runs `cmd` in its own process group and waits for its output, killing the group (its
/// children too; a bed's watcher, in its own session, then removes the bed) past `limit`.
pub fn within(cmd: &mut Command, limit: Duration) -> std::process::Output {
    use std::os::unix::process::CommandExt;
    let mut child = cmd
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let reader = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut b = Vec::new();
            let _ = r.read_to_end(&mut b);
            b
        })
    };
    let out = reader(Box::new(child.stdout.take().unwrap()));
    let err = reader(Box::new(child.stderr.take().unwrap()));
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > limit {
            // SAFETY: kill(2) with a negative pid signals the group `child` leads.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            let err = String::from_utf8_lossy(&err.join().unwrap()).into_owned();
            panic!("{cmd:?} still running after {limit:?}; stderr:\n{err}");
        }
        sleep(Duration::from_millis(50));
    };
    std::process::Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}
