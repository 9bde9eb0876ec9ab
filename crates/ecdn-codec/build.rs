//! Links ISA-L (`libisal`, Debian's `libisal-dev`) only when the `isal` feature is enabled, so the
//! default build never needs it.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=ISAL_LIB_DIR");
    if std::env::var_os("CARGO_FEATURE_ISAL").is_some() {
        if let Some(dir) = std::env::var_os("ISAL_LIB_DIR") {
            println!("cargo::rustc-link-search=native={}", dir.to_string_lossy());
        }
        println!("cargo::rustc-link-lib=isal");
    }
}
