//! AdaptSize's cost on the request path and in memory.
//!
//! A Zipf(0.9) workload over 1M objects with lognormal sizes (median 16 KiB, σ 1.5) runs
//! through an LRU cache with AdaptSize admission and the default window Δ (250,000 requests)
//! for several windows. Every request is timed; the requests that end a window are reported
//! apart from the others (when re-tuning runs on the request path they carry all of it:
//! smoothing, the model's fixed point and the search over c).
//!
//! Memory is measured at the allocator: the live heap bytes freed by dropping the admission
//! policy (statistics, request log, the guard's shadow cache), divided by the objects it
//! tracks. Measured with and without the guard, in synchronous mode (in background mode the
//! statistics are freed by the solver thread, after the drop returns).
//!
//! `cargo bench -p ecdn-policy --bench retune [-- WINDOWS] [--sync-only]`

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Instant;

use ecdn_policy::admission::AdaptSize;
use ecdn_policy::eviction::Lru;
use ecdn_policy::spec::{EvictionKind, DEFAULT_SMOOTHING, DEFAULT_WINDOW};
use ecdn_policy::{Admission, Eviction, Request};
use ecdn_trace::gen::{Rng, SizeDist, Zipf};

/// The system allocator, counting live bytes.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

fn main() {
    let windows: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .and_then(|a| a.parse().ok())
        .unwrap_or(6);
    let objects = 1_000_000u64;
    let zipf = Zipf::new(objects, 0.9).expect("zipf");
    let sizes_dist = SizeDist::LogNormal {
        median: 16.0 * 1024.0,
        sigma: 1.5,
    };
    let mut rng = Rng::new(7);
    let sizes: Vec<u64> = (0..objects).map(|_| sizes_dist.sample(&mut rng)).collect();
    println!(
        "Zipf(0.9) over {objects} objects, lognormal(16KiB, 1.5) sizes, window {DEFAULT_WINDOW}, \
         {windows} windows, LRU + AdaptSize"
    );
    let modes: &[bool] = if std::env::args().any(|a| a == "--sync-only") {
        &[false]
    } else {
        &[false, true]
    };
    for &background in modes {
        for capacity in [64u64 << 20, 1 << 30] {
            for guard in [true, false] {
                run(capacity, guard, background, windows, &zipf, &sizes);
            }
        }
    }
}

fn run(capacity: u64, guard: bool, background: bool, windows: usize, zipf: &Zipf, sizes: &[u64]) {
    let mut lru = Lru::new(capacity);
    let mut evicted = Vec::new();
    let mut adaptsize = AdaptSize::new(
        capacity,
        DEFAULT_WINDOW,
        DEFAULT_SMOOTHING,
        ecdn_policy::admission::adaptsize::DEFAULT_HORIZON,
        guard.then_some(EvictionKind::Lru),
        1,
    );
    if background {
        assert!(adaptsize.tune_in_background());
    }
    let mut window_end = Vec::new();
    let mut others = Vec::new();
    let mut rng = Rng::new(11);
    for i in 1..=(windows * DEFAULT_WINDOW) as u64 {
        let id = zipf.sample(&mut rng);
        let req = Request {
            time: i,
            id,
            size: sizes[id as usize],
            next_access: -1,
        };
        let t = Instant::now();
        // What `Cache::access` does, with the two halves apart.
        let hit = lru.touch(id, i, &mut evicted) == Some(req.size);
        adaptsize.observe(&req, hit);
        if !hit && req.size <= capacity && adaptsize.admit(&req) {
            lru.insert(id, req.size, i, &mut evicted);
            evicted.clear();
        }
        let ns = t.elapsed().as_nanos() as u64;
        if i % DEFAULT_WINDOW as u64 == 0 {
            window_end.push(ns);
        } else {
            others.push(ns);
        }
    }
    others.sort_unstable();
    let q = |v: &[u64], p: f64| v[((v.len() - 1) as f64 * p) as usize];
    let tracked = adaptsize.tracked();
    let c = adaptsize.parameter().unwrap_or(f64::NAN);
    let held = live();
    drop(adaptsize);
    let memory = if background {
        "-".to_string()
    } else {
        let freed = held - live();
        format!(
            "{:.1} B/tracked ({freed} B freed by dropping the policy)",
            freed as f64 / tracked.max(1) as f64
        )
    };
    println!(
        "{} capacity {:>6} guard {:<3}: c {:>9.0}, tracked {:>7}, {memory}; \
         window-end requests (ms): {}; other requests: p50 {} ns, p99.9 {} ns, max {} µs",
        if background {
            "background "
        } else {
            "synchronous"
        },
        ecdn_trace::units::format_size(capacity),
        if guard { "on" } else { "off" },
        c,
        tracked,
        window_end
            .iter()
            .map(|ns| format!("{:.2}", *ns as f64 / 1e6))
            .collect::<Vec<_>>()
            .join(" "),
        q(&others, 0.5),
        q(&others, 0.999),
        others.last().copied().unwrap_or(0) / 1000,
    );
}
