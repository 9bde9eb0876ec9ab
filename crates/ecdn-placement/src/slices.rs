//! Slices: how a large object becomes several cache objects.
//!
//! A CDN does not cache a multi-GiB file as one object: Traffic Server's slice plugin and
//! nginx's slice module cache it as fixed-size byte ranges, each a cache object of its own.
//! ecdn does the same. An object larger than the slice size `S` is cut into `⌈size / S⌉`
//! slices; slice `i` holds the object's bytes `[i·S, min((i+1)·S, size))` and is cached under
//! [`slice_id`]`(object, i)`. Each slice then has its own bucket, and is coded (C2DN: if it is
//! larger than the coding threshold) or replicated and placed like any object, so a handful
//! of huge objects no longer decide which servers write most, and a cache evicts a huge
//! object a slice at a time.
//!
//! An object of at most `S` bytes is not sliced: it stays one cache object under its own id.
//! The simulator and the live node both cut objects with this module, so a slice is the same
//! cache object, in the same bucket, in both.

use std::ops::Range;

use crate::hash::{mix64, GOLDEN_GAMMA};

/// The smallest slice size (64 KiB).
pub const MIN_SLICE: u64 = 64 << 10;

/// The most slices an object is cut into: an object longer than this many slices (4 TiB at
/// 4 MiB, 64 GiB at [`MIN_SLICE`]) is not sliced, so a trace's size near 2⁶⁴ (a corrupt or
/// hostile record) cannot make the simulator walk 2⁴² slices; it is one object, which no cache
/// admits. (A node learns an object's length from its origin and streams the slices a client
/// reads, whatever their number.)
pub const MAX_SLICES: u64 = 1 << 20;

/// The cache id of slice `index` of object `object_id`.
///
/// Definition (fixed; changing it changes every simulated result with slices and orphans every
/// stored slice): `mix64((object_id ⊕ 0xbb67ae8584caa73b) + φ · (index + 1))`, with φ =
/// [`GOLDEN_GAMMA`], wrapping arithmetic and [`mix64`] SplitMix64's finaliser (a bijection).
/// For a fixed object the slices' ids are distinct; ids of different objects' slices collide
/// only as any two 64-bit hashes do. (`0xbb67ae8584caa73b` is the second SHA-512 initial hash
/// word, as [`crate::chunk_id`] uses the first.)
#[inline]
pub fn slice_id(object_id: u64, index: u64) -> u64 {
    mix64((object_id ^ 0xbb67_ae85_84ca_a73b).wrapping_add(GOLDEN_GAMMA.wrapping_mul(index + 1)))
}

/// One slice of an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    /// The slice's cache id ([`slice_id`]), or the object's own id when it is not sliced.
    pub id: u64,
    /// Which slice: 0 for the first (and for an object that is not sliced).
    pub index: u64,
    /// Where the slice starts in the object.
    pub offset: u64,
    /// Its length in bytes (the last slice may be shorter than the slice size).
    pub len: u64,
}

impl Slice {
    /// The object's bytes this slice holds.
    pub fn range(&self) -> Range<u64> {
        self.offset..self.offset + self.len
    }
}

/// How objects are cut into slices: objects larger than `size` bytes are sliced; `size` 0
/// slices nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Slicing {
    size: u64,
}

impl Slicing {
    /// No object is sliced.
    pub const OFF: Slicing = Slicing { size: 0 };

    /// What a cluster slices unless told otherwise, simulated (`ecdn sim cluster --slice`) or
    /// live (the cluster file's `slice_size`): objects above 4 MiB, in 4 MiB slices. Measured
    /// on 2M-request traces of the tc-0 and eu-7 classes with the default parity rebalance
    /// (BENCHMARKS.md, issue 63): 1, 2 and 4 MiB bring the write imbalance to 1.005–1.016 on
    /// both, 8 MiB leaves eu-7 at 1.10; above 1 MiB the default demo's workload (lognormal
    /// sizes, median 256 KiB) is hardly sliced, where 1 MiB slices took its write imbalance
    /// from 1.048 to 1.070; Traffic Server's slice plugin defaults to 1 MiB blocks.
    pub const DEFAULT: Slicing = Slicing { size: 4 << 20 };

    /// Objects above `size` bytes are sliced into `size`-byte slices (0: none are). A size
    /// below [`MIN_SLICE`] is refused: it would cut a large object into millions of pieces.
    pub fn new(size: u64) -> Result<Slicing, String> {
        if size != 0 && size < MIN_SLICE {
            return Err(format!(
                "slice size {size} bytes: 0 (no slices) or at least {MIN_SLICE} bytes"
            ));
        }
        Ok(Slicing { size })
    }

    /// The slice size (0 when slicing is off).
    pub const fn size(&self) -> u64 {
        self.size
    }

    /// Whether an object of `object_size` bytes is sliced: above the slice size, and at most
    /// [`MAX_SLICES`] slices long.
    pub const fn slices_object(&self, object_size: u64) -> bool {
        self.size > 0 && object_size > self.size && object_size.div_ceil(self.size) <= MAX_SLICES
    }

    /// How many cache objects an object of `object_size` bytes is: its slices, or 1.
    pub fn count(&self, object_size: u64) -> u64 {
        if self.slices_object(object_size) {
            object_size.div_ceil(self.size)
        } else {
            1
        }
    }

    /// Slice `index` of object `object_id` of `object_size` bytes; `None` past its end. An
    /// object that is not sliced has one slice, itself (its own id, all its bytes).
    pub fn slice(&self, object_id: u64, object_size: u64, index: u64) -> Option<Slice> {
        if !self.slices_object(object_size) {
            return (index == 0).then_some(Slice {
                id: object_id,
                index: 0,
                offset: 0,
                len: object_size,
            });
        }
        let offset = index.checked_mul(self.size)?;
        if offset >= object_size {
            return None;
        }
        Some(Slice {
            id: slice_id(object_id, index),
            index,
            offset,
            len: (object_size - offset).min(self.size),
        })
    }

    /// Every slice of the object, in order.
    pub fn slices(&self, object_id: u64, object_size: u64) -> impl Iterator<Item = Slice> + '_ {
        (0..self.count(object_size)).map_while(move |i| self.slice(object_id, object_size, i))
    }

    /// The slices that hold any of the object's bytes `range` (clipped to the object), in
    /// order: what a range request reads.
    pub fn covering(
        &self,
        object_id: u64,
        object_size: u64,
        range: Range<u64>,
    ) -> impl Iterator<Item = Slice> + '_ {
        let end = range.end.min(object_size);
        let (first, last) = if range.start >= end {
            (1, 0)
        } else if self.slices_object(object_size) {
            (range.start / self.size, (end - 1) / self.size)
        } else {
            (0, 0)
        };
        (first..last + 1).map_while(move |i| self.slice(object_id, object_size, i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_objects_are_not_sliced() {
        let s = Slicing::new(4 << 20).unwrap();
        assert_eq!(s.count(4 << 20), 1);
        let only: Vec<Slice> = s.slices(7, 4 << 20).collect();
        assert_eq!(
            only,
            vec![Slice {
                id: 7,
                index: 0,
                offset: 0,
                len: 4 << 20
            }]
        );
        assert_eq!(Slicing::OFF.count(u64::MAX), 1);
        assert_eq!(Slicing::OFF.slices(9, 0).count(), 1);
    }

    #[test]
    fn an_object_of_more_than_max_slices_is_one_object() {
        let s = Slicing::DEFAULT;
        assert_eq!(s.count(MAX_SLICES * s.size()), MAX_SLICES);
        assert!(!s.slices_object(MAX_SLICES * s.size() + 1));
        assert_eq!(s.count(u64::MAX), 1);
        assert_eq!(s.slices(7, u64::MAX).count(), 1);
    }

    #[test]
    fn slices_tile_the_object_and_have_distinct_ids() {
        let s = Slicing { size: 1000 };
        let all: Vec<Slice> = s.slices(42, 3500).collect();
        assert_eq!(all.len(), 4);
        let mut next = 0;
        for (i, sl) in all.iter().enumerate() {
            assert_eq!(sl.index, i as u64);
            assert_eq!(sl.offset, next);
            assert_eq!(sl.id, slice_id(42, i as u64));
            next = sl.range().end;
        }
        assert_eq!(next, 3500);
        assert_eq!(all[3].len, 500);
        let mut ids: Vec<u64> = all.iter().map(|s| s.id).collect();
        ids.push(42);
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 5);
        // Exactly a multiple: no empty last slice.
        assert_eq!(s.slices(1, 3000).count(), 3);
        assert_eq!(s.slice(1, 3000, 3), None);
    }

    #[test]
    fn a_range_reads_the_slices_it_touches() {
        let s = Slicing { size: 1000 };
        let idx = |r: Range<u64>| s.covering(5, 3500, r).map(|x| x.index).collect::<Vec<_>>();
        assert_eq!(idx(0..1), vec![0]);
        assert_eq!(idx(999..1001), vec![0, 1]);
        assert_eq!(idx(1000..2000), vec![1]);
        assert_eq!(idx(2500..10_000), vec![2, 3]);
        assert_eq!(idx(3500..4000), Vec::<u64>::new());
        assert_eq!(idx(7..7), Vec::<u64>::new());
        // An object that is not sliced is read whole.
        let whole: Vec<Slice> = s.covering(5, 800, 10..20).collect();
        assert_eq!(whole.len(), 1);
        assert_eq!(whole[0].id, 5);
    }

    #[test]
    fn slice_ids_follow_their_definition() {
        // Stored slices and recorded results depend on these values.
        let def = |o: u64, i: u64| {
            mix64((o ^ 0xbb67_ae85_84ca_a73b).wrapping_add(GOLDEN_GAMMA.wrapping_mul(i + 1)))
        };
        for (o, i) in [(0, 0), (42, 7), (u64::MAX, 1 << 40)] {
            assert_eq!(slice_id(o, i), def(o, i));
        }
        assert_eq!(slice_id(0, 0), 0x0d35_b78b_9930_a2bd);
    }
}
