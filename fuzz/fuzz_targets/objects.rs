//! The messages of EC-Cache's clients that read and write the splits themselves (issue 61) on
//! arbitrary input: a node's `?locate` answer as a client parses it (a record that validates,
//! one address per split, or an error), and the write's messages as nodes and clients parse
//! them (`?begin`'s answer, a split server's receipt, a commit): what parses re-encodes to
//! itself, and a located record's window ranges stay within its splits.
#![no_main]

use ecdn_client::Located;
use ecdn_objects::writes::{Begun, Commit, Stored};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(l) = Located::parse(data) {
        assert_eq!(l.addrs.len(), l.meta.splits.len());
        let m = &l.meta;
        for w in 0..m.windows().min(64) {
            let r = m.window_range(w);
            assert!(r.start <= r.end && r.end <= m.split_len());
            for i in 0..m.splits.len() {
                assert!(m.digest(i, w).is_some());
            }
        }
    }
    if let Ok(s) = serde_json::from_slice::<Stored>(data) {
        let again: Stored = serde_json::from_slice(&serde_json::to_vec(&s).unwrap()).unwrap();
        assert_eq!((again.crcs, again.digests, again.receipt), (s.crcs, s.digests, s.receipt));
    }
    if let Ok(b) = serde_json::from_slice::<Begun>(data) {
        let again: Begun = serde_json::from_slice(&serde_json::to_vec(&b).unwrap()).unwrap();
        assert_eq!((again.version, again.splits, again.grants), (b.version, b.splits, b.grants));
    }
    if let Ok(c) = serde_json::from_slice::<Commit>(data) {
        let again: Commit = serde_json::from_slice(&serde_json::to_vec(&c).unwrap()).unwrap();
        assert_eq!((again.record, again.receipts), (c.record, c.receipts));
    }
});
