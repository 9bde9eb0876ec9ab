//! The committed gRPC code of the vendored etcd client is what its `.proto` files give.

#[test]
fn committed_code_matches_the_proto_files() {
    let dir = etcd_proto::generated_dir();
    let mut stale = Vec::new();
    for (package, code) in etcd_proto::generate().expect("generating the etcd gRPC code") {
        let path = dir.join(format!("{package}.rs"));
        let committed = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        assert!(
            code.len() > 1000,
            "{package}: suspiciously little code generated"
        );
        if committed != code {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "the committed etcd gRPC code differs from what the .proto files give: {stale:?}; \
         run `cargo run -p etcd-proto` and commit the result"
    );
}
