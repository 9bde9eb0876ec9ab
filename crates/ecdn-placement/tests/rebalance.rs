//! Algorithm 1 on its own ([`parity_rebalance`]):
//!
//! * the flow is a valid maximum flow: compared with a plain Edmonds–Karp on the explicit graph
//!   written here from the paper's description, every server's inflow within its budget, no
//!   flow to forbidden servers;
//! * budgets follow `max(⌈W·w_i/Σw⌉ − l_i, 0)` (and water-filling only differs when a server is
//!   over its share);
//! * assignments are feasible (never on a forbidden server, siblings on distinct servers) and
//!   come from the flow's candidates when one is feasible;
//! * when perfect balance is possible, the result is within 5% of it;
//! * the stability trade-off (moves vs balance) of [`Stability`] and [`Budget`].

mod common;

use std::collections::VecDeque;

use common::{popularity, record_period, water_level, Rng};
use ecdn_placement::{
    parity_rebalance, Budget, ParityProblem, Placement, PlacementConfig, RebalanceOptions,
    ServerId, Stability, Weigh,
};
use proptest::prelude::*;

const ALL_OPTIONS: [RebalanceOptions; 6] = [
    RebalanceOptions {
        weigh: Weigh::Loads,
        stability: Stability::Off,
        budget: Budget::Paper,
        carry_ppm: 0,
        hold_ppm: 0,
    },
    RebalanceOptions {
        weigh: Weigh::Loads,
        stability: Stability::KeepCurrent,
        budget: Budget::Paper,
        carry_ppm: 0,
        hold_ppm: 0,
    },
    RebalanceOptions {
        weigh: Weigh::Loads,
        stability: Stability::SteerFlow,
        budget: Budget::Paper,
        carry_ppm: 0,
        hold_ppm: 0,
    },
    RebalanceOptions {
        weigh: Weigh::Loads,
        stability: Stability::Off,
        budget: Budget::WaterFill,
        carry_ppm: 0,
        hold_ppm: 0,
    },
    RebalanceOptions {
        weigh: Weigh::Loads,
        stability: Stability::KeepCurrent,
        budget: Budget::WaterFill,
        carry_ppm: 0,
        hold_ppm: 0,
    },
    RebalanceOptions {
        weigh: Weigh::Loads,
        stability: Stability::SteerFlow,
        budget: Budget::WaterFill,
        carry_ppm: 0,
        hold_ppm: 0,
    },
];

/// Maximum flow of the explicit graph (source, parity nodes, servers, sink) with the given
/// sink capacities, by textbook Edmonds–Karp on a dense capacity matrix.
#[allow(clippy::needless_range_loop)] // matrix indices read best as indices
fn reference_max_flow(problem: &ParityProblem, budget: &[u128]) -> u128 {
    let n = problem.len();
    let m = problem.servers().len();
    let size = n + m + 2;
    let (source, sink) = (n + m, n + m + 1);
    let mut cap = vec![vec![0u128; size]; size];
    for node in 0..n {
        let s = problem.parity_load(node) as u128;
        cap[source][node] = s;
        for (i, &server) in problem.servers().iter().enumerate() {
            if !problem.forbidden(node).contains(&server) {
                cap[node][n + i] = s;
            }
        }
    }
    for i in 0..m {
        cap[n + i][sink] = budget[i];
    }
    let mut total = 0;
    loop {
        let mut parent = vec![usize::MAX; size];
        parent[source] = source;
        let mut queue = VecDeque::from([source]);
        while let Some(u) = queue.pop_front() {
            for v in 0..size {
                if parent[v] == usize::MAX && cap[u][v] > 0 {
                    parent[v] = u;
                    queue.push_back(v);
                }
            }
        }
        if parent[sink] == usize::MAX {
            return total;
        }
        let mut bottleneck = u128::MAX;
        let mut v = sink;
        while v != source {
            bottleneck = bottleneck.min(cap[parent[v]][v]);
            v = parent[v];
        }
        let mut v = sink;
        while v != source {
            cap[parent[v]][v] -= bottleneck;
            cap[v][parent[v]] += bottleneck;
            v = parent[v];
        }
        total += bottleneck;
    }
}

/// A random problem: `servers` servers with integer weights 1–4 (so budgets are exact), data loads, `buckets` buckets with `p` parity buckets each, `k` forbidden servers
/// per bucket, loads of mixed scale (zeros included) and random current servers.
#[derive(Clone, Debug)]
struct Case {
    weights: Vec<f64>,
    loads: Vec<u64>,
    buckets: Vec<Bucket>,
}

/// A bucket's data servers (forbidden for its parity) and its parity buckets' loads and
/// current servers.
type Bucket = (Vec<ServerId>, Vec<(u64, Option<ServerId>)>);

fn case() -> impl Strategy<Value = Case> {
    (2usize..=9, 1usize..=3, 1usize..=3, 1usize..=14).prop_flat_map(|(servers, k, p, buckets)| {
        let k = k.min(servers - 1);
        let p = p.min(servers - k);
        let weights = prop::collection::vec(1u32..=4, servers)
            .prop_map(|w| w.into_iter().map(f64::from).collect::<Vec<f64>>());
        let load = prop_oneof![Just(0u64), 0u64..50, 0u64..5_000_000];
        let loads = prop::collection::vec(load.clone(), servers);
        let bucket = (
            any::<u64>().prop_map(move |seed| {
                let mut rng = Rng(seed);
                let mut ids: Vec<ServerId> = (0..servers).collect();
                for i in (1..ids.len()).rev() {
                    ids.swap(i, rng.below(i as u64 + 1) as usize);
                }
                ids
            }),
            prop::collection::vec((load, any::<bool>()), p),
        )
            .prop_map(move |(perm, parity)| {
                let data = perm[..k].to_vec();
                let free = &perm[k..];
                let parity = parity
                    .into_iter()
                    .enumerate()
                    .map(|(j, (s, has))| (s, has.then(|| free[j % free.len()])))
                    .collect();
                (data, parity)
            });
        (weights, loads, prop::collection::vec(bucket, buckets)).prop_map(
            |(weights, loads, buckets)| Case {
                weights,
                loads,
                buckets,
            },
        )
    })
}

fn build(case: &Case) -> ParityProblem {
    let mut problem = ParityProblem::new();
    for (s, (&w, &l)) in case.weights.iter().zip(&case.loads).enumerate() {
        problem.add_server(s, w, l).unwrap();
    }
    for (b, (data, parity)) in case.buckets.iter().enumerate() {
        for &(load, current) in parity {
            problem.add_parity_bucket(b, load, data, current);
        }
    }
    problem
}

fn paper_budget(problem: &ParityProblem, weights: &[f64]) -> Vec<u128> {
    let w = problem.total_load();
    let sum_w: u128 = weights.iter().map(|&x| x as u128).sum();
    (0..weights.len())
        .map(|i| {
            (w * weights[i] as u128)
                .div_ceil(sum_w)
                .saturating_sub(problem.server_load(i) as u128)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn flow_is_a_maximum_flow_within_budgets(case in case()) {
        let problem = build(&case);
        let paper = paper_budget(&problem, &case.weights);
        for options in ALL_OPTIONS {
            let result = parity_rebalance(&problem, options);
            match options.budget {
                Budget::Paper => prop_assert_eq!(&result.budget, &paper),
                Budget::WaterFill => {
                    let over = (0..case.weights.len()).any(|i| paper[i] == 0);
                    if !over {
                        prop_assert_eq!(&result.budget, &paper);
                    }
                    for (ours, theirs) in result.budget.iter().zip(&paper) {
                        prop_assert!(ours <= theirs);
                    }
                    prop_assert!(result.budget.iter().sum::<u128>() >= result.supply);
                }
            }
            prop_assert_eq!(result.max_flow, reference_max_flow(&problem, &result.budget));
            let mut inflow = vec![0u128; case.weights.len()];
            for node in 0..problem.len() {
                let mut out = 0u128;
                for &(server, f) in result.flows(node) {
                    prop_assert!(f > 0);
                    prop_assert!(!problem.forbidden(node).contains(&server));
                    inflow[server] += f as u128;
                    out += f as u128;
                }
                prop_assert!(out <= problem.parity_load(node) as u128);
            }
            prop_assert_eq!(&inflow, &result.flow_in);
            for (i, (flow, budget)) in inflow.iter().zip(&result.budget).enumerate() {
                prop_assert!(flow <= budget, "server {} over budget", i);
            }
        }
    }

    #[test]
    fn assignment_is_feasible_and_follows_the_flow(case in case()) {
        let problem = build(&case);
        for options in ALL_OPTIONS {
            let result = parity_rebalance(&problem, options);
            let mut load: Vec<u128> = case.loads.iter().map(|&l| l as u128).collect();
            for (node, server) in result.server.iter().enumerate() {
                let server = server.expect("a feasible server always exists here");
                prop_assert!(!problem.forbidden(node).contains(&server));
                for other in 0..problem.len() {
                    if other != node && problem.bucket(other) == problem.bucket(node) {
                        prop_assert_ne!(result.server[other], Some(server), "siblings share a server");
                    }
                }
                load[server] += problem.parity_load(node) as u128;
                // With one parity bucket per bucket nothing can conflict, so a bucket with
                // flow goes to one of its candidates.
                let p = case.buckets[problem.bucket(node)].1.len();
                if p == 1 && !result.flows(node).is_empty() {
                    prop_assert!(result.flows(node).iter().any(|&(s, _)| s == server));
                }
                // A load-free bucket keeps its (feasible) server.
                if problem.parity_load(node) == 0 && p == 1 {
                    if let Some(c) = problem.current(node) {
                        prop_assert_eq!(server, c);
                    }
                }
            }
            prop_assert_eq!(&load, &result.load);
        }
    }

    /// Perfect balance exists by construction (a hidden assignment fills every server to the
    /// same total); Algorithm 1 gets within 6% of it, and with the hidden assignment as the
    /// current one, `SteerFlow` keeps it exactly. (A parity bucket is indivisible, so a server
    /// can end a bucket above the level and another one below: with buckets of 50–100 kB and
    /// ≥ 50 of them per server that is a few percent; 5.3% was seen with 5 servers, K = 3 —
    /// two candidate servers per bucket — and `KeepCurrent` with the paper's budgets.)
    #[test]
    fn near_perfect_balance_when_perfect_balance_exists(
        servers in 3usize..=12,
        per_server in 50usize..=80,
        k in 1usize..=3,
        seed in any::<u64>(),
    ) {
        let mut rng = Rng(seed);
        let buckets = servers * per_server;
        let mut hidden_load = vec![0u64; servers];
        let mut nodes = Vec::new();
        for b in 0..buckets {
            let mut ids: Vec<ServerId> = (0..servers).collect();
            for i in (1..servers).rev() {
                ids.swap(i, rng.below(i as u64 + 1) as usize);
            }
            let data = ids[..k.min(servers - 1)].to_vec();
            // The hidden assignment: the least loaded allowed server.
            let target = *ids[data.len()..].iter().min_by_key(|&&s| hidden_load[s]).unwrap();
            let s = 50_000 + rng.below(50_000);
            hidden_load[target] += s;
            nodes.push((b, s, data, target));
        }
        let top = *hidden_load.iter().max().unwrap();
        let mut problem = ParityProblem::new();
        for (i, &h) in hidden_load.iter().enumerate() {
            problem.add_server(i, 1.0, top - h + 1_000_000).unwrap();
        }
        for (b, s, data, target) in &nodes {
            problem.add_parity_bucket(*b, *s, data, Some(*target));
        }
        for options in ALL_OPTIONS {
            let result = parity_rebalance(&problem, options);
            let max = *result.load.iter().max().unwrap() as f64;
            let min = *result.load.iter().min().unwrap() as f64;
            prop_assert!(max / min <= 1.06, "{:?}: max/min {}", options, max / min);
            if options.stability == Stability::SteerFlow {
                prop_assert!(result.load.iter().all(|&l| l == result.load[0]));
                for (node, (_, _, _, target)) in nodes.iter().enumerate() {
                    prop_assert_eq!(result.server[node], Some(*target));
                }
            }
        }
    }
}

#[test]
fn budgets_match_the_paper() {
    // W = 10 + 20 + 30 + 40 (data) + 7 (parity) = 107; ⌈107 / 4⌉ = 27.
    let mut problem = ParityProblem::new();
    for (s, l) in [10, 20, 30, 40].into_iter().enumerate() {
        problem.add_server(s, 1.0, l).unwrap();
    }
    problem.add_parity_bucket(0, 7, &[], None);
    let paper = RebalanceOptions {
        budget: Budget::Paper,
        ..RebalanceOptions::default()
    };
    assert_eq!(parity_rebalance(&problem, paper).budget, vec![17, 7, 0, 0]);
    // Water-filling: the 7 bytes only lift server 0, to 17 (< 20, server 1's data load).
    assert_eq!(
        parity_rebalance(&problem, RebalanceOptions::default()).budget,
        vec![7, 0, 0, 0]
    );

    // Heterogeneous: weights 1, 2, 1, no fixed load, W = 100: shares 25, 50, 25.
    let mut problem = ParityProblem::new();
    for (s, w) in [1.0, 2.0, 1.0].into_iter().enumerate() {
        problem.add_server(s, w, 0).unwrap();
    }
    for b in 0..10 {
        problem.add_parity_bucket(b, 10, &[], None);
    }
    for options in [paper, RebalanceOptions::default()] {
        let result = parity_rebalance(&problem, options);
        assert_eq!(result.budget, vec![25, 50, 25]);
        // Server 1 takes five whole buckets; servers 0 and 2 two each and share the tenth,
        // which goes to one of them.
        assert_eq!(result.load[1], 50);
        let mut rest = [result.load[0], result.load[2]];
        rest.sort_unstable();
        assert_eq!(rest, [20, 30]);
        assert_eq!(result.max_flow, 100);
    }
}

#[test]
fn bad_servers_are_errors() {
    let mut problem = ParityProblem::new();
    assert!(problem.add_server(0, 0.0, 0).is_err());
    assert!(problem.add_server(0, f64::NAN, 0).is_err());
    problem.add_server(0, 1.0, 0).unwrap();
    assert!(problem.add_server(0, 1.0, 0).is_err());
}

#[test]
fn load_free_buckets_spread_by_count_or_stay() {
    let mut problem = ParityProblem::new();
    for s in 0..4 {
        problem.add_server(s, 1.0, 100).unwrap();
    }
    for b in 0..8 {
        problem.add_parity_bucket(b, 0, &[], None);
    }
    problem.add_parity_bucket(8, 0, &[1], Some(3));
    let result = parity_rebalance(&problem, RebalanceOptions::default());
    let mut counts = [0; 4];
    for s in &result.server[..8] {
        counts[s.unwrap()] += 1;
    }
    assert_eq!(counts, [2, 2, 2, 2]);
    assert_eq!(result.server[8], Some(3));
}

/// Two parity buckets of one bucket, and only one server with budget: the flow sends both
/// there, but they must land on distinct servers.
#[test]
fn sibling_parity_buckets_land_on_distinct_servers() {
    let mut problem = ParityProblem::new();
    for (s, l) in [(0, 1000), (1, 0), (2, 1000), (3, 1000)] {
        problem.add_server(s, 1.0, l).unwrap();
    }
    problem.add_parity_bucket(0, 100, &[0], None);
    problem.add_parity_bucket(0, 100, &[0], None);
    for options in ALL_OPTIONS {
        let result = parity_rebalance(&problem, options);
        let (a, b) = (result.server[0].unwrap(), result.server[1].unwrap());
        assert_ne!(a, b);
        assert!(a != 0 && b != 0);
        assert!(a == 1 || b == 1);
    }
}

#[test]
fn infeasible_bucket_is_left_unplaced() {
    let mut problem = ParityProblem::new();
    problem.add_server(0, 1.0, 0).unwrap();
    problem.add_server(1, 1.0, 0).unwrap();
    problem.add_parity_bucket(0, 10, &[0, 1], None);
    problem.add_parity_bucket(1, 10, &[7], None); // unknown ids are ignored
    let result = parity_rebalance(&problem, RebalanceOptions::default());
    assert_eq!(result.server[0], None);
    assert!(result.server[1].is_some());
    assert_eq!(result.max_flow, 10);
}

/// The measurement behind the default [`RebalanceOptions`]: 20 periodic rebalances with loads
/// drifting around lognormal bucket popularities; per option, the parity buckets moved per
/// rebalance and how far the loads Algorithm 1 predicts are from the water level (the best any
/// divisible assignment could do). Run with `--nocapture` for the table.
#[test]
fn stability_trade_off() {
    let cases = [(10, 100, 3, 1), (10, 100, 3, 2), (50, 1000, 3, 1)];
    let mut rows = Vec::new();
    for (servers, buckets, k, p) in cases {
        for options in ALL_OPTIONS {
            let cfg = PlacementConfig {
                buckets,
                k,
                p,
                ..PlacementConfig::default()
            };
            let mut pl = Placement::new(&vec![1.0; servers], cfg).unwrap();
            pl.set_rebalance_options(options);
            let mut rng = Rng(42);
            let pop = popularity(buckets, 1e9, &mut rng);
            let (mut moved, mut worst) = (0usize, 1.0f64);
            for period in 0..20 {
                record_period(&mut pl, &pop, 0.3, &mut rng);
                let problem = common::full_problem(&pl);
                let level = water_level(&problem);
                let result = parity_rebalance(&problem, options);
                for i in 0..servers {
                    let (l, end) = (problem.server_load(i) as f64, result.load[i] as f64);
                    if end > l {
                        worst = worst.max(end / level);
                    }
                    worst = worst.max(level / end);
                }
                let report = pl.rebalance();
                if period > 0 {
                    moved += report.moved_parity;
                }
            }
            rows.push((servers, buckets, k, p, options, moved as f64 / 19.0, worst));
        }
    }
    println!(
        "servers buckets k p  stability    budget     moved/rebalance  worst deviation from level"
    );
    for (servers, buckets, k, p, o, moved, worst) in &rows {
        println!(
            "{servers:>7} {buckets:>7} {k} {p}  {:<12} {:<10} {moved:>15.1}  {worst:.4}",
            format!("{:?}", o.stability),
            format!("{:?}", o.budget)
        );
    }
    for chunk in rows.chunks(6) {
        let off = chunk[3].5; // Off, WaterFill
        let steer = chunk[5]; // SteerFlow, WaterFill (the default)
        assert!(
            steer.5 <= off / 2.0,
            "SteerFlow should move far fewer: {steer:?} vs {off}"
        );
        assert!(steer.6 <= 1.07, "SteerFlow + WaterFill balance: {steer:?}");
    }
}
