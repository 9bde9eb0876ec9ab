//! `ecdn trace gen --footprint DIR` (a trace from a traffic class's popularity-size footprint
//! descriptor, JEDI's method) and `ecdn trace footprint DIR` (what the descriptor predicts for
//! LRU, and how close a trace comes to it).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use ecdn_sim::Warmup;
use ecdn_trace::gen::footprint::{
    Footprint, FootprintConfig, FootprintGenerator, SizeUnit, WithinBin,
};
use ecdn_trace::units::format_size;
use ecdn_trace::Format;
use serde::Serialize;

use ecdn_lab::plot::backend::{LinesFigure, Panel};

/// `--within-bin`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WithinBinArg {
    /// Uniformly within the bin.
    Uniform,
    /// At the bin's lower edge, as JEDI does.
    Floor,
}

/// `--size-unit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SizeUnitArg {
    /// Decided from the data.
    Auto,
    /// Sizes in the files are bytes.
    Bytes,
    /// Sizes in the files are KiB.
    Kib,
}

impl From<SizeUnitArg> for SizeUnit {
    fn from(u: SizeUnitArg) -> Self {
        match u {
            SizeUnitArg::Auto => SizeUnit::Auto,
            SizeUnitArg::Bytes => SizeUnit::Bytes,
            SizeUnitArg::Kib => SizeUnit::KiB,
        }
    }
}

/// The flags of `ecdn trace gen` that belong to footprint traces.
#[derive(Args)]
pub struct FootprintGenArgs {
    /// Generate from a traffic class's popularity-size footprint descriptor: a directory with
    /// pfd.txt.gz and popularity_sz.txt (JEDI's FOOTPRINT_DESCRIPTORS/CLASS/), instead of a
    /// Zipf workload.
    #[arg(long, value_name = "DIR")]
    pub footprint: Option<PathBuf>,
    /// Footprint: requests generated and discarded before the trace [default: 10M, as JEDI].
    #[arg(long, value_name = "N", value_parser = ecdn_lab::args::parse_count)]
    pub warmup: Option<u64>,
    /// Footprint: where a stack distance falls within its bin [default: uniform].
    #[arg(long, value_enum)]
    pub within_bin: Option<WithinBinArg>,
    /// Footprint: the unit of the descriptor's sizes [default: auto].
    #[arg(long, value_enum)]
    pub size_unit: Option<SizeUnitArg>,
}

impl FootprintGenArgs {
    /// Fails if a footprint-only flag is given without --footprint.
    pub fn reject_without_footprint(&self) -> Result<()> {
        for (flag, set) in [
            ("--warmup", self.warmup.is_some()),
            ("--within-bin", self.within_bin.is_some()),
            ("--size-unit", self.size_unit.is_some()),
        ] {
            if set {
                bail!("{flag} applies only with --footprint");
            }
        }
        Ok(())
    }
}

fn load(dir: &Path, unit: Option<SizeUnitArg>) -> Result<Footprint> {
    Footprint::load(dir, unit.unwrap_or(SizeUnitArg::Auto).into())
        .with_context(|| format!("reading the footprint descriptor in {}", dir.display()))
}

/// `ecdn trace gen --footprint DIR`.
pub fn gen(
    dir: &Path,
    a: &FootprintGenArgs,
    requests: u64,
    rate: Option<f64>,
    seed: u64,
    out: &Path,
    out_format: Format,
) -> Result<()> {
    let fp = load(dir, a.size_unit)?;
    let cfg = FootprintConfig {
        requests,
        warmup: a.warmup.unwrap_or(FootprintConfig::default().warmup),
        seed,
        within_bin: match a.within_bin.unwrap_or(WithinBinArg::Uniform) {
            WithinBinArg::Uniform => WithinBin::Uniform,
            WithinBinArg::Floor => WithinBin::Floor,
        },
        rate,
    };
    let start = Instant::now();
    let mut generator = FootprintGenerator::new(&fp, cfg).context("invalid workload")?;
    let warm = start.elapsed().as_secs_f64();
    let mut writer = ecdn_trace::create(out, &out_format)?;
    let n = ecdn_trace::copy(&mut generator, &mut *writer)?;
    writer.finish()?;
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "wrote {n} requests to {} ({out_format}) from {}: {} objects in the stack ({} deep), \
         warm-up {} requests, seed {seed}, in {secs:.1}s ({:.2}M requests/s including the warm-up, \
         which took {warm:.1}s)",
        out.display(),
        dir.display(),
        generator.stack_objects(),
        format_size(fp.max_stack_distance()),
        cfg.warmup,
        (n + cfg.warmup) as f64 / secs.max(1e-9) / 1e6,
    );
    Ok(())
}

/// Arguments of `ecdn trace footprint`.
#[derive(Args)]
pub struct FootprintArgs {
    /// The descriptor's directory (pfd.txt.gz, popularity_sz.txt, request_rate.txt).
    dir: PathBuf,
    /// A trace to measure against the descriptor (e.g. one from `trace gen --footprint`).
    #[arg(long, short = 't')]
    trace: Option<PathBuf>,
    /// Comma-separated cache sizes (binary units) [default: bin edges about 2x apart].
    #[arg(long, short = 's')]
    size: Option<String>,
    /// Requests of --trace that warm the cache before counting: a count or a fraction.
    #[arg(long, default_value = "20%")]
    warmup: String,
    /// The unit of the descriptor's sizes [default: auto].
    #[arg(long, value_enum)]
    size_unit: Option<SizeUnitArg>,
    /// Compare with the prediction for JEDI's placement at bin edges (a step curve), not the
    /// default uniform placement within bins.
    #[arg(long)]
    floor: bool,
    /// Print JSON lines instead of a table.
    #[arg(long)]
    json: bool,
    /// Draw predicted and measured OHR and BHR against cache size (PNG or SVG).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
}

/// One row of the comparison.
#[derive(Serialize)]
struct Row {
    cache_size: u64,
    predicted_ohr: f64,
    predicted_bhr: f64,
    measured_ohr: Option<f64>,
    measured_bhr: Option<f64>,
}

/// Bin edges about a factor of two apart, from the first edge above 0 to an eighth of the
/// largest stack distance.
fn default_sizes(fp: &Footprint) -> Vec<u64> {
    let Some(&first) = fp.bins.iter().find(|&&b| b > 0) else {
        return vec![1 << 30];
    };
    let top = (fp.max_stack_distance() / 8).max(first);
    let mut out = Vec::new();
    let mut want = first;
    for &b in fp.bins.iter().filter(|&&b| b >= first && b <= top) {
        if b >= want {
            out.push(b);
            want = b.saturating_mul(2);
        }
    }
    out
}

/// `ecdn trace footprint`.
pub fn run(a: FootprintArgs) -> Result<()> {
    let fp = load(&a.dir, a.size_unit)?;
    let within = if a.floor {
        WithinBin::Floor
    } else {
        WithinBin::Uniform
    };
    let sizes = match &a.size {
        Some(s) => crate::sim_cmd::parse_sizes(s)?,
        None => default_sizes(&fp),
    };
    let measured: Option<Vec<(f64, f64)>> = match &a.trace {
        None => None,
        Some(path) => Some(measure(path, &a.warmup, &sizes)?),
    };
    let rows: Vec<Row> = sizes
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            let (po, pb) = fp.lru_hit_ratio(c, within);
            Row {
                cache_size: c,
                predicted_ohr: po,
                predicted_bhr: pb,
                measured_ohr: measured.as_ref().map(|m| m[i].0),
                measured_bhr: measured.as_ref().map(|m| m[i].1),
            }
        })
        .collect();
    let mut out = std::io::stdout().lock();
    if a.json {
        for r in &rows {
            writeln!(out, "{}", serde_json::to_string(r)?)?;
        }
    } else {
        describe(&mut out, &fp)?;
        write_table(&mut out, &rows)?;
    }
    out.flush()?;
    if let Some(p) = &a.plot {
        plot(p, &fp, &rows)?;
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}

fn describe(out: &mut impl Write, fp: &Footprint) -> Result<()> {
    let h = &fp.header;
    let unit = if fp.unit == 1 { "bytes" } else { "KiB" };
    let first_bin = fp.bins.iter().find(|&&b| b > 0).copied().unwrap_or(0);
    writeln!(out, "descriptor         {}", fp.dir.display())?;
    writeln!(
        out,
        "original trace     {:.0} requests over {:.1} days, {:.0} objects, {} unique",
        h.requests,
        (h.end - h.start) as f64 / 86_400.0,
        h.first_requests,
        format_size((h.first_bytes * fp.unit as f64) as u64)
    )?;
    writeln!(
        out,
        "units              sizes in {unit}, stack distances x{} (see `ecdn trace footprint --help`)",
        fp.sd_scale
    )?;
    writeln!(
        out,
        "stack distances    {} bins, first {} wide, largest {}; {} (popularity, size) cells",
        fp.bins.len(),
        format_size(first_bin),
        format_size(fp.max_stack_distance()),
        fp.cells.len()
    )?;
    writeln!(out, "first requests     {:.4} of requests", fp.first_mass)?;
    Ok(())
}

fn write_table(out: &mut impl Write, rows: &[Row]) -> Result<()> {
    let measured = rows.iter().any(|r| r.measured_ohr.is_some());
    if measured {
        writeln!(
            out,
            "{:>11}  {:>9} {:>9} {:>7}  {:>9} {:>9} {:>7}",
            "cache", "OHR pFD", "OHR trace", "diff", "BHR pFD", "BHR trace", "diff"
        )?;
    } else {
        writeln!(out, "{:>11}  {:>9} {:>9}", "cache", "OHR pFD", "BHR pFD")?;
    }
    let (mut worst_o, mut worst_b) = (0.0f64, 0.0f64);
    for r in rows {
        match (r.measured_ohr, r.measured_bhr) {
            (Some(mo), Some(mb)) => {
                worst_o = worst_o.max((mo - r.predicted_ohr).abs());
                worst_b = worst_b.max((mb - r.predicted_bhr).abs());
                writeln!(
                    out,
                    "{:>11}  {:>9.4} {:>9.4} {:>+7.4}  {:>9.4} {:>9.4} {:>+7.4}",
                    format_size(r.cache_size),
                    r.predicted_ohr,
                    mo,
                    mo - r.predicted_ohr,
                    r.predicted_bhr,
                    mb,
                    mb - r.predicted_bhr
                )?;
            }
            _ => writeln!(
                out,
                "{:>11}  {:>9.4} {:>9.4}",
                format_size(r.cache_size),
                r.predicted_ohr,
                r.predicted_bhr
            )?,
        }
    }
    if measured {
        writeln!(out, "max |diff|: OHR {worst_o:.4}, BHR {worst_b:.4}")?;
    }
    Ok(())
}

/// LRU's (OHR, BHR) on the trace at each size, after the warm-up, from stack distances (an
/// LRU that caches every object, as footprint descriptors count).
fn measure(path: &Path, warmup: &str, sizes: &[u64]) -> Result<Vec<(f64, f64)>> {
    let mut reader = ecdn_trace::open(path, &ecdn_trace::OpenOptions::default())?;
    let reqs = ecdn_trace::read_all(&mut *reader)?;
    if reqs.is_empty() {
        bail!("{}: empty trace", path.display());
    }
    let warmup = Warmup::parse(warmup)
        .map_err(anyhow::Error::msg)?
        .requests(Some(reqs.len() as u64))
        .map_err(anyhow::Error::msg)?;
    Ok(ecdn_sim::stack_distance::lru_curve(
        &reqs,
        warmup as usize,
        sizes,
    ))
}

fn plot(path: &Path, fp: &Footprint, rows: &[Row]) -> Result<()> {
    let x = |c: u64| (c as f64 / (1u64 << 20) as f64).log2();
    let line = |f: &dyn Fn(&Row) -> Option<f64>| -> Vec<(f64, f64)> {
        rows.iter()
            .filter_map(|r| f(r).map(|v| (x(r.cache_size), v)))
            .collect()
    };
    let class = fp
        .dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let fig = LinesFigure {
        title: format!("LRU hit ratio of {class}: descriptor vs trace"),
        labels: vec!["pFD prediction".into(), "generated trace".into()],
        panels: vec![
            Panel {
                caption: "Object hit ratio".into(),
                x_desc: "log2 cache size (MiB)".into(),
                y_desc: "OHR".into(),
                log_y: false,
                lines: vec![line(&|r| Some(r.predicted_ohr)), line(&|r| r.measured_ohr)],
            },
            Panel {
                caption: "Byte hit ratio".into(),
                x_desc: "log2 cache size (MiB)".into(),
                y_desc: "BHR".into(),
                log_y: false,
                lines: vec![line(&|r| Some(r.predicted_bhr)), line(&|r| r.measured_bhr)],
            },
        ],
    };
    ecdn_lab::plot::lines(path, &fig)
}
