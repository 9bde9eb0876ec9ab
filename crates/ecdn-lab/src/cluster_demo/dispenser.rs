//! The load driver's dispenser ([`Dispenser`]): it hands out the trace's requests one at a time
//! to the driver's workers, round-robin over the live nodes the coordinator's map has in (or
//! where a router says), and carries out the run's schedule between two requests: kills,
//! network faults and their heals, rebalances, repair rounds and returns (see
//! [`super::driver`]).

use std::sync::{Arc, Mutex};

use super::bed::{Fault, Heals};
use super::schedule::{Kill, Restart};

/// One request handed out: its index in the trace and the node it goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Assignment {
    pub index: u64,
    pub node: usize,
}

/// What a worker does next.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Next {
    Request(Assignment),
    /// Wait until no request is in flight, rebalance, then call [`Dispenser::rebalanced`].
    Rebalance,
    /// Wait until no request is in flight, have every live node run a repair round, then call
    /// [`Dispenser::rebalanced`].
    Repair,
    /// Wait until no request is in flight, bring the node back (see [`super::restart`]),
    /// then call [`Dispenser::returned`] (or [`Dispenser::abort`] if it failed).
    Return(Restart),
    /// A rebalance or a return is under way: ask again shortly.
    Wait,
    /// Every request is out.
    Done,
}

/// What applies a network fault to the test bed.
pub type Faulter = Box<dyn FnMut(&Fault) + Send>;

/// Picks the node of request `index` among the live ones (`--routing bucket`, see
/// [`super::routing`]); `None` leaves it to the round-robin.
pub type Router = Box<dyn Fn(u64, &[usize]) -> Option<usize> + Send>;

/// Hands out the requests in trace order, round-robin over the live nodes, kills nodes on
/// schedule (`killer` is called with the node, under the dispenser's lock) and stops for the
/// rebalances and the returns of restarted nodes.
pub struct Dispenser<K: FnMut(usize)> {
    next: u64,
    total: u64,
    kills: Vec<Kill>,
    done: usize,
    /// The nodes not killed (the driver's tests look in).
    pub(super) live: Vec<usize>,
    killer: K,
    /// Rebalance before every request whose index is a positive multiple of this (0: never).
    rebalance_every: u64,
    /// The request index of the last rebalance handed out.
    rebalanced_at: u64,
    /// Repair rounds before every request whose index is a positive multiple of this (0:
    /// never), and the index of the last handed out.
    repair_every: u64,
    repaired_at: u64,
    /// A rebalance or repair round is under way.
    rebalancing: bool,
    /// Restarted nodes' returns, by `at`, and how many were handed out.
    returns: Vec<Restart>,
    returns_done: usize,
    returning: bool,
    in_flight: usize,
    /// `--testbed`'s network faults, by `at`, how many were applied, and what applies them.
    faults: Vec<Fault>,
    faults_done: usize,
    faulter: Option<Faulter>,
    /// Nodes whose fault healed, to return to the rotation (pushed by the heal timers).
    heals: Option<Heals>,
    /// Requests handed out, for whoever watches the run from outside the lock.
    issued: Option<Arc<std::sync::atomic::AtomicU64>>,
    /// Nodes the coordinator's map has out (C2DN's load balancer sends them nothing while
    /// another node is in the rotation).
    out_of_map: Vec<bool>,
    /// Nodes the load balancer's probes find much slower than the others (it sends them
    /// nothing while another node in the map is not).
    slow: Vec<bool>,
    /// Requests a router named a slow node for, sent elsewhere.
    slow_skips: u64,
    router: Option<Router>,
}

/// Whether a stop every `every` requests (0: never) falls before request `next`, not handed
/// out yet (`at`: the request of the last one handed out, set when this says yes).
fn stop_due(every: u64, next: u64, at: &mut u64) -> bool {
    let due = every > 0 && next > 0 && next.is_multiple_of(every) && *at < next;
    if due {
        *at = next;
    }
    due
}

impl<K: FnMut(usize)> Dispenser<K> {
    /// `kills` from [`super::schedule`] (sorted by `at`).
    pub fn new(total: u64, nodes: usize, kills: Vec<Kill>, killer: K) -> Self {
        Dispenser {
            next: 0,
            total,
            kills,
            done: 0,
            live: (0..nodes).collect(),
            killer,
            rebalance_every: 0,
            rebalanced_at: 0,
            repair_every: 0,
            repaired_at: 0,
            rebalancing: false,
            returns: Vec::new(),
            returns_done: 0,
            returning: false,
            in_flight: 0,
            faults: Vec::new(),
            faults_done: 0,
            faulter: None,
            heals: None,
            issued: None,
            out_of_map: vec![false; nodes],
            slow: vec![false; nodes],
            slow_skips: 0,
            router: None,
        }
    }

    /// The coordinator's map has `node` available (or not): a node out of the map gets no
    /// request while another node of the rotation is in it.
    pub fn in_map(&mut self, node: usize, available: bool) {
        if let Some(o) = self.out_of_map.get_mut(node) {
            *o = !available;
        }
    }

    /// The load balancer's probes find `node` much slower than the others (or no longer): it
    /// gets no request while another node in the map is not slow.
    pub fn slow(&mut self, node: usize, slow: bool) {
        if let Some(s) = self.slow.get_mut(node) {
            *s = slow;
        }
    }

    /// Takes back into the rotation the nodes pushed to `heals` (their fault healed), unless
    /// killed meanwhile.
    pub fn with_heals(mut self, heals: Heals) -> Self {
        self.heals = Some(heals);
        self
    }

    /// Keeps `issued` equal to the requests handed out.
    pub fn with_issued(mut self, issued: Arc<std::sync::atomic::AtomicU64>) -> Self {
        self.issued = Some(issued);
        self
    }

    /// Sends each request where `router` says, instead of round-robin (a node it names that
    /// is not live gets none: the round-robin's node does).
    pub fn with_router(mut self, router: Router) -> Self {
        self.router = Some(router);
        self
    }

    /// Applies the network faults of `faults` (sorted by `at`) with `faulter` before their
    /// requests; a node the client can no longer reach leaves the rotation.
    pub fn with_faults(mut self, faults: Vec<Fault>, faulter: Faulter) -> Self {
        self.faults = faults;
        self.faulter = Some(faulter);
        self
    }

    /// Brings the restarted nodes of `returns` (from [`super::schedule::restarts`], sorted by
    /// `at`) back before their requests.
    pub fn with_returns(mut self, returns: Vec<Restart>) -> Self {
        self.returns = returns;
        self
    }

    /// Rebalances before every `every`-th request (0: never).
    pub fn with_rebalances(mut self, every: u64) -> Self {
        self.rebalance_every = every;
        self
    }

    /// Repair rounds before every `every`-th request (0: never).
    pub fn with_repairs(mut self, every: u64) -> Self {
        self.repair_every = every;
        self
    }

    /// What to do next. A request handed out is in flight until [`Dispenser::finished`].
    pub fn next_request(&mut self) -> Next {
        if self.next >= self.total {
            return Next::Done;
        }
        if self.rebalancing || self.returning {
            return Next::Wait;
        }
        if stop_due(self.rebalance_every, self.next, &mut self.rebalanced_at) {
            self.rebalancing = true;
            return Next::Rebalance;
        }
        if let Some(&r) = self
            .returns
            .get(self.returns_done)
            .filter(|r| r.at <= self.next)
        {
            self.returns_done += 1;
            self.returning = true;
            return Next::Return(r);
        }
        while let Some(k) = self.kills.get(self.done).filter(|k| k.at <= self.next) {
            let node = k.node;
            self.done += 1;
            (self.killer)(node);
            self.live.retain(|&n| n != node);
        }
        while let Some(f) = self
            .faults
            .get(self.faults_done)
            .filter(|f| f.at <= self.next)
        {
            let f = *f;
            self.faults_done += 1;
            if let Some(apply) = &mut self.faulter {
                apply(&f);
            }
            if f.kind.leaves_rotation() {
                self.live.retain(|&n| n != f.node);
            }
        }
        if let Some(heals) = &self.heals {
            let healed: Vec<usize> = std::mem::take(&mut *heals.lock().unwrap());
            for node in healed {
                let killed = self.kills[..self.done].iter().any(|k| k.node == node)
                    && !self.returns[..self.returns_done]
                        .iter()
                        .any(|r| r.node == node);
                if !killed {
                    if let Err(at) = self.live.binary_search(&node) {
                        self.live.insert(at, node);
                    }
                }
            }
        }
        if stop_due(self.repair_every, self.next, &mut self.repaired_at) {
            self.rebalancing = true;
            return Next::Repair;
        }
        let index = self.next;
        self.next += 1;
        if let Some(issued) = &self.issued {
            issued.store(self.next, std::sync::atomic::Ordering::Relaxed);
        }
        // The live nodes in the map and not slow; else those in the map; else every live one.
        let (in_map_v, fast_v): (Vec<usize>, Vec<usize>);
        let (rotation, in_map): (&[usize], &[usize]) = if self
            .live
            .iter()
            .any(|&n| self.out_of_map[n] || self.slow[n])
        {
            in_map_v = self
                .live
                .iter()
                .copied()
                .filter(|&n| !self.out_of_map[n])
                .collect();
            fast_v = in_map_v
                .iter()
                .copied()
                .filter(|&n| !self.slow[n])
                .collect();
            let rotation = [&fast_v, &in_map_v]
                .into_iter()
                .find(|r| !r.is_empty())
                .map_or(&self.live[..], |r| r.as_slice());
            (rotation, &in_map_v)
        } else {
            (&self.live, &self.live)
        };
        let route = |among: &[usize]| {
            self.router
                .as_ref()
                .and_then(|r| r(index, among))
                .filter(|n| among.contains(n))
        };
        let routed = route(rotation);
        if rotation.len() < in_map.len() && routed != route(in_map) {
            // The router's node is slow: the next candidate took the request.
            self.slow_skips += 1;
        }
        let node = routed.unwrap_or(rotation[(index % rotation.len() as u64) as usize]);
        self.in_flight += 1;
        Next::Request(Assignment { index, node })
    }

    /// Requests a router named a node for that the load balancer found slow, sent to another.
    pub fn slow_skips(&self) -> u64 {
        self.slow_skips
    }

    /// Requests handed out so far.
    pub fn issued(&self) -> u64 {
        self.next
    }

    /// A request handed out is done.
    pub fn finished(&mut self) {
        self.in_flight -= 1;
    }

    /// Requests handed out and not done.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// The rebalance or repair round handed out is done: requests go on.
    pub fn rebalanced(&mut self) {
        self.rebalancing = false;
    }

    /// The node of the return handed out is back: it joins the rotation (in id order), and
    /// requests go on.
    pub fn returned(&mut self, node: usize) {
        if let Err(at) = self.live.binary_search(&node) {
            self.live.insert(at, node);
        }
        self.returning = false;
    }

    /// Hands out nothing more (a return failed: the run ends with its error).
    pub fn abort(&mut self) {
        self.total = self.next;
        self.returning = false;
    }

    /// The live nodes, in rotation order.
    pub fn live(&self) -> &[usize] {
        &self.live
    }

    /// Where a request that failed on `node` is retried: the live node after it in the
    /// rotation (after its place, if it is dead now); `None` if no other node is live.
    pub fn fallback(&self, node: usize) -> Option<usize> {
        let after = self.live.iter().position(|&n| n > node).unwrap_or(0);
        (0..self.live.len())
            .map(|i| self.live[(after + i) % self.live.len()])
            .find(|&n| n != node)
    }
}

/// The dispenser the workers share.
pub type SharedDispenser = Arc<Mutex<Dispenser<Box<dyn FnMut(usize) + Send>>>>;
