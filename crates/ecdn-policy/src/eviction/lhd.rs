//! LHD, Least Hit Density (Beckmann, Chen and Cidon, "LHD: Improving Cache Hit Rate by
//! Maximizing Hit Density", NSDI '18).
//!
//! # The paper's algorithm
//!
//! An object's *hit density* is the hits it is expected to bring per byte of cache it occupies
//! per unit of time: its hit probability divided by its size times its expected lifetime (the
//! time it will spend in the cache from now until its next hit or its eviction, whichever comes
//! first). LHD evicts the object of lowest hit density. It needs no future knowledge: it learns,
//! per *class* of objects, how likely an object of each *age* (time since its last access, in
//! accesses) is to be hit, and how long it then still lives, from two histograms of what
//! happened to past objects:
//!
//! * `hits[a]`: objects hit at age `a`;
//! * `evictions[a]`: objects evicted at age `a`.
//!
//! Conditioned on having reached age `a`, an object of that class and size `S` has
//!
//! ```text
//!                         Σ_{x ≥ a} hits[x]
//! HD(a) = ---------------------------------------------------
//!          S · Σ_{x ≥ a} (x − a + 1) · (hits[x] + evictions[x])
//! ```
//!
//! (the numerator is the chance of a hit at all, the denominator the expected remaining
//! lifetime, both out of the events at ages ≥ a; the + 1, in age bins, is libCacheSim's
//! counting of the bin the object is in). Ages are *coarsened*: counted in units of
//! 2^k accesses, k chosen so that the histograms (of `max_age` bins) cover the ages that
//! matter; an age past the last bin counts as the last bin. Classes refine the prediction:
//! objects with different reference histories have different age distributions, so each class
//! has its own histograms (the paper's example of a class is the reference count, how many
//! times the object has been requested; see below for the classes used here). The model is
//! *reconfigured* periodically: the histograms are decayed by an EWMA
//! (older intervals weigh less), and every class's HD is recomputed from them for every age, so
//! that a lookup at eviction time is one table read and one division by the size. Eviction does
//! not scan the cache: it *samples* a few cached objects at random (the associativity) and
//! evicts the one of lowest HD. To escape a model that never lets some objects live long
//! enough to learn from them, a small share of the cache holds *explorers*, objects that are
//! (almost) never evicted.
//!
//! # libCacheSim's choices, which this follows
//!
//! This is libCacheSim's `LHD` (the authors' simulator code inside libCacheSim), decision for
//! decision and in the same floating-point arithmetic (`f32` model, as there), so that with
//! the same random numbers it evicts the same objects:
//!
//! * **Time** is LHD's own counter of *updates* (hits and insertions; a miss that is not
//!   inserted does not count), not the request index, and an object's age is the updates since
//!   its last hit or insertion, shifted right by the coarsening shift; ages ≥ `max_age − 1`
//!   count as `max_age − 1` (20,000 bins), and an object of that age has the lowest possible
//!   density (`f32::MIN`): it is evicted as soon as it is sampled.
//! * **Classes**: 16, by *hit age* rather than by reference count: the smallest k < 15 for
//!   which (the sum of the object's last two hit ages) · 2^k reaches `max_age`, else 15, i.e.
//!   roughly log2(`max_age` / that sum). An object hit twice in quick succession is in a high
//!   class (15 when the sum is 0), one never hit (its older hit age counts as `max_age`) in
//!   class 0: a recency-weighted stand-in for the reference count, since frequently requested
//!   objects have short hit ages. libCacheSim also splits by application (16 × 16 classes) but
//!   has one application, id 1; only the initial densities show it (below).
//! * **Initial model**, until the first reconfiguration: HD(class c, age a) = (c + 17) / (a + 1)
//!   (the 17 being libCacheSim's application 1 times 16 classes, plus one), divided by the size:
//!   a GDSF-like rule that favours small, recently used, recently re-hit objects.
//! * **Reconfiguration** every 2^20 updates: histograms × 0.9 (EWMA decay), then the age
//!   coarsening is adapted (at the 6th and 26th reconfiguration only: the shift becomes
//!   ⌈log2(n / (0.01 · max_age))⌉, at least 1, with n an EWMA of the number of cached objects
//!   taken at each reconfiguration; the histograms are merged or split to the new bins), then
//!   every class's HD is recomputed as above, for ages 0 to `max_age − 2` (0 where the events
//!   at ages ≥ a weigh ≤ 10⁻⁵). The initial coarsening shift is 10.
//! * **Eviction** samples 8 objects (with replacement, uniformly from the dense array of cached
//!   objects) while the model is young, 32 after the 51st reconfiguration, plus the up to 8
//!   *recently admitted* objects that looked like victims when they came in (an inserted object
//!   whose HD was below an EWMA, weight 0.1, of the evicted objects' HD; a ring of 8 ids), and
//!   evicts the first of lowest HD.
//! * **Explorers**: each hit or insertion draws a 1-in-32 chance; if it comes up and
//!   explorers' sizes sum to less than 1% of the capacity, the object becomes an explorer
//!   (until its next hit), whose HD gets + 1 (a learnt HD is at most 1 per byte, so an
//!   explorer is practically never evicted); no explorers after the 50th reconfiguration.
//! * **Random numbers**: libCacheSim's generator, a 128-bit Lehmer generator (`x ← x ·
//!   0xda942042e4dd58b5 mod 2^128`, each draw the high 64 bits of the new state) that starts
//!   at 0xdeadbeef in a new process and carries on from one run to the next in the same
//!   process. Seed `s` starts it `s · 2^64` draws further on (non-overlapping streams), so seed
//!   0 makes the draws of a fresh libCacheSim; [`Lhd::with_rng_state`] continues a previous
//!   run's generator.
//!
//! Where this differs from libCacheSim: a new version of an object with another size is a miss
//! here (the old version removed, the new one inserted; libCacheSim counts it as a hit and
//! updates the size); removal hands an explorer's share of the budget back (libCacheSim's
//! removal keeps it spent); no panic when every sampled density is NaN or +∞ (zero-sized
//! objects): the first sampled object goes.
//!
//! The costs per request are O(1): a hash lookup, a few table reads; per eviction, the sampled
//! and recently admitted candidates (≤ 40 density lookups); every 2^20 updates, a pass over the
//! histograms (16 × 20,000 bins, 3.8 MB per cache).

use crate::dense::{Dense, Keyed};
use crate::{Evicted, Eviction};

/// Classes by hit age.
const HIT_AGE_CLASSES: usize = 16;
/// The first class index of libCacheSim's one application (id 1 of 16 application classes);
/// it only shows in the initial densities.
const APP_CLASS_OFFSET: usize = HIT_AGE_CLASSES;
/// Weight of the old value in every EWMA (histograms, object count, victims' density).
const EWMA_DECAY: f32 = 0.9;
/// Share of the capacity explorers may hold.
const EXPLORER_BUDGET_FRACTION: f32 = 0.01;
/// An update makes its object an explorer with probability 1 / this.
const EXPLORE_INVERSE_PROBABILITY: u64 = 32;
/// libCacheSim's random number generator: its multiplier and its state in a new process.
const LEHMER_MULTIPLIER: u128 = 0xda94_2042_e4dd_58b5;
const LEHMER_START: u128 = 0xdead_beef;
/// Target of the age coarsening: an age of as many updates as there are cached objects (about
/// a lifetime) should fall this far (as a share of `max_age`) into the age bins.
const AGE_COARSENING_ERROR_TOLERANCE: f32 = 0.01;
/// After this many reconfigurations the model is deemed settled: full associativity, no more
/// explorers.
const SETTLED_AFTER: u64 = 50;
/// The reconfigurations (counted from 0) at which the age coarsening is adapted.
const ADAPT_COARSENING_AT: [u64; 2] = [5, 25];

/// LHD's tunables; the default is libCacheSim's setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LhdParams {
    /// Objects sampled per eviction once the model has settled.
    pub associativity: u32,
    /// Objects sampled per eviction before that.
    pub early_associativity: u32,
    /// Recently admitted would-be victims always considered at eviction (ring size).
    pub admissions: usize,
    /// Age bins per class (at least 2).
    pub max_age: u32,
    /// Updates (hits and insertions) between reconfigurations (at least 1).
    pub reconfiguration_interval: u64,
    /// The age coarsening shift before it is first adapted (at most 63).
    pub initial_age_coarsening_shift: u32,
}

impl Default for LhdParams {
    fn default() -> Self {
        LhdParams {
            associativity: 32,
            early_associativity: 8,
            admissions: 8,
            max_age: 20_000,
            reconfiguration_interval: 1 << 20,
            initial_age_coarsening_shift: 10,
        }
    }
}

/// What LHD knows of one cached object.
#[derive(Clone, Copy, Debug)]
struct Tag {
    id: u64,
    size: u64,
    /// The size as the model sees it (an `f32`, as in libCacheSim).
    size_f: f32,
    /// The update at which it was last hit or inserted.
    last_access: u64,
    /// Coarsened ages at its last two hits (`max_age` for the older one of a new object).
    last_hit_age: u32,
    last_last_hit_age: u32,
    /// Its hit-age class, from those two.
    class: u8,
    explorer: bool,
}

impl Keyed for Tag {
    fn id(&self) -> u64 {
        self.id
    }
}

/// The model: per class and coarsened age, the decayed hit and eviction counts and the hit
/// density (before the division by the size). Class-major flat arrays.
#[derive(Clone)]
struct Model {
    max_age: usize,
    hits: Vec<f32>,
    evictions: Vec<f32>,
    hit_density: Vec<f32>,
}

impl Model {
    fn new(max_age: usize) -> Self {
        let n = HIT_AGE_CLASSES * max_age;
        let mut hit_density = vec![0.0; n];
        for (c, row) in hit_density.chunks_mut(max_age).enumerate() {
            for (a, d) in row.iter_mut().enumerate() {
                *d = ((APP_CLASS_OFFSET + c + 1) as f64 / (a + 1) as f64) as f32;
            }
        }
        Model {
            max_age,
            hits: vec![0.0; n],
            evictions: vec![0.0; n],
            hit_density,
        }
    }

    /// Recomputes every class's hit density at ages 0..max_age−1 from the histograms: the hits
    /// at ages ≥ a over the expected remaining lifetime Σ_{x ≥ a} (events at ages ≥ x), both
    /// accumulated from the oldest age down.
    fn model_hit_density(&mut self) {
        let m = self.max_age;
        for c in 0..HIT_AGE_CLASSES {
            let base = c * m;
            let hits = &self.hits[base..base + m];
            let evictions = &self.evictions[base..base + m];
            let density = &mut self.hit_density[base..base + m];
            let mut events = hits[m - 1] + evictions[m - 1];
            let mut hits_after = hits[m - 1];
            let mut lifetime = events;
            for a in (0..m - 1).rev() {
                hits_after += hits[a];
                events += hits[a] + evictions[a];
                lifetime += events;
                density[a] = if f64::from(events) > 1e-5 {
                    hits_after / lifetime
                } else {
                    0.0
                };
            }
        }
    }

    /// Re-bins the histograms after the coarsening shift grew by `k` (merge 2^k bins into one)
    /// or, for negative `k`, shrank by −k (spread each bin over 2^−k); the last bin keeps what
    /// falls past it.
    fn rescale(&mut self, k: i64) {
        let m = self.max_age;
        for hist in [&mut self.hits, &mut self.evictions] {
            for row in hist.chunks_mut(m) {
                if k < 0 {
                    let k = (-k).min(63) as u32;
                    let from = (m as u64).checked_shr(k).unwrap_or(0) as usize;
                    for a in from..m - 1 {
                        row[m - 1] += row[a];
                    }
                    let spread = (1u64 << k) as f32;
                    for a in (0..m - 1).rev() {
                        row[a] = row[(a as u64 >> k) as usize] / spread;
                    }
                } else if k > 0 {
                    let k = k.min(63) as u32;
                    let to = (m as u64).checked_shr(k).unwrap_or(0) as usize;
                    for a in 0..to {
                        let first = a << k;
                        let mut sum = row[first];
                        for i in 1..(1usize << k) {
                            sum += row[first + i];
                        }
                        row[a] = sum;
                    }
                    for v in &mut row[to..m - 1] {
                        *v = 0.0;
                    }
                }
            }
        }
    }
}

/// The generator's state for `seed`: libCacheSim's start, `seed · 2^64` draws on.
pub fn seed_state(seed: u64) -> u128 {
    // The multiplier to the power 2^64, then to the power seed (square and multiply).
    let mut jump = LEHMER_MULTIPLIER;
    for _ in 0..64 {
        jump = jump.wrapping_mul(jump);
    }
    let (mut state, mut e) = (LEHMER_START, seed);
    while e > 0 {
        if e & 1 == 1 {
            state = state.wrapping_mul(jump);
        }
        jump = jump.wrapping_mul(jump);
        e >>= 1;
    }
    state
}

/// The LHD eviction policy (see the module documentation).
#[derive(Clone)]
pub struct Lhd {
    capacity: u64,
    params: LhdParams,
    used: u64,
    /// The cached objects, densely (swap-remove), for uniform sampling.
    tags: Dense<Tag>,
    model: Model,
    /// Updates so far: LHD's clock.
    timestamp: u64,
    until_reconfiguration: u64,
    reconfigurations: u64,
    age_coarsening_shift: u32,
    ewma_num_objects: f32,
    ewma_num_objects_mass: f32,
    /// Ring of recently admitted objects that looked like victims.
    recently_admitted: Vec<Option<u64>>,
    recently_admitted_head: usize,
    ewma_victim_hit_density: f32,
    /// Bytes explorers may still take (may go negative by the last explorer's size).
    explorer_budget: i64,
    /// The random number generator's state.
    rng: u128,
}

impl Lhd {
    /// libCacheSim's LHD with `capacity` bytes, its random numbers drawn from `seed` (0: the
    /// draws of a fresh libCacheSim).
    pub fn new(capacity: u64, seed: u64) -> Self {
        Self::with_params(capacity, seed, LhdParams::default())
    }

    /// LHD with other tunables (out-of-range ones are clamped: `max_age` ≥ 2, an interval
    /// ≥ 1, associativities ≥ 1, a shift ≤ 63).
    pub fn with_params(capacity: u64, seed: u64, params: LhdParams) -> Self {
        Self::with_rng_state(capacity, params, seed_state(seed))
    }

    /// LHD whose generator starts at `state` (a previous run's [`Lhd::rng_state`]: the draws
    /// go on as libCacheSim's do when it runs several caches one after the other in one
    /// process).
    pub fn with_rng_state(capacity: u64, params: LhdParams, state: u128) -> Self {
        let params = LhdParams {
            associativity: params.associativity.max(1),
            early_associativity: params.early_associativity.max(1),
            admissions: params.admissions,
            max_age: params.max_age.max(2),
            reconfiguration_interval: params.reconfiguration_interval.max(1),
            initial_age_coarsening_shift: params.initial_age_coarsening_shift.min(63),
        };
        Lhd {
            capacity,
            params,
            used: 0,
            tags: Dense::new(),
            model: Model::new(params.max_age as usize),
            timestamp: 0,
            until_reconfiguration: params.reconfiguration_interval,
            reconfigurations: 0,
            age_coarsening_shift: params.initial_age_coarsening_shift,
            ewma_num_objects: 0.0,
            ewma_num_objects_mass: 0.0,
            recently_admitted: vec![None; params.admissions],
            recently_admitted_head: 0,
            ewma_victim_hit_density: 0.0,
            explorer_budget: (capacity as f32 * EXPLORER_BUDGET_FRACTION) as i64,
            rng: state,
        }
    }

    /// The tunables in use.
    pub fn params(&self) -> LhdParams {
        self.params
    }

    /// Reconfigurations so far.
    pub fn reconfigurations(&self) -> u64 {
        self.reconfigurations
    }

    /// The current age coarsening: ages are counted in units of 2^shift updates.
    pub fn age_coarsening_shift(&self) -> u32 {
        self.age_coarsening_shift
    }

    /// The random number generator's state (for [`Lhd::with_rng_state`]).
    pub fn rng_state(&self) -> u128 {
        self.rng
    }

    #[inline]
    fn next_rand(&mut self) -> u64 {
        self.rng = self.rng.wrapping_mul(LEHMER_MULTIPLIER);
        (self.rng >> 64) as u64
    }

    #[inline]
    fn position(&self, id: u64) -> Option<usize> {
        self.tags.position(id)
    }

    /// Coarsened age of an object last accessed at update `last_access`.
    #[inline]
    fn age(&self, last_access: u64) -> usize {
        let age = (self.timestamp - last_access) >> self.age_coarsening_shift;
        let last = self.model.max_age as u64 - 1;
        age.min(last) as usize
    }

    /// The hit-age class of an object whose last two hit ages sum to `age`.
    #[inline]
    fn hit_age_class(&self, mut age: u64) -> u8 {
        if age == 0 {
            return (HIT_AGE_CLASSES - 1) as u8;
        }
        let mut class = 0;
        while age < self.model.max_age as u64 && class < HIT_AGE_CLASSES - 1 {
            age <<= 1;
            class += 1;
        }
        class as u8
    }

    #[inline]
    fn hit_density(&self, tag: &Tag) -> f32 {
        let age = self.age(tag.last_access);
        if age == self.model.max_age - 1 {
            return f32::MIN;
        }
        let mut density =
            self.model.hit_density[tag.class as usize * self.model.max_age + age] / tag.size_f;
        if tag.explorer {
            density += 1.0;
        }
        density
    }

    /// `budget ± size`, in libCacheSim's arithmetic (an `f32` sum truncated back).
    #[inline]
    fn budget_plus(budget: i64, size: f32) -> i64 {
        (budget as f32 + size) as i64
    }

    /// Draws whether the update of `tags[i]` makes it an explorer, and sets it accordingly;
    /// returns the draw.
    #[inline]
    fn draw_explorer(&mut self, i: usize) -> bool {
        #[allow(clippy::manual_is_multiple_of)] // `is_multiple_of` needs Rust 1.87; MSRV is 1.85
        let explore = self.next_rand() % EXPLORE_INVERSE_PROBABILITY == 0;
        let tag = self.tags.at_mut(i);
        if explore && self.explorer_budget > 0 && self.reconfigurations < SETTLED_AFTER {
            tag.explorer = true;
            self.explorer_budget = Self::budget_plus(self.explorer_budget, -tag.size_f);
        } else {
            tag.explorer = false;
        }
        explore
    }

    /// The end of an update: the clock advances, and the model is reconfigured when due.
    #[inline]
    fn tick(&mut self) {
        self.timestamp += 1;
        self.until_reconfiguration -= 1;
        if self.until_reconfiguration == 0 {
            self.reconfigure();
            self.until_reconfiguration = self.params.reconfiguration_interval;
            self.reconfigurations += 1;
        }
    }

    fn reconfigure(&mut self) {
        for v in self.model.hits.iter_mut().chain(&mut self.model.evictions) {
            *v *= EWMA_DECAY;
        }
        self.adapt_age_coarsening();
        self.model.model_hit_density();
    }

    fn adapt_age_coarsening(&mut self) {
        self.ewma_num_objects *= EWMA_DECAY;
        self.ewma_num_objects_mass *= EWMA_DECAY;
        self.ewma_num_objects += self.tags.len() as f32;
        self.ewma_num_objects_mass += 1.0;
        if !ADAPT_COARSENING_AT.contains(&self.reconfigurations) {
            return;
        }
        let num_objects = self.ewma_num_objects / self.ewma_num_objects_mass;
        let bins = AGE_COARSENING_ERROR_TOLERANCE * self.model.max_age as f32;
        let optimal = (f64::from(num_objects) / f64::from(bins)) as f32;
        let mut shift = 1u32;
        while shift < 63 && ((1u64 << shift) as f32) < optimal {
            shift += 1;
        }
        let delta = i64::from(shift) - i64::from(self.age_coarsening_shift);
        self.age_coarsening_shift = shift;
        self.ewma_num_objects *= 8.0;
        self.ewma_num_objects_mass *= 8.0;
        self.model.rescale(delta);
    }

    /// Picks the victim: the first of lowest hit density among the sampled objects and the
    /// recently admitted ones still cached. The cache must not be empty.
    fn choose_victim(&mut self) -> usize {
        let n = self.tags.len() as u64;
        let samples = if self.reconfigurations > SETTLED_AFTER {
            self.params.associativity
        } else {
            self.params.early_associativity
        };
        let mut victim = None;
        let mut victim_density = f32::MAX;
        let mut first = 0;
        for s in 0..samples {
            let i = (self.next_rand() % n) as usize;
            if s == 0 {
                first = i;
            }
            let density = self.hit_density(self.tags.at(i));
            if density < victim_density {
                victim = Some(i);
                victim_density = density;
            }
        }
        for slot in 0..self.recently_admitted.len() {
            let Some(i) = self.recently_admitted[slot].and_then(|id| self.position(id)) else {
                continue;
            };
            let density = self.hit_density(self.tags.at(i));
            if density < victim_density {
                victim = Some(i);
                victim_density = density;
            }
        }
        self.ewma_victim_hit_density =
            EWMA_DECAY * self.ewma_victim_hit_density + (1.0 - EWMA_DECAY) * victim_density;
        victim.unwrap_or(first)
    }

    /// Takes `tags[i]` out of the dense array (the last one moves into its place).
    fn take(&mut self, i: usize) -> Tag {
        let tag = self.tags.swap_remove(i);
        self.used -= tag.size;
        if tag.explorer {
            self.explorer_budget = Self::budget_plus(self.explorer_budget, tag.size_f);
        }
        tag
    }

    fn evict(&mut self) -> Evicted {
        let i = self.choose_victim();
        let tag = *self.tags.at(i);
        let age = self.age(tag.last_access);
        self.model.evictions[tag.class as usize * self.model.max_age + age] += 1.0;
        self.take(i);
        Evicted {
            id: tag.id,
            size: tag.size,
        }
    }
}

impl Eviction for Lhd {
    fn name(&self) -> &'static str {
        "lhd"
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn used(&self) -> u64 {
        self.used
    }
    fn len(&self) -> usize {
        self.tags.len()
    }
    fn peek(&self, id: u64) -> Option<u64> {
        self.position(id).map(|i| self.tags.at(i).size)
    }

    /// A hit: counts it in the class's hit histogram at the object's age, which becomes its
    /// last hit age (and so its class changes), and draws whether it explores.
    #[inline]
    fn touch(&mut self, id: u64, _now: u64, _evicted: &mut Vec<Evicted>) -> Option<u64> {
        let i = self.position(id)?;
        let tag = *self.tags.at(i);
        let age = self.age(tag.last_access);
        self.model.hits[tag.class as usize * self.model.max_age + age] += 1.0;
        if tag.explorer {
            self.explorer_budget = Self::budget_plus(self.explorer_budget, tag.size_f);
        }
        let class = self.hit_age_class(u64::from(tag.last_hit_age) + age as u64);
        let t = self.tags.at_mut(i);
        t.last_last_hit_age = tag.last_hit_age;
        t.last_hit_age = age as u32;
        t.class = class;
        t.last_access = self.timestamp;
        self.draw_explorer(i);
        self.tick();
        Some(tag.size)
    }

    fn insert(&mut self, id: u64, size: u64, _now: u64, evicted: &mut Vec<Evicted>) {
        while self.used + size > self.capacity && !self.tags.is_empty() {
            let e = self.evict();
            evicted.push(e);
        }
        let max_age = self.params.max_age;
        let i = self.tags.push(Tag {
            id,
            size,
            size_f: size as f32,
            last_access: self.timestamp,
            last_hit_age: 0,
            last_last_hit_age: max_age,
            class: self.hit_age_class(u64::from(max_age)),
            explorer: false,
        });
        self.used += size;
        let explore = self.draw_explorer(i);
        if !explore
            && !self.recently_admitted.is_empty()
            && self.hit_density(self.tags.at(i)) < self.ewma_victim_hit_density
        {
            let slot = self.recently_admitted_head % self.recently_admitted.len();
            self.recently_admitted[slot] = Some(id);
            self.recently_admitted_head = self.recently_admitted_head.wrapping_add(1);
        }
        self.tick();
    }

    fn remove(&mut self, id: u64) -> Option<u64> {
        let i = self.position(id)?;
        Some(self.take(i).size)
    }
    fn clone_box(&self) -> Box<dyn Eviction> {
        Box::new(self.clone())
    }
    fn heap_bytes(&self) -> usize {
        self.tags.heap_bytes()
            + 3 * self.model.hits.capacity() * std::mem::size_of::<f32>()
            + self.recently_admitted.capacity() * std::mem::size_of::<Option<u64>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hit_age_classes_are_roughly_log2_of_max_age_over_the_sum() {
        let l = Lhd::new(1 << 20, 0);
        assert_eq!(l.hit_age_class(0), 15);
        assert_eq!(l.hit_age_class(1), 15);
        assert_eq!(l.hit_age_class(2), 14);
        assert_eq!(l.hit_age_class(10_000), 1);
        assert_eq!(l.hit_age_class(19_999), 1);
        assert_eq!(l.hit_age_class(20_000), 0);
        assert_eq!(l.hit_age_class(u64::from(u32::MAX) * 2), 0);
    }

    #[test]
    fn the_generator_is_libcachesims_lehmer64() {
        let mut l = Lhd::new(1, 0);
        let x = 0xdead_beef_u128 * 0xda94_2042_e4dd_58b5;
        assert_eq!(l.next_rand(), (x >> 64) as u64);
        let y = x.wrapping_mul(0xda94_2042_e4dd_58b5);
        assert_eq!(l.next_rand(), (y >> 64) as u64);
        assert_eq!(l.rng_state(), y);
    }

    /// Seed s starts s · 2^64 draws on: seed 1 is where 2^64 steps from seed 0 lead, and
    /// seeds differ from each other.
    #[test]
    fn seeds_jump_ahead_by_2_to_the_64_draws() {
        let mut jump = LEHMER_MULTIPLIER;
        for _ in 0..64 {
            jump = jump.wrapping_mul(jump);
        }
        assert_eq!(seed_state(0), LEHMER_START);
        assert_eq!(seed_state(1), LEHMER_START.wrapping_mul(jump));
        assert_eq!(seed_state(3), seed_state(2).wrapping_mul(jump));
        let states: std::collections::HashSet<u128> = (0..100).map(seed_state).collect();
        assert_eq!(states.len(), 100);
        assert!(states.iter().all(|s| s & 1 == 1));
    }

    /// The initial model is GDSF-like: a small object outranks a large one of the same age and
    /// class, a young one an old one of the same size.
    #[test]
    fn the_initial_model_prefers_small_and_young_objects() {
        let mut l = Lhd::new(100, 0);
        let mut ev = Vec::new();
        l.insert(1, 10, 0, &mut ev);
        l.insert(2, 40, 0, &mut ev);
        let (a, b) = (*l.tags.at(0), *l.tags.at(1));
        assert!(!a.explorer && !b.explorer);
        // Class 0 at age 0: 17 / size.
        assert_eq!(l.hit_density(&a), 17.0 / 10.0);
        assert_eq!(l.hit_density(&b), 17.0 / 40.0);
        // Age object 1 by 2^10 updates (hits on object 2): 17 / 2 / 10.
        for t in 0..1024 {
            l.touch(2, t, &mut Vec::new());
        }
        assert_eq!(l.age(a.last_access), 1);
        assert_eq!(l.hit_density(&a), 0.85);
    }

    /// A model with hits only at age 3 (and evictions at 5): the density at age a ≤ 3 is
    /// hits / Σ_{x ≥ a} (x − a + 1)·events, and 0 past the last event.
    #[test]
    fn hit_density_follows_the_definition() {
        let mut m = Model::new(8);
        m.hits[3] = 2.0;
        m.evictions[5] = 1.0;
        m.model_hit_density();
        // a = 0: 2 hits / (2·4 + 1·6) = 2/14.
        assert!((m.hit_density[0] - 2.0 / 14.0).abs() < 1e-7);
        // a = 3: 2 / (2·1 + 1·3) = 2/5.
        assert!((m.hit_density[3] - 0.4).abs() < 1e-7);
        // a = 4, 5: no hits left.
        assert_eq!(m.hit_density[4], 0.0);
        assert_eq!(m.hit_density[5], 0.0);
        // a = 6: no events at all.
        assert_eq!(m.hit_density[6], 0.0);
    }

    #[test]
    fn rescaling_merges_and_spreads_bins() {
        let mut m = Model::new(8);
        for (a, v) in m.hits[..8].iter_mut().enumerate() {
            *v = a as f32;
        }
        let mut merged = m.clone();
        merged.rescale(1);
        // Bins (0,1), (2,3), (4,5), (6,7) → 0..4; 4..7 cleared; the last bin kept.
        assert_eq!(
            &merged.hits[..8],
            &[1.0, 5.0, 9.0, 13.0, 0.0, 0.0, 0.0, 7.0]
        );
        let mut spread = m.clone();
        spread.rescale(-1);
        // Bins 4..7 fold into the last one (4 + 5 + 6 + 7 = 22), then each bin a takes half
        // of bin a/2.
        assert_eq!(
            &spread.hits[..8],
            &[0.0, 0.0, 0.5, 0.5, 1.0, 1.0, 1.5, 22.0]
        );
    }

    /// Zero-sized objects (densities of +∞ or NaN), a zero capacity, objects as large as the
    /// cache, and a model reconfigured at every update: no panic, exact accounting.
    #[test]
    fn degenerate_sizes_do_not_panic() {
        let params = LhdParams {
            max_age: 2,
            reconfiguration_interval: 1,
            initial_age_coarsening_shift: 0,
            ..LhdParams::default()
        };
        for capacity in [0, 1, 10] {
            let mut l = Lhd::with_params(capacity, 7, params);
            let mut ev = Vec::new();
            for i in 0..300u64 {
                let id = i % 7;
                let size = [0, capacity, 0, 1][(i % 4) as usize].min(capacity);
                if l.touch(id, i, &mut Vec::new()).is_some_and(|s| s != size) {
                    l.remove(id);
                }
                if l.peek(id).is_none() {
                    l.insert(id, size, i, &mut ev);
                }
                assert!(l.used() <= capacity);
                assert_eq!(l.used(), l.tags.iter().map(|t| t.size).sum::<u64>());
                for (i, t) in l.tags.iter().enumerate() {
                    assert_eq!(l.tags.position(t.id), Some(i));
                }
            }
            assert!(!ev.is_empty() || capacity == 0);
        }
    }

    #[test]
    fn explorers_give_their_budget_back() {
        let mut l = Lhd::new(100_000, 3);
        let budget = l.explorer_budget;
        assert_eq!(budget, 1000);
        let mut ev = Vec::new();
        for id in 0..200 {
            l.insert(id, 100, 0, &mut ev);
        }
        let explorers: i64 = l.tags.iter().filter(|t| t.explorer).map(|_| 100).sum();
        assert!(explorers > 0, "1 in 32 of 200 insertions explore");
        assert_eq!(l.explorer_budget, budget - explorers);
        for id in 0..200 {
            l.remove(id);
        }
        assert_eq!(l.explorer_budget, budget);
        assert!(l.is_empty());
        assert_eq!(l.used(), 0);
    }
}
