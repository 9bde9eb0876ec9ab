//! A rolling restart of a live cluster keeps what its nodes held (issue 45), with real
//! processes on loopback: an origin, the embedded coordinator and four nodes of a C2DN cluster
//! with K = 3, P = 1 (every bucket's pieces on all four nodes), each with its own disk file.
//!
//! An EC-Cache object (`PUT /_objects/...?k=3&r=1`) is stored and a coded 1 MiB object is
//! fetched through the cache once; then node 1 is restarted after a SIGTERM and node 3 after a
//! `kill -9`, one after the other, as a rolling upgrade or two crashes would. Afterwards the
//! EC-Cache object reads back byte for byte, its `stat` says every split is held, and the coded
//! object is a `HIT-DISK`: with two of the four nodes restarted and K = 3 chunks needed, at
//! least one chunk came from a restarted node's disk (the HOC is too small to hold the object,
//! so no decoded copy can answer instead). Before the fix a restarted node started its piece
//! policy empty: the object answered 502 and the coded object was a MISS.

mod common;

use std::thread::sleep;
use std::time::{Duration, Instant};

use common::{
    cluster_file, cluster_node, free_ports, node, origin_and_coordinator, request, until_status,
    NodeSpec, Proc,
};

const KEY: &str = "restart-test-cluster-key-0123456";
const CODED: &str = "/obj/7?size=1048576";

/// The bytes of the EC-Cache object.
fn object_bytes() -> Vec<u8> {
    (0..1_000_000u32)
        .map(|i| (i * 31 + i / 257) as u8)
        .collect()
}

#[test]
fn a_rolling_restart_keeps_every_piece() {
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name);
    let ports = free_ports(14);
    let (client, peer, admin) = (&ports[0..4], &ports[4..8], &ports[8..12]);
    let (origin, coordinator) = (ports[12], ports[13]);
    let file = cluster_file(
        dir.path(),
        &format!(
            "scheme = \"c2dn\"\nk = 3\np = 1\nkey = \"{KEY}\"\ncoordinator = \"127.0.0.1:{coordinator}\"\n\
         heartbeat_ms = 100\nbuckets = 20\n"
        ),
        client,
        peer,
    );
    let origin_url = format!("http://127.0.0.1:{origin}");
    let (_origin, _coord) = origin_and_coordinator(dir.path(), origin, &file);
    let spec = NodeSpec {
        dir: dir.path(),
        file: &file,
        origin: &origin_url,
        disk_size: "16MiB",
        hoc_size: "64KiB",
    };
    let start_node =
        |id: usize, run: usize| cluster_node(&spec, id, admin[id], &format!("node{id}.{run}.log"));
    let mut nodes: Vec<Option<Proc>> = (0..4).map(|id| Some(start_node(id, 0))).collect();
    let heard_from = |s: &serde_json::Value, i: usize| {
        node(s, i)["available"] == true && node(s, i)["heartbeats"].as_u64() > Some(0)
    };
    until_status(&file, 20, "four nodes available", |s| {
        (0..4).all(|i| heard_from(s, i))
    });

    // The EC-Cache object, and the coded object filled through the cache.
    let data = object_bytes();
    let put = request(client[0], "PUT", "/_objects/kept/one?k=3&r=1", &data).unwrap();
    assert_eq!(put.status, 201, "{}", String::from_utf8_lossy(&put.body));
    let reference = request(origin, "GET", CODED, &[]).unwrap().body;
    assert_eq!(reference.len(), 1 << 20);
    let first = request(client[0], "GET", CODED, &[]).unwrap();
    assert_eq!((first.status, first.header("x-cache")), (200, Some("MISS")));
    assert!(first.body == reference, "the MISS's bytes differ");
    // The pieces are written after the answer: wait until a read is served from them.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = request(client[2], "GET", CODED, &[]).unwrap();
        assert!(
            r.body == reference,
            "bytes differ ({:?})",
            r.header("x-cache")
        );
        if r.header("x-cache") == Some("HIT-DISK") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the coded object never became a HIT-DISK"
        );
        sleep(Duration::from_millis(50));
    }

    // The rolling restart: node 1 after a SIGTERM, then node 3 after a kill -9, each back
    // and heard from again before the next goes down.
    for (id, graceful) in [(1usize, true), (3, false)] {
        let p = nodes[id].take().unwrap();
        if graceful {
            p.terminate();
        } else {
            p.kill9();
        }
        until_status(&file, 20, "the node marked unavailable", |s| {
            node(s, id)["available"] == false
        });
        nodes[id] = Some(start_node(id, 1));
        until_status(&file, 20, "the node back", |s| heard_from(s, id));
        let log = std::fs::read_to_string(d(&format!("node{id}.1.log"))).unwrap_or_default();
        assert!(
            log.contains("pieces (") && log.contains("registered from the disk's index"),
            "node {id} registered no pieces at start: {log}"
        );
    }

    // Every node takes a map with all four available before the reads.
    sleep(Duration::from_millis(500));
    let got = request(client[2], "GET", "/_objects/kept/one", &[]).unwrap();
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert!(got.body == data, "the EC-Cache object's bytes differ");
    let stat = request(client[0], "GET", "/_objects/kept/one?stat", &[]).unwrap();
    let stat: serde_json::Value = serde_json::from_slice(&stat.body).unwrap();
    assert_eq!(
        stat["held"],
        serde_json::json!([true, true, true, true]),
        "{stat:#}"
    );
    for at in [0, 1, 3] {
        let r = request(client[at], "GET", CODED, &[]).unwrap();
        assert_eq!(
            (r.status, r.header("x-cache")),
            (200, Some("HIT-DISK")),
            "the coded object through node {at}"
        );
        assert!(r.body == reference, "the coded object's bytes differ");
    }
}
