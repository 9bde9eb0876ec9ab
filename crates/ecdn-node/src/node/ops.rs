//! Operations support: the node's counters and per-tier latency histograms ([`Metrics`], kept
//! from each request's [`Outcome`]) rendered in the Prometheus text exposition format (version
//! 0.0.4) and as `/_ecdn/stats` JSON, the purge token check and the JSON access log.
//!
//! The exposition is written by hand from atomics rather than through the `metrics` /
//! `metrics-exporter-prometheus` crates: the set of series is small and fixed, and this keeps
//! the node free of a global recorder (several nodes can run in one process, as in the tests).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::outcome::Outcome;

/// Upper bounds (seconds) of the finite latency buckets; `+Inf` is implied.
pub const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A latency histogram over [`BUCKETS`]: non-cumulative bucket counts (the last one is
/// `+Inf`) and the sum in nanoseconds.
#[derive(Default)]
pub(super) struct Histogram {
    buckets: [AtomicU64; BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

impl Histogram {
    pub(super) fn observe(&self, d: Duration) {
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
    }

    /// The `q` quantile (0..=1) in seconds, as Prometheus's `histogram_quantile` computes it
    /// from these buckets: linear within the bucket the rank falls in (from 0 for the first),
    /// the largest finite bound if it falls in `+Inf`; `None` before any observation.
    pub(super) fn quantile(&self, q: f64) -> Option<f64> {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let rank = q.clamp(0.0, 1.0) * total as f64;
        let mut below = 0u64;
        for (i, &n) in counts.iter().enumerate() {
            if n > 0 && (below + n) as f64 >= rank {
                let Some(&upper) = BUCKETS.get(i) else {
                    return BUCKETS.last().copied();
                };
                let lower = if i == 0 { 0.0 } else { BUCKETS[i - 1] };
                return Some(lower + (upper - lower) * (rank - below as f64) / n as f64);
            }
            below += n;
        }
        BUCKETS.last().copied()
    }

    /// Observations so far.
    pub(super) fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// Its `_bucket`, `_sum` and `_count` lines for the series `name{labels}` (`labels`: one
    /// or more `key="value"` pairs, comma-separated).
    pub(super) fn render(&self, o: &mut String, name: &str, labels: &str) {
        let mut cumulative = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            cumulative += b.load(Ordering::Relaxed);
            let le = BUCKETS
                .get(i)
                .map_or_else(|| "+Inf".to_string(), |&b| float(b));
            let _ = writeln!(o, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
        }
        let sum = self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        let _ = writeln!(o, "{name}_sum{{{labels}}} {}", float(sum));
        // The bucket total rather than a count of its own, so that `_count` always equals the
        // `+Inf` bucket even while another observation is being recorded.
        let _ = writeln!(o, "{name}_count{{{labels}}} {cumulative}");
    }
}

/// The `# HELP` and `# TYPE` lines of metric `name`.
pub(super) fn help(o: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// The node's counters: requests, responses by [`Outcome`], latencies by tier, bytes served,
/// and the failures that are not a response of their own.
#[derive(Default)]
pub struct Metrics {
    requests: AtomicU64,
    responses: [AtomicU64; Outcome::ALL.len()],
    latency: [Histogram; Outcome::TIERS.len()],
    bytes_served: AtomicU64,
    /// Origin bodies that failed or stalled after their headers were sent (the client
    /// responses were aborted).
    origin_aborts: AtomicU64,
    /// Fills answered by another site instead of the origin ([`super::sites`]).
    site_fills: AtomicU64,
    /// Fills of a cooperating site that went to the origin: `[no referral, every referral
    /// failed]` ([`Metrics::site_origin`]).
    site_origin: [AtomicU64; 2],
    /// Requests from other sites answered `504`: `[nothing held or in flight here, from a
    /// site the fill here is asking]` ([`Metrics::site_peer_refused`]).
    site_peer_refused: [AtomicU64; 2],
    /// `/_ecdn/` and `PURGE` requests the client listener refused (they belong on the admin
    /// listener).
    admin_refused: AtomicU64,
    /// Requests to the admin listener (the status page's polls included).
    admin_requests: AtomicU64,
}

/// The cache gauges, sampled when the metrics are rendered.
pub struct Gauges {
    pub hoc_used: u64,
    pub hoc_capacity: u64,
    pub disk_used: u64,
    pub disk_capacity: u64,
    /// Disk store operations that failed so far (reads, writes, removals, syncs).
    pub disk_errors: u64,
    /// AdaptSize's c; `None` for a policy without one; `Some(inf)` while it admits everything.
    pub adaptsize_c: Option<f64>,
}

impl Metrics {
    /// Counts one proxied request, answered with `outcome` after `d` (arrival to response
    /// headers), with a body of `bytes` (when known at the headers).
    pub fn record(&self, outcome: Outcome, d: Duration, bytes: Option<u64>) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.responses[outcome.index()].fetch_add(1, Ordering::Relaxed);
        self.latency[outcome.tier_index()].observe(d);
        self.bytes_served
            .fetch_add(bytes.unwrap_or(0), Ordering::Relaxed);
    }

    /// Counts an origin body that failed after its headers.
    pub fn origin_aborted(&self) {
        self.origin_aborts.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a fill answered by another site.
    pub fn site_fill(&self) {
        self.site_fills.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a site fill that went to the origin: `referred`, after every site its claim
    /// named failed to answer; else with none named (of the sites that miss an object at
    /// once, one does so; any other is an extra origin request).
    pub fn site_origin(&self, referred: bool) {
        self.site_origin[usize::from(referred)].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a request from another site answered `504`: `circular`, the fill here being
    /// one that asks that site (waiting on each other, neither would answer); else nothing
    /// is held or in flight here.
    pub fn site_peer_refused(&self, circular: bool) {
        self.site_peer_refused[usize::from(circular)].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a request for the admin listener that came to the client listener.
    pub fn admin_refused(&self) {
        self.admin_refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Proxied requests so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Body bytes served so far.
    pub fn bytes_served(&self) -> u64 {
        self.bytes_served.load(Ordering::Relaxed)
    }

    /// Responses by tier, in the order of [`Outcome::TIERS`].
    pub fn tier_counts(&self) -> [u64; Outcome::TIERS.len()] {
        std::array::from_fn(|i| self.sum(|o| o.tier_index() == i))
    }

    /// The latency histogram of tier `i` of [`Outcome::TIERS`].
    pub(super) fn latency(&self, i: usize) -> &Histogram {
        &self.latency[i]
    }

    /// Counts a request to the admin listener.
    pub fn admin_request(&self) {
        self.admin_requests.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests the client listener refused as the admin listener's.
    pub fn admin_refused_count(&self) -> u64 {
        self.admin_refused.load(Ordering::Relaxed)
    }

    /// Responses with outcome `o`.
    pub fn responses(&self, o: Outcome) -> u64 {
        self.responses[o.index()].load(Ordering::Relaxed)
    }

    fn sum(&self, f: impl Fn(Outcome) -> bool) -> u64 {
        Outcome::ALL
            .into_iter()
            .filter(|&o| f(o))
            .map(|o| self.responses(o))
            .sum()
    }

    /// Our `502` / `504` answers plus origin bodies aborted mid-transfer.
    pub fn origin_errors(&self) -> u64 {
        self.sum(Outcome::is_origin_error) + self.origin_aborts.load(Ordering::Relaxed)
    }

    /// The counters of `/_ecdn/stats` (see [`super::Node`]).
    pub fn stats_json(&self) -> serde_json::Map<String, serde_json::Value> {
        let c = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut m = serde_json::Map::new();
        for (name, v) in [
            ("requests", c(&self.requests)),
            ("hoc_hits", self.responses(Outcome::HitHoc)),
            ("disk_hits", self.responses(Outcome::HitDisk)),
            ("misses", self.sum(Outcome::is_miss)),
            ("collapsed", self.responses(Outcome::MissCollapsed)),
            ("passes", self.sum(Outcome::is_pass)),
            ("origin_errors", self.origin_errors()),
            ("revalidated", self.responses(Outcome::Revalidated)),
            ("stale", self.responses(Outcome::Stale)),
            ("site_fills", c(&self.site_fills)),
            ("site_origin_unreferred", c(&self.site_origin[0])),
            ("site_origin_after_referrals", c(&self.site_origin[1])),
            ("site_peers_not_held", c(&self.site_peer_refused[0])),
            ("site_peers_circular", c(&self.site_peer_refused[1])),
            ("bytes_served", c(&self.bytes_served)),
            ("admin_refused", c(&self.admin_refused)),
            ("admin_requests", c(&self.admin_requests)),
        ] {
            m.insert(name.into(), v.into());
        }
        m
    }

    /// The Prometheus text exposition (format 0.0.4).
    pub fn render(&self, g: &Gauges) -> String {
        let requests = self.requests.load(Ordering::Relaxed);
        let bytes_served = self.bytes_served.load(Ordering::Relaxed);
        let mut o = String::with_capacity(4096);
        let metric = help;
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
        for (i, tier) in Outcome::TIERS.into_iter().enumerate() {
            let n = self.sum(|o| o.tier_index() == i);
            let _ = writeln!(o, "ecdn_responses_total{{tier=\"{tier}\"}} {n}");
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
                "ecdn_origin_errors_total",
                "Origin failures: our 502 / 504 answers, and origin bodies aborted mid-transfer.",
                self.origin_errors(),
            ),
            (
                "ecdn_site_fills_total",
                "Misses filled from another site instead of the origin (cooperating sites).",
                self.site_fills.load(Ordering::Relaxed),
            ),
            (
                "ecdn_disk_errors_total",
                "Disk cache operations that failed (reads, writes, removals, syncs).",
                g.disk_errors,
            ),
            (
                "ecdn_admin_refused_total",
                "Requests for the admin listener (/_ecdn/ paths, PURGE) refused on the client listener.",
                self.admin_refused.load(Ordering::Relaxed),
            ),
            (
                "ecdn_admin_requests_total",
                "Requests to the admin listener (status page polls included).",
                self.admin_requests.load(Ordering::Relaxed),
            ),
        ] {
            metric(&mut o, name, "counter", help);
            let _ = writeln!(o, "{name} {v}");
        }
        for (name, help, label, values) in [
            (
                "ecdn_site_origin_fills_total",
                "Fills of a cooperating site that went to the origin, by why no site answered.",
                "why",
                [
                    ("no_referral", &self.site_origin[0]),
                    ("referrals_failed", &self.site_origin[1]),
                ],
            ),
            (
                "ecdn_site_peer_refusals_total",
                "Requests from other sites answered 504, by why.",
                "why",
                [
                    ("not_held", &self.site_peer_refused[0]),
                    ("circular", &self.site_peer_refused[1]),
                ],
            ),
        ] {
            metric(&mut o, name, "counter", help);
            for (value, n) in values {
                let n = n.load(Ordering::Relaxed);
                let _ = writeln!(o, "{name}{{{label}=\"{value}\"}} {n}");
            }
        }
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
        for (h, tier) in self.latency.iter().zip(Outcome::TIERS) {
            h.render(
                &mut o,
                "ecdn_request_duration_seconds",
                &format!("tier=\"{tier}\""),
            );
        }
        o
    }
}

/// A float in the exposition format (`+Inf`, `-Inf`, `NaN` for the special values).
pub(super) fn float(v: f64) -> String {
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

pub use ecdn_cluster::bearer::bearer_matches;

/// One access-log record, written as a JSON line to stderr.
pub struct Access<'a> {
    pub method: &'a str,
    pub path: &'a str,
    /// The request's id (`X-Request-Id`, see `request_id.rs`).
    pub request_id: Option<&'a str>,
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
            "request_id": self.request_id,
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
            request_id: Some("0af7651916cd43dd"),
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
        assert_eq!(v["request_id"], "0af7651916cd43dd");
    }

    #[test]
    fn histogram_is_cumulative() {
        let m = Metrics::default();
        m.record(Outcome::HitHoc, Duration::from_micros(100), Some(4));
        m.record(Outcome::HitHoc, Duration::from_millis(3), Some(6));
        m.record(Outcome::Miss, Duration::from_secs(20), None);
        m.record(Outcome::PassError, Duration::from_millis(1), Some(0));
        let g = Gauges {
            hoc_used: 1,
            hoc_capacity: 2,
            disk_used: 0,
            disk_capacity: 0,
            disk_errors: 0,
            adaptsize_c: Some(f64::INFINITY),
        };
        let s = m.render(&g);
        assert!(s.contains("ecdn_requests_total 4\n"));
        assert!(s.contains("ecdn_bytes_served_total 10\n"));
        assert!(s.contains("ecdn_responses_total{tier=\"error\"} 1\n"));
        assert!(s.contains("ecdn_origin_errors_total 1\n"));
        let j = m.stats_json();
        assert_eq!(j["passes"], 1);
        assert_eq!(j["misses"], 1);
        assert_eq!(j["hoc_hits"], 2);
        assert!(s.contains("ecdn_responses_total{tier=\"hoc\"} 2\n"));
        assert!(s.contains("ecdn_request_duration_seconds_bucket{tier=\"hoc\",le=\"0.0005\"} 1\n"));
        assert!(s.contains("ecdn_request_duration_seconds_bucket{tier=\"hoc\",le=\"0.005\"} 2\n"));
        assert!(s.contains("ecdn_request_duration_seconds_bucket{tier=\"miss\",le=\"10\"} 0\n"));
        assert!(s.contains("ecdn_request_duration_seconds_bucket{tier=\"miss\",le=\"+Inf\"} 1\n"));
        assert!(s.contains("ecdn_request_duration_seconds_count{tier=\"hoc\"} 2\n"));
        assert!(s.contains("ecdn_adaptsize_c_bytes +Inf\n"));
    }
}
