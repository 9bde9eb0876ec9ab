//! `ecdn testbed`: the test bed of real hosts (crate `ecdn-testbed`) from the command line.
//!
//! * `up` builds a bed and holds it until Ctrl-C, reading fault verbs on standard input;
//! * `measure` builds a bed, measures every link's rate and round-trip time against its spec
//!   with our own probes, and tears it down;
//! * `down` removes what a killed run left behind;
//! * `guard` is the watcher each bed starts, which tears the bed down when its owner dies.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use ecdn_testbed::{probe, Bed, BedConfig, HostSpec, LinkSpec};
use serde::Serialize;

/// `ecdn testbed ...`
#[derive(Subcommand)]
pub enum TestbedCmd {
    /// Build a bed and hold it until Ctrl-C. Prints the hosts (JSON), then reads fault verbs,
    /// one per line, on standard input: `cut HOST`, `partition A,B C,D`, `slow HOST DELAY`,
    /// `shape HOST SPEC`, `restore [HOST]`, `rate FROM TO`, `rtt FROM TO`, `quit`.
    Up(UpArgs),
    /// Build a bed, measure each host's link (rate both ways and RTT, to and from the first
    /// host) against its spec, and tear the bed down.
    Measure(MeasureArgs),
    /// Remove the beds whose owner is gone (namespaces, veths, bridges, rules, state files).
    Down {
        /// Remove every bed, the running ones too.
        #[arg(long)]
        all: bool,
    },
    /// The watcher of bed ID: tears it down when its standard input closes.
    #[command(hide = true)]
    Guard {
        /// The bed's id.
        id: String,
    },
}

/// Which hosts a bed has.
#[derive(Args, Clone)]
pub struct BedArgs {
    /// Hosts named n0, n1, ... with the link of `--link`.
    #[arg(long, default_value_t = 2)]
    pub hosts: usize,
    /// Their link: `RATE[,delay=D][,jitter=J][,loss=P%]`, e.g. `1gbit` or
    /// `100mbit,delay=20ms`. Each value holds in both directions.
    #[arg(long, default_value = "1gbit")]
    pub link: String,
    /// More hosts with their own links, `NAME=SPEC` (e.g. `client=100mbit,delay=10ms`).
    #[arg(long = "host")]
    pub extra: Vec<String>,
}

impl BedArgs {
    /// The host list these arguments describe.
    pub fn hosts(&self) -> Result<Vec<HostSpec>> {
        let link = LinkSpec::parse(&self.link).map_err(anyhow::Error::msg)?;
        let mut hosts = Vec::new();
        for i in 0..self.hosts {
            hosts.push(HostSpec::new(&format!("n{i}"), link).map_err(anyhow::Error::msg)?);
        }
        for h in &self.extra {
            hosts.push(HostSpec::parse(h).map_err(anyhow::Error::msg)?);
        }
        if hosts.is_empty() {
            bail!("a bed needs at least one host");
        }
        Ok(hosts)
    }

    /// Builds the bed, with this executable as its watcher.
    pub fn create(&self) -> Result<Bed> {
        let exe = std::env::current_exe().context("this executable's path")?;
        Bed::create(&BedConfig {
            hosts: self.hosts()?,
            guard: Some(exe),
        })
        .context("building the test bed")
    }
}

/// `ecdn testbed up`.
#[derive(Args)]
pub struct UpArgs {
    #[command(flatten)]
    bed: BedArgs,
}

/// `ecdn testbed measure`.
#[derive(Args)]
pub struct MeasureArgs {
    #[command(flatten)]
    bed: BedArgs,
    /// Seconds each rate probe sends for.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Round trips per RTT probe.
    #[arg(long, default_value_t = 200)]
    rounds: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs an `ecdn testbed` command.
pub fn run(cmd: TestbedCmd) -> Result<()> {
    match cmd {
        TestbedCmd::Up(a) => up(a),
        TestbedCmd::Measure(a) => measure(a),
        TestbedCmd::Down { all } => {
            let swept = ecdn_testbed::bed::down(all)?;
            for s in &swept {
                let owner = s.owner.map_or("none".to_string(), |p| p.to_string());
                let what = if s.removed {
                    "removed"
                } else {
                    "kept (its owner runs; --all removes it)"
                };
                outln!("bed {} (owner {owner}): {what}", s.id)?;
            }
            if swept.is_empty() {
                outln!("no test bed on this machine")?;
            }
            Ok(())
        }
        TestbedCmd::Guard { id } => Ok(ecdn_testbed::bed::guard(&id)?),
    }
}

#[derive(Serialize)]
struct BedJson<'a> {
    id: &'a str,
    hosts: Vec<HostJson<'a>>,
}

#[derive(Serialize)]
struct HostJson<'a> {
    name: &'a str,
    netns: &'a str,
    addr: String,
    link: String,
}

fn bed_json(bed: &Bed) -> BedJson<'_> {
    BedJson {
        id: bed.id(),
        hosts: bed
            .hosts()
            .iter()
            .map(|h| HostJson {
                name: &h.name,
                netns: &h.netns,
                addr: h.addr.to_string(),
                link: h.now.to_string(),
            })
            .collect(),
    }
}

fn up(args: UpArgs) -> Result<()> {
    // Ctrl-C and SIGTERM end the bed; so does `quit`. End of input does not (`up &` holds).
    // The handlers are in place before the bed exists: a signal during its creation or right
    // after the line that announces it still tears it down.
    let signal_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the signal runtime")?;
    let stop = {
        let _in = signal_rt.enter();
        ecdn_lab::signals::shutdown_signal()
    };
    let mut bed = args.bed.create()?;
    outln!("{}", serde_json::to_string(&bed_json(&bed))?)?;
    let (tx, rx) = std::sync::mpsc::channel::<Option<String>>();
    let signals = tx.clone();
    std::thread::spawn(move || {
        signal_rt.block_on(stop);
        let _ = signals.send(None);
    });
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { break };
            if tx.send(Some(line)).is_err() {
                break;
            }
        }
    });
    while let Ok(Some(line)) = rx.recv() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.first() == Some(&"quit") {
            break;
        }
        match verb(&mut bed, &words) {
            Ok(Some(said)) => outln!("{said}")?,
            Ok(None) => {}
            Err(e) => outln!("error: {e:#}")?,
        }
    }
    bed.teardown()?;
    Ok(())
}

/// One fault verb on a running bed; what it has to say, if anything.
fn verb(bed: &mut Bed, words: &[&str]) -> Result<Option<String>> {
    let list = |s: &str| -> Vec<String> { s.split(',').map(str::to_string).collect() };
    match words {
        [] => Ok(None),
        ["cut", host] => Ok(bed.cut(host).map(|_| None)?),
        ["partition", a, b] => {
            let (a, b) = (list(a), list(b));
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            let b: Vec<&str> = b.iter().map(String::as_str).collect();
            Ok(bed.partition(&a, &b).map(|_| None)?)
        }
        ["slow", host, delay] => {
            let d = ecdn_testbed::spec::parse_duration(delay).map_err(anyhow::Error::msg)?;
            Ok(bed.slow(host, d).map(|_| None)?)
        }
        ["shape", host, spec] => {
            let spec = LinkSpec::parse(spec).map_err(anyhow::Error::msg)?;
            Ok(bed.shape(host, spec).map(|_| None)?)
        }
        ["restore"] => Ok(bed.restore_all().map(|_| None)?),
        ["restore", host] => Ok(bed.restore(host).map(|_| None)?),
        ["rate", from, to] => {
            let r = probe::rate(bed, from, to, Duration::from_secs(1))?;
            Ok(Some(format!("{from} -> {to}: {:.1} Mbit/s", r.bps / 1e6)))
        }
        ["rtt", from, to] => {
            let mut t = probe::rtt(bed, from, to, 50)?;
            let p50 = probe::quantile(&mut t, 0.5);
            Ok(Some(format!("{from} <-> {to}: rtt p50 {:.3} ms", ms(p50))))
        }
        _ => bail!(
            "unknown verb {:?}: cut HOST | partition A,B C,D | slow HOST DELAY | shape HOST \
             SPEC | restore [HOST] | rate FROM TO | rtt FROM TO | quit",
            words.join(" ")
        ),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One link's measurement against its spec.
#[derive(Serialize)]
struct LinkRow {
    from: String,
    to: String,
    /// What the specs allow between the two: the lower of their rates (None: unlimited).
    spec_bps: Option<u64>,
    bps: f64,
    /// Goodput over the spec's rate.
    ratio: Option<f64>,
    /// The specs' round trip: twice both hosts' one-way delays.
    spec_rtt_ms: f64,
    rtt_p50_ms: f64,
    rtt_p99_ms: f64,
}

fn measure(args: MeasureArgs) -> Result<()> {
    let bed = args.bed.create()?;
    let hosts: Vec<(String, LinkSpec)> = bed
        .hosts()
        .iter()
        .map(|h| (h.name.clone(), h.link))
        .collect();
    if hosts.len() < 2 {
        bail!("measuring needs two hosts");
    }
    let dur = Duration::from_secs_f64(args.seconds);
    let mut rows = Vec::new();
    let (first, first_link) = &hosts[0];
    for (name, link) in &hosts[1..] {
        let spec_bps = match (first_link.rate_bps, link.rate_bps) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let spec_rtt = 2.0 * ms(first_link.delay + link.delay);
        let mut rtts = probe::rtt(&bed, first, name, args.rounds)?;
        let (p50, p99) = (
            ms(probe::quantile(&mut rtts, 0.5)),
            ms(probe::quantile(&mut rtts, 0.99)),
        );
        for (from, to) in [(first, name), (name, first)] {
            let r = probe::rate(&bed, from, to, dur)?;
            rows.push(LinkRow {
                from: from.clone(),
                to: to.clone(),
                spec_bps,
                bps: r.bps,
                ratio: spec_bps.map(|s| r.bps / s as f64),
                spec_rtt_ms: spec_rtt,
                rtt_p50_ms: p50,
                rtt_p99_ms: p99,
            });
        }
    }
    if args.json {
        #[derive(Serialize)]
        struct Out<'a> {
            bed: BedJson<'a>,
            seconds: f64,
            links: &'a [LinkRow],
        }
        outln!(
            "{}",
            serde_json::to_string_pretty(&Out {
                bed: bed_json(&bed),
                seconds: args.seconds,
                links: &rows,
            })?
        )?;
    } else {
        outln!(
            "{:<8} {:<8} {:>12} {:>14} {:>7} {:>12} {:>10} {:>10}",
            "from",
            "to",
            "spec",
            "goodput",
            "ratio",
            "spec rtt",
            "rtt p50",
            "rtt p99"
        )?;
        for r in &rows {
            outln!(
                "{:<8} {:<8} {:>12} {:>9.1} Mbit {:>7} {:>9.3} ms {:>7.3} ms {:>7.3} ms",
                r.from,
                r.to,
                r.spec_bps
                    .map_or("unlimited".into(), ecdn_testbed::spec::rate_text),
                r.bps / 1e6,
                r.ratio.map_or("-".into(), |x| format!("{x:.3}")),
                r.spec_rtt_ms,
                r.rtt_p50_ms,
                r.rtt_p99_ms
            )?;
        }
    }
    Ok(())
}
