//! The redirectors on the bed: every one asked by a resolver in every site and by the
//! `resolver` host, which no node knows and each must probe.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use ecdn_coral::dns::{query_a, TTL_NEAR};
use serde::Serialize;

use super::super::{quantiles, Quantiles};
use super::bed::{ProcBed, DNS_PORT};
use super::Run;

/// The name the resolvers ask for.
const NAME: &str = "www.example.com.cdn.test.";

/// The redirectors asked by a resolver in every site (the host of the site's last node, a
/// DSHT peer of every redirector) and by the `resolver` host (which none knows: probed).
#[derive(Debug, Serialize)]
pub struct ProcRedirection {
    pub run: &'static str,
    pub redirectors: usize,
    pub queries: usize,
    pub failed: usize,
    /// The redirectors' own counts (`/_ecdn/stats` `sites.dns`), by level 0, 1, 2.
    pub answers_by_level: Vec<u64>,
    /// Of the site resolvers' queries, those whose TTL says level 2 exactly when the
    /// resolver is within 20 ms of the redirector.
    pub site_resolvers_placed_right: f64,
    /// The same for the probed resolver's queries (one per redirector).
    pub probed_resolver_placed_right: f64,
    /// RTT from a site resolver to the proxies it was given, ms, against a random proxy.
    pub answer_rtt_ms: Quantiles,
    pub random_rtt_ms: Quantiles,
}

impl ProcRedirection {
    pub(super) fn text(&self) -> String {
        format!(
            "redirection: {} queries to {} redirectors, {} failed; answers by level {:?}; placed right: site resolvers {:.0}%, probed resolver {:.0}%; proxy RTT ms p50 {:.1} p90 {:.1} (random proxy p50 {:.1} p90 {:.1})",
            self.queries,
            self.redirectors,
            self.failed,
            self.answers_by_level,
            100.0 * self.site_resolvers_placed_right,
            100.0 * self.probed_resolver_placed_right,
            self.answer_rtt_ms.p50,
            self.answer_rtt_ms.p90,
            self.random_rtt_ms.p50,
            self.random_rtt_ms.p90
        )
    }
}

/// Asks each of `servers` for [`NAME`] from host `host` (address `source`), in that host's
/// namespace.
async fn ask_from(
    bed: &ProcBed,
    host: &str,
    source: IpAddr,
    servers: Vec<SocketAddr>,
) -> Result<Vec<Option<Vec<(IpAddr, u32)>>>> {
    let handle = bed.bed.spawn_in(host, move || -> Result<Vec<_>> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(rt.block_on(async move {
            let mut out = Vec::new();
            for s in servers {
                out.push(query_a(s, source, NAME, Duration::from_secs(5)).await.ok());
            }
            out
        }))
    })?;
    let joined = tokio::task::spawn_blocking(move || handle.join()).await?;
    let entered = joined.map_err(|_| anyhow!("a resolver's thread panicked"))?;
    entered.with_context(|| format!("entering host {host}"))?
}

pub(super) async fn redirection(run: &Run<'_>) -> Result<ProcRedirection> {
    let bed = run.bed;
    let redirectors = bed.redirectors();
    let servers: Vec<SocketAddr> = redirectors
        .iter()
        .map(|&i| SocketAddr::new(bed.nodes[i].0, DNS_PORT))
        .collect();
    // Each site's resolver is its last node's host (the node before the next site's first),
    // a DSHT peer of every redirector; then the `resolver` host, which they must probe.
    let mut resolvers: Vec<(String, IpAddr, bool)> = (0..redirectors.len())
        .map(|k| {
            let last = redirectors.get(k + 1).map_or(bed.nodes.len(), |&n| n) - 1;
            (format!("n{last}"), bed.nodes[last].0, false)
        })
        .collect();
    resolvers.push(("resolver".into(), bed.resolver, true));
    let expected_near = |a: IpAddr, b: IpAddr| bed.rtt(a, b) <= Duration::from_millis(20);
    let (mut queries, mut failed) = (0, 0);
    // Answered and placed right: [site resolvers, the probed one].
    let (mut answered, mut right) = ([0usize; 2], [0usize; 2]);
    let (mut answer_rtt, mut random_rtt) = (Vec::new(), Vec::new());
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    for (host, source, probed) in &resolvers {
        let got = ask_from(bed, host, *source, servers.clone()).await?;
        for (server, answer) in servers.iter().zip(got) {
            queries += 1;
            let Some(answer) = answer.filter(|a| !a.is_empty()) else {
                failed += 1;
                continue;
            };
            let kind = usize::from(*probed);
            answered[kind] += 1;
            let near = answer[0].1 == TTL_NEAR;
            right[kind] += usize::from(near == expected_near(*source, server.ip()));
            if !probed {
                answer_rtt.extend(answer.iter().map(|(ip, _)| ms(bed.rtt(*source, *ip))));
                random_rtt.extend(bed.nodes.iter().map(|(ip, _)| ms(bed.rtt(*source, *ip))));
            }
        }
    }
    let mut by_level = vec![0u64; run.levels.len()];
    for s in run.stats().await? {
        for (l, c) in s["sites"]["dns"]["answers_by_level"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            if l < by_level.len() {
                by_level[l] += c.as_u64().unwrap_or(0);
            }
        }
    }
    Ok(ProcRedirection {
        run: "redirection",
        redirectors: servers.len(),
        queries,
        failed,
        answers_by_level: by_level,
        site_resolvers_placed_right: right[0] as f64 / answered[0].max(1) as f64,
        probed_resolver_placed_right: right[1] as f64 / answered[1].max(1) as f64,
        answer_rtt_ms: quantiles(answer_rtt),
        random_rtt_ms: quantiles(random_rtt),
    })
}
