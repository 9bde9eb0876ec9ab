//! Membership changes of a live cluster under load, with real processes on loopback: an
//! origin, the embedded coordinator and five nodes; requests run throughout while the operator
//! adds a sixth node (`ecdn cluster add`, then `ecdn node --id 5` with no addresses: it reads
//! them from the map), drains node 1 (`ecdn cluster drain`: it exits by itself once its
//! requests are done) and removes it (`ecdn cluster remove`). No request may fail, and
//! `ecdn cluster status --json` must show the new shape. Prints the bytes each change moved.
//! Then EC-Cache's object API from the command line on the changed cluster (`ecdn object put
//! | stat | get | rm`).

mod common;

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::sleep;
use std::time::{Duration, Instant};

use common::{
    cli, cluster_file, cluster_node, free_ports, get, node, origin_and_coordinator, status,
    until_status, NodeSpec, Proc,
};

const KEY: &str = "membership-test-cluster-key-0123";

/// Every node's `bytes_written` (pieces stored) from its stats in a status report.
fn bytes_written(ports: &[u16]) -> Vec<u64> {
    ports
        .iter()
        .map(|&p| match get(p, "/_ecdn/stats") {
            Ok((200, body)) => {
                let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
                v["cluster"]["bytes_written"].as_u64().unwrap_or(0)
            }
            _ => 0,
        })
        .collect()
}

#[test]
fn add_and_drain_a_node_under_load_without_a_failed_request() {
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name);
    let ports = free_ports(20);
    let (client, peer) = (ports[0..6].to_vec(), ports[6..12].to_vec());
    // The admin listeners (stats), given on each node's command line: node 5 is added later,
    // so is not in the file.
    let admin = ports[14..20].to_vec();
    let origin = ports[12];
    let file = cluster_file(
        dir.path(),
        &format!(
            "scheme = \"c2dn\"\nkey = \"{KEY}\"\ncoordinator = \"127.0.0.1:{}\"\n\
         heartbeat_ms = 100\nbuckets = 50\n",
            ports[13]
        ),
        &client[..5],
        &peer[..5],
    );
    let origin_url = format!("http://127.0.0.1:{origin}");
    let (_origin, _coord) = origin_and_coordinator(dir.path(), origin, &file);
    let spec = NodeSpec {
        dir: dir.path(),
        file: &file,
        origin: &origin_url,
        disk_size: "16MiB",
        hoc_size: "1MiB",
    };
    let start_node = |id: usize| cluster_node(&spec, id, admin[id], &format!("node{id}.log"));
    let mut nodes: Vec<Proc> = (0..5).map(start_node).collect();
    // Available, and heard from: the coordinator counts a node available from its start
    // until a grace period passes, and a node heartbeats only once its listener is bound (a
    // load sent before that was refused once under CI).
    until_status(&file, 20, "five nodes available", |s| {
        (0..5)
            .all(|i| node(s, i)["available"] == true && node(s, i)["heartbeats"].as_u64() > Some(0))
    });

    // The load: two clients, round-robin over the nodes the "load balancer" lists; coded
    // (300 KB) and replicated (60 KB) objects, 40 of each, again and again.
    let lb = Arc::new(Mutex::new(vec![0usize, 1, 2, 3, 4]));
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let failures = Arc::new(Mutex::new(Vec::new()));
    let load: Vec<_> = (0..2)
        .map(|t| {
            let (lb, stop, ok, failed, failures) = (
                lb.clone(),
                stop.clone(),
                ok.clone(),
                failed.clone(),
                failures.clone(),
            );
            let client = client.clone();
            std::thread::spawn(move || {
                let mut i = t;
                while !stop.load(Ordering::Relaxed) {
                    let n = {
                        let lb = lb.lock().unwrap();
                        lb[i % lb.len()]
                    };
                    let o = i % 80;
                    let size = if o % 2 == 0 { 300_000 } else { 60_000 };
                    match get(client[n], &format!("/obj/{o}?size={size}")) {
                        Ok((200, body)) if body.len() == size => {
                            ok.fetch_add(1, Ordering::Relaxed);
                        }
                        other => {
                            failed.fetch_add(1, Ordering::Relaxed);
                            eprintln!("{:?}: a request failed", Instant::now());
                            let what = other.map(|(s, b)| (s, b.len()));
                            failures
                                .lock()
                                .unwrap()
                                .push(format!("node {n} obj {o}: {what:?}"));
                        }
                    }
                    i += 2;
                }
            })
        })
        .collect();
    sleep(Duration::from_secs(2));

    // Add node 5 (weight 2) and start it: it reads its addresses from the map.
    let before_add = bytes_written(&admin);
    eprintln!("{:?}: adding node 5", Instant::now());
    let out = cli(&[
        "add",
        "--cluster",
        &file,
        "--client",
        &format!("127.0.0.1:{}", client[5]),
        "--peer",
        &format!("127.0.0.1:{}", peer[5]),
        "--weight",
        "2",
    ]);
    assert!(out.contains("node 5 added"), "{out}");
    // The cluster file agrees with the cluster: node 5 is listed now, with its addresses.
    assert!(out.contains("lists node 5 now"), "{out}");
    let listed = ecdn_cluster::ClusterConfig::load(std::path::Path::new(&file)).unwrap();
    assert_eq!(listed.nodes.len(), 6);
    assert_eq!(listed.nodes[5].peer.port(), peer[5]);
    let t_add = Instant::now();
    nodes.push(start_node(5));
    until_status(&file, 20, "node 5 available", |s| {
        node(s, 5)["available"] == true && node(s, 5)["data_buckets"].as_u64() > Some(0)
    });
    eprintln!(
        "node 5 available {:?} after `ecdn cluster add`",
        t_add.elapsed()
    );
    lb.lock().unwrap().push(5);
    sleep(Duration::from_secs(2));
    let after_add = bytes_written(&admin);

    // Drain node 1: the load balancer stops sending it clients (its health check fails), it
    // finishes what it has and exits by itself.
    eprintln!("{:?}: draining node 1", Instant::now());
    let out = cli(&["drain", "--cluster", &file, "1"]);
    assert!(out.contains("node 1 draining"), "{out}");
    lb.lock().unwrap().retain(|&n| n != 1);
    let exit = nodes[1].wait_exit(Duration::from_secs(15));
    assert!(exit.success(), "the drained node exited with {exit}");
    sleep(Duration::from_secs(1));
    let after_drain = bytes_written(&admin);
    let out = cli(&["remove", "--cluster", &file, "1"]);
    assert!(out.contains("node 1 removed"), "{out}");
    sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    for l in load {
        l.join().unwrap();
    }

    let s = status(&file);
    assert_eq!(node(&s, 1)["state"], "removed");
    assert_eq!(node(&s, 1)["data_buckets"], 0);
    assert_eq!(node(&s, 5)["state"], "active");
    let table = cli(&["status", "--cluster", &file]);
    assert!(
        table.contains("REMOVED") && table.contains("write imbalance"),
        "{table}"
    );
    let (ok, failed) = (ok.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    let moved =
        |a: &[u64], b: &[u64]| -> u64 { a.iter().zip(b).map(|(x, y)| y.saturating_sub(*x)).sum() };
    eprintln!(
        "{ok} requests answered, {failed} failed; pieces written while node 5 joined: {} bytes \
         ({} to node 5); while node 1 drained: {} bytes",
        moved(&before_add, &after_add),
        after_add[5],
        moved(&after_add[..], &after_drain[..]),
    );
    if failed > 0 {
        for name in ["node0.log", "node1.log", "node5.log", "coord.log"] {
            let log = std::fs::read_to_string(d(name)).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            eprintln!(
                "--- {name}:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
    }
    assert_eq!(failed, 0, "failed requests: {:?}", failures.lock().unwrap());
    assert!(ok > 100, "only {ok} requests in the run");

    // The object API from the command line, through the added node.
    let object = d("object.bin");
    let data: Vec<u8> = (0..500_000u32).map(|i| (i * 7 + i / 13) as u8).collect();
    std::fs::write(&object, &data).unwrap();
    let node5 = format!("127.0.0.1:{}", client[5]);
    let object_cli = |args: &[&str]| -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_ecdn"))
            .arg("object")
            .args(args)
            .output()
            .unwrap()
    };
    let put = object_cli(&[
        "put",
        "--node",
        &node5,
        "data/one",
        object.to_str().unwrap(),
        "--k",
        "3",
        "--r",
        "1",
    ]);
    assert!(
        put.status.success(),
        "{}",
        String::from_utf8_lossy(&put.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&put.stdout).unwrap();
    assert_eq!((meta["k"].as_u64(), meta["r"].as_u64()), (Some(3), Some(1)));
    // Node 1 was removed: no split is on it.
    assert!(meta["splits"].as_array().unwrap().iter().all(|s| s != 1));
    let back = d("back.bin");
    let node0 = format!("127.0.0.1:{}", client[0]);
    let get = object_cli(&[
        "get",
        "--node",
        &node0,
        "data/one",
        "-o",
        back.to_str().unwrap(),
    ]);
    assert!(
        get.status.success(),
        "{}",
        String::from_utf8_lossy(&get.stderr)
    );
    assert_eq!(std::fs::read(&back).unwrap(), data);
    let stat = object_cli(&["stat", "--node", &node0, "data/one"]);
    let stat: serde_json::Value = serde_json::from_slice(&stat.stdout).unwrap();
    assert_eq!(stat["size"], 500_000);
    assert!(object_cli(&["rm", "--node", &node0, "data/one"])
        .status
        .success());
    let gone = object_cli(&["stat", "--node", &node0, "data/one"]);
    assert!(!gone.status.success());
    assert!(String::from_utf8_lossy(&gone.stderr).contains("no object"));
}
