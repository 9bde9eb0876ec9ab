//! Resync (beyond C2DN; `c2dn`, `resync` in the cluster file, on by default): a read's write-back
//! that also rewrites, when they are near eviction, the pieces the object still has — the rule
//! of the simulator's `resync.rs` (`ecdn_sim::cluster`), where the reason is told.
//!
//! In short: in FIFO caches the pieces of an object leave together only while their servers
//! write at the same speed. A piece written back alone (after its twin or sibling chunks were
//! read) outlives the old ones, which then leave one by one, so the object is a fragment again
//! and its next reads are partial hits. When a read is about to write a piece its object lacks
//! on an available assigned server, it looks at how old their pieces are: the lookup's `has`
//! questions asked for the ages (`pieces/holders.rs`), so a read that asked knows them; one
//! that did not (its servers were presumed, or one was too slow to wait for) asks them now
//! (`ages.rs`, counted as `ages_asked`). If the oldest found has more than `resync` of its
//! server's FIFO written after it, the pieces found are written again too, each holder told
//! to drop its copy first (a `PUT` with `x-ecdn-renew`, `pieces/store.rs`), so the object
//! starts again in every FIFO at once.

use std::sync::Arc;

use ecdn_cluster::wire::PieceName;

use crate::node::cluster::c2dn::ages::{self, ask_ages};
use crate::node::cluster::c2dn::{handoff, write};
use crate::node::cluster::pieces::holders::Holder;
use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::stats::ClusterStats;
use crate::node::freshness::StoredResponse;
use crate::node::state::State;

/// A read's write-back of `e`: the pieces `lack` names (piece index in the bucket's placement
/// → whether its server lacks it), and with `resync` on, the pieces found, when they are near
/// eviction (with `reinsert` on and nothing lacking, the same past its age); pieces whose
/// writes fail are handed off (`handoff.rs`). `known`: what the read heard the servers hold
/// (with ages where they said).
pub(in crate::node) async fn place(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    e: &StoredResponse,
    lack: &[bool],
    known: &[Holder],
) {
    let coded = c.coded(e.body.len() as u64);
    let renew = renewals(c, &e.key, coded, lack, known).await;
    rewrite(st, c, e, lack, &renew).await;
}

/// A hit that lacks nothing (reinsertion, `reinsert` in the cluster file): which pieces of the
/// placement of `key` to write again (none when it is off or no piece is past its age). The
/// caller reads the object and [`rewrite`]s them.
pub(in crate::node) async fn reinsertions(
    c: &Arc<Cluster>,
    key: &str,
    coded: bool,
    lack: &[bool],
    known: &[Holder],
) -> Vec<bool> {
    if lack.iter().any(|&l| l) {
        return Vec::new();
    }
    renewals(c, key, coded, lack, known).await
}

/// Writes the pieces of `e` that `lack` names or `renew` renews; failed writes are handed off.
pub(in crate::node) async fn rewrite(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    e: &StoredResponse,
    lack: &[bool],
    renew: &[bool],
) {
    if !lack.iter().chain(renew).any(|&w| w) {
        return;
    }
    let write: Vec<bool> = (0..lack.len().max(renew.len()))
        .map(|i| lack.get(i).copied().unwrap_or(false) || renew.get(i).copied().unwrap_or(false))
        .collect();
    let failed = write::place(st, c, e, Some(&write), renew).await;
    handoff::failed_writes(st, c, e, failed);
}

/// Per piece of the placement of `key`, whether it is to be written again: all the pieces
/// found on their available servers if one available server lacks its piece (resync) or none
/// does (reinsertion), and the oldest found is past that rule's age of its FIFO; else none.
/// The ages are `known`'s (this node's read here), or asked when a server's are not known.
async fn renewals(
    c: &Arc<Cluster>,
    key: &str,
    coded: bool,
    lack: &[bool],
    known: &[Holder],
) -> Vec<bool> {
    // Every hit passes here: nothing to do, before the placement is looked at, when the rule
    // that could apply is off.
    let any_lack = lack.iter().any(|&l| l);
    if c.cfg.reinsert.is_none() && (!any_lack || c.cfg.resync_age().is_none()) {
        return Vec::new();
    }
    let map = c.map.current();
    let bucket = map.bucket_of(crate::node::cluster::pieces::names::object_id(key));
    let (mut placed, mut walk) = (Vec::new(), Vec::new());
    map.pieces(bucket, coded, &mut placed, &mut walk);
    let lacks = |i: usize| lack.get(i).copied().unwrap_or(false);
    let lacking = placed
        .iter()
        .enumerate()
        .any(|(i, p)| lacks(i) && map.is_available(p.server));
    let age = if lacking {
        c.cfg.resync_age()
    } else {
        c.cfg.reinsert
    };
    let Some(age) = age else {
        return Vec::new();
    };
    let counted = |i: usize, server: usize| !lacks(i) && map.is_available(server);
    // The ages the read heard, with this node's own; asked when a counted server's are not.
    let here = [ages::here(c, key)];
    let answered = |s: usize| {
        here.iter()
            .chain(known.iter().filter(|h| h.server != c.id))
            .find(|h| h.server == s && h.aged())
    };
    let asked;
    let held: Vec<&Holder> = if placed
        .iter()
        .enumerate()
        .all(|(i, p)| !counted(i, p.server) || answered(p.server).is_some())
    {
        placed.iter().filter_map(|p| answered(p.server)).collect()
    } else {
        ClusterStats::add(&c.stats.ages_asked, 1);
        asked = ask_ages(c, key, bucket).await;
        asked.iter().map(|(_, h)| h).collect()
    };
    let mut renew = vec![false; placed.len()];
    let mut oldest: Option<f64> = None;
    for (i, p) in placed.iter().enumerate() {
        if !counted(i, p.server) {
            continue;
        }
        let want = if coded {
            PieceName::Chunk(p.chunk as u16)
        } else {
            PieceName::Replica
        };
        let found = held
            .iter()
            .find(|h| h.server == p.server)
            .and_then(|h| h.age_of(want));
        if let Some(a) = found {
            renew[i] = true;
            oldest = Some(oldest.map_or(a, |o: f64| o.max(a)));
        }
    }
    match oldest {
        Some(o) if o > age => {
            let count = if lacking {
                &c.stats.resyncs
            } else {
                &c.stats.reinserts
            };
            ClusterStats::add(count, 1);
            renew
        }
        _ => Vec::new(),
    }
}
