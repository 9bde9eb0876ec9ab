//! Every server command shuts down cleanly on a SIGTERM sent the moment it says it is
//! listening: its handlers are in place before that line (a supervisor may signal at once;
//! SIGTERM's default action would kill the process without its shutdown).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Starts `ecdn args`, sends SIGTERM as soon as a stderr line contains "listening on", and
/// checks the process exits 0 within 5 s and says it shut down.
fn term_at_once(args: &[&str]) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ecdn"))
        .args(args)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    loop {
        match lines.next() {
            Some(Ok(l)) => {
                let ready = l.contains("listening on");
                seen.push(l);
                if ready {
                    break;
                }
            }
            _ => {
                let _ = child.kill();
                panic!("{args:?} ended before saying it listens: {seen:?}");
            }
        }
    }
    terminate(&child);
    let code = wait(&mut child, args);
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(code.success(), "{args:?}: {code:?}; {seen:?} {rest:?}");
    assert!(
        rest.iter().any(|l| l.contains("shut down")),
        "{args:?}: {rest:?}"
    );
}

fn terminate(child: &Child) {
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
}

fn wait(child: &mut Child, args: &[&str]) -> std::process::ExitStatus {
    let t0 = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if t0.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            panic!("{args:?}: still running 5 s after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn the_origin_and_the_node_shut_down_on_a_sigterm_right_after_listening() {
    // Several times: the window this guards was a few microseconds wide.
    for _ in 0..5 {
        term_at_once(&["origin", "--listen", "127.0.0.1:0", "-j", "1"]);
        term_at_once(&[
            "node",
            "--listen",
            "127.0.0.1:0",
            "--origin",
            "http://127.0.0.1:9",
            "-j",
            "1",
        ]);
    }
}

#[test]
fn the_coordinator_shuts_down_on_a_sigterm_right_after_listening() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut text = format!(
        "scheme = \"c2dn\"\nkey = \"0123456789abcdef-signal-test\"\n\
         coordinator = \"127.0.0.1:{port}\"\n"
    );
    for i in 0..4 {
        text.push_str(&format!(
            "[[node]]\nid = {i}\nclient = \"127.0.0.1:{}\"\npeer = \"127.0.0.1:{}\"\n",
            1000 + i,
            2000 + i
        ));
    }
    let file = dir.path().join("cluster.toml");
    std::fs::write(&file, text).unwrap();
    for _ in 0..5 {
        term_at_once(&["coordinator", "--cluster", file.to_str().unwrap()]);
    }
}
