//! Generates the gRPC client code of the vendored etcd client (`third_party/etcd-client`) from
//! etcd's `.proto` files, with [protox] (a protobuf compiler in Rust) and tonic-prost-build,
//! the generator upstream's build script runs.
//!
//! Upstream etcd-client compiles these definitions in a build script that runs `protoc`, so
//! every build of ecdn needed a system `protoc`. The vendored copy includes the code this crate
//! generated instead and commits it; `cargo run -p etcd-proto` regenerates it after the
//! `.proto` files change, and this crate's test fails while the committed code differs from
//! what the `.proto` files give. Nothing here is built by `cargo build` of the `ecdn` binary.

use std::io;
use std::path::{Path, PathBuf};

/// The `.proto` files upstream's build script compiles, relative to [`proto_root`], and the
/// Rust module (protobuf package) each one becomes.
pub const PROTOS: &[(&str, &str)] = &[
    ("etcd/api/authpb/auth.proto", "authpb"),
    ("etcd/api/etcdserverpb/rpc.proto", "etcdserverpb"),
    ("etcd/api/mvccpb/kv.proto", "mvccpb"),
    (
        "etcd/server/etcdserver/api/v3election/v3electionpb/v3election.proto",
        "v3electionpb",
    ),
    (
        "etcd/server/etcdserver/api/v3lock/v3lockpb/v3lock.proto",
        "v3lockpb",
    ),
];

/// The vendored crate's directory.
pub fn crate_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../third_party/etcd-client")
}

/// Where the `.proto` files are (also the include path for their imports).
pub fn proto_root() -> PathBuf {
    crate_root().join("proto")
}

/// Where the committed code is: one `<package>.rs` per entry of [`PROTOS`].
pub fn generated_dir() -> PathBuf {
    crate_root().join("src/rpc/generated")
}

/// Compiles [`PROTOS`] and returns each package's generated Rust code, in [`PROTOS`]' order.
/// Clients only, with tonic's transport, and `#[allow(clippy::all)]` on every type, which
/// tonic-prost-build adds itself when it runs `protoc` but not when given descriptors: the code is
/// then byte for byte what upstream's build script generates with `protoc` (checked with
/// protoc 3.21.12 on 2026-11-27).
pub fn generate() -> io::Result<Vec<(&'static str, String)>> {
    let root = proto_root();
    let files: Vec<PathBuf> = PROTOS.iter().map(|(f, _)| root.join(f)).collect();
    let fds = protox::compile(&files, [&root])
        .map_err(|e| io::Error::other(format!("compiling etcd's .proto files: {e}")))?;
    let out = tempfile::tempdir()?;
    tonic_prost_build::configure()
        .build_server(false)
        .type_attribute(".", "#[allow(clippy::all)]")
        .emit_rerun_if_changed(false)
        .out_dir(out.path())
        .compile_fds(fds)?;
    PROTOS
        .iter()
        .map(|(_, package)| {
            let path = out.path().join(format!("{package}.rs"));
            let code = std::fs::read_to_string(&path)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
            Ok((*package, code))
        })
        .collect()
}
