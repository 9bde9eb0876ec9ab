use super::*;
use crate::eviction::Lru;
use crate::Eviction;

/// A skewed workload: ids drawn from a power law over `objects`, sizes fixed per id, spread
/// over three orders of magnitude.
fn workload(n: usize, objects: u64, seed: u64) -> Vec<Request> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|i| {
            let id = (objects as f64 * rng.f64().powi(3)) as u64;
            let size = 100 + (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) % 100_000;
            Request {
                time: i as u64,
                id,
                size,
                next_access: -1,
            }
        })
        .collect()
}

/// One request through an LRU cache with `a` as admission; `between` runs after the
/// lookup, before the admission decision. Returns whether it hit.
fn step(lru: &mut Lru, a: &mut AdaptSize, req: &Request, now: u64, between: bool) -> bool {
    let hit = lru.touch(req.id, now, &mut Vec::new()) == Some(req.size);
    a.observe(req, hit);
    if between {
        assert!(
            a.settle(Duration::from_secs(30)),
            "the solver did not catch up"
        );
    }
    if !hit && req.size <= lru.capacity() && a.admit(req) {
        let mut evicted = Vec::new();
        lru.insert(req.id, req.size, now, &mut evicted);
    }
    hit
}

#[test]
fn background_mode_chooses_the_synchronous_c() {
    let capacity = 2 << 20;
    let window = 3_000;
    let new = || {
        AdaptSize::new(
            capacity,
            window,
            0.3,
            DEFAULT_HORIZON,
            Some(EvictionKind::Lru),
            5,
        )
    };
    let (mut sync, mut bg) = (new(), new());
    assert!(bg.tune_in_background() && bg.is_background() && !sync.is_background());
    // A second call keeps the running solver.
    assert!(bg.tune_in_background() && bg.is_background());
    let (mut lru_s, mut lru_b) = (Lru::new(capacity), Lru::new(capacity));
    let (mut hits_s, mut hits_b) = (0, 0);
    let mut cs = Vec::new();
    for (i, req) in workload(8 * window, 20_000, 1).iter().enumerate() {
        let now = i as u64 + 1;
        hits_s += step(&mut lru_s, &mut sync, req, now, false) as u64;
        // Let the solver publish before the admission decision that ends a window, so
        // both caches take the same decisions with the same c.
        let ends = bg.seen + 1 >= bg.window_now();
        hits_b += step(&mut lru_b, &mut bg, req, now, ends) as u64;
        if ends {
            assert_eq!(sync.windows, bg.windows);
            assert_eq!(
                sync.model_c().to_bits(),
                bg.model_c().to_bits(),
                "window {}: c {} vs {}",
                bg.windows,
                sync.model_c(),
                bg.model_c()
            );
            assert_eq!(sync.last_prediction(), bg.last_prediction());
            assert_eq!(sync.parameter(), bg.parameter());
            assert_eq!(sync.tracked(), bg.tracked());
            cs.push(sync.model_c());
        }
    }
    assert_eq!(hits_s, hits_b);
    // Not a vacuous comparison: the model chose finite values of c, and more than one.
    assert!(cs.iter().any(|c| c.is_finite()), "{cs:?}");
    cs.dedup();
    assert!(cs.len() > 2, "{cs:?}");
}

#[test]
fn the_request_path_does_not_wait_for_a_solve() {
    let window = 2_000;
    let mut a = AdaptSize::new(1 << 20, window, 0.3, DEFAULT_HORIZON, None, 3);
    let (open, gate) = mpsc::channel();
    assert!(a.start_background(Some(gate)));
    let reqs = workload(4 * window, 10_000, 2);
    let (done_tx, done_rx) = mpsc::channel();
    // Seven windows (the warm-up ramp's 125, 250, 500 and 1,000 requests, then three of Δ);
    // the first solve is held at the gate the whole time, so MAX_PENDING are handed over.
    std::thread::spawn(move || {
        let mut lru = Lru::new(1 << 20);
        for (i, req) in reqs.iter().enumerate() {
            step(&mut lru, &mut a, req, i as u64 + 1, false);
        }
        let _ = done_tx.send(a);
    });
    let mut a = done_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the request path waited for the held solve");
    assert_eq!(a.parameter(), Some(f64::INFINITY), "nothing solved yet");
    assert!(!a.settle(Duration::from_millis(50)));
    // Let the held solve go, and the one after it: the windows that queued behind the first
    // are merged together and solved once (which windows join the first solve depends on
    // timing).
    open.send(()).unwrap();
    open.send(()).unwrap();
    assert!(a.settle(Duration::from_secs(30)));
    let Tuning::Background(bg) = &a.tuning else {
        unreachable!()
    };
    assert_eq!(bg.published.windows.load(Ordering::Acquire), 4);
    let solutions = bg.published.solutions.load(Ordering::Acquire);
    assert!((1..=2).contains(&solutions), "{solutions} solves");
    assert!(a.parameter().unwrap().is_finite(), "c {:?}", a.parameter());
}

#[test]
fn windows_are_dropped_while_the_solver_is_far_behind() {
    let window = 500;
    let mut a = AdaptSize::new(1 << 20, window, 0.3, DEFAULT_HORIZON, None, 6);
    let (open, gate) = mpsc::channel();
    assert!(a.start_background(Some(gate)));
    let mut lru = Lru::new(1 << 20);
    for (i, req) in workload(10 * window, 5_000, 4).iter().enumerate() {
        step(&mut lru, &mut a, req, i as u64 + 1, false);
    }
    let Tuning::Background(bg) = &a.tuning else {
        unreachable!()
    };
    // The first window is merged and held at the gate before its solve, so it still counts
    // as pending: MAX_PENDING windows are handed over, the others dropped. The warm-up ramp
    // (31, 62, 125 and 250 requests, then 500) makes 13 windows of the 5,000 requests.
    assert_eq!(a.windows, 13);
    assert_eq!(bg.handed, MAX_PENDING);
    assert_eq!(bg.dropped, 13 - MAX_PENDING);
    for _ in 0..MAX_PENDING {
        open.send(()).unwrap();
    }
    assert!(a.settle(Duration::from_secs(30)));
    assert!(a.parameter().is_some());
}

#[test]
fn the_solver_thread_stops_when_the_policy_is_dropped() {
    let window = 1_000;
    let mut a = AdaptSize::new(1 << 20, window, 0.3, DEFAULT_HORIZON, None, 4);
    assert!(a.tune_in_background());
    let mut lru = Lru::new(1 << 20);
    for (i, req) in workload(2 * window, 5_000, 3).iter().enumerate() {
        step(&mut lru, &mut a, req, i as u64 + 1, false);
    }
    assert!(a.settle(Duration::from_secs(30)));
    let Tuning::Background(bg) = &a.tuning else {
        unreachable!()
    };
    let published = bg.published.clone();
    assert_eq!(Arc::strong_count(&published), 3, "policy, thread and test");
    drop(a);
    let deadline = Instant::now() + Duration::from_secs(30);
    while Arc::strong_count(&published) > 1 {
        assert!(
            Instant::now() < deadline,
            "the solver thread is still running"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn an_admission_after_the_window_end_marks_the_object_cached() {
    // Δ = 64: the warm-up ramp's first window is 4 requests, its second 8.
    let mut a = AdaptSize::new(1 << 20, 64, 0.3, DEFAULT_HORIZON, None, 1);
    let req = |id| Request {
        time: 0,
        id,
        size: 100,
        next_access: -1,
    };
    for id in 1..=4 {
        a.observe(&req(id), false);
    }
    // The 4th request ended the window; c is still infinite, so it is admitted.
    assert!(a.admit(&req(4)));
    let cached = |a: &AdaptSize, id: u64| {
        let Tuning::Synchronous(t) = &a.tuning else {
            unreachable!()
        };
        t.objects
            .iter()
            .find(|o| o.id == id)
            .map(|o| o.last & CACHED != 0)
    };
    assert_eq!(cached(&a, 4), Some(false));
    for id in 5..=12 {
        a.observe(&req(id), false);
    }
    assert_eq!(cached(&a, 4), Some(true));
    assert_eq!(cached(&a, 3), Some(false));
}

#[test]
fn the_first_c_comes_after_a_sixteenth_of_the_window() {
    let window = 16_000;
    let mut a = AdaptSize::new(2 << 20, window, 0.3, DEFAULT_HORIZON, None, 2);
    let mut lru = Lru::new(2 << 20);
    let reqs = workload(4 * window, 20_000, 5);
    let mut ends = Vec::new();
    for (i, req) in reqs.iter().enumerate() {
        let before = a.windows;
        step(&mut lru, &mut a, req, i as u64 + 1, false);
        if a.windows > before {
            ends.push(i + 1);
        }
        if i + 1 == window / 16 {
            assert!(a.parameter().unwrap().is_finite(), "no c after Δ/16");
        }
    }
    // Windows of Δ/16, Δ/8, Δ/4 and Δ/2, then Δ.
    let w = window;
    let want = [w / 16, w * 3 / 16, w * 7 / 16, w * 15 / 16, w * 31 / 16];
    assert_eq!(&ends[..5], &want);
    assert!(
        ends.windows(2).skip(4).all(|p| p[1] - p[0] == w),
        "{ends:?}"
    );
    assert_eq!(a.overruled(), None);
}

#[test]
fn statistics_stay_under_40_bytes_per_tracked_object() {
    assert_eq!(std::mem::size_of::<Tracked>(), 28);
    assert_eq!(std::mem::size_of::<Logged>(), 12);
    let mut a = AdaptSize::new(4 << 20, 20_000, 0.3, DEFAULT_HORIZON, None, 1);
    let mut lru = Lru::new(4 << 20);
    for (i, req) in workload(100_000, 200_000, 9).iter().enumerate() {
        step(&mut lru, &mut a, req, i as u64 + 1, false);
    }
    let Tuning::Synchronous(t) = &a.tuning else {
        unreachable!()
    };
    let per_object = t.heap_bytes() as f64 / t.objects.len() as f64;
    assert!(t.objects.len() > 10_000, "{}", t.objects.len());
    assert!(per_object < 40.0, "{per_object} B per tracked object");
}
