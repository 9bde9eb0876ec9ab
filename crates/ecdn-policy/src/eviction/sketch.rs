//! The count-min frequency sketch of W-TinyLFU's admission filter (Einziger, Friedman and
//! Manes, ACM TOS '17), also GDSF's request history (`gdsf:history`): 4 rows of 16-bit
//! counters with conservative update (only the smallest counters of an id grow), a width that
//! can follow the number of cached objects, and periodic halving (the *reset* that ages old
//! popularity).

/// Sketch rows.
pub(crate) const ROWS: usize = 4;
/// Smallest sketch width.
pub(crate) const MIN_WIDTH: usize = 64;

/// The count-min frequency sketch with conservative update and periodic halving.
#[derive(Clone)]
pub(crate) struct Sketch {
    /// `ROWS` rows of `width` counters, row after row.
    counters: Vec<u16>,
    /// Power of two.
    width: usize,
    /// Whether the width follows the cached objects ([`Sketch::fit`]).
    grows: bool,
    /// Counts since the last halving, and how many trigger one (`None`: never).
    counted: u64,
    period: Option<u64>,
}

impl Sketch {
    pub(crate) fn new(width: usize, grows: bool, period: Option<u64>) -> Self {
        let width = width.max(MIN_WIDTH).next_power_of_two();
        Sketch {
            counters: vec![0; ROWS * width],
            width,
            grows,
            counted: 0,
            period,
        }
    }

    /// The counter index of `id` in each row (double hashing of one 64-bit mix).
    #[inline]
    fn slots(&self, id: u64) -> [usize; ROWS] {
        let h1 = crate::list::hash(id ^ 0x5851_F42D_4C95_7F2D);
        let h2 = crate::list::hash(h1) | 1;
        let mask = self.width - 1;
        std::array::from_fn(|r| {
            r * self.width + (h1.wrapping_add((r as u64).wrapping_mul(h2)) as usize & mask)
        })
    }

    #[inline]
    pub(crate) fn estimate(&self, id: u64) -> u16 {
        let slots = self.slots(id);
        slots.iter().map(|&i| self.counters[i]).min().unwrap_or(0)
    }

    /// One more request of `id`: the counters at the current minimum grow by one.
    #[inline]
    pub(crate) fn add(&mut self, id: u64) {
        let slots = self.slots(id);
        let min = slots.iter().map(|&i| self.counters[i]).min().unwrap_or(0);
        if min < u16::MAX {
            for &i in &slots {
                if self.counters[i] == min {
                    self.counters[i] = min + 1;
                }
            }
        }
        self.counted += 1;
        if self.period.is_some_and(|p| self.counted >= p) {
            for c in &mut self.counters {
                *c /= 2;
            }
            self.counted /= 2;
        }
    }

    /// A growing sketch at least as wide as `objects`: widened (and cleared) when it is not,
    /// its halving period growing with its width.
    pub(crate) fn fit(&mut self, objects: usize) {
        if self.grows && objects > self.width {
            let per_width = self.period.map(|p| p / self.width as u64);
            let width = objects.next_power_of_two();
            *self = Sketch::new(width, true, per_width.map(|k| k * width as u64));
        }
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.counters.capacity() * std::mem::size_of::<u16>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sketch_counts_halves_and_grows() {
        let mut s = Sketch::new(64, true, Some(640));
        for _ in 0..5 {
            s.add(1);
        }
        s.add(2);
        assert_eq!((s.estimate(1), s.estimate(2), s.estimate(3)), (5, 1, 0));
        // The 640th count halves every counter (and the count so far).
        for _ in 0..633 {
            s.add(7);
        }
        assert_eq!(s.estimate(7), 633);
        s.add(1);
        assert_eq!((s.estimate(1), s.estimate(2), s.estimate(7)), (3, 0, 316));
        assert_eq!(s.counted, 320);
        // As wide as the cached objects: growing to 65 objects doubles the width and clears.
        s.fit(64);
        assert_eq!(s.width, 64);
        s.fit(65);
        assert_eq!((s.width, s.estimate(7), s.period), (128, 0, Some(1280)));
    }

    #[test]
    fn conservative_update_grows_only_the_smallest_counters() {
        // Two rows' worth of collisions: a counter shared with a frequent id is not raised
        // by a rare one.
        let mut s = Sketch::new(64, false, None);
        for id in 0..2000u64 {
            s.add(id);
        }
        let total: u64 = s.counters.iter().map(|&c| u64::from(c)).sum();
        assert!(
            total < 4 * 2000,
            "every add raised all {ROWS} counters: {total}"
        );
        for id in 0..2000u64 {
            assert!(s.estimate(id) >= 1, "an estimate is never below the count");
        }
    }
}
