//! What a site counts, for its node's `/_ecdn/stats` (`sites`): the DSHT lookups it made (its
//! misses' claims and the gets asked on the admin listener, counted alike as `gets`: how many
//! found a reference, at which level, their latency and hops) and, with a DNS
//! redirector, its answers by the resolver's level.
//!
//! Latencies are kept as counts per value rounded to three significant digits (0.5% at most
//! off), so the counts of many nodes add up to one distribution (the demo's quantiles over a
//! site's processes) in bounded memory: about 900 values a decade.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// The lookups of one site.
#[derive(Default)]
pub struct LookupStats {
    counts: Mutex<Counts>,
}

#[derive(Default)]
struct Counts {
    gets: u64,
    found: u64,
    /// Gets that failed or ran out of time (no answer either way).
    failed: u64,
    found_at_level: Vec<u64>,
    ms: BTreeMap<u64, u64>,
    hops: BTreeMap<u32, u64>,
}

/// `ms` rounded to three significant digits, in thousandths of a millisecond (the key of a
/// latency count).
fn bin(ms: f64) -> u64 {
    let micros = (ms * 1000.0).max(0.0).round() as u64;
    if micros < 1000 {
        return micros;
    }
    let digits = micros.ilog10() + 1;
    let step = 10u64.pow(digits - 3);
    (micros + step / 2) / step * step
}

impl LookupStats {
    /// A get that answered: `found` values at `level` (`None`: found nothing), after `hops`
    /// nodes and `elapsed`.
    pub fn answered(&self, found: bool, level: Option<usize>, hops: u32, elapsed: Duration) {
        let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        c.gets += 1;
        if found {
            c.found += 1;
            if let Some(l) = level {
                if c.found_at_level.len() <= l {
                    c.found_at_level.resize(l + 1, 0);
                }
                c.found_at_level[l] += 1;
            }
        }
        *c.ms.entry(bin(elapsed.as_secs_f64() * 1000.0)).or_default() += 1;
        *c.hops.entry(hops).or_default() += 1;
    }

    /// A get that failed or timed out.
    pub fn failed(&self) {
        let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        c.gets += 1;
        c.failed += 1;
    }

    /// The counts as JSON: `gets`, `found`, `failed`, `found_at_level` (index = level),
    /// `lookup_ms` and `lookup_hops` (value → count; `lookup_ms`'s values are milliseconds).
    pub fn json(&self) -> serde_json::Value {
        let c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let ms: serde_json::Map<String, serde_json::Value> =
            c.ms.iter()
                .map(|(k, n)| ((*k as f64 / 1000.0).to_string(), (*n).into()))
                .collect();
        let hops: serde_json::Map<String, serde_json::Value> = c
            .hops
            .iter()
            .map(|(k, n)| (k.to_string(), (*n).into()))
            .collect();
        serde_json::json!({
            "gets": c.gets,
            "found": c.found,
            "failed": c.failed,
            "found_at_level": c.found_at_level,
            "lookup_ms": ms,
            "lookup_hops": hops,
        })
    }
}

/// A DNS redirector's answers, by the level it placed the resolver at.
#[derive(Default)]
pub struct DnsAnswers {
    by_level: [AtomicU64; 4],
    /// Answers that named no proxy.
    empty: AtomicU64,
}

impl DnsAnswers {
    /// An answer to a resolver at `level` naming `proxies` proxies.
    pub fn answered(&self, level: usize, proxies: usize) {
        self.by_level[level.min(3)].fetch_add(1, Ordering::Relaxed);
        if proxies == 0 {
            self.empty.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Answers at each level (index = level; a fourth entry for deeper levels).
    pub fn by_level(&self) -> [u64; 4] {
        std::array::from_fn(|i| self.by_level[i].load(Ordering::Relaxed))
    }

    /// `{"answers_by_level": [...], "empty": n}`.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "answers_by_level": self.by_level(),
            "empty": self.empty.load(Ordering::Relaxed),
        })
    }
}

/// Adds the latency counts of `lookup_ms` objects (as [`LookupStats::json`] writes them) and
/// returns every sample's value, repeated by its count: what quantiles are taken of.
pub fn samples(counts: &[&serde_json::Value]) -> Vec<f64> {
    let mut out = Vec::new();
    for c in counts {
        let Some(map) = c.as_object() else { continue };
        for (k, n) in map {
            if let (Ok(v), Some(n)) = (k.parse::<f64>(), n.as_u64()) {
                out.extend(std::iter::repeat_n(v, n.min(1 << 24) as usize));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_keep_three_digits_and_add_up_across_nodes() {
        assert_eq!(bin(0.4567), 457);
        assert_eq!(bin(23.94), 23_900);
        assert_eq!(bin(23.96), 24_000);
        assert_eq!(bin(1234.6), 1_230_000);
        let (a, b) = (LookupStats::default(), LookupStats::default());
        a.answered(true, Some(2), 1, Duration::from_micros(5_012));
        a.answered(false, None, 4, Duration::from_millis(120));
        b.answered(true, Some(0), 3, Duration::from_micros(5_004));
        b.failed();
        let (ja, jb) = (a.json(), b.json());
        assert_eq!(ja["found_at_level"], serde_json::json!([0, 0, 1]));
        assert_eq!(jb["failed"], 1);
        assert_eq!(jb["gets"], 2);
        let mut all = samples(&[&ja["lookup_ms"], &jb["lookup_ms"]]);
        all.sort_by(f64::total_cmp);
        assert_eq!(all, [5.0, 5.01, 120.0]);
        let d = DnsAnswers::default();
        d.answered(2, 4);
        d.answered(0, 0);
        d.answered(7, 1);
        assert_eq!(d.by_level(), [1, 0, 1, 1]);
        assert_eq!(d.json()["empty"], 1);
    }
}
