//! Membership changes: servers added to a running placement, and servers removed for good.
//!
//! **Adding** a server ([`Placement::add_server`]) puts its virtual nodes on the ring (in
//! proportion to its weight, by the unit the placement was built with, so no other server's
//! points move) and gives it an id after the existing ones. It starts *unavailable*: nothing
//! is placed on it until [`Placement::set_available`] makes it available, which is App. 10.3's
//! return procedure — it takes the data buckets its ring position gives it, and parity buckets
//! from the most loaded servers while its write budget (by its weight) remains. A cluster adds
//! the server when the operator announces it and makes it available when the new node first
//! reports, so no request is sent to a node that is not listening yet.
//!
//! **Removing** a server for good is a failure that never returns: it is made unavailable
//! (its data buckets move along the ring and its parity buckets are re-placed by Algorithm 1)
//! and [`Placement::forget_parity`] drops the parity buckets it would have been offered back.
//! Its id is never reused: the ring keeps its points, which every walk steps over, so server
//! ids in maps, slot histories and logs keep meaning one machine.

use crate::hash::{hash_tuple, DOMAIN_BUCKET};
use crate::ring::{vnodes_of, Ring, MAX_VNODES};
use crate::{quantise_weights, Placement, PlacementError, ServerId, NONE};

impl Placement {
    /// Adds a server of `weight`, unavailable; returns its id (`servers()` before the call).
    /// Make it available with [`Placement::set_available`] when it is ready to take writes.
    pub fn add_server(&mut self, weight: f64) -> Result<ServerId, PlacementError> {
        let id = self.servers();
        if !(weight.is_finite() && weight > 0.0) {
            return Err(PlacementError::BadWeight { server: id, weight });
        }
        let mut vnodes = self.ring.vnode_list().to_vec();
        vnodes.push(vnodes_of(
            weight,
            self.weight_unit,
            self.cfg.vnodes_per_unit,
        ));
        let total = vnodes.iter().fold(0usize, |a, &v| a.saturating_add(v));
        if total > MAX_VNODES || id >= u32::MAX as usize {
            return Err(PlacementError::TooManyVnodes {
                vnodes: total,
                max: MAX_VNODES,
            });
        }
        self.weights.push(weight);
        self.quantised = quantise_weights(&self.weights);
        self.available.push(false);
        self.data_load.push(0);
        self.written.push(0);
        self.remembered.push(Vec::new());
        self.ring = Ring::new(vnodes, self.cfg.seed);
        let seed = self.cfg.seed;
        for (b, start) in self.ring_start.iter_mut().enumerate() {
            *start = self
                .ring
                .start(hash_tuple(seed, DOMAIN_BUCKET, &[b as u64])) as u32;
        }
        let width = self
            .cfg
            .k
            .saturating_add(self.cfg.p)
            .max(3)
            .min(self.servers());
        if width != self.walk_width {
            self.walk_width = width;
            self.walk = vec![NONE; self.cfg.buckets * width];
        }
        // The new server is unavailable, so every walk (and with it the data placement) is
        // what it was; only the tables' layout may have changed.
        self.compute_walks();
        Ok(id)
    }

    /// Forgets the parity buckets `server` held when it failed: a server removed for good is
    /// never offered them back. The caller keeps it unavailable from then on.
    pub fn forget_parity(&mut self, server: ServerId) {
        if let Some(r) = self.remembered.get_mut(server) {
            r.clear();
        }
    }

    /// The weight that gets `vnodes_per_unit` virtual nodes: the lightest the placement was
    /// built with, kept when servers are added.
    pub fn weight_unit(&self) -> f64 {
        self.weight_unit
    }
}

#[cfg(test)]
mod tests {
    use crate::{Placement, PlacementConfig, ServerId};

    fn cfg() -> PlacementConfig {
        PlacementConfig {
            buckets: 200,
            k: 3,
            p: 1,
            seed: 11,
            ..PlacementConfig::default()
        }
    }

    fn data_counts(pl: &Placement) -> Vec<usize> {
        let mut held = vec![0; pl.servers()];
        for b in 0..pl.buckets() {
            for &s in pl.data_servers(b) {
                held[s] += 1;
            }
        }
        held
    }

    fn parity_counts(pl: &Placement) -> Vec<usize> {
        let mut held = vec![0; pl.servers()];
        for b in 0..pl.buckets() {
            for &s in pl.parity_servers(b) {
                held[s] += 1;
            }
        }
        held
    }

    fn check_valid(pl: &Placement) {
        for b in 0..pl.buckets() {
            let mut all: Vec<ServerId> = pl.data_servers(b).to_vec();
            all.extend_from_slice(pl.parity_servers(b));
            assert_eq!(all.len(), pl.k() + pl.p(), "bucket {b}");
            assert!(all.iter().all(|&s| pl.is_available(s)), "bucket {b}");
            let mut sorted = all.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), all.len(), "bucket {b}: a server twice");
        }
    }

    /// An added server changes nothing until it is available; then it takes data buckets in
    /// proportion to its weight — only from others, each keeping its index — and parity buckets.
    #[test]
    fn an_added_server_takes_its_share_when_available() {
        let mut pl = Placement::new(&[1.0; 6], cfg()).unwrap();
        for s in 0..6 {
            pl.record_data_write(s, 1_000_000 * (s as u64 + 1));
        }
        for b in 0..200 {
            pl.record_parity_write(b, 0, 100_000);
        }
        let before: Vec<Vec<ServerId>> = (0..200).map(|b| pl.data_servers(b).to_vec()).collect();
        let parity_before: Vec<Vec<ServerId>> =
            (0..200).map(|b| pl.parity_servers(b).to_vec()).collect();
        let id = pl.add_server(2.0).unwrap();
        assert_eq!((id, pl.servers(), pl.available_servers()), (6, 7, 6));
        assert!(!pl.is_available(id));
        assert_eq!(pl.vnodes(id), 2 * pl.vnodes(0));
        for b in 0..200 {
            assert_eq!(pl.data_servers(b), &before[b][..], "bucket {b}");
            assert_eq!(pl.parity_servers(b), &parity_before[b][..], "bucket {b}");
        }
        let report = pl.set_available(id, true);
        check_valid(&pl);
        let data = data_counts(&pl);
        let parity = parity_counts(&pl);
        assert!(report.moved_data > 0 && data[id] == report.moved_data);
        // About 2/8 of the ring, compressed toward even at K = 3 (crate docs): well above
        // an even server's share.
        let mean_others = data[..6].iter().sum::<usize>() as f64 / 6.0;
        assert!(data[id] as f64 > 1.3 * mean_others, "{data:?}");
        assert!(parity[id] > 0, "{parity:?}");
        for (b, was) in before.iter().enumerate() {
            for (i, &s) in pl.data_servers(b).iter().enumerate() {
                assert!(s == id || s == was[i], "bucket {b} index {i}");
            }
        }
        // A lighter newcomer does not move the others' ring points (the unit is kept).
        let unit = pl.weight_unit();
        pl.add_server(0.25).unwrap();
        assert_eq!(pl.weight_unit(), unit);
        assert_eq!(pl.vnodes(0), cfg().vnodes_per_unit);
        assert_eq!(pl.vnodes(7), cfg().vnodes_per_unit / 4);
        assert!(pl.add_server(f64::NAN).is_err());
        assert!(pl.add_server(-1.0).is_err());
        assert_eq!(pl.servers(), 8);
    }

    /// A server removed for good is not offered its parity back; the others stay valid.
    #[test]
    fn a_removed_server_is_forgotten() {
        let mut pl = Placement::new(&[1.0; 5], cfg()).unwrap();
        pl.set_available(2, false);
        assert!(!pl.remembered_parity(2).is_empty());
        pl.forget_parity(2);
        assert!(pl.remembered_parity(2).is_empty());
        check_valid(&pl);
        assert_eq!(data_counts(&pl)[2] + parity_counts(&pl)[2], 0);
        // Adding after a removal: ids keep growing.
        assert_eq!(pl.add_server(1.0).unwrap(), 5);
        pl.set_available(5, true);
        check_valid(&pl);
    }

    /// A cluster of two servers (K = P = 1) grows: the walk tables widen with the count.
    #[test]
    fn small_clusters_grow() {
        let c = PlacementConfig {
            k: 1,
            p: 1,
            ..cfg()
        };
        let mut pl = Placement::new(&[1.0; 2], c).unwrap();
        assert_eq!(pl.ring_servers(0, 3).len(), 2);
        let id = pl.add_server(1.0).unwrap();
        pl.set_available(id, true);
        check_valid(&pl);
        assert_eq!(pl.ring_servers(0, 3).len(), 3);
    }
}
