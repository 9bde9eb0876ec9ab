//! Shared by the tests and the benchmark: a seeded random source, a realistic write workload and
//! the placement invariants.

#![allow(dead_code)]

use ecdn_placement::{ParityProblem, Placement, ServerId};

/// SplitMix64 stream.
#[derive(Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1).
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit(), self.unit());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    pub fn lognormal(&mut self, mu: f64, sigma: f64) -> f64 {
        (mu + sigma * self.normal()).exp()
    }
}

/// Per-bucket popularity: lognormal(0, 1) in units of `scale` bytes per period.
pub fn popularity(buckets: usize, scale: f64, rng: &mut Rng) -> Vec<f64> {
    (0..buckets)
        .map(|_| scale * rng.lognormal(0.0, 1.0))
        .collect()
}

/// Records one period of writes the way the cluster does: bucket `b` admits coded bytes
/// `C_b = popularity[b] · lognormal(0, noise)`, written as `C_b / K` to each data server and to
/// each parity bucket, plus uncoded (small, replicated) bytes `C_b / 4` to each of the first two
/// servers of the bucket's walk.
pub fn record_period(pl: &mut Placement, popularity: &[f64], noise: f64, rng: &mut Rng) {
    let k = pl.k() as f64;
    for (b, &pop) in popularity.iter().enumerate() {
        let coded = pop * rng.lognormal(0.0, noise);
        let chunk = (coded / k) as u64;
        let data: Vec<ServerId> = pl.data_servers(b).to_vec();
        for s in data {
            pl.record_data_write(s, chunk);
        }
        for j in 0..pl.parity_servers(b).len() {
            pl.record_parity_write(b, j, chunk);
        }
        for s in pl.ring_servers(b, 2) {
            pl.record_data_write(s, (coded / 4.0) as u64);
        }
    }
}

/// The parity problem a full rebalance of `pl` would solve with its current loads.
pub fn full_problem(pl: &Placement) -> ParityProblem {
    let mut problem = ParityProblem::new();
    for s in 0..pl.servers() {
        if pl.is_available(s) {
            problem
                .add_server(s, pl.weight(s), pl.data_load(s))
                .unwrap();
        }
    }
    for b in 0..pl.buckets() {
        for (j, &s) in pl.parity_servers(b).iter().enumerate() {
            problem.add_parity_bucket(b, pl.parity_load(b, j), pl.data_servers(b), Some(s));
        }
    }
    problem
}

/// Every table is well formed for the current availability.
pub fn check_invariants(pl: &Placement) {
    let avail = pl.available_servers();
    let data_len = pl.k().min(avail);
    let parity_len = pl.p().min(avail - data_len);
    for b in 0..pl.buckets() {
        let data = pl.data_servers(b);
        let parity = pl.parity_servers(b);
        assert_eq!(data.len(), data_len, "bucket {b} data {data:?}");
        assert_eq!(parity.len(), parity_len, "bucket {b} parity {parity:?}");
        let all: Vec<ServerId> = data.iter().chain(parity).copied().collect();
        for (i, &s) in all.iter().enumerate() {
            assert!(
                s < pl.servers() && pl.is_available(s),
                "bucket {b}: {all:?}"
            );
            assert!(
                !all[..i].contains(&s),
                "bucket {b} repeats a server: {all:?}"
            );
        }
        let mut walk = pl.ring_servers(b, pl.k());
        let mut sorted = data.to_vec();
        walk.sort_unstable();
        sorted.sort_unstable();
        assert_eq!(
            walk, sorted,
            "bucket {b}: data servers are the walk's first K"
        );
    }
}

/// Per-server totals a period's loads give under the current tables: data load (as recorded)
/// plus the parity loads of the parity buckets each server holds.
pub fn totals(pl: &Placement) -> Vec<u128> {
    let mut t: Vec<u128> = (0..pl.servers()).map(|s| pl.data_load(s) as u128).collect();
    for b in 0..pl.buckets() {
        for (j, &s) in pl.parity_servers(b).iter().enumerate() {
            t[s] += pl.parity_load(b, j) as u128;
        }
    }
    t
}

/// max / min and max / mean of per-weight totals over available servers.
pub fn imbalance(pl: &Placement, totals: &[u128]) -> (f64, f64) {
    let per: Vec<f64> = (0..pl.servers())
        .filter(|&s| pl.is_available(s))
        .map(|s| totals[s] as f64 / pl.weight(s))
        .collect();
    let max = per.iter().copied().fold(0.0, f64::max);
    let min = per.iter().copied().fold(f64::INFINITY, f64::min);
    let mean = per.iter().sum::<f64>() / per.len() as f64;
    (max / min, max / mean)
}

/// The water level of a parity problem (equal weights): the `λ` with
/// `Σ max(λ − l_i, 0) = Σ s_n`, the lowest maximum a perfectly divisible parity load could
/// reach among the servers it has to fill.
pub fn water_level(problem: &ParityProblem) -> f64 {
    let mut l: Vec<f64> = (0..problem.servers().len())
        .map(|i| problem.server_load(i) as f64)
        .collect();
    l.sort_by(|a, b| a.total_cmp(b));
    let supply: f64 = (0..problem.len())
        .map(|n| problem.parity_load(n) as f64)
        .sum();
    let (mut sum, mut level) = (0.0, 0.0);
    for (u, &x) in l.iter().enumerate() {
        sum += x;
        let candidate = (supply + sum) / (u + 1) as f64;
        if x < candidate {
            level = candidate;
        }
    }
    level
}
