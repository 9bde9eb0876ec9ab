//! Trace statistics in one streaming pass.
//!
//! [`StatsCollector`] keeps, per unique object, its request count and first-seen size, and per
//! distinct size value its request count; everything else is O(1). Memory is therefore
//! O(unique objects) — the number of distinct sizes is at most the number of distinct
//! (object, size) pairs — and all reported numbers are exact (no sketches or histograms).

use std::fmt;

use serde::Serialize;

use crate::units::format_size;
use crate::{Request, RequestReader, TraceError, BATCH};

type Map<V> = hashbrown::HashMap<u64, V, foldhash::fast::FixedState>;

fn new_map<V>() -> Map<V> {
    Map::with_hasher(foldhash::fast::FixedState::with_seed(0))
}

/// Percentiles of a size distribution (bytes). A percentile `pX` is the smallest size `s` such
/// that at least X% of the items have size ≤ `s` (nearest-rank definition); all fields are 0
/// for an empty trace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct SizeSummary {
    /// Smallest size.
    pub min: u64,
    /// 1st percentile.
    pub p1: u64,
    /// 10th percentile.
    pub p10: u64,
    /// 25th percentile.
    pub p25: u64,
    /// Median.
    pub p50: u64,
    /// 75th percentile.
    pub p75: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest size.
    pub max: u64,
    /// Arithmetic mean.
    pub mean: f64,
}

/// The quantiles of [`SizeSummary`] in thousandths, in field order (min and max are the 0 and 1
/// quantiles).
const QUANTILES: [u64; 10] = [0, 10, 100, 250, 500, 750, 900, 990, 999, 1000];

impl SizeSummary {
    /// Summarizes a weighted distribution given as `(size, weight)` pairs sorted by size.
    fn from_sorted(sorted: &[(u64, u64)]) -> SizeSummary {
        let total: u64 = sorted.iter().map(|&(_, w)| w).sum();
        if total == 0 {
            return SizeSummary::default();
        }
        let sum: f64 = sorted.iter().map(|&(s, w)| s as f64 * w as f64).sum();
        let mut q = [0u64; QUANTILES.len()];
        let mut cum = 0u64;
        let mut k = 0;
        for &(size, w) in sorted {
            cum += w;
            while k < q.len() && cum >= rank(QUANTILES[k], total) {
                q[k] = size;
                k += 1;
            }
        }
        SizeSummary {
            min: q[0],
            p1: q[1],
            p10: q[2],
            p25: q[3],
            p50: q[4],
            p75: q[5],
            p90: q[6],
            p99: q[7],
            p999: q[8],
            max: q[9],
            mean: sum / total as f64,
        }
    }
}

/// Nearest rank (1-based) of quantile `q`/1000 among `n` items: `ceil(q · n / 1000)`, at least 1.
fn rank(q: u64, n: u64) -> u64 {
    let r = (q as u128 * n as u128).div_ceil(1000) as u64;
    r.clamp(1, n)
}

/// Statistics of a trace; see [`TraceStats::compute`]. Ratios are 0 for an empty trace.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TraceStats {
    /// Number of requests.
    pub requests: u64,
    /// Number of distinct object ids.
    pub unique_objects: u64,
    /// Sum of requested sizes (bytes).
    pub total_bytes: u64,
    /// Sum of the objects' first-seen sizes (bytes): the working-set size.
    pub unique_bytes: u64,
    /// Smallest timestamp.
    pub first_time: u64,
    /// Largest timestamp.
    pub last_time: u64,
    /// `last_time - first_time` (trace seconds).
    pub duration: u64,
    /// Requests whose size differs from the first size seen for their object.
    pub size_changes: u64,
    /// Request-weighted size distribution (each request counts once).
    pub request_sizes: SizeSummary,
    /// Object-weighted size distribution (each object counts once, with its first-seen size).
    pub object_sizes: SizeSummary,
    /// Objects requested exactly once.
    pub one_hit_wonders: u64,
    /// `one_hit_wonders / unique_objects`.
    pub one_hit_wonder_ratio: f64,
    /// Number of objects in the top 1% by request count (`ceil(unique_objects / 100)`).
    pub top1pct_objects: u64,
    /// Share of all requests that go to the top 1% most-requested objects.
    pub top1pct_request_share: f64,
    /// Compulsory (cold) miss ratio: `unique_objects / requests`, the miss ratio of an infinite
    /// cache.
    pub cold_miss_ratio: f64,
    /// Compulsory byte miss ratio: `unique_bytes / total_bytes`.
    pub cold_byte_miss_ratio: f64,
}

/// Per-object state of the collector.
#[derive(Clone, Copy)]
struct Obj {
    count: u64,
    size: u64,
}

/// Incremental computation of [`TraceStats`]: feed requests with [`StatsCollector::add`] or
/// [`StatsCollector::add_batch`], then call [`StatsCollector::finish`].
pub struct StatsCollector {
    objects: Map<Obj>,
    size_counts: Map<u64>,
    requests: u64,
    total_bytes: u64,
    first_time: u64,
    last_time: u64,
    size_changes: u64,
}

impl Default for StatsCollector {
    fn default() -> Self {
        StatsCollector::new()
    }
}

impl StatsCollector {
    /// An empty collector.
    pub fn new() -> Self {
        StatsCollector {
            objects: new_map(),
            size_counts: new_map(),
            requests: 0,
            total_bytes: 0,
            first_time: u64::MAX,
            last_time: 0,
            size_changes: 0,
        }
    }

    /// Accounts one request.
    #[inline]
    pub fn add(&mut self, r: &Request) {
        self.requests += 1;
        self.total_bytes = self.total_bytes.saturating_add(r.size);
        self.first_time = self.first_time.min(r.time);
        self.last_time = self.last_time.max(r.time);
        *self.size_counts.entry(r.size).or_insert(0) += 1;
        let o = self.objects.entry(r.id).or_insert(Obj {
            count: 0,
            size: r.size,
        });
        o.count += 1;
        if o.size != r.size {
            self.size_changes += 1;
        }
    }

    /// Accounts a batch of requests.
    pub fn add_batch(&mut self, reqs: &[Request]) {
        for r in reqs {
            self.add(r);
        }
    }

    /// Computes the statistics (sorting is O(unique objects · log)).
    pub fn finish(self) -> TraceStats {
        let requests = self.requests;
        let unique = self.objects.len() as u64;
        if requests == 0 {
            return TraceStats::default();
        }
        let mut by_size: Vec<(u64, u64)> = self.size_counts.into_iter().collect();
        by_size.sort_unstable();
        let request_sizes = SizeSummary::from_sorted(&by_size);
        drop(by_size);

        let mut obj_sizes: Vec<(u64, u64)> = Vec::with_capacity(self.objects.len());
        let mut counts: Vec<u64> = Vec::with_capacity(self.objects.len());
        let mut unique_bytes = 0u64;
        let mut one_hit = 0u64;
        for o in self.objects.values() {
            obj_sizes.push((o.size, 1));
            counts.push(o.count);
            unique_bytes = unique_bytes.saturating_add(o.size);
            one_hit += (o.count == 1) as u64;
        }
        obj_sizes.sort_unstable();
        let object_sizes = SizeSummary::from_sorted(&obj_sizes);
        drop(obj_sizes);

        let top = unique.div_ceil(100) as usize;
        let top_requests: u64 = if top >= counts.len() {
            counts.iter().sum()
        } else {
            let k = counts.len() - top - 1;
            let (_, _, hi) = counts.select_nth_unstable(k);
            hi.iter().sum()
        };
        let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        TraceStats {
            requests,
            unique_objects: unique,
            total_bytes: self.total_bytes,
            unique_bytes,
            first_time: self.first_time,
            last_time: self.last_time,
            duration: self.last_time - self.first_time,
            size_changes: self.size_changes,
            request_sizes,
            object_sizes,
            one_hit_wonders: one_hit,
            one_hit_wonder_ratio: ratio(one_hit, unique),
            top1pct_objects: top as u64,
            top1pct_request_share: ratio(top_requests, requests),
            cold_miss_ratio: ratio(unique, requests),
            cold_byte_miss_ratio: ratio(unique_bytes, self.total_bytes),
        }
    }
}

impl TraceStats {
    /// Reads the whole trace once and computes its statistics.
    pub fn compute(reader: &mut dyn RequestReader) -> Result<TraceStats, TraceError> {
        let mut c = StatsCollector::new();
        let mut buf = Vec::with_capacity(BATCH);
        while reader.read_batch(&mut buf, BATCH)? > 0 {
            c.add_batch(&buf);
        }
        Ok(c.finish())
    }
}

/// Formats a duration in trace seconds as `1d 2h 3m 4s` (omitting leading zero units).
fn format_duration(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if d > 0 {
        format!("{d}d {h}h {m}m {s}s")
    } else if h > 0 {
        format!("{h}h {m}m {s}s")
    } else if m > 0 {
        format!("{m}m {s}s")
    } else {
        format!("{s}s")
    }
}

/// A count with thousands separators: `20_000_000` → `20,000,000`.
fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn pct(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}

impl fmt::Display for TraceStats {
    /// A human-readable table.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rows: [(&str, String); 12] = [
            ("requests", group(self.requests)),
            ("unique objects", group(self.unique_objects)),
            (
                "total bytes",
                format!(
                    "{} ({})",
                    format_size(self.total_bytes),
                    group(self.total_bytes)
                ),
            ),
            (
                "unique bytes",
                format!(
                    "{} ({})",
                    format_size(self.unique_bytes),
                    group(self.unique_bytes)
                ),
            ),
            (
                "time span",
                format!(
                    "{} .. {} ({})",
                    self.first_time,
                    self.last_time,
                    format_duration(self.duration)
                ),
            ),
            (
                "one-hit wonders",
                format!(
                    "{} ({} of objects)",
                    group(self.one_hit_wonders),
                    pct(self.one_hit_wonder_ratio)
                ),
            ),
            (
                "top 1% objects",
                format!(
                    "{} objects get {} of requests",
                    group(self.top1pct_objects),
                    pct(self.top1pct_request_share)
                ),
            ),
            ("cold miss ratio", pct(self.cold_miss_ratio)),
            ("cold byte miss ratio", pct(self.cold_byte_miss_ratio)),
            ("size changes", group(self.size_changes)),
            (
                "mean size (requests)",
                format_size(self.request_sizes.mean.round() as u64),
            ),
            (
                "mean size (objects)",
                format_size(self.object_sizes.mean.round() as u64),
            ),
        ];
        for (k, v) in rows {
            writeln!(f, "{k:<22}{v}")?;
        }
        writeln!(f)?;
        let heads = [
            "min", "p1", "p10", "p25", "p50", "p75", "p90", "p99", "p99.9", "max",
        ];
        write!(f, "{:<22}", "size percentiles")?;
        for h in heads {
            write!(f, " {h:>10}")?;
        }
        writeln!(f)?;
        for (name, s) in [
            ("  request-weighted", &self.request_sizes),
            ("  object-weighted", &self.object_sizes),
        ] {
            write!(f, "{name:<22}")?;
            for v in [
                s.min, s.p1, s.p10, s.p25, s.p50, s.p75, s.p90, s.p99, s.p999, s.max,
            ] {
                write!(f, " {:>10}", format_size(v))?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SliceReader;

    fn req(time: u64, id: u64, size: u64) -> Request {
        Request {
            time,
            id,
            size,
            next_access: -1,
        }
    }

    fn stats(reqs: &[Request]) -> TraceStats {
        TraceStats::compute(&mut SliceReader::new(reqs)).unwrap()
    }

    #[test]
    fn empty_trace() {
        let s = stats(&[]);
        assert_eq!(s, TraceStats::default());
        assert!(s.to_string().contains("requests"));
    }

    #[test]
    fn small_trace_by_hand() {
        // Object 1 (100 B) ×3, object 2 (1000 B) ×1, object 3 (10 B) ×2, one of them resized.
        let reqs = [
            req(10, 1, 100),
            req(11, 2, 1000),
            req(12, 1, 100),
            req(15, 3, 10),
            req(13, 1, 100),
            req(20, 3, 20),
        ];
        let s = stats(&reqs);
        assert_eq!(s.requests, 6);
        assert_eq!(s.unique_objects, 3);
        assert_eq!(s.total_bytes, 1330);
        assert_eq!(s.unique_bytes, 1110);
        assert_eq!((s.first_time, s.last_time, s.duration), (10, 20, 10));
        assert_eq!(s.size_changes, 1);
        assert_eq!(s.one_hit_wonders, 1);
        assert!((s.one_hit_wonder_ratio - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(s.top1pct_objects, 1);
        assert!((s.top1pct_request_share - 0.5).abs() < 1e-12);
        assert!((s.cold_miss_ratio - 0.5).abs() < 1e-12);
        assert!((s.cold_byte_miss_ratio - 1110.0 / 1330.0).abs() < 1e-12);
        // Request sizes sorted: 10 20 100 100 100 1000.
        let r = s.request_sizes;
        assert_eq!((r.min, r.p1, r.p10, r.p25), (10, 10, 10, 20));
        assert_eq!(
            (r.p50, r.p75, r.p90, r.p99, r.max),
            (100, 100, 1000, 1000, 1000)
        );
        assert!((r.mean - 1330.0 / 6.0).abs() < 1e-9);
        // Object sizes (first seen): 10 100 1000.
        let o = s.object_sizes;
        assert_eq!(
            (o.min, o.p25, o.p50, o.p75, o.max),
            (10, 10, 100, 1000, 1000)
        );
        assert!((o.mean - 370.0).abs() < 1e-9);
        let table = s.to_string();
        assert!(
            table.contains("request-weighted") && table.contains("1000B"),
            "{table}"
        );
    }

    #[test]
    fn percentiles_of_uniform_sizes() {
        let reqs: Vec<Request> = (1..=1000).map(|i| req(i, i, i)).collect();
        let s = stats(&reqs);
        let r = s.request_sizes;
        assert_eq!(
            (r.min, r.p1, r.p10, r.p50, r.p99, r.p999, r.max),
            (1, 10, 100, 500, 990, 999, 1000)
        );
        assert_eq!(s.object_sizes, r);
        assert_eq!(s.one_hit_wonders, 1000);
        assert_eq!(s.top1pct_objects, 10);
        assert!((s.top1pct_request_share - 0.01).abs() < 1e-12);
    }

    #[test]
    fn top_share_picks_the_most_requested() {
        // 200 objects: object 0 gets 101 requests, the others 1 → top 1% = 2 objects.
        let mut reqs: Vec<Request> = (0..101).map(|t| req(t, 0, 1)).collect();
        reqs.extend((1..200).map(|i| req(200 + i, i, 1)));
        let s = stats(&reqs);
        assert_eq!(s.top1pct_objects, 2);
        assert!((s.top1pct_request_share - 102.0 / 300.0).abs() < 1e-12);
    }

    #[test]
    fn serializes_to_json() {
        let s = stats(&[req(0, 1, 5)]);
        let json = serde_json::to_string(&s).unwrap();
        assert!(
            json.contains("\"requests\":1") && json.contains("\"p50\":5"),
            "{json}"
        );
    }

    #[test]
    fn helpers() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1000), "1,000");
        assert_eq!(group(20_000_000), "20,000,000");
        assert_eq!(format_duration(59), "59s");
        assert_eq!(format_duration(3661), "1h 1m 1s");
        assert_eq!(format_duration(90061), "1d 1h 1m 1s");
    }
}
