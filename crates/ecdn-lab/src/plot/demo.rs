//! The figure of `ecdn demo`: the latency CDF per tier and where requests were served over
//! the run.

use anyhow::{anyhow, bail, Result};
use plotters::coord::Shift;
use plotters::prelude::*;

use super::style::*;

// ---------------------------------------------------------------------------------------------
// The demo: latency CDF per tier and where requests were served over time.

/// Tiers in the order the demo figure lists them; others follow, by name.
pub(super) const TIER_ORDER: [&str; 7] = [
    "HIT-HOC",
    "HIT-DISK",
    "MISS",
    "MISS-COLLAPSED",
    "REVALIDATED",
    "STALE",
    "PASS",
];

/// Windows of the demo's served-by panel.
pub(super) const DEMO_WINDOWS: usize = 20;

/// Where a request of `tier` was served from, in the served-by panel: 0 HOC, 1 disk, 2 origin,
/// 3 other.
pub(super) fn served_by(tier: &str) -> usize {
    match tier {
        "HIT-HOC" => 0,
        "HIT-DISK" => 1,
        "MISS" | "MISS-COLLAPSED" => 2,
        _ => 3,
    }
}

pub(super) const SERVED_BY: [&str; 4] = ["HOC", "disk", "origin (MISS, MISS-COLLAPSED)", "other"];

/// Tick label of a log10 milliseconds axis: 10^v without trailing zeros, "ms" appended.
pub(super) fn ms_label(v: &f64) -> String {
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
pub(super) fn cdf_points(sorted: &[u64], max: usize) -> Vec<(f64, f64)> {
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
pub(super) struct TierCdf {
    pub(super) tier: String,
    pub(super) color: RGBColor,
    /// From [`cdf_points`].
    pub(super) points: Vec<(f64, f64)>,
}

pub(super) struct DemoFigure {
    pub(super) title: String,
    /// One per tier that occurs, in [`TIER_ORDER`].
    pub(super) cdfs: Vec<TierCdf>,
    /// One per window: (first request, end request, shares served by each of [`SERVED_BY`]).
    pub(super) windows: Vec<(f64, f64, [f64; 4])>,
    /// Whether any request was served by a tier counted as "other".
    pub(super) other: bool,
    pub(super) total: usize,
}

/// The color of the i-th of [`TIER_ORDER`] (and of tiers after them).
pub(super) fn tier_color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

/// The colors of [`SERVED_BY`], those of the tiers they stand for.
pub(super) const SERVED_COLORS: [RGBColor; 4] = [COLORS[0], COLORS[1], COLORS[2], COLORS[7]];

impl DemoFigure {
    pub(super) fn new(samples: &[(&str, u64)], title: &str) -> Result<DemoFigure> {
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

    pub(super) fn cdf_panel<DB>(&self, area: &DrawingArea<DB, Shift>) -> Result<()>
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

    pub(super) fn served_panel<DB>(&self, area: &DrawingArea<DB, Shift>) -> Result<()>
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
