//! Per-peer rate limits: a token bucket per source address, in a bounded table, so one
//! peer (or one spoofed address) cannot take a node's time.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Instant;

/// Token buckets by source address.
#[derive(Debug)]
pub struct PeerLimits {
    rate: f64,
    burst: f64,
    max_peers: usize,
    buckets: HashMap<SocketAddr, (f64, Instant)>,
}

impl PeerLimits {
    /// `rate` packets a second per peer, bursts of `burst`, at most `max_peers` tracked (when
    /// full, buckets that have refilled are forgotten; if none has, newcomers are refused).
    pub fn new(rate: f64, burst: f64, max_peers: usize) -> PeerLimits {
        PeerLimits {
            rate,
            burst: burst.max(1.0),
            max_peers: max_peers.max(1),
            buckets: HashMap::new(),
        }
    }

    /// Whether a packet from `peer` at `now` may be handled (and takes its token).
    pub fn allow(&mut self, peer: SocketAddr, now: Instant) -> bool {
        if !self.buckets.contains_key(&peer) && self.buckets.len() >= self.max_peers {
            let (rate, burst) = (self.rate, self.burst);
            self.buckets.retain(|_, (tokens, at)| {
                *tokens + now.saturating_duration_since(*at).as_secs_f64() * rate < burst
            });
            if self.buckets.len() >= self.max_peers {
                return false;
            }
        }
        let (tokens, at) = self.buckets.entry(peer).or_insert((self.burst, now));
        *tokens = (*tokens + now.saturating_duration_since(*at).as_secs_f64() * self.rate)
            .min(self.burst);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_peer_gets_its_burst_then_its_rate() {
        let mut l = PeerLimits::new(10.0, 5.0, 2);
        let a = SocketAddr::from(([127, 0, 0, 1], 1));
        let t = Instant::now();
        assert_eq!((0..20).filter(|_| l.allow(a, t)).count(), 5);
        let t1 = t + Duration::from_secs(1);
        assert_eq!(
            (0..20).filter(|_| l.allow(a, t1)).count(),
            5,
            "capped at the burst"
        );
        // The table is bounded: a third peer waits until a bucket has refilled.
        let b = SocketAddr::from(([127, 0, 0, 1], 2));
        let c = SocketAddr::from(([127, 0, 0, 1], 3));
        assert!(l.allow(b, t1));
        assert!(!l.allow(c, t1));
        assert!(l.allow(c, t1 + Duration::from_secs(2)));
    }
}
