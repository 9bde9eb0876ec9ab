//! The pieces a cluster node holds: replicas of small objects and chunks of coded ones, on the
//! node's disk, with an [`ecdn_policy::Cache`] deciding what is admitted and evicted — the
//! simulator's per-server cache, fed the same ids (the object id for a replica,
//! [`ecdn_placement::hash::chunk_id`] for a chunk) and the same sizes (payload bytes), so the
//! node keeps exactly what the simulator's server keeps.
//!
//! The store below is a FIFO ring over footprints (payload plus header, key, metadata and
//! alignment), so it is made larger than the policy's capacity; the policy evicts first, and an
//! evicted piece is only dropped from the store's index ([`ecdn_store::Store::evict`]), its
//! bytes left for the ring to overwrite. If the ring ever overwrites a piece the policy still
//! holds (too little slack), the piece is missing when read: the reader treats it as absent and
//! the policy forgets it, and `ring_lost` counts it.
//!
//! # Restart
//!
//! A node that starts on a store it used before registers the pieces the store's directory (or
//! scan) found ([`PieceStore::recover`]) before it joins the cluster: C2DN's return procedure
//! (App. 10.3) hands a returning server its buckets back because its cache is still there, and
//! the simulator's unavailable server keeps its cache. Every live entry is offered to the
//! policy in the ring's order, oldest first, so the FIFO goes on where it stopped: entries the
//! policy had evicted (an eviction only drops the store's index entry, it writes nothing) come
//! back and are evicted again, and the policy ends holding what it held. Registration reads
//! nothing: the store's index gives each entry's key tag (the hash of its key, its chunk) and
//! payload length, which is all the policy needs, so a start takes the same time whatever the
//! disk holds. What a read of the entry would tell is checked at its first read instead: the
//! key must be the piece's, the metadata must decode as a piece's, agree with the key's piece
//! and the cluster's code, and name the payload's length; anything else (an entry of the node's
//! standalone disk cache, a piece of another code) is dropped then, from the policy and the
//! index, and read as absent. Payload bytes are verified on every read, as always. Nothing is dropped for the map: as in the simulator, a
//! piece whose bucket moved stays until the FIFO reaches it, and is found through the slots'
//! former servers meanwhile. A purge is durable ([`ecdn_store::Store::tombstone`]), so no
//! restart brings a purged piece back.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use std::ops::Range;

use bytes::Bytes;
use ecdn_cluster::config::ClusterConfig;
use ecdn_cluster::piece::{Coding, PieceMeta};
use ecdn_cluster::wire::PieceName;
use ecdn_placement::chunk_id;
use ecdn_policy::{Cache, Request};
use ecdn_store::{EntryKey, KeyTag, Opened, SharedPayload, Store, StoreError};

use crate::node::disk::Disk;
use crate::node::lock::lock;

/// What a piece put did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Put {
    /// Admitted and written.
    Stored,
    /// The policy already holds it: nothing written.
    Present,
    /// The policy refused it (larger than the node's capacity), or the disk failed.
    Refused,
}

/// The header of a piece `PUT` whose receiver drops the copy it holds and stores this one as a
/// new piece, at the head of its FIFO ([`PieceStore::renew`]; `c2dn/resync.rs`).
pub const RENEW: &str = "x-ecdn-renew";

/// The key prefix of EC-Cache's object splits (`objects/api.rs`): they carry their own code.
pub(in crate::node) const SPLIT_PREFIX: &str = "_objects/";

/// Whether a store entry is a piece of an EC-Cache object (a split), not of a cached object.
fn is_split(key: &EntryKey) -> bool {
    let (EntryKey::Object { key } | EntryKey::Chunk { key, .. }) = key;
    key.starts_with(SPLIT_PREFIX.as_bytes())
}

/// An object a piece of which the policy evicted ([`PieceStore::put`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Evicted {
    /// The object's id (`ecdn_trace::hash_id` of its key).
    pub object: u64,
    /// Which piece of it.
    pub piece: PieceName,
    /// The object's bucket, when known (not for a piece registered at start).
    pub bucket: Option<usize>,
    /// The piece was an EC-Cache object's split (its record, not whole-object eviction, says
    /// what is left of it).
    pub split: bool,
}

/// Pieces an object of `key` may have: an EC-Cache object's splits may be up to the most an
/// object has, a cached object's are the cluster's `K + P`.
pub fn pieces_per_object(cfg: &ClusterConfig, key: &str) -> usize {
    if key.starts_with(SPLIT_PREFIX) {
        ecdn_objects::meta::MAX_SPLITS
    } else {
        cfg.k + cfg.p
    }
}

/// A piece's metadata agrees with its name, its key's code (the cluster's, or an EC-Cache
/// split's own) and its payload's length. The payload's sub-chunk checksums are checked by
/// whoever has the bytes ([`check_chunk`]).
pub fn check_meta(
    cfg: &ClusterConfig,
    piece: PieceName,
    key: &str,
    meta: &PieceMeta,
    payload_len: u64,
) -> Result<(), String> {
    let split = key.starts_with(SPLIT_PREFIX);
    match (piece, &meta.coding) {
        (PieceName::Replica, None) if !split => Ok(()),
        (PieceName::Chunk(ch), Some(coding)) => {
            let (k, p) = if split {
                (usize::from(coding.k), usize::from(coding.p))
            } else {
                (cfg.k, cfg.p)
            };
            if usize::from(coding.k) != k
                || usize::from(coding.p) != p
                || k == 0
                || coding.chunk != ch
                || usize::from(ch) >= k + p
                || u64::from(coding.sub_chunk) != cfg.sub_chunk
            {
                return Err("chunk metadata does not match the path or the cluster's code".into());
            }
            let n = coding.stripes();
            if coding.crcs.len() as u64 != n * u64::from(coding.k + coding.p) {
                return Err("wrong number of sub-chunk checksums".into());
            }
            if payload_len != coding.chunk_size() {
                return Err("chunk length does not match its metadata".into());
            }
            Ok(())
        }
        _ => Err("piece kind does not match the path".into()),
    }
}

/// What [`PieceStore::recover`] found in the store at start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Pieces registered with the policy, and their bytes as the policy counts them (payload
    /// bytes; an empty payload counts 1).
    pub pieces: u64,
    pub bytes: u64,
    /// Live entries the policy evicted again while they were offered in ring order (evicted
    /// before the restart; an eviction writes nothing).
    pub evicted: u64,
    /// Entries whose key names no piece (a sub-chunk's): dropped from the index. Entries
    /// that are not this cluster's pieces otherwise are found at their first read.
    pub foreign: u64,
    /// Time the registration took, after the store's own scan.
    pub millis: u64,
}

/// A piece's metadata and payload bytes, as read from the store.
type MetaAndPayload = (Vec<u8>, Bytes);

/// What a read found: the piece (and, at the first read of a piece registered at start,
/// whether it is an EC-Cache split), or an entry that is not this piece.
enum FirstRead {
    Read(MetaAndPayload, Option<bool>),
    Foreign,
}

/// A piece the policy holds: 24 bytes, no key (the store's entry has it, found by the tag of
/// the object's id and the piece: [`Held::tag`]).
struct Held {
    object: u64,
    /// The policy's clock just after this piece was admitted: its place in the FIFO.
    at: u64,
    name: PieceName,
    /// The object's bucket in the high 24 bits ([`NO_BUCKET`]: not known, a piece registered at
    /// start), [`SPLIT`] and [`CHECKED`] in the low 8.
    bucket_flags: u32,
}

const _: () = assert!(std::mem::size_of::<Held>() == 24);

/// [`Held`]'s bucket when it is not known (buckets are fewer: [`ecdn_placement::MAX_BUCKETS`]).
const NO_BUCKET: u32 = (1 << 24) - 1;
const _: () = assert!(ecdn_placement::MAX_BUCKETS < NO_BUCKET as usize);

/// An EC-Cache object's split.
const SPLIT: u8 = 1;
/// Read once since the start (or written by this process): its key and metadata are known to
/// be this piece's. A piece registered at start and not read yet counts as a split for
/// whole-object eviction (its key is not known), so no other node drops an object for it.
const CHECKED: u8 = 2;

impl Held {
    fn new(object: u64, at: u64, name: PieceName, bucket: Option<usize>, flags: u8) -> Held {
        let bucket = bucket.map_or(NO_BUCKET, |b| (b as u32).min(NO_BUCKET));
        Held {
            object,
            at,
            name,
            bucket_flags: bucket << 8 | u32::from(flags),
        }
    }

    fn flags(&self) -> u8 {
        self.bucket_flags as u8
    }

    fn add_flags(&mut self, flags: u8) {
        self.bucket_flags |= u32::from(flags);
    }

    fn bucket(&self) -> Option<usize> {
        let b = self.bucket_flags >> 8;
        (b != NO_BUCKET).then_some(b as usize)
    }

    fn split(&self) -> bool {
        self.flags() & SPLIT != 0 || self.flags() & CHECKED == 0
    }

    /// The store's tag of this piece's entry.
    fn tag(&self) -> KeyTag {
        tag_of(self.object, self.name)
    }
}

/// The store's tag of piece `name` of the object with id `object` (the tag of
/// [`PieceStore::entry_key`] of its key).
fn tag_of(object: u64, name: PieceName) -> KeyTag {
    let (kind, chunk) = match name {
        PieceName::Replica => (ecdn_store::format::KIND_OBJECT, 0),
        PieceName::Chunk(c) => (ecdn_store::format::KIND_CHUNK, c),
    };
    KeyTag {
        hash: object,
        sub_chunk: 0,
        chunk,
        kind,
    }
}

/// The node's piece policy and the pieces it holds.
pub struct PieceStore {
    policy: Mutex<Policy>,
    /// Payload bytes admitted so far (the node's write load, for write imbalance).
    written: AtomicU64,
    /// Pieces the ring overwrote while the policy still held them.
    ring_lost: AtomicU64,
    /// The cluster's code, for the check of a piece registered at start at its first read.
    cfg: Option<std::sync::Arc<ClusterConfig>>,
    /// Pieces registered at start that turned out not to be this cluster's at their first read.
    foreign: AtomicU64,
}

struct Policy {
    cache: Cache,
    held: HashMap<u64, Held>,
    /// Payload bytes admitted, those found at start included: what was written after a piece
    /// is `clock - at` (a FIFO evicts it when that reaches the capacity).
    clock: u64,
}

impl PieceStore {
    pub fn new(cache: Cache) -> PieceStore {
        PieceStore {
            policy: Mutex::new(Policy {
                cache,
                held: HashMap::new(),
                clock: 0,
            }),
            written: AtomicU64::new(0),
            ring_lost: AtomicU64::new(0),
            cfg: None,
            foreign: AtomicU64::new(0),
        }
    }

    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    pub fn ring_lost(&self) -> u64 {
        self.ring_lost.load(Ordering::Relaxed)
    }

    pub fn capacity(&self) -> u64 {
        lock(&self.policy).cache.capacity()
    }

    /// Pieces the policy holds.
    pub fn len(&self) -> usize {
        lock(&self.policy).held.len()
    }

    /// The piece policy over the pieces `store` holds, registered in the ring's order (see
    /// "Restart" in the module docs); `cache` is the empty policy. Entries that are not pieces
    /// of this cluster, and pieces the policy evicts on the way, leave the store's index.
    pub fn recover(
        store: &mut Store,
        cache: Cache,
        cfg: &ClusterConfig,
    ) -> (PieceStore, Recovered) {
        let t = std::time::Instant::now();
        let mut policy = Policy {
            cache,
            held: HashMap::new(),
            clock: 0,
        };
        let mut found = Recovered::default();
        let mut drop = Vec::new();
        for (_, tag, size) in store.live_seqs() {
            let name = match (tag.kind, tag.chunk, tag.sub_chunk) {
                (ecdn_store::format::KIND_OBJECT, _, _) => PieceName::Replica,
                (ecdn_store::format::KIND_CHUNK, c, 0) if c < 256 => PieceName::Chunk(c),
                _ => {
                    found.foreign += 1;
                    drop.push(tag);
                    continue;
                }
            };
            let object = tag.hash;
            let piece = Self::piece_id(object, name);
            if let Some(old) = policy.held.remove(&piece) {
                // Two keys with one piece id (a hash collision of chunk ids): the newer wins.
                policy.cache.remove(piece);
                drop.push(old.tag());
            }
            if !policy.cache.admit(&Self::request(piece, size)) {
                policy.cache.clear_evicted();
                found.evicted += 1;
                drop.push(tag);
                continue;
            }
            for e in policy.cache.evicted() {
                if let Some(old) = policy.held.remove(&e.id) {
                    found.evicted += 1;
                    drop.push(old.tag());
                }
            }
            policy.cache.clear_evicted();
            policy.clock += size;
            let at = policy.clock;
            policy
                .held
                .insert(piece, Held::new(object, at, name, None, 0));
        }
        found.pieces = policy.held.len() as u64;
        found.bytes = policy.cache.used();
        for tag in drop {
            store.evict_tag(&tag);
        }
        found.millis = t.elapsed().as_millis() as u64;
        let pieces = PieceStore {
            policy: Mutex::new(policy),
            written: AtomicU64::new(0),
            ring_lost: AtomicU64::new(0),
            cfg: Some(std::sync::Arc::new(cfg.clone())),
            foreign: AtomicU64::new(0),
        };
        (pieces, found)
    }

    /// Pieces registered at start that were not this cluster's (found at their first read).
    pub fn foreign(&self) -> u64 {
        self.foreign.load(Ordering::Relaxed)
    }

    /// The policy id and object id of the piece stored under `key` with metadata `meta`, if
    /// it is one of this cluster's pieces (see [`check_meta`]).
    fn name_of(
        key: &EntryKey,
        meta: &[u8],
        payload_len: u64,
        cfg: &ClusterConfig,
    ) -> Option<(u64, u64)> {
        let (bytes, piece) = match key {
            EntryKey::Object { key } => (key, PieceName::Replica),
            EntryKey::Chunk {
                key,
                chunk,
                sub_chunk: 0,
            } => (key, PieceName::Chunk(*chunk)),
            EntryKey::Chunk { .. } => return None,
        };
        let text = std::str::from_utf8(bytes).ok()?;
        let meta = PieceMeta::decode(meta).ok()?;
        check_meta(cfg, piece, text, &meta, payload_len).ok()?;
        let object = ecdn_trace::hash_id(bytes);
        Some((Self::piece_id(object, piece), object))
    }

    fn request(piece: u64, size: u64) -> Request {
        Request {
            time: 0,
            id: piece,
            size: size.max(1),
            next_access: -1,
        }
    }

    /// The store tag of a piece the policy holds, and whether its first read is still to
    /// check it (registered at start, not read since).
    fn held_tag(&self, piece: u64) -> Option<(KeyTag, bool)> {
        lock(&self.policy)
            .held
            .get(&piece)
            .map(|h| (h.tag(), h.flags() & CHECKED == 0))
    }

    /// The policy id of piece `piece` of the object with id `object` (the simulator's ids).
    pub fn piece_id(object: u64, piece: PieceName) -> u64 {
        match piece {
            PieceName::Replica => object,
            PieceName::Chunk(c) => chunk_id(object, usize::from(c)),
        }
    }

    /// The store key of piece `piece` of the object cached under `key`.
    pub fn entry_key(key: &str, piece: PieceName) -> EntryKey {
        match piece {
            PieceName::Replica => EntryKey::object(key.as_bytes()),
            PieceName::Chunk(c) => EntryKey::chunk(key.as_bytes(), c, 0),
        }
    }

    /// The pieces of object `object` (a replica, chunks `0..chunks`) the policy holds.
    pub fn held(&self, object: u64, chunks: usize) -> Vec<PieceName> {
        let p = lock(&self.policy);
        let mut out = Vec::new();
        if p.held.contains_key(&object) {
            out.push(PieceName::Replica);
        }
        for c in 0..chunks.min(255) {
            if p.held.contains_key(&chunk_id(object, c)) {
                out.push(PieceName::Chunk(c as u16));
            }
        }
        out
    }

    /// [`PieceStore::held`] with each piece's age: the payload bytes admitted after it (in a
    /// FIFO it is evicted when they reach [`PieceStore::capacity`]).
    pub fn held_ages(&self, object: u64, chunks: usize) -> (Vec<PieceName>, Vec<u64>) {
        let p = lock(&self.policy);
        let mut names = Vec::new();
        let mut ages = Vec::new();
        let ids = std::iter::once((object, PieceName::Replica))
            .chain((0..chunks.min(255)).map(|c| (chunk_id(object, c), PieceName::Chunk(c as u16))));
        for (id, name) in ids {
            if let Some(h) = p.held.get(&id) {
                names.push(name);
                ages.push(p.clock - h.at);
            }
        }
        (names, ages)
    }

    /// A held piece's metadata and payload bytes `range` (all of it with `None`; clamped to
    /// the payload), every block verified. `None` when the policy does not hold it, or the
    /// store cannot give it (overwritten by the ring, corrupt): then the policy forgets it.
    pub async fn read(
        &self,
        disk: &Disk,
        piece: u64,
        range: Option<Range<u64>>,
    ) -> Option<(Vec<u8>, Bytes)> {
        let (tag, unchecked) = self.held_tag(piece)?;
        let check = if unchecked { self.cfg.clone() } else { None };
        let read = disk
            .read(move |s| -> Result<Option<FirstRead>, StoreError> {
                let h = match s.open_tag(&tag)? {
                    Opened::Hit(h) => h,
                    Opened::Miss | Opened::Corrupt { .. } => return Ok(None),
                };
                // A piece registered at start: its key and metadata checked at its first read.
                let split = match &check {
                    None => None,
                    Some(cfg) => match Self::name_of(h.key(), h.meta(), h.payload_len(), cfg) {
                        Some((id, _)) if id == piece => Some(is_split(h.key())),
                        _ => return Ok(Some(FirstRead::Foreign)),
                    },
                };
                let len = h.payload_len();
                let r = range.unwrap_or(0..len);
                let r = r.start.min(len)..r.end.min(len);
                let meta = h.meta().to_vec();
                // Mapped from the page cache when it can be (no copy through this process),
                // else copied; every block verified either way.
                let got = match s.read_payload_shared(&h, r.clone())? {
                    Some(SharedPayload::Mapped(m)) => m
                        .verify_all()
                        .map(|(map, want)| (meta, Bytes::from_owner(map).slice(want))),
                    // A copy, of the range's start only when it is long: the rest in one more
                    // read.
                    Some(SharedPayload::Owned(mut v)) => {
                        let done = r.start + v.len() as u64;
                        if done < r.end {
                            let Some(rest) = s.read_payload(&h, done..r.end)? else {
                                return Ok(None);
                            };
                            v.extend_from_slice(&rest);
                        }
                        Some((meta, Bytes::from(v)))
                    }
                    None => None,
                };
                Ok(got.map(|got| FirstRead::Read(got, split)))
            })
            .await;
        match read {
            Some(Ok(Some(FirstRead::Read(got, split)))) => {
                if let Some(split) = split {
                    let mut p = lock(&self.policy);
                    if let Some(h) = p.held.get_mut(&piece) {
                        h.add_flags(CHECKED | if split { SPLIT } else { 0 });
                    }
                }
                Some(got)
            }
            Some(Ok(Some(FirstRead::Foreign))) => {
                // Not this cluster's piece: out of the policy and the index.
                if self.forget(piece) {
                    self.foreign.fetch_add(1, Ordering::Relaxed);
                }
                disk.write(move |s| s.evict_tag(&tag)).await;
                None
            }
            Some(Err(e)) => {
                disk.failed("reading a piece", &e);
                self.lost(piece);
                None
            }
            _ => {
                self.lost(piece);
                None
            }
        }
    }

    /// Drops every piece of `object` this node holds ([`PieceStore::drop_pieces`]): how many.
    pub async fn drop_object(&self, disk: &Disk, object: u64, chunks: usize) -> u64 {
        self.drop_pieces(disk, object, self.held(object, chunks))
            .await
    }

    /// Drops pieces `names` of `object` (a `PURGE`): the policy forgets them and the store marks
    /// them dead durably ([`ecdn_store::Store::tombstone_tag`]: no restart brings them back).
    /// How many it held.
    pub async fn drop_pieces(&self, disk: &Disk, object: u64, names: Vec<PieceName>) -> u64 {
        let mut tags = Vec::new();
        for name in names {
            let piece = Self::piece_id(object, name);
            if self.forget(piece) {
                tags.push(tag_of(object, name));
            }
        }
        if tags.is_empty() {
            return 0;
        }
        let dropped = tags.len() as u64;
        // The synchronous writes under the read lock, as `Disk::remove` does; dropping the
        // entries from the index under the write lock.
        let marked = disk
            .read(move |s| {
                tags.iter()
                    .map(|t| s.tombstone_tag(t))
                    .collect::<Vec<Result<Option<ecdn_store::Tombstone>, StoreError>>>()
            })
            .await;
        let mut dead = Vec::new();
        for r in marked.into_iter().flatten() {
            match r {
                Ok(t) => dead.extend(t),
                Err(e) => disk.failed("marking a purged piece dead", &e),
            }
        }
        if !dead.is_empty() {
            disk.write(move |s| {
                for t in dead {
                    s.forget(t);
                }
            })
            .await;
        }
        dropped
    }

    /// The ring lost a piece the policy held (found missing when read): forget it.
    pub fn lost(&self, piece: u64) {
        if self.forget(piece) {
            self.ring_lost.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Drops a piece from the policy before a new copy of it is put (resync: the new copy
    /// starts at the head of the FIFO, as a new piece); its old bytes stay on disk until the
    /// put replaces them. Whether it held it.
    pub fn renew(&self, piece: u64) -> bool {
        self.forget(piece)
    }

    /// Drops a piece from the policy; whether it held it.
    fn forget(&self, piece: u64) -> bool {
        let mut p = lock(&self.policy);
        let held = p.held.remove(&piece).is_some();
        if held {
            p.cache.remove(piece);
        }
        held
    }

    /// Admits and writes piece `piece` of object `object` (of `bucket`, for a cached object)
    /// under `key`. Pieces the policy evicts to make room leave the store's index; they are
    /// appended to `evicted` (a node drops its decoded copies of their objects, and with
    /// `evict_together` the writer has the other nodes drop the objects' other pieces).
    #[allow(clippy::too_many_arguments)]
    pub async fn put(
        &self,
        disk: &Disk,
        piece: u64,
        object: u64,
        bucket: Option<usize>,
        key: EntryKey,
        meta: Vec<u8>,
        payload: Bytes,
        evicted: &mut Vec<Evicted>,
    ) -> Put {
        let size = payload.len() as u64;
        let name = match &key {
            EntryKey::Chunk { chunk, .. } => PieceName::Chunk(*chunk),
            EntryKey::Object { .. } => PieceName::Replica,
        };
        debug_assert_eq!(tag_of(object, name), key.tag());
        let flags = CHECKED | if is_split(&key) { SPLIT } else { 0 };
        let mut gone = Vec::new();
        {
            let mut p = lock(&self.policy);
            let req = Self::request(piece, size);
            if p.held.contains_key(&piece) {
                return Put::Present;
            }
            if !p.cache.admit(&req) {
                p.cache.clear_evicted();
                return Put::Refused;
            }
            let ids: Vec<u64> = p.cache.evicted().iter().map(|e| e.id).collect();
            p.cache.clear_evicted();
            for id in ids {
                if let Some(h) = p.held.remove(&id) {
                    evicted.push(Evicted {
                        object: h.object,
                        split: h.split(),
                        piece: h.name,
                        bucket: h.bucket(),
                    });
                    gone.push(h.tag());
                }
            }
            p.clock += size;
            let at = p.clock;
            p.held
                .insert(piece, Held::new(object, at, name, bucket, flags));
        }
        self.written.fetch_add(size, Ordering::Relaxed);
        let written = disk
            .write(move |s| {
                for t in &gone {
                    s.evict_tag(t);
                }
                s.put(&key, &meta, &payload)
            })
            .await;
        match written {
            Some(Ok(_)) => Put::Stored,
            Some(Err(e)) => {
                if !matches!(e, StoreError::TooLarge { .. }) {
                    disk.failed("writing a piece", &e);
                }
                self.forget(piece);
                Put::Refused
            }
            None => {
                self.forget(piece);
                Put::Refused
            }
        }
    }
}

/// CRC-32C of every sub-chunk of every chunk, chunk-major (see [`Coding::crcs`]), and their
/// digests in the same order (see [`Coding::digests`]).
pub(in crate::node) fn chunk_sums(
    chunks: &[Vec<u8>],
    sub_chunk: usize,
) -> (Vec<u32>, Vec<ecdn_cluster::piece::Digest>) {
    let subs = || chunks.iter().flat_map(|c| c.chunks(sub_chunk.max(1)));
    (
        subs().map(ecdn_store::crc32c).collect(),
        subs().map(ecdn_cluster::piece::digest).collect(),
    )
}

/// Checks a whole chunk's bytes against its coding: its length, and the CRC-32C of every
/// sub-chunk. `Err` names what failed.
pub(in crate::node) fn check_chunk(coding: &Coding, payload: &[u8]) -> Result<(), String> {
    if payload.len() as u64 != coding.chunk_size() {
        return Err("chunk length does not match its metadata".into());
    }
    let chunk = usize::from(coding.chunk);
    for (j, sub) in payload.chunks(coding.sub_chunk.max(1) as usize).enumerate() {
        if coding.crc(chunk, j as u64) != Some(ecdn_store::crc32c(sub)) {
            return Err(format!("sub-chunk {j} fails its checksum"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use ecdn_policy::spec::EvictionKind;
    use ecdn_store::StoreConfig;

    use super::*;

    fn cfg() -> ClusterConfig {
        let mut text = "scheme = \"c2dn\"\nk = 3\np = 1\nsub_chunk = \"4KiB\"\n\
                        key = \"0123456789abcdef0123\"\ncoordinator = \"127.0.0.1:1\"\n"
            .to_string();
        for i in 0..4 {
            text.push_str(&format!(
                "[[node]]\nid = {i}\nclient = \"127.0.0.1:{}\"\npeer = \"127.0.0.1:{}\"\n",
                10 + i,
                20 + i
            ));
        }
        ClusterConfig::parse(&text).unwrap()
    }

    /// A chunk of a `size`-byte object coded (3, 1) in 4 KiB sub-chunks: its metadata and
    /// payload (the checksums are not what is tested here).
    fn chunk(chunk: u16, size: u64) -> (Vec<u8>, Vec<u8>) {
        let coding = Coding {
            k: 3,
            p: 1,
            chunk,
            sub_chunk: 4096,
            size,
            crcs: vec![0; 4 * ecdn_cluster::piece::stripes(size, 3, 4096) as usize],
            digests: Vec::new(),
        };
        let len = coding.chunk_size() as usize;
        let meta = PieceMeta {
            coding: Some(coding),
            http: b"h".to_vec(),
        };
        (meta.encode(), vec![7; len])
    }

    fn replica(len: usize) -> (Vec<u8>, Vec<u8>) {
        let meta = PieceMeta {
            coding: None,
            http: b"h".to_vec(),
        };
        (meta.encode(), vec![1; len])
    }

    fn policy(capacity: u64) -> Cache {
        Cache::new(EvictionKind::Fifo.build(capacity), None)
    }

    #[test]
    fn recovery_registers_pieces_in_ring_order_and_a_first_read_drops_what_is_not_a_piece() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(StoreConfig::new(dir.path().join("ring"), 4 << 20)).unwrap();
        let cfg = cfg();
        // Five replicas of 100 KB and a chunk, oldest first, then an entry of the standalone
        // disk cache (no piece metadata), a chunk of another code and a sub-chunk key.
        for i in 0..5 {
            let (m, p) = replica(100_000);
            store
                .put(&EntryKey::object(format!("/r{i}")), &m, &p)
                .unwrap();
        }
        let (m, p) = chunk(2, 300_000);
        store.put(&EntryKey::chunk("/big", 2, 0), &m, &p).unwrap();
        store
            .put(&EntryKey::object("/plain"), b"not a piece", b"x")
            .unwrap();
        let (m, p) = chunk(1, 300_000);
        store.put(&EntryKey::chunk("/wrong", 2, 0), &m, &p).unwrap();
        store.put(&EntryKey::chunk("/sub", 0, 1), &m, &p).unwrap();

        // A policy of 400 KB, registered from the index alone (nothing read): entries in
        // ring order with their payload sizes, so the first four replicas are evicted again,
        // as a FIFO that went on where it stopped would have (the chunks are 100 KB each, the
        // standalone entry 1 byte); the sub-chunk key names no piece and goes at once.
        let (pieces, found) = PieceStore::recover(&mut store, policy(400_000), &cfg);
        assert_eq!(
            (found.pieces, found.bytes, found.evicted, found.foreign),
            (4, 300_001, 4, 1)
        );
        let object = |k: &str| ecdn_trace::hash_id(k.as_bytes());
        for i in 0..5 {
            let held = pieces.held(object(&format!("/r{i}")), 4);
            assert_eq!(held.is_empty(), i < 4, "replica {i}");
        }
        assert_eq!(pieces.held(object("/big"), 4), vec![PieceName::Chunk(2)]);
        for k in ["/r0", "/r3"] {
            assert!(!store.contains(&EntryKey::object(k)), "{k}");
        }
        assert!(!store.contains(&EntryKey::chunk("/sub", 0, 1)));
        // The first reads check what the index could not: the standalone entry and the chunk
        // of another code are dropped (policy and index) and read as absent; the pieces are
        // read.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let disk = Disk::new(store);
        rt.block_on(async {
            let id = |k: &str, name| PieceStore::piece_id(object(k), name);
            let chunk2 = PieceName::Chunk(2);
            assert!(pieces
                .read(&disk, id("/r4", PieceName::Replica), None)
                .await
                .is_some());
            assert!(pieces.read(&disk, id("/big", chunk2), None).await.is_some());
            assert!(pieces
                .read(&disk, id("/plain", PieceName::Replica), None)
                .await
                .is_none());
            assert!(pieces
                .read(&disk, id("/wrong", chunk2), None)
                .await
                .is_none());
            assert_eq!((pieces.len(), pieces.foreign()), (2, 2));
            assert_eq!(pieces.ring_lost(), 0);
            let gone = disk
                .read(|s| {
                    (
                        s.contains(&EntryKey::object("/plain")),
                        s.contains(&EntryKey::chunk("/wrong", 2, 0)),
                        s.contains(&EntryKey::object("/r4")),
                    )
                })
                .await
                .unwrap();
            assert_eq!(gone, (false, false, true));
        });
        // The FIFO goes on: a 300 KB piece evicts the oldest held one, replica 4, alone.
        let mut p = pieces.policy.lock().unwrap();
        assert!(p.cache.admit(&PieceStore::request(object("/new"), 300_000)));
        let evicted: Vec<u64> = p.cache.evicted().iter().map(|e| e.id).collect();
        assert_eq!(evicted, vec![object("/r4")]);
    }

    #[test]
    fn a_purged_piece_does_not_come_back_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ring");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let cfg = cfg();
        rt.block_on(async {
            let store = Store::open(StoreConfig::new(&path, 4 << 20)).unwrap();
            let disk = Disk::new(store);
            let pieces = PieceStore::new(policy(1 << 20));
            let mut evicted = Vec::new();
            for k in ["/kept", "/purged"] {
                let (m, p) = replica(10_000);
                let object = ecdn_trace::hash_id(k.as_bytes());
                let put = pieces
                    .put(
                        &disk,
                        object,
                        object,
                        None,
                        EntryKey::object(k),
                        m,
                        p.into(),
                        &mut evicted,
                    )
                    .await;
                assert_eq!(put, Put::Stored);
            }
            let purged = ecdn_trace::hash_id(b"/purged");
            assert_eq!(pieces.drop_object(&disk, purged, 4).await, 1);
            disk.close().await;
        });
        let mut store = Store::open(StoreConfig::new(&path, 4 << 20)).unwrap();
        let (pieces, found) = PieceStore::recover(&mut store, policy(1 << 20), &cfg);
        assert_eq!((found.pieces, found.foreign), (1, 0));
        assert_eq!(
            pieces.held(ecdn_trace::hash_id(b"/kept"), 4),
            vec![PieceName::Replica]
        );
        assert!(pieces.held(ecdn_trace::hash_id(b"/purged"), 4).is_empty());
    }
}
