//! Operations support: per-tier counters and latency histograms rendered in the Prometheus
//! text exposition format (version 0.0.4), the purge token check and the JSON access log.
//!
//! The exposition is written by hand from atomics rather than through the `metrics` /
//! `metrics-exporter-prometheus` crates: the set of series is small and fixed, and this keeps
//! the node free of a global recorder (several nodes can run in one process, as in the tests).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Where a proxied request was answered from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    /// The DRAM hot-object cache.
    Hoc,
    /// The disk cache.
    Disk,
    /// A miss with its own (or a leading) origin fetch.
    Miss,
    /// A miss that joined another request's origin fetch.
    Collapsed,
    /// Another method, passed through.
    Pass,
    /// The origin was unreachable or timed out (`502` / `504` of ours).
    Error,
    /// A stale entry validated by the origin (`304`) and served from the cache.
    Revalidated,
    /// A stale entry served: the origin failed (`stale-if-error`), it is being validated in the
    /// background (`stale-while-revalidate`), or the request accepted it (`max-stale`).
    Stale,
}

impl Tier {
    pub const ALL: [Tier; 8] = [
        Tier::Hoc,
        Tier::Disk,
        Tier::Miss,
        Tier::Collapsed,
        Tier::Pass,
        Tier::Error,
        Tier::Revalidated,
        Tier::Stale,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Tier::Hoc => "hoc",
            Tier::Disk => "disk",
            Tier::Miss => "miss",
            Tier::Collapsed => "collapsed",
            Tier::Pass => "pass",
            Tier::Error => "error",
            Tier::Revalidated => "revalidated",
            Tier::Stale => "stale",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Upper bounds (seconds) of the finite latency buckets; `+Inf` is implied.
pub const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// One tier's latency histogram: non-cumulative bucket counts (the last one is `+Inf`), the
/// count and the sum in nanoseconds.
#[derive(Default)]
struct Histogram {
    buckets: [AtomicU64; BUCKETS.len() + 1],
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

impl Histogram {
    fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let i = BUCKETS
            .iter()
            .position(|&b| secs <= b)
            .unwrap_or(BUCKETS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_nanos.fetch_add(
            u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        self.count.fetch_add(1, Ordering::Relaxed);
    }
}

/// Per-tier responses and latencies.
#[derive(Default)]
pub struct Metrics {
    responses: [AtomicU64; Tier::ALL.len()],
    latency: [Histogram; Tier::ALL.len()],
}

/// The cache gauges, sampled when the metrics are rendered.
pub struct Gauges {
    pub hoc_used: u64,
    pub hoc_capacity: u64,
    pub disk_used: u64,
    pub disk_capacity: u64,
    /// AdaptSize's c; `None` for a policy without one; `Some(inf)` while it admits everything.
    pub adaptsize_c: Option<f64>,
}

impl Metrics {
    /// Counts one response of `tier` that took `d` from arrival to response headers.
    pub fn record(&self, tier: Tier, d: Duration) {
        self.responses[tier.index()].fetch_add(1, Ordering::Relaxed);
        self.latency[tier.index()].observe(d);
    }

    /// The Prometheus text exposition (format 0.0.4).
    pub fn render(&self, requests: u64, bytes_served: u64, g: &Gauges) -> String {
        let mut o = String::with_capacity(4096);
        let metric = |o: &mut String, name: &str, kind: &str, help: &str| {
            let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
        };
        metric(
            &mut o,
            "ecdn_requests_total",
            "counter",
            "Proxied requests (not counting /_ecdn/ endpoints).",
        );
        let _ = writeln!(o, "ecdn_requests_total {requests}");
        metric(
            &mut o,
            "ecdn_responses_total",
            "counter",
            "Proxied responses by the tier that answered them.",
        );
        for t in Tier::ALL {
            let n = self.responses[t.index()].load(Ordering::Relaxed);
            let _ = writeln!(o, "ecdn_responses_total{{tier=\"{}\"}} {n}", t.label());
        }
        metric(
            &mut o,
            "ecdn_bytes_served_total",
            "counter",
            "Response body bytes served (bodies of known length).",
        );
        let _ = writeln!(o, "ecdn_bytes_served_total {bytes_served}");
        for (name, help, v) in [
            (
                "ecdn_hoc_used_bytes",
                "Bytes held by the hot-object cache.",
                g.hoc_used,
            ),
            (
                "ecdn_hoc_capacity_bytes",
                "Capacity of the hot-object cache.",
                g.hoc_capacity,
            ),
            (
                "ecdn_disk_used_bytes",
                "Bytes of the disk ring in use (0 without a disk).",
                g.disk_used,
            ),
            (
                "ecdn_disk_capacity_bytes",
                "Capacity of the disk ring (0 without a disk).",
                g.disk_capacity,
            ),
        ] {
            metric(&mut o, name, "gauge", help);
            let _ = writeln!(o, "{name} {v}");
        }
        if let Some(c) = g.adaptsize_c {
            metric(
                &mut o,
                "ecdn_adaptsize_c_bytes",
                "gauge",
                "AdaptSize's size parameter c (+Inf while it admits everything).",
            );
            let _ = writeln!(o, "ecdn_adaptsize_c_bytes {}", float(c));
        }
        metric(
            &mut o,
            "ecdn_request_duration_seconds",
            "histogram",
            "Time from request arrival to response headers, by tier.",
        );
        for t in Tier::ALL {
            let h = &self.latency[t.index()];
            let tier = t.label();
            let mut cumulative = 0;
            for (i, b) in h.buckets.iter().enumerate() {
                cumulative += b.load(Ordering::Relaxed);
                let le = BUCKETS
                    .get(i)
                    .map_or_else(|| "+Inf".to_string(), |&b| float(b));
                let _ = writeln!(
                    o,
                    "ecdn_request_duration_seconds_bucket{{tier=\"{tier}\",le=\"{le}\"}} {cumulative}"
                );
            }
            let sum = h.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
            let _ = writeln!(
                o,
                "ecdn_request_duration_seconds_sum{{tier=\"{tier}\"}} {}",
                float(sum)
            );
            // The bucket total rather than `count`, so that `_count` always equals the `+Inf`
            // bucket even while another request is being recorded.
            let _ = writeln!(
                o,
                "ecdn_request_duration_seconds_count{{tier=\"{tier}\"}} {cumulative}"
            );
        }
        o
    }
}

/// A float in the exposition format (`+Inf`, `-Inf`, `NaN` for the special values).
fn float(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

/// Whether an `Authorization` header value is `Bearer <token>`, comparing the token in time
/// independent of where it differs (only the length may show).
pub fn bearer_matches(header: Option<&[u8]>, token: &str) -> bool {
    let Some(h) = header else {
        return false;
    };
    let Some(given) = h
        .strip_prefix(b"Bearer ")
        .or_else(|| h.strip_prefix(b"bearer "))
    else {
        return false;
    };
    constant_time_eq(given, token.as_bytes())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// One access-log record, written as a JSON line to stderr.
pub struct Access<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub status: u16,
    pub tier: &'a str,
    pub bytes: Option<u64>,
    pub duration: Duration,
    pub remote: std::net::SocketAddr,
}

impl Access<'_> {
    pub fn line(&self) -> String {
        serde_json::json!({
            "ts_unix_ms": std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            "method": self.method,
            "path": self.path,
            "status": self.status,
            "tier": self.tier,
            "bytes": self.bytes,
            "duration_ms": self.duration.as_secs_f64() * 1e3,
            "remote": self.remote.to_string(),
        })
        .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens() {
        assert!(bearer_matches(Some(b"Bearer s3cret"), "s3cret"));
        assert!(!bearer_matches(Some(b"Bearer s3cres"), "s3cret"));
        assert!(!bearer_matches(Some(b"Bearer s3cret2"), "s3cret"));
        assert!(!bearer_matches(Some(b"Basic s3cret"), "s3cret"));
        assert!(!bearer_matches(None, "s3cret"));
    }

    #[test]
    fn access_lines_are_json() {
        let a = Access {
            method: "GET",
            path: "/obj/\"x\"",
            status: 200,
            tier: "hoc",
            bytes: Some(10),
            duration: Duration::from_micros(1500),
            remote: "127.0.0.1:9".parse().unwrap(),
        };
        let v: serde_json::Value = serde_json::from_str(&a.line()).unwrap();
        assert_eq!(v["path"], "/obj/\"x\"");
        assert_eq!(v["status"], 200);
        assert_eq!(v["tier"], "hoc");
        assert_eq!(v["bytes"], 10);
        assert_eq!(v["duration_ms"], 1.5);
        assert_eq!(v["remote"], "127.0.0.1:9");
    }

    #[test]
    fn histogram_is_cumulative() {
        let m = Metrics::default();
        m.record(Tier::Hoc, Duration::from_micros(100));
        m.record(Tier::Hoc, Duration::from_millis(3));
        m.record(Tier::Miss, Duration::from_secs(20));
        let g = Gauges {
            hoc_used: 1,
            hoc_capacity: 2,
            disk_used: 0,
            disk_capacity: 0,
            adaptsize_c: Some(f64::INFINITY),
        };
        let s = m.render(3, 10, &g);
        assert!(s.contains("ecdn_responses_total{tier=\"hoc\"} 2\n"));
        assert!(s.contains("ecdn_request_duration_seconds_bucket{tier=\"hoc\",le=\"0.0005\"} 1\n"));
        assert!(s.contains("ecdn_request_duration_seconds_bucket{tier=\"hoc\",le=\"0.005\"} 2\n"));
        assert!(s.contains("ecdn_request_duration_seconds_bucket{tier=\"miss\",le=\"10\"} 0\n"));
        assert!(s.contains("ecdn_request_duration_seconds_bucket{tier=\"miss\",le=\"+Inf\"} 1\n"));
        assert!(s.contains("ecdn_request_duration_seconds_count{tier=\"hoc\"} 2\n"));
        assert!(s.contains("ecdn_adaptsize_c_bytes +Inf\n"));
    }
}
