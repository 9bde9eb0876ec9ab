//! A reader that goes away is not a crash: every subcommand that prints, run with its stdout
//! (and in one case stderr too) already closed, as `ecdn ... | head -c 0` would leave it, ends
//! on its own with the status of a process that SIGPIPE killed (141), without a panic, a
//! backtrace or an error message.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn trace() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/cloudPhysicsIO.oracleGeneral.bin")
        .to_string_lossy()
        .into_owned()
}

/// Runs `ecdn args` with stdout a pipe whose reading end is closed before the command prints
/// (and stderr too when `close_stderr`); checks that it exits with 141 within `limit` and says
/// nothing about it on stderr.
fn closed_stdout(args: &[&str], close_stderr: bool, limit: Duration) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ecdn"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run ecdn");
    drop(child.stdout.take());
    let mut stderr = child.stderr.take().unwrap();
    let reader = if close_stderr {
        drop(stderr);
        None
    } else {
        Some(std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        }))
    };
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for ecdn") {
            break s;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ecdn {args:?} did not end within {limit:?} with its stdout closed");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let err = reader.map(|r| r.join().unwrap()).unwrap_or_default();
    assert_eq!(
        status.code(),
        Some(141),
        "ecdn {args:?} with its stdout closed: {status}; stderr:\n{err}"
    );
    for bad in ["panicked", "Broken pipe", "backtrace", "error:"] {
        assert!(
            !err.contains(bad),
            "ecdn {args:?} said {bad:?} on stderr:\n{err}"
        );
    }
}

#[test]
fn the_simulator_and_trace_tools_end_quietly() {
    let t = trace();
    let limit = Duration::from_secs(60);
    closed_stdout(
        &[
            "sim",
            "cache",
            "--trace",
            &t,
            "--policy",
            "lru,fifo",
            "--size",
            "1MiB,16MiB",
            "--json",
        ],
        false,
        limit,
    );
    // The table, with stderr (the progress bar's stream) closed as well.
    closed_stdout(
        &[
            "sim", "cache", "--trace", &t, "--policy", "lru", "--size", "1MiB",
        ],
        true,
        limit,
    );
    closed_stdout(
        &["sim", "bounds", "--trace", &t, "--size", "1MiB"],
        false,
        limit,
    );
    closed_stdout(&["trace", "stats", &t], false, limit);
    closed_stdout(
        &["object", "bench", "--simulate", "--objects", "50", "--json"],
        false,
        limit,
    );
}

/// The Coral demo on a tiny bed: its first line comes after the hierarchy's run.
#[test]
fn the_coral_demo_ends_quietly() {
    closed_stdout(
        &[
            "coral",
            "demo",
            "--nodes",
            "6",
            "--sites",
            "2",
            "--requests",
            "20",
            "--objects",
            "5",
            "--cluster-period",
            "200ms",
            "--flash-objects",
            "0",
            "--hot-interval",
            "0s",
            "--json",
        ],
        false,
        Duration::from_secs(60),
    );
}

/// The cluster demo prints its table when its processes are done; its processes stop either way
/// (the error travels up through their owner).
#[test]
fn the_cluster_demo_ends_quietly() {
    closed_stdout(
        &[
            "cluster",
            "demo",
            "--nodes",
            "4",
            "--requests",
            "300",
            "--json",
        ],
        false,
        Duration::from_secs(120),
    );
}
