//! The system calls and commands a bed is made of: `ip`, `tc`, `nft`, and entering a host's
//! network namespace from a thread or a child process.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::Error;

/// The network namespace a bed was made from, so that its commands run there even when the
/// calling thread has entered a host (a demo whose load driver runs on a client host).
static ROOT: OnceLock<File> = OnceLock::new();

/// Remembers the calling thread's namespace as the one `ip`, `tc` and `nft` run in. The first
/// call wins; [`crate::bed::preflight`] makes it before a bed is built.
pub fn remember_root() -> Result<(), Error> {
    if ROOT.get().is_none() {
        let file = File::open("/proc/thread-self/ns/net")?;
        let _ = ROOT.set(file);
    }
    Ok(())
}

/// Runs `program args` in the bed's root namespace, returning its standard output; a non-zero
/// exit is an error that carries the command and what it printed on standard error.
pub fn run(program: &str, args: &[&str]) -> Result<String, Error> {
    run_with_input(program, args, None)
}

/// As [`run`], with `input` written to the command's standard input.
pub fn run_with_input(program: &str, args: &[&str], input: Option<&str>) -> Result<String, Error> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(root) = ROOT.get() {
        spawn_inside(&mut cmd, root);
    }
    let command = format!("{program} {}", args.join(" "));
    let mut child = cmd.spawn().map_err(|e| Error::Missing {
        command: command.clone(),
        why: e.to_string(),
    })?;
    if let Some(text) = input {
        let mut stdin = child.stdin.take().expect("stdin is piped");
        stdin.write_all(text.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    if !out.status.success() {
        return Err(Error::Command {
            command,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `ip args`.
pub fn ip(args: &[&str]) -> Result<String, Error> {
    run("ip", args)
}

/// `tc args` in namespace `netns` (the root namespace when `None`).
pub fn tc(netns: Option<&str>, args: &[&str]) -> Result<String, Error> {
    match netns {
        None => run("tc", args),
        Some(ns) => {
            let mut all = vec!["netns", "exec", ns, "tc"];
            all.extend_from_slice(args);
            run("ip", &all)
        }
    }
}

/// Replaces the filter table of namespace `netns` with `rules` (`iptables-legacy-restore`
/// syntax), as one transaction.
pub fn iptables(netns: &str, rules: &str) -> Result<(), Error> {
    run_with_input(
        "ip",
        // -w: beds built at once share the xtables lock; wait for it rather than fail.
        &[
            "netns",
            "exec",
            netns,
            "iptables-legacy-restore",
            "-w",
            "10",
        ],
        Some(rules),
    )
    .map(|_| ())
}

/// The file that names a network namespace made by `ip netns add`.
pub fn netns_file(netns: &str) -> Result<File, Error> {
    File::open(format!("/run/netns/{netns}")).map_err(|e| Error::Command {
        command: format!("open /run/netns/{netns}"),
        stderr: e.to_string(),
    })
}

/// Moves the calling thread into the network namespace behind `file`. Sockets the thread makes
/// afterwards live in that namespace; other threads are not affected.
pub fn enter(file: &File) -> Result<(), Error> {
    setns(file.as_raw_fd()).map_err(Error::Io)
}

fn setns(fd: RawFd) -> std::io::Result<()> {
    // SAFETY: setns only reads the descriptor; a bad one is an error, not undefined behaviour.
    let rc = unsafe { libc::setns(fd, libc::CLONE_NEWNET) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Makes `cmd` start inside the network namespace behind `file` (the file must outlive the
/// spawn).
pub fn spawn_inside(cmd: &mut Command, file: &File) {
    let fd = file.as_raw_fd();
    // SAFETY: the closure runs in the forked child before exec and only calls setns, which is
    // async-signal-safe.
    unsafe {
        cmd.pre_exec(move || setns(fd));
    }
}

/// The process ids living in namespace `netns` (`ip netns pids`).
pub fn netns_pids(netns: &str) -> Vec<i32> {
    run("ip", &["netns", "pids", netns])
        .map(|out| {
            out.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether process `pid` is alive.
pub fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    pid > 0 && unsafe { libc::kill(pid, 0) } == 0
}

/// Sends SIGKILL to `pid`.
pub fn kill(pid: i32) {
    // SAFETY: kill with a pid read from `ip netns pids`; a gone process is only an error.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}
