//! The test bed's network: sites of nodes on loopback with RTTs injected per pair.
//!
//! Site `s` holds nodes `127.0.(10 + s).(1 + i)`, so a node's site is its address's third
//! octet (and its `/24` prefix is the DSHT's clustering hint). Sites are points drawn in a
//! square; the RTT between two sites grows with their distance from 20 ms (neighbours) to
//! 150 ms (opposite corners), and is 5 ms within a site. Each packet is delayed by half the
//! RTT of its pair, one way.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use ecdn_dsht::Latency;
use ecdn_trace::Rng;

/// RTT between two nodes of one site.
pub const WITHIN_SITE: Duration = Duration::from_millis(5);
/// Least and greatest RTT between sites.
pub const BETWEEN_SITES: (f64, f64) = (20.0, 150.0);

/// Sites, their nodes and the RTTs between them.
#[derive(Clone, Debug)]
pub struct Topology {
    /// Node count per site.
    pub per_site: Vec<usize>,
    /// RTT between sites `i` and `j`, ms.
    rtt_ms: Vec<Vec<f64>>,
}

impl Topology {
    /// `nodes` nodes spread evenly over `sites` sites placed at random (seeded).
    pub fn generate(nodes: usize, sites: usize, seed: u64) -> Topology {
        let sites = sites.clamp(1, 200);
        let mut rng = Rng::new(seed);
        let points: Vec<(f64, f64)> = (0..sites).map(|_| (rng.f64(), rng.f64())).collect();
        let diagonal = std::f64::consts::SQRT_2;
        let rtt_ms = points
            .iter()
            .map(|a| {
                points
                    .iter()
                    .map(|b| {
                        let d = ((a.0 - b.0).powi(2) + (a.1 - b.1).powi(2)).sqrt();
                        BETWEEN_SITES.0 + (BETWEEN_SITES.1 - BETWEEN_SITES.0) * d / diagonal
                    })
                    .collect()
            })
            .collect();
        let per_site = (0..sites)
            .map(|s| nodes / sites + usize::from(s < nodes % sites))
            .collect();
        Topology { per_site, rtt_ms }
    }

    /// Number of sites.
    pub fn sites(&self) -> usize {
        self.per_site.len()
    }

    /// Every node's address and site, site by site.
    pub fn nodes(&self) -> Vec<(SocketAddr, usize)> {
        let mut out = Vec::new();
        for (s, n) in self.per_site.iter().enumerate() {
            for i in 0..*n {
                let ip = Ipv4Addr::new(127, 0, 10 + s as u8, 1 + i as u8);
                out.push((SocketAddr::new(IpAddr::V4(ip), 0), s));
            }
        }
        out
    }

    /// The site of an address of the test bed.
    pub fn site_of(&self, ip: IpAddr) -> Option<usize> {
        match ip {
            IpAddr::V4(v4) => {
                let o = v4.octets();
                let s = (o[0] == 127 && o[1] == 0 && o[2] >= 10).then(|| (o[2] - 10) as usize)?;
                (s < self.sites()).then_some(s)
            }
            IpAddr::V6(_) => None,
        }
    }

    /// RTT between two sites.
    pub fn rtt(&self, a: usize, b: usize) -> Duration {
        if a == b {
            WITHIN_SITE
        } else {
            Duration::from_secs_f64(self.rtt_ms[a][b] / 1000.0)
        }
    }

    /// RTT between two addresses of the bed (zero if either is not in it).
    pub fn rtt_between(&self, a: IpAddr, b: IpAddr) -> Duration {
        match (self.site_of(a), self.site_of(b)) {
            (Some(x), Some(y)) => self.rtt(x, y),
            _ => Duration::ZERO,
        }
    }

    /// The one-way delays to inject: half each pair's RTT.
    pub fn latency(&self) -> Latency {
        let topo = self.clone();
        Arc::new(move |a: SocketAddr, b: SocketAddr| topo.rtt_between(a.ip(), b.ip()) / 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sites_get_their_nodes_and_rtts_stay_in_range() {
        let t = Topology::generate(100, 10, 1);
        assert_eq!(t.per_site.iter().sum::<usize>(), 100);
        let nodes = t.nodes();
        assert_eq!(nodes.len(), 100);
        for (addr, s) in &nodes {
            assert_eq!(t.site_of(addr.ip()), Some(*s));
        }
        for a in 0..10 {
            assert_eq!(t.rtt(a, a), WITHIN_SITE);
            for b in 0..10 {
                let ms = t.rtt(a, b).as_secs_f64() * 1000.0;
                assert!(a == b || (20.0..=150.0).contains(&ms), "{ms}");
                assert_eq!(t.rtt(a, b), t.rtt(b, a));
            }
        }
        assert_eq!(t.site_of("127.0.0.1".parse().unwrap()), None);
    }
}
