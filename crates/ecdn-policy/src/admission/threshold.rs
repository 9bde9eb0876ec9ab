//! Static size threshold: admit objects strictly smaller than the threshold (the "Static" policy
//! of AdaptSize §6.3 and the common production setting).

use crate::{Admission, Request};

#[derive(Clone, Debug)]
pub struct Threshold {
    threshold: u64,
}

impl Threshold {
    pub fn new(threshold: u64) -> Self {
        Threshold { threshold }
    }
}

impl Admission for Threshold {
    fn name(&self) -> String {
        format!(
            "threshold({})",
            ecdn_trace::units::format_size(self.threshold)
        )
    }
    #[inline]
    fn admit(&mut self, req: &Request) -> bool {
        req.size < self.threshold
    }
    fn probability(&self, size: u64) -> f64 {
        if size < self.threshold {
            1.0
        } else {
            0.0
        }
    }
    fn parameter(&self) -> Option<f64> {
        Some(self.threshold as f64)
    }
}
