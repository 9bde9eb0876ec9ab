//! Eviction policies, one per file.

pub mod fifo;
pub mod lru;

pub use fifo::Fifo;
pub use lru::Lru;
