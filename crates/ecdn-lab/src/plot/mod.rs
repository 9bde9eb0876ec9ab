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
//! (`style::FONT_PATHS`) and registers it as plotters' `sans-serif` family. Both backends need it —
//! the SVG backend measures text for the layout, too.
//!
//! The code: `style` (output, fonts, colors, axes, legend: what every figure shares), `sim`
//! (cache simulations), `cluster` (cluster simulations), `demo` (`ecdn demo`); this file
//! holds the entry points the commands call.

use std::path::Path;

use anyhow::Result;
use ecdn_sim::cluster::{ClusterResult, UnavailabilityResult};
use ecdn_sim::model_check::ModelPoint;
use ecdn_sim::SimResult;

pub mod backend;
mod cluster;
mod cluster_demo_figure;

pub use cluster_demo_figure::PlotInput;
mod demo;
mod sim;
mod style;
#[cfg(test)]
mod tests;

use cluster::{ClusterSeriesFigure, ClusterSizeFigure, SpikeFigure};
use demo::DemoFigure;
use sim::{ModelFigure, SeriesFigure, SizeFigure};
pub use style::grouped;
use style::{output_format, render};

/// The panels of `fig` side by side, one legend (`ecdn backend bench`).
pub fn lines(path: &Path, fig: &backend::LinesFigure) -> Result<()> {
    fig.check()?;
    render(path, fig)
}

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

/// `ecdn cluster demo`'s figure: per-window miss ratio, live and simulated, with the kills
/// marked (C2DN Fig. 6a); bytes written per node, live and simulated (Fig. 6d); CDFs of time to
/// first byte and download time of coded and replicated hits (Fig. 8).
pub fn cluster_demo(path: &Path, input: &PlotInput) -> Result<()> {
    let fig = cluster_demo_figure::ClusterDemoFigure::new(input)?;
    render(path, &fig)
}

/// Checks that `path` names a file a plot can be written to (.png or .svg), to fail before
/// work whose result would then be plotted.
pub fn check_output(path: &Path) -> Result<()> {
    output_format(path).map(|_| ())
}
