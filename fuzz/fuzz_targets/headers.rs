//! The node's pure header parsers on arbitrary input. The input is split at `\n` into pieces;
//! each piece is tried as a request path, a `Range` value (against several object sizes) and
//! an HTTP date, and the pieces become the values of a header map (names cycled from `NAMES`)
//! for the `Cache-Control` / `Pragma` / `Vary` / `Age` / `Connection` parsers. The whole input
//! is also decoded as disk metadata and, with its checksum patched in so the decoder gets past
//! it, as an ecdn-store entry header, superblock and directory (the index a start reads: its
//! checksums and slot count patched too). Checks the documented invariants of the results, not
//! just the absence of panics: what decodes re-encodes to itself, and a directory's slots fit
//! its ring.
#![no_main]

use ecdn_node::node::freshness;
use ecdn_node::node::meta;
use ecdn_node::node::normalize::normalize_path;
use ecdn_node::range::{self, Ranges, MAX_RANGES};
use ecdn_store::directory::{Directory, DIR_FOOT_LEN, DIR_HEADER_LEN, DIR_SLOT_LEN, DIR_VERSION};
use ecdn_store::format::{Header, Superblock, HEADER_LEN, SUPER_LEN};
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::StatusCode;
use libfuzzer_sys::fuzz_target;

const NAMES: [&str; 10] = [
    "cache-control",
    "pragma",
    "vary",
    "range",
    "expires",
    "date",
    "age",
    "connection",
    "accept-encoding",
    "set-cookie",
];

const SIZES: [u64; 7] = [0, 1, 2, 10, 100, 4096, u64::MAX];

fn check_path(p: &str) {
    if let Ok(n) = normalize_path(p) {
        if p.starts_with('/') {
            assert!(n.starts_with('/'), "{p:?} -> {n:?}");
            assert!(
                !n.split('/').any(|s| s == "." || s == ".."),
                "dot segment left: {p:?} -> {n:?}"
            );
        }
        assert_eq!(
            normalize_path(&n).as_deref(),
            Ok(n.as_str()),
            "not idempotent: {p:?}"
        );
    }
}

fn check_range(v: &str) {
    for size in SIZES {
        if let Ranges::Satisfiable(rs) = range::parse(v, size) {
            assert!(!rs.is_empty() && rs.len() <= MAX_RANGES, "{v:?} on {size}");
            let mut total = 0u64;
            for r in &rs {
                assert!(r.start < r.end && r.end <= size, "{v:?} on {size}: {r:?}");
                total = total.saturating_add(r.end - r.start);
                let _ = range::content_range(r, size);
            }
            assert!(rs.len() == 1 || total <= size, "{v:?} on {size}");
        }
    }
}

/// `data` as a directory file, and again with its magic, version, slot count and checksums
/// made right so the decoder reaches the slots.
fn check_directory(data: &[u8]) {
    let check = |b: &[u8]| {
        if let Ok(d) = Directory::decode(b) {
            assert_eq!(Directory::decode(&d.encode()).as_ref(), Ok(&d));
            let total: u64 = d.slots.iter().map(|s| s.footprint).sum();
            assert!(total <= d.capacity && d.head_off < d.capacity);
        }
    };
    check(data);
    if data.len() < DIR_HEADER_LEN {
        return;
    }
    let slots = (data.len() - DIR_HEADER_LEN) / DIR_SLOT_LEN;
    let mut b = data[..DIR_HEADER_LEN + slots * DIR_SLOT_LEN].to_vec();
    b[..8].copy_from_slice(b"ECDNDIR\0");
    b[8..12].copy_from_slice(&DIR_VERSION.to_le_bytes());
    b[48..56].copy_from_slice(&(slots as u64).to_le_bytes());
    let head = ecdn_store::crc32c(&b[..60]);
    b[60..64].copy_from_slice(&head.to_le_bytes());
    let body = ecdn_store::crc32c(&b[DIR_HEADER_LEN..]);
    b.extend_from_slice(&body.to_le_bytes());
    b.extend_from_slice(&head.to_le_bytes());
    debug_assert_eq!(b.len(), DIR_HEADER_LEN + slots * DIR_SLOT_LEN + DIR_FOOT_LEN);
    check(&b);
}

fn check_store(data: &[u8]) {
    check_directory(data);
    let hl = HEADER_LEN as usize;
    let _ = Header::decode(data);
    if data.len() >= hl {
        let mut h = data[..hl].to_vec();
        let c = ecdn_store::crc32c(&h[4..60]);
        h[60..64].copy_from_slice(&c.to_le_bytes());
        if let Some((hd, _)) = Header::decode(&h) {
            let mut again = [0u8; HEADER_LEN as usize];
            hd.encode(&mut again);
            assert_eq!(Header::decode(&again), Some((hd, true)));
        }
    }
    let _ = Superblock::decode(data);
    if data.len() >= SUPER_LEN {
        let mut s = data[..SUPER_LEN].to_vec();
        s[0..8].copy_from_slice(b"ECDNSTOR");
        let c = ecdn_store::crc32c(&s[0..32]);
        s[32..36].copy_from_slice(&c.to_le_bytes());
        if let Ok(sb) = Superblock::decode(&s) {
            assert_eq!(Superblock::decode(&sb.encode()), Ok(sb));
        }
    }
}

fuzz_target!(|data: &[u8]| {
    // As is, and behind a valid magic + version so the decoder gets past them.
    let prefixed = [b"ECNM\x01".as_slice(), data].concat();
    for bytes in [data, &prefixed] {
        if let Some(m) = meta::decode(bytes) {
            assert_eq!(meta::decode(&meta::encode(&m)), Some(m));
        }
    }
    check_store(data);

    let mut headers = HeaderMap::new();
    for (i, piece) in data.split(|&b| b == b'\n').enumerate() {
        if let Ok(s) = std::str::from_utf8(piece) {
            check_path(s);
            check_range(s);
            let _ = freshness::http_date(s);
        }
        if let Ok(v) = HeaderValue::from_bytes(piece) {
            let name = HeaderName::from_static(NAMES[i % NAMES.len()]);
            headers.append(name, v);
        }
    }
    let d = freshness::request_directives(&headers);
    let _ = d.max_age;
    for auth in [false, true] {
        let _ = freshness::storable_lifetime(auth, StatusCode::OK, &headers);
    }
    let _ = freshness::origin_age(&headers);
    let tokens = freshness::connection_tokens(&headers);
    let stored = freshness::headers_to_store(&headers);
    for (name, _) in &stored {
        assert!(!freshness::is_hop_by_hop(name, &tokens), "{name} stored");
    }
    if let Some(names) = freshness::vary_names(&headers) {
        assert!(names.windows(2).all(|w| w[0] < w[1]), "{names:?}");
        let _ = freshness::vary_suffix(&names, &headers);
    }
});
