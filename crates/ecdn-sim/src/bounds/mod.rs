//! Offline bounds on what any cache of a given size could achieve on a trace with objects of
//! different sizes, from "Practical Bounds on Optimal Caching with Variable Object Sizes"
//! (Berger, Beckmann and Harchol-Balter, SIGMETRICS '18): **PFOO-L** ([`pfoo_lower`],
//! `lower.rs`), a lower bound on the miss ratio no policy, online or offline, goes below, and
//! **PFOO-U** ([`pfoo_upper`], `upper.rs`), the misses of a schedule a cache of that size can
//! run, so an upper bound on OPT's. OPT lies between the two.
//!
//! Both work on *reuse intervals*: between two requests of an object of size *s* (same size
//! at both ends), at times *i* < *j* in requests, the second request can hit only if the
//! object is held all along, which costs *s* · (*j* − *i*) byte-requests of cache space-time.
//! A first request, or one whose object's size changed, is a miss in both; an interval of an
//! object larger than the cache never counts.

use ecdn_trace::Request;

mod flow;
mod load;
mod lower;
mod upper;

pub use lower::pfoo_lower;
pub use upper::{pfoo_upper, pfoo_upper_windowed, WINDOW};

/// A bound at one cache size (PFOO-L's or PFOO-U's).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bound {
    /// Cache size, bytes.
    pub capacity: u64,
    /// The bound on the miss ratio (1 − the bound on the object hit ratio).
    pub miss_ratio: f64,
    /// The bound on the byte miss ratio.
    pub byte_miss_ratio: f64,
}

impl Bound {
    /// The bound at `capacity` for `hits` of `requests` and `hit_bytes` of `bytes`.
    fn of(capacity: u64, hits: f64, requests: f64, hit_bytes: f64, bytes: f64) -> Bound {
        Bound {
            capacity,
            miss_ratio: if requests > 0.0 {
                1.0 - hits / requests
            } else {
                0.0
            },
            byte_miss_ratio: if bytes > 0.0 {
                1.0 - hit_bytes / bytes
            } else {
                0.0
            },
        }
    }
}

/// One reuse interval: the object's size and the requests it spans (`start` < `end`).
#[derive(Clone, Copy, Debug)]
struct Interval {
    size: u64,
    start: usize,
    end: usize,
}

impl Interval {
    fn length(&self) -> u64 {
        (self.end - self.start) as u64
    }
}

/// The reuse intervals of `trace` (its own next accesses are not trusted: they are recomputed,
/// and an interval whose two requests ask for different sizes is dropped).
fn intervals(trace: &[Request]) -> Vec<Interval> {
    let mut last: hashbrown::HashMap<u64, (usize, u64), foldhash::fast::FixedState> =
        hashbrown::HashMap::with_capacity_and_hasher(
            trace.len() / 4,
            foldhash::fast::FixedState::with_seed(0),
        );
    let mut out = Vec::with_capacity(trace.len());
    for (j, r) in trace.iter().enumerate() {
        if let Some((i, size)) = last.insert(r.id, (j, r.size)) {
            if size == r.size {
                out.push(Interval {
                    size,
                    start: i,
                    end: j,
                });
            }
        }
    }
    out
}
