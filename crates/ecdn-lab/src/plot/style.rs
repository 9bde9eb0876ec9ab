//! What every figure shares: the output (PNG or SVG by the file's extension, the legend below
//! the figure) and the font (registered once per process, see the [module docs](super)), colors
//! and markers, text styles, the legend, log2 and ratio axes with their tick labels, lines, and
//! the chart and panel layout helpers the figures are built from.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{anyhow, bail, Context, Result};
use ecdn_trace::units::format_size;
use plotters::chart::MeshStyle;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// The font family every text of a plot uses; [`ensure_font`] registers it.
pub(super) const FAMILY: &str = "sans-serif";

/// Where [`ensure_font`] looks for a font when `$ECDN_FONT` is not set, in order.
pub(super) const FONT_PATHS: &[&str] = &[
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

pub(super) const NO_FONT: &str =
    "no TTF font found for plotting; install Debian's fonts-dejavu-core or set \
                       ECDN_FONT=/path/to/font.ttf";

/// Distinct line colors: the usual ten-color qualitative palette, then black and darker
/// variants, so sweeps of up to sixteen lines stay distinguishable.
pub(super) const COLORS: [RGBColor; 16] = [
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

// ---------------------------------------------------------------------------------------------
// Output and fonts.

/// A figure that can draw itself on any backend. [`render`] puts its legend below it, making
/// the image as much taller as the legend needs.
pub(super) trait Figure {
    /// Size in pixels without the legend.
    fn size(&self) -> (u32, u32);
    fn legend(&self) -> Vec<LegendEntry>;
    /// Draws the figure (title and panels) on `area`, which is white already.
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static;
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum OutputFormat {
    Png,
    Svg,
}

pub(super) fn output_format(path: &Path) -> Result<OutputFormat> {
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

pub(super) fn render(path: &Path, fig: &impl Figure) -> Result<()> {
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

pub(super) fn draw_figure<DB>(
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
pub(super) fn ensure_font() -> Result<()> {
    static FONT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let loaded = FONT.get_or_init(|| load_font(std::env::var_os("ECDN_FONT"), FONT_PATHS));
    match loaded {
        Ok(_) => Ok(()),
        Err(e) => Err(anyhow!("{e}")),
    }
}

/// Registers `explicit` (`$ECDN_FONT`) if set — no fallback: the user asked for that file —
/// else the first of `candidates` that holds a usable font. Returns the file registered.
pub(super) fn load_font(
    explicit: Option<OsString>,
    candidates: &[&str],
) -> Result<PathBuf, String> {
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

pub(super) fn register_font_file(path: &Path) -> Result<(), String> {
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
pub(super) enum Marker {
    Circle,
    Triangle,
    Square,
    Cross,
}

pub(super) const MARKERS: [Marker; 4] = [
    Marker::Circle,
    Marker::Triangle,
    Marker::Square,
    Marker::Cross,
];

/// Color and marker of the i-th line: unique for the first 40.
pub(super) fn style_of(i: usize) -> (RGBColor, Marker) {
    (
        COLORS[i % COLORS.len()],
        MARKERS[(i + i / COLORS.len()) % MARKERS.len()],
    )
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum LineKind {
    None,
    Solid,
    Dashed,
    /// A filled box of the entry's color (shaded regions).
    Area,
}

/// One legend entry: what its sample looks like and its text.
pub(super) struct LegendEntry {
    pub(super) label: String,
    pub(super) color: RGBColor,
    pub(super) line: LineKind,
    pub(super) marker: Option<Marker>,
}

pub(super) fn text_style(size: f64) -> TextStyle<'static> {
    (FAMILY, size).into_font().color(&BLACK)
}

pub(super) fn title_style() -> TextStyle<'static> {
    text_style(22.0)
}

pub(super) fn caption_style() -> TextStyle<'static> {
    text_style(18.0)
}

pub(super) fn label_style() -> TextStyle<'static> {
    text_style(15.0)
}

pub(super) fn desc_style() -> TextStyle<'static> {
    text_style(16.0)
}

pub(super) fn legend_style() -> TextStyle<'static> {
    text_style(16.0)
}

/// Draws `marker` centered on `at`, in chart or pixel coordinates alike.
pub(super) fn marker_element<DB, CT>(
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
pub(super) type LegendRows = Vec<Vec<(i32, usize)>>;

/// Lays `entries` out in centered rows as wide as `area` and returns the height they need.
pub(super) fn legend_layout<DB>(
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

pub(super) fn draw_legend<DB>(
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
pub(super) struct LogAxis {
    pub(super) lo: f64,
    pub(super) hi: f64,
    pub(super) bold: Vec<f64>,
    pub(super) light: Vec<f64>,
}

impl LogAxis {
    /// From 2^lo to 2^hi: bold ticks at powers of two, thinned to at most `max_ticks` (every
    /// k-th power, aligned to multiples of k so labels read 1MiB, 16MiB, ...), light grid lines at
    /// every power. With fewer than two powers in range the ticks are at `data` (log2s) instead.
    pub(super) fn log2(lo: f64, hi: f64, max_ticks: usize, data: &[f64]) -> LogAxis {
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
    pub(super) fn log10(lo: f64, hi: f64) -> LogAxis {
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
pub(super) fn size_label(v: &f64) -> String {
    format_size(v.exp2().round() as u64)
}

/// `lo..hi` of a log2 axis around the log2s `xs`, with room for markers at both ends.
pub(super) fn log2_range(xs: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let (lo, hi) = min_max(xs)?;
    let pad = if hi - lo < 1e-9 {
        0.5
    } else {
        ((hi - lo) * 0.04).max(0.25)
    };
    Some((lo - pad, hi + pad))
}

/// `lo..hi` of a ratio axis around `vs`, padded and clamped to [0, 1].
pub(super) fn ratio_range(vs: impl Iterator<Item = f64>) -> (f64, f64) {
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

pub(super) fn min_max(vs: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    vs.filter(|v| v.is_finite()).fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
    })
}

/// Tick label of a ratio axis spanning `span`: enough decimals to tell ticks apart.
pub(super) fn ratio_label(span: f64) -> impl Fn(&f64) -> String {
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
pub(super) fn count_label(v: f64) -> String {
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
pub fn grouped(n: u64) -> String {
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
pub(super) fn draw_line<DB, X, Y>(
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
pub(super) fn draw_lines<DB, X, Y, L>(
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
pub(super) fn line_legend<'l>(
    labels: impl Iterator<Item = &'l str>,
    markers: bool,
) -> Vec<LegendEntry> {
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
pub(super) fn chart_on<'a, 'b, DB: DrawingBackend>(
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
pub(super) fn mesh<'a, 'b, DB, X, Y>(
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
pub(super) fn size_chart<'c, DB>(
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
pub(super) fn titled<DB>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
) -> Result<DrawingArea<DB, Shift>>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
{
    Ok(area.titled(title, title_style())?)
}

/// `area` below `title`, split evenly into `grid` (rows, columns) panels.
pub(super) fn titled_panels<DB>(
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
pub(super) fn split_at_percent<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    percent: i32,
) -> (DrawingArea<DB, Shift>, DrawingArea<DB, Shift>) {
    let h = area.dim_in_pixel().1 as i32;
    area.split_vertically(h * percent / 100)
}

/// One line of a figure against cache size: its label and its points, by size.
pub(super) struct Curve<P> {
    pub(super) label: String,
    pub(super) points: Vec<P>,
}

/// Groups `(label, point)`s into curves, in the order the labels first come, each sorted by
/// `x` (a log2 size); returns them with the log2 axis range around all x's (None: no point).
pub(super) fn group_curves<'l, P>(
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
pub(super) fn curve_xs<P>(curves: &[Curve<P>], x: impl Fn(&P) -> f64) -> Vec<f64> {
    curves
        .iter()
        .flat_map(|c| c.points.iter().map(&x))
        .collect()
}

/// The one value all of `vs` have, if any.
pub(super) fn same_value(mut vs: impl Iterator<Item = u64>) -> Option<u64> {
    let first = vs.next()?;
    vs.all(|v| v == first).then_some(first)
}
