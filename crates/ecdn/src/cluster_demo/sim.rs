//! The simulator's side of a demo run: the same trace, scheme, code, threshold, buckets and
//! seed through `ecdn_sim::cluster`, with the run's failures as failure events, and its
//! results as the report shows them.

use anyhow::{Context, Result};
use ecdn_sim::cluster::{simulate_cluster, ClusterConfig as SimConfig, ClusterResult};
use ecdn_sim::unavailability::{FailEvent, Unavailability, Window};
use ecdn_trace::{Request, SliceReader};

use super::driver::{self, Kill};
use super::report::{SimSummary, SimWindow};
use super::{DemoArgs, Plan};

/// The simulator on the same trace and configuration: without failures, or (`with_kills`)
/// with the run's kills, each server unavailable from its kill's request on.
pub(super) fn simulate(a: &DemoArgs, plan: &Plan, with_kills: bool) -> Result<ClusterResult> {
    let mut cfg = SimConfig::new(plan.code.scheme, a.nodes as u64 * plan.disk_size);
    cfg.weights = vec![1.0; a.nodes];
    cfg.k = plan.code.k;
    cfg.p = plan.code.p;
    cfg.threshold = plan.threshold;
    cfg.sub_chunk = plan.sub_chunk;
    cfg.buckets = a.buckets;
    cfg.window = Window::Requests(plan.window);
    cfg.seed = a.seed;
    cfg.max_requests = plan.trace.len() as u64;
    if with_kills {
        cfg.unavailability = kill_events(&plan.kills);
    }
    if a.rebalance_every > 0 {
        // Trace time is the request index here (below): a rebalance before every N-th request.
        cfg.rebalance_every = a.rebalance_every as f64;
        cfg.rebalance_at = Some(a.rebalance_every as f64);
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

/// The kills as failure events, each node unavailable from its kill's request on. The
/// simulator's clock is the request index (see [`simulate`]), so an event starts exactly at
/// its request; the simulator checks events at every request, while it reads a per-window
/// record only where one of its own windows starts, which would move a kill inside a window to
/// the next window's start.
pub(super) fn kill_events(kills: &[Kill]) -> Unavailability {
    Unavailability {
        events: kills
            .iter()
            .map(|k| FailEvent {
                server: k.node,
                start: k.at as f64,
                end: f64::INFINITY,
            })
            .collect(),
        ..Unavailability::default()
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: DemoArgs,
    }

    fn args(extra: &[&str]) -> DemoArgs {
        let mut v = vec!["demo"];
        v.extend_from_slice(extra);
        Cli::try_parse_from(v).unwrap().a
    }

    /// A kill inside a window (request 62 of windows of 20) takes the node away from that
    /// request, not from the next window's start: the node writes less than when it is killed
    /// at request 80.
    #[test]
    fn a_kill_inside_a_window_starts_at_its_request() {
        let written = |fraction: &str| {
            let a = args(&["--requests", "200", "--kill", &format!("1@{fraction}")]);
            let p = super::super::plan(&a).unwrap();
            simulate(&a, &p, true).unwrap().bytes_written[1]
        };
        let (at_62, at_80) = (written("0.31"), written("0.4"));
        assert!(at_62 < at_80, "killed at 62: {at_62} bytes; at 80: {at_80}");
    }

    #[test]
    fn kills_become_failure_events_exact_to_the_request() {
        let kill = |node, at| Kill {
            node,
            fraction: 0.0,
            at,
        };
        let u = kill_events(&[kill(3, 20), kill(1, 37)]);
        let mut down = Vec::new();
        // The simulator's clock is the request index.
        for (i, want) in [(19, vec![]), (20, vec![3]), (36, vec![3]), (37, vec![1, 3])] {
            u.at(i, i as f64, &mut down);
            assert_eq!(down, want, "request {i}");
        }
        assert!(kill_events(&[]).is_empty());
    }
}
