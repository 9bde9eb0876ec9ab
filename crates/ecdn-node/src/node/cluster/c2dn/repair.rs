//! Background repair (beyond C2DN; the same rules as the simulator's
//! `ecdn_sim::cluster::repair`): each node rebuilds, in rounds, the pieces the objects it
//! serves have lost — a chunk evicted on one server while the others stay, a replica whose
//! twin is gone, the pieces a failed server took — without waiting for the next request.
//!
//! * **What it looks at.** The serving node counts the requests it serves per object
//!   ([`Repair::requested`](crate::node::cluster::pieces::demand::Repair::requested)). A round takes the objects of the buckets it serves now that were
//!   requested at least `repair_min_requests` times, most requested first (ties: the lower
//!   id), at most `repair_scan` of them.
//! * **What it rebuilds.** For each, it asks the bucket's servers and the slots' former
//!   servers which pieces they hold and how old they are (`has?ages`). An object that can be
//!   read (K distinct chunks, or a replica) and whose assigned available servers lack pieces
//!   is read whole — decoded from any K — and the lacking pieces are written, as after a hit.
//!   Skipped: an object whose oldest piece already has more than `repair_max_age` of its
//!   server's FIFO written after it (it is near eviction; a piece written for it now would
//!   outlive the rest).
//! * **Budget.** A round may write `repair_rate` × `repair_every_s` bytes (or the budget it is
//!   asked with), plus what the round before left, at most two rounds' worth. The first object
//!   whose pieces do not fit ends the round (it goes first next round), unless they cost more
//!   than two rounds: such an object is never repaired.
//! * **Cost.** Its writes are ordinary piece writes (they count as the node's writes, may evict
//!   other pieces). What it did is in `/_ecdn/stats` (`cluster.repair`) and the
//!   `ecdn_cluster_repair_*` series.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ecdn_cluster::piece::PieceMeta;
use ecdn_cluster::wire::PieceName;
use ecdn_codec::ObjectLayout;

use crate::node::cluster::c2dn::ages::ask_ages;
use crate::node::cluster::c2dn::handoff;
use crate::node::cluster::c2dn::replica::fetch_replica;
use crate::node::cluster::pieces::coded::{self, CodedObject};
use crate::node::cluster::pieces::holders::{lacking_in, sources_of, Holder};
use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::store::PieceStore;
use crate::node::disk::stored_response;
use crate::node::lock::lock;
use crate::node::state::State;

/// What a round did.
#[derive(Clone, Copy, Debug, Default)]
pub(in crate::node) struct Round {
    pub(in crate::node) objects: u64,
    pub(in crate::node) pieces: u64,
    pub(in crate::node) written: u64,
    pub(in crate::node) budget_left: u64,
}

impl Round {
    pub(in crate::node) fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "objects": self.objects,
            "pieces": self.pieces,
            "bytes_written": self.written,
            "budget_left": self.budget_left,
        })
    }
}

/// One repair round with `budget` new bytes (see the module documentation).
pub(in crate::node) async fn round(st: &Arc<State>, c: &Arc<Cluster>, budget: u64) -> Round {
    let repair = &c.repair;
    let _one = repair.running.lock().await;
    let mut left = {
        let carry = *lock(&repair.carry);
        carry.saturating_add(budget).min(budget.saturating_mul(2))
    };
    let mut done = Round::default();
    if st.disk.is_some() {
        for (id, key) in repair.candidates(&c.cfg, &c.map, c.id) {
            let budget = Budget {
                left,
                most: budget.saturating_mul(2),
            };
            match repair_object(st, c, id, &key, budget).await {
                Outcome::Wrote {
                    pieces,
                    bytes,
                    read,
                } => {
                    left -= bytes.min(left);
                    done.objects += 1;
                    done.pieces += pieces;
                    done.written += bytes;
                    let s = &repair.stats;
                    s.objects.fetch_add(1, Ordering::Relaxed);
                    s.pieces.fetch_add(pieces, Ordering::Relaxed);
                    s.written.fetch_add(bytes, Ordering::Relaxed);
                    s.read.fetch_add(read, Ordering::Relaxed);
                }
                Outcome::Skipped => {}
                Outcome::OverBudget => break,
            }
        }
    }
    if done.objects > 0 {
        repair.stats.rounds.fetch_add(1, Ordering::Relaxed);
    }
    *lock(&repair.carry) = left;
    done.budget_left = left;
    done
}

/// Runs a round every `repair_every_s` with `repair_rate` × that budget, while the node runs
/// (nothing when either is 0); it ends when the node stops or drains.
pub(in crate::node) fn spawn_rounds(st: Arc<State>, c: Arc<Cluster>) {
    let (rate, every) = (c.cfg.repair_rate, c.cfg.repair_every_s);
    if rate == 0 || every <= 0.0 {
        return;
    }
    let budget = (rate as f64 * every) as u64;
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs_f64(every));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            if c.left() || c.leaving() {
                return;
            }
            round(&st, &c, budget).await;
        }
    });
}

enum Outcome {
    Wrote { pieces: u64, bytes: u64, read: u64 },
    Skipped,
    OverBudget,
}

/// What a round may still write, and the most any round may (two rounds' new budget).
#[derive(Clone, Copy)]
struct Budget {
    left: u64,
    most: u64,
}

impl Budget {
    /// What a repair costing `cost` bytes does: `None`, it goes ahead; it waits for the next
    /// round (which ends this one); or, costing more than any round can have, it is skipped
    /// for good.
    fn refuses(self, cost: u64) -> Option<Outcome> {
        if cost <= self.left {
            None
        } else if cost > self.most {
            Some(Outcome::Skipped)
        } else {
            Some(Outcome::OverBudget)
        }
    }
}

/// Rebuilds what object `id` (cached under `key`) lacks, if it may and `budget` covers it.
async fn repair_object(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    id: u64,
    key: &str,
    budget: Budget,
) -> Outcome {
    let map = c.map.current();
    let bucket = map.bucket_of(crate::node::cluster::pieces::names::object_id(key));
    let (metas, held): (Vec<Option<PieceMeta>>, Vec<Holder>) =
        ask_ages(c, key, bucket).await.into_iter().unzip();
    // A peer's metadata names the coding (a chunk's first); this node's store is read only
    // when no peer holds a piece.
    let peers = || metas.iter().flatten();
    let meta = match peers()
        .find(|m| m.coding.is_some())
        .or_else(|| peers().next())
    {
        Some(m) => m.clone(),
        None => match local_meta(st, c, id, &held[0].held).await {
            Some(m) => m,
            None => return Outcome::Skipped,
        },
    };
    let coded = meta.coding.is_some();
    // Readable: K distinct chunks, or a replica.
    let (k, p) = (c.cfg.k, c.cfg.p);
    let readable = if coded {
        (0..k + p)
            .filter(|&ch| {
                held.iter()
                    .any(|h| h.held.contains(&PieceName::Chunk(ch as u16)))
            })
            .count()
            >= k
    } else {
        held.iter().any(|h| h.held.contains(&PieceName::Replica))
    };
    if !readable {
        return Outcome::Skipped;
    }
    // The oldest piece: an object near the end of its life loses its pieces anyway.
    let oldest = held
        .iter()
        .flat_map(|h| h.age.iter().copied())
        .fold(0.0, f64::max);
    if oldest > c.cfg.repair_max_age {
        return Outcome::Skipped;
    }
    // What the assigned servers lack; only the available ones are written (`handoff::place`),
    // and only they count.
    let placed = lacking_in(c, bucket, coded, |server, want| {
        held.iter()
            .any(|h| h.server == server && h.held.contains(&want))
    });
    let lack: Vec<bool> = placed.iter().map(|&(_, l)| l).collect();
    let lacking = placed
        .iter()
        .filter(|&&(server, l)| l && map.is_available(server))
        .count() as u64;
    if lacking == 0 {
        return Outcome::Skipped;
    }
    let (body, piece, read) = match &meta.coding {
        Some(coding) => {
            let piece = coding.chunk_size();
            if let Some(over) = budget.refuses(piece.saturating_mul(lacking)) {
                return over;
            }
            let Some(body) = whole_object(st, c, key, id, bucket, &held, coding.clone()).await
            else {
                return Outcome::Skipped;
            };
            (body, piece, piece * k as u64)
        }
        None => {
            let Some(from) = held
                .iter()
                .find(|h| h.held.contains(&PieceName::Replica))
                .map(|h| h.server)
            else {
                return Outcome::Skipped;
            };
            let Some(body) = read_replica(st, c, from, key, id).await else {
                return Outcome::Skipped;
            };
            let size = body.len() as u64;
            if let Some(over) = budget.refuses(size.saturating_mul(lacking)) {
                return over;
            }
            (body, size, size)
        }
    };
    let Some(e) = stored_response(key.to_string(), &meta.http, body) else {
        return Outcome::Skipped;
    };
    handoff::place(st, c, &e, Some(&lack)).await;
    Outcome::Wrote {
        pieces: lacking,
        bytes: piece * lacking,
        read,
    }
}

/// A replica of `key` from `server` (this node's store, or a peer's), its payload.
async fn read_replica(st: &State, c: &Cluster, server: usize, key: &str, id: u64) -> Option<Bytes> {
    if server == c.id {
        let disk = st.disk.as_ref()?;
        let piece = PieceStore::piece_id(id, PieceName::Replica);
        return c.pieces.read(disk, piece, None).await.map(|(_, p)| p);
    }
    fetch_replica(c, server, key).await.map(|(_, p)| p)
}

/// The metadata of one of `pieces` of object `id` in this node's store (a chunk's if any).
async fn local_meta(st: &State, c: &Cluster, id: u64, pieces: &[PieceName]) -> Option<PieceMeta> {
    let first = pieces
        .iter()
        .find(|p| matches!(p, PieceName::Chunk(_)))
        .or(pieces.first())?;
    let (m, _) = c
        .pieces
        .read(
            st.disk.as_ref()?,
            PieceStore::piece_id(id, *first),
            Some(0..0),
        )
        .await?;
    PieceMeta::decode(&m).ok()
}

/// The coded object `key` (id `id`, of `bucket`) read whole from what `held` says each server
/// holds (this node first), decoded where needed: the background repair's read.
async fn whole_object(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    key: &str,
    id: u64,
    bucket: usize,
    held: &[Holder],
    coding: ecdn_cluster::piece::Coding,
) -> Option<Bytes> {
    let (k, p) = (c.cfg.k, c.cfg.p);
    if usize::from(coding.k) != k || usize::from(coding.p) != p {
        return None;
    }
    let layout = ObjectLayout::new(coding.size, k, p, u64::from(coding.sub_chunk)).ok()?;
    let obj = CodedObject {
        key: key.to_string(),
        object: id,
        layout,
        coding,
        sources: sources_of(c, bucket, held),
        supplied: Vec::new(),
        hoc: None,
        late: None,
        heard: Default::default(),
    };
    let decoded = Arc::new(AtomicBool::new(false));
    coded::read_all(st, c, Arc::new(obj), decoded).await
}
