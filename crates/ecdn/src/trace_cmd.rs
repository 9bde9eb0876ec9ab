//! `ecdn trace`: trace statistics, format conversion and synthetic workload generation.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use ecdn_trace::csv::{parse_delimiter, CsvHeader};
use ecdn_trace::format::FORMAT_NAMES;
use ecdn_trace::gen::{Class, GenConfig, Generator, Scenario, SizeDist};
use ecdn_trace::{Format, OpenOptions, TraceStats};

use ecdn_lab::args::parse_count;

/// Trace tools.
#[derive(Subcommand)]
pub enum TraceCmd {
    /// Print statistics of a trace: request and object counts, bytes, size percentiles,
    /// one-hit wonders, popularity skew, compulsory miss ratios.
    #[command(after_help = "Examples:\n  \
        ecdn trace stats tests/data/cloudPhysicsIO.oracleGeneral.bin\n  \
        ecdn trace stats web.txt --json | jq .one_hit_wonder_ratio\n  \
        ecdn trace stats log.csv --csv-time 2 --csv-id 0 --csv-size 5 --csv-header yes\n  \
        ecdn trace stats keys.csv.zst --csv-time none --csv-id 0 --csv-size none\n\n\
        One pass over the trace; memory grows with the number of unique objects (~100 bytes each).")]
    Stats(StatsArgs),
    /// Convert a trace to another format (oracleGeneral, text, CSV; optionally zstd).
    #[command(after_help = "Examples:\n  \
        ecdn trace convert web.txt web.oracleGeneral.bin.zst\n  \
        ecdn trace convert cdn.csv cdn.bin --csv-time 0 --csv-id 3 --csv-size 4\n  \
        ecdn trace convert w.oracleGeneral.bin.zst w.txt\n  \
        ecdn trace convert in.dat out.dat --format text --to oracleGeneral\n\n\
        Streams with constant memory. oracleGeneral output also stores each request's next access,\n\
        computed in a second, backward pass over the written file (memory: the unique objects;\n\
        .zst output goes through a temporary file next to OUT). oracleGeneral holds 32-bit times\n\
        and sizes: larger values are reported as errors.")]
    Convert(ConvertArgs),
    /// Generate a synthetic workload: Zipf popularity, per-object sizes, Poisson arrivals, and
    /// the AdaptSize (NSDI'17 §6.3) traffic-mix changes.
    #[command(after_help = "Examples:\n  \
        ecdn trace gen --out zipf.bin --requests 20M --objects 1M --alpha 0.9 --sizes web-video\n  \
        ecdn trace gen --out small.txt --requests 100k --objects 1k --sizes fixed:4KiB --seed 7\n  \
        ecdn trace gen --out flash.bin.zst --requests 15M --scenario randomized --change-at 5M\n  \
        ecdn trace gen --out adv.bin --requests 12M --scenario adversarial --phase 3M\n  \
        ecdn trace gen --out d2.bin -n 10M --footprint FOOTPRINT_DESCRIPTORS/d-2\n\n\
        Sizes (fixed per object, clamped to 1 B..4 GiB):\n  \
        fixed:SIZE                every object has SIZE bytes\n  \
        lognormal:MEDIAN:SIGMA    median e^mu in bytes, sigma of ln(size); mean = MEDIAN*e^(SIGMA^2/2)\n  \
        pareto:ALPHA:MIN          P(size > x) = (MIN/x)^ALPHA\n  \
        loguniform:MIN:MAX        uniform in ln(size)\n  \
        web-video                 90% web (lognormal 16KiB, 1.5) + 10% video (lognormal 4MiB, 0.8)\n\n\
        Scenarios:\n  \
        stationary    one Zipf workload\n  \
        randomized    from request --change-at on (default: a third of the trace), 50% of requests\n                \
                      go to 200-1000 random objects of the workload (a flash crowd)\n  \
        adversarial   phases of --phase requests cycle through classes A, B, C, B, A, ...:\n                \
                      A = web objects 1-64KiB, B = 256KiB-2MiB, C = video 4-32MiB (A and B mixed\n                \
                      with 15% large one-hit objects); each class has its own sizes, so --sizes\n                \
                      does not apply\n\n\
        Footprint: with --footprint DIR the requests follow a traffic class's popularity-size\n\
        footprint descriptor (JEDI, IMC'22; see `ecdn trace footprint`); --objects, --alpha,\n\
        --sizes and --scenario do not apply, and --warmup requests (default 10M) are discarded.\n\n\
        Counts accept k, M, G suffixes (20M = 20,000,000). The same flags and seed always give the\n\
        same trace. The output format follows OUT's name (.bin, .bin.zst, .txt, .csv, ...) or --to.")]
    Gen(GenArgs),
    /// Describe a traffic class's popularity-size footprint descriptor (JEDI's
    /// FOOTPRINT_DESCRIPTORS/CLASS/) and the LRU hit-ratio curve it predicts; with --trace,
    /// measure that trace's LRU curve against it (the check of `trace gen --footprint`).
    #[command(after_help = "Examples:\n  \
        ecdn trace footprint FOOTPRINT_DESCRIPTORS/eu-7\n  \
        ecdn trace gen --footprint FOOTPRINT_DESCRIPTORS/eu-7 -n 10M --out eu7.bin\n  \
        ecdn trace footprint FOOTPRINT_DESCRIPTORS/eu-7 --trace eu7.bin --plot eu7.png\n\n\
        Cache sizes default to bin edges about a factor of two apart, from the first bin edge to\n\
        an eighth of the largest stack distance. The trace's curve comes from its stack\n\
        distances (an LRU that caches every object, as descriptors count), over the requests\n\
        after --warmup.")]
    Footprint(crate::footprint_cmd::FootprintArgs),
}

/// Selects the input trace format and CSV column mapping.
#[derive(Args)]
pub struct InputArgs {
    /// Input format (default: from the file name): oracleGeneral, oracleGeneral.zst, text,
    /// text.zst, csv, csv.zst.
    #[arg(long, value_name = "FORMAT", value_parser = Format::parse)]
    format: Option<Format>,
    /// CSV: 0-based column of the timestamp, or `none` to use the request index [default: 0].
    #[arg(long, value_name = "N|none", value_parser = parse_col)]
    csv_time: Option<Col>,
    /// CSV: 0-based column of the object id (numeric ids are used as is, others hashed)
    /// [default: 1].
    #[arg(long, value_name = "N")]
    csv_id: Option<usize>,
    /// CSV: 0-based column of the object size in bytes, or `none` for size 1 [default: 2].
    #[arg(long, value_name = "N|none", value_parser = parse_col)]
    csv_size: Option<Col>,
    /// CSV: field delimiter, one character or tab, space, comma, semicolon, pipe [default: ,].
    #[arg(long, value_name = "C", value_parser = parse_delimiter)]
    csv_delimiter: Option<u8>,
    /// CSV: whether the first line is a header: yes, no, or auto (a header if its size — or
    /// time — field is not a number) [default: auto].
    #[arg(long, value_name = "yes|no|auto", value_parser = parse_header)]
    csv_header: Option<CsvHeader>,
}

/// A CSV column flag value: a column number or `none`.
#[derive(Clone, Copy, Debug)]
pub struct Col(Option<usize>);

fn parse_col(s: &str) -> Result<Col, String> {
    if s.eq_ignore_ascii_case("none") {
        return Ok(Col(None));
    }
    s.parse::<usize>()
        .map(|c| Col(Some(c)))
        .map_err(|_| format!("expected a 0-based column number or `none`, got {s:?}"))
}

fn parse_header(s: &str) -> Result<CsvHeader, String> {
    s.parse()
}

impl InputArgs {
    fn any_csv_flag(&self) -> bool {
        self.csv_time.is_some()
            || self.csv_id.is_some()
            || self.csv_size.is_some()
            || self.csv_delimiter.is_some()
            || self.csv_header.is_some()
    }

    /// The format to read `path` with: `--format`, else the file name; CSV flags applied.
    fn options(&self, path: &Path) -> Result<OpenOptions> {
        let format = ecdn_trace::format::resolve(path, self.format.as_ref())?;
        if !self.any_csv_flag() {
            return Ok(OpenOptions {
                format: Some(format),
            });
        }
        let Some(mut spec) = format.csv_spec() else {
            bail!(
                "the --csv-* options apply to CSV traces, but {} is read as {format} \
                 (pass --format csv if it is CSV)",
                path.display()
            );
        };
        if let Some(Col(c)) = self.csv_time {
            spec.time_col = c;
        }
        if let Some(c) = self.csv_id {
            spec.id_col = c;
        }
        if let Some(Col(c)) = self.csv_size {
            spec.size_col = c;
        }
        if let Some(d) = self.csv_delimiter {
            spec.delimiter = d;
        }
        if let Some(h) = self.csv_header {
            spec.header = h;
        }
        spec.validate()?;
        Ok(OpenOptions {
            format: Some(format.with_csv_spec(spec)),
        })
    }
}

/// Arguments of `ecdn trace stats`.
#[derive(Args)]
pub struct StatsArgs {
    /// Trace file.
    file: PathBuf,
    #[command(flatten)]
    input: InputArgs,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// Arguments of `ecdn trace convert`.
#[derive(Args)]
pub struct ConvertArgs {
    /// Input trace.
    input: PathBuf,
    /// Output trace (created or overwritten).
    output: PathBuf,
    #[command(flatten)]
    input_format: InputArgs,
    /// Output format (default: from OUTPUT's name): oracleGeneral, oracleGeneral.zst, text,
    /// text.zst, csv, csv.zst.
    #[arg(long, value_name = "FORMAT", value_parser = Format::parse)]
    to: Option<Format>,
}

/// Workload shapes of `ecdn trace gen`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ScenarioName {
    /// One Zipf workload.
    Stationary,
    /// A flash crowd: from --change-at on, half the requests go to 200-1000 random objects.
    Randomized,
    /// Phases of --phase requests cycling through small, medium and large object classes.
    Adversarial,
}

/// Arguments of `ecdn trace gen`.
#[derive(Args)]
pub struct GenArgs {
    /// Output trace (created or overwritten); the format follows the name unless --to is given.
    #[arg(long, short = 'o', value_name = "FILE")]
    out: PathBuf,
    /// Output format: oracleGeneral, oracleGeneral.zst, text, text.zst, csv, csv.zst.
    #[arg(long, value_name = "FORMAT", value_parser = Format::parse)]
    to: Option<Format>,
    /// Number of requests.
    #[arg(long, short = 'n', value_name = "N", default_value = "1M", value_parser = parse_count)]
    requests: u64,
    /// Number of objects (adversarial: of class A; B has a quarter, C a sixteenth).
    #[arg(long, value_name = "N", default_value = "100k", value_parser = parse_count)]
    objects: u64,
    /// Zipf popularity exponent (0 = uniform).
    #[arg(
        long,
        value_name = "A",
        default_value_t = 0.8,
        allow_negative_numbers = true
    )]
    alpha: f64,
    /// Object sizes: fixed:SIZE, lognormal:MEDIAN:SIGMA, pareto:ALPHA:MIN, loguniform:MIN:MAX or
    /// web-video [default: web-video].
    #[arg(long, value_name = "DIST", value_parser = SizeDist::parse)]
    sizes: Option<SizeDist>,
    /// Mean request rate of the Poisson arrivals (requests per second) [default: 1000; with
    /// --footprint: the class's request_rate.txt, else its mean rate].
    #[arg(long, value_name = "R", allow_negative_numbers = true)]
    rate: Option<f64>,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Workload shape over time.
    #[arg(long, value_enum, default_value_t = ScenarioName::Stationary)]
    scenario: ScenarioName,
    /// Randomized: index of the first request after the traffic-mix change [default: a third of
    /// the requests].
    #[arg(long, value_name = "N", value_parser = parse_count)]
    change_at: Option<u64>,
    /// Adversarial: requests per phase [default: 3M, as in the paper].
    #[arg(long, value_name = "N", value_parser = parse_count)]
    phase: Option<u64>,
    #[command(flatten)]
    footprint: crate::footprint_cmd::FootprintGenArgs,
}

/// Runs a `trace` subcommand.
pub fn run(cmd: TraceCmd) -> Result<()> {
    match cmd {
        TraceCmd::Stats(a) => stats(a),
        TraceCmd::Convert(a) => convert(a),
        TraceCmd::Gen(a) => gen(a),
        TraceCmd::Footprint(a) => crate::footprint_cmd::run(a),
    }
}

fn stats(a: StatsArgs) -> Result<()> {
    let opts = a.input.options(&a.file)?;
    let format = opts.format.clone().expect("resolved");
    let mut reader = ecdn_trace::open(&a.file, &opts)?;
    let stats = TraceStats::compute(&mut reader)?;
    let text = if a.json {
        format!("{}\n", stats_json(&a.file, &format, &stats)?)
    } else {
        format!("{:<22}{} ({format})\n{stats}", "trace", a.file.display())
    };
    print_stdout(&text)
}

/// Writes to stdout; a closed pipe (`ecdn trace stats x | head`) ends the command quietly
/// (`ecdn_lab::out`).
fn print_stdout(text: &str) -> Result<()> {
    out!("{text}").context("writing to standard output")
}

/// One flat JSON object: the trace and its format first, then the statistics' fields in
/// declaration order.
fn stats_json(path: &Path, format: &Format, stats: &TraceStats) -> Result<String> {
    let trace = serde_json::to_string(&path.display().to_string())?;
    let format = serde_json::to_string(&format.to_string())?;
    let body = serde_json::to_string(stats)?;
    let fields = body.strip_prefix('{').unwrap_or(&body);
    Ok(format!("{{\"trace\":{trace},\"format\":{format},{fields}"))
}

/// The output format: `--to`, else from the file name.
pub(crate) fn output_format(path: &Path, to: Option<Format>) -> Result<Format> {
    match to.or_else(|| Format::from_path(path)) {
        Some(f) => Ok(f),
        None => bail!(
            "cannot tell the output format from the name {}: use a name ending in .bin, \
             .bin.zst, .txt, .txt.zst, .csv or .csv.zst, or pass --to ({FORMAT_NAMES})",
            path.display()
        ),
    }
}

/// Fails if `a` and `b` are the same existing file (converting in place would destroy it).
fn refuse_same_file(a: &Path, b: &Path) -> Result<()> {
    if let (Ok(x), Ok(y)) = (a.canonicalize(), b.canonicalize()) {
        if x == y {
            bail!(
                "input and output are the same file ({}); write to another file",
                a.display()
            );
        }
    }
    Ok(())
}

fn convert(a: ConvertArgs) -> Result<()> {
    let opts = a.input_format.options(&a.input)?;
    let in_format = opts.format.clone().expect("resolved");
    let out_format = output_format(&a.output, a.to)?;
    refuse_same_file(&a.input, &a.output)?;
    let start = Instant::now();
    let mut reader = ecdn_trace::open(&a.input, &opts)?;
    let mut writer = ecdn_trace::create(&a.output, &out_format)?;
    let n = ecdn_trace::copy(&mut reader, &mut *writer).with_context(|| {
        format!(
            "converting {} to {} failed (the output is incomplete)",
            a.input.display(),
            a.output.display()
        )
    })?;
    writer.finish()?;
    eprintln!(
        "converted {n} requests: {} ({in_format}) -> {} ({out_format}) in {:.1}s",
        a.input.display(),
        a.output.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Paper default of the adversarial phase length.
const DEFAULT_PHASE: u64 = 3_000_000;

fn gen(a: GenArgs) -> Result<()> {
    let out_format = output_format(&a.out, a.to)?;
    if let Some(dir) = &a.footprint.footprint {
        let ignored = [
            ("--objects", a.objects != 100_000),
            ("--alpha", a.alpha != 0.8),
            ("--sizes", a.sizes.is_some()),
            ("--scenario", a.scenario != ScenarioName::Stationary),
        ];
        if let Some((flag, _)) = ignored.iter().find(|(_, set)| *set) {
            bail!("{flag} does not apply with --footprint: the descriptor sets the workload");
        }
        return crate::footprint_cmd::gen(
            dir,
            &a.footprint,
            a.requests,
            a.rate,
            a.seed,
            &a.out,
            out_format,
        );
    }
    a.footprint.reject_without_footprint()?;
    let rate = a.rate.unwrap_or(1000.0);
    if a.change_at.is_some() && a.scenario != ScenarioName::Randomized {
        bail!("--change-at applies only to --scenario randomized");
    }
    if a.phase.is_some() && a.scenario != ScenarioName::Adversarial {
        bail!("--phase applies only to --scenario adversarial");
    }
    if a.sizes.is_some() && a.scenario == ScenarioName::Adversarial {
        bail!("--sizes does not apply to --scenario adversarial: its classes have fixed sizes (see --help)");
    }
    let scenario = match a.scenario {
        ScenarioName::Stationary => Scenario::Stationary,
        ScenarioName::Randomized => Scenario::randomized(a.change_at.unwrap_or(a.requests / 3)),
        ScenarioName::Adversarial => Scenario::Adversarial {
            phase_len: a.phase.unwrap_or(DEFAULT_PHASE),
        },
    };
    let cfg = GenConfig {
        requests: a.requests,
        objects: a.objects,
        alpha: a.alpha,
        sizes: a.sizes.unwrap_or(SizeDist::WebVideo),
        rate,
        seed: a.seed,
        scenario,
    };
    let start = Instant::now();
    let mut generator = Generator::new(cfg).context("invalid workload")?;
    match scenario {
        Scenario::Randomized { change_at, .. } => {
            if change_at >= cfg.requests {
                eprintln!(
                    "note: --change-at {change_at} is not before the end of the trace ({} requests): no change happens",
                    cfg.requests
                );
            }
            eprintln!(
                "randomized: {} hot objects get 50% of the requests from request {change_at} on",
                generator.hot_objects().len()
            );
        }
        Scenario::Adversarial { phase_len } => {
            let phases = cfg.requests.div_ceil(phase_len);
            let seq: String = (0..phases.min(12))
                .map(|p| Class::sequence(p).letter())
                .collect();
            eprintln!(
                "adversarial: {phases} phase(s) of {phase_len} requests: {seq}{}",
                if phases > 12 { "..." } else { "" }
            );
            if phases < 2 {
                eprintln!(
                    "note: the trace holds a single phase; lower --phase or raise --requests"
                );
            }
        }
        Scenario::Stationary => {}
    }
    let mut writer = ecdn_trace::create(&a.out, &out_format)?;
    let n = ecdn_trace::copy(&mut generator, &mut *writer)?;
    writer.finish()?;
    let secs = start.elapsed().as_secs_f64();
    let sizes = if a.scenario == ScenarioName::Adversarial {
        "per class".to_string()
    } else {
        cfg.sizes.to_string()
    };
    eprintln!(
        "wrote {n} requests to {} ({out_format}): {} scenario, {} objects, alpha {}, sizes {sizes}, \
         rate {}/s, seed {} in {secs:.1}s ({:.1}M requests/s)",
        a.out.display(),
        scenario.name(),
        cfg.objects,
        cfg.alpha,
        cfg.rate,
        cfg.seed,
        n as f64 / secs.max(1e-9) / 1e6
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: TraceCmd,
    }

    fn parse(args: &[&str]) -> Result<TraceCmd, clap::Error> {
        let mut v = vec!["trace"];
        v.extend_from_slice(args);
        Cli::try_parse_from(v).map(|c| c.cmd)
    }

    fn run_args(args: &[&str]) -> Result<()> {
        run(parse(args).map_err(|e| anyhow::anyhow!("{e}"))?)
    }

    #[test]
    fn json_is_one_flat_object() {
        let reqs = [ecdn_trace::Request {
            time: 3,
            id: 1,
            size: 10,
            next_access: -1,
        }];
        let stats = TraceStats::compute(&mut ecdn_trace::SliceReader::new(&reqs)).unwrap();
        let json = stats_json(Path::new("a \"b\".txt"), &Format::Text, &stats).unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["trace"], "a \"b\".txt");
        assert_eq!(v["format"], "text");
        assert_eq!(v["requests"], 1);
        assert_eq!(v["request_sizes"]["p50"], 10);
        assert!(json.starts_with("{\"trace\":"));
    }

    #[test]
    fn bad_flag_values_are_clap_errors() {
        for args in [
            &["gen", "--out", "x.bin", "--requests", "lots"][..],
            &["gen", "--out", "x.bin", "--sizes", "gamma:1"],
            &["gen", "--out", "x.bin", "--scenario", "chaos"],
            &["gen", "--out", "x.bin", "--alpha", "high"],
            &["stats", "x.csv", "--csv-time", "first"],
            &["stats", "x.csv", "--csv-delimiter", "ab"],
            &["stats", "x.csv", "--csv-header", "maybe"],
            &["stats", "x.bin", "--format", "parquet"],
            &["convert", "a.txt", "b.bin", "--to", "json"],
        ] {
            let err = parse(args)
                .err()
                .unwrap_or_else(|| panic!("{args:?} parsed"));
            assert!(err.to_string().contains("invalid value"), "{args:?}: {err}");
        }
    }

    #[test]
    fn gen_convert_stats_end_to_end() {
        let dir = tempfile::tempdir().unwrap();
        let p = |n: &str| dir.path().join(n).display().to_string();
        run_args(&[
            "gen",
            "--out",
            &p("g.bin.zst"),
            "--requests",
            "20k",
            "--objects",
            "1k",
            "--sizes",
            "lognormal:8KiB:1",
            "--seed",
            "3",
        ])
        .unwrap();
        run_args(&["convert", &p("g.bin.zst"), &p("g.txt")]).unwrap();
        run_args(&["convert", &p("g.txt"), &p("g.csv")]).unwrap();
        run_args(&["convert", &p("g.csv"), &p("g2.bin.zst")]).unwrap();
        let read = |n: &str| {
            ecdn_trace::read_all(
                &mut ecdn_trace::open(Path::new(&p(n)), &OpenOptions::default()).unwrap(),
            )
            .unwrap()
        };
        let a = read("g.bin.zst");
        assert_eq!(a.len(), 20_000);
        assert_eq!(a, read("g2.bin.zst"));
        assert!(a.iter().any(|r| r.next_access >= 0));
        run_args(&["stats", &p("g.bin.zst"), "--json"]).unwrap();
        run_args(&["stats", &p("g.csv"), "--csv-header", "yes"]).unwrap();
        // Same flags, same trace.
        run_args(&[
            "gen",
            "--out",
            &p("h.txt"),
            "--requests",
            "20k",
            "--objects",
            "1k",
            "--sizes",
            "lognormal:8KiB:1",
            "--seed",
            "3",
        ])
        .unwrap();
        assert_eq!(
            std::fs::read(p("h.txt")).unwrap(),
            std::fs::read(p("g.txt")).unwrap()
        );
        for scenario in ["randomized", "adversarial"] {
            run_args(&[
                "gen",
                "--out",
                &p("s.txt"),
                "--requests",
                "10k",
                "--objects",
                "500",
                "--scenario",
                scenario,
            ])
            .unwrap();
        }
        run_args(&[
            "gen",
            "--out",
            &p("a.txt"),
            "--requests",
            "10k",
            "--scenario",
            "adversarial",
            "--phase",
            "2k",
        ])
        .unwrap();
    }

    #[test]
    fn generates_from_a_footprint_descriptor() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("f.txt").display().to_string();
        let fp = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../ecdn-sim/tests/data/footprint-mini"
        );
        let gen = |extra: &[&str]| {
            let mut args = vec!["gen", "--out", &out, "--footprint", fp, "-n", "3000"];
            args.extend_from_slice(extra);
            run_args(&args)
        };
        gen(&["--warmup", "500", "--seed", "3"]).unwrap();
        let text = std::fs::read_to_string(&out).unwrap();
        assert_eq!(text.lines().count(), 3000);
        // Mean rate of the descriptor: 30,500 requests in 86,400 s.
        assert!(
            text.lines().last().unwrap().starts_with("8"),
            "{}",
            text.lines().last().unwrap()
        );
        gen(&["--warmup", "0", "--within-bin", "floor", "--rate", "100"]).unwrap();
        let msg = |r: Result<()>| format!("{:#}", r.unwrap_err());
        let e = msg(gen(&["--objects", "5"]));
        assert!(e.contains("--objects does not apply"), "{e}");
        let e = msg(run_args(&["gen", "--out", &out, "--warmup", "5"]));
        assert!(e.contains("only with --footprint"), "{e}");
        let e = msg(run_args(&[
            "gen",
            "--out",
            &out,
            "--footprint",
            "/nonexistent",
        ]));
        assert!(
            e.contains("footprint descriptor") && e.contains("pfd.txt"),
            "{e}"
        );
        run_args(&[
            "footprint",
            fp,
            "--trace",
            &out,
            "--size",
            "1000000B,4000000B",
        ])
        .unwrap();
    }

    #[test]
    fn helpful_errors() {
        let dir = tempfile::tempdir().unwrap();
        let p = |n: &str| dir.path().join(n).display().to_string();
        let msg = |r: Result<()>| format!("{:#}", r.unwrap_err());
        let e = msg(run_args(&["gen", "--out", &p("x.dat")]));
        assert!(e.contains("--to"), "{e}");
        let e = msg(run_args(&["gen", "--out", &p("x.txt"), "--change-at", "5"]));
        assert!(e.contains("randomized"), "{e}");
        let e = msg(run_args(&[
            "gen",
            "--out",
            &p("x.txt"),
            "--scenario",
            "adversarial",
            "--sizes",
            "web-video",
        ]));
        assert!(e.contains("--sizes"), "{e}");
        let e = msg(run_args(&["gen", "--out", &p("x.txt"), "--rate", "0"]));
        assert!(e.contains("rate"), "{e}");
        let e = msg(run_args(&["gen", "--out", &p("x.txt"), "--alpha", "-1"]));
        assert!(e.contains("alpha"), "{e}");
        let e = msg(run_args(&["gen", "--out", &p("x.txt"), "--objects", "0"]));
        assert!(e.contains("objects"), "{e}");
        let e = msg(run_args(&["stats", &p("missing.bin")]));
        assert!(e.contains("missing.bin"), "{e}");
        assert_eq!(e.matches("os error").count(), 1, "{e}");
        std::fs::write(p("t.txt"), "1 2 3\n4 5\n").unwrap();
        let e = msg(run_args(&["stats", &p("t.txt")]));
        assert!(e.contains("line 2"), "{e}");
        let e = msg(run_args(&["stats", &p("t.txt"), "--csv-id", "3"]));
        assert!(e.contains("CSV"), "{e}");
        let e = msg(run_args(&[
            "stats",
            &p("t.txt"),
            "--format",
            "csv",
            "--csv-id",
            "2",
            "--csv-size",
            "2",
        ]));
        assert!(e.contains("column"), "{e}");
        let e = msg(run_args(&[
            "convert",
            &p("t.txt"),
            &p("t.txt"),
            "--to",
            "text",
        ]));
        assert!(e.contains("same file"), "{e}");
        std::fs::write(p("big.txt"), "1 2 5000000000\n").unwrap();
        let e = msg(run_args(&["convert", &p("big.txt"), &p("big.bin")]));
        assert!(e.contains("record 0") && e.contains("size"), "{e}");
    }
}
