//! EC-Cache's object records in both directories — the embedded coordinator and etcd (a real
//! etcd member on loopback; `./test.sh` installs it) — with the same semantics: nothing begun is
//! readable, the later of two writes stays, a removed record is gone, a record not sealed with
//! the cluster key is refused; the sequence purges are numbered by increases with the versions;
//! a listing is the committed names of a prefix, in order, from a point, a page at a time.

use std::time::Duration;

use ecdn_cluster::coordinator::{Coordinator, CoordinatorOptions};
use ecdn_cluster::etcd_local::{LocalEtcd, NOT_INSTALLED};
use ecdn_cluster::objects::{DirectoryError, ObjectDirectory};
use ecdn_cluster::ClusterConfig;
use ecdn_objects::meta::{MetaError, ObjectMeta, ObjectName};

mod common;

fn cluster(coordinator: std::net::SocketAddr, etcd: Option<&str>, key: &str) -> ClusterConfig {
    let etcd = etcd.map_or(String::new(), |e| format!("etcd = [\"{e}\"]"));
    common::cluster(key, &format!("coordinator = \"{coordinator}\"\n{etcd}"))
}

fn record(name: &ObjectName, version: u64) -> ObjectMeta {
    ObjectMeta {
        name: name.clone(),
        version,
        size: 4096,
        k: 2,
        r: 2,
        splits: vec![1, 4, 0, 2],
        stored: vec![true, true, true, false],
        sha256: "0a".repeat(32),
        sub_chunk: 1024,
        crcs: (0..8).collect(),
        window_stripes: 0,
        digests: Vec::new(),
        s3: None,
    }
}

async fn semantics(dir: &ObjectDirectory) {
    let name = ObjectName::parse("builds/app-1.2.tar").unwrap();
    let v1 = dir.begin(&name).await.unwrap();
    let v2 = dir.begin(&name).await.unwrap();
    assert!(v2 > v1);
    assert!(matches!(
        dir.get(&name, 5).await,
        Err(DirectoryError::Meta(MetaError::NotFound(_)))
    ));
    dir.commit(&record(&name, v2), 5).await.unwrap();
    assert!(matches!(
        dir.commit(&record(&name, v1), 5).await,
        Err(DirectoryError::Meta(MetaError::Stale { .. }))
    ));
    assert_eq!(dir.get(&name, 5).await.unwrap(), record(&name, v2));
    // An update: one more parity split on server 3; refused for another version, or for a
    // change to the first k + r splits.
    let mut more = record(&name, v2);
    more.splits.push(3);
    more.stored.push(true);
    more.crcs.extend([77, 78]);
    dir.update(&more, 5).await.unwrap();
    assert_eq!(dir.get(&name, 5).await.unwrap(), more);
    let mut stale = more.clone();
    stale.version = v1;
    assert!(matches!(
        dir.update(&stale, 5).await,
        Err(DirectoryError::Meta(MetaError::Stale { .. }))
    ));
    let mut changed = more.clone();
    changed.crcs[0] = 12345;
    assert!(dir.update(&changed, 5).await.is_err());
    assert_eq!(dir.get(&name, 5).await.unwrap(), more);
    dir.update(&record(&name, v2), 5).await.unwrap();
    assert_eq!(dir.get(&name, 5).await.unwrap(), record(&name, v2));
    // A record naming a server the cluster lacks is refused before it is sent, and when read
    // by a node of a smaller cluster.
    let mut bad = record(&name, v2 + 1);
    bad.splits[0] = 7;
    assert!(dir.commit(&bad, 5).await.is_err());
    assert!(dir.get(&name, 4).await.is_err());
    let v3 = dir.begin(&name).await.unwrap();
    dir.abort(&name, v3).await.unwrap();
    // The sequence purges are numbered by: increasing, above every version handed out, and
    // the versions after it above it (one sequence).
    let s1 = dir.sequence().await.unwrap();
    let s2 = dir.sequence().await.unwrap();
    assert!(v3 < s1 && s1 < s2, "{v3} {s1} {s2}");
    let v4 = dir.begin(&name).await.unwrap();
    assert!(v4 > s2);
    dir.abort(&name, v4).await.unwrap();
    assert_eq!(dir.remove(&name).await.unwrap().version, v2);
    assert!(matches!(
        dir.get(&name, 5).await,
        Err(DirectoryError::Meta(MetaError::NotFound(_)))
    ));
    assert!(dir.remove(&name).await.is_err());
    assert!(matches!(
        dir.update(&record(&name, v2), 5).await,
        Err(DirectoryError::Meta(MetaError::NotFound(_)))
    ));
    listings(dir).await;
}

/// Listings: names under a prefix, in order, after a point, at most a limit; begun writes and
/// other prefixes left out.
async fn listings(dir: &ObjectDirectory) {
    let names = [
        "s3/b1/61",
        "s3/b1/6162",
        "s3/b1/62",
        "s3/b10/61",
        "s3/b2/61",
        "t/1",
    ];
    for n in names {
        let name = ObjectName::parse(n).unwrap();
        let v = dir.begin(&name).await.unwrap();
        dir.commit(&record(&name, v), 5).await.unwrap();
    }
    dir.begin(&ObjectName::parse("s3/b1/63").unwrap())
        .await
        .unwrap();
    let list = |prefix: &'static str, after: Option<&'static str>, limit: usize| async move {
        dir.list(prefix, after, limit)
            .await
            .unwrap()
            .into_iter()
            .map(|l| l.name.to_string())
            .collect::<Vec<String>>()
    };
    assert_eq!(
        list("s3/b1/", None, 100).await,
        ["s3/b1/61", "s3/b1/6162", "s3/b1/62"]
    );
    assert_eq!(
        list("s3/b1/", Some("s3/b1/61"), 100).await,
        ["s3/b1/6162", "s3/b1/62"]
    );
    assert_eq!(list("s3/b1/", Some("s3/b1/61"), 1).await, ["s3/b1/6162"]);
    assert_eq!(
        list("s3/b1/", Some("s3/b1/62"), 100).await,
        Vec::<String>::new()
    );
    assert_eq!(list("s3/b1", None, 100).await.len(), 4);
    assert_eq!(list("s3/", Some("a"), 100).await.len(), 5);
    assert_eq!(list("u/", None, 100).await, Vec::<String>::new());
    let page = dir.list("t/", None, 10).await.unwrap();
    assert_eq!(
        (page[0].size, page[0].sha256.as_str()),
        (4096, "0a".repeat(32).as_str())
    );
    for n in names {
        dir.remove(&ObjectName::parse(n).unwrap()).await.unwrap();
    }
    assert_eq!(list("", None, 100).await, Vec::<String>::new());
}

#[test]
fn records_behave_alike_at_the_coordinator_and_in_etcd() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let cfg = cluster(
            listener.local_addr().unwrap(),
            None,
            "objects-test-key-0123456789",
        );
        let coord = Coordinator::start_on(cfg.clone(), listener, CoordinatorOptions::default())
            .await
            .unwrap();
        semantics(&ObjectDirectory::for_cluster(&cfg)).await;
        coord.shutdown().await;
    });
    let bin = LocalEtcd::find_binary().expect(NOT_INSTALLED);
    let dir = tempfile::tempdir().unwrap();
    let etcd = LocalEtcd::start(&bin, dir.path(), 1).unwrap();
    let url = etcd.url(0);
    rt.block_on(async {
        let addr = "127.0.0.1:1".parse().unwrap();
        let cfg = cluster(addr, Some(&url), "objects-test-key-0123456789");
        let objects = ObjectDirectory::for_cluster(&cfg);
        tokio::time::timeout(Duration::from_secs(30), semantics(&objects))
            .await
            .expect("within 30 s");
        // A record sealed with another key is not this cluster's.
        let other = ObjectDirectory::for_cluster(&cluster(
            addr,
            Some(&url),
            "another-key-0123456789abcdef",
        ));
        let name = ObjectName::parse("x").unwrap();
        let v = other.begin(&name).await.unwrap();
        other.commit(&record(&name, v), 5).await.unwrap();
        let e = objects.get(&name, 5).await.unwrap_err().to_string();
        assert!(e.contains("not this cluster's"), "{e}");
    });
    drop(etcd);
}
