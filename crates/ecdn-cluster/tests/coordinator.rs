//! The coordinator and the nodes' control tasks over loopback: failure and return, the
//! signature checks, the long poll and the shutdown. Every test binds port 0 and is bounded in
//! time.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ecdn_cluster::auth::{digest, fresh_nonce, unix_now_ms, ClusterKey, Recipient};
use ecdn_cluster::control::{spawn_control, Control, MapHandle, WriteLoads};
use ecdn_cluster::coordinator::{
    Coordinator, CoordinatorOptions, HeartbeatReply, RunningCoordinator, Status, HEARTBEAT_PATH,
    MAP_PATH, REBALANCE_PATH, STATUS_PATH,
};
use ecdn_cluster::peer::{read_body, PeerClient};
use ecdn_cluster::{BucketMap, ClusterConfig};
use ecdn_placement::pieces::{BucketLayout, Piece};
use http_body_util::Full;
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::net::TcpListener;

const KEY: &str = "0123456789abcdef-test-cluster-key";
const T: Duration = Duration::from_secs(3);

fn cluster_file(coordinator: SocketAddr, nodes: usize, heartbeat_ms: u64, missed: u32) -> String {
    let mut text = format!(
        "scheme = \"c2dn\"\nk = 3\np = 1\nbuckets = 100\nkey = \"{KEY}\"\n\
         coordinator = \"{coordinator}\"\nheartbeat_ms = {heartbeat_ms}\n\
         missed_heartbeats = {missed}\n"
    );
    for i in 0..nodes {
        // Nodes' own listeners are not used by these tests.
        text.push_str(&format!(
            "[[node]]\nid = {i}\nclient = \"127.0.0.1:{}\"\npeer = \"127.0.0.1:{}\"\n",
            1000 + i,
            2000 + i
        ));
    }
    text
}

async fn start(
    heartbeat_ms: u64,
    missed: u32,
    opts: CoordinatorOptions,
) -> (ClusterConfig, RunningCoordinator) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cfg = ClusterConfig::parse(&cluster_file(addr, 5, heartbeat_ms, missed)).unwrap();
    let coord = Coordinator::start_on(cfg.clone(), listener, opts)
        .await
        .unwrap();
    (cfg, coord)
}

fn client() -> PeerClient {
    PeerClient::new(ClusterKey::new(KEY.as_bytes()))
}

async fn get_json<T: serde::de::DeserializeOwned>(
    c: &PeerClient,
    addr: SocketAddr,
    path: &str,
) -> (StatusCode, Option<T>) {
    let resp = c
        .send(addr, Method::GET, path, Bytes::new(), &[], T)
        .await
        .unwrap();
    let status = resp.status();
    let body = read_body(resp.into_body(), 64 << 20).await.unwrap();
    (status, serde_json::from_slice(&body).ok())
}

async fn status(c: &PeerClient, addr: SocketAddr) -> Status {
    let (s, st) = get_json(c, addr, STATUS_PATH).await;
    assert_eq!(s, StatusCode::OK);
    st.unwrap()
}

/// Waits (polling every 5 ms, at most `limit`) until `f` holds; returns the time it took.
async fn until(limit: Duration, mut f: impl FnMut() -> bool) -> Option<Duration> {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if f() {
            return Some(t0.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    f().then(|| t0.elapsed())
}

fn names_server(map: &BucketMap, server: usize) -> bool {
    let (mut pieces, mut walk): (Vec<Piece>, _) = (Vec::new(), Vec::new());
    (0..map.buckets).any(|b| {
        [false, true].into_iter().any(|coded| {
            map.pieces(b, coded, &mut pieces, &mut walk);
            pieces.iter().any(|p| p.server == server)
        }) || map.data_servers(b).contains(&server)
            || map.parity_servers(b).contains(&server)
            || map.candidates(b).contains(&server)
    })
}

/// A simulated node: the real control tasks plus a writer that reports loads.
struct SimNode {
    control: Control,
    writer: tokio::task::JoinHandle<()>,
}

async fn sim_node(cfg: &ClusterConfig, id: usize) -> SimNode {
    let loads = WriteLoads::for_cluster(cfg);
    let control = tokio::time::timeout(T, spawn_control(cfg, id, client(), loads.clone()))
        .await
        .expect("the first map within 3 s")
        .unwrap();
    let writer = tokio::spawn(async move {
        let mut i = 0usize;
        loop {
            loads.record_data(1000 * (id as u64 + 1));
            loads.record_parity((i * 7 + id) % 100, 0, 500);
            i += 1;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    SimNode { control, writer }
}

impl SimNode {
    fn map(&self) -> &MapHandle {
        self.control.map()
    }

    fn stop(self) {
        self.writer.abort();
        self.control.stop();
    }
}

/// Five nodes heartbeat with loads; one stops and is marked unavailable within
/// (missed + 1) heartbeats, every map after that leaves it out and every other node sees that
/// map; it restarts and gets exactly its data buckets back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_node_is_remapped_and_returns_exactly() {
    let (hb, missed) = (100u64, 4u32);
    let (cfg, coord) = start(hb, missed, CoordinatorOptions::default()).await;
    let addr = coord.addr();
    let c = client();
    let mut nodes = Vec::new();
    for id in 0..5 {
        nodes.push(Some(sim_node(&cfg, id).await));
    }
    let first = coord.map();
    assert!(first.epoch >= 1);
    assert!(first.available.iter().all(|&a| a));
    assert!(names_server(&first, 2));
    for n in nodes.iter().flatten() {
        assert_eq!(n.map().epoch(), first.epoch);
    }
    // The map as served over HTTP is the coordinator's.
    let (s, served) = get_json::<BucketMap>(&c, addr, MAP_PATH).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(served.unwrap(), *first);

    // Heartbeats arrive and their loads are recorded.
    until(T, || coord.status().nodes.iter().all(|n| n.heartbeats >= 2))
        .await
        .expect("two heartbeats from every node");
    let st = status(&c, addr).await;
    assert!(st.nodes.iter().all(|n| n.available && n.data_load > 0));
    assert!(st.parity_load > 0);
    assert_eq!(st.availability_changes, 0);

    // Node 2 goes silent.
    nodes[2].take().unwrap().stop();
    let stopped = Instant::now();
    let took = until(T, || !coord.map().is_available(2))
        .await
        .expect("node 2 unavailable within 3 s");
    // The exact deadline is checked against a fake clock in the coordinator's unit tests; on a
    // loaded machine wall-clock timers only bound it loosely.
    let deadline = Duration::from_millis(hb * u64::from(missed));
    assert!(
        took + Duration::from_millis(hb) >= deadline,
        "marked unavailable after {took:?}, before its deadline {deadline:?}"
    );
    eprintln!(
        "node 2 marked unavailable {:?} after its heartbeats stopped",
        stopped.elapsed()
    );
    let down = coord.map();
    assert!(down.epoch > first.epoch);
    assert!(!names_server(&down, 2), "the map still names node 2");
    let moved = (0..first.buckets)
        .filter(|&b| first.data_servers(b) != down.data_servers(b))
        .count();
    let held = (0..first.buckets)
        .filter(|&b| first.data_servers(b).contains(&2))
        .count();
    assert!(
        held > 0 && moved == held,
        "{moved} buckets moved, node 2 held {held}"
    );
    for n in nodes.iter().flatten() {
        let e = tokio::time::timeout(T, n.map().wait_newer(down.epoch - 1))
            .await
            .expect("every node sees the new map");
        assert!(e >= down.epoch);
        assert!(!n.map().current().is_available(2));
    }
    let st = status(&c, addr).await;
    assert!(!st.nodes[2].available);
    let ev = st
        .recent_rebalances
        .iter()
        .find(|e| e.trigger == "node 2 unavailable")
        .expect("the failure is in the status");
    assert!(ev.moved_data == held && ev.epoch > first.epoch);

    // Node 2 returns: available again, its data buckets exactly as before.
    nodes[2] = Some(sim_node(&cfg, 2).await);
    until(T, || coord.map().is_available(2))
        .await
        .expect("node 2 available again within 3 s");
    let back = coord.map();
    assert!(back.epoch > down.epoch);
    for b in 0..back.buckets {
        assert_eq!(back.data_servers(b), first.data_servers(b), "bucket {b}");
    }
    for n in nodes.iter().flatten() {
        tokio::time::timeout(T, n.map().wait_newer(back.epoch - 1))
            .await
            .expect("every node sees the return");
        assert!(n.map().current().is_available(2));
    }
    let st = status(&c, addr).await;
    assert_eq!(st.availability_changes, 2, "{:?}", st.recent_rebalances);
    assert!(st.nodes.iter().all(|n| n.available));
    for n in nodes.into_iter().flatten() {
        n.stop();
    }
    coord.shutdown().await;
}

/// `METHOD /coord/rebalance`, signed by `c`.
async fn rebalance(
    c: &PeerClient,
    addr: SocketAddr,
    method: Method,
) -> hyper::Response<hyper::body::Incoming> {
    c.send(addr, method, REBALANCE_PATH, Bytes::new(), &[], T)
        .await
        .unwrap()
}

/// `POST /coord/rebalance` counts every load written before it (it waits for the nodes'
/// next heartbeats), rebalances, and every node takes the new map; a replication cluster has
/// no parity to rebalance (409).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requested_rebalance_counts_every_load_written_before_it() {
    let (cfg, coord) = start(100, 4, CoordinatorOptions::default()).await;
    let addr = coord.addr();
    let c = client();
    let mut nodes = Vec::new();
    for id in 0..5 {
        let loads = WriteLoads::for_cluster(&cfg);
        let control = tokio::time::timeout(T, spawn_control(&cfg, id, client(), loads.clone()))
            .await
            .expect("the first map within 3 s")
            .unwrap();
        nodes.push((control, loads));
    }
    let before = coord.map().epoch;
    // Loads written just before the request: they may not have been reported yet.
    for (id, (_, loads)) in nodes.iter().enumerate() {
        loads.record_data(10_000 * (id as u64 + 1));
        assert!(loads.record_parity(id * 13, 0, 4_000 + id as u64));
    }
    let resp = rebalance(&c, addr, Method::POST).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let body = read_body(resp.into_body(), 1 << 20).await.unwrap();
    let reply: HeartbeatReply = serde_json::from_slice(&body).unwrap();
    assert_eq!(reply.epoch, before + 1);
    // The rebalance consumed every load: none is left over for the next one (three more
    // heartbeat periods: a load it had missed would have arrived by now).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let st = status(&c, addr).await;
    assert_eq!(st.epoch, reply.epoch);
    assert_eq!(
        st.parity_load, 0,
        "parity loads arrived after the rebalance"
    );
    assert!(st.nodes.iter().all(|n| n.data_load == 0), "{:?}", st.nodes);
    let ev = st.recent_rebalances.last().unwrap();
    assert_eq!((ev.trigger.as_str(), ev.epoch), ("requested", reply.epoch));
    for (control, _) in &nodes {
        let e = tokio::time::timeout(T, control.map().wait_newer(before))
            .await
            .expect("every node sees the new map");
        assert_eq!(e, reply.epoch);
    }
    // Anything but a signed POST changes nothing.
    let resp = rebalance(&c, addr, Method::GET).await;
    assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);
    let other = PeerClient::new(ClusterKey::new(b"another-cluster-key-0123456789"));
    let resp = rebalance(&other, addr, Method::POST).await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(coord.map().epoch, reply.epoch);
    for (control, _) in nodes {
        control.stop();
    }
    coord.shutdown().await;

    // rep2: 409, nothing changes.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let text = cluster_file(addr, 5, 100, 4).replace("\"c2dn\"", "\"rep2\"");
    let coord = Coordinator::start_on(
        ClusterConfig::parse(&text).unwrap(),
        listener,
        CoordinatorOptions::default(),
    )
    .await
    .unwrap();
    let epoch = coord.map().epoch;
    let resp = rebalance(&c, addr, Method::POST).await;
    assert_eq!(resp.status(), StatusCode::CONFLICT);
    assert_eq!(coord.map().epoch, epoch);
    coord.shutdown().await;
}

type Raw = Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>;

fn raw() -> Raw {
    Client::builder(TokioExecutor::new()).build_http()
}

/// Sends a request with exactly these headers (no signing).
async fn send_raw(
    c: &Raw,
    addr: SocketAddr,
    method: Method,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> (StatusCode, String) {
    let mut req = Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    for (n, v) in headers {
        req = req.header(*n, v.as_str());
    }
    let req = req.body(Full::new(Bytes::copy_from_slice(body))).unwrap();
    let resp = tokio::time::timeout(T, c.request(req))
        .await
        .unwrap()
        .unwrap();
    let status = resp.status();
    let body = read_body(resp.into_body(), 1 << 20).await.unwrap();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// The headers of a request signed for `to` at `time` (UNIX ms) with a fresh nonce.
fn signed(
    key: &ClusterKey,
    method: &str,
    path: &str,
    to: SocketAddr,
    time: u64,
    body: &[u8],
) -> Vec<(&'static str, String)> {
    let to = Recipient { addr: to, epoch: 0 };
    key.sign_digest(method, path, to, time, fresh_nonce(), &digest(body))
        .headers()
        .to_vec()
}

/// Unsigned, wrongly signed, stale, tampered, misdirected, replayed heartbeats and those of
/// another signature version get 401; out-of-range and malformed ones 400; none of them
/// changes a load or an availability.
#[tokio::test]
async fn bad_heartbeats_are_refused_and_change_nothing() {
    // Long heartbeats: nothing expires during the test, so loads are only ever changed by
    // heartbeats.
    let (_cfg, coord) = start(10_000, 3, CoordinatorOptions::default()).await;
    let addr = coord.addr();
    let c = client();
    let key = ClusterKey::new(KEY.as_bytes());
    let good = br#"{"node": 1, "epoch": 0, "data_bytes": 1000, "parity": [[4, 0, 300]]}"#;
    // Taken once, as sent (and kept, as a listener on the path would keep it).
    let r = raw();
    let captured = signed(&key, "POST", HEARTBEAT_PATH, addr, unix_now_ms(), good);
    let (s, text) = send_raw(&r, addr, Method::POST, HEARTBEAT_PATH, &captured, good).await;
    assert_eq!(s, StatusCode::OK, "{text}");
    let reply: HeartbeatReply = serde_json::from_str(&text).unwrap();
    assert_eq!(reply.epoch, coord.map().epoch);
    let before = status(&c, addr).await;
    assert_eq!(before.nodes[1].data_load, 1000);
    assert_eq!(before.parity_load, 300);
    assert_eq!(before.heartbeats, 1);

    let now = unix_now_ms();
    let other = ClusterKey::new(b"another-key-of-another-cluster");
    let elsewhere: SocketAddr = "127.0.0.1:1".parse().unwrap();
    let evil = br#"{"node": 1, "epoch": 0, "data_bytes": 99999, "parity": [[4, 0, 99999]]}"#;
    // Version 1's headers: no version, the time in seconds (its MAC does not matter: the
    // version is refused first).
    let v1: Vec<(&str, String)> = signed(&key, "POST", HEARTBEAT_PATH, addr, now, evil)
        .into_iter()
        .filter(|(n, _)| ["x-ecdn-time", "x-ecdn-digest", "x-ecdn-signature"].contains(n))
        .map(|(n, v)| match n {
            "x-ecdn-time" => (n, (now / 1000).to_string()),
            _ => (n, v),
        })
        .collect();
    type Case<'a> = (&'a str, Vec<(&'a str, String)>, &'a [u8], &'a str);
    let unauthorized: Vec<Case> = vec![
        ("unsigned", vec![], evil, "missing"),
        (
            "wrong key",
            signed(&other, "POST", HEARTBEAT_PATH, addr, now, evil),
            evil,
            "bad signature",
        ),
        (
            "60 s old",
            signed(&key, "POST", HEARTBEAT_PATH, addr, now - 60_000, evil),
            evil,
            "stale",
        ),
        (
            "60 s ahead",
            signed(&key, "POST", HEARTBEAT_PATH, addr, now + 60_000, evil),
            evil,
            "stale",
        ),
        (
            "signed for another body",
            signed(&key, "POST", HEARTBEAT_PATH, addr, now, good),
            evil,
            "digest",
        ),
        (
            "signed for another path",
            signed(&key, "POST", STATUS_PATH, addr, now, evil),
            evil,
            "bad signature",
        ),
        (
            "signed for another process",
            signed(&key, "POST", HEARTBEAT_PATH, elsewhere, now, evil),
            evil,
            "not this process",
        ),
        ("signature version 1", v1, evil, "version 1"),
        ("replayed", captured, good, "replayed"),
    ];
    for (what, headers, body, reason) in unauthorized {
        let (s, text) = send_raw(&r, addr, Method::POST, HEARTBEAT_PATH, &headers, body).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{what}");
        assert!(text.contains(reason), "{what}: {text:?}");
    }
    // The map and the status need a signature too.
    for path in [MAP_PATH, STATUS_PATH] {
        let (s, _) = send_raw(&r, addr, Method::GET, path, &[], b"").await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{path}");
    }

    let bad_requests: [&[u8]; 6] = [
        br#"{"node": 1, "epoch": 0, "data_bytes": 5, "parity": [[100, 0, 1]]}"#,
        br#"{"node": 1, "epoch": 0, "data_bytes": 5, "parity": [[3, 1, 1]]}"#,
        br#"{"node": 5, "epoch": 0, "data_bytes": 5}"#,
        br#"{"node": 1, "epoch": 0, "data_bytes": -5}"#,
        br#"{"node": 1, "epoch": 0, "data_bytes": 5, "extra": 1}"#,
        b"{not json",
    ];
    for body in bad_requests {
        let resp = c
            .send(
                addr,
                Method::POST,
                HEARTBEAT_PATH,
                Bytes::from_static(body),
                &[],
                T,
            )
            .await
            .unwrap();
        let s = resp.status();
        let text = read_body(resp.into_body(), 4096).await.unwrap();
        assert_eq!(
            s,
            StatusCode::BAD_REQUEST,
            "{}: {}",
            String::from_utf8_lossy(body),
            String::from_utf8_lossy(&text)
        );
    }
    let after = status(&c, addr).await;
    let still = |s: &Status| {
        let mut n = s.nodes.clone();
        n.iter_mut().for_each(|n| n.ms_since_heartbeat = None);
        n
    };
    assert_eq!(
        still(&after),
        still(&before),
        "a refused heartbeat changed a node"
    );
    assert_eq!(after.parity_load, before.parity_load);
    assert_eq!((after.heartbeats, after.epoch), (1, before.epoch));
    assert_eq!(after.unauthorized, 11);
    assert_eq!(after.bad_requests, 6);
    // Unknown endpoints and methods.
    let resp = c
        .send(addr, Method::GET, "/coord/nothing", Bytes::new(), &[], T)
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let resp = c
        .send(addr, Method::GET, HEARTBEAT_PATH, Bytes::new(), &[], T)
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);
    coord.shutdown().await;
}

/// Nodes never heard from keep their start grace, then go; a long poll is answered by that
/// change, an up-to-date one by 204 after the long poll, and a stale one at once.
#[tokio::test]
async fn the_map_is_long_polled() {
    let opts = CoordinatorOptions {
        long_poll: Duration::from_millis(400),
        start_grace: Duration::from_millis(600),
        first_epoch: Some(1),
        state_file: None,
    };
    // Heartbeats alone decide here: with the health judge on, a coordinator that hears from
    // nobody suspects itself and keeps the map (`a_coordinator_cut_off_does_not_empty_the_map`).
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let text = cluster_file(listener.local_addr().unwrap(), 5, 100, 3);
    let cfg = ClusterConfig::parse(&format!("{text}\n[health]\nenabled = false\n")).unwrap();
    let coord = Coordinator::start_on(cfg, listener, opts).await.unwrap();
    let addr = coord.addr();
    let c = client();
    let t0 = Instant::now();
    // Nobody heartbeats: all five nodes expire at the end of the grace (600 ms, longer than
    // the 300 ms deadline).
    let (s, m) = get_json::<BucketMap>(&c, addr, &format!("{MAP_PATH}?after=1")).await;
    let waited = t0.elapsed();
    assert_eq!(s, StatusCode::NO_CONTENT, "after {waited:?}");
    assert!(m.is_none());
    assert!(waited >= Duration::from_millis(380), "{waited:?}");
    let (s, m) = get_json::<BucketMap>(&c, addr, &format!("{MAP_PATH}?after=1")).await;
    assert_eq!(s, StatusCode::OK);
    let m = m.unwrap();
    let waited = t0.elapsed();
    assert!(m.epoch > 1);
    assert!(
        waited >= Duration::from_millis(580) && waited < Duration::from_secs(2),
        "{waited:?}"
    );
    assert!(m.available.iter().any(|&a| !a));
    until(T, || coord.map().available.iter().all(|&a| !a))
        .await
        .unwrap();
    let e = coord.map().epoch;
    assert_eq!(e, 6);
    // Not newer: 204; older: at once; none: at once; nonsense: 400.
    let t1 = Instant::now();
    let (s, _) = get_json::<BucketMap>(&c, addr, &format!("{MAP_PATH}?after={e}")).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    assert!(t1.elapsed() >= Duration::from_millis(380));
    let t1 = Instant::now();
    let (s, m) = get_json::<BucketMap>(&c, addr, &format!("{MAP_PATH}?after={}", e - 1)).await;
    assert_eq!((s, m.unwrap().epoch), (StatusCode::OK, e));
    let (s, m) = get_json::<BucketMap>(&c, addr, MAP_PATH).await;
    assert_eq!((s, m.unwrap().epoch), (StatusCode::OK, e));
    // Answered at once, not after the 400 ms long poll (a loose wall-clock bound).
    assert!(
        t1.elapsed() < Duration::from_millis(390),
        "{:?}",
        t1.elapsed()
    );
    let (s, _) = get_json::<BucketMap>(&c, addr, &format!("{MAP_PATH}?after=soon")).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    coord.shutdown().await;
}

/// Shutdown answers a long poll in flight at once and closes the listener.
#[tokio::test]
async fn shutdown_ends_long_polls_and_closes_the_port() {
    let (_cfg, coord) = start(10_000, 3, CoordinatorOptions::default()).await;
    let addr = coord.addr();
    let e = coord.map().epoch;
    let c = client();
    let poll = tokio::spawn({
        let c = c.clone();
        async move {
            c.send(
                addr,
                Method::GET,
                &format!("{MAP_PATH}?after={e}"),
                Bytes::new(),
                &[],
                T,
            )
            .await
            .map(|r| r.status())
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t0 = Instant::now();
    coord.shutdown().await;
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    let answered = tokio::time::timeout(T, poll).await.unwrap().unwrap();
    assert_eq!(answered, Ok(StatusCode::SERVICE_UNAVAILABLE));
    let fresh = client();
    let e = fresh
        .send(addr, Method::GET, STATUS_PATH, Bytes::new(), &[], T)
        .await
        .unwrap_err();
    assert_eq!(e, ecdn_cluster::PeerError::Refused(addr));
}

/// A stand-in coordinator whose answers the test controls.
#[derive(Default)]
struct Fake {
    /// Sign map answers (else they come unsigned).
    sign_maps: bool,
    /// Answer heartbeats (else 503).
    answer_heartbeats: bool,
    data_bytes: u64,
    parity_bytes: u64,
    heartbeats: u64,
}

async fn fake_coordinator(
    listener: TcpListener,
    map: BucketMap,
    fake: std::sync::Arc<std::sync::Mutex<Fake>>,
) {
    use hyper::server::conn::http1;
    use hyper::service::service_fn;
    use hyper_util::rt::TokioIo;
    let key = ClusterKey::new(KEY.as_bytes());
    let map_json = Bytes::from(serde_json::to_vec(&map).unwrap());
    loop {
        let (stream, _) = listener.accept().await.unwrap();
        let (key, map_json, fake) = (key.clone(), map_json.clone(), fake.clone());
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                let (key, map_json, fake) = (key.clone(), map_json.clone(), fake.clone());
                async move {
                    let pq = req.uri().path_and_query().unwrap().as_str().to_string();
                    let (parts, body) = req.into_parts();
                    let v = ecdn_cluster::peer::verify_parts(&key, &parts, unix_now_ms()).unwrap();
                    let body = ecdn_cluster::peer::read_verified_body(body, 1 << 20, &v)
                        .await
                        .unwrap();
                    let mut f = fake.lock().unwrap();
                    let (status, out, sign) = if parts.uri.path() == HEARTBEAT_PATH {
                        if f.answer_heartbeats {
                            let hb: ecdn_cluster::coordinator::Heartbeat =
                                serde_json::from_slice(&body).unwrap();
                            f.heartbeats += 1;
                            f.data_bytes += hb.data_bytes;
                            f.parity_bytes += hb.parity.iter().map(|p| p.2).sum::<u64>();
                            (StatusCode::OK, Bytes::from_static(b"{\"epoch\": 7}"), true)
                        } else {
                            (StatusCode::SERVICE_UNAVAILABLE, Bytes::new(), false)
                        }
                    } else if pq.contains("after=") {
                        // Long poll: nothing newer.
                        drop(f);
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        (StatusCode::NO_CONTENT, Bytes::new(), false)
                    } else {
                        (StatusCode::OK, map_json.clone(), f.sign_maps)
                    };
                    let signature =
                        ecdn_cluster::peer::sign_response(&key, &pq, v.signature(), &out);
                    let mut resp = hyper::Response::builder()
                        .status(status)
                        .body(Full::new(out))
                        .unwrap();
                    if sign {
                        resp.headers_mut().extend(signature);
                    }
                    Ok::<_, std::convert::Infallible>(resp)
                }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

/// A node takes no map its coordinator did not sign, and a heartbeat that fails keeps its
/// loads for the next one: the coordinator gets every byte exactly once.
#[tokio::test]
async fn nodes_take_only_signed_maps_and_keep_unreported_loads() {
    use ecdn_placement::pieces::Scheme;
    use ecdn_placement::{Placement, PlacementConfig};
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cfg = ClusterConfig::parse(&cluster_file(addr, 5, 50, 3)).unwrap();
    let pl = Placement::new(
        &cfg.weights(),
        PlacementConfig {
            buckets: 100,
            k: 3,
            p: 1,
            seed: cfg.seed,
            ..PlacementConfig::default()
        },
    )
    .unwrap();
    let map = BucketMap::from_placement(7, Scheme::C2dn, 3, 1, &pl, None);
    let fake = std::sync::Arc::new(std::sync::Mutex::new(Fake::default()));
    let server = tokio::spawn(fake_coordinator(listener, map.clone(), fake.clone()));

    let loads = WriteLoads::for_cluster(&cfg);
    loads.record_data(1234);
    assert!(loads.record_parity(42, 0, 99));
    let starting = tokio::spawn({
        let (cfg, loads) = (cfg.clone(), loads.clone());
        async move { spawn_control(&cfg, 3, client(), loads).await.unwrap() }
    });
    // Unsigned maps: the node keeps asking and does not start.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!starting.is_finished(), "a node took an unsigned map");
    fake.lock().unwrap().sign_maps = true;
    let control = tokio::time::timeout(T, starting).await.unwrap().unwrap();
    assert_eq!(control.map().epoch(), 7);
    assert_eq!(*control.map().current(), map);
    // Heartbeats fail for a while (503): the node says it does not reach the coordinator;
    // then they are answered, and it does again.
    let status = control
        .coordinator_status()
        .expect("embedded mode has a status");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!status.reachable.load(Ordering::Relaxed));
    let failed = status.failures.load(Ordering::Relaxed);
    assert!(failed >= 2, "{failed} heartbeats failed");
    loads.record_data(1);
    fake.lock().unwrap().answer_heartbeats = true;
    until(T, || fake.lock().unwrap().data_bytes >= 1235)
        .await
        .expect("the loads arrive");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let f = fake.lock().unwrap();
    assert_eq!((f.data_bytes, f.parity_bytes), (1235, 99));
    assert!(f.heartbeats >= 2);
    drop(f);
    assert!(status.reachable.load(Ordering::Relaxed));
    control.stop();
    server.abort();
}

/// EC-Cache's object records over HTTP: a begun version is invisible, a committed one is one
/// lookup, the later of two writes wins, a removed one is gone, and an unsigned request is
/// refused and changes nothing.
#[tokio::test]
async fn object_records_are_visible_only_once_committed() {
    use ecdn_cluster::coordinator::client::CoordinatorClient;
    use ecdn_objects::meta::{ObjectMeta, ObjectName};
    let (_cfg, coord) = start(100, 3, CoordinatorOptions::default()).await;
    let c = CoordinatorClient::new(KEY.as_bytes(), coord.addr());
    let name = ObjectName::parse("datasets/train.bin").unwrap();
    let record = |version| ObjectMeta {
        name: name.clone(),
        version,
        size: 123,
        k: 2,
        r: 1,
        splits: vec![4, 1, 0],
        stored: vec![true, true, false],
        sha256: "f".repeat(64),
        sub_chunk: 32 << 10,
        crcs: vec![1, 2, 3],
        window_stripes: 0,
        digests: Vec::new(),
        s3: None,
    };
    let v1 = c.object_begin(&name).await.unwrap();
    let v2 = c.object_begin(&name).await.unwrap();
    assert!(v2 > v1);
    let e = c.object_get(&name).await.unwrap_err();
    assert_eq!(e.status, Some(StatusCode::NOT_FOUND), "{e}");
    assert_eq!(c.object_commit(&record(v2)).await.unwrap(), v2);
    let e = c.object_commit(&record(v1)).await.unwrap_err();
    assert_eq!(e.status, Some(StatusCode::CONFLICT), "{e}");
    assert_eq!(c.object_get(&name).await.unwrap(), record(v2));
    // Unsigned: refused, and the record stays.
    let unsigned = hyper::Request::post(format!(
        "http://{}/coord/objects/remove?name=datasets/train.bin",
        coord.addr()
    ))
    .body(Full::new(Bytes::new()))
    .unwrap();
    let resp = Client::builder(TokioExecutor::new())
        .build_http()
        .request(unsigned)
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(c.object_get(&name).await.unwrap().version, v2);
    // A record naming a server the cluster lacks is a 400.
    let v3 = c.object_begin(&name).await.unwrap();
    let mut bad = record(v3);
    bad.splits[0] = 9;
    let e = c.object_commit(&bad).await.unwrap_err();
    assert_eq!(e.status, Some(StatusCode::BAD_REQUEST), "{e}");
    c.object_abort(&name, v3).await.unwrap();
    assert_eq!(c.object_remove(&name).await.unwrap().version, v2);
    let e = c.object_get(&name).await.unwrap_err();
    assert_eq!(e.status, Some(StatusCode::NOT_FOUND), "{e}");
    coord.shutdown().await;
}

/// The members as `GET /coord/status` lists them: (id, client, peer, weight, state).
fn members_of(s: &Status) -> Vec<(usize, SocketAddr, SocketAddr, String, String)> {
    s.nodes
        .iter()
        .map(|n| {
            (
                n.id,
                n.client,
                n.peer,
                n.weight.to_string(),
                n.state.clone(),
            )
        })
        .collect()
}

/// The embedded coordinator keeps its state in a file: restarted after an add, a drain and a
/// drain undone, it has the same members (the added one, the drained one still draining, the
/// undrained one active), and its first map is newer than the last one before the restart. Started without the file, it has the
/// cluster file's members again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_coordinator_keeps_its_membership_from_its_state_file() {
    use ecdn_cluster::coordinator::client::CoordinatorClient;
    use ecdn_cluster::coordinator::{MemberOp, NewMember};
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.state.json");
    let with_file = || CoordinatorOptions {
        state_file: Some(file.clone()),
        ..CoordinatorOptions::default()
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cfg = ClusterConfig::parse(&cluster_file(addr, 5, 100, 4)).unwrap();
    let coord = Coordinator::start_on(cfg.clone(), listener, with_file())
        .await
        .unwrap();
    assert!(file.exists(), "the state is written at start");
    let c = CoordinatorClient::new(KEY.as_bytes(), addr);
    let added = NewMember {
        client: "127.0.0.1:1005".parse().unwrap(),
        peer: "127.0.0.1:2005".parse().unwrap(),
        weight: 2.0,
    };
    c.member(&MemberOp::Add(added)).await.unwrap();
    c.member(&MemberOp::Drain(1)).await.unwrap();
    // Undrain over the API: the added node drained and made active again; an active node
    // cannot be undrained.
    c.member(&MemberOp::Drain(5)).await.unwrap();
    c.member(&MemberOp::Undrain(5)).await.unwrap();
    let refused = c
        .member(&MemberOp::Undrain(3))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("only a draining node can be undrained"),
        "{refused}"
    );
    let before = c.status().await.unwrap();
    assert_eq!(before.nodes.len(), 6);
    assert_eq!(before.nodes[1].state, "draining");
    assert_eq!(before.nodes[5].state, "active");
    coord.shutdown().await;

    // Each restart listens on a port of its own, and is asked by a client of its own: the
    // old port may be taken by a connection of another test meanwhile, and the old client's
    // pooled connection is the stopped coordinator's.
    let restarted = |opts: CoordinatorOptions| async move {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cfg = ClusterConfig::parse(&cluster_file(addr, 5, 100, 4)).unwrap();
        let coord = Coordinator::start_on(cfg, listener, opts).await.unwrap();
        (coord, CoordinatorClient::new(KEY.as_bytes(), addr))
    };
    let (coord, c) = restarted(with_file()).await;
    let after = c.status().await.unwrap();
    assert_eq!(members_of(&after), members_of(&before));
    assert!(
        after.epoch > before.epoch,
        "{} after {}",
        after.epoch,
        before.epoch
    );
    coord.shutdown().await;

    // Without the state file: the cluster file's five members, all active.
    let (coord, c) = restarted(CoordinatorOptions::default()).await;
    let fresh = c.status().await.unwrap();
    assert_eq!(fresh.nodes.len(), 5);
    assert!(fresh.nodes.iter().all(|n| n.state == "active"));
    coord.shutdown().await;
}

/// A state file that is not a coordinator's state stops the start with an error naming it.
#[tokio::test]
async fn a_corrupt_state_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.state.json");
    std::fs::write(&file, b"{\"epoch\": 3, \"placem").unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cfg = ClusterConfig::parse(&cluster_file(addr, 5, 100, 4)).unwrap();
    let opts = CoordinatorOptions {
        state_file: Some(file.clone()),
        ..CoordinatorOptions::default()
    };
    let err = match Coordinator::start_on(cfg, listener, opts).await {
        Ok(_) => panic!("started over a corrupt state file"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("cluster.state.json") && err.contains("not a coordinator's state"),
        "{err}"
    );
}
