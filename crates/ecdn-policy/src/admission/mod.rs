//! Admission policies, one per file. Size-based ones share [`exp_admit_probability`].

pub mod adaptsize;
pub mod exp;
pub mod frequency;
pub mod hillclimb;
pub mod lrus;
pub mod model;
pub mod reuse;
pub mod shadow;
pub mod sizeopt;
pub mod threshold;

pub use adaptsize::AdaptSize;
pub use exp::{exp_admit_probability, ExpSize};
pub use frequency::Frequency;
pub use hillclimb::HillClimb;
pub use lrus::LruS;
pub use sizeopt::SizeOpt;
pub use threshold::Threshold;
