//! The receiving side of signed requests ([`Gate`]): a request is taken only if its signature
//! checks out ([`ClusterKey::verify`]), it was signed for this process, and its nonce was not
//! taken before. So a captured request can be replayed neither here nor anywhere else:
//!
//! * **Destination.** The signature names the receiver's address as the sender reached it
//!   ([`crate::auth::Recipient`]). A process answers as the addresses it knows for itself (a
//!   node its peer address in the map, a coordinator its listener's address) and as the local
//!   address the request's connection arrived at ([`ArrivedAt`], for a process bound to the
//!   wildcard address and reached by another of its addresses); a request for any other
//!   address is refused ([`AuthError::Misdirected`]).
//! * **Nonces.** Every nonce taken is remembered with its signed time until that time leaves the
//!   signature window ([`crate::auth::MAX_SKEW_MS`]): by then the request is stale anyway. The
//!   same nonce at the same time again is refused ([`AuthError::Replayed`]). The memory holds at
//!   most [`NONCE_MEMORY`] entries; when it is full the oldest is forgotten, and from then on
//!   every request signed at or before that time is refused ([`AuthError::Forgotten`]): a
//!   floor under which nothing is remembered, so memory stays bounded and a replay is never
//!   taken, while fresh requests (signed a moment ago) are not affected.
//! * **Restarts.** A new process remembers nothing, so the floor starts at its start time: a
//!   request signed before the process started, which may have been taken by its previous
//!   incarnation (or by another process that had its address), is refused. A sender whose
//!   clock is behind the receiver's is refused for that much time after the receiver starts.
//!
//! The map epoch a request names is not checked here: maps reach the processes of a cluster
//! at different times, and a request made under the previous map is legitimate while a change
//! spreads. It is signed so that it cannot be altered, and the receiver may read it from the
//! [`Verified`] request.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use hyper::http::request::Parts;

use crate::auth::{unix_now_ms, AuthError, ClusterKey, Verified, MAX_SKEW_MS};

/// The most nonces a [`Gate`] remembers: at 16 bytes of nonce and 8 of time plus the tree's
/// overhead, some 12 MiB; enough for over 8,000 requests per second within the window before
/// the floor rises above a request's age.
pub const NONCE_MEMORY: usize = 1 << 18;

/// The local address of the connection a request arrived on: a request extension set by the
/// listener (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArrivedAt(pub SocketAddr);

/// Keys remembered with their signed times (UNIX ms) for the signature window: an entry is
/// forgotten once its time leaves the window ([`MAX_SKEW_MS`]; by then no request that old
/// passes the staleness check), and, to stay within `capacity`, the oldest is forgotten early
/// and raises a floor: every time at or before a forgotten one is refused from then on (see
/// [`WindowMemory::below_floor`]). The gate's nonces are one.
#[derive(Debug)]
pub struct WindowMemory<K> {
    by_time: BTreeSet<(u64, K)>,
    /// Times below this are refused: nothing is remembered of them.
    floor: u64,
    capacity: usize,
}

impl<K: Ord + Copy> WindowMemory<K> {
    /// An empty memory of at most `capacity` entries that refuses times below `floor` (a
    /// process's start).
    pub fn new(capacity: usize, floor: u64) -> Self {
        WindowMemory {
            by_time: BTreeSet::new(),
            floor,
            capacity: capacity.max(1),
        }
    }

    /// Forgets what left the window at `now`, each key passed to `forgotten`.
    pub fn expire(&mut self, now: u64, mut forgotten: impl FnMut(K)) {
        while let Some(&(t, k)) = self.by_time.first() {
            if t.saturating_add(MAX_SKEW_MS) >= now {
                break;
            }
            self.by_time.pop_first();
            forgotten(k);
        }
    }

    /// Whether `time` is below what this memory remembers.
    pub fn below_floor(&self, time: u64) -> bool {
        time < self.floor
    }

    /// Times below this are refused.
    pub fn floor(&self) -> u64 {
        self.floor
    }

    /// Remembers `key` at `time`; `false` if it already was. Entries forgotten to stay within
    /// the capacity (the oldest, raising the floor) are passed to `forgotten`.
    pub fn insert(&mut self, time: u64, key: K, mut forgotten: impl FnMut(K)) -> bool {
        if !self.by_time.insert((time, key)) {
            return false;
        }
        while self.by_time.len() > self.capacity {
            if let Some((t, k)) = self.by_time.pop_first() {
                self.floor = self.floor.max(t.saturating_add(1));
                forgotten(k);
            }
        }
        true
    }

    /// Forgets `key` at `time` (without raising the floor).
    pub fn remove(&mut self, time: u64, key: K) {
        self.by_time.remove(&(time, key));
    }

    pub fn len(&self) -> usize {
        self.by_time.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_time.is_empty()
    }
}

/// The nonces taken within the signature window.
#[derive(Debug)]
struct Nonces(WindowMemory<u128>);

impl Nonces {
    /// Takes the nonce of a request signed at `time`, at `now`.
    fn take(&mut self, time: u64, nonce: u128, now: u64) -> Result<(), AuthError> {
        self.0.expire(now, |_| {});
        if self.0.below_floor(time) {
            return Err(AuthError::Forgotten {
                time_ms: time,
                floor_ms: self.0.floor(),
            });
        }
        if !self.0.insert(time, nonce, |_| {}) {
            return Err(AuthError::Replayed);
        }
        Ok(())
    }
}

/// A process's check of the signed requests it receives (see the module documentation).
#[derive(Debug)]
pub struct Gate {
    key: ClusterKey,
    names: Vec<SocketAddr>,
    nonces: Mutex<Nonces>,
    refused: AtomicU64,
}

impl Gate {
    /// The gate of a process that answers as `names`, starting now.
    pub fn new(key: ClusterKey, names: &[SocketAddr]) -> Gate {
        Gate::with_memory(key, names, NONCE_MEMORY, unix_now_ms())
    }

    /// A gate that remembers at most `capacity` nonces and refuses requests signed before
    /// `started` (UNIX ms).
    pub fn with_memory(
        key: ClusterKey,
        names: &[SocketAddr],
        capacity: usize,
        started: u64,
    ) -> Gate {
        Gate {
            key,
            names: names.to_vec(),
            nonces: Mutex::new(Nonces(WindowMemory::new(capacity, started))),
            refused: AtomicU64::new(0),
        }
    }

    pub fn key(&self) -> &ClusterKey {
        &self.key
    }

    /// Checks a received request's signature (method, path and query from its URI) at `now`
    /// (UNIX ms), that it is for this process, and takes its nonce. Its body is still to be
    /// checked ([`crate::peer::read_verified_body`]).
    pub fn admit(&self, parts: &Parts, now: u64) -> Result<Verified, AuthError> {
        let v = crate::peer::verify_parts(&self.key, parts, now)?;
        let to = v.recipient().addr;
        let arrived = parts.extensions.get::<ArrivedAt>().map(|a| a.0);
        if !self.names.contains(&to) && arrived != Some(to) {
            return Err(self.refuse(AuthError::Misdirected { to }));
        }
        let taken =
            self.nonces
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take(v.time_ms(), v.nonce(), now);
        taken.map_err(|e| self.refuse(e))?;
        Ok(v)
    }

    fn refuse(&self, e: AuthError) -> AuthError {
        self.refused.fetch_add(1, Ordering::Relaxed);
        e
    }

    /// Requests refused as replays so far: signed for another process, a nonce already taken,
    /// or signed before what this process remembers.
    pub fn replays_refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{digest, Recipient};
    use hyper::Request;

    const KEY: &[u8] = b"0123456789abcdef-secret";

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    /// The parts of a `GET /x` signed for `to` at `time` with `nonce`, arrived at `at`.
    fn request(to: &str, time: u64, nonce: u128, at: Option<&str>) -> Parts {
        let key = ClusterKey::new(KEY);
        let to = Recipient {
            addr: addr(to),
            epoch: 3,
        };
        let s = key.sign_digest("GET", "/x", to, time, nonce, &digest(b""));
        let mut req = Request::builder().method("GET").uri("/x");
        for (n, v) in s.headers() {
            req = req.header(n, v);
        }
        let mut req = req.body(()).unwrap();
        if let Some(a) = at {
            req.extensions_mut().insert(ArrivedAt(addr(a)));
        }
        req.into_parts().0
    }

    #[test]
    fn a_nonce_is_taken_once_and_only_by_its_destination() {
        let gate = Gate::with_memory(ClusterKey::new(KEY), &[addr("10.0.0.1:9000")], 100, 0);
        let now = 1_000_000;
        let r = request("10.0.0.1:9000", now, 1, None);
        assert_eq!(gate.admit(&r, now).unwrap().recipient().epoch, 3);
        assert_eq!(gate.admit(&r, now + 5).unwrap_err(), AuthError::Replayed);
        // Until it is stale: then it is refused as such.
        assert!(matches!(
            gate.admit(&r, now + MAX_SKEW_MS + 1).unwrap_err(),
            AuthError::Stale { .. }
        ));
        // Another nonce, or the same nonce at another time, is another request.
        gate.admit(&request("10.0.0.1:9000", now, 2, None), now)
            .unwrap();
        gate.admit(&request("10.0.0.1:9000", now + 1, 1, None), now)
            .unwrap();
        // For another process: refused, here and wherever it arrived.
        let e = gate
            .admit(&request("10.0.0.2:9000", now, 3, None), now)
            .unwrap_err();
        assert_eq!(
            e,
            AuthError::Misdirected {
                to: addr("10.0.0.2:9000")
            }
        );
        assert!(e.to_string().contains("10.0.0.2:9000"), "{e}");
        let elsewhere = request("10.0.0.2:9000", now, 4, Some("10.0.0.3:9000"));
        assert!(gate.admit(&elsewhere, now).is_err());
        // For the address the connection arrived at (a wildcard listener): taken.
        let arrived = request("127.0.0.1:9000", now, 5, Some("127.0.0.1:9000"));
        gate.admit(&arrived, now).unwrap();
        assert_eq!(gate.replays_refused(), 3);
    }

    #[test]
    fn requests_from_before_the_start_are_refused() {
        let started = 2_000_000;
        let gate = Gate::with_memory(ClusterKey::new(KEY), &[addr("10.0.0.1:9000")], 100, started);
        let before = request("10.0.0.1:9000", started - 1, 1, None);
        assert_eq!(
            gate.admit(&before, started + 10).unwrap_err(),
            AuthError::Forgotten {
                time_ms: started - 1,
                floor_ms: started
            }
        );
        gate.admit(&request("10.0.0.1:9000", started, 2, None), started + 10)
            .unwrap();
    }

    #[test]
    fn a_full_memory_forgets_its_oldest_and_refuses_everything_as_old() {
        let mut n = Nonces(WindowMemory::new(3, 0));
        let now = 1_000_000;
        for (t, nonce) in [(now - 3, 1), (now - 2, 2), (now - 1, 3)] {
            n.take(t, nonce, now).unwrap();
        }
        // A fourth pushes out the oldest; its replay, and anything as old, is refused.
        n.take(now, 4, now).unwrap();
        assert_eq!(n.0.len(), 3);
        assert_eq!(n.0.floor(), now - 2);
        assert!(matches!(
            n.take(now - 3, 1, now),
            Err(AuthError::Forgotten { .. })
        ));
        assert!(matches!(
            n.take(now - 3, 99, now),
            Err(AuthError::Forgotten { .. })
        ));
        // The ones still remembered are refused as replays; newer ones are taken.
        assert_eq!(n.take(now - 2, 2, now), Err(AuthError::Replayed));
        n.take(now, 5, now).unwrap();
        // Entries leave as their time leaves the window, without raising the floor.
        let later = now + MAX_SKEW_MS + 10;
        n.take(later, 6, later).unwrap();
        assert_eq!(n.0.len(), 1);
        assert_eq!(n.0.floor(), now - 1);
    }
}
