//! A placement's changeable state, to hand it from one coordinator to the next.
//!
//! A [`Placement`] is its configuration and weights (fixed, from the cluster file) plus what
//! availability changes and rebalances made of it: which servers are available, where every
//! parity bucket is, the loads recorded since the last rebalance, the bytes each server wrote
//! since it became available, and the parity buckets each failed server held. The data buckets
//! and the walks follow from the availability and the ring. [`Placement::snapshot`] takes the
//! state; [`Placement::restore`] rebuilds a placement from the configuration and a snapshot,
//! equal to the one it was taken from (every later decision is the same). A leader that takes
//! over from another continues from the stored placement this way, never from scratch.

use serde::{Deserialize, Serialize};

use crate::{Placement, PlacementConfig, PlacementError, ServerId, NONE};

/// The changeable state of a [`Placement`] (see the module documentation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlacementState {
    /// The weights of the servers, in id order (servers added after the start included).
    /// `None` (a state written before servers could be added): the caller's weights.
    #[serde(default)]
    pub weights: Option<Vec<f64>>,
    /// The weight with `vnodes_per_unit` virtual nodes (see `Placement::weight_unit`);
    /// `None`: the lightest of the weights.
    #[serde(default)]
    pub weight_unit: Option<f64>,
    /// Per server.
    pub available: Vec<bool>,
    /// Per bucket and data index (`bucket * K + index`): the server. Which servers hold a
    /// bucket's data follows from the ring, but their order (data chunk `i` stays on the
    /// server that keeps it) depends on the history of failures and returns. `None` (an older
    /// state): the order a fresh placement would have.
    #[serde(default)]
    pub data: Option<Vec<Option<ServerId>>>,
    /// Per bucket and parity index (`bucket * P + index`): the server, `None` where no
    /// parity bucket is placed (fewer than `K + P` servers available).
    pub parity: Vec<Option<ServerId>>,
    /// Data bytes recorded per server since the last rebalance.
    pub data_load: Vec<u64>,
    /// Bytes recorded per parity bucket since the last rebalance.
    pub parity_load: Vec<u64>,
    /// Bytes each server wrote since it last became available.
    pub written: Vec<u64>,
    /// Parity buckets (`bucket * P + index`) each server held when it last failed.
    pub remembered: Vec<Vec<usize>>,
}

impl Placement {
    /// This placement's changeable state.
    pub fn snapshot(&self) -> PlacementState {
        PlacementState {
            weights: Some(self.weights.clone()),
            weight_unit: Some(self.weight_unit),
            available: self.available.clone(),
            data: Some(
                self.data
                    .iter()
                    .map(|&s| (s != NONE).then_some(s))
                    .collect(),
            ),
            parity: self
                .parity
                .iter()
                .map(|&s| (s != NONE).then_some(s))
                .collect(),
            data_load: self.data_load.clone(),
            parity_load: self.parity_load.clone(),
            written: self.written.clone(),
            remembered: self.remembered.clone(),
        }
    }

    /// The placement of `cfg` in state `state`, with the state's weights (servers added
    /// since the start included) or, for a state without them, `weights` (as
    /// [`Placement::new`]). The state must fit the configuration: one entry per server and
    /// per parity slot, server ids in range, a parity bucket on an available server that holds
    /// none of its bucket's data, and as many parity buckets per bucket as the available
    /// servers allow.
    pub fn restore(
        weights: &[f64],
        cfg: PlacementConfig,
        state: &PlacementState,
    ) -> Result<Placement, PlacementError> {
        let weights = state.weights.as_deref().unwrap_or(weights);
        let unit = state
            .weight_unit
            .unwrap_or_else(|| crate::ring::weight_unit(weights));
        let mut pl = Placement::with_unit(weights, cfg, unit)?;
        let bad = |why: String| Err(PlacementError::BadState(why));
        let servers = pl.servers();
        let slots = cfg.buckets * cfg.p;
        for (what, len, want) in [
            ("available", state.available.len(), servers),
            ("data_load", state.data_load.len(), servers),
            ("written", state.written.len(), servers),
            ("remembered", state.remembered.len(), servers),
            ("parity", state.parity.len(), slots),
            ("parity_load", state.parity_load.len(), slots),
        ] {
            if len != want {
                return bad(format!("{what} has {len} entries, the placement {want}"));
            }
        }
        if let Some(&n) = state.remembered.iter().flatten().find(|&&n| n >= slots) {
            return bad(format!("a remembered parity slot {n} is out of range"));
        }
        pl.available.clone_from(&state.available);
        pl.n_available = pl.available.iter().filter(|&&a| a).count();
        pl.compute_walks();
        let mut changes = Vec::new();
        pl.update_data(&mut changes);
        if let Some(data) = &state.data {
            pl.restore_data_order(data)?;
        }
        pl.parity_len = pl.parity_slots();
        for b in 0..cfg.buckets {
            for j in 0..cfg.p {
                let n = b * cfg.p + j;
                match (state.parity[n], j < pl.parity_len) {
                    (Some(s), true) => {
                        if s >= servers || !pl.available[s] {
                            return bad(format!(
                                "parity bucket {j} of bucket {b} is on server {s}, not available"
                            ));
                        }
                        if pl.data_servers(b).contains(&s) {
                            return bad(format!(
                                "parity bucket {j} of bucket {b} is on server {s}, which holds \
                                 its data"
                            ));
                        }
                        pl.parity[n] = s;
                    }
                    (None, false) => pl.parity[n] = NONE,
                    (_, placed) => {
                        return bad(format!(
                            "bucket {b} has {} parity bucket {j}; {} of {} can be placed",
                            if placed { "no" } else { "a" },
                            pl.parity_len,
                            cfg.p
                        ))
                    }
                }
            }
        }
        for b in 0..cfg.buckets {
            let ps = &pl.parity[b * cfg.p..b * cfg.p + pl.parity_len];
            if (1..ps.len()).any(|i| ps[..i].contains(&ps[i])) {
                return bad(format!("bucket {b} has two parity buckets on one server"));
            }
        }
        pl.data_load.clone_from(&state.data_load);
        pl.parity_load.clone_from(&state.parity_load);
        pl.written.clone_from(&state.written);
        pl.remembered.clone_from(&state.remembered);
        Ok(pl)
    }
}

impl Placement {
    /// Takes the data servers' order from a snapshot: per bucket the same servers the ring
    /// gives now (already in `self.data`), in the snapshot's order.
    fn restore_data_order(&mut self, data: &[Option<ServerId>]) -> Result<(), PlacementError> {
        let k = self.cfg.k;
        if data.len() != self.cfg.buckets * k {
            return Err(PlacementError::BadState(format!(
                "data has {} entries, the placement {}",
                data.len(),
                self.cfg.buckets * k
            )));
        }
        for b in 0..self.cfg.buckets {
            let stored = &data[b * k..(b + 1) * k];
            let now = &self.data[b * k..b * k + self.data_len];
            let placed: Vec<ServerId> = stored.iter().flatten().copied().collect();
            let same_set = placed.len() == now.len()
                && stored[..now.len()].iter().all(Option::is_some)
                && now.iter().all(|s| placed.contains(s));
            if !same_set {
                return Err(PlacementError::BadState(format!(
                    "bucket {b}'s data servers {placed:?} are not the ring's {now:?}"
                )));
            }
            self.data[b * k..b * k + placed.len()].copy_from_slice(&placed);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> PlacementConfig {
        PlacementConfig {
            buckets: 40,
            k: 3,
            p: 1,
            seed: 7,
            ..PlacementConfig::default()
        }
    }

    fn same(a: &Placement, b: &Placement) {
        for bucket in 0..a.buckets() {
            assert_eq!(a.data_servers(bucket), b.data_servers(bucket), "{bucket}");
            assert_eq!(
                a.parity_servers(bucket),
                b.parity_servers(bucket),
                "{bucket}"
            );
        }
        assert_eq!(a.snapshot(), b.snapshot());
    }

    /// A restored placement is the one snapshotted, and goes on to the same decisions.
    #[test]
    fn a_restored_placement_decides_as_the_original_would() {
        let weights = [1.0, 1.0, 2.0, 1.0, 1.5, 1.0];
        let mut a = Placement::new(&weights, cfg()).unwrap();
        for s in 0..6 {
            a.record_data_write(s, 1000 * (s as u64 + 1));
        }
        a.record_parity_write(3, 0, 5000);
        a.set_available(2, false);
        a.record_data_write(0, 777);
        a.record_parity_write(9, 0, 4242);
        let snap = a.snapshot();
        let json = serde_json::to_string(&snap).unwrap();
        let mut b =
            Placement::restore(&weights, cfg(), &serde_json::from_str(&json).unwrap()).unwrap();
        same(&a, &b);
        // The same next steps give the same placements (the return uses the remembered
        // parity and the loads recorded before the snapshot).
        for pl in [&mut a, &mut b] {
            pl.set_available(2, true);
            pl.record_data_write(4, 99_999);
            pl.rebalance();
            pl.set_available(5, false);
        }
        same(&a, &b);
    }

    /// Servers added after the start (one lighter than every original) are in the state:
    /// a placement restored with the original weights is the grown one.
    #[test]
    fn a_restored_placement_keeps_added_servers() {
        let weights = [1.0; 5];
        let mut a = Placement::new(&weights, cfg()).unwrap();
        let x = a.add_server(0.5).unwrap();
        a.set_available(x, true);
        let y = a.add_server(3.0).unwrap();
        let snap = a.snapshot();
        let json = serde_json::to_string(&snap).unwrap();
        let mut b =
            Placement::restore(&weights, cfg(), &serde_json::from_str(&json).unwrap()).unwrap();
        assert_eq!((b.servers(), b.vnodes(x), b.vnodes(0)), (7, 50, 100));
        same(&a, &b);
        for pl in [&mut a, &mut b] {
            pl.set_available(y, true);
        }
        same(&a, &b);
        // A state from before membership changes (no weights, no unit) restores as before.
        let old = Placement::new(&weights, cfg()).unwrap().snapshot();
        let mut older = old.clone();
        (older.weights, older.weight_unit) = (None, None);
        assert_eq!(
            Placement::restore(&weights, cfg(), &older)
                .unwrap()
                .snapshot(),
            old
        );
    }

    #[test]
    fn a_state_that_does_not_fit_is_refused() {
        let weights = [1.0; 5];
        let pl = Placement::new(&weights, cfg()).unwrap();
        let good = pl.snapshot();
        let refused = |f: &dyn Fn(&mut PlacementState), want: &str| {
            let mut s = good.clone();
            f(&mut s);
            let e = Placement::restore(&weights, cfg(), &s)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{e}");
        };
        refused(&|s| s.available.push(true), "available has 6 entries");
        refused(&|s| s.weight_unit = Some(0.0), "weight unit");
        let outside = (0..5).find(|x| !pl.data_servers(0).contains(x)).unwrap();
        refused(
            &|s| s.data.as_mut().unwrap()[0] = Some(outside),
            "are not the ring's",
        );
        refused(
            &|s| {
                s.data.as_mut().unwrap().pop();
            },
            "data has 119",
        );
        refused(
            &|s| s.weights = Some(vec![1.0; 4]),
            "available has 5 entries",
        );
        refused(&|s| s.parity.pop().map(drop).unwrap_or(()), "parity has 39");
        refused(&|s| s.remembered[0].push(40), "out of range");
        refused(&|s| s.parity[0] = Some(17), "not available");
        refused(&|s| s.parity[0] = None, "has no parity bucket 0");
        let data0 = pl.data_servers(0)[0];
        refused(&|s| s.parity[0] = Some(data0), "holds its data");
        // A server marked unavailable while a parity bucket stays on it.
        let on = good.parity[0].unwrap();
        refused(&|s| s.available[on] = false, "server");
        assert!(Placement::restore(&weights, cfg(), &good).is_ok());
    }
}
