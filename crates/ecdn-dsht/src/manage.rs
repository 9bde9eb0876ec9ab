//! Joining and upkeep: how a node enters the system, finds its neighbours, and, every cluster
//! period, reconsiders its clusters (§4.4), forgets expired values and checks on contacts it
//! has not heard from.
//!
//! # Clustering hints
//!
//! Coral keys hints by the routers its traceroute finds and by the 24-bit prefixes of their
//! addresses. On a loopback test bed there are no routers, so a node keys its hint by its own
//! address prefix (`/24` for IPv4, `/64` for IPv6): it stores its contact under
//! `SHA-1("ecdn-dsht hint " + prefix)` at level 0 when it joins (renewed every half hour) and
//! pings the nodes it finds there, so nodes of one site (one prefix) measure each other at
//! once and cluster in the first period.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use crate::cluster::{self, Candidate};
use crate::id::Id;
use crate::node::{Config, Dsht, DshtError, Inner};
use crate::wire::{Body, Contact};

/// TTL of a clustering hint; it is renewed at half of it.
const HINT_TTL: Duration = Duration::from_secs(3600);
/// Members of a candidate cluster pinged to validate it.
const VALIDATE: usize = 5;
/// Stale contacts pinged per level per period.
const REFRESH: usize = 8;
/// Buckets refreshed when joining (enough for 2^8 nodes at one per bucket; farther buckets
/// fill as lookups go by).
const REFRESH_BUCKETS: usize = 8;

impl Dsht {
    /// Binds the socket and starts the node, alone (see [`Dsht::join`]): it answers packets,
    /// and its upkeep (`run`) runs every cluster period.
    pub async fn start(cfg: Config) -> Result<Dsht, DshtError> {
        let d = Dsht::open(cfg).await?;
        d.keep(tokio::spawn(run(d.inner.clone())));
        Ok(d)
    }

    /// Joins the system through `seeds` (addresses of running nodes): pings them (three
    /// tries), looks up the node's own id so the nodes on the way learn of it, refreshes its
    /// farthest buckets, stores its clustering hint and pings the nodes found under its
    /// prefix. Returns the contacts in the level-0 table (0: no seed answered).
    pub async fn join(&self, seeds: &[SocketAddr]) -> usize {
        let inner = &self.inner;
        // A seed that is slow to answer (a busy machine) gets two more tries.
        for _ in 0..3 {
            let mut pings = JoinSet::new();
            for seed in seeds.iter().copied().filter(|s| *s != inner.addr) {
                let node = inner.clone();
                pings.spawn(async move { node.call(seed, None, Body::Ping).await });
            }
            let mut answered = false;
            while let Some(r) = pings.join_next().await {
                answered |= matches!(r, Ok(Some(_)));
            }
            if answered || seeds.is_empty() {
                break;
            }
        }
        self.find_self(0).await;
        self.refresh(0, REFRESH_BUCKETS).await;
        self.hint().await;
        inner.lock().levels[0].table.len()
    }

    /// Stores the node's clustering hint and pings the nodes already under it.
    async fn hint(&self) {
        let key = hint_key(self.inner.addr.ip());
        let _ = self
            .put(key, &self.contact().to_bytes(), HINT_TTL, Some(&[0]))
            .await;
        if let Ok(found) = self.get(key, Some(&[0])).await {
            let contacts: Vec<Contact> = found
                .values
                .iter()
                .filter_map(|v| Contact::from_bytes(&v.data))
                .filter(|c| c.id != self.inner.id)
                .collect();
            ping_all(&self.inner, &contacts).await;
        }
    }
}

/// The hint key of an address's prefix.
pub fn hint_key(ip: IpAddr) -> Id {
    let prefix = match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            format!("{}.{}.{}.0/24", o[0], o[1], o[2])
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
        }
    };
    Id::hash(format!("ecdn-dsht hint {prefix}").as_bytes())
}

async fn ping_all(inner: &Arc<Inner>, contacts: &[Contact]) {
    let mut pings = JoinSet::new();
    for c in contacts.iter().copied() {
        let node = inner.clone();
        pings.spawn(async move { node.call(c.addr, Some(c.id), Body::Ping).await });
    }
    while pings.join_next().await.is_some() {}
}

/// The upkeep task: every cluster period (the first after a random part of one, so nodes
/// started together do not all move at once), reconsider each non-global cluster, purge
/// expired values, ping stale contacts, refresh the routing tables, and renew the hint when
/// due.
pub(crate) async fn run(inner: Arc<Inner>) {
    let period = inner.cfg.cluster_period;
    let first = {
        let mut st = inner.lock();
        period.mul_f64(0.5 + 0.5 * st.rng.f64())
    };
    tokio::time::sleep(first).await;
    let mut hinted = Instant::now();
    loop {
        for level in 1..inner.cfg.thresholds.len() {
            reconsider(&inner, level).await;
        }
        let now = Instant::now();
        let stale: Vec<Contact> = {
            let mut st = inner.lock();
            for l in &mut st.levels {
                l.store.purge(now);
            }
            st.levels[0]
                .table
                .stale(now.checked_sub(period).unwrap_or(now))
                .into_iter()
                .take(REFRESH)
                .collect()
        };
        ping_all(&inner, &stale).await;
        refresh(&inner).await;
        if hinted.elapsed() >= HINT_TTL / 2 {
            hinted = Instant::now();
            let contact = Contact {
                id: inner.id,
                addr: inner.addr,
            };
            let key = hint_key(inner.addr.ip());
            let _ = inner
                .put(key, &contact.to_bytes(), HINT_TTL, Some(&[0]), false)
                .await;
        }
        let jitter = {
            let mut st = inner.lock();
            period.mul_f64(0.9 + 0.2 * st.rng.f64())
        };
        tokio::time::sleep(jitter).await;
    }
}

/// Kademlia's bucket refresh at every level, as [`Dsht::refresh`] does.
async fn refresh(inner: &Arc<Inner>) {
    for level in 0..inner.cfg.thresholds.len() {
        crate::lookup::refresh(inner, level, REFRESH_BUCKETS).await;
    }
}

/// The members of other clusters at `level` the node has heard from recently, by cluster:
/// (contacts, largest size reported, oldest age reported).
fn candidates_seen(inner: &Inner, level: usize) -> HashMap<Id, (Vec<Contact>, u32, u32)> {
    let st = inner.lock();
    let mine = st.levels[level].cluster;
    let fresh = inner.cfg.cluster_period * 3;
    let now = Instant::now();
    let mut by_cluster: HashMap<Id, (Vec<Contact>, u32, u32)> = HashMap::new();
    for (id, p) in &st.peers {
        if now.duration_since(p.last_seen) > fresh {
            continue;
        }
        let Some(info) = p.clusters.get(level - 1) else {
            continue;
        };
        if info.id == mine {
            continue;
        }
        let e = by_cluster.entry(info.id).or_default();
        e.0.push(Contact {
            id: *id,
            addr: p.addr,
        });
        e.1 = e.1.max(info.size);
        e.2 = e.2.max(info.age_s);
    }
    by_cluster
}

/// Reconsiders the node's cluster at `level` (see [`crate::cluster`]).
async fn reconsider(inner: &Arc<Inner>, level: usize) {
    let now = Instant::now();
    let (accesses, slow, current_size) = {
        let mut st = inner.lock();
        let l = &mut st.levels[level];
        let counts = (l.accesses, l.slow, l.table.len() as u32 + 1);
        l.accesses = 0;
        l.slow = 0;
        counts
    };
    if current_size > 1 && cluster::too_slow(accesses, slow) {
        let mut st = inner.lock();
        let id = Id::random(&mut st.rng);
        let l = &mut st.levels[level];
        l.cluster = id;
        l.created = now;
        l.table.clear();
        l.store.clear();
        return;
    }
    // Validate the candidates: ping a few members of each that were not measured yet.
    let seen = candidates_seen(inner, level);
    let unmeasured: Vec<Contact> = {
        let st = inner.lock();
        seen.values()
            .flat_map(|(members, _, _)| {
                members
                    .iter()
                    .filter(|c| st.peers.get(&c.id).is_none_or(|p| p.rtt.is_none()))
                    .take(VALIDATE)
                    .copied()
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    ping_all(inner, &unmeasured).await;
    if !move_to_chosen(inner, level, &seen, current_size, now) {
        return;
    }
    // Announce ourselves in the new cluster.
    let id = inner.id;
    let _ = inner
        .walk(level, id, crate::wire::Op::Find, id, Duration::ZERO, &[])
        .await;
}

/// Applies §4.4's choice at `level` among the clusters `seen` (members measured by now):
/// moves the node if another is preferred. Returns whether it moved.
fn move_to_chosen(
    inner: &Inner,
    level: usize,
    seen: &HashMap<Id, (Vec<Contact>, u32, u32)>,
    current_size: u32,
    now: Instant,
) -> bool {
    let mut st = inner.lock();
    let threshold = st.levels[level].threshold.unwrap_or(Duration::MAX);
    let candidates: Vec<Candidate> = seen
        .iter()
        .map(|(id, (members, size, age_s))| {
            let rtts: Vec<Duration> = members
                .iter()
                .filter_map(|c| st.peers.get(&c.id).and_then(|p| p.rtt))
                .collect();
            Candidate {
                id: *id,
                size: (*size).max(members.len() as u32),
                age: Duration::from_secs(*age_s as u64),
                measured: rtts.len(),
                within: rtts.iter().filter(|r| **r <= threshold).count(),
            }
        })
        .collect();
    let l = &st.levels[level];
    let current = Candidate {
        id: l.cluster,
        size: current_size,
        age: now.duration_since(l.created),
        measured: 1,
        within: 1,
    };
    let chosen = cluster::choose(&current, &candidates);
    if chosen == current.id {
        return false;
    }
    // Move: the new cluster's known members form the level's table; its values are gone.
    let age = candidates
        .iter()
        .find(|c| c.id == chosen)
        .map_or(Duration::ZERO, |c| c.age);
    let members = seen.get(&chosen).map(|m| m.0.clone()).unwrap_or_default();
    let l = &mut st.levels[level];
    l.cluster = chosen;
    l.created = now.checked_sub(age).unwrap_or(now);
    l.table.clear();
    l.store.clear();
    for c in members {
        l.table.heard(c, now);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_key_by_prefix() {
        let a = hint_key("127.0.3.4".parse().unwrap());
        assert_eq!(a, hint_key("127.0.3.200".parse().unwrap()));
        assert_ne!(a, hint_key("127.0.4.4".parse().unwrap()));
    }
}
