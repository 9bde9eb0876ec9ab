//! The disk tier: the node's side of [`ecdn_store::Store`].
//!
//! The store is synchronous: every call runs in `tokio::task::spawn_blocking` behind a
//! `std::sync::RwLock`, so disk I/O never blocks a runtime worker; reads run concurrently under
//! the read lock, writes and removals take the write lock. A disk hit's body is mapped on the
//! blocking pool (pages populated there) and verified on the worker as it is sent
//! ([`Verifying`], built by [`Disk::verifying`]), so the checksum pass and the socket's copy read the same cached bytes; see
//! [`ecdn_store::MappedPayload`] for why a mapping stays correct after the ring overwrites its
//! bytes. Entries carry a metadata block ([`meta`]); one that does not parse is a miss, and a
//! corrupt entry is dropped, never served.
//!
//! Every store error is logged on stderr and counted (`ecdn_disk_errors_total`); a write that
//! does not fit the ring (`TooLarge`) is not an error, the object just stays uncached.
//!
//! The store's directory (its index, saved beside the ring so that a start reads it instead of
//! the ring: `ecdn_store::directory`) is saved every `disk_directory_every` when the store
//! changed ([`Disk::save_directory_every`]), as Traffic Server syncs its directory, and when
//! the node stops. The index is copied under the read lock; the ring's flush and the file's
//! write run without holding the store.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ecdn_store::{EntryHandle, EntryKey, MappedBlocks, Opened, SharedPayload, Store, StoreError};
use hyper::StatusCode;

use super::body::{Piece, Verifying};
use super::freshness::{self, StoredResponse};
use super::lock::lock;
use super::meta;

/// The metadata block stored with `e` (its age, lifetime and headers; see [`meta`]); the
/// cluster's pieces carry the same block.
pub(super) fn encode_meta(e: &StoredResponse) -> Vec<u8> {
    meta::encode(&meta::DiskMeta {
        status: e.status,
        lifetime_secs: e.lifetime.as_secs(),
        stored_at_unix: freshness::unix_now(),
        age_at_store_secs: e.age_at_store.as_secs(),
        filled: e.filled,
        headers: e.headers.clone(),
    })
}

/// The response a stored metadata block describes, with `body`, its age counting the time
/// since it was stored. Only `200`s are written; anything else (or a block that does not
/// parse) is as corrupt as an unparsable block: `None`.
pub(super) fn stored_response(
    key: String,
    meta_block: &[u8],
    body: Bytes,
) -> Option<StoredResponse> {
    let m = meta::decode(meta_block).filter(|m| m.status == StatusCode::OK)?;
    let on_disk = freshness::unix_now().saturating_sub(m.stored_at_unix);
    Some(StoredResponse {
        key,
        status: m.status,
        headers: m.headers,
        body,
        stored_at: Instant::now(),
        age_at_store: Duration::from_secs(m.age_at_store_secs.saturating_add(on_disk)),
        lifetime: Duration::from_secs(m.lifetime_secs),
        filled: m.filled,
    })
}

/// The disk cache: the store, shared by the request tasks, and its error count.
#[derive(Clone)]
pub(super) struct Disk {
    /// `None` once [`Disk::close`]d (the node stopped).
    store: Arc<RwLock<Option<Store>>>,
    errors: Arc<AtomicU64>,
    closed: Arc<AtomicBool>,
    /// Ring capacity in bytes.
    pub(super) capacity: u64,
    /// The store's state at its last directory save (next sequence number, live entries), and
    /// the task that saves it periodically.
    saved: Arc<Mutex<DirectorySaves>>,
}

#[derive(Default)]
struct DirectorySaves {
    at: Option<(u64, usize)>,
    task: Option<tokio::task::JoinHandle<()>>,
    /// Tells the task to stop (after the save it may be making).
    stop: Arc<tokio::sync::Notify>,
}

/// An entry found on disk: the response (status, headers, freshness; the body not read yet)
/// and the handle its body is read with.
pub(super) struct DiskHit {
    pub(super) entry: StoredResponse,
    pub(super) handle: Arc<EntryHandle>,
    /// The body's first bytes `0..end`, mapped by [`Disk::open`], not yet verified.
    pub(super) first: Option<(u64, MappedBlocks)>,
}

/// Disk-hit bytes on their way to a client: a verified copy, or mapped from the store and
/// cleared block by block as they are sent.
pub(super) enum DiskBytes {
    Ready(Bytes),
    Verifying(Verifying),
}

/// Bytes a disk hit maps per step of its stream (one `mmap` each; the page cache holds them).
pub(super) const DISK_BATCH: u64 = 8 << 20;

impl Disk {
    pub(super) fn new(store: Store) -> Disk {
        Disk {
            capacity: store.capacity(),
            store: Arc::new(RwLock::new(Some(store))),
            errors: Arc::new(AtomicU64::new(0)),
            closed: Arc::new(AtomicBool::new(false)),
            saved: Arc::default(),
        }
    }

    /// Saves the store's directory every `every` while the disk is open (when the store
    /// changed since the last save).
    pub(super) fn save_directory_every(&self, every: Duration) {
        let disk = self.clone();
        let stop = lock(&self.saved).stop.clone();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tokio::select! {
                    _ = tick.tick() => disk.save_directory().await,
                    _ = stop.notified() => return,
                }
            }
        });
        lock(&self.saved).task = Some(task);
    }

    /// Saves the store's directory if the store changed since the last save: the index is
    /// copied under the read lock, then the ring is flushed and the directory written on the
    /// blocking pool without the store.
    pub(super) async fn save_directory(&self) {
        let last = lock(&self.saved).at;
        let snapshot = self
            .read(move |s| {
                let now = (s.next_seq(), s.len());
                if last == Some(now) {
                    return Ok(None);
                }
                s.directory().map(|w| w.map(|w| (w, now)))
            })
            .await;
        let (writer, now) = match snapshot {
            Some(Ok(Some(w))) => w,
            Some(Ok(None)) => return,
            Some(Err(e)) => return self.failed("copying the directory", &e),
            None => return self.failed_task("copying the directory"),
        };
        let writer = match tokio::task::spawn_blocking(move || writer.save().map(|()| writer)).await
        {
            Ok(Ok(w)) => w,
            Ok(Err(e)) => return self.failed("saving the directory", &e),
            Err(_) => return self.failed_task("saving the directory"),
        };
        match self.write(move |s| s.directory_saved(&writer)).await {
            Some(Ok(())) => lock(&self.saved).at = Some(now),
            Some(Err(e)) => self.failed("saving the directory", &e),
            None => self.failed_task("saving the directory"),
        }
    }

    /// Store operations that failed so far.
    pub(super) fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// Logs and counts a failed store operation.
    pub(super) fn failed(&self, what: &str, e: &StoreError) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        eprintln!("ecdn node: disk cache: {what}: {e}");
    }

    /// Runs a synchronous store operation that changes the store on the blocking pool. `None`
    /// if the blocking task did not complete (it panicked, or the runtime is shutting down) or
    /// the store is closed.
    pub(super) async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Store) -> T + Send + 'static,
    ) -> Option<T> {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || {
            store
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .as_mut()
                .map(f)
        })
        .await
        .ok()
        .flatten()
    }

    /// Runs a synchronous read of the store on the blocking pool; reads run concurrently.
    /// `None` as for [`Disk::write`].
    pub(super) async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> T + Send + 'static,
    ) -> Option<T> {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || {
            store
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .map(f)
        })
        .await
        .ok()
        .flatten()
    }

    /// Syncs and closes the store, after the store calls in progress: its file, and the file's
    /// lock, are released when this returns, whoever still holds a clone of this `Disk` (a
    /// background fill that ends later finds the store closed and writes nothing). A node
    /// stopping calls it last, so a new node can open the same file at once.
    pub(super) async fn close(&self) {
        let (saver, stop) = {
            let mut saved = lock(&self.saved);
            (saved.task.take(), saved.stop.clone())
        };
        if let Some(t) = saver {
            // Not aborted: a save under way finishes first, so two never write at once.
            stop.notify_one();
            let _ = t.await;
        }
        self.sync().await;
        self.save_directory().await;
        let store = self.store.clone();
        self.closed.store(true, Ordering::Relaxed);
        // Dropped on the blocking pool: the drop copies the bytes of mappings readers still
        // hold (see `Store`'s drop).
        let _ = tokio::task::spawn_blocking(move || {
            drop(store.write().unwrap_or_else(|e| e.into_inner()).take())
        })
        .await;
    }

    /// A store call's result, with its error logged and counted.
    fn checked<T>(&self, what: &str, r: Option<Result<T, StoreError>>) -> Option<T> {
        match r? {
            Ok(v) => Some(v),
            Err(e) => {
                self.failed(what, &e);
                None
            }
        }
    }

    /// Opens `key` on disk (header, metadata and block table verified; the body is read with
    /// [`Disk::read_body`]). `None` for absent, unreadable or corrupt entries; a corrupt one is
    /// dropped. With `map_first`, the same trip to the blocking pool also maps the body's
    /// first [`DISK_BATCH`] bytes (not yet verified) for a whole-body answer: one hand-off per
    /// disk hit instead of two.
    pub(super) async fn open(&self, key: String, map_first: bool) -> Option<DiskHit> {
        let entry_key = EntryKey::object(key.as_bytes());
        let probe = entry_key.clone();
        let opened = self
            .read(move |s| {
                let opened = s.open_entry(&probe)?;
                let mut first = None;
                if let (true, Opened::Hit(h)) = (map_first, &opened) {
                    let end = h.payload_len().min(DISK_BATCH);
                    // A failure here is seen again, and counted, when the body is read.
                    if let Ok(Some(SharedPayload::Mapped(m))) = s.read_payload_shared(h, 0..end) {
                        first = Some((end, m));
                    }
                }
                Ok::<_, StoreError>((opened, first))
            })
            .await;
        let (opened, first) = self.checked("opening an entry", opened)?;
        let handle = match opened {
            Opened::Hit(h) => h,
            Opened::Miss => return None,
            Opened::Corrupt { seq } => {
                // Never served; drop it unless a newer version was written meanwhile.
                self.drop_entry(entry_key, seq).await;
                return None;
            }
        };
        Some(DiskHit {
            entry: stored_response(key, handle.meta(), Bytes::new())?,
            handle: Arc::new(handle),
            first,
        })
    }

    /// Bytes `range` of a disk entry's body, every block they touch verified. `None` when
    /// they cannot be read: a block failed its checksum (the entry is dropped), or the entry
    /// was evicted or replaced since it was opened.
    pub(super) async fn read_body(
        &self,
        h: &Arc<EntryHandle>,
        range: std::ops::Range<u64>,
    ) -> Option<Bytes> {
        let handle = h.clone();
        let read = self.read(move |s| s.read_payload(&handle, range)).await;
        match self.checked("reading an entry", read) {
            Some(Some(v)) => Some(Bytes::from(v)),
            _ => {
                self.drop_entry(h.key().clone(), h.seq()).await;
                None
            }
        }
    }

    /// A disk entry with its whole body read.
    pub(super) async fn read_all(&self, hit: DiskHit) -> Option<StoredResponse> {
        let body = self
            .read_body(&hit.handle, 0..hit.handle.payload_len())
            .await?;
        Some(StoredResponse { body, ..hit.entry })
    }

    /// Like [`Disk::read_body`], for bytes about to be sent and dropped: mapped from the page
    /// cache rather than copied when possible ([`Store::read_payload_shared`]), so a disk hit
    /// costs one copy (the socket's), like a DRAM hit. Mapped bytes are verified as they are
    /// sent.
    async fn read_shared(
        &self,
        h: &Arc<EntryHandle>,
        range: std::ops::Range<u64>,
    ) -> Option<DiskBytes> {
        let handle = h.clone();
        let read = self
            .read(move |s| s.read_payload_shared(&handle, range))
            .await;
        match self.checked("reading an entry", read) {
            Some(Some(SharedPayload::Owned(v))) => Some(DiskBytes::Ready(Bytes::from(v))),
            Some(Some(SharedPayload::Mapped(m))) => {
                Some(DiskBytes::Verifying(self.verifying(h, m)))
            }
            _ => {
                self.drop_entry(h.key().clone(), h.seq()).await;
                None
            }
        }
    }

    /// [`Disk::read_shared`] for one step of a stream: a copy may cover only a prefix of
    /// `range`, and the rest goes back to the front of `steps`.
    pub(super) async fn read_step(
        &self,
        h: &Arc<EntryHandle>,
        range: std::ops::Range<u64>,
        steps: &mut VecDeque<Piece>,
    ) -> Option<DiskBytes> {
        let got = self.read_shared(h, range.clone()).await?;
        if let DiskBytes::Ready(b) = &got {
            let rest = range.start + b.len() as u64..range.end;
            if !rest.is_empty() {
                steps.push_front(Piece::Body(rest));
            }
        }
        Some(got)
    }

    /// Mapped bytes of `h`'s entry to verify as they are sent; a bad block drops the entry.
    pub(super) fn verifying(&self, h: &EntryHandle, m: MappedBlocks) -> Verifying {
        let (disk, key, seq) = (self.clone(), h.key().clone(), h.seq());
        Verifying::new(m, move || {
            tokio::spawn(async move { disk.drop_entry(key, seq).await });
        })
    }

    /// Drops a disk entry found corrupt (or unreadable), unless a newer version replaced it.
    async fn drop_entry(&self, key: EntryKey, seq: u64) {
        let dropped = self.write(move |s| s.drop_corrupt(&key, seq)).await;
        if dropped.is_none() {
            eprintln!("ecdn node: disk cache: dropping a corrupt entry failed");
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Whether an entry for `key` is on disk (its index; not verified, not checked fresh).
    pub(super) async fn contains(&self, key: &str) -> bool {
        let key = EntryKey::object(key.as_bytes());
        self.read(move |s| s.contains(&key)).await.unwrap_or(false)
    }

    /// Writes a response to disk; whether it is there. One that does not fit the ring stays
    /// uncached; any other failure is logged and counted, and leaves it uncached too.
    pub(super) async fn put(&self, e: &StoredResponse) -> bool {
        let m = encode_meta(e);
        let key = EntryKey::object(e.key.as_bytes());
        let body = e.body.clone();
        match self.write(move |s| s.put(&key, &m, &body)).await {
            Some(Ok(_)) => true,
            Some(Err(StoreError::TooLarge { .. })) => false,
            Some(Err(e)) => {
                self.failed("writing an entry", &e);
                false
            }
            None => {
                self.failed_task("writing an entry");
                false
            }
        }
    }

    /// Removes `key`'s entry, durably: when this returns `Ok`, the removal survives a crash.
    /// Whether there was one. The slow part (a synchronous write, a few ms) runs under the read
    /// lock ([`Store::tombstone`]), so disk hits go on meanwhile; only dropping the key from
    /// the index ([`Store::forget`]) takes the write lock. An error is logged and counted, and
    /// returned: the caller must not acknowledge the removal.
    pub(super) async fn remove(&self, key: &str) -> Result<bool, String> {
        let key = EntryKey::object(key.as_bytes());
        match self.read(move |s| s.tombstone(&key)).await {
            Some(Ok(Some(t))) => {
                // Dead on disk from here on (a read reports it corrupt); a failure to drop it
                // from the index only leaves it to be dropped when next read.
                if self.write(move |s| s.forget(t)).await.is_none() {
                    self.failed_task("dropping a removed entry from the index");
                }
                Ok(true)
            }
            Some(Ok(None)) => Ok(false),
            Some(Err(e)) => {
                self.failed("removing an entry", &e);
                Err(e.to_string())
            }
            None => {
                self.failed_task("removing an entry");
                Err("the disk task failed".into())
            }
        }
    }

    /// Flushes the store to the device (at shutdown).
    pub(super) async fn sync(&self) {
        match self.write(|s| s.sync()).await {
            Some(Ok(())) => {}
            Some(Err(e)) => self.failed("syncing", &e),
            None => self.failed_task("syncing"),
        }
    }

    /// Counts a store call whose blocking task did not complete (it panicked, or the
    /// runtime is shutting down); one that found the store closed is not an error.
    fn failed_task(&self, what: &str) {
        if self.closed.load(Ordering::Relaxed) {
            return;
        }
        self.errors.fetch_add(1, Ordering::Relaxed);
        eprintln!("ecdn node: disk cache: {what}: the blocking task did not complete");
    }
}
