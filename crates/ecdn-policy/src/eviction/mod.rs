//! Eviction policies, one per file, and [`EvictionKind`] to name and build one.

pub mod arc;
pub mod belady;
pub mod clock;
pub mod fifo;
pub mod gdsf;
pub mod hyperbolic;
pub mod lecar;
pub mod lfuda;
pub mod lhd;
pub mod lirs;
pub mod lru;
mod priority;
pub mod s3fifo;
pub mod s4lru;
pub mod sieve;
pub mod twoq;
pub mod wtinylfu;

pub use arc::Arc;
pub use belady::Belady;
pub use clock::Clock;
pub use fifo::Fifo;
pub use gdsf::Gdsf;
pub use hyperbolic::Hyperbolic;
pub use lecar::LeCaR;
pub use lfuda::LfuDa;
pub use lhd::{Lhd, LhdParams};
pub use lirs::Lirs;
pub use lru::Lru;
pub use s3fifo::S3Fifo;
pub use s4lru::S4lru;
pub use sieve::Sieve;
pub use twoq::TwoQ;
pub use wtinylfu::WTinyLfu;

use crate::Eviction;

/// Every online eviction policy's name, as [`EvictionKind::parse`] takes it.
pub const NAMES: [&str; 15] = [
    "lru",
    "fifo",
    "s4lru",
    "gdsf",
    "lfuda",
    "clock",
    "sieve",
    "s3fifo",
    "2q",
    "arc",
    "lirs",
    "wtinylfu",
    "hyperbolic",
    "lecar",
    "lhd",
];

/// The offline ones: they need each request's next access (oracleGeneral traces).
pub const OFFLINE_NAMES: [&str; 1] = ["belady"];

/// An eviction policy kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvictionKind {
    Lru,
    Fifo,
    S4lru,
    Gdsf,
    LfuDa,
    Clock,
    Sieve,
    S3Fifo,
    TwoQ,
    Arc,
    Lirs,
    WTinyLfu,
    Hyperbolic,
    LeCaR,
    Lhd,
    Belady,
}

impl EvictionKind {
    pub fn parse(s: &str) -> Result<Self, String> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "lru" => EvictionKind::Lru,
            "fifo" => EvictionKind::Fifo,
            "s4lru" => EvictionKind::S4lru,
            "gdsf" => EvictionKind::Gdsf,
            "lfuda" | "lfu-da" => EvictionKind::LfuDa,
            "clock" => EvictionKind::Clock,
            "sieve" => EvictionKind::Sieve,
            "s3fifo" | "s3-fifo" => EvictionKind::S3Fifo,
            "2q" | "twoq" => EvictionKind::TwoQ,
            "arc" => EvictionKind::Arc,
            "lirs" => EvictionKind::Lirs,
            "wtinylfu" | "w-tinylfu" => EvictionKind::WTinyLfu,
            "hyperbolic" => EvictionKind::Hyperbolic,
            "lecar" => EvictionKind::LeCaR,
            "lhd" => EvictionKind::Lhd,
            "belady" => EvictionKind::Belady,
            other => {
                return Err(format!(
                    "unknown eviction policy {other:?} (known: {}; offline: {})",
                    NAMES.join(", "),
                    OFFLINE_NAMES.join(", ")
                ))
            }
        })
    }

    /// An empty eviction policy of this kind with `capacity` bytes (a randomised one draws
    /// from seed 0; see [`EvictionKind::build_seeded`]).
    pub fn build(self, capacity: u64) -> Box<dyn Eviction> {
        self.build_seeded(capacity, 0)
    }

    /// [`EvictionKind::build`] with the seed of a randomised policy's generator (the others
    /// ignore it): equal seeds, equal decisions.
    pub fn build_seeded(self, capacity: u64, seed: u64) -> Box<dyn Eviction> {
        match self {
            EvictionKind::Lru => Box::new(Lru::new(capacity)),
            EvictionKind::Fifo => Box::new(Fifo::new(capacity)),
            EvictionKind::S4lru => Box::new(S4lru::new(capacity)),
            EvictionKind::Gdsf => Box::new(Gdsf::new(capacity)),
            EvictionKind::LfuDa => Box::new(LfuDa::new(capacity)),
            EvictionKind::Clock => Box::new(Clock::new(capacity)),
            EvictionKind::Sieve => Box::new(Sieve::new(capacity)),
            EvictionKind::S3Fifo => Box::new(S3Fifo::new(capacity)),
            EvictionKind::TwoQ => Box::new(TwoQ::new(capacity)),
            EvictionKind::Arc => Box::new(Arc::new(capacity)),
            EvictionKind::Lirs => Box::new(Lirs::new(capacity)),
            EvictionKind::WTinyLfu => Box::new(WTinyLfu::new(capacity)),
            EvictionKind::Hyperbolic => Box::new(Hyperbolic::new(capacity, seed)),
            EvictionKind::LeCaR => Box::new(LeCaR::new(capacity, seed)),
            EvictionKind::Lhd => Box::new(Lhd::new(capacity, seed)),
            EvictionKind::Belady => Box::new(Belady::new(capacity)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_and_builds_its_policy() {
        for name in NAMES.into_iter().chain(OFFLINE_NAMES) {
            let kind = EvictionKind::parse(name).unwrap();
            assert_eq!(kind.build(1 << 20).name(), name);
        }
        let e = EvictionKind::parse("nope").unwrap_err();
        assert!(e.contains("arc"), "{e}");
    }
}
