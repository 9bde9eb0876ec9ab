//! The backend tier (TOFEC, Liang & Kozat, arXiv:1403.5007): ecdn's proxy to an S3-compatible
//! object store, which reads each object as `n` parallel range requests finishing with the
//! first `k`, and picks `(n, k)` per request from the backlog of its own queue.
//!
//! * [`model`] — the store's task delays, `Δ(B) + Exp(μ(B))` linear in the chunk size `B`
//!   (§III-C): S3's parameters from the paper, and the fit from measured delays (§V-A).
//! * [`tofec`] — the choice of code: Theorem 1's optimal static code, TOFEC's backlog
//!   thresholds (Algorithm 1), Greedy and static codes (§V-A).
//! * [`strips`] — the coded file, "Shared Key" (§III): one stored object of `N` strips of an
//!   `(N, K)` code that serves every `(n, k)` with `k | K`, and its manifest.
pub mod emulator;
pub mod gateway;
pub mod model;
pub mod proxy;
pub mod store;
pub mod strips;
pub mod tofec;
