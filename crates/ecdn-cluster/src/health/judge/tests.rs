use super::*;

fn ms(t: Instant, m: u64) -> Instant {
    t + Duration::from_millis(m)
}

fn all_in(n: usize) -> Vec<Standing> {
    vec![
        Standing {
            available: true,
            alive: true,
            active: true,
        };
        n
    ]
}

/// Views of every other node of `n` from `reporter`: reachable unless in `cut`, service `us`
/// (per node).
fn views(reporter: usize, n: usize, cut: &[usize], us: &dyn Fn(usize) -> u64) -> Vec<PeerView> {
    (0..n)
        .filter(|&i| i != reporter)
        .map(|i| {
            let reachable = !cut.contains(&i);
            PeerView {
                node: i,
                reachable,
                failures: if reachable { 0 } else { 3 },
                service_us: reachable.then(|| us(i)),
            }
        })
        .collect()
}

/// Node `x` partitioned from its peers: every peer reports it unreachable, and it reports
/// every peer unreachable.
fn report_partition(j: &mut Judge, n: usize, x: usize) {
    for r in 0..n {
        let cut: Vec<usize> = if r == x { (0..n).collect() } else { vec![x] };
        j.reported(r, &views(r, n, &cut, &|_| 2000));
    }
}

fn report_well(j: &mut Judge, n: usize, us: &dyn Fn(usize) -> u64) {
    for r in 0..n {
        j.reported(r, &views(r, n, &[], us));
    }
}

/// Applies verdicts to the standing, as the coordinator does.
fn apply(st: &mut [Standing], v: &[Verdict]) {
    for v in v {
        st[v.node].available = v.out.is_none();
    }
}

#[test]
fn a_node_cut_off_from_its_peers_leaves_alone_and_returns_after_the_hysteresis() {
    let t = Instant::now();
    let mut j = Judge::new(HealthConfig::default(), 6);
    let mut st = all_in(6);
    report_well(&mut j, 6, &|_| 2000);
    assert!(j.decide(t, &st, 4).is_empty());
    report_partition(&mut j, 6, 3);
    let v = j.decide(ms(t, 100), &st, 4);
    assert_eq!(
        v,
        vec![Verdict {
            node: 3,
            out: Some(OutReason::CutOff { failing: 5, of: 5 })
        }],
        "only node 3: its own reports no longer count once it is out"
    );
    apply(&mut st, &v);
    assert_eq!(
        j.reason(3).unwrap().to_string(),
        "cut off: 5 of 5 peers cannot reach it"
    );
    // Still partitioned: stays out, nobody else leaves.
    assert!(j.decide(ms(t, 5000), &st, 4).is_empty());
    // Healed: back after return_after_ms of good views, not before.
    report_well(&mut j, 6, &|_| 2000);
    assert!(j.decide(ms(t, 6000), &st, 4).is_empty());
    assert!(j.decide(ms(t, 7999), &st, 4).is_empty());
    let v = j.decide(ms(t, 8000), &st, 4);
    assert_eq!(v, vec![Verdict { node: 3, out: None }]);
    assert!(j.reason(3).is_none());
}

#[test]
fn a_flapping_node_stays_out_longer_each_time() {
    let t = Instant::now();
    let mut j = Judge::new(HealthConfig::default(), 6);
    let mut st = all_in(6);
    let mut now = t;
    let mut stays = Vec::new();
    for _ in 0..4 {
        report_partition(&mut j, 6, 2);
        let v = j.decide(now, &st, 4);
        assert_eq!(v.len(), 1);
        apply(&mut st, &v);
        let out_at = now;
        report_well(&mut j, 6, &|_| 2000);
        // Well from the next decision on; count how long until it returns.
        loop {
            now += Duration::from_millis(100);
            let v = j.decide(now, &st, 4);
            if !v.is_empty() {
                apply(&mut st, &v);
                break;
            }
        }
        stays.push((now - out_at).as_millis() as u64);
    }
    assert_eq!(stays, vec![2100, 4100, 8100, 16100]);
    assert_eq!(j.health(2, &st, now).recent_exits, 4);
}

#[test]
fn a_split_takes_out_at_most_the_cap_and_never_below_a_stripe() {
    let t = Instant::now();
    let mut j = Judge::new(HealthConfig::default(), 6);
    let st = all_in(6);
    // Nodes 0-2 and 3-5 cannot reach each other.
    for r in 0..6 {
        let other: Vec<usize> = if r < 3 { vec![3, 4, 5] } else { vec![0, 1, 2] };
        j.reported(r, &views(r, 6, &other, &|_| 2000));
    }
    let v = j.decide(t, &st, 4);
    assert_eq!(v.len(), 2, "a third of six: {v:?}");
    // A cluster with no spare node loses none.
    let mut j = Judge::new(HealthConfig::default(), 4);
    report_partition(&mut j, 4, 1);
    assert!(j.decide(t, &all_in(4), 4).is_empty());
    // The cap counts the nodes already out for health.
    let mut j = Judge::new(
        HealthConfig {
            max_out: 1,
            ..HealthConfig::default()
        },
        6,
    );
    let mut st = all_in(6);
    report_partition(&mut j, 6, 1);
    let v = j.decide(t, &st, 2);
    apply(&mut st, &v);
    report_partition(&mut j, 6, 4);
    for r in 0..6 {
        // 1 stays cut off too.
        let cut: Vec<usize> = match r {
            1 | 4 => (0..6).collect(),
            _ => vec![1, 4],
        };
        j.reported(r, &views(r, 6, &cut, &|_| 2000));
    }
    assert!(j.decide(ms(t, 100), &st, 2).is_empty());
}

#[test]
fn a_slow_node_leaves_after_slow_for_and_returns_below_the_band() {
    let t = Instant::now();
    let mut j = Judge::new(HealthConfig::default(), 6);
    let mut st = all_in(6);
    // Node 1 answers in 60 ms, the others in 2 ms: the bound is 15 ms.
    report_well(&mut j, 6, &|i| if i == 1 { 60_000 } else { 2000 });
    assert!(j.decide(t, &st, 4).is_empty());
    assert!(j.decide(ms(t, 2999), &st, 4).is_empty());
    let v = j.decide(ms(t, 3000), &st, 4);
    assert_eq!(
        v,
        vec![Verdict {
            node: 1,
            out: Some(OutReason::Slow {
                service_ms: 60.0,
                bound_ms: 15.0
            })
        }]
    );
    apply(&mut st, &v);
    // 13 ms is below the bound but not below 0.8 of it: stays out.
    report_well(&mut j, 6, &|i| if i == 1 { 13_000 } else { 2000 });
    assert!(j.decide(ms(t, 10_000), &st, 4).is_empty());
    report_well(&mut j, 6, &|i| if i == 1 { 3000 } else { 2000 });
    assert!(j.decide(ms(t, 11_000), &st, 4).is_empty());
    assert_eq!(j.decide(ms(t, 13_000), &st, 4).len(), 1);
    // The bound follows the cluster: every node at 30 ms, one at 100 ms (bound 120 ms).
    let mut j = Judge::new(HealthConfig::default(), 6);
    report_well(&mut j, 6, &|i| if i == 5 { 100_000 } else { 30_000 });
    assert!(j.decide(t, &all_in(6), 4).is_empty());
    assert!(j.decide(ms(t, 5000), &all_in(6), 4).is_empty());
    // A blip shorter than slow_for_ms is forgiven.
    let mut j = Judge::new(HealthConfig::default(), 6);
    report_well(&mut j, 6, &|i| if i == 1 { 60_000 } else { 2000 });
    assert!(j.decide(t, &all_in(6), 4).is_empty());
    report_well(&mut j, 6, &|_| 2000);
    assert!(j.decide(ms(t, 500), &all_in(6), 4).is_empty());
    report_well(&mut j, 6, &|i| if i == 1 { 60_000 } else { 2000 });
    assert!(j.decide(ms(t, 3200), &all_in(6), 4).is_empty());
}

#[test]
fn load_balancers_take_out_a_node_clients_cannot_reach() {
    let t = Instant::now();
    let mut j = Judge::new(HealthConfig::default(), 6);
    let mut st = all_in(6);
    report_well(&mut j, 6, &|_| 2000);
    let lb = |failing: &[usize]| BalancerReport {
        balancer: "lb".into(),
        nodes: (0..6)
            .map(|i| PeerView {
                node: i,
                reachable: !failing.contains(&i),
                failures: if failing.contains(&i) { 2 } else { 0 },
                service_us: None,
            })
            .collect(),
    };
    j.balancer(lb(&[4]), t);
    let v = j.decide(t, &st, 4);
    assert_eq!(
        v,
        vec![Verdict {
            node: 4,
            out: Some(OutReason::Unreachable { failing: 1, of: 1 })
        }]
    );
    apply(&mut st, &v);
    // While the balancer still cannot reach it, it stays out.
    j.balancer(lb(&[4]), ms(t, 5000));
    assert!(j.decide(ms(t, 9000), &st, 4).is_empty());
    // Reached again: back after the hysteresis.
    j.balancer(lb(&[]), ms(t, 9000));
    assert!(j.decide(ms(t, 9100), &st, 4).is_empty());
    assert_eq!(j.decide(ms(t, 11_100), &st, 4).len(), 1);
    // A balancer that stopped reporting is no evidence: its stale word takes no node out.
    j.balancer(lb(&[0]), ms(t, 12_000));
    let st = all_in(6);
    assert!(j.decide(ms(t, 22_000), &st, 4).is_empty());
}

#[test]
fn one_failure_alone_is_no_evidence() {
    let t = Instant::now();
    let mut j = Judge::new(HealthConfig::default(), 6);
    for r in 0..6 {
        let mut v = views(r, 6, &[], &|_| 2000);
        for x in v.iter_mut().filter(|x| x.node == 3) {
            *x = PeerView {
                node: 3,
                reachable: false,
                failures: 1,
                service_us: None,
            };
        }
        j.reported(r, &v);
    }
    assert!(j.decide(t, &all_in(6), 4).is_empty());
    assert_eq!(j.health(3, &all_in(6), t).peers_seeing, 0);
}

#[test]
fn silent_nodes_reached_by_peers_and_a_disabled_judge() {
    let t = Instant::now();
    let mut j = Judge::new(HealthConfig::default(), 5);
    report_well(&mut j, 5, &|_| 2000);
    let mut st = all_in(5);
    st[2].alive = false;
    assert!(j.reached_by_peers(2, &st));
    // Its peers cannot reach it either: dead.
    report_partition(&mut j, 5, 2);
    assert!(!j.reached_by_peers(2, &st));
    // No view at all: not reached.
    let j2 = Judge::new(HealthConfig::default(), 5);
    assert!(!j2.reached_by_peers(2, &st));
    // Switched off, nothing is decided whatever the views.
    let mut off = Judge::new(
        HealthConfig {
            enabled: false,
            ..HealthConfig::default()
        },
        6,
    );
    report_partition(&mut off, 6, 3);
    assert!(off.decide(t, &all_in(6), 4).is_empty());
    // Unknown reporters and views of unknown nodes are ignored.
    j.reported(9, &views(0, 5, &[1], &|_| 1));
    j.reported(0, &views(0, 12, &[11], &|_| 1));
    assert_eq!(j.health(0, &all_in(5), t).peers_seeing, 4);
}
