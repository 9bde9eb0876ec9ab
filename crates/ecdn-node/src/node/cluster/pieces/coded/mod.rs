//! The coded read path (C2DN §5): an object read stripe by stripe from the K data chunks on
//! their servers, with delayed parity fetch and decode.
//!
//! The object is read in windows of sub-chunks: for a window, every data chunk's sub-chunks
//! are asked for at once from the servers holding them (or read from this node's piece
//! store), so a sequential read pulls from all K data servers at once. Each peer's answer is
//! cut into sub-chunks as its bytes arrive, and **a stripe goes to the client as soon as it is
//! complete**, in order. An answer that one full window of [`WINDOW_BYTES`](object::WINDOW_BYTES) per chunk holds (a
//! 1 MiB object's) is read in that one window, one request per peer, and starts at its first
//! stripe (a one-stripe first window cost a second request per peer and a quarter of the hit's
//! CPU on loopback; but its first byte came 0.6 ms sooner there, 1.3 ms on the test bed). A
//! longer answer's first window is one stripe, read alone (the answer starts after one
//! sub-chunk's round trip: read-ahead asked beside it made it wait for the peers' larger reads;
//! one full first window doubled a 16 MiB hit's time to the first byte); then windows doubling
//! up to [`WINDOW_BYTES`](object::WINDOW_BYTES) per chunk, [`READ_AHEAD`](stream::READ_AHEAD) read ahead of the one being sent (a
//! window's memory is bounded by its size).
//!
//! **Delayed parity fetch:** in each window, the time to the first data sub-chunk from a peer
//! is recorded (this node's own chunk, read locally, does not count); if, that
//! time × `parity_delay` (0.2 by default) later, the stripe being waited for still lacks a data
//! sub-chunk, the parity chunks' sub-chunks are asked for too (for the stripes not sent yet),
//! and each stripe is finished with the first K that arrive. A data chunk whose server fails
//! (refused, reset, timed out, `404`, a short answer) or whose sub-chunk fails its tag (each
//! sub-chunk of a peer's answer carries one, keyed to the request) or its CRC-32C (the
//! checksums come with the piece metadata, signed) is replaced the same way, at once. A stripe
//! with all K data sub-chunks is sent as slices of the buffers they arrived in (no copy, no
//! decode). Wrong bytes are never sent: when a stripe cannot be completed from the sources the
//! read began with (chunks evicted or moved since), the servers are asked again which pieces
//! they hold and the answer goes on from its first unsent byte; if that fails too, the
//! response ends short.
//!
//! **Late binding (EC-Cache §4.3)** replaces the data-first read for an EC-Cache object
//! ([`LateBinding`]): in each window the `k + Δ` chunks chosen are asked at once, and each
//! stripe leaves as soon as any K of its sub-chunks are there. A chunk read that fails (no
//! answer, `404`, cut short, a sub-chunk failing its CRC) is replaced at once by one of the
//! object's other stored chunks, and in the answer's later windows too (a dead server costs
//! one failed read per answer, not one per window). When a window is complete, the reads still running stop at
//! their next buffer (a peer's paced answer is dropped; this node's own chunk stops waiting
//! for its link). The first window is a full one (the object's splits are read whole, as the
//! paper's are, up to [`WINDOW_BYTES`](object::WINDOW_BYTES) each), and the sources are never asked again: the record
//! names every split.
//!
//! **The HOC's stripes:** when the HOC holds the object in stripes, a window whose stripes it
//! holds is answered from them, and any other is read whole-stripe (a range's first and last
//! stripes too) and its stripes kept there.

//! The parts, each using only those before it: `object.rs` (the object, its windows),
//! `sub_chunks.rs` (a chunk's bytes from its source, checked), `window.rs` (a window's stripes,
//! decoded when they must be), `stream.rs` (the answer, window after window).

mod object;
mod stream;
mod sub_chunks;
mod window;

pub(in crate::node) use object::{CodedObject, LateBinding};
pub(in crate::node) use stream::{read_all, stream, Finish};
