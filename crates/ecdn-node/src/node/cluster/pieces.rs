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

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use std::ops::Range;

use bytes::Bytes;
use ecdn_cluster::wire::PieceName;
use ecdn_placement::chunk_id;
use ecdn_policy::{Cache, Request};
use ecdn_store::{EntryKey, Opened, StoreError};

use super::super::disk::Disk;
use super::super::lock;

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

/// A piece's metadata and payload bytes, as read from the store.
type MetaAndPayload = (Vec<u8>, Vec<u8>);

struct Held {
    key: EntryKey,
    object: u64,
}

/// The node's piece policy and the pieces it holds.
pub struct PieceStore {
    policy: Mutex<Policy>,
    /// Payload bytes admitted so far (the node's write load, for write imbalance).
    written: AtomicU64,
    /// Pieces the ring overwrote while the policy still held them.
    ring_lost: AtomicU64,
}

struct Policy {
    cache: Cache,
    held: HashMap<u64, Held>,
}

impl PieceStore {
    pub fn new(cache: Cache) -> PieceStore {
        PieceStore {
            policy: Mutex::new(Policy {
                cache,
                held: HashMap::new(),
            }),
            written: AtomicU64::new(0),
            ring_lost: AtomicU64::new(0),
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

    fn request(piece: u64, size: u64) -> Request {
        Request {
            time: 0,
            id: piece,
            size: size.max(1),
            next_access: -1,
        }
    }

    /// The store key of a piece the policy holds.
    pub fn key_of(&self, piece: u64) -> Option<EntryKey> {
        lock(&self.policy).held.get(&piece).map(|h| h.key.clone())
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

    /// A held piece's metadata and payload bytes `range` (all of it with `None`; clamped to
    /// the payload), every block verified. `None` when the policy does not hold it, or the
    /// store cannot give it (overwritten by the ring, corrupt): then the policy forgets it.
    pub async fn read(
        &self,
        disk: &Disk,
        piece: u64,
        range: Option<Range<u64>>,
    ) -> Option<(Vec<u8>, Bytes)> {
        let key = self.key_of(piece)?;
        let read = disk
            .read(move |s| -> Result<Option<MetaAndPayload>, StoreError> {
                let h = match s.open_entry(&key)? {
                    Opened::Hit(h) => h,
                    Opened::Miss | Opened::Corrupt { .. } => return Ok(None),
                };
                let len = h.payload_len();
                let r = range.unwrap_or(0..len);
                let r = r.start.min(len)..r.end.min(len);
                Ok(s.read_payload(&h, r)?.map(|p| (h.meta().to_vec(), p)))
            })
            .await;
        match read {
            Some(Ok(Some((meta, payload)))) => Some((meta, Bytes::from(payload))),
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

    /// Drops every piece of `object` this node holds (a `PURGE`): the policy forgets them and
    /// the store's index drops them. Whether it held any.
    pub async fn purge(&self, disk: &Disk, object: u64, chunks: usize) -> bool {
        let mut keys = Vec::new();
        for name in self.held(object, chunks) {
            let piece = Self::piece_id(object, name);
            let key = self.key_of(piece);
            if self.forget(piece) {
                keys.extend(key);
            }
        }
        if keys.is_empty() {
            return false;
        }
        disk.write(move |s| {
            for k in &keys {
                s.evict(k);
            }
        })
        .await;
        true
    }

    /// The ring lost a piece the policy held (found missing when read): forget it.
    pub fn lost(&self, piece: u64) {
        if self.forget(piece) {
            self.ring_lost.fetch_add(1, Ordering::Relaxed);
        }
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

    /// Admits and writes piece `piece` of object `object` under `key`. Pieces the policy evicts
    /// to make room leave the store's index; their objects' ids are appended to `evicted` (a
    /// node drops its decoded copies of them).
    #[allow(clippy::too_many_arguments)]
    pub async fn put(
        &self,
        disk: &Disk,
        piece: u64,
        object: u64,
        key: EntryKey,
        meta: Vec<u8>,
        payload: Bytes,
        evicted: &mut Vec<u64>,
    ) -> Put {
        let size = payload.len() as u64;
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
                    evicted.push(h.object);
                    gone.push(h.key);
                }
            }
            p.held.insert(
                piece,
                Held {
                    key: key.clone(),
                    object,
                },
            );
        }
        self.written.fetch_add(size, Ordering::Relaxed);
        let written = disk
            .write(move |s| {
                for k in &gone {
                    s.evict(k);
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
