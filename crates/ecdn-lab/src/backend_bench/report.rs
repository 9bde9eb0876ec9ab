//! The bench's report: per request its record, per strategy and rate a [`Point`] (throughput
//! and delays), and per rate the row that says which strategy was best.

use serde::Serialize;

/// One read: when it arrived (since the run's start), how long it took, its code.
#[derive(Clone, Copy, Debug)]
pub struct Record {
    pub at: f64,
    pub done_at: f64,
    pub delay: f64,
    /// Of `delay`, the time in the proxy's request queue.
    pub queued: f64,
    pub n: usize,
    pub k: usize,
    pub ok: bool,
    /// Not finished when the run stopped.
    pub stopped: bool,
    pub write: bool,
}

#[derive(Clone, Serialize)]
pub struct Delays {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub std: f64,
}

#[derive(Serialize)]
pub struct Point {
    /// The emulator's delay source (`--store-delays`).
    pub store_delays: String,
    /// The link of the emulator's test-bed host (`--testbed`); none: on loopback.
    pub store_link: Option<String>,
    pub strategy: String,
    /// `read` or `write`.
    pub op: &'static str,
    pub arrival_rate: f64,
    pub throughput: f64,
    pub delay_ms: Delays,
    pub mean_n: f64,
    pub mean_k: f64,
    /// Share of the completed reads served with k = 1..=6.
    pub k_share: Vec<f64>,
    /// Every code the completed requests were served with, the most used first.
    pub codes: Vec<CodeUse>,
    pub requests: usize,
    pub completed: usize,
    pub failed: usize,
    pub unfinished: usize,
    pub size: u64,
    pub connections: usize,
    /// The proxy's model of the operation at the end (ms and ms per MB).
    pub model: Option<[f64; 4]>,
    /// The lowest mean delay of its row (its rate and operation) among the strategies that
    /// finished every measured request.
    pub best: bool,
}

/// How often one code `(n, k)` was used, and its requests' mean delay.
#[derive(Clone, Debug, Serialize)]
pub struct CodeUse {
    pub n: usize,
    pub k: usize,
    /// Of the completed requests.
    pub share: f64,
    pub mean_ms: f64,
    /// Of the mean, the time in the request queue.
    pub queued_ms: f64,
}

/// The codes of `ok`, the most used first.
fn code_uses(ok: &[&Record]) -> Vec<CodeUse> {
    let mut by: std::collections::BTreeMap<(usize, usize), (usize, f64, f64)> = Default::default();
    for r in ok {
        let e = by.entry((r.n, r.k)).or_default();
        e.0 += 1;
        e.1 += r.delay;
        e.2 += r.queued;
    }
    let mut out: Vec<CodeUse> = by
        .into_iter()
        .map(|((n, k), (count, sum, queued))| CodeUse {
            n,
            k,
            share: count as f64 / ok.len() as f64,
            mean_ms: 1000.0 * sum / count as f64,
            queued_ms: 1000.0 * queued / count as f64,
        })
        .collect();
    out.sort_by(|a, b| b.share.total_cmp(&a.share));
    out
}

/// The codes of a point in a line, `(6,3) 71% 101 ms (queued 3), …`: the first `most`.
pub fn codes_line(codes: &[CodeUse], most: usize) -> String {
    codes
        .iter()
        .take(most)
        .map(|c| {
            format!(
                "({},{}) {:.0}% {:.0} ms (queued {:.0})",
                c.n,
                c.k,
                100.0 * c.share,
                c.mean_ms,
                c.queued_ms
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The report of one operation's requests (`recs`) of a run whose measured window is
/// `(warmup, end)` seconds.
pub fn summarize(
    recs: &[&Record],
    (warmup, end): (f64, f64),
    strategy: String,
    op: &'static str,
    rate: f64,
    model: Option<[f64; 4]>,
) -> Point {
    let measured: Vec<&Record> = recs.iter().copied().filter(|r| r.at >= warmup).collect();
    let ok: Vec<&Record> = measured.iter().copied().filter(|r| r.ok).collect();
    let stopped = measured.iter().filter(|r| r.stopped).count();
    let in_window = recs
        .iter()
        .filter(|r| r.ok && r.done_at >= warmup && r.done_at < end)
        .count();
    let mut k_share = vec![0.0; 6];
    for r in &ok {
        if (1..=6).contains(&r.k) {
            k_share[r.k - 1] += 1.0 / ok.len() as f64;
        }
    }
    let mean = |f: fn(&Record) -> usize| {
        ok.iter().fold(0.0, |a, r| a + f(r) as f64) / ok.len().max(1) as f64
    };
    Point {
        store_delays: String::new(),
        store_link: None,
        strategy,
        op,
        arrival_rate: rate,
        throughput: in_window as f64 / (end - warmup),
        delay_ms: delays(ok.iter().map(|r| r.delay).collect()),
        mean_n: mean(|r| r.n),
        mean_k: mean(|r| r.k),
        k_share,
        codes: code_uses(&ok),
        requests: measured.len(),
        completed: ok.len(),
        failed: measured.len() - ok.len() - stopped,
        unfinished: stopped,
        size: 0,
        connections: 0,
        model,
        best: false,
    }
}

pub fn delays(mut v: Vec<f64>) -> Delays {
    if v.is_empty() {
        return Delays {
            mean: f64::NAN,
            p50: f64::NAN,
            p90: f64::NAN,
            p99: f64::NAN,
            std: f64::NAN,
        };
    }
    v.sort_by(f64::total_cmp);
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    let q = |p: f64| v[((p * n).ceil() as usize).clamp(1, v.len()) - 1];
    let ms = 1000.0;
    Delays {
        mean: mean * ms,
        p50: q(0.5) * ms,
        p90: q(0.9) * ms,
        p99: q(0.99) * ms,
        std: var.sqrt() * ms,
    }
}

/// Marks the best point of a row: the lowest mean delay among the strategies that finished
/// all but 1% of the measured requests and failed none (a strategy above its capacity leaves
/// many unfinished, and the mean of those it finished flatters it; a heavy tail can leave a
/// request of any strategy unfinished).
pub fn mark_best(row: &mut [Point]) {
    let best = row
        .iter()
        .enumerate()
        .filter(|(_, p)| {
            100 * p.unfinished <= p.requests && p.failed == 0 && p.delay_ms.mean.is_finite()
        })
        .min_by(|a, b| a.1.delay_ms.mean.total_cmp(&b.1.delay_ms.mean))
        .map(|(i, _)| i);
    for (i, p) in row.iter_mut().enumerate() {
        p.best = Some(i) == best;
    }
}

/// The table of one delay source: a line per rate (and operation), each strategy's mean and
/// p99 delay, the best starred, and each TOFEC's mean against the best's and (1, 1)'s.
pub fn table(source: &str, rows: &[Vec<Point>]) -> String {
    let Some(first) = rows.first() else {
        return String::new();
    };
    let tofecs: Vec<&str> = first
        .iter()
        .map(|p| p.strategy.as_str())
        .filter(|s| s.starts_with("tofec"))
        .collect();
    let mut out =
        format!("store delays {source}: mean / p99 delay (ms), * the best mean of the row\n");
    out.push_str("| op | rate /s |");
    for p in first {
        out.push_str(&format!(" {} |", p.strategy));
    }
    for t in &tofecs {
        out.push_str(&format!(" {t} / best | (1,1) / {t} |"));
    }
    out.push_str("\n|---|---|");
    out.push_str(&"---|".repeat(first.len() + 2 * tofecs.len()));
    out.push('\n');
    for row in rows {
        let Some(p0) = row.first() else { continue };
        out.push_str(&format!("| {} | {:.1} |", p0.op, p0.arrival_rate));
        for p in row {
            let star = if p.best { "*" } else { "" };
            let unfinished = if p.unfinished > 0 {
                format!(" ({} unfinished)", p.unfinished)
            } else {
                String::new()
            };
            out.push_str(&format!(
                " {star}{:.1} / {:.1}{unfinished} |",
                p.delay_ms.mean, p.delay_ms.p99
            ));
        }
        let mean_of = |name: &str| {
            row.iter()
                .find(|p| p.strategy == name)
                .map(|p| p.delay_ms.mean)
        };
        let best = row.iter().find(|p| p.best).map(|p| p.delay_ms.mean);
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if a.is_finite() && b.is_finite() && b > 0.0 => {
                format!("{:.2}", a / b)
            }
            _ => "-".into(),
        };
        for t in &tofecs {
            let tofec = mean_of(t);
            out.push_str(&format!(
                " {} | {} |",
                ratio(tofec, best),
                ratio(mean_of("static-1-1"), tofec)
            ));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(strategy: &str, mean: f64, unfinished: usize) -> Point {
        let recs: Vec<Record> = Vec::new();
        let refs: Vec<&Record> = recs.iter().collect();
        let mut p = summarize(&refs, (0.0, 1.0), strategy.into(), "read", 10.0, None);
        p.delay_ms.mean = mean;
        p.delay_ms.p99 = 2.0 * mean;
        p.unfinished = unfinished;
        p.requests = 200;
        p
    }

    #[test]
    fn the_codes_used_are_counted_with_their_delays_most_used_first() {
        let rec = |n, k, delay| Record {
            at: 1.0,
            done_at: 1.0 + delay,
            delay,
            queued: delay / 10.0,
            n,
            k,
            ok: true,
            stopped: false,
            write: false,
        };
        let recs = [
            rec(2, 1, 0.3),
            rec(6, 3, 0.1),
            rec(6, 3, 0.2),
            rec(2, 1, 0.1),
            rec(6, 3, 0.3),
        ];
        let refs: Vec<&Record> = recs.iter().collect();
        let p = summarize(&refs, (0.0, 10.0), "tofec-tail".into(), "read", 1.0, None);
        let got: Vec<(usize, usize)> = p.codes.iter().map(|c| (c.n, c.k)).collect();
        assert_eq!(got, [(6, 3), (2, 1)]);
        assert!((p.codes[0].share - 0.6).abs() < 1e-9 && (p.codes[0].mean_ms - 200.0).abs() < 1e-6);
        assert!((p.codes[1].mean_ms - 200.0).abs() < 1e-6);
        assert_eq!(codes_line(&p.codes, 1), "(6,3) 60% 200 ms (queued 20)");
    }

    #[test]
    fn the_best_of_a_row_finished_everything() {
        let mut row = vec![
            point("tofec", 100.0, 0),
            point("static-1-1", 210.0, 0),
            point("static-12-6", 90.0, 3),
            point("static-6-3", 95.0, 0),
        ];
        mark_best(&mut row);
        let best: Vec<bool> = row.iter().map(|p| p.best).collect();
        assert_eq!(best, [false, false, false, true]);
        // One request of 200 left by a heavy tail does not disqualify.
        row[2].unfinished = 2;
        mark_best(&mut row);
        assert!(row[2].best);
        row[2].unfinished = 3;
        mark_best(&mut row);
        let t = table("model", &[row]);
        assert!(t.contains("*95.0 / 190.0"), "{t}");
        assert!(t.contains("90.0 / 180.0 (3 unfinished)"), "{t}");
        assert!(t.contains("| 1.05 | 2.10 |"), "{t}");
    }
}
