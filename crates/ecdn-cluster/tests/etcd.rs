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
use ecdn_cluster::{ClusterConfig, Control, CoordinatorOptions, WriteLoads};

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
    let start = spawn_etcd_control(cfg, id, loads.clone(), status.clone());
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
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
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
        let a =
            EtcdCoordinator::start_with_api(cfg.clone(), opts.clone(), listener(api())).unwrap();
        let mut nodes = available_nodes(&cfg, 5).await;
        let map = |n: &Option<TestNode>| n.as_ref().unwrap().control.map().current();
        assert!(a.status().leading);
        let b =
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

        // The leader stops: the other leads within 5 s (the lease is 2 s), from the stored
        // state — node 4 stays unavailable and the map is the same but for its epoch.
        a.stop();
        let took = until(5, "coordinator b leads", || b.status().leading).await;
        eprintln!("coordinator b leads {took:?} after a stopped");
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
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
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
