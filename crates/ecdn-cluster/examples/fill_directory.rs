//! Fills a cluster's object directory with `N` records of S3 keys (`s3/BUCKET/HEX`, keys
//! `k0000000`…), for the S3 face's listing benchmark (`benches/s3-face.sh`): only the records
//! are written (one small replicated object each, its splits never stored), so a listing of a
//! million keys can be timed without storing a million objects. Reads of these keys fail.
//!
//!     cargo run --release -p ecdn-cluster --example fill_directory -- CLUSTER_FILE BUCKET N

use std::sync::Arc;
use std::time::Instant;

use ecdn_cluster::objects::ObjectDirectory;
use ecdn_cluster::ClusterConfig;
use ecdn_objects::meta::{ObjectMeta, ObjectName, S3Attrs};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, file, bucket, n] = args.as_slice() else {
        eprintln!("usage: fill_directory CLUSTER_FILE BUCKET N");
        std::process::exit(2);
    };
    let cfg = ClusterConfig::load(std::path::Path::new(file)).expect("the cluster file");
    let n: usize = n.parse().expect("N");
    let servers = cfg.nodes.len();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let dir = Arc::new(ObjectDirectory::for_cluster(&cfg));
        let t0 = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        let workers = 32;
        for w in 0..workers {
            let (dir, bucket) = (dir.clone(), bucket.clone());
            tasks.spawn(async move {
                for i in (w..n).step_by(workers) {
                    let key = format!("k{i:07}");
                    let hex: String = key.bytes().map(|b| format!("{b:02x}")).collect();
                    let name = ObjectName::parse(&format!("s3/{bucket}/{hex}")).unwrap();
                    let version = dir.begin(&name).await.unwrap();
                    let meta = ObjectMeta {
                        name,
                        version,
                        size: 1000,
                        k: 1,
                        r: 1,
                        splits: vec![0, 1],
                        stored: vec![true, true],
                        sha256: "00".repeat(32),
                        sub_chunk: 32 << 10,
                        crcs: vec![0, 0],
                        window_stripes: 0,
                        digests: Vec::new(),
                        s3: Some(S3Attrs {
                            etag: "0".repeat(32),
                            modified_ms: 0,
                            content_type: None,
                            metadata: Vec::new(),
                            parts: None,
                        }),
                    };
                    dir.commit(&meta, servers).await.unwrap();
                }
            });
        }
        while tasks.join_next().await.is_some() {}
        let s = t0.elapsed().as_secs_f64();
        println!("{n} records in {s:.1} s ({:.0} per second)", n as f64 / s);
    });
}
