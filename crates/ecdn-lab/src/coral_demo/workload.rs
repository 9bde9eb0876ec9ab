//! The DSHT workloads both modes of the demo run: the proxies' lookups (§6.2) and the hot spot
//! (§6.4), over any [`DemoNode`]: a DSHT node in this process, or a node process driven
//! through its admin listener ([`super::processes`]). The same seeds give both modes the same
//! requests at the same nodes.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use ecdn_dsht::{Dsht, Id};
use ecdn_trace::Rng;

use super::{DemoArgs, HotRun, Phase};

/// What a `get` found.
pub struct Got {
    /// Values found (references to sites).
    pub values: usize,
    /// The level they were found at.
    pub level: Option<usize>,
    pub hops: u32,
    pub ms: f64,
}

/// A DSHT node the demo drives.
pub trait DemoNode: Clone + Send + Sync + 'static {
    /// A hierarchical `get` of `key`; `None` if it failed.
    fn get(&self, key: Id) -> impl Future<Output = Option<Got>> + Send;
    /// A `put` of `value` under `key` for an hour (its outcome is not needed).
    fn put(&self, key: Id, value: String) -> impl Future<Output = ()> + Send;
    /// The put probes this node received for `key`.
    fn put_probes(&self, key: Id) -> impl Future<Output = Result<u64>> + Send;
    /// What it puts as a reference to itself: its address.
    fn me(&self) -> String;
    /// The RPCs its walks sent so far, how many of them were hedges, and how many timed out.
    fn rpcs(&self) -> impl Future<Output = Result<(u64, u64, u64)>> + Send;
}

impl DemoNode for Arc<Dsht> {
    async fn get(&self, key: Id) -> Option<Got> {
        let got = Dsht::get(self, key, None).await.ok()?;
        Some(Got {
            values: got.values.len(),
            level: got.level,
            hops: got.hops,
            ms: got.elapsed.as_secs_f64() * 1000.0,
        })
    }

    async fn put(&self, key: Id, value: String) {
        let _ = Dsht::put(self, key, value.as_bytes(), Duration::from_secs(3600), None).await;
    }

    async fn put_probes(&self, key: Id) -> Result<u64> {
        Ok(Dsht::put_probes(self, &key))
    }

    fn me(&self) -> String {
        self.addr().to_string()
    }

    async fn rpcs(&self) -> Result<(u64, u64, u64)> {
        let s = self.stats();
        Ok((s.rpcs_sent, s.hedges, s.rpcs_timed_out))
    }
}

/// The lookups of a run: hops, latency, and how many found a reference (in level 2).
pub struct Lookups {
    pub found: usize,
    pub hops: Vec<f64>,
    pub ms: Vec<f64>,
    /// Of the gets that found a reference, those answered in level 2.
    pub local: usize,
}

/// The proxy workload: `--requests` requests at `--rate` for `--objects` objects (Zipf,
/// s = 0.8), each at a random node, which looks its object up and then puts a reference to
/// itself for an hour, as a CoralProxy does once it holds the object.
pub async fn lookups<N: DemoNode>(a: &DemoArgs, nodes: &[N], phase: &Phase<'_>) -> Result<Lookups> {
    let mut rng = Rng::new(a.seed ^ 0x5eed);
    let zipf = ecdn_trace::gen::Zipf::new(a.objects.max(1) as u64, 0.8)?;
    let mut tasks = tokio::task::JoinSet::new();
    let start = tokio::time::Instant::now();
    for r in 0..a.requests {
        let at = start + Duration::from_secs_f64(r as f64 / a.rate.max(0.1));
        let node = nodes[rng.below(nodes.len() as u64) as usize].clone();
        let object = zipf.sample(&mut rng);
        tasks.spawn(async move {
            tokio::time::sleep_until(at).await;
            let key = Id::hash(format!("http://origin.test/obj/{object}").as_bytes());
            let got = node.get(key).await?;
            node.put(key, node.me()).await;
            Some(got)
        });
    }
    let mut out = Lookups {
        found: 0,
        hops: Vec::new(),
        ms: Vec::new(),
        local: 0,
    };
    let mut done = 0;
    while let Some(r) = tasks.join_next().await {
        done += 1;
        if done % 50 == 0 {
            phase.say(&format!("lookups, {done} of {} done", a.requests));
        }
        let Ok(Some(got)) = r else { continue };
        out.hops.push(got.hops as f64);
        out.ms.push(got.ms);
        if got.values > 0 {
            out.found += 1;
            out.local += usize::from(got.level == Some(2));
        }
    }
    Ok(out)
}

/// The hot spot in a bed whose minute is `minute` (the leakage window; the paper's 60 s):
/// every node puts one key every `interval`; after a third of a minute, the put probes each
/// node receives are counted over one minute, and the key's closest node's (by `ids`, the
/// nodes' ids) compared with β·(2^b − 1)·⌈log2 n / b⌉. Then every node looks the key up.
pub async fn hot_spot<N: DemoNode>(
    nodes: &[N],
    ids: &[Id],
    interval: Duration,
    minute: Duration,
    phase: &Phase<'_>,
) -> Result<HotRun> {
    let key = Id::hash(b"http://origin.test/hot");
    let n = nodes.len();
    let warmup = minute / 3;
    let start = tokio::time::Instant::now();
    let end = start + warmup + minute;
    let mut tasks = tokio::task::JoinSet::new();
    for (i, node) in nodes.iter().cloned().enumerate() {
        let offset = interval.mul_f64(i as f64 / n as f64);
        tasks.spawn(async move {
            let mut puts = 0u64;
            let mut next = start + offset;
            while next < end {
                tokio::time::sleep_until(next).await;
                node.put(key, format!("{}-{puts}", node.me())).await;
                puts += 1;
                next += interval;
            }
            puts
        });
    }
    phase.say(&format!(
        "every node puts the key every {interval:?}; warming up"
    ));
    tokio::time::sleep_until(start + warmup).await;
    phase.say(&format!("counting puts for a minute of {minute:?}"));
    let probes = || async {
        let mut out = Vec::with_capacity(n);
        for node in nodes {
            out.push(node.put_probes(key).await?);
        }
        anyhow::Ok(out)
    };
    let rpcs = || async {
        let (mut sent, mut hedges, mut timed_out) = (0, 0, 0);
        for node in nodes {
            let (s, h, t) = node.rpcs().await?;
            (sent, hedges, timed_out) = (sent + s, hedges + h, timed_out + t);
        }
        anyhow::Ok((sent, hedges, timed_out))
    };
    let before = probes().await?;
    let rpcs_before = rpcs().await?;
    let mut puts = 0;
    while let Some(r) = tasks.join_next().await {
        puts += r.unwrap_or(0);
    }
    let during: Vec<u64> = probes()
        .await?
        .iter()
        .zip(&before)
        .map(|(a, b)| a.saturating_sub(*b))
        .collect();
    let rpcs_after = rpcs().await?;
    let closest = (0..n).min_by_key(|i| key.distance(&ids[*i])).unwrap_or(0);
    // Every node looks the key up, all at once.
    let mut gets = tokio::task::JoinSet::new();
    for node in nodes {
        let node = node.clone();
        gets.spawn(async move { node.get(key).await.is_some_and(|g| g.values > 0) });
    }
    let mut found = 0;
    while let Some(r) = gets.join_next().await {
        found += usize::from(r.unwrap_or(false));
    }
    let log2n = (n as f64).log2().ceil() as u64;
    Ok(HotRun {
        run: "hot-spot",
        nodes: n,
        puts,
        minute_s: minute.as_secs_f64(),
        closest_node_puts_per_min: during[closest],
        max_node_puts_per_min: during.iter().copied().max().unwrap_or(0),
        // β·(2^b − 1)·⌈log2 n / b⌉ with b = 1.
        bound_puts_per_min: 12 * log2n,
        found_fraction: found as f64 / n as f64,
        minute_rpcs: rpcs_after.0.saturating_sub(rpcs_before.0),
        minute_hedges: rpcs_after.1.saturating_sub(rpcs_before.1),
        minute_timeouts: rpcs_after.2.saturating_sub(rpcs_before.2),
    })
}
