//! The control plane on etcd, against real etcd processes on loopback (Debian's
//! `etcd-server`; `./test.sh` installs it): nodes' registrations and load reports, a map with
//! the etcd revision as its epoch, a node whose lease lapses marked unavailable, the leading
//! coordinator stopped and another leading from the stored state, the operator's API (found
//! through etcd, or sent on by a coordinator that does not lead) adding and draining nodes,
//! and etcd stopped and restarted under nodes that keep their map; and a leader whose etcd
//! member dies resuming its lease through another.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ecdn_cluster::coordinator::client::CoordinatorClient;
use ecdn_cluster::coordinator::etcd::EtcdCoordinator;
use ecdn_cluster::coordinator::{MemberOp, NewMember};
use ecdn_cluster::etcd::{spawn_etcd_control, EtcdStatus};
use ecdn_cluster::etcd_local::{LocalEtcd, NOT_INSTALLED};
use ecdn_cluster::map::MemberState;
use ecdn_cluster::objects::ObjectDirectory;
use ecdn_cluster::{ClusterConfig, Control, CoordinatorOptions, WriteLoads};
use ecdn_objects::meta::{ObjectMeta, ObjectName};

mod common;

fn cluster(etcd: &[String], prefix: &str) -> ClusterConfig {
    let endpoints: Vec<String> = etcd.iter().map(|e| format!("\"{e}\"")).collect();
    common::cluster(
        "0123456789abcdef-secret",
        &format!(
            "coordinator = \"127.0.0.1:1\"\nbuckets = 30\netcd = [{}]\n\
             etcd_prefix = \"{prefix}\"\netcd_lease_s = 2",
            endpoints.join(", ")
        ),
    )
}

/// `GET /_ecdn/status.json` of a coordinator's status page, which must answer `200`.
async fn status_json(page: std::net::SocketAddr) -> serde_json::Value {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(page).await.unwrap();
    s.write_all(b"GET /_ecdn/status.json HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut got))
        .await
        .expect("the page answers within 10 s")
        .unwrap();
    let at = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&got[..at]);
    assert!(
        head.starts_with("HTTP/1.1 200"),
        "{head}\n{}",
        String::from_utf8_lossy(&got[at..])
    );
    serde_json::from_slice(&got[at + 4..]).unwrap()
}

/// The tests' runtime: two worker threads, as the machine has two cores.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Waits (at most `secs`) until `f` holds.
async fn until(secs: u64, what: &str, f: impl Fn() -> bool) -> Duration {
    let t = Instant::now();
    while !f() {
        assert!(
            t.elapsed() < Duration::from_secs(secs),
            "not within {secs} s: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    t.elapsed()
}

struct TestNode {
    control: Control,
    loads: WriteLoads,
    status: Arc<EtcdStatus>,
}

async fn node(cfg: &ClusterConfig, id: usize) -> TestNode {
    let loads = WriteLoads::for_cluster(cfg);
    let status = Arc::new(EtcdStatus::default());
    let start = spawn_etcd_control(cfg, id, loads.clone(), status.clone(), None);
    let control = tokio::time::timeout(Duration::from_secs(20), start)
        .await
        .expect("a first map within 20 s")
        .unwrap();
    TestNode {
        control,
        loads,
        status,
    }
}

/// Nodes `0..n`, started, once node 0's map has them all available.
async fn available_nodes(cfg: &ClusterConfig, n: usize) -> Vec<Option<TestNode>> {
    let mut nodes = Vec::new();
    for id in 0..n {
        nodes.push(Some(node(cfg, id).await));
    }
    let first = nodes[0].as_ref().unwrap().control.map().clone();
    until(10, "all nodes registered and available", || {
        first.current().available.iter().all(|&a| a)
    })
    .await;
    nodes
}

#[test]
fn etcd_control_plane_survives_node_leader_and_etcd_failures() {
    let bin = LocalEtcd::find_binary().expect(NOT_INSTALLED);
    let dir = tempfile::tempdir().unwrap();
    let mut etcd = LocalEtcd::start(&bin, dir.path(), 1).unwrap();
    let cfg = cluster(&[etcd.url(0)], "/t1/");
    let rt = runtime();
    rt.block_on(async {
        let opts = CoordinatorOptions {
            start_grace: Duration::from_secs(3),
            ..CoordinatorOptions::default()
        };
        let api = || std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let listener = |l: std::net::TcpListener| {
            l.set_nonblocking(true).unwrap();
            tokio::net::TcpListener::from_std(l).unwrap()
        };
        let mut a =
            EtcdCoordinator::start_with_api(cfg.clone(), opts.clone(), listener(api())).unwrap();
        let mut nodes = available_nodes(&cfg, 5).await;
        let map = |n: &Option<TestNode>| n.as_ref().unwrap().control.map().current();
        assert!(a.status().leading);
        let mut b =
            EtcdCoordinator::start_with_api(cfg.clone(), opts.clone(), listener(api())).unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!b.status().leading, "two leaders");
        // The API: asked at the coordinator that does not lead, the client is sent on to the
        // leader; through etcd it finds the leader directly.
        let key = cfg.key.as_bytes();
        let at_b = CoordinatorClient::new(key, b.api_addr().unwrap());
        let s = at_b.status().await.unwrap();
        let a_addr = a.api_addr().unwrap().to_string();
        assert_eq!((s.leader.as_deref(), s.nodes.len()), (Some(&*a_addr), 5));
        let found = CoordinatorClient::for_cluster(&cfg).await.unwrap();
        assert_eq!(found.addr(), a.api_addr().unwrap());

        // Loads reach the leader (their totals are in etcd).
        nodes[1].as_ref().unwrap().loads.record_data(1 << 20);
        assert!(nodes[1]
            .as_ref()
            .unwrap()
            .loads
            .record_parity(7, 0, 300 << 10));
        until(5, "a load report", || {
            nodes[1]
                .as_ref()
                .unwrap()
                .status
                .load_puts
                .load(Ordering::Relaxed)
                > 0
        })
        .await;

        // A node stops (its lease lapses): unavailable on every node's map.
        let epoch0 = map(&nodes[0]).epoch;
        nodes[4].take().unwrap().control.stop();
        let took = until(10, "node 4 unavailable", || {
            let m = map(&nodes[0]);
            !m.available[4] && nodes[..4].iter().all(|n| map(n).epoch == m.epoch)
        })
        .await;
        eprintln!("node 4 unavailable on all nodes after {took:?}");
        let after_fail = map(&nodes[0]);
        assert!(after_fail.epoch > epoch0);

        // Every coordinator serves the status page: the leader its own state, the other what
        // etcd holds (read-only), naming the leader.
        let page_a = a.serve_admin(listener(api()), None).unwrap();
        let page_b = b.serve_admin(listener(api()), None).unwrap();
        let (pa, pb) = (status_json(page_a).await, status_json(page_b).await);
        assert_eq!(pa["role"]["mode"], "leader");
        assert_eq!(pb["role"]["mode"], "follower");
        for p in [&pa, &pb] {
            assert_eq!(p["role"]["leader"], a_addr.as_str());
            assert_eq!(p["status"]["epoch"], after_fail.epoch);
            let nodes = p["status"]["nodes"].as_array().unwrap();
            assert_eq!(nodes.len(), 5);
            assert_eq!(nodes[4]["available"], false);
            assert_eq!(nodes[0]["available"], true);
            assert_eq!(p["buckets"].as_array().unwrap().len(), 30);
        }

        // The leader stops: the other leads within 5 s (the lease is 2 s), from the stored
        // state — node 4 stays unavailable and the map is the same but for its epoch.
        a.stop();
        let took = until(5, "coordinator b leads", || b.status().leading).await;
        eprintln!("coordinator b leads {took:?} after a stopped");
        let pb = status_json(page_b).await;
        assert_eq!(pb["role"]["mode"], "leader");
        assert_eq!(pb["role"]["leader"], b.api_addr().unwrap().to_string());
        until(5, "b's first map", || {
            map(&nodes[0]).epoch > after_fail.epoch
        })
        .await;
        let m = map(&nodes[0]);
        assert!(!m.available[4]);
        let mut same = (*m).clone();
        same.epoch = after_fail.epoch;
        assert_eq!(
            same, *after_fail,
            "the new leader continued from the stored placement"
        );

        // The node returns: available again, through the new leader.
        nodes[4] = Some(node(&cfg, 4).await);
        until(10, "node 4 back on every node's map", || {
            let e = map(&nodes[0]).epoch;
            map(&nodes[0]).available[4] && nodes.iter().all(|n| map(n).epoch == e)
        })
        .await;

        // Membership through the new leader's API: a node added by the operator joins with
        // its first registration; a drained node leaves every map and stays out.
        let leader = CoordinatorClient::for_cluster(&cfg).await.unwrap();
        assert_eq!(leader.addr(), b.api_addr().unwrap());
        let added = leader
            .member(&MemberOp::Add(NewMember {
                client: "127.0.0.1:20005".parse().unwrap(),
                peer: "127.0.0.1:21005".parse().unwrap(),
                weight: 2.0,
            }))
            .await
            .unwrap();
        assert_eq!(added.node, 5);
        nodes.push(Some(node(&cfg, 5).await));
        until(10, "node 5 available on every node's map", || {
            let e = map(&nodes[0]).epoch;
            map(&nodes[0]).is_available(5) && nodes.iter().all(|n| map(n).epoch == e)
        })
        .await;
        assert_eq!(map(&nodes[5]).member(5).unwrap().weight, 2.0);
        let drained = leader.member(&MemberOp::Drain(1)).await.unwrap();
        until(10, "node 1 drained on every node's map", || {
            nodes
                .iter()
                .all(|n| map(n).epoch >= drained.epoch && !map(n).is_available(1))
        })
        .await;
        assert_eq!(
            map(&nodes[1]).member(1).unwrap().state,
            MemberState::Draining
        );
        let s = leader.status().await.unwrap();
        assert_eq!(
            (s.nodes[1].state.as_str(), s.nodes[1].data_buckets),
            ("draining", 0)
        );
        assert!(s.nodes[5].data_buckets > 0 && s.nodes[5].available);
        let refused = leader.member(&MemberOp::Drain(1)).await.unwrap_err();
        assert_eq!(
            refused.status,
            Some(hyper::StatusCode::CONFLICT),
            "{refused}"
        );

        // etcd stops: nodes keep serving with their map and say they lost etcd.
        let before = map(&nodes[0]).epoch;
        etcd.kill(0);
        until(15, "nodes notice etcd is gone", || {
            nodes
                .iter()
                .all(|n| !n.as_ref().unwrap().status.connected.load(Ordering::Relaxed))
        })
        .await;
        assert_eq!(map(&nodes[0]).epoch, before, "the map is kept");
        // etcd returns: nodes register again; a node stopping now is still handled.
        etcd.restart(0).unwrap();
        until(20, "nodes reconnected", || {
            nodes
                .iter()
                .all(|n| n.as_ref().unwrap().status.connected.load(Ordering::Relaxed))
        })
        .await;
        nodes[2].take().unwrap().control.stop();
        until(20, "node 2 unavailable after etcd's return", || {
            !map(&nodes[0]).available[2]
        })
        .await;
        assert!(
            nodes[0]
                .as_ref()
                .unwrap()
                .status
                .failures
                .load(Ordering::Relaxed)
                > 0
        );
        for n in nodes.into_iter().flatten() {
            n.control.stop();
        }
        b.stop();
    });
}

/// Three etcd members, killed and restarted one at a time: whichever member the leading
/// coordinator talks to dies, it resumes its lease through another and goes on leading (one
/// term all along), and it still acts: a node that stops afterwards is marked unavailable.
#[test]
fn the_leader_resumes_its_lease_when_its_etcd_member_dies() {
    let bin = LocalEtcd::find_binary().expect(NOT_INSTALLED);
    let dir = tempfile::tempdir().unwrap();
    let mut etcd = LocalEtcd::start(&bin, dir.path(), 3).unwrap();
    let cfg = cluster(&etcd.endpoints(), "/t3/");
    let rt = runtime();
    rt.block_on(async {
        let opts = CoordinatorOptions {
            start_grace: Duration::from_secs(3),
            ..CoordinatorOptions::default()
        };
        let a = EtcdCoordinator::start(cfg.clone(), opts, "a".into());
        let mut nodes = available_nodes(&cfg, 5).await;
        let map = |n: &Option<TestNode>| n.as_ref().unwrap().control.map().current();
        assert!(a.status().leading);
        for m in 0..3 {
            etcd.kill(m);
            tokio::time::sleep(Duration::from_secs(3)).await;
            let s = a.status();
            assert!(s.leading, "member {m} killed: {s:?}");
            etcd.restart(m).unwrap();
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let s = a.status();
        assert_eq!(s.terms, 1, "{s:?}");
        assert!(s.resumed >= 1, "its member died once at least: {s:?}");
        // Still acting as the leader: a node that stops is marked unavailable.
        nodes[4].take().unwrap().control.stop();
        until(10, "node 4 unavailable", || !map(&nodes[0]).available[4]).await;
        assert_eq!(a.status().terms, 1);
    });
    drop(etcd);
}

/// A node cut off from etcd (its session over, its registration lapsed) while its peers
/// still reach it is cut off from the control plane only: the leader keeps it in the map. Once
/// its peers cannot reach it either, it leaves. (With heartbeats alone it would leave with
/// its registration.)
#[test]
fn a_node_cut_off_from_etcd_but_reached_by_its_peers_stays_in_the_map() {
    use ecdn_cluster::health::observer::{Outcome, PeerObserver};
    let bin = LocalEtcd::find_binary().expect(NOT_INSTALLED);
    let dir = tempfile::tempdir().unwrap();
    let etcd = LocalEtcd::start(&bin, dir.path(), 1).unwrap();
    let cfg = cluster(&[etcd.url(0)], "/t-health/");
    let rt = runtime();
    rt.block_on(async {
        let opts = CoordinatorOptions {
            start_grace: Duration::from_secs(3),
            ..CoordinatorOptions::default()
        };
        let leader = EtcdCoordinator::start(cfg.clone(), opts, "h".into());
        let observers: Vec<Arc<PeerObserver>> = (0..5).map(|_| Arc::default()).collect();
        let mut controls = Vec::new();
        for (id, o) in observers.iter().enumerate() {
            let start = spawn_etcd_control(
                &cfg,
                id,
                WriteLoads::for_cluster(&cfg),
                Arc::new(EtcdStatus::default()),
                Some(o.clone()),
            );
            controls.push(Some(
                tokio::time::timeout(Duration::from_secs(20), start)
                    .await
                    .unwrap()
                    .unwrap(),
            ));
        }
        let map0 = controls[0].as_ref().unwrap().map().clone();
        until(10, "all nodes available", || {
            map0.current().available.iter().all(|&a| a)
        })
        .await;
        // Nodes 0-3 see node 4 answer, again and again.
        let peer4 = cfg.nodes[4].peer;
        let answering = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let seeing = {
            let (observers, answering) = (observers.clone(), answering.clone());
            tokio::spawn(async move {
                loop {
                    let outcome = if answering.load(Ordering::Relaxed) {
                        Outcome::Answered
                    } else {
                        Outcome::Failed
                    };
                    for o in &observers[..4] {
                        o.note(peer4, outcome, Instant::now());
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        // Node 4's session ends: its registration lapses with its lease (2 s).
        controls[4].take().unwrap().stop();
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(map0.current().available[4], "its peers reach it: kept");
        // Its peers lose it too: out.
        answering.store(false, Ordering::Relaxed);
        until(10, "node 4 unavailable", || !map0.current().available[4]).await;
        seeing.abort();
        assert!(leader.status().leading);
    });
    drop(etcd);
}

/// Issue 42's scale: 10,000 buckets and 500 servers. As uncompressed JSON the map alone is
/// beyond etcd's default request limit (1.5 MiB), so a leader writing it so could publish
/// nothing; stored compressed it fits, and an availability change goes as a diff a fraction of
/// the whole map's size, which a node applies (`crate::etcd_map`).
#[test]
fn maps_of_10000_buckets_and_500_servers_fit_etcd_whole_and_as_diffs() {
    use ecdn_cluster::etcd::{connect, get_prefix, Keys, Registration};
    use ecdn_cluster::etcd_map::{seal_map, MapFollower, DIFF_SHARE};
    use etcd_client::PutOptions;

    const SERVERS: usize = 500;
    /// etcd's default `--max-request-bytes`.
    const ETCD_LIMIT: usize = 1536 * 1024;
    let bin = LocalEtcd::find_binary().expect(NOT_INSTALLED);
    let dir = tempfile::tempdir().unwrap();
    let etcd = LocalEtcd::start(&bin, dir.path(), 1).unwrap();
    let mut text = format!(
        "scheme = \"c2dn\"\nkey = \"0123456789abcdef-secret\"\nheartbeat_ms = 100\n\
         coordinator = \"127.0.0.1:1\"\nbuckets = 10000\netcd = [\"{}\"]\n\
         etcd_prefix = \"/scale/\"\netcd_lease_s = 2\n",
        etcd.url(0)
    );
    for i in 0..SERVERS {
        text.push_str(&format!(
            "[[node]]\nid = {i}\nclient = \"127.0.{}.{}:8080\"\npeer = \"127.0.{}.{}:8081\"\n",
            1 + i / 200,
            1 + i % 200,
            1 + i / 200,
            1 + i % 200
        ));
    }
    let cfg = ClusterConfig::parse(&text).unwrap();
    let keys = Keys::new(&cfg);
    let key = ecdn_cluster::ClusterKey::new(cfg.key.as_bytes());
    let rt = runtime();
    rt.block_on(async {
        // The nodes' registrations, put by the test under one long lease (no node processes).
        let mut client = connect(&cfg.etcd).await.unwrap();
        let lease = client.lease_grant(120, None).await.unwrap().id();
        for n in &cfg.nodes {
            let reg = Registration {
                node: n.id,
                client: n.client.to_string(),
                peer: n.peer.to_string(),
            };
            client
                .put(
                    keys.node(n.id),
                    serde_json::to_vec(&reg).unwrap(),
                    Some(PutOptions::new().with_lease(lease)),
                )
                .await
                .unwrap();
        }
        let opts = CoordinatorOptions {
            start_grace: Duration::from_secs(30),
            ..CoordinatorOptions::default()
        };
        let leader = EtcdCoordinator::start(cfg.clone(), opts, "scale-leader".into());
        // A node's side of the control plane (node 0), following the maps.
        let node0 = node(&cfg, 0).await;
        let current = |c: &mut etcd_client::Client| {
            let (keys, key) = (keys.clone(), key.clone());
            let mut c = c.clone();
            async move {
                let (kvs, _) = get_prefix(&mut c, &keys.map()).await.unwrap();
                let sizes: Vec<(String, usize)> = kvs
                    .iter()
                    .map(|(k, v, _)| (String::from_utf8_lossy(k).into_owned(), v.len()))
                    .collect();
                let map = MapFollower::default()
                    .snapshot(&keys, &key, &kvs)
                    .unwrap()
                    .unwrap();
                (map, sizes)
            }
        };
        let (first, sizes) = current(&mut client).await;
        assert!(first.available.iter().all(|&a| a), "every node registered");
        assert_eq!((first.buckets, first.servers()), (10_000, SERVERS));
        let json = serde_json::to_vec(&first).unwrap().len();
        let whole = seal_map(&key, &first).len();
        let state = client
            .get(keys.state(), None)
            .await
            .unwrap()
            .kvs()
            .first()
            .unwrap()
            .value()
            .len();
        eprintln!(
            "10,000 buckets, {SERVERS} servers: the map as JSON {json} bytes, stored {whole} \
             bytes, the state stored {state} bytes; keys {sizes:?}"
        );
        assert!(
            json > ETCD_LIMIT,
            "uncompressed the map alone is over etcd's limit"
        );
        assert!(whole + state < ETCD_LIMIT / 4);

        // Node 7's registration goes: it is unavailable, and the new map goes as a diff.
        client.delete(keys.node(7), None).await.unwrap();
        until(20, "node 7 unavailable in etcd's map", || {
            node0.control.map().current().available.get(7) == Some(&false)
        })
        .await;
        let (after, sizes) = current(&mut client).await;
        assert!(!after.available[7]);
        let diff = sizes
            .iter()
            .find(|(k, _)| k.ends_with("map-diff"))
            .map(|s| s.1)
            .expect("the change went as a diff");
        eprintln!("node 7 unavailable: a diff of {diff} bytes (whole: {whole})");
        assert!(diff * DIFF_SHARE <= whole);
        // The node applied the diff: its map is the one etcd holds.
        assert_eq!(*node0.control.map().current(), after);
        assert!(leader.status().writes.diffs >= 1);
        drop(leader);
    });
}

/// A key rotation reaches what etcd holds: once the leader's key ring signs with the new key
/// (SIGHUP in its process), it writes the map whole again, sealed with that key, so a node that
/// knows only the new key (after the rotation's last step) can read it.
#[test]
fn the_leader_reseals_the_map_and_the_object_records_when_its_key_rotates() {
    const NEW: &str = "the next key of the etcd cluster";
    let bin = LocalEtcd::find_binary().expect(NOT_INSTALLED);
    let dir = tempfile::tempdir().unwrap();
    let etcd = LocalEtcd::start(&bin, dir.path(), 1).unwrap();
    let cfg = cluster(&[etcd.url(0)], "/rot/");
    // The cluster file after the rotation: only the new key.
    let endpoints = format!("\"{}\"", etcd.url(0));
    let after = common::cluster(
        NEW,
        &format!(
            "coordinator = \"127.0.0.1:1\"\nbuckets = 30\netcd = [{endpoints}]\n\
             etcd_prefix = \"/rot/\"\netcd_lease_s = 2"
        ),
    );
    let rt = runtime();
    rt.block_on(async {
        let leader = EtcdCoordinator::start(cfg.clone(), CoordinatorOptions::default(), "k".into());
        let t = Instant::now();
        while ecdn_cluster::plane::fetch_map(&cfg).await.is_err() {
            assert!(t.elapsed() < Duration::from_secs(10), "no first map");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let e = ecdn_cluster::plane::fetch_map(&after).await.unwrap_err();
        assert!(e.contains("not this cluster's"), "{e}");
        // An EC-Cache object record written with the old key.
        let objects = ObjectDirectory::for_cluster(&cfg);
        let name = ObjectName::parse("before/the-rotation").unwrap();
        let version = objects.begin(&name).await.unwrap();
        let record = ObjectMeta {
            name: name.clone(),
            version,
            size: 4096,
            k: 2,
            r: 1,
            splits: vec![0, 1, 2],
            stored: vec![true; 3],
            sha256: "0a".repeat(32),
            sub_chunk: 1024,
            crcs: (0..6).collect(),
            window_stripes: 0,
            digests: Vec::new(),
            s3: None,
        };
        objects.commit(&record, 5).await.unwrap();
        let reader = ObjectDirectory::for_cluster(&after);
        assert!(reader.get(&name, 5).await.is_err());
        // Step 2 of the rotation in the leader's process: it signs with the new key.
        cfg.cluster_key()
            .rotate(NEW.as_bytes(), &[cfg.key.as_bytes()]);
        let t = Instant::now();
        let map = loop {
            if let Ok(m) = ecdn_cluster::plane::fetch_map(&after).await {
                break m;
            }
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "the map was not sealed again with the new key"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(map.servers(), 5);
        assert!(leader.status().writes.whole_maps >= 2);
        // The record too opens with the new key alone.
        let t = Instant::now();
        while reader.get(&name, 5).await.ok() != Some(record.clone()) {
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "the object record was not sealed again with the new key"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        drop(leader);
    });
}
