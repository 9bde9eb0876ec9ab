//! A client's read of an object from its splits' servers: late binding (EC-Cache §4.3) done by
//! the client, as the paper's client does it, instead of by the node it called.
//!
//! Top to bottom, one read:
//! 1. [`start`]: `k + Δ` of the splits held on available servers are chosen at random
//!    (`ecdn_objects::split::read_plan`, the node's own rule), made up to `k + Δ` from servers
//!    out of the map if too few are available (a slow server still sends its split; late
//!    binding takes it if it comes first), one more for each chosen split on a server this
//!    client found slow (`stragglers.rs`), the others kept as spares, and each chosen split
//!    is read whole from its server, at once (`?split=I&version=V`).
//! 2. [`read_split`]: a split's bytes are cut into windows as they arrive
//!    (`ecdn_objects::digest`); a window enters the read only if its SHA-256 is the record's.
//!    A split read that fails (refused, `404`, cut short, a window that does not hash to its
//!    digest, no bytes for [`STALL`]) is replaced by a spare, read from the first window not
//!    yet sent.
//! 3. [`deliver`]: each window, in order, is decoded from the first `k` of its splits to
//!    arrive, and sent on as soon as it is; the readers keep at most [`READ_AHEAD`] windows
//!    ahead of it. When the last window is out, the reads still running are cancelled, and the
//!    whole object's SHA-256 is checked against the record (a last guard: a mismatch ends the
//!    read in an error instead of its end).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ecdn_codec::{decode_range_with, Codec, ObjectLayout};
use ecdn_objects::digest::sha256;
use ecdn_objects::meta::ObjectMeta;
use ecdn_objects::split::read_plan;
use ecdn_trace::Rng;
use http_body_util::{BodyExt, Full};
use hyper::{Request, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, Notify};

use crate::located::Located;
use crate::ClientError;

/// Windows a split's reader may be ahead of the window being sent.
pub const READ_AHEAD: u64 = 4;
/// A split read that brings no byte for this long is given up (and replaced by a spare).
pub const STALL: Duration = Duration::from_secs(5);

/// What one read did, for the caller and for tests: the splits asked, those that failed, and
/// the splits each window was decoded from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReadReport {
    pub delta: usize,
    /// Splits asked beyond the `k + Δ` chosen on available servers: on servers out of the
    /// map to make up `k + Δ`, and one for each chosen split on a server known slow.
    pub extra: usize,
    /// How many of `asked` were asked at the start (`k + Δ + extra`); spares follow.
    pub first: usize,
    pub asked: Vec<usize>,
    pub failed: Vec<(usize, String)>,
    pub used: Vec<Vec<usize>>,
}

/// A window's verified splits so far.
struct WindowIn {
    got: Vec<Option<Bytes>>,
    count: usize,
}

/// What the readers and the deliverer share.
struct ReadState {
    /// The first window not yet sent.
    next_out: u64,
    /// Windows `next_out..`, by index.
    windows: Vec<Option<WindowIn>>,
    /// Split reads running.
    running: usize,
    spares: Vec<usize>,
    report: ReadReport,
    /// Set when the read is over (done, failed or dropped): readers stop.
    over: bool,
    /// The split reads, cancelled when the read is over (late binding's "cancel the rest").
    tasks: Vec<tokio::task::AbortHandle>,
}

struct Shared {
    meta: Arc<ObjectMeta>,
    addrs: Vec<Option<SocketAddr>>,
    state: Mutex<ReadState>,
    /// A window got a split, or a split read ended.
    progress: Notify,
    /// A window was sent (readers waiting for room go on).
    room: Notify,
    http: Client<HttpConnector, Full<Bytes>>,
    /// Bytes asked of split servers and not received yet, over this client's reads (its
    /// backlog, for Δ).
    outstanding: Arc<AtomicU64>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, ReadState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts reading split `i` from window `from`.
    fn spawn_reader(self: &Arc<Self>, s: &mut ReadState, i: usize, from: u64) {
        let task = tokio::spawn(read_split(self.clone(), i, from));
        s.tasks.push(task.abort_handle());
    }

    /// The read is over: the split reads still running are cancelled (their connections
    /// closed, so their servers stop sending).
    fn end(&self) {
        let tasks = {
            let mut s = self.lock();
            s.over = true;
            s.windows.clear();
            std::mem::take(&mut s.tasks)
        };
        for t in tasks {
            t.abort();
        }
        self.room.notify_waiters();
        self.progress.notify_waiters();
    }
}

/// Bytes a split read still expects, in the client's backlog until they arrive or the read
/// ends (cancelled too).
struct Pending {
    outstanding: Arc<AtomicU64>,
    left: u64,
}

impl Pending {
    fn new(outstanding: Arc<AtomicU64>, left: u64) -> Pending {
        outstanding.fetch_add(left, Ordering::Relaxed);
        Pending { outstanding, left }
    }

    fn arrived(&mut self, n: u64) {
        let n = n.min(self.left);
        self.left -= n;
        self.outstanding.fetch_sub(n, Ordering::Relaxed);
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.outstanding.fetch_sub(self.left, Ordering::Relaxed);
    }
}

/// A read in progress: the object's bytes in order, window by window.
pub struct ObjectRead {
    pub meta: Arc<ObjectMeta>,
    rx: mpsc::Receiver<Result<Bytes, ClientError>>,
    shared: Arc<Shared>,
}

impl ObjectRead {
    /// The next bytes, an error (the read is over), or `None` at the end (every byte checked).
    pub async fn next(&mut self) -> Option<Result<Bytes, ClientError>> {
        self.rx.recv().await
    }

    /// The rest of the object, whole (then [`ObjectRead::report`] is complete).
    pub async fn collect(&mut self) -> Result<Bytes, ClientError> {
        let mut out = BytesMut::with_capacity(self.meta.size as usize);
        while let Some(b) = self.next().await {
            out.extend_from_slice(&b?);
        }
        Ok(out.freeze())
    }

    /// What the read did so far (complete once [`ObjectRead::next`] returned `None`).
    pub fn report(&self) -> ReadReport {
        self.shared.lock().report.clone()
    }
}

impl Drop for ObjectRead {
    fn drop(&mut self) {
        self.shared.end();
    }
}

/// Starts reading `at`'s object with `delta` extra splits, and one more for each chosen
/// split whose server `slow` says is slow (see the module documentation).
pub(crate) fn start(
    http: Client<HttpConnector, Full<Bytes>>,
    codec: Arc<dyn Codec>,
    at: &Located,
    delta: usize,
    slow: impl Fn(usize) -> bool,
    outstanding: Arc<AtomicU64>,
    seed: u64,
) -> Result<ObjectRead, ClientError> {
    let meta = Arc::new(at.meta.clone());
    let locations: Vec<usize> = (0..meta.splits.len()).collect();
    let reachable = |i: usize| meta.stored[i] && at.addrs[i].is_some();
    let usable = |i: usize| reachable(i) && at.available[i];
    let mut rng = Rng::new(seed);
    let mut first = read_plan(&mut rng, &locations, meta.k, delta, usable)
        .map_err(|e| ClientError::TooFewSplits(format!("object {}: {e}", meta.name)))?;
    let mut spares: Vec<usize> = (0..meta.splits.len())
        .filter(|&i| reachable(i) && !first.contains(&i))
        .collect();
    for j in (1..spares.len()).rev() {
        spares.swap(j, rng.below(j as u64 + 1) as usize);
    }
    // Spares on slow servers are taken last, and those out of the map before them (`pop`
    // takes from the end).
    let is_slow = |i: usize| slow(meta.splits[i]);
    spares.sort_by_key(|&i| (!is_slow(i), at.available[i]));
    let planned = first.len();
    let slow_chosen = first.iter().filter(|&&i| is_slow(i)).count();
    // Made up to k + Δ (every available split is chosen already, so from servers out of the
    // map, then slow ones) ...
    while first.len() < meta.k + delta {
        let Some(i) = spares.pop() else { break };
        first.push(i);
    }
    // ... then one more per chosen split on a slow server, from the spares that are not.
    for _ in 0..slow_chosen {
        match spares.last() {
            Some(&i) if !is_slow(i) => first.extend(spares.pop()),
            _ => break,
        }
    }
    let extra = first.len() - planned;
    let windows = meta.windows();
    let shared = Arc::new(Shared {
        meta: meta.clone(),
        addrs: at.addrs.clone(),
        state: Mutex::new(ReadState {
            next_out: 0,
            windows: (0..windows).map(|_| None).collect(),
            running: first.len(),
            spares,
            report: ReadReport {
                delta,
                extra,
                first: first.len(),
                asked: first.clone(),
                ..ReadReport::default()
            },
            over: false,
            tasks: Vec::new(),
        }),
        progress: Notify::new(),
        room: Notify::new(),
        http,
        outstanding,
    });
    {
        let mut s = shared.lock();
        for &i in &first {
            shared.spawn_reader(&mut s, i, 0);
        }
    }
    let (tx, rx) = mpsc::channel(2);
    tokio::spawn(deliver(shared.clone(), codec, tx));
    Ok(ObjectRead { meta, rx, shared })
}

/// Reads split `i` from window `from` to its end (see the module documentation); on failure,
/// starts a spare in its place.
async fn read_split(shared: Arc<Shared>, i: usize, from: u64) {
    let meta = &shared.meta;
    let left = meta.split_len() - meta.window_range(from).start;
    let mut pending = Pending::new(shared.outstanding.clone(), left);
    let outcome = fetch_windows(&shared, i, from, &mut pending).await;
    drop(pending);
    {
        let mut s = shared.lock();
        s.running -= 1;
        if let Err(why) = outcome {
            if !s.over {
                s.report.failed.push((i, why));
                if let Some(sp) = s.spares.pop() {
                    s.running += 1;
                    s.report.asked.push(sp);
                    let from = s.next_out;
                    shared.spawn_reader(&mut s, sp, from);
                }
            }
        }
    }
    shared.progress.notify_waiters();
}

/// The request and the windows of [`read_split`]: `Ok` when the split was read to its end or
/// the read no longer needs it.
async fn fetch_windows(
    shared: &Shared,
    i: usize,
    from: u64,
    pending: &mut Pending,
) -> Result<(), String> {
    let meta = &shared.meta;
    let addr = shared.addrs[i].ok_or("no address")?;
    let start = meta.window_range(from).start;
    let uri = format!(
        "http://{addr}/_objects/{}?split={i}&version={}",
        meta.name, meta.version
    );
    let req = Request::get(uri)
        .header(
            hyper::header::RANGE,
            format!("bytes={start}-{}", meta.split_len().max(1) - 1),
        )
        .body(Full::new(Bytes::new()))
        .map_err(|e| e.to_string())?;
    let resp = tokio::time::timeout(STALL, shared.http.request(req))
        .await
        .map_err(|_| format!("node at {addr}: no answer within {STALL:?}"))?
        .map_err(|e| format!("node at {addr}: {e}"))?;
    if resp.status() != StatusCode::PARTIAL_CONTENT {
        return Err(format!("node at {addr}: {}", resp.status()));
    }
    let mut body = resp.into_body();
    let mut buf = BytesMut::new();
    let mut w = from;
    while w < meta.windows() {
        let need = {
            let r = meta.window_range(w);
            (r.end - r.start) as usize
        };
        while buf.len() < need {
            let frame = tokio::time::timeout(STALL, body.frame())
                .await
                .map_err(|_| format!("node at {addr}: no bytes for {STALL:?}"))?;
            match frame {
                None => return Err(format!("node at {addr}: the split ended short")),
                Some(Err(e)) => return Err(format!("node at {addr}: {e}")),
                Some(Ok(f)) => {
                    if let Ok(d) = f.into_data() {
                        pending.arrived(d.len() as u64);
                        buf.extend_from_slice(&d);
                    }
                }
            }
        }
        let window = buf.split_to(need).freeze();
        if meta.digest(i, w) != Some(&sha256(&window)) {
            return Err(format!(
                "node at {addr}: window {w} of split {i} does not match the record's digest"
            ));
        }
        if !deposit(shared, i, w, window) {
            return Ok(());
        }
        w += 1;
        // At most READ_AHEAD windows ahead of the one being sent.
        loop {
            let room = shared.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            {
                let s = shared.lock();
                if s.over {
                    return Ok(());
                }
                if w < s.next_out + READ_AHEAD {
                    break;
                }
            }
            room.await;
        }
    }
    Ok(())
}

/// Gives window `w` split `i`'s verified bytes (if the window still needs one); false when
/// the read is over.
fn deposit(shared: &Shared, i: usize, w: u64, bytes: Bytes) -> bool {
    let mut s = shared.lock();
    if s.over {
        return false;
    }
    let k = shared.meta.k;
    let n = shared.meta.splits.len();
    if w >= s.next_out {
        let win = s.windows[w as usize].get_or_insert_with(|| WindowIn {
            got: vec![None; n],
            count: 0,
        });
        if win.count < k && win.got[i].is_none() {
            win.got[i] = Some(bytes);
            win.count += 1;
            if win.count == k {
                drop(s);
                shared.progress.notify_waiters();
            }
        }
    }
    true
}

/// Sends the windows in order, each decoded from its first `k` splits, then checks the whole
/// object (see the module documentation).
async fn deliver(
    shared: Arc<Shared>,
    codec: Arc<dyn Codec>,
    tx: mpsc::Sender<Result<Bytes, ClientError>>,
) {
    let out = send_windows(&shared, codec.as_ref(), &tx).await;
    shared.end();
    if let Err(e) = out {
        let _ = tx.send(Err(e)).await;
    }
}

async fn send_windows(
    shared: &Shared,
    codec: &dyn Codec,
    tx: &mpsc::Sender<Result<Bytes, ClientError>>,
) -> Result<(), ClientError> {
    let meta = &shared.meta;
    let p = meta.splits.len() - meta.k;
    let layout = ObjectLayout::new(meta.size, meta.k, p, meta.sub_chunk)
        .map_err(|e| ClientError::BadAnswer(format!("the record's code: {e}")))?;
    let ws = meta.window_stripes.max(1);
    let mut sha = Sha256::new();
    for w in 0..meta.windows() {
        let win = next_window(shared, w).await?;
        let a = w * ws;
        let b = (a + ws).min(layout.stripe_count());
        let range = layout.stripe_range(a).map_or(0, |r| r.start)
            ..layout.stripe_range(b - 1).map_or(0, |r| r.end);
        let mut out = vec![0u8; (range.end - range.start) as usize];
        let sub = meta.sub_chunk as usize;
        decode_range_with(codec, &layout, range, &mut out, |chunk, j| {
            let at = (j - a) as usize * sub;
            let len = layout.sub_chunk_len(j).ok()? as usize;
            win.got[chunk].as_ref().and_then(|b| b.get(at..at + len))
        })
        .map_err(|e| ClientError::BadAnswer(format!("decoding window {w}: {e}")))?;
        sha.update(&out);
        {
            let mut s = shared.lock();
            s.next_out = w + 1;
            let used = (0..win.got.len()).filter(|&c| win.got[c].is_some());
            s.report.used.push(used.collect());
        }
        shared.room.notify_waiters();
        if tx.send(Ok(Bytes::from(out))).await.is_err() {
            return Ok(()); // the reader went away
        }
    }
    let sha: [u8; 32] = sha.finalize().into();
    let hex: String = sha.iter().map(|b| format!("{b:02x}")).collect();
    if hex != meta.sha256 {
        return Err(ClientError::BadAnswer(format!(
            "object {}: the decoded bytes do not match the record's SHA-256",
            meta.name
        )));
    }
    Ok(())
}

/// Waits until window `w` has `k` verified splits, and takes it; an error once fewer than `k`
/// can still come.
async fn next_window(shared: &Shared, w: u64) -> Result<WindowIn, ClientError> {
    let k = shared.meta.k;
    loop {
        let progress = shared.progress.notified();
        tokio::pin!(progress);
        progress.as_mut().enable();
        {
            let mut s = shared.lock();
            let have = s.windows[w as usize].as_ref().map_or(0, |x| x.count);
            if have >= k {
                return Ok(s.windows[w as usize].take().expect("counted"));
            }
            if have + s.running < k {
                let failed: Vec<String> = s
                    .report
                    .failed
                    .iter()
                    .map(|(i, why)| format!("split {i}: {why}"))
                    .collect();
                return Err(ClientError::TooFewSplits(format!(
                    "object {}: window {w}: {have} of k = {k} splits, none left to read ({})",
                    shared.meta.name,
                    failed.join("; ")
                )));
            }
        }
        progress.await;
    }
}

#[cfg(test)]
mod tests {
    //! Late binding against made-up split servers: one answers a corrupt window, one is slow,
    //! one has no split; the read takes the good ones, its bytes are the object's, and the
    //! client learns which servers are late.

    use std::convert::Infallible;
    use std::net::SocketAddr;
    use std::sync::Arc;

    use bytes::Bytes;
    use ecdn_codec::{encode_object, CodecCache, ObjectLayout};
    use ecdn_objects::digest::WindowHasher;
    use ecdn_objects::meta::{ObjectMeta, ObjectName};
    use http_body_util::Full;
    use hyper::service::service_fn;
    use hyper::{Request, Response};
    use hyper_util::rt::TokioIo;
    use tokio::net::TcpListener;

    use crate::{Delta, SplitClient};

    #[derive(Clone, Copy)]
    enum Behaviour {
        Good,
        /// Window 0's first byte flipped.
        Corrupt,
        Slow,
        Missing,
    }

    /// Serves `body` for split requests as `b` says, and `locate` for `?locate`.
    async fn serve(b: Behaviour, split: Bytes, locate: Arc<std::sync::Mutex<Bytes>>) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let Ok((s, _)) = l.accept().await else { return };
                let (split, locate) = (split.clone(), locate.clone());
                tokio::spawn(async move {
                    let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                        let (split, locate) = (split.clone(), locate.clone());
                        async move {
                            let q = req.uri().query().unwrap_or("").to_string();
                            if q == "locate" {
                                let body = locate.lock().unwrap().clone();
                                return Ok::<_, Infallible>(Response::new(Full::new(body)));
                            }
                            let start: usize = req.headers()["range"].to_str().unwrap()
                                ["bytes=".len()..]
                                .split('-')
                                .next()
                                .unwrap()
                                .parse()
                                .unwrap();
                            let mut body = split.slice(start..).to_vec();
                            match b {
                                Behaviour::Missing => {
                                    let mut r = Response::new(Full::new(Bytes::new()));
                                    *r.status_mut() = hyper::StatusCode::NOT_FOUND;
                                    return Ok(r);
                                }
                                Behaviour::Slow => {
                                    tokio::time::sleep(std::time::Duration::from_millis(400)).await
                                }
                                Behaviour::Corrupt if start == 0 => body[0] ^= 1,
                                _ => {}
                            }
                            let mut r = Response::new(Full::new(Bytes::from(body)));
                            *r.status_mut() = hyper::StatusCode::PARTIAL_CONTENT;
                            Ok(r)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(s), svc)
                        .await;
                });
            }
        });
        addr
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn late_binding_takes_the_first_k_verified_splits_and_skips_the_rest() {
        let (k, p, sub, size) = (2usize, 3usize, 1000u64, 23_456u64);
        let data: Vec<u8> = (0..size).map(|i| (i * 7 + i / 251) as u8).collect();
        let layout = ObjectLayout::new(size, k, p, sub).unwrap();
        let codec = CodecCache::new().get(k, p).unwrap();
        let chunks = encode_object(codec.as_ref(), &layout, &data).unwrap();
        let window_stripes = 3;
        let mut h = WindowHasher::new(k + p, window_stripes);
        for (i, c) in chunks.iter().enumerate() {
            for s in c.chunks(sub as usize) {
                h.push(i, s);
            }
        }
        let sha: String = ecdn_objects::digest::sha256(&data)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let meta = ObjectMeta {
            name: ObjectName::parse("t/obj").unwrap(),
            version: 3,
            size,
            k,
            r: p,
            splits: (0..k + p).collect(),
            stored: vec![true; k + p],
            sha256: sha,
            sub_chunk: sub,
            crcs: vec![0; (k + p) * layout.stripe_count() as usize],
            window_stripes,
            digests: h.finish(),
            s3: None,
        };
        let locate = Arc::new(std::sync::Mutex::new(Bytes::new()));
        use Behaviour::*;
        let mut addrs = Vec::new();
        for (i, b) in [Corrupt, Slow, Missing, Good, Good].into_iter().enumerate() {
            addrs.push(serve(b, Bytes::from(chunks[i].clone()), locate.clone()).await);
        }
        let mut v = serde_json::to_value(&meta).unwrap();
        v["addrs"] = serde_json::json!(addrs.iter().map(|a| a.to_string()).collect::<Vec<_>>());
        *locate.lock().unwrap() = Bytes::from(serde_json::to_vec(&v).unwrap());

        // Δ = 3: all five asked; only the two good splits are used, and the corrupt and the
        // missing fail if their answers come before the good ones end the read (a busy
        // machine can let the good ones win first, and the read does not wait for the rest);
        // a corrupt split that answered was refused by its digest.
        let all = SplitClient::new(vec![addrs[3]]).with_delta(Delta::Fixed(3));
        let mut read = all.read("t/obj").await.unwrap();
        let got = read.collect().await.unwrap();
        assert!(got[..] == data[..]);
        let r = read.report();
        assert_eq!(r.asked.len(), 5, "{r:?}");
        assert_eq!(r.used.len() as u64, meta.windows());
        assert!(r.used.iter().all(|u| u == &vec![3, 4]), "{r:?}");
        assert!(r.failed.iter().all(|f| f.0 == 0 || f.0 == 2), "{r:?}");
        if let Some(corrupt) = r.failed.iter().find(|f| f.0 == 0) {
            assert!(corrupt.1.contains("digest"), "{r:?}");
        }

        // Split 4's server out of the map: Δ = 3 asks the four available, and split 4 to make
        // up k + Δ (its server still answers).
        let mut out = v.clone();
        out["available"] = serde_json::json!([true, true, true, true, false]);
        *locate.lock().unwrap() = Bytes::from(serde_json::to_vec(&out).unwrap());
        let made_up = SplitClient::new(vec![addrs[3]]).with_delta(Delta::Fixed(3));
        let mut read = made_up.read("t/obj").await.unwrap();
        assert!(read.collect().await.unwrap()[..] == data[..]);
        let r = read.report();
        assert_eq!((r.first, r.extra), (5, 1), "{r:?}");
        assert_eq!(r.asked[4], 4, "{r:?}");
        assert!(r.used.iter().all(|u| u == &vec![3, 4]), "{r:?}");
        *locate.lock().unwrap() = Bytes::from(serde_json::to_vec(&v).unwrap());

        // Δ = 0: two asked at random; every failure is replaced by a spare, the bytes are right.
        let exact = SplitClient::new(vec![addrs[3]]).with_delta(Delta::Fixed(0));
        for _ in 0..8 {
            assert!(exact.get("t/obj").await.unwrap()[..] == data[..]);
        }
        assert_eq!(exact.via_node_reads(), 0);
        // Server 2 has no split: never used, and every read of it that ended, failed (one
        // still in flight when the read ended is dropped uncounted, as with Δ = 3 above: seen
        // once in a full run, 3 failed of 4 asked).
        for (server, u) in exact.server_use() {
            if server == 2 {
                assert_eq!(u.used_windows, 0, "no split there: {u:?}");
                assert!(u.failed <= u.asked, "{u:?}");
            }
        }
        // Cancelled reads leave the backlog when their tasks are dropped, just after the end.
        let t0 = std::time::Instant::now();
        while exact.backlog_bytes() != 0 && t0.elapsed().as_secs() < 2 {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(exact.backlog_bytes(), 0);

        // Δ = 1: the client learns which servers are late (the slow one, and the two whose
        // reads fail), and then asks one more split for each of them in a read's plan.
        let learning = SplitClient::new(vec![addrs[3]]).with_delta(Delta::Fixed(1));
        for _ in 0..20 {
            assert!(learning.get("t/obj").await.unwrap()[..] == data[..]);
        }
        assert_eq!(learning.slow_servers(), vec![0, 1, 2]);
        let mut extra = 0;
        for _ in 0..10 {
            let mut read = learning.read("t/obj").await.unwrap();
            assert!(read.collect().await.unwrap()[..] == data[..]);
            let r = read.report();
            assert_eq!(r.first, k + 1 + r.extra, "{r:?}");
            extra += r.extra;
        }
        assert!(extra > 0, "a plan with a slow server's split asks one more");
    }

    #[test]
    fn a_locate_answer_is_checked() {
        for bad in [&b"[]"[..], b"{}", b"{\"addrs\": []}", b"not json"] {
            assert!(crate::Located::parse(bad).is_err());
        }
    }
}
