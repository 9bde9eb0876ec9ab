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

/// A verified byte range of an entry's payload, mapped from the ring file; see the module
/// documentation. Dereferences to the bytes; unmapped when dropped. Hand it to
/// `bytes::Bytes::from_owner` to send it without copying.
pub struct MappedPayload {
    ptr: *const u8,
    len: usize,
    base: usize,
    map_len: usize,
    id: u64,
    maps: Arc<Mappings>,
}

// SAFETY: the memory is a read-only mapping that no one writes through (the writer detaches it
// before changing the file bytes it shows), owned by this value until it is dropped.
unsafe impl Send for MappedPayload {}
// SAFETY: as above; shared access is read-only.
unsafe impl Sync for MappedPayload {}

impl MappedPayload {
    /// Maps file bytes `off..off + len` (`len > 0`) read-only, populated, and registers the
    /// mapping. `Ok(None)` when the pages are not all resident after populating (a read
    /// error, or memory too tight): the caller reads with `pread` instead.
    pub(crate) fn map(
        file: &File,
        maps: &Arc<Mappings>,
        off: u64,
        len: usize,
    ) -> io::Result<Option<MappedPayload>> {
        let page = page_size();
        let map_off = off & !(page - 1);
        let lead = (off - map_off) as usize;
        let map_len = lead + len;
        let file_off = libc::off_t::try_from(map_off)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
        // Register before mapping is not needed: the caller holds the store shared, so no write
        // can happen until it returns, and the registration below precedes that.
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
        let unmap = || {
            // SAFETY: `base` is the mapping created above.
            unsafe { libc::munmap(base, map_len) };
        };
        let pages = map_len.div_ceil(page as usize);
        let mut resident = vec![0u8; pages];
        // SAFETY: `base` is page aligned and `resident` has one byte per page of the range.
        if unsafe { libc::mincore(base, map_len, resident.as_mut_ptr()) } != 0 {
            let e = io::Error::last_os_error();
            unmap();
            return Err(e);
        }
        if resident.iter().any(|r| r & 1 == 0) {
            unmap();
            return Ok(None);
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
        Ok(Some(MappedPayload {
            // SAFETY: `lead < map_len`, inside the mapping.
            ptr: unsafe { base.cast::<u8>().add(lead) },
            len,
            base: base as usize,
            map_len,
            id,
            maps: maps.clone(),
        }))
    }
}

impl std::ops::Deref for MappedPayload {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr..ptr + len` lies inside our live read-only mapping, which holds the
        // payload bytes it was created with for as long as `self` lives (see above).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
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
            .field("len", &self.len)
            .finish()
    }
}

impl Drop for MappedPayload {
    fn drop(&mut self) {
        // Unregister first, under the lock a detaching writer holds, so the writer never
        // remaps addresses that are about to be reused.
        self.maps.lock().live.remove(&self.id);
        // SAFETY: our mapping (possibly replaced by its detached copy, same addresses and
        // length); nothing refers to it after `self` is gone.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.map_len) };
    }
}
