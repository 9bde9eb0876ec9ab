//! The simulator's side of a demo run: the same trace, scheme, code, threshold, buckets and
//! seed through `ecdn_sim::cluster`, with the run's failures as an unavailability record, and
//! its results as the report shows them.

use anyhow::{Context, Result};
use ecdn_sim::cluster::{simulate_cluster, ClusterConfig as SimConfig, ClusterResult};
use ecdn_sim::unavailability::{Unavailability, Window};
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
        cfg.unavailability = kill_record(&plan.kills, plan.trace.len() as u64);
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

/// The kills as an unavailability record: one line per `g` requests (`g` the greatest common
/// divisor of the kill points, so every kill starts exactly at its request), each listing the
/// nodes killed before it.
pub(super) fn kill_record(kills: &[Kill], requests: u64) -> Unavailability {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let g = kills.iter().fold(0, |g, k| gcd(g, k.at)).max(1);
    let record = (0..requests.div_ceil(g))
        .map(|line| {
            let mut down: Vec<usize> = kills
                .iter()
                .filter(|k| k.at <= line * g)
                .map(|k| k.node)
                .collect();
            down.sort_unstable();
            down
        })
        .collect();
    Unavailability {
        record,
        window: Some(Window::Requests(g)),
        events: Vec::new(),
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

    #[test]
    fn kills_become_an_unavailability_record_exact_to_the_request() {
        let kill = |node, at| Kill {
            node,
            fraction: 0.0,
            at,
        };
        let u = kill_record(&[kill(3, 20), kill(1, 30)], 45);
        assert_eq!(u.window, Some(Window::Requests(10)));
        assert_eq!(
            u.record,
            vec![vec![], vec![], vec![3], vec![1, 3], vec![1, 3]]
        );
        let mut down = Vec::new();
        for (i, want) in [(19, vec![]), (20, vec![3]), (29, vec![3]), (30, vec![1, 3])] {
            u.at(i, 0.0, &mut down);
            assert_eq!(down, want, "request {i}");
        }
        // Kills at 7 and 12: one line per request.
        let u = kill_record(&[kill(0, 7), kill(2, 12)], 14);
        assert_eq!(u.window, Some(Window::Requests(1)));
        assert_eq!(u.record.len(), 14);
        u.at(6, 0.0, &mut down);
        assert!(down.is_empty());
        u.at(7, 0.0, &mut down);
        assert_eq!(down, vec![0]);
    }
}
