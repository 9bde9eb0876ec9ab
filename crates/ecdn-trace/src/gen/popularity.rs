//! Popularity: the Zipf(α) sampler over object ranks, and the general discrete sampler both it
//! and the footprint generator use (Walker's alias method, Vose's construction).

use crate::rng::Rng;
use crate::TraceError;

/// Zipf(α) sampler over ranks `0..n` (rank 0 is the most popular) using an alias table:
/// 8 bytes per object, O(n) construction, O(1) sampling.
#[derive(Clone, Debug)]
pub struct Zipf {
    /// Per slot: low 32 bits = acceptance threshold (probability · 2³²), high 32 bits = alias.
    pub(super) table: Vec<u64>,
}

impl Zipf {
    /// Builds the sampler; `n` must be in `1..=u32::MAX` and α finite and ≥ 0.
    pub fn new(n: u64, alpha: f64) -> Result<Zipf, TraceError> {
        if n == 0 || n > u32::MAX as u64 {
            return Err(TraceError::Config(format!(
                "number of objects must be between 1 and {}, got {n}",
                u32::MAX
            )));
        }
        if !alpha.is_finite() || alpha < 0.0 {
            return Err(TraceError::Config(format!(
                "Zipf alpha must be a finite number ≥ 0, got {alpha}"
            )));
        }
        let p: Vec<f64> = (1..=n).map(|k| (k as f64).powf(-alpha)).collect();
        Ok(Zipf {
            table: alias_table(&p),
        })
    }

    /// Number of ranks.
    pub fn len(&self) -> u64 {
        self.table.len() as u64
    }

    /// Whether there are no ranks (never: construction requires at least one).
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Draws a rank in `0..len()`.
    #[inline]
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        alias_draw(&self.table, rng)
    }
}

/// Vose's alias table for the (unnormalised, non-negative, not all zero) weights `w`: per slot,
/// low 32 bits = acceptance threshold (probability · 2³²), high 32 bits = alias. At most
/// `u32::MAX` weights.
pub(crate) fn alias_table(w: &[f64]) -> Vec<u64> {
    let len = w.len();
    let sum: f64 = w.iter().sum();
    let scale = len as f64 / sum;
    let mut p: Vec<f64> = w.iter().map(|&v| v * scale).collect();
    let mut table = vec![0u64; len];
    let mut small: Vec<u32> = Vec::new();
    let mut large: Vec<u32> = Vec::new();
    for (i, &v) in p.iter().enumerate() {
        if v < 1.0 {
            small.push(i as u32);
        } else {
            large.push(i as u32);
        }
    }
    let full = |i: u32| ((i as u64) << 32) | u32::MAX as u64;
    while let (Some(&s), Some(&l)) = (small.last(), large.last()) {
        small.pop();
        let thresh = (p[s as usize] * 4_294_967_296.0).min(u32::MAX as f64) as u64;
        table[s as usize] = ((l as u64) << 32) | thresh;
        p[l as usize] = (p[l as usize] + p[s as usize]) - 1.0;
        if p[l as usize] < 1.0 {
            large.pop();
            small.push(l);
        }
    }
    // Leftovers have probability 1 up to rounding: they always pick themselves.
    for i in small.into_iter().chain(large) {
        table[i as usize] = full(i);
    }
    table
}

/// A discrete distribution over `0..n` with given weights, sampled in O(1) (alias method).
#[derive(Clone, Debug)]
pub(crate) struct Discrete {
    table: Vec<u64>,
}

impl Discrete {
    /// `weights` must be finite, non-negative, not all zero, and at most `u32::MAX` of them.
    pub(crate) fn new(weights: &[f64]) -> Discrete {
        Discrete {
            table: alias_table(weights),
        }
    }

    /// Draws an index.
    #[inline]
    pub(crate) fn sample(&self, rng: &mut Rng) -> usize {
        alias_draw(&self.table, rng) as usize
    }
}

/// One draw from an alias table.
#[inline]
fn alias_draw(table: &[u64], rng: &mut Rng) -> u64 {
    let i = rng.below(table.len() as u64) as usize;
    let e = table[i];
    let coin = (rng.next_u64() >> 32) as u32;
    if coin < e as u32 {
        i as u64
    } else {
        e >> 32
    }
}
