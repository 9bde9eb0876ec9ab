//! What a demo run measured, before it is reported: the per-request [`Record`]s (written by
//! the driver, the processes and a restart), folded into windows of requests next to the
//! simulator's, the relative miss-ratio increase after each kill, latency percentiles of hits,
//! the client links, and the nodes' cluster counters. The definitions are in `report.rs`'s
//! documentation.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::schedule::Kill;

/// How a request's first attempt failed, when the driver retried it on another node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// Refused or reset before the response headers.
    BeforeResponse,
    /// The connection broke while the body was arriving.
    MidBody,
}

/// What one request (after its retry, if any) got.
#[derive(Clone, Debug, Default)]
pub struct Record {
    /// The object's size (what the body must be).
    pub size: u64,
    /// The node that gave the final answer (or the last one tried).
    pub node: usize,
    /// 2xx, full length and byte-exact.
    pub ok: bool,
    pub status: Option<u16>,
    /// The request caused an origin fetch (the paper's miss): `X-Cache` starts with `MISS` but
    /// is not `MISS-COLLAPSED`, or the answer is a partial hit.
    pub miss: bool,
    /// `X-Cache: MISS-COLLAPSED`: it waited on another request's fill and fetched nothing
    /// from the origin (a hit by the paper's count, but the client waited for the origin).
    pub collapsed: bool,
    /// `X-Cache` starts with `HIT` (and the answer is no partial hit).
    pub hit: bool,
    /// `X-Cache: HIT-HOC`: served from the serving node's DRAM.
    pub hoc: bool,
    /// `X-Ecdn-Object`: `Some(true)` coded, `Some(false)` replicated.
    pub coded: Option<bool>,
    /// Bytes the answer's fetch took from the origin (0 on hits).
    pub origin_bytes: u64,
    pub partial: bool,
    pub decoded: bool,
    /// Body bytes received.
    pub bytes: u64,
    /// Body bytes that differ from the object's content at their offset (or lie beyond its end).
    pub wrong_bytes: u64,
    /// Time to the first body byte and to the last, from sending the request.
    pub ttfb_us: u64,
    pub total_us: u64,
    /// Each body frame's arrival (µs from sending the request, bytes), when kept
    /// (`--client-link`).
    pub arrivals: Vec<(u32, u32)>,
    pub retry: Option<Retry>,
    /// Why it failed (transport error, status, short or wrong body).
    pub error: Option<String>,
}

/// The `cluster` object of a node's `/_ecdn/stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterStats {
    /// The epoch of the node's bucket map.
    #[serde(default)]
    pub epoch: u64,
    pub bytes_written: u64,
    pub peer_bytes_received: u64,
    /// The part of `peer_bytes_received` that relayed answers carried.
    #[serde(default)]
    pub relay_bytes_received: u64,
    pub peer_bytes_sent: u64,
    pub decodes: u64,
    pub partial_hits: u64,
    pub relayed: u64,
    /// Requests it sent to a bucket's next candidate because its probes found the serving
    /// node much slower than its peers.
    #[serde(default)]
    pub relay_detours: u64,
    /// Replica reads it hedged with another holder's (the first holder turned slow while
    /// awaited, or failed).
    #[serde(default)]
    pub replica_hedges: u64,
    /// Coded reads' windows that asked parity because a data chunk's holder was slow.
    #[serde(default)]
    pub parity_fetches: ParityFetches,
    /// Bytes through the node's outgoing peer link (peer reads, own object split reads).
    #[serde(default)]
    pub link_bytes_sent: u64,
    /// What the node's background repair did.
    #[serde(default)]
    pub repair: RepairCounts,
    /// Pieces it dropped because another piece of their object was evicted
    /// (`--evict-together`).
    #[serde(default)]
    pub dying_pieces_dropped: u64,
    /// Pieces it wrote where a newer map put them after their server could not take them.
    #[serde(default)]
    pub handoffs: u64,
    /// Objects whose found pieces its reads wrote again with the lacking ones (`resync`).
    #[serde(default)]
    pub resyncs: u64,
    /// Objects whose pieces its hits wrote again (`reinsert`).
    #[serde(default)]
    pub reinserts: u64,
    /// Reads that asked how old their pieces were, not having heard it in their lookup.
    #[serde(default)]
    pub ages_asked: u64,
}

/// A node's read windows that asked for parity, by why (`/_ecdn/stats`'s
/// `cluster.parity_fetches`): the ones the demo reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParityFetches {
    #[serde(default)]
    pub delayed: u64,
    #[serde(default)]
    pub slow: u64,
}

/// A background repair's counters: a node's (`/_ecdn/stats`), the nodes' sum, or the
/// simulator's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepairCounts {
    pub objects: u64,
    pub pieces: u64,
    pub bytes_written: u64,
}

/// One window of the simulator's run (matched to the live windows by index).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimWindow {
    pub index: usize,
    pub start: u64,
    pub requests: u64,
    pub miss_ratio: f64,
    pub byte_miss_ratio: f64,
}

/// One window of the live run, with the simulator's values for the same requests.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WindowRow {
    pub index: usize,
    /// Index of the window's first request.
    pub start: u64,
    pub requests: u64,
    /// The paper's: requests that caused an origin fetch.
    pub miss_ratio: f64,
    pub byte_miss_ratio: f64,
    /// Requests that waited on another request's fill (not misses).
    pub collapsed_fraction: f64,
    pub failed: u64,
    pub sim_miss_ratio: Option<f64>,
    pub sim_byte_miss_ratio: Option<f64>,
    /// The simulator's miss ratio in this window when it loses the same nodes at the same
    /// requests (runs with kills only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sim_killed_miss_ratio: Option<f64>,
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

/// Folds `records` (in request order) into windows of `window` requests, each with the
/// simulator's window of the same index, if any (and that of the simulator with the same
/// kills, when given).
pub fn windows(
    records: &[Record],
    window: u64,
    sim: &[SimWindow],
    sim_killed: Option<&[SimWindow]>,
) -> Vec<WindowRow> {
    let window = window.max(1) as usize;
    records
        .chunks(window)
        .enumerate()
        .map(|(index, chunk)| {
            let t = Totals::of(chunk);
            let s = sim.iter().find(|w| w.index == index);
            WindowRow {
                index,
                start: (index * window) as u64,
                requests: chunk.len() as u64,
                miss_ratio: t.miss_ratio(),
                byte_miss_ratio: t.byte_miss_ratio(),
                collapsed_fraction: t.collapsed_fraction(),
                failed: t.failed,
                sim_miss_ratio: s.map(|w| w.miss_ratio),
                sim_byte_miss_ratio: s.map(|w| w.byte_miss_ratio),
                sim_killed_miss_ratio: sim_killed
                    .and_then(|k| k.iter().find(|w| w.index == index))
                    .map(|w| w.miss_ratio),
            }
        })
        .collect()
}

/// Sums over a run or a window.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Totals {
    pub requests: u64,
    pub ok: u64,
    pub failed: u64,
    pub misses: u64,
    /// Requests that waited on another request's fill (`MISS-COLLAPSED`), not in `misses`.
    pub collapsed: u64,
    pub object_bytes: u64,
    pub origin_bytes: u64,
    pub served_bytes: u64,
    pub wrong_bytes: u64,
    pub partial_hits: u64,
    pub coded_hits: u64,
    pub coded_hits_decoded: u64,
    pub decoded: u64,
    pub retried_before_response: u64,
    pub retried_mid_body: u64,
}

impl Totals {
    pub fn of(records: &[Record]) -> Totals {
        let mut t = Totals::default();
        for r in records {
            t.requests += 1;
            t.wrong_bytes += r.wrong_bytes;
            t.served_bytes += r.bytes;
            match r.retry {
                Some(Retry::BeforeResponse) => t.retried_before_response += 1,
                Some(Retry::MidBody) => t.retried_mid_body += 1,
                None => {}
            }
            if !r.ok {
                t.failed += 1;
                continue;
            }
            t.ok += 1;
            t.object_bytes += r.size;
            t.origin_bytes += r.origin_bytes;
            t.misses += u64::from(r.miss);
            t.collapsed += u64::from(r.collapsed);
            t.partial_hits += u64::from(r.partial);
            t.decoded += u64::from(r.decoded);
            if r.hit && r.coded == Some(true) {
                t.coded_hits += 1;
                t.coded_hits_decoded += u64::from(r.decoded);
            }
        }
        t
    }

    /// The paper's miss ratio: requests that caused an origin fetch.
    pub fn miss_ratio(&self) -> f64 {
        ratio(self.misses as f64, self.ok as f64)
    }

    /// Requests that waited on another request's fill.
    pub fn collapsed_fraction(&self) -> f64 {
        ratio(self.collapsed as f64, self.ok as f64)
    }

    pub fn byte_miss_ratio(&self) -> f64 {
        ratio(self.origin_bytes as f64, self.object_bytes as f64)
    }

    /// Decoded coded hits / coded hits; `None` without coded hits.
    pub fn decode_fraction(&self) -> Option<f64> {
        (self.coded_hits > 0).then(|| self.coded_hits_decoded as f64 / self.coded_hits as f64)
    }
}

/// The window index of request `at`.
pub fn window_of(at: u64, window: u64) -> usize {
    (at / window.max(1)) as usize
}

/// Windows after a kill over which its miss-ratio increase is measured.
pub const SPIKE_WINDOWS: usize = 3;

/// The largest relative miss-ratio increase (live against the simulator without failures)
/// over the [`SPIKE_WINDOWS`] windows from the one holding each kill's first request; `None`
/// without kills, or when none of those windows has a simulator miss ratio above 0. With
/// `of_sim`, the same for the simulator that loses the same nodes instead of the live run:
/// what the lost capacity alone costs.
pub fn max_relative_miss_increase(
    rows: &[WindowRow],
    kills: &[Kill],
    window: u64,
    of_sim: bool,
) -> Option<f64> {
    let mut max: Option<f64> = None;
    for k in kills {
        let first = window_of(k.at, window);
        for row in rows
            .iter()
            .filter(|r| r.index >= first && r.index < first + SPIKE_WINDOWS)
        {
            let measured = if of_sim {
                row.sim_killed_miss_ratio
            } else {
                Some(row.miss_ratio)
            };
            if let (Some(sim), Some(m)) = (row.sim_miss_ratio.filter(|&s| s > 0.0), measured) {
                let rel = (m - sim) / sim;
                max = Some(max.map_or(rel, |m: f64| m.max(rel)));
            }
        }
    }
    max
}

/// [`max_relative_miss_increase`] of the simulator losing the nodes (`killed`, its windows)
/// against the simulator without failures (`no_failure`), for a scheme that did not run live.
pub fn sim_relative_miss_increase(
    no_failure: &[SimWindow],
    killed: &[SimWindow],
    kills: &[Kill],
    window: u64,
) -> Option<f64> {
    let rows: Vec<WindowRow> = no_failure
        .iter()
        .map(|w| WindowRow {
            index: w.index,
            start: w.start,
            requests: w.requests,
            miss_ratio: w.miss_ratio,
            byte_miss_ratio: w.byte_miss_ratio,
            collapsed_fraction: 0.0,
            failed: 0,
            sim_miss_ratio: Some(w.miss_ratio),
            sim_byte_miss_ratio: Some(w.byte_miss_ratio),
            sim_killed_miss_ratio: killed
                .iter()
                .find(|k| k.index == w.index)
                .map(|k| k.miss_ratio),
        })
        .collect();
    max_relative_miss_increase(&rows, kills, window, true)
}

/// One row of the comparison of schemes: the live run, or the simulator's run of a scheme on
/// the same trace, capacity (nodes × disk size) and kills and returns (without failures when
/// the run has no kill).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CompareRow {
    pub scheme: String,
    /// `live` (the cluster) or `sim` (the simulator).
    pub run: &'static str,
    pub miss_ratio: f64,
    pub byte_miss_ratio: f64,
    /// max/min bytes written over the nodes alive for the whole run.
    pub write_imbalance: Option<f64>,
    /// Live: [`super::report::Report::max_relative_miss_increase`]; simulated: the simulator losing the same
    /// nodes against itself without failures (null without kills).
    pub max_relative_miss_increase: Option<f64>,
}

/// The comparison table: a line per [`CompareRow`].
pub fn compare_table(rows: &[CompareRow], heading: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{heading}");
    let _ = writeln!(
        s,
        "{:<14} {:>4} {:>9} {:>10} {:>10} {:>18}",
        "scheme", "run", "miss", "byte_miss", "write_imb", "max_rel_miss_incr"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:<14} {:>4} {:>9.4} {:>10.4} {:>10} {:>18}",
            r.scheme,
            r.run,
            r.miss_ratio,
            r.byte_miss_ratio,
            opt(r.write_imbalance, 3),
            opt(r.max_relative_miss_increase, 4)
        );
    }
    s
}

/// max/min of `values`; `None` when there are none or the smallest is 0.
pub fn imbalance(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for v in values {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    (lo.is_finite() && lo > 0.0).then(|| hi / lo)
}

/// The `q`-quantile (0 < q ≤ 1) of ascending `sorted` by nearest rank; `None` if empty.
pub fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    Some(sorted[i])
}

/// p50, p90 and p99 of a sample, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Percentiles {
    pub samples: usize,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
}

impl Percentiles {
    /// Of `ms` (any order).
    pub fn of(mut ms: Vec<f64>) -> Percentiles {
        ms.sort_by(f64::total_cmp);
        Percentiles {
            samples: ms.len(),
            p50: percentile(&ms, 0.5),
            p90: percentile(&ms, 0.9),
            p99: percentile(&ms, 0.99),
        }
    }
}

/// Latency percentiles of hits by object kind.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ByKind {
    pub coded: Percentiles,
    pub replicated: Percentiles,
}

/// Time to first byte and download, ms.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Latency {
    pub ttfb: Percentiles,
    pub download: Percentiles,
}

/// TTFB and download percentiles of the successful collapsed requests.
pub fn collapsed_latency(records: &[Record]) -> Latency {
    let ms = |f: fn(&Record) -> u64| {
        Percentiles::of(
            records
                .iter()
                .filter(|r| r.ok && r.collapsed)
                .map(|r| f(r) as f64 / 1000.0)
                .collect(),
        )
    };
    Latency {
        ttfb: ms(|r| r.ttfb_us),
        download: ms(|r| r.total_us),
    }
}

/// `records` as CSV (`--records`), one line per request in trace order.
pub fn records_csv(records: &[Record]) -> String {
    let mut out = String::from("index,node,ok,hit,hoc,coded,miss,ttfb_ms,total_ms\n");
    let flag = |b: bool| u8::from(b);
    for (i, r) in records.iter().enumerate() {
        let coded = r.coded.map_or(String::new(), |c| flag(c).to_string());
        let _ = writeln!(
            out,
            "{i},{},{},{},{},{coded},{},{:.3},{:.3}",
            r.node,
            flag(r.ok),
            flag(r.hit),
            flag(r.hoc),
            flag(r.miss),
            r.ttfb_us as f64 / 1e3,
            r.total_us as f64 / 1e3
        );
    }
    out
}

/// Latencies (µs) of the successful hits of coded and of replicated objects: (TTFB, download);
/// with `pieces_only`, only the hits served from pieces (not from the serving node's DRAM).
pub fn hit_latencies(records: &[Record], pieces_only: bool) -> [(Vec<u64>, Vec<u64>); 2] {
    let mut out: [(Vec<u64>, Vec<u64>); 2] = Default::default();
    for r in records
        .iter()
        .filter(|r| r.ok && r.hit && !(pieces_only && r.hoc))
    {
        if let Some(coded) = r.coded {
            let slot = &mut out[usize::from(!coded)];
            slot.0.push(r.ttfb_us);
            slot.1.push(r.total_us);
        }
    }
    out
}

/// TTFB and download percentiles of hits, coded and replicated (with `pieces_only`, of the
/// hits served from pieces only).
pub fn latency(records: &[Record], pieces_only: bool) -> (ByKind, ByKind) {
    let [coded, replicated] = hit_latencies(records, pieces_only);
    let ms = |v: &[u64]| Percentiles::of(v.iter().map(|&us| us as f64 / 1000.0).collect());
    (
        ByKind {
            coded: ms(&coded.0),
            replicated: ms(&replicated.0),
        },
        ByKind {
            coded: ms(&coded.1),
            replicated: ms(&replicated.1),
        },
    )
}

/// The download time (µs) of an answer through a modeled client access link of `bits_per_s`
/// (the clients of C2DN's Fig. 8 reach the cluster over a WAN): a FIFO link fed by the body's
/// frames as they arrived at the driver, each frame leaving it `bytes × 8 / rate` after the
/// later of its arrival and the previous frame's departure. No propagation delay is added, so
/// the time to the first byte is unchanged.
pub fn through_link(arrivals: &[(u32, u32)], bits_per_s: f64) -> u64 {
    let us_per_byte = 8.0e6 / bits_per_s;
    let mut out = 0.0f64;
    for &(at, bytes) in arrivals {
        out = out.max(at as f64) + bytes as f64 * us_per_byte;
    }
    out.round() as u64
}

/// Download percentiles of hits through one modeled client link (`--client-link`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClientLink {
    pub bits_per_s: f64,
    pub download_ms: ByKind,
    pub download_ms_piece_hits: ByKind,
}

/// [`ClientLink`] for each rate, from the frames' arrivals the records kept.
pub fn client_links(records: &[Record], rates: &[f64]) -> Vec<ClientLink> {
    let by_kind = |rate: f64, pieces_only: bool| {
        let mut v: [Vec<f64>; 2] = Default::default();
        for r in records
            .iter()
            .filter(|r| r.ok && r.hit && !(pieces_only && r.hoc))
        {
            if let Some(coded) = r.coded {
                v[usize::from(!coded)].push(through_link(&r.arrivals, rate) as f64 / 1000.0);
            }
        }
        let [coded, replicated] = v;
        ByKind {
            coded: Percentiles::of(coded),
            replicated: Percentiles::of(replicated),
        }
    };
    rates
        .iter()
        .map(|&rate| ClientLink {
            bits_per_s: rate,
            download_ms: by_kind(rate, false),
            download_ms_piece_hits: by_kind(rate, true),
        })
        .collect()
}

/// A kill as the report shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KillRow {
    pub node: usize,
    pub fraction: f64,
    /// Index of the first request issued after the kill.
    pub at_request: u64,
    pub window: usize,
    /// The node's CPU seconds when it was killed.
    pub cpu_s: Option<f64>,
}

/// The simulator's run on the same trace and configuration, without failures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimSummary {
    pub miss_ratio: f64,
    pub byte_miss_ratio: f64,
    pub write_imbalance: Option<f64>,
    pub bytes_written: Vec<u64>,
    pub windows: Vec<SimWindow>,
    /// What the background repair did (zeros when it is off).
    pub repair: RepairCounts,
    /// Objects whose found pieces a read wrote again (`resync`; 0 when it is off).
    pub resyncs: u64,
    /// Objects whose pieces a hit wrote again (`reinsert`; 0 when it is off).
    pub reinserts: u64,
}

pub fn opt(v: Option<f64>, digits: usize) -> String {
    match v {
        Some(v) => format!("{v:.digits$}"),
        None => "-".into(),
    }
}
