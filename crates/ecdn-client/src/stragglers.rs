//! [`Stragglers`]: the split servers this client's reads have found slow, from late binding's
//! own outcome, and what a read does about them (issue 61: one server slowed by 50 ms).
//!
//! Late binding (EC-Cache §4.3) asks `k + Δ` splits and decodes each window from the first
//! `k`: one slow server among them is left, but it uses up the Δ, so the read's tail is then
//! that of `k` out of `k` instead of `k` out of `k + Δ`. A client that knows a server is slow
//! asks **one more split for each such server in a read's plan**, so the fast splits are still
//! `k + Δ`. It keeps asking the slow server (its split is read, and seldom used), so it sees
//! at once when the server is fast again, with no probing.
//!
//! A server is slow when its splits are **late**: a split asked at a read's start is late when
//! it was used for fewer than half of the object's windows (or its read failed). With `n`
//! asked at the start, a server no slower than the others is late in about `(n − k) / n` of
//! its reads (its expected lateness); a server is slow when its lateness, smoothed over its
//! reads ([`ALPHA`]), is past the midpoint between its expected lateness and 1. A server that
//! is always last passes it within three reads when `k = 10, Δ = 1` (expected 1/11) and
//! within six when `k = 2, Δ = 2`. The signal is relative (last among the servers asked), so
//! it needs no latency threshold that would depend on the links.

use std::collections::BTreeMap;

use ecdn_objects::meta::ObjectMeta;

use crate::late_binding::ReadReport;

/// Weight of a read's outcome in a server's smoothed lateness.
pub const ALPHA: f64 = 0.25;

/// One server's smoothed lateness, and what it would be were the server as fast as the rest.
#[derive(Clone, Copy, Debug, Default)]
struct Lateness {
    late: f64,
    expected: f64,
}

impl Lateness {
    fn slow(&self) -> bool {
        self.late > (1.0 + self.expected) / 2.0
    }
}

/// Each split server's smoothed lateness (module documentation), by cluster id.
#[derive(Debug, Default)]
pub struct Stragglers {
    lateness: BTreeMap<usize, Lateness>,
}

impl Stragglers {
    /// Folds in a finished read of `meta`'s object: each split asked at its start was late or
    /// not.
    pub fn observe(&mut self, meta: &ObjectMeta, r: &ReadReport) {
        let windows = r.used.len();
        if windows < meta.windows() as usize {
            return; // the read did not finish: no split had its chance
        }
        let first = r.first.min(r.asked.len());
        if first == 0 {
            return;
        }
        let expected = first.saturating_sub(meta.k) as f64 / first as f64;
        for &i in &r.asked[..first] {
            let used = r.used.iter().filter(|u| u.contains(&i)).count();
            let failed = r.failed.iter().any(|&(f, _)| f == i);
            let late = failed || 2 * used < windows;
            let l = self.lateness.entry(meta.splits[i]).or_default();
            l.late += ALPHA * (f64::from(u8::from(late)) - l.late);
            l.expected += ALPHA * (expected - l.expected);
        }
    }

    /// Whether the server `id` is slow now.
    pub fn is_slow(&self, id: usize) -> bool {
        self.lateness.get(&id).is_some_and(Lateness::slow)
    }

    /// The servers slow now.
    pub fn slow(&self) -> Vec<usize> {
        let slow = self.lateness.iter().filter(|(_, l)| l.slow());
        slow.map(|(&id, _)| id).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ecdn_objects::meta::ObjectName;

    fn meta(n: usize, windows: u64) -> ObjectMeta {
        ObjectMeta {
            name: ObjectName::parse("s/o").unwrap(),
            version: 1,
            size: windows * (1 << 20) * 2,
            k: 2,
            r: n - 2,
            splits: (10..10 + n).collect(),
            stored: vec![true; n],
            sha256: String::new(),
            sub_chunk: 1 << 20,
            crcs: vec![],
            window_stripes: 1,
            digests: vec![[0; 32]; n * windows as usize],
            s3: None,
        }
    }

    /// A read that asked `asked` (all at its start) and decoded every window from `used`.
    fn read(asked: &[usize], used: &[usize], windows: usize) -> ReadReport {
        ReadReport {
            delta: asked.len() - 2,
            extra: 0,
            first: asked.len(),
            asked: asked.to_vec(),
            failed: vec![],
            used: vec![used.to_vec(); windows],
        }
    }

    #[test]
    fn a_server_always_last_is_slow_and_ones_sometimes_last_are_not() {
        let m = meta(4, 2);
        let mut s = Stragglers::default();
        // k = 2 of 4 asked: split 3's server (13) is last in every read; the other three
        // take turns at being late (each in one read of three, more than the expected half
        // of two of four would not be).
        let turns: [&[usize]; 3] = [&[1, 2], &[0, 2], &[0, 1]];
        for n in 0..30 {
            s.observe(&m, &read(&[0, 1, 2, 3], turns[n % 3], 2));
            if n == 4 {
                assert!(s.is_slow(13), "five late reads make a server slow: {s:?}");
            }
        }
        assert_eq!(s.slow(), vec![13]);
        // Fast again (now as often used as the rest): no longer slow within a few reads.
        let turns: [&[usize]; 4] = [&[2, 3], &[0, 3], &[1, 3], &[0, 1]];
        for used in turns {
            s.observe(&m, &read(&[0, 1, 2, 3], used, 2));
        }
        assert!(s.slow().is_empty(), "{s:?}");
    }

    #[test]
    fn spares_unfinished_reads_and_failures_count_as_they_should() {
        let m = meta(4, 2);
        let mut s = Stragglers::default();
        // A spare (asked after the start) is not judged; a failed split is late.
        let mut r = read(&[0, 1, 2], &[0, 1], 2);
        r.first = 2;
        r.failed = vec![(1, "refused".into())];
        r.used = vec![vec![0, 2]; 2];
        for _ in 0..3 {
            s.observe(&m, &r);
        }
        assert_eq!(s.slow(), vec![11]);
        // A read that ended before its last window changes nothing.
        let mut s = Stragglers::default();
        for _ in 0..5 {
            s.observe(&m, &read(&[0, 1, 2], &[0, 1], 1));
        }
        assert!(s.slow().is_empty());
    }
}
