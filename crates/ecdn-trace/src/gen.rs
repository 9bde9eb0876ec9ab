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
//! The random numbers come from xoshiro256++ seeded through SplitMix64 ([`Rng`]), with separate
//! streams (derived from the one seed) for sizes, popularity, arrivals and scenario choices. The
//! same [`GenConfig`] always yields the same trace; different seeds give different traces.
//! Float math (`ln`, `exp`, `powf`, `cos`) is the platform's, which in practice is identical on
//! common 64-bit platforms.

use std::fmt;
use std::str::FromStr;

use crate::units::{format_size, parse_size};
use crate::{Request, RequestReader, TraceError};

/// SplitMix64 step: a good 64-bit mixer of a counter (also used to seed [`Rng`]).
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A bijective 64-bit mixer (the SplitMix64 finalizer): distinct inputs give distinct outputs.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// xoshiro256++ pseudo-random generator (Blackman & Vigna): fast, 256-bit state, good
/// statistical quality; not cryptographic.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator whose state is expanded from `seed` with SplitMix64.
    pub fn new(seed: u64) -> Rng {
        let mut sm = seed;
        Rng {
            s: [
                splitmix64(&mut sm),
                splitmix64(&mut sm),
                splitmix64(&mut sm),
                splitmix64(&mut sm),
            ],
        }
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    #[inline]
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p` (false for NaN; p is clamped to [0, 1]).
    #[inline]
    pub fn chance(&mut self, p: f64) -> bool {
        if p >= 1.0 {
            return true;
        }
        if p.is_nan() || p <= 0.0 {
            return false;
        }
        self.f64() < p
    }

    /// Uniform in `(0, 1]` (safe to take the logarithm of).
    #[inline]
    pub fn f64_open0(&mut self) -> f64 {
        1.0 - self.f64()
    }

    /// Uniform integer in `[0, n)` without bias (Lemire's multiply-and-reject); `n` must be > 0.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        let mut m = self.next_u64() as u128 * n as u128;
        if (m as u64) < n {
            let threshold = n.wrapping_neg() % n;
            while (m as u64) < threshold {
                m = self.next_u64() as u128 * n as u128;
            }
        }
        (m >> 64) as u64
    }

    /// Exponentially distributed with mean 1.
    #[inline]
    pub fn exp(&mut self) -> f64 {
        -self.f64_open0().ln()
    }

    /// Standard normal (Box–Muller; one of the pair is used).
    pub fn normal(&mut self) -> f64 {
        let r = (-2.0 * self.f64_open0().ln()).sqrt();
        r * (std::f64::consts::TAU * self.f64()).cos()
    }
}

/// Zipf(α) sampler over ranks `0..n` (rank 0 is the most popular) using an alias table:
/// 8 bytes per object, O(n) construction, O(1) sampling.
#[derive(Clone, Debug)]
pub struct Zipf {
    /// Per slot: low 32 bits = acceptance threshold (probability · 2³²), high 32 bits = alias.
    table: Vec<u64>,
}

impl Zipf {
    /// Builds the sampler; `n` must be in `1..=u32::MAX` and α finite and ≥ 0.
    pub fn new(n: u64, alpha: f64) -> Result<Zipf, TraceError> {
        if n == 0 || n > u32::MAX as u64 {
            return Err(TraceError::Config(format!(
                "number of objects must be between 1 and {}, got {n}",
                u32::MAX
            )));
        }
        if !alpha.is_finite() || alpha < 0.0 {
            return Err(TraceError::Config(format!(
                "Zipf alpha must be a finite number ≥ 0, got {alpha}"
            )));
        }
        let len = n as usize;
        let mut p: Vec<f64> = (1..=len).map(|k| (k as f64).powf(-alpha)).collect();
        let sum: f64 = p.iter().sum();
        let scale = n as f64 / sum;
        for v in &mut p {
            *v *= scale;
        }
        // Vose's alias method.
        let mut table = vec![0u64; len];
        let mut small: Vec<u32> = Vec::new();
        let mut large: Vec<u32> = Vec::new();
        for (i, &v) in p.iter().enumerate() {
            if v < 1.0 {
                small.push(i as u32);
            } else {
                large.push(i as u32);
            }
        }
        let full = |i: u32| ((i as u64) << 32) | u32::MAX as u64;
        while let (Some(&s), Some(&l)) = (small.last(), large.last()) {
            small.pop();
            let thresh = (p[s as usize] * 4_294_967_296.0).min(u32::MAX as f64) as u64;
            table[s as usize] = ((l as u64) << 32) | thresh;
            p[l as usize] = (p[l as usize] + p[s as usize]) - 1.0;
            if p[l as usize] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        // Leftovers have probability 1 up to rounding: they always pick themselves.
        for i in small.into_iter().chain(large) {
            table[i as usize] = full(i);
        }
        Ok(Zipf { table })
    }

    /// Number of ranks.
    pub fn len(&self) -> u64 {
        self.table.len() as u64
    }

    /// Whether there are no ranks (never: construction requires at least one).
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Draws a rank in `0..len()`.
    #[inline]
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        let i = rng.below(self.table.len() as u64) as usize;
        let e = self.table[i];
        let coin = (rng.next_u64() >> 32) as u32;
        if coin < e as u32 {
            i as u64
        } else {
            e >> 32
        }
    }
}

/// Smallest and largest generated object size.
const MIN_SIZE: f64 = 1.0;
const MAX_SIZE: f64 = u32::MAX as f64;

fn clamp_size(x: f64) -> u64 {
    if x.is_nan() {
        return 1;
    }
    x.round().clamp(MIN_SIZE, MAX_SIZE) as u64
}

/// Parameters of [`SizeDist::WebVideo`]: share of video objects and the two lognormals.
pub const WEB_VIDEO_VIDEO_SHARE: f64 = 0.10;
/// Median size of web objects in [`SizeDist::WebVideo`] (16 KiB).
pub const WEB_MEDIAN: f64 = 16.0 * 1024.0;
/// Log-space standard deviation of web objects in [`SizeDist::WebVideo`].
pub const WEB_SIGMA: f64 = 1.5;
/// Median size of video objects in [`SizeDist::WebVideo`] (4 MiB).
pub const VIDEO_MEDIAN: f64 = 4.0 * 1024.0 * 1024.0;
/// Log-space standard deviation of video objects in [`SizeDist::WebVideo`].
pub const VIDEO_SIGMA: f64 = 0.8;

/// Distribution of per-object sizes (bytes). Every sample is rounded to an integer and clamped
/// to `[1, u32::MAX]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SizeDist {
    /// Every object has this size.
    Fixed(u64),
    /// Lognormal given by its median `e^μ` (bytes) and log-space standard deviation `σ`:
    /// `size = median · e^(σZ)`, Z standard normal. The mean is `median · e^(σ²/2)`.
    LogNormal {
        /// Median size in bytes (`e^μ`).
        median: f64,
        /// Standard deviation of `ln(size)`.
        sigma: f64,
    },
    /// Pareto with shape `alpha` and scale (smallest size) `min`: `P(size > x) = (min/x)^alpha`.
    /// The mean is `alpha · min / (alpha − 1)` for `alpha > 1` (infinite otherwise, before
    /// clamping).
    Pareto {
        /// Tail index.
        alpha: f64,
        /// Smallest size in bytes.
        min: f64,
    },
    /// Log-uniform between `min` and `max` bytes (uniform in `ln(size)`).
    LogUniform {
        /// Smallest size in bytes.
        min: u64,
        /// Largest size in bytes.
        max: u64,
    },
    /// A CDN-like web + video mixture: 90% web objects, lognormal with median 16 KiB and σ 1.5
    /// (90% of them between ~1.4 KiB and ~190 KiB, tail from ~200 B to a few MiB), and 10% video
    /// chunks or downloads, lognormal with median 4 MiB and σ 0.8 (90% between ~1.1 MiB and
    /// ~15 MiB, tail to tens of MiB). See the `WEB_*` and `VIDEO_*` constants.
    WebVideo,
}

impl SizeDist {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), String> {
        let ok = match *self {
            SizeDist::Fixed(s) => (1..=u32::MAX as u64).contains(&s),
            SizeDist::LogNormal { median, sigma } => {
                median.is_finite() && median >= 1.0 && sigma.is_finite() && sigma >= 0.0
            }
            SizeDist::Pareto { alpha, min } => {
                alpha.is_finite() && alpha > 0.0 && min.is_finite() && min >= 1.0
            }
            SizeDist::LogUniform { min, max } => min >= 1 && min <= max,
            SizeDist::WebVideo => true,
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "invalid size distribution {self}: sizes must be ≥ 1 byte (fixed ≤ 4GiB), \
                 sigma ≥ 0, alpha > 0, min ≤ max"
            ))
        }
    }

    /// Draws one size.
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        match *self {
            SizeDist::Fixed(s) => s.clamp(1, u32::MAX as u64),
            SizeDist::LogNormal { median, sigma } => {
                clamp_size(median * (sigma * rng.normal()).exp())
            }
            SizeDist::Pareto { alpha, min } => clamp_size(min * rng.f64_open0().powf(-1.0 / alpha)),
            SizeDist::LogUniform { min, max } => {
                let (a, b) = ((min as f64).ln(), (max as f64).ln());
                clamp_size((a + rng.f64() * (b - a)).exp()).clamp(min, max)
            }
            SizeDist::WebVideo => {
                let (median, sigma) = if rng.f64() < WEB_VIDEO_VIDEO_SHARE {
                    (VIDEO_MEDIAN, VIDEO_SIGMA)
                } else {
                    (WEB_MEDIAN, WEB_SIGMA)
                };
                clamp_size(median * (sigma * rng.normal()).exp())
            }
        }
    }

    /// Parses `fixed:SIZE`, `lognormal:MEDIAN:SIGMA`, `pareto:ALPHA:MIN`,
    /// `loguniform:MIN:MAX` or `web-video`; sizes as in [`parse_size`] (`4KiB`, `16384`).
    pub fn parse(s: &str) -> Result<SizeDist, String> {
        let parts: Vec<&str> = s.trim().split(':').map(str::trim).collect();
        let usage = || {
            format!(
                "invalid size distribution {s:?}: expected fixed:SIZE, lognormal:MEDIAN:SIGMA, \
                 pareto:ALPHA:MIN, loguniform:MIN:MAX or web-video (e.g. lognormal:16KiB:1.5)"
            )
        };
        let num = |v: &str, what: &str| -> Result<f64, String> {
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| {
                    format!("invalid size distribution {s:?}: {what} {v:?} is not a number")
                })
        };
        let size =
            |v: &str| parse_size(v).map_err(|e| format!("invalid size distribution {s:?}: {e}"));
        let d = match parts.as_slice() {
            [kind, v] if kind.eq_ignore_ascii_case("fixed") => SizeDist::Fixed(size(v)?),
            [kind, m, sg] if kind.eq_ignore_ascii_case("lognormal") => SizeDist::LogNormal {
                median: size(m)? as f64,
                sigma: num(sg, "sigma")?,
            },
            [kind, a, m] if kind.eq_ignore_ascii_case("pareto") => SizeDist::Pareto {
                alpha: num(a, "alpha")?,
                min: size(m)? as f64,
            },
            [kind, a, b] if kind.eq_ignore_ascii_case("loguniform") => SizeDist::LogUniform {
                min: size(a)?,
                max: size(b)?,
            },
            [kind]
                if ["web-video", "webvideo", "web+video"]
                    .iter()
                    .any(|k| kind.eq_ignore_ascii_case(k)) =>
            {
                SizeDist::WebVideo
            }
            _ => return Err(usage()),
        };
        d.validate().map_err(|e| format!("{e} (from {s:?})"))?;
        Ok(d)
    }
}

impl FromStr for SizeDist {
    type Err = String;

    /// See [`SizeDist::parse`].
    fn from_str(s: &str) -> Result<Self, String> {
        SizeDist::parse(s)
    }
}

impl fmt::Display for SizeDist {
    /// The syntax [`SizeDist::parse`] accepts.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SizeDist::Fixed(s) => write!(f, "fixed:{}", format_size(s)),
            SizeDist::LogNormal { median, sigma } => {
                write!(
                    f,
                    "lognormal:{}:{sigma}",
                    format_size(median.round() as u64)
                )
            }
            SizeDist::Pareto { alpha, min } => {
                write!(f, "pareto:{alpha}:{}", format_size(min.round() as u64))
            }
            SizeDist::LogUniform { min, max } => {
                write!(f, "loguniform:{}:{}", format_size(min), format_size(max))
            }
            SizeDist::WebVideo => f.write_str("web-video"),
        }
    }
}

/// The workload's shape over time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scenario {
    /// One Zipf workload for the whole trace.
    Stationary,
    /// AdaptSize §6.3 *randomized traffic mix change* (a flash crowd): the base workload until
    /// request index `change_at`; from then on each request goes, with probability
    /// `hot_fraction`, to a uniformly chosen member of a hot set, otherwise to the base
    /// workload. The hot set is `K` distinct base objects chosen uniformly at random, with `K`
    /// uniform in `hot_min..=hot_max` (paper: 50%, 200–1000; its runs use 5M + 10M requests,
    /// i.e. `change_at` = one third of the trace).
    Randomized {
        /// Index of the first request of the changed mix.
        change_at: u64,
        /// Share of requests to the hot set after the change.
        hot_fraction: f64,
        /// Smallest hot-set size.
        hot_min: u64,
        /// Largest hot-set size.
        hot_max: u64,
    },
    /// AdaptSize §6.3 *adversarial traffic mix changes*: phases of `phase_len` requests
    /// (paper: 3M) cycle through the classes A, B, C, B, A, B, C, ... ([`Class::sequence`]),
    /// whose best size-aware admission threshold differs by orders of magnitude. See [`Class`]
    /// for the design. [`GenConfig::sizes`] is not used: each class fixes its sizes.
    Adversarial {
        /// Requests per phase.
        phase_len: u64,
    },
}

impl Scenario {
    /// The paper's randomized change at `change_at` (50% hot traffic, 200–1000 hot objects).
    pub fn randomized(change_at: u64) -> Scenario {
        Scenario::Randomized {
            change_at,
            hot_fraction: 0.5,
            hot_min: 200,
            hot_max: 1000,
        }
    }

    /// The name used on the command line.
    pub fn name(&self) -> &'static str {
        match self {
            Scenario::Stationary => "stationary",
            Scenario::Randomized { .. } => "randomized",
            Scenario::Adversarial { .. } => "adversarial",
        }
    }
}

/// The three traffic classes of the adversarial scenario. Their objects have disjoint ids;
/// popularity within a class is Zipf(α) with the configured α, and each class keeps its objects
/// (and their popularity) when it comes back in a later phase.
///
/// The classes are designed so that the best AdaptSize-style admission parameter `c` (admit
/// with probability `e^(−size/c)`) lands in the ranges of the paper — 32–256 KiB, 1–2 MiB and
/// 16–32 MiB — for caches of a few GiB:
///
/// | class | objects | sizes (log-uniform) | one-hit noise (15% of requests, fresh ids) |
/// |---|---|---|---|
/// | A `Small` (web) | N | 1–64 KiB | 1–16 MiB |
/// | B `Medium` (images, downloads) | ⌈N/4⌉ | 256 KiB–2 MiB | 8–64 MiB |
/// | C `Large` (video) | ⌈N/16⌉ | 4–32 MiB | none |
///
/// In A, a `c` of a few hundred KiB admits the popular small objects while the large one-hit
/// noise (admitted with probability ≤ e^-4 at c = 256 KiB) stays out; `c` ≥ 1 MiB lets the noise
/// flush the cache. In B, `c` must be ~1–2 MiB to admit the popular objects of up to 2 MiB, but
/// larger `c` admits the 8–64 MiB noise. In C everything popular is 4–32 MiB, so small `c`
/// caches nothing and the best `c` is 16–32 MiB or more. N is [`GenConfig::objects`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Class A: small web objects plus large one-hit noise.
    Small,
    /// Class B: medium objects plus very large one-hit noise.
    Medium,
    /// Class C: large video objects.
    Large,
}

impl Class {
    /// The phase cycle A, B, C, B ("and back again").
    pub const CYCLE: [Class; 4] = [Class::Small, Class::Medium, Class::Large, Class::Medium];

    /// The class of phase number `phase` (0-based).
    pub fn sequence(phase: u64) -> Class {
        Class::CYCLE[(phase % 4) as usize]
    }

    /// Number of objects of the class for `objects` = N.
    pub fn objects(self, n: u64) -> u64 {
        match self {
            Class::Small => n,
            Class::Medium => n.div_ceil(4),
            Class::Large => n.div_ceil(16),
        }
    }

    /// Sizes of the class's objects.
    pub fn sizes(self) -> SizeDist {
        match self {
            Class::Small => SizeDist::LogUniform {
                min: 1 << 10,
                max: 64 << 10,
            },
            Class::Medium => SizeDist::LogUniform {
                min: 256 << 10,
                max: 2 << 20,
            },
            Class::Large => SizeDist::LogUniform {
                min: 4 << 20,
                max: 32 << 20,
            },
        }
    }

    /// Share of the class's requests that go to fresh one-hit objects, and their sizes.
    pub fn noise(self) -> Option<(f64, SizeDist)> {
        match self {
            Class::Small => Some((
                0.15,
                SizeDist::LogUniform {
                    min: 1 << 20,
                    max: 16 << 20,
                },
            )),
            Class::Medium => Some((
                0.15,
                SizeDist::LogUniform {
                    min: 8 << 20,
                    max: 64 << 20,
                },
            )),
            Class::Large => None,
        }
    }

    /// Single-letter name (A, B, C).
    pub fn letter(self) -> char {
        match self {
            Class::Small => 'A',
            Class::Medium => 'B',
            Class::Large => 'C',
        }
    }

    fn tag(self) -> u64 {
        match self {
            Class::Small => 1,
            Class::Medium => 2,
            Class::Large => 3,
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn generate(cfg: GenConfig) -> Vec<Request> {
        Generator::new(cfg).unwrap().collect()
    }

    fn cfg(requests: u64, objects: u64) -> GenConfig {
        GenConfig {
            requests,
            objects,
            ..GenConfig::default()
        }
    }

    #[test]
    fn rng_is_deterministic_and_below_is_in_range() {
        let a: Vec<u64> = (0..5)
            .scan(Rng::new(7), |r, _| Some(r.next_u64()))
            .collect();
        let b: Vec<u64> = (0..5)
            .scan(Rng::new(7), |r, _| Some(r.next_u64()))
            .collect();
        let c: Vec<u64> = (0..5)
            .scan(Rng::new(8), |r, _| Some(r.next_u64()))
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        let mut r = Rng::new(1);
        let mut hist = [0u32; 3];
        for _ in 0..30_000 {
            hist[r.below(3) as usize] += 1;
        }
        assert!(
            hist.iter().all(|&h| (9_000..11_000).contains(&h)),
            "{hist:?}"
        );
        for _ in 0..1000 {
            let x = r.f64();
            assert!((0.0..1.0).contains(&x));
            assert!(r.f64_open0() > 0.0);
        }
        let mean: f64 = (0..100_000).map(|_| r.exp()).sum::<f64>() / 100_000.0;
        assert!((mean - 1.0).abs() < 0.02, "{mean}");
        let xs: Vec<f64> = (0..100_000).map(|_| r.normal()).collect();
        let m = xs.iter().sum::<f64>() / xs.len() as f64;
        let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / xs.len() as f64;
        assert!(m.abs() < 0.02 && (v - 1.0).abs() < 0.03, "{m} {v}");
    }

    /// Checks empirical Zipf frequencies against the exact probabilities.
    fn check_zipf(n: u64, alpha: f64) {
        let z = Zipf::new(n, alpha).unwrap();
        assert_eq!(z.len(), n);
        let mut rng = Rng::new(42);
        let draws = 1_000_000u64;
        let mut hist = vec![0u64; n as usize];
        for _ in 0..draws {
            hist[z.sample(&mut rng) as usize] += 1;
        }
        let h: f64 = (1..=n).map(|k| (k as f64).powf(-alpha)).sum();
        for k in [0usize, 1, 2, 9, (n - 1) as usize] {
            if k >= n as usize {
                continue;
            }
            let p = ((k + 1) as f64).powf(-alpha) / h;
            let expect = p * draws as f64;
            let sd = (expect * (1.0 - p)).sqrt();
            assert!(
                (hist[k] as f64 - expect).abs() < 5.0 * sd + 1.0,
                "n={n} alpha={alpha} rank {k}: {} vs {expect:.0}",
                hist[k]
            );
        }
    }

    #[test]
    fn zipf_matches_its_distribution() {
        check_zipf(100, 1.0);
        check_zipf(1000, 0.8);
        check_zipf(50, 0.0);
        check_zipf(10_000, 1.2);
        check_zipf(1, 1.0);
    }

    #[test]
    fn zipf_rejects_bad_parameters() {
        assert!(Zipf::new(0, 1.0).is_err());
        assert!(Zipf::new(10, -0.1).is_err());
        assert!(Zipf::new(10, f64::NAN).is_err());
        assert!(Zipf::new(u32::MAX as u64 + 1, 1.0).is_err());
    }

    #[test]
    fn size_distributions() {
        let mut rng = Rng::new(3);
        let draw = |d: SizeDist, rng: &mut Rng| -> Vec<u64> {
            let mut v: Vec<u64> = (0..100_000).map(|_| d.sample(rng)).collect();
            v.sort_unstable();
            v
        };
        assert!(draw(SizeDist::Fixed(4096), &mut rng)
            .iter()
            .all(|&s| s == 4096));
        let ln = draw(
            SizeDist::LogNormal {
                median: 16384.0,
                sigma: 1.0,
            },
            &mut rng,
        );
        let med = ln[ln.len() / 2] as f64;
        assert!((med / 16384.0 - 1.0).abs() < 0.03, "{med}");
        let pa = draw(
            SizeDist::Pareto {
                alpha: 3.0,
                min: 1000.0,
            },
            &mut rng,
        );
        assert!(pa[0] >= 1000);
        let mean = pa.iter().sum::<u64>() as f64 / pa.len() as f64;
        assert!((mean / 1500.0 - 1.0).abs() < 0.03, "{mean}");
        let lu = draw(
            SizeDist::LogUniform {
                min: 1024,
                max: 65536,
            },
            &mut rng,
        );
        assert!(lu[0] >= 1024 && *lu.last().unwrap() <= 65536);
        let med = lu[lu.len() / 2] as f64;
        assert!((med / 8192.0 - 1.0).abs() < 0.03, "{med}");
        // Extreme parameters are clamped to [1, u32::MAX].
        let wide = draw(
            SizeDist::LogNormal {
                median: 1e9,
                sigma: 8.0,
            },
            &mut rng,
        );
        assert_eq!(wide[0], 1);
        assert_eq!(*wide.last().unwrap(), u32::MAX as u64);
        // Web + video: ~10% of objects are ≥ 512 KiB, the median is near the web median.
        let wv = draw(SizeDist::WebVideo, &mut rng);
        let big = wv.iter().filter(|&&s| s >= 512 << 10).count() as f64 / wv.len() as f64;
        assert!((0.09..0.13).contains(&big), "{big}");
        let med = wv[wv.len() / 2] as f64;
        assert!((12_000.0..26_000.0).contains(&med), "{med}");
        assert!(wv[0] < 1024 && *wv.last().unwrap() > 16 << 20);
    }

    #[test]
    fn size_dist_parsing() {
        assert_eq!(SizeDist::parse("fixed:4KiB"), Ok(SizeDist::Fixed(4096)));
        assert_eq!(
            SizeDist::parse("lognormal:16KiB:1.5"),
            Ok(SizeDist::LogNormal {
                median: 16384.0,
                sigma: 1.5
            })
        );
        assert_eq!(
            SizeDist::parse("Pareto:1.2:1KiB"),
            Ok(SizeDist::Pareto {
                alpha: 1.2,
                min: 1024.0
            })
        );
        assert_eq!(
            SizeDist::parse("loguniform:1KiB:64KiB"),
            Ok(SizeDist::LogUniform {
                min: 1024,
                max: 65536
            })
        );
        assert_eq!(SizeDist::parse("web-video"), Ok(SizeDist::WebVideo));
        for d in [
            "fixed:4KiB",
            "lognormal:16KiB:1.5",
            "pareto:1.2:1KiB",
            "loguniform:1KiB:64KiB",
            "web-video",
        ] {
            let parsed = SizeDist::parse(d).unwrap();
            assert_eq!(parsed.to_string(), d);
            assert_eq!(parsed.to_string().parse::<SizeDist>(), Ok(parsed));
        }
        for bad in [
            "",
            "fixed",
            "fixed:0",
            "fixed:8GiB",
            "lognormal:16KiB",
            "lognormal:16KiB:-1",
            "lognormal:16KiB:x",
            "pareto:0:1KiB",
            "pareto:1:0",
            "loguniform:64KiB:1KiB",
            "gamma:1:2",
            "fixed:4QB",
        ] {
            assert!(SizeDist::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn same_seed_same_trace_different_seed_different_trace() {
        for scenario in [
            Scenario::Stationary,
            Scenario::randomized(2_000),
            Scenario::Adversarial { phase_len: 1_000 },
        ] {
            let c = GenConfig {
                scenario,
                ..cfg(6_000, 1_000)
            };
            let a = generate(c);
            assert_eq!(a.len(), 6_000);
            assert_eq!(a, generate(c));
            let other = generate(GenConfig { seed: 2, ..c });
            assert_ne!(a, other);
            let same_ids = a.iter().zip(&other).filter(|(x, y)| x.id == y.id).count();
            assert!(same_ids < 600, "{scenario:?}: {same_ids}");
        }
    }

    #[test]
    fn batches_equal_the_iterator() {
        let c = cfg(10_000, 500);
        let all = generate(c);
        let mut g = Generator::new(c).unwrap();
        let batched = crate::read_all(&mut g).unwrap();
        assert_eq!(batched, all);
        let mut buf = Vec::new();
        assert_eq!(g.read_batch(&mut buf, 10).unwrap(), 0);
    }

    #[test]
    fn stationary_properties() {
        let c = GenConfig {
            alpha: 1.0,
            rate: 500.0,
            ..cfg(200_000, 1_000)
        };
        let reqs = generate(c);
        // Sizes are fixed per object; ids are scrambled, not ranks.
        let mut size_of = std::collections::HashMap::new();
        for r in &reqs {
            assert_eq!(*size_of.entry(r.id).or_insert(r.size), r.size);
            assert!((1..=u32::MAX as u64).contains(&r.size));
            assert_eq!(r.next_access, -1);
        }
        assert!(size_of.len() > 900 && size_of.len() <= 1000);
        assert!(size_of.keys().filter(|&&id| id < 1000).count() < 5);
        // Zipf(1) over 1000 objects: the top object gets 1/H_1000 ≈ 13.4% of requests.
        let mut counts = std::collections::HashMap::new();
        for r in &reqs {
            *counts.entry(r.id).or_insert(0u64) += 1;
        }
        let top = *counts.values().max().unwrap() as f64 / reqs.len() as f64;
        assert!((top - 0.1336).abs() < 0.005, "{top}");
        // Poisson arrivals at 500/s: 200k requests span ~400 s, times never go backwards.
        assert!(reqs.windows(2).all(|w| w[0].time <= w[1].time));
        let span = reqs.last().unwrap().time as f64;
        assert!((span - 400.0).abs() < 8.0, "{span}");
        assert_eq!(reqs[0].time, 0);
    }

    #[test]
    fn randomized_change_sends_half_the_traffic_to_a_hot_set() {
        let c = GenConfig {
            scenario: Scenario::randomized(50_000),
            ..cfg(150_000, 100_000)
        };
        let g = Generator::new(c).unwrap();
        let hot: std::collections::HashSet<u64> = g.hot_objects().into_iter().collect();
        assert!((200..=1000).contains(&hot.len()), "{}", hot.len());
        let reqs: Vec<Request> = g.collect();
        let before = reqs[..50_000]
            .iter()
            .filter(|r| hot.contains(&r.id))
            .count() as f64
            / 50_000.0;
        let after = reqs[50_000..]
            .iter()
            .filter(|r| hot.contains(&r.id))
            .count() as f64
            / 100_000.0;
        assert!(before < 0.05, "{before}");
        assert!((0.49..0.56).contains(&after), "{after}");
        // Hot objects keep their base sizes.
        let mut size_of = std::collections::HashMap::new();
        for r in &reqs {
            assert_eq!(*size_of.entry(r.id).or_insert(r.size), r.size);
        }
        // Different seeds pick different hot sets of different sizes (almost surely).
        let g2 = Generator::new(GenConfig { seed: 9, ..c }).unwrap();
        assert_ne!(g2.hot_objects().len(), hot.len());
    }

    #[test]
    fn adversarial_phases_cycle_through_disjoint_classes() {
        let phase = 20_000u64;
        let c = GenConfig {
            scenario: Scenario::Adversarial { phase_len: phase },
            ..cfg(phase * 5, 10_000)
        };
        let reqs = generate(c);
        let classes: Vec<Class> = (0..5).map(Class::sequence).collect();
        assert_eq!(
            classes,
            [
                Class::Small,
                Class::Medium,
                Class::Large,
                Class::Medium,
                Class::Small
            ]
        );
        let mut ids: Vec<std::collections::HashSet<u64>> = Vec::new();
        for (p, class) in classes.iter().enumerate() {
            let slice = &reqs[p * phase as usize..(p + 1) * phase as usize];
            let sizes = class.sizes();
            let (lo, hi) = match sizes {
                SizeDist::LogUniform { min, max } => (min, max),
                _ => unreachable!(),
            };
            let in_class =
                slice.iter().filter(|r| (lo..=hi).contains(&r.size)).count() as f64 / phase as f64;
            let want = 1.0 - class.noise().map_or(0.0, |(s, _)| s);
            assert!(
                (in_class - want).abs() < 0.02,
                "phase {p}: {in_class} vs {want}"
            );
            // Popular class objects repeat; the set of frequently requested ids is the class's.
            let mut counts = std::collections::HashMap::new();
            for r in slice {
                *counts.entry(r.id).or_insert(0u32) += 1;
            }
            ids.push(
                counts
                    .into_iter()
                    .filter(|&(_, n)| n > 1)
                    .map(|(id, _)| id)
                    .collect(),
            );
        }
        assert!(ids[0].is_disjoint(&ids[1]));
        assert!(ids[1].is_disjoint(&ids[2]));
        assert!(ids[0].is_disjoint(&ids[2]));
        // Classes come back with the same objects.
        assert!(ids[0].intersection(&ids[4]).count() > ids[0].len() / 2);
        assert!(ids[1].intersection(&ids[3]).count() > ids[1].len() / 2);
    }

    #[test]
    fn rejects_bad_configs() {
        let bad = [
            GenConfig {
                rate: 0.0,
                ..GenConfig::default()
            },
            GenConfig {
                rate: f64::INFINITY,
                ..GenConfig::default()
            },
            GenConfig {
                objects: 0,
                ..GenConfig::default()
            },
            GenConfig {
                alpha: -1.0,
                ..GenConfig::default()
            },
            GenConfig {
                sizes: SizeDist::Fixed(0),
                ..GenConfig::default()
            },
            GenConfig {
                scenario: Scenario::Adversarial { phase_len: 0 },
                ..GenConfig::default()
            },
            GenConfig {
                scenario: Scenario::Randomized {
                    change_at: 0,
                    hot_fraction: 1.5,
                    hot_min: 1,
                    hot_max: 2,
                },
                ..GenConfig::default()
            },
            GenConfig {
                scenario: Scenario::Randomized {
                    change_at: 0,
                    hot_fraction: 0.5,
                    hot_min: 5,
                    hot_max: 2,
                },
                ..GenConfig::default()
            },
        ];
        for c in bad {
            assert!(Generator::new(c).is_err(), "{c:?}");
        }
        // A hot set larger than the population is capped at the population.
        let c = GenConfig {
            scenario: Scenario::randomized(0),
            ..cfg(100, 50)
        };
        assert_eq!(Generator::new(c).unwrap().hot_objects().len(), 50);
    }

    #[test]
    fn distinct_sampling() {
        let mut rng = Rng::new(5);
        for (n, k) in [(10, 10), (1000, 200), (5, 0), (1 << 40, 1000)] {
            let v = sample_distinct(n, k, &mut rng);
            assert_eq!(v.len() as u64, k);
            let set: std::collections::HashSet<_> = v.iter().collect();
            assert_eq!(set.len() as u64, k);
            assert!(v.iter().all(|&x| x < n));
        }
    }
}

#[cfg(test)]
mod throughput {
    use super::*;

    /// Generator speed; run with
    /// `cargo test --release -p ecdn-trace gen_throughput -- --ignored --nocapture`.
    #[test]
    #[ignore = "benchmark"]
    fn gen_throughput() {
        for (objects, sizes) in [
            (
                1_000_000,
                SizeDist::LogNormal {
                    median: 16384.0,
                    sigma: 1.5,
                },
            ),
            (10_000_000, SizeDist::WebVideo),
            (1_000, SizeDist::WebVideo),
        ] {
            let cfg = GenConfig {
                requests: 20_000_000,
                objects,
                alpha: 0.9,
                sizes,
                ..GenConfig::default()
            };
            let t0 = std::time::Instant::now();
            let mut g = Generator::new(cfg).unwrap();
            let setup = t0.elapsed().as_secs_f64();
            let t1 = std::time::Instant::now();
            let mut buf = Vec::new();
            let mut sum = 0u64;
            while g.read_batch(&mut buf, crate::BATCH).unwrap() > 0 {
                sum = sum.wrapping_add(buf.iter().map(|r| r.id ^ r.size).sum::<u64>());
            }
            let secs = t1.elapsed().as_secs_f64();
            println!(
                "{objects} objects, {sizes}: setup {setup:.2}s, {:.1}M requests/s (checksum {sum:x})",
                20.0 / secs
            );
        }
    }
}
