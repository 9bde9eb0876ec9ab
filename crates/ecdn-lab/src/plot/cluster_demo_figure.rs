//! The figure of `ecdn cluster demo` (drawn by [`super::cluster_demo`], next to the
//! other figures, whose style it shares): per-window miss ratio of the live cluster and of the
//! simulator with each kill and each restarted node's return marked (C2DN Fig. 6a), bytes
//! written per node, live and simulated (Fig. 6d), and the CDFs of time to first byte and
//! download time of coded and replicated hits (Fig. 8).

use anyhow::{bail, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::demo::{cdf_points, ms_label};
use super::style::*;

const LIVE: RGBColor = COLORS[0];
const SIM: RGBColor = COLORS[1];
const KILL: RGBColor = COLORS[3];
const BACK: RGBColor = COLORS[9];
const CODED: RGBColor = COLORS[2];
const REPLICATED: RGBColor = COLORS[4];

/// What the demo's figure draws.
pub struct PlotInput {
    pub title: String,
    /// Per window: (first request, requests, live miss ratio, simulated miss ratio).
    pub windows: Vec<(u64, u64, f64, Option<f64>)>,
    /// (request index, node) of each kill.
    pub kills: Vec<(u64, usize)>,
    /// (request index, node, disk wiped) of each restarted node's return.
    pub restarts: Vec<(u64, usize, bool)>,
    /// Per node; `None` for a killed node that did not come back.
    pub bytes_written: Vec<Option<u64>>,
    pub sim_bytes_written: Vec<u64>,
    /// (TTFB, download) latencies in µs of the hits of coded and of replicated objects.
    pub coded: (Vec<u64>, Vec<u64>),
    pub replicated: (Vec<u64>, Vec<u64>),
}

pub(super) struct ClusterDemoFigure<'a> {
    input: &'a PlotInput,
    /// (window middle, live miss ratio, simulated miss ratio).
    points: Vec<(f64, f64, Option<f64>)>,
}

impl<'a> ClusterDemoFigure<'a> {
    pub(super) fn new(input: &'a PlotInput) -> Result<Self> {
        if input.windows.is_empty() {
            bail!("nothing to plot: no windows");
        }
        let points = input
            .windows
            .iter()
            .map(|&(start, n, live, sim)| (start as f64 + n as f64 / 2.0, live, sim))
            .collect();
        Ok(ClusterDemoFigure { input, points })
    }

    fn end(&self) -> f64 {
        self.input
            .windows
            .last()
            .map_or(1.0, |&(s, n, _, _)| (s + n) as f64)
    }

    fn miss_panel<DB>(&self, area: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB: DrawingBackend,
        DB::ErrorType: 'static,
    {
        let (lo, hi) = ratio_range(
            self.points
                .iter()
                .flat_map(|&(_, l, s)| std::iter::once(l).chain(s)),
        );
        let end = self.end();
        let mut chart = chart_on(area, Some("(a) Miss ratio per window"), true, (52, 70))
            .build_cartesian_2d(0.0..end, lo..hi)?;
        mesh(&mut chart)
            .x_label_formatter(&|v: &f64| count_label(*v))
            .y_label_formatter(&ratio_label(hi - lo))
            .x_labels(8)
            .y_labels(8)
            .x_desc("request")
            .y_desc("object miss ratio")
            .draw()?;
        for &(at, node) in &self.input.kills {
            let x = at as f64;
            chart.draw_series(DashedLineSeries::new(
                [(x, lo), (x, hi)],
                6,
                4,
                KILL.stroke_width(2),
            ))?;
            chart.draw_series(std::iter::once(
                EmptyElement::at((x, hi))
                    + Text::new(
                        format!("node {node} killed"),
                        (4, 4),
                        label_style().pos(Pos::new(HPos::Left, VPos::Top)),
                    ),
            ))?;
        }
        // Returns of restarted nodes: shorter dashes, labelled a line below the kills.
        for &(at, node, wiped) in &self.input.restarts {
            let x = at as f64;
            chart.draw_series(DashedLineSeries::new(
                [(x, lo), (x, hi)],
                3,
                3,
                BACK.stroke_width(2),
            ))?;
            let label = if wiped {
                format!("node {node} back, disk wiped")
            } else {
                format!("node {node} back")
            };
            chart.draw_series(std::iter::once(
                EmptyElement::at((x, hi))
                    + Text::new(
                        label,
                        (4, 20),
                        label_style().pos(Pos::new(HPos::Left, VPos::Top)),
                    ),
            ))?;
        }
        let sim: Vec<(f64, f64)> = self
            .points
            .iter()
            .filter_map(|&(x, _, s)| s.map(|s| (x, s)))
            .collect();
        draw_line(&mut chart, &sim, SIM, Marker::Triangle, true)?;
        let live: Vec<(f64, f64)> = self.points.iter().map(|&(x, l, _)| (x, l)).collect();
        draw_line(&mut chart, &live, LIVE, Marker::Circle, true)?;
        Ok(())
    }

    fn written_panel<DB>(&self, area: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB: DrawingBackend,
        DB::ErrorType: 'static,
    {
        let n = self
            .input
            .bytes_written
            .len()
            .max(self.input.sim_bytes_written.len());
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        let top = self
            .input
            .bytes_written
            .iter()
            .flatten()
            .chain(&self.input.sim_bytes_written)
            .map(|&b| mib(b))
            .fold(0.0f64, f64::max);
        let top = if top > 0.0 { top * 1.12 } else { 1.0 };
        let mut chart = chart_on(area, Some("(b) Bytes written per node"), true, (52, 70))
            .build_cartesian_2d(-0.5..n as f64 - 0.5, 0.0..top)?;
        mesh(&mut chart)
            .x_label_formatter(&|v: &f64| format!("{}", v.round() as i64))
            .y_label_formatter(&|v: &f64| format!("{v:.0}"))
            .x_labels(n.min(16))
            .y_labels(8)
            .disable_x_mesh()
            .x_desc("node")
            .y_desc("MiB written")
            .draw()?;
        for i in 0..n {
            let x = i as f64;
            match self.input.bytes_written.get(i).copied().flatten() {
                Some(b) => {
                    chart.draw_series(std::iter::once(Rectangle::new(
                        [(x - 0.38, 0.0), (x - 0.02, mib(b))],
                        LIVE.filled(),
                    )))?;
                }
                None => {
                    chart.draw_series(std::iter::once(
                        EmptyElement::at((x - 0.2, 0.0))
                            + Text::new(
                                "killed",
                                (0, -4),
                                label_style().pos(Pos::new(HPos::Center, VPos::Bottom)),
                            ),
                    ))?;
                }
            }
            if let Some(&b) = self.input.sim_bytes_written.get(i) {
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(x + 0.02, 0.0), (x + 0.38, mib(b))],
                    SIM.filled(),
                )))?;
            }
        }
        Ok(())
    }

    fn cdf_panel<DB>(
        &self,
        area: &DrawingArea<DB, Shift>,
        caption: &str,
        download: bool,
    ) -> Result<()>
    where
        DB: DrawingBackend,
        DB::ErrorType: 'static,
    {
        let pick = |v: &(Vec<u64>, Vec<u64>)| {
            let mut s = if download { v.1.clone() } else { v.0.clone() };
            s.sort_unstable();
            cdf_points(&s, 400)
        };
        let lines = [
            (pick(&self.input.coded), CODED),
            (pick(&self.input.replicated), REPLICATED),
        ];
        let range = min_max(lines.iter().flat_map(|(p, _)| p.iter().map(|q| q.0)));
        let mut chart = chart_on(area, Some(caption), true, (52, 70));
        let Some((lo, hi)) = range else {
            let mut chart = chart.build_cartesian_2d(0.0..1.0, 0.0..1.0)?;
            mesh(&mut chart).x_desc("no hits").draw()?;
            return Ok(());
        };
        let pad = ((hi - lo) * 0.04).max(0.1);
        let mut chart = chart.build_cartesian_2d(LogAxis::log10(lo - pad, hi + pad), 0.0..1.0)?;
        mesh(&mut chart)
            .x_label_formatter(&ms_label)
            .y_label_formatter(&ratio_label(1.0))
            .y_labels(11)
            .x_desc("latency (log scale)")
            .y_desc("fraction of hits")
            .draw()?;
        for (pts, color) in &lines {
            chart.draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))?;
        }
        Ok(())
    }
}

impl Figure for ClusterDemoFigure<'_> {
    fn size(&self) -> (u32, u32) {
        (1400, 1100)
    }

    fn legend(&self) -> Vec<LegendEntry> {
        let entry = |label: &str, color, line, marker| LegendEntry {
            label: label.to_string(),
            color,
            line,
            marker,
        };
        let mut v = vec![
            entry("live cluster", LIVE, LineKind::Solid, Some(Marker::Circle)),
            entry(
                "simulator, no failures",
                SIM,
                LineKind::Solid,
                Some(Marker::Triangle),
            ),
        ];
        if !self.input.kills.is_empty() {
            v.push(entry("kill (SIGKILL)", KILL, LineKind::Dashed, None));
        }
        if !self.input.restarts.is_empty() {
            v.push(entry("return (restart)", BACK, LineKind::Dashed, None));
        }
        v.push(entry("coded hits", CODED, LineKind::Solid, None));
        v.push(entry("replicated hits", REPLICATED, LineKind::Solid, None));
        v
    }

    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let panels = titled_panels(area, &self.input.title, (2, 2))?;
        self.miss_panel(&panels[0])?;
        self.written_panel(&panels[1])?;
        self.cdf_panel(&panels[2], "(c) Time to first byte of hits", false)?;
        self.cdf_panel(&panels[3], "(d) Download time of hits", true)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> PlotInput {
        PlotInput {
            title: "test".into(),
            windows: vec![
                (0, 100, 0.6, Some(0.62)),
                (100, 100, 0.4, Some(0.38)),
                (200, 100, 0.5, Some(0.4)),
            ],
            kills: vec![(100, 2)],
            restarts: vec![(200, 2, true)],
            bytes_written: vec![Some(3 << 20), Some(4 << 20), None],
            sim_bytes_written: vec![3 << 20, 4 << 20, 2 << 20],
            coded: (vec![1500, 2500, 900], vec![8000, 9000, 12000]),
            replicated: (vec![400, 800], vec![600, 900]),
        }
    }

    #[test]
    fn figure_renders_to_svg_and_png() {
        // Without a font nothing can be laid out: the test fails (the plot tests' rule).
        super::super::tests::require_font();
        let dir = tempfile::tempdir().unwrap();
        for name in ["demo.svg", "demo.png"] {
            let path = dir.path().join(name);
            super::super::cluster_demo(&path, &input()).unwrap();
            assert!(std::fs::metadata(&path).unwrap().len() > 1000);
        }
        let svg = std::fs::read_to_string(dir.path().join("demo.svg")).unwrap();
        assert!(svg.contains("node 2 killed"));
        assert!(svg.contains("node 2 back, disk wiped"));
        assert!(svg.contains("return (restart)"));
        assert!(svg.contains("(d) Download time of hits"));
    }

    #[test]
    fn figure_without_windows_is_an_error() {
        let mut i = input();
        i.windows.clear();
        assert!(ClusterDemoFigure::new(&i).is_err());
    }
}
