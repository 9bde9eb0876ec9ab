//! Parity rebalance: Algorithm 1 of the paper (§4.2, Appendix 10.3) on explicit inputs.
//!
//! # The flow graph
//!
//! Source → parity-bucket node `n` with capacity `s_n` (the parity bucket's write load) → every
//! available server not forbidden for `n` (not holding the bucket's data) with capacity `s_n` →
//! sink with the server's *budget*
//!
//! ```text
//! c_i = max(⌈W · q_i / Σ_{a∈A} q_a⌉ − l_i, 0)          (Budget::Paper)
//! ```
//!
//! where `W = Σ l_a + Σ s_n` is the total write load, `l_i` the server's load that this run does
//! not move (data buckets, uncoded objects and, for a partial re-placement, the parity buckets
//! that stay put), and `q_i` the server's weight as an integer (the weight itself when all
//! weights are integers, else `round(w_i / w_min · 2²⁰)`). With equal weights this is exactly the
//! paper's `⌈W/|A|⌉ − l_i`; a server twice as heavy gets twice the share (§4.2, "Extension to
//! heterogeneous servers"). The default, [`Budget::WaterFill`], is identical unless some server's
//! fixed load alone is above its share (see there). All capacities are integers (`u64` per arc,
//! `u128` per server); no floating point is involved once weights are integers.
//!
//! # The max-flow solver
//!
//! The graph is bipartite and nearly complete: a parity node reaches every server except the `K`
//! holding its data, so at 10,000 buckets × 500 servers it has ~5 M arcs. Materialising them is
//! what makes a generic solver slow (petgraph's Dinic takes ~0.5 s there, pathfinding's
//! Edmonds–Karp over a second at 2,000 × 100), so this solver keeps the parity→server arcs
//! *implicit* — a node stores only its forbidden servers (as a bit mask up to 64 servers) — and
//! materialises only arcs that carry flow:
//!
//! 1. **Initial flow.** Parity nodes in decreasing `s_n` each send their load to the allowed
//!    server with the most remaining budget (ties to the lower index; a linear scan below 48
//!    servers, a lazily updated max-heap above), spilling to the next one when the budget runs
//!    out — largest first onto the emptiest server, so almost every node sends its whole load
//!    to one server. A server a sibling parity bucket (same bucket) already uses is avoided
//!    when another server has budget. With [`Stability::SteerFlow`] each node whose whole load
//!    fits in its current server's remaining budget first sends it there.
//! 2. **Augmenting paths.** While some node still has unsent load, a breadth-first search from
//!    all such nodes over the residual graph finds a shortest path to a server with budget left
//!    (Edmonds–Karp with a super-source) and pushes the bottleneck along it. Residual arcs are a
//!    node's implicit forward arcs (visited in one sweep over the not-yet-visited servers, so a
//!    search costs O(|A| + N·K + flow arcs), not O(N·|A|)) and the reverse of arcs carrying
//!    flow. When the search fails the flow is maximum. On realistic loads the initial flow
//!    leaves almost nothing for this phase (0–3 paths in the benchmarks).
//!
//! The result is a maximum flow like any other solver's (the tests check its value against a
//! textbook Edmonds–Karp on the explicit graph); which of the many maximum flows it is matters,
//! because Algorithm 1 reads candidates off it: this one sends almost every node's load to a
//! single server, so most parity buckets have exactly one candidate.
//!
//! # From flow to assignment (lines 22–24)
//!
//! Each parity bucket goes to the least loaded server (load per unit weight, `load_i / q_i`,
//! where load is `l_i` plus the parity loads assigned so far) among the servers with positive
//! flow from it. The order is ours to choose: buckets with a single candidate first (they are
//! forced), then the rest in decreasing `s_n`, so the buckets with a real choice see the forced
//! loads.
//!
//! * **Several parity buckets per bucket (`P > 1`).** Parity nodes that share a `bucket` must
//!   land on distinct servers (and never on a forbidden one). A candidate is dropped when a
//!   sibling already took it; if no candidate is left, the bucket goes to the least loaded
//!   feasible server (not forbidden, not taken by a sibling). The initial flow already steers
//!   siblings apart, so this fallback is rare.
//! * **No flow.** A parity bucket with `s_n > 0` that received no flow (the graph could not
//!   route it) goes to the least loaded feasible server. A bucket with `s_n = 0` carries no
//!   information: it stays on its current server if that is feasible, otherwise it goes to the
//!   feasible server with the fewest parity buckets assigned in this run (then least loaded).
//! * **Stability** ([`Stability`]): moving a parity bucket makes the parity chunks cached for it
//!   unreachable, so by default the flow prefers current servers and a bucket whose current
//!   server is a feasible candidate stays.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::{PlacementError, ServerId};

mod options;
pub use options::{
    Budget, RebalanceOptions, Stability, Weigh, FIRST_REBALANCE_AFTER, HOLD_PPM, REBALANCE_EVERY_S,
};

/// The inputs of one run of Algorithm 1: the available servers with their weights and fixed
/// loads `l_i`, and the parity buckets to place with their loads `s_n`, forbidden servers and
/// current servers.
#[derive(Clone, Debug, Default)]
pub struct ParityProblem {
    servers: Vec<ServerId>,
    weights: Vec<f64>,
    server_load: Vec<u64>,
    parity_load: Vec<u64>,
    bucket: Vec<usize>,
    forbidden_start: Vec<usize>,
    forbidden: Vec<ServerId>,
    current: Vec<Option<ServerId>>,
}

impl ParityProblem {
    pub fn new() -> ParityProblem {
        ParityProblem {
            forbidden_start: vec![0],
            ..ParityProblem::default()
        }
    }

    /// Empties the problem, keeping its allocations.
    pub fn clear(&mut self) {
        self.servers.clear();
        self.weights.clear();
        self.server_load.clear();
        self.parity_load.clear();
        self.bucket.clear();
        self.forbidden_start.clear();
        self.forbidden_start.push(0);
        self.forbidden.clear();
        self.current.clear();
    }

    /// Adds an available server (a member of `A`) with its weight and its fixed write load
    /// `l_i` (data buckets, uncoded objects, parity buckets this run does not move).
    pub fn add_server(
        &mut self,
        server: ServerId,
        weight: f64,
        load: u64,
    ) -> Result<(), PlacementError> {
        if !(weight.is_finite() && weight > 0.0) {
            return Err(PlacementError::BadWeight { server, weight });
        }
        if self.servers.contains(&server) {
            return Err(PlacementError::DuplicateServer { server });
        }
        self.servers.push(server);
        self.weights.push(weight);
        self.server_load.push(load);
        Ok(())
    }

    /// Adds a parity bucket with load `s_n`; returns its node index. `bucket` groups sibling
    /// parity buckets (which must land on distinct servers); `forbidden` lists the servers it
    /// must not go to (the bucket's data servers, and servers of siblings that stay put); ids
    /// that are not available servers are ignored. `current` is where it is now, if anywhere.
    pub fn add_parity_bucket(
        &mut self,
        bucket: usize,
        load: u64,
        forbidden: &[ServerId],
        current: Option<ServerId>,
    ) -> usize {
        self.parity_load.push(load);
        self.bucket.push(bucket);
        self.forbidden.extend_from_slice(forbidden);
        self.forbidden_start.push(self.forbidden.len());
        self.current.push(current);
        self.parity_load.len() - 1
    }

    /// The available servers, in insertion order (the order of [`ParityAssignment`]'s
    /// per-server vectors).
    pub fn servers(&self) -> &[ServerId] {
        &self.servers
    }

    pub fn server_weight(&self, i: usize) -> f64 {
        self.weights[i]
    }

    pub fn server_load(&self, i: usize) -> u64 {
        self.server_load[i]
    }

    /// Number of parity buckets (flow-graph parity nodes).
    pub fn len(&self) -> usize {
        self.parity_load.len()
    }

    pub fn is_empty(&self) -> bool {
        self.parity_load.is_empty()
    }

    pub fn parity_load(&self, node: usize) -> u64 {
        self.parity_load[node]
    }

    pub fn bucket(&self, node: usize) -> usize {
        self.bucket[node]
    }

    pub fn forbidden(&self, node: usize) -> &[ServerId] {
        &self.forbidden[self.forbidden_start[node]..self.forbidden_start[node + 1]]
    }

    pub fn current(&self, node: usize) -> Option<ServerId> {
        self.current[node]
    }

    /// `W`: all fixed server loads plus all parity loads.
    pub fn total_load(&self) -> u128 {
        self.server_load.iter().map(|&l| l as u128).sum::<u128>()
            + self.parity_load.iter().map(|&s| s as u128).sum::<u128>()
    }
}

/// The outcome of Algorithm 1. Per-server vectors follow [`ParityProblem::servers`]' order.
#[derive(Clone, Debug, Default)]
pub struct ParityAssignment {
    /// Server of each parity node; `None` only if no server is feasible for it.
    pub server: Vec<Option<ServerId>>,
    /// Sink capacity `c_i` of each server.
    pub budget: Vec<u128>,
    /// Flow into each server (≤ its budget).
    pub flow_in: Vec<u128>,
    /// Predicted write load of each server: `l_i` plus the loads of the parity buckets assigned
    /// to it.
    pub load: Vec<u128>,
    /// Value of the maximum flow.
    pub max_flow: u128,
    /// `Σ s_n`, the most the flow could be.
    pub supply: u128,
    /// `W`.
    pub total_load: u128,
    /// Augmenting paths the solver needed after its initial flow.
    pub augmenting_paths: usize,
    flow_start: Vec<usize>,
    flows: Vec<(ServerId, u64)>,
}

impl ParityAssignment {
    /// The flow from parity node `node` to each server it sends positive flow to: Algorithm 1's
    /// candidates for the bucket.
    pub fn flows(&self, node: usize) -> &[(ServerId, u64)] {
        &self.flows[self.flow_start[node]..self.flow_start[node + 1]]
    }

    /// Predicted load per unit weight, max over mean, over the problem's servers (1 when there
    /// is no load).
    pub fn max_over_mean(&self, problem: &ParityProblem) -> f64 {
        let per_weight: Vec<f64> = self
            .load
            .iter()
            .zip(&problem.weights)
            .map(|(&l, &w)| l as f64 / w)
            .collect();
        let total_w: f64 = problem.weights.iter().sum();
        let mean = self.load.iter().map(|&l| l as f64).sum::<f64>() / total_w;
        if mean <= 0.0 {
            return 1.0;
        }
        per_weight.iter().copied().fold(0.0, f64::max) / mean
    }
}

/// Runs Algorithm 1 on `problem`: builds the flow graph, finds a maximum flow and assigns each
/// parity bucket to its least loaded candidate (see the module documentation for the details
/// and [`RebalanceOptions`] for the knobs).
pub fn parity_rebalance(problem: &ParityProblem, options: RebalanceOptions) -> ParityAssignment {
    Solver::new(problem).solve(options)
}

const NIL: u32 = u32::MAX;
const FROM_SOURCE: u32 = u32::MAX - 1;

/// Weights as integers: the weights themselves when they all are integers up to 2³²;
/// otherwise relative to the lightest, `min(round(w / w_min · 2²⁰), 2⁴⁰)`. Budgets are exact in
/// the first case and whenever all weights are equal, and within 2⁻²⁰ otherwise.
pub(crate) fn quantise_weights(weights: &[f64]) -> Vec<u64> {
    if weights
        .iter()
        .all(|&w| w.fract() == 0.0 && w <= (1u64 << 32) as f64)
    {
        return weights.iter().map(|&w| w as u64).collect();
    }
    let min = weights.iter().copied().fold(f64::INFINITY, f64::min);
    weights
        .iter()
        .map(|&w| ((w / min * (1u64 << 20) as f64).round() as u64).clamp(1, 1 << 40))
        .collect()
}

/// Write budget of every server: `loads` are the fixed loads `l_i`, `supply` is `Σ s_n`, and
/// `W = Σ l_i + supply`.
pub(crate) fn budgets(rule: Budget, supply: u128, quantised: &[u64], loads: &[u128]) -> Vec<u128> {
    let total = supply + loads.iter().sum::<u128>();
    let sum_q: u128 = quantised.iter().map(|&q| q as u128).sum();
    let share = |level: u128, per: u128, q: u64, l: u128| {
        (level * q as u128).div_ceil(per).saturating_sub(l)
    };
    match rule {
        Budget::Paper => quantised
            .iter()
            .zip(loads)
            .map(|(&q, &l)| share(total, sum_q, q, l))
            .collect(),
        Budget::WaterFill => {
            let m = loads.len();
            let mut by_ratio: Vec<usize> = (0..m).collect();
            by_ratio.sort_by(|&a, &b| {
                (loads[a] * quantised[b] as u128)
                    .cmp(&(loads[b] * quantised[a] as u128))
                    .then(a.cmp(&b))
            });
            // The largest prefix (by load per unit weight) whose most loaded member is still
            // below the level the prefix reaches when it absorbs the whole supply.
            let (mut sum_l, mut sum_qp) = (0u128, 0u128);
            let prefix: Vec<(u128, u128)> = by_ratio
                .iter()
                .map(|&i| {
                    sum_l += loads[i];
                    sum_qp += quantised[i] as u128;
                    (sum_l, sum_qp)
                })
                .collect();
            let mut budget = vec![0u128; m];
            for u in (1..=m).rev() {
                let (pl, pq) = prefix[u - 1];
                let level = supply + pl;
                let last = by_ratio[u - 1];
                if loads[last] * pq < level * quantised[last] as u128 {
                    for &i in &by_ratio[..u] {
                        budget[i] = share(level, pq, quantised[i], loads[i]);
                    }
                    break;
                }
            }
            budget
        }
    }
}

/// `a / qa < b / qb` for loads per unit weight, exactly.
#[inline]
pub(crate) fn lighter(a: u128, qa: u64, b: u128, qb: u64) -> bool {
    a * (qb as u128) < b * (qa as u128)
}

/// Flow-carrying parity→server arcs, linked per parity node and per server.
struct Arcs {
    node: Vec<u32>,
    server: Vec<u32>,
    flow: Vec<u64>,
    next_of_node: Vec<u32>,
    next_of_server: Vec<u32>,
    node_head: Vec<u32>,
    server_head: Vec<u32>,
}

impl Arcs {
    fn new(nodes: usize, servers: usize) -> Arcs {
        Arcs {
            node: Vec::with_capacity(nodes + servers),
            server: Vec::with_capacity(nodes + servers),
            flow: Vec::with_capacity(nodes + servers),
            next_of_node: Vec::with_capacity(nodes + servers),
            next_of_server: Vec::with_capacity(nodes + servers),
            node_head: vec![NIL; nodes],
            server_head: vec![NIL; servers],
        }
    }

    fn find(&self, n: usize, a: u32) -> Option<usize> {
        let mut e = self.node_head[n];
        while e != NIL {
            if self.server[e as usize] == a {
                return Some(e as usize);
            }
            e = self.next_of_node[e as usize];
        }
        None
    }

    fn flow(&self, n: usize, a: u32) -> u64 {
        self.find(n, a).map_or(0, |e| self.flow[e])
    }

    fn add(&mut self, n: usize, a: u32, amount: u64) {
        if let Some(e) = self.find(n, a) {
            self.flow[e] += amount;
            return;
        }
        let e = self.node.len() as u32;
        self.node.push(n as u32);
        self.server.push(a);
        self.flow.push(amount);
        self.next_of_node.push(self.node_head[n]);
        self.next_of_server.push(self.server_head[a as usize]);
        self.node_head[n] = e;
        self.server_head[a as usize] = e;
    }

    fn sub(&mut self, n: usize, a: u32, amount: u64) {
        let e = self.find(n, a).expect("reverse arc carries flow");
        self.flow[e] -= amount;
    }
}

struct Solver<'p> {
    p: &'p ParityProblem,
    /// Servers in dense order 0..m (the problem's order).
    m: usize,
    quantised: Vec<u64>,
    /// Forbidden dense server indices per node (CSR), only servers of the problem.
    forb_start: Vec<usize>,
    forb: Vec<u32>,
    /// The same as bit masks, when there are at most 64 servers.
    forb_mask: Vec<u64>,
    /// Current server of each node as a dense index, or NIL.
    current: Vec<u32>,
    /// Sibling nodes (same bucket), CSR over groups; `group[n]` indexes it.
    group: Vec<u32>,
    group_start: Vec<usize>,
    group_nodes: Vec<u32>,
}

impl<'p> Solver<'p> {
    fn new(p: &'p ParityProblem) -> Solver<'p> {
        let m = p.servers.len();
        let max_id = p.servers.iter().copied().max().map_or(0, |s| s + 1);
        let mut dense = vec![NIL; max_id];
        for (i, &s) in p.servers.iter().enumerate() {
            dense[s] = i as u32;
        }
        let to_dense = |s: ServerId| dense.get(s).copied().unwrap_or(NIL);
        let n = p.parity_load.len();
        let mut forb_start = Vec::with_capacity(n + 1);
        let mut forb = Vec::with_capacity(p.forbidden.len());
        forb_start.push(0);
        for node in 0..n {
            let from = forb.len();
            for &s in p.forbidden(node) {
                let d = to_dense(s);
                if d != NIL && !forb[from..].contains(&d) {
                    forb.push(d);
                }
            }
            forb_start.push(forb.len());
        }
        let forb_mask = if m <= 64 {
            (0..n)
                .map(|node| {
                    forb[forb_start[node]..forb_start[node + 1]]
                        .iter()
                        .fold(0u64, |mask, &a| mask | 1 << a)
                })
                .collect()
        } else {
            Vec::new()
        };
        let current = p.current.iter().map(|c| c.map_or(NIL, to_dense)).collect();
        // Group sibling parity nodes by bucket.
        let mut by_bucket: Vec<(usize, u32)> = p
            .bucket
            .iter()
            .enumerate()
            .map(|(i, &b)| (b, i as u32))
            .collect();
        by_bucket.sort_unstable();
        let mut group = vec![0u32; n];
        let mut group_start = vec![0usize];
        let mut group_nodes = Vec::with_capacity(n);
        for (i, &(b, node)) in by_bucket.iter().enumerate() {
            if i > 0 && by_bucket[i - 1].0 != b {
                group_start.push(group_nodes.len());
            }
            group[node as usize] = (group_start.len() - 1) as u32;
            group_nodes.push(node);
        }
        group_start.push(group_nodes.len());
        Solver {
            p,
            m,
            quantised: quantise_weights(&p.weights),
            forb_start,
            forb,
            forb_mask,
            current,
            group,
            group_start,
            group_nodes,
        }
    }

    #[inline]
    fn forbidden(&self, n: usize, a: u32) -> bool {
        if let Some(&mask) = self.forb_mask.get(n) {
            return mask >> a & 1 != 0;
        }
        self.forb[self.forb_start[n]..self.forb_start[n + 1]].contains(&a)
    }

    #[inline]
    fn siblings(&self, n: usize) -> &[u32] {
        let g = self.group[n] as usize;
        &self.group_nodes[self.group_start[g]..self.group_start[g + 1]]
    }

    fn solve(&self, options: RebalanceOptions) -> ParityAssignment {
        let stability = options.stability;
        let p = self.p;
        let n = p.parity_load.len();
        let m = self.m;
        let loads: Vec<u128> = p.server_load.iter().map(|&l| l as u128).collect();
        let total = p.total_load();
        let supply: u128 = p.parity_load.iter().map(|&s| s as u128).sum();
        let budget = budgets(options.budget, supply, &self.quantised, &loads);

        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_unstable_by_key(|&i| (Reverse(p.parity_load[i as usize]), i));

        let mut residual = budget.clone();
        let mut excess: Vec<u64> = p.parity_load.clone();
        let mut arcs = Arcs::new(n, m);

        if stability == Stability::SteerFlow {
            for &node in &order {
                let node = node as usize;
                let c = self.current[node];
                if c == NIL || excess[node] == 0 || self.forbidden(node, c) {
                    continue;
                }
                if self
                    .siblings(node)
                    .iter()
                    .any(|&s| s as usize != node && arcs.flow(s as usize, c) > 0)
                {
                    continue;
                }
                // Only whole buckets: a bucket split here would end up on one side anyway.
                let amount = excess[node];
                if amount as u128 <= residual[c as usize] {
                    arcs.add(node, c, amount);
                    residual[c as usize] -= amount as u128;
                    excess[node] = 0;
                }
            }
        }

        self.initial_flow(&order, &mut residual, &mut excess, &mut arcs);
        let augmenting_paths = self.augment(&mut residual, &mut excess, &mut arcs);

        // Read the flow back per node.
        let mut flow_start = Vec::with_capacity(n + 1);
        let mut flows = Vec::with_capacity(n + m);
        let mut flow_in = vec![0u128; m];
        flow_start.push(0);
        for node in 0..n {
            let from = flows.len();
            let mut e = arcs.node_head[node];
            while e != NIL {
                let (a, f) = (arcs.server[e as usize], arcs.flow[e as usize]);
                if f > 0 {
                    flows.push((a, f));
                    flow_in[a as usize] += f as u128;
                }
                e = arcs.next_of_node[e as usize];
            }
            flows[from..].sort_unstable();
            flow_start.push(flows.len());
        }
        let max_flow = flow_in.iter().sum();

        let assigned = self.assign(stability, &order, &flow_start, &flows, loads);
        let (server, load) = assigned;
        ParityAssignment {
            server: server
                .iter()
                .map(|&d| (d != NIL).then(|| p.servers[d as usize]))
                .collect(),
            budget,
            flow_in,
            load,
            max_flow,
            supply,
            total_load: total,
            augmenting_paths,
            flows: flows
                .into_iter()
                .map(|(a, f)| (p.servers[a as usize], f))
                .collect(),
            flow_start,
        }
    }

    /// Servers that sibling parity buckets of `node` already send flow to.
    fn sibling_servers(&self, node: usize, arcs: &Arcs, out: &mut Vec<u32>) {
        out.clear();
        for &s in self.siblings(node) {
            if s as usize == node {
                continue;
            }
            let mut e = arcs.node_head[s as usize];
            while e != NIL {
                if arcs.flow[e as usize] > 0 {
                    out.push(arcs.server[e as usize]);
                }
                e = arcs.next_of_node[e as usize];
            }
        }
    }

    /// Largest parity buckets first, each onto the allowed server with the most budget left
    /// (ties to the lower index), preferring servers no sibling uses. A linear scan for small
    /// clusters, a lazily updated max-heap for large ones.
    fn initial_flow(
        &self,
        order: &[u32],
        residual: &mut [u128],
        excess: &mut [u64],
        arcs: &mut Arcs,
    ) {
        const HEAP_FROM: usize = 48;
        let use_heap = self.m >= HEAP_FROM;
        let mut heap: BinaryHeap<(u128, Reverse<u32>)> = if use_heap {
            residual
                .iter()
                .enumerate()
                .filter(|(_, &r)| r > 0)
                .map(|(a, &r)| (r, Reverse(a as u32)))
                .collect()
        } else {
            BinaryHeap::new()
        };
        let mut popped: Vec<(u128, Reverse<u32>)> = Vec::new();
        let mut siblings_use: Vec<u32> = Vec::new();
        for &node in order {
            let node = node as usize;
            while excess[node] > 0 {
                self.sibling_servers(node, arcs, &mut siblings_use);
                let chosen = if use_heap {
                    let mut chosen = None;
                    let mut shared = None;
                    while let Some(entry) = heap.pop() {
                        let a = entry.1 .0;
                        if entry.0 != residual[a as usize] {
                            continue; // stale
                        }
                        if self.forbidden(node, a) {
                            popped.push(entry);
                        } else if siblings_use.contains(&a) {
                            if shared.is_none() {
                                shared = Some(a);
                            }
                            popped.push(entry);
                        } else {
                            chosen = Some(a);
                            break;
                        }
                    }
                    heap.extend(popped.drain(..));
                    // `shared`, if taken, is pushed back; its entry turns stale below.
                    chosen.or(shared)
                } else {
                    // Best server no sibling uses, and best one a sibling uses (strictly
                    // larger residual wins, so ties keep the lower index).
                    let (mut clean, mut clean_r, mut shared, mut shared_r) = (NIL, 0u128, NIL, 0);
                    for (a, &r) in residual.iter().enumerate() {
                        if r <= clean_r && r <= shared_r {
                            continue;
                        }
                        let a = a as u32;
                        if self.forbidden(node, a) {
                            continue;
                        }
                        if siblings_use.contains(&a) {
                            if r > shared_r {
                                (shared, shared_r) = (a, r);
                            }
                        } else if r > clean_r {
                            (clean, clean_r) = (a, r);
                        }
                    }
                    let pick = if clean != NIL { clean } else { shared };
                    (pick != NIL).then_some(pick)
                };
                let Some(a) = chosen else {
                    break; // every allowed server is full; augmenting paths take over
                };
                let r = &mut residual[a as usize];
                let amount = (excess[node] as u128).min(*r) as u64;
                arcs.add(node, a, amount);
                *r -= amount as u128;
                excess[node] -= amount;
                if use_heap && *r > 0 {
                    heap.push((*r, Reverse(a)));
                }
            }
        }
    }

    /// Shortest augmenting paths from every node with unsent load until none is left or the
    /// flow is maximum. Returns the number of paths.
    fn augment(&self, residual: &mut [u128], excess: &mut [u64], arcs: &mut Arcs) -> usize {
        let n = excess.len();
        let m = self.m;
        let mut pending: Vec<u32> = (0..n as u32).filter(|&i| excess[i as usize] > 0).collect();
        if pending.is_empty() {
            return 0;
        }
        let mut paths = 0;
        let mut node_parent = vec![NIL; n];
        let mut server_parent = vec![NIL; m];
        let mut unvisited: Vec<u32> = Vec::with_capacity(m);
        // Queue items: node index, or server index + n.
        let mut queue: VecDeque<u32> = VecDeque::new();
        loop {
            pending.retain(|&i| excess[i as usize] > 0);
            if pending.is_empty() || residual.iter().all(|&r| r == 0) {
                return paths;
            }
            node_parent.fill(NIL);
            server_parent.fill(NIL);
            unvisited.clear();
            unvisited.extend(0..m as u32);
            queue.clear();
            for &i in &pending {
                node_parent[i as usize] = FROM_SOURCE;
                queue.push_back(i);
            }
            let mut sink_side = NIL;
            'bfs: while let Some(item) = queue.pop_front() {
                if (item as usize) < n {
                    let node = item as usize;
                    let mut keep = 0;
                    for i in 0..unvisited.len() {
                        let a = unvisited[i];
                        if self.forbidden(node, a) {
                            unvisited[keep] = a;
                            keep += 1;
                            continue;
                        }
                        server_parent[a as usize] = node as u32;
                        if residual[a as usize] > 0 {
                            sink_side = a;
                            break 'bfs;
                        }
                        queue.push_back(a + n as u32);
                    }
                    unvisited.truncate(keep);
                } else {
                    let a = item as usize - n;
                    let mut e = arcs.server_head[a];
                    while e != NIL {
                        let (other, f) = (arcs.node[e as usize], arcs.flow[e as usize]);
                        if f > 0 && node_parent[other as usize] == NIL {
                            node_parent[other as usize] = a as u32;
                            queue.push_back(other);
                        }
                        e = arcs.next_of_server[e as usize];
                    }
                }
            }
            if sink_side == NIL {
                return paths;
            }
            // Bottleneck along sink ← a ← node ← a' ← node' … ← source.
            let mut bottleneck = residual[sink_side as usize];
            let mut a = sink_side;
            loop {
                let node = server_parent[a as usize] as usize;
                let forward = self.p.parity_load[node] - arcs.flow(node, a);
                bottleneck = bottleneck.min(forward as u128);
                let from = node_parent[node];
                if from == FROM_SOURCE {
                    bottleneck = bottleneck.min(excess[node] as u128);
                    break;
                }
                bottleneck = bottleneck.min(arcs.flow(node, from) as u128);
                a = from;
            }
            let amount = bottleneck as u64;
            residual[sink_side as usize] -= bottleneck;
            let mut a = sink_side;
            loop {
                let node = server_parent[a as usize] as usize;
                arcs.add(node, a, amount);
                let from = node_parent[node];
                if from == FROM_SOURCE {
                    excess[node] -= amount;
                    break;
                }
                arcs.sub(node, from, amount);
                a = from;
            }
            paths += 1;
        }
    }

    /// Lines 22–24: each parity bucket to its least loaded candidate.
    fn assign(
        &self,
        stability: Stability,
        order: &[u32],
        flow_start: &[usize],
        flows: &[(u32, u64)],
        mut load: Vec<u128>,
    ) -> (Vec<u32>, Vec<u128>) {
        let p = self.p;
        let n = p.parity_load.len();
        let q = &self.quantised;
        let mut server = vec![NIL; n];
        let mut count = vec![0u32; self.m];
        let candidates = |node: usize| &flows[flow_start[node]..flow_start[node + 1]];
        // Forced buckets, then buckets with a choice, then unrouted ones, then load-free ones;
        // each class in decreasing s_n (`order`).
        let class = |node: usize| match (p.parity_load[node], candidates(node).len()) {
            (0, _) => 3,
            (_, 0) => 2,
            (_, 1) => 0,
            _ => 1,
        };
        let mut sequence: Vec<u32> = order.to_vec();
        sequence.sort_by_key(|&i| class(i as usize)); // stable: keeps decreasing s_n
        let keep_current = stability != Stability::Off;
        for &node in &sequence {
            let node = node as usize;
            let feasible = |a: u32, server: &[u32]| {
                !self.forbidden(node, a)
                    && !self
                        .siblings(node)
                        .iter()
                        .any(|&s| s as usize != node && server[s as usize] == a)
            };
            let current = self.current[node];
            let mut pick = NIL;
            if p.parity_load[node] == 0 {
                if current != NIL && feasible(current, &server) {
                    pick = current;
                } else {
                    for a in 0..self.m as u32 {
                        if !feasible(a, &server) {
                            continue;
                        }
                        let ai = a as usize;
                        if pick == NIL
                            || count[ai] < count[pick as usize]
                            || (count[ai] == count[pick as usize]
                                && lighter(load[ai], q[ai], load[pick as usize], q[pick as usize]))
                        {
                            pick = a;
                        }
                    }
                }
            } else {
                if keep_current
                    && current != NIL
                    && candidates(node).iter().any(|&(a, _)| a == current)
                    && feasible(current, &server)
                {
                    pick = current;
                }
                if pick == NIL {
                    for &(a, _) in candidates(node) {
                        let ai = a as usize;
                        if feasible(a, &server)
                            && (pick == NIL
                                || lighter(load[ai], q[ai], load[pick as usize], q[pick as usize]))
                        {
                            pick = a;
                        }
                    }
                }
                if pick == NIL {
                    for a in 0..self.m as u32 {
                        let ai = a as usize;
                        if feasible(a, &server)
                            && (pick == NIL
                                || lighter(load[ai], q[ai], load[pick as usize], q[pick as usize]))
                        {
                            pick = a;
                        }
                    }
                }
            }
            if pick != NIL {
                server[node] = pick;
                load[pick as usize] += p.parity_load[node] as u128;
                count[pick as usize] += 1;
            }
        }
        (server, load)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stability_and_budget_parse_from_their_names() {
        assert_eq!("off".parse::<Stability>(), Ok(Stability::Off));
        assert_eq!("keep".parse::<Stability>(), Ok(Stability::KeepCurrent));
        assert_eq!(" steer ".parse::<Stability>(), Ok(Stability::SteerFlow));
        assert!("Steer"
            .parse::<Stability>()
            .unwrap_err()
            .contains("off, keep, steer"));
        assert!("".parse::<Stability>().is_err());
        assert_eq!("paper".parse::<Budget>(), Ok(Budget::Paper));
        assert_eq!("water".parse::<Budget>(), Ok(Budget::WaterFill));
        assert!("waterfill"
            .parse::<Budget>()
            .unwrap_err()
            .contains("paper, water"));
    }
}
