//! Tests of the cluster simulator.

use super::*;
use crate::unavailability::FailEvent;
use ecdn_trace::gen::{GenConfig, Generator, Scenario, SizeDist};

/// 20,000 requests over 3,000 objects (web + video sizes, 1000 per trace second); every
/// 101st request asks for another size of its object (a new version).
fn trace() -> Vec<Request> {
    let mut v: Vec<Request> = Generator::new(GenConfig {
        requests: 20_000,
        objects: 3_000,
        alpha: 0.9,
        sizes: SizeDist::WebVideo,
        rate: 1000.0,
        seed: 11,
        scenario: Scenario::Stationary,
    })
    .unwrap()
    .collect();
    for r in v.iter_mut().step_by(101) {
        r.size += 1;
    }
    v
}

fn config(scheme: Scheme, capacity: u64) -> ClusterConfig {
    let mut cfg = ClusterConfig::new(scheme, capacity);
    cfg.weights = vec![1.0; 6];
    // Whole objects, unless a test slices them.
    cfg.slicing = Slicing::OFF;
    // FIFO as C2DN's, unless a test turns reinsertion or whole-object eviction on (the
    // defaults, `defaults_leave_no_fragment_behind`).
    cfg.reinsert = None;
    cfg.evict_together = false;
    cfg.window = Window::Requests(2_000);
    cfg
}

/// Runs `reqs` through a simulator, checking the protection mirror against the caches
/// every `check_every` requests and at the end.
fn run_checked(reqs: &[Request], cfg: &ClusterConfig, check_every: usize) -> ClusterResult {
    let mut sim = Sim::new(cfg.clone()).unwrap();
    let t0 = reqs[0].time;
    for (i, r) in reqs.iter().enumerate() {
        sim.request(r, (r.time - t0) as f64);
        if (i + 1) % check_every == 0 || i + 1 == reqs.len() {
            let avail: Vec<bool> = (0..cfg.weights.len())
                .map(|s| sim.placement.is_available(s))
                .collect();
            if let Err(e) = sim.protection.check(&sim.caches, &avail) {
                panic!("{} after request {}: {e}", cfg.scheme.name(), i + 1);
            }
        }
    }
    sim.finish(0.0)
}

#[test]
fn protection_mirrors_the_caches_through_evictions_failures_and_returns() {
    let reqs = trace();
    for scheme in [
        Scheme::NoRep,
        Scheme::Rep(2),
        Scheme::Rep2Popular,
        Scheme::C2dnNoRebal,
        Scheme::C2dn,
    ] {
        // Small enough to evict all the time; server 2 away from 5 s to 12 s and back
        // with an empty cache (its pieces leave the mirror), server 4 from 8 s on; a
        // periodic rebalance too, so parity moves.
        let mut cfg = config(scheme, 400 << 20);
        cfg.rebalance_every = 3.0;
        cfg.unavailability.returns_empty = vec![2];
        cfg.unavailability.events = vec![
            FailEvent {
                server: 2,
                start: 5.0,
                end: 12.0,
            },
            FailEvent {
                server: 4,
                start: 8.0,
                end: f64::INFINITY,
            },
        ];
        let r = run_checked(&reqs, &cfg, 997);
        assert!(r.cached_objects > 0, "{}", r.scheme);
        assert!(
            r.windows
                .iter()
                .all(|w| (0.0..=1.0).contains(&w.unprotected_fraction)),
            "{}",
            r.scheme
        );
        // Servers 2 and 4 were away, so the imbalance is over the others.
        assert_eq!(r.always_available, vec![0, 1, 3, 5], "{}", r.scheme);
    }
}

#[test]
fn unprotected_fraction_counts_cached_objects() {
    let reqs = trace();
    // One copy of everything: every cached object is unprotected, in every window.
    let r = run_checked(&reqs, &config(Scheme::NoRep, 400 << 20), 4_999);
    assert!(r.windows.iter().all(|w| w.unprotected_fraction == 1.0));
    assert_eq!(r.unprotected_fraction, 1.0);
    assert_eq!(r.unprotected_fraction_end, 1.0);
    // A cache that never evicts: every object has all its copies or chunks, and the
    // cached objects are exactly the distinct objects requested.
    let distinct = {
        let mut ids: Vec<u64> = reqs.iter().map(|r| r.id).collect();
        ids.sort_unstable();
        ids.dedup();
        ids.len() as u64
    };
    for scheme in [Scheme::Rep(2), Scheme::C2dnNoRebal, Scheme::C2dn] {
        let r = run_checked(&reqs, &config(scheme, 1 << 40), 4_999);
        assert_eq!(r.unprotected_fraction, 0.0, "{}", r.scheme);
        assert_eq!(r.cached_objects, distinct, "{}", r.scheme);
    }
    // Server 3 away from 10 s on, no eviction: the objects with a piece on it lose it (a
    // replica, or one of K + 1 chunks), and only those not requested since are left
    // unprotected; objects cached only on server 3 are not cached in the cluster.
    let mut cfg = config(Scheme::Rep(2), 1 << 40);
    cfg.unavailability.events = vec![FailEvent {
        server: 3,
        start: 10.0,
        end: f64::INFINITY,
    }];
    let r = run_checked(&reqs, &cfg, 4_999);
    let end = r.unprotected_fraction_end;
    assert!(end > 0.0 && end < 0.5, "{end}");
    assert_eq!(
        r.cached_objects, distinct,
        "rep2 keeps a copy of everything"
    );
    let before: Vec<f64> = r.windows[..5]
        .iter()
        .map(|w| w.unprotected_fraction)
        .collect();
    assert_eq!(before, vec![0.0; 5]);
}

#[test]
fn periodic_rebalance_is_off_by_default_and_an_option() {
    let reqs = trace();
    let count = |every: f64, at: Option<f64>| {
        let mut cfg = config(Scheme::C2dn, 400 << 20);
        cfg.rebalance_every = every;
        cfg.rebalance_at = at;
        run_checked(&reqs, &cfg, 10_000).rebalances
    };
    let span = (reqs.last().unwrap().time - reqs[0].time) as f64;
    assert!(span > 15.0 && span < 25.0, "{span}");
    assert_eq!(count(0.0, None), 0, "only availability changes rebalance");
    assert_eq!(count(0.0, Some(2.0)), 1, "one rebalance at 2 s");
    // Every 5 s, the first after half a second: at 0.5, 5.5, 10.5, ….
    let periodic = ((span - 0.5) / 5.0).floor() as u64 + 1;
    assert_eq!(count(5.0, None), periodic);
    assert_eq!(
        count(5.0, Some(3.0)),
        ((span - 3.0) / 5.0).floor() as u64 + 1
    );
    // An availability change rebalances whatever the option says: away and back.
    let mut cfg = config(Scheme::C2dn, 400 << 20);
    cfg.unavailability.events = vec![FailEvent {
        server: 1,
        start: 4.0,
        end: 9.0,
    }];
    let r = run_checked(&reqs, &cfg, 10_000);
    assert_eq!(r.rebalances, 2);
    assert_eq!(r.always_available, vec![0, 2, 3, 4, 5]);
    let w: Vec<u128> = r
        .always_available
        .iter()
        .map(|&s| r.bytes_written[s])
        .collect();
    assert_eq!(r.write_imbalance, imbalance(&w));
    // Bad settings are errors.
    for (every, at) in [(-1.0, None), (f64::NAN, None), (0.0, Some(-2.0))] {
        let mut cfg = config(Scheme::C2dn, 1 << 30);
        cfg.rebalance_every = every;
        cfg.rebalance_at = at;
        assert!(matches!(Sim::new(cfg), Err(SimError::Config(_))));
    }
}

/// Server 4 fails for good at 8 s. With repair, the chunks and replicas it held are rebuilt on
/// their new servers: fewer objects end unprotected than without, the bytes written stay
/// within the rate, and the protection mirror stays exact through the repair's writes.
#[test]
fn repair_rebuilds_what_a_failure_took_within_its_rate() {
    let reqs = trace();
    let run = |repair: RepairConfig| {
        let mut cfg = config(Scheme::C2dn, 4 << 30);
        cfg.repair = repair;
        cfg.unavailability.events = vec![FailEvent {
            server: 4,
            start: 8.0,
            end: f64::INFINITY,
        }];
        run_checked(&reqs, &cfg, 1_000)
    };
    let off = run(RepairConfig::OFF);
    assert_eq!(off.repair.pieces, 0);
    let rate = 64 << 20;
    let on = run(RepairConfig {
        rate,
        every: 1.0,
        min_requests: 1,
        max_age: 100.0,
        scan: usize::MAX,
    });
    assert!(
        on.repair.pieces > 0 && on.repair.objects > 0,
        "{:?}",
        on.repair
    );
    assert!(
        on.unprotected_fraction_end < off.unprotected_fraction_end / 2.0,
        "repair {} vs none {}",
        on.unprotected_fraction_end,
        off.unprotected_fraction_end
    );
    // 20 s of trace time per server, plus at most one round carried over.
    let servers = config(Scheme::C2dn, 1).weights.len() as u128;
    assert!(
        on.repair.written <= u128::from(rate) * 21 * servers,
        "{:?}",
        on.repair
    );
    // It reads K chunks per coded object it rebuilds, or the one copy of a replica.
    assert!(on.repair.read >= on.repair.written, "{:?}", on.repair);
    // A rate too small for any piece writes nothing.
    let starved = run(RepairConfig {
        rate: 1,
        every: 1.0,
        min_requests: 1,
        max_age: 100.0,
        scan: usize::MAX,
    });
    assert_eq!(starved.repair.written, 0);
    assert_eq!(starved.miss_ratio, off.miss_ratio);
}

/// Only `c2dn` repairs, and only objects young enough and requested often enough.
#[test]
fn repair_is_c2dn_only_and_skips_old_and_unpopular_objects() {
    let reqs = trace();
    let mut cfg = config(Scheme::C2dnNoRebal, 400 << 20);
    // Pieces lost to eviction: objects left whole or not at all have none to repair.
    cfg.evict_together = false;
    cfg.repair = RepairConfig {
        rate: 1 << 30,
        every: 1.0,
        min_requests: 1,
        max_age: 100.0,
        scan: usize::MAX,
    };
    assert_eq!(run_checked(&reqs, &cfg, 5_000).repair.pieces, 0);
    cfg.scheme = Scheme::C2dn;
    let all = run_checked(&reqs, &cfg, 5_000).repair.objects;
    assert!(all > 0);
    cfg.repair.min_requests = 1_000_000;
    assert_eq!(run_checked(&reqs, &cfg, 5_000).repair.objects, 0);
    cfg.repair.min_requests = 1;
    cfg.repair.max_age = 1e-9;
    assert!(run_checked(&reqs, &cfg, 5_000).repair.objects < all / 2);
    // It looks only at the most requested objects of each server.
    cfg.repair.max_age = 100.0;
    cfg.repair.scan = 1;
    let few = run_checked(&reqs, &cfg, 5_000).repair.objects;
    assert!(few > 0 && few < all, "{few} of {all}");
}

/// The result without the fields that say how it was run (time, slicing).
fn outcome(r: &ClusterResult) -> String {
    let mut r = r.clone();
    r.elapsed_s = 0.0;
    r.requests_per_s = 0.0;
    r.rebalance_s = 0.0;
    r.slice_size = 0;
    format!("{r:?}")
}

#[test]
fn slicing_changes_nothing_for_objects_at_most_one_slice_long() {
    let reqs = trace();
    let largest = reqs.iter().map(|r| r.size).max().unwrap();
    for scheme in [Scheme::Rep(2), Scheme::C2dn] {
        let plain = run_checked(&reqs, &config(scheme, 200 << 20), 5_000);
        let mut cfg = config(scheme, 200 << 20);
        cfg.slicing = Slicing::new(largest).unwrap();
        let sliced = run_checked(&reqs, &cfg, 5_000);
        assert_eq!(sliced.slice_requests, sliced.requests);
        assert_eq!(outcome(&plain), outcome(&sliced), "{}", scheme.name());
    }
}

#[test]
fn a_sliced_object_is_served_slice_by_slice_and_spread_over_every_server() {
    // One 64 MiB object requested four times, then a small one: 1 MiB slices.
    let big = 64u64 << 20;
    let mut reqs: Vec<Request> = (0..4)
        .map(|t| Request {
            time: t,
            id: 7,
            size: big,
            next_access: -1,
        })
        .collect();
    reqs.push(Request {
        time: 4,
        id: 8,
        size: 10_000,
        next_access: -1,
    });
    let mut cfg = config(Scheme::C2dn, 1 << 30);
    cfg.slicing = Slicing::new(1 << 20).unwrap();
    let sliced = run_checked(&reqs, &cfg, 1);
    assert_eq!(sliced.requests, 5);
    assert_eq!(sliced.slice_requests, 4 * 64 + 1);
    // The first request and the small object's miss; every slice of the first one missed.
    assert_eq!(sliced.miss_ratio, 2.0 / 5.0);
    assert_eq!(sliced.slice_miss_ratio, 65.0 / 257.0);
    assert_eq!(sliced.origin_bytes, u128::from(big) + 10_000);
    // 64 slices of 4 chunks each on 6 servers: every server writes some, none more than
    // twice the least; unsliced, the object's 4 chunks go to 4 servers only.
    assert!(sliced.bytes_written.iter().all(|&b| b > 0));
    assert!(sliced.write_imbalance < 2.0, "{}", sliced.write_imbalance);
    // 64 cached slices plus the small object, every one whole.
    assert_eq!(sliced.cached_objects, 65);
    assert_eq!(sliced.unprotected_fraction_end, 0.0);
    let whole = run_checked(&reqs, &config(Scheme::C2dn, 1 << 30), 1);
    assert_eq!(whole.slice_requests, 5);
    assert_eq!(whole.origin_bytes, sliced.origin_bytes);
    assert_eq!(whole.bytes_written.iter().filter(|&&b| b == 0).count(), 2);
}

#[test]
fn a_request_that_misses_some_slices_is_a_partial_hit() {
    // 16 slices of 1 MiB on two servers without replicas; server 0 leaves before the second
    // request, so the slices it held miss and the others hit.
    let reqs: Vec<Request> = (0..2)
        .map(|t| Request {
            time: t * 10,
            id: 9,
            size: 16 << 20,
            next_access: -1,
        })
        .collect();
    let mut cfg = config(Scheme::NoRep, 1 << 30);
    cfg.weights = vec![1.0; 2];
    cfg.slicing = Slicing::new(1 << 20).unwrap();
    cfg.window = Window::Seconds(5.0);
    cfg.unavailability.events = vec![FailEvent {
        server: 0,
        start: 5.0,
        end: f64::INFINITY,
    }];
    let r = run_checked(&reqs, &cfg, 1);
    let on_0 = (r.bytes_written[0] >> 20) as u64;
    assert!((1..16).contains(&on_0), "{on_0} slices on server 0");
    assert_eq!(r.slice_requests, 32);
    assert_eq!(r.miss_ratio, 1.0);
    assert_eq!(r.partial_hit_ratio, 0.5);
    assert_eq!(r.slice_miss_ratio, (16 + on_0) as f64 / 32.0);
    assert_eq!(r.origin_bytes, u128::from((16 + on_0) << 20));
}

#[test]
fn evicting_together_leaves_no_object_with_some_pieces_and_keeps_the_mirror() {
    let reqs = trace();
    let mut plain = config(Scheme::C2dn, 200 << 20);
    plain.window = Window::Requests(5_000);
    plain.evict_together = false;
    let mut together = plain.clone();
    together.evict_together = true;
    let a = run_checked(&reqs, &plain, 2_000);
    let b = run_checked(&reqs, &together, 2_000);
    // Without it, FIFOs moving at different speeds leave objects with some of their chunks.
    assert!(a.unprotected_fraction_end > 0.0);
    let partly = |r: &ClusterResult| r.coded_by_chunks[1..4].iter().sum::<u64>();
    assert!(partly(&a) > 0, "{:?}", a.coded_by_chunks);
    // With it, every cached object is whole: no unprotected object, no partial hit.
    assert_eq!(b.unprotected_fraction, 0.0);
    assert_eq!(partly(&b), 0, "{:?}", b.coded_by_chunks);
    assert_eq!(b.partial_hit_bytes, 0);
    assert!(b.coded_by_chunks[4] > 0);
    // Writes are what requests make them: the same bytes are asked for.
    assert_eq!(a.requests, b.requests);
    // And with failures and returns the mirror still matches the caches.
    let mut failing = together.clone();
    failing.unavailability.events = vec![FailEvent {
        server: 1,
        start: 6.0,
        end: 14.0,
    }];
    run_checked(&reqs, &failing, 1_000);
}

/// The defaults (reinsertion and whole-object eviction on) leave no object with some of its
/// chunks at the end, where C2DN's FIFO alone leaves some.
#[test]
fn defaults_leave_no_fragment_behind() {
    let reqs = trace();
    let mut defaults = ClusterConfig::new(Scheme::C2dn, 200 << 20);
    defaults.weights = vec![1.0; 6];
    defaults.slicing = Slicing::OFF;
    defaults.window = Window::Requests(5_000);
    assert!(defaults.evict_together);
    assert_eq!(
        defaults.reinsert,
        Some(ecdn_placement::pieces::REINSERT_AGE)
    );
    let mut fifo = defaults.clone();
    fifo.reinsert = None;
    fifo.evict_together = false;
    let d = run_checked(&reqs, &defaults, 2_000);
    let f = run_checked(&reqs, &fifo, 2_000);
    let partly = |r: &ClusterResult| r.coded_by_chunks[1..4].iter().sum::<u64>();
    assert!(partly(&f) > 0, "{:?}", f.coded_by_chunks);
    assert_eq!(partly(&d), 0, "{:?}", d.coded_by_chunks);
    assert!(d.reinserts > 0);
}

/// Whole-object eviction drops an object when a piece the map assigns leaves its server, not
/// when a copy on another server does (as a parity move leaves the old chunk on its former
/// server): that copy's eviction takes nothing with it.
#[test]
fn a_stale_copys_eviction_takes_nothing_with_it() {
    let mut cfg = config(Scheme::C2dn, 6 * (16 << 20));
    cfg.evict_together = true;
    let mut sim = Sim::new(cfg).unwrap();
    let x = Request {
        id: 7,
        size: 3 << 20,
        ..Request::default()
    };
    sim.request(&x, 0.0);
    let bucket = sim.placement.bucket_of(x.id);
    let (coded, _) = sim.targets(&x, bucket);
    assert!(coded);
    let placed: Vec<(usize, u64)> = sim.pieces.iter().map(|p| (p.server, p.key)).collect();
    let holds =
        |sim: &Sim, (server, key): (usize, u64)| sim.caches[server].eviction().peek(key).is_some();
    assert!(placed.iter().all(|&p| holds(&sim, p)));
    // Fills `server`'s cache until `key` leaves it, then drops what died.
    let evict = |sim: &mut Sim, server: usize, key: u64, base: u64| {
        for i in 0.. {
            if sim.caches[server].eviction().peek(key).is_none() {
                break;
            }
            let filler = Piece {
                server,
                key: base + i,
                size: 1 << 20,
                index: 0,
                parity: None,
            };
            let req = Request {
                id: base + i,
                size: 1 << 20,
                ..Request::default()
            };
            sim.store(filler, &req, false, bucket);
        }
        sim.drop_dying();
    };
    // A copy of chunk 0 on a server the map gives no piece of the object.
    let other = (0..6).find(|s| placed.iter().all(|p| p.0 != *s)).unwrap();
    let copy = Piece {
        server: other,
        key: chunk_id(x.id, 0),
        size: 1 << 20,
        index: 0,
        parity: None,
    };
    assert!(!sim.assigned(other, Dying::Coded(x.id), copy.key));
    assert!(sim.assigned(placed[0].0, Dying::Coded(x.id), placed[0].1));
    sim.store(copy, &x, true, bucket);
    evict(&mut sim, other, chunk_id(x.id, 0), 1 << 40);
    assert!(
        placed.iter().all(|&p| holds(&sim, p)),
        "a stale copy's eviction dropped the object"
    );
    // Its assigned chunk 0 leaving takes the other pieces with it.
    evict(&mut sim, placed[0].0, placed[0].1, 2 << 40);
    assert!(placed.iter().all(|&p| !holds(&sim, p)));
}

/// Resync: reads that write back a lacking piece of an object whose other pieces are near
/// eviction rewrite those too. On a cache small enough that objects lose chunks one at a
/// time, it leaves fewer partial hits and fewer reads of unprotected objects, the protection
/// mirror stays exact through its drops, and an age no piece reaches changes nothing.
#[test]
fn resync_keeps_an_objects_pieces_in_step() {
    let reqs = trace();
    let run = |resync: Option<f64>| {
        let mut cfg = config(Scheme::C2dn, 256 << 20);
        cfg.resync = resync;
        run_checked(&reqs, &cfg, 2_000)
    };
    let off = run(None);
    let on = run(Some(0.5));
    let never = run(Some(1e9));
    assert!(off.partial_hit_ratio > 0.0);
    assert!(on.partial_hit_ratio < off.partial_hit_ratio);
    assert!(on.unprotected_request_fraction < off.unprotected_request_fraction);
    // Its rewrites are writes.
    assert!(on.bytes_written.iter().sum::<u128>() > off.bytes_written.iter().sum::<u128>());
    assert_eq!(never.bytes_written, off.bytes_written);
    assert_eq!(never.partial_hit_ratio, off.partial_hit_ratio);
    let mut bad = config(Scheme::C2dn, 1 << 30);
    bad.resync = Some(f64::NAN);
    assert!(matches!(Sim::new(bad), Err(SimError::Config(_))));
}

/// Reinsertion: a hit that finds every piece near the FIFO's end rewrites them all. It fires
/// on hits only (resync counts the write-backs), in every scheme, keeps the protection mirror
/// exact, and an age no piece reaches changes nothing.
#[test]
fn reinsertion_rewrites_a_hit_objects_pieces_near_the_fifos_end() {
    let reqs = trace();
    let run = |scheme: Scheme, reinsert: Option<f64>| {
        let mut cfg = config(scheme, 256 << 20);
        cfg.reinsert = reinsert;
        run_checked(&reqs, &cfg, 2_000)
    };
    for scheme in [Scheme::C2dn, Scheme::Rep(2)] {
        let off = run(scheme, None);
        let on = run(scheme, Some(0.8));
        let never = run(scheme, Some(1e9));
        assert_eq!(off.reinserts, 0);
        assert!(on.reinserts > 0, "{}", scheme.name());
        assert!(
            on.bytes_written.iter().sum::<u128>() > off.bytes_written.iter().sum::<u128>(),
            "{}",
            scheme.name()
        );
        assert_eq!(never.bytes_written, off.bytes_written);
        assert_eq!(never.reinserts, 0);
    }
}
