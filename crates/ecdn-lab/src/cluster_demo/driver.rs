//! The load driver: the cluster's front load balancer.
//!
//! It replays the trace in order with `--concurrency` workers. Requests are handed out one at
//! a time by the [`Dispenser`] (`dispenser.rs`), which spreads them **round-robin** over the
//! live nodes the coordinator's map has in (the n-th request handed out goes to node
//! n mod |those|), or with `--routing bucket` to each
//! one's bucket's serving node ([`super::routing`]), and carries out the kill schedule:
//! before it hands out request `at` of a [`Kill`], it kills that node's process (SIGKILL) and
//! takes it out of the rotation, so every request from `at` on is issued after the kill.
//! With `--rebalance-every N` it also stops before every N-th request until the requests in
//! flight are done, has the coordinator rebalance parity and waits for every live node to take
//! the new map, so the rebalance falls between the same two requests as in the simulator.
//! With `--repair-rate` it stops the same way before every `--repair-every`-th request (after
//! that request's kills) and has every live node run one background repair round, one node
//! after the other in id order, as the simulator's servers take theirs.
//! A restarted node's return (`--restart`, [`super::restart`]) stops the requests the same
//! way: before request `at` of the return, once the requests in flight are done, the node is
//! started again and waited for until the coordinator's map has it available; it then joins
//! the rotation.
//!
//! A worker keeps one HTTP/1.1 connection per node. A request whose connection fails — refused
//! or reset before the response headers, silent for the idle limit (connect included), broken
//! while the body arrives, or not done within the request limit — is retried once on
//! the next live node of the rotation (a kept-alive connection that turns out closed is first
//! replaced by a fresh one to the same node, which is not a retry). Every body is checked
//! byte by byte against the object's content ([`ecdn_node::content`]) as it arrives.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use bytes::Bytes;
use ecdn_node::content;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper::header::HeaderMap;
use hyper_util::rt::TokioIo;

use super::measure::{Record, Retry};
use super::schedule::Restart;

pub use super::dispenser::{Assignment, Dispenser, Faulter, Next, Router, SharedDispenser};

/// How an attempt ended without an answer to judge.
enum Transport {
    /// Refused or reset before the response headers.
    BeforeResponse(String),
    /// No response headers within the idle limit: the node is not tried again at once.
    Silent(String),
    /// Broken while the body arrived.
    MidBody(String),
}

/// An answer's headers of interest and what its body held.
#[derive(Clone)]
struct Answer {
    status: u16,
    headers: HeaderMap,
    bytes: u64,
    wrong_bytes: u64,
    ttfb_us: u64,
    total_us: u64,
    arrivals: Vec<(u32, u32)>,
}

type Conn = SendRequest<Empty<Bytes>>;

/// A connection to `addr`; a connect that hears nothing for `idle` (a host cut off drops the
/// SYN: the kernel would try for minutes) fails.
async fn connect(addr: SocketAddr, idle: Duration) -> Result<Conn, String> {
    let stream = tokio::time::timeout(idle, tokio::net::TcpStream::connect(addr))
        .await
        .map_err(|_| format!("connect to {addr}: nothing for {idle:?}"))?
        .map_err(|e| format!("connect to {addr}: {e}"))?;
    let _ = stream.set_nodelay(true);
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("handshake with {addr}: {e}"))?;
    tokio::spawn(conn);
    Ok(send)
}

/// Counts the bytes of `chunk` (at `offset` of object `id` of `size` bytes) that are wrong.
fn wrong_in(id: u64, size: u64, offset: u64, chunk: &[u8]) -> u64 {
    let inside = size.saturating_sub(offset).min(chunk.len() as u64) as usize;
    let beyond = (chunk.len() - inside) as u64;
    let body = &chunk[..inside];
    match content::first_mismatch(id, offset, body) {
        None => beyond,
        Some(first) => {
            let want = content::bytes(id, offset + first as u64, body.len() - first);
            let diff = want
                .iter()
                .zip(&body[first..])
                .filter(|(a, b)| a != b)
                .count() as u64;
            diff + beyond
        }
    }
}

/// The Host every request names (the cache key starts with it).
pub const HOST: &str = "demo.ecdn";

/// The path and query of trace object `id` of `size` bytes.
pub fn target(id: u64, size: u64) -> String {
    format!("/obj/{id}?size={size}")
}

/// The id the live nodes place and cache the object by: the hash of its cache key (Host +
/// path + query, as `ecdn_node`'s cache key).
pub fn object_id(id: u64, size: u64) -> u64 {
    ecdn_trace::hash_id(format!("{HOST}{}", target(id, size)).as_bytes())
}

/// One attempt on one connection.
/// With `arrivals`, every body frame's arrival is kept (µs from sending the request, bytes).
async fn attempt(
    send: &mut Conn,
    (id, size): (u64, u64),
    arrivals: bool,
    idle: Duration,
) -> Result<Answer, Transport> {
    let req = hyper::Request::get(target(id, size))
        .header("host", HOST)
        .body(Empty::new())
        .map_err(|e| Transport::BeforeResponse(e.to_string()))?;
    send.ready()
        .await
        .map_err(|e| Transport::BeforeResponse(e.to_string()))?;
    let t = Instant::now();
    let silent = || format!("nothing for {idle:?}");
    let resp = tokio::time::timeout(idle, send.send_request(req))
        .await
        .map_err(|_| Transport::Silent(silent()))?
        .map_err(|e| Transport::BeforeResponse(e.to_string()))?;
    let status = resp.status().as_u16();
    let (parts, mut body) = resp.into_parts();
    let mut ttfb_us = None;
    let (mut bytes, mut wrong_bytes) = (0u64, 0u64);
    let mut arrived = Vec::new();
    while let Some(frame) = tokio::time::timeout(idle, body.frame())
        .await
        .map_err(|_| Transport::MidBody(silent()))?
    {
        let frame = frame.map_err(|e| Transport::MidBody(e.to_string()))?;
        if let Ok(data) = frame.into_data() {
            if data.is_empty() {
                continue;
            }
            let at = t.elapsed().as_micros() as u64;
            ttfb_us.get_or_insert(at);
            if arrivals {
                arrived.push((at.min(u32::MAX as u64) as u32, data.len() as u32));
            }
            if (200..300).contains(&status) {
                wrong_bytes += wrong_in(id, size, bytes, &data);
            }
            bytes += data.len() as u64;
        }
    }
    let total_us = t.elapsed().as_micros() as u64;
    Ok(Answer {
        status,
        headers: parts.headers,
        bytes,
        wrong_bytes,
        ttfb_us: ttfb_us.unwrap_or(total_us),
        total_us,
        arrivals: arrived,
    })
}

/// One attempt on `node`, reusing the worker's connection to it; a reused connection that
/// fails before the response is replaced by a fresh one once.
async fn on_node(
    conns: &mut HashMap<usize, Conn>,
    (node, addr): (usize, SocketAddr),
    object: (u64, u64),
    arrivals: bool,
    idle: Duration,
) -> Result<Answer, Transport> {
    let mut reused = conns.remove(&node);
    loop {
        let was_reused = reused.is_some();
        let mut send = match reused.take() {
            Some(s) => s,
            None => connect(addr, idle)
                .await
                .map_err(Transport::BeforeResponse)?,
        };
        match attempt(&mut send, object, arrivals, idle).await {
            Ok(a) => {
                conns.insert(node, send);
                return Ok(a);
            }
            Err(Transport::BeforeResponse(_)) if was_reused => continue,
            Err(e) => return Err(e),
        }
    }
}

fn header<'h>(h: &'h HeaderMap, name: &str) -> Option<&'h str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// Judges an answer: is it what the object is, and what does the node say it did (the
/// record's `arrivals` are left for the caller to move in).
fn judge(a: &Answer, node: usize, size: u64, retry: Option<Retry>) -> Record {
    let h = &a.headers;
    let x_cache = header(h, "x-cache").unwrap_or("");
    let partial = header(h, "x-ecdn-partial") == Some("1");
    // The paper's miss: an origin fetch. A request that waited on another's fill is none.
    let collapsed = x_cache == "MISS-COLLAPSED" && !partial;
    let miss = (x_cache.starts_with("MISS") && !collapsed) || partial;
    let origin_bytes = if miss {
        header(h, "x-ecdn-origin-bytes")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(size)
    } else {
        0
    };
    let two = (200..300).contains(&a.status);
    let error = if !two {
        Some(format!("status {}", a.status))
    } else if a.bytes != size {
        Some(format!("body of {} bytes, expected {size}", a.bytes))
    } else if a.wrong_bytes > 0 {
        Some(format!("{} wrong bytes", a.wrong_bytes))
    } else {
        None
    };
    Record {
        size,
        node,
        ok: error.is_none(),
        status: Some(a.status),
        miss,
        collapsed,
        hit: !miss && x_cache.starts_with("HIT"),
        hoc: !miss && x_cache == "HIT-HOC",
        coded: match header(h, "x-ecdn-object") {
            Some("coded") => Some(true),
            Some("replicated") => Some(false),
            _ => None,
        },
        origin_bytes,
        partial,
        decoded: header(h, "x-ecdn-decoded") == Some("1"),
        bytes: a.bytes,
        wrong_bytes: if two { a.wrong_bytes } else { 0 },
        ttfb_us: a.ttfb_us,
        total_us: a.total_us,
        retry,
        error,
        // The caller moves the answer's arrivals in (no copy).
        arrivals: Vec::new(),
    }
}

fn transport_failure(size: u64, node: usize, retry: Option<Retry>, why: String) -> Record {
    Record {
        size,
        node,
        retry,
        error: Some(why),
        ..Record::default()
    }
}

/// What the workers share.
pub struct Work {
    /// (object id, size) of every request, in trace order.
    pub requests: Vec<(u64, u64)>,
    /// Client addresses of the nodes.
    pub nodes: Vec<SocketAddr>,
    /// Admin addresses of the nodes (where a sliced answer's outcome is asked for).
    pub admins: Vec<SocketAddr>,
    pub dispenser: SharedDispenser,
    /// Limit on one attempt (connect to the last body byte).
    pub timeout: Duration,
    /// Limit on a silence within one attempt (no response head, or no body byte, for this
    /// long): the attempt is given up and retried on another node, as a load balancer does
    /// with a node it can no longer reach.
    pub idle: Duration,
    /// Rebalances parity over the given live nodes (see [`Next::Rebalance`]).
    pub rebalancer: Option<Rebalancer>,
    /// Has the given live nodes run a repair round each, in order (see [`Next::Repair`]).
    pub repairer: Option<Rebalancer>,
    /// Brings a restarted node back, given the live nodes (see [`Next::Return`]).
    pub returner: Option<Returner>,
    /// Keep every body frame's arrival in the records (for `--client-link`).
    pub arrivals: bool,
    /// Counts the requests done (the demo's progress on stderr; hidden in tests).
    pub progress: indicatif::ProgressBar,
}

/// Has the cluster rebalance parity; given the live nodes, returns when every one of them took
/// the new map.
pub type Rebalancer = Arc<
    dyn Fn(Vec<usize>) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<()>> + Send>>
        + Send
        + Sync,
>;

/// Starts a killed node again and returns once it is back in the coordinator's map, given the
/// return and the live nodes (which must take the map too).
pub type Returner = Arc<
    dyn Fn(
            Restart,
            Vec<usize>,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<()>> + Send>>
        + Send
        + Sync,
>;

/// Waits until no request is in flight, then brings the node back: the requests handed out
/// before the return all finished before it, those after it start after it, as in the
/// simulator.
async fn bring_back(work: &Work, r: Restart) -> Result<()> {
    while work.dispenser.lock().unwrap().in_flight() > 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let live = work.dispenser.lock().unwrap().live().to_vec();
    let res = match &work.returner {
        Some(f) => f(r, live).await,
        None => Err(anyhow::anyhow!(
            "a restart is scheduled but nothing can run it"
        )),
    };
    let mut d = work.dispenser.lock().unwrap();
    match &res {
        Ok(()) => d.returned(r.node),
        Err(_) => d.abort(),
    }
    res
}

/// Waits until no request is in flight, then runs the rebalance (or, `repair`, the repair
/// rounds).
async fn rebalance(work: &Work, repair: bool) -> Result<()> {
    while work.dispenser.lock().unwrap().in_flight() > 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let live = work.dispenser.lock().unwrap().live().to_vec();
    let (run, what) = match repair {
        false => (&work.rebalancer, "a rebalance"),
        true => (&work.repairer, "a repair round"),
    };
    let r = match run {
        Some(f) => f(live).await,
        None => Err(anyhow::anyhow!(
            "{what} is scheduled but nothing can run it"
        )),
    };
    work.dispenser.lock().unwrap().rebalanced();
    r
}

/// One request: an attempt, and on a connection failure one retry on another live node.
async fn request(work: &Work, conns: &mut HashMap<usize, Conn>, a: Assignment) -> Record {
    let (id, size) = work.requests[a.index as usize];
    let mut node = a.node;
    let mut retry = None;
    loop {
        let tried = tokio::time::timeout(
            work.timeout,
            on_node(
                conns,
                (node, work.nodes[node]),
                (id, size),
                work.arrivals,
                work.idle,
            ),
        )
        .await;
        let failure = match tried {
            // Too slow as a whole: given up, and tried once on another node as any failure.
            Err(_) => {
                conns.remove(&node);
                Transport::MidBody(format!("no complete answer within {:?}", work.timeout))
            }
            Ok(Ok(answer)) => {
                let mut record = judge(&answer, node, size, retry);
                if record.ok {
                    sliced_outcome(work, &answer.headers, &mut record).await;
                }
                record.arrivals = answer.arrivals;
                return record;
            }
            Ok(Err(e)) => e,
        };
        let (kind, why) = match failure {
            Transport::BeforeResponse(w) | Transport::Silent(w) => (Retry::BeforeResponse, w),
            Transport::MidBody(w) => (Retry::MidBody, w),
        };
        let why = format!("node {node}: {why}");
        if retry.is_some() {
            return transport_failure(size, node, retry, why);
        }
        let fallback = work.dispenser.lock().unwrap().fallback(node);
        match fallback {
            Some(other) => {
                retry = Some(kind);
                node = other;
            }
            None => return transport_failure(size, node, Some(kind), why),
        }
    }
}

/// An answer made of slices (`X-Ecdn-Sliced`) says what it came to only at its end: the
/// node that served it (`X-Ecdn-Served-By`) is asked (`/_ecdn/sliced/ID`), and the record
/// takes its miss (any slice from the origin), partial hit and origin bytes. An answer it no
/// longer remembers keeps what its head said.
async fn sliced_outcome(work: &Work, h: &HeaderMap, record: &mut Record) {
    if !h.contains_key("x-ecdn-sliced") {
        return;
    }
    let (Some(by), Some(id)) = (
        header(h, "x-ecdn-served-by").and_then(|v| v.parse::<usize>().ok()),
        header(h, ecdn_cluster::peer::REQUEST_ID_HEADER),
    ) else {
        return;
    };
    let Some(&admin) = work.admins.get(by) else {
        return;
    };
    let path = format!("/_ecdn/sliced/{id}");
    let Ok((200, body)) = super::procs::admin_get(admin, &path, work.idle).await else {
        return;
    };
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return;
    };
    let n = |f: &str| v[f].as_u64().unwrap_or(0);
    let (slices, missed, partial) = (n("slices"), n("missed"), n("partial"));
    record.miss = missed > 0;
    record.collapsed = false;
    record.hit = missed == 0;
    record.hoc = false;
    record.partial = missed > 0 && (partial > 0 || missed < slices);
    record.origin_bytes = n("origin_bytes");
}

/// Runs `concurrency` workers until every request is done; returns the records in trace
/// order.
pub async fn run(work: Arc<Work>, concurrency: usize) -> Result<Vec<Record>> {
    let out: Arc<Mutex<Vec<Option<Record>>>> =
        Arc::new(Mutex::new(vec![None; work.requests.len()]));
    let mut tasks = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let (work, out) = (work.clone(), out.clone());
        tasks.push(tokio::spawn(async move {
            let mut conns = HashMap::new();
            loop {
                let next = work.dispenser.lock().unwrap().next_request();
                match next {
                    Next::Done => return Ok::<(), anyhow::Error>(()),
                    Next::Wait => tokio::time::sleep(Duration::from_millis(1)).await,
                    Next::Rebalance => rebalance(&work, false).await?,
                    Next::Repair => rebalance(&work, true).await?,
                    Next::Return(r) => bring_back(&work, r).await?,
                    Next::Request(a) => {
                        let rec = request(&work, &mut conns, a).await;
                        out.lock().unwrap()[a.index as usize] = Some(rec);
                        work.dispenser.lock().unwrap().finished();
                        work.progress.inc(1);
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    let out = std::mem::take(&mut *out.lock().unwrap());
    out.into_iter()
        .enumerate()
        .map(|(i, r)| r.ok_or_else(|| anyhow::anyhow!("request {i} was never issued")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::schedule::{kills, KillSpec};
    use super::*;

    #[test]
    fn dispenser_round_robins_and_kills_before_the_scheduled_request() {
        let killed = Arc::new(Mutex::new(Vec::new()));
        let log = killed.clone();
        let kills = kills(
            &[KillSpec {
                node: 1,
                fraction: 0.5,
            }],
            3,
            8,
        )
        .unwrap();
        let mut d = Dispenser::new(8, 3, kills, move |n| log.lock().unwrap().push(n));
        let mut seen = Vec::new();
        while let Next::Request(a) = d.next_request() {
            d.finished();
            if a.index < 4 {
                assert!(killed.lock().unwrap().is_empty());
            } else {
                assert_eq!(*killed.lock().unwrap(), vec![1]);
            }
            seen.push((a.index, a.node));
        }
        assert_eq!(
            seen,
            vec![
                (0, 0),
                (1, 1),
                (2, 2),
                (3, 0),
                (4, 0),
                (5, 2),
                (6, 0),
                (7, 2)
            ]
        );
        assert_eq!(d.live, vec![0, 2]);
        assert_eq!(d.next_request(), Next::Done);
    }

    /// A router names each request's node; one it names that was killed gets the round-robin's
    /// node instead.
    #[test]
    fn a_router_picks_the_node_unless_it_is_dead() {
        let kills = kills(
            &[KillSpec {
                node: 2,
                fraction: 0.5,
            }],
            3,
            6,
        )
        .unwrap();
        let mut d = Dispenser::new(6, 3, kills, |_| {}).with_router(Box::new(|_, _| Some(2)));
        let mut seen = Vec::new();
        while let Next::Request(a) = d.next_request() {
            d.finished();
            seen.push(a.node);
        }
        // Node 2 until its kill before request 3; then round-robin over nodes 0 and 1.
        assert_eq!(seen, vec![2, 2, 2, 1, 0, 1]);
    }

    /// A node out of the map, or slow to the load balancer, gets nothing while another node
    /// is in the map and not slow; with none such, the map decides, then liveness.
    #[test]
    fn nodes_out_of_the_map_or_slow_get_requests_only_when_no_other_can() {
        let mut d = Dispenser::new(100, 3, Vec::new(), |_| {});
        let take = |d: &mut Dispenser<_>, n: usize| -> Vec<usize> {
            (0..n)
                .map(|_| match d.next_request() {
                    Next::Request(a) => {
                        d.finished();
                        a.node
                    }
                    other => panic!("{other:?}"),
                })
                .collect()
        };
        d.slow(1, true);
        assert_eq!(take(&mut d, 4), vec![0, 2, 0, 2]);
        d.in_map(0, false);
        assert_eq!(take(&mut d, 2), vec![2, 2]);
        // Every node in the map is slow: the slow one in the map.
        d.slow(2, true);
        assert_eq!(take(&mut d, 2), vec![1, 2]);
        d.slow(1, false);
        d.slow(2, false);
        d.in_map(0, true);
        assert_eq!(take(&mut d, 3), vec![2, 0, 1]);
    }

    /// A router's node the load balancer finds slow gets nothing while another candidate
    /// is in the rotation; each such request is counted.
    #[test]
    fn a_routed_request_skips_a_slow_node_and_is_counted() {
        let prefer_1 =
            |_: u64, among: &[usize]| Some(if among.contains(&1) { 1 } else { among[0] });
        let mut d = Dispenser::new(4, 3, Vec::new(), |_| {}).with_router(Box::new(prefer_1));
        let next = |d: &mut Dispenser<_>| match d.next_request() {
            Next::Request(a) => {
                d.finished();
                a.node
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(next(&mut d), 1);
        d.slow(1, true);
        assert_eq!(next(&mut d), 0);
        assert_eq!(next(&mut d), 0);
        assert_eq!(d.slow_skips(), 2);
        d.slow(1, false);
        assert_eq!(next(&mut d), 1);
        assert_eq!(d.slow_skips(), 2);
    }

    #[test]
    fn dispenser_stops_for_each_rebalance() {
        let mut d = Dispenser::new(7, 2, Vec::new(), |_| {}).with_rebalances(3);
        let mut steps = Vec::new();
        loop {
            match d.next_request() {
                Next::Request(a) => steps.push(format!("{}", a.index)),
                Next::Rebalance => {
                    // Handed out with requests still in flight; nothing else until it is done.
                    assert_eq!(d.in_flight(), 3);
                    assert_eq!(d.next_request(), Next::Wait);
                    for _ in 0..3 {
                        d.finished();
                    }
                    d.rebalanced();
                    steps.push("R".into());
                }
                Next::Wait | Next::Return(_) | Next::Repair => {
                    unreachable!("no rebalance or return is under way")
                }
                Next::Done => break,
            }
        }
        assert_eq!(steps.join(" "), "0 1 2 R 3 4 5 R 6");
    }

    #[test]
    fn fallback_is_the_next_live_node() {
        let mut d = Dispenser::new(10, 4, Vec::new(), |_| {});
        assert_eq!(d.fallback(0), Some(1));
        assert_eq!(d.fallback(3), Some(0));
        d.live.retain(|&n| n != 2);
        // Node 2 is dead: its retry goes to the live node after its place.
        assert_eq!(d.fallback(2), Some(3));
        let one = Dispenser::new(10, 1, Vec::new(), |_| {});
        assert_eq!(one.fallback(0), None);
    }

    #[test]
    fn wrong_bytes_are_counted_exactly() {
        let id = 42;
        let mut body = content::bytes(id, 100, 1000);
        assert_eq!(wrong_in(id, 5000, 100, &body), 0);
        body[10] ^= 1;
        body[500] ^= 0xff;
        assert_eq!(wrong_in(id, 5000, 100, &body), 2);
        // Bytes past the object's end are all wrong.
        let body = content::bytes(id, 0, 1000);
        assert_eq!(wrong_in(id, 900, 0, &body), 100);
    }

    #[test]
    fn judge_reads_the_contract_headers() {
        let mut headers = HeaderMap::new();
        headers.insert("x-cache", "MISS".parse().unwrap());
        headers.insert("x-ecdn-object", "coded".parse().unwrap());
        headers.insert("x-ecdn-origin-bytes", "300".parse().unwrap());
        headers.insert("x-ecdn-partial", "1".parse().unwrap());
        let a = Answer {
            status: 200,
            headers,
            bytes: 1000,
            wrong_bytes: 0,
            ttfb_us: 5,
            total_us: 9,
            arrivals: Vec::new(),
        };
        let r = judge(&a, 3, 1000, None);
        assert!(r.ok && r.miss && r.partial && !r.hit);
        assert_eq!((r.coded, r.origin_bytes, r.node), (Some(true), 300, 3));
        let mut hit = HeaderMap::new();
        hit.insert("x-cache", "HIT-DISK".parse().unwrap());
        hit.insert("x-ecdn-object", "replicated".parse().unwrap());
        hit.insert("x-ecdn-decoded", "1".parse().unwrap());
        let a = Answer {
            headers: hit,
            bytes: 999,
            ..a
        };
        // A request that waited on another's fill is no miss (no origin fetch).
        let mut collapsed = HeaderMap::new();
        collapsed.insert("x-cache", "MISS-COLLAPSED".parse().unwrap());
        collapsed.insert("x-ecdn-origin-bytes", "0".parse().unwrap());
        let c = judge(
            &Answer {
                headers: collapsed,
                bytes: 1000,
                ..a.clone()
            },
            1,
            1000,
            None,
        );
        assert!(c.ok && c.collapsed && !c.miss && !c.hit);
        assert_eq!(c.origin_bytes, 0);
        let r = judge(&a, 0, 1000, Some(Retry::BeforeResponse));
        assert!(!r.ok && r.hit && r.decoded && !r.miss && !r.collapsed);
        assert_eq!(r.origin_bytes, 0);
        assert!(r.error.unwrap().contains("999 bytes"));
        let a = Answer {
            status: 502,
            headers: HeaderMap::new(),
            bytes: 0,
            wrong_bytes: 0,
            ttfb_us: 0,
            total_us: 0,
            arrivals: Vec::new(),
        };
        let r = judge(&a, 0, 10, None);
        assert!(!r.ok && r.error.unwrap().contains("502"));
    }

    /// A fake node on loopback answering every request for `/obj/ID?size=S` with the
    /// object's headers and then `mode`: "short" sends half the body and closes the
    /// connection, "wrong" sends the whole body with one byte flipped.
    async fn fake_node(mode: &'static str) -> SocketAddr {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = l.accept().await else {
                    return;
                };
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 1024];
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let line = String::from_utf8_lossy(&buf).to_string();
                    let path = line.split_whitespace().nth(1).unwrap().to_string();
                    let id: u64 = path[5..path.find('?').unwrap()].parse().unwrap();
                    let size: usize = path[path.find("size=").unwrap() + 5..].parse().unwrap();
                    let mut body = content::bytes(id, 0, size);
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-length: {size}\r\nx-cache: HIT-DISK\r\n\
                         x-ecdn-object: replicated\r\n\r\n"
                    );
                    let _ = s.write_all(head.as_bytes()).await;
                    if mode == "short" {
                        let _ = s.write_all(&body[..size / 2]).await;
                        return;
                    }
                    body[size / 3] ^= 0x55;
                    let _ = s.write_all(&body).await;
                });
            }
        });
        addr
    }

    /// The driver against real in-process nodes and an origin: every body verified, the
    /// requests spread round-robin, a node with nothing listening retried on the next one
    /// (before the response), a connection cut mid-body retried too, and a body with a wrong
    /// byte counted and failed, not retried.
    #[test]
    fn driver_verifies_bodies_and_retries_on_another_node() {
        use ecdn_node::node::{Node, NodeConfig};
        use ecdn_node::origin::{Origin, OriginConfig};
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let origin = Origin::start("127.0.0.1:0".parse().unwrap(), OriginConfig::default())
                .await
                .unwrap();
            let node = |_| async {
                Node::start(
                    "127.0.0.1:0".parse().unwrap(),
                    NodeConfig {
                        origin: format!("http://{}", origin.addr),
                        hoc_size: 8 << 20,
                        ..NodeConfig::default()
                    },
                )
                .await
                .unwrap()
            };
            let (a, b) = (node(0).await, node(1).await);
            // Nothing listens on `dead`: a port bound but not listening (connections are
            // refused), held for the whole test so that no listener started meanwhile, such
            // as the fake nodes below, can take it.
            let dead_socket = tokio::net::TcpSocket::new_v4().unwrap();
            dead_socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
            let dead = dead_socket.local_addr().unwrap();
            let short = fake_node("short").await;
            let wrong = fake_node("wrong").await;
            let sizes = [1000u64, 300 << 10, 5, 64 << 10];
            let requests: Vec<(u64, u64)> = (0..60)
                .map(|i| (i % 7, sizes[(i % 7) as usize % 4]))
                .collect();
            let kills = kills(
                &[KillSpec {
                    node: 1,
                    fraction: 0.5,
                }],
                3,
                60,
            )
            .unwrap();
            let killed = Arc::new(Mutex::new(Vec::new()));
            let log = killed.clone();
            let dispenser: SharedDispenser = Arc::new(Mutex::new(Dispenser::new(
                60,
                3,
                kills,
                Box::new(move |n| log.lock().unwrap().push(n)),
            )));
            let work = Arc::new(Work {
                requests: requests.clone(),
                nodes: vec![a.addr, dead, b.addr],
                admins: Vec::new(),
                dispenser,
                timeout: Duration::from_secs(10),
                idle: Duration::from_secs(10),
                arrivals: false,
                progress: indicatif::ProgressBar::hidden(),
                rebalancer: None,
                repairer: None,
                returner: None,
            });
            let records = run(work, 4).await.unwrap();
            assert_eq!(*killed.lock().unwrap(), vec![1]);
            assert_eq!(records.len(), 60);
            for (i, r) in records.iter().enumerate() {
                assert!(r.ok, "request {i}: {:?}", r.error);
                assert_eq!((r.bytes, r.wrong_bytes), (requests[i].1, 0));
                assert!(
                    r.miss || r.collapsed || r.hit,
                    "request {i} has no X-Cache tier"
                );
                // Before the kill, every third request went to the dead node and was retried
                // on node 2 (the next in the rotation); after it, none went there.
                if i < 30 && i % 3 == 1 {
                    assert_eq!((r.retry, r.node), (Some(Retry::BeforeResponse), 2), "{i}");
                } else {
                    assert_eq!(r.retry, None, "{i}");
                    assert_ne!(r.node, 1);
                }
            }
            // The first request of each object missed; the 7 objects' later requests hit,
            // but for one that came while its object was still being fetched
            // (`MISS-COLLAPSED`): each of the two nodes fetched each object at most once.
            let misses = records.iter().filter(|r| r.miss).count();
            assert!(misses >= 7, "{misses} misses");
            let fetched = origin.requests();
            assert!((7..=14).contains(&fetched), "{fetched} origin fetches");

            // A body cut mid-way (node 0) is retried on the next node; a body with a wrong
            // byte (node 2) is counted and failed, not retried.
            let dispenser: SharedDispenser = Arc::new(Mutex::new(Dispenser::new(
                3,
                3,
                Vec::new(),
                Box::new(|_| {}),
            )));
            let work = Arc::new(Work {
                requests: vec![(5, 100_000), (6, 100_000), (7, 100_000)],
                nodes: vec![short, a.addr, wrong],
                admins: Vec::new(),
                dispenser,
                timeout: Duration::from_secs(10),
                idle: Duration::from_secs(10),
                arrivals: false,
                progress: indicatif::ProgressBar::hidden(),
                rebalancer: None,
                repairer: None,
                returner: None,
            });
            let records = run(work, 1).await.unwrap();
            assert!(records[0].ok, "{:?}", records[0].error);
            assert_eq!(
                (records[0].retry, records[0].node),
                (Some(Retry::MidBody), 1)
            );
            assert!(records[1].ok && records[1].retry.is_none());
            let w = &records[2];
            assert!(!w.ok && w.retry.is_none());
            assert_eq!((w.node, w.bytes, w.wrong_bytes), (2, 100_000, 1));
            assert!(w.error.as_deref().unwrap().contains("1 wrong bytes"));
            a.stop().await.unwrap();
            b.stop().await.unwrap();
            origin.stop().await.unwrap();
        });
    }
}
