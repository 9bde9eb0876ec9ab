//! What an etcd-mode leader keeps in the `state` key ([`Stored`]): the placement's state and the
//! load totals it consumed, stored as compressed JSON, for the next leader to continue from
//! and for a follower's status page to read.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::state::StoredState;
use crate::etcd::LoadReport;
use crate::etcd_map::{compress, decompress};
use crate::heartbeat::Heartbeat;

/// What the leader keeps in the `state` key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stored {
    pub state: StoredState,
    /// Per node: the load totals already recorded (incarnation, data bytes, parity bytes per
    /// `bucket * P + index`).
    pub consumed: BTreeMap<usize, Consumed>,
}

/// The load totals of one node incarnation that a leader recorded.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Consumed {
    pub incarnation: u64,
    pub data_bytes: u64,
    /// `(bucket, parity index) → bytes`; stored as `[[bucket, index, bytes], ...]` (JSON
    /// object keys are strings).
    #[serde(with = "triples")]
    pub parity: BTreeMap<(usize, usize), u64>,
}

mod triples {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(
        m: &BTreeMap<(usize, usize), u64>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(m.iter().map(|(&(b, j), &n)| (b, j, n)))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<(usize, usize), u64>, D::Error> {
        let v: Vec<(usize, usize, u64)> = Vec::deserialize(d)?;
        Ok(v.into_iter().map(|(b, j, n)| ((b, j), n)).collect())
    }
}

impl Consumed {
    /// The growth of `report` over what was consumed, as a heartbeat's loads; updates `self`.
    pub(super) fn take_growth(&mut self, report: &LoadReport) -> Heartbeat {
        if report.incarnation != self.incarnation {
            *self = Consumed {
                incarnation: report.incarnation,
                ..Consumed::default()
            };
        }
        let data = report.data_bytes.saturating_sub(self.data_bytes);
        self.data_bytes = self.data_bytes.max(report.data_bytes);
        let mut parity = Vec::new();
        for &(b, j, total) in &report.parity {
            let seen = self.parity.entry((b, j)).or_default();
            if total > *seen {
                parity.push((b, j, total - *seen));
                *seen = total;
            }
        }
        Heartbeat {
            node: report.node,
            epoch: 0,
            data_bytes: data,
            parity,
            object_reads: Vec::new(),
            peers: Vec::new(),
        }
    }
}

impl Stored {
    /// The state stored in etcd's `state` key (compressed JSON, or plain JSON as written
    /// before compression).
    pub fn from_value(value: &[u8]) -> Result<Stored, String> {
        let json = decompress(value).map_err(|e| format!("the stored state: {e}"))?;
        serde_json::from_slice(&json).map_err(|e| format!("the stored state: {e}"))
    }

    /// The value to put in the `state` key.
    pub fn to_value(&self) -> Vec<u8> {
        compress(&serde_json::to_vec(self).expect("the state serializes"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_totals_count_once_and_restart_with_a_new_incarnation() {
        let mut c = Consumed::default();
        let r = |inc, data, parity: Vec<(usize, usize, u64)>| LoadReport {
            node: 2,
            incarnation: inc,
            data_bytes: data,
            parity,
        };
        let hb = c.take_growth(&r(7, 100, vec![(3, 0, 50)]));
        assert_eq!(
            (hb.node, hb.data_bytes, hb.parity),
            (2, 100, vec![(3, 0, 50)])
        );
        // The same totals again: nothing new.
        let hb = c.take_growth(&r(7, 100, vec![(3, 0, 50)]));
        assert_eq!((hb.data_bytes, hb.parity.len()), (0, 0));
        let hb = c.take_growth(&r(7, 130, vec![(3, 0, 60), (4, 0, 5)]));
        assert_eq!(
            (hb.data_bytes, hb.parity),
            (30, vec![(3, 0, 10), (4, 0, 5)])
        );
        // What a leader stores and the next reads back.
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<Consumed>(&json).unwrap(), c);
        // A restarted node counts from zero.
        let hb = c.take_growth(&r(8, 20, vec![(3, 0, 1)]));
        assert_eq!((hb.data_bytes, hb.parity), (20, vec![(3, 0, 1)]));
    }
}
