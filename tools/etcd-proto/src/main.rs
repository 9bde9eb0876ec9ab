//! `cargo run -p etcd-proto`: regenerates `third_party/etcd-client/src/rpc/generated/` from the
//! vendored `.proto` files (see the crate doc).

fn main() -> std::io::Result<()> {
    let dir = etcd_proto::generated_dir();
    std::fs::create_dir_all(&dir)?;
    for (package, code) in etcd_proto::generate()? {
        let path = dir.join(format!("{package}.rs"));
        std::fs::write(&path, code)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
