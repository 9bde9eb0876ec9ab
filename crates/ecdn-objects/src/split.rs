//! Where splits go and which ones a read asks for (EC-Cache §4.2–§4.3).
//!
//! **Placement.** An object coded into `n = k + r` splits (or replicated `n` times) is put on
//! `n` distinct servers drawn uniformly at random from the candidates (the available servers),
//! by a partial Fisher–Yates shuffle: every `n`-subset is equally likely and split `i` goes to
//! the `i`-th server drawn.
//!
//! **Reads with late binding.** A read asks `k + Δ` of the object's splits, drawn uniformly at
//! random from those on reachable servers, and completes with the first `k` that arrive; the
//! others are cancelled. With fewer than `k + Δ` reachable it asks all of them; with fewer than
//! `k` the object cannot be decoded from the cache ([`SplitError::TooFewReachable`]).

use ecdn_trace::Rng;
use thiserror::Error;

use crate::ServerId;

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum SplitError {
    #[error("{n} splits need as many distinct servers; {candidates} are available")]
    TooFewServers { n: usize, candidates: usize },
    #[error("only {reachable} of the object's splits are reachable; decoding needs {k}")]
    TooFewReachable { reachable: usize, k: usize },
    #[error("k must be at least 1")]
    ZeroK,
}

/// `n` distinct servers of `candidates`, uniformly at random (split `i` → element `i`).
pub fn place_splits(
    rng: &mut Rng,
    candidates: &[ServerId],
    n: usize,
) -> Result<Vec<ServerId>, SplitError> {
    if n > candidates.len() {
        return Err(SplitError::TooFewServers {
            n,
            candidates: candidates.len(),
        });
    }
    let mut pool = candidates.to_vec();
    for i in 0..n {
        let j = i + rng.below((pool.len() - i) as u64) as usize;
        pool.swap(i, j);
    }
    pool.truncate(n);
    Ok(pool)
}

/// The split indexes a read asks for: `k + delta` of the splits whose server is reachable
/// (`reachable(server)`), uniformly at random; all reachable ones if fewer. `locations[i]` is
/// split `i`'s server.
pub fn read_plan(
    rng: &mut Rng,
    locations: &[ServerId],
    k: usize,
    delta: usize,
    reachable: impl Fn(ServerId) -> bool,
) -> Result<Vec<usize>, SplitError> {
    if k == 0 {
        return Err(SplitError::ZeroK);
    }
    let live: Vec<usize> = (0..locations.len())
        .filter(|&i| reachable(locations[i]))
        .collect();
    if live.len() < k {
        return Err(SplitError::TooFewReachable {
            reachable: live.len(),
            k,
        });
    }
    let want = (k + delta).min(live.len());
    place_splits(rng, &live, want)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_is_distinct_and_uniform() {
        let mut rng = Rng::new(7);
        let servers: Vec<ServerId> = (0..10).collect();
        let mut hits = [0u32; 10];
        let trials = 20_000;
        for _ in 0..trials {
            let p = place_splits(&mut rng, &servers, 4).unwrap();
            let mut s = p.clone();
            s.sort_unstable();
            s.dedup();
            assert_eq!(s.len(), 4);
            for &x in &p {
                hits[x] += 1;
            }
        }
        // Each server is in 4/10 of the placements: 8,000 ± a few standard deviations (69).
        for &h in &hits {
            assert!((7_700..=8_300).contains(&h), "{hits:?}");
        }
        assert_eq!(
            place_splits(&mut rng, &servers, 11).unwrap_err(),
            SplitError::TooFewServers {
                n: 11,
                candidates: 10
            }
        );
        assert!(place_splits(&mut rng, &servers, 0).unwrap().is_empty());
    }

    #[test]
    fn reads_ask_k_plus_delta_of_the_reachable_splits() {
        let mut rng = Rng::new(3);
        let locations = vec![5, 9, 2, 7, 0, 4]; // k = 4, r = 2
        let down = |s: ServerId| s != 9;
        let mut asked = [0u32; 6];
        for _ in 0..6_000 {
            let plan = read_plan(&mut rng, &locations, 4, 1, down).unwrap();
            assert_eq!(plan.len(), 5);
            assert!(!plan.contains(&1), "split 1's server is down");
            for i in plan {
                asked[i] += 1;
            }
        }
        // The five reachable splits are all asked each time.
        assert_eq!(asked[1], 0);
        assert!(asked.iter().enumerate().all(|(i, &a)| i == 1 || a == 6_000));
        // All reachable: 5 of 6, each split in 5/6 of the reads.
        let mut asked = [0u32; 6];
        for _ in 0..6_000 {
            for i in read_plan(&mut rng, &locations, 4, 1, |_| true).unwrap() {
                asked[i] += 1;
            }
        }
        assert!(
            asked.iter().all(|&a| (4_800..=5_200).contains(&a)),
            "{asked:?}"
        );
        // Δ = 0: exactly k; too few reachable: an error naming both numbers.
        assert_eq!(
            read_plan(&mut rng, &locations, 4, 0, |_| true)
                .unwrap()
                .len(),
            4
        );
        assert_eq!(
            read_plan(&mut rng, &locations, 4, 1, |s| s < 5).unwrap_err(),
            SplitError::TooFewReachable { reachable: 3, k: 4 }
        );
        assert_eq!(
            read_plan(&mut rng, &locations, 0, 1, |_| true).unwrap_err(),
            SplitError::ZeroK
        );
    }
}
