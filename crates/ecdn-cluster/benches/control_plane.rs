//! The control plane's speed, embedded and on etcd (issue 11):
//!
//! 1. **Epoch propagation**: a node (of ten) stops and returns, 20 availability changes; for
//!    each, the time from the coordinator's decision (embedded: the map published; etcd: the
//!    leader decided, before its write) until every running node holds that map. p50 and max.
//! 2. **etcd traffic per node** at steady state (etcd mode): the bytes etcd's gRPC server
//!    received and sent (its `/metrics`) over 10 s with ten nodes registered, idle and with
//!    every node writing (load reports every heartbeat), divided by nodes and seconds.
//!
//! Run: `cargo bench -p ecdn-cluster --bench control_plane` (etcd mode needs Debian's
//! `etcd-server`; without it only the embedded numbers are printed).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ecdn_cluster::control::spawn_control;
use ecdn_cluster::coordinator::etcd::EtcdCoordinator;
use ecdn_cluster::etcd::{spawn_etcd_control, EtcdStatus};
use ecdn_cluster::etcd_local::LocalEtcd;
use ecdn_cluster::peer::PeerClient;
use ecdn_cluster::{
    ClusterConfig, ClusterKey, Control, Coordinator, CoordinatorOptions, WriteLoads,
};

const NODES: usize = 10;
const CHANGES: usize = 20;

fn cluster(coordinator: u16, etcd: &[String]) -> ClusterConfig {
    let etcd: Vec<String> = etcd.iter().map(|e| format!("\"{e}\"")).collect();
    let mut text = format!(
        "scheme = \"c2dn\"\nkey = \"0123456789abcdef-bench\"\n\
         coordinator = \"127.0.0.1:{coordinator}\"\nheartbeat_ms = 100\nbuckets = 100\n\
         etcd = [{}]\netcd_lease_s = 1\n",
        etcd.join(", ")
    );
    for i in 0..NODES {
        text.push_str(&format!(
            "[[node]]\nid = {i}\nclient = \"127.0.0.1:{}\"\npeer = \"127.0.0.1:{}\"\n",
            20000 + i,
            21000 + i
        ));
    }
    ClusterConfig::parse(&text).unwrap()
}

struct Node {
    control: Control,
    loads: WriteLoads,
}

async fn start_node(cfg: &ClusterConfig, id: usize) -> Node {
    let loads = WriteLoads::for_cluster(cfg);
    let control = if cfg.etcd.is_empty() {
        let peers = PeerClient::new(ClusterKey::new(cfg.key.as_bytes()));
        spawn_control(cfg, id, peers, loads.clone()).await
    } else {
        spawn_etcd_control(
            cfg,
            id,
            loads.clone(),
            Arc::new(EtcdStatus::default()),
            None,
        )
        .await
    }
    .unwrap();
    Node { control, loads }
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Stops and restarts node `NODES - 1` until `CHANGES` availability changes were seen;
/// `decided` gives the control plane's current (epoch, decision time).
async fn propagation(
    cfg: &ClusterConfig,
    nodes: &mut [Option<Node>],
    decided: &dyn Fn() -> (u64, Option<Instant>),
) -> Vec<f64> {
    let mut took = Vec::new();
    let last = NODES - 1;
    while took.len() < CHANGES {
        let (before, _) = decided();
        if let Some(n) = nodes[last].take() {
            n.control.stop();
        } else {
            nodes[last] = Some(start_node(cfg, last).await);
        }
        // The change's epoch, then every running node on it.
        let t = Instant::now();
        let (epoch, at) = loop {
            let (e, at) = decided();
            if e > before {
                break (e, at);
            }
            assert!(t.elapsed() < Duration::from_secs(20), "no change");
            tokio::time::sleep(Duration::from_micros(100)).await;
        };
        loop {
            let all = nodes
                .iter()
                .flatten()
                .all(|n| n.control.map().epoch() >= epoch);
            if all {
                break;
            }
            tokio::time::sleep(Duration::from_micros(100)).await;
        }
        if let Some(at) = at {
            took.push(at.elapsed().as_secs_f64() * 1000.0);
        }
    }
    took
}

fn report(mode: &str, mut took: Vec<f64>) {
    took.sort_by(f64::total_cmp);
    println!(
        "{mode}: availability change -> all {} running nodes on the new epoch, {} changes: \
         p50 {:.2} ms, max {:.2} ms",
        NODES - 1,
        took.len(),
        percentile(&took, 0.5),
        took[took.len() - 1]
    );
}

/// etcd's gRPC bytes received + sent so far (its Prometheus `/metrics`).
async fn etcd_grpc_bytes(url: &str) -> f64 {
    let addr = url.trim_start_matches("http://").to_string();
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    s.write_all(format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).await.unwrap();
    text.lines()
        .filter(|l| {
            l.starts_with("etcd_network_client_grpc_received_bytes_total")
                || l.starts_with("etcd_network_client_grpc_sent_bytes_total")
        })
        .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
        .sum()
}

async fn embedded() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let cfg = cluster(port, &[]);
    let opts = CoordinatorOptions {
        start_grace: Duration::from_secs(2),
        ..CoordinatorOptions::default()
    };
    let coord = Coordinator::start_on(cfg.clone(), listener, opts)
        .await
        .unwrap();
    let mut nodes = Vec::new();
    for id in 0..NODES {
        nodes.push(Some(start_node(&cfg, id).await));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let decided = || {
        let (e, at) = coord.published();
        (e, Some(at))
    };
    let took = propagation(&cfg, &mut nodes, &decided).await;
    report("embedded", took);
    coord.shutdown().await;
}

async fn etcd(bin: &std::path::Path, members: usize) {
    let dir = tempfile::tempdir().unwrap();
    let etcd = LocalEtcd::start(bin, dir.path(), members).unwrap();
    let cfg = cluster(1, &etcd.endpoints());
    let opts = CoordinatorOptions {
        start_grace: Duration::from_secs(2),
        ..CoordinatorOptions::default()
    };
    let coord = EtcdCoordinator::start(cfg.clone(), opts, "bench".into());
    let mut nodes = Vec::new();
    for id in 0..NODES {
        nodes.push(Some(start_node(&cfg, id).await));
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let decided = || {
        let s = coord.status();
        (s.epoch, s.decided_at)
    };
    let took = propagation(&cfg, &mut nodes, &decided).await;
    report(&format!("etcd ({members} member(s))"), took);

    // Steady state: idle, then every node writing (its load report changes every heartbeat).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let running = nodes.iter().flatten().count() as f64;
    for busy in [false, true] {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writers: Vec<_> = nodes
            .iter()
            .flatten()
            .filter(|_| busy)
            .map(|n| {
                let (loads, stop) = (n.loads.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut b = 0;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        loads.record_data(1 << 20);
                        loads.record_parity(b % 100, 0, 300 << 10);
                        b += 1;
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let secs = 10.0;
        let mut before = 0.0;
        for i in 0..members {
            before += etcd_grpc_bytes(&etcd.url(i)).await;
        }
        tokio::time::sleep(Duration::from_secs_f64(secs)).await;
        let mut after = 0.0;
        for i in 0..members {
            after += etcd_grpc_bytes(&etcd.url(i)).await;
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for w in writers {
            let _ = w.await;
        }
        println!(
            "etcd ({members} member(s)): steady state, {}: {:.0} bytes/s per node through etcd's \
             gRPC (received + sent, all members, the coordinator's watch included)",
            if busy { "every node writing" } else { "idle" },
            (after - before) / secs / running
        );
    }
    drop(coord);
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs it too (quickly skip then).
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        println!("control_plane: a benchmark of about two minutes; run it with cargo bench");
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(embedded());
    match LocalEtcd::find_binary() {
        Some(bin) => {
            rt.block_on(etcd(&bin, 1));
            rt.block_on(etcd(&bin, 3));
        }
        None => println!("etcd: not installed (Debian etcd-server); etcd mode not measured"),
    }
}
