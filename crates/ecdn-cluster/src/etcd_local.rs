//! etcd members on loopback, for the cluster demo, the tests and the benchmarks: `n` members
//! of one etcd cluster (Debian's `etcd-server` binary), each with its own data directory under
//! a caller's directory and free ports, which can be killed and restarted one by one or all
//! together. A deployment runs its own etcd; this only starts local ones.

use std::io;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What a test or bench says when [`LocalEtcd::find_binary`] finds nothing: it fails (no
/// test passes without the etcd it exercises).
pub const NOT_INSTALLED: &str = "etcd is not installed: the etcd tests need Debian's \
                                 etcd-server (`apt-get install etcd-server`; ./test.sh installs it)";

/// How long a member may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(20);

struct Member {
    name: String,
    client: u16,
    peer: u16,
    child: Option<Child>,
}

/// A local etcd cluster; every member is killed when it is dropped.
pub struct LocalEtcd {
    bin: PathBuf,
    dir: PathBuf,
    members: Vec<Member>,
}

/// `n` distinct free loopback ports (bound together, then released).
fn free_ports(n: usize) -> io::Result<Vec<u16>> {
    let held = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<io::Result<Vec<_>>>()?;
    held.iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect()
}

impl LocalEtcd {
    /// The etcd binary, if installed where Debian puts it (or under /usr/local).
    pub fn find_binary() -> Option<PathBuf> {
        ["/usr/bin/etcd", "/usr/local/bin/etcd"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
    }

    /// Starts `n` members (data in `dir/m<i>`) and waits until each accepts connections.
    pub fn start(bin: &Path, dir: &Path, n: usize) -> io::Result<LocalEtcd> {
        let ports = free_ports(2 * n.max(1))?;
        let members = (0..n.max(1))
            .map(|i| Member {
                name: format!("m{i}"),
                client: ports[2 * i],
                peer: ports[2 * i + 1],
                child: None,
            })
            .collect();
        let mut etcd = LocalEtcd {
            bin: bin.to_path_buf(),
            dir: dir.to_path_buf(),
            members,
        };
        for i in 0..etcd.members.len() {
            etcd.spawn(i)?;
        }
        for i in 0..etcd.members.len() {
            etcd.wait_accepting(i)?;
        }
        Ok(etcd)
    }

    pub fn members(&self) -> usize {
        self.members.len()
    }

    /// Member `i`'s client URL.
    pub fn url(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.members[i].client)
    }

    /// Every member's client URL (the cluster file's `etcd`).
    pub fn endpoints(&self) -> Vec<String> {
        (0..self.members.len()).map(|i| self.url(i)).collect()
    }

    fn initial_cluster(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn spawn(&mut self, i: usize) -> io::Result<()> {
        let cluster = self.initial_cluster();
        let url = self.url(i);
        let m = &mut self.members[i];
        let peer = format!("http://127.0.0.1:{}", m.peer);
        let log = std::fs::File::create(self.dir.join(format!("etcd-{}.log", m.name)))?;
        let child = Command::new(&self.bin)
            .args(["--name", &m.name, "--data-dir"])
            .arg(self.dir.join(&m.name))
            .args(["--listen-client-urls", &url])
            .args(["--advertise-client-urls", &url])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &cluster])
            .args(["--initial-cluster-token", "ecdn-local"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        m.child = Some(child);
        Ok(())
    }

    fn wait_accepting(&mut self, i: usize) -> io::Result<()> {
        let until = Instant::now() + START_TIMEOUT;
        let port = self.members[i].client;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(Some(st)) = self.members[i]
                .child
                .as_mut()
                .map(|c| c.try_wait())
                .transpose()?
            {
                return Err(io::Error::other(format!(
                    "etcd member {i} exited with {st} (log: {})",
                    self.dir.join(format!("etcd-m{i}.log")).display()
                )));
            }
            if Instant::now() > until {
                return Err(io::Error::other(format!(
                    "etcd member {i} did not accept connections within {START_TIMEOUT:?}"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Kills member `i` (SIGKILL); its data stays for a restart.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Restarts a killed member `i` from its data and waits until it accepts connections.
    pub fn restart(&mut self, i: usize) -> io::Result<()> {
        if self.members[i].child.is_none() {
            self.spawn(i)?;
        }
        self.wait_accepting(i)
    }

    pub fn kill_all(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }

    /// Restarts every killed member (together: a majority must be up to serve).
    pub fn restart_all(&mut self) -> io::Result<()> {
        for i in 0..self.members.len() {
            if self.members[i].child.is_none() {
                self.spawn(i)?;
            }
        }
        for i in 0..self.members.len() {
            self.wait_accepting(i)?;
        }
        Ok(())
    }
}

impl Drop for LocalEtcd {
    fn drop(&mut self) {
        self.kill_all();
    }
}
