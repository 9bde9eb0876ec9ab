//! Every server command shuts down cleanly on a SIGTERM sent the moment it says it is
//! listening: its handlers are in place before that line (a supervisor may signal at once;
//! SIGTERM's default action would kill the process without its shutdown).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

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
    let port = common::free_ports(1)[0];
    let settings =
        format!("scheme = \"c2dn\"\nkey = \"0123456789abcdef-signal-test\"\ncoordinator = \"127.0.0.1:{port}\"\n");
    let file = common::cluster_file(
        dir.path(),
        &settings,
        &[1000, 1001, 1002, 1003],
        &[2000, 2001, 2002, 2003],
    );
    for _ in 0..5 {
        term_at_once(&["coordinator", "--cluster", &file]);
    }
}
