//! Eviction policies, one per file.

pub mod fifo;
pub mod gdsf;
pub mod lfuda;
pub mod lru;
mod priority;
pub mod s4lru;

pub use fifo::Fifo;
pub use gdsf::Gdsf;
pub use lfuda::LfuDa;
pub use lru::Lru;
pub use s4lru::S4lru;
