//! What a demo run measured: per-request [`Record`]s folded into windows of requests next to
//! the simulator's, the relative miss-ratio increase after each kill, latency percentiles of
//! hits, the nodes' cluster counters, and the one JSON object `--json` prints ([`Report`]).
//!
//! Definitions (the README's and the names):
//! * a request **failed** if, after the driver's one retry, it got no 2xx answer or a body
//!   that is short or not byte-exact; it counts in its window's `requests` and `failed`, not in
//!   the miss ratios;
//! * a **miss** is an answer whose `X-Cache` starts with `MISS`, or one marked
//!   `X-Ecdn-Partial: 1` (a partial hit is a miss, as in the simulator); a **hit** is any other
//!   successful answer whose `X-Cache` starts with `HIT`;
//! * **miss ratio** = misses / successful requests; **byte miss ratio** = Σ origin bytes /
//!   Σ object bytes over the successful requests, where a miss's origin bytes are its
//!   `X-Ecdn-Origin-Bytes` (the object's size when a miss lacks the header);
//! * **decode fraction** = hits of coded objects answered with `X-Ecdn-Decoded: 1` / hits of
//!   coded objects (`X-Ecdn-Object: coded`);
//! * **relative miss increase** of a window = (live miss ratio − simulator's miss ratio
//!   without failures in the same window) / the simulator's; after a kill it is taken over the
//!   window holding the kill's first request and the two after it, and the reported value is
//!   the largest over all kills (windows where the simulator's miss ratio is 0 are left out).

use std::fmt::Write as _;

use serde::Serialize;

use super::measure::*;
use super::schedule::{Kill, Restart};

/// The one JSON object of `--json` (its last stdout line).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    pub scheme: String,
    /// The control plane and what it did (`coordinator_failovers`, `epoch_changes`, ...).
    #[serde(flatten)]
    pub control: super::control::ControlReport,
    pub nodes: usize,
    pub k: usize,
    pub p: usize,
    pub requests: u64,
    pub concurrency: usize,
    /// Requests per window.
    pub window: u64,
    /// How the driver spreads requests over live nodes.
    pub balancing: &'static str,
    pub failed_requests: u64,
    pub wrong_bytes: u64,
    /// `miss_ratio`: the paper's, requests that caused an origin fetch (a partial hit counts,
    /// with the bytes it fetched in `byte_miss_ratio`); a request that waited on another
    /// request's fill is no miss but counts in `collapsed_fraction`, with its latency in
    /// `collapsed_ms`.
    /// Requests retried on another node: after a refused or reset connection before the
    /// response, and after a connection broken mid-body.
    pub retried_before_response: u64,
    pub retried_mid_body: u64,
    pub miss_ratio: f64,
    pub byte_miss_ratio: f64,
    pub collapsed_fraction: f64,
    /// TTFB and download of the collapsed requests (all objects).
    pub collapsed_ms: Latency,
    /// max/min `bytes_written` over the nodes in the map for the whole run, neither killed nor
    /// declared out (null if one wrote 0).
    pub write_imbalance: Option<f64>,
    /// Per node (null for a killed node that did not come back; a node that did: since its
    /// restart): piece bytes it admitted.
    pub bytes_written: Vec<Option<u64>>,
    pub windows: Vec<WindowRow>,
    pub kills: Vec<KillRow>,
    /// Killed nodes that came back (`--restart`, `--restart-empty`): the miss ratio after the
    /// return, live and simulated.
    pub restarts: Vec<super::restart::RestartRow>,
    pub max_relative_miss_increase: Option<f64>,
    /// The same for the simulator that loses the same nodes at the same requests: what the
    /// lost capacity costs by itself (null without kills).
    pub sim_max_relative_miss_increase: Option<f64>,
    /// Decoded hits of coded objects / hits of coded objects (null without coded hits).
    pub decode_fraction: Option<f64>,
    /// Successful answers marked `X-Ecdn-Decoded: 1` (hits and misses) / successful answers.
    pub decoded_request_fraction: f64,
    /// Answers marked `X-Ecdn-Partial: 1`.
    pub partial_hits: u64,
    /// What the nodes' background repair did (`--repair-rate`), summed over the nodes alive
    /// at the end (zeros when it is off).
    pub repair: RepairCounts,
    /// Pieces the nodes alive at the end dropped because another piece of their object was
    /// evicted (`--evict-together`; 0 without).
    pub dying_pieces_dropped: u64,
    /// Pieces the nodes alive at the end wrote where a newer map put them, after their server
    /// (a killed node, before the coordinator declared it out) could not take them.
    pub handoffs: u64,
    /// Objects whose found pieces the nodes alive at the end rewrote with the lacking ones
    /// (`--resync`).
    pub resyncs: u64,
    /// Objects whose pieces their hits rewrote (`--reinsert`).
    pub reinserts: u64,
    /// Reads whose write-back asked the pieces' ages in a round of its own: the lookup's
    /// answers (`has?ages`) did not say them all (a server presumed to hold its chunk, or too
    /// slow to wait for).
    pub ages_asked: u64,
    /// Σ `peer_bytes_received` over the nodes alive at the end / body bytes served: chunks,
    /// replicas and relayed answers.
    pub intra_cluster_bytes: f64,
    /// The part of `intra_cluster_bytes` that relayed answers carried (a request sent to a node
    /// that does not serve its bucket).
    pub intra_cluster_relay_bytes: f64,
    pub bytes_served: u64,
    pub ttfb_ms: ByKind,
    pub download_ms: ByKind,
    /// The same over the hits served from pieces (`X-Cache: HIT-DISK`), without the DRAM
    /// hits, whose latency does not depend on coding.
    pub ttfb_ms_piece_hits: ByKind,
    pub download_ms_piece_hits: ByKind,
    /// Download percentiles of hits through modeled client links (`--client-link`; empty
    /// without it).
    pub client_links: Vec<ClientLink>,
    /// CPU seconds (user + system) of all node processes: the survivors' at the end, the
    /// killed ones' at their kill.
    pub cpu_s: f64,
    pub cpu_s_per_gib: f64,
    /// The `cluster` counters of every node alive at the end (null for a killed node that did
    /// not come back; a node that did: since its restart).
    pub node_stats: Vec<Option<ClusterStats>>,
    pub elapsed_s: f64,
    pub requests_per_s: f64,
    pub sim: SimSummary,
    /// The simulator with the run's kills and returns (runs with kills only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sim_with_kills: Option<SimSummary>,
    /// The live scheme beside the simulator's schemes on the same trace, capacity and kills:
    /// the live run first, then the simulator's run of the live scheme, then the others.
    pub compare: Vec<CompareRow>,
    /// `--testbed`: the bed's id, links, hosts (each with its address and what ran on it) and
    /// the network faults of the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub testbed: Option<super::bed::BedReport>,
    /// What the coordinator declared: each stay of a node out of the map, why, and the times
    /// from its fault and to its return (the simulator's column loses the nodes the demo did
    /// not kill at these requests).
    pub declared: Vec<super::declared::OutRow>,
    /// Requests the load balancer routed by bucket (`--routing bucket`) sent to the bucket's
    /// next candidate because its probes found the serving node much slower than the others.
    pub balancer_slow_skips: u64,
    /// Per node, the largest service time (ms: the median of its peers' probe round trips)
    /// the coordinator showed while the node was in the map; null if never shown.
    pub service_ms_max: Vec<Option<f64>>,
}

/// The per-window table, one line per window, a `*` after the windows with a kill or a return.
pub fn window_table(
    rows: &[WindowRow],
    kills: &[Kill],
    restarts: &[Restart],
    window: u64,
) -> String {
    let mut s = String::new();
    // With kills, a column for the simulator that loses the same nodes at the same requests.
    let with_kills = !kills.is_empty();
    let _ = writeln!(
        s,
        "{:>6} {:>9} {:>8} {:>9} {:>9}{} {:>10} {:>10} {:>7}",
        "window",
        "start",
        "requests",
        "miss",
        "sim_miss",
        if with_kills {
            format!(" {:>9}", "sim_kill")
        } else {
            String::new()
        },
        "byte_miss",
        "sim_bmiss",
        "failed"
    );
    for r in rows {
        let killed: Vec<String> = kills
            .iter()
            .filter(|k| window_of(k.at, window) == r.index)
            .map(|k| format!("node {} killed", k.node))
            .chain(
                restarts
                    .iter()
                    .filter(|b| window_of(b.at, window) == r.index)
                    .map(|b| {
                        let wiped = if b.empty { ", disk wiped" } else { "" };
                        format!("node {} back{wiped}", b.node)
                    }),
            )
            .collect();
        let _ = writeln!(
            s,
            "{:>6} {:>9} {:>8} {:>9.4} {:>9}{} {:>10.4} {:>10} {:>7}{}",
            r.index,
            r.start,
            r.requests,
            r.miss_ratio,
            opt(r.sim_miss_ratio, 4),
            if with_kills {
                format!(" {:>9}", opt(r.sim_killed_miss_ratio, 4))
            } else {
                String::new()
            },
            r.byte_miss_ratio,
            opt(r.sim_byte_miss_ratio, 4),
            r.failed,
            if killed.is_empty() {
                String::new()
            } else {
                format!("  * {}", killed.join(", "))
            }
        );
    }
    s
}

/// Up to `max` failed requests, one line each: index, node, status, why.
pub fn failures(records: &[Record], max: usize) -> String {
    let mut s = String::new();
    for (i, r) in records.iter().enumerate().filter(|(_, r)| !r.ok).take(max) {
        let _ = writeln!(
            s,
            "failed: request {i} on node {} (status {}): {}",
            r.node,
            r.status.map_or("none".into(), |c| c.to_string()),
            r.error.as_deref().unwrap_or("?")
        );
    }
    s
}

/// The summary below the table.
pub fn summary(r: &Report) -> String {
    let mut s = String::new();
    let pct = |p: &Percentiles| {
        format!(
            "p50 {} p90 {} p99 {} ms (n={})",
            opt(p.p50, 2),
            opt(p.p90, 2),
            opt(p.p99, 2),
            p.samples
        )
    };
    let _ = writeln!(
        s,
        "{} on {} nodes: {} requests in {:.2} s ({:.0} req/s), {} failed, {} wrong bytes, \
         {} + {} retried (before response, mid-body)",
        r.scheme,
        r.nodes,
        r.requests,
        r.elapsed_s,
        r.requests_per_s,
        r.failed_requests,
        r.wrong_bytes,
        r.retried_before_response,
        r.retried_mid_body
    );
    // The live run beside the simulator's run with the same kills (when it had any), and the
    // simulator's without failures: each figure against the one that counts the same.
    let (twin, twin_name) = match &r.sim_with_kills {
        Some(k) => (k, "sim with the same kills"),
        None => (&r.sim, "sim"),
    };
    let no_failures = |f: String| match r.sim_with_kills {
        Some(_) => format!("; without failures {f}"),
        None => String::new(),
    };
    let _ = writeln!(
        s,
        "miss ratio (origin fetches) {:.4} ({twin_name} {:.4}{}), byte miss ratio {:.4} \
         ({twin_name} {:.4}{}), write imbalance (max/min bytes written, nodes in the map the \
         whole run) {} ({twin_name} {}{}), max relative miss increase after a kill {} (sim \
         losing the same nodes {})",
        r.miss_ratio,
        twin.miss_ratio,
        no_failures(format!("{:.4}", r.sim.miss_ratio)),
        r.byte_miss_ratio,
        twin.byte_miss_ratio,
        no_failures(format!("{:.4}", r.sim.byte_miss_ratio)),
        opt(r.write_imbalance, 3),
        opt(twin.write_imbalance, 3),
        no_failures(opt(r.sim.write_imbalance, 3)),
        opt(r.max_relative_miss_increase, 4),
        opt(r.sim_max_relative_miss_increase, 4)
    );
    let _ = writeln!(
        s,
        "collapsed (waited on another request's fill, no origin fetch): {:.4} of the requests, \
         TTFB {}",
        r.collapsed_fraction,
        pct(&r.collapsed_ms.ttfb)
    );
    let written: Vec<String> = r
        .bytes_written
        .iter()
        .map(|b| b.map_or("killed".into(), |b| b.to_string()))
        .collect();
    let _ = writeln!(
        s,
        "bytes written per node: [{}]; {twin_name}: {:?}{}",
        written.join(", "),
        twin.bytes_written,
        no_failures(format!("{:?}", r.sim.bytes_written))
    );
    let _ = writeln!(
        s,
        "decode fraction of coded hits {}, partial hits {}, intra-cluster bytes per byte served \
         {:.3} ({:.3} of it relayed answers), CPU {:.2} s ({:.2} s/GiB served)",
        opt(r.decode_fraction, 4),
        r.partial_hits,
        r.intra_cluster_bytes,
        r.intra_cluster_relay_bytes,
        r.cpu_s,
        r.cpu_s_per_gib
    );
    let _ = writeln!(s, "TTFB of hits: coded {}", pct(&r.ttfb_ms.coded));
    let _ = writeln!(s, "              replicated {}", pct(&r.ttfb_ms.replicated));
    let _ = writeln!(s, "download of hits: coded {}", pct(&r.download_ms.coded));
    let _ = writeln!(
        s,
        "                  replicated {}",
        pct(&r.download_ms.replicated)
    );
    let _ = writeln!(
        s,
        "hits from pieces only (no DRAM hits): TTFB p50 coded {} / replicated {} ms, download \
         p50 coded {} / replicated {} ms",
        opt(r.ttfb_ms_piece_hits.coded.p50, 2),
        opt(r.ttfb_ms_piece_hits.replicated.p50, 2),
        opt(r.download_ms_piece_hits.coded.p50, 2),
        opt(r.download_ms_piece_hits.replicated.p50, 2)
    );
    for l in &r.client_links {
        let _ = writeln!(
            s,
            "download of hits through a {:.0} Mbit/s client link: coded {}, replicated {}",
            l.bits_per_s / 1e6,
            pct(&l.download_ms.coded),
            pct(&l.download_ms.replicated)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(size: u64, miss: bool, origin: u64) -> Record {
        Record {
            size,
            ok: true,
            status: Some(200),
            miss,
            hit: !miss,
            origin_bytes: origin,
            bytes: size,
            ..Record::default()
        }
    }

    fn failed() -> Record {
        Record {
            size: 10,
            error: Some("reset".into()),
            ..Record::default()
        }
    }

    #[test]
    fn windows_count_misses_bytes_and_failures_per_window() {
        let records = vec![
            rec(100, true, 100),
            rec(100, false, 0),
            failed(),
            rec(300, true, 150), // a partial fetch
            rec(50, false, 0),
        ];
        let sim = vec![SimWindow {
            index: 1,
            start: 2,
            requests: 2,
            miss_ratio: 0.25,
            byte_miss_ratio: 0.5,
        }];
        let rows = windows(&records, 2, &sim, None);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].start, 0);
        assert_eq!(rows[0].miss_ratio, 0.5);
        assert_eq!(rows[0].byte_miss_ratio, 0.5);
        assert_eq!(rows[0].sim_miss_ratio, None);
        // Window 1: one failure (out of the ratios), one miss of 150 origin bytes of 300.
        assert_eq!((rows[1].start, rows[1].requests, rows[1].failed), (2, 2, 1));
        assert_eq!(rows[1].miss_ratio, 1.0);
        assert_eq!(rows[1].byte_miss_ratio, 0.5);
        assert_eq!(rows[1].sim_miss_ratio, Some(0.25));
        assert_eq!((rows[2].requests, rows[2].miss_ratio), (1, 0.0));
        let t = Totals::of(&records);
        assert_eq!((t.requests, t.ok, t.failed, t.misses), (5, 4, 1, 2));
        assert_eq!(t.miss_ratio(), 0.5);
        assert_eq!(t.byte_miss_ratio(), 250.0 / 550.0);
    }

    #[test]
    fn decode_fraction_is_over_coded_hits() {
        let mut a = rec(1 << 20, false, 0);
        a.coded = Some(true);
        a.decoded = true;
        let mut b = a.clone();
        b.decoded = false;
        let mut miss = rec(1 << 20, true, 1 << 20);
        miss.coded = Some(true);
        miss.decoded = true; // a decoded miss is not a hit
        let mut small = rec(10, false, 0);
        small.coded = Some(false);
        let t = Totals::of(&[a, b, miss, small]);
        assert_eq!(t.decode_fraction(), Some(0.5));
        assert_eq!(t.decoded, 2);
        assert_eq!(Totals::of(&[rec(1, false, 0)]).decode_fraction(), None);
    }

    fn row(index: usize, live: f64, sim: Option<f64>) -> WindowRow {
        WindowRow {
            index,
            start: index as u64 * 10,
            requests: 10,
            miss_ratio: live,
            byte_miss_ratio: 0.0,
            collapsed_fraction: 0.0,
            failed: 0,
            sim_miss_ratio: sim,
            sim_byte_miss_ratio: sim,
            sim_killed_miss_ratio: sim.map(|s| s * 2.0),
        }
    }

    #[test]
    fn relative_increase_is_over_three_windows_from_the_kill() {
        let rows: Vec<WindowRow> = vec![
            row(0, 0.9, Some(0.3)), // before the kill: ignored
            row(1, 0.2, Some(0.2)),
            row(2, 0.33, Some(0.3)), // +10%
            row(3, 0.2, Some(0.0)),  // sim 0: left out
            row(4, 0.8, Some(0.2)),  // fourth window after: ignored
        ];
        let kill = |at| Kill {
            node: 1,
            fraction: 0.0,
            at,
        };
        let got = max_relative_miss_increase(&rows, &[kill(15)], 10, false).unwrap();
        assert!((got - 0.1).abs() < 1e-9, "{got}");
        // The simulator that lost the node (here twice the no-failure miss ratio): +100%.
        let got = max_relative_miss_increase(&rows, &[kill(15)], 10, true).unwrap();
        assert!((got - 1.0).abs() < 1e-9, "{got}");
        // A later kill reaches window 4.
        let got = max_relative_miss_increase(&rows, &[kill(15), kill(40)], 10, false).unwrap();
        assert!((got - 3.0).abs() < 1e-9, "{got}");
        assert_eq!(max_relative_miss_increase(&rows, &[], 10, false), None);
        // Live below the simulator: a negative increase, reported as is.
        let rows = vec![row(0, 0.1, Some(0.2))];
        assert_eq!(
            max_relative_miss_increase(&rows, &[kill(0)], 10, false),
            Some(-0.5)
        );
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), Some(50.0));
        assert_eq!(percentile(&v, 0.9), Some(90.0));
        assert_eq!(percentile(&v, 0.99), Some(99.0));
        assert_eq!(percentile(&[7.0], 0.99), Some(7.0));
        assert_eq!(percentile(&[], 0.5), None);
        let p = Percentiles::of(vec![3.0, 1.0, 2.0]);
        assert_eq!((p.samples, p.p50, p.p99), (3, Some(2.0), Some(3.0)));
    }

    #[test]
    fn latency_splits_hits_by_kind_and_skips_misses() {
        let mut c = rec(1 << 20, false, 0);
        c.coded = Some(true);
        c.ttfb_us = 2000;
        c.total_us = 9000;
        let mut r = rec(1000, false, 0);
        r.coded = Some(false);
        r.ttfb_us = 1000;
        r.total_us = 1500;
        let mut m = rec(1000, true, 1000);
        m.coded = Some(false);
        m.ttfb_us = 50_000;
        let mut h = r.clone();
        h.hoc = true;
        h.ttfb_us = 100;
        let (ttfb, download) = latency(&[c.clone(), r.clone(), m.clone()], false);
        assert_eq!(ttfb.coded.p50, Some(2.0));
        assert_eq!(ttfb.replicated.p99, Some(1.0));
        assert_eq!(ttfb.replicated.samples, 1);
        assert_eq!(download.coded.p90, Some(9.0));
        let (all, _) = latency(&[c.clone(), r.clone(), h.clone()], false);
        assert_eq!((all.replicated.samples, all.replicated.p50), (2, Some(0.1)));
        let (pieces, _) = latency(&[c, r, h], true);
        assert_eq!(
            (pieces.replicated.samples, pieces.replicated.p50),
            (1, Some(1.0))
        );
    }

    #[test]
    fn failures_are_listed_with_node_and_reason() {
        let mut f = failed();
        f.node = 4;
        let s = failures(&[rec(1, false, 0), f.clone(), f], 1);
        assert_eq!(s, "failed: request 1 on node 4 (status none): reset\n");
    }

    #[test]
    fn a_client_link_delays_each_frame_behind_the_previous_one() {
        // 1 Mbit/s: 125 bytes take 1 ms.
        assert_eq!(through_link(&[], 1e6), 0);
        assert_eq!(through_link(&[(0, 125), (0, 125)], 1e6), 2000);
        // A frame that arrives after the link went idle starts at its arrival.
        assert_eq!(through_link(&[(0, 125), (5000, 125)], 1e6), 6000);
        // Frames that arrive faster than the link queue up behind each other.
        assert_eq!(
            through_link(&[(100, 125), (200, 250), (300, 125)], 1e6),
            4100
        );
        let mut hit = Record {
            ok: true,
            hit: true,
            coded: Some(true),
            arrivals: vec![(1000, 1250)],
            ..Record::default()
        };
        let mut replicated = hit.clone();
        replicated.coded = Some(false);
        replicated.arrivals = vec![(500, 1250)];
        hit.hoc = false;
        let links = client_links(&[hit, replicated], &[1e6, 1e7]);
        assert_eq!(links.len(), 2);
        assert_eq!(links[0].download_ms.coded.p50, Some(11.0));
        assert_eq!(links[0].download_ms.replicated.p50, Some(10.5));
        assert_eq!(links[1].download_ms_piece_hits.coded.p50, Some(2.0));
    }

    #[test]
    fn imbalance_of_written_bytes() {
        assert_eq!(imbalance([100.0, 150.0, 120.0]), Some(1.5));
        assert_eq!(imbalance([100.0, 0.0]), None);
        assert_eq!(imbalance(std::iter::empty()), None);
    }

    #[test]
    fn table_marks_the_kill_window() {
        let rows = vec![row(0, 0.5, Some(0.5)), row(1, 0.6, None)];
        let kills = [Kill {
            node: 2,
            fraction: 0.5,
            at: 10,
        }];
        let t = window_table(&rows, &kills, &[], 10);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(!lines[1].contains('*'));
        assert!(lines[2].ends_with("* node 2 killed"), "{}", lines[2]);
        assert!(lines[2].contains(" - "), "{}", lines[2]);
        // Node 2 back in window 2, wiped; node 0 back in the same window as node 2's kill.
        let rows = vec![row(0, 0.5, None), row(1, 0.6, None), row(2, 0.6, None)];
        let back = |node, at, empty| Restart {
            node,
            fraction: 0.0,
            at,
            empty,
        };
        let t = window_table(&rows, &kills, &[back(2, 25, true), back(0, 15, false)], 10);
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[2].ends_with("* node 2 killed, node 0 back"),
            "{}",
            lines[2]
        );
        assert!(
            lines[3].ends_with("* node 2 back, disk wiped"),
            "{}",
            lines[3]
        );
    }
}
