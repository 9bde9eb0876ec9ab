//! The object store the backend tier reads and writes: what it needs of S3 ([`Store`]), S3
//! itself through `object_store` ([`S3Store`]), and an in-memory store for tests
//! ([`MemoryStore`]).

use std::collections::HashMap;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use object_store::ObjectStoreExt;

use crate::strips::MANIFEST_KEY;

/// A store operation's future.
pub type StoreFuture<T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send>>;

/// What went wrong talking to the store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("{0}: no such object")]
    NotFound(String),
    #[error("the store: {0}")]
    Store(String),
    #[error("bad store configuration: {0}")]
    Config(String),
}

/// An object's size and the metadata the tier uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Head {
    pub size: u64,
    /// The coded file's manifest (`x-amz-meta-ecdn-tofec`), if it is one.
    pub manifest: Option<String>,
    pub etag: Option<String>,
    /// Seconds since the epoch.
    pub last_modified: Option<i64>,
}

/// An S3 multipart upload under way.
pub trait Upload: Send {
    /// The next part (parts are numbered in the order of these calls); its future uploads it.
    fn part(&mut self, data: Bytes) -> StoreFuture<()>;
    /// Joins the parts into the object (after every part's future completed).
    fn complete(self: Box<Self>) -> StoreFuture<()>;
    /// Gives the upload up; its parts are deleted.
    fn abort(self: Box<Self>) -> StoreFuture<()>;
}

/// What the backend tier needs of an object store.
pub trait Store: Send + Sync + 'static {
    /// The object's head, `None` if it does not exist.
    fn head(&self, key: &str) -> StoreFuture<Option<Head>>;
    /// Bytes `range` of the object.
    fn get_range(&self, key: &str, range: Range<u64>) -> StoreFuture<Bytes>;
    /// Stores the object in one request, with the manifest as metadata if there is one.
    fn put(&self, key: &str, data: Bytes, manifest: Option<String>) -> StoreFuture<()>;
    /// Begins a multipart upload of the object.
    fn upload(&self, key: &str, manifest: Option<String>) -> StoreFuture<Box<dyn Upload>>;
    /// Removes the object (absent: no error).
    fn delete(&self, key: &str) -> StoreFuture<()>;
}

/// Where an S3 store is and how to sign for it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct S3Config {
    pub bucket: String,
    /// Key prefix, without leading or trailing `/` (may be empty).
    pub prefix: String,
    /// `http://host:port` or `https://…`; none: AWS's endpoint of the region.
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub session_token: Option<String>,
    /// PEM certificates to trust beside the system's (a private store's own CA).
    pub ca_bundle: Option<std::path::PathBuf>,
}

impl S3Config {
    /// `s3://bucket[/prefix]`; the rest from the AWS environment variables (`AWS_ENDPOINT_URL`,
    /// `AWS_REGION` or `AWS_DEFAULT_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
    /// `AWS_SESSION_TOKEN`, `AWS_CA_BUNDLE`) where the caller sets nothing.
    pub fn from_url(url: &str) -> Result<S3Config, StoreError> {
        let rest = url.strip_prefix("s3://").ok_or_else(|| {
            StoreError::Config(format!("{url:?}: an S3 origin is s3://BUCKET[/PREFIX]"))
        })?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let valid = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
        if bucket.len() < 3 || bucket.len() > 63 || !bucket.chars().all(valid) {
            return Err(StoreError::Config(format!(
                "{bucket:?} is not an S3 bucket name (3 to 63 of a-z 0-9 . -)"
            )));
        }
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        Ok(S3Config {
            bucket: bucket.to_string(),
            prefix: prefix.trim_matches('/').to_string(),
            endpoint: env("AWS_ENDPOINT_URL"),
            region: env("AWS_REGION").or_else(|| env("AWS_DEFAULT_REGION")),
            access_key_id: env("AWS_ACCESS_KEY_ID"),
            secret_access_key: env("AWS_SECRET_ACCESS_KEY"),
            session_token: env("AWS_SESSION_TOKEN"),
            ca_bundle: env("AWS_CA_BUNDLE").map(Into::into),
        })
    }
}

/// S3 (or an S3-compatible server) through `object_store`, with retries off: the backend tier
/// decides what a failed task costs (another chunk, or the request's failure), not the client.
pub struct S3Store {
    s3: Arc<dyn object_store::ObjectStore>,
    prefix: String,
}

impl S3Store {
    /// A client for `cfg`; `timeout` bounds each request.
    pub fn new(cfg: &S3Config, timeout: Duration) -> Result<S3Store, StoreError> {
        use object_store::aws::AmazonS3Builder;
        use object_store::{ClientOptions, RetryConfig};
        // reqwest's rustls without a bundled provider: ring, as the rest of ecdn.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut options = ClientOptions::new()
            .with_timeout(timeout)
            .with_connect_timeout(timeout.min(Duration::from_secs(5)))
            .with_allow_http(true);
        if let Some(path) = &cfg.ca_bundle {
            let pem = std::fs::read(path).map_err(|e| {
                StoreError::Config(format!("the CA bundle {}: {e}", path.display()))
            })?;
            let certs = object_store::Certificate::from_pem_bundle(&pem).map_err(|e| {
                StoreError::Config(format!("the CA bundle {}: {e}", path.display()))
            })?;
            for c in certs {
                options = options.with_root_certificate(c);
            }
        }
        let mut b = AmazonS3Builder::new()
            .with_bucket_name(&cfg.bucket)
            // One DELETE per object: every S3-compatible server has it, not all the bulk one.
            .with_disable_bulk_delete(true)
            .with_region(cfg.region.clone().unwrap_or_else(|| "us-east-1".into()))
            .with_retry(RetryConfig {
                max_retries: 0,
                retry_timeout: timeout,
                ..RetryConfig::default()
            })
            .with_client_options(options);
        if let Some(e) = &cfg.endpoint {
            b = b.with_endpoint(e).with_virtual_hosted_style_request(false);
        }
        match (&cfg.access_key_id, &cfg.secret_access_key) {
            (Some(id), Some(secret)) => {
                b = b.with_access_key_id(id).with_secret_access_key(secret);
                if let Some(t) = &cfg.session_token {
                    b = b.with_token(t);
                }
            }
            _ => b = b.with_skip_signature(true),
        }
        let s3 = b.build().map_err(|e| StoreError::Config(e.to_string()))?;
        Ok(S3Store {
            s3: Arc::new(s3),
            prefix: cfg.prefix.clone(),
        })
    }

    fn path(&self, key: &str) -> object_store::path::Path {
        let key = key.trim_start_matches('/');
        if self.prefix.is_empty() {
            object_store::path::Path::from(key)
        } else {
            object_store::path::Path::from(format!("{}/{key}", self.prefix))
        }
    }
}

fn attributes(manifest: Option<String>) -> object_store::Attributes {
    let mut a = object_store::Attributes::new();
    if let Some(m) = manifest {
        a.insert(
            object_store::Attribute::Metadata(MANIFEST_KEY.into()),
            m.into(),
        );
    }
    a
}

fn s3_error(key: &str, e: object_store::Error) -> StoreError {
    match e {
        object_store::Error::NotFound { .. } => StoreError::NotFound(key.to_string()),
        e => StoreError::Store(e.to_string()),
    }
}

impl Store for S3Store {
    fn head(&self, key: &str) -> StoreFuture<Option<Head>> {
        let (s3, path, key) = (self.s3.clone(), self.path(key), key.to_string());
        Box::pin(async move {
            let opts = object_store::GetOptions {
                head: true,
                ..Default::default()
            };
            let r = match s3.get_opts(&path, opts).await {
                Ok(r) => r,
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(s3_error(&key, e)),
            };
            let manifest = r
                .attributes
                .get(&object_store::Attribute::Metadata(MANIFEST_KEY.into()))
                .map(|v| v.to_string());
            Ok(Some(Head {
                size: r.meta.size,
                manifest,
                etag: r.meta.e_tag.clone(),
                last_modified: Some(r.meta.last_modified.timestamp()),
            }))
        })
    }

    fn get_range(&self, key: &str, range: Range<u64>) -> StoreFuture<Bytes> {
        let (s3, path, key) = (self.s3.clone(), self.path(key), key.to_string());
        Box::pin(async move {
            let want = range.end - range.start;
            let b = s3
                .get_range(&path, range)
                .await
                .map_err(|e| s3_error(&key, e))?;
            if b.len() as u64 != want {
                return Err(StoreError::Store(format!(
                    "{key}: {} bytes for a range of {want}",
                    b.len()
                )));
            }
            Ok(b)
        })
    }

    fn put(&self, key: &str, data: Bytes, manifest: Option<String>) -> StoreFuture<()> {
        let (s3, path, key) = (self.s3.clone(), self.path(key), key.to_string());
        Box::pin(async move {
            let opts = object_store::PutOptions {
                attributes: attributes(manifest),
                ..Default::default()
            };
            s3.put_opts(&path, data.into(), opts)
                .await
                .map(|_| ())
                .map_err(|e| s3_error(&key, e))
        })
    }

    fn upload(&self, key: &str, manifest: Option<String>) -> StoreFuture<Box<dyn Upload>> {
        let (s3, path, key) = (self.s3.clone(), self.path(key), key.to_string());
        Box::pin(async move {
            let opts = object_store::PutMultipartOptions {
                attributes: attributes(manifest),
                ..Default::default()
            };
            let up = s3
                .put_multipart_opts(&path, opts)
                .await
                .map_err(|e| s3_error(&key, e))?;
            Ok(Box::new(S3Upload { up, key }) as Box<dyn Upload>)
        })
    }

    fn delete(&self, key: &str) -> StoreFuture<()> {
        let (s3, path, key) = (self.s3.clone(), self.path(key), key.to_string());
        Box::pin(async move {
            match s3.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(s3_error(&key, e)),
            }
        })
    }
}

struct S3Upload {
    up: Box<dyn object_store::MultipartUpload>,
    key: String,
}

impl Upload for S3Upload {
    fn part(&mut self, data: Bytes) -> StoreFuture<()> {
        let f = self.up.put_part(data.into());
        let key = self.key.clone();
        Box::pin(async move { f.await.map_err(|e| s3_error(&key, e)) })
    }

    fn complete(mut self: Box<Self>) -> StoreFuture<()> {
        Box::pin(async move {
            let key = self.key.clone();
            match self.up.complete().await {
                Ok(_) => Ok(()),
                Err(e) => {
                    // A refused completion (a part too small, one missing) leaves the upload
                    // open, its parts stored and billed: give it up.
                    let _ = self.up.abort().await;
                    Err(s3_error(&key, e))
                }
            }
        })
    }

    fn abort(mut self: Box<Self>) -> StoreFuture<()> {
        Box::pin(async move {
            let key = self.key.clone();
            self.up.abort().await.map_err(|e| s3_error(&key, e))
        })
    }
}

/// What a [`MemoryStore`] does to the next range reads (tests: slow, failing and corrupt
/// tasks).
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// Each range read waits this long first.
    pub delay: Duration,
    /// Range reads starting at these offsets wait this much longer.
    pub slow: Vec<(u64, Duration)>,
    /// Range reads starting at these offsets fail.
    pub fail: Vec<u64>,
    /// Range reads starting at these offsets come back with one byte flipped.
    pub corrupt: Vec<u64>,
}

type Objects = HashMap<String, (Bytes, Option<String>)>;

/// Objects in memory, with [`Faults`] injected into range reads; counts the range reads
/// begun and completed.
#[derive(Clone, Default)]
pub struct MemoryStore {
    objects: Arc<Mutex<Objects>>,
    faults: Arc<Mutex<Faults>>,
    reads: Arc<Mutex<(usize, usize)>>,
    /// Completing an upload with a part smaller than this but for the last fails, as S3's
    /// `EntityTooSmall` (0: any size).
    min_part: u64,
}

impl MemoryStore {
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    /// A store that refuses uploads with parts below `min_part` but for the last, as S3.
    pub fn with_min_part(min_part: u64) -> MemoryStore {
        MemoryStore {
            min_part,
            ..MemoryStore::default()
        }
    }

    pub fn set_faults(&self, f: Faults) {
        *self.faults.lock().unwrap_or_else(|e| e.into_inner()) = f;
    }

    /// Range reads (begun, completed).
    pub fn reads(&self) -> (usize, usize) {
        *self.reads.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn objects(&self) -> std::sync::MutexGuard<'_, Objects> {
        self.objects.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Store for MemoryStore {
    fn head(&self, key: &str) -> StoreFuture<Option<Head>> {
        let h = self.objects().get(key).map(|(b, m)| Head {
            size: b.len() as u64,
            manifest: m.clone(),
            ..Head::default()
        });
        Box::pin(async move { Ok(h) })
    }

    fn get_range(&self, key: &str, range: Range<u64>) -> StoreFuture<Bytes> {
        let obj = self.objects().get(key).map(|o| o.0.clone());
        let f = self
            .faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let reads = self.reads.clone();
        let key = key.to_string();
        Box::pin(async move {
            reads.lock().unwrap_or_else(|e| e.into_inner()).0 += 1;
            let extra = f.slow.iter().find(|s| s.0 == range.start).map(|s| s.1);
            tokio::time::sleep(f.delay + extra.unwrap_or_default()).await;
            let obj = obj.ok_or_else(|| StoreError::NotFound(key.clone()))?;
            if f.fail.contains(&range.start) {
                return Err(StoreError::Store(format!("{key}: injected failure")));
            }
            let (a, b) = (range.start as usize, range.end as usize);
            if a > b || b > obj.len() {
                return Err(StoreError::Store(format!(
                    "{key}: range {a}..{b} out of bounds"
                )));
            }
            let mut out = obj.slice(a..b);
            if f.corrupt.contains(&range.start) && !out.is_empty() {
                let mut v = out.to_vec();
                v[0] ^= 0xff;
                out = Bytes::from(v);
            }
            reads.lock().unwrap_or_else(|e| e.into_inner()).1 += 1;
            Ok(out)
        })
    }

    fn put(&self, key: &str, data: Bytes, manifest: Option<String>) -> StoreFuture<()> {
        self.objects().insert(key.to_string(), (data, manifest));
        Box::pin(async { Ok(()) })
    }

    fn upload(&self, key: &str, manifest: Option<String>) -> StoreFuture<Box<dyn Upload>> {
        let up = MemoryUpload {
            store: self.clone(),
            key: key.to_string(),
            manifest,
            parts: Arc::new(Mutex::new(Vec::new())),
        };
        Box::pin(async move { Ok(Box::new(up) as Box<dyn Upload>) })
    }

    fn delete(&self, key: &str) -> StoreFuture<()> {
        self.objects().remove(key);
        Box::pin(async { Ok(()) })
    }
}

type Parts = Arc<Mutex<Vec<Option<Bytes>>>>;

struct MemoryUpload {
    store: MemoryStore,
    key: String,
    manifest: Option<String>,
    parts: Parts,
}

impl Upload for MemoryUpload {
    fn part(&mut self, data: Bytes) -> StoreFuture<()> {
        let parts = self.parts.clone();
        let i = {
            let mut p = parts.lock().unwrap_or_else(|e| e.into_inner());
            p.push(None);
            p.len() - 1
        };
        Box::pin(async move {
            parts.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(data);
            Ok(())
        })
    }

    fn complete(self: Box<Self>) -> StoreFuture<()> {
        Box::pin(async move {
            let parts = self.parts.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let mut all = Vec::new();
            for (i, p) in parts.iter().enumerate() {
                let p = p
                    .as_ref()
                    .ok_or_else(|| StoreError::Store(format!("part {} was not uploaded", i + 1)))?;
                if i + 1 < parts.len() && (p.len() as u64) < self.store.min_part {
                    return Err(StoreError::Store(format!(
                        "EntityTooSmall: part {} is {} bytes",
                        i + 1,
                        p.len()
                    )));
                }
                all.extend_from_slice(p);
            }
            self.store
                .objects()
                .insert(self.key.clone(), (Bytes::from(all), self.manifest.clone()));
            Ok(())
        })
    }

    fn abort(self: Box<Self>) -> StoreFuture<()> {
        Box::pin(async { Ok(()) })
    }
}
