//! The figures of `ecdn backend bench` (TOFEC's evaluation): panels of lines on linear axes
//! (delay against arrival rate, Fig. 8 and 9; delay and code over time, Fig. 11), and the task
//! delays measured against the fitted model (§III-C, Fig. 4), as complementary CDFs on a log
//! scale.

use anyhow::{bail, Result};
use plotters::coord::Shift;
use plotters::prelude::*;

use super::style::*;

/// One panel: a caption, the axes' descriptions, whether y is log10 (the values are then
/// log10s and labelled as powers of ten), and one line per series (series i in style i).
pub struct Panel {
    pub caption: String,
    pub x_desc: String,
    pub y_desc: String,
    pub log_y: bool,
    pub lines: Vec<Vec<(f64, f64)>>,
}

/// Panels side by side sharing one legend: `labels[i]` names every panel's line i.
pub struct LinesFigure {
    pub title: String,
    pub labels: Vec<String>,
    pub panels: Vec<Panel>,
}

impl LinesFigure {
    pub(super) fn check(&self) -> Result<()> {
        if self.panels.is_empty()
            || self
                .panels
                .iter()
                .all(|p| p.lines.iter().all(Vec::is_empty))
        {
            bail!("nothing to plot");
        }
        Ok(())
    }
}

fn range(vs: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = vs
        .filter(|v| v.is_finite())
        .fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
    if lo > hi {
        return (0.0, 1.0);
    }
    let pad = ((hi - lo) * 0.05).max(1e-9);
    (lo - pad, hi + pad)
}

impl Figure for LinesFigure {
    fn size(&self) -> (u32, u32) {
        ((520 * self.panels.len().max(1) as u32 + 40).max(760), 520)
    }

    fn legend(&self) -> Vec<LegendEntry> {
        line_legend(self.labels.iter().map(String::as_str), true)
    }

    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let panels = titled_panels(area, &self.title, (1, self.panels.len().max(1)))?;
        for (p, a) in self.panels.iter().zip(&panels) {
            draw_panel(p, a)?;
        }
        Ok(())
    }
}

fn draw_panel<DB>(p: &Panel, area: &DrawingArea<DB, Shift>) -> Result<()>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
{
    let pts = || p.lines.iter().flatten();
    let (xlo, xhi) = range(pts().map(|q| q.0));
    let (mut ylo, yhi) = range(pts().map(|q| q.1));
    if !p.log_y {
        ylo = ylo.min(0.0);
    }
    let mut builder = chart_on(area, Some(&p.caption), true, (50, 70));
    let mut chart = builder.build_cartesian_2d(xlo..xhi, ylo..yhi)?;
    let log_label = |v: &f64| {
        let x = 10f64.powf(*v);
        if x >= 10.0 {
            format!("{x:.0}")
        } else if x >= 0.01 {
            format!("{x:.2}")
        } else {
            format!("{x:.0e}")
        }
    };
    let lin_label = |v: &f64| {
        if v.abs() < 10.0 && v.fract() != 0.0 {
            format!("{v:.1}")
        } else {
            format!("{v:.0}")
        }
    };
    let x_label = |v: &f64| format!("{v:.0}");
    let y_fmt: &dyn Fn(&f64) -> String = if p.log_y { &log_label } else { &lin_label };
    mesh(&mut chart)
        .x_label_formatter(&x_label)
        .y_label_formatter(y_fmt)
        .y_labels(8)
        .x_desc(p.x_desc.as_str())
        .y_desc(p.y_desc.as_str())
        .draw()?;
    draw_lines(&mut chart, &p.lines, true)?;
    Ok(())
}

/// The Kaplan–Meier survival curve of delays (seconds) some of which are only known to be
/// longer (`censored`): (delay in ms, log10 of the fraction of tasks slower), down to the
/// last completed delay.
pub fn survival(samples: &[(f64, bool)]) -> Vec<(f64, f64)> {
    let mut s: Vec<(f64, bool)> = samples
        .iter()
        .copied()
        .filter(|x| x.0.is_finite())
        .collect();
    s.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut at_risk = s.len() as f64;
    let mut surv = 1.0f64;
    let mut out = Vec::new();
    for (d, censored) in s {
        if !censored && at_risk > 0.0 {
            surv *= 1.0 - 1.0 / at_risk;
            if surv > 0.0 {
                out.push((d * 1000.0, surv.log10()));
            }
        }
        at_risk -= 1.0;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kaplan_meier_of_complete_samples_is_the_empirical_ccdf() {
        let s: Vec<(f64, bool)> = (1..=10).map(|i| (i as f64 / 1000.0, false)).collect();
        let c = survival(&s);
        assert_eq!(c.len(), 9); // the last one reaches 0
        assert!((c[0].1 - 0.9f64.log10()).abs() < 1e-12);
        assert!((c[4].1 - 0.5f64.log10()).abs() < 1e-12);
        // A censored sample lowers the risk set, not the curve.
        let mut s2 = s.clone();
        s2.push((0.0005, true));
        let c2 = survival(&s2);
        assert!((c2[0].1 - 0.9f64.log10()).abs() < 1e-12);
    }

    #[test]
    fn draws_a_figure() {
        let dir = tempfile::tempdir().unwrap();
        let fig = LinesFigure {
            title: "t".into(),
            labels: vec!["a".into(), "b".into()],
            panels: vec![Panel {
                caption: "c".into(),
                x_desc: "x".into(),
                y_desc: "y".into(),
                log_y: false,
                lines: vec![vec![(1.0, 2.0), (2.0, 3.0)], vec![(1.0, 1.0)]],
            }],
        };
        let path = dir.path().join("f.png");
        render(&path, &fig).unwrap();
        assert!(std::fs::metadata(&path).unwrap().len() > 1000);
        let empty = LinesFigure {
            panels: vec![],
            ..fig
        };
        assert!(empty.check().is_err());
    }
}
