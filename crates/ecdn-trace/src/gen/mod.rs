//! Deterministic synthetic workloads.
//!
//! A [`Generator`] produces requests one at a time ([`Iterator`]) or in batches
//! ([`RequestReader`]) from a [`GenConfig`]. Memory is O(objects) for the popularity and size
//! tables (16 bytes per object) and constant in the number of requests, so traces of tens of
//! millions of requests stream straight to disk.
//!
//! # Model
//!
//! * **Popularity**: Zipf(α) over `objects` objects — the object of popularity rank `k`
//!   (1-based) is requested with probability ∝ `k^-α`; α = 0 is uniform, α = 1 works like any
//!   other α. Sampling uses Walker's alias method (Vose's construction): O(1) per request (two
//!   random numbers and one table lookup), exact up to the 2⁻³² resolution of the stored
//!   probabilities.
//! * **Object ids** are scrambled: `id = mix(seed-derived key, class tag << 56 | rank)` with a
//!   bijective 64-bit mixer, so ids look random, never collide, and are the same for the same
//!   seed.
//! * **Sizes** are fixed per object and drawn once from a [`SizeDist`] (see there for the
//!   parameterizations), clamped to `[1, u32::MAX]` bytes so that every trace can be written as
//!   oracleGeneral.
//! * **Arrivals** are Poisson: exponential inter-arrival times at `rate` requests per second,
//!   accumulated in floating point and rounded down to whole seconds for [`Request::time`].
//! * [`Scenario`]s add the traffic-mix changes of the AdaptSize paper (NSDI'17, §6.3).
//!
//! # Determinism
//!
//! The random numbers come from xoshiro256++ seeded through SplitMix64 ([`crate::rng::Rng`]), with separate
//! streams (derived from the one seed) for sizes, popularity, arrivals and scenario choices. The
//! same [`GenConfig`] always yields the same trace; different seeds give different traces.
//! Float math (`ln`, `exp`, `powf`, `cos`) is the platform's, which in practice is identical on
//! common 64-bit platforms.

use crate::rng::mix64;
use crate::{Request, RequestReader, TraceError};

pub(crate) mod byte_stack;
pub mod footprint;
mod popularity;
mod scenario;
mod sizes;
#[cfg(test)]
mod tests;

/// The generator's random numbers live in [`crate::rng`]; re-exported here for the users of
/// `ecdn_trace::gen::Rng`.
pub use crate::rng::{splitmix64, Rng};
pub use popularity::Zipf;
pub use scenario::{Class, Scenario};
pub use sizes::*;

/// Id tag of the base population (stationary and randomized scenarios).
const TAG_BASE: u64 = 0;
/// Id tag of adversarial one-hit noise objects.
const TAG_NOISE: u64 = 4;

/// Everything that determines a synthetic trace.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GenConfig {
    /// Number of requests.
    pub requests: u64,
    /// Number of objects (per base population; see [`Class::objects`] for the adversarial
    /// classes). At most `u32::MAX`.
    pub objects: u64,
    /// Zipf exponent α ≥ 0 of the popularity.
    pub alpha: f64,
    /// Per-object size distribution (unused by [`Scenario::Adversarial`]).
    pub sizes: SizeDist,
    /// Mean request rate (requests per second) of the Poisson arrivals.
    pub rate: f64,
    /// Seed of all random choices.
    pub seed: u64,
    /// Workload shape over time.
    pub scenario: Scenario,
}

impl Default for GenConfig {
    /// 1M requests over 100k objects, Zipf 0.8, web-video sizes, 1000 req/s, seed 1,
    /// stationary.
    fn default() -> Self {
        GenConfig {
            requests: 1_000_000,
            objects: 100_000,
            alpha: 0.8,
            sizes: SizeDist::WebVideo,
            rate: 1000.0,
            seed: 1,
            scenario: Scenario::Stationary,
        }
    }
}

/// One slot of a population's fused alias table: the alias-method entry together with the sizes
/// of both objects it can yield, so that a request costs one random memory access.
#[derive(Clone, Copy, Default)]
struct Slot {
    /// Acceptance threshold (probability · 2³²) for picking this slot's own rank.
    thresh: u32,
    /// The rank picked otherwise.
    alias: u32,
    /// Size of this slot's own rank.
    size: u32,
    /// Size of `alias`.
    alias_size: u32,
}

/// One object population: Zipf popularity fused with per-object sizes (16 bytes per object),
/// and the id tag of its objects.
struct Population {
    table: Vec<Slot>,
    tag: u64,
}

impl Population {
    fn new(
        n: u64,
        alpha: f64,
        sizes: &SizeDist,
        tag: u64,
        rng: &mut Rng,
    ) -> Result<Self, TraceError> {
        let zipf = Zipf::new(n, alpha)?;
        let sizes: Vec<u32> = (0..n).map(|_| sizes.sample(rng) as u32).collect();
        let table = zipf
            .table
            .iter()
            .enumerate()
            .map(|(i, &e)| {
                let alias = (e >> 32) as u32;
                Slot {
                    thresh: e as u32,
                    alias,
                    size: sizes[i],
                    alias_size: sizes[alias as usize],
                }
            })
            .collect();
        Ok(Population { table, tag })
    }
}

/// The object choice of one request, made in two steps so that batches can issue their
/// (cache-missing) table reads back to back: [`Generator::plan`] draws all random numbers,
/// [`Generator::resolve`] reads the tables.
#[derive(Clone, Copy)]
enum Pick {
    /// Alias-method draw in population `pop`: slot and coin.
    Alias { pop: u8, slot: u32, coin: u32 },
    /// A given rank of population `pop`.
    Rank { pop: u8, rank: u32 },
    /// A fully determined object (one-hit noise).
    Ready { id: u64, size: u64 },
}

/// State of the active scenario.
enum State {
    Stationary,
    Randomized {
        change_at: u64,
        hot_fraction: f64,
        /// Ranks of the hot objects.
        hot: Vec<u32>,
    },
    Adversarial {
        phase_len: u64,
        noise_counter: u64,
    },
}

/// Stream seeds derived from the master seed.
const STREAM_SIZES: u64 = 0x5153_495a_4553;
const STREAM_POPULARITY: u64 = 0x504f_5055_4c41;
const STREAM_ARRIVALS: u64 = 0x4152_5249_5645;
const STREAM_SCENARIO: u64 = 0x5343_454e_4152;
const STREAM_IDS: u64 = 0x4944_5344_4944;

fn stream(seed: u64, name: u64) -> Rng {
    let mut s = seed ^ name.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    Rng::new(splitmix64(&mut s))
}

/// A synthetic workload; see the [module docs](self). Requests carry `next_access = -1`.
pub struct Generator {
    cfg: GenConfig,
    /// The base population (stationary, randomized) or classes A, B, C (adversarial).
    pops: Vec<Population>,
    state: State,
    id_key: u64,
    pop_rng: Rng,
    arrival_rng: Rng,
    clock: f64,
    inv_rate: f64,
    index: u64,
    /// Batch scratch: planned picks and their timestamps.
    picks: Vec<(Pick, u64)>,
}

impl Generator {
    /// Validates `cfg` and builds the popularity and size tables.
    pub fn new(cfg: GenConfig) -> Result<Generator, TraceError> {
        let bad = |m: String| Err(TraceError::Config(m));
        if !(cfg.rate.is_finite() && cfg.rate > 0.0) {
            return bad(format!(
                "request rate must be a positive number, got {}",
                cfg.rate
            ));
        }
        if cfg.objects == 0 || cfg.objects > u32::MAX as u64 {
            return bad(format!(
                "number of objects must be between 1 and {}, got {}",
                u32::MAX,
                cfg.objects
            ));
        }
        cfg.sizes.validate().map_err(TraceError::Config)?;
        let mut size_rng = stream(cfg.seed, STREAM_SIZES);
        let mut scen_rng = stream(cfg.seed, STREAM_SCENARIO);
        let mut id_rng = stream(cfg.seed, STREAM_IDS);
        let id_key = id_rng.next_u64();
        let base =
            |rng: &mut Rng| Population::new(cfg.objects, cfg.alpha, &cfg.sizes, TAG_BASE, rng);
        let (pops, state) = match cfg.scenario {
            Scenario::Stationary => (vec![base(&mut size_rng)?], State::Stationary),
            Scenario::Randomized {
                change_at,
                hot_fraction,
                hot_min,
                hot_max,
            } => {
                if !(0.0..=1.0).contains(&hot_fraction) {
                    return bad(format!(
                        "hot fraction must be in [0, 1], got {hot_fraction}"
                    ));
                }
                if hot_min == 0 || hot_min > hot_max {
                    return bad(format!(
                        "hot-set size range {hot_min}..={hot_max} is empty or starts at 0"
                    ));
                }
                let pops = vec![base(&mut size_rng)?];
                let k = (hot_min + scen_rng.below(hot_max - hot_min + 1)).min(cfg.objects);
                let hot = sample_distinct(cfg.objects, k, &mut scen_rng)
                    .into_iter()
                    .map(|r| r as u32)
                    .collect();
                (
                    pops,
                    State::Randomized {
                        change_at,
                        hot_fraction,
                        hot,
                    },
                )
            }
            Scenario::Adversarial { phase_len } => {
                if phase_len == 0 {
                    return bad("adversarial phase length must be at least 1 request".to_string());
                }
                let mut pops = Vec::with_capacity(3);
                for c in [Class::Small, Class::Medium, Class::Large] {
                    pops.push(Population::new(
                        c.objects(cfg.objects),
                        cfg.alpha,
                        &c.sizes(),
                        c.tag(),
                        &mut size_rng,
                    )?);
                }
                (
                    pops,
                    State::Adversarial {
                        phase_len,
                        noise_counter: 0,
                    },
                )
            }
        };
        Ok(Generator {
            cfg,
            pops,
            state,
            id_key,
            pop_rng: stream(cfg.seed, STREAM_POPULARITY),
            arrival_rng: stream(cfg.seed, STREAM_ARRIVALS),
            clock: 0.0,
            inv_rate: 1.0 / cfg.rate,
            index: 0,
            picks: Vec::new(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &GenConfig {
        &self.cfg
    }

    /// Requests still to come.
    pub fn remaining(&self) -> u64 {
        self.cfg.requests - self.index
    }

    /// Ids of the hot objects of the randomized scenario (empty for the others).
    pub fn hot_objects(&self) -> Vec<u64> {
        match &self.state {
            State::Randomized { hot, .. } => hot
                .iter()
                .map(|&r| object_id(self.id_key, TAG_BASE, r as u64))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// An alias-method draw in population `pop` (same random numbers as [`Zipf::sample`]).
    #[inline]
    fn alias_pick(&mut self, pop: u8) -> Pick {
        let n = self.pops[pop as usize].table.len() as u64;
        let slot = self.pop_rng.below(n) as u32;
        let coin = (self.pop_rng.next_u64() >> 32) as u32;
        Pick::Alias { pop, slot, coin }
    }

    /// Step 1 of a request: every random choice except the arrival time.
    #[inline]
    fn plan(&mut self) -> Pick {
        let i = self.index;
        match &mut self.state {
            State::Stationary => self.alias_pick(0),
            State::Randomized {
                change_at,
                hot_fraction,
                hot,
            } => {
                if i >= *change_at && self.pop_rng.f64() < *hot_fraction {
                    let rank = hot[self.pop_rng.below(hot.len() as u64) as usize];
                    Pick::Rank { pop: 0, rank }
                } else {
                    self.alias_pick(0)
                }
            }
            State::Adversarial {
                phase_len,
                noise_counter,
            } => {
                let class = Class::sequence(i / *phase_len);
                if let Some((share, sizes)) = class.noise() {
                    if self.pop_rng.f64() < share {
                        let n = *noise_counter;
                        *noise_counter += 1;
                        let size = sizes.sample(&mut self.pop_rng);
                        return Pick::Ready {
                            id: object_id(self.id_key, TAG_NOISE, n),
                            size,
                        };
                    }
                }
                self.alias_pick(class.tag() as u8 - 1)
            }
        }
    }

    /// Step 2 of a request: the table read giving the object's id and size.
    #[inline]
    fn resolve(&self, pick: Pick) -> (u64, u64) {
        match pick {
            Pick::Alias { pop, slot, coin } => {
                let p = &self.pops[pop as usize];
                let e = p.table[slot as usize];
                let (rank, size) = if coin < e.thresh {
                    (slot, e.size)
                } else {
                    (e.alias, e.alias_size)
                };
                (object_id(self.id_key, p.tag, rank as u64), size as u64)
            }
            Pick::Rank { pop, rank } => {
                let p = &self.pops[pop as usize];
                (
                    object_id(self.id_key, p.tag, rank as u64),
                    p.table[rank as usize].size as u64,
                )
            }
            Pick::Ready { id, size } => (id, size),
        }
    }

    /// The next arrival time (whole seconds) and advance of the Poisson clock.
    #[inline]
    fn tick(&mut self) -> u64 {
        let time = self.clock as u64;
        self.clock += self.arrival_rng.exp() * self.inv_rate;
        self.index += 1;
        time
    }
}

/// The id of object `rank` of population `tag`: a bijective mix of `tag << 56 | rank` keyed by
/// the seed, so ids never collide.
#[inline]
fn object_id(key: u64, tag: u64, rank: u64) -> u64 {
    mix64(((tag << 56) | rank) ^ key)
}

/// `k` distinct values uniformly from `0..n` (Floyd's algorithm), in random order.
fn sample_distinct(n: u64, k: u64, rng: &mut Rng) -> Vec<u64> {
    let mut chosen: hashbrown::HashSet<u64, foldhash::fast::FixedState> =
        hashbrown::HashSet::with_hasher(foldhash::fast::FixedState::with_seed(0));
    let mut out = Vec::with_capacity(k as usize);
    for j in n - k..n {
        let t = rng.below(j + 1);
        let v = if chosen.contains(&t) { j } else { t };
        chosen.insert(v);
        out.push(v);
    }
    // Floyd's order is biased toward late values at the end; shuffle (Fisher–Yates).
    for i in (1..out.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        out.swap(i, j);
    }
    out
}

impl Iterator for Generator {
    type Item = Request;

    #[inline]
    fn next(&mut self) -> Option<Request> {
        if self.index >= self.cfg.requests {
            return None;
        }
        let pick = self.plan();
        let time = self.tick();
        let (id, size) = self.resolve(pick);
        Some(Request {
            time,
            id,
            size,
            next_access: -1,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let r = usize::try_from(self.remaining()).unwrap_or(usize::MAX);
        (r, Some(r))
    }
}

impl RequestReader for Generator {
    /// Same requests as the iterator, generated in two passes over the batch (all random
    /// draws, then all table reads) so that the memory accesses of a batch overlap.
    fn read_batch(&mut self, buf: &mut Vec<Request>, max: usize) -> Result<usize, TraceError> {
        buf.clear();
        let n = (max as u64).min(self.remaining()) as usize;
        let mut picks = std::mem::take(&mut self.picks);
        picks.clear();
        picks.reserve(n);
        for _ in 0..n {
            let pick = self.plan();
            let time = self.tick();
            picks.push((pick, time));
        }
        buf.reserve(n);
        buf.extend(picks.iter().map(|&(pick, time)| {
            let (id, size) = self.resolve(pick);
            Request {
                time,
                id,
                size,
                next_access: -1,
            }
        }));
        self.picks = picks;
        Ok(n)
    }
}
