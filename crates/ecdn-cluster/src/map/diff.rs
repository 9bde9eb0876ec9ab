//! Epoch diffs: what changed from one map to a later one, so the control plane can send the
//! change instead of the whole map (issue 42: at 10,000 buckets and 500 servers a whole map is
//! megabytes, while an availability change moves a few hundred slots).
//!
//! A [`MapDiff`] names the epoch of the map it applies to (its *base*), the servers' count and
//! availability (whole: one flag per server), the members that changed (by id, new ones
//! included), and, for each of the map's tables (data servers, parity servers, ring walks and
//! moved slots), the entries that changed as `(index, value)` pairs. [`MapDiff::between`] makes
//! one; [`MapDiff::apply`] rebuilds the later map from the base and checks the result as a map
//! from the network is checked ([`BucketMap::validate`]). A diff only exists between maps of
//! the same shape (scheme, code, buckets, hash key): anything else is sent whole.
//!
//! In etcd the diff is cumulative from the last whole map (see `crate::etcd_map`), so a node
//! needs the base and the newest diff, never a chain: a node that missed diffs applies the
//! newest one to its base, and one whose base is not the diff's reads the whole map again.

use serde::{Deserialize, Serialize};

use super::{BucketMap, Member};
use ecdn_placement::ServerId;

/// What changed from the map of epoch `base` to a later one (see the module documentation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MapDiff {
    /// The epoch of the map this diff applies to.
    pub base: u64,
    /// Per server (the new map's count): available or not.
    pub available: Vec<bool>,
    /// The members that differ from the base's, or are new, by id.
    pub members: Vec<Member>,
    /// The used lengths of the three server tables' rows.
    pub data_len: usize,
    pub parity_len: usize,
    pub walk_len: usize,
    /// Changed entries, `(index, server)`.
    pub data: Vec<(u32, ServerId)>,
    pub parity: Vec<(u32, ServerId)>,
    pub walk: Vec<(u32, ServerId)>,
    pub former: Vec<(u32, [ServerId; 2])>,
}

/// The entries of `new` that differ from `old` (same length).
fn changed<T: Copy + PartialEq>(old: &[T], new: &[T]) -> Vec<(u32, T)> {
    old.iter()
        .zip(new)
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .map(|(i, (_, &b))| (i as u32, b))
        .collect()
}

/// Sets `table[index] = value` for every change; an error for an index out of range.
fn set<T: Copy>(table: &mut [T], changes: &[(u32, T)], name: &str) -> Result<(), String> {
    for &(i, v) in changes {
        *table
            .get_mut(i as usize)
            .ok_or_else(|| format!("map diff: {name} index {i} out of range"))? = v;
    }
    Ok(())
}

impl MapDiff {
    /// The diff from `old` to `new`, or `None` when their shapes differ (then only the whole
    /// map can say it).
    pub fn between(old: &BucketMap, new: &BucketMap) -> Option<MapDiff> {
        let same_shape = old.scheme == new.scheme
            && old.k == new.k
            && old.p == new.p
            && old.buckets == new.buckets
            && old.object_key == new.object_key
            && old.k_placed == new.k_placed
            && old.p_placed == new.p_placed
            && old.walk_width == new.walk_width
            && old.data.len() == new.data.len()
            && old.parity.len() == new.parity.len()
            && old.walk.len() == new.walk.len()
            && old.former.len() == new.former.len()
            // Members are diffed by id: a map without them cannot say which went.
            && (old.members.is_empty() == new.members.is_empty())
            && new.members.len() >= old.members.len();
        if !same_shape {
            return None;
        }
        let members = new
            .members
            .iter()
            .filter(|m| old.members.get(m.id) != Some(*m))
            .cloned()
            .collect();
        Some(MapDiff {
            base: old.epoch,
            available: new.available.clone(),
            members,
            data_len: new.data_len,
            parity_len: new.parity_len,
            walk_len: new.walk_len,
            data: changed(&old.data, &new.data),
            parity: changed(&old.parity, &new.parity),
            walk: changed(&old.walk, &new.walk),
            former: changed(&old.former, &new.former),
        })
    }

    /// The changed entries, over every table (a measure of the diff's size).
    pub fn entries(&self) -> usize {
        self.members.len()
            + self.data.len()
            + self.parity.len()
            + self.walk.len()
            + self.former.len()
    }

    /// The map this diff leads to from `base` (whose epoch must be [`MapDiff::base`]), at
    /// `epoch`; checked like any map from the network.
    pub fn apply(&self, base: &BucketMap, epoch: u64) -> Result<BucketMap, String> {
        if base.epoch != self.base {
            return Err(format!(
                "map diff: it applies to epoch {}, not {}",
                self.base, base.epoch
            ));
        }
        let mut map = base.clone();
        map.epoch = epoch;
        map.available.clone_from(&self.available);
        map.data_len = self.data_len;
        map.parity_len = self.parity_len;
        map.walk_len = self.walk_len;
        set(&mut map.data, &self.data, "data")?;
        set(&mut map.parity, &self.parity, "parity")?;
        set(&mut map.walk, &self.walk, "walk")?;
        set(&mut map.former, &self.former, "former")?;
        for m in &self.members {
            match m.id.cmp(&map.members.len()) {
                std::cmp::Ordering::Less => map.members[m.id] = m.clone(),
                std::cmp::Ordering::Equal => map.members.push(m.clone()),
                std::cmp::Ordering::Greater => {
                    return Err(format!("map diff: member {} skips an id", m.id))
                }
            }
        }
        map.validate()?;
        Ok(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::map::MemberState;
    use ecdn_placement::pieces::{Scheme, SlotHistory};
    use ecdn_placement::{Placement, PlacementConfig};

    fn members(n: usize) -> Vec<Member> {
        (0..n)
            .map(|id| Member {
                id,
                client: format!("127.0.0.1:{}", 20000 + id).parse().unwrap(),
                peer: format!("127.0.0.1:{}", 30000 + id).parse().unwrap(),
                weight: 1.0,
                state: MemberState::Active,
            })
            .collect()
    }

    fn placement(servers: usize, buckets: usize) -> Placement {
        let cfg = PlacementConfig {
            buckets,
            ..PlacementConfig::default()
        };
        Placement::new(&vec![1.0; servers], cfg).unwrap()
    }

    fn map_of(epoch: u64, pl: &Placement, h: &SlotHistory, members: &[Member]) -> BucketMap {
        BucketMap::from_placement(epoch, Scheme::C2dn, 3, 1, pl, Some(h))
            .with_members(members.to_vec())
    }

    #[test]
    fn a_diff_applied_to_its_base_gives_the_later_map_and_is_small() {
        let (servers, buckets) = (40, 2000);
        let mut pl = placement(servers, buckets);
        let mut h = SlotHistory::new(buckets, 3, 1);
        let mut ms = members(servers);
        let base = map_of(10, &pl, &h, &ms);
        // Two failures and a drain's state change, as the coordinator would make them.
        for s in [3, 17, 5] {
            let before = h.holders(&pl);
            pl.set_available(s, false);
            let after = h.holders(&pl);
            h.record(&before, &after);
        }
        ms[5].state = MemberState::Draining;
        let later = map_of(13, &pl, &h, &ms);
        let diff = MapDiff::between(&base, &later).unwrap();
        assert_eq!(diff.base, 10);
        assert_eq!(diff.members.len(), 1);
        assert_eq!(diff.apply(&base, 13).unwrap(), later);
        let whole = base.data.len() + base.parity.len() + base.walk.len() + base.former.len();
        assert!(
            diff.entries() * 5 < whole,
            "{} changed of {whole}",
            diff.entries()
        );
        // Applied to another epoch's map, it is refused.
        let mut other = base.clone();
        other.epoch = 11;
        assert!(diff.apply(&other, 13).is_err());
        // No change, no entries.
        assert_eq!(MapDiff::between(&later, &later).unwrap().entries(), 0);
    }

    #[test]
    fn a_new_member_travels_in_the_diff() {
        let mut pl = placement(8, 200);
        let h = SlotHistory::new(200, 3, 1);
        let mut ms = members(8);
        let base = map_of(1, &pl, &h, &ms);
        pl.add_server(1.0).unwrap();
        ms.extend(members(9).pop());
        let later = map_of(2, &pl, &h, &ms);
        let diff = MapDiff::between(&base, &later).unwrap();
        assert_eq!(diff.members.len(), 1);
        assert_eq!(diff.apply(&base, 2).unwrap(), later);
    }

    #[test]
    fn a_bad_diff_is_an_error_not_a_panic() {
        let pl = placement(8, 200);
        let h = SlotHistory::new(200, 3, 1);
        let base = map_of(1, &pl, &h, &members(8));
        let good = MapDiff::between(&base, &base).unwrap();
        type Break = fn(&mut MapDiff);
        let cases: [Break; 6] = [
            |d| d.data.push((u32::MAX, 0)),
            |d| d.former.push((1_000_000, [0, 1])),
            |d| d.walk.push((0, 99)),
            |d| d.available.truncate(3),
            |d| d.data_len = 9,
            |d| {
                d.members.push(Member {
                    id: 12,
                    ..members(1).remove(0)
                })
            },
        ];
        for (i, break_it) in cases.iter().enumerate() {
            let mut d = good.clone();
            break_it(&mut d);
            assert!(d.apply(&base, 2).is_err(), "case {i} was accepted");
        }
        // A different shape has no diff.
        let other = map_of(
            2,
            &placement(8, 300),
            &SlotHistory::new(300, 3, 1),
            &members(8),
        );
        assert!(MapDiff::between(&base, &other).is_none());
    }
}
