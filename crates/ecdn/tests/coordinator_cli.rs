//! `ecdn coordinator` as a process: it serves signed requests on the cluster file's address,
//! refuses unsigned ones, takes a key to accept from its cluster file on SIGHUP (a key
//! rotation's first step), stops cleanly on SIGTERM, and refuses a bad cluster file with a
//! clear error.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ecdn_cluster::coordinator::{Status, STATUS_PATH};
use ecdn_cluster::peer::{read_body, PeerClient};
use ecdn_cluster::ClusterKey;
use hyper::{Method, StatusCode};

const KEY: &str = "0123456789abcdef-cli-test-key";

fn cluster_file(dir: &std::path::Path, port: u16) -> std::path::PathBuf {
    let mut text = format!(
        "scheme = \"c2dn\"\nkey = \"{KEY}\"\ncoordinator = \"127.0.0.1:{port}\"\n\
         heartbeat_ms = 100\n"
    );
    for i in 0..4 {
        text.push_str(&format!(
            "[[node]]\nid = {i}\nclient = \"127.0.0.1:{}\"\npeer = \"127.0.0.1:{}\"\n",
            1000 + i,
            2000 + i
        ));
    }
    let path = dir.join("cluster.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn coordinator_serves_signed_requests_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    // A free port: bind, learn it, release it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let file = cluster_file(dir.path(), port);
    let mut child = Command::new(env!("CARGO_BIN_EXE_ecdn"))
        .args(["coordinator", "--cluster"])
        .arg(&file)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its stderr, line by line, read aside: a line that never comes fails the test instead of
    // holding it.
    let (tx, lines) = std::sync::mpsc::channel::<String>();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for l in stderr.lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    let next_line = || lines.recv_timeout(Duration::from_secs(20)).ok();
    let first = next_line().expect("the coordinator's first line");
    assert!(first.contains("listening on 127.0.0.1"), "{first}");
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let t = Duration::from_secs(3);
    let (status, unsigned) = rt.block_on(async {
        let c = PeerClient::new(ClusterKey::new(KEY.as_bytes()));
        let resp = c
            .send(addr, Method::GET, STATUS_PATH, Bytes::new(), &[], t)
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let body = read_body(resp.into_body(), 1 << 20).await.unwrap();
        let status: Status = serde_json::from_slice(&body).unwrap();
        let wrong = PeerClient::new(ClusterKey::new(b"not-the-cluster-key"));
        let resp = wrong
            .send(addr, Method::GET, STATUS_PATH, Bytes::new(), &[], t)
            .await
            .unwrap();
        (status, resp.status())
    });
    assert_eq!(status.nodes.len(), 4);
    assert!(status.nodes.iter().all(|n| n.available));
    assert_eq!(unsigned, StatusCode::UNAUTHORIZED);
    // SIGHUP: the cluster file now also accepts the next key, and so does the coordinator.
    const NEXT: &str = "the next key of this test cluster";
    let signed_with_next = || {
        rt.block_on(async {
            let c = PeerClient::new(ClusterKey::new(NEXT.as_bytes()));
            c.send(addr, Method::GET, STATUS_PATH, Bytes::new(), &[], t)
                .await
                .unwrap()
                .status()
        })
    };
    assert_eq!(signed_with_next(), StatusCode::UNAUTHORIZED);
    let text = std::fs::read_to_string(&file).unwrap().replacen(
        "heartbeat_ms = 100\n",
        &format!("heartbeat_ms = 100\naccepted_keys = [\"{NEXT}\"]\n"),
        1,
    );
    std::fs::write(&file, text).unwrap();
    let hup = Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    let reloaded = std::iter::from_fn(next_line)
        .find(|l| l.contains("SIGHUP"))
        .expect("a line about the SIGHUP within 20 s");
    assert!(
        reloaded.contains("cluster keys reloaded") && reloaded.contains("2 accepted"),
        "{reloaded}"
    );
    assert_eq!(signed_with_next(), StatusCode::OK);
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let t0 = Instant::now();
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "still running 5 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(code.success(), "{code:?}");
    let rest: Vec<String> = std::iter::from_fn(next_line).collect();
    assert!(rest.iter().any(|l| l.contains("shut down")), "{rest:?}");
}

#[test]
fn coordinator_refuses_a_bad_cluster_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = cluster_file(dir.path(), 1);
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace(KEY, "short");
    std::fs::write(&file, text).unwrap();
    for (path, needle) in [
        (file.clone(), "at least 16"),
        (
            dir.path().join("missing.toml"),
            "cannot read the cluster file",
        ),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_ecdn"))
            .args(["coordinator", "--cluster"])
            .arg(&path)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains(needle) && !err.contains("panicked"), "{err}");
    }
}
