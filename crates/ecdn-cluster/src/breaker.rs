//! Outlier detection for peers: a peer that did not answer is skipped for a while, so that a
//! node cut off from its peers (a partition, a pulled cable, a hung process that the
//! coordinator still hears from) costs each peer one timeout, not one per request.
//!
//! A peer that refused a connection, did not answer within the caller's timeout or could not
//! be reached at all gets a strike; while it is struck, requests to it fail at once with
//! [`crate::PeerError::Skipped`] and the caller goes on as if it had failed (another chunk,
//! the bucket's next candidate, the origin). The first strike skips it for [`FIRST`], each
//! further strike doubles that, up to [`LONGEST`]. When the time is up, one request goes to it
//! (a probe) while the others are still skipped: its answer clears the strikes, its failure
//! is the next strike. A reset connection is no strike: a pooled connection that the peer
//! closed is reset, and the peer is fine.
//!
//! This is what Envoy calls outlier detection and a circuit breaker elsewhere; the
//! coordinator's heartbeats remain what decides whether a node is in the map.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a peer is skipped after its first strike.
pub const FIRST: Duration = Duration::from_millis(500);
/// The longest a peer is skipped.
pub const LONGEST: Duration = Duration::from_secs(8);

#[derive(Debug, Clone, Copy)]
struct Strikes {
    count: u32,
    until: Instant,
    /// A probe is out: requests are skipped until it answers or fails.
    probing: bool,
}

/// How long a probe may take before another request may probe in its place.
const PROBE: Duration = Duration::from_secs(10);

/// The struck peers of one client (shared by its clones).
#[derive(Debug, Default)]
pub struct Breaker {
    peers: Mutex<HashMap<SocketAddr, Strikes>>,
}

impl Breaker {
    /// `Err(left)` while `addr` is skipped, with the time left.
    /// The first request after a skip is let through as the probe.
    pub fn admit(&self, addr: SocketAddr, now: Instant) -> Result<(), Duration> {
        match self.peers.lock().unwrap().get_mut(&addr) {
            Some(s) if s.until > now => Err(s.until - now),
            Some(s) => {
                s.probing = true;
                s.until = now + PROBE;
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// `addr` failed to answer: one more strike.
    pub fn struck(&self, addr: SocketAddr, now: Instant) {
        let mut peers = self.peers.lock().unwrap();
        let s = peers.entry(addr).or_insert(Strikes {
            count: 0,
            until: now,
            probing: false,
        });
        // Requests that were in flight together fail together: they are one strike (a failed
        // probe is a new one).
        if s.until > now && !s.probing {
            return;
        }
        s.probing = false;
        s.count = s.count.saturating_add(1);
        let skip = FIRST
            .saturating_mul(1 << (s.count - 1).min(16))
            .min(LONGEST);
        s.until = now + skip;
    }

    /// `addr` answered: its strikes are forgotten.
    pub fn answered(&self, addr: SocketAddr) {
        let mut peers = self.peers.lock().unwrap();
        if !peers.is_empty() {
            peers.remove(&addr);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strikes_skip_a_peer_for_longer_each_time_and_an_answer_clears_them() {
        let b = Breaker::default();
        let a: SocketAddr = "10.0.0.1:1".parse().unwrap();
        let other: SocketAddr = "10.0.0.2:1".parse().unwrap();
        let t = Instant::now();
        assert!(b.admit(a, t).is_ok());
        b.struck(a, t);
        assert_eq!(b.admit(a, t), Err(FIRST));
        assert!(b.admit(other, t).is_ok());
        // A second failure of a request sent before the skip began is the same strike.
        b.struck(a, t + Duration::from_millis(10));
        // After the skip, one request probes; the others are skipped while it is out.
        assert_eq!(b.admit(a, t + FIRST), Ok(()));
        assert_eq!(b.admit(a, t + FIRST), Err(PROBE));
        // A failed probe doubles the skip, up to LONGEST.
        let mut now = t + FIRST;
        let mut skip = FIRST;
        for _ in 0..8 {
            b.struck(a, now);
            skip = (skip * 2).min(LONGEST);
            assert_eq!(b.admit(a, now), Err(skip));
            now += skip;
            assert_eq!(b.admit(a, now), Ok(()), "the probe");
        }
        assert_eq!(skip, LONGEST);
        assert_eq!(
            b.admit(a, now),
            Err(PROBE),
            "skipped while its probe is out"
        );
        b.answered(a);
        assert!(b.admit(a, now).is_ok());
        b.struck(a, now);
        assert_eq!(b.admit(a, now), Err(FIRST), "an answer forgot the strikes");
    }
}
