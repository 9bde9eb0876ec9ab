//! Standard output for the subcommands' results, and what a closed pipe means.
//!
//! `println!` panics when stdout's reader has gone away (`ecdn coral demo --json | head -c 10`).
//! The subcommands print with [`outln!`](crate::outln) and [`out!`](macro@crate::out) instead, which return the write's error;
//! it travels up with `?` like any other (so a cluster demo still stops its processes on the
//! way out), and `main` ends quietly, with the status of a process killed by SIGPIPE (141),
//! when the error is a broken pipe ([`is_broken_pipe`]). SIGPIPE itself stays ignored, as Rust
//! sets it: the node's sockets must not kill the process when a client goes away.
//!
//! What still prints with `println!` or `eprintln!` (a log line to a stderr that was closed too)
//! panics as before, but [`quiet_print_panics`] keeps the panic from printing a message and
//! `main`, which catches it after the stack has unwound (every process and file dropped), exits
//! with the same 141.

use std::fmt::Arguments;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// The exit status of a command whose reader went away: 128 + SIGPIPE, as the shell reports
/// a process that SIGPIPE killed.
pub const BROKEN_PIPE_STATUS: i32 = 141;

/// Writes `args` to stdout, and a newline when `newline`.
pub fn write(args: Arguments<'_>, newline: bool) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_fmt(args)?;
    if newline {
        out.write_all(b"\n")?;
    }
    out.flush()
}

static PRINTING_FAILED: AtomicBool = AtomicBool::new(false);

/// Installs a panic hook that says nothing about the panics of `print!`-like macros whose
/// stream was closed (their message is "failed printing to stdout: Broken pipe ..."), and
/// remembers that one happened ([`printing_failed`]); other panics print as before.
pub fn quiet_print_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to std") && message.contains("Broken pipe") {
            PRINTING_FAILED.store(true, Ordering::SeqCst);
        } else {
            previous(info);
        }
    }));
}

/// Whether a `print!`-like macro panicked on a closed stream (see [`quiet_print_panics`]).
pub fn printing_failed() -> bool {
    PRINTING_FAILED.load(Ordering::SeqCst)
}

/// Whether `e`, or an error it wraps, is a write to a closed pipe.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// `println!` that returns the write's `io::Result` instead of panicking.
#[macro_export]
macro_rules! outln {
    () => {
        $crate::out::write(format_args!(""), true)
    };
    ($($arg:tt)*) => {
        $crate::out::write(format_args!($($arg)*), true)
    };
}

/// `print!` that returns the write's `io::Result` instead of panicking.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::write(format_args!($($arg)*), false)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_pipe_is_found_under_context() {
        let e = anyhow::Error::from(io::Error::from(io::ErrorKind::BrokenPipe))
            .context("printing the table");
        assert!(is_broken_pipe(&e));
        let e = anyhow::Error::from(io::Error::from(io::ErrorKind::NotFound)).context("x");
        assert!(!is_broken_pipe(&e));
        assert!(!is_broken_pipe(&anyhow::anyhow!("broken pipe")));
    }
}
