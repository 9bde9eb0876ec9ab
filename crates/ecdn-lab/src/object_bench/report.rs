//! What `ecdn object bench` reports: the latency percentiles, the report (`--json`'s last line)
//! and its lines for people.

use anyhow::Result;
use ecdn_trace::units::format_size;
use serde::Serialize;

use crate::cluster_demo::bed::BedReport;

/// Latency percentiles of the successful reads, milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Latency {
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub max: f64,
}

impl Latency {
    pub(super) fn of(mut ms: Vec<f64>) -> Latency {
        if ms.is_empty() {
            return Latency::default();
        }
        ms.sort_by(f64::total_cmp);
        // Nearest rank.
        let q = |p: f64| ms[((p * ms.len() as f64).ceil() as usize).clamp(1, ms.len()) - 1];
        Latency {
            mean: ms.iter().sum::<f64>() / ms.len() as f64,
            p50: q(0.5),
            p99: q(0.99),
            p99_9: q(0.999),
            max: ms[ms.len() - 1],
        }
    }
}

/// The report (`--json`).
#[derive(Debug, Serialize)]
pub struct Report {
    pub mode: &'static str,
    /// `client` (the readers read the splits themselves) or `via-node`.
    pub path: &'static str,
    pub scheme: &'static str,
    pub k: usize,
    pub r: usize,
    /// A number, or `"auto"`.
    pub delta: serde_json::Value,
    pub nodes: usize,
    pub objects: usize,
    pub size: u64,
    pub zipf: f64,
    pub budget: f64,
    /// Bytes cached beyond one copy of every object.
    pub overhead_bytes: u64,
    pub requests: u64,
    pub failed_requests: u64,
    pub imbalance_percent: f64,
    pub latency_ms: Latency,
    /// Per live node: bytes its link sent during the reads.
    pub loads: Vec<u64>,
    pub useful_bytes: u64,
    pub peer_rate_bits: f64,
    pub load: f64,
    pub background_load: f64,
    pub background_nodes: usize,
    pub killed: Option<usize>,
    /// `--slow`: the node and its extra delay each way, ms.
    pub slowed: Option<(usize, f64)>,
    /// Client reads that could not be done from the splits and went through a node.
    pub via_node_reads: usize,
    /// Client reads: per node, the split reads asked of it, the windows decoded with its
    /// splits, and its split reads that failed (late binding leaves a slow node's splits).
    pub split_servers: Vec<SplitServer>,
    /// The machine's CPU during the reads: seconds with under 5% idle, and the idle share.
    pub read_machine: Option<ecdn_testbed::machine::MachineReport>,
    /// Seconds the writes and the reads took.
    pub write_s: f64,
    pub read_s: f64,
    /// `--simulate`: Var(L_EC) / Var(L_SR) over equally popular objects, and the prediction
    /// (S − k) / (k (S − 1)).
    pub variance_ratio: Option<f64>,
    pub variance_predicted: Option<f64>,
    /// `--measured-budget`: the warm-up reads, the objects the coordinator re-coded before the
    /// measured reads, and during them (their re-coding traffic counts in `loads`).
    /// `overhead_bytes` is then what the records show after the reads.
    pub warmup_reads: Option<u64>,
    pub budget_changes: u64,
    pub budget_changes_during_reads: u64,
    /// `--testbed`: the bed's id, links and hosts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub testbed: Option<BedReport>,
}

/// One node's part in the client reads (`Report::split_servers`).
#[derive(Debug, Serialize)]
pub struct SplitServer {
    pub node: usize,
    #[serde(flatten)]
    pub used: ecdn_client::ServerUse,
    /// The client found it slow at the end (its reads then ask one more split).
    pub slow: bool,
}

pub(super) fn print_report(r: &Report, json: bool) -> Result<()> {
    let l = &r.latency_ms;
    outln!(
        "{} ({}, reads {}): k {} r {} Δ {}, {} nodes, {} objects of {}, Zipf {}, budget {:.0}%",
        r.scheme,
        r.mode,
        r.path,
        r.k,
        r.r,
        r.delta,
        r.nodes,
        r.objects,
        format_size(r.size),
        r.zipf,
        r.budget * 100.0
    )?;
    outln!(
        "  λ {:.1}% over {} reads ({} failed, {} through a node instead)",
        r.imbalance_percent,
        r.requests,
        r.failed_requests,
        r.via_node_reads
    )?;
    if r.mode == "live" {
        outln!(
            "  latency ms: mean {:.1}, p50 {:.1}, p99 {:.1}, p99.9 {:.1} (writes {:.1} s, reads {:.1} s)",
            l.mean, l.p50, l.p99, l.p99_9, r.write_s, r.read_s
        )?;
    }
    if let Some(m) = r.read_machine {
        outln!(
            "  machine during the reads: {:.0}% idle, {} of {} s with under 5% idle",
            m.idle * 100.0,
            m.starved_seconds,
            m.seconds
        )?;
    }
    if let (Some(v), Some(p)) = (r.variance_ratio, r.variance_predicted) {
        outln!("  Var(L_EC)/Var(L_SR) {v:.4}, predicted (S−k)/(k(S−1)) {p:.4}")?;
    }
    if let Some(why) = r.testbed.as_ref().and_then(|b| b.invalid_because()) {
        outln!("  {why}")?;
    }
    if json {
        outln!("{}", serde_json::to_string(r)?)?;
    }
    Ok(())
}
