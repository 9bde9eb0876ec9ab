//! A storage cloud on loopback (issue 13's test bed): an S3-compatible server for the
//! operations the backend tier uses, whose answers take as long as S3's do.
//!
//! A store on loopback answers in microseconds, while TOFEC's gains come from S3's delay
//! distribution. With a [`DelaySource`], every range read of `B` bytes is answered after a
//! delay drawn from it (by default TOFEC's model `Δ(B) + Exp(μ(B))`, §III-C, with S3's
//! parameters, [`DelayModel::PAPER_S3`]; [`delays`] has sources TOFEC did not design),
//! measured from the request to the response's last byte; with a per-connection bandwidth as
//! well, the body is paced at that rate and its headers leave early enough for the last byte
//! to arrive on time (or as soon as the rate allows). A write (an object, or a part) is
//! answered the write source's delay after its body arrived, and not before the body could
//! have crossed a connection of that bandwidth; a `HEAD` after the read source's delay for 0
//! bytes.
//!
//! As S3 does, completing a multipart upload whose parts but the last are not all of
//! [`EmulatorConfig::min_part`] bytes (5 MiB) fails with `EntityTooSmall`.
//!
//! **The S3 subset**, path-style (`/bucket/key`), unsigned requests accepted (the emulator
//! checks no signatures): `PUT` an object (with `x-amz-meta-*` metadata), `GET` (with a
//! `Range: bytes=a-b`, `a-` or `-n`) and `HEAD` it, `DELETE` it; multipart uploads (`POST
//! ?uploads`, `PUT ?partNumber&uploadId`, `POST ?uploadId` with the parts' list, `DELETE
//! ?uploadId`); `PUT /bucket` (every bucket exists). Errors are S3's XML error bodies. Objects
//! live in memory; `max_object` bounds each.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use ecdn_trace::Rng;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::http::percent_decode;
use crate::model::DelayModel;

pub mod delays;

pub use delays::{DelaySource, DrawContext};

/// How the emulator answers.
#[derive(Clone, Debug)]
pub struct EmulatorConfig {
    /// Delays of reads (and `HEAD`); `None`: at once.
    pub read: Option<DelaySource>,
    /// Delays of writes; `None`: at once.
    pub write: Option<DelaySource>,
    /// Bytes per second of one connection's bodies, each way; `None`: unpaced.
    pub bandwidth: Option<u64>,
    /// Seed of the delays.
    pub seed: u64,
    /// Largest object or part accepted.
    pub max_object: u64,
    /// The least size of a multipart upload's parts but the last (S3's 5 MiB; 0: any).
    pub min_part: u64,
}

impl Default for EmulatorConfig {
    fn default() -> Self {
        EmulatorConfig {
            read: Some(DelaySource::Model(DelayModel::PAPER_S3)),
            write: Some(DelaySource::Model(DelayModel::PAPER_S3)),
            bandwidth: None,
            seed: 1,
            max_object: 1 << 30,
            min_part: 5 << 20,
        }
    }
}

impl EmulatorConfig {
    /// Every answer at once, unpaced (parts of S3's least size still required): a plain
    /// S3-compatible store for functional tests.
    pub fn instant() -> EmulatorConfig {
        EmulatorConfig {
            read: None,
            write: None,
            ..EmulatorConfig::default()
        }
    }
}

struct Object {
    data: Bytes,
    meta: Vec<(String, String)>,
    etag: String,
    modified: SystemTime,
}

struct Multipart {
    bucket: String,
    key: String,
    meta: Vec<(String, String)>,
    parts: BTreeMap<u32, Bytes>,
}

/// Counts since the start.
#[derive(Debug, Default)]
pub struct EmulatorStats {
    pub requests: AtomicU64,
    pub range_reads: AtomicU64,
    pub bytes_sent: AtomicU64,
}

struct Emu {
    cfg: EmulatorConfig,
    objects: Mutex<HashMap<(String, String), Object>>,
    uploads: Uploads,
    /// The delays' variates and the slow periods' clock.
    run: Arc<Mutex<RunClock>>,
    next: AtomicU64,
    stats: Arc<EmulatorStats>,
    /// Connections accepted so far (each one's number).
    connections: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running emulator.
pub struct Emulator {
    addr: SocketAddr,
    handles: Handles,
    seed: u64,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

/// The multipart uploads under way, by id.
type Uploads = Arc<Mutex<HashMap<String, Multipart>>>;

/// Where the delays are in their sequence: how many times each request (key and length) was
/// asked so far, and the start of the slow periods' schedule.
///
/// The `i`-th request for a key and a length draws its variate from the seed, the key, the
/// length and `i` (common random numbers): two strategies that make the same requests draw
/// the same delays for them, whatever order their tasks start in. (One generator drawn in the
/// order tasks start gave every request after the first difference another delay: two runs
/// that gave every measured read the same code differed by up to 11% at 85% load, BENCHMARKS.md,
/// issue 64.)
struct RunClock {
    seed: u64,
    asked: HashMap<u64, u64>,
    started: Instant,
}

impl RunClock {
    /// The variates from `seed`, the schedule from now.
    fn new(seed: u64) -> RunClock {
        RunClock {
            seed,
            asked: HashMap::new(),
            started: Instant::now(),
        }
    }

    /// The variate of the next request for the key hashed to `key` and `bytes` long.
    fn variate(&mut self, key: u64, bytes: u64) -> f64 {
        let request = key ^ bytes.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let i = self.asked.entry(request).or_insert(0);
        *i += 1;
        Rng::new(self.seed ^ request ^ i.wrapping_mul(0xff51_afd7_ed55_8ccd)).f64()
    }
}

/// Starts a running emulator's delays again ([`Restart::restart`]): what a bench does before
/// each strategy's run, so that every strategy meets the same slow periods at the same times
/// and, request for request, the same variates.
#[derive(Clone)]
pub struct Restart {
    run: Arc<Mutex<RunClock>>,
    seed: u64,
}

impl Restart {
    /// The variates from the seed again, the slow periods' schedule from now.
    pub fn restart(&self) {
        *lock(&self.run) = RunClock::new(self.seed);
    }
}

/// What the server shares with the [`Emulator`] handle.
#[derive(Clone)]
struct Handles {
    stats: Arc<EmulatorStats>,
    uploads: Uploads,
    run: Arc<Mutex<RunClock>>,
}

impl Handles {
    fn new(seed: u64) -> Handles {
        Handles {
            stats: Arc::default(),
            uploads: Uploads::default(),
            run: Arc::new(Mutex::new(RunClock::new(seed))),
        }
    }
}

impl Emulator {
    /// Listens on `addr` (port 0: any free one) and serves until [`Emulator::stop`].
    pub async fn start(addr: SocketAddr, cfg: EmulatorConfig) -> std::io::Result<Emulator> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (handles, seed) = (Handles::new(cfg.seed), cfg.seed);
        let task = tokio::spawn(serve_with(listener, cfg, handles.clone(), async {
            let _ = stopped.await;
        }));
        Ok(Emulator {
            addr,
            handles,
            seed,
            stop: Some(stop),
            task,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`, the endpoint for S3 clients.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn stats(&self) -> &EmulatorStats {
        &self.handles.stats
    }

    /// What starts its delays again (it may be used from another thread).
    pub fn restarter(&self) -> Restart {
        Restart {
            run: self.handles.run.clone(),
            seed: self.seed,
        }
    }

    /// Multipart uploads begun and neither completed nor aborted.
    pub fn open_uploads(&self) -> usize {
        lock(&self.handles.uploads).len()
    }

    /// Stops accepting connections and closes the open ones.
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let _ = (&mut self.task).await;
    }
}

/// Serves on `listener` until `shutdown`.
pub async fn serve(
    listener: TcpListener,
    cfg: EmulatorConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let handles = Handles::new(cfg.seed);
    serve_with(listener, cfg, handles, shutdown).await;
    Ok(())
}

async fn serve_with(
    listener: TcpListener,
    cfg: EmulatorConfig,
    handles: Handles,
    shutdown: impl Future<Output = ()>,
) {
    let emu = Arc::new(Emu {
        run: handles.run,
        cfg,
        objects: Mutex::new(HashMap::new()),
        uploads: handles.uploads,
        next: AtomicU64::new(1),
        stats: handles.stats,
        connections: AtomicU64::new(0),
    });
    // A stopped store answers nothing more: its open connections close too.
    let (closed_tx, closed) = tokio::sync::watch::channel(false);
    crate::http::accept_loop(listener, shutdown, |stream| {
        let emu = emu.clone();
        let mut closed = closed.clone();
        let conn = emu.connections.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let emu = emu.clone();
                async move { Ok::<_, Infallible>(handle(&emu, req, conn).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), svc);
            tokio::select! {
                _ = conn => {}
                _ = closed.wait_for(|&c| c) => {}
            }
        });
    })
    .await;
    closed_tx.send_replace(true);
}

type EmuBody = Paced;

/// An S3 error answer.
fn error(status: StatusCode, code: &str, message: &str) -> Response<EmuBody> {
    let xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code>\
         <Message>{}</Message></Error>",
        xml_escape(message)
    );
    let mut r = Response::new(Paced::now(Bytes::from(xml)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/xml"),
    );
    r
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn xml(body: String) -> Response<EmuBody> {
    let mut r = Response::new(Paced::now(Bytes::from(body)));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/xml"),
    );
    r
}

/// `(bucket, key)` of a path-style request path, percent-decoded.
pub fn bucket_and_key(path: &str) -> Option<(String, String)> {
    let path = path.strip_prefix('/')?;
    let (bucket, key) = path.split_once('/').unwrap_or((path, ""));
    if bucket.is_empty() {
        return None;
    }
    Some((percent_decode(bucket)?, percent_decode(key)?))
}

fn query(q: Option<&str>) -> HashMap<String, String> {
    q.unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (
                percent_decode(k).unwrap_or_default(),
                percent_decode(v).unwrap_or_default(),
            )
        })
        .collect()
}

fn user_metadata(h: &HeaderMap) -> Vec<(String, String)> {
    h.iter()
        .filter_map(|(k, v)| {
            let name = k.as_str().strip_prefix("x-amz-meta-")?;
            Some((name.to_string(), v.to_str().ok()?.to_string()))
        })
        .collect()
}

/// What a request is, for drawing its delay.
#[derive(Clone, Copy)]
struct Asked<'a> {
    key: &'a str,
    conn: u64,
    arrived: Instant,
}

/// The delay of an operation on `bytes` bytes, drawn from `source`.
fn draw(emu: &Emu, source: Option<&DelaySource>, asked: Asked<'_>, bytes: u64) -> Duration {
    let Some(source) = source else {
        return Duration::ZERO;
    };
    let key = key_hash(asked.key);
    let (u, started) = {
        let mut run = lock(&emu.run);
        (run.variate(key, bytes), run.started)
    };
    let cx = DrawContext {
        bytes,
        t: asked
            .arrived
            .saturating_duration_since(started)
            .as_secs_f64(),
        key,
        conn: asked.conn,
        seed: emu.cfg.seed,
    };
    Duration::from_secs_f64(source.draw(&cx, u))
}

/// FNV-1a of the key, then mixed: where it falls in the key space.
fn key_hash(key: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

/// The time `bytes` take on one connection of the emulator's bandwidth.
fn transfer_time(emu: &Emu, bytes: u64) -> Duration {
    emu.cfg
        .bandwidth
        .map(|b| Duration::from_secs_f64(bytes as f64 / b.max(1) as f64))
        .unwrap_or_default()
}

async fn handle(emu: &Emu, req: Request<Incoming>, conn: u64) -> Response<EmuBody> {
    emu.stats.requests.fetch_add(1, Ordering::Relaxed);
    let arrived = Instant::now();
    let Some((bucket, key)) = bucket_and_key(req.uri().path()) else {
        return error(
            StatusCode::BAD_REQUEST,
            "InvalidURI",
            "path-style /bucket/key only",
        );
    };
    let q = query(req.uri().query());
    let method = req.method().clone();
    match (method, key.is_empty()) {
        (Method::PUT, true) | (Method::HEAD, true) => Response::new(Paced::now(Bytes::new())),
        (_, true) => error(
            StatusCode::NOT_IMPLEMENTED,
            "NotImplemented",
            "bucket operations",
        ),
        (Method::GET, false) | (Method::HEAD, false) => {
            read(emu, req, bucket, key, (conn, arrived)).await
        }
        (Method::PUT, false) => write(emu, req, bucket, key, q, (conn, arrived)).await,
        (Method::POST, false) if q.contains_key("uploads") => {
            let id = format!("u{}", emu.next.fetch_add(1, Ordering::Relaxed));
            let meta = user_metadata(req.headers());
            lock(&emu.uploads).insert(
                id.clone(),
                Multipart {
                    bucket: bucket.clone(),
                    key: key.clone(),
                    meta,
                    parts: BTreeMap::new(),
                },
            );
            xml(format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<InitiateMultipartUploadResult>\
                 <Bucket>{}</Bucket><Key>{}</Key><UploadId>{id}</UploadId>\
                 </InitiateMultipartUploadResult>",
                xml_escape(&bucket),
                xml_escape(&key)
            ))
        }
        (Method::POST, false) if q.contains_key("uploadId") => {
            complete(emu, req, &q["uploadId"]).await
        }
        (Method::DELETE, false) if q.contains_key("uploadId") => {
            lock(&emu.uploads).remove(&q["uploadId"]);
            let mut r = Response::new(Paced::now(Bytes::new()));
            *r.status_mut() = StatusCode::NO_CONTENT;
            r
        }
        (Method::DELETE, false) => {
            lock(&emu.objects).remove(&(bucket, key));
            let mut r = Response::new(Paced::now(Bytes::new()));
            *r.status_mut() = StatusCode::NO_CONTENT;
            r
        }
        _ => error(
            StatusCode::NOT_IMPLEMENTED,
            "NotImplemented",
            "not in the emulator's subset",
        ),
    }
}

/// A byte range of an object of `size` bytes: `(start, end)`, or `Err` when it cannot be
/// satisfied.
pub fn range(h: Option<&HeaderValue>, size: u64) -> Option<Result<(u64, u64), ()>> {
    let v = h?.to_str().ok()?.strip_prefix("bytes=")?;
    let (a, b) = v.split_once('-')?;
    let r = match (a.parse::<u64>().ok(), b.parse::<u64>().ok()) {
        (Some(a), Some(b)) if a <= b && a < size => Ok((a, (b + 1).min(size))),
        (Some(a), None) if b.is_empty() && a < size => Ok((a, size)),
        (None, Some(n)) if a.is_empty() && n > 0 && size > 0 => Ok((size.saturating_sub(n), size)),
        _ => Err(()),
    };
    Some(r)
}

async fn read(
    emu: &Emu,
    req: Request<Incoming>,
    bucket: String,
    key: String,
    (conn, arrived): (u64, Instant),
) -> Response<EmuBody> {
    let head = req.method() == Method::HEAD;
    let asked = |key| Asked { key, conn, arrived };
    let found = lock(&emu.objects)
        .get(&(bucket, key.clone()))
        .map(|o| (o.data.clone(), o.meta.clone(), o.etag.clone(), o.modified));
    let Some((data, meta, etag, modified)) = found else {
        tokio::time::sleep(draw(emu, emu.cfg.read.as_ref(), asked(&key), 0)).await;
        return error(StatusCode::NOT_FOUND, "NoSuchKey", &key);
    };
    let size = data.len() as u64;
    let (status, body, content_range) = match range(req.headers().get(header::RANGE), size) {
        Some(Err(())) => {
            let mut r = error(
                StatusCode::RANGE_NOT_SATISFIABLE,
                "InvalidRange",
                "the range is not satisfiable",
            );
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{size}")) {
                r.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            return r;
        }
        Some(Ok((a, b))) => {
            emu.stats.range_reads.fetch_add(1, Ordering::Relaxed);
            let cr = format!("bytes {a}-{}/{size}", b - 1);
            (
                StatusCode::PARTIAL_CONTENT,
                data.slice(a as usize..b as usize),
                Some(cr),
            )
        }
        None => (StatusCode::OK, data, None),
    };
    let len = body.len() as u64;
    let sent = if head { 0 } else { len };
    // The response is due `delay` after the request; at the link's rate its body takes
    // `len / rate`, so the headers leave that much earlier.
    let delay = draw(emu, emu.cfg.read.as_ref(), asked(&key), sent);
    let transfer = transfer_time(emu, sent);
    let headers_at = arrived + delay.saturating_sub(transfer);
    tokio::time::sleep_until(headers_at.into()).await;
    emu.stats.bytes_sent.fetch_add(sent, Ordering::Relaxed);
    let body = if head {
        Paced::now(Bytes::new())
    } else {
        Paced::new(body, emu.cfg.bandwidth)
    };
    let mut r = Response::new(body);
    *r.status_mut() = status;
    let h = r.headers_mut();
    let mut put = |name: header::HeaderName, v: String| {
        if let Ok(v) = HeaderValue::from_str(&v) {
            h.insert(name, v);
        }
    };
    put(header::CONTENT_LENGTH, len.to_string());
    put(header::ETAG, etag);
    put(header::LAST_MODIFIED, http_date(modified));
    put(header::ACCEPT_RANGES, "bytes".into());
    if let Some(cr) = content_range {
        put(header::CONTENT_RANGE, cr);
    }
    for (k, v) in meta {
        if let (Ok(name), Ok(v)) = (
            header::HeaderName::from_bytes(format!("x-amz-meta-{k}").as_bytes()),
            HeaderValue::from_str(&v),
        ) {
            h.insert(name, v);
        }
    }
    r
}

/// The body, read whole up to the limit.
async fn body_of(
    emu: &Emu,
    req: Request<Incoming>,
) -> Result<(HeaderMap, Bytes), Response<EmuBody>> {
    let (parts, body) = req.into_parts();
    let limit = emu.cfg.max_object as usize;
    let limited = http_body_util::Limited::new(body, limit);
    match limited.collect().await {
        Ok(b) => Ok((parts.headers, b.to_bytes())),
        Err(e) => Err(error(
            StatusCode::BAD_REQUEST,
            "IncompleteBody",
            &e.to_string(),
        )),
    }
}

async fn write(
    emu: &Emu,
    req: Request<Incoming>,
    bucket: String,
    key: String,
    q: HashMap<String, String>,
    (conn, arrived): (u64, Instant),
) -> Response<EmuBody> {
    let (headers, data) = match body_of(emu, req).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let bytes = data.len() as u64;
    let asked = Asked {
        key: &key,
        conn,
        arrived,
    };
    let due = (Instant::now() + draw(emu, emu.cfg.write.as_ref(), asked, bytes))
        .max(arrived + transfer_time(emu, bytes));
    tokio::time::sleep_until(due.into()).await;
    let etag = format!("\"{:08x}\"", ecdn_store::crc32c(&data));
    if let (Some(part), Some(id)) = (q.get("partNumber"), q.get("uploadId")) {
        let Ok(n) = part.parse::<u32>() else {
            return error(StatusCode::BAD_REQUEST, "InvalidArgument", "partNumber");
        };
        let mut uploads = lock(&emu.uploads);
        let Some(u) = uploads.get_mut(id) else {
            return error(StatusCode::NOT_FOUND, "NoSuchUpload", id);
        };
        u.parts.insert(n, data);
        drop(uploads);
        let mut r = Response::new(Paced::now(Bytes::new()));
        if let Ok(v) = HeaderValue::from_str(&etag) {
            r.headers_mut().insert(header::ETAG, v);
        }
        return r;
    }
    let meta = user_metadata(&headers);
    lock(&emu.objects).insert(
        (bucket, key),
        Object {
            data,
            meta,
            etag: etag.clone(),
            modified: SystemTime::now(),
        },
    );
    let mut r = Response::new(Paced::now(Bytes::new()));
    if let Ok(v) = HeaderValue::from_str(&etag) {
        r.headers_mut().insert(header::ETAG, v);
    }
    r
}

/// `POST ?uploadId`: the parts the body lists, in its order, joined into the object.
async fn complete(emu: &Emu, req: Request<Incoming>, id: &str) -> Response<EmuBody> {
    let (_, body) = match body_of(emu, req).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let numbers = part_numbers(&body);
    // The upload stays open when it cannot be completed, as in S3 (it can be aborted).
    let joined = {
        let mut uploads = lock(&emu.uploads);
        let Some(u) = uploads.get(id) else {
            return error(StatusCode::NOT_FOUND, "NoSuchUpload", id);
        };
        match join_parts(u, &numbers, emu.cfg.min_part) {
            Ok(data) => uploads.remove(id).map(|u| (u, data)),
            Err((code, why)) => return error(StatusCode::BAD_REQUEST, code, &why),
        }
    };
    let Some((u, data)) = joined else {
        return error(StatusCode::NOT_FOUND, "NoSuchUpload", id);
    };
    let data = Bytes::from(data);
    let etag = format!("\"{:08x}-{}\"", ecdn_store::crc32c(&data), numbers.len());
    lock(&emu.objects).insert(
        (u.bucket.clone(), u.key.clone()),
        Object {
            data,
            meta: u.meta,
            etag: etag.clone(),
            modified: SystemTime::now(),
        },
    );
    xml(format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<CompleteMultipartUploadResult>\
         <Bucket>{}</Bucket><Key>{}</Key><ETag>{}</ETag></CompleteMultipartUploadResult>",
        xml_escape(&u.bucket),
        xml_escape(&u.key),
        xml_escape(&etag)
    ))
}

/// The parts `numbers` lists, joined in its order: `Err` with S3's error code and message
/// when one is missing or, but for the last, smaller than `min_part`.
fn join_parts(
    u: &Multipart,
    numbers: &[u32],
    min_part: u64,
) -> Result<Vec<u8>, (&'static str, String)> {
    if numbers.is_empty() {
        return Err(("MalformedXML", "no parts listed".into()));
    }
    let mut data = Vec::new();
    for (i, n) in numbers.iter().enumerate() {
        let Some(p) = u.parts.get(n) else {
            return Err(("InvalidPart", format!("part {n}")));
        };
        if i + 1 < numbers.len() && (p.len() as u64) < min_part {
            let why = format!(
                "part {n} has {} bytes; every part but the last needs {min_part}",
                p.len()
            );
            return Err(("EntityTooSmall", why));
        }
        data.extend_from_slice(p);
    }
    Ok(data)
}

/// The part numbers a `CompleteMultipartUpload` body lists, in its order.
pub fn part_numbers(body: &[u8]) -> Vec<u32> {
    String::from_utf8_lossy(body)
        .split("<PartNumber>")
        .skip(1)
        .filter_map(|s| s.split("</PartNumber>").next()?.trim().parse().ok())
        .collect()
}

/// An IMF-fixdate (RFC 9110 §5.6.7).
pub fn http_date(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][(days % 7) as usize];
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(mo <= 2);
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ][(mo - 1) as usize];
    format!("{weekday}, {d:02} {month} {y} {h:02}:{m:02}:{s:02} GMT")
}

/// A response body sent in 64 KiB frames at a rate (or at once).
pub struct Paced {
    data: Bytes,
    rate: Option<u64>,
    sent: usize,
    start: Option<Instant>,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Paced {
    fn now(data: Bytes) -> Paced {
        Paced::new(data, None)
    }

    fn new(data: Bytes, rate: Option<u64>) -> Paced {
        Paced {
            data,
            rate,
            sent: 0,
            start: None,
            sleep: None,
        }
    }
}

const FRAME: usize = 64 << 10;

impl Body for Paced {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let me = &mut *self;
        if me.sent >= me.data.len() {
            return Poll::Ready(None);
        }
        if let Some(rate) = me.rate {
            let start = *me.start.get_or_insert_with(Instant::now);
            let due = start + Duration::from_secs_f64(me.sent as f64 / rate.max(1) as f64);
            if Instant::now() < due {
                let sleep = me
                    .sleep
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due.into())));
                sleep.as_mut().reset(due.into());
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
            }
        }
        let n = FRAME.min(me.data.len() - me.sent);
        let frame = me.data.slice(me.sent..me.sent + n);
        me.sent += n;
        Poll::Ready(Some(Ok(Frame::data(frame))))
    }

    fn is_end_stream(&self) -> bool {
        self.sent >= self.data.len()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact((self.data.len() - self.sent) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_ranges_and_paths() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_784_851_200);
        assert_eq!(http_date(t), "Fri, 24 Jul 2026 00:00:00 GMT");
        assert_eq!(
            http_date(SystemTime::UNIX_EPOCH),
            "Thu, 01 Jan 1970 00:00:00 GMT"
        );
        let v = |s: &str| HeaderValue::from_str(s).unwrap();
        assert_eq!(range(Some(&v("bytes=0-9")), 100), Some(Ok((0, 10))));
        assert_eq!(range(Some(&v("bytes=90-200")), 100), Some(Ok((90, 100))));
        assert_eq!(range(Some(&v("bytes=90-")), 100), Some(Ok((90, 100))));
        assert_eq!(range(Some(&v("bytes=-5")), 100), Some(Ok((95, 100))));
        assert_eq!(range(Some(&v("bytes=100-")), 100), Some(Err(())));
        assert_eq!(range(Some(&v("bytes=5-1")), 100), Some(Err(())));
        assert_eq!(range(Some(&v("items=0-1")), 100), None);
        assert_eq!(range(None, 100), None);
        assert_eq!(
            bucket_and_key("/b/a%20b/c"),
            Some(("b".to_string(), "a b/c".to_string()))
        );
        assert_eq!(bucket_and_key("/b"), Some(("b".to_string(), String::new())));
        assert_eq!(bucket_and_key("/"), None);
        assert_eq!(bucket_and_key("/b/%zz"), None);
    }

    /// Common random numbers: a request draws the same variate whatever order the requests
    /// are asked in; its next asking draws another; another seed, other variates.
    #[test]
    fn a_request_draws_its_own_variate_whatever_the_order() {
        let (a, b) = (key_hash("obj/a"), key_hash("obj/b"));
        let mut one = RunClock::new(7);
        let in_order = [
            one.variate(a, 100),
            one.variate(b, 100),
            one.variate(a, 100),
            one.variate(a, 50),
        ];
        let mut other = RunClock::new(7);
        let (b1, a50, a1, a2) = (
            other.variate(b, 100),
            other.variate(a, 50),
            other.variate(a, 100),
            other.variate(a, 100),
        );
        assert_eq!(in_order, [a1, b1, a2, a50]);
        assert_ne!(a1, a2);
        assert!(in_order.iter().all(|u| (0.0..1.0).contains(u)));
        assert_ne!(RunClock::new(8).variate(a, 100), a1);
    }
}
