//! The test bed's DNS redirectors (CoralCDN §3.1): one per site, on the site's first node,
//! each answering from its DSHT node's clusters.
//!
//! Each site has a resolver at `127.0.(10+S).200`, in the site's /24; a redirector knows a
//! resolver's RTT from the topology (what Coral measures), so a resolver of its own site is
//! at level 2, one within 60 ms at level 1, any other at level 0. Every resolver asks every
//! redirector for `NAME.<domain>` once, as resolvers all over the Internet would ask whichever
//! nameserver they know. Reported: the answers' levels (by their TTL, 60 s at level 2,
//! 30 s below), the RTT from the resolver to the proxies it was given against the RTT to a
//! proxy picked at random, and the share of own-site answers that name only own-site
//! proxies. Then a proxy named in an answer dies, and its resolver asks every 250 ms for
//! the redirector's freshness window and 2 s more: reported is how long after its
//! death it was still named (a redirector answers a proxy heard from within the window
//! without a ping, so that is at most the window and one ping's timeout), against the TTL.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use ecdn_coral::dns::{query_a, DnsServer, Locator, Redirector, TTL_NEAR};
use ecdn_dsht::Dsht;
use serde::Serialize;

use super::topology::Topology;
use super::{quantiles, Quantiles};

/// The domain the redirectors serve.
pub const DOMAIN: &str = "cdn.test.";
/// The name every resolver asks for.
const NAME: &str = "www.example.com.cdn.test.";
/// The longest a resolver waits for an answer.
const QUERY_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the dead proxy's resolver asks.
const POLL: Duration = Duration::from_millis(250);
/// How much longer than the freshness window the dead proxy's resolver goes on asking: a
/// redirector names a dead proxy at most for the window and one ping's timeout (the DSHT's RPC
/// timeout, 500 ms at most).
const OBSERVE_MARGIN: Duration = Duration::from_secs(2);

/// The redirectors' run.
#[derive(Debug, Serialize)]
pub struct Redirection {
    pub run: &'static str,
    pub sites: usize,
    pub queries: usize,
    /// Queries with no usable answer (an error, a timeout, or no proxy).
    pub failed: usize,
    /// Answers at level 2 (TTL 60 s), and below (TTL 30 s).
    pub level2_answers: usize,
    pub lower_answers: usize,
    /// Of the resolvers' queries to their own site's redirector, the share whose proxies are
    /// all in the resolver's site.
    pub own_site_only: f64,
    /// RTT from a resolver to the proxies it was given, ms (each answered proxy one sample).
    pub answer_rtt_ms: Quantiles,
    /// RTT from a resolver to a proxy picked at random, ms (every proxy one sample a query).
    pub random_rtt_ms: Quantiles,
    /// The proxy that was stopped and the TTL of the answer that named it.
    pub killed: Option<String>,
    pub killed_ttl_s: Option<u32>,
    /// For how long its resolver asked after it died, how many of those answers still named
    /// it, and when the last of them came (0: none did).
    pub observed_s: f64,
    pub named_after_death: usize,
    pub last_named_s: f64,
}

impl Redirection {
    /// The run as a line of text.
    pub fn text(&self) -> String {
        format!(
            "redirection: {} queries from {} resolvers, {} failed; {} answered at level 2, {} below; own-site answers all local {:.0}%; proxy RTT ms p50 {:.1} p90 {:.1} (random proxy p50 {:.1} p90 {:.1}); dead proxy {} named {} times in {:.0} s, last {:.1} s after it died (TTL {} s)",
            self.queries,
            self.sites,
            self.failed,
            self.level2_answers,
            self.lower_answers,
            100.0 * self.own_site_only,
            self.answer_rtt_ms.p50,
            self.answer_rtt_ms.p90,
            self.random_rtt_ms.p50,
            self.random_rtt_ms.p90,
            self.killed.as_deref().unwrap_or("-"),
            self.named_after_death,
            self.observed_s,
            self.last_named_s,
            self.killed_ttl_s
                .map_or_else(|| "-".to_string(), |t| t.to_string()),
        )
    }
}

/// A site's resolver: `127.0.(10+S).200`.
fn resolver_of(site: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 10 + site as u8, 200))
}

/// Runs one redirector per site on the bed's DSHT nodes (`nodes`, in the topology's order),
/// queries them from every site's resolver, then stops a proxy and times its removal.
/// `fresh`: how recently a proxy must have been heard from to be answered without a ping.
pub async fn redirection(
    topo: &Topology,
    nodes: &[Arc<Dsht>],
    fresh: Duration,
) -> Result<Redirection> {
    let placed = topo.nodes();
    let mut servers = Vec::new();
    for site in 0..topo.sites() {
        let Some(first) = placed.iter().position(|(_, s)| *s == site) else {
            continue;
        };
        let dsht = nodes[first].clone();
        let own = dsht.addr().ip();
        let bed = topo.clone();
        let locate: Locator =
            Arc::new(move |ip: IpAddr| bed.site_of(ip).map(|_| bed.rtt_between(own, ip)));
        let mut redirector = Redirector::new(DOMAIN, dsht, locate)?;
        redirector.fresh = fresh;
        let server = DnsServer::start(SocketAddr::new(own, 0), redirector)
            .await
            .with_context(|| format!("starting site {site}'s redirector"))?;
        servers.push((site, server));
    }
    let proxies: Vec<IpAddr> = nodes.iter().map(|n| n.addr().ip()).collect();
    let mut tasks = tokio::task::JoinSet::new();
    for resolver_site in 0..topo.sites() {
        let resolver = resolver_of(resolver_site);
        let redirectors: Vec<(usize, SocketAddr)> =
            servers.iter().map(|(s, d)| (*s, d.addr)).collect();
        tasks.spawn(async move {
            let mut answers = Vec::new();
            for (site, server) in redirectors {
                let got = query_a(server, resolver, NAME, QUERY_TIMEOUT).await;
                answers.push((resolver_site, site, got.ok()));
            }
            answers
        });
    }
    let mut run = Redirection {
        run: "redirection",
        sites: topo.sites(),
        queries: 0,
        failed: 0,
        level2_answers: 0,
        lower_answers: 0,
        own_site_only: 0.0,
        answer_rtt_ms: Quantiles::default(),
        random_rtt_ms: Quantiles::default(),
        killed: None,
        killed_ttl_s: None,
        observed_s: 0.0,
        named_after_death: 0,
        last_named_s: 0.0,
    };
    let (mut answer_rtt, mut random_rtt, mut own_site, mut own_site_local) =
        (Vec::new(), Vec::new(), 0, 0);
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    // The proxy to stop: one named to a resolver by its own site's redirector, not the
    // redirector's own node.
    let mut victim: Option<(usize, IpAddr, u32)> = None;
    while let Some(r) = tasks.join_next().await {
        for (resolver_site, site, got) in r.context("a resolver's task")? {
            run.queries += 1;
            let resolver = resolver_of(resolver_site);
            let got = got.unwrap_or_default();
            if got.is_empty() {
                run.failed += 1;
                continue;
            }
            if got[0].1 == TTL_NEAR {
                run.level2_answers += 1;
            } else {
                run.lower_answers += 1;
            }
            answer_rtt.extend(
                got.iter()
                    .map(|(ip, _)| ms(topo.rtt_between(resolver, *ip))),
            );
            random_rtt.extend(proxies.iter().map(|ip| ms(topo.rtt_between(resolver, *ip))));
            if site == resolver_site {
                own_site += 1;
                own_site_local += usize::from(
                    got.iter()
                        .all(|(ip, _)| topo.site_of(*ip) == Some(resolver_site)),
                );
                let redirector_ip = servers
                    .iter()
                    .find(|(s, _)| *s == site)
                    .map(|(_, d)| d.addr.ip());
                if victim.is_none() {
                    victim = got
                        .iter()
                        .find(|(ip, _)| Some(*ip) != redirector_ip)
                        .map(|(ip, ttl)| (site, *ip, *ttl));
                }
            }
        }
    }
    run.own_site_only = own_site_local as f64 / own_site.max(1) as f64;
    run.answer_rtt_ms = quantiles(answer_rtt);
    run.random_rtt_ms = quantiles(random_rtt);
    if let Some((site, ip, ttl)) = victim {
        run.killed = Some(ip.to_string());
        run.killed_ttl_s = Some(ttl);
        if let Some(node) = nodes.iter().find(|n| n.addr().ip() == ip) {
            node.shutdown();
        }
        let server = servers
            .iter()
            .find(|(s, _)| *s == site)
            .map(|(_, d)| d.addr)
            .context("the victim's redirector")?;
        let died = Instant::now();
        let observe = fresh + OBSERVE_MARGIN;
        while died.elapsed() < observe {
            let got = query_a(server, resolver_of(site), NAME, QUERY_TIMEOUT).await;
            if got.is_ok_and(|g| g.iter().any(|(a, _)| *a == ip)) {
                run.named_after_death += 1;
                run.last_named_s = died.elapsed().as_secs_f64();
            }
            tokio::time::sleep(POLL).await;
        }
        run.observed_s = died.elapsed().as_secs_f64();
    }
    for (_, s) in servers {
        s.stop().await;
    }
    Ok(run)
}
