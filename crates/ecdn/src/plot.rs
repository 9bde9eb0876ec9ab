//! Plots of simulation results, as PNG or SVG (chosen by the output file's extension):
//! miss ratio vs cache size ([`miss_ratio_vs_size`]), AdaptSize's model against measurement
//! ([`model_curve`], the paper's Fig. 9) and per-window time series with the admission parameter
//! c ([`series`], the paper's §6.3 traffic-mix experiments). Cluster simulations (C2DN) have
//! their own: miss ratios, unprotected fraction and write imbalance against total cache size
//! ([`cluster_vs_size`], C2DN Fig. 5 and 6b–d), the relative miss-ratio change around the first
//! unavailability ([`cluster_spike`], Fig. 6a and 7) and per-window miss ratios over a whole
//! unavailability record ([`cluster_series`]).
//!
//! Text is drawn by plotters' `ab_glyph` feature, which never looks for system fonts by itself:
//! the first plot loads a TrueType font from `$ECDN_FONT` or from a few common system paths
//! ([`FONT_PATHS`]) and registers it as plotters' `sans-serif` family. Both backends need it —
//! the SVG backend measures text for the layout, too.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{anyhow, bail, Context, Result};
use ecdn_sim::cluster::{ClusterResult, UnavailabilityResult};
use ecdn_sim::model_check::ModelPoint;
use ecdn_sim::SimResult;
use ecdn_trace::units::format_size;
use plotters::chart::MeshStyle;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// The font family every text of a plot uses; [`ensure_font`] registers it.
const FAMILY: &str = "sans-serif";

/// Where [`ensure_font`] looks for a font when `$ECDN_FONT` is not set, in order.
const FONT_PATHS: &[&str] = &[
    // Debian / Ubuntu: fonts-dejavu-core, fonts-liberation(2), fonts-noto-core, fonts-freefont-ttf.
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation2/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
    // Fedora / RHEL.
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
    "/usr/share/fonts/google-noto/NotoSans-Regular.ttf",
    // Arch.
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/noto/NotoSans-Regular.ttf",
    "/usr/share/fonts/liberation/LiberationSans-Regular.ttf",
    // macOS and Windows.
    "/System/Library/Fonts/Supplemental/Arial.ttf",
    "/Library/Fonts/Arial.ttf",
    "C:\\Windows\\Fonts\\arial.ttf",
];

const NO_FONT: &str = "no TTF font found for plotting; install Debian's fonts-dejavu-core or set \
                       ECDN_FONT=/path/to/font.ttf";

/// Distinct line colors: the usual ten-color qualitative palette, then black and darker
/// variants, so sweeps of up to sixteen lines stay distinguishable.
const COLORS: [RGBColor; 16] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(0, 0, 0),
    RGBColor(0, 63, 92),
    RGBColor(128, 64, 0),
    RGBColor(0, 100, 0),
    RGBColor(128, 0, 64),
    RGBColor(90, 60, 140),
];

/// Miss ratio of each policy against cache size: object miss ratio on the left, byte miss ratio
/// on the right, cache size on a log2 axis; one line per policy (`r.policy`).
pub fn miss_ratio_vs_size(path: &Path, results: &[SimResult]) -> Result<()> {
    let fig = SizeFigure::new(results)?;
    render(path, &fig)
}

/// AdaptSize's model against measurement: the object hit ratio the model predicts for each c as
/// a line, the measured one as dots, c on a log2 axis (AdaptSize Fig. 9).
pub fn model_curve(path: &Path, points: &[ModelPoint], capacity: u64) -> Result<()> {
    let fig = ModelFigure::new(points, capacity)?;
    render(path, &fig)
}

/// Per-window time series of the results that have one: the miss ratio of each window against
/// the request index on top and, below, the admission parameter c (log2 axis) of the results
/// whose policy has one. The panel for c is left out when no result has it.
pub fn series(path: &Path, results: &[SimResult]) -> Result<()> {
    let fig = SeriesFigure::new(results)?;
    render(path, &fig)
}

/// Cluster results against total cluster cache size (x, log2 axis), one line per scheme
/// (`r.scheme`), in four panels: (a) byte miss ratio (C2DN Fig. 5), (b) object miss ratio,
/// (c) unprotected fraction (Fig. 6b/c) and (d) write imbalance, max/min bytes written per
/// server (Fig. 6d). An infinite imbalance (a server wrote nothing) is drawn on a dashed line
/// at the top of panel (d), labelled as such.
pub fn cluster_vs_size(path: &Path, results: &[ClusterResult]) -> Result<()> {
    let fig = ClusterSizeFigure::new(results)?;
    render(path, &fig)
}

/// The per-window relative object miss-ratio change `relative_miss_change` (in percent) of
/// each row against the window index relative to its first unavailability start, from 3
/// windows before to `after` windows after (clipped to the windows there are), one line per
/// row, labelled "scheme @ size" (C2DN Fig. 6a, 7). A row without an unavailability start is
/// drawn whole, from window 0. Windows with a server unavailable are shaded (darker for two or
/// more); a line marks 0.
pub fn cluster_spike(path: &Path, rows: &[UnavailabilityResult], after: usize) -> Result<()> {
    let fig = SpikeFigure::new(rows, after)?;
    render(path, &fig)
}

/// A whole unavailability record: the per-window object miss ratio of each row on top (with
/// its run without unavailability as a dashed line at that run's overall miss ratio) and the
/// relative change against that run (percent) below. Windows with servers unavailable are
/// shaded, darker for two or more, and numbered with how many are down.
pub fn cluster_series(path: &Path, rows: &[UnavailabilityResult]) -> Result<()> {
    let fig = ClusterSeriesFigure::new(rows)?;
    render(path, &fig)
}

/// `ecdn demo`'s figure from its `(tier, latency in microseconds)` samples, in the order the
/// requests completed: the latency CDF of each tier on the left (latency in ms on a log10
/// axis) and, on the right, the share of requests served by the HOC, by disk and by the origin
/// (MISS and MISS-COLLAPSED; any other tier as "other") in each of about 20 windows of
/// completion order, stacked, showing the cache warm up.
pub fn demo(path: &Path, samples: &[(&str, u64)], title: &str) -> Result<()> {
    let fig = DemoFigure::new(samples, title)?;
    render(path, &fig)
}

/// Checks that `path` names a file a plot can be written to (.png or .svg), to fail before
/// work whose result would then be plotted.
pub fn check_output(path: &Path) -> Result<()> {
    output_format(path).map(|_| ())
}

// ---------------------------------------------------------------------------------------------
// Output and fonts.

/// A figure that can draw itself on any backend. [`render`] puts its legend below it, making
/// the image as much taller as the legend needs.
trait Figure {
    /// Size in pixels without the legend.
    fn size(&self) -> (u32, u32);
    fn legend(&self) -> Vec<LegendEntry>;
    /// Draws the figure (title and panels) on `area`, which is white already.
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static;
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum OutputFormat {
    Png,
    Svg,
}

fn output_format(path: &Path) -> Result<OutputFormat> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("png") => Ok(OutputFormat::Png),
        Some("svg") => Ok(OutputFormat::Svg),
        _ => bail!(
            "cannot plot to {}: the file name must end in .png or .svg",
            path.display()
        ),
    }
}

fn render(path: &Path, fig: &impl Figure) -> Result<()> {
    let format = output_format(path)?;
    ensure_font()?;
    let (width, height) = fig.size();
    let entries = fig.legend();
    // Lay the legend out first (text is measured with the registered font, the same for both
    // backends) to know how tall the image must be.
    let (rows, legend_height) = {
        let mut scratch = String::new();
        let area = SVGBackend::with_string(&mut scratch, (width, height)).into_drawing_area();
        legend_layout(&area, &entries)?
    };
    let size = (width, height + legend_height);
    let drawn = match format {
        OutputFormat::Png => {
            let root = BitMapBackend::new(path, size).into_drawing_area();
            draw_figure(&root, fig, &entries, &rows).and_then(|()| Ok(root.present()?))
        }
        OutputFormat::Svg => {
            let root = SVGBackend::new(path, size).into_drawing_area();
            draw_figure(&root, fig, &entries, &rows).and_then(|()| Ok(root.present()?))
        }
    };
    drawn.with_context(|| format!("cannot write plot {}", path.display()))
}

fn draw_figure<DB>(
    root: &DrawingArea<DB, Shift>,
    fig: &impl Figure,
    entries: &[LegendEntry],
    rows: &[Vec<(i32, usize)>],
) -> Result<()>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let (plots, legend) = root.split_vertically(fig.size().1);
    draw_legend(&legend, entries, rows)?;
    fig.draw(&plots)
}

/// Registers the plotting font once per process; later calls return the first outcome.
fn ensure_font() -> Result<()> {
    static FONT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let loaded = FONT.get_or_init(|| load_font(std::env::var_os("ECDN_FONT"), FONT_PATHS));
    match loaded {
        Ok(_) => Ok(()),
        Err(e) => Err(anyhow!("{e}")),
    }
}

/// Registers `explicit` (`$ECDN_FONT`) if set — no fallback: the user asked for that file —
/// else the first of `candidates` that holds a usable font. Returns the file registered.
fn load_font(explicit: Option<OsString>, candidates: &[&str]) -> Result<PathBuf, String> {
    if let Some(p) = explicit.filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return register_font_file(&p)
            .map(|()| p.clone())
            .map_err(|e| format!("ECDN_FONT={}: {e}", p.display()));
    }
    candidates
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file() && register_font_file(p).is_ok())
        .ok_or_else(|| NO_FONT.to_string())
}

fn register_font_file(path: &Path) -> Result<(), String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    // plotters keeps fonts for the whole process and wants 'static bytes; this runs at most a
    // few times per process (once per candidate file).
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    plotters::style::register_font(FAMILY, FontStyle::Normal, bytes)
        .map_err(|_| "not a TrueType/OpenType font".to_string())
}

// ---------------------------------------------------------------------------------------------
// Shared drawing helpers.

#[derive(Clone, Copy, Debug, PartialEq)]
enum Marker {
    Circle,
    Triangle,
    Square,
    Cross,
}

const MARKERS: [Marker; 4] = [
    Marker::Circle,
    Marker::Triangle,
    Marker::Square,
    Marker::Cross,
];

/// Color and marker of the i-th line: unique for the first 40.
fn style_of(i: usize) -> (RGBColor, Marker) {
    (
        COLORS[i % COLORS.len()],
        MARKERS[(i + i / COLORS.len()) % MARKERS.len()],
    )
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum LineKind {
    None,
    Solid,
    Dashed,
    /// A filled box of the entry's color (shaded regions).
    Area,
}

/// One legend entry: what its sample looks like and its text.
struct LegendEntry {
    label: String,
    color: RGBColor,
    line: LineKind,
    marker: Option<Marker>,
}

fn text_style(size: f64) -> TextStyle<'static> {
    (FAMILY, size).into_font().color(&BLACK)
}

fn title_style() -> TextStyle<'static> {
    text_style(22.0)
}

fn caption_style() -> TextStyle<'static> {
    text_style(18.0)
}

fn label_style() -> TextStyle<'static> {
    text_style(15.0)
}

fn desc_style() -> TextStyle<'static> {
    text_style(16.0)
}

fn legend_style() -> TextStyle<'static> {
    text_style(16.0)
}

/// Draws `marker` centered on `at`, in chart or pixel coordinates alike.
fn marker_element<DB, CT>(
    area: &DrawingArea<DB, CT>,
    at: CT::From,
    marker: Marker,
    color: RGBColor,
) -> Result<()>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
    CT: CoordTranslate,
{
    let e = EmptyElement::at(at);
    match marker {
        Marker::Circle => area.draw(&(e + Circle::new((0, 0), 4, color.filled())))?,
        Marker::Triangle => area.draw(&(e + TriangleMarker::new((0, 0), 5, color.filled())))?,
        Marker::Square => {
            area.draw(&(e + Rectangle::new([(-4, -4), (4, 4)], color.filled())))?;
        }
        Marker::Cross => area.draw(&(e + Cross::new((0, 0), 4, color.stroke_width(2))))?,
    }
    Ok(())
}

/// Legend rows, each a list of (x in pixels, index of the entry).
type LegendRows = Vec<Vec<(i32, usize)>>;

/// Lays `entries` out in centered rows as wide as `area` and returns the height they need.
fn legend_layout<DB>(
    area: &DrawingArea<DB, Shift>,
    entries: &[LegendEntry],
) -> Result<(LegendRows, u32)>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
{
    const SAMPLE: i32 = 30;
    const GAP: i32 = 6;
    const SPACING: i32 = 28;
    const ROW: i32 = 26;
    let width = area.dim_in_pixel().0 as i32 - 40;
    let style = legend_style();
    let mut rows: LegendRows = Vec::new();
    let mut widths: Vec<i32> = Vec::new();
    let mut x = 0;
    for (i, e) in entries.iter().enumerate() {
        let (tw, _) = area.estimate_text_size(&e.label, &style)?;
        let w = SAMPLE + GAP + tw as i32;
        if rows.is_empty() || (x > 0 && x + w > width) {
            rows.push(Vec::new());
            widths.push(0);
            x = 0;
        }
        rows.last_mut().expect("a row").push((x, i));
        x += w + SPACING;
        *widths.last_mut().expect("a row") = x - SPACING;
    }
    // Center each row.
    let total = area.dim_in_pixel().0 as i32;
    for (row, w) in rows.iter_mut().zip(widths) {
        let left = ((total - w) / 2).max(4);
        for (x, _) in row.iter_mut() {
            *x += left;
        }
    }
    let height = (rows.len() as i32 * ROW + 12) as u32;
    Ok((rows, height))
}

fn draw_legend<DB>(
    area: &DrawingArea<DB, Shift>,
    entries: &[LegendEntry],
    rows: &[Vec<(i32, usize)>],
) -> Result<()>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
{
    let style = legend_style().pos(Pos::new(HPos::Left, VPos::Center));
    for (r, row) in rows.iter().enumerate() {
        let y = 6 + r as i32 * 26 + 13;
        for &(x, i) in row {
            let e = &entries[i];
            match e.line {
                LineKind::None => {}
                LineKind::Solid => {
                    area.draw(&PathElement::new(
                        vec![(x, y), (x + 30, y)],
                        e.color.stroke_width(2),
                    ))?;
                }
                LineKind::Dashed => {
                    for s in [0, 12, 24] {
                        area.draw(&PathElement::new(
                            vec![(x + s, y), (x + s + 6, y)],
                            e.color.stroke_width(2),
                        ))?;
                    }
                }
                LineKind::Area => {
                    area.draw(&Rectangle::new(
                        [(x, y - 8), (x + 30, y + 8)],
                        e.color.filled(),
                    ))?;
                    area.draw(&Rectangle::new(
                        [(x, y - 8), (x + 30, y + 8)],
                        BLACK.mix(0.35),
                    ))?;
                }
            }
            if let Some(m) = e.marker {
                marker_element(area, (x + 15, y), m, e.color)?;
            }
            area.draw(&Text::new(e.label.clone(), (x + 36, y), style.clone()))?;
        }
    }
    Ok(())
}

/// A logarithmic axis: values are logarithms (base 2 or 10), mapped linearly between `lo` and
/// `hi`, with labelled (bold) ticks and light grid lines at precomputed positions.
struct LogAxis {
    lo: f64,
    hi: f64,
    bold: Vec<f64>,
    light: Vec<f64>,
}

impl LogAxis {
    /// From 2^lo to 2^hi: bold ticks at powers of two, thinned to at most `max_ticks` (every
    /// k-th power, aligned to multiples of k so labels read 1MiB, 16MiB, ...), light grid lines at
    /// every power. With fewer than two powers in range the ticks are at `data` (log2s) instead.
    fn log2(lo: f64, hi: f64, max_ticks: usize, data: &[f64]) -> LogAxis {
        let light: Vec<f64> = ((lo.ceil() as i64)..=(hi.floor() as i64))
            .map(|k| k as f64)
            .collect();
        let bold: Vec<f64> = if light.len() >= 2 {
            let step = light.len().div_ceil(max_ticks.max(1)).max(1) as i64;
            light
                .iter()
                .copied()
                .filter(|&k| (k as i64).rem_euclid(step) == 0)
                .collect()
        } else {
            let mut d: Vec<f64> = data
                .iter()
                .copied()
                .filter(|v| (lo..=hi).contains(v))
                .collect();
            d.sort_by(f64::total_cmp);
            d.dedup();
            d
        };
        // Grid lines only where there are labels, unless the labels are thinned powers of two.
        let light = if light.len() >= 2 {
            light
        } else {
            bold.clone()
        };
        LogAxis {
            lo,
            hi,
            bold,
            light,
        }
    }

    /// From 10^lo to 10^hi: labels at 1, 2 and 5 times powers of ten (only at powers of ten
    /// when the range spans more than four decades), light grid lines at every integer multiple
    /// of a power of ten.
    fn log10(lo: f64, hi: f64) -> LogAxis {
        let multiples = |ms: &[f64]| -> Vec<f64> {
            ((lo.floor() as i64)..=(hi.ceil() as i64))
                .flat_map(|k| ms.iter().map(move |m| (m * 10f64.powi(k as i32)).log10()))
                .filter(|v| (lo..=hi).contains(v))
                .collect()
        };
        let bold = if hi - lo > 4.0 {
            multiples(&[1.0])
        } else {
            multiples(&[1.0, 2.0, 5.0])
        };
        let light = multiples(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
        LogAxis {
            lo,
            hi,
            bold,
            light,
        }
    }
}

impl Ranged for LogAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let t = if self.hi > self.lo {
            (v - self.lo) / (self.hi - self.lo)
        } else {
            0.5
        };
        limit.0 + ((limit.1 - limit.0) as f64 * t).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.light.clone()
        } else {
            self.bold.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

/// Tick label of a log2 axis value: the size 2^v in binary units.
fn size_label(v: &f64) -> String {
    format_size(v.exp2().round() as u64)
}

/// `lo..hi` of a log2 axis around the log2s `xs`, with room for markers at both ends.
fn log2_range(xs: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let (lo, hi) = min_max(xs)?;
    let pad = if hi - lo < 1e-9 {
        0.5
    } else {
        ((hi - lo) * 0.04).max(0.25)
    };
    Some((lo - pad, hi + pad))
}

/// `lo..hi` of a ratio axis around `vs`, padded and clamped to [0, 1].
fn ratio_range(vs: impl Iterator<Item = f64>) -> (f64, f64) {
    let Some((lo, hi)) = min_max(vs) else {
        return (0.0, 1.0);
    };
    let pad = ((hi - lo) * 0.08).max(0.02);
    let (lo, hi) = ((lo - pad).max(0.0), (hi + pad).min(1.0));
    if hi > lo {
        (lo, hi)
    } else {
        (0.0, 1.0)
    }
}

fn min_max(vs: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    vs.filter(|v| v.is_finite()).fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
    })
}

/// Tick label of a ratio axis spanning `span`: enough decimals to tell ticks apart.
fn ratio_label(span: f64) -> impl Fn(&f64) -> String {
    let decimals = if span >= 0.5 {
        1
    } else if span >= 0.05 {
        2
    } else {
        3
    };
    move |v: &f64| format!("{v:.decimals$}")
}

/// A request count the short way: 950, 12.5k, 3M, 1.2G.
fn count_label(v: f64) -> String {
    let (div, unit) = if v.abs() >= 1e9 {
        (1e9, "G")
    } else if v.abs() >= 1e6 {
        (1e6, "M")
    } else if v.abs() >= 1e3 {
        (1e3, "k")
    } else {
        (1.0, "")
    };
    let s = format!("{:.2}", v / div);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}{unit}")
}

/// An integer with thousands separators: 1,234,567.
pub(crate) fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let groups: Vec<String> = digits
        .as_bytes()
        .rchunks(3)
        .rev()
        .map(|g| String::from_utf8_lossy(g).into_owned())
        .collect();
    groups.join(",")
}

/// Draws one series: a line through `pts` (if `line` and there are two or more) and, if
/// `markers`, a marker at each point.
fn draw_line<DB, X, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    pts: &[(f64, f64)],
    color: RGBColor,
    marker: Marker,
    markers: bool,
) -> Result<()>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    if pts.len() >= 2 {
        chart.draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))?;
    }
    if markers || pts.len() < 2 {
        let area = chart.plotting_area();
        for &p in pts {
            marker_element(area, p, marker, color)?;
        }
    }
    Ok(())
}

/// Draws one line per entry of `lines` with [`draw_line`], the i-th in the i-th style
/// ([`style_of`]).
fn draw_lines<DB, X, Y, L>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    lines: impl IntoIterator<Item = L>,
    markers: bool,
) -> Result<()>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
    L: AsRef<[(f64, f64)]>,
{
    for (i, pts) in lines.into_iter().enumerate() {
        let (color, marker) = style_of(i);
        draw_line(chart, pts.as_ref(), color, marker, markers)?;
    }
    Ok(())
}

/// Legend entries of lines drawn by [`draw_lines`]: the i-th label with the i-th style, a
/// solid line and, if `markers`, its marker.
fn line_legend<'l>(labels: impl Iterator<Item = &'l str>, markers: bool) -> Vec<LegendEntry> {
    labels
        .enumerate()
        .map(|(i, label)| {
            let (color, marker) = style_of(i);
            LegendEntry {
                label: label.to_string(),
                color,
                line: LineKind::Solid,
                marker: markers.then_some(marker),
            }
        })
        .collect()
}

/// A chart builder on `area` as every panel has it: 12 px margins (24 on the right with
/// `room_right`), label areas of `x_area` px below and `y_area` px left, and `caption` on top.
fn chart_on<'a, 'b, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    caption: Option<&str>,
    room_right: bool,
    (x_area, y_area): (u32, u32),
) -> ChartBuilder<'a, 'b, DB> {
    let mut builder = ChartBuilder::on(area);
    builder
        .margin(12)
        .x_label_area_size(x_area)
        .y_label_area_size(y_area);
    if room_right {
        builder.margin_right(24);
    }
    if let Some(caption) = caption {
        builder.caption(caption, caption_style());
    }
    builder
}

/// The mesh of `chart` in the style every panel has: label and axis description fonts and a
/// faint grid; the caller adds formatters and descriptions and draws it.
fn mesh<'a, 'b, DB, X, Y>(
    chart: &'b mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
) -> MeshStyle<'a, 'b, X, Y, DB>
where
    DB: DrawingBackend,
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let mut mesh = chart.configure_mesh();
    mesh.label_style(label_style())
        .axis_desc_style(desc_style())
        .bold_line_style(BLACK.mix(0.15))
        .light_line_style(BLACK.mix(0.05));
    mesh
}

/// Builds a chart with cache sizes on a log2 x axis (`x`: log2s, at most `max_ticks` labels,
/// ticks at the log2s `data` when few powers of two are in range) and `y` on a linear one, and
/// draws its mesh: size labels, `y_fmt` with 8 labels and the axis descriptions `desc` (x, y).
fn size_chart<'c, DB>(
    builder: &mut ChartBuilder<'_, '_, DB>,
    (x, max_ticks, data): ((f64, f64), usize, &[f64]),
    (ylo, yhi): (f64, f64),
    y_fmt: &dyn Fn(&f64) -> String,
    (x_desc, y_desc): (&str, &str),
) -> Result<ChartContext<'c, DB, Cartesian2d<LogAxis, RangedCoordf64>>>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
{
    let x_axis = LogAxis::log2(x.0, x.1, max_ticks, data);
    let mut chart = builder.build_cartesian_2d(x_axis, ylo..yhi)?;
    mesh(&mut chart)
        .x_label_formatter(&size_label)
        .y_label_formatter(y_fmt)
        .y_labels(8)
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()?;
    Ok(chart)
}

/// What is left of `area` below `title`.
fn titled<DB>(area: &DrawingArea<DB, Shift>, title: &str) -> Result<DrawingArea<DB, Shift>>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
{
    Ok(area.titled(title, title_style())?)
}

/// `area` below `title`, split evenly into `grid` (rows, columns) panels.
fn titled_panels<DB>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    grid: (usize, usize),
) -> Result<Vec<DrawingArea<DB, Shift>>>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
{
    Ok(titled(area, title)?.split_evenly(grid))
}

/// `area` split into a top part `percent` of its height tall and the rest below.
fn split_at_percent<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    percent: i32,
) -> (DrawingArea<DB, Shift>, DrawingArea<DB, Shift>) {
    let h = area.dim_in_pixel().1 as i32;
    area.split_vertically(h * percent / 100)
}

/// One line of a figure against cache size: its label and its points, by size.
struct Curve<P> {
    label: String,
    points: Vec<P>,
}

/// Groups `(label, point)`s into curves, in the order the labels first come, each sorted by
/// `x` (a log2 size); returns them with the log2 axis range around all x's (None: no point).
fn group_curves<'l, P>(
    labelled: impl Iterator<Item = (&'l str, P)>,
    x: impl Fn(&P) -> f64,
) -> (Vec<Curve<P>>, Option<(f64, f64)>) {
    let mut curves: Vec<Curve<P>> = Vec::new();
    for (label, p) in labelled {
        match curves.iter_mut().find(|c| c.label == label) {
            Some(c) => c.points.push(p),
            None => curves.push(Curve {
                label: label.to_string(),
                points: vec![p],
            }),
        }
    }
    for c in &mut curves {
        c.points.sort_by(|a, b| x(a).total_cmp(&x(b)));
    }
    let range = log2_range(curves.iter().flat_map(|c| c.points.iter().map(&x)));
    (curves, range)
}

/// The x's of all points of `curves`.
fn curve_xs<P>(curves: &[Curve<P>], x: impl Fn(&P) -> f64) -> Vec<f64> {
    curves
        .iter()
        .flat_map(|c| c.points.iter().map(&x))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Miss ratio vs cache size.

struct SizeFigure {
    /// One per policy: (log2 cache size, object miss ratio, byte miss ratio), by size.
    curves: Vec<Curve<(f64, f64, f64)>>,
    x: (f64, f64),
    subtitle: String,
}

impl SizeFigure {
    fn new(results: &[SimResult]) -> Result<SizeFigure> {
        let (curves, x) = group_curves(
            results.iter().filter(|r| r.cache_size > 0).map(|r| {
                let p = (
                    (r.cache_size as f64).log2(),
                    r.miss_ratio,
                    r.byte_miss_ratio,
                );
                (r.policy.as_str(), p)
            }),
            |p| p.0,
        );
        let Some(x) = x else {
            bail!("nothing to plot: no simulation results");
        };
        let subtitle = match same_value(results.iter().map(|r| r.requests)) {
            Some(n) => format!(" ({} measured requests)", grouped(n)),
            None => String::new(),
        };
        Ok(SizeFigure {
            curves,
            x,
            subtitle,
        })
    }

    fn panel<DB>(
        &self,
        area: &DrawingArea<DB, Shift>,
        title: &str,
        value: fn(&(f64, f64, f64)) -> f64,
    ) -> Result<()>
    where
        DB: DrawingBackend,
        DB::ErrorType: 'static,
    {
        let (ylo, yhi) = ratio_range(self.curves.iter().flat_map(|c| c.points.iter().map(value)));
        let data = curve_xs(&self.curves, |p| p.0);
        let y_fmt = ratio_label(yhi - ylo);
        let mut chart = size_chart(
            &mut chart_on(area, Some(title), false, (52, 72)),
            (self.x, 9, &data),
            (ylo, yhi),
            &y_fmt,
            ("cache size", &title.to_lowercase()),
        )?;
        draw_lines(
            &mut chart,
            self.curves.iter().map(|c| {
                c.points
                    .iter()
                    .map(|p| (p.0, value(p)))
                    .filter(|p| p.1.is_finite())
                    .collect::<Vec<(f64, f64)>>()
            }),
            true,
        )
    }
}

impl Figure for SizeFigure {
    fn size(&self) -> (u32, u32) {
        (1400, 600)
    }

    fn legend(&self) -> Vec<LegendEntry> {
        line_legend(self.curves.iter().map(|c| c.label.as_str()), true)
    }

    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let title = format!("Miss ratio vs cache size{}", self.subtitle);
        let panels = titled_panels(area, &title, (1, 2))?;
        self.panel(&panels[0], "Object miss ratio", |p| p.1)?;
        self.panel(&panels[1], "Byte miss ratio", |p| p.2)?;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Model vs measurement.

struct ModelFigure {
    /// (log2 c, predicted OHR, measured OHR), by c.
    points: Vec<(f64, f64, f64)>,
    capacity: u64,
    x: (f64, f64),
}

impl ModelFigure {
    fn new(points: &[ModelPoint], capacity: u64) -> Result<ModelFigure> {
        let mut pts: Vec<(f64, f64, f64)> = points
            .iter()
            .filter(|p| p.c > 0.0 && p.c.is_finite())
            .map(|p| (p.c.log2(), p.predicted_ohr, p.measured_ohr))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let Some(x) = log2_range(pts.iter().map(|p| p.0)) else {
            bail!("nothing to plot: no model points");
        };
        Ok(ModelFigure {
            points: pts,
            capacity,
            x,
        })
    }

    /// The c the model would pick (log2): where its predicted OHR peaks.
    fn best_c(&self) -> Option<f64> {
        self.points
            .iter()
            .filter(|p| p.1.is_finite())
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|p| p.0)
    }
}

const MODEL_COLOR: RGBColor = COLORS[0];
const MEASURED_COLOR: RGBColor = COLORS[3];
const BEST_C_COLOR: RGBColor = RGBColor(90, 90, 90);

impl Figure for ModelFigure {
    fn size(&self) -> (u32, u32) {
        (1000, 640)
    }

    fn legend(&self) -> Vec<LegendEntry> {
        let mut entries = vec![
            LegendEntry {
                label: "model prediction".into(),
                color: MODEL_COLOR,
                line: LineKind::Solid,
                marker: None,
            },
            LegendEntry {
                label: "measured (LRU, admission e^(-size/c))".into(),
                color: MEASURED_COLOR,
                line: LineKind::None,
                marker: Some(Marker::Circle),
            },
        ];
        if let Some(b) = self.best_c() {
            entries.push(LegendEntry {
                label: format!("model's best c = {}", size_label(&b)),
                color: BEST_C_COLOR,
                line: LineKind::Dashed,
                marker: None,
            });
        }
        entries
    }

    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let max_err = self
            .points
            .iter()
            .map(|p| (p.1 - p.2).abs())
            .filter(|e| e.is_finite())
            .fold(0.0, f64::max);
        let title = format!(
            "AdaptSize model vs measurement, cache size {} (max |error| {max_err:.3})",
            format_size(self.capacity)
        );
        let plot = titled(area, &title)?;
        let (ylo, yhi) = ratio_range(self.points.iter().flat_map(|p| [p.1, p.2]));
        let data: Vec<f64> = self.points.iter().map(|p| p.0).collect();
        let y_fmt = ratio_label(yhi - ylo);
        let mut chart = size_chart(
            &mut chart_on(&plot, None, true, (52, 72)),
            (self.x, 12, &data),
            (ylo, yhi),
            &y_fmt,
            ("admission parameter c", "object hit ratio"),
        )?;
        if let Some(b) = self.best_c() {
            chart.draw_series(DashedLineSeries::new(
                [(b, ylo), (b, yhi)],
                6,
                6,
                BEST_C_COLOR.stroke_width(1),
            ))?;
        }
        let predicted: Vec<(f64, f64)> = self
            .points
            .iter()
            .map(|p| (p.0, p.1))
            .filter(|p| p.1.is_finite())
            .collect();
        draw_line(&mut chart, &predicted, MODEL_COLOR, Marker::Circle, false)?;
        let area = chart.plotting_area();
        for p in self.points.iter().filter(|p| p.2.is_finite()) {
            marker_element(area, (p.0, p.2), Marker::Circle, MEASURED_COLOR)?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Time series.

struct Track {
    label: String,
    /// (request index, miss ratio) per window.
    miss: Vec<(f64, f64)>,
    /// (request index, log2 c) per window that has a positive c.
    c: Vec<(f64, f64)>,
}

struct SeriesFigure {
    tracks: Vec<Track>,
    /// Requests per window, if the same for all.
    window: Option<u64>,
    /// Warm-up requests, if the same for all and positive.
    warmup: Option<u64>,
    x_max: f64,
}

impl SeriesFigure {
    fn new(results: &[SimResult]) -> Result<SeriesFigure> {
        let with: Vec<&SimResult> = results.iter().filter(|r| !r.series.is_empty()).collect();
        if with.is_empty() {
            bail!("nothing to plot: no result has a time series (simulate with --series N)");
        }
        let mut sizes: Vec<u64> = with.iter().map(|r| r.cache_size).collect();
        sizes.sort_unstable();
        sizes.dedup();
        let tracks: Vec<Track> = with
            .iter()
            .map(|r| Track {
                label: if sizes.len() > 1 {
                    format!("{} @ {}", r.policy, format_size(r.cache_size))
                } else {
                    r.policy.clone()
                },
                miss: r
                    .series
                    .iter()
                    .map(|w| (w.end as f64, w.miss_ratio))
                    .filter(|p| p.1.is_finite())
                    .collect(),
                c: r.series
                    .iter()
                    .filter_map(|w| Some((w.end as f64, w.c?)))
                    .filter(|p| p.1 > 0.0 && p.1.is_finite())
                    .map(|(x, c)| (x, c.log2()))
                    .collect(),
            })
            .collect();
        let window = same_value(with.iter().map(|r| r.series[0].requests));
        let warmup = same_value(with.iter().map(|r| r.warmup)).filter(|&w| w > 0);
        let x_max = with
            .iter()
            .flat_map(|r| r.series.iter().map(|w| w.end))
            .max()
            .unwrap_or(1)
            .max(1) as f64
            // Room for the last window's marker.
            * 1.015;
        Ok(SeriesFigure {
            tracks,
            window,
            warmup,
            x_max,
        })
    }

    fn has_c(&self) -> bool {
        self.tracks.iter().any(|t| !t.c.is_empty())
    }

    /// Markers on each window when there are few enough to tell apart.
    fn markers(&self) -> bool {
        self.tracks.iter().map(|t| t.miss.len()).max().unwrap_or(0) <= 40
    }

    fn shade_warmup<DB, Y>(
        &self,
        chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, Y>>,
        ylo: f64,
        yhi: f64,
    ) -> Result<()>
    where
        DB: DrawingBackend,
        DB::ErrorType: 'static,
        Y: Ranged<ValueType = f64>,
    {
        if let Some(w) = self.warmup {
            let w = (w as f64).min(self.x_max);
            chart.draw_series(std::iter::once(Rectangle::new(
                [(0.0, ylo), (w, yhi)],
                BLACK.mix(0.06).filled(),
            )))?;
            chart.draw_series(std::iter::once(
                EmptyElement::at((0.0, yhi))
                    + Text::new(
                        "warm-up",
                        (5, 5),
                        label_style().pos(Pos::new(HPos::Left, VPos::Top)),
                    ),
            ))?;
        }
        Ok(())
    }

    fn miss_panel<DB>(&self, area: &DrawingArea<DB, Shift>, x_desc: bool) -> Result<()>
    where
        DB: DrawingBackend,
        DB::ErrorType: 'static,
    {
        let (ylo, yhi) = ratio_range(self.tracks.iter().flat_map(|t| t.miss.iter().map(|p| p.1)));
        let caption = match self.window {
            Some(n) => format!(
                "Object miss ratio per window of {} requests",
                count_label(n as f64)
            ),
            None => "Object miss ratio per window".to_string(),
        };
        let x_area = if x_desc { 52 } else { 30 };
        let mut chart = chart_on(area, Some(&caption), true, (x_area, 72))
            .build_cartesian_2d(0.0..self.x_max, ylo..yhi)?;
        let y_fmt = ratio_label(yhi - ylo);
        let x_fmt = |v: &f64| count_label(*v);
        let mut mesh = mesh(&mut chart);
        mesh.x_label_formatter(&x_fmt)
            .y_label_formatter(&y_fmt)
            .x_labels(12)
            .y_labels(8)
            .y_desc("miss ratio");
        if x_desc {
            mesh.x_desc("requests");
        }
        mesh.draw()?;
        self.shade_warmup(&mut chart, ylo, yhi)?;
        draw_lines(
            &mut chart,
            self.tracks.iter().map(|t| &t.miss),
            self.markers(),
        )
    }

    fn c_panel<DB>(&self, area: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB: DrawingBackend,
        DB::ErrorType: 'static,
    {
        let Some((lo, hi)) = min_max(self.tracks.iter().flat_map(|t| t.c.iter().map(|p| p.1)))
        else {
            return Ok(());
        };
        let (lo, hi) = if hi - lo < 1.0 {
            let mid = (lo + hi) / 2.0;
            (mid - 1.0, mid + 1.0)
        } else {
            let pad = (hi - lo) * 0.06;
            (lo - pad, hi + pad)
        };
        let data: Vec<f64> = self
            .tracks
            .iter()
            .flat_map(|t| t.c.iter().map(|p| p.1))
            .collect();
        let mut chart = chart_on(area, Some("Admission parameter c"), true, (52, 72))
            .build_cartesian_2d(0.0..self.x_max, LogAxis::log2(lo, hi, 8, &data))?;
        let x_fmt = |v: &f64| count_label(*v);
        mesh(&mut chart)
            .x_label_formatter(&x_fmt)
            .y_label_formatter(&size_label)
            .x_labels(12)
            .x_desc("requests")
            .y_desc("c (bytes)")
            .draw()?;
        self.shade_warmup(&mut chart, lo, hi)?;
        // Tracks without c draw nothing but keep their style index.
        draw_lines(&mut chart, self.tracks.iter().map(|t| &t.c), self.markers())
    }
}

impl Figure for SeriesFigure {
    fn size(&self) -> (u32, u32) {
        if self.has_c() {
            (1200, 880)
        } else {
            (1200, 560)
        }
    }

    fn legend(&self) -> Vec<LegendEntry> {
        line_legend(self.tracks.iter().map(|t| t.label.as_str()), self.markers())
    }

    fn draw<DB: DrawingBackend>(&self, plots: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        if self.has_c() {
            let (top, bottom) = split_at_percent(plots, 55);
            self.miss_panel(&top, false)?;
            self.c_panel(&bottom)?;
        } else {
            self.miss_panel(plots, true)?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Cluster simulations (C2DN).

/// One cluster result on the size axis.
#[derive(Clone, Copy, Debug)]
struct ClusterPoint {
    /// log2 of the total cache size.
    x: f64,
    byte_miss: f64,
    miss: f64,
    unprotected: f64,
    imbalance: f64,
}

struct ClusterSizeFigure {
    /// One per scheme.
    curves: Vec<Curve<ClusterPoint>>,
    x: (f64, f64),
    subtitle: String,
}

/// Which quantity a panel of [`ClusterSizeFigure`] shows.
#[derive(Clone, Copy, Debug, PartialEq)]
enum ClusterPanel {
    ByteMiss,
    Miss,
    Unprotected,
    Imbalance,
}

impl ClusterPanel {
    fn value(self, p: &ClusterPoint) -> f64 {
        match self {
            ClusterPanel::ByteMiss => p.byte_miss,
            ClusterPanel::Miss => p.miss,
            ClusterPanel::Unprotected => p.unprotected,
            ClusterPanel::Imbalance => p.imbalance,
        }
    }

    /// Caption and y-axis description.
    fn text(self) -> (&'static str, &'static str) {
        match self {
            ClusterPanel::ByteMiss => ("(a) Byte miss ratio", "byte miss ratio"),
            ClusterPanel::Miss => ("(b) Object miss ratio", "object miss ratio"),
            ClusterPanel::Unprotected => (
                "(c) Unprotected fraction of cached requests",
                "unprotected fraction",
            ),
            ClusterPanel::Imbalance => (
                "(d) Write imbalance (max/min bytes written per server)",
                "write imbalance (max/min)",
            ),
        }
    }
}

impl ClusterSizeFigure {
    fn new(results: &[ClusterResult]) -> Result<ClusterSizeFigure> {
        let (curves, x) = group_curves(
            results.iter().filter(|r| r.cache_size > 0).map(|r| {
                let p = ClusterPoint {
                    x: (r.cache_size as f64).log2(),
                    byte_miss: r.byte_miss_ratio,
                    miss: r.miss_ratio,
                    unprotected: r.unprotected_fraction,
                    imbalance: r.write_imbalance,
                };
                (r.scheme.as_str(), p)
            }),
            |p| p.x,
        );
        let Some(x) = x else {
            bail!("nothing to plot: no cluster results with a positive cache size");
        };
        let mut parts = Vec::new();
        if let Some(n) = same_value(results.iter().map(|r| r.servers as u64)) {
            parts.push(format!("{n} servers"));
        }
        if let Some(n) = same_value(results.iter().map(|r| r.requests)) {
            parts.push(format!("{} requests", grouped(n)));
        }
        let subtitle = if parts.is_empty() {
            String::new()
        } else {
            format!(" ({})", parts.join(", "))
        };
        Ok(ClusterSizeFigure {
            curves,
            x,
            subtitle,
        })
    }

    fn panel<DB>(&self, area: &DrawingArea<DB, Shift>, panel: ClusterPanel) -> Result<()>
    where
        DB: DrawingBackend,
        DB::ErrorType: 'static,
    {
        let values = || {
            self.curves
                .iter()
                .flat_map(move |c| c.points.iter().map(move |p| panel.value(p)))
        };
        // The imbalance axis starts at 1 (perfect balance); infinite values go on a line of
        // their own above the finite ones.
        let (ylo, yhi, y_inf) = if panel == ClusterPanel::Imbalance {
            // With no finite value at all, an axis from 1 to about 2.
            let (hi, span) = match min_max(values().filter(|v| *v >= 1.0)) {
                Some((_, hi)) => (hi, (hi - 1.0).max(0.1)),
                None => (2.0, 1.0),
            };
            let top = hi + span * 0.08;
            if values().any(|v| v == f64::INFINITY) {
                let y_inf = top + span * 0.1;
                (1.0, y_inf + span * 0.1, Some(y_inf))
            } else {
                (1.0, top, None)
            }
        } else {
            let (lo, hi) = ratio_range(values());
            (lo, hi, None)
        };
        let data = curve_xs(&self.curves, |p| p.x);
        let (caption, y_desc) = panel.text();
        let y_fmt = plain_label(yhi - ylo);
        let y_label = |v: &f64| {
            if y_inf.is_some_and(|y| *v > y - (yhi - ylo) * 0.05) {
                // No tick label next to the ∞ line.
                String::new()
            } else {
                y_fmt(v)
            }
        };
        let mut chart = size_chart(
            &mut chart_on(area, Some(caption), true, (52, 72)),
            (self.x, 9, &data),
            (ylo, yhi),
            &y_label,
            ("total cluster cache size", y_desc),
        )?;
        if let Some(y) = y_inf {
            chart.draw_series(DashedLineSeries::new(
                [(self.x.0, y), (self.x.1, y)],
                6,
                5,
                BLACK.mix(0.45).stroke_width(1),
            ))?;
            chart.draw_series(std::iter::once(
                EmptyElement::at((self.x.1, y))
                    + Text::new(
                        "∞: a server wrote nothing",
                        (-6, -4),
                        label_style().pos(Pos::new(HPos::Right, VPos::Bottom)),
                    ),
            ))?;
        }
        for (i, c) in self.curves.iter().enumerate() {
            let (color, marker) = style_of(i);
            // Lines through runs of finite values; infinite ones as markers on the ∞ line.
            let mut run: Vec<(f64, f64)> = Vec::new();
            for p in &c.points {
                let v = panel.value(p);
                if v.is_finite() {
                    run.push((p.x, v));
                    continue;
                }
                draw_line(&mut chart, &run, color, marker, true)?;
                run.clear();
                if let (Some(y), true) = (y_inf, v == f64::INFINITY) {
                    marker_element(chart.plotting_area(), (p.x, y), marker, color)?;
                }
            }
            draw_line(&mut chart, &run, color, marker, true)?;
        }
        Ok(())
    }
}

impl Figure for ClusterSizeFigure {
    fn size(&self) -> (u32, u32) {
        (1400, 1080)
    }

    fn legend(&self) -> Vec<LegendEntry> {
        line_legend(self.curves.iter().map(|c| c.label.as_str()), true)
    }

    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let title = format!("Cluster schemes vs total cache size{}", self.subtitle);
        let panels = titled_panels(area, &title, (2, 2))?;
        let kinds = [
            ClusterPanel::ByteMiss,
            ClusterPanel::Miss,
            ClusterPanel::Unprotected,
            ClusterPanel::Imbalance,
        ];
        for (area, kind) in panels.iter().zip(kinds) {
            self.panel(area, kind)?;
        }
        Ok(())
    }
}

/// The one value all of `vs` have, if any.
fn same_value(mut vs: impl Iterator<Item = u64>) -> Option<u64> {
    let first = vs.next()?;
    vs.all(|v| v == first).then_some(first)
}

/// Tick label of a linear axis spanning `span`: enough decimals to tell ticks apart.
fn plain_label(span: f64) -> impl Fn(&f64) -> String {
    let decimals = if span >= 5.0 {
        0
    } else if span >= 0.5 {
        1
    } else if span >= 0.05 {
        2
    } else {
        3
    };
    move |v: &f64| format!("{v:.decimals$}")
}

/// Tick label of a percent axis spanning `span` percentage points; never "-0%".
fn percent_label(span: f64) -> impl Fn(&f64) -> String {
    let decimals = if span >= 10.0 {
        0
    } else if span >= 1.0 {
        1
    } else {
        2
    };
    move |v: &f64| {
        let s = format!("{v:.decimals$}");
        let zero = s.bytes().all(|b| matches!(b, b'-' | b'0' | b'.'));
        if zero {
            "0%".to_string()
        } else {
            format!("{s}%")
        }
    }
}

/// `lo..hi` of a percent axis around `vs` that always includes 0, padded.
fn percent_range(vs: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = min_max(vs).unwrap_or((0.0, 0.0));
    let (lo, hi) = (lo.min(0.0), hi.max(0.0));
    let pad = ((hi - lo) * 0.08).max(1.0);
    (lo - pad, hi + pad)
}

/// Tick label of a window axis: whole windows only (the axis is continuous).
fn window_label(v: &f64) -> String {
    if (v - v.round()).abs() < 1e-6 {
        format!("{}", v.round() as i64)
    } else {
        String::new()
    }
}

/// "scheme @ size" of a row.
fn row_label(r: &ClusterResult) -> String {
    format!("{} @ {}", r.scheme, format_size(r.cache_size))
}

/// Shade (alpha of black) of windows with `down` servers unavailable: one, or two or more.
fn unavailable_alpha(down: usize) -> f64 {
    if down >= 2 {
        0.22
    } else {
        0.09
    }
}

/// Legend entries for the shading levels that occur in `shade`.
fn shade_legend(shade: &[(f64, usize)]) -> Vec<LegendEntry> {
    let entry = |down: usize, label: &str| {
        let v = (255.0 * (1.0 - unavailable_alpha(down))).round() as u8;
        LegendEntry {
            label: label.to_string(),
            color: RGBColor(v, v, v),
            line: LineKind::Area,
            marker: None,
        }
    };
    let mut entries = Vec::new();
    if shade.iter().any(|s| s.1 == 1) {
        entries.push(entry(1, "1 server unavailable"));
    }
    if shade.iter().any(|s| s.1 >= 2) {
        entries.push(entry(2, "2+ servers unavailable"));
    }
    entries
}

/// Runs of consecutive windows (x, servers down) whose `key` of the count is the same:
/// (first x, last x, count of the first).
fn runs(shade: &[(f64, usize)], key: impl Fn(usize) -> usize) -> Vec<(f64, f64, usize)> {
    let mut out: Vec<(f64, f64, usize)> = Vec::new();
    for &(x, down) in shade {
        match out.last_mut() {
            Some(last) if x - last.1 <= 1.0 + 1e-9 && key(last.2) == key(down) => last.1 = x,
            _ => out.push((x, x, down)),
        }
    }
    out
}

/// Shades windows x ± 0.5 with servers unavailable (`shade`: (x, count), sorted by x).
fn shade_unavailable<DB, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, Y>>,
    shade: &[(f64, usize)],
    ylo: f64,
    yhi: f64,
) -> Result<()>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
    Y: Ranged<ValueType = f64>,
{
    let (xlo, xhi) = {
        let r = chart.x_range();
        (r.start, r.end)
    };
    // One rectangle per run of the same level, so translucent rectangles never overlap.
    for (a, b, down) in runs(shade, |d| d.min(2)) {
        let (a, b) = ((a - 0.5).max(xlo), (b + 0.5).min(xhi));
        chart.draw_series(std::iter::once(Rectangle::new(
            [(a, ylo), (b, yhi)],
            BLACK.mix(unavailable_alpha(down)).filled(),
        )))?;
    }
    Ok(())
}

/// A solid horizontal line at y = 0 across the chart.
fn zero_line<DB, Y>(chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, Y>>) -> Result<()>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
    Y: Ranged<ValueType = f64>,
{
    let r = chart.x_range();
    chart.draw_series(LineSeries::new(
        [(r.start, 0.0), (r.end, 0.0)],
        BLACK.mix(0.7).stroke_width(1),
    ))?;
    Ok(())
}

/// Servers unavailable per x, the most over the rows, for the windows with any: sorted by x.
fn merge_shade(per_row: impl Iterator<Item = (f64, usize)>) -> Vec<(f64, usize)> {
    let mut v: Vec<(f64, usize)> = per_row.filter(|p| p.1 > 0).collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)));
    v.dedup_by(|b, a| a.0 == b.0);
    v
}

// ---------------------------------------------------------------------------------------------
// Miss-ratio change around an unavailability (C2DN Fig. 6a, 7).

struct SpikeRow {
    label: String,
    /// (window relative to the row's first unavailability start, change in percent).
    points: Vec<(f64, f64)>,
}

struct SpikeFigure {
    rows: Vec<SpikeRow>,
    /// (relative window, servers unavailable) of the plotted windows with any, by window.
    shade: Vec<(f64, usize)>,
    x: (f64, f64),
    /// How many rows have an unavailability start (their x is relative to it).
    aligned: usize,
}

impl SpikeFigure {
    fn new(rows: &[UnavailabilityResult], after: usize) -> Result<SpikeFigure> {
        let mut out = Vec::new();
        let mut shade = Vec::new();
        let mut aligned = 0;
        for r in rows {
            let n = r.relative_miss_change.len();
            let (start, first, last) = match r.unavailability_starts.first() {
                Some(&s) => {
                    aligned += 1;
                    (s, s.saturating_sub(3), s.saturating_add(after))
                }
                None => (0, 0, usize::MAX),
            };
            let mut points = Vec::new();
            for i in first..=last.min(n.saturating_sub(1)) {
                if n == 0 {
                    break;
                }
                let x = i as f64 - start as f64;
                let v = r.relative_miss_change[i] * 100.0;
                if v.is_finite() {
                    points.push((x, v));
                }
                let down = r.with.windows.get(i).map_or(0, |w| w.unavailable.len());
                shade.push((x, down));
            }
            if !points.is_empty() {
                out.push(SpikeRow {
                    label: row_label(&r.with),
                    points,
                });
            }
        }
        let Some((lo, hi)) = min_max(out.iter().flat_map(|r| r.points.iter().map(|p| p.0))) else {
            bail!("nothing to plot: no per-window miss ratio changes (no windows)");
        };
        Ok(SpikeFigure {
            rows: out,
            shade: merge_shade(shade.into_iter()),
            x: (lo - 0.5, hi + 0.5),
            aligned,
        })
    }

    fn markers(&self) -> bool {
        self.x.1 - self.x.0 <= 80.0
    }
}

impl Figure for SpikeFigure {
    fn size(&self) -> (u32, u32) {
        (1200, 640)
    }

    fn legend(&self) -> Vec<LegendEntry> {
        let mut entries = line_legend(self.rows.iter().map(|r| r.label.as_str()), self.markers());
        entries.extend(shade_legend(&self.shade));
        entries
    }

    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let title = "Relative object miss ratio change per window, with vs without unavailability";
        let plot = titled(area, title)?;
        let (ylo, yhi) = percent_range(self.rows.iter().flat_map(|r| r.points.iter().map(|p| p.1)));
        let mut chart = chart_on(&plot, None, true, (52, 80))
            .build_cartesian_2d(self.x.0..self.x.1, ylo..yhi)?;
        let y_fmt = percent_label(yhi - ylo);
        let x_desc = if self.aligned == self.rows.len() {
            "window, relative to the first window with a server unavailable"
        } else if self.aligned == 0 {
            "window"
        } else {
            "window (relative to the first unavailability, where there is one)"
        };
        let span = self.x.1 - self.x.0;
        mesh(&mut chart)
            .x_label_formatter(&window_label)
            .y_label_formatter(&y_fmt)
            .x_labels((span.ceil() as usize + 1).clamp(2, 16))
            .y_labels(8)
            .x_desc(x_desc)
            .y_desc("(mr with − mr without) / mr without")
            .draw()?;
        shade_unavailable(&mut chart, &self.shade, ylo, yhi)?;
        zero_line(&mut chart)?;
        draw_lines(
            &mut chart,
            self.rows.iter().map(|r| &r.points),
            self.markers(),
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Per-window miss ratio over a whole unavailability record.

struct ClusterTrack {
    label: String,
    /// (window, miss ratio).
    miss: Vec<(f64, f64)>,
    /// (window, change against the run without unavailability, percent).
    change: Vec<(f64, f64)>,
    /// Miss ratio of the run without unavailability.
    baseline: f64,
}

struct ClusterSeriesFigure {
    tracks: Vec<ClusterTrack>,
    /// (window, servers unavailable) of the windows with any, by window.
    shade: Vec<(f64, usize)>,
    x_max: f64,
}

impl ClusterSeriesFigure {
    fn new(rows: &[UnavailabilityResult]) -> Result<ClusterSeriesFigure> {
        let mut shade = Vec::new();
        let tracks: Vec<ClusterTrack> = rows
            .iter()
            .filter(|r| !r.with.windows.is_empty())
            .map(|r| {
                for (i, w) in r.with.windows.iter().enumerate() {
                    shade.push((i as f64, w.unavailable.len()));
                }
                ClusterTrack {
                    label: row_label(&r.with),
                    miss: r
                        .with
                        .windows
                        .iter()
                        .enumerate()
                        .map(|(i, w)| (i as f64, w.miss_ratio))
                        .filter(|p| p.1.is_finite())
                        .collect(),
                    change: r
                        .relative_miss_change
                        .iter()
                        .enumerate()
                        .map(|(i, c)| (i as f64, c * 100.0))
                        .filter(|p| p.1.is_finite())
                        .collect(),
                    baseline: r.baseline_miss_ratio,
                }
            })
            .filter(|t| !t.miss.is_empty())
            .collect();
        let Some(x_max) = tracks
            .iter()
            .flat_map(|t| t.miss.iter().chain(&t.change).map(|p| p.0))
            .reduce(f64::max)
        else {
            bail!("nothing to plot: no row has per-window miss ratios");
        };
        Ok(ClusterSeriesFigure {
            tracks,
            shade: merge_shade(shade.into_iter().filter(|s| s.0 <= x_max)),
            x_max,
        })
    }

    fn markers(&self) -> bool {
        self.x_max < 60.0
    }

    fn x_range(&self) -> std::ops::Range<f64> {
        -0.5..self.x_max + 0.5
    }

    fn miss_panel<DB>(&self, area: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB: DrawingBackend,
        DB::ErrorType: 'static,
    {
        let baselines = self.tracks.iter().map(|t| t.baseline);
        let (ylo, yhi) = ratio_range(
            self.tracks
                .iter()
                .flat_map(|t| t.miss.iter().map(|p| p.1))
                .chain(baselines),
        );
        // Headroom for the numbers of servers down above the data.
        let yhi = if self.shade.is_empty() {
            yhi
        } else {
            yhi + (yhi - ylo) * 0.1
        };
        let caption = "Object miss ratio per window";
        let y_fmt = ratio_label(yhi - ylo);
        let mut chart =
            self.window_chart(area, caption, (ylo, yhi), &y_fmt, (None, "miss ratio"))?;
        self.number_runs(&mut chart, yhi)?;
        let markers = self.markers();
        let (x0, x1) = (-0.5, self.x_max + 0.5);
        for (i, t) in self.tracks.iter().enumerate() {
            let (color, marker) = style_of(i);
            if t.baseline.is_finite() {
                chart.draw_series(DashedLineSeries::new(
                    [(x0, t.baseline), (x1, t.baseline)],
                    8,
                    6,
                    color.mix(0.8).stroke_width(1),
                ))?;
            }
            draw_line(&mut chart, &t.miss, color, marker, markers)?;
        }
        Ok(())
    }

    /// Writes the number of servers down at the top of each run of windows with the same
    /// number, when it fits.
    fn number_runs<DB, Y>(
        &self,
        chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, Y>>,
        yhi: f64,
    ) -> Result<()>
    where
        DB: DrawingBackend,
        DB::ErrorType: 'static,
        Y: Ranged<ValueType = f64>,
    {
        let style = label_style().pos(Pos::new(HPos::Center, VPos::Top));
        let area = chart.plotting_area();
        let px_per_window = {
            let (w, _) = area.dim_in_pixel();
            f64::from(w) / (self.x_max + 1.0)
        };
        for (a, b, down) in runs(&self.shade, |d| d) {
            let width = (b - a + 1.0) * px_per_window;
            let long = format!("{down} down");
            let short = down.to_string();
            let text = [long, short].into_iter().find(|t| {
                area.estimate_text_size(t, &style)
                    .is_ok_and(|(tw, _)| f64::from(tw) + 4.0 <= width)
            });
            if let Some(text) = text {
                area.draw(
                    &(EmptyElement::at(((a + b) / 2.0, yhi))
                        + Text::new(text, (0, 4), style.clone())),
                )?;
            }
        }
        Ok(())
    }

    fn change_panel<DB>(&self, area: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB: DrawingBackend,
        DB::ErrorType: 'static,
    {
        let (ylo, yhi) = percent_range(
            self.tracks
                .iter()
                .flat_map(|t| t.change.iter().map(|p| p.1)),
        );
        let caption =
            "Relative object miss ratio change per window vs the run without unavailability";
        let y_fmt = percent_label(yhi - ylo);
        let mut chart = self.window_chart(
            area,
            caption,
            (ylo, yhi),
            &y_fmt,
            (Some("window"), "change in miss ratio"),
        )?;
        zero_line(&mut chart)?;
        draw_lines(
            &mut chart,
            self.tracks.iter().map(|t| &t.change),
            self.markers(),
        )
    }

    /// A panel over all windows with `caption` and `ylo..yhi` on y (labels `y_fmt`), its mesh
    /// drawn with the axis descriptions `desc` (the x axis is described, and given room for it,
    /// only if that is given) and windows with servers unavailable shaded.
    fn window_chart<'c, DB>(
        &self,
        area: &DrawingArea<DB, Shift>,
        caption: &str,
        (ylo, yhi): (f64, f64),
        y_fmt: &dyn Fn(&f64) -> String,
        (x_desc, y_desc): (Option<&str>, &str),
    ) -> Result<ChartContext<'c, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>>
    where
        DB: DrawingBackend,
        DB::ErrorType: 'static,
    {
        let x_area = if x_desc.is_some() { 52 } else { 30 };
        let mut chart = chart_on(area, Some(caption), true, (x_area, 80))
            .build_cartesian_2d(self.x_range(), ylo..yhi)?;
        let mut mesh = mesh(&mut chart);
        mesh.x_label_formatter(&window_label)
            .y_label_formatter(y_fmt)
            .x_labels(16)
            .y_labels(8)
            .y_desc(y_desc);
        if let Some(x_desc) = x_desc {
            mesh.x_desc(x_desc);
        }
        mesh.draw()?;
        shade_unavailable(&mut chart, &self.shade, ylo, yhi)?;
        Ok(chart)
    }
}

impl Figure for ClusterSeriesFigure {
    fn size(&self) -> (u32, u32) {
        (1200, 900)
    }

    fn legend(&self) -> Vec<LegendEntry> {
        let mut entries = line_legend(self.tracks.iter().map(|t| t.label.as_str()), self.markers());
        if self.tracks.iter().any(|t| t.baseline.is_finite()) {
            entries.push(LegendEntry {
                label: "miss ratio without unavailability (whole run)".into(),
                color: RGBColor(90, 90, 90),
                line: LineKind::Dashed,
                marker: None,
            });
        }
        entries.extend(shade_legend(&self.shade));
        entries
    }

    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let plots = titled(area, "Cluster miss ratio under server unavailability")?;
        let (top, bottom) = split_at_percent(&plots, 52);
        self.miss_panel(&top)?;
        self.change_panel(&bottom)?;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// The demo: latency CDF per tier and where requests were served over time.

/// Tiers in the order the demo figure lists them; others follow, by name.
const TIER_ORDER: [&str; 7] = [
    "HIT-HOC",
    "HIT-DISK",
    "MISS",
    "MISS-COLLAPSED",
    "REVALIDATED",
    "STALE",
    "PASS",
];

/// Windows of the demo's served-by panel.
const DEMO_WINDOWS: usize = 20;

/// Where a request of `tier` was served from, in the served-by panel: 0 HOC, 1 disk, 2 origin,
/// 3 other.
fn served_by(tier: &str) -> usize {
    match tier {
        "HIT-HOC" => 0,
        "HIT-DISK" => 1,
        "MISS" | "MISS-COLLAPSED" => 2,
        _ => 3,
    }
}

const SERVED_BY: [&str; 4] = ["HOC", "disk", "origin (MISS, MISS-COLLAPSED)", "other"];

/// Tick label of a log10 milliseconds axis: 10^v without trailing zeros, "ms" appended.
fn ms_label(v: &f64) -> String {
    let ms = 10f64.powf(*v);
    let decimals = (-v.floor()).max(0.0) as usize;
    let s = format!("{ms:.decimals$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        &s
    };
    format!("{s}ms")
}

/// The empirical CDF of `sorted` (latencies in µs, ascending) as a step line through about
/// `max` of its samples, always the first and the last: (log10 of the latency in ms, fraction of samples at
/// or below it), rising from 0 at the first sample drawn.
fn cdf_points(sorted: &[u64], max: usize) -> Vec<(f64, f64)> {
    let n = sorted.len();
    let step = n.div_ceil(max.max(1)).max(1);
    let mut idx: Vec<usize> = (step - 1..n).step_by(step).collect();
    if n > 0 {
        idx.insert(0, 0);
        idx.push(n - 1);
        idx.dedup();
    }
    let mut below = 0.0;
    let mut pts = Vec::with_capacity(2 * idx.len());
    for i in idx {
        let x = (sorted[i].max(1) as f64 / 1000.0).log10();
        let y = (i + 1) as f64 / n as f64;
        pts.push((x, below));
        pts.push((x, y));
        below = y;
    }
    pts
}

/// One tier's line of the demo's latency CDF.
struct TierCdf {
    tier: String,
    color: RGBColor,
    /// From [`cdf_points`].
    points: Vec<(f64, f64)>,
}

struct DemoFigure {
    title: String,
    /// One per tier that occurs, in [`TIER_ORDER`].
    cdfs: Vec<TierCdf>,
    /// One per window: (first request, end request, shares served by each of [`SERVED_BY`]).
    windows: Vec<(f64, f64, [f64; 4])>,
    /// Whether any request was served by a tier counted as "other".
    other: bool,
    total: usize,
}

/// The color of the i-th of [`TIER_ORDER`] (and of tiers after them).
fn tier_color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

/// The colors of [`SERVED_BY`], those of the tiers they stand for.
const SERVED_COLORS: [RGBColor; 4] = [COLORS[0], COLORS[1], COLORS[2], COLORS[7]];

impl DemoFigure {
    fn new(samples: &[(&str, u64)], title: &str) -> Result<DemoFigure> {
        if samples.is_empty() {
            bail!("nothing to plot: no requests");
        }
        let mut tiers: Vec<(&str, Vec<u64>)> = Vec::new();
        for &(tier, us) in samples {
            match tiers.iter_mut().find(|t| t.0 == tier) {
                Some(t) => t.1.push(us),
                None => tiers.push((tier, vec![us])),
            }
        }
        let rank = |t: &str| {
            TIER_ORDER
                .iter()
                .position(|&o| o == t)
                .unwrap_or(TIER_ORDER.len())
        };
        tiers.sort_by(|a, b| rank(a.0).cmp(&rank(b.0)).then(a.0.cmp(b.0)));
        let mut extra = 0;
        let cdfs = tiers
            .into_iter()
            .map(|(tier, mut lat)| {
                lat.sort_unstable();
                let i = match TIER_ORDER.iter().position(|&o| o == tier) {
                    Some(i) => i,
                    None => {
                        extra += 1;
                        TIER_ORDER.len() + extra - 1
                    }
                };
                TierCdf {
                    tier: tier.to_string(),
                    color: tier_color(i),
                    points: cdf_points(&lat, 400),
                }
            })
            .collect();
        let n = samples.len();
        let count = DEMO_WINDOWS.min(n);
        let windows = (0..count)
            .map(|w| {
                let (a, b) = (w * n / count, (w + 1) * n / count);
                let mut shares = [0.0; 4];
                for (tier, _) in &samples[a..b] {
                    shares[served_by(tier)] += 1.0;
                }
                for s in &mut shares {
                    *s /= (b - a) as f64;
                }
                (a as f64, b as f64, shares)
            })
            .collect();
        Ok(DemoFigure {
            title: title.to_string(),
            cdfs,
            windows,
            other: samples.iter().any(|(t, _)| served_by(t) == 3),
            total: n,
        })
    }

    fn cdf_panel<DB>(&self, area: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB: DrawingBackend,
        DB::ErrorType: 'static,
    {
        let (lo, hi) = min_max(self.cdfs.iter().flat_map(|c| c.points.iter().map(|p| p.0)))
            .ok_or_else(|| anyhow!("nothing to plot: no latencies"))?;
        let pad = ((hi - lo) * 0.04).max(0.1);
        let mut chart = chart_on(area, Some("Latency CDF per tier"), true, (52, 70))
            .build_cartesian_2d(LogAxis::log10(lo - pad, hi + pad), 0.0..1.0)?;
        mesh(&mut chart)
            .x_label_formatter(&ms_label)
            .y_label_formatter(&ratio_label(1.0))
            .y_labels(11)
            .x_desc("latency (log scale)")
            .y_desc("fraction of requests")
            .draw()?;
        for c in &self.cdfs {
            chart.draw_series(LineSeries::new(
                c.points.iter().copied(),
                c.color.stroke_width(2),
            ))?;
        }
        Ok(())
    }

    fn served_panel<DB>(&self, area: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB: DrawingBackend,
        DB::ErrorType: 'static,
    {
        let caption = format!("Requests served by, per window of {}", {
            let per = self.total as f64 / self.windows.len() as f64;
            count_label(per.round())
        });
        let mut chart = chart_on(area, Some(&caption), true, (52, 70))
            .build_cartesian_2d(0.0..self.total as f64, 0.0..1.0)?;
        mesh(&mut chart)
            .x_label_formatter(&|v: &f64| count_label(*v))
            .y_label_formatter(&ratio_label(1.0))
            .x_labels(8)
            .y_labels(11)
            .disable_x_mesh()
            .x_desc("requests completed")
            .y_desc("share of requests")
            .draw()?;
        for &(a, b, shares) in &self.windows {
            let gap = (b - a) * 0.06;
            let mut y = 0.0;
            for (share, color) in shares.iter().zip(SERVED_COLORS) {
                if *share <= 0.0 {
                    continue;
                }
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(a + gap, y), (b - gap, y + share)],
                    color.filled(),
                )))?;
                y += share;
            }
        }
        Ok(())
    }
}

impl Figure for DemoFigure {
    fn size(&self) -> (u32, u32) {
        (1400, 620)
    }

    fn legend(&self) -> Vec<LegendEntry> {
        let mut entries: Vec<LegendEntry> = self
            .cdfs
            .iter()
            .map(|c| LegendEntry {
                label: c.tier.clone(),
                color: c.color,
                line: LineKind::Solid,
                marker: None,
            })
            .collect();
        let shown = if self.other { 4 } else { 3 };
        entries.extend(
            SERVED_BY
                .iter()
                .zip(SERVED_COLORS)
                .take(shown)
                .map(|(label, color)| LegendEntry {
                    label: format!("served by {label}"),
                    color,
                    line: LineKind::Area,
                    marker: None,
                }),
        );
        entries
    }

    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let panels = titled_panels(area, &self.title, (1, 2))?;
        self.cdf_panel(&panels[0])?;
        self.served_panel(&panels[1])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ecdn_sim::cluster::ClusterWindow;
    use ecdn_sim::WindowPoint;

    fn result(policy: &str, size: u64, mr: f64, series: Vec<WindowPoint>) -> SimResult {
        SimResult {
            policy: policy.to_string(),
            cache_size: size,
            requests: 1_000_000,
            warmup: 100_000,
            hits: ((1.0 - mr) * 1e6) as u64,
            miss_ratio: mr,
            byte_miss_ratio: (mr * 1.3).min(1.0),
            object_hit_ratio: 1.0 - mr,
            byte_hit_ratio: 1.0 - (mr * 1.3).min(1.0),
            bytes: 1 << 40,
            hit_bytes: 1 << 39,
            cached_objects: 1000,
            policy_heap_bytes: 64_000,
            admission_tracked: 0,
            admission_heap_bytes: 0,
            elapsed_s: 1.0,
            requests_per_s: 1e6,
            series,
            c_history: Vec::new(),
        }
    }

    fn sweep_results() -> Vec<SimResult> {
        let mut v = Vec::new();
        for (pi, policy) in ["lru", "adaptsize", "lru+threshold:64KiB"]
            .iter()
            .enumerate()
        {
            for k in 0..9 {
                let size = 1u64 << (20 + 2 * k);
                let mr = 0.9 - 0.08 * k as f64 - 0.05 * pi as f64;
                v.push(result(policy, size, mr, Vec::new()));
            }
        }
        v
    }

    fn windows(n: usize, every: u64, with_c: bool, phase: f64) -> Vec<WindowPoint> {
        (1..=n)
            .map(|i| {
                let t = i as f64 / n as f64;
                WindowPoint {
                    end: i as u64 * every,
                    requests: every,
                    miss_ratio: 0.4 + 0.2 * (6.0 * t + phase).sin(),
                    byte_miss_ratio: 0.5,
                    c: with_c.then(|| 2f64.powf(14.0 + 6.0 * t + phase)),
                    used_bytes: 1 << 30,
                }
            })
            .collect()
    }

    fn series_results(with_c: bool) -> Vec<SimResult> {
        vec![
            result("lru", 1 << 30, 0.5, windows(200, 10_000, false, 0.0)),
            result("adaptsize", 1 << 30, 0.4, windows(200, 10_000, with_c, 0.5)),
            result("adaptsize", 1 << 32, 0.3, windows(200, 10_000, with_c, 1.0)),
            // No series: not drawn.
            result("fifo", 1 << 30, 0.6, Vec::new()),
        ]
    }

    fn model_points() -> Vec<ModelPoint> {
        (10..=26)
            .map(|k| {
                let x = (k as f64 - 17.0) / 5.0;
                let p = 0.6 - 0.2 * x * x;
                ModelPoint {
                    c: (1u64 << k) as f64,
                    predicted_ohr: p.max(0.05),
                    measured_ohr: (p - 0.02 + 0.01 * (k as f64).sin()).max(0.04),
                }
            })
            .collect()
    }

    /// True if a font could be registered; otherwise the caller skips its test.
    fn have_font() -> bool {
        match ensure_font() {
            Ok(()) => true,
            Err(e) => {
                eprintln!("skipping plot test: {e}");
                false
            }
        }
    }

    fn check_file(path: &Path) {
        let bytes = std::fs::read(path).unwrap();
        assert!(!bytes.is_empty(), "{} is empty", path.display());
        match output_format(path).unwrap() {
            OutputFormat::Png => assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n")),
            OutputFormat::Svg => {
                let s = String::from_utf8(bytes).unwrap();
                assert!(s.contains("<svg"), "not an SVG");
                assert!(s.contains("<text"), "SVG without text");
            }
        }
    }

    fn each_format(name: &str, draw: impl Fn(&Path) -> Result<()>) {
        if !have_font() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        for ext in ["png", "svg"] {
            let path = dir.path().join(format!("{name}.{ext}"));
            draw(&path).unwrap();
            check_file(&path);
        }
    }

    #[test]
    fn miss_ratio_plot() {
        let rs = sweep_results();
        each_format("mr", |p| miss_ratio_vs_size(p, &rs));
    }

    #[test]
    fn miss_ratio_plot_single_size() {
        let rs = vec![
            result("lru", 100 << 20, 0.5, Vec::new()),
            result("adaptsize", 100 << 20, 0.4, Vec::new()),
        ];
        each_format("mr1", |p| miss_ratio_vs_size(p, &rs));
        let one = vec![result("lru", 3 << 30, 0.5, Vec::new())];
        each_format("mr2", |p| miss_ratio_vs_size(p, &one));
    }

    #[test]
    fn model_plot() {
        let pts = model_points();
        each_format("model", |p| model_curve(p, &pts, 64 << 20));
        let one = vec![ModelPoint {
            c: 65536.0,
            predicted_ohr: 0.3,
            measured_ohr: 0.31,
        }];
        each_format("model1", |p| model_curve(p, &one, 64 << 20));
    }

    #[test]
    fn series_plot() {
        let rs = series_results(true);
        each_format("series", |p| series(p, &rs));
    }

    #[test]
    fn series_plot_without_c() {
        let rs = series_results(false);
        each_format("series_noc", |p| series(p, &rs));
        let short = vec![result("lru", 1 << 30, 0.5, windows(1, 1000, true, 0.0))];
        each_format("series_one", |p| series(p, &short));
    }

    #[test]
    fn many_policies_wrap_the_legend() {
        let mut rs = Vec::new();
        for i in 0..24 {
            for k in 0..4 {
                let mr = 0.8 - 0.1 * k as f64 - 0.01 * i as f64;
                rs.push(result(
                    &format!("policy-{i}+admission"),
                    1 << (24 + k),
                    mr,
                    Vec::new(),
                ));
            }
        }
        each_format("many", |p| miss_ratio_vs_size(p, &rs));
    }

    /// Draws a figure to the given path.
    type Draw<'a> = &'a dyn Fn(&Path) -> Result<()>;

    /// Each of `draws` fails with "nothing to plot" and writes no file.
    fn assert_nothing_to_plot(draws: &[Draw<'_>]) {
        let dir = tempfile::tempdir().unwrap();
        let png = dir.path().join("x.png");
        for draw in draws {
            let e = draw(&png).unwrap_err();
            assert!(e.to_string().contains("nothing to plot"), "{e}");
        }
        assert!(!png.exists());
    }

    #[test]
    fn empty_inputs_are_errors() {
        let sweep = sweep_results();
        assert_nothing_to_plot(&[
            &|p| miss_ratio_vs_size(p, &[]),
            &|p| model_curve(p, &[], 1 << 20),
            &|p| series(p, &[]),
            &|p| series(p, &sweep),
        ]);
    }

    #[test]
    fn unknown_extension_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["plot.pdf", "plot"] {
            let p = dir.path().join(name);
            let e = miss_ratio_vs_size(&p, &sweep_results()).unwrap_err();
            assert!(e.to_string().contains(".png or .svg"), "{e}");
            assert!(!p.exists());
        }
        assert_eq!(
            output_format(Path::new("a.PNG")).unwrap(),
            OutputFormat::Png
        );
    }

    #[test]
    fn unwritable_path_is_an_error() {
        if !have_font() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        for ext in ["png", "svg"] {
            let p = dir.path().join("missing-dir").join(format!("x.{ext}"));
            let e = miss_ratio_vs_size(&p, &sweep_results()).unwrap_err();
            assert!(format!("{e:#}").contains("cannot write plot"), "{e:#}");
        }
    }

    #[test]
    fn missing_font_is_a_clear_error() {
        let e = load_font(None, &[]).unwrap_err();
        assert_eq!(e, NO_FONT);
        assert!(e.contains("fonts-dejavu-core") && e.contains("ECDN_FONT"));
        let e = load_font(None, &["/nonexistent/font.ttf"]).unwrap_err();
        assert_eq!(e, NO_FONT);
        let e = load_font(Some("/nonexistent/font.ttf".into()), FONT_PATHS).unwrap_err();
        assert!(e.starts_with("ECDN_FONT=/nonexistent/font.ttf: "), "{e}");
    }

    #[test]
    fn labels() {
        assert_eq!(size_label(&20.0), "1MiB");
        assert_eq!(size_label(&24.0), "16MiB");
        assert_eq!(count_label(0.0), "0");
        assert_eq!(count_label(12_500.0), "12.5k");
        assert_eq!(count_label(3_000_000.0), "3M");
        assert_eq!(ratio_label(0.3)(&0.25), "0.25");
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(102_485), "102,485");
        assert_eq!(grouped(1_234_567), "1,234,567");
    }

    #[test]
    fn log2_axis_ticks_are_aligned_powers() {
        let axis = LogAxis::log2(19.5, 40.5, 6, &[]);
        let bold = &axis.bold;
        assert!(bold.len() <= 6, "{bold:?}");
        assert!(bold.iter().all(|k| (*k as i64) % 4 == 0), "{bold:?}");
        assert_eq!(axis.light.len(), 21);
        // No power of two in range: ticks at the data.
        let d = (100.0f64 * 1048576.0).log2();
        let axis = LogAxis::log2(d - 0.3, d + 0.3, 6, &[d, d]);
        assert_eq!(axis.bold, vec![d]);
        assert_eq!(size_label(&d), "100MiB");
    }

    // -----------------------------------------------------------------------------------------
    // Cluster figures.

    fn cluster_result(
        scheme: &str,
        size: u64,
        mr: f64,
        imbalance: f64,
        windows: Vec<ClusterWindow>,
    ) -> ClusterResult {
        ClusterResult {
            scheme: scheme.to_string(),
            cache_size: size,
            servers: 10,
            k: 3,
            p: 1,
            requests: 2_000_000,
            miss_ratio: mr,
            byte_miss_ratio: (mr * 1.2).min(1.0),
            partial_hit_ratio: 0.01,
            write_imbalance: imbalance,
            read_imbalance: 1.1,
            unprotected_fraction: mr * 0.5,
            bytes_written: vec![1 << 30; 10],
            bytes_read: vec![1 << 30; 10],
            origin_bytes: 1 << 32,
            rebalances: 3,
            rebalance_s: 0.01,
            elapsed_s: 1.0,
            requests_per_s: 2e6,
            windows,
        }
    }

    fn cluster_sweep() -> Vec<ClusterResult> {
        let mut v = Vec::new();
        for (si, scheme) in ["no-rep", "rep2", "rep3", "c2dn-norebal", "c2dn"]
            .iter()
            .enumerate()
        {
            for k in 0..7 {
                let size = 1u64 << (30 + k);
                let mr = 0.5 - 0.05 * k as f64 + 0.03 * si as f64;
                let imbalance = match (si, k) {
                    // A server that wrote nothing.
                    (0, 0) | (1, 3) => f64::INFINITY,
                    _ => 1.05 + 0.6 / (1.0 + k as f64) + 0.2 * si as f64,
                };
                v.push(cluster_result(scheme, size, mr, imbalance, Vec::new()));
            }
        }
        v
    }

    /// Windows of a run: miss ratio `base(i)`, plus `bump(i)` times it when unavailable.
    fn cluster_windows(
        n: usize,
        down: &dyn Fn(usize) -> Vec<usize>,
        mr: &dyn Fn(usize) -> f64,
    ) -> Vec<ClusterWindow> {
        (0..n)
            .map(|i| {
                let requests = 10_000;
                let misses = (mr(i) * requests as f64).round() as u64;
                ClusterWindow {
                    index: i,
                    start: i as u64 * requests,
                    requests,
                    misses,
                    partial_hits: 0,
                    bytes: requests << 16,
                    origin_bytes: misses << 16,
                    miss_ratio: misses as f64 / requests as f64,
                    byte_miss_ratio: misses as f64 / requests as f64,
                    unavailable: down(i),
                }
            })
            .collect()
    }

    /// A run with unavailability `down` next to the same run without, through `compare`.
    fn unavailability_row(
        scheme: &str,
        size: u64,
        n: usize,
        spike: f64,
        down: &dyn Fn(usize) -> Vec<usize>,
    ) -> UnavailabilityResult {
        let base = |i: usize| 0.3 + 0.02 * (i as f64 * 0.7).sin() - 0.002 * i as f64;
        // The miss ratio jumps when servers go down and decays while they stay down.
        let with_mr = |i: usize| {
            let d = down(i).len() as f64;
            let since = (0..=i).rev().take_while(|&j| !down(j).is_empty()).count() as f64;
            base(i) * (1.0 + spike * d * (-0.4 * (since - 1.0).max(0.0)).exp())
        };
        let none = |_: usize| Vec::new();
        let with = cluster_result(scheme, size, 0.3, 1.1, cluster_windows(n, down, &with_mr));
        let without = cluster_result(scheme, size, 0.29, 1.1, cluster_windows(n, &none, &base));
        ecdn_sim::cluster::compare(with, &without, 5)
    }

    fn spike_rows() -> Vec<UnavailabilityResult> {
        let down = |i: usize| {
            if (10..16).contains(&i) {
                vec![3]
            } else {
                Vec::new()
            }
        };
        vec![
            unavailability_row("no-rep", 4 << 30, 30, 0.9, &down),
            unavailability_row("rep2", 4 << 30, 30, 0.25, &down),
            unavailability_row("c2dn", 4 << 30, 30, 0.05, &down),
            unavailability_row("c2dn", 16 << 30, 30, 0.08, &down),
        ]
    }

    /// Akamai-like: 40 windows, one or two servers down now and then.
    fn akamai_down(i: usize) -> Vec<usize> {
        match i {
            3..=5 => vec![2],
            9 => vec![7],
            14..=17 => vec![1, 4],
            18..=20 => vec![4],
            27 => vec![0, 5, 8],
            31..=35 => vec![6],
            _ => Vec::new(),
        }
    }

    fn series_rows() -> Vec<UnavailabilityResult> {
        vec![
            unavailability_row("no-rep", 4 << 30, 40, 0.4, &akamai_down),
            unavailability_row("rep2", 4 << 30, 40, 0.15, &akamai_down),
            unavailability_row("c2dn", 4 << 30, 40, 0.03, &akamai_down),
        ]
    }

    #[test]
    fn cluster_size_plot() {
        let rs = cluster_sweep();
        each_format("cluster", |p| cluster_vs_size(p, &rs));
        // No infinite imbalance, a single size, everything infinite.
        let finite: Vec<ClusterResult> = rs
            .iter()
            .filter(|r| r.write_imbalance.is_finite())
            .cloned()
            .collect();
        each_format("cluster_finite", |p| cluster_vs_size(p, &finite));
        let one = vec![cluster_result(
            "c2dn",
            3 << 30,
            0.2,
            f64::INFINITY,
            Vec::new(),
        )];
        each_format("cluster_one", |p| cluster_vs_size(p, &one));
        let odd = vec![
            cluster_result("rep2", 1 << 30, f64::NAN, f64::NAN, Vec::new()),
            cluster_result("rep2", 2 << 30, 0.3, 1.0, Vec::new()),
        ];
        each_format("cluster_odd", |p| cluster_vs_size(p, &odd));
    }

    #[test]
    fn cluster_spike_plot() {
        let rows = spike_rows();
        each_format("spike", |p| cluster_spike(p, &rows, 10));
        each_format("spike_long", |p| cluster_spike(p, &rows, 1000));
        each_format("spike_zero", |p| cluster_spike(p, &rows, 0));
        // Unavailability from window 0 (nothing before it), and a row without any.
        let early = |i: usize| if i < 4 { vec![1, 2] } else { Vec::new() };
        let none = |_: usize| Vec::new();
        let mixed = vec![
            unavailability_row("rep2", 1 << 30, 12, 0.3, &early),
            unavailability_row("rep3", 1 << 30, 12, 0.3, &none),
        ];
        assert!(mixed[1].unavailability_starts.is_empty());
        each_format("spike_mixed", |p| cluster_spike(p, &mixed, 5));
    }

    #[test]
    fn cluster_series_plot() {
        let rows = series_rows();
        each_format("cseries", |p| cluster_series(p, &rows));
        let long = vec![unavailability_row("c2dn", 1 << 30, 500, 0.1, &|i| {
            if i % 97 < 9 {
                vec![1; 1 + i % 3]
            } else {
                Vec::new()
            }
        })];
        each_format("cseries_long", |p| cluster_series(p, &long));
        let one = vec![unavailability_row("rep2", 1 << 30, 1, 0.1, &|_| vec![0])];
        each_format("cseries_one", |p| cluster_series(p, &one));
    }

    #[test]
    fn empty_cluster_inputs_are_errors() {
        let zero = vec![cluster_result("c2dn", 0, 0.2, 1.0, Vec::new())];
        let empty = vec![unavailability_row("c2dn", 1 << 30, 0, 0.1, &|_| Vec::new())];
        assert_nothing_to_plot(&[
            &|p| cluster_vs_size(p, &[]),
            &|p| cluster_vs_size(p, &zero),
            &|p| cluster_spike(p, &[], 10),
            &|p| cluster_series(p, &[]),
            &|p| cluster_spike(p, &empty, 10),
            &|p| cluster_series(p, &empty),
        ]);
    }

    #[test]
    fn cluster_helpers() {
        assert_eq!(percent_label(30.0)(&-0.2), "0%");
        assert_eq!(percent_label(30.0)(&20.0), "20%");
        assert_eq!(percent_label(3.0)(&-1.5), "-1.5%");
        assert_eq!(window_label(&-3.0), "-3");
        assert_eq!(window_label(&0.5), "");
        let shade = merge_shade([(1.0, 1), (2.0, 2), (2.0, 1), (3.0, 2), (5.0, 1)].into_iter());
        assert_eq!(shade, vec![(1.0, 1), (2.0, 2), (3.0, 2), (5.0, 1)]);
        assert_eq!(
            runs(&shade, |d| d),
            vec![(1.0, 1.0, 1), (2.0, 3.0, 2), (5.0, 5.0, 1)]
        );
        let (lo, hi) = percent_range([5.0, 40.0].into_iter());
        assert!(lo < 0.0 && hi > 40.0);
    }

    /// `n` synthetic demo samples: hits get more likely and faster as the run goes on.
    fn demo_samples(n: u64) -> Vec<(&'static str, u64)> {
        (0..n)
            .map(|i| {
                let warm = i * 100 / n;
                let r = (i * 7919) % 100;
                if r < warm / 2 {
                    ("HIT-HOC", 80 + (i * 37) % 400)
                } else if r < warm {
                    ("HIT-DISK", 300 + (i * 53) % 2_000)
                } else if r % 17 == 0 {
                    ("MISS-COLLAPSED", 2_500 + (i * 71) % 9_000)
                } else if r % 29 == 0 {
                    ("REVALIDATED", 2_200 + (i * 13) % 3_000)
                } else {
                    ("MISS", 2_100 + (i * 91) % 20_000)
                }
            })
            .collect()
    }

    #[test]
    fn demo_plot() {
        let samples = demo_samples(5_000);
        each_format("demo", |p| {
            demo(p, &samples, "ecdn demo: 5,000 requests, 2,500 req/s")
        });
        let one = [("HIT-HOC", 120), ("STALE", 0), ("X-ODD", 5_000)];
        each_format("demo-few", |p| demo(p, &one, "three requests"));
    }

    #[test]
    fn demo_helpers() {
        assert_nothing_to_plot(&[&|p| demo(p, &[], "none")]);
        assert_eq!(ms_label(&0.0), "1ms");
        assert_eq!(ms_label(&-1.0), "0.1ms");
        assert_eq!(ms_label(&2f64.log10()), "2ms");
        assert_eq!(ms_label(&(0.05f64).log10()), "0.05ms");
        assert_eq!(ms_label(&3.0), "1000ms");
        let pts = cdf_points(&[1_000, 2_000, 3_000, 4_000, 10_000], 2);
        let x3 = 3f64.log10();
        assert_eq!(
            pts,
            [
                (0.0, 0.0),
                (0.0, 0.2),
                (x3, 0.2),
                (x3, 0.6),
                (1.0, 0.6),
                (1.0, 1.0)
            ]
        );
        assert_eq!(
            cdf_points(&[500], 400),
            [((0.5f64).log10(), 0.0), ((0.5f64).log10(), 1.0)]
        );
        assert!(cdf_points(&[], 400).is_empty());
        let fig = DemoFigure::new(&demo_samples(1_000), "t").unwrap();
        assert_eq!(fig.windows.len(), DEMO_WINDOWS);
        for (_, _, shares) in &fig.windows {
            assert!((shares.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        }
        assert!(fig.other);
        let tiers: Vec<&str> = fig.cdfs.iter().map(|c| c.tier.as_str()).collect();
        assert_eq!(
            tiers,
            [
                "HIT-HOC",
                "HIT-DISK",
                "MISS",
                "MISS-COLLAPSED",
                "REVALIDATED"
            ]
        );
        assert!(check_output(Path::new("x.svg")).is_ok());
        assert!(check_output(Path::new("x.pdf")).is_err());
    }
}
