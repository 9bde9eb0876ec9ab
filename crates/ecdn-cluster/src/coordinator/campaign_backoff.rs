//! How often an etcd-mode coordinator campaigns again while etcd cannot be reached, and what
//! it logs meanwhile.
//!
//! A term that reached etcd and ended (the lease was lost, a write failed, the leader key was
//! taken) is followed by a new campaign after the base delay, and its reason is logged, as
//! before. A term that could not reach etcd at all is a failure of a streak: the delay doubles
//! with each one up to a cap, the lease time (so a coordinator is back at most a lease time
//! after etcd is, as after a leader's death), and only the 1st, 2nd, 4th, 8th… failure of the streak is
//! logged (with how many there were), not one line per attempt. The first term that reaches
//! etcd again ends the streak, says so, and resets the delay.

use std::time::Duration;

/// The campaign loop's delay and log (see the module documentation).
pub(super) struct CampaignBackoff {
    base: Duration,
    cap: Duration,
    delay: Duration,
    failures: u64,
}

impl CampaignBackoff {
    /// `base`: the delay after a term that reached etcd; `cap`: the longest delay (at least
    /// `base`).
    pub(super) fn new(base: Duration, cap: Duration) -> CampaignBackoff {
        CampaignBackoff {
            base,
            cap: cap.max(base),
            delay: base,
            failures: 0,
        }
    }

    /// A term ended. `reached`: whether it reached etcd. Returns how long to wait before the
    /// next campaign, and the lines to log (none while a streak of failures is not at a
    /// power of two).
    pub(super) fn ended(&mut self, reached: bool, why: &str) -> (Duration, Vec<String>) {
        let mut log = Vec::new();
        if reached {
            if self.failures > 0 {
                log.push(format!(
                    "etcd reachable again after {} failed campaigns",
                    self.failures
                ));
            }
            self.failures = 0;
            self.delay = self.base;
            log.push(format!("etcd: {why}; campaigning again"));
            return (self.base, log);
        }
        self.failures += 1;
        let wait = self.delay;
        self.delay = (self.delay * 2).min(self.cap);
        if self.failures.is_power_of_two() {
            log.push(format!(
                "etcd: {why} (failed campaign {} in a row); campaigning again in {} ms",
                self.failures,
                wait.as_millis()
            ));
        }
        (wait, log)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An outage of 40 attempts: the delay doubles to the cap, 6 lines instead of 40; the
    /// first term that reaches etcd says how many failed and resets the delay.
    #[test]
    fn an_outage_backs_off_and_logs_at_powers_of_two() {
        let base = Duration::from_millis(500);
        let cap = Duration::from_secs(3);
        let mut b = CampaignBackoff::new(base, cap);
        let mut waits = Vec::new();
        let mut lines = 0;
        for _ in 0..40 {
            let (wait, log) = b.ended(false, "connect: refused");
            waits.push(wait);
            lines += log.len();
        }
        assert_eq!(
            &waits[..7],
            &[500, 1000, 2000, 3000, 3000, 3000, 3000].map(Duration::from_millis)
        );
        assert!(waits.iter().all(|&w| w <= cap));
        assert_eq!(lines, 6, "failures 1, 2, 4, 8, 16 and 32");
        let (wait, log) = b.ended(true, "the lease was lost");
        assert_eq!(wait, base);
        assert_eq!(log[0], "etcd reachable again after 40 failed campaigns");
        assert_eq!(log[1], "etcd: the lease was lost; campaigning again");
        // A new streak starts from the base delay.
        assert_eq!(b.ended(false, "x").0, base);
    }

    /// Terms that reach etcd are retried after the base delay, each logged.
    #[test]
    fn terms_that_reach_etcd_keep_the_base_delay() {
        let base = Duration::from_millis(200);
        let mut b = CampaignBackoff::new(base, Duration::from_secs(3));
        for _ in 0..5 {
            let (wait, log) = b.ended(true, "the leader key was taken");
            assert_eq!(wait, base);
            assert_eq!(log.len(), 1);
        }
    }
}
