//! Large objects as range slices (the cluster file's `slice_size`), in one process on
//! loopback: a coordinator and six nodes over the in-memory origin. Whole and by ranges,
//! through any node, byte-exact; every node writes some of one object's slices; a node
//! stopped between two downloads leaves them byte-exact.

use std::net::SocketAddr;

use bytes::Bytes;
use ecdn_node::content;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;

#[path = "common/cluster.rs"]
mod harness;
use harness::{check_whole, get, node_counter, request, uri, TestCluster};

/// A 24 MiB + 5 B object in 1 MiB slices (the last one 5 bytes).
const SIZE: u64 = (24 << 20) + 5;

/// `nodes` nodes of c2dn n4k3 with 1 MiB slices (parity only when a data chunk fails, not
/// when one is late on a busy test machine).
async fn sliced_cluster(nodes: usize) -> TestCluster {
    TestCluster::start_with(
        nodes,
        "c2dn",
        3,
        1,
        "parity_delay = 1000.0\nslice_size = \"1MiB\"\n",
    )
    .await
}

fn want(id: u64, range: std::ops::Range<u64>) -> Vec<u8> {
    content::bytes(
        content::object_id(&id.to_string()),
        range.start,
        (range.end - range.start) as usize,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sliced_object_is_byte_exact_whole_and_by_ranges_through_any_node() {
    let mut c = sliced_cluster(6).await;
    let first = get(c.client(0), &uri(7, SIZE), &[]).await.unwrap();
    check_whole(&first, 7, SIZE);
    assert!(
        first.header("x-cache").starts_with("MISS"),
        "{:?}",
        first.headers
    );
    for n in 0..6 {
        let r = get(c.client(n), &uri(7, SIZE), &[]).await.unwrap();
        check_whole(&r, 7, SIZE);
        assert_eq!(r.header("x-cache"), "HIT-DISK", "via node {n}");
    }
    // 25 slices of 4 chunks each over 6 nodes: every node holds some (one object unsliced
    // would be on 4 of them).
    for n in 0..6 {
        let s = get(c.admin(n), "/_ecdn/stats", &[]).await.unwrap();
        let v: serde_json::Value = serde_json::from_slice(&s.body).unwrap();
        assert!(
            v["cluster"]["bytes_written"].as_u64().unwrap() > 0,
            "node {n}: {v}"
        );
    }
    // Ranges: inside one slice, across two, a suffix ending in the 5-byte last slice, an open
    // one, and one past the end.
    for (range, bytes) in [
        ("bytes=100-199", 100..200),
        ("bytes=1048000-1049000", 1_048_000..1_049_001),
        ("bytes=-1000", SIZE - 1000..SIZE),
        ("bytes=20000000-", 20_000_000..SIZE),
    ] {
        for n in [1, 4] {
            let r = get(c.client(n), &uri(7, SIZE), &[("range", range)])
                .await
                .unwrap();
            assert_eq!(r.status, 206, "{range} via {n}: {:?}", r.headers);
            assert_eq!(
                r.header("content-range"),
                format!("bytes {}-{}/{SIZE}", bytes.start, bytes.end - 1)
            );
            assert!(r.body == want(7, bytes.clone()), "{range} via node {n}");
        }
    }
    // Several ranges: one multipart answer from the slices (a hit, not the origin's answer),
    // parts in request order, two of them across two slices, two in one slice: six slices read.
    let several = [100..200, 2_097_000..2_097_300, SIZE - 7..SIZE, 150..160];
    for n in [1, 4] {
        let asked = "bytes=100-199,2097000-2097299,-7,150-159";
        let r = get(c.client(n), &uri(7, SIZE), &[("range", asked)])
            .await
            .unwrap();
        assert_eq!(r.status, 206, "via {n}: {:?}", r.headers);
        assert!(r.header("x-cache").starts_with("HIT"), "{:?}", r.headers);
        assert_eq!(r.header("x-ecdn-sliced"), "6");
        assert_eq!(r.header("content-length"), r.body.len().to_string());
        let b = ecdn_node::multipart::boundary(r.header("content-type")).unwrap();
        let parts = ecdn_node::multipart::parse_byteranges(&r.body, &b, 16).unwrap();
        assert_eq!(parts.len(), several.len());
        for (p, want_range) in parts.iter().zip(&several) {
            assert_eq!(&p.range, want_range);
            assert_eq!(p.complete_length, Some(SIZE));
            assert!(
                p.body == want(7, want_range.clone()),
                "{want_range:?} via {n}"
            );
        }
    }
    // Ranges that overlap past the object's length are refused as abuse: the whole object.
    let r = get(c.client(5), &uri(7, SIZE), &[("range", "bytes=0-,1-")])
        .await
        .unwrap();
    check_whole(&r, 7, SIZE);
    assert_eq!(r.header("x-ecdn-sliced"), "25");
    let r = get(c.client(2), &uri(7, SIZE), &[("range", "bytes=30000000-")])
        .await
        .unwrap();
    assert_eq!(r.status, 416);
    assert_eq!(r.header("content-range"), format!("bytes */{SIZE}"));
    // A cold object asked for by a range first: the slice holding its first byte is filled,
    // then the rest of the object whole.
    let r = get(
        c.client(3),
        &uri(8, SIZE),
        &[("range", "bytes=5000000-5000009")],
    )
    .await
    .unwrap();
    assert_eq!(r.status, 206);
    assert!(r.body == want(8, 5_000_000..5_000_010));
    check_whole(
        &get(c.client(5), &uri(8, SIZE), &[]).await.unwrap(),
        8,
        SIZE,
    );
    // An object of one slice or less is not sliced: cached whole, ranges from it.
    check_whole(
        &get(c.client(0), &uri(9, 300_000), &[]).await.unwrap(),
        9,
        300_000,
    );
    let r = get(c.client(1), &uri(9, 300_000), &[]).await.unwrap();
    check_whole(&r, 9, 300_000);
    assert_eq!(r.header("x-cache"), "HIT-DISK");
    // A node gone between two downloads: the slices whose chunks it held are decoded.
    c.stop(2).await;
    for n in [0, 3] {
        check_whole(
            &get(c.client(n), &uri(7, SIZE), &[]).await.unwrap(),
            7,
            SIZE,
        );
    }
    c.stop_all().await;
}

/// A download whose first bytes arrived when a node holding chunks of its later slices is
/// stopped: `mid` gets the serving node once 2 MiB arrived; returns the bytes received.
async fn download_while(
    addr: SocketAddr,
    id: u64,
    size: u64,
    mid: impl AsyncFnOnce(usize),
) -> Vec<u8> {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = hyper::Request::builder()
        .uri(uri(id, size))
        .header("host", "cdn.test")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let resp = send.send_request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let served_by: usize = resp.headers()["x-ecdn-served-by"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let mut body = resp.into_body();
    let mut got = Vec::new();
    let mut mid = Some(mid);
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.unwrap().into_data() {
            got.extend_from_slice(&data);
        }
        if got.len() >= 2 << 20 {
            if let Some(f) = mid.take() {
                f(served_by).await;
            }
        }
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_stopped_mid_download_leaves_the_download_byte_exact() {
    let mut c = sliced_cluster(6).await;
    let size = 40 << 20;
    check_whole(
        &get(c.client(0), &uri(11, size), &[]).await.unwrap(),
        11,
        size,
    );
    let stopped = std::sync::Mutex::new(None);
    let got = download_while(c.client(1), 11, size, async |served_by| {
        // Neither the node the client reached nor the one serving the object.
        let victim = (0..6).find(|&n| n != 1 && n != served_by).unwrap();
        *stopped.lock().unwrap() = Some(victim);
        c.stop(victim).await;
    })
    .await;
    assert!(stopped.lock().unwrap().is_some());
    assert_eq!(got.len() as u64, size);
    assert!(got == want(11, 0..size), "bytes differ");
    c.stop_all().await;
}

/// A `PURGE` of a sliced object drops its slices on every node: the next download fills every
/// one of them again from the origin, byte-exact.
/// A `HEAD` of an object a node knows sliced is answered from slice 0, with the object's
/// length; a node that does not know it asks the origin, which says the same. A conditional
/// `GET` is judged by slice 0 on every node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_or_a_conditional_get_of_a_sliced_object_is_answered_from_its_first_slice() {
    let c = sliced_cluster(4).await;
    let size = (5 << 20) + 3;
    let first = get(c.client(0), &uri(31, size), &[]).await.unwrap();
    check_whole(&first, 31, size);
    let served_by: usize = first.header("x-ecdn-served-by").parse().unwrap();
    let url = uri(31, size);
    let head = |n: usize| request(c.client(n), "HEAD", &url, &[]);
    let r = head(served_by).await.unwrap();
    assert_eq!((r.status, r.body.len()), (200, 0), "{:?}", r.headers);
    assert_eq!(
        r.header("content-length"),
        size.to_string(),
        "{:?}",
        r.headers
    );
    assert!(r.header("x-cache").starts_with("HIT"), "{:?}", r.headers);
    assert_eq!(r.header("x-ecdn-slice"), "", "{:?}", r.headers);
    // Through every node: the same length, from slice 0 or from the origin's own `HEAD`.
    for n in 0..4 {
        let r = head(n).await.unwrap();
        assert_eq!(
            (r.status, r.body.len()),
            (200, 0),
            "node {n}: {:?}",
            r.headers
        );
        assert_eq!(r.header("content-length"), size.to_string(), "node {n}");
    }
    // Conditional `GET`s, judged by slice 0 on every node (whether it knows the object
    // sliced or not): the current tag gets a `304` from the caches, another the whole object.
    let etag = first.header("etag").to_string();
    assert!(!etag.is_empty(), "{:?}", first.headers);
    for n in 0..4 {
        let r = get(c.client(n), &uri(31, size), &[("if-none-match", &etag)])
            .await
            .unwrap();
        assert_eq!(r.status, 304, "node {n}: {:?}", r.headers);
        assert!(r.body.is_empty());
        assert_eq!(r.header("etag"), etag, "node {n}");
        assert!(
            r.header("x-cache").starts_with("HIT"),
            "node {n}: {:?}",
            r.headers
        );
        let other = get(
            c.client(n),
            &uri(31, size),
            &[("if-none-match", "\"other\"")],
        )
        .await
        .unwrap();
        check_whole(&other, 31, size);
        assert!(
            other.header("x-cache").starts_with("HIT"),
            "node {n}: {:?}",
            other.headers
        );
    }
    c.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_drops_the_slices_on_every_node() {
    let c = sliced_cluster(4).await;
    let size = (6 << 20) + 1;
    check_whole(
        &get(c.client(0), &uri(21, size), &[]).await.unwrap(),
        21,
        size,
    );
    let hit = get(c.client(1), &uri(21, size), &[]).await.unwrap();
    check_whole(&hit, 21, size);
    assert_eq!(hit.header("x-cache"), "HIT-DISK");
    // The purge through the node that served it (it knows the object's slices).
    let served_by: usize = hit.header("x-ecdn-served-by").parse().unwrap();
    let (status, v) = harness::purge(c.admin(served_by), &uri(21, size)).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["purged"], true, "{v}");
    let again = get(c.client(2), &uri(21, size), &[]).await.unwrap();
    check_whole(&again, 21, size);
    assert!(
        again.header("x-cache").starts_with("MISS"),
        "{:?}",
        again.headers
    );
    let s = get(
        c.admin(served_by),
        &format!("/_ecdn/sliced/{}", again.header("x-request-id")),
        &[],
    )
    .await
    .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&s.body).unwrap();
    assert_eq!(v["slices"], 7, "{v}");
    assert_eq!(
        v["missed"], 7,
        "every slice came from the origin again: {v}"
    );
    assert_eq!(v["origin_bytes"], size, "{v}");
    c.stop_all().await;
}

/// What node `n` says a sliced answer it made came to (`/_ecdn/sliced/ID`): slices sent, and
/// of those filled from the origin. It is known (and counted) once the node has read the last
/// slice whole, which may be after the client had its bytes (a range ends inside a slice):
/// asked until it is, for up to 10 s.
async fn sliced_outcome(c: &TestCluster, n: usize, r: &harness::Reply) -> (u64, u64) {
    let id = r.header(ecdn_cluster::peer::REQUEST_ID_HEADER);
    for _ in 0..200 {
        let s = get(c.admin(n), &format!("/_ecdn/sliced/{id}"), &[])
            .await
            .unwrap();
        if s.status == 200 {
            let v: serde_json::Value = serde_json::from_slice(&s.body).unwrap();
            return (v["slices"].as_u64().unwrap(), v["missed"].as_u64().unwrap());
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("node {n} never finished {id}: {:?}", r.headers)
}

/// The answers the cluster's nodes gave themselves (hits, misses) and the origin bytes they
/// fetched, summed over `live` nodes.
async fn served(c: &TestCluster, live: &[usize]) -> (u64, u64, u64) {
    let mut sum = (0, 0, 0);
    for &n in live {
        sum.0 += node_counter(c, n, "served/hit").await;
        sum.1 += node_counter(c, n, "served/miss").await;
        sum.2 += node_counter(c, n, "origin_bytes").await;
    }
    sum
}

/// Direct reads of a sliced object (`cluster/c2dn/direct.rs`): a node that learned from a
/// relayed answer (here a range's) that an object is sliced makes its next answers of it
/// itself, reading each slice the cluster's pieces hold and asking the URL's serving node only
/// for a slice they do not (`?slice=N`), which fills it. The cluster counts each answer once,
/// where it was made, and each slice's bytes from the origin once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_knows_an_object_sliced_reads_its_slices_and_relays_only_a_missing_one() {
    let c = sliced_cluster(4).await;
    let all = [0, 1, 2, 3];
    let size = (5 << 20) + 3; // six slices, the last one 3 bytes
    let url = uri(41, size);
    // A range through node 0 fills slice 0 alone, at the serving node.
    let r = get(c.client(0), &url, &[("range", "bytes=0-9")])
        .await
        .unwrap();
    assert_eq!(r.status, 206, "{:?}", r.headers);
    assert!(r.body == want(41, 0..10));
    let s: usize = r.header("x-ecdn-served-by").parse().unwrap();
    assert_eq!(sliced_outcome(&c, s, &r).await, (1, 1));
    // A node that does not serve the URL learns from a relayed range that it is sliced.
    let n = (s + 1) % 4;
    if n != 0 {
        let r = get(c.client(n), &url, &[("range", "bytes=10-19")])
            .await
            .unwrap();
        assert_eq!(
            (r.status, r.header("x-ecdn-served-by")),
            (206, &*s.to_string())
        );
        assert_eq!(sliced_outcome(&c, s, &r).await, (1, 0));
    }
    let counters = async |n| {
        (
            node_counter(&c, n, "relayed").await,
            node_counter(&c, n, "direct_reads").await,
        )
    };
    // The whole object through it: slice 0 read here, slices 1 to 5 asked of the serving node,
    // which fills them; one answer, a miss, counted here.
    let (relayed, direct) = counters(n).await;
    let before = served(&c, &all).await;
    let r = get(c.client(n), &url, &[]).await.unwrap();
    check_whole(&r, 41, size);
    assert_eq!(
        r.header("x-ecdn-served-by"),
        n.to_string(),
        "{:?}",
        r.headers
    );
    assert_eq!(r.header("x-ecdn-sliced"), "6");
    assert_eq!(sliced_outcome(&c, n, &r).await, (6, 5));
    assert_eq!(counters(n).await, (relayed + 5, direct + 1));
    let after = served(&c, &all).await;
    assert_eq!(
        (after.0 - before.0, after.1 - before.1, after.2 - before.2),
        (0, 1, size - (1 << 20)),
        "served answers (hit, miss) and origin bytes"
    );
    // Again: every slice read here, nothing asked of the serving node, nothing fetched.
    let r = get(c.client(n), &url, &[]).await.unwrap();
    check_whole(&r, 41, size);
    assert_eq!(r.header("x-cache"), "HIT-DISK", "{:?}", r.headers);
    assert_eq!(r.header("x-ecdn-served-by"), n.to_string());
    assert_eq!(sliced_outcome(&c, n, &r).await, (6, 0));
    // A range across three slices and a `HEAD`, read here too.
    let r = get(c.client(n), &url, &[("range", "bytes=1048000-2097299")])
        .await
        .unwrap();
    assert_eq!(r.status, 206, "{:?}", r.headers);
    assert!(r.body == want(41, 1_048_000..2_097_300));
    assert_eq!(r.header("x-ecdn-served-by"), n.to_string());
    assert_eq!(sliced_outcome(&c, n, &r).await, (3, 0));
    let r = request(c.client(n), "HEAD", &url, &[]).await.unwrap();
    assert_eq!(
        r.header("content-length"),
        size.to_string(),
        "{:?}",
        r.headers
    );
    assert_eq!(counters(n).await, (relayed + 5, direct + 4));
    let last = served(&c, &all).await;
    assert_eq!(
        (last.0 - after.0, last.1 - after.1, last.2 - after.2),
        (3, 0, 0)
    );
    c.stop_all().await;
}
