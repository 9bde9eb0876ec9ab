//! What a node remembers of purges, so that bytes fetched before a purge cannot undo it — in
//! an order that does not come from the nodes' clocks.
//!
//! **The sequence.** A `PURGE` takes a number from the cluster's one increasing sequence
//! (`ecdn_cluster::objects::ObjectDirectory::sequence`: the embedded coordinator's versions, or
//! an etcd revision) before anything is dropped, and every node it reaches learns it ([`PurgeLog::known`]:
//! the highest number this node has seen). A fill records the highest number its node knew
//! *before it asked the origin* (`StoredResponse::filled`, carried in every piece's metadata:
//! `meta.rs`). A number is known only after it was handed out, and it was handed out after the
//! purge was asked for, so bytes filled at `N` or above were fetched after every purge numbered
//! `N` or below was asked for; bytes filled below `N` may be older than purge `N`. So, per
//! object, a node keeps the number of the last purge it carried out and
//! * refuses (`409`) a piece write of the object filled below it — a write held back on the
//!   path, a late fill, a repair from a node the purge did not reach — and so does its own
//!   store for the pieces it writes itself;
//! * when a purge's `DELETE` arrives late, after a fresh fill of the object, drops only the
//!   copies filled below its number: the fresh fill stays.
//!
//! Neither compares the senders' clocks. A node that missed a purge (down, or cut off when it
//! was sent) fills below its number until it learns a later one: its writes of that object are
//! refused meanwhile — a miss, never a stale byte. A purge that could get no number (the
//! coordinator or etcd unreachable) is [`UNORDERED`]: every copy is dropped and every write of
//! the object refused while it is remembered.
//!
//! **Memory.** A purge is remembered for [`MEMORY_MS`] of this node's own clock (twice the
//! signature window: a write signed before the purge and held back longer no longer passes the
//! staleness check, whatever the skew between the writer and this node within the window),
//! and at most [`PURGE_MEMORY`] objects at once; when that is exceeded the oldest purge is
//! forgotten early and becomes a floor: a write filled below its number is refused, whatever
//! its object, until that purge would have been forgotten anyway (memory stays bounded and
//! nothing a purge removed comes back).
//!
//! A purge and the writes to its object are ordered: a purge waits for the writes in progress
//! to be stored, then records its number and drops the object's older copies, and no write is
//! checked meanwhile. So a write that passed the check before the purge is judged by it, and
//! one checked after it sees its number.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use ecdn_cluster::auth::MAX_SKEW_MS;
use tokio::sync::RwLock;

/// The most objects whose purge a node remembers: some 64 bytes each, a few MiB in all.
pub(in crate::node) const PURGE_MEMORY: usize = 1 << 16;

/// How long a purge is remembered, ms of this node's clock.
pub(in crate::node) const MEMORY_MS: u64 = 2 * MAX_SKEW_MS;

/// The number of a purge that got none from the sequence: above every fill.
pub(in crate::node) const UNORDERED: u64 = u64::MAX;

/// Why a write was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::node) struct PurgedAfter {
    /// The purge number its bytes were filled at.
    pub(in crate::node) filled: u64,
    /// The purge (or the floor) it is older than.
    pub(in crate::node) purged: u64,
}

impl std::fmt::Display for PurgedAfter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let purge = if self.purged == UNORDERED {
            "an unnumbered purge".to_string()
        } else {
            format!("purge {}", self.purged)
        };
        write!(
            f,
            "bytes filled at purge {}, before {purge} of their object: refused, so that the \
             purge stays in effect",
            self.filled
        )
    }
}

/// One remembered purge.
#[derive(Clone, Copy, Debug)]
struct Purge {
    number: u64,
    /// When this node recorded it, ms of its clock.
    at: u64,
}

#[derive(Debug)]
struct Memory {
    /// Per object id, its last purge.
    by_object: HashMap<u64, Purge>,
    /// `(recorded at, object)` in the order recorded; an entry whose object has a later
    /// purge since is skipped when it comes out.
    order: VecDeque<(u64, u64)>,
    capacity: usize,
    /// Writes filled below `floor.0` are refused, whatever their object, until `floor.1`.
    floor: (u64, u64),
}

impl Memory {
    fn new(capacity: usize) -> Memory {
        Memory {
            by_object: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
            floor: (0, 0),
        }
    }

    /// Takes the oldest entry out; with `early`, what it forgets raises the floor.
    fn forget_oldest(&mut self, early: bool) {
        while let Some((at, object)) = self.order.pop_front() {
            let Some(p) = self.by_object.get(&object).copied() else {
                continue;
            };
            if p.at != at {
                continue; // a later purge of the object is further on
            }
            self.by_object.remove(&object);
            if early && p.number != UNORDERED {
                self.floor = (self.floor.0.max(p.number), p.at + MEMORY_MS);
            }
            return;
        }
    }

    /// Forgets what is older than [`MEMORY_MS`] at `now`.
    fn expire(&mut self, now: u64) {
        while let Some(&(at, _)) = self.order.front() {
            if at.saturating_add(MEMORY_MS) > now {
                break;
            }
            self.forget_oldest(false);
        }
        if now >= self.floor.1 {
            self.floor = (0, 0);
        }
    }

    fn record(&mut self, object: u64, number: u64, now: u64) {
        self.expire(now);
        if self
            .by_object
            .get(&object)
            .is_some_and(|p| p.number > number)
        {
            return;
        }
        // The same number again (a retried `DELETE`) is remembered from now.
        self.by_object.insert(object, Purge { number, at: now });
        self.order.push_back((now, object));
        while self.by_object.len() > self.capacity {
            self.forget_oldest(true);
        }
    }

    fn check(&mut self, object: u64, filled: u64, now: u64) -> Result<(), PurgedAfter> {
        self.expire(now);
        if filled < self.floor.0 {
            return Err(PurgedAfter {
                filled,
                purged: self.floor.0,
            });
        }
        match self.by_object.get(&object) {
            Some(p) if filled < p.number => Err(PurgedAfter {
                filled,
                purged: p.number,
            }),
            _ => Ok(()),
        }
    }
}

/// A node's memory of purges (see the module documentation).
pub(in crate::node) struct PurgeLog {
    memory: Mutex<Memory>,
    /// The highest purge number this node has seen.
    known: AtomicU64,
    /// Writes hold it shared from their check to their end; a purge holds it alone.
    order: RwLock<()>,
}

impl PurgeLog {
    pub(in crate::node) fn new(capacity: usize) -> PurgeLog {
        PurgeLog {
            memory: Mutex::new(Memory::new(capacity)),
            known: AtomicU64::new(0),
            order: RwLock::new(()),
        }
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The highest purge number this node has seen: what a fill beginning now records.
    pub(in crate::node) fn known(&self) -> u64 {
        self.known.load(Ordering::Acquire)
    }

    /// Runs `drop_copies` (purge `number` of `object`: it drops the copies filled below
    /// `number`) after the writes in progress ended, with the purge recorded first and no
    /// write checked until it ends. `now`: this node's clock, ms.
    pub(in crate::node) async fn purge<T>(
        &self,
        object: u64,
        number: u64,
        now: u64,
        drop_copies: impl Future<Output = T>,
    ) -> T {
        if number != UNORDERED {
            self.known.fetch_max(number, Ordering::AcqRel);
        }
        let _alone = self.order.write().await;
        self.memory().record(object, number, now);
        drop_copies.await
    }

    /// Runs `store` (a write of bytes of `object` filled at purge number `filled`) unless a
    /// purge of the object numbered above `filled` is remembered; no purge runs until it ends.
    pub(in crate::node) async fn write<T>(
        &self,
        object: u64,
        filled: u64,
        now: u64,
        store: impl Future<Output = T>,
    ) -> Result<T, PurgedAfter> {
        let _shared = self.order.read().await;
        self.memory().check(object, filled, now)?;
        Ok(store.await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_000_000;

    #[tokio::test]
    async fn a_write_filled_before_a_purge_is_refused_and_one_filled_after_stored() {
        let log = PurgeLog::new(16);
        assert_eq!(log.known(), 0);
        assert_eq!(log.write(7, 4, NOW, async { 1 }).await, Ok(1));
        log.purge(7, 5, NOW, async {}).await;
        assert_eq!(log.known(), 5);
        assert_eq!(
            log.write(7, 4, NOW, async { 1 }).await,
            Err(PurgedAfter {
                filled: 4,
                purged: 5
            })
        );
        // Filled at the purge's number: fetched after it was handed out.
        assert_eq!(log.write(7, 5, NOW, async { 1 }).await, Ok(1));
        // Other objects are not affected; an older purge does not move the number back.
        assert_eq!(log.write(8, 0, NOW, async { 1 }).await, Ok(1));
        log.purge(7, 3, NOW, async {}).await;
        assert_eq!(log.known(), 5);
        assert!(log.write(7, 4, NOW, async { 1 }).await.is_err());
        let e = log
            .write(7, 4, NOW, async {})
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("purge 5") && e.contains("filled at purge 4"),
            "{e}"
        );
        // Remembered for MEMORY_MS of this node's clock, then forgotten.
        let later = NOW + MEMORY_MS - 1;
        assert!(log.write(7, 4, later, async {}).await.is_err());
        log.write(7, 4, NOW + MEMORY_MS, async {}).await.unwrap();
        assert!(log.memory().by_object.is_empty());
    }

    #[tokio::test]
    async fn an_unnumbered_purge_refuses_every_write_of_its_object_while_remembered() {
        let log = PurgeLog::new(16);
        log.purge(7, UNORDERED, NOW, async {}).await;
        assert_eq!(log.known(), 0, "no number is learnt from it");
        let e = log.write(7, 1 << 60, NOW, async {}).await.unwrap_err();
        assert!(e.to_string().contains("an unnumbered purge"), "{e}");
        log.write(8, 0, NOW, async {}).await.unwrap();
        log.write(7, 0, NOW + MEMORY_MS, async {}).await.unwrap();
    }

    #[tokio::test]
    async fn a_full_memory_refuses_every_write_filled_below_what_it_forgot() {
        let log = PurgeLog::new(2);
        for (object, number) in [(1, 10), (2, 20), (3, 30)] {
            log.purge(object, number, NOW, async {}).await;
        }
        // Object 1's purge was forgotten early: writes filled below it are refused for every
        // object, until it would have been forgotten anyway.
        assert_eq!(log.memory().by_object.len(), 2);
        for object in [1, 4] {
            assert!(log.write(object, 9, NOW, async {}).await.is_err());
        }
        log.write(1, 10, NOW, async {}).await.unwrap();
        assert!(log.write(2, 19, NOW, async {}).await.is_err());
        log.write(4, 9, NOW + MEMORY_MS, async {}).await.unwrap();
    }

    #[tokio::test]
    async fn a_purge_waits_for_the_writes_in_progress_and_holds_back_new_ones() {
        use std::sync::Arc;
        let log = Arc::new(PurgeLog::new(16));
        let (stored_tx, stored_rx) = tokio::sync::oneshot::channel::<()>();
        let events = Arc::new(Mutex::new(Vec::new()));
        // A write in progress: checked, its store not finished.
        let writing = {
            let (log, events) = (log.clone(), events.clone());
            tokio::spawn(async move {
                log.write(7, 4, NOW, async {
                    let _ = stored_rx.await;
                    events.lock().unwrap().push("stored");
                })
                .await
            })
        };
        tokio::task::yield_now().await;
        while log.order.try_write().is_ok() {
            tokio::task::yield_now().await;
        }
        let purging = {
            let (log, events) = (log.clone(), events.clone());
            tokio::spawn(async move {
                log.purge(7, 5, NOW, async {
                    events.lock().unwrap().push("purged");
                })
                .await
            })
        };
        tokio::task::yield_now().await;
        assert!(events.lock().unwrap().is_empty(), "the purge did not wait");
        stored_tx.send(()).unwrap();
        writing.await.unwrap().unwrap();
        purging.await.unwrap();
        assert_eq!(*events.lock().unwrap(), ["stored", "purged"]);
        // The same write again, after the purge: refused.
        assert!(log.write(7, 4, NOW, async {}).await.is_err());
    }
}
