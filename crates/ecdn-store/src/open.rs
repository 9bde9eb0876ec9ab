//! Opening a store: the exclusive lock, the regular file or block device, formatting an
//! unformatted one, reserving its space, and rebuilding the index from the directory
//! ([`crate::directory`]) or, without a usable one, by scanning the ring (see "Restart" in the
//! crate docs).

use super::*;

fn random_id() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    if let Ok(d) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(d.as_nanos());
    }
    h.finish()
}

/// Takes an exclusive `flock` on `file` without waiting (`WouldBlock` when another open file
/// description holds one). A lock belongs to the open file description, so a second open of
/// the same file, even in this process, is refused too; it goes with the descriptor's close.
fn lock_exclusive(file: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: flock on our own descriptor; no memory is passed.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Bytes an unprivileged user may still allocate on the filesystem holding `file`.
fn free_bytes(file: &File) -> io::Result<u64> {
    use std::os::fd::AsRawFd;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: fstatvfs fills the struct it is given on success.
    if unsafe { libc::fstatvfs(file.as_raw_fd(), st.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: initialised by the successful call above.
    let st = unsafe { st.assume_init() };
    // u32 or u64 depending on the target.
    #[allow(clippy::useless_conversion)]
    let (avail, frsize) = (u64::from(st.f_bavail), u64::from(st.f_frsize));
    Ok(avail.saturating_mul(frsize))
}

impl Store {
    /// Opens the store at `cfg.path` (a regular file, created if missing, or a block device),
    /// taking an exclusive lock on it ([`StoreError::InUse`] if another store holds it). A
    /// new, empty or unformatted file (its first aligned block all zeros) is formatted;
    /// otherwise the superblock must match `cfg`, and the index is rebuilt by scanning the
    /// ring. A regular file gets its whole size allocated ([`StoreError::NoSpace`] when the
    /// filesystem cannot hold it).
    pub fn open(cfg: StoreConfig) -> Result<Store, StoreError> {
        Self::open_inner(cfg, false)
    }

    /// Formats the store at `cfg.path`, discarding whatever it held (after taking the same
    /// exclusive lock as [`Store::open`]).
    pub fn create(cfg: StoreConfig) -> Result<Store, StoreError> {
        Self::open_inner(cfg, true)
    }

    fn open_inner(cfg: StoreConfig, format: bool) -> Result<Store, StoreError> {
        use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
        cfg.validate()?;
        let path = cfg.path.clone();
        let io_err = |op: &'static str| {
            let path = path.clone();
            move |source| StoreError::Io { op, path, source }
        };
        let not_a_store = |reason: String| StoreError::NotAStore {
            path: path.clone(),
            reason,
        };
        let in_use = |reason| StoreError::InUse {
            path: path.clone(),
            reason,
        };
        // A block device is opened with O_EXCL: the kernel then refuses it while it is
        // mounted or claimed by another exclusive opener (EBUSY), and it is never created.
        let device = match std::fs::metadata(&cfg.path) {
            Ok(m) if m.file_type().is_block_device() => true,
            Ok(m) if !m.is_file() => {
                return Err(not_a_store(
                    "neither a regular file nor a block device".into(),
                ))
            }
            _ => false,
        };
        let mut opts = OpenOptions::new();
        opts.read(true).write(true);
        if device {
            opts.custom_flags(libc::O_EXCL);
        } else {
            opts.create(true).truncate(false);
        }
        let mut file = opts.open(&cfg.path).map_err(|e| {
            if device && e.raw_os_error() == Some(libc::EBUSY) {
                in_use("the block device is mounted or opened exclusively")
            } else {
                io_err("open")(e)
            }
        })?;
        lock_exclusive(&file).map_err(|e| {
            if e.kind() == io::ErrorKind::WouldBlock {
                in_use("another open store holds its lock")
            } else {
                io_err("lock")(e)
            }
        })?;
        let meta = file.metadata().map_err(io_err("stat"))?;
        if meta.file_type().is_block_device() != device || !(device || meta.is_file()) {
            return Err(not_a_store("it changed type while being opened".into()));
        }
        // The descriptor removals are written through: O_DSYNC makes each write return only
        // once its bytes (and what is needed to read them back) are on stable storage.
        let dsync = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DSYNC)
            .open(&cfg.path)
            .map_err(io_err("open (O_DSYNC)"))?;
        let dmeta = dsync.metadata().map_err(io_err("stat"))?;
        if (dmeta.dev(), dmeta.ino()) != (meta.dev(), meta.ino()) {
            return Err(not_a_store("it was replaced while being opened".into()));
        }
        let size = file.seek(SeekFrom::End(0)).map_err(io_err("seek"))?;
        let needed = cfg.capacity + u64::from(cfg.align);
        let mut store = Store {
            file,
            dsync,
            device,
            path: cfg.path.clone(),
            align: cfg.align,
            capacity: cfg.capacity,
            store_id: 0,
            ring: Ring::new(cfg.capacity),
            directory: (!device).then(|| directory_path(&cfg.path)),
            started: Started::Formatted,
            directory_next: None,
            maps: Arc::default(),
            io_errors: AtomicU64::new(0),
        };
        // The superblock's aligned block (or what there is of it): all zeros means nothing was
        // ever formatted here, or a first format was cut short before its superblock.
        let mut head = vec![0u8; size.min(u64::from(cfg.align)) as usize];
        store
            .file
            .read_exact_at(&mut head, 0)
            .map_err(io_err("read superblock of"))?;
        if format || head.iter().all(|&b| b == 0) {
            store.format(size)?;
            return Ok(store);
        }
        let hint = if device {
            " (if the device's contents may be discarded, zero its first 4 KiB to let the \
             store format it)"
        } else {
            ""
        };
        if size < format::SUPER_LEN as u64 {
            return Err(not_a_store(format!(
                "{size} bytes is too short for a superblock{hint}"
            )));
        }
        let sb = Superblock::decode(&head).map_err(|reason| not_a_store(reason + hint))?;
        if sb.align != cfg.align || sb.capacity != cfg.capacity {
            return Err(StoreError::ConfigMismatch {
                path,
                found_align: sb.align,
                found_capacity: sb.capacity,
                align: cfg.align,
                capacity: cfg.capacity,
            });
        }
        if device {
            if size < needed {
                return Err(StoreError::DeviceTooSmall {
                    path,
                    size,
                    needed,
                    capacity: cfg.capacity,
                });
            }
        } else {
            // Also extends a truncated file (the missing bytes read as zeros and fail their
            // checksums), and allocates a file formatted sparse by an older version.
            store.reserve(size)?;
        }
        store.store_id = sb.store_id;
        store.started = match store.start_from_directory() {
            Ok(started) => started,
            Err(reason) => {
                store.scan()?;
                // Whatever directory there is cannot be used, now or later.
                store.directory_next = None;
                if let Some(dir) = &store.directory {
                    directory::remove_durably(dir).map_err(io_err("remove the directory"))?;
                }
                Started::Scan { reason }
            }
        };
        Ok(store)
    }

    /// Writes a new superblock (a new store id: entries already in the ring are ignored from
    /// now on), after sizing and allocating a regular file anew (`size`: its current size).
    fn format(&mut self, size: u64) -> Result<(), StoreError> {
        let needed = self.capacity + u64::from(self.align);
        if self.device {
            if size < needed {
                return Err(StoreError::DeviceTooSmall {
                    path: self.path.clone(),
                    size,
                    needed,
                    capacity: self.capacity,
                });
            }
        } else {
            // Drop old contents so no stale entry survives, then size and allocate the file.
            self.file.set_len(0).map_err(self.io("truncate"))?;
            if let Err(e) = self.reserve(0) {
                // Give back what a partial allocation took; the file is empty, hence
                // unformatted, for the next try.
                self.file.set_len(0).map_err(self.io("truncate"))?;
                return Err(e);
            }
        }
        // A directory of the ring's former contents would name entries of another store id:
        // it would be refused, but it goes now.
        if let Some(dir) = &self.directory {
            directory::remove_durably(dir).map_err(self.io("remove the old directory"))?;
        }
        self.directory_next = None;
        self.started = Started::Formatted;
        self.store_id = random_id();
        let sb = Superblock {
            align: self.align,
            capacity: self.capacity,
            store_id: self.store_id,
        };
        let mut block = vec![0u8; self.align as usize];
        block[..format::SUPER_LEN].copy_from_slice(&sb.encode());
        self.file
            .write_all_at(&block, 0)
            .map_err(self.io("write superblock of"))?;
        // The superblock reaches the disk before any entry that carries its id.
        self.file
            .sync_data()
            .map_err(self.io("sync superblock of"))?;
        self.ring = Ring::new(self.capacity);
        // An empty directory at once: a store killed before its first save starts empty
        // without reading the ring (which holds only zeros or a former store's entries).
        self.save_directory()
    }

    /// Sizes the regular file (now `size` bytes) to `align + capacity` bytes and allocates all
    /// of them, so that no later write can fail for want of space: first checks the
    /// filesystem's free space ([`StoreError::NoSpace`], without allocating anything), then
    /// `fallocate`s. On a filesystem without `fallocate` (`EOPNOTSUPP`) the file is only
    /// extended, sparse, as the store did before it reserved space. (Not `posix_fallocate`:
    /// glibc emulates it there by writing a byte into every block, which for a large disk cache
    /// takes minutes.)
    fn reserve(&self, size: u64) -> Result<(), StoreError> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::MetadataExt;
        let needed = self.capacity + u64::from(self.align);
        let allocated = self.file.metadata().map_err(self.io("stat"))?.blocks() * 512;
        let available = free_bytes(&self.file).map_err(self.io("statvfs"))?;
        let no_space = || StoreError::NoSpace {
            path: self.path.clone(),
            needed,
            available: available.saturating_add(allocated),
        };
        // Checked first: a failing fallocate on some filesystems (ext4 among them) would fill
        // the whole filesystem before it gives up.
        if needed.saturating_sub(allocated) > available {
            return Err(no_space());
        }
        let len = libc::off_t::try_from(needed).map_err(|_| no_space())?;
        loop {
            // SAFETY: fallocate on our own descriptor; no memory is passed.
            if unsafe { libc::fallocate(self.file.as_raw_fd(), 0, 0, len) } == 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::ENOSPC) => return Err(no_space()),
                // No fallocate on this filesystem: a sparse file, as before.
                Some(libc::EOPNOTSUPP) => {
                    if size < needed {
                        self.file.set_len(needed).map_err(self.io("size"))?;
                    }
                    return Ok(());
                }
                _ => return Err(self.io("allocate")(e)),
            }
        }
    }

    /// Rebuilds the ring and index from the file (see "Restart" in the crate docs).
    fn scan(&mut self) -> Result<(), StoreError> {
        struct Cand {
            off: u64,
            h: Header,
            live: bool,
            fp: u64,
        }
        let a = u64::from(self.align);
        let cap = self.capacity;
        let chunk = (1u64 << 22).max(a).min(cap) as usize;
        let mut buf = vec![0u8; chunk];
        let mut by_seq: std::collections::HashMap<u64, Vec<Cand>> = Default::default();
        let mut newest: Option<u64> = None;
        let mut start = 0u64;
        while start < cap {
            let len = (cap - start).min(chunk as u64) as usize;
            self.read_ring(start, &mut buf[..len])?;
            for o in (0..len).step_by(self.align as usize) {
                let Some((h, live)) = Header::decode(&buf[o..o + HEADER_LEN as usize]) else {
                    continue;
                };
                let raw = HEADER_LEN
                    .checked_add(u64::from(h.key_len))
                    .and_then(|x| x.checked_add(u64::from(h.meta_len)))
                    .and_then(|x| x.checked_add(h.payload_len));
                if h.store_id != self.store_id || raw.is_none_or(|r| r > cap) {
                    continue;
                }
                let fp = h.footprint(self.align);
                newest = Some(newest.map_or(h.seq, |n: u64| n.max(h.seq)));
                by_seq.entry(h.seq).or_default().push(Cand {
                    off: start + o as u64,
                    h,
                    live,
                    fp,
                });
            }
            start += len as u64;
        }
        let Some(newest) = newest else {
            self.ring = Ring::new(cap);
            return Ok(());
        };
        // Walk back from the newest write.
        let mut chain: VecDeque<&Cand> = VecDeque::new();
        let first = &by_seq[&newest][0];
        let head_off = (first.off + first.fp) % cap;
        let mut total = first.fp;
        let mut expected_end = first.off;
        chain.push_front(first);
        let mut seq = newest;
        while seq > 0 {
            seq -= 1;
            let Some(prev) = by_seq.get(&seq).and_then(|v| {
                v.iter()
                    .find(|c| (c.off + c.fp) % cap == expected_end && total + c.fp <= cap)
            }) else {
                break;
            };
            total += prev.fp;
            expected_end = prev.off;
            chain.push_front(prev);
        }
        let first_seq = chain[0].h.seq;
        // Read every entry of the chain, newest first, to decide live or ghost.
        let mut slots = Vec::with_capacity(chain.len());
        let mut seen_keys: HashSet<EntryKey> = HashSet::new();
        let mut corrupt_hashes: HashSet<u32> = HashSet::new();
        for c in chain.iter().rev() {
            // Key, metadata and block table: the payload's blocks are verified when read.
            let mut body = vec![0u8; c.h.prefix_len() as usize];
            self.read_ring((c.off + HEADER_LEN) % cap, &mut body)?;
            let kl = c.h.key_len as usize;
            let ml = c.h.meta_len as usize;
            let ok =
                c.h.entry_crc_of(&body[..kl], &body[kl..kl + ml], &body[kl + ml..])
                    == c.h.entry_crc;
            let key = EntryKey::from_parts(c.h.kind, body[..kl].to_vec(), c.h.chunk, c.h.sub_chunk);
            let live = c.live
                && ok
                && !seen_keys.contains(&key)
                && !corrupt_hashes.contains(&c.h.key_hash);
            if ok {
                seen_keys.insert(key.clone());
            } else {
                corrupt_hashes.insert(c.h.key_hash);
            }
            slots.push(Slot::new(key.tag(), c.off, c.fp, c.h.payload_len, live));
        }
        slots.reverse();
        self.ring = Ring::restore(cap, first_seq, head_off, slots);
        Ok(())
    }
}
