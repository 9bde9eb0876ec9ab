//! The min-cost flow of one window of PFOO-U (`upper.rs`): FOO's graph (Berger, Beckmann and
//! Harchol-Balter, SIGMETRICS '18, §3) over the window's intervals alone, the rest of the
//! schedule fixed. Its nodes are the window's distinct request times, in order. A *central*
//! arc joins each to the next with the bytes the fixed schedule leaves free there, at no cost;
//! each interval has an *outer* arc from its first request to its second, as many bytes as
//! the object, each costing the interval's worth over its size; and each interval's first
//! request supplies its size, its second takes it. A byte that goes along the central arcs
//! stays in the cache; one that takes an outer arc misses. The cheapest flow is the best
//! fractional choice of the window's intervals: interval k is cached for the fraction of its
//! bytes that did not take its outer arc.
//!
//! Solved by successive shortest paths (Dijkstra with node potentials, every cost being
//! nonnegative at the start) from a source that feeds every supply to a sink that takes every
//! demand.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// One interval of the window: its first and second request as node indexes (`from < to`),
/// its size and its worth (1 for a hit, its size for hit bytes).
#[derive(Clone, Copy, Debug)]
pub(super) struct Item {
    pub(super) from: usize,
    pub(super) to: usize,
    pub(super) size: u64,
    pub(super) worth: f64,
}

struct Graph {
    head: Vec<Vec<usize>>,
    to: Vec<usize>,
    cap: Vec<u64>,
    cost: Vec<f64>,
}

impl Graph {
    fn new(nodes: usize) -> Graph {
        Graph {
            head: vec![Vec::new(); nodes],
            to: Vec::new(),
            cap: Vec::new(),
            cost: Vec::new(),
        }
    }

    /// An arc and its residual twin (`arc ^ 1`); returns the arc's index.
    fn arc(&mut self, from: usize, to: usize, cap: u64, cost: f64) -> usize {
        let e = self.to.len();
        for (a, b, c, k) in [(from, to, cap, cost), (to, from, 0, -cost)] {
            self.head[a].push(self.to.len());
            self.to.push(b);
            self.cap.push(c);
            self.cost.push(k);
        }
        e
    }
}

/// A distance in Dijkstra's heap, ordered as `f64::total_cmp` orders.
#[derive(Clone, Copy, PartialEq)]
struct Dist(f64);
impl Eq for Dist {}
impl PartialOrd for Dist {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Dist {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// The bytes of each item the cheapest flow keeps in the cache, given `free[p]` bytes free
/// between node `p` and node `p + 1`.
pub(super) fn cached_bytes(free: &[u64], items: &[Item]) -> Vec<u64> {
    let nodes = free.len() + 1;
    let (source, sink) = (nodes, nodes + 1);
    let mut g = Graph::new(nodes + 2);
    for (p, &f) in free.iter().enumerate() {
        g.arc(p, p + 1, f, 0.0);
    }
    let outer: Vec<usize> = items
        .iter()
        .map(|it| {
            let e = g.arc(it.from, it.to, it.size, it.worth / it.size as f64);
            g.arc(source, it.from, it.size, 0.0);
            g.arc(it.to, sink, it.size, 0.0);
            e
        })
        .collect();
    let n = nodes + 2;
    let mut potential = vec![0.0f64; n];
    let mut dist = vec![f64::INFINITY; n];
    let mut via = vec![usize::MAX; n];
    let mut heap = BinaryHeap::new();
    loop {
        dist.iter_mut().for_each(|d| *d = f64::INFINITY);
        via.iter_mut().for_each(|v| *v = usize::MAX);
        dist[source] = 0.0;
        heap.push(Reverse((Dist(0.0), source)));
        while let Some(Reverse((Dist(d), u))) = heap.pop() {
            if d > dist[u] {
                continue;
            }
            for &e in &g.head[u] {
                if g.cap[e] == 0 {
                    continue;
                }
                let v = g.to[e];
                // Reduced costs are nonnegative but for rounding.
                let reduced = (g.cost[e] + potential[u] - potential[v]).max(0.0);
                let nd = d + reduced;
                if nd < dist[v] {
                    dist[v] = nd;
                    via[v] = e;
                    heap.push(Reverse((Dist(nd), v)));
                }
            }
        }
        if !dist[sink].is_finite() {
            break;
        }
        for (p, d) in potential.iter_mut().zip(&dist) {
            if d.is_finite() {
                *p += d;
            }
        }
        // The bottleneck of the path, then the push.
        let mut push = u64::MAX;
        let mut v = sink;
        while v != source {
            let e = via[v];
            push = push.min(g.cap[e]);
            v = g.to[e ^ 1];
        }
        let mut v = sink;
        while v != source {
            let e = via[v];
            g.cap[e] -= push;
            g.cap[e ^ 1] += push;
            v = g.to[e ^ 1];
        }
    }
    // An outer arc's flow is its twin's residual capacity: those bytes missed.
    items
        .iter()
        .zip(&outer)
        .map(|(it, &e)| it.size - g.cap[e ^ 1])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(from: usize, to: usize, size: u64) -> Item {
        Item {
            from,
            to,
            size,
            worth: 1.0,
        }
    }

    #[test]
    fn the_cheapest_flow_keeps_the_intervals_worth_most_per_byte() {
        // Nodes 0..3, 10 bytes free everywhere. A 10-byte interval over 0→2 and two 5-byte
        // ones over 0→1 and 1→2: the two small ones are worth two hits.
        let items = [item(0, 2, 10), item(0, 1, 5), item(1, 2, 5)];
        assert_eq!(cached_bytes(&[10, 10], &items), vec![5, 5, 5]);
        // Half the room: one small one each side, or... the small ones.
        assert_eq!(cached_bytes(&[5, 5], &items), vec![0, 5, 5]);
        // No room between 1 and 2: only the first small one.
        assert_eq!(cached_bytes(&[10, 0], &items), vec![0, 5, 0]);
    }
}
