//! The raw fuzz input is one HTTP/2 connection with prior knowledge (the client preface, then
//! frames) into the real node, as `http_request` does for HTTP/1.1: hyper's HTTP/2 server
//! (h2's frame and HPACK parsers, flow control, stream limits, resets) with the node's
//! settings, then the same request path and in-process origin. Any panic or a connection
//! left open after EOF fails (see `harness.rs`).
#![no_main]

use ecdn_node::node::Speak;
use libfuzzer_sys::fuzz_target;

#[path = "harness.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::exchange(harness::node(|| None), data, Speak::Http2);
});
