//! The parity budget re-spent from measured reads (EC-Cache §4.2 and §6.1: the coordinator
//! "gives extra parities to the most popular objects until the budget is spent"; selective
//! replication, extra replicas).
//!
//! Nodes count the reads of each EC-Cache object in splits read (a read through a node counts
//! its `k`, a client that reads the splits itself each split it asks) and send the counts with
//! their heartbeats;
//! the coordinator adds up those of committed objects. Every `object_budget_every_s` it ranks
//! the objects by those counts (multiplied by [`DECAY`] afterwards, so the ranking follows the
//! reads of the last few dozen periods) and spends `object_budget` of their size with
//! `ecdn_objects::budget::reallocate`, the code the bench and the model use: objects written with
//! the same (`k`, `r`) form one group, each group gets the same fraction of its own size (a
//! group whose `r` parities alone cost more is left as it is). Replicated objects (`k` = 1) are
//! selective replication: their units are replicas.
//!
//! **Hysteresis.** Counts are noisy, and the objects at the margin of the budget would trade
//! units at every period, each trade costing a read of the object and a write of a split. So a
//! unit an object holds moves only to an object whose load per server is more than [`KEEP`]
//! above its own, and an object is changed only when two plans in a row give it the same new
//! number of splits. Every such object is then sent, one by one, to an available node's peer
//! listener as `POST /_peer/units/<name>?units=N` (signed; the same re-spend as a client's
//! `POST /_objects/<name>?units=N`), which grows or shrinks it (`ecdn-node`'s `budget.rs`). (Between plans the budget may be overspent by the margin's few units.)
//!
//! **Lost splits.** A split on a server the map has out (failed, cut off, or slow: issue 60's
//! rule) is not counted as one of the object's units: the plan spends the budget on the splits
//! the available servers hold and then gives each object one more unit per split it has out,
//! so an object keeps the spare that late binding needs (with `k = 10`, `r = 1` and `Δ = 1`,
//! an object with a split on a slow server is otherwise read with no straggler to spare). The
//! new splits go on available servers; when the server is back, the next plans give the
//! object its budgeted units again and the shrink drops the last splits, the ones added. The
//! same two-plans rule damps a server that flaps. While a server is out, the memory its splits
//! held is spent again on the others.
//!
//! Only the embedded coordinator does this (its table holds the records); in etcd mode the
//! records are in etcd and the budget stays as written.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ecdn_objects::budget::{reallocate, Object, Scheme};
use ecdn_objects::meta::{ObjectName, MAX_SPLITS};
use hyper::{Method, StatusCode};

use super::state::State;
use super::{stopped, Shared};
use crate::peer::PeerClient;

/// What the read counts keep from one period to the next: their half-life is 34 periods. A
/// shorter memory follows a change of popularity sooner, but ranks the objects at the margin
/// of the budget (read a few times a minute) by noise, and re-codes them back and forth: at
/// 0.8 the bench re-coded 473 objects in 86 s of reads (BENCHMARKS.md).
pub const DECAY: f64 = 0.98;

/// How much more loaded (per server) an object must be than one holding a unit to take it:
/// the plan weighs held units `1 + KEEP` times. Under Zipf 0.9 popularity falls by 25% from
/// rank 40 to rank 51; ±10% of noise in the counts moves nothing (`ecdn_objects::budget`'s
/// tests).
pub const KEEP: f64 = 0.25;

/// An object of a budget group.
struct Member {
    name: ObjectName,
    size: u64,
    /// Its splits now.
    now: usize,
    /// Those on servers the map has out.
    out: usize,
}

/// Time limit of one object's re-spend (it reads and codes the object).
const UNITS_TIMEOUT: Duration = Duration::from_secs(120);

impl State {
    /// The objects whose splits the budget changes, with their new count; the available
    /// nodes' peer addresses. Decays the read counts.
    pub(super) fn object_budget_plan(
        &mut self,
        fraction: f64,
    ) -> (Vec<(ObjectName, usize)>, Vec<SocketAddr>) {
        // The available nodes: their ids, and their peer addresses.
        let (available, nodes): (Vec<usize>, Vec<SocketAddr>) = self
            .status(Instant::now())
            .nodes
            .iter()
            .filter(|n| n.available)
            .map(|n| (n.id, n.peer))
            .unzip();
        // By code (k, r): each object's name, size, splits now and splits out of the map.
        let mut groups: BTreeMap<(usize, usize), Vec<Member>> = BTreeMap::new();
        for m in self.objects.iter() {
            let out = m.splits.iter().filter(|s| !available.contains(s)).count();
            groups.entry((m.k, m.r)).or_default().push(Member {
                name: m.name.clone(),
                size: m.size,
                now: m.splits.len(),
                out,
            });
        }
        let mut changes = Vec::new();
        let mut targets = std::collections::HashMap::new();
        for ((k, r), members) in groups {
            let objects: Vec<Object> = members
                .iter()
                .map(|m| Object {
                    size: m.size,
                    popularity: self.object_reads.get(&m.name).copied().unwrap_or(0.0),
                })
                .collect();
            let delta = if k == 1 { 0 } else { 1 };
            let scheme = Scheme::EcCache { k, r, delta };
            // The units an object holds: its splits on available servers.
            let held: Vec<usize> = members.iter().map(|m| m.now - m.out).collect();
            let Ok(alloc) = reallocate(&objects, scheme, fraction, nodes.len(), &held, KEEP) else {
                continue;
            };
            for (Member { name, now, out, .. }, spent) in members.into_iter().zip(alloc.units) {
                // One more per split out of the map (see the module documentation).
                let units = (spent + out).min(MAX_SPLITS);
                if units != now {
                    // Only a target the last plan gave too.
                    if self.object_targets.get(&name) == Some(&units) {
                        changes.push((name.clone(), units));
                    }
                    targets.insert(name, units);
                }
            }
        }
        self.object_targets = targets;
        self.object_reads.retain(|_, n| {
            *n *= DECAY;
            *n >= 0.01
        });
        (changes, nodes)
    }
}

/// Re-spends the budget every `every` (see the module documentation).
pub(super) async fn budget_loop(
    shared: Arc<Shared>,
    peers: PeerClient,
    every: Duration,
    fraction: f64,
) {
    let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let stop = stopped(shared.shutdown.clone());
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => return,
            _ = interval.tick() => {}
        }
        let (changes, nodes) = shared.state().object_budget_plan(fraction);
        if nodes.is_empty() || changes.is_empty() {
            continue;
        }
        peers.set_epoch(shared.published.borrow().map.epoch);
        let total = changes.len();
        shared.state().object_budget_pending = total;
        // Each available node re-codes its share one object at a time, the nodes side by side:
        // a re-code reads the whole object from its splits, so the batch (every object with a
        // split on a server just taken out, say) ends in about 1/n of the time one node needs.
        let mut shares: Vec<Vec<(ObjectName, usize)>> = vec![Vec::new(); nodes.len()];
        for (i, change) in changes.into_iter().enumerate() {
            shares[i % nodes.len()].push(change);
        }
        let mut workers = tokio::task::JoinSet::new();
        for (node, share) in nodes.into_iter().zip(shares) {
            let (shared, peers) = (shared.clone(), peers.clone());
            workers.spawn(async move { recode_share(&shared, &peers, node, share).await });
        }
        let batch = async {
            let mut done = 0;
            while let Some(r) = workers.join_next().await {
                done += r.unwrap_or(0);
            }
            done
        };
        let done = tokio::select! {
            _ = &mut stop => return,
            done = batch => done,
        };
        shared.state().object_budget_pending = 0;
        eprintln!("ecdn coordinator: object budget: {done} of {total} objects re-coded");
    }
}

/// Sends `share`'s changes to `node` (its peer listener) one by one (`POST
/// /_peer/units/NAME?units=N`, signed like every peer request); each one done counts in the
/// status at once. The number done.
async fn recode_share(
    shared: &Shared,
    peers: &PeerClient,
    node: SocketAddr,
    share: Vec<(ObjectName, usize)>,
) -> usize {
    let mut done = 0;
    for (name, units) in share {
        let path = crate::wire::units_path(name.as_str(), units as u64);
        let sent = peers
            .send(node, Method::POST, &path, Bytes::new(), &[], UNITS_TIMEOUT)
            .await;
        let ok = match sent {
            Ok(r) if r.status() == StatusCode::OK => true,
            Ok(r) => {
                eprintln!("ecdn coordinator: {name} to {units} splits: {}", r.status());
                false
            }
            Err(e) => {
                eprintln!("ecdn coordinator: {name} to {units} splits: {e}");
                false
            }
        };
        done += usize::from(ok);
        let mut st = shared.state();
        st.object_budget_pending = st.object_budget_pending.saturating_sub(1);
        st.object_budget_changes += u64::from(ok);
    }
    done
}
