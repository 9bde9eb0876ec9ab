//! The parity budget re-spent from measured reads (EC-Cache §4.2 and §6.1: the coordinator
//! "gives extra parities to the most popular objects until the budget is spent"; selective
//! replication, extra replicas).
//!
//! Nodes count the reads of each EC-Cache object and send the counts with their heartbeats;
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
//! number of splits. Every such object is then sent, one by one, to an available node as
//! `POST /_objects/<name>?units=N`, which grows or shrinks it (`ecdn-node`'s
//! `object_budget.rs`). (Between plans the budget may be overspent by the margin's few units.)
//!
//! Only the embedded coordinator does this (its table holds the records); in etcd mode the
//! records are in etcd and the budget stays as written.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ecdn_objects::budget::{reallocate, Object, Scheme};
use ecdn_objects::meta::ObjectName;
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

/// An object of a budget group: name, size, splits now.
type Member = (ObjectName, u64, usize);

/// Time limit of one object's re-spend (it reads and codes the object).
const UNITS_TIMEOUT: Duration = Duration::from_secs(120);

impl State {
    /// The objects whose splits the budget changes, with their new count; the available
    /// nodes' client addresses. Decays the read counts.
    pub(super) fn object_budget_plan(
        &mut self,
        fraction: f64,
    ) -> (Vec<(ObjectName, usize)>, Vec<SocketAddr>) {
        let nodes: Vec<SocketAddr> = self
            .status(Instant::now())
            .nodes
            .iter()
            .filter(|n| n.available)
            .map(|n| n.client)
            .collect();
        // By code (k, r): each object's name, size and splits now.
        let mut groups: BTreeMap<(usize, usize), Vec<Member>> = BTreeMap::new();
        for m in self.objects.iter() {
            groups
                .entry((m.k, m.r))
                .or_default()
                .push((m.name.clone(), m.size, m.splits.len()));
        }
        let mut changes = Vec::new();
        let mut targets = std::collections::HashMap::new();
        for ((k, r), members) in groups {
            let objects: Vec<Object> = members
                .iter()
                .map(|(name, size, _)| Object {
                    size: *size,
                    popularity: self.object_reads.get(name).copied().unwrap_or(0.0),
                })
                .collect();
            let delta = if k == 1 { 0 } else { 1 };
            let scheme = Scheme::EcCache { k, r, delta };
            let held: Vec<usize> = members.iter().map(|m| m.2).collect();
            let Ok(alloc) = reallocate(&objects, scheme, fraction, nodes.len(), &held, KEEP) else {
                continue;
            };
            for ((name, _, now), units) in members.into_iter().zip(alloc.units) {
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
        let (mut done, total) = (0, changes.len());
        for (i, (name, units)) in changes.into_iter().enumerate() {
            let node = nodes[i % nodes.len()];
            let path = format!("/_objects/{name}?units={units}");
            let sent = tokio::select! {
                _ = &mut stop => return,
                r = peers.send(node, Method::POST, &path, Bytes::new(), &[], UNITS_TIMEOUT) => r,
            };
            match sent {
                Ok(r) if r.status() == StatusCode::OK => done += 1,
                Ok(r) => eprintln!("ecdn coordinator: {name} to {units} splits: {}", r.status()),
                Err(e) => eprintln!("ecdn coordinator: {name} to {units} splits: {e}"),
            }
        }
        shared.state().object_budget_changes += done as u64;
        eprintln!("ecdn coordinator: object budget: {done} of {total} objects re-coded");
    }
}
