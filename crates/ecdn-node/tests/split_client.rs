//! Clients that read the splits themselves (issue 61; EC-Cache §4.3's client): on an in-process
//! cluster of 6 nodes, `ecdn_client::SplitClient` reads objects of several sizes and codes
//! byte for byte from the splits' servers (one window and several; replicated and coded),
//! asks `k + Δ` and decodes each window from `k`; a stopped split server is replaced by a
//! spare; the node's split service answers ranges, `404` and `416`, and `?locate` gives the
//! record with its digests and the split servers' addresses. A client writes objects itself
//! (coded here, each split put on its server with the node's grant, committed with the servers'
//! receipts); a put without a grant and a commit with forged receipts are refused. The plain
//! HTTP path through a node streams: its first bytes leave before the last split arrives.

use std::net::SocketAddr;

use bytes::Bytes;
use ecdn_client::{Delta, SplitClient};
use ecdn_objects::meta::ObjectMeta;

#[path = "common/cluster.rs"]
mod harness;
use harness::TestCluster;

mod common;

fn content(seed: u64, size: usize) -> Vec<u8> {
    let mut rng = ecdn_trace::Rng::new(seed);
    (0..size).map(|_| rng.next_u64() as u8).collect()
}

async fn put(addr: SocketAddr, name: &str, k: usize, r: usize, data: &[u8]) -> ObjectMeta {
    let uri = format!("/_objects/{name}?k={k}&r={r}");
    let put = common::send_body(addr, "PUT", &uri, &[], Bytes::from(data.to_vec())).await;
    assert_eq!(put.status, 201, "{}", String::from_utf8_lossy(&put.body));
    serde_json::from_slice(&put.body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_reads_the_splits_from_their_servers_and_checks_every_byte() {
    let mut c = TestCluster::start(6, "c2dn", 3, 1).await;
    let nodes: Vec<SocketAddr> = (0..6).map(|i| c.client(i)).collect();
    let client = SplitClient::new(nodes.clone());
    // One window and several (1 MiB per split and window); replicated and coded.
    let cases = [
        ("one/small", 1, 1, 1_000),
        ("one/coded", 3, 2, 200_000),
        ("many/windows", 2, 1, 5 << 20),
        ("many/odd", 4, 2, (3 << 20) + 12_345),
    ];
    for (i, &(name, k, r, size)) in cases.iter().enumerate() {
        let data = content(i as u64, size);
        let meta = put(nodes[i % 6], name, k, r, &data).await;
        assert!(
            meta.has_digests(),
            "{name}: a new record has window digests"
        );
        assert_eq!(
            meta.digests.len() as u64,
            meta.windows() * (k + r) as u64,
            "{name}"
        );
        let mut read = client.read(name).await.unwrap();
        let mut got = Vec::new();
        while let Some(b) = read.next().await {
            got.extend_from_slice(&b.unwrap());
        }
        assert!(got == data, "{name}: the bytes read from the splits");
        let report = read.report();
        assert_eq!(report.delta, 1);
        assert_eq!(
            report.asked.len(),
            (k + 1).min(k + r),
            "{name}: k + Δ asked"
        );
        assert_eq!(report.used.len() as u64, meta.windows(), "{name}");
        assert!(
            report.used.iter().all(|u| u.len() == k),
            "{name}: {report:?}"
        );
        assert!(report.failed.is_empty(), "{name}: {report:?}");
    }
    assert_eq!(client.via_node_reads(), 0);
    assert_eq!(
        client.backlog_bytes(),
        0,
        "every byte asked arrived or was cancelled"
    );

    // The split service: a range, a split not held here, a range past the end.
    let meta = put(nodes[0], "svc/obj", 2, 1, &content(7, 100_000)).await;
    let holder = meta.splits[0];
    let other = (0..6).find(|n| !meta.splits.contains(n)).unwrap();
    let uri = format!("/_objects/svc/obj?split=0&version={}", meta.version);
    let h = [("range", "bytes=10-19")];
    let got = common::send_body(nodes[holder], "GET", &uri, &h, Bytes::new()).await;
    assert_eq!(got.status, 206);
    assert_eq!(got.body.len(), 10);
    assert_eq!(got.headers["content-range"], "bytes 10-19/50000");
    assert_eq!(got.body[..], content(7, 100_000)[10..20], "split 0 is data");
    let none = common::send_body(nodes[other], "GET", &uri, &h, Bytes::new()).await;
    assert_eq!(none.status, 404);
    let past = [("range", "bytes=50000-")];
    let past = common::send_body(nodes[holder], "GET", &uri, &past, Bytes::new()).await;
    assert_eq!(past.status, 416);
    let no_version = "/_objects/svc/obj?split=0";
    let bad = common::send_body(nodes[holder], "GET", no_version, &[], Bytes::new()).await;
    assert_eq!(bad.status, 400);
    // `?locate`: the record and every split server's client address.
    let at = client.locate("svc/obj").await.unwrap();
    assert_eq!(at.meta, meta);
    for (i, a) in at.addrs.iter().enumerate() {
        assert_eq!(*a, Some(nodes[meta.splits[i]]));
    }

    // A split server stopped: its split read fails and a spare takes its place (Δ = 0, so
    // the read needs it).
    let data = content(11, 3 << 20);
    let meta = put(nodes[0], "gone/one", 3, 2, &data).await;
    let exact = SplitClient::new(nodes.clone()).with_delta(Delta::Fixed(0));
    let at = exact.locate("gone/one").await.unwrap();
    c.stop(meta.splits[0]).await;
    c.stop(meta.splits[3]).await;
    for _ in 0..3 {
        let mut read = exact.read("gone/one").await.unwrap();
        let mut got = Vec::new();
        while let Some(b) = read.next().await {
            got.extend_from_slice(&b.unwrap());
        }
        assert!(got == data, "read with two split servers stopped");
        let report = read.report();
        assert!(
            report
                .used
                .iter()
                .all(|u| !u.contains(&0) && !u.contains(&3)),
            "{report:?}"
        );
    }
    assert_eq!(at.addrs.len(), 5);
    assert_eq!(exact.via_node_reads(), 0);
    c.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_writes_the_splits_itself_with_grants_and_receipts() {
    let c = TestCluster::start(6, "c2dn", 3, 1).await;
    let nodes: Vec<SocketAddr> = (0..6).map(|i| c.client(i)).collect();
    let client = SplitClient::new(nodes.clone());
    for (i, (k, r, size)) in [(1, 1, 1_000), (3, 2, 200_000), (4, 1, (3 << 20) + 7)]
        .into_iter()
        .enumerate()
    {
        let name = format!("written/{i}");
        let data = content(100 + i as u64, size);
        let code = ecdn_client::Code { k, r };
        let meta = client
            .put(&name, Bytes::from(data.clone()), Some(code))
            .await
            .unwrap();
        assert_eq!((meta.k, meta.r, meta.size as usize), (k, r, size));
        assert!(meta.stored.iter().all(|&s| s), "{meta:?}");
        // Read back through a node (its CRC checks use the record) and from the splits.
        let via = ecdn_client::ObjectClient::new(nodes[(i + 1) % 6]);
        assert!(
            via.get(&name).await.unwrap() == data,
            "{name} through a node"
        );
        assert!(
            client.get(&name).await.unwrap() == data,
            "{name} from the splits"
        );
    }
    assert_eq!(client.via_node_reads(), 0);

    // A split PUT without a valid grant is refused; a commit whose receipts are forged stores
    // nothing.
    let begin = common::send_body(
        nodes[0],
        "POST",
        "/_objects/forged?begin&size=1000&k=2&r=1",
        &[],
        Bytes::new(),
    )
    .await;
    assert_eq!(
        begin.status,
        200,
        "{}",
        String::from_utf8_lossy(&begin.body)
    );
    let b: ecdn_objects::writes::Begun = serde_json::from_slice(&begin.body).unwrap();
    let put = format!(
        "/_objects/forged?split=0&version={}&k=2&r=1&size=1000&expires={}",
        b.version, b.expires
    );
    let server = nodes[b.splits[0]];
    let bad = [("x-ecdn-grant", b.grants[1].as_str())];
    let refused = common::send_body(server, "PUT", &put, &bad, Bytes::from(vec![0u8; 500])).await;
    assert_eq!(refused.status, 403);
    let good = [("x-ecdn-grant", b.grants[0].as_str())];
    let short = common::send_body(server, "PUT", &put, &good, Bytes::from(vec![0u8; 499])).await;
    assert_eq!(short.status, 400, "a split of the wrong length");
    let mut record = client_record(&b);
    record.stored = vec![true; 3];
    let commit = ecdn_objects::writes::Commit {
        record,
        receipts: vec![Some("00".repeat(32)); 3],
    };
    let commit = common::send_body(
        nodes[0],
        "POST",
        "/_objects/forged?commit",
        &[],
        Bytes::from(serde_json::to_vec(&commit).unwrap()),
    )
    .await;
    assert_eq!(
        commit.status,
        503,
        "{}",
        String::from_utf8_lossy(&commit.body)
    );
    let get = common::send_body(nodes[1], "GET", "/_objects/forged", &[], Bytes::new()).await;
    assert_eq!(get.status, 404, "nothing was committed");
    c.stop_all().await;
}

/// A record for `b`'s write of 1,000 zero bytes, with made-up checksums and digests.
fn client_record(b: &ecdn_objects::writes::Begun) -> ObjectMeta {
    let n = b.k + b.r;
    let stripes = ecdn_objects::meta::stripes(b.size, b.k, b.sub_chunk) as usize;
    let windows = ecdn_objects::digest::windows(stripes as u64, b.window_stripes) as usize;
    ObjectMeta {
        name: ecdn_objects::meta::ObjectName::parse("forged").unwrap(),
        version: b.version,
        size: b.size,
        k: b.k,
        r: b.r,
        splits: b.splits.clone(),
        stored: vec![false; n],
        sha256: "0".repeat(64),
        sub_chunk: b.sub_chunk,
        crcs: vec![0; n * stripes],
        window_stripes: b.window_stripes,
        digests: vec![[0; 32]; n * windows],
        s3: None,
    }
}

/// The plain HTTP path (a client that is not ours, through any node) streams: its first bytes
/// leave the node before the last of the splits has arrived there. Every node's link (its
/// answers to peers and its own split reads) is capped at 4 MiB/s, so the node needs about two
/// seconds to read the 8 MiB splits of a 16 MiB object (`k = 2`); the answer's first bytes
/// must come within the first half of that, once the first 1 MiB windows are in (measured:
/// 0.44 s of 1.26 s with 8 MiB, where a node that buffered would send its first at the end).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plain_path_sends_its_first_bytes_before_the_last_split_arrives() {
    use http_body_util::BodyExt;
    use std::time::Instant;

    let c = TestCluster::start_linked(4, "c2dn", 3, 1, 4 << 20).await;
    let data = content(21, 16 << 20);
    let meta = put(c.client(1), "plain/stream", 2, 1, &data).await;
    assert_eq!(meta.windows(), 8);
    // A node that holds none of the splits: every byte crosses a capped link to it.
    let node = (0..4).find(|n| !meta.splits.contains(n)).unwrap();
    let stream = tokio::net::TcpStream::connect(c.client(node))
        .await
        .unwrap();
    let io = hyper_util::rt::TokioIo::new(stream);
    let (mut send, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
    tokio::spawn(conn);
    let t0 = Instant::now();
    let req = hyper::Request::get("/_objects/plain/stream")
        .header("host", "ecdn.test")
        .body(http_body_util::Empty::<Bytes>::new())
        .unwrap();
    let resp = send.send_request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    let (mut got, mut first) = (Vec::new(), None);
    while let Some(frame) = body.frame().await {
        if let Ok(d) = frame.unwrap().into_data() {
            if !d.is_empty() && first.is_none() {
                first = Some(t0.elapsed());
            }
            got.extend_from_slice(&d);
        }
    }
    let (first, last) = (first.unwrap(), t0.elapsed());
    eprintln!("plain path: first bytes after {first:?}, the last after {last:?}");
    assert!(got == data, "the bytes through the node");
    assert!(
        last.as_secs_f64() > 1.5,
        "8 MiB splits over 4 MiB/s links take about two seconds, not {last:?}"
    );
    assert!(
        first.as_secs_f64() < last.as_secs_f64() / 2.0,
        "first bytes after {first:?}, the last after {last:?}: the answer waited for the splits"
    );
    c.stop_all().await;
}

/// The coordinator's parity budget sees a client's own reads: each split a client asks counts
/// toward its object's reads, so the object clients read gets the extra parities the budget
/// pays for (no node sees those reads whole), and the objects nobody reads do not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_budget_counts_the_splits_clients_read() {
    // 4 objects of 2 data + 1 parity splits: their parities take 50% of their size, a budget
    // of 75% pays for 2 more splits (25% each).
    let extra = "object_budget = 0.75\nobject_budget_every_s = 0.5\n";
    let c = TestCluster::start_with(6, "c2dn", 3, 1, extra).await;
    let nodes: Vec<SocketAddr> = (0..6).map(|i| c.client(i)).collect();
    let size = 200_000;
    for (i, &node) in nodes.iter().take(4).enumerate() {
        put(node, &format!("c{i}"), 2, 1, &content(i as u64, size)).await;
    }
    let client = SplitClient::new(nodes.clone()).with_delta(Delta::Fixed(1));
    let hot = content(2, size);
    for _ in 0..30 {
        assert!(client.get("c2").await.unwrap() == hot);
    }
    let splits = |name: String| {
        let addr = nodes[5];
        async move {
            let uri = format!("/_objects/{name}?stat");
            let stat = common::send_body(addr, "GET", &uri, &[], Bytes::new()).await;
            let v: serde_json::Value = serde_json::from_slice(&stat.body).unwrap();
            v["splits"].as_array().map_or(0, Vec::len)
        }
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while splits("c2".into()).await != 5 {
        assert!(
            std::time::Instant::now() < deadline,
            "c2 never got its 2 extra parities"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    for cold in ["c0", "c1", "c3"] {
        assert_eq!(splits(cold.into()).await, 3, "{cold}");
    }
    // Read back exactly, from the new splits too.
    let client = SplitClient::new(nodes).with_delta(Delta::Fixed(3));
    assert!(client.get("c2").await.unwrap() == hot);
    c.stop_all().await;
}
