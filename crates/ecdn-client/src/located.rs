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

/// What the client learned of the split servers from the records it located: each one's
/// address and whether the node that answered had it in its map. The node asked for a record
/// is one the client has no reason to avoid: not out of the map, not found slow by its reads
/// (a locate to a slow node costs its round trips before the read begins).
#[derive(Default)]
pub(crate) struct ServerView {
    servers: Mutex<HashMap<usize, (SocketAddr, bool)>>,
}

impl ServerView {
    /// Takes what `l` says of its split servers.
    pub(crate) fn learn(&self, l: &Located) {
        let mut s = self.servers.lock().unwrap_or_else(|p| p.into_inner());
        for ((&id, addr), &available) in l.meta.splits.iter().zip(&l.addrs).zip(&l.available) {
            if let Some(addr) = addr {
                s.insert(id, (*addr, available));
            }
        }
    }

    /// `nodes` in the order to ask them: those to avoid (out of the map, or among `slow`,
    /// server ids) last, each group in the order given.
    pub(crate) fn order(&self, nodes: Vec<SocketAddr>, slow: &[usize]) -> Vec<SocketAddr> {
        let avoid: Vec<SocketAddr> = {
            let s = self.servers.lock().unwrap_or_else(|p| p.into_inner());
            s.iter()
                .filter(|(id, (_, available))| !available || slow.contains(id))
                .map(|(_, (addr, _))| *addr)
                .collect()
        };
        let (mut first, last): (Vec<_>, Vec<_>) =
            nodes.into_iter().partition(|a| !avoid.contains(a));
        first.extend(last);
        first
    }
}

/// A body's bytes as a located object.
pub(crate) fn located(body: &Bytes) -> Result<Arc<Located>, ClientError> {
    Located::parse(body).map(Arc::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(splits: Vec<usize>) -> ObjectMeta {
        let n = splits.len();
        ObjectMeta {
            name: ObjectName::parse("s/o").unwrap(),
            version: 1,
            size: 1000,
            k: 1,
            r: n - 1,
            splits,
            stored: vec![true; n],
            sha256: String::new(),
            sub_chunk: 1 << 20,
            crcs: vec![],
            window_stripes: 1,
            digests: vec![],
            s3: None,
        }
    }

    #[test]
    fn nodes_out_of_the_map_or_slow_are_asked_last() {
        let addr = |i: u16| SocketAddr::from(([127, 0, 0, 1], 9000 + i));
        let view = ServerView::default();
        view.learn(&Located {
            meta: meta(vec![0, 1, 2, 3]),
            addrs: vec![Some(addr(0)), Some(addr(1)), None, Some(addr(3))],
            available: vec![true, false, false, true],
        });
        let nodes: Vec<SocketAddr> = (0..5).map(addr).collect();
        // Node 1 is out of the map; node 3 slow; node 2 and 4 unknown, asked in turn.
        let order = view.order(nodes.clone(), &[3]);
        assert_eq!(order, [addr(0), addr(2), addr(4), addr(1), addr(3)]);
        // Back in the map, and no longer slow: the order given.
        view.learn(&Located {
            meta: meta(vec![1, 3]),
            addrs: vec![Some(addr(1)), Some(addr(3))],
            available: vec![true, true],
        });
        assert_eq!(view.order(nodes.clone(), &[]), nodes);
    }
}
