//! Cache policies shared by `ecdn sim` and `ecdn node`: eviction (one file per policy under
//! [`eviction`], behind the [`Eviction`] trait) and admission (one file per policy under
//! [`admission`], behind the [`Admission`] trait), composed into a [`Cache`].
//!
//! A policy keeps keys, sizes and order, decides admission and reports evictions; it never owns
//! the bytes, so the node can keep the bytes wherever it wants (DRAM slabs, a disk ring, peers)
//! and the simulator keeps none at all. The simulator and the node call the same [`Cache`].

pub mod admission;
mod dense;
pub mod eviction;
pub mod list;
pub mod spec;

pub use ecdn_trace::Request;
pub use spec::{build, PolicySpec};

/// An object a policy evicted to make room.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Evicted {
    pub id: u64,
    pub size: u64,
}

/// An eviction policy: which cached object leaves when room is needed.
pub trait Eviction: Send {
    /// Short name, e.g. `lru`.
    fn name(&self) -> &'static str;
    /// Capacity in bytes.
    fn capacity(&self) -> u64;
    /// Bytes currently held.
    fn used(&self) -> u64;
    /// Objects currently held.
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Size of `id` if cached, without changing any state.
    fn peek(&self, id: u64) -> Option<u64>;
    /// Whether the policy would take the absent object `id` of `size` bytes now, asked right
    /// after the miss's [`Eviction::touch`] (an object larger than the capacity never fits;
    /// S3-FIFO also refuses what its small queue cannot hold, unless its ghost just saw it, and
    /// LIRS and W-TinyLFU anything over 1% of their capacity).
    fn can_insert(&self, _id: u64, size: u64) -> bool {
        size <= self.capacity()
    }
    /// A request for `id` at request index `now`: if cached, updates recency / frequency and
    /// returns the stored size; otherwise returns `None` and changes nothing. A hit may evict
    /// other objects (LIRS makes room in its LIR set for the object it promotes), appended to
    /// `evicted`.
    fn touch(&mut self, id: u64, now: u64, evicted: &mut Vec<Evicted>) -> Option<u64>;
    /// Inserts an absent object that [`Eviction::can_insert`] accepted, first evicting objects
    /// (appended to `evicted`) until it fits.
    fn insert(&mut self, id: u64, size: u64, now: u64, evicted: &mut Vec<Evicted>);
    /// Offline policies (Belady): the next request of the cached `id` (its request index, −1
    /// for none), told by [`Cache`] right after each hit and each insertion. Others ignore it.
    fn next_access(&mut self, _id: u64, _next: i64) {}
    /// Whether the policy needs [`Eviction::next_access`], so can only run on traces that carry
    /// it (the node refuses it).
    fn offline(&self) -> bool {
        false
    }
    /// Removes `id` (purge, or a new version with another size); returns its size.
    fn remove(&mut self, id: u64) -> Option<u64>;
    /// A copy of the whole state (shadow caches, SIZE-OPT's look-ahead).
    fn clone_box(&self) -> Box<dyn Eviction>;
    /// Heap bytes of the policy's own metadata.
    fn heap_bytes(&self) -> usize;
}

/// An admission policy: whether a missed object enters the cache.
pub trait Admission: Send {
    /// Name with parameters, e.g. `threshold(64KiB)`.
    fn name(&self) -> String;
    /// Sees every request right after the cache lookup, with its outcome (request statistics,
    /// shadow caches, re-tuning). [`Admission::admit`] is asked after this, on a miss.
    fn observe(&mut self, _req: &Request, _hit: bool) {}
    /// Decides whether the missed object `req` is admitted.
    fn admit(&mut self, req: &Request) -> bool;
    /// Probability that an object of `size` bytes would be admitted now, ignoring per-object
    /// history (for size-based policies; 1 or 0 for deterministic ones). Always in [0, 1].
    fn probability(&self, size: u64) -> f64;
    /// The current size parameter `c` in bytes, for policies that have one.
    fn parameter(&self) -> Option<f64> {
        None
    }
    /// For offline policies: how many future requests they want to see at each window start.
    fn lookahead(&self) -> Option<usize> {
        None
    }
    /// For offline policies: the next `lookahead()` requests, and the cache state, at a window
    /// start. `now` is the index of `future[0]`.
    fn prepare_window(&mut self, _future: &[Request], _cache: &dyn Eviction, _now: u64) {}
    /// Time series of the policy's own tuning decisions: `(request index, c)`.
    fn history(&self) -> &[(u64, f64)] {
        &[]
    }
    /// For policies with a guard that can overrule their model: (windows in which it did,
    /// windows ended).
    fn overruled(&self) -> Option<(u64, u64)> {
        None
    }
    /// Objects the policy keeps statistics for (cached or not).
    fn tracked(&self) -> usize {
        0
    }
    /// Heap bytes of the policy's own state (statistics, shadow caches).
    fn heap_bytes(&self) -> usize {
        0
    }
    /// Moves the policy's re-tuning off the request path, onto a thread of its own, if it has
    /// any; returns whether it now tunes in the background. Its decisions then depend on
    /// thread timing, so the simulator never calls this; the node does.
    fn tune_in_background(&mut self) -> bool {
        false
    }
}

/// What one access did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Hit,
    /// A miss; `admitted` tells whether the object was inserted.
    Miss {
        admitted: bool,
    },
}

impl Outcome {
    #[inline]
    pub fn is_hit(self) -> bool {
        matches!(self, Outcome::Hit)
    }
}

/// An eviction policy with an optional admission policy in front of it: the unit both the
/// simulator and the node drive.
pub struct Cache {
    eviction: Box<dyn Eviction>,
    admission: Option<Box<dyn Admission>>,
    evicted: Vec<Evicted>,
    now: u64,
    /// [`Eviction::offline`], asked once: only then is each request's next access passed on.
    offline: bool,
}

impl Cache {
    pub fn new(eviction: Box<dyn Eviction>, admission: Option<Box<dyn Admission>>) -> Self {
        Cache {
            offline: eviction.offline(),
            eviction,
            admission,
            evicted: Vec::new(),
            now: 0,
        }
    }

    /// Simulator path: one request, start to end. Evictions accumulate in [`Cache::evicted`]
    /// until [`Cache::clear_evicted`].
    ///
    /// A cached id requested with another size is a new version: the old one is removed and the
    /// request is a miss. An object larger than the capacity is never admitted.
    #[inline]
    pub fn access(&mut self, req: &Request) -> Outcome {
        if self.lookup(req) {
            return Outcome::Hit;
        }
        Outcome::Miss {
            admitted: self.admit(req),
        }
    }

    /// Node path, step 1: looks the request up (a hit updates order) and lets admission observe
    /// it with the outcome.
    #[inline]
    pub fn lookup(&mut self, req: &Request) -> bool {
        self.now += 1;
        let hit = match self.eviction.touch(req.id, self.now, &mut self.evicted) {
            Some(size) if size == req.size => {
                if self.offline {
                    self.eviction.next_access(req.id, req.next_access);
                }
                true
            }
            Some(_) => {
                self.eviction.remove(req.id);
                false
            }
            None => false,
        };
        if let Some(a) = self.admission.as_mut() {
            a.observe(req, hit);
        }
        hit
    }

    /// Node path, step 2 (after a miss): asks admission and inserts; returns whether admitted.
    #[inline]
    pub fn admit(&mut self, req: &Request) -> bool {
        if !self.eviction.can_insert(req.id, req.size) {
            return false;
        }
        if let Some(a) = self.admission.as_mut() {
            if !a.admit(req) {
                return false;
            }
        }
        if self.eviction.peek(req.id).is_some() {
            // Already inserted (e.g. two node misses raced); keep one copy.
            return true;
        }
        self.eviction
            .insert(req.id, req.size, self.now, &mut self.evicted);
        if self.offline {
            self.eviction.next_access(req.id, req.next_access);
        }
        true
    }

    /// Removes an object (purge); returns its size.
    pub fn remove(&mut self, id: u64) -> Option<u64> {
        self.eviction.remove(id)
    }

    /// Objects evicted since the last [`Cache::clear_evicted`].
    pub fn evicted(&self) -> &[Evicted] {
        &self.evicted
    }

    pub fn clear_evicted(&mut self) {
        self.evicted.clear();
    }

    pub fn eviction(&self) -> &dyn Eviction {
        &*self.eviction
    }

    pub fn admission(&self) -> Option<&dyn Admission> {
        self.admission.as_deref()
    }

    pub fn admission_mut(&mut self) -> Option<&mut (dyn Admission + 'static)> {
        self.admission.as_deref_mut()
    }

    /// Moves the admission policy's re-tuning onto a background thread, if it has any (see
    /// [`Admission::tune_in_background`]); returns whether it did.
    pub fn tune_in_background(&mut self) -> bool {
        self.admission
            .as_mut()
            .is_some_and(|a| a.tune_in_background())
    }

    /// The look-ahead window an offline admission policy wants, if any.
    pub fn lookahead(&self) -> Option<usize> {
        self.admission.as_ref().and_then(|a| a.lookahead())
    }

    /// Hands an offline admission policy the next window of requests.
    pub fn prepare_window(&mut self, future: &[Request]) {
        if let Some(a) = self.admission.as_mut() {
            a.prepare_window(future, &*self.eviction, self.now + 1);
        }
    }

    pub fn capacity(&self) -> u64 {
        self.eviction.capacity()
    }

    pub fn used(&self) -> u64 {
        self.eviction.used()
    }

    /// A short name like `lru` or `lru+adaptsize`.
    pub fn name(&self) -> String {
        match &self.admission {
            Some(a) => format!("{}+{}", self.eviction.name(), a.name()),
            None => self.eviction.name().to_string(),
        }
    }
}
