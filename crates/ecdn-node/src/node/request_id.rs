//! Request ids: one request followed across the cluster and to the origin.
//!
//! Every client request gets an id: the client's own `X-Request-Id` if it sent a valid one (1 to
//! [`MAX_LEN`] characters from `A-Z a-z 0-9 - _ . : + / = @`, which covers UUIDs, W3C trace ids
//! and base64), else a new one (16 hex digits, unique in the process: a bijective mix of a
//! counter that starts at a random point). The request then carries it as `X-Request-Id` (so
//! the origin's fetch and a relay to the serving node forward it), the node's answer echoes it,
//! the access log line has it, and it is in scope
//! ([`ecdn_cluster::peer::REQUEST_ID`]) while the request is served: every peer request sent
//! for it carries it, and error lines written meanwhile name it. The peer listener takes the id
//! a peer request carries into scope the same way.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use hyper::header::{HeaderMap, HeaderValue};

/// The longest client id kept.
pub const MAX_LEN: usize = 128;

/// Whether a client's id is kept as it is.
pub fn valid(v: &HeaderValue) -> bool {
    let b = v.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_LEN
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || b"-_.:+/=@".contains(&c))
}

/// The request's id: its valid `X-Request-Id`, else a new one.
pub fn of(headers: &HeaderMap) -> HeaderValue {
    match headers.get(ecdn_cluster::peer::REQUEST_ID_HEADER) {
        Some(v) if valid(v) => v.clone(),
        _ => generate(),
    }
}

/// A new id: 16 hex digits.
pub fn generate() -> HeaderValue {
    static NEXT: OnceLock<AtomicU64> = OnceLock::new();
    let next = NEXT.get_or_init(|| {
        // A random start: the clock and the process id, mixed.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        AtomicU64::new(mix(now ^ u64::from(std::process::id()) << 32))
    });
    let n = mix(next.fetch_add(1, Ordering::Relaxed));
    let mut hex = [0u8; 16];
    for (i, d) in hex.iter_mut().enumerate() {
        *d = b"0123456789abcdef"[(n >> (60 - 4 * i) & 0xf) as usize];
    }
    HeaderValue::from_bytes(&hex).expect("hex digits are a valid header value")
}

/// SplitMix64's finaliser: a bijection of u64, so distinct counters give distinct ids.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_ids_are_kept_when_valid_and_new_ones_are_unique() {
        for ok in ["a", "0af7651916cd43dd8448eb211c80319c", "req-1.2:3+4/5=@_"] {
            let mut h = HeaderMap::new();
            h.insert("x-request-id", HeaderValue::from_static(ok));
            assert_eq!(of(&h), ok);
        }
        let long = "x".repeat(MAX_LEN + 1);
        for bad in ["", "a b", "a\"b", "é", long.as_str(), "a,b", "<script>"] {
            let mut h = HeaderMap::new();
            if let Ok(v) = HeaderValue::from_bytes(bad.as_bytes()) {
                h.insert("x-request-id", v);
            }
            let id = of(&h);
            assert_ne!(id.as_bytes(), bad.as_bytes(), "{bad:?}");
            assert!(valid(&id) && id.len() == 16, "{id:?}");
        }
        let ids: std::collections::HashSet<HeaderValue> = (0..10_000).map(|_| generate()).collect();
        assert_eq!(ids.len(), 10_000);
    }
}
