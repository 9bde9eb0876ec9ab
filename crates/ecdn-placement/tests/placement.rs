//! The [`Placement`] procedures of Appendix 10.3: initial assignment, server failure, server
//! return, periodic rebalance, heterogeneous servers, configuration errors.

mod common;

use common::{check_invariants, imbalance, popularity, record_period, totals, Rng};
use ecdn_placement::{
    Placement, PlacementConfig, PlacementError, RebalanceOptions, ServerId, Stability, Weigh,
};
use proptest::prelude::*;

fn cfg(buckets: usize, k: usize, p: usize) -> PlacementConfig {
    PlacementConfig {
        buckets,
        k,
        p,
        ..PlacementConfig::default()
    }
}

fn homogeneous(servers: usize, config: PlacementConfig) -> Placement {
    Placement::new(&vec![1.0; servers], config).unwrap()
}

fn data_table(pl: &Placement) -> Vec<Vec<ServerId>> {
    (0..pl.buckets())
        .map(|b| pl.data_servers(b).to_vec())
        .collect()
}

fn parity_table(pl: &Placement) -> Vec<Vec<ServerId>> {
    (0..pl.buckets())
        .map(|b| pl.parity_servers(b).to_vec())
        .collect()
}

fn parity_counts(pl: &Placement) -> Vec<usize> {
    let mut c = vec![0; pl.servers()];
    for b in 0..pl.buckets() {
        for &s in pl.parity_servers(b) {
            c[s] += 1;
        }
    }
    c
}

/// Data and parity buckets per server (chunk buckets, what the default placement balances).
fn chunk_bucket_counts(pl: &Placement) -> Vec<usize> {
    let mut c = parity_counts(pl);
    for b in 0..pl.buckets() {
        for &s in pl.data_servers(b) {
            c[s] += 1;
        }
    }
    c
}

#[test]
fn bad_configs_are_errors() {
    let ok = PlacementConfig::default();
    let four = [1.0; 4];
    assert_eq!(
        Placement::new(&four, PlacementConfig { k: 0, ..ok }).unwrap_err(),
        PlacementError::ZeroK
    );
    assert_eq!(
        Placement::new(&four, PlacementConfig { buckets: 0, ..ok }).unwrap_err(),
        PlacementError::ZeroBuckets
    );
    assert_eq!(
        Placement::new(
            &four,
            PlacementConfig {
                vnodes_per_unit: 0,
                ..ok
            }
        )
        .unwrap_err(),
        PlacementError::ZeroVnodes
    );
    assert_eq!(
        Placement::new(&[1.0; 3], PlacementConfig { k: 3, p: 1, ..ok }).unwrap_err(),
        PlacementError::TooFewServers {
            needed: 4,
            servers: 3
        }
    );
    assert_eq!(
        Placement::new(&[], ok).unwrap_err(),
        PlacementError::NoServers
    );
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let err = Placement::new(&[1.0, 1.0, bad, 1.0], ok).unwrap_err();
        assert!(
            matches!(err, PlacementError::BadWeight { server: 2, .. }),
            "{err}"
        );
    }
    assert!(matches!(
        Placement::new(&[1.0, 1e9, 1.0, 1.0], ok).unwrap_err(),
        PlacementError::TooManyVnodes { .. }
    ));
    // Exactly K + P servers is fine.
    assert!(Placement::new(&four, ok).is_ok());
}

/// As in the authors' code: every server ends with ⌈(K + P) · buckets / servers⌉ chunk buckets
/// or one fewer, data and parity together, unless its data buckets alone are more; then it gets
/// no parity.
#[test]
fn initial_tables_are_valid_and_chunk_buckets_are_even() {
    for (servers, k, p, buckets) in [
        (10, 3, 1, 100),
        (10, 3, 2, 100),
        (10, 3, 3, 100),
        (7, 2, 0, 100),
        (20, 4, 2, 100),
        (10, 3, 1, 37),
        (10, 3, 1, 1000),
    ] {
        let pl = homogeneous(servers, cfg(buckets, k, p));
        check_invariants(&pl);
        let cap = ((k + p) * buckets).div_ceil(servers);
        let parity = parity_counts(&pl);
        let total = chunk_bucket_counts(&pl);
        let why =
            format!("{servers} servers k{k} p{p} {buckets} buckets: {total:?}, parity {parity:?}");
        if p == 0 {
            assert!(parity.iter().all(|&c| c == 0), "{why}");
            continue;
        }
        for s in 0..servers {
            let data = total[s] - parity[s];
            if data >= cap {
                assert_eq!(parity[s], 0, "{why}");
            } else {
                assert!(total[s] == cap || total[s] + 1 == cap, "server {s}: {why}");
            }
        }
        // The data buckets alone are not even: consistent hashing leaves them spread.
        let data: Vec<usize> = (0..servers).map(|s| total[s] - parity[s]).collect();
        assert!(data.iter().max() > data.iter().min(), "{why}");
    }
}

/// With recorded loads and `Weigh::Loads`, the first decision balances bytes; the default
/// ignores them and balances chunk buckets.
#[test]
fn counts_are_the_default_and_loads_an_option() {
    let mut rng = Rng(4);
    let pop = popularity(100, 1e6, &mut rng);
    let mut counted = homogeneous(10, cfg(100, 3, 1));
    let mut weighed = homogeneous(10, cfg(100, 3, 1));
    weighed.set_rebalance_options(RebalanceOptions {
        weigh: Weigh::Loads,
        ..RebalanceOptions::default()
    });
    assert_eq!(parity_table(&counted), parity_table(&weighed));
    let mut rng2 = rng.clone();
    record_period(&mut counted, &pop, 0.3, &mut rng);
    record_period(&mut weighed, &pop, 0.3, &mut rng2);
    let c = counted.rebalance();
    let w = weighed.rebalance();
    assert!(c.count_mode && !w.count_mode, "{c:?} {w:?}");
    assert_eq!(c.moved_parity, 0, "counts are already balanced: {c:?}");
    assert!(w.moved_parity > 0, "{w:?}");
    check_invariants(&counted);
    check_invariants(&weighed);
}

/// A periodic rebalance holds parity in place while the write imbalance so far is within
/// `hold_ppm`, and rebalances as without it once it is not.
#[test]
fn a_hold_keeps_parity_in_place_while_the_writes_are_balanced_enough() {
    let mut rng = Rng(4);
    let pop = popularity(100, 1e6, &mut rng);
    let with = |hold_ppm| {
        let mut pl = homogeneous(10, cfg(100, 3, 1));
        pl.set_rebalance_options(RebalanceOptions {
            hold_ppm,
            ..RebalanceOptions::CLUSTER
        });
        pl
    };
    // No hold; a hold of 100% (up to twice the least-written server's bytes); one of 1 ppm.
    let (mut plain, mut held, mut tight) = (with(0), with(1_000_000), with(1));
    for pl in [&mut plain, &mut held, &mut tight] {
        record_period(pl, &pop, 0.3, &mut rng.clone());
    }
    let p = plain.rebalance();
    assert!(p.moved_parity > 0, "{p:?}");
    assert_eq!(held.rebalance().moved_parity, 0);
    assert_eq!(tight.rebalance().moved_parity, p.moved_parity);
    assert_eq!(parity_table(&tight), parity_table(&plain));
    check_invariants(&held);
}

/// With exactly K + P servers every parity bucket has one feasible server.
#[test]
fn k_plus_p_servers_force_the_parity_server() {
    let pl = homogeneous(4, cfg(100, 3, 1));
    check_invariants(&pl);
    for b in 0..pl.buckets() {
        let free: Vec<ServerId> = (0..4).filter(|s| !pl.data_servers(b).contains(s)).collect();
        assert_eq!(pl.parity_servers(b), &free[..]);
    }
}

#[test]
fn placement_is_deterministic() {
    let a = homogeneous(10, cfg(100, 3, 1));
    let b = homogeneous(10, cfg(100, 3, 1));
    assert_eq!(data_table(&a), data_table(&b));
    assert_eq!(parity_table(&a), parity_table(&b));
    let c = Placement::new(
        &[1.0; 10],
        PlacementConfig {
            seed: 1,
            ..cfg(100, 3, 1)
        },
    )
    .unwrap();
    assert_ne!(data_table(&a), data_table(&c));
}

#[test]
fn bucket_of_spreads_sequential_ids() {
    let pl = homogeneous(10, cfg(100, 3, 1));
    let mut counts = [0u32; 100];
    for id in 0..100_000u64 {
        let b = pl.bucket_of(id);
        assert_eq!(b, pl.bucket_of(id));
        counts[b] += 1;
    }
    // 1,000 expected per bucket; ±20% is over 6 standard deviations.
    assert!(
        counts.iter().all(|&c| (800..1200).contains(&c)),
        "{counts:?}"
    );
}

#[test]
fn ring_servers_walk_the_ring() {
    let mut pl = homogeneous(10, cfg(200, 3, 1));
    let mut buf = Vec::new();
    for b in 0..pl.buckets() {
        let all = pl.ring_servers(b, 10);
        let mut sorted = all.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..10).collect::<Vec<_>>());
        assert_eq!(pl.ring_servers(b, 3), all[..3]);
        assert_eq!(pl.data_servers(b), &all[..3]);
        pl.ring_servers_into(b, 7, &mut buf);
        assert_eq!(buf, all[..7]);
        assert_eq!(pl.ring_servers(b, 20), all);
    }
    let before: Vec<Vec<ServerId>> = (0..pl.buckets()).map(|b| pl.ring_servers(b, 10)).collect();
    pl.set_available(4, false);
    for (b, walk) in before.iter().enumerate() {
        let expected: Vec<ServerId> = walk.iter().copied().filter(|&s| s != 4).collect();
        assert_eq!(pl.ring_servers(b, 10), expected);
        assert_eq!(pl.ring_servers(b, 4), expected[..4]);
    }
}

/// A failure moves only the failed server's data buckets (other data buckets keep their server
/// and index) and re-places only P ∪ P′; the server's return restores the data placement.
#[test]
fn failure_moves_only_what_it_must_and_return_restores_data() {
    for (servers, k, p) in [(10, 3, 1), (10, 3, 2), (12, 3, 3), (7, 4, 2)] {
        let mut pl = homogeneous(servers, cfg(300, k, p));
        pl.set_rebalance_options(RebalanceOptions {
            weigh: Weigh::Loads,
            ..RebalanceOptions::default()
        });
        let mut rng = Rng(servers as u64 * 31 + p as u64);
        let pop = popularity(pl.buckets(), 1e8, &mut rng);
        record_period(&mut pl, &pop, 0.3, &mut rng);
        pl.rebalance();
        let original = data_table(&pl);
        for failed in [0, servers / 2] {
            record_period(&mut pl, &pop, 0.3, &mut rng);
            let data_before = data_table(&pl);
            let parity_before = parity_table(&pl);
            let report = pl.set_available(failed, false);
            check_invariants(&pl);
            assert!(!pl.is_available(failed));
            let data_after = data_table(&pl);
            let parity_after = parity_table(&pl);
            let mut expected_data_moves = 0;
            let mut allowed_parity = 0;
            for b in 0..pl.buckets() {
                let (old, new) = (&data_before[b], &data_after[b]);
                for i in 0..k {
                    if old[i] == failed {
                        expected_data_moves += 1;
                        assert!(!old.contains(&new[i]), "bucket {b}: {old:?} → {new:?}");
                    } else {
                        assert_eq!(old[i], new[i], "bucket {b}: {old:?} → {new:?}");
                    }
                }
                for j in 0..p {
                    let was = parity_before[b][j];
                    let in_p = was == failed;
                    let in_p_prime = new.contains(&was);
                    if in_p || in_p_prime {
                        allowed_parity += 1;
                        assert_ne!(parity_after[b][j], was);
                    } else {
                        assert_eq!(parity_after[b][j], was, "bucket {b} parity {j}");
                    }
                }
            }
            assert_eq!(report.moved_data, expected_data_moves);
            assert_eq!(report.moved_parity, allowed_parity);
            assert_eq!(report.replaced_parity, allowed_parity);
            assert_eq!(
                pl.remembered_parity(failed).len(),
                parity_before
                    .iter()
                    .flatten()
                    .filter(|&&s| s == failed)
                    .count()
            );

            record_period(&mut pl, &pop, 0.3, &mut rng);
            let report = pl.set_available(failed, true);
            check_invariants(&pl);
            assert_eq!(data_table(&pl), data_before, "data after return");
            assert_eq!(report.moved_data, expected_data_moves);
            // Whether it gets parity back depends on its budget (a server heavy with data gets
            // none); it never gets more remembered buckets than it had.
            let had = parity_before
                .iter()
                .flatten()
                .filter(|&&s| s == failed)
                .count();
            assert!(report.restored_parity <= had, "{report:?}");
            assert!(pl.remembered_parity(failed).is_empty());
        }
        assert_eq!(data_table(&pl), original);
    }
}

/// By count, a failure re-places P and P′ and sheds only what servers hold above the raised cap;
/// the return gives the server its remembered parity buckets back and every server ends where
/// it started.
#[test]
fn returning_server_gets_its_parity_back() {
    for (servers, buckets, failed) in [(10, 100, 3), (10, 300, 0), (10, 300, 7), (6, 200, 2)] {
        let mut pl = homogeneous(servers, cfg(buckets, 3, 1));
        let before = parity_table(&pl);
        let counts_before = chunk_bucket_counts(&pl);
        let mine = before.iter().flatten().filter(|&&s| s == failed).count();
        let down = pl.set_available(failed, false);
        assert!(down.count_mode);
        check_invariants(&pl);
        // Every available server is within the raised cap, or has no parity at all.
        let cap = (4 * buckets).div_ceil(servers - 1);
        let counts = chunk_bucket_counts(&pl);
        let parity = parity_counts(&pl);
        for s in (0..servers).filter(|&s| s != failed) {
            assert!(counts[s] <= cap || parity[s] == 0, "{counts:?} cap {cap}");
        }
        let must = before
            .iter()
            .enumerate()
            .filter(|(b, sv)| sv[0] == failed || pl.data_servers(*b).contains(&sv[0]))
            .count();
        assert_eq!(down.replaced_parity, must);
        assert!(
            down.moved_parity >= must && down.moved_parity <= must + servers,
            "{down:?}"
        );
        let up = pl.set_available(failed, true);
        assert_eq!(up.restored_parity, mine, "{up:?}");
        check_invariants(&pl);
        // Back to the cap or within two below it, as at the start.
        let cap = (4 * buckets).div_ceil(servers);
        let counts = chunk_bucket_counts(&pl);
        let parity = parity_counts(&pl);
        for s in 0..servers {
            let ok = counts[s] <= cap && counts[s] + 2 >= cap;
            assert!(
                ok || parity[s] == 0,
                "{counts:?} (start {counts_before:?}) cap {cap}"
            );
        }
        // Repeating the current state is a no-op.
        assert_eq!(pl.set_available(failed, true).moved_parity, 0);
    }
}

/// A returning server whose remembered parity buckets leave budget unused takes parity buckets
/// from the most loaded servers, never beyond its budget.
#[test]
fn returning_server_takes_from_the_most_loaded() {
    let mut pl = homogeneous(10, cfg(400, 3, 1));
    pl.set_rebalance_options(RebalanceOptions {
        weigh: Weigh::Loads,
        ..RebalanceOptions::default()
    });
    pl.set_available(7, false);
    let remembered = pl.remembered_parity(7);
    assert!(!remembered.is_empty());
    // While 7 is down, its old parity buckets see no writes; everything else does.
    let mut rng = Rng(5);
    for b in 0..pl.buckets() {
        let chunk = 1_000_000 + rng.below(1_000_000);
        for s in pl.data_servers(b).to_vec() {
            pl.record_data_write(s, chunk);
        }
        if !remembered.contains(&(b, 0)) {
            pl.record_parity_write(b, 0, chunk);
        }
    }
    let report = pl.set_available(7, true);
    check_invariants(&pl);
    assert_eq!(report.restored_parity, remembered.len());
    assert!(report.taken_parity > 0, "{report:?}");
    let counts = parity_counts(&pl);
    assert_eq!(counts[7], report.restored_parity + report.taken_parity);
    assert!(report.predicted_max_over_mean < 1.1, "{report:?}");
}

#[test]
fn losing_servers_down_to_fewer_than_k_plus_p_and_back() {
    let mut pl = homogeneous(6, cfg(50, 3, 2));
    let mut rng = Rng(9);
    let pop = popularity(pl.buckets(), 1e6, &mut rng);
    let original = data_table(&pl);
    for s in 0..5 {
        record_period(&mut pl, &pop, 0.2, &mut rng);
        pl.set_available(s, false);
        check_invariants(&pl);
    }
    assert_eq!(pl.available_servers(), 1);
    assert_eq!(pl.data_servers(0), &[5]);
    assert!(pl.parity_servers(0).is_empty());
    for s in (0..5).rev() {
        record_period(&mut pl, &pop, 0.2, &mut rng);
        pl.set_available(s, true);
        check_invariants(&pl);
    }
    assert_eq!(pl.available_servers(), 6);
    // Below K servers data indexes follow the walk, so only the set is guaranteed to return.
    for (b, old) in original.iter().enumerate() {
        let mut a = old.clone();
        let mut n = pl.data_servers(b).to_vec();
        a.sort_unstable();
        n.sort_unstable();
        assert_eq!(a, n);
    }
}

#[test]
fn loads_reset_after_every_decision() {
    let mut pl = homogeneous(10, cfg(100, 3, 1));
    pl.set_rebalance_options(RebalanceOptions {
        weigh: Weigh::Loads,
        ..RebalanceOptions::default()
    });
    let mut rng = Rng(1);
    let pop = popularity(100, 1e6, &mut rng);
    record_period(&mut pl, &pop, 0.1, &mut rng);
    assert!(pl.data_load(0) > 0);
    assert!(!pl.rebalance().count_mode);
    assert!((0..10).all(|s| pl.data_load(s) == 0));
    assert!((0..100).all(|b| pl.parity_load(b, 0) == 0));
    record_period(&mut pl, &pop, 0.1, &mut rng);
    pl.set_available(2, false);
    assert!((0..10).all(|s| pl.data_load(s) == 0));
    assert!(pl.rebalance().count_mode);
}

/// Periodic rebalance with realistic loads. When the data load alone puts some servers above the
/// mean (heavy popularity skew), parity cannot help them; every server that receives parity
/// must then end within 5% of the water level `λ` (`Σ max(λ − l_i, 0) = Σ s_n`), and no server
/// below `λ` may be left more than 5% short. With mild skew and enough buckets per server the
/// whole cluster can balance, and does, within 5% (max/min).
#[test]
fn rebalance_balances_total_write_load() {
    let cases = [
        // servers, buckets, k, p, popularity sigma, whole cluster feasible
        (10, 100, 3, 1, 1.0, false),
        (10, 100, 3, 2, 1.0, false),
        (50, 1000, 3, 1, 1.0, false),
        (10, 1000, 3, 1, 0.3, true),
        (10, 100, 2, 2, 0.3, true),
        (20, 500, 4, 2, 0.3, true),
    ];
    for (servers, buckets, k, p, sigma, feasible) in cases {
        let mut pl = homogeneous(servers, cfg(buckets, k, p));
        let mut rng = Rng(7 + servers as u64);
        let pop: Vec<f64> = (0..buckets)
            .map(|_| 1e8 * rng.lognormal(0.0, sigma))
            .collect();
        for _ in 0..3 {
            record_period(&mut pl, &pop, 0.2, &mut rng);
            let problem = common::full_problem(&pl);
            let level = common::water_level(&problem);
            let result = ecdn_placement::parity_rebalance(&problem, pl.rebalance_options());
            let report = pl.rebalance();
            for i in 0..servers {
                let (l, end) = (problem.server_load(i) as f64, result.load[i] as f64);
                if end > l {
                    assert!(
                        end <= level * 1.05,
                        "{servers}x{buckets} k{k}p{p}: {end} vs {level}"
                    );
                }
                assert!(
                    end >= level * 0.95,
                    "{servers}x{buckets} k{k}p{p}: {end} vs {level}"
                );
            }
            if feasible {
                let max = *result.load.iter().max().unwrap() as f64;
                let min = *result.load.iter().min().unwrap() as f64;
                assert!(
                    max / min <= 1.05,
                    "{servers}x{buckets} k{k}p{p}: {}",
                    max / min
                );
                assert!(report.predicted_max_over_mean <= 1.03, "{report:?}");
            }
            check_invariants(&pl);
        }
    }
}

fn data_counts(pl: &Placement) -> Vec<usize> {
    let mut data = vec![0usize; pl.servers()];
    for b in 0..pl.buckets() {
        for &s in pl.data_servers(b) {
            data[s] += 1;
        }
    }
    data
}

/// A server twice as heavy gets twice the virtual nodes, about twice the data buckets and a
/// twice as large write budget.
#[test]
fn heterogeneous_servers_get_weight_proportional_shares() {
    let mut weights = vec![1.0; 10];
    weights[0] = 2.0;
    weights[5] = 0.5;
    let pl = Placement::new(&weights, cfg(100, 3, 1)).unwrap();
    assert_eq!((pl.vnodes(0), pl.vnodes(1), pl.vnodes(5)), (400, 200, 100));
    // K = 1 is plain consistent hashing: shares follow the ring (enough virtual nodes that the
    // ring's own noise, ≈ 1/√vnodes, is small).
    let config = PlacementConfig {
        vnodes_per_unit: 2000,
        ..cfg(20_000, 1, 1)
    };
    let pl = Placement::new(&weights, config).unwrap();
    let data = data_counts(&pl);
    let unit = (data[1..].iter().sum::<usize>() - data[5]) as f64 / 8.0;
    let (double, half) = (data[0] as f64 / unit, data[5] as f64 / unit);
    assert!((1.85..=2.15).contains(&double), "{data:?}: {double}");
    assert!((0.42..=0.58).contains(&half), "{data:?}: {half}");

    // K = 3: a server holds at most one data bucket of a bucket, which compresses shares toward
    // even (Fig. 11 steps over servers already chosen); the heavy server still gets ≈2×.
    let mut pl = Placement::new(&weights, cfg(10_000, 3, 1)).unwrap();
    check_invariants(&pl);
    let data = data_counts(&pl);
    let unit = (data[1..].iter().sum::<usize>() - data[5]) as f64 / 8.0;
    let double = data[0] as f64 / unit;
    assert!((1.7..=2.1).contains(&double), "{data:?}: {double}");
    // Parity by count follows weight.
    let counts = parity_counts(&pl);
    assert!(
        (counts[0] as f64 / counts[1] as f64 - 2.0).abs() < 0.1,
        "{counts:?}"
    );
    // With loads, the per-weight total write load balances: Algorithm 1's budget is
    // ⌈W·w_i/Σw⌉ − l_i.
    let mut rng = Rng(11);
    let pop: Vec<f64> = (0..pl.buckets())
        .map(|_| 1e7 * rng.lognormal(0.0, 0.3))
        .collect();
    record_period(&mut pl, &pop, 0.1, &mut rng);
    let before = imbalance(&pl, &totals(&pl)).1;
    let report = pl.rebalance();
    assert!(
        report.predicted_max_over_mean <= 1.03,
        "{report:?} (before {before})"
    );
}

#[test]
fn stability_modes_keep_invariants_through_churn() {
    for stability in [Stability::Off, Stability::KeepCurrent, Stability::SteerFlow] {
        let mut pl = homogeneous(8, cfg(200, 3, 2));
        pl.set_rebalance_options(RebalanceOptions {
            weigh: Weigh::Loads,
            stability,
            ..RebalanceOptions::default()
        });
        let mut rng = Rng(3);
        let pop = popularity(200, 1e7, &mut rng);
        for step in 0..12 {
            record_period(&mut pl, &pop, 0.3, &mut rng);
            let s = rng.below(8) as usize;
            match step % 3 {
                0 => {
                    pl.set_available(s, false);
                }
                1 => {
                    pl.set_available(s, true);
                }
                _ => {
                    pl.rebalance();
                }
            }
            check_invariants(&pl);
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Fail(usize),
    Return(usize),
    Rebalance,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Random clusters through random failures, returns and rebalances with random loads: the
    /// tables stay valid, a failure changes only the failed server's data buckets and (by loads)
    /// re-places only P ∪ P′, and a return only hands data buckets to the returning server.
    #[test]
    fn churn_keeps_tables_valid_and_moves_minimal(
        weights in prop::collection::vec(
            prop_oneof![Just(1.0), Just(2.0), Just(0.5), 0.5f64..3.0],
            4..=12,
        ),
        k in 1usize..=4,
        p in 0usize..=3,
        buckets in 1usize..=150,
        seed in any::<u64>(),
        ops in prop::collection::vec((0u8..3, 0usize..12), 1..12),
        by_loads in any::<bool>(),
    ) {
        let servers = weights.len();
        let k = k.min(servers);
        let p = p.min(servers - k);
        let config = PlacementConfig { buckets, k, p, vnodes_per_unit: 20, seed };
        let mut pl = Placement::new(&weights, config).unwrap();
        // By count (always, or with loads when none were recorded) a failure also sheds parity
        // from servers above the raised cap; by loads it re-places exactly P ∪ P′.
        let weigh = if by_loads { Weigh::Loads } else { Weigh::Counts };
        pl.set_rebalance_options(RebalanceOptions { weigh, ..RebalanceOptions::default() });
        check_invariants(&pl);
        let mut rng = Rng(seed);
        let pop = popularity(buckets, 1e6, &mut rng);
        for (kind, s) in ops {
            let s = s % servers;
            let op = match kind {
                0 => Op::Fail(s),
                1 => Op::Return(s),
                _ => Op::Rebalance,
            };
            if rng.below(3) > 0 {
                record_period(&mut pl, &pop, 0.5, &mut rng);
            }
            let data_before = data_table(&pl);
            let parity_before = parity_table(&pl);
            let avail_before = pl.available_servers();
            match op {
                Op::Fail(x) => {
                    let was_up = pl.is_available(x);
                    let report = pl.set_available(x, false);
                    // With at least K servers left, data indexes are stable.
                    if was_up && avail_before > k {
                        let still = p.min(pl.available_servers() - k);
                        let tables = data_before.iter().zip(&parity_before);
                        for (b, (old, parity)) in tables.enumerate() {
                            let new = pl.data_servers(b);
                            for (&o, &n) in old.iter().zip(new) {
                                if o != x {
                                    prop_assert_eq!(o, n);
                                }
                            }
                            let pairs = parity.iter().zip(pl.parity_servers(b)).take(still);
                            for (&was, &now) in pairs {
                                if !report.count_mode && was != x && !new.contains(&was) {
                                    prop_assert_eq!(now, was);
                                }
                            }
                        }
                        let held = data_before.iter().flatten().filter(|&&s| s == x).count();
                        prop_assert!(report.moved_data <= held);
                    }
                }
                Op::Return(x) => {
                    let was_down = !pl.is_available(x);
                    pl.set_available(x, true);
                    if was_down && avail_before >= k {
                        for (b, old) in data_before.iter().enumerate() {
                            for (&o, &n) in old.iter().zip(pl.data_servers(b)) {
                                prop_assert!(o == n || n == x);
                            }
                        }
                    }
                }
                Op::Rebalance => {
                    pl.rebalance();
                    prop_assert_eq!(data_table(&pl), data_before);
                }
            }
            check_invariants(&pl);
        }
    }
}

/// Cumulative bytes written per server over `periods` noisy periods, rebalancing after each.
fn cumulative_writes(carry_ppm: u32, periods: usize) -> Vec<u64> {
    let mut pl = homogeneous(10, cfg(100, 3, 1));
    pl.set_rebalance_options(RebalanceOptions {
        weigh: Weigh::Loads,
        carry_ppm,
        ..RebalanceOptions::default()
    });
    let mut rng = Rng(11);
    let pop: Vec<f64> = (0..100).map(|_| 1e8 * rng.lognormal(0.0, 1.0)).collect();
    let mut written = vec![0u64; 10];
    for _ in 0..periods {
        // What this period writes where: data on the data servers, parity on the parity servers
        // the last rebalance chose.
        let before: Vec<u64> = (0..10).map(|s| pl.data_load(s)).collect();
        record_period(&mut pl, &pop, 0.5, &mut rng);
        for s in 0..10 {
            written[s] += pl.data_load(s) - before[s];
        }
        for b in 0..100 {
            let s = pl.parity_servers(b)[0];
            written[s] += pl.parity_load(b, 0);
        }
        pl.rebalance();
        check_invariants(&pl);
    }
    written
}

#[test]
fn carry_pays_back_the_imbalance_of_earlier_periods() {
    let ratio = |w: &[u64]| *w.iter().max().unwrap() as f64 / *w.iter().min().unwrap() as f64;
    let plain = ratio(&cumulative_writes(0, 12));
    let carried = ratio(&cumulative_writes(1_000_000, 12));
    assert!(
        carried < plain,
        "carry {carried:.4} should beat the paper's {plain:.4}"
    );
}
