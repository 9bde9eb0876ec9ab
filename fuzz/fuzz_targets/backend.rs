//! The backend tier's parsers on arbitrary input: a coded file's manifest as it comes from the
//! store's metadata (what parses re-encodes to itself), a coded file's chunks as the store
//! returns them (a chunk that passes its CRCs and decodes gives the object's bytes, never
//! others), the gateway's request path and `Range`, and the emulator's path, `Range` and
//! multipart completion list (every range is within the object), and an empirical delay file
//! (what parses draws delays within bounds).
#![no_main]

use bytes::Bytes;
use ecdn_backend::emulator::delays::{Empirical, LONGEST};
use ecdn_backend::emulator::{bucket_and_key, part_numbers, range};
use ecdn_backend::gateway::{key_of, single_range};
use ecdn_backend::strips::{self, Manifest};
use ecdn_codec::CodecCache;
use hyper::header::HeaderValue;
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

/// A small object coded (12, 6), once.
fn coded() -> &'static (Vec<u8>, Manifest, Vec<u8>, CodecCache) {
    static C: OnceLock<(Vec<u8>, Manifest, Vec<u8>, CodecCache)> = OnceLock::new();
    C.get_or_init(|| {
        let codecs = CodecCache::new();
        let data: Vec<u8> = (0..600u32).map(|i| (i * 31 % 251) as u8).collect();
        let (m, file) = strips::encode(&codecs, &data, 12, 6).unwrap();
        (data, m, file, codecs)
    })
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(e) = Empirical::parse(&text) {
        for bytes in [0, 1, data.len() as u64, 1 << 40, u64::MAX] {
            for u in [0.0, 0.5, 0.999, 1.0 - 1e-12, 1.0] {
                let d = e.sample(bytes, u);
                assert!((0.0..=LONGEST).contains(&d), "{d}");
            }
        }
    }
    if let Ok(m) = Manifest::from_metadata(&text) {
        assert_eq!(Manifest::from_metadata(&m.to_metadata()).as_ref(), Ok(&m));
        let _ = m.fits(data.len() % 13, data.len() % 7);
    }
    // Chunks of the (·, k) code with bytes from the input in place of some of them.
    let (object, m, file, codecs) = coded();
    if let Some((&sel, rest)) = data.split_first() {
        let k = [1, 2, 3, 6][(sel & 3) as usize];
        let per = m.chunk_range(k, 0).end as usize;
        let mut chunks = Vec::new();
        for c in 0..m.n / (m.k / k) {
            let r = m.chunk_range(k, c);
            let mut b = file[r.start as usize..r.end as usize].to_vec();
            if sel >> 2 & (1 << (c % 6)) != 0 {
                let n = rest.len().min(per);
                b[..n].copy_from_slice(&rest[..n]);
            }
            if strips::check_chunk(m, k, c, &b).is_ok() {
                chunks.push((c, Bytes::from(b)));
            }
        }
        if let Ok(got) = strips::decode(codecs, m, k, &chunks) {
            assert_eq!(&got[..], &object[..]);
        }
    }
    // Request paths and ranges.
    let size = data.len() as u64;
    if let Ok(v) = HeaderValue::from_bytes(data) {
        for r in [range(Some(&v), size), single_range(Some(&v), size)]
            .into_iter()
            .flatten()
        {
            if let Ok((a, b)) = r {
                assert!(a < b && b <= size, "{a}..{b} of {size}");
            }
        }
    }
    if let Some(k) = key_of(&text) {
        assert!(!k.is_empty());
    }
    let _ = bucket_and_key(&text);
    let _ = part_numbers(data);
});
