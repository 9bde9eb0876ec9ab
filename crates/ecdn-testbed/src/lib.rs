//! A test bed of real hosts on one machine, for measuring ecdn across a network.
//!
//! Each host is a network namespace with its own address on a bridge, as in Mininet; its link
//! to the bridge is shaped in both directions:
//!
//! * **rate** by a `tbf` qdisc on each end of the host's veth pair;
//! * **loss**, **cut links** and **partitions** by nftables rules on the bridge, so a dropped
//!   packet vanishes silently as on a wire (no sender sees an error);
//! * **delay** and **jitter** by the [`delay`] loop, which holds the host's packets in an
//!   NFQUEUE (the kernels this runs on lack netem); while they run, [`machine`] counts the
//!   seconds the machine had no CPU to spare, when a run measures the bed.
//!
//! [`Bed`] builds one and tears it down when dropped; its fault verbs ([`Bed::cut`],
//! [`Bed::partition`], [`Bed::slow`], [`Bed::shape`], [`Bed::restore`]) change a running bed.
//! [`probe`] measures what the links really do. [`bed::down`] removes what a crashed run
//! left. The command-line face is `ecdn testbed`.
//!
//! Everything here needs root and Debian's `iproute2` and `nftables`; [`bed::preflight`] says
//! what is missing.

#![warn(missing_docs)]

pub mod bed;
pub mod delay;
pub mod machine;
pub mod probe;
pub mod spec;
pub mod sys;

pub use bed::{Bed, BedConfig, Host};
pub use spec::{HostSpec, LinkSpec};

/// What can go wrong building or changing a bed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A command (`ip`, `tc`, `nft`) failed; what it printed says why.
    #[error("`{command}` failed: {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// Its standard error.
        stderr: String,
    },
    /// A tool or permission the bed needs is missing.
    #[error("the test bed needs `{command}`: {why}")]
    Missing {
        /// What was tried.
        command: String,
        /// Why it cannot run, and what to install.
        why: String,
    },
    /// A bad host list, link spec or host name.
    #[error("{0}")]
    Spec(String),
    /// An I/O error (state file, namespace, socket).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
