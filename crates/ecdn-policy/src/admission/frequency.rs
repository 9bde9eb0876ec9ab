//! Frequency admission: admit an object on its n-th request, like nginx's
//! `proxy_cache_min_uses`. Counts are kept for every object seen (the simulator's view; nginx
//! keeps them in its keys zone).

use hashbrown::HashMap;

use crate::{Admission, Request};

#[derive(Clone, Debug)]
pub struct Frequency {
    min_uses: u32,
    counts: HashMap<u64, u32, foldhash::fast::FixedState>,
}

impl Frequency {
    pub fn new(min_uses: u32) -> Self {
        Frequency {
            min_uses: min_uses.max(1),
            counts: HashMap::with_hasher(foldhash::fast::FixedState::with_seed(0x5eed)),
        }
    }
}

impl Admission for Frequency {
    fn name(&self) -> String {
        format!("freq({})", self.min_uses)
    }
    #[inline]
    fn observe(&mut self, req: &Request, _hit: bool) {
        if self.min_uses > 1 {
            let c = self.counts.entry(req.id).or_insert(0);
            *c = c.saturating_add(1);
        }
    }
    #[inline]
    fn admit(&mut self, req: &Request) -> bool {
        self.min_uses <= 1 || self.counts.get(&req.id).copied().unwrap_or(0) >= self.min_uses
    }
    fn tracked(&self) -> usize {
        self.counts.len()
    }
    fn heap_bytes(&self) -> usize {
        self.counts.capacity() * (std::mem::size_of::<(u64, u32)>() + 1)
    }
    fn probability(&self, _size: u64) -> f64 {
        if self.min_uses <= 1 {
            1.0
        } else {
            0.0
        }
    }
}
