//! Where an object's splits are, as a client learns it: the record and its split servers'
//! addresses from any node (`GET /_objects/<name>?locate`), cached for a while so that a read
//! of a hot object asks no node first.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ecdn_objects::meta::{ObjectMeta, ObjectName};

use crate::ClientError;

/// An object's record and, per split, its server's client address (`None`: not known to the
/// node that answered) and whether that node's map has the server available.
#[derive(Clone, Debug, PartialEq)]
pub struct Located {
    pub meta: ObjectMeta,
    pub addrs: Vec<Option<SocketAddr>>,
    pub available: Vec<bool>,
}

impl Located {
    /// Parses a `?locate` answer: the record's fields, `addrs` and `available` (without it,
    /// every server with an address is available), checked (the record against its own rules,
    /// one address and one flag per split).
    pub fn parse(body: &[u8]) -> Result<Located, ClientError> {
        let bad = |e: String| ClientError::BadAnswer(e);
        let mut v: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| bad(e.to_string()))?;
        let o = v
            .as_object_mut()
            .ok_or_else(|| bad("the locate answer is not a JSON object".into()))?;
        let addrs = o
            .remove("addrs")
            .ok_or_else(|| bad("the locate answer has no \"addrs\"".into()))?;
        let addrs: Vec<Option<String>> =
            serde_json::from_value(addrs).map_err(|e| bad(e.to_string()))?;
        let available: Option<Vec<bool>> = o
            .remove("available")
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| bad(e.to_string()))?;
        let meta: ObjectMeta = serde_json::from_value(v).map_err(|e| bad(e.to_string()))?;
        // Server ids are the node's business; the client checks the record's own shape.
        meta.validate(usize::MAX)
            .map_err(|e| bad(format!("the record: {e}")))?;
        if addrs.len() != meta.splits.len() {
            return Err(bad(format!(
                "{} addresses for {} splits",
                addrs.len(),
                meta.splits.len()
            )));
        }
        let addrs: Vec<Option<SocketAddr>> = addrs
            .into_iter()
            .map(|a| {
                a.map(|a| a.parse().map_err(|_| bad(format!("address {a:?}"))))
                    .transpose()
            })
            .collect::<Result<_, _>>()?;
        let available = available.unwrap_or_else(|| addrs.iter().map(Option::is_some).collect());
        if available.len() != addrs.len() {
            return Err(bad(format!(
                "{} availability flags for {} splits",
                available.len(),
                addrs.len()
            )));
        }
        Ok(Located {
            meta,
            addrs,
            available,
        })
    }
}

/// A client's cache of located objects, each fresh for `ttl`.
pub(crate) struct LocatedCache {
    ttl: Duration,
    entries: Mutex<HashMap<ObjectName, (Arc<Located>, Instant)>>,
}

impl LocatedCache {
    pub(crate) fn new(ttl: Duration) -> LocatedCache {
        LocatedCache {
            ttl,
            entries: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn get(&self, name: &ObjectName) -> Option<Arc<Located>> {
        let e = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        e.get(name)
            .filter(|(_, at)| at.elapsed() < self.ttl)
            .map(|(l, _)| l.clone())
    }

    pub(crate) fn insert(&self, name: ObjectName, l: Arc<Located>) {
        let mut e = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if e.len() >= 65_536 {
            e.retain(|_, (_, at)| at.elapsed() < self.ttl);
        }
        e.insert(name, (l, Instant::now()));
    }

    pub(crate) fn remove(&self, name: &ObjectName) {
        let mut e = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        e.remove(name);
    }
}

/// A body's bytes as a located object.
pub(crate) fn located(body: &Bytes) -> Result<Arc<Located>, ClientError> {
    Located::parse(body).map(Arc::new)
}
