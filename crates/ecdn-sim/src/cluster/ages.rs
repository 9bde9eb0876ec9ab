//! How old each cached piece is: the bytes its server has written since it, as a fraction of
//! the server's capacity. In a FIFO that fraction is how far the piece has moved towards
//! eviction (at 1 it leaves). The live nodes keep the same clock (`ecdn-node`'s piece store:
//! a piece's `at`, the store's write clock just after it).
//!
//! Kept only when something reads it: background repair (it skips objects near eviction) and
//! resync (it rewrites them; `resync.rs`).

use super::Map;

/// Per server, per piece it holds, its write clock (bytes written) just after the piece.
pub(super) struct PieceAges {
    on: bool,
    clock_after: Vec<Map<u128>>,
}

impl PieceAges {
    pub(super) fn new(on: bool, servers: usize) -> PieceAges {
        PieceAges {
            on,
            clock_after: if on {
                (0..servers)
                    .map(|s| Map::with_hasher(foldhash::fast::FixedState::with_seed(80 + s as u64)))
                    .collect()
            } else {
                Vec::new()
            },
        }
    }

    #[inline]
    pub(super) fn on(&self) -> bool {
        self.on
    }

    /// Server `server` now holds piece `key`, its write clock at `clock` (after the piece).
    #[inline]
    pub(super) fn stored(&mut self, server: usize, key: u64, clock: u128) {
        if let Some(m) = self.clock_after.get_mut(server) {
            m.insert(key, clock);
        }
    }

    /// Server `server` no longer holds piece `key`.
    #[inline]
    pub(super) fn dropped(&mut self, server: usize, key: u64) {
        if let Some(m) = self.clock_after.get_mut(server) {
            m.remove(&key);
        }
    }

    /// Server `server` lost its whole cache.
    pub(super) fn emptied(&mut self, server: usize) {
        if let Some(m) = self.clock_after.get_mut(server) {
            m.clear();
        }
    }

    /// The fraction of its FIFO (`capacity` bytes) that `server`, whose write clock is at
    /// `written`, has written after piece `key` (as old as the server's writes if unknown).
    pub(super) fn age(&self, server: usize, key: u64, written: u128, capacity: u64) -> f64 {
        let at = self
            .clock_after
            .get(server)
            .and_then(|m| m.get(&key))
            .copied()
            .unwrap_or(0);
        written.saturating_sub(at) as f64 / capacity.max(1) as f64
    }
}
