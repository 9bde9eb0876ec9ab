//! Model-driven traces: requests whose LRU hit-ratio curves follow a traffic class's
//! popularity-size footprint descriptor (pFD), by the method of JEDI (Sabnis & Sitaraman,
//! "JEDI: model-driven trace generation for cache simulations", IMC 2022) and its predecessor
//! TRAGEN (IMC 2021).
//!
//! # Method
//!
//! The generator keeps the *future stack*: a sequence of objects in the order in which they will
//! next be requested (a counted B+tree of byte sizes, `gen/byte_stack.rs`). Each object carries its popularity —
//! how many requests it receives in all — drawn with its size from the class's joint
//! popularity-size distribution. Each step:
//!
//! 1. the object at the front is requested;
//! 2. if it has requests left, a stack distance *d* is drawn from the descriptor's distribution
//!    for its (popularity, size) cell and the object is re-inserted behind the objects that
//!    occupy the first *d* bytes of the stack. Those objects are all requested before it again
//!    (objects re-inserted ahead of it are among them, new objects join at the back), so the
//!    bytes of the distinct objects requested in between — its LRU stack distance — are *d*.
//!    Where *d* falls inside an object, that object goes ahead with probability (*d* − its
//!    start) / its size, so that the distance is *d* in expectation: always rounding down (to
//!    the object's start) put every distance that fell inside a large object in front of it, and
//!    on eu-7 made 75% of the requests' distances fall below 200 KB where 58% were drawn
//!    (randomized: 60%);
//! 3. otherwise it leaves, and fresh objects join at the back until the stack again holds the
//!    largest stack distance of the descriptor.
//!
//! An LRU cache of *C* bytes therefore hits exactly the requests whose drawn *d* is below *C*
//! (less the object's own size), the pFD's own prediction ([`Footprint::lru_hit_ratio`]). The
//! popularity of each (popularity, size) cell fixes how often its objects appear, so the
//! object-level properties follow too.
//!
//! **Within a bin.** The descriptors record stack distances in bins (200 MB wide for most
//! classes, 200 KB for eu-7). JEDI re-inserts at the bin's lower edge, so every request of the
//! first bin — 52–65% of all requests in these classes — becomes an immediate repeat of the
//! request before it (its published d-2 trace: 63% of requests repeat the previous one, and no
//! request re-occurs 2–127 requests later). We draw *d* within its bin instead
//! ([`WithinBin::Uniform`], the default): uniformly, except in the first bin, where a popular
//! object's distance follows its popularity ([`Footprint::first_bin_mean`]). At the bin edges
//! the curve is the same; between them it is no longer a step. [`WithinBin::Floor`] reproduces
//! JEDI.
//!
//! **Warm-up.** The stack starts with fresh objects only, so the first requests are not yet in
//! steady state; like JEDI (10 M requests) the generator discards a warm-up before the trace.
//!
//! **Time.** With a `request_rate.txt`, timestamps follow its requests per interval, cycled;
//! else the mean rate of the original trace, or a given rate.
//!
//! Memory is the stack: one 16-byte entry (plus tree overhead) per object in it, i.e. the
//! largest stack distance divided by the mean object size (d-2: about 0.6 M objects; eu-3,
//! whose stack distances reach 10 TB: about 16 M).

pub mod pfd;

pub use pfd::{Cell, Footprint, Header, PopularityClass, SizeUnit, WithinBin};

use super::byte_stack::ByteStack;
use super::popularity::Discrete;
use super::{stream, STREAM_IDS, STREAM_POPULARITY};
use crate::rng::{mix64, Rng};
use crate::{Request, RequestReader, TraceError};

/// Everything besides the descriptor that determines a footprint trace.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FootprintConfig {
    /// Requests in the trace (after the warm-up).
    pub requests: u64,
    /// Requests generated and discarded before the trace starts.
    pub warmup: u64,
    /// Seed of all random choices.
    pub seed: u64,
    /// Where stack distances are placed within their bin.
    pub within_bin: WithinBin,
    /// Requests per second; `None`: the descriptor's `request_rate.txt`, else its mean rate.
    pub rate: Option<f64>,
}

impl Default for FootprintConfig {
    /// 10 M requests after JEDI's 10 M warm-up, seed 1, uniform within bins.
    fn default() -> Self {
        FootprintConfig {
            requests: 10_000_000,
            warmup: 10_000_000,
            seed: 1,
            within_bin: WithinBin::Uniform,
            rate: None,
        }
    }
}

/// An object in the stack: 16 bytes.
#[derive(Clone, Copy, Debug)]
struct Live {
    id: u64,
    /// Requests still to come.
    left: u32,
    /// Its cell in [`FootprintGenerator::cells`] (unused when `left` starts at 1).
    cell: u32,
}

/// One kind of new object: a (popularity, size) pair of the joint distribution.
#[derive(Clone, Copy, Debug)]
struct Kind {
    popularity: u32,
    size: u32,
    cell: u32,
}

/// The stack-distance distribution of one cell.
struct CellSampler {
    /// Bin index per outcome.
    bins: Vec<u32>,
    pick: Discrete,
    /// [`Footprint::first_bin_mean`].
    first_mean: Option<f64>,
}

/// Timestamps: requests per second, per interval, cycled.
struct Clock {
    /// (interval length in seconds, requests per second).
    schedule: Vec<(f64, f64)>,
    at: usize,
    /// Seconds since the start, and the end of the current interval.
    now: f64,
    interval_end: f64,
}

impl Clock {
    fn tick(&mut self) -> u64 {
        let t = self.now as u64;
        self.now += 1.0 / self.schedule[self.at].1;
        if self.now >= self.interval_end && self.schedule.len() > 1 {
            self.at = (self.at + 1) % self.schedule.len();
            self.interval_end += self.schedule[self.at].0;
        }
        t
    }
}

/// A synthetic trace following a [`Footprint`]; see the [module docs](self). Requests carry
/// `next_access = -1`.
pub struct FootprintGenerator {
    cfg: FootprintConfig,
    stack: ByteStack<Live>,
    /// Bytes the stack is kept at (the largest stack distance).
    depth: u64,
    bins: Vec<u64>,
    cells: Vec<CellSampler>,
    kinds: Vec<Kind>,
    new_kind: Discrete,
    rng: Rng,
    id_rng_key: u64,
    objects: u64,
    index: u64,
    clock: Clock,
}

/// The cell of `cells` (sorted by popularity, then size) nearest to (popularity, size): the
/// nearest popularity on a log scale, then the nearest size of that popularity.
fn nearest_cell(cells: &[Cell], popularity: u64, size: u64) -> usize {
    let dist = |a: u64, b: u64| ((a.max(1) as f64).ln() - (b.max(1) as f64).ln()).abs();
    let by_pop = cells.partition_point(|c| c.popularity < popularity);
    let mut best_pop = cells[by_pop.min(cells.len() - 1)].popularity;
    if by_pop > 0 && dist(cells[by_pop - 1].popularity, popularity) < dist(best_pop, popularity) {
        best_pop = cells[by_pop - 1].popularity;
    }
    let lo = cells.partition_point(|c| c.popularity < best_pop);
    let hi = cells.partition_point(|c| c.popularity <= best_pop);
    (lo..hi)
        .min_by(|&a, &b| dist(cells[a].size, size).total_cmp(&dist(cells[b].size, size)))
        .expect("a popularity present in the cells has at least one cell")
}

impl FootprintGenerator {
    /// Builds the samplers and the initial stack, then runs the warm-up.
    pub fn new(fp: &Footprint, cfg: FootprintConfig) -> Result<FootprintGenerator, TraceError> {
        if let Some(r) = cfg.rate {
            if !(r.is_finite() && r > 0.0) {
                return Err(TraceError::Config(format!(
                    "request rate must be a positive number, got {r}"
                )));
            }
        }
        if fp.cells.is_empty() {
            return Err(TraceError::Config(format!(
                "{}: the descriptor has no re-requests",
                fp.dir.display()
            )));
        }
        let cells = fp
            .cells
            .iter()
            .map(|c| CellSampler {
                bins: c.bins.iter().map(|&(b, _)| b).collect(),
                pick: Discrete::new(&c.bins.iter().map(|&(_, p)| p).collect::<Vec<_>>()),
                first_mean: fp.first_bin_mean(c),
            })
            .collect();
        let mut kinds = Vec::new();
        let mut weights = Vec::new();
        for class in &fp.popularity {
            let popularity = u32::try_from(class.popularity).map_err(|_| {
                TraceError::Config(format!("popularity {} too large", class.popularity))
            })?;
            for &(size, w) in &class.sizes {
                if w <= 0.0 {
                    continue;
                }
                let cell = if popularity > 1 {
                    nearest_cell(&fp.cells, class.popularity, size) as u32
                } else {
                    u32::MAX
                };
                kinds.push(Kind {
                    popularity,
                    size: size as u32,
                    cell,
                });
                weights.push(w);
            }
        }
        let schedule: Vec<(f64, f64)> = match cfg.rate {
            Some(r) => vec![(1.0, r)],
            None if !fp.request_rate.is_empty() => fp
                .request_rate
                .iter()
                .map(|&(len, n)| (len as f64, n as f64 / len as f64))
                .collect(),
            None => {
                let span = (fp.header.end - fp.header.start).max(1) as f64;
                vec![(1.0, fp.header.requests / span)]
            }
        };
        let interval_end = schedule[0].0;
        let mut g = FootprintGenerator {
            cfg,
            stack: ByteStack::new(),
            depth: fp.max_stack_distance(),
            bins: fp.bins.clone(),
            cells,
            kinds,
            new_kind: Discrete::new(&weights),
            rng: stream(cfg.seed, STREAM_POPULARITY),
            id_rng_key: stream(cfg.seed, STREAM_IDS).next_u64(),
            objects: 0,
            index: 0,
            clock: Clock {
                schedule,
                at: 0,
                now: 0.0,
                interval_end,
            },
        };
        g.refill();
        for _ in 0..cfg.warmup {
            g.step();
        }
        Ok(g)
    }

    /// Objects in the stack now.
    pub fn stack_objects(&self) -> usize {
        self.stack.len()
    }

    /// Requests not yet generated.
    pub fn remaining(&self) -> u64 {
        self.cfg.requests - self.index
    }

    /// Pushes fresh objects at the back until the stack holds the largest stack distance.
    fn refill(&mut self) {
        while self.stack.bytes() < self.depth || self.stack.is_empty() {
            let k = self.kinds[self.new_kind.sample(&mut self.rng)];
            let id = mix64(self.id_rng_key ^ self.objects);
            self.objects += 1;
            self.stack.push_back(
                k.size,
                Live {
                    id,
                    left: k.popularity,
                    cell: k.cell,
                },
            );
        }
    }

    /// A stack distance for `cell`, in bytes.
    #[inline]
    fn stack_distance(&mut self, cell: u32) -> u64 {
        let c = &self.cells[cell as usize];
        let b = c.bins[c.pick.sample(&mut self.rng)] as usize;
        let lo = self.bins[b];
        match self.cfg.within_bin {
            WithinBin::Floor => lo,
            WithinBin::Uniform => {
                let hi = self.bins.get(b + 1).copied().unwrap_or(lo);
                if let (0, Some(m)) = (lo, c.first_mean) {
                    // Exponential with mean m truncated to [0, hi), by inversion.
                    let u = self.rng.f64();
                    let d = -m * (u * (-(hi as f64) / m).exp_m1()).ln_1p();
                    (d as u64).min(hi.saturating_sub(1))
                } else if hi > lo {
                    lo + self.rng.below(hi - lo)
                } else {
                    lo
                }
            }
        }
    }

    /// Requests the object at the front of the stack and puts it back (or retires it).
    #[inline]
    fn step(&mut self) -> (u64, u32) {
        let (size, mut o) = self.stack.pop_front().expect("the stack is never empty");
        o.left -= 1;
        if o.left > 0 {
            let d = self.stack_distance(o.cell);
            let coin = self.rng.next_u64();
            self.stack.insert_near(d, size, o, coin);
        } else {
            self.refill();
        }
        (o.id, size)
    }
}

impl Iterator for FootprintGenerator {
    type Item = Request;

    #[inline]
    fn next(&mut self) -> Option<Request> {
        if self.index >= self.cfg.requests {
            return None;
        }
        self.index += 1;
        let (id, size) = self.step();
        Some(Request {
            time: self.clock.tick(),
            id,
            size: size as u64,
            next_access: -1,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let r = usize::try_from(self.remaining()).unwrap_or(usize::MAX);
        (r, Some(r))
    }
}

impl RequestReader for FootprintGenerator {
    fn read_batch(&mut self, buf: &mut Vec<Request>, max: usize) -> Result<usize, TraceError> {
        buf.clear();
        let n = (max as u64).min(self.remaining()) as usize;
        buf.extend(self.by_ref().take(n));
        Ok(n)
    }
}
