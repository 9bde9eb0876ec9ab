//! Flags and helpers shared by several subcommands: the trace a simulation reads
//! ([`TraceArgs`]), worker threads ([`ThreadsArg`]), the report's form and progress bar
//! ([`ReportArgs`], [`progress_bar`]) and durations given on the command line or in a config
//! file ([`duration`]), link rates ([`bit_rate`]) and counts ([`parse_count`]). Each flag group is one struct that the subcommands `#[command(flatten)]`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use ecdn_trace::{Format, OpenOptions, RequestReader, TraceError};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The trace a command reads.
#[derive(Args)]
pub struct TraceArgs {
    /// Trace file.
    #[arg(long, short = 't')]
    pub trace: PathBuf,
    /// Trace format: oracleGeneral, oracleGeneral.zst, text, csv (default: from the file name).
    #[arg(long)]
    pub format: Option<String>,
}

impl TraceArgs {
    pub fn options(&self) -> Result<OpenOptions> {
        let format = match &self.format {
            Some(f) => Some(Format::parse(f).map_err(anyhow::Error::msg)?),
            None => None,
        };
        Ok(OpenOptions { format })
    }

    pub fn open(&self, opts: &OpenOptions) -> Result<Box<dyn RequestReader>, TraceError> {
        ecdn_trace::open(&self.trace, opts)
    }

    /// The trace's request count when it is cheap to know (uncompressed oracleGeneral: file
    /// size).
    pub fn cheap_len(&self, opts: &OpenOptions) -> Option<u64> {
        cheap_len(&self.trace, opts)
    }

    /// The trace's request count: cheaply if possible, else by reading it once.
    pub fn len(&self, opts: &OpenOptions) -> Result<u64> {
        if let Some(n) = self.cheap_len(opts) {
            return Ok(n);
        }
        let mut r = self.open(opts)?;
        Ok(ecdn_sim::count_requests(&mut *r)?)
    }
}

fn cheap_len(path: &Path, opts: &OpenOptions) -> Option<u64> {
    let f = opts.format.clone().or_else(|| Format::from_path(path))?;
    if f == Format::OracleGeneral {
        let len = std::fs::metadata(path).ok()?.len();
        return Some(len / ecdn_trace::oracle::RECORD_SIZE as u64);
    }
    None
}

/// Worker threads of a simulation.
#[derive(Args)]
pub struct ThreadsArg {
    /// Worker threads (default: all cores).
    #[arg(long, short = 'j')]
    threads: Option<usize>,
}

impl ThreadsArg {
    /// The threads asked for, else all cores; at least one.
    pub fn get(&self) -> usize {
        self.threads
            .unwrap_or_else(|| {
                std::thread::available_parallelism()
                    .map(|n| n.get())
                    .unwrap_or(1)
            })
            .max(1)
    }
}

/// How a simulation reports: a table or JSON lines on stdout, a progress bar on stderr.
#[derive(Args)]
pub struct ReportArgs {
    /// One JSON object per line per result (with its per-window series) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

impl ReportArgs {
    /// A progress bar over `total` requests (a spinner if unknown), hidden as
    /// [`progress_hidden`] says.
    pub fn progress_bar(&self, total: Option<u64>) -> ProgressBar {
        progress_bar(total, progress_hidden(self.json, self.quiet))
    }
}

/// Whether a command's progress stays off: with `--quiet`, and while its `--json` output goes
/// to a pipe or a file (a script reads it, and may read stderr too). indicatif draws nothing
/// either when stderr is not a terminal.
pub fn progress_hidden(json: bool, quiet: bool) -> bool {
    use std::io::IsTerminal;
    quiet || (json && !std::io::stdout().is_terminal())
}

/// A spinner on stderr for a long command's phases: the phase is its message
/// (`set_message`), the elapsed time beside it; hidden when `hidden`. Lines printed while it
/// spins go through `ProgressBar::suspend` so that they do not mix with it.
pub fn phase_spinner(hidden: bool) -> ProgressBar {
    let pb = ProgressBar::new_spinner();
    if hidden {
        pb.set_draw_target(ProgressDrawTarget::hidden());
    } else {
        pb.set_draw_target(ProgressDrawTarget::stderr_with_hz(4));
        pb.enable_steady_tick(Duration::from_millis(250));
    }
    if let Ok(s) = ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}") {
        pb.set_style(s);
    }
    pb
}

/// A progress bar over `total` requests (a spinner if unknown), drawn on stderr unless `quiet`.
pub fn progress_bar(total: Option<u64>, quiet: bool) -> ProgressBar {
    let pb = match total {
        Some(t) => ProgressBar::new(t),
        None => ProgressBar::new_spinner(),
    };
    if quiet {
        pb.set_draw_target(ProgressDrawTarget::hidden());
    } else {
        pb.set_draw_target(ProgressDrawTarget::stderr_with_hz(4));
    }
    let style = if total.is_some() {
        "{spinner} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} requests ({per_sec}, eta {eta})"
    } else {
        "{spinner} [{elapsed_precise}] {human_pos} requests ({per_sec})"
    };
    if let Ok(s) = ProgressStyle::with_template(style) {
        pb.set_style(s);
    }
    pb
}

/// The longest duration any flag accepts: one day. Longer waits are mistakes (and a duration
/// past the clock's range would make timers overflow).
pub const MAX_DURATION_S: f64 = 86_400.0;

/// Parses the duration `value` of the flag or config key `name` (`300ms`, `2s`, `5m`, ...):
/// between 0 and [`MAX_DURATION_S`], else an error naming `name`.
pub fn duration(name: &str, value: &str) -> Result<Duration> {
    let secs =
        ecdn_trace::units::parse_seconds(value).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    if !(0.0..=MAX_DURATION_S).contains(&secs) {
        bail!("{name}: {value:?} is out of range (0 to 1 day)");
    }
    match Duration::try_from_secs_f64(secs) {
        Ok(d) => Ok(d),
        Err(e) => bail!("{name}: {value:?}: {e}"),
    }
}

/// A rate in bits per second given to `flag`: a number with an optional `bit`, `kbit`, `Mbit`
/// or `Gbit` (decimal, any case), at least 1 kbit.
pub fn bit_rate(flag: &str, s: &str) -> Result<f64> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let (num, unit) = match lower.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => lower.split_at(i),
        None => (lower.as_str(), ""),
    };
    let scale = match unit {
        "" | "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        _ => bail!("{flag} {t:?}: unknown unit; expected e.g. 100Mbit, 1Gbit, 2.5Gbit"),
    };
    let n: f64 = num
        .trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("{flag} {t:?}: not a number"))?;
    let rate = n * scale;
    if !(rate.is_finite() && rate >= 1e3) {
        bail!("{flag} {t:?}: the rate must be at least 1kbit");
    }
    Ok(rate)
}

/// Parses a count: `1000000`, `1_000_000`, `20M`, `100k`, `2G` (decimal multipliers).
pub fn parse_count(s: &str) -> Result<u64, String> {
    let t: String = s.trim().chars().filter(|&c| c != '_').collect();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: u64 = match c {
                'k' | 'K' => 1_000,
                'm' | 'M' => 1_000_000,
                'g' | 'G' => 1_000_000_000,
                _ => {
                    return Err(format!(
                        "invalid count {s:?}: unknown suffix {c:?} (use k, M or G)"
                    ))
                }
            };
            (&t[..i], m)
        }
        _ => (t.as_str(), 1),
    };
    if let Ok(n) = num.parse::<u64>() {
        return n
            .checked_mul(mult)
            .ok_or_else(|| format!("invalid count {s:?}: too large"));
    }
    match num.parse::<f64>() {
        Ok(f) if f.is_finite() && f >= 0.0 && f * (mult as f64) < u64::MAX as f64 => {
            Ok((f * mult as f64).round() as u64)
        }
        _ => Err(format!(
            "invalid count {s:?}: expected e.g. 1000000, 20M or 1.5k"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts() {
        assert_eq!(parse_count("20M"), Ok(20_000_000));
        assert_eq!(parse_count("100k"), Ok(100_000));
        assert_eq!(parse_count("1_000"), Ok(1000));
        assert_eq!(parse_count("1.5k"), Ok(1500));
        assert_eq!(parse_count("7"), Ok(7));
        assert!(parse_count("x").is_err());
        assert!(parse_count("5Q").is_err());
        assert!(parse_count("-5").is_err());
        assert!(parse_count("99999999999G").is_err());
    }

    #[test]
    fn durations_are_bounded_and_name_their_flag() {
        assert_eq!(
            duration("--latency", "20ms").unwrap(),
            Duration::from_millis(20)
        );
        assert_eq!(duration("--latency", "0").unwrap(), Duration::ZERO);
        assert_eq!(
            duration("--latency", "1d").unwrap(),
            Duration::from_secs(86_400)
        );
        for bad in ["1e20", "1e400", "2d", "-1s", "NaN", "inf", "x"] {
            let e = duration("--origin-timeout", bad).unwrap_err().to_string();
            assert!(e.starts_with("--origin-timeout: "), "{bad}: {e}");
        }
    }
}
