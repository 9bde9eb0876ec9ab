//! Handoff: a piece whose server could not take it is written where the next map puts it.
//!
//! A node that dies stays in the map until the coordinator declares it out (its heartbeats
//! missed, or the load balancers' and peers' views: `ecdn_cluster::health`). The pieces a fill
//! or a repair meant for it in that time would be written nowhere, and the objects left
//! unprotected; the simulator, whose failures are declared at once, writes them to the
//! servers that take over the dead one's buckets. So the writer keeps the object (its stored
//! response: the body is shared, not copied) and waits for a newer map, up to
//! [`HANDOFF_WAIT`] silence deadlines: if the map then says the server is unavailable, the
//! pieces go to the servers it names for them now ([`write::place`], as a repair
//! writes missing pieces); if the server is still in the map (it answered late, or refused the
//! piece), nothing more is done. Objects held this way are bounded by [`HANDOFF_MAX_BYTES`] per
//! node; past it a piece is not handed off (counted: `ecdn_cluster_handoffs_dropped_total`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::write;
use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::stats::ClusterStats;
use crate::node::freshness::StoredResponse;
use crate::node::state::State;

/// How long a handoff waits for the map to declare the server out, in silence deadlines
/// (`missed_heartbeats × heartbeat_ms`, after which the coordinator declares a node that
/// stopped its heartbeats out).
pub(in crate::node) const HANDOFF_WAIT: u32 = 4;

/// More pieces than a placement has (K + P ≤ 256 chunks, or two replicas).
const PIECES_MAX: usize = 257;

/// The object bytes a node holds for handoffs at once.
pub(in crate::node) const HANDOFF_MAX_BYTES: u64 = 64 << 20;

/// [`write::place`], and the handoff of the pieces whose writes failed: every write of a
/// cached object's pieces goes through here.
pub(in crate::node) async fn place(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    e: &StoredResponse,
    lacking: Option<&[bool]>,
) {
    let failed = write::place(st, c, e, lacking, &[]).await;
    failed_writes(st, c, e, failed);
}

/// The pieces of `e` whose writes failed (`(piece index in the bucket's placement, server)`,
/// written under the map of `epoch`). Spawns the wait (module documentation) unless nothing
/// failed or the budget is spent.
pub(in crate::node) fn failed_writes(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    e: &StoredResponse,
    (epoch, failed): write::Failed,
) {
    if failed.is_empty() {
        return;
    }
    let bytes = e.body.len() as u64;
    let held = c.stats.handoff_bytes.fetch_add(bytes, Ordering::Relaxed);
    if held + bytes > HANDOFF_MAX_BYTES {
        c.stats.handoff_bytes.fetch_sub(bytes, Ordering::Relaxed);
        ClusterStats::add(&c.stats.handoffs_dropped, failed.len() as u64);
        return;
    }
    let (st, c, e) = (st.clone(), c.clone(), e.clone());
    tokio::spawn(async move {
        hand_off(&st, &c, &e, epoch, &failed).await;
        c.stats.handoff_bytes.fetch_sub(bytes, Ordering::Relaxed);
    });
}

/// Waits for a map newer than `epoch` that takes a `failed` server out, then writes its pieces
/// where that map puts them; gives up after [`HANDOFF_WAIT`] silence deadlines.
async fn hand_off(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    e: &StoredResponse,
    mut epoch: u64,
    failed: &[(usize, usize)],
) {
    let deadline = tokio::time::Instant::now() + wait(c);
    loop {
        let newer = tokio::time::timeout_at(deadline, c.map.wait_newer(epoch)).await;
        let Ok(newer) = newer else {
            return;
        };
        epoch = newer;
        let map = c.map.current();
        let out: Vec<usize> = failed
            .iter()
            .filter(|(_, server)| !map.is_available(*server))
            .map(|(index, _)| *index)
            .collect();
        if out.is_empty() {
            continue;
        }
        // Only these pieces (a placement has fewer than `PIECES_MAX`).
        let mut lacking = vec![false; PIECES_MAX];
        for i in out.iter().filter(|i| **i < PIECES_MAX) {
            lacking[*i] = true;
        }
        ClusterStats::add(&c.stats.handoffs, out.len() as u64);
        // Written once: what fails now is left to the next read's repair.
        write::place(st, c, e, Some(&lacking), &[]).await;
        return;
    }
}

/// [`HANDOFF_WAIT`] silence deadlines of `c`'s cluster file.
fn wait(c: &Cluster) -> Duration {
    let silence = c
        .cfg
        .heartbeat_ms
        .saturating_mul(u64::from(c.cfg.missed_heartbeats));
    Duration::from_millis(silence.saturating_mul(u64::from(HANDOFF_WAIT)))
}
