//! The keys of one cluster in etcd, and how values stored there are sealed with the cluster
//! key: what both a node's side of etcd (`crate::etcd`) and the map's stored form
//! (`crate::etcd_map`) build on.

use crate::auth::ClusterKey;
use crate::config::ClusterConfig;

/// The keys of one cluster in etcd.
#[derive(Clone, Debug)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    pub fn new(cfg: &ClusterConfig) -> Keys {
        Keys {
            prefix: cfg.etcd_prefix.clone(),
        }
    }
    pub fn nodes(&self) -> String {
        format!("{}nodes/", self.prefix)
    }
    pub fn node(&self, id: usize) -> String {
        format!("{}nodes/{id}", self.prefix)
    }
    pub fn loads(&self) -> String {
        format!("{}loads/", self.prefix)
    }
    pub fn load(&self, id: usize) -> String {
        format!("{}loads/{id}", self.prefix)
    }
    /// The prefix of the nodes' health views ([`crate::health`]).
    pub fn healths(&self) -> String {
        format!("{}health/", self.prefix)
    }
    /// Node `id`'s current views of its peers, under its lease.
    pub fn health(&self, id: usize) -> String {
        format!("{}health/{id}", self.prefix)
    }
    pub fn leader(&self) -> String {
        format!("{}leader", self.prefix)
    }
    /// The last whole map (see `crate::etcd_map`); also the prefix of both map keys.
    pub fn map(&self) -> String {
        format!("{}map", self.prefix)
    }
    /// The diff from the whole map to the current one (see `crate::etcd_map`).
    pub fn map_diff(&self) -> String {
        format!("{}map-diff", self.prefix)
    }
    pub fn state(&self) -> String {
        format!("{}state", self.prefix)
    }
    /// EC-Cache's committed object record of `name`.
    pub fn object(&self, name: &str) -> String {
        format!("{}objects/{name}", self.prefix)
    }
    /// The prefix of every object record.
    pub fn objects(&self) -> String {
        format!("{}objects/", self.prefix)
    }
    /// The last begun write of `name` (the revision of its put is the write's version).
    pub fn object_write(&self, name: &str) -> String {
        format!("{}object-writes/{name}", self.prefix)
    }
    /// Put (empty) for a number of the cluster's sequence: the revision of the put.
    pub fn sequence(&self) -> String {
        format!("{}sequence", self.prefix)
    }
    /// The committed version of `name`, 20 decimal digits.
    pub fn object_version(&self, name: &str) -> String {
        format!("{}object-versions/{name}", self.prefix)
    }
    /// The node id of a `nodes/{id}` or `loads/{id}` key.
    pub fn id_of(&self, key: &[u8], under: &str) -> Option<usize> {
        let key = std::str::from_utf8(key).ok()?;
        let id = key.strip_prefix(under)?;
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) || id.len() > 6 {
            return None;
        }
        id.parse().ok()
    }
}

/// The stored form of a JSON value `what` names (`etcd:map`, `etcd:object`): the signature of
/// the JSON (HMAC with the cluster key, over `what` too, so one kind of value cannot pass for
/// another), a newline, the JSON.
pub(crate) fn seal(key: &ClusterKey, what: &str, json: &[u8]) -> Vec<u8> {
    let mut out = key.seal(what, json).into_bytes();
    out.push(b'\n');
    out.extend_from_slice(json);
    out
}

/// The JSON of a value sealed by [`seal`] as `what`; an error for anything not sealed with
/// this cluster's key.
pub(crate) fn open<'a>(key: &ClusterKey, what: &str, value: &'a [u8]) -> Result<&'a [u8], String> {
    let nl = value
        .iter()
        .position(|&b| b == b'\n')
        .ok_or("the stored value has no signature line")?;
    let (sig, json) = (&value[..nl], &value[nl + 1..]);
    let sig = std::str::from_utf8(sig).map_err(|_| "the signature is not text")?;
    key.check_seal(what, json, sig)
        .map_err(|e| format!("not this cluster's (sealed with another key): {e}"))?;
    Ok(json)
}
