//! PFOO-U: an upper bound on the fewest misses (and missed bytes) of any cache of a given
//! size, from a schedule that such a cache can run (Berger, Beckmann and Harchol-Balter,
//! SIGMETRICS '18, §5: "practical flow-based offline optimal", upper bound).
//!
//! A schedule is a set of reuse intervals the cache holds in full: their objects stay from the
//! first request to the second, which hits. It is feasible when, between any two requests, the
//! intervals held there add up to at most the capacity ([`Load`]); its misses are then what
//! a real cache would miss, so OPT misses no more.
//!
//! The schedule is built in the order PFOO-L ranks the intervals (by space-time,
//! `size × length`, for hits; by length for hit bytes): every interval, in that order, that
//! fits beside those taken before (a greedy schedule, checked against the capacity at every
//! instant). As the paper's PFOO-U, it can then be improved in overlapping windows of that
//! order, each decided by FOO's min-cost flow (`flow.rs`) with the rest of the schedule fixed
//! (`ecdn sim bounds --window N`). The differences from the paper's, each keeping the schedule
//! feasible:
//!
//! * The windows start from the greedy schedule, and a window's new choice replaces the old
//!   one only if it is worth more.
//! * The flow's choice is fractional; an interval counts as held only if all its bytes are.
//!   The window's other intervals are then tried again one by one, in order, where they fit
//!   whole beside those.
//! * Windows whose intervals are all held already are skipped: no choice is worth more.
//!
//! The windows are off by default: measured, they do not pay. On the CloudPhysics trace,
//! windows of 64 intervals left the bound unchanged at four decimals at 1, 16 and 256 MiB,
//! and windows of 512 lowered it by 0.0002 at 16 and 256 MiB, for 20 and 100 times the time;
//! on d-2 (2M requests), windows of 64 changed nothing at four decimals for 5 times the time
//! (BENCHMARKS.md, "PFOO-U"). The greedy schedule is already within 0.003 of PFOO-L on d-2.
//! On small traces they do help: in the exhaustive test's 2,000 random traces of up to 14
//! requests, the greedy schedule's misses were OPT's in 1,979 and its missed bytes in 1,883;
//! with windows of 64, in 1,988 and 1,907.
//!
//! Between this bound and PFOO-L lies OPT; how far apart they are says how much either could
//! still be off.

use super::flow::{cached_bytes, Item};
use super::load::Load;
use super::{intervals, Bound, Interval};
use ecdn_trace::Request;

/// Intervals per window of the flow by default (0: the greedy schedule alone; a window of N
/// decides N intervals at once, consecutive windows overlapping by half).
pub const WINDOW: usize = 0;

/// What a schedule is judged by: hits, or hit bytes.
#[derive(Clone, Copy, Debug)]
enum Goal {
    Hits,
    Bytes,
}

impl Goal {
    fn worth(self, iv: &Interval) -> f64 {
        match self {
            Goal::Hits => 1.0,
            Goal::Bytes => iv.size as f64,
        }
    }
}

/// PFOO-U for each of `capacities` over `trace`.
pub fn pfoo_upper(trace: &[Request], capacities: &[u64]) -> Vec<Bound> {
    pfoo_upper_windowed(trace, capacities, WINDOW)
}

/// [`pfoo_upper`] with `window` intervals per window of the flow (0 or 1: the greedy schedule
/// alone).
pub fn pfoo_upper_windowed(trace: &[Request], capacities: &[u64], window: usize) -> Vec<Bound> {
    let all = intervals(trace);
    let n = trace.len() as f64;
    let total_bytes: f64 = trace.iter().map(|r| r.size as f64).sum();
    // One schedule per capacity and goal, on as many threads as there are cores (each holds
    // its own occupancy tree: 32 bytes per request).
    let jobs: Vec<(u64, Goal)> = capacities
        .iter()
        .flat_map(|&c| [(c, Goal::Hits), (c, Goal::Bytes)])
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let worth = std::sync::Mutex::new(vec![0.0f64; jobs.len()]);
    let threads = std::thread::available_parallelism()
        .map_or(1, |p| p.get())
        .min(jobs.len());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let job = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&(capacity, goal)) = jobs.get(job) else {
                    break;
                };
                let mut usable: Vec<Interval> = all
                    .iter()
                    .copied()
                    .filter(|iv| iv.size <= capacity)
                    .collect();
                match goal {
                    Goal::Hits => usable.sort_by_key(|iv| {
                        (u128::from(iv.size) * u128::from(iv.length()), iv.start)
                    }),
                    Goal::Bytes => usable.sort_by_key(|iv| (iv.length(), iv.start)),
                }
                let w = schedule(&usable, trace.len(), capacity, goal, window);
                worth.lock().unwrap_or_else(|e| e.into_inner())[job] = w;
            });
        }
    });
    let worth = worth.into_inner().unwrap_or_else(|e| e.into_inner());
    capacities
        .iter()
        .enumerate()
        .map(|(i, &capacity)| {
            let (hits, hit_bytes) = (worth[2 * i], worth[2 * i + 1]);
            Bound::of(capacity, hits, n, hit_bytes, total_bytes)
        })
        .collect()
}

/// The worth of the schedule built over `order` (best first) for a cache of `capacity` bytes
/// and a trace of `len` requests, with windows of `window` intervals.
fn schedule(order: &[Interval], len: usize, capacity: u64, goal: Goal, window: usize) -> f64 {
    let capacity = capacity as i64;
    let mut load = Load::new(len);
    let mut held = vec![false; order.len()];
    let fits = |load: &Load, iv: &Interval| load.max(iv.start, iv.end) + iv.size as i64 <= capacity;
    // The greedy schedule.
    for (k, iv) in order.iter().enumerate() {
        if fits(&load, iv) {
            load.add(iv.start, iv.end, iv.size as i64);
            held[k] = true;
        }
    }
    // The windows.
    let (size, step) = (window, (window / 2).max(1));
    let mut first = if size > 1 { 0 } else { order.len() };
    while first < order.len() {
        let window = first..(first + size).min(order.len());
        first += step;
        if held[window.clone()].iter().all(|&h| h) {
            continue;
        }
        let before: f64 = window
            .clone()
            .filter(|&k| held[k])
            .map(|k| goal.worth(&order[k]))
            .sum();
        for k in window.clone().filter(|&k| held[k]) {
            let iv = &order[k];
            load.add(iv.start, iv.end, -(iv.size as i64));
        }
        let chosen = choose(&order[window.clone()], &load, capacity, goal);
        let after: f64 = chosen
            .iter()
            .zip(window.clone())
            .filter(|(&c, _)| c)
            .map(|(_, k)| goal.worth(&order[k]))
            .sum();
        let keep_new = after > before;
        for (i, k) in window.enumerate() {
            if keep_new {
                held[k] = chosen[i];
            }
            if held[k] {
                let iv = &order[k];
                load.add(iv.start, iv.end, iv.size as i64);
            }
        }
    }
    held.iter()
        .zip(order)
        .filter(|(&h, _)| h)
        .map(|(_, iv)| goal.worth(iv))
        .sum()
}

/// The window's choice with the rest of the schedule in `load`: the intervals the flow holds
/// whole, then the others that still fit whole beside them, in order.
fn choose(window: &[Interval], load: &Load, capacity: i64, goal: Goal) -> Vec<bool> {
    // The window's request times, in order, as the flow's nodes.
    let mut times: Vec<usize> = window.iter().flat_map(|iv| [iv.start, iv.end]).collect();
    times.sort_unstable();
    times.dedup();
    let node = |t: usize| times.binary_search(&t).expect("a window time");
    let free: Vec<u64> = times
        .windows(2)
        .map(|w| (capacity - load.max(w[0], w[1])).max(0) as u64)
        .collect();
    let items: Vec<Item> = window
        .iter()
        .map(|iv| Item {
            from: node(iv.start),
            to: node(iv.end),
            size: iv.size,
            worth: goal.worth(iv),
        })
        .collect();
    let cached = cached_bytes(&free, &items);
    let mut chosen: Vec<bool> = cached
        .iter()
        .zip(window)
        .map(|(&c, iv)| c == iv.size)
        .collect();
    // The whole ones take their room; the partial ones are tried again where they fit whole.
    let mut room = vec![0i64; free.len()];
    let fits = |room: &[i64], it: &Item| {
        (it.from..it.to).all(|p| room[p] + it.size as i64 <= free[p] as i64)
    };
    for (it, _) in items.iter().zip(&chosen).filter(|(_, &c)| c) {
        room[it.from..it.to]
            .iter_mut()
            .for_each(|r| *r += it.size as i64);
    }
    for (k, it) in items.iter().enumerate() {
        if !chosen[k] && fits(&room, it) {
            room[it.from..it.to]
                .iter_mut()
                .for_each(|r| *r += it.size as i64);
            chosen[k] = true;
        }
    }
    chosen
}
