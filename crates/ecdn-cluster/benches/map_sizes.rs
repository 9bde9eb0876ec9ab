//! What a map costs the control plane at three cluster shapes (issue 42): the bytes of one
//! epoch change as the leader writes it in etcd and every watcher receives it (`etcd_map.rs`),
//! against the uncompressed JSON map every epoch carried before.
//!
//! For each shape (buckets × servers, K = 3, P = 1, c2dn with its slot history): a map with
//! every server up, then server 1 fails, then server 2 fails, then server 1 returns. Printed per
//! shape: the map as JSON (the old stored form), the whole map stored (compressed, sealed), the
//! diff stored after each change (cumulative from the first map, as the leader writes it), the
//! leader's state stored, and the time to make, seal, open and apply a diff.
//!
//! Run: `cargo bench -p ecdn-cluster --bench map_sizes`.

use std::time::Instant;

use ecdn_cluster::etcd_map::{open_diff, seal_diff, seal_map};
use ecdn_cluster::map::MapDiff;
use ecdn_cluster::{BucketMap, ClusterKey};
use ecdn_placement::pieces::{Scheme, SlotHistory};
use ecdn_placement::{Placement, PlacementConfig};

fn map(pl: &Placement, h: &SlotHistory, epoch: u64) -> BucketMap {
    BucketMap::from_placement(epoch, Scheme::C2dn, 3, 1, pl, Some(h))
}

/// Server `s` becomes (un)available; the history records the moved slots.
fn set(pl: &mut Placement, h: &mut SlotHistory, s: usize, up: bool) {
    let before = h.holders(pl);
    pl.set_available(s, up);
    h.record(&before, &h.holders(pl));
}

/// Median of `f`'s time over `n` runs, in microseconds.
fn time_us(n: usize, mut f: impl FnMut()) -> f64 {
    let mut t: Vec<f64> = (0..n)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[n / 2]
}

fn main() {
    let key = ClusterKey::new(b"0123456789abcdef-bench");
    println!(
        "| buckets × servers | map as JSON | whole map stored | placement + slot history stored | diff: server 1 fails | \
         then server 2 fails | then server 1 returns | make + seal a diff | open + apply |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (buckets, servers) in [(100, 10), (1_000, 50), (10_000, 500)] {
        let cfg = PlacementConfig {
            buckets,
            ..PlacementConfig::default()
        };
        let mut pl = Placement::new(&vec![1.0; servers], cfg).unwrap();
        let mut h = SlotHistory::new(buckets, 3, 1);
        let base = map(&pl, &h, 1);
        let json = serde_json::to_vec(&base).unwrap().len();
        let whole = seal_map(&key, &base).len();
        let state = ecdn_cluster::etcd_map::compress(
            &serde_json::to_vec(&(pl.snapshot(), h.as_slice())).unwrap(),
        )
        .len();
        let mut diffs = Vec::new();
        let mut last = base.clone();
        for (s, up) in [(1, false), (2, false), (1, true)] {
            set(&mut pl, &mut h, s, up);
            last = map(&pl, &h, 2);
            let d = MapDiff::between(&base, &last).unwrap();
            diffs.push(seal_diff(&key, &d).len());
        }
        let make = time_us(9, || {
            let d = MapDiff::between(&base, &last).unwrap();
            std::hint::black_box(seal_diff(&key, &d));
        });
        let sealed = seal_diff(&key, &MapDiff::between(&base, &last).unwrap());
        let apply = time_us(9, || {
            let d = open_diff(&key, &sealed).unwrap();
            std::hint::black_box(d.apply(&base, 2).unwrap());
        });
        assert_eq!(
            open_diff(&key, &sealed).unwrap().apply(&base, 2).unwrap(),
            last
        );
        println!(
            "| {buckets} × {servers} | {json} B | {whole} B | {state} B | {} B | {} B | {} B | \
             {make:.0} µs | {apply:.0} µs |",
            diffs[0], diffs[1], diffs[2]
        );
    }
}
