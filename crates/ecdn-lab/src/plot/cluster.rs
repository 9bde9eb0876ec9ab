//! Figures of cluster simulations (`ecdn sim cluster`, C2DN): miss ratios, unprotected
//! fraction and write imbalance against total cache size (C2DN Fig. 5, 6b–d), the miss-ratio
//! change around an unavailability (Fig. 6a, 7) and per-window miss ratios over a whole
//! unavailability record.

use anyhow::{bail, Result};
use ecdn_sim::cluster::{ClusterResult, UnavailabilityResult};
use ecdn_trace::units::format_size;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::style::*;

// ---------------------------------------------------------------------------------------------
// Cluster simulations (C2DN).

/// One cluster result on the size axis.
#[derive(Clone, Copy, Debug)]
pub(super) struct ClusterPoint {
    /// log2 of the total cache size.
    pub(super) x: f64,
    pub(super) byte_miss: f64,
    pub(super) miss: f64,
    pub(super) unprotected: f64,
    pub(super) imbalance: f64,
}

pub(super) struct ClusterSizeFigure {
    /// One per scheme.
    pub(super) curves: Vec<Curve<ClusterPoint>>,
    pub(super) x: (f64, f64),
    pub(super) subtitle: String,
}

/// Which quantity a panel of [`ClusterSizeFigure`] shows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum ClusterPanel {
    ByteMiss,
    Miss,
    Unprotected,
    Imbalance,
}

impl ClusterPanel {
    pub(super) fn value(self, p: &ClusterPoint) -> f64 {
        match self {
            ClusterPanel::ByteMiss => p.byte_miss,
            ClusterPanel::Miss => p.miss,
            ClusterPanel::Unprotected => p.unprotected,
            ClusterPanel::Imbalance => p.imbalance,
        }
    }

    /// Caption and y-axis description.
    pub(super) fn text(self) -> (&'static str, &'static str) {
        match self {
            ClusterPanel::ByteMiss => ("(a) Byte miss ratio", "byte miss ratio"),
            ClusterPanel::Miss => ("(b) Object miss ratio", "object miss ratio"),
            ClusterPanel::Unprotected => (
                "(c) Unprotected fraction of cached objects",
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
    pub(super) fn new(results: &[ClusterResult]) -> Result<ClusterSizeFigure> {
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

    pub(super) fn panel<DB>(&self, area: &DrawingArea<DB, Shift>, panel: ClusterPanel) -> Result<()>
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

/// Tick label of a linear axis spanning `span`: enough decimals to tell ticks apart.
pub(super) fn plain_label(span: f64) -> impl Fn(&f64) -> String {
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
pub(super) fn percent_label(span: f64) -> impl Fn(&f64) -> String {
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
pub(super) fn percent_range(vs: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = min_max(vs).unwrap_or((0.0, 0.0));
    let (lo, hi) = (lo.min(0.0), hi.max(0.0));
    let pad = ((hi - lo) * 0.08).max(1.0);
    (lo - pad, hi + pad)
}

/// Tick label of a window axis: whole windows only (the axis is continuous).
pub(super) fn window_label(v: &f64) -> String {
    if (v - v.round()).abs() < 1e-6 {
        format!("{}", v.round() as i64)
    } else {
        String::new()
    }
}

/// "scheme @ size" of a row.
pub(super) fn row_label(r: &ClusterResult) -> String {
    format!("{} @ {}", r.scheme, format_size(r.cache_size))
}

/// Shade (alpha of black) of windows with `down` servers unavailable: one, or two or more.
pub(super) fn unavailable_alpha(down: usize) -> f64 {
    if down >= 2 {
        0.22
    } else {
        0.09
    }
}

/// Legend entries for the shading levels that occur in `shade`.
pub(super) fn shade_legend(shade: &[(f64, usize)]) -> Vec<LegendEntry> {
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
pub(super) fn runs(shade: &[(f64, usize)], key: impl Fn(usize) -> usize) -> Vec<(f64, f64, usize)> {
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
pub(super) fn shade_unavailable<DB, Y>(
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
pub(super) fn zero_line<DB, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, Y>>,
) -> Result<()>
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
pub(super) fn merge_shade(per_row: impl Iterator<Item = (f64, usize)>) -> Vec<(f64, usize)> {
    let mut v: Vec<(f64, usize)> = per_row.filter(|p| p.1 > 0).collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)));
    v.dedup_by(|b, a| a.0 == b.0);
    v
}

// ---------------------------------------------------------------------------------------------
// Miss-ratio change around an unavailability (C2DN Fig. 6a, 7).

pub(super) struct SpikeRow {
    pub(super) label: String,
    /// (window relative to the row's first unavailability start, change in percent).
    pub(super) points: Vec<(f64, f64)>,
}

pub(super) struct SpikeFigure {
    pub(super) rows: Vec<SpikeRow>,
    /// (relative window, servers unavailable) of the plotted windows with any, by window.
    pub(super) shade: Vec<(f64, usize)>,
    pub(super) x: (f64, f64),
    /// How many rows have an unavailability start (their x is relative to it).
    pub(super) aligned: usize,
}

impl SpikeFigure {
    pub(super) fn new(rows: &[UnavailabilityResult], after: usize) -> Result<SpikeFigure> {
        let mut out = Vec::new();
        let mut shade = Vec::new();
        let mut aligned = 0;
        for r in rows {
            let (start, first, last) = match r.unavailability_starts.first() {
                Some(&s) => {
                    aligned += 1;
                    (s, s.saturating_sub(3), s.saturating_add(after))
                }
                None => (0, 0, usize::MAX),
            };
            let mut points = Vec::new();
            // Windows without requests are not in the results (nor drawn); x is the window
            // index relative to the start.
            for (w, change) in r.with.windows.iter().zip(&r.relative_miss_change) {
                if w.index < first || w.index > last {
                    continue;
                }
                let x = w.index as f64 - start as f64;
                let v = change * 100.0;
                if v.is_finite() {
                    points.push((x, v));
                }
                shade.push((x, w.unavailable.len()));
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

    pub(super) fn markers(&self) -> bool {
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

pub(super) struct ClusterTrack {
    pub(super) label: String,
    /// (window, miss ratio).
    pub(super) miss: Vec<(f64, f64)>,
    /// (window, change against the run without unavailability, percent).
    pub(super) change: Vec<(f64, f64)>,
    /// Miss ratio of the run without unavailability.
    pub(super) baseline: f64,
}

pub(super) struct ClusterSeriesFigure {
    pub(super) tracks: Vec<ClusterTrack>,
    /// (window, servers unavailable) of the windows with any, by window.
    pub(super) shade: Vec<(f64, usize)>,
    pub(super) x_max: f64,
}

impl ClusterSeriesFigure {
    pub(super) fn new(rows: &[UnavailabilityResult]) -> Result<ClusterSeriesFigure> {
        let mut shade = Vec::new();
        let tracks: Vec<ClusterTrack> = rows
            .iter()
            .filter(|r| !r.with.windows.is_empty())
            .map(|r| {
                for w in &r.with.windows {
                    shade.push((w.index as f64, w.unavailable.len()));
                }
                ClusterTrack {
                    label: row_label(&r.with),
                    miss: r
                        .with
                        .windows
                        .iter()
                        .map(|w| (w.index as f64, w.miss_ratio))
                        .filter(|p| p.1.is_finite())
                        .collect(),
                    change: r
                        .with
                        .windows
                        .iter()
                        .zip(&r.relative_miss_change)
                        .map(|(w, c)| (w.index as f64, c * 100.0))
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

    pub(super) fn markers(&self) -> bool {
        self.x_max < 60.0
    }

    pub(super) fn x_range(&self) -> std::ops::Range<f64> {
        -0.5..self.x_max + 0.5
    }

    pub(super) fn miss_panel<DB>(&self, area: &DrawingArea<DB, Shift>) -> Result<()>
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
    pub(super) fn number_runs<DB, Y>(
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

    pub(super) fn change_panel<DB>(&self, area: &DrawingArea<DB, Shift>) -> Result<()>
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
    pub(super) fn window_chart<'c, DB>(
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
