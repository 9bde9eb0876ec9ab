//! The backend tier (TOFEC, Liang & Kozat, arXiv:1403.5007): ecdn's proxy to an S3-compatible
//! object store, which reads each object as `n` parallel range requests finishing with the
//! first `k`, and picks `(n, k)` per request from the backlog of its own queue.
//!
//! * [`model`] — the store's task delays, `Δ(B) + Exp(μ(B))` linear in the chunk size `B`
//!   (§III-C): S3's parameters from the paper, and the fit from measured delays (§V-A).
//! * [`tofec`] — the choice of code: Theorem 1's optimal static code, TOFEC's backlog
//!   thresholds (Algorithm 1), Greedy and static codes (§V-A).
//! * [`tail`] — TOFEC with the measured tail (beyond the paper): each code costed with the
//!   delays' measured shape instead of the exponential, chosen at the measured arrival rate.
//! * [`strips`] — the coded file, "Shared Key" (§III): one stored object of `N` strips of an
//!   `(N, K)` code that serves every `(n, k)` with `k | K`, and its manifest (CRCs, SHA-256).
//! * [`store`] — what the tier needs of a store: S3 through `object_store` (request signing
//!   and TLS on ring), and an in-memory store with injected faults for tests.
//! * [`proxy`] — the proxy of §II-A: request queue, task queue, `L` connections; reads that
//!   finish with the first `k` chunks and cancel the rest, speculative writes, the model
//!   refitted as it runs.
//! * [`gateway`] — an HTTP origin (`GET`/`HEAD /KEY`) over the proxy: how `ecdn node
//!   --origin s3://…` fills its misses.
//! * [`emulator`] — a storage cloud on loopback for experiments: an S3 subset whose answers
//!   take as long as the delay model says.
//!
//! Layering: below `ecdn-node` and the `ecdn` binary; it uses `ecdn-codec` for the code and
//! `ecdn-store` for CRC-32C.

pub mod emulator;
pub mod gateway;
mod http;
pub mod model;
pub mod proxy;
pub mod store;
pub mod strips;
pub mod tail;
pub mod tofec;
