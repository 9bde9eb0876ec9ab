//! The proxy between ecdn and the object store (TOFEC §II-A, Fig. 2): a **request queue**, a
//! **task queue** and `L` **connections**.
//!
//! A request (read, write, or the head of an object) gets its code `(n, k)` when it arrives,
//! from the [`Strategy`]: TOFEC's thresholds on the smoothed backlog `q̄ ← α·q̄ + (1 − α)·q`,
//! `q` the request queue's length at the arrival (Algorithm 1); Greedy's idle connections; or a
//! static code. The request at the head of the request queue leaves it only when a connection
//! is idle **and** the task queue is empty; it then becomes `n` tasks at the back of the task
//! queue, and every idle connection takes the task at the head. The queueing is thus work
//! conserving, and one request's tasks start nearly together.
//!
//! * **Reads.** A coded file ([`crate::strips`]) is read as chunks `0..n` of the code
//!   `(·, k)`; the request is complete when any `k` arrive (each checked against its strips'
//!   CRCs; a corrupt one is a failed task), and the others are cancelled: queued ones are
//!   dropped, running ones aborted (their connection is idle at once). A failed task is
//!   replaced by one for a chunk not asked yet, at the head of the task queue; when there is
//!   none and `k` can no longer arrive, the request fails. A plain object (not coded by ecdn)
//!   is read as `k` byte ranges with no redundancy (`n = k`), each failed range asked once
//!   more.
//! * **Writes** (§II-A's speculative write). The coded file is uploaded with an S3 multipart
//!   upload: parts `0..n` are chunks of the code `(·, k)`, the request is acknowledged when
//!   `k` are stored, and the strips beyond the `n` chunks are one more part uploaded after the
//!   acknowledgement; once every part is stored the upload is completed (only then can the
//!   object be read). A part that fails after the acknowledgement loses the write: the upload
//!   is aborted and counted in [`Counters::writes_lost`]. S3 refuses parts below 5 MiB but
//!   for the last ([`ProxyConfig::min_part`]), so a write uses only the codes whose chunks are
//!   that large. A file too small for any (a 3 MB file's coded file is 6 MB: one chunk of 3
//!   MB) is written whole instead, `k = 1`: `n` single `PUT`s of the same coded file race, the
//!   write is acknowledged (and readable) when the first is stored, and the others are
//!   cancelled — the redundancy of a speculative write without chunks.
//! * **The delay model.** Every task's delay is recorded with its chunk size (a cancelled
//!   task's as a lower bound), per operation; every `refit_every` completed tasks the model is
//!   fitted again ([`crate::model::fit`]) and TOFEC's thresholds are recomputed from it. Until
//!   the first fit, the configured model is used (S3's, by default).
//!
//! Request classes (§IV) are the operation and the file size, in eighths of an octave (sizes
//! within 9% of each other share thresholds, computed at the class's middle size).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ecdn_codec::CodecCache;
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use crate::model::{DelayModel, TaskSample};
use crate::store::{Head, Store, StoreError, StoreFuture, Upload};
use crate::strips::{self, Manifest, StripError};
use crate::tofec::Strategy;

mod queues;

/// How the proxy runs.
#[derive(Clone, Debug)]
pub struct ProxyConfig {
    /// `L`: connections to the store (16 in §V-A).
    pub connections: usize,
    /// `k_max` (6 in §V-A).
    pub k_max: usize,
    /// `r_max` (2 in §V-A).
    pub r_max: usize,
    /// `K` of the files the proxy writes (their `N` is `r_max·K`); `k` must divide it, so
    /// the default, `k_max`, allows `k ∈ {1, 2, 3, 6}`, and 60 every `k ≤ 6`.
    pub strips_k: usize,
    /// `α` of the smoothed backlog (0.99 in §V-A).
    pub alpha: f64,
    pub strategy: Strategy,
    /// A task that takes longer has failed.
    pub task_timeout: Duration,
    /// The read model until the first fit.
    pub read_model: DelayModel,
    /// The write model until the first fit.
    pub write_model: DelayModel,
    /// Completed tasks between fits of an operation's model (0: never fitted).
    pub refit_every: usize,
    /// The worst fraction of delays left out of a fit (0.1 in §V-A).
    pub fit_trim: f64,
    /// Task delays kept per operation for the fits.
    pub samples_kept: usize,
    /// Largest object read or written (the proxy holds it whole).
    pub max_object: u64,
    /// How long an object's head (its size and manifest) is reused before it is asked again.
    pub head_ttl: Duration,
    /// How TOFEC's thresholds map load to backlog (the paper's M/M/1 by default; M/M/L as an
    /// option).
    pub queue_model: crate::tofec::QueueModel,
    /// The smallest part a multipart upload may have but for its last: S3's 5 MiB. A write
    /// uses only codes whose chunks are this large; a file too small for any is uploaded as
    /// one part. 0: no limit (the emulator, as the paper's measurements assumed).
    pub min_part: u64,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            connections: 16,
            k_max: 6,
            r_max: 2,
            strips_k: 6,
            alpha: 0.99,
            strategy: Strategy::TofecTail,
            task_timeout: Duration::from_secs(30),
            read_model: DelayModel::PAPER_S3,
            write_model: DelayModel::PAPER_S3,
            refit_every: 500,
            fit_trim: 0.1,
            samples_kept: 20_000,
            max_object: 1 << 30,
            head_ttl: Duration::from_secs(60),
            queue_model: crate::tofec::QueueModel::Mm1,
            min_part: 5 << 20,
        }
    }
}

/// A request that could not be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProxyError {
    #[error("{0}: no such object")]
    NotFound(String),
    #[error("{key}: {why}")]
    Failed { key: String, why: String },
    #[error("{key}: {0}", key = .1)]
    Strips(StripError, String),
    #[error("{key}: {size} bytes is above the backend tier's limit of {limit}")]
    TooLarge { key: String, size: u64, limit: u64 },
    #[error("the proxy has stopped")]
    Stopped,
}

/// How one request was served.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Served {
    pub n: usize,
    pub k: usize,
    /// In the request queue.
    pub queued: Duration,
    /// From leaving the request queue to the `k`-th task's completion.
    pub service: Duration,
}

/// An acknowledged write, whose upload may still be under way.
#[derive(Debug)]
pub struct Written {
    pub served: Served,
    key: String,
    done: oneshot::Receiver<Result<(), ProxyError>>,
}

impl Written {
    /// Waits until every part is stored and the upload completed: then the object can be
    /// read. An error here is a write lost after its acknowledgement.
    pub async fn finished(self) -> Result<(), ProxyError> {
        match self.done.await {
            Ok(r) => r,
            Err(_) => Err(failed(
                &self.key,
                "the proxy stopped before the upload ended",
            )),
        }
    }
}

/// Totals since the start.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Counters {
    pub requests: u64,
    pub tasks_started: u64,
    pub tasks_completed: u64,
    pub tasks_failed: u64,
    pub tasks_cancelled: u64,
    pub corrupt_chunks: u64,
    pub fits: u64,
    pub writes_lost: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Op {
    Head,
    Read,
    Write,
}

/// How an object is read.
#[derive(Clone, Debug)]
enum Layout {
    Coded(Arc<Manifest>),
    Plain(u64),
}

enum JobKind {
    Head {
        key: String,
    },
    Read {
        key: String,
        layout: Layout,
    },
    Write {
        key: String,
        file: Bytes,
        manifest: Arc<Manifest>,
        /// The multipart upload of the chunks; `None` when no chunk would be as large as
        /// [`ProxyConfig::min_part`]: the whole file is `PUT`, by `n` racing requests.
        upload: Option<Box<dyn Upload>>,
        /// The largest `k` whose chunks are not below [`ProxyConfig::min_part`] (0: none is).
        max_k: usize,
        /// Told when the upload is completed (or given up).
        finished: oneshot::Sender<Result<(), ProxyError>>,
    },
}

impl JobKind {
    fn key(&self) -> &str {
        match self {
            JobKind::Head { key } | JobKind::Read { key, .. } | JobKind::Write { key, .. } => key,
        }
    }
}

enum TaskOut {
    Bytes(Bytes),
    Head(Option<Head>),
    Stored,
}

/// What a request's caller gets back: for a read, `k` chunks (index, bytes).
enum Reply {
    Chunks(Vec<(usize, Bytes)>),
    Head(Option<Head>),
    Written,
}

type ReplyTx = oneshot::Sender<Result<(Reply, Served), ProxyError>>;

struct Job {
    id: u64,
    kind: JobKind,
    code: (usize, usize),
    arrival: Instant,
    reply: ReplyTx,
}

struct QueuedTask {
    job: u64,
    index: usize,
    bytes: u64,
    op: Op,
    fut: StoreFuture<TaskOut>,
}

struct Running {
    job: u64,
    index: usize,
    op: Op,
    bytes: u64,
    started: Instant,
    abort: tokio::task::AbortHandle,
}

/// A request whose tasks are under way.
struct Active {
    kind: JobKind,
    code: (usize, usize),
    arrival: Instant,
    started: Instant,
    reply: Option<ReplyTx>,
    ok: Vec<(usize, Bytes)>,
    /// Tasks queued or running.
    outstanding: usize,
    /// Coded reads: the next chunk not asked yet, and how many there are.
    next_chunk: usize,
    chunks: usize,
    /// Plain reads: ranges asked again.
    retried: Vec<usize>,
    /// Writes: parts stored, parts failed, the last part (strips beyond the `n` chunks) not
    /// yet queued.
    stored: usize,
    failed: usize,
    rest: Option<StoreFuture<TaskOut>>,
    rest_bytes: u64,
    /// `tofec-tail`: whether the request was slow together, decided at its `k`-th task's
    /// completion ([`crate::tail::Excess::slow_together`]); until then, its completed tasks'
    /// samples (bytes, delay) are held here.
    slow_together: Option<bool>,
    held: Vec<(u64, Duration)>,
}

/// A task's end, reported to the actor.
struct Done {
    task: u64,
    out: Result<TaskOut, String>,
}

/// Per operation: the model, the samples and the tasks completed since the last fit.
struct Models {
    read: (DelayModel, VecDeque<TaskSample>, usize),
    write: (DelayModel, VecDeque<TaskSample>, usize),
}

struct Shared {
    store: Arc<dyn Store>,
    cfg: ProxyConfig,
    codecs: Arc<CodecCache>,
    /// Heads asked, with when: used for [`ProxyConfig::head_ttl`].
    heads: Mutex<HashMap<String, (Head, Instant)>>,
    models: Mutex<Models>,
    counters: Mutex<Counters>,
    /// Set by [`Proxy::stop`].
    stop: tokio::sync::watch::Sender<bool>,
}

/// Heads kept (then the cache starts again).
const HEADS_KEPT: usize = 65_536;

/// The backend tier's proxy (see the module documentation). Cloning shares it.
#[derive(Clone)]
pub struct Proxy {
    tx: mpsc::UnboundedSender<Job>,
    shared: Arc<Shared>,
}

impl Proxy {
    /// Starts the proxy on the current tokio runtime.
    pub fn start(store: Arc<dyn Store>, cfg: ProxyConfig) -> Proxy {
        let (tx, rx) = mpsc::unbounded_channel();
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        let models = Models {
            read: (cfg.read_model, VecDeque::new(), 0),
            write: (cfg.write_model, VecDeque::new(), 0),
        };
        let shared = Arc::new(Shared {
            store,
            cfg,
            codecs: Arc::new(CodecCache::new()),
            heads: Mutex::new(HashMap::new()),
            models: Mutex::new(models),
            counters: Mutex::new(Counters::default()),
            stop: tokio::sync::watch::channel(false).0,
        });
        let actor = queues::Actor::new(shared.clone(), done_tx);
        let stop = shared.stop.subscribe();
        tokio::spawn(actor.run(rx, done_rx, stop));
        Proxy { tx, shared }
    }

    pub fn config(&self) -> &ProxyConfig {
        &self.shared.cfg
    }

    async fn submit(&self, kind: JobKind) -> Result<(Reply, Served), ProxyError> {
        let (reply, rx) = oneshot::channel();
        let job = Job {
            id: 0,
            kind,
            code: (1, 1),
            arrival: Instant::now(),
            reply,
        };
        self.tx.send(job).map_err(|_| ProxyError::Stopped)?;
        rx.await.map_err(|_| ProxyError::Stopped)?
    }

    /// The object's head: cached, or asked as a one-task request.
    pub async fn head(&self, key: &str) -> Result<Option<Head>, ProxyError> {
        let ttl = self.shared.cfg.head_ttl;
        if let Some((h, _)) = lock(&self.shared.heads)
            .get(key)
            .filter(|(_, at)| at.elapsed() < ttl)
        {
            return Ok(Some(h.clone()));
        }
        let (reply, _) = self
            .submit(JobKind::Head {
                key: key.to_string(),
            })
            .await?;
        let Reply::Head(h) = reply else {
            return Err(failed(key, "a head request answered something else"));
        };
        if let Some(h) = &h {
            let mut heads = lock(&self.shared.heads);
            if heads.len() >= HEADS_KEPT {
                heads.clear();
            }
            heads.insert(key.to_string(), (h.clone(), Instant::now()));
        }
        Ok(h)
    }

    /// Stops at once: the requests waiting or under way fail with [`ProxyError::Stopped`],
    /// their tasks are cancelled (a write's upload included: it is left to the store's
    /// lifecycle rules).
    pub fn stop(&self) {
        self.shared.stop.send_replace(true);
    }

    /// Caches an object's head, as if it had been asked (a caller that knows it).
    pub fn remember(&self, key: &str, head: Head) {
        lock(&self.shared.heads).insert(key.to_string(), (head, Instant::now()));
    }

    /// Forgets the cached head of `key` (it was written or removed).
    pub fn forget(&self, key: &str) {
        lock(&self.shared.heads).remove(key);
    }

    /// Reads the whole object: decoded from any `k` chunks of its coded file and checked
    /// against its SHA-256, or a plain object's `k` ranges joined. A read that fails with a
    /// cached head is tried once more with a fresh one (the object may have been replaced).
    pub async fn read(&self, key: &str) -> Result<(Bytes, Served), ProxyError> {
        let cached = lock(&self.shared.heads).contains_key(key);
        match self.read_once(key).await {
            Err(e) if cached && !matches!(e, ProxyError::Stopped | ProxyError::TooLarge { .. }) => {
                self.forget(key);
                self.read_once(key).await
            }
            r => r,
        }
    }

    async fn read_once(&self, key: &str) -> Result<(Bytes, Served), ProxyError> {
        let head = self
            .head(key)
            .await?
            .ok_or_else(|| ProxyError::NotFound(key.to_string()))?;
        let layout = match &head.manifest {
            Some(m) => Layout::Coded(Arc::new(
                Manifest::from_metadata(m).map_err(|e| ProxyError::Strips(e, key.into()))?,
            )),
            None => Layout::Plain(head.size),
        };
        let size = match &layout {
            Layout::Coded(m) => m.size,
            Layout::Plain(s) => *s,
        };
        let limit = self.shared.cfg.max_object;
        if size > limit {
            return Err(ProxyError::TooLarge {
                key: key.into(),
                size,
                limit,
            });
        }
        if let Layout::Coded(m) = &layout {
            if m.coded_size() != head.size {
                self.forget(key);
                return Err(failed(
                    key,
                    "the stored file is not the size its manifest says",
                ));
            }
        }
        let got = self
            .submit(JobKind::Read {
                key: key.to_string(),
                layout: layout.clone(),
            })
            .await;
        let (reply, served) = match got {
            Err(e) => {
                self.forget(key); // it may have changed
                return Err(e);
            }
            Ok(r) => r,
        };
        let Reply::Chunks(mut chunks) = reply else {
            return Err(failed(key, "a read answered something else"));
        };
        let bytes = match layout {
            Layout::Coded(m) => {
                let codecs = self.shared.codecs.clone();
                let k = served.k;
                tokio::task::spawn_blocking(move || strips::decode(&codecs, &m, k, &chunks))
                    .await
                    .map_err(|e| failed(key, &e.to_string()))?
                    .map_err(|e| ProxyError::Strips(e, key.into()))?
            }
            Layout::Plain(size) => {
                chunks.sort_by_key(|c| c.0);
                let mut all = Vec::with_capacity(size as usize);
                for (_, c) in &chunks {
                    all.extend_from_slice(c);
                }
                if all.len() as u64 != size {
                    return Err(failed(key, "the ranges did not add up to the object"));
                }
                Bytes::from(all)
            }
        };
        Ok((bytes, served))
    }

    /// Writes `data` as a coded file of `(r_max·K, K)` strips; answers when `k` parts are
    /// stored (the rest follow: [`Written::finished`]).
    pub async fn write(&self, key: &str, data: Bytes) -> Result<Written, ProxyError> {
        let cfg = &self.shared.cfg;
        if data.len() as u64 > cfg.max_object {
            return Err(ProxyError::TooLarge {
                key: key.into(),
                size: data.len() as u64,
                limit: cfg.max_object,
            });
        }
        let (big_k, big_n) = (cfg.strips_k, cfg.r_max * cfg.strips_k);
        let codecs = self.shared.codecs.clone();
        let (manifest, file) =
            tokio::task::spawn_blocking(move || strips::encode(&codecs, &data, big_n, big_k))
                .await
                .map_err(|e| failed(key, &e.to_string()))?
                .map_err(|e| ProxyError::Strips(e, key.into()))?;
        self.forget(key);
        // A chunk of the code (·, k) is K/k strips.
        let max_k = (1..=manifest.k)
            .filter(|&k| manifest.k.is_multiple_of(k))
            .filter(|&k| (manifest.k / k) as u64 * manifest.strip >= cfg.min_part)
            .max()
            .unwrap_or(0);
        let upload = match max_k {
            0 => None,
            _ => Some(
                self.shared
                    .store
                    .upload(key, Some(manifest.to_metadata()))
                    .await
                    .map_err(|e| store_error(key, e))?,
            ),
        };
        let (finished, done) = oneshot::channel();
        let (_, served) = self
            .submit(JobKind::Write {
                key: key.to_string(),
                file: Bytes::from(file),
                manifest: Arc::new(manifest),
                upload,
                max_k,
                finished,
            })
            .await?;
        Ok(Written {
            served,
            key: key.to_string(),
            done,
        })
    }

    /// Removes the object from the store (absent: no error) and forgets its head. Not a
    /// TOFEC request: it takes no connection of the read and write paths.
    pub async fn delete(&self, key: &str) -> Result<(), ProxyError> {
        self.forget(key);
        let r = self.shared.store.delete(key).await;
        self.forget(key); // a read under way may have cached it again
        r.map_err(|e| store_error(key, e))
    }

    /// The current models (read, write).
    pub fn models(&self) -> (DelayModel, DelayModel) {
        let m = lock(&self.shared.models);
        (m.read.0, m.write.0)
    }

    /// The read tasks' delays kept for the fits.
    pub fn read_samples(&self) -> Vec<TaskSample> {
        lock(&self.shared.models).read.1.iter().copied().collect()
    }

    pub fn counters(&self) -> Counters {
        lock(&self.shared.counters).clone()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn failed(key: &str, why: &str) -> ProxyError {
    ProxyError::Failed {
        key: key.to_string(),
        why: why.to_string(),
    }
}

fn store_error(key: &str, e: StoreError) -> ProxyError {
    match e {
        StoreError::NotFound(_) => ProxyError::NotFound(key.to_string()),
        e => failed(key, &e.to_string()),
    }
}

/// The size class of a file: eighths of an octave.
fn size_class(size: u64) -> (i32, f64) {
    let b = ((size.max(1) as f64).log2() * 8.0).floor() as i32;
    (b, 2f64.powf((b as f64 + 0.5) / 8.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Faults, MemoryStore};
    use ecdn_trace::Rng;

    fn data(seed: u64, len: usize) -> Bytes {
        let mut rng = Rng::new(seed);
        Bytes::from((0..len).map(|_| rng.next_u64() as u8).collect::<Vec<u8>>())
    }

    fn proxy(store: &MemoryStore, strategy: Strategy, connections: usize) -> Proxy {
        let cfg = ProxyConfig {
            strategy,
            connections,
            task_timeout: Duration::from_secs(2),
            ..ProxyConfig::default()
        };
        Proxy::start(Arc::new(store.clone()), cfg)
    }

    /// Writes `d` as `key` and waits until every part is stored.
    async fn write_all(p: &Proxy, key: &str, d: &Bytes) {
        p.write(key, d.clone())
            .await
            .unwrap()
            .finished()
            .await
            .unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tofec_tail_marks_every_task_of_a_read_whose_chunks_were_slow_together() {
        let store = MemoryStore::new();
        let p = proxy(&store, Strategy::TofecTail, 16);
        let d = data(2, 600_000);
        write_all(&p, "obj", &d).await;
        p.head("obj").await.unwrap();
        let flagged = |p: &Proxy| p.read_samples().iter().filter(|s| s.slow_together).count();
        // Every chunk at once: not slow together (and at no load, a code with spare chunks).
        let (got, r) = p.read("obj").await.unwrap();
        assert_eq!(got, d);
        assert!(r.n > r.k, "{r:?}");
        assert_eq!(flagged(&p), 0);
        // Every chunk 1.2 s late, where the model's mean is about 0.1 s: the read was slow as
        // a whole, and all its tasks, the k completed and the n − k cancelled, say so.
        store.set_faults(Faults {
            delay: Duration::from_millis(1200),
            ..Faults::default()
        });
        let (got, r) = p.read("obj").await.unwrap();
        assert_eq!(got, d);
        assert_eq!(flagged(&p), r.n, "{r:?}");
        let censored = p
            .read_samples()
            .iter()
            .filter(|s| s.slow_together && s.censored)
            .count();
        assert_eq!(censored, r.n - r.k);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn round_trips_with_every_strategy() {
        let store = MemoryStore::new();
        let mut rng = Rng::new(3);
        for strategy in [
            "tofec",
            "tofec-tail",
            "greedy",
            "static-1-1",
            "static-4-2",
            "static-12-6",
            "static-5-3",
        ] {
            let p = proxy(&store, Strategy::parse(strategy).unwrap(), 16);
            for i in 0..4 {
                let len = [0, 1, 1000, 300_001][i] + rng.below(1000) as usize;
                let d = data(i as u64, len);
                let key = format!("{strategy}/{i}");
                let w = p.write(&key, d.clone()).await.unwrap();
                let s = w.served;
                assert!(s.k >= 1 && s.n >= s.k);
                // Acknowledged after k parts; readable when the upload is complete.
                w.finished().await.unwrap();
                let (got, r) = p.read(&key).await.unwrap();
                assert_eq!(got, d, "{strategy} {i}");
                assert!(r.k >= 1 && r.n >= r.k && r.n <= 2 * r.k, "{r:?}");
                if let Some((n, k)) = strategy
                    .strip_prefix("static-")
                    .and_then(|s| s.split_once('-'))
                {
                    // (5, 3) is not a code of a (12, 6) file: 3 divides 6, n stays 5.
                    assert_eq!((r.n, r.k), (n.parse().unwrap(), k.parse().unwrap()));
                }
            }
        }
        // A plain object (not coded by ecdn): k ranges, no redundancy.
        let d = data(9, 123_457);
        store.put("plain", d.clone(), None).await.unwrap();
        let p = proxy(&store, Strategy::Static { n: 4, k: 3 }, 16);
        let (got, r) = p.read("plain").await.unwrap();
        assert_eq!((got, r.n, r.k), (d, 3, 3));
        // Tiny plain objects: no empty range is asked.
        for len in 1..=12 {
            let d = data(len as u64, len);
            store.put("tiny", d.clone(), None).await.unwrap();
            let p = proxy(&store, Strategy::Static { n: 6, k: 6 }, 16);
            let (got, r) = p.read("tiny").await.unwrap();
            assert_eq!(got, d, "{len}");
            assert!(r.k <= len, "{len}: {r:?}");
        }
        assert_eq!(
            p.read("absent").await,
            Err(ProxyError::NotFound("absent".into()))
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_keep_to_the_store_s_least_part_size() {
        // S3's 5 MiB: a 12 MiB object has strips of 2 MiB, so only k ∈ {1, 2} give parts
        // that large; (12, 6) asked becomes (4, 2). A 1 MiB object has no such chunk: it is
        // written whole, k = 1, by two racing PUTs (n within r_max = 2).
        let store = MemoryStore::with_min_part(5 << 20);
        let p = proxy(&store, Strategy::Static { n: 12, k: 6 }, 16);
        for (len, code) in [(12 << 20, (4, 2)), (1 << 20, (2, 1))] {
            let d = data(len as u64, len);
            let w = p.write("big", d.clone()).await.unwrap();
            assert_eq!((w.served.n, w.served.k), code, "{len}");
            w.finished().await.unwrap();
            assert_eq!(p.read("big").await.unwrap().0, d);
        }
        // Without the limit, the same store refuses the small parts of (12, 6).
        let cfg = ProxyConfig {
            strategy: Strategy::Static { n: 12, k: 6 },
            min_part: 0,
            ..ProxyConfig::default()
        };
        let p = Proxy::start(Arc::new(store.clone()), cfg);
        let w = p.write("small-parts", data(3, 3 << 20)).await.unwrap();
        let e = w.finished().await.unwrap_err();
        assert!(e.to_string().contains("EntityTooSmall"), "{e}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_slow_tasks_are_cancelled_and_failed_ones_replaced() {
        let store = MemoryStore::new();
        let p = proxy(&store, Strategy::Static { n: 4, k: 2 }, 16);
        let d = data(1, 600_000);
        write_all(&p, "obj", &d).await;
        let (m, _) = strips::encode(&CodecCache::new(), &d, 12, 6).unwrap();
        let start = |c: usize| m.chunk_range(2, c).start;
        p.head("obj").await.unwrap();

        // Chunks 0 and 1 take 1.5 s: the read ends with chunks 2 and 3, long before.
        store.set_faults(Faults {
            delay: Duration::from_millis(20),
            slow: vec![
                (start(0), Duration::from_millis(1500)),
                (start(1), Duration::from_millis(1500)),
            ],
            ..Faults::default()
        });
        let before = (store.reads(), p.counters());
        let t = Instant::now();
        let (got, r) = p.read("obj").await.unwrap();
        assert_eq!(got, d);
        assert!(
            t.elapsed() < Duration::from_millis(1000),
            "{:?}",
            t.elapsed()
        );
        assert_eq!((r.n, r.k), (4, 2));
        let (reads, c) = (store.reads(), p.counters());
        assert_eq!(reads.0 - before.0 .0, 4, "all four asked");
        assert_eq!(reads.1 - before.0 .1, 2, "two never finished");
        assert_eq!(c.tasks_cancelled - before.1.tasks_cancelled, 2);
        // Their delays were kept as lower bounds.
        assert_eq!(p.read_samples().iter().filter(|s| s.censored).count(), 2);

        // With (3, 2): chunk 0 fails and chunk 1 is corrupt; chunk 3, the only one not
        // asked, replaces the first at the head of the task queue, and with chunk 2 it
        // decodes. Chunk 3 is held back 500 ms so that the corrupt chunk 1 always lands
        // before the read has two good ones (else it is cancelled unseen, and the count of
        // corrupt chunks depends on the scheduler).
        store.set_faults(Faults {
            fail: vec![start(0)],
            corrupt: vec![start(1)],
            slow: vec![(start(3), Duration::from_millis(500))],
            ..Faults::default()
        });
        let p3 = proxy(&store, Strategy::Static { n: 3, k: 2 }, 16);
        let (got, _) = p3.read("obj").await.unwrap();
        assert_eq!(got, d);
        let c = p3.counters();
        assert_eq!((c.corrupt_chunks, c.tasks_failed), (1, 1));
        // With (2, 2): chunk 0 gives no answer within the task timeout (2 s); chunk 2
        // replaces it.
        store.set_faults(Faults {
            slow: vec![(start(0), Duration::from_secs(5))],
            ..Faults::default()
        });
        let p2 = proxy(&store, Strategy::Static { n: 2, k: 2 }, 16);
        let t = Instant::now();
        let (got, _) = p2.read("obj").await.unwrap();
        assert_eq!(got, d);
        assert!(t.elapsed() >= Duration::from_secs(2) && t.elapsed() < Duration::from_secs(4));
        assert_eq!(p2.counters().tasks_failed, 1);

        // Every chunk fails: a clear error, and no hang.
        let all: Vec<u64> = (0..4)
            .map(start)
            .chain((4..12).map(|c| m.chunk_range(2, c).start))
            .collect();
        store.set_faults(Faults {
            fail: all,
            ..Faults::default()
        });
        let e = p.read("obj").await.unwrap_err();
        assert!(e.to_string().contains("fewer than k = 2"), "{e}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn requests_wait_for_an_idle_connection_and_tofec_shortens_codes_under_backlog() {
        let store = MemoryStore::new();
        let d = data(2, 60_000);
        proxy(&store, Strategy::Static { n: 12, k: 6 }, 16)
            .write("x", d.clone())
            .await
            .unwrap()
            .finished()
            .await
            .unwrap();
        store.set_faults(Faults {
            delay: Duration::from_millis(40),
            ..Faults::default()
        });
        // Two connections, (1, 1): of 6 requests at once, the last waits for two rounds.
        let p = proxy(&store, Strategy::Static { n: 1, k: 1 }, 2);
        p.head("x").await.unwrap();
        let reads: Vec<_> = (0..6)
            .map(|_| {
                let p = p.clone();
                tokio::spawn(async move { p.read("x").await })
            })
            .collect();
        let mut queued = Vec::new();
        for r in reads {
            let (got, s) = r.await.unwrap().unwrap();
            assert_eq!(got, d);
            queued.push(s.queued);
        }
        queued.sort();
        assert!(queued[0] < Duration::from_millis(20), "{queued:?}");
        assert!(queued[5] >= Duration::from_millis(70), "{queued:?}");

        // TOFEC: idle, the longest code; under a backlog of hundreds, (1, 1).
        let mut cfg = ProxyConfig {
            connections: 2,
            alpha: 0.5,
            // The paper's thresholds (the default is `tofec-tail`).
            strategy: Strategy::Tofec,
            ..ProxyConfig::default()
        };
        cfg.refit_every = 0;
        let p = Proxy::start(Arc::new(store.clone()), cfg);
        p.head("x").await.unwrap();
        let (_, s) = p.read("x").await.unwrap();
        assert_eq!((s.n, s.k), (12, 6));
        let burst: Vec<_> = (0..200)
            .map(|_| {
                let p = p.clone();
                tokio::spawn(async move { p.read("x").await })
            })
            .collect();
        let mut last = (0, 0);
        for r in burst {
            let (_, s) = r.await.unwrap().unwrap();
            last = (s.n, s.k);
        }
        assert_eq!(last, (1, 1));
    }
}
