//! The simulator's side of a demo run: the same trace, scheme, code, threshold, buckets and
//! seed through `ecdn_sim::cluster`, with the run's failures as failure events, and its
//! results as the report shows them.

use anyhow::{Context, Result};
use ecdn_sim::cluster::{simulate_cluster, ClusterConfig as SimConfig, ClusterResult};
use ecdn_sim::unavailability::{FailEvent, Unavailability, Window};
use ecdn_trace::{Request, SliceReader};

use ecdn_placement::pieces::Scheme;
use ecdn_sim::cluster_sweep::SchemeCode;

use super::args::DemoArgs;
use super::driver;
use super::measure::{self, CompareRow, SimSummary, SimWindow};
use super::plan::Plan;
use super::schedule::{Kill, Restart};

/// Which failures the simulator sees.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Failures {
    None,
    /// The run's kills and returns, each return keeping its cache or coming back empty as the
    /// run does it.
    AsRun,
    /// The run's kills and returns, every return coming back empty.
    ReturnsEmpty,
}

/// The simulator on the same trace and configuration, with `failures`: each killed server
/// unavailable from its kill's request until its return's, if it returns.
pub(super) fn simulate(a: &DemoArgs, plan: &Plan, failures: Failures) -> Result<ClusterResult> {
    simulate_code(a, plan, plan.code, failures)
}

/// [`simulate`] with scheme and code `code` instead of the run's (a periodic parity
/// rebalance only for c2dn).
fn simulate_code(
    a: &DemoArgs,
    plan: &Plan,
    code: SchemeCode,
    failures: Failures,
) -> Result<ClusterResult> {
    let mut cfg = SimConfig::new(code.scheme, a.nodes as u64 * plan.disk_size);
    cfg.weights = vec![1.0; a.nodes];
    cfg.k = code.k;
    cfg.p = code.p;
    cfg.threshold = plan.threshold;
    cfg.sub_chunk = plan.sub_chunk;
    cfg.slicing = ecdn_placement::slices::Slicing::new(plan.slice_size)
        .expect("checked when the plan was made");
    cfg.buckets = a.buckets;
    cfg.evict_together = a.evict_together;
    cfg.resync = a.resync.0;
    cfg.reinsert = a.reinsert.0;
    cfg.window = Window::Requests(plan.window);
    cfg.seed = a.seed;
    cfg.max_requests = plan.trace.len() as u64;
    if failures != Failures::None {
        let all_empty = failures == Failures::ReturnsEmpty;
        cfg.unavailability = kill_events(&plan.kills, &plan.restarts, all_empty);
        // The coordinator's declarations: each stay out of the map (a returning node keeps its
        // cache, as it does live).
        cfg.unavailability
            .events
            .extend(plan.outages.iter().map(|o| FailEvent {
                server: o.node,
                start: o.start as f64,
                end: o.end.map_or(f64::INFINITY, |e| e as f64),
            }));
    }
    // The demo's coordinator never rebalances by the clock (`rebalance_every_s = 0` in its
    // file): with `--rebalance-every` the driver has it rebalance before the same requests.
    cfg.rebalance_every = 0.0;
    if a.rebalance_every > 0 && code.scheme == Scheme::C2dn {
        // Trace time is the request index here (below): a rebalance before every N-th request.
        cfg.rebalance_every = a.rebalance_every as f64;
        cfg.rebalance_at = Some(a.rebalance_every as f64);
    }
    if plan.repair_rate > 0 {
        // Rounds before every N-th request, as the driver asks the nodes; the nodes' other
        // repair settings are the cluster file's defaults, which `OFF` carries.
        cfg.repair = ecdn_sim::cluster::RepairConfig {
            rate: plan.repair_rate,
            every: a.repair_every as f64,
            ..ecdn_sim::cluster::RepairConfig::OFF
        };
    }
    // The live nodes place an object by the hash of its cache key (Host + path + query), and
    // cache its pieces under ids derived from it: the simulator gets the same ids, so both
    // put every object in the same bucket and every piece under the same id.
    // The driver replays the trace as fast as the cluster answers, so its timestamps mean
    // nothing live: the simulator's clock is the request index, one second per request.
    let trace: Vec<Request> = plan
        .trace
        .iter()
        .enumerate()
        .map(|(i, r)| Request {
            id: driver::object_id(r.id, r.size),
            time: i as u64,
            ..*r
        })
        .collect();
    let mut reader = SliceReader::new(&trace);
    simulate_cluster(&mut reader, &cfg, &|_| {}).context("the cluster simulation")
}

/// The kills and returns as failure events, each node unavailable from its kill's request
/// until its return's (for good if it does not return); the returns of `--restart-empty`, or
/// all of them with `all_empty`, come back with an empty cache. The simulator's clock is the
/// request index (see [`simulate`]), so an event starts and ends exactly at its request; the
/// simulator checks events at every request, while it reads a per-window record only where one
/// of its own windows starts, which would move a kill inside a window to the next window's
/// start.
pub(super) fn kill_events(kills: &[Kill], restarts: &[Restart], all_empty: bool) -> Unavailability {
    let back = |node| restarts.iter().find(|r| r.node == node);
    Unavailability {
        events: kills
            .iter()
            .map(|k| FailEvent {
                server: k.node,
                start: k.at as f64,
                end: back(k.node).map_or(f64::INFINITY, |r| r.at as f64),
            })
            .collect(),
        returns_empty: restarts
            .iter()
            .filter(|r| r.empty || all_empty)
            .map(|r| r.node)
            .collect(),
        ..Unavailability::default()
    }
}

/// The schemes the comparison sets beside the live one, in this order, without the live
/// scheme and those that need more nodes than the run has; coded ones with the run's code.
pub(super) const COMPARED: [Scheme; 4] = [
    Scheme::C2dn,
    Scheme::C2dnNoRebal,
    Scheme::Rep(2),
    Scheme::NoRep,
];

/// The simulator's rows of the comparison for the schemes other than the live one (see
/// [`COMPARED`]): each on the same trace and capacity, with the run's kills and returns when
/// it has kills (its largest relative miss increase against its own run without failures).
pub(super) fn peers(a: &DemoArgs, plan: &Plan) -> Result<Vec<CompareRow>> {
    let mut rows = Vec::new();
    for scheme in COMPARED {
        let code = SchemeCode {
            scheme,
            ..plan.code
        };
        if scheme == plan.code.scheme || scheme.servers_needed(code.k, code.p) > a.nodes {
            continue;
        }
        let none = sim_summary(&simulate_code(a, plan, code, Failures::None)?);
        let failures = plan.failures();
        let row = if failures.is_empty() {
            sim_row(&none, None)
        } else {
            let killed = sim_summary(&simulate_code(a, plan, code, Failures::AsRun)?);
            let max = measure::sim_relative_miss_increase(
                &none.windows,
                &killed.windows,
                &failures,
                plan.window,
            );
            sim_row(&killed, max)
        };
        rows.push(CompareRow {
            scheme: code.scheme.name_with_code(code.k, code.p),
            ..row
        });
    }
    Ok(rows)
}

/// A comparison row of the simulator's run `s` (with the kills, if the run has any).
pub(super) fn sim_row(s: &SimSummary, max_relative_miss_increase: Option<f64>) -> CompareRow {
    CompareRow {
        scheme: String::new(),
        run: "sim",
        miss_ratio: s.miss_ratio,
        byte_miss_ratio: s.byte_miss_ratio,
        write_imbalance: s.write_imbalance,
        max_relative_miss_increase,
    }
}

pub(super) fn sim_summary(r: &ClusterResult) -> SimSummary {
    SimSummary {
        miss_ratio: r.miss_ratio,
        byte_miss_ratio: r.byte_miss_ratio,
        write_imbalance: r.write_imbalance.is_finite().then_some(r.write_imbalance),
        bytes_written: r
            .bytes_written
            .iter()
            .map(|&b| u64::try_from(b).unwrap_or(u64::MAX))
            .collect(),
        windows: r
            .windows
            .iter()
            .map(|w| SimWindow {
                index: w.index,
                start: w.start,
                requests: w.requests,
                miss_ratio: w.miss_ratio,
                byte_miss_ratio: w.byte_miss_ratio,
            })
            .collect(),
        repair: super::measure::RepairCounts {
            objects: r.repair.objects,
            pieces: r.repair.pieces,
            bytes_written: u64::try_from(r.repair.written).unwrap_or(u64::MAX),
        },
        resyncs: r.resyncs,
        reinserts: r.reinserts,
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::args;
    use super::*;

    /// A kill inside a window (request 62 of windows of 20) takes the node away from that
    /// request, not from the next window's start: the node writes less than when it is killed
    /// at request 80.
    #[test]
    fn a_kill_inside_a_window_starts_at_its_request() {
        let written = |fraction: &str| {
            let a = args(&["--requests", "200", "--kill", &format!("1@{fraction}")]);
            let p = super::super::plan(&a).unwrap();
            simulate(&a, &p, Failures::AsRun).unwrap().bytes_written[1]
        };
        let (at_62, at_80) = (written("0.31"), written("0.4"));
        assert!(at_62 < at_80, "killed at 62: {at_62} bytes; at 80: {at_80}");
    }

    /// The demo gives the simulator only the repair's rate and period: its other settings are
    /// `RepairConfig::OFF`'s, which must be the cluster file's defaults the nodes run with; and
    /// the simulator's parity rebalance rule is the file's by default.
    #[test]
    fn the_simulators_repair_and_rebalance_settings_are_the_cluster_files_defaults() {
        let mut file = "scheme = \"c2dn\"\nkey = \"0123456789abcdef0123\"\n\
                        coordinator = \"127.0.0.1:1\"\nrepair_rate = \"1MiB\"\n"
            .to_string();
        for i in 0..4 {
            file += &format!(
                "[[node]]\nid = {i}\nclient = \"127.0.0.1:{}\"\npeer = \"127.0.0.1:{}\"\n",
                10 + i,
                20 + i
            );
        }
        let file = file.as_str();
        let cfg = ecdn_cluster::ClusterConfig::parse(file).unwrap();
        let off = ecdn_sim::cluster::RepairConfig::OFF;
        assert_eq!(cfg.repair_rate, 1 << 20);
        assert_eq!(cfg.repair_min_requests, off.min_requests);
        assert_eq!(cfg.repair_max_age, off.max_age);
        assert_eq!(cfg.repair_scan, off.scan);
        assert_eq!(cfg.repair_every_s, off.every);
        // Parity rebalance: `ecdn sim cluster` and a cluster file default to the same rule.
        let sim = SimConfig::new(Scheme::C2dn, 1);
        assert_eq!(cfg.rebalance_options(), sim.rebalance);
        assert_eq!(cfg.rebalance_every_s, sim.rebalance_every);
        // Resync: the same age (and the demo's default).
        assert_eq!(cfg.resync, sim.resync);
        assert_eq!(args(&[]).resync.0, sim.resync);
        let counts = ecdn_cluster::ClusterConfig::parse(&format!(
            "weigh = \"counts\"\ncarry = 0\nhold = 0\n{file}"
        ))
        .unwrap()
        .rebalance_options();
        assert_eq!(counts, ecdn_placement::RebalanceOptions::default());
        // The repair is C2DN's only.
        let rep2 = file.replace("\"c2dn\"", "\"rep2\"");
        let e = ecdn_cluster::ClusterConfig::parse(&rep2)
            .unwrap_err()
            .to_string();
        assert!(e.contains("repair_rate needs scheme"), "{e}");
    }

    /// A node that returns is written to again (App. 10.3: it gets its buckets back); one
    /// that returns empty has to be written what it held once more.
    #[test]
    fn a_restarted_node_returns_in_the_simulator() {
        let written = |flags: &[&str], failures| {
            let mut all = vec!["--requests", "2000", "--kill", "1@0.3"];
            all.extend_from_slice(flags);
            let a = args(&all);
            let p = super::super::plan(&a).unwrap();
            simulate(&a, &p, failures).unwrap().bytes_written[1]
        };
        let gone = written(&[], Failures::AsRun);
        let back = written(&["--restart", "1@0.6"], Failures::AsRun);
        let empty = written(&["--restart-empty", "1@0.6"], Failures::AsRun);
        eprintln!("node 1 wrote {gone} bytes gone, {back} back, {empty} back empty");
        assert!(back > gone, "gone {gone}, back {back}");
        assert!(empty > back, "back {back}, back empty {empty}");
        // `ReturnsEmpty` empties a return that keeps its disk in the run.
        let as_empty = written(&["--restart", "1@0.6"], Failures::ReturnsEmpty);
        assert_eq!(as_empty, empty);
    }

    #[test]
    fn kills_become_failure_events_exact_to_the_request() {
        let kill = |node, at| Kill {
            node,
            fraction: 0.0,
            at,
        };
        let back = |node, at, empty| Restart {
            node,
            fraction: 0.0,
            at,
            empty,
        };
        let kills = [kill(3, 20), kill(1, 37), kill(4, 40)];
        let restarts = [back(3, 45, false), back(4, 41, true)];
        let u = kill_events(&kills, &restarts, false);
        let mut down = Vec::new();
        // The simulator's clock is the request index.
        for (i, want) in [
            (19, vec![]),
            (20, vec![3]),
            (36, vec![3]),
            (37, vec![1, 3]),
            (40, vec![1, 3, 4]),
            (41, vec![1, 3]),
            (44, vec![1, 3]),
            (45, vec![1]),
        ] {
            u.at(i, i as f64, &mut down);
            assert_eq!(down, want, "request {i}");
        }
        assert_eq!(u.returns_empty, vec![4]);
        assert_eq!(
            kill_events(&kills, &restarts, true).returns_empty,
            vec![3, 4]
        );
        assert!(kill_events(&[], &[], false).is_empty());
    }
}
