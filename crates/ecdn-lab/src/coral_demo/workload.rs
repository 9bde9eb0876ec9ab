//! The DSHT workloads both modes of the demo run: the proxies' lookups (§6.2) and the hot spot
//! (§6.4), over any [`DemoNode`]: a DSHT node in this process, or a node process driven
//! through its admin listener ([`super::processes`]). The same seeds give both modes the same
//! requests at the same nodes.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use ecdn_dsht::sloppy::PutProbe;
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

/// One stop of a put's forward phase in the global cluster (level 0): the node and what it
/// said.
#[derive(Clone, Copy, Debug)]
pub struct Stop {
    pub id: Id,
    pub probe: PutProbe,
}

/// The hot spot's puts: an hour's TTL.
pub const HOT_TTL: Duration = Duration::from_secs(3600);

/// A DSHT node the demo drives.
pub trait DemoNode: Clone + Send + Sync + 'static {
    /// A hierarchical `get` of `key`; `None` if it failed.
    fn get(&self, key: Id) -> impl Future<Output = Option<Got>> + Send;
    /// A `put` of `value` under `key` for an hour ([`HOT_TTL`]); the stops of its forward
    /// phase at level 0, `None` if it failed.
    fn put(&self, key: Id, value: String) -> impl Future<Output = Option<Vec<Stop>>> + Send;
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

    async fn put(&self, key: Id, value: String) -> Option<Vec<Stop>> {
        let put = Dsht::put(self, key, value.as_bytes(), HOT_TTL, None)
            .await
            .ok()?;
        let stops = put.path.iter().filter(|(level, _, _)| *level == 0);
        Some(
            stops
                .map(|(_, c, probe)| Stop {
                    id: c.id,
                    probe: *probe,
                })
                .collect(),
        )
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
    let closest = (0..n).min_by_key(|i| key.distance(&ids[*i])).unwrap_or(0);
    let warmup = minute / 3;
    let start = tokio::time::Instant::now();
    let end = start + warmup + minute;
    let mut tasks = tokio::task::JoinSet::new();
    for (i, node) in nodes.iter().cloned().enumerate() {
        let offset = interval.mul_f64(i as f64 / n as f64);
        tasks.spawn(async move {
            let (mut puts, mut reached) = (0u64, Vec::new());
            let mut next = start + offset;
            while next < end {
                tokio::time::sleep_until(next).await;
                let counted = next >= start + warmup;
                let stops = node.put(key, format!("{}-{puts}", node.me())).await;
                if let (true, Some(s)) = (counted, stops) {
                    reached.push(s);
                }
                puts += 1;
                next += interval;
            }
            (puts, reached)
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
    let (mut puts, mut reached) = (0, Vec::new());
    while let Some(r) = tasks.join_next().await {
        if let Ok((p, r)) = r {
            puts += p;
            reached.extend(r);
        }
    }
    let during: Vec<u64> = probes()
        .await?
        .iter()
        .zip(&before)
        .map(|(a, b)| a.saturating_sub(*b))
        .collect();
    let rpcs_after = rpcs().await?;
    let passed = HotPassed::of(&reached, &ids[closest]);
    let ids_predecessors = ideal_predecessors(ids, &key);
    let most = (0..n).max_by_key(|i| during[*i]).unwrap_or(0);
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
        max_node_rank: ids
            .iter()
            .filter(|id| key.distance(id) < key.distance(&ids[most]))
            .count(),
        max_node_passed: HotPassed::of(&reached, &ids[most]),
        // β·(2^b − 1)·⌈log2 n / b⌉ with b = 1.
        bound_puts_per_min: 12 * log2n,
        ids_predecessors,
        ids_bound_puts_per_min: 12 * ids_predecessors as u64,
        found_fraction: found as f64 / n as f64,
        minute_rpcs: rpcs_after.0.saturating_sub(rpcs_before.0),
        minute_hedges: rpcs_after.1.saturating_sub(rpcs_before.1),
        minute_timeouts: rpcs_after.2.saturating_sub(rpcs_before.2),
        passed,
    })
}

/// The nodes (by index in `ids`) from which some walk toward `key` would go straight to the
/// key's closest node if every node knew every other: each walk starts at its node's id and
/// moves to the node closest to the next intermediate target (§4.1, `b` = 1) among those
/// closer to the key. The paper's bound counts these for a perfectly balanced tree
/// (⌈log2 n⌉ of them); for the ids of a run it is this.
pub fn ideal_predecessors(ids: &[Id], key: &Id) -> usize {
    let Some(closest) = ids.iter().min_by(|a, b| key.cmp_distance(a, b)) else {
        return 0;
    };
    let mut before: std::collections::HashSet<Id> = Default::default();
    for &start in ids {
        let (mut t, mut at) = (start, start);
        while at != *closest {
            let Some(nt) = ecdn_dsht::id::next_target(key, &t, 1) else {
                break;
            };
            t = nt;
            let next = ids
                .iter()
                .filter(|c| key.distance(c) < key.distance(&at))
                .min_by(|a, b| t.cmp_distance(a, b));
            if let Some(&next) = next {
                if next == *closest {
                    before.insert(at);
                }
                at = next;
            }
        }
    }
    before.len()
}

/// Why the puts that reached a hot key's closest node in the counted minute were not
/// stopped by the stop before it (§4.2: a node stops a put when it is full and loaded).
#[derive(Debug, Default, serde::Serialize)]
pub struct HotPassed {
    /// Puts that went from the putting node straight to the closest one (the putter itself
    /// was not full and loaded for its own puts).
    pub from_putter: u64,
    /// Puts whose stop before was another node that was not full.
    pub not_full: u64,
    /// Puts whose stop before was full but let them through (its leakage rate).
    pub leaked: u64,
    /// The distinct nodes that were a stop before the closest one, and the most puts one
    /// of them passed on.
    pub predecessors: usize,
    pub most_from_one: u64,
}

impl HotPassed {
    /// The counts of the puts of `walks` (each put's stops) that reached `node` from another.
    fn of(walks: &[Vec<Stop>], node: &Id) -> HotPassed {
        let mut p = HotPassed::default();
        let mut by_node: std::collections::HashMap<Id, u64> = Default::default();
        let reached = walks.iter().filter_map(|s| {
            let at = s.iter().position(|stop| stop.id == *node)?;
            (at > 0).then(|| (at == 1, s[at - 1]))
        });
        for (from_putter, stop) in reached {
            *by_node.entry(stop.id).or_default() += 1;
            if from_putter {
                p.from_putter += 1;
            } else if !stop.probe.full(HOT_TTL, 4) {
                p.not_full += 1;
            } else {
                p.leaked += 1;
            }
        }
        p.predecessors = by_node.len();
        p.most_from_one = by_node.values().copied().max().unwrap_or(0);
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An id whose top `m` bits are `prefix` and every other bit `rest`.
    fn id(prefix: u8, m: u32, rest: u8) -> Id {
        let mut bytes = [rest; 20];
        let mask = !(u8::MAX >> m);
        bytes[0] = (prefix << (8 - m)) | (rest & !mask);
        Id(bytes)
    }

    /// §4.2's proof sketch: in a perfectly balanced tree of 2^m nodes, the nodes that go
    /// straight to the key's closest node are the m that differ from it in one bit.
    #[test]
    fn a_balanced_tree_has_log_n_nodes_before_the_closest() {
        for m in 1..=6u32 {
            let ids: Vec<Id> = (0..1u8 << m).map(|p| id(p, m, 0)).collect();
            for k in [0u8, 5 % (1 << m), (1 << m) - 1] {
                let key = id(k, m, 0xa5);
                assert_eq!(ideal_predecessors(&ids, &key), m as usize, "m {m}, key {k}");
            }
        }
    }
}
