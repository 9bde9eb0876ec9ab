//! How the bucket map is kept in etcd, so that it fits etcd's limits at 10,000 buckets and
//! 500 servers and a change costs what changed, not the whole map (issue 42).
//!
//! Two keys under the cluster's prefix:
//!
//! * `map` — the last **whole** map the leader wrote (its *base*): its JSON compressed with
//!   zstd, sealed with the cluster key ([`seal_map`]). Its epoch is the revision that wrote it.
//! * `map-diff` — the [`MapDiff`] from that base to the current map, **cumulative** (from the
//!   base, not from the previous diff), sealed the same way ([`seal_diff`]). The current map's
//!   epoch is the revision of this key's put.
//!
//! The leader ([`MapPublisher`]) writes the diff while it stays small (encoded, at most a
//! quarter of the whole map's bytes, [`DIFF_SHARE`]) and otherwise a new whole map, deleting
//! the diff in the same transaction. A node ([`MapFollower`]) keeps the base it read: a diff on
//! that base is applied; a diff on another base (it missed a whole map) is a gap, and the node
//! reads both keys again. Since the diff is cumulative there is never a chain to replay.
//!
//! Stored values written before compression (plain JSON after the signature line) still open:
//! a compressed value starts with zstd's magic number, which JSON never does.

use std::borrow::Cow;

use etcd_client::{DeleteOptions, TxnOp};

use crate::auth::ClusterKey;
use crate::etcd_keys::{open, seal, Keys};
use crate::map::{BucketMap, MapDiff};

const MAP_WHAT: &str = "etcd:map";
const DIFF_WHAT: &str = "etcd:map-diff";

/// zstd's frame magic number, first in every compressed value.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// The most a stored value may decompress to (a whole map at the largest bucket count and
/// 10,000 servers is far below).
const MAX_DECOMPRESSED: usize = 256 << 20;

/// zstd's level for stored values: fast, and within a few percent of the higher levels on
/// these tables.
const LEVEL: i32 = 3;

/// The leader writes the diff while its bytes are at most 1 / `DIFF_SHARE` of the whole map's.
pub const DIFF_SHARE: usize = 4;

/// `json`, compressed for etcd.
pub fn compress(json: &[u8]) -> Vec<u8> {
    zstd::bulk::compress(json, LEVEL).expect("zstd compresses into a growing buffer")
}

/// The JSON of a stored value: decompressed when it is compressed, as it is otherwise.
pub fn decompress(value: &[u8]) -> Result<Cow<'_, [u8]>, String> {
    if !value.starts_with(&ZSTD_MAGIC) {
        return Ok(Cow::Borrowed(value));
    }
    zstd::bulk::decompress(value, MAX_DECOMPRESSED)
        .map(Cow::Owned)
        .map_err(|e| format!("cannot decompress: {e}"))
}

/// The stored form of a whole map: the signature line, then its JSON compressed.
pub fn seal_map(key: &ClusterKey, map: &BucketMap) -> Vec<u8> {
    let json = serde_json::to_vec(map).expect("a bucket map serializes");
    seal(key, MAP_WHAT, &compress(&json))
}

/// The map of a stored value (see [`seal_map`]), its epoch set to `revision`; an error for
/// anything not sealed with this cluster's key or not a valid map.
pub fn open_map(key: &ClusterKey, value: &[u8], revision: i64) -> Result<BucketMap, String> {
    let what = |e: String| format!("the stored map: {e}");
    let json = decompress(open(key, MAP_WHAT, value).map_err(what)?).map_err(what)?;
    let mut map: BucketMap = serde_json::from_slice(&json).map_err(|e| what(e.to_string()))?;
    map.epoch = u64::try_from(revision).map_err(|_| "a negative revision")?;
    map.validate().map_err(what)?;
    Ok(map)
}

/// The stored form of a diff: the signature line, then its JSON compressed.
pub fn seal_diff(key: &ClusterKey, diff: &MapDiff) -> Vec<u8> {
    let json = serde_json::to_vec(diff).expect("a map diff serializes");
    seal(key, DIFF_WHAT, &compress(&json))
}

/// The diff of a stored value (see [`seal_diff`]).
pub fn open_diff(key: &ClusterKey, value: &[u8]) -> Result<MapDiff, String> {
    let what = |e: String| format!("the stored map diff: {e}");
    let json = decompress(open(key, DIFF_WHAT, value).map_err(what)?).map_err(what)?;
    serde_json::from_slice(&json).map_err(|e| what(e.to_string()))
}

/// What one publication writes.
pub struct Prepared {
    /// A whole map (else a diff).
    pub whole: bool,
    /// The stored value: the whole map's or the diff's.
    pub value: Vec<u8>,
    /// A whole map, to become the base once written.
    map: Option<BucketMap>,
}

impl Prepared {
    /// The transaction's operations: the diff put, or the whole map put and the diff deleted.
    pub fn ops(&self, keys: &Keys) -> Vec<TxnOp> {
        if self.whole {
            vec![
                TxnOp::put(keys.map(), self.value.clone(), None),
                TxnOp::delete(keys.map_diff(), None::<DeleteOptions>),
            ]
        } else {
            vec![TxnOp::put(keys.map_diff(), self.value.clone(), None)]
        }
    }

    /// The key the value goes to.
    pub fn key(&self, keys: &Keys) -> String {
        if self.whole {
            keys.map()
        } else {
            keys.map_diff()
        }
    }
}

/// The leader's side: the base it wrote last, to diff against.
#[derive(Default)]
pub struct MapPublisher {
    /// The last whole map in etcd (its epoch the revision that wrote it) and its stored size.
    base: Option<(BucketMap, usize)>,
}

impl MapPublisher {
    /// A publisher that diffs against the whole map already in etcd, if `map` is one that
    /// opens (a new leader continues from its predecessor's base); else its first write is
    /// whole.
    pub fn continuing(key: &ClusterKey, map: Option<(&[u8], i64)>) -> MapPublisher {
        let base =
            map.and_then(|(value, rev)| open_map(key, value, rev).ok().map(|m| (m, value.len())));
        MapPublisher { base }
    }

    /// The operations that publish `map`: a diff from the base while it is small enough,
    /// else the whole map (and the stale diff deleted).
    pub fn prepare(&self, key: &ClusterKey, map: BucketMap) -> Prepared {
        if let Some((base, whole_bytes)) = &self.base {
            if let Some(diff) = MapDiff::between(base, &map) {
                let value = seal_diff(key, &diff);
                if value.len() * DIFF_SHARE <= *whole_bytes {
                    return Prepared {
                        whole: false,
                        value,
                        map: None,
                    };
                }
            }
        }
        Prepared {
            whole: true,
            value: seal_map(key, &map),
            map: Some(map),
        }
    }

    /// Forgets the base: the next map is written whole (after a key rotation, so that what
    /// etcd holds is sealed with the key that signs now).
    pub fn rebase(&mut self) {
        self.base = None;
    }

    /// `prepared` was written at `revision`: a whole map becomes the base.
    pub fn written(&mut self, prepared: Prepared, revision: i64) {
        if let Some(mut map) = prepared.map {
            map.epoch = u64::try_from(revision).unwrap_or(0);
            self.base = Some((map, prepared.value.len()));
        }
    }
}

/// Why a put could not be followed.
#[derive(Debug, PartialEq)]
pub enum Gap {
    /// A diff on a base this follower does not hold: read both keys again.
    Base { diff_base: u64, held: Option<u64> },
    /// The value does not open or does not apply.
    Bad(String),
}

impl std::fmt::Display for Gap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Gap::Base { diff_base, held } => write!(
                f,
                "a map diff on epoch {diff_base}, and the base held is {held:?}"
            ),
            Gap::Bad(e) => f.write_str(e),
        }
    }
}

/// A node's side: the base it holds, to apply diffs to.
#[derive(Default)]
pub struct MapFollower {
    base: Option<BucketMap>,
}

impl MapFollower {
    /// The current map from one read of the prefix `map` (`kvs`: key, value, mod revision;
    /// both keys read at one revision): the base, with the diff applied when there is one on
    /// it. `None` when etcd has no map yet.
    pub fn snapshot(
        &mut self,
        keys: &Keys,
        key: &ClusterKey,
        kvs: &[(Vec<u8>, Vec<u8>, i64)],
    ) -> Result<Option<BucketMap>, String> {
        let find = |k: String| kvs.iter().find(|(kk, _, _)| kk == k.as_bytes());
        let Some((_, value, rev)) = find(keys.map()) else {
            return Ok(None);
        };
        let base = open_map(key, value, *rev)?;
        self.base = Some(base.clone());
        match find(keys.map_diff()) {
            // A diff on another base cannot be written with this one (the leader deletes it
            // when it writes a whole map): the base alone is current.
            Some((_, value, rev)) => match self.put_diff(key, value, *rev) {
                Ok(m) => Ok(Some(m)),
                Err(Gap::Base { .. }) => Ok(Some(base)),
                Err(Gap::Bad(e)) => Err(e),
            },
            None => Ok(Some(base)),
        }
    }

    /// A put seen by a watch of the prefix `map`: the map it makes current (`Ok(None)` for a
    /// key that is neither).
    pub fn put(
        &mut self,
        keys: &Keys,
        key: &ClusterKey,
        k: &[u8],
        value: &[u8],
        revision: i64,
    ) -> Result<Option<BucketMap>, Gap> {
        if k == keys.map().as_bytes() {
            let m = open_map(key, value, revision).map_err(Gap::Bad)?;
            self.base = Some(m.clone());
            return Ok(Some(m));
        }
        if k == keys.map_diff().as_bytes() {
            return self.put_diff(key, value, revision).map(Some);
        }
        Ok(None)
    }

    fn put_diff(&self, key: &ClusterKey, value: &[u8], revision: i64) -> Result<BucketMap, Gap> {
        let diff = open_diff(key, value).map_err(Gap::Bad)?;
        let epoch = u64::try_from(revision).map_err(|_| Gap::Bad("a negative revision".into()))?;
        match &self.base {
            Some(base) if base.epoch == diff.base => diff.apply(base, epoch).map_err(Gap::Bad),
            other => Err(Gap::Base {
                diff_base: diff.base,
                held: other.as_ref().map(|b| b.epoch),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ClusterConfig;
    use ecdn_placement::pieces::{Scheme, SlotHistory};
    use ecdn_placement::{Placement, PlacementConfig};

    fn key() -> ClusterKey {
        ClusterKey::new(b"0123456789abcdef-secret")
    }

    fn keys() -> Keys {
        let mut text = String::from(
            "scheme = \"c2dn\"\nkey = \"0123456789abcdef-secret\"\n\
             coordinator = \"127.0.0.1:1\"\netcd = [\"http://127.0.0.1:2379\"]\n",
        );
        for id in 0..4 {
            text += &format!(
                "[[node]]\nid = {id}\nclient = \"127.0.0.1:{}\"\npeer = \"127.0.0.1:{}\"\n",
                10 + 2 * id,
                11 + 2 * id
            );
        }
        Keys::new(&ClusterConfig::parse(&text).unwrap())
    }

    fn placement(servers: usize, buckets: usize) -> Placement {
        let cfg = PlacementConfig {
            buckets,
            ..PlacementConfig::default()
        };
        Placement::new(&vec![1.0; servers], cfg).unwrap()
    }

    fn map(pl: &Placement, h: &SlotHistory) -> BucketMap {
        BucketMap::from_placement(0, Scheme::C2dn, 3, 1, pl, Some(h))
    }

    /// Server `s` fails: the placement changes and the history records the moves.
    fn fail(pl: &mut Placement, h: &mut SlotHistory, s: usize) {
        let before = h.holders(pl);
        pl.set_available(s, false);
        h.record(&before, &h.holders(pl));
    }

    #[test]
    fn a_sealed_map_opens_only_with_the_key_and_takes_the_revision() {
        let pl = placement(5, 20);
        let mut map = BucketMap::from_placement(5, Scheme::C2dn, 3, 1, &pl, None);
        let sealed = seal_map(&key(), &map);
        let opened = open_map(&key(), &sealed, 42).unwrap();
        assert_eq!(opened.epoch, 42);
        map.epoch = 42;
        assert_eq!(opened, map);
        let other = ClusterKey::new(b"another key of the same length!!");
        assert!(open_map(&other, &sealed, 42)
            .unwrap_err()
            .contains("not this cluster's"));
        let mut tampered = sealed.clone();
        let last = tampered.len() - 2;
        tampered[last] ^= 1;
        assert!(open_map(&key(), &tampered, 42).is_err());
        assert!(open_map(&key(), b"no newline", 1).is_err());
        // A map stored before compression (plain JSON) still opens.
        let plain = seal(&key(), MAP_WHAT, &serde_json::to_vec(&map).unwrap());
        assert_eq!(open_map(&key(), &plain, 42).unwrap(), map);
        // Sealed garbage that claims to be compressed is an error, not a panic.
        let mut junk = ZSTD_MAGIC.to_vec();
        junk.extend_from_slice(&[0xff; 64]);
        let sealed_junk = seal(&key(), MAP_WHAT, &junk);
        assert!(open_map(&key(), &sealed_junk, 1)
            .unwrap_err()
            .contains("decompress"));
        // A diff does not pass for a map, nor a map for a diff.
        let diff = MapDiff::between(&map, &map).unwrap();
        assert!(open_map(&key(), &seal_diff(&key(), &diff), 1).is_err());
        assert!(open_diff(&key(), &sealed).is_err());
    }

    #[test]
    fn the_leader_writes_diffs_while_small_and_a_node_follows_them() {
        let keys = keys();
        let (servers, buckets) = (60, 3000);
        let mut pl = placement(servers, buckets);
        let mut h = SlotHistory::new(buckets, 3, 1);
        let mut publisher = MapPublisher::default();
        let mut follower = MapFollower::default();
        // A late node, which will miss a whole map.
        let mut late = MapFollower::default();
        // The first map is whole (there is no base).
        let first = publisher.prepare(&key(), map(&pl, &h));
        assert!(first.whole);
        let value = first.value.clone();
        publisher.written(first, 100);
        let got = follower.put(&keys, &key(), keys.map().as_bytes(), &value, 100);
        assert_eq!(got.unwrap().unwrap().epoch, 100);
        late.put(&keys, &key(), keys.map().as_bytes(), &value, 100)
            .unwrap();
        // Failures one by one: each a small diff, cumulative from the base.
        let mut rev = 100;
        let mut whole_seen = false;
        for s in 0..20 {
            fail(&mut pl, &mut h, s);
            rev += 1;
            let want = map(&pl, &h);
            let p = publisher.prepare(&key(), want.clone());
            let (whole, value, k) = (p.whole, p.value.clone(), p.key(&keys));
            let bytes = value.len();
            publisher.written(p, rev);
            let got = follower
                .put(&keys, &key(), k.as_bytes(), &value, rev)
                .unwrap()
                .unwrap();
            let mut want_at = want.clone();
            want_at.epoch = rev as u64;
            assert_eq!(got, want_at, "after server {s} failed");
            if s == 0 {
                assert!(!whole, "one failure is a diff");
                let whole = seal_map(&key(), &want).len();
                assert!(bytes * DIFF_SHARE <= whole, "{bytes} bytes, whole {whole}");
            }
            if whole {
                whole_seen = true;
                // The late node missed it: the next diff is on a base it does not hold.
                continue;
            }
            if whole_seen {
                let gap = late.put(&keys, &key(), k.as_bytes(), &value, rev);
                assert!(matches!(gap, Err(Gap::Base { .. })), "{gap:?}");
                // It reads both keys and is current again.
                let base = &publisher.base.as_ref().unwrap().0;
                let kvs = vec![
                    (
                        keys.map().into_bytes(),
                        seal_map(&key(), base),
                        base.epoch as i64,
                    ),
                    (keys.map_diff().into_bytes(), value.clone(), rev),
                ];
                assert_eq!(
                    late.snapshot(&keys, &key(), &kvs).unwrap().unwrap(),
                    want_at
                );
                whole_seen = false;
            }
        }
        assert!(
            publisher.base.as_ref().unwrap().0.epoch > 100,
            "the diff grew past its share and a whole map was written"
        );
        // A put of another key is not a map.
        assert_eq!(
            follower.put(&keys, &key(), b"/ecdn/state", b"x", 1),
            Ok(None)
        );
    }
}
