//! The consistent-hash ring with virtual nodes (Appendix 10.3, "Heterogeneous servers").
//!
//! Every server owns `max(1, round(wᵢ / w_min · vnodes_per_unit))` virtual nodes: the lightest
//! server gets `vnodes_per_unit`, a server twice as heavy twice as many (weights are normalised
//! by the smallest, so only their ratios matter). `w_min` is the lightest weight the placement
//! was *built* with, kept when servers are added later, so a lighter newcomer does not change
//! everyone else's count. Virtual node `v` of server `s` sits at
//! position `hash_tuple(seed, DOMAIN_VNODE, [s, v])`, which depends on nothing but the server
//! and its weight, so adding or removing servers never moves another server's points.
//!
//! A bucket's walk starts at the first point at or after the bucket's position and goes
//! clockwise, wrapping around; [`Ring::walk_into`] collects the distinct servers it meets,
//! stepping over servers already met and servers that are unavailable (Fig. 11).

use crate::hash::{hash_tuple, DOMAIN_VNODE};
use crate::ServerId;

/// Largest ring the crate builds; guards against weight ratios that would need absurd numbers of
/// virtual nodes.
pub(crate) const MAX_VNODES: usize = 1 << 24;

/// Sorted ring points and the server owning each.
#[derive(Clone, Debug)]
pub(crate) struct Ring {
    points: Vec<u64>,
    owners: Vec<u32>,
    vnodes: Vec<usize>,
}

/// Virtual nodes per server for `weights` (all finite and positive), `vnodes_per_unit` per
/// `unit` of weight (the lightest weight the cluster started with).
pub(crate) fn vnode_counts(weights: &[f64], unit: f64, vnodes_per_unit: usize) -> Vec<usize> {
    weights
        .iter()
        .map(|&w| vnodes_of(w, unit, vnodes_per_unit))
        .collect()
}

/// `max(1, round(weight / unit · vnodes_per_unit))`, capped at [`MAX_VNODES`].
pub(crate) fn vnodes_of(weight: f64, unit: f64, vnodes_per_unit: usize) -> usize {
    let v = (weight / unit * vnodes_per_unit as f64).round();
    if v >= MAX_VNODES as f64 {
        MAX_VNODES
    } else {
        (v as usize).max(1)
    }
}

/// The weight that gets `vnodes_per_unit` virtual nodes: the lightest of `weights`.
pub(crate) fn weight_unit(weights: &[f64]) -> f64 {
    weights.iter().copied().fold(f64::INFINITY, f64::min)
}

impl Ring {
    /// Builds the ring for the given per-server virtual node counts.
    pub(crate) fn new(vnodes: Vec<usize>, seed: u64) -> Ring {
        let total: usize = vnodes.iter().sum();
        let mut pts: Vec<(u64, u32, u32)> = Vec::with_capacity(total);
        for (s, &n) in vnodes.iter().enumerate() {
            for v in 0..n {
                let pos = hash_tuple(seed, DOMAIN_VNODE, &[s as u64, v as u64]);
                pts.push((pos, s as u32, v as u32));
            }
        }
        // Ties (astronomically rare) are broken by server and vnode index, so the order is
        // still a pure function of the inputs.
        pts.sort_unstable();
        Ring {
            points: pts.iter().map(|p| p.0).collect(),
            owners: pts.iter().map(|p| p.1).collect(),
            vnodes,
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.points.len()
    }

    pub(crate) fn vnodes(&self, server: ServerId) -> usize {
        self.vnodes[server]
    }

    /// Virtual nodes per server.
    pub(crate) fn vnode_list(&self) -> &[usize] {
        &self.vnodes
    }

    /// Index of the first point at or after `pos`, wrapping to 0 past the last point.
    pub(crate) fn start(&self, pos: u64) -> usize {
        let i = self.points.partition_point(|&p| p < pos);
        if i == self.points.len() {
            0
        } else {
            i
        }
    }

    /// Appends to `out` (cleared first) the first `n` distinct servers with `available[s]`
    /// met walking clockwise from point `start`; fewer if fewer are available.
    pub(crate) fn walk_into(
        &self,
        start: usize,
        n: usize,
        available: &[bool],
        out: &mut Vec<ServerId>,
    ) {
        out.clear();
        if n == 0 {
            return;
        }
        let len = self.points.len();
        if n <= 16 {
            for step in 0..len {
                let i = if start + step >= len {
                    start + step - len
                } else {
                    start + step
                };
                let s = self.owners[i] as ServerId;
                if available[s] && !out.contains(&s) {
                    out.push(s);
                    if out.len() == n {
                        return;
                    }
                }
            }
        } else {
            let mut seen = vec![false; available.len()];
            for step in 0..len {
                let i = (start + step) % len;
                let s = self.owners[i] as ServerId;
                if available[s] && !seen[s] {
                    seen[s] = true;
                    out.push(s);
                    if out.len() == n {
                        return;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vnodes_follow_weight_ratios() {
        let counts = |w: &[f64], v| vnode_counts(w, weight_unit(w), v);
        assert_eq!(counts(&[1.0, 2.0, 1.5], 100), vec![100, 200, 150]);
        assert_eq!(counts(&[1e12, 2e12], 10), vec![10, 20]);
        assert_eq!(counts(&[1.0, 1.0], 1), vec![1, 1]);
        // A server lighter than the unit still gets at least one.
        assert_eq!(vnode_counts(&[2.0, 0.01], 2.0, 10), vec![10, 1]);
    }

    #[test]
    fn walk_skips_repeats_and_unavailable() {
        let ring = Ring::new(vec![3, 3, 3, 3], 7);
        let avail = [true, false, true, true];
        let mut out = Vec::new();
        for start in 0..ring.len() {
            ring.walk_into(start, 3, &avail, &mut out);
            let mut sorted = out.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, vec![0, 2, 3]);
            ring.walk_into(start, 10, &avail, &mut out);
            assert_eq!(out.len(), 3);
        }
    }

    #[test]
    fn start_wraps() {
        let ring = Ring::new(vec![2, 2], 1);
        assert_eq!(
            ring.start(u64::MAX),
            if ring.points[3] == u64::MAX { 3 } else { 0 }
        );
        assert_eq!(ring.start(0), 0);
    }
}
