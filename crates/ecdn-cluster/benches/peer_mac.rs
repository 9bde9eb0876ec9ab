//! The peer protocol's MAC per core (issue 39): what signature version 2 spent on a body
//! (HMAC-SHA256 over its SHA-256, i.e. SHA-256 of every byte: the `sha2` crate, which uses the
//! CPU's SHA extensions where it has them) against version 3's keyed BLAKE3 — a streamed
//! body's tag over a whole chunk, and the tags of its 32 KiB sub-chunks in a range answer —
//! and what mutual TLS on the peer link (`[peer_tls]`) spends on the same bytes: AES-256-GCM,
//! the cipher two rustls peers agree on first, sealing them in 16 KiB records with ring, the
//! provider the node's TLS uses (issue 66: whether the tags are worth their cost under TLS).
//!
//! Run: `cargo bench -p ecdn-cluster --bench peer_mac`; throughput in bytes per second.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ecdn_cluster::auth::ClusterKey;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

fn macs(c: &mut Criterion) {
    let key = ClusterKey::new(b"0123456789abcdef-secret");
    let mut g = c.benchmark_group("peer_mac");
    for size in [32usize << 10, 1 << 20] {
        let body = vec![0x5au8; size];
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_with_input(
            BenchmarkId::new("v2 hmac-sha256", size),
            &body,
            |b, body| {
                b.iter(|| {
                    let digest = Sha256::digest(body);
                    let mut mac =
                        Hmac::<Sha256>::new_from_slice(b"0123456789abcdef-secret").unwrap();
                    mac.update(&digest);
                    mac.finalize().into_bytes()
                })
            },
        );
        g.bench_with_input(BenchmarkId::new("v3 body tag", size), &body, |b, body| {
            b.iter(|| {
                let (_, mut tagger) = key.sign_streamed(
                    "PUT",
                    "/_peer/piece/0/k",
                    ecdn_cluster::auth::Recipient {
                        addr: "127.0.0.1:1".parse().unwrap(),
                        epoch: 1,
                    },
                    1,
                    1,
                );
                tagger.update(body);
                tagger.finish()
            })
        });
        g.bench_with_input(
            BenchmarkId::new("v3 sub-chunk tags", size),
            &body,
            |b, body| {
                let tagger = key.sub_chunk_tagger(&[7; 32]);
                b.iter(|| {
                    let mut last = [0u8; 16];
                    for (i, sub) in body.chunks(32 << 10).enumerate() {
                        last = tagger.tag(i as u64, sub);
                    }
                    last
                })
            },
        );
        g.bench_with_input(
            BenchmarkId::new("tls aes-256-gcm records", size),
            &body,
            |b, body| {
                use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
                let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &[9; 32]).unwrap());
                let mut buf = body.clone();
                let mut seq = 0u64;
                b.iter(|| {
                    let mut last = None;
                    for record in buf.chunks_mut(16 << 10) {
                        seq += 1;
                        let mut nonce = [0u8; 12];
                        nonce[4..].copy_from_slice(&seq.to_be_bytes());
                        let nonce = Nonce::assume_unique_for_key(nonce);
                        last = Some(key.seal_in_place_separate_tag(nonce, Aad::empty(), record));
                    }
                    last
                })
            },
        );
    }
    g.finish();
}

criterion_group!(benches, macs);
criterion_main!(benches);
