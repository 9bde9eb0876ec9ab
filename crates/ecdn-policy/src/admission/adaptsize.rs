//! AdaptSize (NSDI '17): admit with probability e^(−size/c), and every Δ requests re-tune c
//! with the Markov model of [`super::model`]. The first windows are shorter (Δ/16, Δ/8, Δ/4,
//! Δ/2, then Δ: the warm-up ramp, [`AdaptSize::window_now`]), so a cache that starts empty has
//! the model's c after Δ/16 requests instead of admitting everything for a whole Δ.
//!
//! Statistics (§4.2): every request counts toward its object in the current window. The request
//! path only appends the request to a log (12 bytes: id, size and whether it hit or was
//! admitted), like the paper's Varnish integration, which appends to a ring buffer that the
//! tuning process scans. At the end of a window the log is merged into the per-object table and
//! each object's rate is smoothed, r ← (1 − β)·r + β·(requests this window), with β
//! the `smoothing` weight (default 0.3), so history from earlier windows is kept. Objects whose
//! smoothed rate falls below [`FORGET_RATE`] are forgotten, which bounds memory. Then the model
//! is built and c is set to its global optimum (§4.1).
//!
//! **What the model learns from** ([`Estimator`]). By default ([`Estimator::Reuse`]) each
//! request of the window contributes its reuse gap — requests since the object's previous
//! request, known from the table's last-request index — and the model is
//! [`super::reuse::ReuseModel`]: Theorem 1's chain on the observed gaps, which holds on traffic
//! with temporal locality. [`Estimator::Rates`] (`model=rates`) builds the paper's model from the
//! smoothed rates of all remembered objects.
//!
//! **Where the model is solved.** By default (synchronous mode, see [`AdaptSize`]) the request
//! that ends a window merges the log, builds the model and searches c before it returns: the
//! simulator's results are then a function of the trace alone. The node calls
//! [`Admission::tune_in_background`]: the request that ends a window only hands its log to a
//! solver thread of the policy's own (a channel send, no lock, no wait) and takes a recycled
//! empty log back; the solver merges, solves and publishes the new c in an atomic, which the
//! request path picks up on its next request. Both modes run the same code on the same
//! statistics, so they choose the same c; the background mode only applies it later. When the
//! solver is still busy as further windows end, their logs queue up and it merges them all
//! (each as its own window of the smoothing) before solving once, for the newest statistics;
//! if it falls [`MAX_PENDING`] windows behind, further windows are dropped (not counted) until
//! it catches up, which bounds the memory of a solver starved of CPU. The solver thread ends
//! when the policy is dropped.
//!
//! **Memory.** A tracked object is 28 bytes in a dense table (id; request index of its latest
//! request, with the cached flag in the top bit; smoothed rate; size as `f32` — the model groups
//! sizes into buckets 25% wide) plus a 4-byte slot and a control byte in the hash index over
//! the table (36 bytes per object all told at the table's typical load). The log is 12 bytes
//! per request of the window (two logs in background mode: the one filling and the one being
//! merged). The solver thread runs 10 nice levels below the request threads, so that waking it
//! at a window end does not preempt them on a busy machine.
//!
//! The model's decision horizon (see [`super::model`]) defaults to [`DEFAULT_HORIZON`] windows:
//! c is chosen for the OHR of the coming windows, starting from what is cached now, rather than
//! for the stationary state (`horizon=inf`, the paper's model), which favours an ever smaller c
//! whose benefits arrive only after far longer than the statistics stay valid. What is cached
//! now is estimated without looking into the cache: an object is cached if its last request hit
//! or was admitted and it is among the most recently used such objects that fit in the capacity
//! (exact for LRU).
//!
//! **Guard** (on by default, `guard=off` for the paper's policy alone): the model is Che's
//! approximation under independent requests; on traffic with strong temporal locality it can
//! be badly wrong (on the JEDI d-2 trace it predicts an OHR of 0.47 for admit-all LRU, which
//! measures 0.68 — see `ecdn sim model`), and its c then loses to plain LRU. So a key-only
//! shadow cache of the same capacity runs the configuration the cache is *not* running — admit
//! everything while the cache follows the model, the model's c while it admits everything —
//! and at each window end the cache switches to whichever of the two hit more in that window.
//! Within a window the guard looks every Δ/16 requests and switches early when the shadow leads
//! by more than three standard deviations of the hit-count difference (3·√(hits of both)), so a
//! wrong model costs a fraction of a window, not a whole one. When the model says admit
//! everything, both run the same configuration.

use crate::list::hash;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hashbrown::HashTable;

use super::exp::exp_admit_probability;
use super::model::{Model, ObjectState};
use super::reuse::{ReuseModel, ReuseObject};
use super::shadow::Shadow;
use crate::eviction::EvictionKind;
use crate::{Admission, Request};
use ecdn_trace::gen::Rng;

/// How the model learns each object's request process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Estimator {
    /// From its requests' reuse gaps in the last window ([`super::reuse`]): holds on traffic
    /// with temporal locality (the default).
    Reuse,
    /// From its smoothed request count per window, as the paper (§4.2): a steady rate.
    Rates,
}

/// Smoothed rates below this (requests per window) are dropped from the statistics.
pub const FORGET_RATE: f64 = 0.1;

/// Default decision horizon of the model, in windows.
pub const DEFAULT_HORIZON: f64 = 2.0;

/// Windows of the warm-up ramp: the first window lasts Δ/2^RAMP requests and each next one twice
/// as long, up to Δ (see [`AdaptSize::window_now`]).
pub const RAMP: u32 = 4;

/// Flag bit of [`Tracked::last`]: the latest request hit or was admitted.
const CACHED: u64 = 1 << 63;
/// Flag bit of [`Logged::bits`] (the sign bit of the size): the request hit or was admitted.
const LOGGED_CACHED: u32 = 1 << 31;
/// [`Logged::bits`] of an entry that is not a request, only "the object was admitted", for an
/// object whose request is in a log already handed over: a NaN, which no size converts to.
const MARK: u32 = 0x7fc0_0001;

/// One request as the request path logs it: 12 bytes.
#[derive(Clone, Copy, Debug)]
#[repr(C, packed(4))]
struct Logged {
    id: u64,
    /// The size as `f32` (as precise as [`Tracked::size`]) | [`LOGGED_CACHED`]; or [`MARK`].
    bits: u32,
}

/// What the statistics keep about one object: 28 bytes (packed to 4-byte alignment).
///
/// The rate stays `f64`: the smoothed rates feed the model's search for c, and at `f32` its
/// choice moved on some traces (on a generated web-video trace with `horizon=inf` at 4 GiB the
/// OHR went from 0.4525 to 0.5117), which would change the simulator's results.
#[derive(Clone, Copy, Debug)]
#[repr(C, packed(4))]
struct Tracked {
    id: u64,
    /// Request index of the latest request | [`CACHED`] if it hit or was admitted.
    last: u64,
    /// Smoothed requests per window, as of the last window end.
    rate: f64,
    /// Latest size seen (as precise as the model needs: it groups sizes 25% apart).
    size: f32,
}

/// Heap bytes of a `hashbrown` table whose `capacity()` is `capacity`, with `slot`-byte slots:
/// a power of two of buckets (8/7 of the capacity from 8 buckets on), a control byte per bucket
/// and one trailing group of control bytes.
fn table_bytes(capacity: usize, slot: usize) -> usize {
    if capacity == 0 {
        return 0;
    }
    let buckets = if capacity < 8 {
        (capacity + 1).next_power_of_two()
    } else {
        (capacity * 8 / 7).next_power_of_two()
    };
    buckets * (slot + 1) + 16
}

/// Windows handed to the solver and not merged yet beyond which a window's log is dropped
/// instead (its requests are not counted): bounds the memory of a solver starved of CPU.
pub const MAX_PENDING: u64 = 4;

/// Initial capacity of a request log: a whole window, up to 1M requests (12 MiB).
fn log_capacity(window: usize) -> usize {
    window.saturating_add(1).min(1 << 20)
}

/// The statistics and the model solve: everything AdaptSize does at a window end. The same code
/// runs inline (synchronous mode) or on the solver thread (background mode).
struct Tuner {
    capacity: u64,
    smoothing: f64,
    horizon: f64,
    estimator: Estimator,
    /// The last window's requests as (dense index, reuse gap in requests; ∞ for an object not
    /// known before), for [`Estimator::Reuse`]. (Keeping the last ⌈1/β⌉ windows instead was
    /// tried: on the generated web trace it cost 0.03–0.07 OHR and two thirds of the speed.)
    gaps: Vec<(u32, f64)>,
    /// Requests in the last window.
    window_len: u64,
    /// Tracked objects, dense.
    objects: Vec<Tracked>,
    /// Index into `objects` by id.
    index: HashTable<u32>,
}

impl Tuner {
    fn new(capacity: u64, smoothing: f64, horizon: f64, estimator: Estimator) -> Self {
        Tuner {
            capacity,
            smoothing,
            horizon,
            estimator,
            gaps: Vec::new(),
            window_len: 0,
            objects: Vec::new(),
            index: HashTable::new(),
        }
    }

    /// Ends a window whose requests are `log`, the first at request index `first`: merges the
    /// log, smooths the rates, forgets rare objects.
    fn record(&mut self, first: u64, log: &[Logged]) {
        let Tuner {
            objects,
            index,
            gaps,
            ..
        } = self;
        let reuse = self.estimator == Estimator::Reuse;
        gaps.clear();
        // Requests per object in this window, by dense index.
        let mut counts = vec![0u32; objects.len()];
        let mut now = first;
        for &Logged { id, bits } in log {
            let found = index
                .find(hash(id), |&i| objects[i as usize].id == id)
                .copied();
            if bits == MARK {
                if let Some(i) = found {
                    objects[i as usize].last |= CACHED;
                }
                continue;
            }
            let (i, gap) = match found {
                Some(i) => (
                    i as usize,
                    (now - (objects[i as usize].last & !CACHED)) as f64,
                ),
                None => {
                    // Dense indices are u32: beyond 2^32 objects, new ones go untracked.
                    let Ok(i) = u32::try_from(objects.len()) else {
                        now += 1;
                        continue;
                    };
                    objects.push(Tracked {
                        id,
                        last: 0,
                        rate: 0.0,
                        size: 0.0,
                    });
                    counts.push(0);
                    index.insert_unique(hash(id), i, |&j| hash(objects[j as usize].id));
                    (i as usize, f64::INFINITY)
                }
            };
            if reuse {
                gaps.push((i as u32, gap));
            }
            counts[i] = counts[i].saturating_add(1);
            let o = &mut objects[i];
            o.size = f32::from_bits(bits & !LOGGED_CACHED);
            o.last = now | if bits & LOGGED_CACHED != 0 { CACHED } else { 0 };
            now += 1;
        }
        // r ← (1 − β)·r + β·(requests this window); forget the rare ones, compacting the table;
        // `counts[i]` becomes object i's new index (or `u32::MAX`: forgotten).
        let beta = self.smoothing;
        let mut kept = 0;
        for i in 0..objects.len() {
            let mut o = objects[i];
            let rate = (1.0 - beta) * o.rate + beta * counts[i] as f64;
            if rate >= FORGET_RATE {
                o.rate = rate;
                objects[kept] = o;
                counts[i] = kept as u32;
                kept += 1;
            } else {
                counts[i] = u32::MAX;
            }
        }
        objects.truncate(kept);
        objects.shrink_to_fit();
        // An object requested in the window has a smoothed rate of at least β, so it is kept
        // unless β < FORGET_RATE; then its gaps go with it.
        gaps.retain_mut(|(i, _)| {
            *i = counts[*i as usize];
            *i != u32::MAX
        });
        self.window_len = now - first;
        index.retain(|i| {
            *i = counts[*i as usize];
            *i != u32::MAX
        });
        index.shrink_to(kept, |&j| hash(objects[j as usize].id));
    }

    /// Request index before which a flagged object has been pushed out of an LRU cache: the
    /// most recently used flagged objects fill the capacity, older ones are gone.
    fn cached_since(&self) -> u64 {
        if self.horizon.is_infinite() {
            return u64::MAX;
        }
        let mut cached: Vec<(u64, u64)> = self
            .objects
            .iter()
            .filter(|o| o.last & CACHED != 0)
            .map(|o| (o.last & !CACHED, o.size as u64))
            .collect();
        cached.sort_unstable_by_key(|&(last, _)| std::cmp::Reverse(last));
        let mut bytes = 0u64;
        for &(last, size) in &cached {
            bytes += size;
            if bytes > self.capacity {
                return last + 1;
            }
        }
        0
    }

    /// Whether tracked object `o` is cached now, as [`Tuner::cached_since`] estimates.
    fn p_in(o: &Tracked, since: u64) -> f64 {
        if o.last & CACHED != 0 && o.last & !CACHED >= since {
            1.0
        } else {
            0.0
        }
    }

    /// The paper's model, built from the smoothed rates as of the last window end.
    fn rate_model(&self) -> Model {
        let since = self.cached_since();
        Model::with_state(
            self.objects.iter().map(|o| ObjectState {
                rate: o.rate,
                size: o.size as u64,
                p_in: Self::p_in(o, since),
            }),
            self.capacity,
        )
        .with_horizon(self.horizon)
    }

    /// The reuse-gap model of the last window.
    fn reuse_model(&self) -> ReuseModel {
        let since = self.cached_since();
        // The gaps grouped by object (a counting sort): object i's are flat[start[i]..start[i + 1]].
        let mut start = vec![0u32; self.objects.len() + 1];
        for &(i, _) in &self.gaps {
            start[i as usize + 1] += 1;
        }
        for i in 1..start.len() {
            start[i] += start[i - 1];
        }
        let mut fill = start.clone();
        let mut flat = vec![0.0; self.gaps.len()];
        for &(i, g) in &self.gaps {
            flat[fill[i as usize] as usize] = g;
            fill[i as usize] += 1;
        }
        let objects = self.objects.iter().enumerate().filter_map(|(i, o)| {
            let (a, b) = (start[i] as usize, start[i + 1] as usize);
            (b > a).then(|| ReuseObject {
                size: o.size as u64,
                gaps: &flat[a..b],
                p_in: Self::p_in(o, since),
            })
        });
        ReuseModel::new(objects, self.capacity, self.window_len).with_horizon(self.horizon)
    }

    /// The model's best c and its predicted OHR; `None` while there is nothing to model.
    fn solve(&self) -> Option<(f64, f64)> {
        match self.estimator {
            Estimator::Rates => {
                let model = self.rate_model();
                (model.groups() > 0).then(|| model.best_c())
            }
            Estimator::Reuse => (!self.gaps.is_empty()).then(|| self.reuse_model().best_c()),
        }
    }

    fn heap_bytes(&self) -> usize {
        self.objects.capacity() * std::mem::size_of::<Tracked>()
            + table_bytes(self.index.capacity(), std::mem::size_of::<u32>())
    }
}

/// What the solver thread publishes.
#[derive(Default)]
struct Published {
    /// Solutions published so far.
    solutions: AtomicU64,
    /// Windows merged so far.
    windows: AtomicU64,
    /// Bits of the newest c.
    c: AtomicU64,
    /// Bits of the newest predicted OHR.
    prediction: AtomicU64,
    tracked: AtomicUsize,
    heap_bytes: AtomicUsize,
}

/// The request path's end of the solver thread.
struct Background {
    windows: Sender<(u64, Vec<Logged>)>,
    recycled: Receiver<Vec<Logged>>,
    published: Arc<Published>,
    /// Windows handed to the solver.
    handed: u64,
    /// Solutions applied.
    applied: u64,
    /// Windows dropped because the solver was [`MAX_PENDING`] windows behind.
    dropped: u64,
}

enum Tuning {
    Synchronous(Box<Tuner>),
    Background(Background),
}

/// The solver thread: merges every window handed over, solves for the newest statistics,
/// publishes; ends when the policy (the sender) is gone.
fn solver(
    mut tuner: Tuner,
    windows: Receiver<(u64, Vec<Logged>)>,
    recycled: Sender<Vec<Logged>>,
    published: Arc<Published>,
    gate: Option<Receiver<()>>,
) {
    lower_priority();
    while let Ok(first) = windows.recv() {
        let mut merged = 0;
        let mut next = Some(first);
        while let Some((start, mut log)) = next {
            tuner.record(start, &log);
            log.clear();
            // The policy may be gone; then the buffer is simply freed.
            let _ = recycled.send(log);
            merged += 1;
            next = windows.try_recv().ok();
        }
        if let Some(gate) = &gate {
            // Test hook: the solve waits until the test lets it go (or drops the gate).
            let _ = gate.recv();
        }
        if let Some((c, ohr)) = tuner.solve() {
            published.c.store(c.to_bits(), Ordering::Relaxed);
            published.prediction.store(ohr.to_bits(), Ordering::Relaxed);
            published.solutions.fetch_add(1, Ordering::Release);
        }
        published
            .tracked
            .store(tuner.objects.len(), Ordering::Relaxed);
        published
            .heap_bytes
            .store(tuner.heap_bytes(), Ordering::Relaxed);
        published.windows.fetch_add(merged, Ordering::Release);
    }
}

/// Lowers the calling thread's priority by 10 nice levels (at most to 19), so that the solver,
/// woken at a window end, does not preempt request threads on a busy machine: its work can
/// wait, theirs cannot. Best effort: without the permission or on other systems nothing
/// changes.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: plain system calls on the calling thread (on Linux, PRIO_PROCESS with a thread
    // id sets that thread's nice value); no memory is passed.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        *libc::__errno_location() = 0;
        let nice = libc::getpriority(libc::PRIO_PROCESS, tid);
        if *libc::__errno_location() == 0 {
            libc::setpriority(libc::PRIO_PROCESS, tid, (nice + 10).min(19));
        }
    }
}

/// The guard's shadow cache and the hit counts it is judged by.
struct Guard {
    shadow: Shadow,
    rng: Rng,
    /// Hits of the real cache in the current window.
    main_hits: u64,
    /// The real cache follows the model (else it admits everything).
    follow_model: bool,
    /// Windows in which the real cache admitted everything.
    overruled: u64,
    /// Requests until the next early check.
    until_check: usize,
}

/// The AdaptSize admission policy.
///
/// Synchronous mode (the default, used by the simulator): the request that ends a window
/// re-tunes c before it returns, so results depend on the requests alone. Background mode
/// ([`Admission::tune_in_background`], used by the node): the model is solved on a thread of
/// the policy's own and the new c applies from the first request after it is published. See
/// the module documentation.
pub struct AdaptSize {
    capacity: u64,
    window: usize,
    smoothing: f64,
    horizon: f64,
    estimator: Estimator,
    /// The c the real cache uses now.
    c: f64,
    /// The c the model chose at the last window end.
    model_c: f64,
    guard: Option<Guard>,
    /// Windows ended so far.
    windows: u64,
    /// Whether the first windows are shorter ([`AdaptSize::window_now`]).
    ramp: bool,
    /// The current window's length in requests (set at each window end).
    current: usize,
    seen: usize,
    requests: u64,
    /// Requests of the current window.
    log: Vec<Logged>,
    /// Request index of the first request in `log`.
    log_first: u64,
    tuning: Tuning,
    rng: Rng,
    history: Vec<(u64, f64)>,
    last_prediction: Option<f64>,
}

impl AdaptSize {
    /// `capacity` of the cache it guards, window Δ in requests, smoothing weight β ∈ (0, 1],
    /// decision horizon in windows (∞ for the paper's stationary model); `guard` is the
    /// eviction policy of the real cache, for the guard's shadow (`None`: no guard).
    pub fn new(
        capacity: u64,
        window: usize,
        smoothing: f64,
        horizon: f64,
        guard: Option<EvictionKind>,
        seed: u64,
    ) -> Self {
        // Until the first window's statistics exist, c is infinite: admit everything, like the
        // plain LRU cache AdaptSize is added to.
        let c = f64::INFINITY;
        let smoothing = smoothing.clamp(1e-6, 1.0);
        AdaptSize {
            capacity,
            window: window.max(1),
            smoothing,
            horizon,
            estimator: Estimator::Reuse,
            c,
            model_c: c,
            guard: guard.map(|kind| Guard {
                shadow: Shadow::new(kind.build(capacity)),
                rng: Rng::new(seed ^ 0x9a2d_0000_0000_0001),
                main_hits: 0,
                follow_model: true,
                overruled: 0,
                until_check: 1,
            }),
            windows: 0,
            ramp: true,
            current: 1,
            seen: 0,
            requests: 0,
            log: Vec::new(),
            log_first: 0,
            tuning: Tuning::Synchronous(Box::new(Tuner::new(
                capacity,
                smoothing,
                horizon,
                Estimator::Reuse,
            ))),
            rng: Rng::new(seed),
            history: vec![(0, c)],
            last_prediction: None,
        }
        .with_ramp(true)
    }

    /// Sets how the model learns the objects' request processes (before the first request).
    pub fn with_estimator(mut self, estimator: Estimator) -> Self {
        self.estimator = estimator;
        if let Tuning::Synchronous(tuner) = &mut self.tuning {
            tuner.estimator = estimator;
        }
        self
    }

    /// Turns the warm-up ramp ([`AdaptSize::window_now`]) on or off (before the first request);
    /// off, every window is Δ long, as the paper's §4.2 reads.
    pub fn with_ramp(mut self, ramp: bool) -> Self {
        self.ramp = ramp;
        self.current = self.ramp_window();
        let check_every = self.check_every();
        if let Some(g) = self.guard.as_mut() {
            g.until_check = check_every;
        }
        self
    }

    /// The OHR the model predicted for the chosen c at the last re-tuning.
    pub fn last_prediction(&self) -> Option<f64> {
        self.last_prediction
    }

    /// Whether the model is solved on the policy's own thread.
    pub fn is_background(&self) -> bool {
        matches!(self.tuning, Tuning::Background(_))
    }

    /// Starts the solver thread with the statistics gathered so far; `gate` (tests) holds each
    /// solve until a message arrives. Returns whether the policy tunes in the background now.
    fn start_background(&mut self, gate: Option<Receiver<()>>) -> bool {
        // The thread takes the statistics; if it cannot start, they are rebuilt from nothing.
        let fresh = Tuner::new(self.capacity, self.smoothing, self.horizon, self.estimator);
        let tuner = match std::mem::replace(&mut self.tuning, Tuning::Synchronous(Box::new(fresh)))
        {
            Tuning::Synchronous(tuner) => tuner,
            running @ Tuning::Background(_) => {
                self.tuning = running;
                return true;
            }
        };
        let (windows, windows_rx) = mpsc::channel();
        let (recycled_tx, recycled) = mpsc::channel();
        let published = Arc::new(Published::default());
        let shared = published.clone();
        let started = std::thread::Builder::new()
            .name("adaptsize-solver".into())
            .spawn(move || solver(*tuner, windows_rx, recycled_tx, shared, gate));
        if started.is_err() {
            return false;
        }
        self.tuning = Tuning::Background(Background {
            windows,
            recycled,
            published,
            handed: 0,
            applied: 0,
            dropped: 0,
        });
        true
    }

    /// Background mode: applies the newest c the solver published, if it is new.
    #[inline]
    fn apply_published(&mut self) {
        let Tuning::Background(bg) = &mut self.tuning else {
            return;
        };
        let solutions = bg.published.solutions.load(Ordering::Acquire);
        if solutions == bg.applied {
            return;
        }
        bg.applied = solutions;
        self.model_c = f64::from_bits(bg.published.c.load(Ordering::Relaxed));
        self.last_prediction = Some(f64::from_bits(
            bg.published.prediction.load(Ordering::Relaxed),
        ));
        let follow = self.guard.as_ref().is_none_or(|g| g.follow_model);
        if follow && self.model_c.to_bits() != self.c.to_bits() {
            self.c = self.model_c;
            self.history.push((self.requests, self.c));
        }
    }

    /// Waits until the solver thread has merged and solved every window handed to it, at most
    /// `timeout`, and applies its result. Returns whether it caught up (always, in synchronous
    /// mode). For tests and tools; the request path never waits.
    pub fn settle(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let caught_up = match &self.tuning {
                Tuning::Synchronous(_) => return true,
                Tuning::Background(bg) => bg.published.windows.load(Ordering::Acquire) >= bg.handed,
            };
            if caught_up {
                self.apply_published();
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Ends the current window: hands its statistics to the model (solved now, or on the
    /// solver thread in background mode) and lets the guard judge the window.
    pub fn retune(&mut self) {
        self.windows += 1;
        self.current = self.ramp_window();
        if let Some(g) = self.guard.as_mut() {
            if g.shadow.hits > g.main_hits {
                g.follow_model = !g.follow_model;
            }
            g.shadow.hits = 0;
            g.main_hits = 0;
        }
        let first = std::mem::replace(&mut self.log_first, self.requests);
        let mut inline = None;
        match &mut self.tuning {
            Tuning::Synchronous(tuner) => {
                tuner.record(first, &self.log);
                self.log.clear();
                inline = Some(tuner.solve());
            }
            Tuning::Background(bg)
                if bg.handed - bg.published.windows.load(Ordering::Acquire) >= MAX_PENDING =>
            {
                self.log.clear();
                bg.dropped += 1;
            }
            Tuning::Background(bg) => {
                let empty = bg
                    .recycled
                    .try_recv()
                    .unwrap_or_else(|_| Vec::with_capacity(log_capacity(self.window)));
                let log = std::mem::replace(&mut self.log, empty);
                match bg.windows.send((first, log)) {
                    Ok(()) => bg.handed += 1,
                    Err(mpsc::SendError((first, log))) => {
                        // The solver thread is gone (it can only have panicked): tune here
                        // from now on, from fresh statistics.
                        let mut tuner =
                            Tuner::new(self.capacity, self.smoothing, self.horizon, self.estimator);
                        tuner.record(first, &log);
                        inline = Some(tuner.solve());
                        self.tuning = Tuning::Synchronous(Box::new(tuner));
                    }
                }
            }
        }
        if let Some(Some((c, ohr))) = inline {
            self.model_c = c;
            self.last_prediction = Some(ohr);
        }
        self.c = match &mut self.guard {
            Some(g) if !g.follow_model => {
                g.overruled += 1;
                f64::INFINITY
            }
            _ => self.model_c,
        };
        self.history.push((self.requests, self.c));
    }

    /// The length of the current window in requests. **Warm-up ramp** (beyond the paper, which
    /// does not say how AdaptSize starts): the first window lasts Δ/2^[`RAMP`] requests and each
    /// next one twice as long, up to Δ, so the model's first c comes after Δ/16 requests rather
    /// than Δ. Until it comes the cache admits everything; on shot-noise traces of 1.64M
    /// requests the ramp raised the OHR by 0.004–0.015 (BENCHMARKS.md, issue 64). The model
    /// learns from the window's own requests and knows how long it was, so short windows need
    /// nothing else.
    pub fn window_now(&self) -> usize {
        self.current
    }

    /// The guard's early check: every sixteenth of the current window.
    fn check_every(&self) -> usize {
        self.current.div_ceil(16).max(1)
    }

    /// The length of the window after `windows` have ended ([`AdaptSize::window_now`]).
    fn ramp_window(&self) -> usize {
        if !self.ramp {
            return self.window;
        }
        let shift = RAMP.saturating_sub(self.windows.min(u64::from(RAMP)) as u32);
        (self.window >> shift).max(1)
    }

    /// The c the model chose at the last window end (the guard may be overruling it).
    pub fn model_c(&self) -> f64 {
        self.model_c
    }

    /// Windows in which the guard had the cache admit everything instead of following the
    /// model.
    pub fn overruled_windows(&self) -> u64 {
        self.guard.as_ref().map_or(0, |g| g.overruled)
    }
}

impl Admission for AdaptSize {
    fn name(&self) -> String {
        "adaptsize".into()
    }

    #[inline]
    fn observe(&mut self, req: &Request, hit: bool) {
        self.apply_published();
        let now = self.requests;
        let check_every = self.check_every();
        if let Some(g) = self.guard.as_mut() {
            g.main_hits += hit as u64;
            let other = if g.follow_model {
                f64::INFINITY
            } else {
                self.model_c
            };
            g.shadow.access(req, other, now, &mut g.rng);
            g.until_check -= 1;
            if g.until_check == 0 {
                g.until_check = check_every;
                let (m, sh) = (g.main_hits as f64, g.shadow.hits as f64);
                if sh > m + 3.0 * (m + sh).sqrt() {
                    g.follow_model = !g.follow_model;
                    g.main_hits = 0;
                    g.shadow.hits = 0;
                    self.c = if g.follow_model {
                        self.model_c
                    } else {
                        f64::INFINITY
                    };
                    self.history.push((now, self.c));
                }
            }
        }
        self.log.push(Logged {
            id: req.id,
            bits: (req.size as f32).to_bits() | if hit { LOGGED_CACHED } else { 0 },
        });
        self.requests += 1;
        self.seen += 1;
        if self.seen >= self.current {
            self.seen = 0;
            self.retune();
        }
    }

    #[inline]
    fn admit(&mut self, req: &Request) -> bool {
        let admitted = self.rng.chance(exp_admit_probability(req.size, self.c));
        if admitted && !self.horizon.is_infinite() {
            match self.log.last_mut() {
                Some(e) if { e.id } == req.id && { e.bits } != MARK => e.bits |= LOGGED_CACHED,
                // Its request is in a log already handed over (it ended the window).
                _ => self.log.push(Logged {
                    id: req.id,
                    bits: MARK,
                }),
            }
        }
        admitted
    }

    fn probability(&self, size: u64) -> f64 {
        exp_admit_probability(size, self.c)
    }

    fn parameter(&self) -> Option<f64> {
        Some(self.c)
    }

    fn history(&self) -> &[(u64, f64)] {
        &self.history
    }

    fn overruled(&self) -> Option<(u64, u64)> {
        let guard = self.guard.as_ref()?;
        Some((guard.overruled, self.windows))
    }

    fn tracked(&self) -> usize {
        match &self.tuning {
            Tuning::Synchronous(tuner) => tuner.objects.len(),
            Tuning::Background(bg) => bg.published.tracked.load(Ordering::Relaxed),
        }
    }

    fn heap_bytes(&self) -> usize {
        let log = self.log.capacity() * std::mem::size_of::<Logged>();
        let tuning = match &self.tuning {
            Tuning::Synchronous(tuner) => tuner.heap_bytes(),
            // The solver's table, and the second log (being merged or waiting to be reused).
            Tuning::Background(bg) => bg.published.heap_bytes.load(Ordering::Relaxed) + log,
        };
        log + tuning + self.guard.as_ref().map_or(0, |g| g.shadow.heap_bytes())
    }

    fn tune_in_background(&mut self) -> bool {
        self.start_background(None)
    }
}

#[cfg(test)]
mod tests;
