//! Figures of cache simulations (`ecdn sim cache`, `ecdn sim model`): miss ratio against
//! cache size, AdaptSize's model against measurement (AdaptSize Fig. 9) and per-window time
//! series with the admission parameter c (AdaptSize §6.3).

use anyhow::{bail, Result};
use ecdn_sim::model_check::ModelPoint;
use ecdn_sim::SimResult;
use ecdn_trace::units::format_size;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::style::*;

// ---------------------------------------------------------------------------------------------
// Miss ratio vs cache size.

pub(super) struct SizeFigure {
    /// One per policy: (log2 cache size, object miss ratio, byte miss ratio), by size.
    pub(super) curves: Vec<Curve<(f64, f64, f64)>>,
    pub(super) x: (f64, f64),
    pub(super) subtitle: String,
}

impl SizeFigure {
    pub(super) fn new(results: &[SimResult]) -> Result<SizeFigure> {
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

    pub(super) fn panel<DB>(
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

pub(super) struct ModelFigure {
    /// (log2 c, predicted OHR, measured OHR), by c.
    pub(super) points: Vec<(f64, f64, f64)>,
    pub(super) capacity: u64,
    pub(super) x: (f64, f64),
}

impl ModelFigure {
    pub(super) fn new(points: &[ModelPoint], capacity: u64) -> Result<ModelFigure> {
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
    pub(super) fn best_c(&self) -> Option<f64> {
        self.points
            .iter()
            .filter(|p| p.1.is_finite())
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|p| p.0)
    }
}

pub(super) const MODEL_COLOR: RGBColor = COLORS[0];
pub(super) const MEASURED_COLOR: RGBColor = COLORS[3];
pub(super) const BEST_C_COLOR: RGBColor = RGBColor(90, 90, 90);

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

pub(super) struct Track {
    pub(super) label: String,
    /// (request index, miss ratio) per window.
    pub(super) miss: Vec<(f64, f64)>,
    /// (request index, log2 c) per window that has a positive c.
    pub(super) c: Vec<(f64, f64)>,
}

pub(super) struct SeriesFigure {
    pub(super) tracks: Vec<Track>,
    /// Requests per window, if the same for all.
    pub(super) window: Option<u64>,
    /// Warm-up requests, if the same for all and positive.
    pub(super) warmup: Option<u64>,
    pub(super) x_max: f64,
}

impl SeriesFigure {
    pub(super) fn new(results: &[SimResult]) -> Result<SeriesFigure> {
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

    pub(super) fn has_c(&self) -> bool {
        self.tracks.iter().any(|t| !t.c.is_empty())
    }

    /// Markers on each window when there are few enough to tell apart.
    pub(super) fn markers(&self) -> bool {
        self.tracks.iter().map(|t| t.miss.len()).max().unwrap_or(0) <= 40
    }

    pub(super) fn shade_warmup<DB, Y>(
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

    pub(super) fn miss_panel<DB>(&self, area: &DrawingArea<DB, Shift>, x_desc: bool) -> Result<()>
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

    pub(super) fn c_panel<DB>(&self, area: &DrawingArea<DB, Shift>) -> Result<()>
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
