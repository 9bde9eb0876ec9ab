//! Δ per read from the backlog: TOFEC's rule (Liang & Kozat, §IV-D) applied to EC-Cache's late
//! binding (§4.3).
//!
//! A read that asks `k + Δ` splits finishes with the first `k`: the extra `Δ` cut the tail when
//! servers are idle enough to serve them, and add `Δ/k` to every server's load when they are
//! not. TOFEC's observation is the same trade-off for code length: at light load the service
//! delay dominates and more redundancy helps; at heavy load the queueing delay dominates and
//! redundancy hurts. Its rule picks the redundancy from the queue backlog at each arrival,
//! smoothed by a moving average `q̂ ← α q̂ + (1 − α) q` so the choice does not flap, against
//! decreasing thresholds: `Δ = n` while `q̂ < H_n`, with `H_1 > H_2 > … > H_max`.
//!
//! Here `q` is the backlog in *splits*: the time the node's outgoing link needs for what is
//! queued on it, over the time one split of the object takes on it (how many splits of this
//! size wait ahead of a new one). The defaults ([`DeltaRule::default`]): `Δ = 2` below one
//! queued split, `Δ = 1` below four, `Δ = 0` from four on; `α = 0.8`.

/// TOFEC's thresholds for Δ and its moving average.
#[derive(Clone, Debug, PartialEq)]
pub struct DeltaRule {
    /// `H_1 > H_2 > …`: `Δ` is the number of thresholds above the smoothed backlog.
    pub thresholds: Vec<f64>,
    /// Weight of the past in the moving average (0: the instantaneous backlog).
    pub alpha: f64,
}

impl Default for DeltaRule {
    fn default() -> Self {
        DeltaRule {
            thresholds: vec![4.0, 1.0],
            alpha: 0.8,
        }
    }
}

impl DeltaRule {
    /// Δ for a smoothed backlog of `q` splits.
    pub fn delta(&self, q: f64) -> usize {
        self.thresholds.iter().filter(|&&h| q < h).count()
    }
}

/// The smoothed backlog of one node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Backlog {
    smoothed: f64,
}

impl Backlog {
    /// Folds in the backlog `q` (splits) seen at a read's arrival; the read's Δ.
    pub fn arrival(&mut self, rule: &DeltaRule, q: f64) -> usize {
        let q = if q.is_finite() { q.max(0.0) } else { 0.0 };
        self.smoothed = rule.alpha * self.smoothed + (1.0 - rule.alpha) * q;
        rule.delta(self.smoothed)
    }

    pub fn smoothed(&self) -> f64 {
        self.smoothed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn more_backlog_fewer_extra_reads() {
        let rule = DeltaRule::default();
        assert_eq!(rule.delta(0.0), 2);
        assert_eq!(rule.delta(0.99), 2);
        assert_eq!(rule.delta(1.0), 1);
        assert_eq!(rule.delta(3.9), 1);
        assert_eq!(rule.delta(4.0), 0);
        assert_eq!(rule.delta(100.0), 0);
        // Δ never rises with the backlog.
        let mut last = usize::MAX;
        for i in 0..100 {
            let d = rule.delta(i as f64 * 0.1);
            assert!(d <= last);
            last = d;
        }
    }

    #[test]
    fn the_average_smooths_a_spike() {
        let rule = DeltaRule::default();
        let mut b = Backlog::default();
        for _ in 0..50 {
            assert_eq!(b.arrival(&rule, 0.0), 2);
        }
        // One burst of 10 queued splits: q̂ = 2, Δ drops to 1, not to 0.
        assert_eq!(b.arrival(&rule, 10.0), 1);
        assert!((b.smoothed() - 2.0).abs() < 1e-9);
        // Sustained: it reaches 0, and returns once the queue is gone.
        for _ in 0..20 {
            b.arrival(&rule, 10.0);
        }
        assert_eq!(b.arrival(&rule, 10.0), 0);
        for _ in 0..30 {
            b.arrival(&rule, 0.0);
        }
        assert_eq!(b.arrival(&rule, 0.0), 2);
        // Nonsense backlogs count as none.
        let mut b = Backlog::default();
        assert_eq!(b.arrival(&rule, f64::NAN), 2);
        assert_eq!(b.arrival(&rule, -3.0), 2);
    }
}
