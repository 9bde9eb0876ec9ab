//! EC-Cache's load model on the paper's setting (§5.1, §6.2): 25 servers, Zipf 0.9, 40 MB
//! objects, a 15% memory budget; λ for selective replication and EC-Cache (k = 10, r = 1,
//! Δ = 0 and 1) over three placements, Theorem 1's variance ratio for k in {2, 4, 6, 10}, and
//! §6.6's sensitivity of λ to k in {2, 4, 6, 10} and Δ in {0, 1, 2, 3} (r = 1, seed 1; the
//! budget is the parity's 1/k plus the same 5% for skew as at k = 10, where 1/k exceeds 15%).
//!
//! `cargo run --release -p ecdn-objects --example model [OBJECTS [REQUESTS]]`

use ecdn_objects::budget::Scheme;
use ecdn_objects::model::{simulate, variance_ratio, SimConfig};

fn main() {
    let mut args = std::env::args().skip(1);
    let objects: usize = args.next().map_or(500, |a| a.parse().expect("OBJECTS"));
    let requests: u64 = args
        .next()
        .map_or(1_000_000, |a| a.parse().expect("REQUESTS"));
    println!("25 servers, {objects} objects of 40 MiB, Zipf 0.9, budget 15%, {requests} reads");
    for (name, scheme) in [
        ("selective replication", Scheme::SelectiveReplication),
        (
            "EC-Cache k10 r1 Δ0",
            Scheme::EcCache {
                k: 10,
                r: 1,
                delta: 0,
            },
        ),
        (
            "EC-Cache k10 r1 Δ1",
            Scheme::EcCache {
                k: 10,
                r: 1,
                delta: 1,
            },
        ),
    ] {
        let lambdas: Vec<String> = (1..=3)
            .map(|seed| {
                let r = simulate(&SimConfig {
                    servers: 25,
                    objects,
                    alpha: 0.9,
                    size: 40 << 20,
                    scheme,
                    budget: 0.15,
                    requests,
                    failed: Vec::new(),
                    seed,
                })
                .expect("a valid configuration");
                format!("{:.1}", r.imbalance_percent)
            })
            .collect();
        println!("  λ {name}: {} % (seeds 1, 2, 3)", lambdas.join(", "));
    }
    println!("λ (%) of EC-Cache by k (rows) and Δ (columns), r = 1, budget 1/k + 5%, seed 1:");
    println!(
        "  {:>4} {:>7} {:>7} {:>7} {:>7}",
        "k", "Δ=0", "Δ=1", "Δ=2", "Δ=3"
    );
    for k in [2, 4, 6, 10] {
        let row: Vec<String> = (0..=3)
            .map(|delta| {
                // Δ beyond r reads parities the budget added, or all the object's splits.
                let r = simulate(&SimConfig {
                    servers: 25,
                    objects,
                    alpha: 0.9,
                    size: 40 << 20,
                    scheme: Scheme::EcCache { k, r: 1, delta },
                    budget: 1.0 / k as f64 + 0.05,
                    requests,
                    failed: Vec::new(),
                    seed: 1,
                })
                .expect("a valid configuration");
                format!("{:>7.1}", r.imbalance_percent)
            })
            .collect();
        println!("  {k:>4} {}", row.join(" "));
    }
    println!("Theorem 1 on 25 servers, 500 equally popular objects, 200 placements:");
    for k in [2, 4, 6, 10] {
        let (ratio, predicted) = variance_ratio(25, 500, k, 200, 1).expect("valid");
        println!(
            "  k {k}: Var(L_EC)/Var(L_SR) = {ratio:.4}; distinct servers predict {predicted:.4}, \
             the paper's simplification 1/k = {:.4}",
            1.0 / k as f64
        );
    }
}
