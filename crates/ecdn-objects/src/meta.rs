//! An object's metadata (EC-Cache §4.2: "its associated k and r values and the associated
//! (k + r) server locations"), and the rules that keep a half-written object unreadable.
//!
//! * [`ObjectName`] — what follows `/_objects/` in a request: 1 to 1,024 bytes of
//!   `A–Z a–z 0–9 . _ - ~ /`, segments separated by single slashes, none empty, `.` or `..`.
//! * [`ObjectMeta`] — name, version, size, `k`, `r`, the split locations (`k + r` plus the
//!   extra parities the budget gave it; replicas when `k` = 1 and the object is replicated),
//!   the SHA-256 of the content, the sub-chunk size and every sub-chunk's CRC-32C (a reader
//!   checks any range of any split with the record alone). [`ObjectMeta::validate`] checks a record read from the network
//!   or from etcd before anything uses it.
//! * [`MetaTable`] — the coordinator's table. A write is *begun* (the writer gets a version
//!   no reader has seen) and *committed* with the record once at least `k` splits are stored;
//!   until then readers see the previous version or nothing. A commit of a version older than
//!   the current one is refused, so two writers of one name end with the later one.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::ServerId;

/// Longest object name, bytes: room for an S3 key's name (`s3/BUCKET/` and the key's 1,024
/// bytes in hex, 2,115 bytes: `ecdn_s3::names`).
pub const MAX_NAME: usize = 2200;
/// Most splits one object may have (a split per server of a large cluster).
pub const MAX_SPLITS: usize = 256;
/// Most sub-chunk checksums a record holds (512 KiB of hex): with `k` = 10, `r` = 1 and
/// 32 KiB sub-chunks, objects of up to 1.8 GiB.
pub const MAX_CRCS: usize = 1 << 16;

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum MetaError {
    #[error("object name {0:?}: {1}")]
    BadName(String, &'static str),
    #[error("object {name:?}: {why}")]
    BadRecord { name: String, why: String },
    #[error("object {0:?} does not exist")]
    NotFound(String),
    #[error("object {name:?}: version {version} is older than the current {current}")]
    Stale {
        name: String,
        version: u64,
        current: u64,
    },
    #[error("object {name:?}: version {version} was not begun (or was already committed)")]
    NotBegun { name: String, version: u64 },
}

/// A valid object name (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ObjectName(String);

impl ObjectName {
    pub fn parse(s: &str) -> Result<ObjectName, MetaError> {
        let bad = |why| Err(MetaError::BadName(s.chars().take(64).collect(), why));
        if s.is_empty() || s.len() > MAX_NAME {
            return bad("must be 1 to 2200 bytes");
        }
        if !s
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-~/".contains(&b))
        {
            return bad("may hold only A-Z a-z 0-9 . _ - ~ /");
        }
        if s.split('/')
            .any(|seg| seg.is_empty() || seg == "." || seg == "..")
        {
            return bad("has an empty, `.` or `..` segment");
        }
        Ok(ObjectName(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for ObjectName {
    type Error = MetaError;
    fn try_from(s: String) -> Result<Self, MetaError> {
        ObjectName::parse(&s)
    }
}

impl From<ObjectName> for String {
    fn from(n: ObjectName) -> String {
        n.0
    }
}

impl std::fmt::Display for ObjectName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One committed object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectMeta {
    pub name: ObjectName,
    /// Grows with every write of the name; splits are stored under (name, version).
    pub version: u64,
    pub size: u64,
    /// Data splits; 1 for a replicated object.
    pub k: usize,
    /// Parity splits the object was written with (the budget may add more: `splits.len()`
    /// − `k` in all).
    pub r: usize,
    /// Split `i`'s server (data `0..k`, parity `k..`); for a replicated object, the replicas.
    pub splits: Vec<ServerId>,
    /// Splits the writer stored (at least `k`; the others were not acknowledged).
    pub stored: Vec<bool>,
    /// SHA-256 of the content, lowercase hex.
    pub sha256: String,
    /// The sub-chunk size the object was coded with: its stripes are `k` sub-chunks wide.
    pub sub_chunk: u64,
    /// CRC-32C of sub-chunk `j` of split `i` at `i · stripes + j` (split-major, every split of
    /// `splits`; in JSON one string of 8 hex digits each): a reader checks every sub-chunk it
    /// reads, of a whole split or a range of one, with the record alone.
    #[serde(with = "hex_crcs")]
    pub crcs: Vec<u32>,
    /// Sub-chunks per digest window of a split (`crate::digest`); 0 in a record written
    /// without digests.
    #[serde(default)]
    pub window_stripes: u64,
    /// SHA-256 of window `w` of split `i` at `i · windows + w` (split-major, every split of
    /// `splits`; in JSON one string of 64 hex digits each): a reader without the cluster key
    /// checks every split byte it uses with the record alone (`crate::digest`). Empty in a
    /// record written without them.
    #[serde(default, with = "crate::digest::hex_digests")]
    pub digests: Vec<crate::digest::Sha>,
    /// What the S3 face keeps with an object it wrote; `None` for the object API's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3: Option<S3Attrs>,
}

/// What the S3 face keeps with an object it wrote (issue 67; `ecdn-node`'s `objects/s3/`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct S3Attrs {
    /// The ETag S3 clients compare, without its quotes: the content's MD5 in hex (or, for a
    /// multipart upload, the MD5 of its parts' MD5s, `-` and the number of parts).
    pub etag: String,
    /// When it was written, milliseconds since 1970.
    pub modified_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// The `x-amz-meta-*` headers: names lower-case without the prefix, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metadata: Vec<(String, String)>,
    /// For an object made of a multipart upload's parts: the parts, whose bytes in order are
    /// the object's (the record's own body is empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<S3Parts>,
}

/// The parts an object is made of (the S3 face's `CompleteMultipartUpload`, which keeps the
/// parts instead of copying their bytes): each part is an object of its own, named
/// [`S3Parts::part_name`], read at the version listed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct S3Parts {
    /// The upload's id (hex).
    pub upload: String,
    /// Each part's (number, version, size), in the object's order.
    pub parts: Vec<(u32, u64, u64)>,
}

/// What the objects of a multipart upload are named under: `s3mpu/UPLOAD/meta` (its
/// description), `s3mpu/UPLOAD/pNNNNN` (its parts).
pub const UPLOADS: &str = "s3mpu/";

/// The object name under [`UPLOADS`] of `what` (`meta`, or a part's `pNNNNN`) of `upload`.
pub fn upload_object(upload: &str, what: &str) -> String {
    format!("{UPLOADS}{upload}/{what}")
}

/// The last segment of part `number`'s object name (`pNNNNN`: names in part order).
pub fn part_segment(number: u32) -> String {
    format!("p{number:05}")
}

/// The object name of part `number` of `upload`.
pub fn part_object(upload: &str, number: u32) -> String {
    upload_object(upload, &part_segment(number))
}

/// Most parts of an object (S3's 10,000).
pub const MAX_PARTS: usize = 10_000;
/// The largest object made of parts (S3's 5 TiB).
pub const MAX_PARTS_SIZE: u64 = 5 << 40;

impl S3Parts {
    /// The object's size: its parts' together.
    pub fn size(&self) -> u64 {
        self.parts.iter().map(|p| p.2).sum()
    }

    /// The object name of part `number`.
    pub fn part_name(&self, number: u32) -> String {
        part_object(&self.upload, number)
    }

    fn check(&self) -> Result<(), String> {
        let hex = self.upload.bytes().all(|b| b.is_ascii_hexdigit());
        if self.upload.is_empty() || self.upload.len() > 64 || !hex {
            return Err("an upload id of 1 to 64 hex digits".into());
        }
        if self.parts.is_empty() || self.parts.len() > MAX_PARTS {
            return Err(format!("{} parts (1 to {MAX_PARTS})", self.parts.len()));
        }
        if self.parts.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err("part numbers must ascend".into());
        }
        let size = self.parts.iter().try_fold(0u64, |t, p| t.checked_add(p.2));
        if size.is_none_or(|s| s > MAX_PARTS_SIZE) {
            return Err(format!("parts of more than {MAX_PARTS_SIZE} bytes"));
        }
        Ok(())
    }
}

/// Most bytes of an object's S3 metadata, names and values (S3's 2 KB), and of its ETag and
/// content type.
pub const MAX_S3_METADATA: usize = 2048;
pub const MAX_S3_FIELD: usize = 1024;

impl S3Attrs {
    fn check(&self) -> Result<(), String> {
        let meta: usize = self.metadata.iter().map(|(n, v)| n.len() + v.len()).sum();
        if meta > MAX_S3_METADATA {
            return Err(format!(
                "S3 metadata of {meta} bytes (at most {MAX_S3_METADATA})"
            ));
        }
        let ct = self.content_type.as_ref().map_or(0, String::len);
        if self.etag.len() > MAX_S3_FIELD || ct > MAX_S3_FIELD {
            return Err("an S3 ETag or content type too long".into());
        }
        self.parts.as_ref().map_or(Ok(()), S3Parts::check)
    }
}

/// Sub-chunks per split of an object of `size` bytes in `k` data splits of `sub_chunk`-byte
/// sub-chunks.
pub fn stripes(size: u64, k: usize, sub_chunk: u64) -> u64 {
    size.div_ceil(k.max(1) as u64).div_ceil(sub_chunk.max(1))
}

/// [`ObjectMeta::crcs`] as one hex string (8 digits per checksum, big-endian).
pub(crate) mod hex_crcs {
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(crcs: &[u32], s: S) -> Result<S::Ok, S::Error> {
        let mut out = String::with_capacity(crcs.len() * 8);
        for c in crcs {
            out.push_str(&format!("{c:08x}"));
        }
        s.serialize_str(&out)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u32>, D::Error> {
        // Owned: a borrowed `&str` fails for a `serde_json::Value` and for escaped text.
        let s = String::deserialize(d)?;
        if s.len() % 8 != 0 {
            return Err(D::Error::custom("crcs: not a multiple of 8 hex digits"));
        }
        s.as_bytes()
            .chunks(8)
            .map(|c| {
                std::str::from_utf8(c)
                    .ok()
                    .and_then(|c| u32::from_str_radix(c, 16).ok())
                    .ok_or_else(|| D::Error::custom("crcs: not hex"))
            })
            .collect()
    }
}

impl ObjectMeta {
    /// Checks that `other` is this object with other parity splits beyond `k + r`: the same
    /// version, size, code, content and sub-chunk size, and the same first `k + r` splits
    /// (servers, stored flags and checksums).
    pub fn same_object(&self, other: &ObjectMeta) -> Result<(), MetaError> {
        let n = self.k + self.r;
        let stripes = stripes(self.size, self.k, self.sub_chunk) as usize;
        let same = self.version == other.version
            && self.size == other.size
            && (self.k, self.r, self.sub_chunk) == (other.k, other.r, other.sub_chunk)
            && self.sha256 == other.sha256
            && self.splits.get(..n) == other.splits.get(..n)
            && self.stored.get(..n) == other.stored.get(..n)
            && self.crcs.get(..n * stripes) == other.crcs.get(..n * stripes)
            && self.window_stripes == other.window_stripes
            && {
                let w = self.windows() as usize;
                self.digests.get(..n * w) == other.digests.get(..n * w)
            };
        if same {
            Ok(())
        } else {
            Err(MetaError::BadRecord {
                name: self.name.to_string(),
                why: "an update may change only the splits beyond k + r".into(),
            })
        }
    }

    /// Windows of each split (0 when the record has no digests).
    pub fn windows(&self) -> u64 {
        if self.digests.is_empty() {
            return 0;
        }
        crate::digest::windows(
            stripes(self.size, self.k, self.sub_chunk),
            self.window_stripes,
        )
    }

    /// Whether a reader can check splits against the record (written with window digests).
    pub fn has_digests(&self) -> bool {
        !self.digests.is_empty()
    }

    /// Split bytes of window `w` (of any split; the last may be shorter).
    pub fn window_range(&self, w: u64) -> std::ops::Range<u64> {
        let split_len = self.split_len();
        let per = self.window_stripes.max(1) * self.sub_chunk;
        (w * per).min(split_len)..((w + 1) * per).min(split_len)
    }

    /// Bytes of each split.
    pub fn split_len(&self) -> u64 {
        self.size.div_ceil(self.k.max(1) as u64)
    }

    /// The digest window `w` of split `split` must have.
    pub fn digest(&self, split: usize, w: u64) -> Option<&crate::digest::Sha> {
        let at = split as u64 * self.windows() + w;
        (w < self.windows())
            .then(|| self.digests.get(at as usize))
            .flatten()
    }

    /// Whether the object is replicated (each split is the whole object).
    pub fn replicated(&self) -> bool {
        self.k == 1
    }

    /// Checks a record from the network or etcd: `servers` is the cluster's server count.
    pub fn validate(&self, servers: usize) -> Result<(), MetaError> {
        let bad = |why: String| {
            Err(MetaError::BadRecord {
                name: self.name.to_string(),
                why,
            })
        };
        if let Some(Err(why)) = self.s3.as_ref().map(S3Attrs::check) {
            return bad(why);
        }
        let n = self.splits.len();
        if self.k == 0 || self.k + self.r > n || n > MAX_SPLITS {
            return bad(format!(
                "k = {}, r = {} with {n} splits (k >= 1, k + r <= splits <= {MAX_SPLITS})",
                self.k, self.r
            ));
        }
        if let Some(&s) = self.splits.iter().find(|&&s| s >= servers) {
            return bad(format!("split on server {s}, the cluster has {servers}"));
        }
        let mut sorted = self.splits.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != n {
            return bad("two splits on one server".into());
        }
        if self.stored.len() != n || self.stored.iter().filter(|&&s| s).count() < self.k {
            return bad(format!(
                "{} of {n} splits stored; at least k = {} must be",
                self.stored.iter().filter(|&&s| s).count(),
                self.k
            ));
        }
        if self.sub_chunk == 0 {
            return bad("sub_chunk must be at least 1".into());
        }
        let want = stripes(self.size, self.k, self.sub_chunk).checked_mul(n as u64);
        if want != Some(self.crcs.len() as u64) || self.crcs.len() > MAX_CRCS {
            return bad(format!(
                "{} sub-chunk checksums; {n} splits of {} sub-chunks need {} (at most {MAX_CRCS})",
                self.crcs.len(),
                stripes(self.size, self.k, self.sub_chunk),
                want.map_or("more".to_string(), |w| w.to_string())
            ));
        }
        if self.sha256.len() != 64
            || !self
                .sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return bad("sha256 must be 64 lowercase hex digits".into());
        }
        if !self.digests.is_empty() {
            let per = crate::digest::windows(
                stripes(self.size, self.k, self.sub_chunk),
                self.window_stripes,
            );
            if self.window_stripes == 0 || per * n as u64 != self.digests.len() as u64 {
                return bad(format!(
                    "{} window digests of {} sub-chunks each; {n} splits need {}",
                    self.digests.len(),
                    self.window_stripes,
                    per * n as u64
                ));
            }
        }
        Ok(())
    }
}

/// The coordinator's object table (see the module documentation).
#[derive(Clone, Debug, Default)]
pub struct MetaTable {
    committed: BTreeMap<ObjectName, ObjectMeta>,
    /// Versions begun and not yet committed, by name.
    pending: BTreeMap<ObjectName, Vec<u64>>,
    next_version: u64,
}

impl MetaTable {
    /// A table whose versions start above `floor` (a restarted coordinator passes the
    /// highest version it may have handed out, e.g. its start time in microseconds).
    pub fn new(floor: u64) -> MetaTable {
        MetaTable {
            next_version: floor + 1,
            ..MetaTable::default()
        }
    }

    /// Starts a write of `name`: a new version, invisible to readers until committed.
    pub fn begin(&mut self, name: &ObjectName) -> u64 {
        let v = self.next_version;
        self.next_version += 1;
        self.pending.entry(name.clone()).or_default().push(v);
        v
    }

    /// A number this table never handed out and never will, above every one it did (its
    /// versions' sequence, with no write begun): what orders a cluster's purges against its
    /// fills (`ecdn-node`'s `purge_log.rs`).
    pub fn sequence(&mut self) -> u64 {
        let v = self.next_version;
        self.next_version += 1;
        v
    }

    /// Makes a begun write visible. Refused for a version not begun, or older than the
    /// committed one (a later write of the name won); either way nothing changes.
    pub fn commit(&mut self, meta: ObjectMeta, servers: usize) -> Result<(), MetaError> {
        meta.validate(servers)?;
        let name = meta.name.clone();
        let pending = self.pending.get(&name);
        if !pending.is_some_and(|p| p.contains(&meta.version)) {
            return Err(MetaError::NotBegun {
                name: name.to_string(),
                version: meta.version,
            });
        }
        if let Some(cur) = self.committed.get(&name) {
            if cur.version > meta.version {
                return Err(MetaError::Stale {
                    name: name.to_string(),
                    version: meta.version,
                    current: cur.version,
                });
            }
        }
        self.abort(&name, meta.version);
        self.committed.insert(name, meta);
        Ok(())
    }

    /// Replaces the committed record of the same version with `meta`: the same object with
    /// more or fewer parity splits (the budget re-spent). Refused when no record of that name
    /// is committed ([`MetaError::NotFound`]), when another version is ([`MetaError::Stale`]:
    /// the object was written again meanwhile), or when `meta` changes anything but its
    /// splits beyond `k + r`.
    pub fn update(&mut self, meta: ObjectMeta, servers: usize) -> Result<(), MetaError> {
        meta.validate(servers)?;
        let Some(cur) = self.committed.get_mut(&meta.name) else {
            return Err(MetaError::NotFound(meta.name.to_string()));
        };
        if cur.version != meta.version {
            return Err(MetaError::Stale {
                name: meta.name.to_string(),
                version: meta.version,
                current: cur.version,
            });
        }
        cur.same_object(&meta)?;
        *cur = meta;
        Ok(())
    }

    /// Drops a begun write from the pending ones: it will not be committed (its splits are
    /// garbage), or it just was.
    pub fn abort(&mut self, name: &ObjectName, version: u64) {
        if let Some(p) = self.pending.get_mut(name) {
            p.retain(|&v| v != version);
            if p.is_empty() {
                self.pending.remove(name);
            }
        }
    }

    /// The committed record.
    pub fn get(&self, name: &ObjectName) -> Option<&ObjectMeta> {
        self.committed.get(name)
    }

    /// Removes the committed record; returns it (its splits are then removed by the caller).
    pub fn remove(&mut self, name: &ObjectName) -> Result<ObjectMeta, MetaError> {
        self.committed
            .remove(name)
            .ok_or_else(|| MetaError::NotFound(name.to_string()))
    }

    pub fn len(&self) -> usize {
        self.committed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.committed.is_empty()
    }

    /// Every committed record, by name.
    pub fn iter(&self) -> impl Iterator<Item = &ObjectMeta> {
        self.committed.values()
    }

    /// Up to `limit` committed records whose names begin with `prefix`, after `after`
    /// (exclusive; `None`: from the first), in name order: a range of the table, however many
    /// records it holds.
    pub fn list(&self, prefix: &str, after: Option<&str>, limit: usize) -> Vec<Listed> {
        use std::ops::Bound;
        let start = match after {
            Some(a) if a >= prefix => Bound::Excluded(a),
            _ => Bound::Included(prefix),
        };
        self.committed
            .range::<str, _>((start, Bound::Unbounded))
            .take_while(|(n, _)| n.as_str().starts_with(prefix))
            .take(limit)
            .map(|(_, m)| Listed::of(m))
            .collect()
    }
}

/// What a listing says of one object: enough for a page of S3's `ListObjectsV2`, without its
/// splits and checksums.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Listed {
    pub name: ObjectName,
    pub version: u64,
    pub size: u64,
    pub sha256: String,
    /// The S3 face's ETag and time of an object it wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3: Option<(String, u64)>,
}

impl Listed {
    pub fn of(m: &ObjectMeta) -> Listed {
        Listed {
            name: m.name.clone(),
            version: m.version,
            size: m
                .s3
                .as_ref()
                .and_then(|a| a.parts.as_ref())
                .map_or(m.size, S3Parts::size),
            sha256: m.sha256.clone(),
            s3: m.s3.as_ref().map(|a| (a.etag.clone(), a.modified_ms)),
        }
    }
}

impl std::borrow::Borrow<str> for ObjectName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> ObjectName {
        ObjectName::parse(s).unwrap()
    }

    fn meta(n: &str, version: u64) -> ObjectMeta {
        ObjectMeta {
            name: name(n),
            version,
            size: 1 << 20,
            k: 3,
            r: 1,
            splits: vec![4, 0, 7, 2],
            stored: vec![true, true, false, true],
            sha256: "ab".repeat(32),
            sub_chunk: 64 << 10,
            // 1 MiB in 3 data splits: 4 splits of 6 sub-chunks of 64 KiB.
            crcs: (0..24).map(|i| 0xdead_0000 + i).collect(),
            window_stripes: 0,
            digests: Vec::new(),
            s3: None,
        }
    }

    #[test]
    fn names() {
        for good in ["a", "models/resnet-50.v2/weights~1", "A_b.c"] {
            assert_eq!(name(good).as_str(), good);
        }
        for bad in [
            "",
            "/a",
            "a/",
            "a//b",
            "a/../b",
            ".",
            "a b",
            "a?b",
            "é",
            &"x".repeat(2201),
        ] {
            assert!(ObjectName::parse(bad).is_err(), "{bad:?}");
        }
        // A name in JSON is checked as it is read.
        assert!(serde_json::from_str::<ObjectName>("\"a/../b\"").is_err());
    }

    #[test]
    fn records_are_checked() {
        meta("a", 1).validate(8).unwrap();
        let refused = |f: &dyn Fn(&mut ObjectMeta), why: &str| {
            let mut m = meta("a", 1);
            f(&mut m);
            let e = m.validate(8).unwrap_err().to_string();
            assert!(e.contains(why), "{e}");
        };
        refused(&|m| m.k = 0, "k = 0");
        refused(&|m| m.r = 2, "k + r");
        refused(&|m| m.splits[0] = 8, "server 8");
        refused(&|m| m.splits[0] = 0, "two splits");
        refused(&|m| m.stored = vec![true, false, false, true], "2 of 4");
        refused(&|m| m.stored.pop().map(drop).unwrap_or(()), "of 4");
        refused(&|m| m.sha256 = "AB".repeat(32), "sha256");
        refused(&|m| m.sub_chunk = 0, "sub_chunk");
        refused(&|m| m.sub_chunk = 32 << 10, "11 sub-chunks need 44");
        refused(&|m| m.crcs.truncate(23), "23 sub-chunk checksums");
        let json = serde_json::to_string(&meta("a", 1)).unwrap();
        assert!(json.contains("\"crcs\":\"dead0000dead0001"), "{json}");
        for bad in ["dead000", "dead000g"] {
            let j = json.replace("dead0000dead0001", bad);
            assert!(serde_json::from_str::<ObjectMeta>(&j).is_err(), "{bad}");
        }
        assert_eq!(
            serde_json::from_str::<ObjectMeta>(&json).unwrap(),
            meta("a", 1)
        );
    }

    /// Nothing half-written is readable; the later of two writes wins; aborts leave no trace.
    #[test]
    fn only_committed_writes_are_visible() {
        let mut t = MetaTable::new(100);
        let a = name("a");
        let v1 = t.begin(&a);
        assert_eq!(v1, 101);
        assert!(t.get(&a).is_none(), "begun, not committed");
        let v2 = t.begin(&a);
        t.commit(meta("a", v2), 8).unwrap();
        assert_eq!(t.get(&a).unwrap().version, v2);
        // The earlier write finishing last does not replace the later one.
        assert!(matches!(
            t.commit(meta("a", v1), 8),
            Err(MetaError::Stale { .. })
        ));
        assert_eq!(t.get(&a).unwrap().version, v2);
        // A version never begun, or committed twice, is refused.
        assert!(matches!(
            t.commit(meta("a", 999), 8),
            Err(MetaError::NotBegun { .. })
        ));
        assert!(matches!(
            t.commit(meta("a", v2), 8),
            Err(MetaError::NotBegun { .. })
        ));
        let b = name("b");
        let vb = t.begin(&b);
        t.abort(&b, vb);
        assert!(matches!(
            t.commit(meta("b", vb), 8),
            Err(MetaError::NotBegun { .. })
        ));
        // An invalid record is refused before anything else.
        let v3 = t.begin(&a);
        let mut bad = meta("a", v3);
        bad.k = 0;
        assert!(matches!(t.commit(bad, 8), Err(MetaError::BadRecord { .. })));
        assert_eq!(t.len(), 1);
        // An update: the committed version with one more parity split (and its checksums);
        // anything else, another version, or a name not committed is refused.
        let mut more = meta("a", v2);
        more.splits.push(6);
        more.stored.push(true);
        more.crcs.extend([9; 6]);
        t.update(more.clone(), 8).unwrap();
        assert_eq!(t.get(&a).unwrap(), &more);
        let mut changed = more.clone();
        changed.crcs[0] ^= 1;
        assert!(matches!(
            t.update(changed, 8),
            Err(MetaError::BadRecord { .. })
        ));
        let mut other = more.clone();
        other.version = v3;
        assert!(matches!(t.update(other, 8), Err(MetaError::Stale { .. })));
        assert!(matches!(
            t.update(meta("b", vb), 8),
            Err(MetaError::NotFound(_))
        ));
        t.update(meta("a", v2), 8).unwrap();
        assert_eq!(t.get(&a).unwrap().splits.len(), 4, "back to k + r");
        assert_eq!(t.remove(&a).unwrap().version, v2);
        assert!(t.is_empty() && t.remove(&a).is_err());
    }

    #[test]
    fn a_listing_is_a_range_of_names() {
        let mut t = MetaTable::new(0);
        let names = [
            "a/1",
            "a/2",
            "a/3",
            "ab",
            "b/1",
            "s3/x/61",
            "s3/x/6162",
            "s3/y/61",
        ];
        for n in names {
            let v = t.begin(&name(n));
            t.commit(meta(n, v), 8).unwrap();
        }
        // Begun, not committed: not listed.
        t.begin(&name("a/4"));
        let listed = |prefix: &str, after: Option<&str>, limit: usize| -> Vec<String> {
            t.list(prefix, after, limit)
                .into_iter()
                .map(|l| l.name.to_string())
                .collect()
        };
        assert_eq!(listed("a/", None, 10), ["a/1", "a/2", "a/3"]);
        assert_eq!(listed("a", None, 10), ["a/1", "a/2", "a/3", "ab"]);
        assert_eq!(listed("a/", Some("a/1"), 10), ["a/2", "a/3"]);
        assert_eq!(listed("a/", Some("a/1"), 1), ["a/2"]);
        // `after` before the prefix starts at the prefix; past it, nothing.
        assert_eq!(listed("s3/x/", Some("a"), 10), ["s3/x/61", "s3/x/6162"]);
        assert_eq!(listed("s3/x/", Some("s3/x/61ff"), 10), Vec::<String>::new());
        assert_eq!(listed("", None, 100).len(), names.len());
        assert_eq!(listed("zz", None, 10), Vec::<String>::new());
        let l = &t.list("b/", None, 1)[0];
        assert_eq!(
            (l.size, l.sha256.as_str()),
            (1 << 20, "ab".repeat(32).as_str())
        );
    }

    #[test]
    fn an_object_of_parts_is_checked_and_listed_at_its_parts_size() {
        let mut m = meta("s3/b/6b", 3);
        let parts = |parts: Vec<(u32, u64, u64)>| S3Attrs {
            etag: "e-2".into(),
            parts: Some(S3Parts {
                upload: "00ff".into(),
                parts,
            }),
            ..S3Attrs::default()
        };
        m.s3 = Some(parts(vec![(1, 7, 5 << 20), (3, 9, 10)]));
        m.validate(8).unwrap();
        assert_eq!(Listed::of(&m).size, (5 << 20) + 10);
        let p = m.s3.as_ref().and_then(|a| a.parts.as_ref()).unwrap();
        assert_eq!(p.part_name(3), "s3mpu/00ff/p00003");
        let bad = [
            vec![],
            vec![(2, 1, 1), (2, 1, 1)],
            vec![(3, 1, 1), (1, 1, 1)],
            vec![(1, 1, MAX_PARTS_SIZE), (2, 1, 1)],
            vec![(1, 1, u64::MAX), (2, 1, 1)],
        ];
        for b in bad {
            m.s3 = Some(parts(b.clone()));
            assert!(m.validate(8).is_err(), "{b:?}");
        }
        m.s3 = Some(parts(vec![(1, 1, 1)]));
        m.s3.as_mut().unwrap().parts.as_mut().unwrap().upload = "not hex".into();
        assert!(m.validate(8).is_err());
    }
}
