//! The object metadata of EC-Cache's object API (issue 12) at the embedded coordinator: the
//! [`ecdn_objects::meta::MetaTable`], behind signed requests. A writing node begins a
//! version, stores the splits where it chose, and commits the record once at least `k` splits
//! are stored; a reader asks for the committed record (one lookup) and nothing begun is ever
//! visible.
//!
//! * `POST /coord/objects/begin?name=N` → `{"version": V}`
//! * `POST /coord/objects/commit` with the [`ObjectMeta`] → `{"version": V}` (`409` when a
//!   later write of the name was committed first, `400` for a record that fails
//!   [`ObjectMeta::validate`] or a version not begun)
//! * `POST /coord/objects/update` with the [`ObjectMeta`] → `{"version": V}`: the committed
//!   record of that version with other parity splits (`MetaTable::update`; `409` when
//!   another version is committed, `404` when none is)
//! * `POST /coord/objects/abort?name=N&version=V` → `{"version": V}`
//! * `GET /coord/objects/get?name=N` → the [`ObjectMeta`] (`404` when there is none)
//! * `POST /coord/objects/remove?name=N` → the removed [`ObjectMeta`] (the caller deletes its
//!   splits)
//! * `GET /coord/objects/list?prefix=P[&after=A]&limit=N` → the [`Listed`] records whose
//!   names begin with `P`, after `A`, at most `N` (≤ [`MAX_LIST`]), in name order (S3's
//!   listings: a range of the table, not a scan)
//! * `POST /coord/objects/sequence` → `{"version": V}`: a number of the versions' sequence
//!   with no write begun (a purge's place in the order of the cluster's fills:
//!   [`MetaTable::sequence`](ecdn_objects::meta::MetaTable::sequence))

use ecdn_objects::meta::{Listed, MetaError, ObjectMeta, ObjectName};
use serde::{Deserialize, Serialize};

use super::state::State;

pub const OBJECTS_PREFIX: &str = "/coord/objects/";
pub const BEGIN_PATH: &str = "/coord/objects/begin";
pub const COMMIT_PATH: &str = "/coord/objects/commit";
pub const UPDATE_PATH: &str = "/coord/objects/update";
pub const ABORT_PATH: &str = "/coord/objects/abort";
pub const GET_PATH: &str = "/coord/objects/get";
pub const REMOVE_PATH: &str = "/coord/objects/remove";
pub const SEQUENCE_PATH: &str = "/coord/objects/sequence";
pub const LIST_PATH: &str = "/coord/objects/list";

/// Most records one listing answers.
pub const MAX_LIST: usize = 1001;

/// Limit on a commit's body: a record's splits and names take a few KB, its sub-chunk
/// checksums 8 hex digits each.
pub(crate) const COMMIT_LIMIT: usize = (64 << 10) + 8 * ecdn_objects::meta::MAX_CRCS;

/// An object metadata request.
#[derive(Clone, Debug, PartialEq)]
pub enum ObjectOp {
    Begin(ObjectName),
    Commit(Box<ObjectMeta>),
    Update(Box<ObjectMeta>),
    Abort(ObjectName, u64),
    Get(ObjectName),
    Remove(ObjectName),
    Sequence,
    List {
        prefix: String,
        after: Option<String>,
        limit: usize,
    },
}

/// The answer to `begin`, `commit` and `abort`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VersionReply {
    pub version: u64,
}

/// What a request's query says: `name=` (required) and `version=` (for abort), nothing else.
fn query_of(query: Option<&str>, want_version: bool) -> Result<(ObjectName, u64), String> {
    let (mut name, mut version) = (None, None);
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("name", v)) => name = Some(ObjectName::parse(v).map_err(|e| e.to_string())?),
            Some(("version", v)) if want_version => {
                version = Some(
                    v.parse()
                        .map_err(|_| format!("version={v:?}: need a number"))?,
                )
            }
            _ => return Err(format!("unknown query parameter {pair:?}")),
        }
    }
    let name = name.ok_or("need the query name=OBJECT")?;
    match (want_version, version) {
        (true, None) => Err("need the query version=V".into()),
        (_, v) => Ok((name, v.unwrap_or(0))),
    }
}

impl ObjectOp {
    /// The request at `path` (one of this module's paths).
    pub fn from_request(path: &str, query: Option<&str>, body: &[u8]) -> Result<ObjectOp, String> {
        Ok(match path {
            BEGIN_PATH => ObjectOp::Begin(query_of(query, false)?.0),
            GET_PATH => ObjectOp::Get(query_of(query, false)?.0),
            REMOVE_PATH => ObjectOp::Remove(query_of(query, false)?.0),
            LIST_PATH => list_query(query)?,
            SEQUENCE_PATH => {
                if query.is_some_and(|q| !q.is_empty()) {
                    return Err("sequence takes no query".into());
                }
                ObjectOp::Sequence
            }
            ABORT_PATH => {
                let (name, version) = query_of(query, true)?;
                ObjectOp::Abort(name, version)
            }
            COMMIT_PATH | UPDATE_PATH => {
                if query.is_some_and(|q| !q.is_empty()) {
                    return Err("commit and update take no query".into());
                }
                let meta = Box::new(
                    serde_json::from_slice(body).map_err(|e| format!("object record: {e}"))?,
                );
                if path == COMMIT_PATH {
                    ObjectOp::Commit(meta)
                } else {
                    ObjectOp::Update(meta)
                }
            }
            other => return Err(format!("{other}: no such object endpoint")),
        })
    }

    /// Whether the request carries a body (commit, update) or nothing.
    pub fn body_limit(path: &str) -> usize {
        if path == COMMIT_PATH || path == UPDATE_PATH {
            COMMIT_LIMIT
        } else {
            0
        }
    }

    /// The HTTP method of `path`.
    pub fn method_of(path: &str) -> Option<hyper::Method> {
        match path {
            GET_PATH | LIST_PATH => Some(hyper::Method::GET),
            BEGIN_PATH | COMMIT_PATH | UPDATE_PATH | ABORT_PATH | REMOVE_PATH | SEQUENCE_PATH => {
                Some(hyper::Method::POST)
            }
            _ => None,
        }
    }
}

/// What a request did: a version, a record, or a listing.
#[derive(Clone, Debug, PartialEq)]
pub enum ObjectAnswer {
    Version(u64),
    Record(Box<ObjectMeta>),
    Listed(Vec<Listed>),
}

/// A listing's query: `prefix=` (may be empty), `after=` (optional), `limit=` (1 to
/// [`MAX_LIST`]); percent-encoded as `CoordinatorClient::object_list` writes them.
fn list_query(query: Option<&str>) -> Result<ObjectOp, String> {
    let (mut prefix, mut after, mut limit) = (None, None, None);
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (n, v) = pair.split_once('=').unwrap_or((pair, ""));
        let v = decode(v).ok_or_else(|| format!("{n}: not UTF-8 once decoded"))?;
        match n {
            "prefix" => prefix = Some(v),
            "after" => after = Some(v),
            "limit" => {
                limit = Some(
                    v.parse::<usize>()
                        .ok()
                        .filter(|l| (1..=MAX_LIST).contains(l))
                        .ok_or(format!("limit={v:?}: need 1 to {MAX_LIST}"))?,
                )
            }
            _ => return Err(format!("unknown query parameter {pair:?}")),
        }
    }
    Ok(ObjectOp::List {
        prefix: prefix.ok_or("need the query prefix=")?,
        after,
        limit: limit.ok_or("need the query limit=")?,
    })
}

/// `%XX` decoded (the names and prefixes a listing carries hold only bytes of object names,
/// which the client encodes all the same).
fn decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let h = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(h, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `s` percent-encoded for a listing's query (every byte but `A-Z a-z 0-9 - . _ ~ /`).
pub fn encode(s: &str) -> String {
    ecdn_s3::text::uri_encode(s.as_bytes(), false)
}

impl State {
    /// Carries out an object metadata request.
    pub(super) fn object_op(&mut self, op: ObjectOp) -> Result<ObjectAnswer, MetaError> {
        let servers = self.placement.servers();
        match op {
            ObjectOp::Begin(name) => Ok(ObjectAnswer::Version(self.objects.begin(&name))),
            ObjectOp::Commit(meta) => {
                let version = meta.version;
                self.objects.commit(*meta, servers)?;
                Ok(ObjectAnswer::Version(version))
            }
            ObjectOp::Update(meta) => {
                let version = meta.version;
                self.objects.update(*meta, servers)?;
                Ok(ObjectAnswer::Version(version))
            }
            ObjectOp::Abort(name, version) => {
                self.objects.abort(&name, version);
                Ok(ObjectAnswer::Version(version))
            }
            ObjectOp::Get(name) => self
                .objects
                .get(&name)
                .map(|m| ObjectAnswer::Record(Box::new(m.clone())))
                .ok_or_else(|| MetaError::NotFound(name.to_string())),
            ObjectOp::Remove(name) => self
                .objects
                .remove(&name)
                .map(|m| ObjectAnswer::Record(Box::new(m))),
            ObjectOp::Sequence => Ok(ObjectAnswer::Version(self.objects.sequence())),
            ObjectOp::List {
                prefix,
                after,
                limit,
            } => Ok(ObjectAnswer::Listed(self.objects.list(
                &prefix,
                after.as_deref(),
                limit,
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::coordinator::state::tests::{cfg, opts};

    fn record(name: &str, version: u64) -> ObjectMeta {
        ObjectMeta {
            name: ObjectName::parse(name).unwrap(),
            version,
            size: 1000,
            k: 2,
            r: 1,
            splits: vec![3, 0, 4],
            stored: vec![true, true, true],
            sha256: "0".repeat(64),
            sub_chunk: 512,
            crcs: vec![7; 3],
            window_stripes: 0,
            digests: Vec::new(),
            s3: None,
        }
    }

    #[test]
    fn requests_parse() {
        let a = ObjectName::parse("a/b").unwrap();
        assert_eq!(
            ObjectOp::from_request(BEGIN_PATH, Some("name=a/b"), b"").unwrap(),
            ObjectOp::Begin(a.clone())
        );
        assert_eq!(
            ObjectOp::from_request(ABORT_PATH, Some("name=a/b&version=7"), b"").unwrap(),
            ObjectOp::Abort(a.clone(), 7)
        );
        let body = serde_json::to_vec(&record("a/b", 3)).unwrap();
        assert_eq!(
            ObjectOp::from_request(COMMIT_PATH, None, &body).unwrap(),
            ObjectOp::Commit(Box::new(record("a/b", 3)))
        );
        for (path, q) in [
            (BEGIN_PATH, None),
            (BEGIN_PATH, Some("name=../x")),
            (GET_PATH, Some("name=a&x=1")),
            (ABORT_PATH, Some("name=a")),
            (ABORT_PATH, Some("name=a&version=x")),
            (COMMIT_PATH, Some("name=a")),
            ("/coord/objects/list", Some("name=a")),
        ] {
            assert!(
                ObjectOp::from_request(path, q, b"").is_err(),
                "{path} {q:?}"
            );
        }
        assert!(ObjectOp::from_request(COMMIT_PATH, None, b"{}").is_err());
    }

    /// Through the coordinator's state: begun is invisible, committed is one lookup, removed is
    /// gone; a record naming a server the cluster lacks is refused.
    #[test]
    fn the_state_keeps_only_committed_records() {
        let mut st = State::new(&cfg("c2dn", 5), &opts(), Instant::now()).unwrap();
        let name = ObjectName::parse("x").unwrap();
        let ObjectAnswer::Version(v) = st.object_op(ObjectOp::Begin(name.clone())).unwrap() else {
            panic!("a version")
        };
        assert!(st.object_op(ObjectOp::Get(name.clone())).is_err());
        let mut bad = record("x", v);
        bad.splits[0] = 5;
        assert!(matches!(
            st.object_op(ObjectOp::Commit(Box::new(bad))),
            Err(MetaError::BadRecord { .. })
        ));
        st.object_op(ObjectOp::Commit(Box::new(record("x", v))))
            .unwrap();
        assert_eq!(
            st.object_op(ObjectOp::Get(name.clone())).unwrap(),
            ObjectAnswer::Record(Box::new(record("x", v)))
        );
        st.object_op(ObjectOp::Remove(name.clone())).unwrap();
        assert!(matches!(
            st.object_op(ObjectOp::Get(name)),
            Err(MetaError::NotFound(_))
        ));
    }
}
