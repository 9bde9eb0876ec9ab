//! What a node remembers of purges, so that a write signed before a purge cannot undo it.
//!
//! A signed piece `PUT` is valid for the signature window ([`MAX_SKEW_MS`](ecdn_cluster::auth::MAX_SKEW_MS) either way of the
//! receiver's clock). Its nonce keeps it from being taken twice ([`ecdn_cluster::replay`]), but
//! a write signed before a purge and delivered after it (held back by whoever is on the path,
//! or just late) would store the purged object's piece again. So a node remembers, per object,
//! the time of the last purge it carried out — the signed time of a peer's `DELETE`, or its own
//! clock for a `PURGE` it received itself — and refuses a write of that object signed at or
//! before it (`409`). Ties go to the purge. Times come from the senders' clocks, as the
//! signature window already assumes they agree; a skew between the purging node and a writer
//! moves the boundary by that skew.
//!
//! A purge is remembered until its time leaves the window: by then no write signed before it
//! passes the staleness check. At most [`PURGE_MEMORY`] objects are remembered; when that is
//! exceeded the oldest purge is forgotten, and every write signed at or before its time is
//! refused, whatever its object (a floor, as for the nonces: memory stays bounded and nothing
//! a purge removed comes back; fresh writes are not affected).
//!
//! A purge and the writes to its object are ordered: a purge waits for the signed writes in
//! progress to be stored, then records its time and drops the object's pieces, and no signed
//! write is checked meanwhile. So a write that passed the check before the purge is dropped by
//! it, and one checked after it sees its time.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;

use ecdn_cluster::replay::WindowMemory;
use tokio::sync::RwLock;

/// The most objects whose purge a node remembers: some 64 bytes each, a few MiB in all.
pub(in crate::node) const PURGE_MEMORY: usize = 1 << 16;

/// Why a signed write was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::node) struct PurgedAfter {
    /// When the write was signed, UNIX ms.
    pub(in crate::node) signed: u64,
    /// The purge (or the floor) it is older than, UNIX ms.
    pub(in crate::node) purged: u64,
}

impl std::fmt::Display for PurgedAfter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "write signed at {} ms, not after a purge of its object at {} ms: refused, so \
             that the purge stays in effect",
            self.signed, self.purged
        )
    }
}

#[derive(Debug)]
struct Memory {
    /// Per object id, the time of its last purge.
    by_object: HashMap<u64, u64>,
    /// The same, by time, for the window and the floor: writes signed below the floor are
    /// refused, whatever their object.
    window: WindowMemory<u64>,
}

impl Memory {
    fn new(capacity: usize) -> Memory {
        Memory {
            by_object: HashMap::new(),
            window: WindowMemory::new(capacity, 0),
        }
    }

    /// Forgets what left the window at `now`: no write that old passes the staleness check.
    fn expire(&mut self, now: u64) {
        let by_object = &mut self.by_object;
        self.window.expire(now, |object| {
            by_object.remove(&object);
        });
    }

    fn record(&mut self, object: u64, at: u64, now: u64) {
        self.expire(now);
        let previous = self.by_object.get(&object).copied();
        if previous.is_some_and(|p| p >= at) {
            return;
        }
        if let Some(p) = previous {
            self.window.remove(p, object);
        }
        self.by_object.insert(object, at);
        let by_object = &mut self.by_object;
        self.window.insert(at, object, |o| {
            by_object.remove(&o);
        });
    }

    fn check(&mut self, object: u64, signed: u64, now: u64) -> Result<(), PurgedAfter> {
        self.expire(now);
        if self.window.below_floor(signed) {
            return Err(PurgedAfter {
                signed,
                purged: self.window.floor() - 1,
            });
        }
        match self.by_object.get(&object) {
            Some(&purged) if signed <= purged => Err(PurgedAfter { signed, purged }),
            _ => Ok(()),
        }
    }
}

/// A node's memory of purges (see the module documentation).
pub(in crate::node) struct PurgeLog {
    memory: Mutex<Memory>,
    /// Signed writes hold it shared from their check to their end; a purge holds it alone.
    order: RwLock<()>,
}

impl PurgeLog {
    pub(in crate::node) fn new(capacity: usize) -> PurgeLog {
        PurgeLog {
            memory: Mutex::new(Memory::new(capacity)),
            order: RwLock::new(()),
        }
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `drop_copies` (the purge of `object` at `at`, UNIX ms) after the signed writes in
    /// progress ended, with its time recorded first and no signed write checked until it ends.
    pub(in crate::node) async fn purge<T>(
        &self,
        object: u64,
        at: u64,
        now: u64,
        drop_copies: impl Future<Output = T>,
    ) -> T {
        let _alone = self.order.write().await;
        self.memory().record(object, at, now);
        drop_copies.await
    }

    /// Runs `store` (a write of `object` signed at `signed`, UNIX ms) unless a purge of the
    /// object at or after that time is remembered; no purge runs until it ends.
    pub(in crate::node) async fn write<T>(
        &self,
        object: u64,
        signed: u64,
        now: u64,
        store: impl Future<Output = T>,
    ) -> Result<T, PurgedAfter> {
        let _shared = self.order.read().await;
        self.memory().check(object, signed, now)?;
        Ok(store.await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ecdn_cluster::auth::MAX_SKEW_MS;

    const NOW: u64 = 1_000_000;

    #[tokio::test]
    async fn a_write_signed_before_a_purge_is_refused_and_a_later_one_stored() {
        let log = PurgeLog::new(16);
        assert_eq!(log.write(7, NOW - 10, NOW, async { 1 }).await, Ok(1));
        log.purge(7, NOW, NOW, async {}).await;
        for signed in [NOW - 10, NOW] {
            assert_eq!(
                log.write(7, signed, NOW, async { 1 }).await,
                Err(PurgedAfter {
                    signed,
                    purged: NOW
                })
            );
        }
        assert_eq!(log.write(7, NOW + 1, NOW, async { 1 }).await, Ok(1));
        // Other objects are not affected; an older purge does not move the time back.
        assert_eq!(log.write(8, NOW - 10, NOW, async { 1 }).await, Ok(1));
        log.purge(7, NOW - 500, NOW, async {}).await;
        assert!(log.write(7, NOW - 1, NOW, async { 1 }).await.is_err());
        let e = log
            .write(7, NOW, NOW, async {})
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("purge") && e.contains(&NOW.to_string()), "{e}");
        // Once the purge left the window, nothing signed before it is fresh: forgotten.
        let later = NOW + MAX_SKEW_MS + 1;
        log.write(8, later, later, async {}).await.unwrap();
        assert!(log.memory().by_object.is_empty());
    }

    #[tokio::test]
    async fn a_full_memory_refuses_every_write_as_old_as_what_it_forgot() {
        let log = PurgeLog::new(2);
        for (object, at) in [(1, NOW - 30), (2, NOW - 20), (3, NOW - 10)] {
            log.purge(object, at, NOW, async {}).await;
        }
        // Object 1's purge was forgotten: writes as old as it are refused for every object.
        assert_eq!(log.memory().window.len(), 2);
        for object in [1, 4] {
            assert!(log.write(object, NOW - 30, NOW, async {}).await.is_err());
        }
        log.write(1, NOW - 29, NOW, async {}).await.unwrap();
        assert!(log.write(2, NOW - 29, NOW, async {}).await.is_err());
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
                log.write(7, NOW - 5, NOW, async {
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
                log.purge(7, NOW, NOW, async {
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
        assert!(log.write(7, NOW - 5, NOW, async {}).await.is_err());
    }
}
