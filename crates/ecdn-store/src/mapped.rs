//! Zero-copy payload reads: a verified byte range of the ring file, mapped read-only, that
//! stays correct however long its reader keeps it.
//!
//! A disk hit is bounded by memory bandwidth. Reading a payload with `pread` copies it from the
//! page cache into a buffer, and the socket write copies it again; a [`MappedPayload`] is the
//! page-cache pages themselves (`mmap` of the ring file), so the only copy left is the
//! socket's. The cost is a lifetime problem the copy did not have: the ring writer overwrites
//! the oldest bytes of the file, and a mapping shows whatever the file holds *now*. A slow
//! client could therefore be sent bytes of a later entry.
//!
//! The store solves it with **copy-on-overwrite**: every live mapping is registered with the
//! file byte range of the payload it exposes; before the writer writes bytes that overlap a
//! registered range it *detaches* that mapping: it reads the mapping's bytes (still the old
//! ones — the write has not happened) into fresh anonymous memory and `mremap`s that memory
//! over the mapping's addresses, atomically, so a reader (even the kernel in the middle of a
//! socket write) sees the same bytes before and after. The writer never waits for readers,
//! and the rare reader that is overtaken by the ring costs one copy of its own range.
//!
//! **Verified once, while locked.** A hot range's mapping is reused from the store's cache of
//! recent ones ([`MapCache`]); on its first reuse the store locks its pages in memory
//! (`mlock`, within [`LOCKED_BYTES`] for the whole store), and from then on a block that
//! passes its checksum is marked ([`Marks`]) and not checked again while the mapping lives:
//! locked pages are never dropped from the page cache and read back from the device, so
//! the bytes a later reader sends are the bytes that were checked. (Unlocked, a page could be
//! evicted and read back from a device that changed meanwhile: every read checks every block
//! again.) A disk hit of a hot object then costs its socket copy alone, as a hit from memory
//! does. Where the process may not lock memory (`RLIMIT_MEMLOCK`), nothing changes.
//!
//! Robustness: the pages are populated when the range is mapped (on the blocking pool, where
//! the disk read belongs) and checked to be resident before they are first touched, so a disk
//! read error shows up as an error (the caller falls back to `pread`, which reports `EIO`),
//! not as `SIGBUS`. Like every `mmap`-based cache (Varnish's `-s file` among them), the store
//! relies on nobody truncating its file behind its back (see the crate documentation: one
//! process per file).

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::read_exact_uninit;

/// The system page size (mapping offsets must be multiples of it).
pub(crate) fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

/// One live mapping, as the writer sees it.
struct Live {
    /// Address of the mapping (page aligned).
    base: usize,
    /// Bytes mapped.
    map_len: usize,
    /// File offset of the mapping's first byte.
    map_off: u64,
    /// File byte range the reader uses: writes overlapping it detach the mapping.
    guarded: (u64, u64),
    /// Already replaced by a private copy: later writes cannot affect it.
    detached: bool,
}

/// The registry of live mappings of one store file.
#[derive(Default)]
pub(crate) struct Mappings {
    inner: Mutex<MapState>,
    cache: Mutex<MapCache>,
    /// Bytes of mappings locked in memory now (at most [`LOCKED_BYTES`]).
    locked: AtomicUsize,
}

/// The most bytes of a store's mappings locked in memory at once (see the module
/// documentation): half the address space its cache of recent mappings may keep.
pub(crate) const LOCKED_BYTES: usize = MAP_CACHE_BYTES / 2;

/// Which blocks of one mapping passed their checksum while its pages were locked in memory
/// (see the module documentation): one bit per checksum block of the mapping, in order.
#[derive(Debug)]
pub(crate) struct Marks {
    locked: AtomicBool,
    /// A lock was tried (once per mapping).
    tried: AtomicBool,
    bits: Box<[AtomicU64]>,
}

impl Marks {
    fn new(blocks: usize) -> Marks {
        Marks {
            locked: AtomicBool::new(false),
            tried: AtomicBool::new(false),
            bits: (0..blocks.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }

    /// Whether the mapping's pages are locked in memory.
    pub(crate) fn locked(&self) -> bool {
        self.locked.load(Ordering::Acquire)
    }

    /// Whether block `b` passed its checksum while the pages were locked (a mapping stays
    /// locked until it is unmapped, and a block is marked only then).
    pub(crate) fn is_marked(&self, b: usize) -> bool {
        self.bits
            .get(b / 64)
            .is_some_and(|w| w.load(Ordering::Acquire) & (1 << (b % 64)) != 0)
    }

    /// Marks block `b` as passed; `was_locked` says whether the pages were locked before its
    /// bytes were checked (only then are they the locked bytes).
    pub(crate) fn mark(&self, b: usize, was_locked: bool) {
        if let (true, Some(w)) = (was_locked, self.bits.get(b / 64)) {
            w.fetch_or(1 << (b % 64), Ordering::Release);
        }
    }
}

#[derive(Default)]
struct MapState {
    next_id: u64,
    live: HashMap<u64, Live>,
}

impl Mappings {
    fn lock(&self) -> MutexGuard<'_, MapState> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Live mappings (for tests and stats).
    pub(crate) fn len(&self) -> usize {
        self.lock().live.len()
    }

    /// Detaches every mapping whose guarded range overlaps file bytes `start..end`, which the
    /// caller is about to overwrite. An error (the old bytes could not be read back) means the
    /// write must not happen.
    pub(crate) fn detach_overlapping(&self, file: &File, start: u64, end: u64) -> io::Result<()> {
        let mut st = self.lock();
        for m in st.live.values_mut() {
            if m.detached || m.guarded.1 <= start || end <= m.guarded.0 {
                continue;
            }
            detach(file, m)?;
            m.detached = true;
        }
        Ok(())
    }
}

/// Replaces mapping `m` by an anonymous private copy of its current bytes, atomically.
fn detach(file: &File, m: &Live) -> io::Result<()> {
    // SAFETY: a fresh private anonymous mapping; no existing memory is affected.
    let copy = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            m.map_len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if copy == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let unmap_copy = || {
        // SAFETY: `copy` is the mapping created above, not yet moved.
        unsafe { libc::munmap(copy, m.map_len) };
    };
    // Read the old bytes from the file (not through the mapping: a page that left the page
    // cache and fails to read back would raise SIGBUS there; pread reports EIO).
    // SAFETY: `copy` is valid for writes of `map_len` bytes.
    let buf = unsafe {
        std::slice::from_raw_parts_mut(copy.cast::<std::mem::MaybeUninit<u8>>(), m.map_len)
    };
    if let Err(e) = read_exact_uninit(file, buf, m.map_off) {
        unmap_copy();
        return Err(e);
    }
    // SAFETY: `copy` is our own mapping of `map_len` bytes.
    if unsafe { libc::mprotect(copy, m.map_len, libc::PROT_READ) } != 0 {
        let e = io::Error::last_os_error();
        unmap_copy();
        return Err(e);
    }
    // SAFETY: moves our anonymous copy onto the reader's mapping [base, base + map_len), which
    // we own (it is registered and unmapped only after being unregistered, under the same
    // lock). mremap with MREMAP_FIXED replaces the old pages in one step, under the process's
    // mmap lock, so no access ever sees the range unmapped; both hold the same bytes.
    let moved = unsafe {
        libc::mremap(
            copy,
            m.map_len,
            m.map_len,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            m.base as *mut libc::c_void,
        )
    };
    if moved == libc::MAP_FAILED {
        let e = io::Error::last_os_error();
        unmap_copy();
        return Err(e);
    }
    Ok(())
}

/// One `mmap` of a payload range, registered with the store until it is dropped.
struct Mapping {
    ptr: *const u8,
    len: usize,
    base: usize,
    map_len: usize,
    id: u64,
    maps: Arc<Mappings>,
    marks: Arc<Marks>,
}

// SAFETY: the memory is a read-only mapping that no one writes through (the writer detaches it
// before changing the file bytes it shows), owned by this value until it is dropped.
unsafe impl Send for Mapping {}
// SAFETY: as above; shared access is read-only.
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // Unregister first, under the lock a detaching writer holds, so the writer never
        // remaps addresses that are about to be reused.
        self.maps.lock().live.remove(&self.id);
        // SAFETY: our mapping (possibly replaced by its detached copy, same addresses and
        // length); nothing refers to it after `self` is gone. (Unmapping unlocks it.)
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.map_len) };
        if self.marks.locked() {
            self.maps.locked.fetch_sub(self.map_len, Ordering::Relaxed);
        }
    }
}

/// Checks that every page of `base..base + map_len` (page aligned) is resident.
fn all_resident(base: usize, map_len: usize) -> io::Result<bool> {
    let page = page_size() as usize;
    let mut resident = vec![0u8; map_len.div_ceil(page)];
    // SAFETY: `base` is page aligned and mapped for `map_len` bytes; `resident` has one byte
    // per page of the range.
    if unsafe { libc::mincore(base as *mut libc::c_void, map_len, resident.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(resident.iter().all(|r| r & 1 == 1))
}

/// Virtual bytes of recent mappings the store keeps for reuse (see [`MapCache`]).
const MAP_CACHE_BYTES: usize = 512 << 20;

/// Recent mappings, kept so that the next read of the same entry range (a hot disk object)
/// reuses it instead of paying `mmap`, page-table population and `munmap` again. Keyed by
/// (sequence number, file offset, length); bounded by [`MAP_CACHE_BYTES`] of address space,
/// oldest first out. A write overlapping a cached range removes it before anything else
/// (so a cached mapping only ever shows live bytes of its entry), and a reuse re-checks that
/// the pages are still resident.
#[derive(Default)]
pub(crate) struct MapCache {
    by_key: HashMap<(u64, u64, usize), MappedPayload>,
    order: std::collections::VecDeque<(u64, u64, usize)>,
    bytes: usize,
}

impl MapCache {
    /// Forgets `key`, returning its mapping (to drop outside the lock).
    fn remove(&mut self, key: &(u64, u64, usize)) -> Option<MappedPayload> {
        let m = self.by_key.remove(key)?;
        self.order.retain(|k| k != key);
        self.bytes -= m.len();
        Some(m)
    }

    /// Caches `m` under `key`, returning the mappings pushed out (to drop outside the lock):
    /// the oldest ones beyond [`MAP_CACHE_BYTES`].
    fn insert(&mut self, key: (u64, u64, usize), m: MappedPayload) -> Vec<MappedPayload> {
        let mut out: Vec<_> = self.remove(&key).into_iter().collect();
        self.bytes += m.len();
        self.by_key.insert(key, m);
        self.order.push_back(key);
        while self.bytes > MAP_CACHE_BYTES {
            let Some(k) = self.order.pop_front() else {
                break;
            };
            if let Some(old) = self.by_key.remove(&k) {
                self.bytes -= old.len();
                out.push(old);
            }
        }
        out
    }
}

impl Mappings {
    fn cache(&self) -> MutexGuard<'_, MapCache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Mappings held by readers, not counting the store's cache of recent ones.
    pub(crate) fn in_use(&self) -> usize {
        let cached = self.cache().by_key.len();
        self.len().saturating_sub(cached)
    }

    /// Locks `m`'s pages in memory (see the module documentation) unless it was tried before
    /// or the store's locked bytes would pass [`LOCKED_BYTES`]; a refusal of the system
    /// (`RLIMIT_MEMLOCK`) leaves it unlocked.
    fn lock_pages(&self, m: &Mapping) {
        if m.marks.tried.swap(true, Ordering::Relaxed) {
            return;
        }
        let before = self.locked.fetch_add(m.map_len, Ordering::Relaxed);
        // SAFETY: `base..base + map_len` is our live mapping; locking changes no bytes.
        if before + m.map_len > LOCKED_BYTES
            || unsafe { libc::mlock(m.base as *const libc::c_void, m.map_len) } != 0
        {
            self.locked.fetch_sub(m.map_len, Ordering::Relaxed);
            return;
        }
        m.marks.locked.store(true, Ordering::Release);
    }

    /// Forgets every cached mapping (the cache holds the registry alive through its
    /// mappings, so the store empties it when it is dropped).
    pub(crate) fn clear_cache(&self) {
        let dropped = std::mem::take(&mut *self.cache());
        drop(dropped);
    }

    /// Forgets cached mappings overlapping file bytes `start..end` (about to be overwritten).
    pub(crate) fn uncache_overlapping(&self, start: u64, end: u64) {
        let dropped: Vec<MappedPayload> = {
            let mut c = self.cache();
            let keys: Vec<_> = c
                .by_key
                .keys()
                .filter(|&&(_, off, len)| off < end && start < off + len as u64)
                .copied()
                .collect();
            keys.iter().filter_map(|k| c.remove(k)).collect()
        };
        drop(dropped); // outside the cache lock: dropping unmaps under the registry lock
    }
}

/// A byte range of an entry's payload, mapped from the ring file; see the module
/// documentation. Dereferences to the bytes; cheap to clone (shared); unmapped when the last
/// clone is dropped. Hand it to `bytes::Bytes::from_owner` to send it without copying.
#[derive(Clone)]
pub struct MappedPayload {
    map: Arc<Mapping>,
}

impl MappedPayload {
    /// Maps file bytes `off..off + len` (`len > 0`) of the entry with sequence number `seq`
    /// read-only, populated, and registers the mapping; reuses a cached mapping of the same
    /// range, locking its pages in memory at its first reuse (see the module documentation).
    /// `blocks`: the checksum blocks the range holds. `Ok(None)` when the pages are not all
    /// resident after populating (a read error, or memory too tight): the caller reads with
    /// `pread` instead. The caller holds the store shared, so no write happens until it
    /// returns.
    pub(crate) fn map(
        file: &File,
        maps: &Arc<Mappings>,
        (off, len): (u64, usize),
        seq: u64,
        blocks: usize,
    ) -> io::Result<Option<MappedPayload>> {
        let key = (seq, off, len);
        let cached = maps.cache().by_key.get(&key).cloned();
        if let Some(m) = cached {
            // (Locked pages are resident: no need to ask.)
            if m.is_locked() || all_resident(m.map.base, m.map.map_len)? {
                maps.lock_pages(&m.map);
                return Ok(Some(m));
            }
            let gone = maps.cache().remove(&key);
            drop(gone); // outside the cache lock
        }
        let page = page_size();
        let map_off = off & !(page - 1);
        let lead = (off - map_off) as usize;
        let map_len = lead + len;
        let file_off = libc::off_t::try_from(map_off)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
        // SAFETY: a new shared read-only mapping of our file; no existing memory is affected.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                file.as_raw_fd(),
                file_off,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let resident = all_resident(base as usize, map_len);
        if !matches!(resident, Ok(true)) {
            // SAFETY: `base` is the mapping created above, not yet shared.
            unsafe { libc::munmap(base, map_len) };
            return resident.map(|_| None);
        }
        let id = {
            let mut st = maps.lock();
            st.next_id += 1;
            let id = st.next_id;
            st.live.insert(
                id,
                Live {
                    base: base as usize,
                    map_len,
                    map_off,
                    guarded: (off, off + len as u64),
                    detached: false,
                },
            );
            id
        };
        let m = MappedPayload {
            map: Arc::new(Mapping {
                // SAFETY: `lead < map_len`, inside the mapping.
                ptr: unsafe { base.cast::<u8>().add(lead) },
                len,
                base: base as usize,
                map_len,
                id,
                maps: maps.clone(),
                marks: Arc::new(Marks::new(blocks)),
            }),
        };
        let evicted = maps.cache().insert(key, m.clone());
        drop(evicted); // outside the cache lock
        Ok(Some(m))
    }

    /// Its blocks' marks (see the module documentation).
    pub(crate) fn marks(&self) -> Arc<Marks> {
        self.map.marks.clone()
    }

    /// Whether its pages are locked in memory (its checked blocks are not checked again).
    pub fn is_locked(&self) -> bool {
        self.map.marks.locked()
    }
}

impl std::ops::Deref for MappedPayload {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr..ptr + len` lies inside the live read-only mapping, which holds the
        // payload bytes it was created with for as long as any clone lives (see above).
        unsafe { std::slice::from_raw_parts(self.map.ptr, self.map.len) }
    }
}

impl AsRef<[u8]> for MappedPayload {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl std::fmt::Debug for MappedPayload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedPayload")
            .field("len", &self.map.len)
            .finish()
    }
}
