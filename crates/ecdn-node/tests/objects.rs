//! EC-Cache's object API (`/_objects/<name>`) on an in-process cluster of 6 nodes: byte-exact
//! round trips for random sizes and (k, r) through any node, ranges, a streamed (chunked) write
//! read back across several windows, a lost split replaced by another stored one, extra
//! parities added and removed (`?units=N`), reads with r nodes stopped, a read with fewer than
//! k splits reachable failing clearly, a write cut off midway never readable, deletes removing
//! the record and the splits (also for a node holding the record in its cache), and an
//! unsigned split write refused; the coordinator re-spending the parity budget from measured
//! reads; an HTTP store and an S3 store (written through) under the cache; then the same API
//! with the records and the control plane in etcd.

use std::net::SocketAddr;

use bytes::Bytes;
use ecdn_cluster::objects::ObjectDirectory;
use ecdn_objects::meta::{ObjectMeta, ObjectName};
use tokio::io::AsyncWriteExt;

#[path = "common/cluster.rs"]
mod harness;
use harness::{free_ports, try_start_nodes, TestCluster, KEY};

mod common;
use common::Reply;

async fn send(addr: SocketAddr, method: &str, uri: &str, body: Vec<u8>) -> Reply {
    common::send_body(addr, method, uri, &[], Bytes::from(body)).await
}

fn content(seed: u64, size: usize) -> Vec<u8> {
    let mut rng = ecdn_trace::Rng::new(seed);
    (0..size).map(|_| rng.next_u64() as u8).collect()
}

/// Removes the split of `meta`'s object that the node at peer address `peer` holds (a signed
/// peer `DELETE`), as an eviction the record does not know of would.
async fn purge_split(peer: SocketAddr, meta: &ObjectMeta) {
    let key = format!("_objects/{}@{}", meta.name, meta.version);
    let peers =
        ecdn_cluster::peer::PeerClient::new(ecdn_cluster::auth::ClusterKey::new(KEY.as_bytes()));
    let has = ecdn_cluster::wire::has_path(&key);
    let purged = peers.send(
        peer,
        hyper::Method::DELETE,
        &has,
        Bytes::new(),
        &[],
        std::time::Duration::from_secs(5),
    );
    assert_eq!(purged.await.unwrap().status(), 200);
}

/// Writes `name` again with `meta`'s code; the new record.
async fn rewrite(addr: SocketAddr, name: &str, data: &[u8], meta: &ObjectMeta) -> ObjectMeta {
    let uri = format!("/_objects/{name}?k={}&r={}", meta.k, meta.r);
    let put = send(addr, "PUT", &uri, data.to_vec()).await;
    assert_eq!(put.status, 201);
    record(&put)
}

fn record(r: &Reply) -> ObjectMeta {
    serde_json::from_slice(&r.body)
        .unwrap_or_else(|e| panic!("{e}: {} {}", r.status, String::from_utf8_lossy(&r.body)))
}

/// A `?stat` answer: the record, and per split whether its server holds it now.
fn stat_of(r: &Reply) -> (ObjectMeta, Vec<Option<bool>>) {
    let mut v: serde_json::Value = serde_json::from_slice(&r.body)
        .unwrap_or_else(|e| panic!("{e}: {} {}", r.status, String::from_utf8_lossy(&r.body)));
    let o = v.as_object_mut().unwrap();
    let held: Vec<Option<bool>> = serde_json::from_value(o.remove("held").unwrap()).unwrap();
    let readable = o.remove("readable").unwrap();
    assert_eq!(
        readable,
        held.iter().filter(|h| **h == Some(true)).count(),
        "readable counts the splits held"
    );
    (serde_json::from_value(v).unwrap(), held)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_round_trip_survive_r_stopped_nodes_and_are_never_half_written() {
    let mut c = TestCluster::start(6, "c2dn", 3, 1).await;
    // Random sizes and codes, through any node; read back through another.
    let mut rng = ecdn_trace::Rng::new(42);
    let mut stored = Vec::new();
    for (i, (k, r)) in [(1, 1), (2, 1), (3, 2), (4, 2), (5, 1), (2, 3)]
        .into_iter()
        .enumerate()
    {
        let size = 1 + rng.below(300_000) as usize;
        let data = content(i as u64, size);
        let name = format!("set/{i}.bin");
        let put = send(
            c.client(i % 6),
            "PUT",
            &format!("/_objects/{name}?k={k}&r={r}"),
            data.clone(),
        )
        .await;
        assert_eq!(put.status, 201, "{}", String::from_utf8_lossy(&put.body));
        let meta = record(&put);
        assert_eq!((meta.k, meta.r, meta.size as usize), (k, r, size));
        assert_eq!(meta.splits.len(), k + r);
        assert!(meta.stored.iter().all(|&s| s), "every node is up");
        let got = send(
            c.client((i + 1) % 6),
            "GET",
            &format!("/_objects/{name}"),
            Vec::new(),
        )
        .await;
        assert_eq!(got.status, 200);
        assert_eq!(got.body, data, "object {name}");
        let used = got.headers["x-ecdn-splits"]
            .to_str()
            .unwrap()
            .split(',')
            .count();
        assert_eq!(used, k);
        stored.push((name, data, meta));
    }
    // Defaults: 1 MiB and more coded with k = 10 capped by the cluster (6 nodes: k = 5, r = 1).
    let big = content(99, 1 << 20);
    let put = send(c.client(0), "PUT", "/_objects/big", big.clone()).await;
    let meta = record(&put);
    assert_eq!((meta.k, meta.r), (5, 1));
    // HEAD and stat.
    let head = send(c.client(3), "HEAD", "/_objects/big", Vec::new()).await;
    assert_eq!(head.status, 200);
    assert_eq!(
        head.headers["content-length"],
        (1u32 << 20).to_string().as_str()
    );
    assert_eq!(head.headers["x-ecdn-k"], "5");
    let stat = send(c.client(3), "GET", "/_objects/big?stat", Vec::new()).await;
    let (stat, held) = stat_of(&stat);
    assert_eq!(stat, meta);
    assert_eq!(held, vec![Some(true); 6], "every split is held");
    // Δ: the default 1, a given one, and `auto` (no link cap: no backlog, so the most, 2; of
    // the 6 splits, k + 2 = 7 asks all 6).
    for (query, delta) in [("", "1"), ("?delta=0", "0"), ("?delta=auto", "2")] {
        let got = send(
            c.client(2),
            "GET",
            &format!("/_objects/big{query}"),
            Vec::new(),
        )
        .await;
        assert_eq!(got.status, 200);
        assert_eq!(got.body, big);
        assert_eq!(got.headers["x-ecdn-delta"], delta, "{query}");
    }
    // Ranges: only the stripes they cover are read, every sub-chunk checked against the
    // record's CRCs.
    let reader = c.client(2);
    let range = |r: &'static str| async move {
        let h = [("range", r)];
        common::send_body(reader, "GET", "/_objects/big", &h, Bytes::new()).await
    };
    let got = range("bytes=1000-2999").await;
    assert_eq!(got.status, 206);
    assert_eq!(got.headers["content-range"], "bytes 1000-2999/1048576");
    assert_eq!(got.body, &big[1000..3000]);
    let got = range("bytes=-100").await;
    assert_eq!((got.status, &got.body[..]), (206, &big[(1 << 20) - 100..]));
    let got = range("bytes=0-9,700000-700009").await;
    assert_eq!(got.status, 206);
    let kind = got.headers["content-type"].to_str().unwrap();
    assert!(kind.starts_with("multipart/byteranges"), "{kind}");
    assert!(got.body.windows(10).any(|w| w == &big[..10]));
    assert!(got.body.windows(10).any(|w| w == &big[700000..700010]));
    assert_eq!(range("bytes=2000000-").await.status, 416);
    // If-Range: the ETag is the SHA-256; a stale one gets the whole object.
    let etag = head.headers["etag"].to_str().unwrap().to_string();
    for (tag, status) in [(etag.as_str(), 206), ("\"0000\"", 200)] {
        let h = [("range", "bytes=5-9"), ("if-range", tag)];
        let got = common::send_body(c.client(1), "GET", "/_objects/big", &h, Bytes::new()).await;
        assert_eq!(got.status, status, "{tag}");
    }

    // Streamed in and out: a chunked body without a length (coded by default once past
    // 1 MiB), read back in several windows (1.7 MiB splits, windows of 1 MiB), whole and by a
    // range across a window's edge.
    let long = content(5, 3_400_000 + 17);
    {
        let mut s = tokio::net::TcpStream::connect(c.client(4)).await.unwrap();
        s.write_all(b"PUT /_objects/long?k=2 HTTP/1.1\r\nhost: t\r\nconnection: close\r\ntransfer-encoding: chunked\r\n\r\n")
            .await
            .unwrap();
        for part in long.chunks(100_000) {
            s.write_all(format!("{:x}\r\n", part.len()).as_bytes())
                .await
                .unwrap();
            s.write_all(part).await.unwrap();
            s.write_all(b"\r\n").await.unwrap();
        }
        s.write_all(b"0\r\n\r\n").await.unwrap();
        let mut answer = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut s, &mut answer)
            .await
            .unwrap();
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    }
    let got = send(c.client(5), "GET", "/_objects/long", Vec::new()).await;
    assert_eq!(got.status, 200);
    assert!(got.body == long, "the streamed object reads back exactly");
    let across = [("range", "bytes=2097000-2099999")];
    let got = common::send_body(c.client(3), "GET", "/_objects/long", &across, Bytes::new()).await;
    assert_eq!((got.status, &got.body[..]), (206, &long[2097000..2100000]));

    // Bad requests.
    assert_eq!(
        send(c.client(0), "GET", "/_objects/nope", Vec::new())
            .await
            .status,
        404
    );
    assert_eq!(
        send(c.client(0), "PUT", "/_objects/x?k=6&r=2", vec![1; 10])
            .await
            .status,
        400
    );
    assert_eq!(
        send(c.client(0), "PUT", "/_objects/a%20b", vec![1; 10])
            .await
            .status,
        400
    );
    // POST only re-spends the budget (`?units=N`); other methods are not allowed.
    let post = send(c.client(0), "POST", "/_objects/x", vec![1; 10]).await;
    assert_eq!(post.status, 400);
    let patch = send(c.client(0), "PATCH", "/_objects/x", vec![1; 10]).await;
    assert_eq!(patch.status, 405);

    // A write cut off midway: nothing readable.
    {
        let mut s = tokio::net::TcpStream::connect(c.client(2)).await.unwrap();
        s.write_all(
            b"PUT /_objects/cut HTTP/1.1\r\nhost: objects.test\r\ncontent-length: 100000\r\n\r\n",
        )
        .await
        .unwrap();
        s.write_all(&[7u8; 40_000]).await.unwrap();
        drop(s);
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert_eq!(
            send(c.client(2), "GET", "/_objects/cut", Vec::new())
                .await
                .status,
            404
        );
    }

    // A split gone from its node while the map still has the node: reads that ask it read
    // another stored split instead (Δ = 0 asks exactly k, so some reads ask the lost one).
    {
        let (name, data, meta) = &stored[2];
        purge_split(c.peer(meta.splits[0]), meta).await;
        for _ in 0..12 {
            let got = send(
                c.client(3),
                "GET",
                &format!("/_objects/{name}?delta=0"),
                Vec::new(),
            )
            .await;
            assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
            assert_eq!(&got.body, data);
            assert!(!got.headers["x-ecdn-splits"]
                .to_str()
                .unwrap()
                .split(',')
                .any(|i| i == "0"));
        }
        // Put it back for what follows (a new version, all splits stored).
        stored[2].2 = rewrite(c.client(0), name, data, meta).await;
    }

    // The budget re-spent on object 1 (k = 2, r = 1 on 3 of the 6 nodes): 5 splits, the two
    // new parities on two of the other nodes. With the first 3 splits purged, reads decode
    // from the new parities alone; shrunk back to 3, the object has no readable splits left.
    {
        let (name, data, meta) = &stored[1];
        let grown = send(
            c.client(1),
            "POST",
            &format!("/_objects/{name}?units=5"),
            Vec::new(),
        )
        .await;
        assert_eq!(
            grown.status,
            200,
            "{}",
            String::from_utf8_lossy(&grown.body)
        );
        let grown = record(&grown);
        assert_eq!((grown.k, grown.r, grown.splits.len()), (2, 1, 5));
        assert_eq!(grown.splits[..3], meta.splits[..]);
        assert!(grown.stored.iter().all(|&s| s));
        for &server in &meta.splits {
            purge_split(c.peer(server), meta).await;
        }
        for _ in 0..4 {
            let got = send(c.client(1), "GET", &format!("/_objects/{name}"), Vec::new()).await;
            assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
            assert_eq!(&got.body, data);
            assert_eq!(got.headers["x-ecdn-splits"], "3,4");
        }
        // Below k + r: refused; the same units: unchanged.
        let units = |n: usize| format!("/_objects/{name}?units={n}");
        let low = send(c.client(1), "POST", &units(2), Vec::new()).await;
        assert_eq!(low.status, 400);
        let same = send(c.client(1), "POST", &units(5), Vec::new()).await;
        assert_eq!(record(&same), grown);
        let shrunk = send(
            c.client(1),
            "POST",
            &format!("/_objects/{name}?units=3"),
            Vec::new(),
        )
        .await;
        assert_eq!(record(&shrunk).splits, meta.splits);
        let got = send(c.client(1), "GET", &format!("/_objects/{name}"), Vec::new()).await;
        assert_eq!(got.status, 502, "the splits left were purged");
        // Written again for what follows.
        stored[1].2 = rewrite(c.client(0), name, data, meta).await;
    }

    // r nodes stopped (not node 0, which is asked): every object is still read exactly.
    // Object 2 has k = 3, r = 2: stop two of its split servers (other than node 0).
    let (name, data, meta) = &stored[2];
    let down: Vec<usize> = meta
        .splits
        .iter()
        .copied()
        .filter(|&s| s != 0)
        .take(2)
        .collect();
    for &d in &down {
        c.stop(d).await;
    }
    let mut want = vec![true; 6];
    for &d in &down {
        want[d] = false;
    }
    c.wait_available(&want).await;
    // `stat` tells what is there now: the stopped servers' splits unknown, the others held.
    let stat = send(
        c.client(0),
        "GET",
        &format!("/_objects/{name}?stat"),
        Vec::new(),
    )
    .await;
    let (_, held) = stat_of(&stat);
    for (i, s) in meta.splits.iter().enumerate() {
        let want = if down.contains(s) { None } else { Some(true) };
        assert_eq!(held[i], want, "split {i} on node {s}");
    }
    let got = send(c.client(0), "GET", &format!("/_objects/{name}"), Vec::new()).await;
    assert_eq!(got.status, 200);
    assert_eq!(&got.body, data);
    // Object 0 (k = 1, r = 1) with both copies down, if they were: a clear 502.
    for (name, data, meta) in &stored {
        let reachable = meta.splits.iter().filter(|s| !down.contains(s)).count();
        let got = send(c.client(0), "GET", &format!("/_objects/{name}"), Vec::new()).await;
        if reachable >= meta.k {
            assert_eq!((got.status, &got.body), (200, data), "{name}");
        } else {
            assert_eq!(got.status, 502, "{name}");
            let why = String::from_utf8_lossy(&got.body);
            assert!(why.contains("decoding needs"), "{why}");
        }
    }

    // An unsigned write of a split to a node's peer port: refused, nothing stored.
    let path = ecdn_cluster::wire::piece_path(
        ecdn_cluster::wire::PieceName::Chunk(0),
        "_objects/forged@1",
        None,
    );
    let forged = send(c.peer(0), "PUT", &path, vec![0; 100]).await;
    assert_eq!(forged.status, 401);

    // The client crate, against node 0: the same API.
    let client = ecdn_client::ObjectClient::new(c.client(0));
    let data = Bytes::from(content(7, 77_777));
    let code = ecdn_client::Code { k: 2, r: 1 };
    let meta = client
        .put("via/client", data.clone(), Some(code))
        .await
        .unwrap();
    let stat = client.stat("via/client").await.unwrap();
    assert_eq!(stat.record, meta);
    // Every split's server runs and holds it.
    assert_eq!(stat.held, vec![Some(true); 3]);
    assert_eq!(client.get("via/client").await.unwrap(), data);
    // One more parity on the one running node without a split (4 of 6 run).
    let grown = client.set_units("via/client", 4).await.unwrap();
    assert_eq!((grown.splits.len(), grown.r), (4, 1));
    assert_eq!(client.get("via/client").await.unwrap(), data);
    client.delete("via/client").await.unwrap();
    assert!(matches!(
        client.get("via/client").await,
        Err(ecdn_client::ClientError::NotFound(_))
    ));

    // Delete: the record first, then the splits. Another running node has the record cached
    // (it read the object just now): its read fails on the removed splits, asks the directory
    // again, and answers 404 too.
    let other = (1..6).find(|n| !down.contains(n)).unwrap();
    assert_eq!(
        send(c.client(other), "HEAD", "/_objects/big", Vec::new())
            .await
            .status,
        200
    );
    let del = send(c.client(0), "DELETE", "/_objects/big", Vec::new()).await;
    assert_eq!(del.status, 200);
    for node in [0, other] {
        let got = send(c.client(node), "GET", "/_objects/big", Vec::new()).await;
        assert_eq!(got.status, 404, "node {node}");
    }
    let dir = ObjectDirectory::for_cluster(&c.cfg);
    assert!(dir
        .get(&ObjectName::parse("big").unwrap(), 6)
        .await
        .is_err());
    c.stop_all().await;
}

/// The parity budget re-spent from measured reads: the coordinator gives the object the nodes
/// report reads of the extra parities the budget pays for, and leaves the unread ones alone;
/// under `object_scheme = "selective-replication"` an object is written as one copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_budget_follows_measured_reads() {
    // 4 objects of 2 data + 1 parity splits: their parities take 50% of their size, a budget
    // of 75% pays for 2 more splits (25% each).
    let extra = "object_budget = 0.75\nobject_budget_every_s = 0.5\n";
    let c = TestCluster::start_with(6, "c2dn", 3, 1, extra).await;
    let size = 200_000;
    for i in 0..4 {
        let put = send(
            c.client(i),
            "PUT",
            &format!("/_objects/b{i}?k=2&r=1"),
            content(i as u64, size),
        )
        .await;
        assert_eq!(put.status, 201);
    }
    let hot = content(2, size);
    for i in 0..30 {
        let got = send(c.client(i % 6), "GET", "/_objects/b2", Vec::new()).await;
        assert_eq!(got.body, hot);
    }
    let splits = |name: &'static str| {
        let addr = c.client(5);
        async move {
            let stat = send(addr, "GET", &format!("/_objects/{name}?stat"), Vec::new()).await;
            stat_of(&stat).0.splits.len()
        }
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while splits("b2").await != 5 {
        assert!(
            std::time::Instant::now() < deadline,
            "b2 never got its 2 extra parities"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    for cold in ["b0", "b1", "b3"] {
        assert_eq!(splits(cold).await, 3, "{cold}");
    }
    // Read back exactly, from the new splits too (any 2 of 5).
    for i in 0..6 {
        let got = send(c.client(i), "GET", "/_objects/b2?delta=3", Vec::new()).await;
        assert_eq!(got.body, hot);
    }
    assert!(c.coordinator.status().object_budget_changes >= 1);
    // Through the nodes' peer listeners, signed (issue 65), not their client ports.
    let mut respends = 0;
    for i in 0..6 {
        let stats = send(c.admin(i), "GET", "/_ecdn/stats", Vec::new()).await;
        let v: serde_json::Value = serde_json::from_slice(&stats.body).unwrap();
        respends += v["cluster"]["budget_respends"].as_u64().unwrap();
    }
    assert!(respends >= 1, "no re-spend reached a peer listener");
    c.stop_all().await;

    let sr = "object_scheme = \"selective-replication\"\n";
    let c = TestCluster::start_with(4, "c2dn", 3, 1, sr).await;
    let put = send(c.client(0), "PUT", "/_objects/one", content(9, 3 << 20)).await;
    let meta = record(&put);
    assert_eq!((meta.k, meta.r, meta.splits.len()), (1, 0, 1));
    c.stop_all().await;
}

/// A split on a server out of the map is restored: the coordinator's budget plan gives the
/// object one more split, on an available server that held none (late binding keeps its
/// spare), and once the server is back in the map the object loses that split again and keeps
/// the ones it was written with; it reads back exactly all along.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_out_of_the_map_is_restored_and_dropped_when_its_server_is_back() {
    // 2 data + 1 parity: the parity takes 50% of the size, a budget of 60% pays for no more.
    let extra = "object_budget = 0.6\nobject_budget_every_s = 0.3\n";
    let mut c = TestCluster::start_with(6, "c2dn", 3, 1, extra).await;
    let data = content(7, 300_000);
    let put = send(c.client(0), "PUT", "/_objects/lost?k=2&r=1", data.clone()).await;
    assert_eq!(put.status, 201);
    let written = record(&put).splits;
    assert_eq!(written.len(), 3);
    let out = written[0];
    let asker = c.client((0..6).find(|i| !written.contains(i)).unwrap());
    let splits = || async move {
        let stat = send(asker, "GET", "/_objects/lost?stat", Vec::new()).await;
        stat_of(&stat).0.splits
    };
    let wait_for = |what: &'static str, done: fn(&[usize], &[usize], usize) -> bool| {
        let written = written.clone();
        async move {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            loop {
                let now = splits().await;
                if done(&now, &written, out) {
                    return now;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "{what}: splits {now:?}"
                );
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    };
    let read_back = || async {
        let got = send(asker, "GET", "/_objects/lost", Vec::new()).await;
        assert_eq!(got.status, 200);
        assert!(got.body == data, "the object read back differs");
    };
    c.stop(out).await;
    let mut want = vec![true; 6];
    want[out] = false;
    c.wait_available(&want).await;
    wait_for("restored", |now, written, out| {
        now.len() == 4 && now[..3] == *written && !written.contains(&now[3]) && now[3] != out
    })
    .await;
    read_back().await;
    c.restart(out).await;
    c.wait_available(&[true; 6]).await;
    wait_for("dropped", |now, written, _| now == written).await;
    read_back().await;
    c.stop_all().await;
}

/// A store under the cache: a read with fewer than k splits readable is answered from the
/// backend when its copy is the object the record describes (ranges too), and is a clear `502`
/// when it is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_fall_back_to_the_backend_store() {
    use http_body_util::Full;
    let (good, bad) = (content(1, 50_000), content(2, 50_000));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = (Bytes::from(good.clone()), Bytes::from(content(3, 50_000)));
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let served = served.clone();
            let service = hyper::service::service_fn(move |req: hyper::Request<_>| {
                let body = match req.uri().path() {
                    "/objects/good" => Some(served.0.clone()),
                    "/objects/bad" => Some(served.1.clone()),
                    _ => None,
                };
                let mut resp = hyper::Response::new(Full::new(body.clone().unwrap_or_default()));
                if body.is_none() {
                    *resp.status_mut() = hyper::StatusCode::NOT_FOUND;
                }
                async move { Ok::<_, std::convert::Infallible>(resp) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(io, service));
        }
    });
    let extra = format!("object_backend = \"http://127.0.0.1:{port}/objects/\"\n");
    let c = TestCluster::start_with(4, "c2dn", 3, 1, &extra).await;
    for (name, data) in [("good", &good), ("bad", &bad)] {
        // One copy, then lost.
        let meta = record(
            &send(
                c.client(0),
                "PUT",
                &format!("/_objects/{name}?k=1&r=0"),
                data.clone(),
            )
            .await,
        );
        purge_split(c.peer(meta.splits[0]), &meta).await;
    }
    let got = send(c.client(1), "GET", "/_objects/good", Vec::new()).await;
    assert_eq!((got.status, &got.body), (200, &good));
    assert_eq!(got.headers["x-ecdn-source"], "backend");
    let h = [("range", "bytes=10-19")];
    let got = common::send_body(c.client(2), "GET", "/_objects/good", &h, Bytes::new()).await;
    assert_eq!((got.status, &got.body[..]), (206, &good[10..20]));
    let got = send(c.client(1), "GET", "/_objects/bad", Vec::new()).await;
    assert_eq!(got.status, 502);
    let why = String::from_utf8_lossy(&got.body);
    assert!(why.contains("not the object the record describes"), "{why}");
    c.stop_all().await;
}

/// An S3 store under the cache (the backend tier's emulator on loopback): a `PUT` writes the
/// object through, coded (TOFEC's manifest in its metadata); a read with fewer than k splits
/// readable is answered from that copy (ranges too); a `DELETE` removes it; with the store
/// down a `PUT` fails clearly and leaves nothing readable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_are_written_through_to_an_s3_store() {
    use ecdn_backend::emulator::{Emulator, EmulatorConfig};
    use ecdn_backend::proxy::{Proxy, ProxyConfig};
    use ecdn_backend::store::{S3Config, S3Store, Store};
    use std::sync::Arc;
    let emu = Emulator::start("127.0.0.1:0".parse().unwrap(), EmulatorConfig::instant())
        .await
        .unwrap();
    let extra = format!(
        "object_backend = \"s3://originals/objects\"\nobject_backend_endpoint = \"{}\"\n",
        emu.endpoint()
    );
    let c = TestCluster::start_with(4, "c2dn", 3, 1, &extra).await;
    // The test's own view of the store.
    let store = S3Store::new(
        &S3Config {
            bucket: "originals".into(),
            prefix: "objects".into(),
            endpoint: Some(emu.endpoint()),
            ..S3Config::default()
        },
        std::time::Duration::from_secs(10),
    )
    .unwrap();
    let store: Arc<dyn Store> = Arc::new(store);
    let tier = Proxy::start(store.clone(), ProxyConfig::default());

    let data = content(7, 3_000_000);
    let put = send(c.client(0), "PUT", "/_objects/big?k=2&r=1", data.clone()).await;
    assert_eq!(put.status, 201, "{}", String::from_utf8_lossy(&put.body));
    let meta = record(&put);
    // Acknowledged after k parts: the upload may still be completing.
    let mut head = None;
    for _ in 0..100 {
        head = store.head("big").await.unwrap();
        if head.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let head = head.expect("written through");
    assert!(head.manifest.is_some(), "stored as a TOFEC coded file");
    assert!(tier.read("big").await.unwrap().0 == data);

    // Every split lost: the store answers.
    for &s in &meta.splits {
        purge_split(c.peer(s), &meta).await;
    }
    let got = send(c.client(1), "GET", "/_objects/big", Vec::new()).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert!(got.body == data, "the backend's copy, byte for byte");
    assert_eq!(got.headers["x-ecdn-source"], "backend");
    let h = [("range", "bytes=2999990-")];
    let got = common::send_body(c.client(2), "GET", "/_objects/big", &h, Bytes::new()).await;
    assert_eq!((got.status, &got.body[..]), (206, &data[2_999_990..]));

    let del = send(c.client(3), "DELETE", "/_objects/big", Vec::new()).await;
    assert_eq!(del.status, 200);
    assert_eq!(del.headers["x-ecdn-backend"], "removed");
    assert!(store.head("big").await.unwrap().is_none());

    // The store down: nothing is committed.
    emu.stop().await;
    let put = send(c.client(0), "PUT", "/_objects/lost?k=2&r=1", data.clone()).await;
    assert_eq!(put.status, 502);
    let why = String::from_utf8_lossy(&put.body);
    assert!(
        why.contains("writing through to the backend store"),
        "{why}"
    );
    let got = send(c.client(1), "GET", "/_objects/lost", Vec::new()).await;
    assert_eq!(got.status, 404);
    tier.stop();
    c.stop_all().await;
}

/// The same API with the records in etcd (a real etcd member on loopback; `./test.sh` installs
/// it) and the control plane there: a round trip, a later write winning, a delete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_with_their_records_in_etcd() {
    use ecdn_cluster::coordinator::etcd::EtcdCoordinator;
    use ecdn_cluster::coordinator::CoordinatorOptions;
    use ecdn_cluster::etcd_local::LocalEtcd;
    let bin = LocalEtcd::find_binary().expect(ecdn_cluster::etcd_local::NOT_INSTALLED);
    let dir = tempfile::tempdir().unwrap();
    let etcd = LocalEtcd::start(&bin, dir.path(), 1).unwrap();
    // A port that `free_ports` released can be taken by another test before a node binds it:
    // then the coordinator and the nodes start again on new ones.
    let mut attempts = 0;
    let (cfg, coord, nodes) = loop {
        attempts += 1;
        let ports = free_ports(9);
        let mut text = format!(
            "scheme = \"c2dn\"\nkey = \"{KEY}\"\ncoordinator = \"127.0.0.1:{}\"\n\
             heartbeat_ms = 100\nbuckets = 50\netcd = [\"{}\"]\netcd_lease_s = 2\n",
            ports[0],
            etcd.url(0)
        );
        for i in 0..4 {
            text.push_str(&format!(
                "[[node]]\nid = {i}\nclient = \"127.0.0.1:{}\"\npeer = \"127.0.0.1:{}\"\n",
                ports[1 + i],
                ports[5 + i]
            ));
        }
        let cfg = ecdn_cluster::ClusterConfig::parse(&text).unwrap();
        let coord = EtcdCoordinator::start(cfg.clone(), CoordinatorOptions::default(), "t".into());
        match try_start_nodes(&cfg, dir.path(), 1).await {
            Ok(nodes) => break (cfg, coord, nodes),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && attempts < 3 => {
                eprintln!("nodes: {e}; again on other ports");
                drop(coord);
            }
            Err(e) => panic!("nodes: {e}"),
        }
    };
    let client = ecdn_client::ObjectClient::new(cfg.nodes[1].client);
    let code = Some(ecdn_client::Code { k: 2, r: 1 });
    let first = Bytes::from(content(1, 150_000));
    client.put("in/etcd", first, code).await.unwrap();
    let second = Bytes::from(content(2, 90_000));
    let meta = client.put("in/etcd", second.clone(), code).await.unwrap();
    let reader = ecdn_client::ObjectClient::new(cfg.nodes[3].client);
    assert_eq!(reader.stat("in/etcd").await.unwrap().record, meta);
    assert_eq!(reader.get("in/etcd").await.unwrap(), second);
    // The record is in etcd, sealed, where the directory finds it.
    let dir_etcd = ObjectDirectory::for_cluster(&cfg);
    let name = ObjectName::parse("in/etcd").unwrap();
    assert_eq!(dir_etcd.get(&name, 4).await.unwrap(), meta);
    reader.delete("in/etcd").await.unwrap();
    assert!(dir_etcd.get(&name, 4).await.is_err());
    for n in nodes {
        n.stop().await.unwrap();
    }
    drop(coord);
    drop(etcd);
}
