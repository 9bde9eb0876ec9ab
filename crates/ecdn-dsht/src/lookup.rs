//! Lookups: Coral's routing (§4.1), the sloppy `put` and `get` (§4.2), and their
//! hierarchical forms (§4.3).
//!
//! # One level: the walk
//!
//! A walk for key `k` keeps an intermediate target `t`, starting at the node's own id (or,
//! in a lower level, at the node where the previous level stopped). Each hop first moves `t`
//! one digit of `b` bits toward `k` (`t ← splice(k, t, i)`, the smallest `i` that changes it),
//! then asks the known node closest to `t` among those closer to `k` than any node that has
//! answered (the first hop may be any node), for contacts near the next target. Correcting `b` bits per hop, rather than
//! jumping to the closest node known, is what spreads requests for a hot key over many nodes.
//! A walk ends when no known node is closer to `k` than the closest that answered: that node
//! is `k`'s closest node in the cluster. Up to [`Config::window`] RPCs are outstanding: when
//! a hop has not answered within its expected time (2 RTT + 10 ms, or a third of the
//! timeout), the next candidate is asked as well, and whichever answers first moves the walk.
//!
//! * `get` asks [`Op::Get`] and stops at the first node that holds values.
//! * `put`'s forward phase asks [`Op::Put`], collecting each node's loaded flag, value count
//!   and least remaining TTL, and stops at a node that is both full (for this TTL) and
//!   loaded. Its reverse phase then tries to store at the contacted nodes that were not, the
//!   closest to `k` first, until one accepts.
//! * Every put also says whom it met: the values other than its own that the nodes of its
//!   forward phase held when asked, and those the node that stored it held just before (a
//!   store's return status, the test-and-set §8 proposes against the flash crowd's race at
//!   the key's closest node). Each was stored before this put's value was: two puts of one
//!   key that meet at one node cannot both miss each other. `claim` is a put that stops at
//!   the first level where it met any.
//!
//! The node itself is the walk's first stop: a `get` it can answer from its own store costs
//! no RPC, and a `put` for which it is itself full and loaded goes no further.
//!
//! # The hierarchy
//!
//! Both start in the fastest cluster (the highest level) and continue in the next lower one
//! from where they stopped, so the ID space is traversed about once: a `get` returns at the
//! first level that has values; a `put` stores at every level, unless a level's forward
//! phase stopped at a loaded node.
//!
//! [`Config::window`]: crate::Config::window

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use crate::id::{next_target, Id};
use crate::node::{Dsht, DshtError, Inner};
use crate::sloppy::PutProbe;
use crate::wire::{Body, Contact, Op, Packet, Value, MAX_VALUE};

/// How many of the routing table's nodes nearest a target a walk considers for its next hop.
const NEAR: usize = 16;

/// Adds to `met` the values of `values` that are neither the put's own (`own_value`) nor met
/// already.
fn meet(met: &mut Vec<Value>, values: impl IntoIterator<Item = Value>, own_value: &[u8]) {
    for v in values {
        if v.data != own_value && !met.iter().any(|m| m.data == v.data) {
            met.push(v);
        }
    }
}

/// What a `get` found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetResult {
    /// The values, empty when no level had any.
    pub values: Vec<Value>,
    /// The level at which they were found.
    pub level: Option<usize>,
    /// Nodes that answered (the lookup's hops), over all levels.
    pub hops: u32,
    /// RPCs sent, over all levels.
    pub rpcs: u32,
    /// Time taken.
    pub elapsed: Duration,
}

/// What a `put` did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PutResult {
    /// Per level tried (highest first): where the value was stored (`None`: nowhere).
    pub stored: Vec<(usize, Option<Contact>)>,
    /// The values other than this one the put met at the first level where it met any (see
    /// the module doc): each stored before this one was. Empty when it met none.
    pub found: Vec<Value>,
    /// The level of `found`.
    pub found_level: Option<usize>,
    /// The forward phases' stops, in the order they answered (the node itself first), per
    /// level: where a put went and what each node said (how a hot key's load spreads).
    pub path: Vec<(usize, Contact, PutProbe)>,
    /// Nodes that answered forward-phase probes, over all levels.
    pub hops: u32,
    /// RPCs sent, over all levels.
    pub rpcs: u32,
    pub elapsed: Duration,
}

/// The end of one level's walk.
#[derive(Debug, Default)]
pub(crate) struct Walk {
    values: Vec<Value>,
    /// The closest node to the key that answered.
    closest: Option<Contact>,
    /// For a put: each contacted node and what it said, in the order they answered.
    path: Vec<(Contact, PutProbe)>,
    /// For a put: the values other than its own that those nodes held.
    met: Vec<Value>,
    /// A put's forward phase stopped at a full and loaded node.
    stopped_loaded: bool,
    hops: u32,
    rpcs: u32,
}

impl Dsht {
    /// `get(key, levels)`: values stored under `key`, searching the given levels (all when
    /// `None`) from the fastest down and returning at the first that has some.
    pub async fn get(&self, key: Id, levels: Option<&[usize]>) -> Result<GetResult, DshtError> {
        let order = self.inner.order(levels)?;
        let started = Instant::now();
        let mut result = GetResult::default();
        let mut start = self.inner.id;
        for level in order {
            let walk = self
                .inner
                .walk(level, key, Op::Get, start, Duration::ZERO, &[])
                .await;
            result.hops += walk.hops;
            result.rpcs += walk.rpcs;
            if !walk.values.is_empty() {
                result.values = walk.values;
                result.level = Some(level);
                break;
            }
            if let Some(c) = walk.closest {
                start = c.id;
            }
        }
        result.elapsed = started.elapsed();
        Ok(result)
    }

    /// `put(key, value, ttl, levels)`: stores `value` under `key` at each of the given levels
    /// (all when `None`), the fastest first, as the module doc describes.
    pub async fn put(
        &self,
        key: Id,
        value: &[u8],
        ttl: Duration,
        levels: Option<&[usize]>,
    ) -> Result<PutResult, DshtError> {
        self.inner.put(key, value, ttl, levels, false).await
    }

    /// `claim(key, value, ttl)`: a [`Dsht::put`] at every level, the fastest first, that stops
    /// after the first level where it met other values ([`PutResult::found`]): those stored
    /// before it, whom a proxy about to fill an object fetches from instead of the origin.
    /// Of the puts that meet at one node, exactly one finds nobody there.
    pub async fn claim(
        &self,
        key: Id,
        value: &[u8],
        ttl: Duration,
    ) -> Result<PutResult, DshtError> {
        self.inner.put(key, value, ttl, None, true).await
    }

    /// Withdraws `value` from `key` where a put stored it (the places of
    /// [`PutResult::stored`]): a store with TTL 0 removes it there. Best effort: a copy on a
    /// node that does not answer expires with its TTL.
    pub async fn withdraw(&self, key: Id, value: &[u8], places: &[(usize, Contact)]) {
        for (level, c) in places {
            if c.id == self.inner.id {
                self.inner.lock().levels[*level].store.remove(&key, value);
                continue;
            }
            let body = Body::Store {
                level: *level as u8,
                key,
                ttl_s: 0,
                value: value.to_vec(),
            };
            let _ = self.inner.call(c.addr, Some(c.id), body).await;
        }
    }

    /// Refreshes the routing table of `level` (Kademlia's bucket refresh): a `Find` for a
    /// random id in each of the `buckets` farthest buckets (ids that differ from the node's
    /// from bit 0, 1, …), so the table knows nodes in every direction, not only near itself.
    pub async fn refresh(&self, level: usize, buckets: usize) {
        refresh(&self.inner, level, buckets).await;
    }

    /// Looks up the node's own id at `level` (joining, or after moving to a new cluster), so
    /// the nodes on the way learn of it and it of them. Returns the contacts that answered.
    pub async fn find_self(&self, level: usize) -> u32 {
        let id = self.inner.id;
        self.inner
            .walk(level, id, Op::Find, id, Duration::ZERO, &[])
            .await
            .hops
    }
}

/// See [`Dsht::refresh`].
pub(crate) async fn refresh(inner: &Arc<Inner>, level: usize, buckets: usize) {
    for bit in 0..buckets.min(crate::id::ID_BITS) {
        let target = {
            let mut st = inner.lock();
            let random = Id::random(&mut st.rng);
            // The node's first `bit` bits, bit `bit` flipped, random below.
            let mut t = crate::id::splice(&inner.id, &random, bit + 1);
            t.0[bit / 8] ^= 0x80 >> (bit % 8);
            t
        };
        inner
            .walk(level, target, Op::Find, inner.id, Duration::ZERO, &[])
            .await;
    }
}

impl Inner {
    /// See [`Dsht::put`] (and [`Dsht::claim`]: `claim` stops after the first level with
    /// values met).
    pub(crate) async fn put(
        self: &Arc<Inner>,
        key: Id,
        value: &[u8],
        ttl: Duration,
        levels: Option<&[usize]>,
        claim: bool,
    ) -> Result<PutResult, DshtError> {
        if value.len() > MAX_VALUE {
            return Err(DshtError::ValueTooLong {
                len: value.len(),
                max: MAX_VALUE,
            });
        }
        let order = self.order(levels)?;
        let ttl = ttl.min(self.cfg.max_ttl);
        let started = Instant::now();
        let mut result = PutResult::default();
        let mut start = self.id;
        for level in order {
            // The walk passes over this put's own value (a renewal meets itself).
            let walk = self.walk(level, key, Op::Put, start, ttl, value).await;
            result.hops += walk.hops;
            result.rpcs += walk.rpcs;
            result
                .path
                .extend(walk.path.iter().map(|(c, p)| (level, *c, *p)));
            let (stored, rpcs, before) = self.reverse_phase(level, key, value, ttl, &walk).await;
            result.rpcs += rpcs;
            result.stored.push((level, stored));
            if result.found_level.is_none() {
                let mut met = walk.met;
                meet(&mut met, before, value);
                if !met.is_empty() {
                    result.found = met;
                    result.found_level = Some(level);
                    if claim {
                        break;
                    }
                }
            }
            if walk.stopped_loaded {
                break;
            }
            start = stored.or(walk.closest).map_or(start, |c| c.id);
        }
        result.elapsed = started.elapsed();
        Ok(result)
    }

    /// Levels to visit, fastest (highest) first.
    fn order(&self, levels: Option<&[usize]>) -> Result<Vec<usize>, DshtError> {
        let n = self.cfg.thresholds.len();
        let mut order: Vec<usize> = match levels {
            None => (0..n).collect(),
            Some(ls) => {
                if let Some(bad) = ls.iter().find(|l| **l >= n) {
                    return Err(DshtError::NoLevel(*bad, n));
                }
                ls.to_vec()
            }
        };
        order.sort_unstable_by(|a, b| b.cmp(a));
        order.dedup();
        Ok(order)
    }

    /// One level's walk (see the module doc); `own_value` is a put's value, which it does not
    /// count among the values it met.
    pub(crate) async fn walk(
        self: &Arc<Inner>,
        level: usize,
        key: Id,
        op: Op,
        start: Id,
        ttl: Duration,
        own_value: &[u8],
    ) -> Walk {
        let mut walk = Walk::default();
        let own = Contact {
            id: self.id,
            addr: self.addr,
        };
        // The node itself is the first stop.
        {
            let now = Instant::now();
            let mut st = self.lock();
            let store = &mut st.levels[level].store;
            match op {
                Op::Get => {
                    walk.values = store.get(&key, now);
                    if !walk.values.is_empty() {
                        walk.closest = Some(own);
                        return walk;
                    }
                }
                Op::Put => {
                    let probe = store.probe_put(&key, now);
                    let l = store.l();
                    meet(&mut walk.met, store.get(&key, now), own_value);
                    walk.path.push((own, probe));
                    if probe.full(ttl, l) && probe.loaded {
                        walk.stopped_loaded = true;
                        walk.closest = Some(own);
                        return walk;
                    }
                }
                Op::Find => {}
            }
        }
        let b = self.cfg.bits_per_hop;
        let window = self.cfg.window.max(1);
        let mut t = start;
        // The closest node to the key that answered. The node itself does not count here: its
        // first hop may be farther from the key than itself (its table may lack the nodes
        // that are closer, which the hop knows of).
        let mut best: Option<Contact> = None;
        let mut asked: HashSet<Id> = HashSet::from([self.id]);
        let mut learned: HashMap<Id, Contact> = HashMap::new();
        let mut inflight: JoinSet<(Contact, Option<(Packet, Duration)>)> = JoinSet::new();
        let mut hedge_at: Option<tokio::time::Instant> = None;
        // Whether the walk moved since the last launch (an answer came, or nothing is out).
        let mut moved = true;
        let l = self.cfg.full_values;
        loop {
            // Launch the next hop when the walk has moved, or another for the same target when
            // the outstanding ones are late, within the window.
            let late = hedge_at.is_some_and(|h| tokio::time::Instant::now() >= h);
            if (moved || late) && inflight.len() < window {
                // A launch only because the outstanding hops are late is a hedge.
                let hedge = !moved && !inflight.is_empty();
                let hop = self.next_hop(
                    level,
                    &key,
                    &mut t,
                    b,
                    best.as_ref(),
                    &asked,
                    &learned,
                    moved,
                );
                moved = false;
                match hop {
                    Some(hop) => {
                        asked.insert(hop.id);
                        walk.rpcs += 1;
                        if hedge {
                            self.lock().stats.hedges += 1;
                        }
                        let target = next_target(&key, &t, b).unwrap_or(key);
                        let body = Body::Probe {
                            level: level as u8,
                            op,
                            key,
                            target,
                            ttl_s: ttl.as_secs().min(u32::MAX as u64) as u32,
                        };
                        let node = self.clone();
                        inflight.spawn(async move {
                            let reply = node.call(hop.addr, Some(hop.id), body).await;
                            (hop, reply)
                        });
                        hedge_at = Some(tokio::time::Instant::now() + self.hedge_delay(&hop.id));
                    }
                    None if inflight.is_empty() => break,
                    None => hedge_at = None,
                }
            }
            let next = match hedge_at {
                Some(h) => tokio::select! {
                    r = inflight.join_next() => r,
                    _ = tokio::time::sleep_until(h) => continue,
                },
                None => inflight.join_next().await,
            };
            let Some(Ok((hop, reply))) = next else {
                // The set is empty (nothing to wait for): look for another hop.
                moved = true;
                continue;
            };
            if inflight.is_empty() {
                moved = true;
            }
            let Some((packet, _rtt)) = reply else {
                continue; // timed out: the node was marked failed
            };
            let Body::ProbeReply {
                member,
                loaded,
                count,
                min_ttl_s,
                values,
                contacts,
                ..
            } = packet.body
            else {
                continue;
            };
            if !member {
                self.lock().levels[level].table.remove(&hop.id);
                continue;
            }
            walk.hops += 1;
            moved = true;
            {
                let now = Instant::now();
                let mut st = self.lock();
                for c in contacts {
                    if c.id != self.id && !asked.contains(&c.id) {
                        st.levels[level].table.offer(c, now);
                        learned.insert(c.id, c);
                    }
                }
            }
            if best.is_none_or(|b| key.distance(&hop.id) < key.distance(&b.id)) {
                best = Some(hop);
            }
            match op {
                Op::Get if !values.is_empty() => {
                    walk.values = values;
                    walk.closest = Some(hop);
                    inflight.abort_all();
                    return walk;
                }
                Op::Put => {
                    let probe = PutProbe {
                        loaded,
                        count: count as usize,
                        min_ttl: Duration::from_secs(min_ttl_s as u64),
                    };
                    // A put does not meet its own value (a renewal's).
                    meet(&mut walk.met, values, own_value);
                    walk.path.push((hop, probe));
                    if probe.full(ttl, l) && probe.loaded {
                        walk.stopped_loaded = true;
                        break;
                    }
                }
                _ => {}
            }
            hedge_at = (!inflight.is_empty())
                .then(|| tokio::time::Instant::now() + self.hedge_delay(&hop.id));
        }
        inflight.abort_all();
        walk.closest = match best {
            Some(b) if key.distance(&b.id) < key.distance(&own.id) => Some(b),
            _ => Some(own),
        };
        walk
    }

    /// The next node to ask: advance `t` a digit (when `advance`) and pick the known node
    /// closest to `t` (§4.1: "the closest node to t that already exists in R's routing
    /// table", not the closest to the key it knows) among those not asked and closer to the
    /// key than `best`. Known are the routing table's nodes nearest `t` and those this walk
    /// learned; only when none of them will do, the table's nodes nearest the key (every
    /// node closer to the key than `best` is among those), so a walk still ends at the
    /// closest node it can find.
    #[allow(clippy::too_many_arguments)]
    fn next_hop(
        &self,
        level: usize,
        key: &Id,
        t: &mut Id,
        b: usize,
        best: Option<&Contact>,
        asked: &HashSet<Id>,
        learned: &HashMap<Id, Contact>,
        advance: bool,
    ) -> Option<Contact> {
        if advance {
            if let Some(nt) = next_target(key, t, b) {
                *t = nt;
            }
        }
        let near = |target: &Id| self.lock().levels[level].table.closest(target, NEAR);
        let near_t = near(t);
        let t = *t;
        let pick = |known: &mut dyn Iterator<Item = Contact>| {
            known
                .filter(|c| !asked.contains(&c.id))
                .filter(|c| best.is_none_or(|b| key.distance(&c.id) < key.distance(&b.id)))
                .min_by(|a, b| t.cmp_distance(&a.id, &b.id))
        };
        pick(&mut near_t.into_iter().chain(learned.values().copied()))
            .or_else(|| pick(&mut near(key).into_iter()))
    }

    /// How long to wait for a hop before asking another as well: 2 RTT + 10 ms when the
    /// hop's RTT is known, else a third of the RPC timeout.
    fn hedge_delay(&self, id: &Id) -> Duration {
        let rtt = self.lock().peers.get(id).and_then(|p| p.rtt);
        match rtt {
            Some(rtt) => (rtt * 2 + Duration::from_millis(10)).min(self.cfg.rpc_timeout),
            None => self.cfg.rpc_timeout / 3,
        }
    }

    /// A put's reverse phase at one level: store at the contacted nodes that were not full
    /// and loaded, closest to the key first, until one accepts. Returns where, the RPCs, and
    /// the other values the nodes it tried held just before (a node that refused, full since
    /// its probe, tells them too).
    async fn reverse_phase(
        self: &Arc<Inner>,
        level: usize,
        key: Id,
        value: &[u8],
        ttl: Duration,
        walk: &Walk,
    ) -> (Option<Contact>, u32, Vec<Value>) {
        let l = self.cfg.full_values;
        let mut stack: Vec<Contact> = walk
            .path
            .iter()
            .filter(|(_, p)| !(p.full(ttl, l) && p.loaded))
            .map(|(c, _)| *c)
            .collect();
        stack.sort_by(|a, b| key.cmp_distance(&a.id, &b.id));
        stack.dedup_by_key(|c| c.id);
        let mut rpcs = 0;
        let mut met: Vec<Value> = Vec::new();
        for c in stack {
            if c.id == self.id {
                let now = Instant::now();
                let mut st = self.lock();
                let store = &mut st.levels[level].store;
                meet(&mut met, store.get(&key, now), value);
                if store.store(&key, value, ttl, now) {
                    return (Some(c), rpcs, met);
                }
                continue;
            }
            rpcs += 1;
            let body = Body::Store {
                level: level as u8,
                key,
                ttl_s: ttl.as_secs().min(u32::MAX as u64) as u32,
                value: value.to_vec(),
            };
            if let Some((reply, _)) = self.call(c.addr, Some(c.id), body).await {
                if let Body::StoreReply {
                    member: true,
                    stored,
                    values,
                    ..
                } = reply.body
                {
                    meet(&mut met, values, value);
                    if stored {
                        return (Some(c), rpcs, met);
                    }
                }
            }
        }
        (None, rpcs, met)
    }
}
