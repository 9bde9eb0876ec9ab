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
mod sketch;
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
    /// `history`: objects enter with their recent request count (`gdsf:history`, see
    /// [`Gdsf`]).
    Gdsf {
        history: bool,
    },
    LfuDa,
    Clock,
    Sieve,
    S3Fifo,
    TwoQ,
    Arc,
    /// `max_object`: the size-aware option (`lirs:max-object=SIZE`, see [`Lirs`]).
    Lirs {
        max_object: Option<u64>,
    },
    /// `max_object`: the size-aware option (`wtinylfu:max-object=SIZE`, see [`WTinyLfu`]).
    WTinyLfu {
        max_object: Option<u64>,
    },
    Hyperbolic,
    LeCaR,
    Lhd,
    Belady,
}

impl EvictionKind {
    /// Parses `NAME[:OPTION]...`; the options are `max-object=SIZE` for `lirs` and
    /// `wtinylfu` (objects up to SIZE cached, in place of their 1% rule) and `history` for
    /// `gdsf`, none for the others.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut parts = s.split(':');
        let mut kind = Self::parse_name(parts.next().unwrap_or("").trim())?;
        for option in parts.map(str::trim) {
            let max_object = match option.split_once('=') {
                Some((key, value)) if key.trim().eq_ignore_ascii_case("max-object") => {
                    let size = ecdn_trace::units::parse_size(value.trim())
                        .map_err(|e| format!("{s:?}: max-object: {e}"))?;
                    if size == 0 {
                        return Err(format!("{s:?}: max-object must be at least 1 byte"));
                    }
                    Some(size)
                }
                _ => None,
            };
            kind = match (kind, max_object) {
                (EvictionKind::Gdsf { .. }, None) if option.eq_ignore_ascii_case("history") => {
                    EvictionKind::Gdsf { history: true }
                }
                (EvictionKind::Lirs { .. }, Some(_)) => EvictionKind::Lirs { max_object },
                (EvictionKind::WTinyLfu { .. }, Some(_)) => EvictionKind::WTinyLfu { max_object },
                _ => {
                    return Err(format!(
                        "{s:?}: option {option:?} is not one of this policy's (lirs and \
                         wtinylfu take max-object=SIZE, gdsf takes history; the others none)"
                    ))
                }
            };
        }
        Ok(kind)
    }

    fn parse_name(s: &str) -> Result<Self, String> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "lru" => EvictionKind::Lru,
            "fifo" => EvictionKind::Fifo,
            "s4lru" => EvictionKind::S4lru,
            "gdsf" => EvictionKind::Gdsf { history: false },
            "lfuda" | "lfu-da" => EvictionKind::LfuDa,
            "clock" => EvictionKind::Clock,
            "sieve" => EvictionKind::Sieve,
            "s3fifo" | "s3-fifo" => EvictionKind::S3Fifo,
            "2q" | "twoq" => EvictionKind::TwoQ,
            "arc" => EvictionKind::Arc,
            "lirs" => EvictionKind::Lirs { max_object: None },
            "wtinylfu" | "w-tinylfu" => EvictionKind::WTinyLfu { max_object: None },
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
            EvictionKind::Gdsf { history: false } => Box::new(Gdsf::new(capacity)),
            EvictionKind::Gdsf { history: true } => Box::new(Gdsf::with_history(capacity)),
            EvictionKind::LfuDa => Box::new(LfuDa::new(capacity)),
            EvictionKind::Clock => Box::new(Clock::new(capacity)),
            EvictionKind::Sieve => Box::new(Sieve::new(capacity)),
            EvictionKind::S3Fifo => Box::new(S3Fifo::new(capacity)),
            EvictionKind::TwoQ => Box::new(TwoQ::new(capacity)),
            EvictionKind::Arc => Box::new(Arc::new(capacity)),
            EvictionKind::Lirs { max_object } => {
                Box::new(Lirs::with_max_object(capacity, max_object))
            }
            EvictionKind::WTinyLfu { max_object } => {
                Box::new(WTinyLfu::with_max_object(capacity, max_object))
            }
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

    #[test]
    fn max_object_is_an_option_of_lirs_and_wtinylfu_and_history_of_gdsf() {
        assert_eq!(
            EvictionKind::parse("lirs:max-object=64MiB"),
            Ok(EvictionKind::Lirs {
                max_object: Some(64 << 20)
            })
        );
        assert_eq!(
            EvictionKind::parse("W-TinyLFU:max-object=1KiB"),
            Ok(EvictionKind::WTinyLfu {
                max_object: Some(1024)
            })
        );
        assert_eq!(
            EvictionKind::parse("gdsf:history"),
            Ok(EvictionKind::Gdsf { history: true })
        );
        assert_eq!(
            EvictionKind::parse("gdsf"),
            Ok(EvictionKind::Gdsf { history: false })
        );
        for bad in [
            "lru:history",
            "gdsf:history:max-object=1MiB",
            "lru:max-object=1MiB",
            "lirs:max-object=0",
            "lirs:max=1MiB",
            "lirs:1MiB",
        ] {
            assert!(EvictionKind::parse(bad).is_err(), "{bad}");
        }
        // Without the option, the 1% rule (libCacheSim's): at 1 MiB nothing over 10,485 B.
        let plain = EvictionKind::parse("lirs").unwrap().build(1 << 20);
        assert!(plain.can_insert(1, 10_485) && !plain.can_insert(1, 10_486));
        let wide = EvictionKind::parse("lirs:max-object=300KiB")
            .unwrap()
            .build(1 << 20);
        assert!(wide.can_insert(1, 300 << 10) && !wide.can_insert(1, (300 << 10) + 1));
        let plain = EvictionKind::parse("wtinylfu").unwrap().build(1 << 20);
        assert!(plain.can_insert(1, 10_485) && !plain.can_insert(1, 10_486));
        let wide = EvictionKind::parse("wtinylfu:max-object=300KiB")
            .unwrap()
            .build(1 << 20);
        assert!(wide.can_insert(1, 300 << 10) && !wide.can_insert(1, (300 << 10) + 1));
        // At most half the capacity, whatever is asked.
        let big = EvictionKind::parse("lirs:max-object=1GiB")
            .unwrap()
            .build(1 << 20);
        assert!(big.can_insert(1, 512 << 10) && !big.can_insert(1, (512 << 10) + 1));
    }
}
