//! The raw fuzz input is the client's side of one TLS connection to the node's TLS listener
//! path: rustls's record and handshake parsers, the node's certificate choice by SNI (a
//! default certificate and two by name, one a wildcard), ALPN, then HTTP/2 or HTTP/1.1 as
//! negotiated. A fuzzer cannot complete a handshake (it would need the session keys), so this
//! covers everything up to the server's first flight; any panic or a connection left open
//! after EOF fails (see `harness.rs`).
#![no_main]

use ecdn_node::node::tls::{CertFiles, TlsSettings};
use ecdn_node::node::Speak;
use libfuzzer_sys::fuzz_target;

#[path = "harness.rs"]
mod harness;

/// Self-signed certificates for the node, written once in a temporary directory.
fn settings() -> TlsSettings {
    let dir = std::env::temp_dir().join(format!("ecdn-fuzz-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let issue = |file: &str, names: &[&str]| {
        let key = rcgen::KeyPair::generate().expect("a key");
        let params =
            rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .expect("names");
        let cert = params.self_signed(&key).expect("a certificate");
        let files = CertFiles {
            cert: dir.join(format!("{file}.pem")),
            key: dir.join(format!("{file}.key")),
        };
        std::fs::write(&files.cert, cert.pem()).expect("written");
        std::fs::write(&files.key, key.serialize_pem()).expect("written");
        files
    };
    TlsSettings {
        default: issue("default", &["default.fuzz"]),
        hosts: vec![
            ("a.fuzz".into(), issue("a", &["a.fuzz"])),
            ("*.w.fuzz".into(), issue("w", &["*.w.fuzz"])),
        ],
    }
}

fuzz_target!(|data: &[u8]| {
    let node = harness::node(|| Some(settings()));
    harness::exchange(node, data, Speak::Tls);
});
