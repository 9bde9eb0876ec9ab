//! The demo's unit tests: flags checked before anything starts, and the report built from a
//! run's records next to the simulator's.

use super::*;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    a: DemoArgs,
}

/// The demo's arguments as the command line gives them (also for the other modules' tests).
pub(super) fn args(extra: &[&str]) -> DemoArgs {
    let mut v = vec!["demo"];
    v.extend_from_slice(extra);
    Cli::try_parse_from(v).unwrap().a
}

use super::contract::CONTRACT_FIELDS;

#[test]
fn plan_checks_flags_before_anything_starts() {
    let p = plan(&args(&[
        "--requests",
        "200",
        "--kill",
        "2@0.5",
        "--nodes",
        "4",
    ]))
    .unwrap();
    assert_eq!(p.trace.len(), 200);
    assert_eq!((p.window, p.kills[0].at), (20, 100));
    assert_eq!((p.code.k, p.code.p), (3, 1));
    let p = plan(&args(&[
        "--requests",
        "50",
        "--scheme",
        "c2dn-n5k3",
        "--window",
        "7",
    ]))
    .unwrap();
    assert_eq!((p.code.k, p.code.p, p.window), (3, 2, 7));
    let p = plan(&args(&["--client-link", "100Mbit, 2.5gbit,800kbit,64000"])).unwrap();
    assert_eq!(p.client_links, vec![1e8, 2.5e9, 8e5, 64e3]);
    let p = plan(&args(&[
        "--requests",
        "200",
        "--kill",
        "2@0.3",
        "--kill",
        "3@0.4",
        "--restart-empty",
        "3@0.9",
        "--restart",
        "2@0.55",
    ]))
    .unwrap();
    assert_eq!(
        p.restarts
            .iter()
            .map(|r| (r.node, r.at, r.empty))
            .collect::<Vec<_>>(),
        vec![(2, 110, false), (3, 180, true)]
    );
    for (flags, want) in [
        (vec!["--nodes", "0"], "--nodes"),
        (vec!["--concurrency", "0"], "--concurrency"),
        (vec!["--kill", "9@0.5"], "does not exist"),
        (vec!["--kill", "1@1.5"], "below 1"),
        (vec!["--scheme", "raid5"], "unknown scheme"),
        (vec!["--disk-size", "0"], "--disk-size"),
        (vec!["--hoc-size", "lots"], "--hoc-size"),
        (vec!["--window", "0"], "--window"),
        (vec!["--nodes", "3"], "needs 4 nodes"),
        (
            vec!["--scheme", "c2dn-n5k3", "--nodes", "4"],
            "needs 5 nodes",
        ),
        (vec!["--plot", "x.gif"], ".png or .svg"),
        (vec!["--requests", "0"], "no requests"),
        (vec!["--origin-latency", "forever"], "--origin-latency"),
        (vec!["--client-link", "1Tbit"], "unknown unit"),
        (vec!["--client-link", "fast"], "unknown unit"),
        (vec!["--client-link", "1Gbit,"], "not a number"),
        (vec!["--client-link", "999"], "at least 1kbit"),
        (vec!["--client-link", "0.5kbit"], "at least 1kbit"),
        (vec!["--restart", "1@0.5"], "node 1 is not killed"),
        (
            vec!["--kill", "1@0.5", "--restart-empty", "1@0.4"],
            "must come later",
        ),
        (
            vec![
                "--kill",
                "1@0.5",
                "--restart",
                "1@0.6",
                "--restart-empty",
                "1@0.7",
            ],
            "restarted twice",
        ),
        (vec!["--kill", "1@0.5", "--restart", "1@"], "NODE@FRACTION"),
    ] {
        let e = match plan(&args(&flags)) {
            Ok(_) => panic!("{flags:?} accepted"),
            Err(e) => format!("{e:#}"),
        };
        assert!(e.contains(want), "{flags:?}: {e}");
    }
}

fn record(size: u64, miss: bool, coded: bool) -> Record {
    Record {
        size,
        ok: true,
        status: Some(200),
        miss,
        hit: !miss,
        coded: Some(coded),
        origin_bytes: if miss { size } else { 0 },
        bytes: size,
        ttfb_us: 1000,
        total_us: 2000,
        ..Record::default()
    }
}

#[test]
fn report_json_has_the_contract_fields() {
    // Node 3 is killed before request 10 and back before request 30.
    let a = args(&[
        "--requests",
        "40",
        "--nodes",
        "4",
        "--kill",
        "1@0.5",
        "--kill",
        "3@0.25",
        "--restart",
        "3@0.75",
    ]);
    let plan = plan(&a).unwrap();
    let records: Vec<Record> = (0..40)
        .map(|i| Record {
            node: i % 4,
            ..record(200 << 10, i % 4 == 0, i % 2 == 0)
        })
        .collect();
    let stats = |w| ClusterStats {
        bytes_written: w,
        peer_bytes_received: 1 << 20,
        ..ClusterStats::default()
    };
    let live = Live {
        records,
        elapsed_s: 2.0,
        cpu: vec![Some(1.0), Some(0.5), Some(1.5), None],
        stats: vec![Some(stats(100)), None, Some(stats(150)), Some(stats(120))],
        killed: vec![false, true, false, true],
        returns: vec![
            None,
            None,
            None,
            Some(ReturnTiming {
                waited_s: 0.0,
                back_s: 0.5,
            }),
        ],
        control: control::ControlReport {
            control: "etcd".into(),
            coordinator_failovers: 1,
            epoch_changes: 4,
            ..control::ControlReport::default()
        },
        outs: Vec::new(),
        slow_skips: 0,
        service_ms_max: Vec::new(),
    };
    let sim = sim_summary(&simulate(&a, &plan, Failures::None).unwrap());
    let killed = sim_summary(&simulate(&a, &plan, Failures::AsRun).unwrap());
    let empty = sim_summary(&simulate(&a, &plan, Failures::ReturnsEmpty).unwrap());
    let r = build_report(
        &a,
        &plan,
        "c2dn".into(),
        &live,
        sim,
        Some(killed),
        Some(&empty),
    );
    assert_eq!(r.write_imbalance, Some(1.5));
    // The comparison's first rows: the live run, then the simulator's run of its scheme with
    // the same kills and returns.
    let twin = &r.compare[1];
    assert_eq!(r.compare.len(), 2);
    assert_eq!((r.compare[0].run, twin.run), ("live", "sim"));
    assert_eq!(
        (r.compare[0].miss_ratio, r.compare[0].write_imbalance),
        (0.25, Some(1.5))
    );
    assert_eq!(
        r.compare[0].max_relative_miss_increase,
        r.max_relative_miss_increase
    );
    assert_eq!(twin.scheme, "c2dn");
    let with_kills = r.sim_with_kills.as_ref().unwrap();
    assert_eq!(twin.miss_ratio, with_kills.miss_ratio);
    assert_eq!(twin.write_imbalance, with_kills.write_imbalance);
    assert_eq!(
        twin.max_relative_miss_increase,
        r.sim_max_relative_miss_increase
    );
    // The simulator's windows alone give the twin's increase as the live windows do.
    assert_eq!(
        measure::sim_relative_miss_increase(
            &r.sim.windows,
            &with_kills.windows,
            &plan.kills,
            plan.window
        ),
        r.sim_max_relative_miss_increase
    );
    assert_eq!(r.bytes_written, vec![Some(100), None, Some(150), Some(120)]);
    // The summary sets each live figure beside the simulator's run with the same kills (the
    // run without failures writes other bytes on other nodes), and names both.
    let text = report::summary(&r);
    let twin_imbalance = measure::opt(with_kills.write_imbalance, 3);
    assert!(
        text.contains(&format!(
            "1.500 (sim with the same kills {twin_imbalance}; without failures"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "; sim with the same kills: {:?}",
            with_kills.bytes_written
        )),
        "{text}"
    );
    assert_eq!(r.cpu_s, 3.0);
    assert_eq!(r.miss_ratio, 0.25);
    assert_eq!(r.kills[1].at_request, 20);
    // Node 3's return before request 30: windows of 4 requests, the first whole one after
    // it is window 8; node 3 answered requests 31, 35 and 39 since.
    let back = &r.restarts[0];
    assert_eq!(
        (back.node, back.at_request, back.requests_after),
        (3, 30, 3)
    );
    assert_eq!(back.first_window_after.as_ref().unwrap().first_window, 8);
    assert_eq!(back.after.as_ref().unwrap().last_window, 9);
    assert!(r.max_relative_miss_increase.is_some());
    assert!(r.sim_max_relative_miss_increase.is_some());
    assert!(r.windows.iter().all(|w| w.sim_killed_miss_ratio.is_some()));
    let v: serde_json::Value = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    for f in CONTRACT_FIELDS {
        assert!(v.get(f).is_some(), "no {f}");
    }
    for f in [
        "start",
        "requests",
        "miss_ratio",
        "byte_miss_ratio",
        "failed",
    ] {
        assert!(v["windows"][0].get(f).is_some(), "windows: no {f}");
    }
    assert_eq!(v["windows"].as_array().unwrap().len(), 10);
    for lat in ["ttfb_ms", "download_ms"] {
        for kind in ["coded", "replicated"] {
            for q in ["p50", "p90", "p99"] {
                assert!(v[lat][kind][q].is_number(), "{lat}.{kind}.{q}");
            }
        }
    }
    assert_eq!(v["ttfb_ms"]["coded"]["p50"], 1.0);
    for f in [
        "miss_ratio",
        "byte_miss_ratio",
        "write_imbalance",
        "windows",
    ] {
        assert!(v["sim"].get(f).is_some(), "sim: no {f}");
    }
    assert!(v["bytes_written"][1].is_null());
    assert_eq!(v["compare"][0]["run"], "live");
    assert_eq!(v["compare"][1]["scheme"], "c2dn");
    // 4 nodes × 8 MiB: the simulator saw the same 40 requests in 10 windows.
    assert_eq!(v["sim"]["windows"].as_array().unwrap().len(), 10);
    assert_eq!(v["sim_with_kills"]["windows"].as_array().unwrap().len(), 10);
    let back = &v["restarts"][0];
    assert_eq!(
        (back["node"].as_u64(), back["empty"].as_bool()),
        (Some(3), Some(false))
    );
    assert_eq!(back["back_s"], 0.5);
    for f in [
        "miss_ratio",
        "sim_miss_ratio",
        "sim_empty_miss_ratio",
        "sim_no_failure_miss_ratio",
    ] {
        assert!(
            back["first_window_after"][f].is_number(),
            "restarts: no {f}"
        );
        assert!(back["after"][f].is_number(), "restarts: no {f}");
    }
}

/// Without a kill, restart or `--no-kill`, node 2 dies halfway, if the nodes left can run the
/// scheme; the default workload is the paper's regime.
#[test]
fn the_default_run_kills_node_2_halfway() {
    let kills = |flags: &[&str]| {
        let p = plan(&args(flags)).unwrap();
        let got: Vec<(usize, u64)> = p.kills.iter().map(|k| (k.node, k.at)).collect();
        (got, p.kill_note)
    };
    let (got, note) = kills(&["--requests", "200"]);
    assert_eq!(got, vec![(2, 100)]);
    assert!(note.unwrap().contains("--no-kill"));
    assert_eq!(kills(&["--requests", "200", "--no-kill"]), (vec![], None));
    assert_eq!(
        kills(&["--requests", "200", "--kill", "1@0.3"]),
        (vec![(1, 60)], None)
    );
    // c2dn needs 4 nodes: 4 cannot lose one; rep2 on 4 can.
    let (got, note) = kills(&["--requests", "200", "--nodes", "4"]);
    assert!(got.is_empty());
    assert!(note.unwrap().contains("no default kill"));
    let (got, _) = kills(&["--requests", "200", "--nodes", "4", "--scheme", "rep2"]);
    assert_eq!(got, vec![(2, 100)]);
    let (got, _) = kills(&["--requests", "200", "--nodes", "2", "--scheme", "rep2"]);
    assert!(got.is_empty());
    // --no-kill with a kill or a restart is a contradiction.
    for flags in [["--kill", "1@0.5"], ["--restart", "1@0.5"]] {
        let mut v = vec!["demo", "--no-kill"];
        v.extend_from_slice(&flags);
        assert!(Cli::try_parse_from(v).is_err(), "{flags:?}");
    }
    let a = args(&[]);
    let p = plan(&a).unwrap();
    assert_eq!((a.nodes, p.trace.len(), a.objects), (6, 10_000, 500));
    assert_eq!(
        (a.sizes.as_str(), p.disk_size),
        ("lognormal:256KiB:1.0", 64 << 20)
    );
}

/// The point of the default run, by the simulator alone (the comparison's rows): on the
/// paper's regime with node 2 lost halfway, c2dn's miss ratio barely moves, while rep2's and
/// no-rep's rise well above their runs without the failure.
#[test]
fn the_default_workload_shows_c2dn_losing_least() {
    let a = args(&[]);
    let p = plan(&a).unwrap();
    let peers = sim::peers(&a, &p).unwrap();
    let names: Vec<&str> = peers.iter().map(|r| r.scheme.as_str()).collect();
    assert_eq!(names, ["c2dn-norebal", "rep2", "no-rep"]);
    assert!(peers.iter().all(|r| r.run == "sim"));
    let none = sim_summary(&simulate(&a, &p, Failures::None).unwrap());
    let killed = sim_summary(&simulate(&a, &p, Failures::AsRun).unwrap());
    let c2dn =
        measure::sim_relative_miss_increase(&none.windows, &killed.windows, &p.kills, p.window)
            .unwrap();
    let of = |name: &str| {
        peers
            .iter()
            .find(|r| r.scheme == name)
            .and_then(|r| r.max_relative_miss_increase)
            .unwrap()
    };
    eprintln!(
        "max relative miss increase: c2dn {c2dn:.3}, rep2 {:.3}, no-rep {:.3}; c2dn write \
         imbalance {:?}",
        of("rep2"),
        of("no-rep"),
        killed.write_imbalance
    );
    assert!(c2dn < 0.1, "c2dn {c2dn}");
    assert!(of("rep2") > 1.0 && of("no-rep") > 1.0, "{peers:?}");
    // A rep2 run compares c2dn with its own code.
    let a = args(&["--scheme", "rep2", "--k", "4", "--requests", "100"]);
    let names: Vec<String> = sim::peers(&a, &plan(&a).unwrap())
        .unwrap()
        .into_iter()
        .map(|r| r.scheme)
        .collect();
    assert_eq!(names, ["c2dn-n5k4", "c2dn-norebal-n5k4", "no-rep"]);
}
