//! Cluster simulator throughput (issue 3: ≥ 2 M requests/s): every scheme, 10 servers, FIFO,
//! on a 5M-request generated trace (Zipf 0.9 over 1M objects, web + video sizes, so both
//! replicated and coded objects occur), single thread, from an oracleGeneral file.
//!
//! `cargo bench -p ecdn-sim --bench cluster [-- REQUESTS]`

use std::time::Instant;

use ecdn_sim::cluster::{simulate_cluster, ClusterConfig, Scheme};
use ecdn_trace::gen::{GenConfig, Scenario, SizeDist};
use ecdn_trace::{open, OpenOptions};

mod common;

fn main() {
    let requests = common::requests_arg(5_000_000);
    let path = common::generated_trace(
        &format!("cluster-webvideo-{requests}"),
        GenConfig {
            requests,
            objects: 1_000_000,
            alpha: 0.9,
            sizes: SizeDist::WebVideo,
            rate: 1000.0,
            seed: 77,
            scenario: Scenario::Stationary,
        },
    );
    println!("trace: {requests} requests, Zipf 0.9 over 1M objects, web+video sizes; 10 servers, FIFO, 64 GiB in total; single thread");
    println!(
        "{:<14} {:>8} {:>9} {:>10} {:>9}",
        "scheme", "miss", "byte_miss", "write_imb", "M req/s"
    );
    for scheme in ["no-rep", "rep2", "rep3", "c2dn-norebal", "c2dn"] {
        let mut cfg = ClusterConfig::new(Scheme::parse(scheme).unwrap(), 64 << 30);
        // As measured in BENCHMARKS.md: periodic parity rebalance every 300 s (the default
        // before issue 10; now only availability changes rebalance unless asked).
        cfg.rebalance_every = 300.0;
        let mut best: Option<(f64, ecdn_sim::cluster::ClusterResult)> = None;
        for _ in 0..2 {
            let mut r = open(&path, &OpenOptions::default()).unwrap();
            let t = Instant::now();
            let res = simulate_cluster(&mut *r, &cfg, &|_| {}).unwrap();
            let s = t.elapsed().as_secs_f64();
            if best.as_ref().is_none_or(|b| s < b.0) {
                best = Some((s, res));
            }
        }
        let (s, r) = best.unwrap();
        println!(
            "{:<14} {:>8.4} {:>9.4} {:>10.4} {:>9.2}",
            scheme,
            r.miss_ratio,
            r.byte_miss_ratio,
            r.write_imbalance,
            requests as f64 / s / 1e6
        );
    }
}
