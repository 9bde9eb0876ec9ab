//! Sloppy storage (§4.2): the values one node holds for one level, and the state that makes a
//! node *full* and *loaded* for a key.
//!
//! * A node holds at most `l` values per key. It is **full** for a new value of TTL `t` when
//!   it holds `l` values whose remaining TTLs are all at least `t / 2`; otherwise a store
//!   succeeds, evicting the value that expires first if `l` are held. A value equal to a held
//!   one replaces it (a proxy renewing its own reference, or a 1 h reference replacing the
//!   20 s one of the same proxy).
//! * A node is **loaded** for a key when letting one more `put` request for it through would
//!   exceed the leakage rate `β` a minute: it lets one through every minute / β (a token
//!   bucket of one token refilled at `β` a minute), so under a steady stream of puts it claims
//!   to be loaded for all but one every 5 s (β = 12), as the paper describes, and no minute
//!   sees more than `β` pass, which is what the closest node's bound, `β` from each of its
//!   predecessors, rests on. (A bucket of `β` tokens, the first version, let `β` through at
//!   once and `β` more within the same minute: twice the rate the bound assumes.)
//! * Memory is bounded: at most `max_keys` keys (values or request history) per level;
//!   expired values and old request history are purged as they are met and by [`purge`].
//!
//! [`purge`]: SloppyStore::purge

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::id::Id;
use crate::wire::Value;

/// The window of the leakage rate: β puts a minute.
pub const LEAKAGE_WINDOW: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct KeyState {
    values: Vec<(Vec<u8>, Instant)>,
    /// The leakage token bucket: a put passes when a whole token is here (at most one).
    tokens: f64,
    /// When `tokens` was last refilled.
    refilled: Instant,
}

impl KeyState {
    fn new(now: Instant) -> KeyState {
        KeyState {
            values: Vec::new(),
            tokens: 1.0,
            refilled: now,
        }
    }

    fn purge(&mut self, now: Instant, beta: usize, window: Duration) {
        self.values.retain(|(_, expiry)| *expiry > now);
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        let rate = beta as f64 / window.as_secs_f64().max(1e-3);
        self.tokens = (self.tokens + elapsed * rate).min(1.0);
        self.refilled = now;
    }

    /// No values, and the bucket full again: nothing worth keeping.
    fn is_idle(&self) -> bool {
        self.values.is_empty() && self.tokens >= 1.0
    }
}

/// What a `put`'s forward phase learns from a node (§4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PutProbe {
    /// More than β requests for the key within the past minute.
    pub loaded: bool,
    /// Values held for the key.
    pub count: usize,
    /// Their least remaining TTL (zero when none).
    pub min_ttl: Duration,
}

impl PutProbe {
    /// Whether the node is full for a new value of TTL `ttl`, given at most `l` values a key.
    pub fn full(&self, ttl: Duration, l: usize) -> bool {
        self.count >= l && self.min_ttl >= ttl / 2
    }
}

/// One level's sloppy store on one node.
#[derive(Debug)]
pub struct SloppyStore {
    keys: HashMap<Id, KeyState>,
    l: usize,
    beta: usize,
    window: Duration,
    max_keys: usize,
}

impl SloppyStore {
    /// A store holding at most `l` values a key, loaded beyond `beta` puts a minute, with
    /// at most `max_keys` keys.
    pub fn new(l: usize, beta: usize, max_keys: usize) -> SloppyStore {
        SloppyStore::with_window(l, beta, LEAKAGE_WINDOW, max_keys)
    }

    /// The same with β puts per `window` instead of per minute (to test the leakage in
    /// seconds rather than minutes).
    pub fn with_window(l: usize, beta: usize, window: Duration, max_keys: usize) -> SloppyStore {
        SloppyStore {
            keys: HashMap::new(),
            l: l.max(1),
            beta,
            window,
            max_keys: max_keys.max(1),
        }
    }

    /// Most values held per key (`l`).
    pub fn l(&self) -> usize {
        self.l
    }

    /// A `put` request for `key` arrives: counts it toward the leakage rate and reports
    /// whether the node is loaded and what it holds.
    pub fn probe_put(&mut self, key: &Id, now: Instant) -> PutProbe {
        if !self.keys.contains_key(key) && !self.make_room(now) {
            // No room to even count: report loaded, so the put goes elsewhere.
            return PutProbe {
                loaded: true,
                count: 0,
                min_ttl: Duration::ZERO,
            };
        }
        let (beta, window) = (self.beta, self.window);
        let state = self.keys.entry(*key).or_insert_with(|| KeyState::new(now));
        state.purge(now, beta, window);
        let loaded = state.tokens < 1.0;
        if !loaded {
            state.tokens -= 1.0;
        }
        PutProbe {
            loaded,
            count: state.values.len(),
            min_ttl: state
                .values
                .iter()
                .map(|(_, e)| e.duration_since(now))
                .min()
                .unwrap_or(Duration::ZERO),
        }
    }

    /// The values held for `key`, with their remaining TTLs.
    pub fn get(&mut self, key: &Id, now: Instant) -> Vec<Value> {
        let Some(state) = self.keys.get_mut(key) else {
            return Vec::new();
        };
        state.purge(now, self.beta, self.window);
        let values = state
            .values
            .iter()
            .map(|(data, expiry)| Value {
                data: data.clone(),
                ttl_s: expiry.duration_since(now).as_secs().min(u32::MAX as u64) as u32,
            })
            .collect();
        if state.is_idle() {
            self.keys.remove(key);
        }
        values
    }

    /// Stores `value` under `key` for `ttl` unless the node is full for it (see the module
    /// doc). Returns whether it was stored.
    pub fn store(&mut self, key: &Id, value: &[u8], ttl: Duration, now: Instant) -> bool {
        if ttl.is_zero() {
            return false;
        }
        if !self.keys.contains_key(key) && !self.make_room(now) {
            return false;
        }
        let (l, beta, window) = (self.l, self.beta, self.window);
        let state = self.keys.entry(*key).or_insert_with(|| KeyState::new(now));
        state.purge(now, beta, window);
        let expiry = now + ttl;
        if let Some(held) = state.values.iter_mut().find(|(d, _)| d == value) {
            held.1 = expiry;
            return true;
        }
        if state.values.len() < l {
            state.values.push((value.to_vec(), expiry));
            return true;
        }
        let (pos, soonest) = state
            .values
            .iter()
            .enumerate()
            .min_by_key(|(_, (_, e))| *e)
            .map(|(i, (_, e))| (i, *e))
            .expect("l >= 1 values held");
        if soonest.duration_since(now) >= ttl / 2 {
            return false; // full
        }
        state.values[pos] = (value.to_vec(), expiry);
        true
    }

    /// Drops `value` from `key` (its owner withdrew it).
    pub fn remove(&mut self, key: &Id, value: &[u8]) {
        if let Some(state) = self.keys.get_mut(key) {
            state.values.retain(|(d, _)| d != value);
            if state.is_idle() {
                self.keys.remove(key);
            }
        }
    }

    /// Removes expired values and stale request history everywhere.
    pub fn purge(&mut self, now: Instant) {
        let (beta, window) = (self.beta, self.window);
        self.keys.retain(|_, s| {
            s.purge(now, beta, window);
            !s.is_idle()
        });
    }

    /// Keys with values or recent requests.
    pub fn keys(&self) -> usize {
        self.keys.len()
    }

    /// Drops everything (the node left the cluster this store belongs to).
    pub fn clear(&mut self) {
        self.keys.clear();
    }

    fn make_room(&mut self, now: Instant) -> bool {
        if self.keys.len() < self.max_keys {
            return true;
        }
        self.purge(now);
        self.keys.len() < self.max_keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn a_steady_stream_is_loaded_for_all_but_one_put_every_five_seconds() {
        let mut s = SloppyStore::new(4, 12, 100);
        let key = Id::hash(b"k");
        let t0 = Instant::now();
        // One put a second for three minutes.
        let mut passed = 0;
        for sec in 0..180u64 {
            let p = s.probe_put(&key, t0 + Duration::from_secs(sec));
            if !p.loaded {
                passed += 1;
            }
        }
        // One every 5 s (β = 12 a minute): 180 / 5.
        assert!((36..=37).contains(&passed), "{passed} passed");
    }

    #[test]
    fn no_minute_lets_more_than_beta_puts_through() {
        let mut s = SloppyStore::new(4, 12, 100);
        let key = Id::hash(b"k");
        let t0 = Instant::now();
        // Bursts of 50 puts every 7 s, and a steady one a second besides, for five minutes.
        let mut passes = Vec::new();
        for ms in (0..300_000u64).step_by(100) {
            let burst = ms % 7_000 < 500;
            if burst || ms % 1_000 == 0 {
                let at = t0 + Duration::from_millis(ms);
                if !s.probe_put(&key, at).loaded {
                    passes.push(ms);
                }
            }
        }
        for (i, &start) in passes.iter().enumerate() {
            let within = passes[i..]
                .iter()
                .take_while(|&&t| t < start + 60_000)
                .count();
            assert!(
                within <= 12,
                "{within} passed in the minute from {start} ms"
            );
        }
        assert!(passes.len() >= 55, "{} passed in 5 minutes", passes.len());
    }

    #[test]
    fn full_means_l_values_with_half_the_new_ttl_left() {
        let mut s = SloppyStore::new(4, 12, 100);
        let key = Id::hash(b"k");
        let now = Instant::now();
        for i in 0..4u8 {
            assert!(s.store(&key, &[i], HOUR, now));
        }
        let p = s.probe_put(&key, now);
        assert_eq!(p.count, 4);
        assert!(p.full(HOUR, 4));
        assert!(
            !s.store(&key, &[9], HOUR, now),
            "full for another 1 h value"
        );
        // Half an hour and a bit later, a 1 h value evicts the one expiring first.
        let later = now + Duration::from_secs(1801);
        assert!(!s.probe_put(&key, later).full(HOUR, 4));
        assert!(s.store(&key, &[9], HOUR, later));
        assert_eq!(s.get(&key, later).len(), 4);
        // 20 s references never displace 1 h ones that have a while to live ...
        assert!(!s.store(&key, &[7], Duration::from_secs(20), later));
        // ... but a value already held is renewed in place.
        assert!(s.store(&key, &[9], Duration::from_secs(20), later));
        let values = s.get(&key, later);
        assert!(values.iter().any(|v| v.data == [9] && v.ttl_s == 20));
    }

    #[test]
    fn values_expire_and_memory_is_bounded() {
        let mut s = SloppyStore::new(4, 12, 3);
        let now = Instant::now();
        for i in 0..3u8 {
            assert!(s.store(&Id::hash(&[i]), b"v", Duration::from_secs(10), now));
        }
        assert!(!s.store(&Id::hash(b"x"), b"v", HOUR, now), "no room");
        let later = now + Duration::from_secs(11);
        assert!(s.get(&Id::hash(&[0]), later).is_empty());
        assert!(
            s.store(&Id::hash(b"x"), b"v", HOUR, later),
            "room once purged"
        );
        s.purge(later);
        assert_eq!(s.keys(), 1);
        s.remove(&Id::hash(b"x"), b"v");
        assert_eq!(s.keys(), 0);
    }
}
