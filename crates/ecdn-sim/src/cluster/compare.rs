//! A run with unavailability beside the same run without it: the relative miss-ratio change of
//! every window (C2DN Fig. 6a, 7) and the largest one after each unavailability starts.

use serde::Serialize;

use super::result::ClusterResult;

/// A run with unavailability next to the same run without it.
#[derive(Clone, Debug, Serialize)]
pub struct UnavailabilityResult {
    #[serde(flatten)]
    pub with: ClusterResult,
    /// The largest per-window relative miss-ratio change (mr_unavail − mr_avail)/mr_avail in
    /// the first `spike_windows` windows after any unavailability starts.
    pub max_relative_miss_increase: f64,
    /// Per window of `with.windows`: (mr_unavail − mr_avail)/mr_avail (C2DN Fig. 6a, 7).
    pub relative_miss_change: Vec<f64>,
    /// Indices of the windows in which a server became unavailable.
    pub unavailability_starts: Vec<usize>,
    /// The run without unavailability.
    pub baseline_miss_ratio: f64,
}

/// Compares `with` (unavailability) against `without` (same trace, everything available),
/// window by window (matched by window index).
pub fn compare(
    with: ClusterResult,
    without: &ClusterResult,
    spike_windows: usize,
) -> UnavailabilityResult {
    let mut base = without.windows.iter().peekable();
    let relative: Vec<f64> = with
        .windows
        .iter()
        .map(|u| {
            while base.next_if(|a| a.index < u.index).is_some() {}
            match base.peek() {
                Some(a) if a.index == u.index && a.miss_ratio > 0.0 => {
                    (u.miss_ratio - a.miss_ratio) / a.miss_ratio
                }
                _ => 0.0,
            }
        })
        .collect();
    let mut starts = Vec::new();
    let mut prev: &[usize] = &[];
    for w in &with.windows {
        if w.unavailable.iter().any(|s| !prev.contains(s)) {
            starts.push(w.index);
        }
        prev = &w.unavailable;
    }
    let mut max = 0.0f64;
    for &s in &starts {
        let end = s.saturating_add(spike_windows.max(1));
        let from = with.windows.partition_point(|w| w.index < s);
        for (_, r) in with.windows[from..]
            .iter()
            .zip(&relative[from..])
            .take_while(|(w, _)| w.index < end)
        {
            max = max.max(*r);
        }
    }
    UnavailabilityResult {
        max_relative_miss_increase: max,
        relative_miss_change: relative,
        unavailability_starts: starts,
        baseline_miss_ratio: without.miss_ratio,
        with,
    }
}
