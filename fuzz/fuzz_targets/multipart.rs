//! The reader of an origin's `206` answers on arbitrary input: the first line is tried as a
//! `Content-Type` (for its boundary) and a `Content-Range`; the rest is parsed as a
//! `multipart/byteranges` body with that boundary (or a fixed one). Checks the documented
//! invariants: every part's body has exactly its range's length and lies inside the input, and
//! a body written by `write_byteranges` reads back as written.
#![no_main]

use ecdn_node::multipart::{boundary, parse_byteranges, parse_content_range, write_byteranges};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (first, rest) = match data.iter().position(|&c| c == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let first = String::from_utf8_lossy(first);
    if let Ok((r, len)) = parse_content_range(&first) {
        assert!(r.start < r.end);
        assert!(len.is_none_or(|n| r.end <= n));
    }
    let b = boundary(&first).unwrap_or_else(|_| "B".to_string());
    if let Ok(parts) = parse_byteranges(rest, &b, 64) {
        assert!(parts.len() <= 64);
        for p in &parts {
            assert_eq!(p.body.len() as u64, p.range.end - p.range.start);
        }
    }
    // What is written reads back.
    let chunks: Vec<(std::ops::Range<u64>, &[u8])> = rest
        .chunks(7)
        .take(8)
        .enumerate()
        .map(|(i, c)| {
            let start = i as u64 * 10;
            (start..start + c.len() as u64, c)
        })
        .filter(|(r, _)| r.start < r.end)
        .collect();
    if !chunks.is_empty() {
        let (body, ct) = write_byteranges(&chunks, 1000, Some("x/y"), "fuzz-boundary");
        let parts = parse_byteranges(&body, &boundary(&ct).unwrap(), 64).unwrap();
        assert_eq!(parts.len(), chunks.len());
        for (p, (r, c)) in parts.iter().zip(&chunks) {
            assert_eq!((&p.range, p.body), (r, *c));
        }
    }
});
