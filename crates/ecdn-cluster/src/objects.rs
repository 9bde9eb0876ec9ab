//! Where EC-Cache's object records live (issue 12): with the embedded coordinator
//! (`coordinator::objects`, over its signed API), or in etcd, as the cluster's other metadata.
//! A node talks to either through [`ObjectDirectory`]; the semantics are the same: a write
//! begins (getting a version), stores its splits, and commits the record once at least `k`
//! splits are stored; only committed records are read, and of two writes of one name the
//! later version stays.
//!
//! **In etcd** (keys under the cluster's prefix):
//! * `object-writes/{name}`: `begin` puts it; the revision of that put is the new version
//!   (unique and increasing in the whole etcd).
//! * `sequence`: put empty for [`ObjectDirectory::sequence`], the revision of the put.
//! * `object-versions/{name}`: the committed version, 20 decimal digits (so etcd's byte-wise
//!   comparison is the numeric one).
//! * `objects/{name}`: the record, sealed with the cluster key like the map (a record not
//!   sealed with it is refused).
//!
//! When the cluster key rotates, the leading coordinator seals every record again with the
//! key that signs now ([`reseal`]), as it does the map, so records written before the
//! rotation still open once the old key is dropped.
//!
//! A commit is one transaction that writes the version and the record only if no version is
//! committed or the committed one is lower. Unlike the coordinator, etcd does not check that
//! the version was begun (a record is sealed, so only a holder of the cluster key writes one),
//! and `abort` has nothing to drop.

use ecdn_objects::meta::{Listed, MetaError, ObjectMeta, ObjectName};
use etcd_client::{
    Client, Compare, CompareOp, DeleteOptions, GetOptions, Txn, TxnOp, TxnOpResponse,
};

use crate::auth::ClusterKey;
use crate::config::ClusterConfig;
use crate::coordinator::client::{CallError, CoordinatorClient};
use crate::etcd::{connect, open, seal, Keys};
use hyper::StatusCode;

const OBJECT_SEAL: &str = "etcd:object";

/// Why a directory operation failed.
#[derive(Debug, thiserror::Error)]
pub enum DirectoryError {
    #[error("{0}")]
    Meta(#[from] MetaError),
    #[error("object directory: {0}")]
    Unreachable(String),
}

/// The object records of one cluster (see the module documentation).
pub enum ObjectDirectory {
    Coordinator(Box<CoordinatorClient>),
    Etcd(Box<EtcdObjects>),
}

/// The etcd side of [`ObjectDirectory`].
pub struct EtcdObjects {
    endpoints: Vec<String>,
    keys: Keys,
    key: ClusterKey,
    client: tokio::sync::Mutex<Option<Client>>,
}

/// 20 decimal digits: etcd compares values byte by byte.
fn version_value(v: u64) -> String {
    format!("{v:020}")
}

impl ObjectDirectory {
    /// The directory of the cluster of `cfg`: etcd with `etcd` endpoints, else the embedded
    /// coordinator.
    pub fn for_cluster(cfg: &ClusterConfig) -> ObjectDirectory {
        if cfg.etcd.is_empty() {
            ObjectDirectory::Coordinator(Box::new(CoordinatorClient::of_embedded(cfg)))
        } else {
            ObjectDirectory::Etcd(Box::new(EtcdObjects {
                endpoints: cfg.etcd.clone(),
                keys: Keys::new(cfg),
                key: cfg.cluster_key(),
                client: tokio::sync::Mutex::new(None),
            }))
        }
    }

    /// Starts a write of `name`; its version.
    pub async fn begin(&self, name: &ObjectName) -> Result<u64, DirectoryError> {
        match self {
            ObjectDirectory::Coordinator(c) => c.object_begin(name).await.map_err(unreachable),
            ObjectDirectory::Etcd(e) => e.begin(name).await,
        }
    }

    /// A number of the cluster's one increasing sequence, above every one handed out before
    /// (the coordinator's versions, or etcd's revisions: the put of `sequence`): what orders a
    /// purge against the fills of its object without the nodes' clocks.
    pub async fn sequence(&self) -> Result<u64, DirectoryError> {
        match self {
            ObjectDirectory::Coordinator(c) => c.object_sequence().await.map_err(unreachable),
            ObjectDirectory::Etcd(e) => e.sequence().await,
        }
    }

    /// Makes a write visible (see the module documentation).
    pub async fn commit(&self, meta: &ObjectMeta, servers: usize) -> Result<(), DirectoryError> {
        meta.validate(servers)?;
        match self {
            ObjectDirectory::Coordinator(c) => match c.object_commit(meta).await {
                Ok(_) => Ok(()),
                Err(e) if e.status == Some(StatusCode::CONFLICT) => Err(stale(c, meta).await),
                Err(e) => Err(unreachable(e)),
            },
            ObjectDirectory::Etcd(e) => e.commit(meta).await,
        }
    }

    /// Replaces the committed record of `meta`'s version with `meta` (the same object with
    /// other parity splits: `MetaTable::update`'s rules).
    pub async fn update(&self, meta: &ObjectMeta, servers: usize) -> Result<(), DirectoryError> {
        meta.validate(servers)?;
        match self {
            ObjectDirectory::Coordinator(c) => match c.object_update(meta).await {
                Ok(_) => Ok(()),
                Err(e) if e.status == Some(StatusCode::CONFLICT) => Err(stale(c, meta).await),
                Err(e) if e.status == Some(StatusCode::BAD_REQUEST) => Err(MetaError::BadRecord {
                    name: meta.name.to_string(),
                    why: e.to_string(),
                }
                .into()),
                Err(e) => Err(not_found_or(e, &meta.name)),
            },
            ObjectDirectory::Etcd(e) => e.update(meta).await,
        }
    }

    /// Drops a begun write.
    pub async fn abort(&self, name: &ObjectName, version: u64) -> Result<(), DirectoryError> {
        match self {
            ObjectDirectory::Coordinator(c) => {
                c.object_abort(name, version).await.map_err(unreachable)
            }
            ObjectDirectory::Etcd(_) => Ok(()),
        }
    }

    /// The committed record, checked for a cluster of `servers` servers.
    pub async fn get(
        &self,
        name: &ObjectName,
        servers: usize,
    ) -> Result<ObjectMeta, DirectoryError> {
        let meta = match self {
            ObjectDirectory::Coordinator(c) => c
                .object_get(name)
                .await
                .map_err(|e| not_found_or(e, name))?,
            ObjectDirectory::Etcd(e) => e.get(name).await?,
        };
        meta.validate(servers)?;
        if &meta.name != name {
            return Err(MetaError::BadRecord {
                name: name.to_string(),
                why: format!("the record is {:?}'s", meta.name.as_str()),
            }
            .into());
        }
        Ok(meta)
    }

    /// Up to `limit` committed records whose names begin with `prefix`, after `after`
    /// (exclusive), in name order: one range read of the directory.
    pub async fn list(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Listed>, DirectoryError> {
        match self {
            ObjectDirectory::Coordinator(c) => c
                .object_list(prefix, after, limit)
                .await
                .map_err(|e| DirectoryError::Unreachable(e.to_string())),
            ObjectDirectory::Etcd(e) => e.list(prefix, after, limit).await,
        }
    }

    /// Removes the committed record; returns it (the caller deletes the splits).
    pub async fn remove(&self, name: &ObjectName) -> Result<ObjectMeta, DirectoryError> {
        match self {
            ObjectDirectory::Coordinator(c) => c
                .object_remove(name)
                .await
                .map_err(|e| not_found_or(e, name)),
            ObjectDirectory::Etcd(e) => e.remove(name).await,
        }
    }
}

/// The coordinator's `409` for `meta`: another version of the name is committed; say which.
async fn stale(c: &CoordinatorClient, meta: &ObjectMeta) -> DirectoryError {
    let current = c.object_get(&meta.name).await.map_or(0, |m| m.version);
    MetaError::Stale {
        name: meta.name.to_string(),
        version: meta.version,
        current,
    }
    .into()
}

fn unreachable(e: impl ToString) -> DirectoryError {
    DirectoryError::Unreachable(e.to_string())
}

/// The coordinator's `404` as [`MetaError::NotFound`].
fn not_found_or(e: CallError, name: &ObjectName) -> DirectoryError {
    if e.status == Some(StatusCode::NOT_FOUND) {
        MetaError::NotFound(name.to_string()).into()
    } else {
        unreachable(e)
    }
}

impl EtcdObjects {
    /// A connected client (reconnecting after a failure).
    async fn client(&self) -> Result<Client, DirectoryError> {
        let mut c = self.client.lock().await;
        if let Some(c) = c.as_ref() {
            return Ok(c.clone());
        }
        let fresh = connect(&self.endpoints)
            .await
            .map_err(|e| unreachable(format!("etcd: {e}")))?;
        *c = Some(fresh.clone());
        Ok(fresh)
    }

    /// Forgets the client after a failure.
    async fn failed(&self, e: etcd_client::Error) -> DirectoryError {
        *self.client.lock().await = None;
        unreachable(format!("etcd: {e}"))
    }

    async fn begin(&self, name: &ObjectName) -> Result<u64, DirectoryError> {
        let mut c = self.client().await?;
        match c.put(self.keys.object_write(name.as_str()), "", None).await {
            Ok(r) => Ok(r.header().map_or(0, |h| h.revision()).max(0) as u64),
            Err(e) => Err(self.failed(e).await),
        }
    }

    async fn sequence(&self) -> Result<u64, DirectoryError> {
        let mut c = self.client().await?;
        match c.put(self.keys.sequence(), "", None).await {
            Ok(r) => Ok(r.header().map_or(0, |h| h.revision()).max(0) as u64),
            Err(e) => Err(self.failed(e).await),
        }
    }

    async fn commit(&self, meta: &ObjectMeta) -> Result<(), DirectoryError> {
        let name = meta.name.as_str();
        let (vkey, okey) = (self.keys.object_version(name), self.keys.object(name));
        let json = serde_json::to_vec(meta).expect("a record serializes");
        let writes = [
            TxnOp::put(vkey.clone(), version_value(meta.version), None),
            TxnOp::put(okey, seal(&self.key, OBJECT_SEAL, &json), None),
        ];
        let mut c = self.client().await?;
        for when in [
            Compare::create_revision(vkey.clone(), CompareOp::Equal, 0),
            Compare::value(vkey.clone(), CompareOp::Less, version_value(meta.version)),
        ] {
            let txn = Txn::new().when([when]).and_then(writes.clone());
            match c.txn(txn).await {
                Ok(r) if r.succeeded() => return Ok(()),
                Ok(_) => {}
                Err(e) => return Err(self.failed(e).await),
            }
        }
        let current = match c.get(vkey, None).await {
            Ok(r) => r
                .kvs()
                .first()
                .and_then(|kv| std::str::from_utf8(kv.value()).ok()?.parse().ok())
                .unwrap_or(0),
            Err(e) => return Err(self.failed(e).await),
        };
        Err(MetaError::Stale {
            name: name.to_string(),
            version: meta.version,
            current,
        }
        .into())
    }

    /// The record is replaced in one transaction, only while the committed version is
    /// `meta`'s and the stored record is the same object (checked against the record read
    /// first, whose revision the transaction also compares).
    async fn update(&self, meta: &ObjectMeta) -> Result<(), DirectoryError> {
        let name = meta.name.as_str();
        let (vkey, okey) = (self.keys.object_version(name), self.keys.object(name));
        let mut c = self.client().await?;
        let got = match c.get(okey.clone(), None).await {
            Ok(r) => r,
            Err(e) => return Err(self.failed(e).await),
        };
        let Some(kv) = got.kvs().first() else {
            return Err(MetaError::NotFound(name.to_string()).into());
        };
        let (current, revision) = (self.parse(&meta.name, kv.value())?, kv.mod_revision());
        if current.version != meta.version {
            return Err(MetaError::Stale {
                name: name.to_string(),
                version: meta.version,
                current: current.version,
            }
            .into());
        }
        current.same_object(meta)?;
        let json = serde_json::to_vec(meta).expect("a record serializes");
        let txn = Txn::new()
            .when([
                Compare::value(vkey, CompareOp::Equal, version_value(meta.version)),
                Compare::mod_revision(okey.clone(), CompareOp::Equal, revision),
            ])
            .and_then([TxnOp::put(okey, seal(&self.key, OBJECT_SEAL, &json), None)]);
        match c.txn(txn).await {
            Ok(r) if r.succeeded() => Ok(()),
            // Written again, removed or updated meanwhile.
            Ok(_) => Err(MetaError::Stale {
                name: name.to_string(),
                version: meta.version,
                current: 0,
            }
            .into()),
            Err(e) => Err(self.failed(e).await),
        }
    }

    fn parse(&self, name: &ObjectName, value: &[u8]) -> Result<ObjectMeta, DirectoryError> {
        let bad = |why: String| MetaError::BadRecord {
            name: name.to_string(),
            why,
        };
        let json = open(&self.key, OBJECT_SEAL, value).map_err(bad)?;
        Ok(serde_json::from_slice(json).map_err(|e| bad(e.to_string()))?)
    }

    /// One range read of `objects/{prefix}…` after `objects/{after}`: the records opened,
    /// each listed. (The whole records are read: a page of large objects' records is large.)
    async fn list(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Listed>, DirectoryError> {
        let from = match after {
            Some(a) if a >= prefix => {
                let mut k = self.keys.object(a).into_bytes();
                k.push(0);
                k
            }
            _ => self.keys.object(prefix).into_bytes(),
        };
        let mut end = self.keys.object(prefix).into_bytes();
        // The end of the prefix's range: the first key that does not begin with it.
        while let Some(last) = end.pop() {
            if last < 0xFF {
                end.push(last + 1);
                break;
            }
        }
        let options = GetOptions::new()
            .with_range(end)
            .with_limit(limit.min(i64::MAX as usize) as i64);
        let mut c = self.client().await?;
        let resp = match c.get(from, Some(options)).await {
            Ok(r) => r,
            Err(e) => return Err(self.failed(e).await),
        };
        let base = self.keys.objects().len();
        let mut out = Vec::with_capacity(resp.kvs().len());
        for kv in resp.kvs() {
            let key = String::from_utf8_lossy(kv.key().get(base..).unwrap_or_default());
            let name = ObjectName::parse(&key)?;
            out.push(Listed::of(&self.parse(&name, kv.value())?));
        }
        Ok(out)
    }

    async fn get(&self, name: &ObjectName) -> Result<ObjectMeta, DirectoryError> {
        let mut c = self.client().await?;
        let resp = match c.get(self.keys.object(name.as_str()), None).await {
            Ok(r) => r,
            Err(e) => return Err(self.failed(e).await),
        };
        match resp.kvs().first() {
            Some(kv) => self.parse(name, kv.value()),
            None => Err(MetaError::NotFound(name.to_string()).into()),
        }
    }

    async fn remove(&self, name: &ObjectName) -> Result<ObjectMeta, DirectoryError> {
        let n = name.as_str();
        let txn = Txn::new().and_then([
            TxnOp::delete(
                self.keys.object(n),
                Some(DeleteOptions::new().with_prev_key()),
            ),
            TxnOp::delete(self.keys.object_version(n), None),
            TxnOp::delete(self.keys.object_write(n), None),
        ]);
        let mut c = self.client().await?;
        let resp = match c.txn(txn).await {
            Ok(r) => r,
            Err(e) => return Err(self.failed(e).await),
        };
        let prev = resp.op_responses().into_iter().find_map(|r| match r {
            TxnOpResponse::Delete(d) => d.prev_kvs().first().map(|kv| kv.value().to_vec()),
            _ => None,
        });
        match prev {
            Some(v) => self.parse(name, &v),
            None => Err(MetaError::NotFound(name.to_string()).into()),
        }
    }
}

/// What [`reseal`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resealed {
    /// Records sealed again with the signing key.
    pub records: u64,
    /// Records already sealed with it.
    pub current: u64,
    /// Records that changed while being read (their writer sealed them with the signing key)
    /// or that no accepted key opens (left as they are).
    pub skipped: u64,
}

/// Records read from etcd per request while resealing.
const RESEAL_PAGE: i64 = 500;

/// Seals every object record of the cluster again with `key`'s signing key (after a rotation,
/// while the old key is still accepted): each record is read, opened with any accepted key,
/// and written back sealed anew in a transaction that holds only if it did not change
/// meanwhile.
pub async fn reseal(
    client: &mut Client,
    keys: &Keys,
    key: &ClusterKey,
) -> Result<Resealed, String> {
    let mut done = Resealed::default();
    let mut from = keys.objects().into_bytes();
    let mut range_end = from.clone();
    // The end of the prefix's range: its last byte plus one ("objects/" ends in '/').
    if let Some(last) = range_end.last_mut() {
        *last += 1;
    }
    loop {
        let page = client
            .get(
                from.clone(),
                Some(
                    GetOptions::new()
                        .with_range(range_end.clone())
                        .with_limit(RESEAL_PAGE),
                ),
            )
            .await
            .map_err(|e| e.to_string())?;
        let kvs = page.kvs();
        for kv in kvs {
            let Ok(json) = open(key, OBJECT_SEAL, kv.value()) else {
                done.skipped += 1;
                continue;
            };
            let sealed = seal(key, OBJECT_SEAL, json);
            if sealed == kv.value() {
                done.current += 1;
                continue;
            }
            let txn = Txn::new()
                .when([Compare::mod_revision(
                    kv.key(),
                    CompareOp::Equal,
                    kv.mod_revision(),
                )])
                .and_then([TxnOp::put(kv.key(), sealed, None)]);
            match client
                .txn(txn)
                .await
                .map_err(|e| e.to_string())?
                .succeeded()
            {
                true => done.records += 1,
                false => done.skipped += 1,
            }
        }
        match (page.more(), kvs.last()) {
            (true, Some(last)) => {
                from = last.key().to_vec();
                from.push(0);
            }
            _ => return Ok(done),
        }
    }
}
