//! Handoff (`c2dn/handoff.rs`), in one process on loopback: a node stops without the
//! coordinator knowing yet (its heartbeats are given 5 s), objects are filled meanwhile, and
//! the chunks meant for it are written where the map puts them once it is declared out, so
//! every object has all its chunks on the nodes left.

use std::time::{Duration, Instant};

#[path = "common/cluster.rs"]
mod harness;
use harness::{check_whole, distinct_chunks, get, uri, TestCluster};

/// Objects of 200,000 bytes: coded (above the 128 KiB threshold), one slice.
const SIZE: u64 = 200_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunks_meant_for_a_node_not_yet_declared_out_are_written_where_the_next_map_puts_them() {
    // Five nodes of c2dn n4k3: an object's four chunks are on four of them. Node 2 is
    // declared out only by its missed heartbeats (50 × 100 ms; no health probes).
    let mut c = TestCluster::start_with(
        5,
        "c2dn",
        3,
        1,
        "missed_heartbeats = 50\nparity_delay = 1000.0\n[health]\nenabled = false\n",
    )
    .await;
    c.stop(2).await;
    let stopped = Instant::now();
    let ids: Vec<u64> = (0..12).collect();
    for &id in &ids {
        check_whole(
            &get(c.client(0), &uri(id, SIZE), &[]).await.unwrap(),
            id,
            SIZE,
        );
    }
    assert!(
        stopped.elapsed() < Duration::from_secs(5),
        "the fills took {:?}: node 2 may have been declared out before them",
        stopped.elapsed()
    );
    c.wait_available(&[true, true, false, true, true]).await;
    // The handoffs follow the new map; each object's four chunks end up on the four nodes left.
    let live = [0, 1, 3, 4];
    let key = |id: u64| format!("cdn.test{}", uri(id, SIZE));
    let deadline = Instant::now() + Duration::from_secs(10);
    for &id in &ids {
        loop {
            let n = distinct_chunks(&c, &live, &key(id)).await;
            if n == 4 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "object {id}: {n} distinct chunks"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let s = get(c.admin(0), "/_ecdn/stats", &[]).await.unwrap();
    let v: serde_json::Value = serde_json::from_slice(&s.body).unwrap();
    assert!(v["cluster"]["handoffs"].as_u64().unwrap() > 0, "{v}");
    c.stop_all().await;
}
