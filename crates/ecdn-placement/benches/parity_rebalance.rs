//! Parity rebalance (Algorithm 1) solve time, targets from the paper (§5: "for 100 buckets and
//! 10 servers, C2DN's parity bucket assignment runs within 50 µs") and for a large cluster
//! (10,000 buckets × 500 servers ≤ 100 ms).
//!
//! `cargo bench -p ecdn-placement --bench parity_rebalance [-- FILTER]`
//!
//! Loads are one period of the tests' workload: bucket popularity lognormal(0, 1) with
//! per-period lognormal(0, 0.3) noise; each bucket writes a chunk of `C_b / K` to each of its
//! data servers and parity buckets and `C_b / 4` of uncoded objects to the first two servers of
//! its walk, so data loads `l_i` come from consistent hashing and parity loads `s_n` are
//! lognormal. Every parity bucket has a current server (the count-balanced start), as in a
//! periodic rebalance.
//!
//! * `solve/…` — [`parity_rebalance`] alone on a prebuilt problem, with the default options
//!   (`SteerFlow`, `WaterFill`) and with `Off` + `Paper` (plain Algorithm 1);
//! * `placement/…` — [`Placement::rebalance`] (builds the problem, solves, applies) and a
//!   server failure + return, on a clone of a placement with loads recorded.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use ecdn_placement::{
    parity_rebalance, Budget, Placement, PlacementConfig, RebalanceOptions, Stability,
};

#[path = "../tests/common/mod.rs"]
mod common;

use common::{full_problem, popularity, record_period, Rng};

const SIZES: [(usize, usize, usize, usize); 4] = [
    // buckets, servers, k, p
    (100, 10, 3, 1),
    (100, 10, 3, 3),
    (10_000, 500, 3, 1),
    (10_000, 500, 3, 3),
];

fn loaded(buckets: usize, servers: usize, k: usize, p: usize) -> Placement {
    let cfg = PlacementConfig {
        buckets,
        k,
        p,
        ..PlacementConfig::default()
    };
    let mut pl = Placement::new(&vec![1.0; servers], cfg).unwrap();
    let mut rng = Rng(2024);
    let pop = popularity(buckets, 1e9, &mut rng);
    record_period(&mut pl, &pop, 0.3, &mut rng);
    pl
}

fn solve(c: &mut Criterion) {
    let mut group = c.benchmark_group("solve");
    group.measurement_time(Duration::from_secs(4));
    for (buckets, servers, k, p) in SIZES {
        let problem = full_problem(&loaded(buckets, servers, k, p));
        let plain = RebalanceOptions {
            weigh: ecdn_placement::Weigh::Loads,
            stability: Stability::Off,
            budget: Budget::Paper,
            carry_ppm: 0,
            hold_ppm: 0,
        };
        for (name, options) in [("default", RebalanceOptions::default()), ("plain", plain)] {
            let id = format!("{buckets}x{servers}/k{k}p{p}/{name}");
            group.bench_function(id, |b| {
                b.iter(|| parity_rebalance(black_box(&problem), options))
            });
        }
    }
    group.finish();
}

fn placement(c: &mut Criterion) {
    let mut group = c.benchmark_group("placement");
    group.measurement_time(Duration::from_secs(4));
    for (buckets, servers, k, p) in SIZES {
        let pl = loaded(buckets, servers, k, p);
        group.bench_function(format!("{buckets}x{servers}/k{k}p{p}/rebalance"), |b| {
            b.iter_batched(
                || pl.clone(),
                |mut pl| pl.rebalance(),
                BatchSize::LargeInput,
            )
        });
        group.bench_function(format!("{buckets}x{servers}/k{k}p{p}/fail+return"), |b| {
            b.iter_batched(
                || pl.clone(),
                |mut pl| {
                    pl.set_available(1, false);
                    pl.set_available(1, true)
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, solve, placement);
criterion_main!(benches);
