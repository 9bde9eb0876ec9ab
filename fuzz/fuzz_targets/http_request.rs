//! The raw fuzz input is one client connection's byte stream (HTTP/1.1 requests, possibly
//! pipelined, possibly malformed) into the real node: `RunningNode::serve_io` over an
//! in-memory duplex pipe, with the same hyper settings and request handler as a TCP
//! connection. The origin is live and in the same process: `ecdn origin`'s handler
//! ([`ecdn_node::origin::handle`]) served over in-memory pipes opened by the node's connector
//! ([`Node::start_with_connector`]), so misses are stored and later inputs hit them: HOC and
//! disk hits, ranges and multipart answers, `Vary` variants (`vary=` in the query), validation
//! with `304` merging (`cc=` in the query, e.g. `max-age=1` entries go stale as the paused
//! clock advances), `PURGE` and invalidation. The HOC is small (64 KiB) and the disk ring
//! (a temporary file, 16 MiB) takes the rest, so larger objects are served by the mapped disk
//! path. A request with `size=` above 2 MiB, or with `bw=`, is answered `400` by the origin
//! wrapper, to keep each execution fast; `status=` gives error answers. The node keeps its
//! caches from one input to the next, as a long-running node does.
//!
//! The runtime's clock is paused, so it jumps ahead whenever every task is idle: the client
//! writes the input, waits `IDLE` (i.e. until the node has answered all it can: hyper drops a
//! request in progress once it reads EOF, so half-closing at once would cut every miss
//! short), half-closes, and reads to EOF. Any panic in the node aborts the process
//! (libfuzzer-sys's panic hook, also for panics in spawned tasks); a connection still open
//! `DEADLINE` (virtual time) after the half-close is reported as a hang (a panic).
//! `ECDN_FUZZ_PRINT=1` prints each response (for replaying an input).
#![no_main]

use ecdn_node::node::Speak;
use libfuzzer_sys::fuzz_target;

#[path = "harness.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::exchange(harness::node(|| None), data, Speak::Http1);
});
