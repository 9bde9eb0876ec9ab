//! A demo run's [`Plan`]: its arguments checked and parsed, and its trace loaded, before any
//! process starts.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use ecdn_placement::pieces::Scheme;
use ecdn_sim::cluster_sweep::SchemeCode;
use ecdn_trace::gen::{GenConfig, Generator, Scenario, SizeDist};
use ecdn_trace::units::parse_size;
use ecdn_trace::{Format, OpenOptions, Request, BATCH};

use super::args::DemoArgs;
use super::schedule::{Kill, KillSpec, Restart, RestartSpec};
use super::{bed, control, schedule};

/// The requests to replay, in order.
pub(super) fn load_trace(a: &DemoArgs) -> Result<Vec<Request>> {
    if let Some(path) = &a.trace {
        let opts = OpenOptions {
            format: Format::from_path(path),
        };
        let mut r = ecdn_trace::open(path, &opts)
            .with_context(|| format!("opening the trace {}", path.display()))?;
        let limit = a.max_requests.unwrap_or(u64::MAX);
        let mut out = Vec::new();
        let mut buf = Vec::with_capacity(BATCH);
        while (out.len() as u64) < limit {
            let want = (limit - out.len() as u64).min(BATCH as u64) as usize;
            if r.read_batch(&mut buf, want)
                .with_context(|| format!("reading the trace {}", path.display()))?
                == 0
            {
                break;
            }
            out.extend_from_slice(&buf);
        }
        if let Some(bad) = out.iter().position(|r| r.size == 0) {
            bail!(
                "the trace's request {bad} has size 0; the demo replays objects of at least one byte"
            );
        }
        return Ok(out);
    }
    let sizes = SizeDist::parse(&a.sizes).map_err(anyhow::Error::msg)?;
    Ok(Generator::new(GenConfig {
        requests: a.requests,
        objects: a.objects,
        alpha: a.alpha,
        sizes,
        rate: 1000.0,
        seed: a.seed,
        scenario: Scenario::Stationary,
    })?
    .collect())
}

/// The kill of a run whose flags name no kill, restart or `--no-kill`: node 2 at 0.5, as the
/// live runs of C2DN's regime in BENCHMARKS.md ("The paper's regime, live").
pub const DEFAULT_KILL: KillSpec = KillSpec {
    node: 2,
    fraction: 0.5,
};

/// Whether a run gets [`DEFAULT_KILL`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum DefaultKill {
    /// The flags name kills or restarts, or `--no-kill`.
    NotAsked,
    Kill(KillSpec),
    /// The cluster cannot lose the node: it does not exist, or the nodes left are fewer than
    /// the scheme needs (`needed`).
    CannotLose,
}

pub(super) fn default_kill(a: &DemoArgs, needed: usize) -> DefaultKill {
    if a.no_kill || !a.kill.is_empty() || !a.restart.is_empty() || !a.restart_empty.is_empty() {
        DefaultKill::NotAsked
    } else if DEFAULT_KILL.node < a.nodes && a.nodes > needed {
        DefaultKill::Kill(DEFAULT_KILL)
    } else {
        DefaultKill::CannotLose
    }
}

/// Everything checked and parsed before any process starts.
pub(super) struct Plan {
    pub(super) code: SchemeCode,
    /// What became of the default kill, when the flags asked for none, for stderr.
    pub(super) kill_note: Option<String>,
    pub(super) trace: Vec<Request>,
    pub(super) window: u64,
    pub(super) kills: Vec<Kill>,
    pub(super) restarts: Vec<Restart>,
    pub(super) hoc_size: u64,
    pub(super) disk_size: u64,
    pub(super) threshold: u64,
    pub(super) sub_chunk: u64,
    /// `--slice-size` (0: no slices).
    pub(super) slice_size: u64,
    /// `--repair-rate`: bytes per request of trace time per node (0: off).
    pub(super) repair_rate: u64,
    pub(super) ready_timeout: Duration,
    pub(super) request_timeout: Duration,
    pub(super) idle_timeout: Duration,
    /// `--client-link`, bits per second.
    pub(super) client_links: Vec<f64>,
    pub(super) control: control::ControlPlan,
    /// `--testbed`'s network faults, in the order they happen.
    pub(super) faults: Vec<bed::Fault>,
    /// Set after the run: the stays out of the map the coordinator declared for nodes the
    /// demo did not kill (a fault, a slow node), for the simulator to lose them as well.
    pub(super) outages: Vec<Outage>,
}

/// A node out of the map from request `start` to request `end` (to the end without one).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Outage {
    pub(super) node: usize,
    pub(super) start: u64,
    pub(super) end: Option<u64>,
}

impl Plan {
    /// Takes the coordinator's declarations of the run: those of nodes it did not kill.
    pub(super) fn adopt_declared(&mut self, outs: &[super::declared::OutRow]) {
        self.outages = outs
            .iter()
            .filter(|o| !self.kills.iter().any(|k| k.node == o.node))
            .map(|o| Outage {
                node: o.node,
                start: o.out_at_request,
                end: o.back_at_request,
            })
            .collect();
    }

    /// The run's kills and the first declared exit of each node out, as the failures after
    /// which the report looks for a miss spike, by request.
    pub(super) fn failures(&self) -> Vec<Kill> {
        let total = self.trace.len().max(1) as f64;
        let mut all = self.kills.clone();
        for o in &self.outages {
            if !all.iter().any(|k| k.node == o.node) {
                all.push(Kill {
                    node: o.node,
                    fraction: o.start as f64 / total,
                    at: o.start,
                });
            }
        }
        all.sort_by_key(|k| (k.at, k.node));
        all
    }
}

pub(super) fn plan(a: &DemoArgs) -> Result<Plan> {
    if a.nodes == 0 || a.nodes > 256 {
        bail!("--nodes must be between 1 and 256");
    }
    if a.concurrency == 0 {
        bail!("--concurrency must be positive");
    }
    if let Some(path) = &a.plot {
        crate::plot::check_output(path)?;
    }
    crate::args::duration("--origin-latency", &a.origin_latency)?;
    let code = SchemeCode::parse(&a.scheme, a.k, a.p).map_err(anyhow::Error::msg)?;
    let needed = code.scheme.servers_needed(code.k, code.p);
    if needed > a.nodes {
        bail!(
            "--scheme {} with K = {}, P = {} needs {needed} nodes; --nodes is {}",
            a.scheme,
            code.k,
            code.p,
            a.nodes
        );
    }
    let size = |flag: &str, v: &str| -> Result<u64> {
        let s = parse_size(v).map_err(|e| anyhow::anyhow!("{flag}: {e}"))?;
        if s == 0 {
            bail!("{flag} must be above 0");
        }
        Ok(s)
    };
    let hoc_size = size("--hoc-size", &a.hoc_size)?;
    let disk_size = size("--disk-size", &a.disk_size)?;
    let threshold = size("--threshold", &a.threshold)?;
    let sub_chunk = size("--sub-chunk", &a.sub_chunk)?;
    let slice_size = parse_size(&a.slice_size).map_err(|e| anyhow::anyhow!("--slice-size: {e}"))?;
    ecdn_placement::slices::Slicing::new(slice_size)
        .map_err(|e| anyhow::anyhow!("--slice-size: {e}"))?;
    let mut specs = a
        .kill
        .iter()
        .map(|s| KillSpec::parse(s))
        .collect::<Result<Vec<_>, _>>()
        .map_err(anyhow::Error::msg)?;
    let default_kill = default_kill(a, needed);
    let kill_note = match default_kill {
        DefaultKill::NotAsked => None,
        DefaultKill::Kill(spec) => {
            specs.push(spec);
            Some(format!(
                "no --kill given: node {} is killed at {} (the default; --no-kill turns it off)",
                spec.node, spec.fraction
            ))
        }
        DefaultKill::CannotLose => Some(format!(
            "no --kill given, and no default kill: {} nodes without node {} cannot run {} \
             (it needs {needed})",
            a.nodes, DEFAULT_KILL.node, a.scheme
        )),
    };
    let trace = load_trace(a)?;
    let total = trace.len() as u64;
    if total == 0 {
        bail!("no requests to replay");
    }
    let window = match a.window {
        Some(0) => bail!("--window must be at least 1 request"),
        Some(w) => w,
        None => (total / 10).max(1),
    };
    let kills = schedule::kills(&specs, a.nodes, total).map_err(anyhow::Error::msg)?;
    let restart_specs = a
        .restart
        .iter()
        .map(|s| RestartSpec::parse(s, false))
        .chain(a.restart_empty.iter().map(|s| RestartSpec::parse(s, true)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(anyhow::Error::msg)?;
    let restarts = schedule::restarts(&restart_specs, &kills, total).map_err(anyhow::Error::msg)?;
    if a.rebalance_every > 0 && code.scheme != Scheme::C2dn {
        bail!("--rebalance-every: only c2dn rebalances parity");
    }
    let repair_rate =
        parse_size(&a.repair_rate).map_err(|e| anyhow::anyhow!("--repair-rate: {e}"))?;
    if repair_rate > 0 && code.scheme != Scheme::C2dn {
        bail!("--repair-rate: only c2dn repairs");
    }
    if repair_rate > 0 && a.repair_every == 0 {
        bail!("--repair-every: need at least 1 request between rounds");
    }
    let control = control::ControlPlan::parse(&a.control, total)?;
    let faults = bed::faults(&a.testbed, a.nodes, total)?;
    if a.testbed.testbed.is_some() && control.etcd() {
        bail!("--testbed runs the embedded coordinator; --control etcd on a test bed is not built yet");
    }
    let leaving = faults.iter().filter(|f| f.kind.leaves_rotation()).count();
    if leaving > 0 && kills.len() + leaving >= a.nodes {
        bail!("--kill and --partition-clients together would leave the client no node");
    }
    Ok(Plan {
        code,
        kill_note,
        trace,
        window,
        kills,
        restarts,
        hoc_size,
        disk_size,
        threshold,
        sub_chunk,
        slice_size,
        repair_rate,
        ready_timeout: crate::args::duration("--ready-timeout", &a.ready_timeout)?,
        request_timeout: crate::args::duration("--request-timeout", &a.request_timeout)?,
        idle_timeout: crate::args::duration("--idle-timeout", &a.idle_timeout)?,
        client_links: match &a.client_link {
            Some(l) => l
                .split(',')
                .map(|r| crate::args::bit_rate("--client-link", r))
                .collect::<Result<_>>()?,
            None => Vec::new(),
        },
        control,
        faults,
        outages: Vec::new(),
    })
}
