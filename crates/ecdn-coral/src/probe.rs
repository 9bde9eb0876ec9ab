//! The redirector's own measure of a resolver's distance (CoralCDN §3.1: "upon receiving a
//! query, a Coral DNS server probes the client to determine its round-trip-time"), cached so
//! that a resolver is probed once, not at every query.
//!
//! **The probe** is a TCP connection attempt to the resolver's DNS port: one round trip, as a
//! resolver's TCP listener answers the SYN, or its kernel resets it when nothing listens; the
//! attempt is then dropped. It needs no privilege (an ICMP echo needs a raw socket) and no
//! answer is waited for beyond [`Prober::wait`]: the redirector only needs to know which
//! level's threshold the RTT meets, so a probe that has heard nothing by the largest finite
//! threshold has its answer (farther than every threshold: level 0), and a query waits at most
//! that long, once per resolver per [`Prober::keep`].
//!
//! Paper differences: Coral's probe is a traceroute-like one that also maps the last hops to
//! the client to look for clustering hints under their prefixes; this one measures the RTT
//! only, and the hints come from the DSHT's prefix lookups (`nodes(level, count, target)`).

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What one probe found: the RTT, or `None` when nothing answered within the wait (or the
/// address cannot be reached).
pub type ProbeFn = Arc<
    dyn Fn(SocketAddr, Duration) -> Pin<Box<dyn Future<Output = Option<Duration>> + Send>>
        + Send
        + Sync,
>;

/// Resolvers' RTTs, probed and cached (see the module documentation).
pub struct Prober {
    /// The port probed (53).
    pub port: u16,
    /// The longest a probe waits: the largest finite level threshold.
    pub wait: Duration,
    /// How long a result is reused.
    pub keep: Duration,
    probe: ProbeFn,
    cache: Mutex<HashMap<IpAddr, (Option<Duration>, Instant)>>,
    probes: std::sync::atomic::AtomicU64,
}

/// Resolvers remembered at most (then the cache starts again).
const KEPT: usize = 65_536;

impl Prober {
    /// A prober of TCP port 53 that waits at most `wait` and keeps results for 10 minutes.
    pub fn new(wait: Duration) -> Prober {
        Prober::with_probe(wait, Arc::new(|addr, wait| Box::pin(tcp_probe(addr, wait))))
    }

    /// A prober with its own probe (tests).
    pub fn with_probe(wait: Duration, probe: ProbeFn) -> Prober {
        Prober {
            port: 53,
            wait,
            keep: Duration::from_secs(600),
            probe,
            cache: Mutex::new(HashMap::new()),
            probes: Default::default(),
        }
    }

    /// The RTT to `resolver`: cached, or probed now (at most [`Prober::wait`]); `None` when
    /// it is farther than the wait or does not answer.
    pub async fn rtt(&self, resolver: IpAddr) -> Option<Duration> {
        if let Some(&(rtt, at)) = lock(&self.cache).get(&resolver) {
            if at.elapsed() < self.keep {
                return rtt;
            }
        }
        self.probes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let rtt = (self.probe)(SocketAddr::new(resolver, self.port), self.wait).await;
        let mut cache = lock(&self.cache);
        if cache.len() >= KEPT {
            cache.clear();
        }
        cache.insert(resolver, (rtt, Instant::now()));
        rtt
    }

    /// Probes sent so far.
    pub fn probes(&self) -> u64 {
        self.probes.load(std::sync::atomic::Ordering::Relaxed)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One TCP connection attempt: the time to its answer, accepted or refused.
pub async fn tcp_probe(addr: SocketAddr, wait: Duration) -> Option<Duration> {
    let start = Instant::now();
    match tokio::time::timeout(wait, tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(_)) => Some(start.elapsed()),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => Some(start.elapsed()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_resolver_is_probed_once_and_its_rtt_kept() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let probe: ProbeFn = Arc::new(move |addr: SocketAddr, wait| {
            lock(&s).push((addr, wait));
            let rtt = match addr.ip().to_string().as_str() {
                "10.0.0.1" => Some(Duration::from_millis(7)),
                _ => None,
            };
            Box::pin(async move { rtt })
        });
        let p = Prober::with_probe(Duration::from_millis(60), probe);
        let near: IpAddr = "10.0.0.1".parse().unwrap();
        let far: IpAddr = "10.0.0.2".parse().unwrap();
        for _ in 0..3 {
            assert_eq!(p.rtt(near).await, Some(Duration::from_millis(7)));
            assert_eq!(p.rtt(far).await, None);
        }
        assert_eq!(p.probes(), 2);
        let seen = lock(&seen).clone();
        assert_eq!(seen.len(), 2);
        assert!(seen
            .iter()
            .all(|(a, w)| a.port() == 53 && *w == Duration::from_millis(60)));
    }

    #[tokio::test]
    async fn the_tcp_probe_times_an_accept_and_a_refusal() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let open = l.local_addr().unwrap();
        let rtt = tcp_probe(open, Duration::from_secs(2)).await;
        assert!(rtt.is_some_and(|r| r < Duration::from_secs(1)), "{rtt:?}");
        drop(l);
        // Nothing listens there now: the reset is an answer too.
        let rtt = tcp_probe(open, Duration::from_secs(2)).await;
        assert!(rtt.is_some_and(|r| r < Duration::from_secs(1)), "{rtt:?}");
    }
}
