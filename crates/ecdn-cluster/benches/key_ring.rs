//! What one request's signature costs, signed and then checked, with an empty body: the
//! per-request price of the peer protocol's authentication, and of the key ring (issue 42: a
//! read lock on the ring per signature and per check since keys rotate).
//!
//! Run: `cargo bench -p ecdn-cluster --bench key_ring`.

use criterion::{criterion_group, criterion_main, Criterion};
use ecdn_cluster::auth::{ClusterKey, Recipient};
use hyper::header::HeaderMap;

fn sign_and_verify(c: &mut Criterion) {
    let key = ClusterKey::new(b"0123456789abcdef-secret");
    let to = Recipient {
        addr: "127.0.0.1:7400".parse().unwrap(),
        epoch: 3,
    };
    let digest = [7u8; 32];
    let mut nonce = 1u128;
    let mut g = c.benchmark_group("key_ring");
    g.bench_function("sign", |b| {
        b.iter(|| {
            nonce += 1;
            key.sign_digest("GET", "/_peer/has/abc", to, 1_000, nonce, &digest)
        })
    });
    g.bench_function("sign and verify", |b| {
        b.iter(|| {
            nonce += 1;
            let sig = key.sign_digest("GET", "/_peer/has/abc", to, 1_000, nonce, &digest);
            let mut headers = HeaderMap::new();
            for (name, value) in sig.header_map() {
                if let Some(name) = name {
                    headers.insert(name, value);
                }
            }
            key.verify("GET", "/_peer/has/abc", &headers, 1_000).is_ok()
        })
    });
    g.finish();
}

criterion_group!(benches, sign_and_verify);
criterion_main!(benches);
