//! A node's view of its peers, from the requests its peer client makes (piece reads and
//! writes, `has` questions, relays) and from its probes ([`super::probe`]).
//!
//! Per peer address it keeps whether the last request answered, the failures since, and a
//! smoothed service time measured by the probes only: a piece read's or a relay's time to its
//! headers depends on the object and on the origin, a probe's does not, so the time of a node
//! in the map and of one out of it (which only probes reach) compare.
//!
//! The hedge ([`PeerObserver::slower`]) compares the least of each peer's last
//! [`RecentRtt::LEN`] probes instead: a busy host's scheduler only adds to a round trip, so
//! the least is what the network and the peer take. With the smoothed time, a peer 10 ms
//! away each way on a loaded bed (peers' medians of 5 to 10 ms) crossed the hedge's bound
//! back and forth, and the reads and relays that missed it waited.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::PeerView;

/// Weight of the newest probe in the smoothed service time.
const ALPHA: f64 = 0.5;

/// A view older than this (no request and no probe since) is no evidence.
pub const STALE: Duration = Duration::from_secs(10);

/// [`PeerObserver::slower`]: a peer whose round trip exceeds the median peer's by this much
/// (the loopback demo at full load showed service times up to 5.8 ms), ...
pub const HEDGE_FLOOR: Duration = Duration::from_millis(8);
/// ... and by this share of the median, is hedged against. An excess, not a ratio: a full
/// link's queue adds the same to every node's round trip (the bed's client behind a busy
/// 1 Gbit/s link measured 15 to 30 ms to every node), and a node 20 ms slower than the rest is
/// 20 ms slower however long the queue.
pub const HEDGE_SHARE: f64 = 0.5;

/// The last [`RecentRtt::LEN`] probe round trips (µs) of one peer or node, and the probes on
/// their way (at most [`RecentRtt::LEN`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RecentRtt {
    samples: [f64; RecentRtt::LEN],
    len: usize,
    next: usize,
    /// When each probe on its way left.
    pending: [Option<Instant>; RecentRtt::LEN],
}

impl RecentRtt {
    /// Round trips that decide: the hedge starts after this many slow probes in a row, and
    /// ends after one fast one. It is also how many probes may be on their way at once, so
    /// that two late ones can start the hedge before either is answered.
    pub const LEN: usize = 2;

    /// Notes a probe answered after `us`.
    pub fn push(&mut self, us: f64) {
        self.samples[self.next] = us;
        self.next = (self.next + 1) % Self::LEN;
        self.len = (self.len + 1).min(Self::LEN);
    }

    /// The least of the round trips remembered; `None` before the first.
    pub fn min(&self) -> Option<f64> {
        self.samples[..self.len].iter().copied().reduce(f64::min)
    }

    /// A probe leaves at `now`; `false` (nothing noted) when [`RecentRtt::LEN`] are on their
    /// way already.
    pub fn start(&mut self, now: Instant) -> bool {
        match self.pending.iter_mut().find(|p| p.is_none()) {
            Some(free) => {
                *free = Some(now);
                true
            }
            None => false,
        }
    }

    /// The probe that left at `started` ended, answered after `rtt` or not at all.
    pub fn end(&mut self, started: Instant, rtt: Option<Duration>) {
        if let Some(p) = self.pending.iter_mut().find(|p| **p == Some(started)) {
            *p = None;
        }
        if let Some(rtt) = rtt {
            self.push(rtt.as_secs_f64() * 1e6);
        }
    }

    /// The least round trip of the last [`RecentRtt::LEN`] probes at `now`, where a probe on
    /// its way counts as its age once that is above `bar_us` (its round trip will be at
    /// least that; younger, it says nothing yet, and the probes before it count instead);
    /// `None` before any evidence. So a peer turned slow is seen as soon as two probes are
    /// late by the bar, within two probe periods and the bar of its turning, not once they
    /// are answered (from a peer 100 ms away each way, an answer takes 200 ms).
    pub fn least(&self, now: Instant, bar_us: f64) -> Option<f64> {
        // On the read path: the late ages on the stack, not in a Vec.
        let mut late = [0.0; Self::LEN];
        let mut n = 0;
        for &t in self.pending.iter().flatten() {
            let age = now.saturating_duration_since(t).as_secs_f64() * 1e6;
            if age > bar_us {
                late[n] = age;
                n += 1;
            }
        }
        // The youngest late probe is the newest evidence.
        late[..n].sort_by(f64::total_cmp);
        let answered =
            (1..=self.len).map(|back| self.samples[(self.next + Self::LEN - back) % Self::LEN]);
        late[..n]
            .iter()
            .copied()
            .chain(answered)
            .take(Self::LEN)
            .reduce(f64::min)
    }
}

/// The round trip (µs) above which a node is much slower than a `median_us` one: longer by
/// more than [`HEDGE_FLOOR`] and [`HEDGE_SHARE`] of it (the rule of [`PeerObserver::slower`],
/// and of the demo's load balancer).
pub fn hedge_bar(median_us: f64) -> f64 {
    median_us + (HEDGE_FLOOR.as_secs_f64() * 1e6).max(HEDGE_SHARE * median_us)
}

/// Whether node `r`'s recent round trips at `now` make it much slower than the others
/// (`all`, itself among them): its least ([`RecentRtt::least`], late probes counting) above
/// the [`hedge_bar`] of the median node's, taken as the greater of `median_us` (the answered
/// round trips') and the median of every node's least at `now`. The second keeps the
/// prober's own stall (its runtime busy, every probe it sent still on its way) from making
/// every node look slow; the first keeps a slow node from raising the median with its own
/// late probes.
pub fn much_slower<'a>(
    r: &RecentRtt,
    median_us: f64,
    all: impl Iterator<Item = &'a RecentRtt>,
    now: Instant,
) -> bool {
    let bar = hedge_bar(median_us);
    if r.least(now, bar).is_none_or(|us| us <= bar) {
        return false; // the common case, without looking at the others
    }
    let mut leasts: Vec<f64> = all.filter_map(|o| o.least(now, bar)).collect();
    let bar = hedge_bar(median_of(&mut leasts).max(median_us));
    r.least(now, bar).is_some_and(|us| us > bar)
}

/// The median of `values` (sorted in place); 0 when empty.
pub fn median_of(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

#[derive(Clone, Copy, Debug)]
struct Seen {
    reachable: bool,
    failures: u32,
    service_us: Option<f64>,
    at: Instant,
}

/// How one request to a peer went, for [`PeerObserver::note`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Outcome {
    /// It answered (any status: a `404` is an answer).
    Answered,
    /// Refused, timed out, unreachable.
    Failed,
    /// Neither: a connection the peer closed (a pooled one) says nothing of its health.
    Neutral,
}

/// The peers as this node sees them (shared by the clones of its peer client).
#[derive(Debug, Default)]
pub struct PeerObserver {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    peers: HashMap<SocketAddr, Seen>,
    /// The median of the fresh peers' recent least round trips (µs), as of the last probe
    /// answered: what [`PeerObserver::slower`] compares against on the read path without
    /// sorting.
    median_us: f64,
    /// Per peer probed, its recent probes: answered, and on their way.
    recent: HashMap<SocketAddr, RecentRtt>,
}

impl Inner {
    /// The recent probes of the peers seen within [`STALE`] of `now`.
    fn fresh_recent(&self, now: Instant) -> impl Iterator<Item = &RecentRtt> {
        self.peers
            .iter()
            .filter(move |(_, p)| now.saturating_duration_since(p.at) < STALE)
            .filter_map(|(a, _)| self.recent.get(a))
    }

    fn note(&mut self, addr: SocketAddr, outcome: Outcome, now: Instant) {
        if outcome == Outcome::Neutral {
            return;
        }
        let s = self.peers.entry(addr).or_insert(Seen {
            reachable: true,
            failures: 0,
            service_us: None,
            at: now,
        });
        s.at = now;
        match outcome {
            Outcome::Answered => {
                s.reachable = true;
                s.failures = 0;
            }
            _ => {
                s.reachable = false;
                s.failures = s.failures.saturating_add(1);
            }
        }
    }
}

impl PeerObserver {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes a request to `addr` that ended with `outcome` at `now`.
    pub fn note(&self, addr: SocketAddr, outcome: Outcome, now: Instant) {
        self.inner().note(addr, outcome, now);
    }

    /// A probe of `addr` leaves at `now`; `false` (and nothing noted) if
    /// [`RecentRtt::LEN`] are still on their way.
    pub fn probe_started(&self, addr: SocketAddr, now: Instant) -> bool {
        self.inner().recent.entry(addr).or_default().start(now)
    }

    /// The probe of `addr` that left at `started` ended (answered or not; an answer is
    /// noted by [`PeerObserver::probed`]).
    pub fn probe_ended(&self, addr: SocketAddr, started: Instant) {
        if let Some(r) = self.inner().recent.get_mut(&addr) {
            r.end(started, None);
        }
    }

    /// Notes a probe of `addr` answered after `rtt`.
    pub fn probed(&self, addr: SocketAddr, rtt: Duration, now: Instant) {
        let mut inner = self.inner();
        inner.note(addr, Outcome::Answered, now);
        let us = rtt.as_secs_f64() * 1e6;
        if let Some(s) = inner.peers.get_mut(&addr) {
            s.service_us = Some(match s.service_us {
                Some(old) => old + ALPHA * (us - old),
                None => us,
            });
        }
        inner.recent.entry(addr).or_default().push(us);
        let mut all: Vec<f64> = inner.fresh_recent(now).filter_map(RecentRtt::min).collect();
        inner.median_us = median_of(&mut all);
    }

    /// Whether `addr` answers this node's probes much slower than its peers do lately: the
    /// least of its last probes' round trips (a late probe on its way counting as its age,
    /// [`RecentRtt::least`]) longer than the median peer's by more than [`HEDGE_FLOOR`]
    /// and [`HEDGE_SHARE`] of it ([`much_slower`]), or failing. A read hedges against such a
    /// peer at once (C2DN §5's delayed parity, asked from the start) instead of waiting to
    /// find it late.
    pub fn slower(&self, addr: SocketAddr, now: Instant) -> bool {
        let inner = self.inner();
        let Some(s) = inner.peers.get(&addr) else {
            return false;
        };
        if now.saturating_duration_since(s.at) >= STALE {
            return false;
        }
        if !s.reachable {
            return s.failures >= 2;
        }
        inner
            .recent
            .get(&addr)
            .is_some_and(|r| much_slower(r, inner.median_us, inner.fresh_recent(now), now))
    }

    /// The current views of the peers in `ids` (peer address → node id), those seen within
    /// [`STALE`] of `now`.
    pub fn views(&self, ids: &HashMap<SocketAddr, usize>, now: Instant) -> Vec<PeerView> {
        let inner = self.inner();
        let mut out: Vec<PeerView> = inner
            .peers
            .iter()
            .filter(|(_, s)| now.saturating_duration_since(s.at) < STALE)
            .filter_map(|(addr, s)| {
                ids.get(addr).map(|&node| PeerView {
                    node,
                    reachable: s.reachable,
                    failures: s.failures,
                    service_us: s.service_us.map(|u| u.round() as u64),
                })
            })
            .collect();
        out.sort_by_key(|v| v.node);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recent_least_round_trip_counts_late_probes_on_their_way_as_their_age() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        let mut r = RecentRtt::default();
        assert_eq!(r.min(), None);
        assert_eq!(r.least(t, 10e3), None);
        r.push(2e3);
        assert_eq!(r.least(t, 10e3), Some(2e3));
        r.push(3e3);
        // Two probes leave, a third must wait.
        assert!(r.start(t));
        assert!(r.start(t + ms(50)));
        assert!(!r.start(t + ms(60)));
        // Younger than the bar, they say nothing yet; one late one is not enough.
        assert_eq!(r.least(t + ms(5), 10e3), Some(2e3));
        assert_eq!(r.least(t + ms(55), 10e3), Some(3e3));
        // Both late: the younger's age.
        assert_eq!(r.least(t + ms(61), 10e3), Some(11e3));
        // The older is answered after 200 ms: it and the younger one's age.
        r.end(t, Some(ms(200)));
        assert_eq!(r.min(), Some(3e3));
        assert_eq!(r.least(t + ms(200), 10e3), Some(150e3));
        assert!(r.start(t + ms(200)));
        // A fast answer ends it, whatever is on its way.
        r.end(t + ms(50), Some(ms(1)));
        assert_eq!(r.least(t + ms(300), 10e3), Some(1e3));
        // A probe that fails leaves no round trip, and frees its place.
        r.end(t + ms(200), None);
        assert_eq!(r.min(), Some(1e3));
        assert!(r.start(t + ms(300)) && r.start(t + ms(301)));
    }

    #[test]
    fn the_last_outcome_decides_and_probes_set_the_service_time() {
        let o = PeerObserver::default();
        let a: SocketAddr = "10.0.0.1:1".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:1".parse().unwrap();
        let ids: HashMap<SocketAddr, usize> = [(a, 1), (b, 2)].into();
        let t = Instant::now();
        assert!(o.views(&ids, t).is_empty());
        o.probed(a, Duration::from_millis(2), t);
        o.note(b, Outcome::Failed, t);
        o.note(b, Outcome::Failed, t);
        o.note(b, Outcome::Neutral, t);
        let v = o.views(&ids, t);
        assert_eq!(
            v,
            vec![
                PeerView {
                    node: 1,
                    reachable: true,
                    failures: 0,
                    service_us: Some(2000)
                },
                PeerView {
                    node: 2,
                    reachable: false,
                    failures: 2,
                    service_us: None
                },
            ]
        );
        // Smoothed: half of the new probe.
        o.probed(a, Duration::from_millis(4), t);
        assert_eq!(o.views(&ids, t)[0].service_us, Some(3000));
        // An answer clears the failures; a stale view is dropped; unknown addresses are not
        // reported.
        o.note(b, Outcome::Answered, t);
        assert!(o.views(&ids, t)[1].reachable);
        o.note("10.0.0.3:1".parse().unwrap(), Outcome::Failed, t);
        assert_eq!(o.views(&ids, t).len(), 2);
        assert!(o.views(&ids, t + STALE).is_empty());
    }

    #[test]
    fn a_stall_of_the_prober_makes_no_peer_slow() {
        let o = PeerObserver::default();
        let t = Instant::now();
        let ms = Duration::from_millis;
        let addr = |i: u8| SocketAddr::from(([10, 0, 0, i], 1));
        for i in 1..=5 {
            o.probed(addr(i), ms(2), t);
            o.probed(addr(i), ms(2), t);
            assert!(o.probe_started(addr(i), t) && o.probe_started(addr(i), t + ms(50)));
        }
        // This node stalled 70 ms: every probe it sent is still on its way, all alike.
        assert!((1..=5).all(|i| !o.slower(addr(i), t + ms(70))));
        // The stall over, the others answer in 2 ms and peer 5 does not: it is the slow one.
        for i in 1..=4 {
            for started in [t, t + ms(50)] {
                o.probe_ended(addr(i), started);
                o.probed(addr(i), ms(2), t + ms(70));
            }
        }
        assert!(o.slower(addr(5), t + ms(70)));
        assert!((1..=4).all(|i| !o.slower(addr(i), t + ms(70))));
    }

    #[test]
    fn a_peer_is_slower_by_the_floor_and_half_the_median() {
        let o = PeerObserver::default();
        let t = Instant::now();
        let addr = |i: u8| SocketAddr::from(([10, 0, 0, i], 1));
        for i in 1..=4 {
            o.probed(addr(i), Duration::from_millis(2), t);
        }
        o.probed(addr(5), Duration::from_millis(30), t);
        o.probed(addr(6), Duration::from_millis(5), t);
        assert!(o.slower(addr(5), t));
        // One fast probe ends it; the slow ones of a whole window start it again.
        o.probed(addr(5), Duration::from_millis(2), t);
        assert!(!o.slower(addr(5), t));
        for _ in 0..RecentRtt::LEN - 1 {
            o.probed(addr(5), Duration::from_millis(30), t);
            assert!(!o.slower(addr(5), t), "a fast probe in the window");
        }
        o.probed(addr(5), Duration::from_millis(30), t);
        assert!(o.slower(addr(5), t));
        // Late probes on their way count as their age: two of them start the hedge.
        let p = PeerObserver::default();
        for i in 1..=4 {
            p.probed(addr(i), Duration::from_millis(2), t);
        }
        p.probed(addr(5), Duration::from_millis(2), t);
        p.probed(addr(5), Duration::from_millis(2), t);
        let (t1, t2) = (t, t + Duration::from_millis(50));
        assert!(p.probe_started(addr(5), t1));
        assert!(p.probe_started(addr(5), t2));
        assert!(!p.probe_started(addr(5), t2), "two at a time");
        assert!(!p.slower(addr(5), t + Duration::from_millis(55)));
        assert!(p.slower(addr(5), t + Duration::from_millis(61)));
        p.probe_ended(addr(5), t1);
        assert!(!p.slower(addr(5), t + Duration::from_millis(61)));
        // A host busy now and then: its least round trip stays low.
        o.probed(addr(1), Duration::from_millis(40), t);
        assert!(!o.slower(addr(1), t));
        assert!(!o.slower(addr(6), t), "2.5 medians but below the floor");
        assert!(!o.slower(addr(9), t), "never seen");
        // Behind a full link's queue, every peer 20 ms: one 12 ms beyond is slower (by more
        // than 8 ms and half the median), one 9 ms beyond is not.
        let q = PeerObserver::default();
        for i in 1..=4 {
            q.probed(addr(i), Duration::from_millis(20), t);
        }
        q.probed(addr(5), Duration::from_millis(32), t);
        q.probed(addr(6), Duration::from_millis(29), t);
        assert!(q.slower(addr(5), t) && !q.slower(addr(6), t));
        assert!(!o.slower(addr(5), t + STALE), "stale");
        o.note(addr(4), Outcome::Failed, t);
        assert!(!o.slower(addr(4), t), "one failure");
        o.note(addr(4), Outcome::Failed, t);
        assert!(o.slower(addr(4), t));
    }
}
