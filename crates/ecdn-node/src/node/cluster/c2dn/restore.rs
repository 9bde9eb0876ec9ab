//! What a hit restores after it has read its object, so that every available target holds
//! its piece again before the answer's last byte (as the simulator's hit writes before the
//! next request): a replica read here checks the other targets ([`replica_targets`]); a coded
//! read from the presumed holders checks them beside the read and restores what they lack
//! from the object read whole ([`chunk_targets`]); a coded hit that lacks nothing rewrites its
//! pieces near eviction when reinsertion is on ([`reinsert`]).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use ecdn_cluster::wire::PieceName;
use tokio::sync::oneshot;

use crate::node::cluster::c2dn::placed::{ask_placed, ask_placed_beside, count_protection};
use crate::node::cluster::c2dn::resync;
use crate::node::cluster::pieces::coded::{self, CodedObject};
use crate::node::cluster::pieces::holders::{lacking, Holder};
use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::stats::ClusterStats;
use crate::node::freshness::StoredResponse;
use crate::node::key::CacheKey;
use crate::node::state::State;

/// Writes the replicas of `e` that the other replica targets lack (asking them first), and
/// counts the read's protection from their answers.
pub(in crate::node) async fn replica_targets(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    key: &CacheKey,
    e: &StoredResponse,
    once: &AtomicBool,
) {
    let here = Holder::presumed(c.id, vec![PieceName::Replica]);
    let holders = ask_placed(c, key, false, &here).await;
    count_protection(c, &holders, false, once);
    let lack = lacking(c, &key.key, false, &holders);
    if lack.iter().any(|&l| l) {
        ClusterStats::add(&c.stats.repairs, 1);
    }
    resync::place(st, c, e, &lack, &holders).await;
}

/// The chunk targets of a coded read from the presumed holders: asked beside the read which
/// chunks they hold (`read_over`: the read is over, see [`ask_placed_beside`]), the read's
/// protection counted from their answers, and what they lack restored from the object read
/// whole; a hit that lacks nothing is reinserted if it is due ([`reinsert`]).
#[allow(clippy::too_many_arguments)]
pub(in crate::node) async fn chunk_targets(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    key: &CacheKey,
    obj: Arc<CodedObject>,
    e: StoredResponse,
    here: &Holder,
    once: &AtomicBool,
    read_over: oneshot::Receiver<()>,
) {
    let placed = ask_placed_beside(c, key, &obj, here, read_over).await;
    count_protection(c, &placed, true, once);
    let lack = lacking(c, &key.key, true, &placed);
    if !lack.iter().any(|&l| l) {
        reinsert(st, c, &obj, &e, &placed).await;
        return;
    }
    let whole = Arc::new(AtomicBool::new(false));
    if let Some(body) = coded::read_all(st, c, obj, whole).await {
        ClusterStats::add(&c.stats.repairs, 1);
        resync::place(st, c, &StoredResponse { body, ..e }, &lack, &placed).await;
    }
}

/// A coded hit that lacks nothing (`known`: what its servers hold): with `reinsert`, its
/// pieces near the FIFO's end are written again (`resync.rs`), from the object read whole.
pub(in crate::node) async fn reinsert(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    obj: &Arc<CodedObject>,
    e: &StoredResponse,
    known: &[Holder],
) {
    let lack = &lacking(c, &obj.key, true, known);
    let renew = resync::reinsertions(c, &obj.key, true, lack, known).await;
    if renew.is_empty() {
        return;
    }
    let whole = Arc::new(AtomicBool::new(false));
    if let Some(body) = coded::read_all(st, c, obj.clone(), whole).await {
        let e = StoredResponse { body, ..e.clone() };
        resync::rewrite(st, c, &e, lack, &renew).await;
    }
}
