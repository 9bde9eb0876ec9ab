//! The workload's shape over time: [`Scenario`]s (stationary, randomized, the adversarial
//! traffic-mix changes of the AdaptSize paper) and the adversarial scenario's traffic
//! [`Class`]es.

use super::sizes::SizeDist;

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
    /// for the design. [`GenConfig::sizes`](super::GenConfig::sizes) is not used: each class fixes its sizes.
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
/// caches nothing and the best `c` is 16–32 MiB or more. N is [`GenConfig::objects`](super::GenConfig::objects).
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

    pub(super) fn tag(self) -> u64 {
        match self {
            Class::Small => 1,
            Class::Medium => 2,
            Class::Large => 3,
        }
    }
}
