//! The test bed's proxies: an `ecdn node` per DSHT node, each a cooperating site
//! ([`ecdn_coral::site`]), an origin far from every site, and a flash crowd (§6.1).
//!
//! Every node listens on its DSHT node's address (127.0.(10+S).N) and reaches other sites
//! and the origin through a connector that waits two RTTs of the topology before connecting
//! (the TCP handshake and the request's round trip); the origin is [`ORIGIN_RTT`] from every
//! site. Clients sit next to their proxy (no delay), as in the paper's experiment.
//!
//! The flash crowd: every node's client asks for each of `--flash-objects` new objects of
//! 41 KB (the paper's files) once, at a random time within `--flash-window`. Reported: the
//! requests the origin received per object, the fills another site answered, and the
//! clients' fetch latencies. The same crowd on nodes that do not cooperate shows what the
//! origin sees without the DSHT.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use ecdn_dsht::Dsht;
use ecdn_node::node::sites::Sites;
use ecdn_node::node::{tcp_connector, Connector, Node, NodeConfig, RunningNode};
use ecdn_node::origin::{Origin, OriginConfig};
use ecdn_trace::Rng;
use serde::Serialize;

use super::topology::Topology;
use super::{quantiles, Quantiles};
use crate::cluster_demo::procs::http_get_host;
use ecdn_coral::site::CoralReferrals;

/// RTT between any site and the origin.
pub const ORIGIN_RTT: Duration = Duration::from_millis(100);
/// The objects' size: the paper's 41 KB files.
pub const OBJECT_SIZE: u64 = 41_000;
/// The longest a client waits for an answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);

/// One flash crowd.
#[derive(Debug, Serialize)]
pub struct FlashCrowd {
    pub run: &'static str,
    pub cooperating: bool,
    pub nodes: usize,
    pub objects: usize,
    pub requests: usize,
    /// Requests that did not get the whole object with `200`.
    pub failed: usize,
    pub origin_requests: u64,
    pub origin_requests_per_object: f64,
    /// What the nodes counted of their cooperation.
    #[serde(flatten)]
    pub sites: SiteCounts,
    /// Client fetch latency, ms.
    pub fetch_ms: Quantiles,
}

/// The nodes' site counters (`/_ecdn/stats`), summed over a crowd's nodes.
#[derive(Debug, Default, Serialize)]
pub struct SiteCounts {
    /// Fills another site answered.
    pub site_fills: u64,
    /// Why the fills that went to the origin did: the claim named no site (one per object is
    /// expected: the first claimer), or every site it named failed to answer.
    pub origin_unreferred: u64,
    pub origin_after_referrals: u64,
    /// Claims (and gets) that failed or ran out of time: a fill whose claim failed goes to
    /// the origin as one whose claim named no site.
    pub claims_failed: u64,
    /// Requests from other sites answered `504`: nothing held or in flight, or the fill there
    /// was asking the requesting site (a circle of waits refused).
    pub peers_not_held: u64,
    pub peers_circular: u64,
}

impl SiteCounts {
    /// The counters of every node's `/_ecdn/stats` in `stats`, added up.
    pub fn sum(stats: &[serde_json::Value]) -> SiteCounts {
        let sum = |name: &str| stats.iter().map(|s| s[name].as_u64().unwrap_or(0)).sum();
        SiteCounts {
            site_fills: sum("site_fills"),
            origin_unreferred: sum("site_origin_unreferred"),
            origin_after_referrals: sum("site_origin_after_referrals"),
            claims_failed: stats
                .iter()
                .map(|s| s["sites"]["lookups"]["failed"].as_u64().unwrap_or(0))
                .sum(),
            peers_not_held: sum("site_peers_not_held"),
            peers_circular: sum("site_peers_circular"),
        }
    }
}

/// A connector that waits two RTTs of the topology (one for the origin, which is
/// [`ORIGIN_RTT`] away) before connecting.
fn connector(topo: Topology, own: IpAddr) -> Connector {
    let tcp = tcp_connector();
    Arc::new(move |authority: String| {
        let rtt = authority
            .parse::<SocketAddr>()
            .ok()
            .filter(|a| topo.site_of(a.ip()).is_some())
            .map_or(ORIGIN_RTT, |a| topo.rtt_between(own, a.ip()));
        let connecting = tcp(authority);
        Box::pin(async move {
            tokio::time::sleep(rtt * 2).await;
            connecting.await
        })
    })
}

/// A free TCP port on `ip` (the node's address must be known to its referrals before it
/// starts).
fn free_port(ip: IpAddr) -> Result<u16> {
    let l = std::net::TcpListener::bind(SocketAddr::new(ip, 0))
        .with_context(|| format!("binding {ip}"))?;
    Ok(l.local_addr()?.port())
}

/// Runs a flash crowd on one node per topology node, cooperating through `dshts` (one per
/// node, same order) when given; objects are numbered from `first_object`.
pub async fn flash_crowd(
    run: &'static str,
    topo: &Topology,
    dshts: Option<&[Arc<Dsht>]>,
    objects: usize,
    window: Duration,
    first_object: u64,
    seed: u64,
) -> Result<FlashCrowd> {
    let origin = Origin::start("127.0.9.1:0".parse()?, OriginConfig::default())
        .await
        .context("starting the origin on 127.0.9.1")?;
    let mut nodes: Vec<RunningNode> = Vec::new();
    for (i, (addr, _)) in topo.nodes().into_iter().enumerate() {
        let ip = addr.ip();
        let listen = SocketAddr::new(ip, free_port(ip)?);
        let sites = dshts.map(|d| {
            Sites(Arc::new(CoralReferrals::new(
                d[i].clone(),
                listen.to_string(),
                Duration::from_secs(2),
            )))
        });
        let cfg = NodeConfig {
            origin: format!("http://{}", origin.addr),
            hoc_size: 64 << 20,
            hoc_policy: "lru".into(),
            drain_timeout: Duration::from_secs(2),
            sites,
            ..NodeConfig::default()
        };
        nodes.push(
            Node::start_with_connector(listen, cfg, connector(topo.clone(), ip))
                .await
                .with_context(|| format!("starting a node on {listen}"))?,
        );
    }
    let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.addr).collect();
    let (failed, ms) = crowd_requests(&addrs, objects, window, first_object, seed).await;
    let mut stats = Vec::new();
    for n in &nodes {
        let Some(admin) = n.admin_addr() else {
            continue;
        };
        let got = http_get_host(admin, "x", "/_ecdn/stats", CLIENT_TIMEOUT).await;
        if let Ok((200, body)) = got {
            stats.push(serde_json::from_slice(&body).unwrap_or_default());
        }
    }
    let origin_requests = origin.requests();
    let requests = nodes.len() * objects;
    let crowd = FlashCrowd {
        run,
        cooperating: dshts.is_some(),
        nodes: nodes.len(),
        objects,
        requests,
        failed,
        origin_requests,
        origin_requests_per_object: origin_requests as f64 / objects.max(1) as f64,
        sites: SiteCounts::sum(&stats),
        fetch_ms: quantiles(ms),
    };
    for n in nodes {
        n.stop().await?;
    }
    origin.stop().await?;
    Ok(crowd)
}

/// The crowd's requests: the client next to each of `nodes` (HTTP listeners) asks for each
/// of `objects` new objects (numbered from `first_object`) once, at a random time within
/// `window`. Returns the requests that did not get the whole object with `200`, and the
/// others' fetch latencies, ms.
pub async fn crowd_requests(
    nodes: &[SocketAddr],
    objects: usize,
    window: Duration,
    first_object: u64,
    seed: u64,
) -> (usize, Vec<f64>) {
    let mut rng = Rng::new(seed ^ 0xf1a5);
    let mut tasks = tokio::task::JoinSet::new();
    let start = tokio::time::Instant::now();
    for &addr in nodes {
        for o in 0..objects as u64 {
            let at = start + window.mul_f64(rng.f64());
            let path = format!("/obj/{}?size={OBJECT_SIZE}", first_object + o);
            tasks.spawn(async move {
                tokio::time::sleep_until(at).await;
                let t = Instant::now();
                let got = http_get_host(addr, "origin.test", &path, CLIENT_TIMEOUT).await;
                (got.ok(), t.elapsed())
            });
        }
    }
    let (mut failed, mut ms) = (0, Vec::new());
    while let Some(r) = tasks.join_next().await {
        match r {
            Ok((Some((200, body)), d)) if body.len() as u64 == OBJECT_SIZE => {
                ms.push(d.as_secs_f64() * 1000.0)
            }
            _ => failed += 1,
        }
    }
    (failed, ms)
}

impl FlashCrowd {
    /// The crowd as a line of text.
    pub fn text(&self) -> String {
        format!(
            "flash crowd ({}): {} requests for {} objects at {} nodes, {} failed; the origin got {} ({:.2} an object: {} whose claim named no site ({} claims failed), {} after the sites named failed); {} fills from other sites ({} asks of a site answered 504: {} nothing there, {} circular); fetch ms p50 {:.1} p90 {:.1} p99 {:.1}",
            self.run,
            self.requests,
            self.objects,
            self.nodes,
            self.failed,
            self.origin_requests,
            self.origin_requests_per_object,
            self.sites.origin_unreferred,
            self.sites.claims_failed,
            self.sites.origin_after_referrals,
            self.sites.site_fills,
            self.sites.peers_not_held + self.sites.peers_circular,
            self.sites.peers_not_held,
            self.sites.peers_circular,
            self.fetch_ms.p50,
            self.fetch_ms.p90,
            self.fetch_ms.p99
        )
    }
}
