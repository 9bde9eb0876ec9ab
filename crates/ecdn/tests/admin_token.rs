//! Admin tokens at start: `ecdn node` and `ecdn coordinator` refuse an empty or short
//! (< 16 bytes) admin token, from the flag, the environment (`ECDN_ADMIN_TOKEN`) or a node's
//! config file, with an error that names where it came from, instead of starting a listener
//! that answers `401` to everyone (or to anyone who guesses a few characters).

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a refused start may take; a process still running then has started.
const START_LIMIT: Duration = Duration::from_secs(15);

mod common;

/// A free loopback port (bound, then released).
fn free_port() -> u16 {
    common::free_ports(1)[0]
}

/// `ecdn ARGS` with `ECDN_ADMIN_TOKEN` set to `env_token` (or removed): its exit code and
/// stderr, or `None` for the code when it was still running after [`START_LIMIT`] (it is
/// killed then).
fn run(args: &[&str], env_token: Option<&str>) -> (Option<i32>, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ecdn"));
    cmd.args(args).stdout(Stdio::null()).stderr(Stdio::piped());
    cmd.env_remove("ECDN_ADMIN_TOKEN");
    if let Some(t) = env_token {
        cmd.env("ECDN_ADMIN_TOKEN", t);
    }
    let mut child = cmd.spawn().expect("run ecdn");
    let code = wait_for(&mut child);
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (code, err)
}

fn wait_for(child: &mut Child) -> Option<i32> {
    let deadline = Instant::now() + START_LIMIT;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    None
}

/// The process exited with status 1 before serving anything, and its error mentions every
/// one of `needles`.
fn assert_refused((code, err): (Option<i32>, String), needles: &[&str], case: &str) {
    assert_eq!(code, Some(1), "{case}: should be refused at start: {err}");
    assert!(!err.contains("panicked"), "{case}: panicked: {err}");
    for n in needles {
        assert!(err.contains(n), "{case}: error should mention {n:?}: {err}");
    }
}

/// `ecdn node` on free loopback ports, its admin listener on `admin_port`, then `extra`.
fn node_args(admin_port: u16, extra: &[&str]) -> Vec<String> {
    let listen = format!("127.0.0.1:{}", free_port());
    let admin = format!("127.0.0.1:{admin_port}");
    let base = [
        "node",
        "--listen",
        &listen,
        "--origin",
        "http://127.0.0.1:9",
    ];
    base.iter()
        .chain(&["--admin-listen", &admin])
        .chain(extra)
        .map(|s| s.to_string())
        .collect()
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn a_node_refuses_an_empty_or_short_admin_token_from_the_flag_the_env_or_its_config() {
    let port = free_port();
    let node = |extra: &[&str]| node_args(port, extra);
    assert_refused(
        run(&strs(&node(&["--admin-token", ""])), None),
        &["--admin-token", "ECDN_ADMIN_TOKEN", "empty"],
        "--admin-token \"\"",
    );
    assert_refused(
        run(&strs(&node(&["--admin-token", "short"])), None),
        &["--admin-token", "5 bytes", "at least 16"],
        "--admin-token short",
    );
    let plain = node(&[]);
    assert_refused(
        run(&strs(&plain), Some("")),
        &["ECDN_ADMIN_TOKEN", "empty"],
        "ECDN_ADMIN_TOKEN=",
    );
    assert_refused(
        run(&strs(&plain), Some("0123456789abcde")),
        &["ECDN_ADMIN_TOKEN", "15 bytes"],
        "ECDN_ADMIN_TOKEN of 15 bytes",
    );
    // From the config file: named as the config's.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("node.toml");
    std::fs::write(&config, "admin_token = \"tiny\"\n").unwrap();
    let from_file = node(&["--config", config.to_str().unwrap()]);
    assert_refused(
        run(&strs(&from_file), None),
        &["admin_token in the config", "4 bytes"],
        "admin_token in the config",
    );

    // The check refuses only what it should: a 16-byte token from the environment starts the
    // node, and its admin listener answers that token.
    let mut child = Command::new(env!("CARGO_BIN_EXE_ecdn"))
        .args(&plain)
        .env("ECDN_ADMIN_TOKEN", "sixteen-bytes-ok")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let health = admin_health(port, "sixteen-bytes-ok", &mut child);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(health.as_deref(), Some("200"), "the node did not serve");
}

/// The status code of `GET /_ecdn/health` with `token` on the admin listener at `port`, once
/// it answers (`None` when the node exited or never answered).
fn admin_health(port: u16, token: &str, child: &mut Child) -> Option<String> {
    use std::io::Write;
    let deadline = Instant::now() + START_LIMIT;
    while Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            return None;
        }
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let req = format!(
                "GET /_ecdn/health HTTP/1.1\r\nhost: a\r\nauthorization: Bearer {token}\r\n\
                 connection: close\r\n\r\n"
            );
            s.write_all(req.as_bytes()).unwrap();
            let mut answer = String::new();
            let _ = s.read_to_string(&mut answer);
            return answer.split(' ').nth(1).map(str::to_string);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

#[test]
fn a_coordinator_refuses_an_empty_or_short_admin_token_from_the_flag_or_the_env() {
    let dir = tempfile::tempdir().unwrap();
    let settings = format!(
        "scheme = \"c2dn\"\nkey = \"0123456789abcdef-admin-token-test\"\n\
         coordinator = \"127.0.0.1:{}\"\n",
        free_port()
    );
    let file = common::cluster_file(dir.path(), &settings, &[1000], &[2000]);
    let admin = format!("127.0.0.1:{}", free_port());
    let base = ["coordinator", "--cluster", &file, "--admin-listen", &admin];
    let with = |extra: &[&'static str]| -> Vec<&str> {
        let mut v = base.to_vec();
        v.extend_from_slice(extra);
        v
    };
    assert_refused(
        run(&with(&["--admin-token", ""]), None),
        &["--admin-token", "ECDN_ADMIN_TOKEN", "empty"],
        "--admin-token \"\"",
    );
    assert_refused(
        run(&with(&["--admin-token", "short"]), None),
        &["--admin-token", "5 bytes", "at least 16"],
        "--admin-token short",
    );
    assert_refused(
        run(&base, Some("")),
        &["ECDN_ADMIN_TOKEN", "empty"],
        "ECDN_ADMIN_TOKEN=",
    );
    assert_refused(
        run(&base, Some("has space inside!")),
        &["ECDN_ADMIN_TOKEN", "space"],
        "ECDN_ADMIN_TOKEN with a space",
    );
}
