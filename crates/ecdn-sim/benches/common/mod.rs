//! Shared by the simulator benchmarks: the request count from the command line and generated
//! traces kept in `target/bench-data/` (seeded, so every run measures the same requests).

use std::path::PathBuf;

use ecdn_trace::gen::{GenConfig, Generator};
use ecdn_trace::{create, Format};

/// The first non-flag argument as a request count, else `default`.
pub fn requests_arg(default: u64) -> u64 {
    std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

/// `target/bench-data/NAME.oracleGeneral.bin`, generated from `cfg` the first time.
pub fn generated_trace(name: &str, cfg: GenConfig) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-data");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.oracleGeneral.bin"));
    if !path.exists() {
        let t = std::time::Instant::now();
        let mut gen = Generator::new(cfg).unwrap();
        let tmp = path.with_extension("tmp");
        let mut w = create(&tmp, &Format::OracleGeneral).unwrap();
        ecdn_trace::copy(&mut gen, &mut *w).unwrap();
        w.finish().unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        eprintln!("generated {} in {:.1?}", path.display(), t.elapsed());
    }
    path
}
