//! A coded object as a read sees it: its layout, coding and sources, what its sources said
//! ([`Heard`]), how an EC-Cache object is read ([`LateBinding`]), and the windows an answer's
//! bytes are read in.

use std::ops::Range;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use ecdn_cluster::piece::Coding;
use ecdn_codec::ObjectLayout;

use crate::node::hoc::Striped;

/// Bytes of sub-chunks asked of one chunk's server per request.
pub(super) const WINDOW_BYTES: u64 = 1 << 20;

/// A coded object as the serving node reads it.
pub(in crate::node) struct CodedObject {
    pub(in crate::node) key: String,
    /// Its id (the pieces' ids derive from it).
    pub(in crate::node) object: u64,
    pub(in crate::node) layout: ObjectLayout,
    pub(in crate::node) coding: Coding,
    /// Per chunk (`0..K+P`), a node that holds it.
    pub(in crate::node) sources: Vec<Option<usize>>,
    /// Chunks already in memory, checked (a partial hit's chunks fetched from the origin);
    /// empty, or one entry per chunk.
    pub(in crate::node) supplied: Vec<Option<Bytes>>,
    /// The object's entry in the HOC, when the HOC holds it in stripes: a window whose
    /// stripes it holds is taken from it, and every window read is decoded whole-stripe and
    /// kept in it.
    pub(in crate::node) hoc: Option<Arc<Striped>>,
    /// An EC-Cache object's read: late binding instead of data first (see the module
    /// documentation).
    pub(in crate::node) late: Option<Arc<LateBinding>>,
    /// What the chunks' servers answered this read (see [`Heard`]).
    pub(in crate::node) heard: Heard,
}

/// What the servers of a read's chunks said by answering it: per chunk asked of a peer,
/// whether its source holds it (a `200`) or not (a `404`). A chunk read from this node, not
/// asked, or whose answer never came has no entry. The serving node's check that every
/// target holds its chunk (`c2dn/read.rs`) takes these answers instead of asking those servers
/// again.
#[derive(Debug, Default)]
pub(in crate::node) struct Heard(Mutex<Vec<(usize, bool)>>);

impl Heard {
    pub(super) fn record(&self, chunk: usize, held: bool) {
        let mut heard = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match heard.iter_mut().find(|(c, _)| *c == chunk) {
            // A chunk lacking once is lacking: a later window's answer does not undo it.
            Some((_, h)) => *h &= held,
            None => heard.push((chunk, held)),
        }
    }

    /// Whether the source of `chunk` said it holds it (`None`: it said nothing).
    pub(in crate::node) fn of(&self, chunk: usize) -> Option<bool> {
        let heard = self.0.lock().unwrap_or_else(|e| e.into_inner());
        heard.iter().find(|(c, _)| *c == chunk).map(|&(_, h)| h)
    }
}

/// How an EC-Cache object is read (§4.3; see the module documentation).
#[derive(Debug, Default)]
pub(in crate::node) struct LateBinding {
    /// The chunks asked at once in every window: `k + Δ`, chosen at random.
    pub(in crate::node) first: Vec<usize>,
    /// The object's other chunks with a source, in random order: each read that fails is
    /// replaced by the next.
    pub(in crate::node) spare: Vec<usize>,
    /// Chunk reads asked and failed, over all windows (for the error of a failed read).
    pub(in crate::node) asked: AtomicUsize,
    pub(in crate::node) failed: AtomicUsize,
    /// The chunks the answer's first stripe was made from.
    pub(in crate::node) used: OnceLock<Vec<usize>>,
    /// Chunks whose read failed or was corrupt: the later windows ask a spare in their place,
    /// instead of waiting on a dead server again in every window.
    pub(in crate::node) lost: Mutex<Vec<usize>>,
}

impl LateBinding {
    /// The chunks a window asks at once (`first`, each lost one replaced by a spare) and the
    /// spares left for the reads that fail in it.
    pub(super) fn chosen(&self) -> (Vec<usize>, Vec<usize>) {
        let lost = self.lost.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut spare: Vec<usize> = self
            .spare
            .iter()
            .copied()
            .filter(|c| !lost.contains(c))
            .collect();
        let first = self
            .first
            .iter()
            .filter_map(|&c| {
                if lost.contains(&c) {
                    spare.pop()
                } else {
                    Some(c)
                }
            })
            .collect();
        (first, spare)
    }

    pub(super) fn lose(&self, chunk: usize) {
        let mut lost = self.lost.lock().unwrap_or_else(|e| e.into_inner());
        if !lost.contains(&chunk) {
            lost.push(chunk);
        }
    }
}

impl CodedObject {
    /// The same object read from other sources.
    pub(super) fn with_sources(&self, sources: Vec<Option<usize>>) -> CodedObject {
        CodedObject {
            key: self.key.clone(),
            object: self.object,
            layout: self.layout,
            coding: self.coding.clone(),
            sources,
            supplied: self.supplied.clone(),
            hoc: self.hoc.clone(),
            late: self.late.clone(),
            heard: Heard::default(),
        }
    }

    /// Whether object bytes `range` fit in one full window: then they are read in one, one
    /// request per peer (a 1 MiB object's whole answer). A one-stripe first window would cost
    /// a second request per peer, and with it a quarter of a 1 MiB hit's CPU (issue 39).
    pub(super) fn one_window(&self, range: Range<u64>) -> bool {
        self.layout
            .stripes_for_range(range)
            .is_ok_and(|s| s.end - s.start <= self.stripes_per_window())
    }

    fn stripes_per_window(&self) -> u64 {
        (WINDOW_BYTES / self.layout.sub_chunk().max(1)).max(1)
    }

    /// The windows covering object bytes `range`: (stripes, object bytes wanted). With
    /// `first`, the first window is that many stripes and each next one twice the one before,
    /// up to [`WINDOW_BYTES`] per chunk: the first bytes reach the client after one stripe's
    /// round trip, and the later, larger windows keep the peers' connections busy.
    pub(super) fn windows(
        &self,
        range: Range<u64>,
        first: Option<u64>,
    ) -> Vec<(Range<u64>, Range<u64>)> {
        let Ok(stripes) = self.layout.stripes_for_range(range.clone()) else {
            return Vec::new();
        };
        let most = self.stripes_per_window();
        let mut w = first.unwrap_or(most).clamp(1, most);
        let mut out = Vec::new();
        let mut a = stripes.start;
        while a < stripes.end {
            let b = (a + w).min(stripes.end);
            w = (w * 2).min(most);
            let (Ok(first), Ok(last)) =
                (self.layout.stripe_range(a), self.layout.stripe_range(b - 1))
            else {
                return Vec::new();
            };
            let bytes = first.start.max(range.start)..last.end.min(range.end);
            out.push((a..b, bytes));
            a = b;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_chunk_is_replaced_in_every_later_window() {
        let l = LateBinding {
            first: vec![0, 3, 5],
            spare: vec![1, 4, 2],
            ..LateBinding::default()
        };
        assert_eq!(l.chosen(), (vec![0, 3, 5], vec![1, 4, 2]));
        l.lose(3);
        assert_eq!(l.chosen(), (vec![0, 2, 5], vec![1, 4]));
        // The spare that replaced it fails too, and so does a spare no window asked yet.
        l.lose(2);
        l.lose(1);
        l.lose(2);
        assert_eq!(l.chosen(), (vec![0, 4, 5], vec![]));
        // Fewer chunks left than asked: the window asks what there is.
        l.lose(0);
        assert_eq!(l.chosen(), (vec![4, 5], vec![]));
    }
}
