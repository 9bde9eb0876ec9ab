//! The one work queue of the simulators: runs independent jobs on a few scoped threads, each
//! thread taking the next job until none is left, and returns the results in job order.
//! [`crate::sweep`] (policies × sizes), [`crate::model_check`] (a grid of c) and
//! [`crate::cluster_sweep::sweep`] (schemes × sizes) all run on it.

use std::sync::atomic::{AtomicUsize, Ordering};

/// A progress callback: called with a number of work units just done (requests, usually), from
/// any thread.
pub type Progress<'a> = &'a (dyn Fn(u64) + Sync);

/// Runs `run(job, progress)` for every job on up to `threads` threads (at least one, at most one
/// per job) and returns the results in the order of `jobs`. `progress` is handed to every job,
/// which reports its own work units through it. A panicking job propagates its panic.
pub fn run_jobs<J, R, F>(jobs: &[J], threads: usize, progress: Progress<'_>, run: F) -> Vec<R>
where
    J: Sync,
    R: Send,
    F: Fn(&J, Progress<'_>) -> R + Sync,
{
    let next = AtomicUsize::new(0);
    let threads = threads.clamp(1, jobs.len().max(1));
    let run = &run;
    let next = &next;
    let done: Vec<Vec<(usize, R)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(move || {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(job) = jobs.get(i) else {
                            return mine;
                        };
                        mine.push((i, run(job, progress)));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let mut slots: Vec<Option<R>> = (0..jobs.len()).map(|_| None).collect();
    for (i, r) in done.into_iter().flatten() {
        slots[i] = Some(r);
    }
    // Every index below `jobs.len()` was taken by exactly one thread, which stored its result
    // before taking the next.
    slots
        .into_iter()
        .map(|r| r.expect("every job ran exactly once"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn results_come_back_in_job_order() {
        let jobs: Vec<u64> = (0..100).collect();
        for threads in [0, 1, 3, 8, 200] {
            let units = AtomicU64::new(0);
            let out = run_jobs(
                &jobs,
                threads,
                &|n| {
                    units.fetch_add(n, Ordering::Relaxed);
                },
                |&j, progress| {
                    // Uneven work, so threads finish out of order.
                    std::thread::sleep(std::time::Duration::from_micros((j * 7919) % 300));
                    progress(j);
                    j * j
                },
            );
            assert_eq!(out, jobs.iter().map(|j| j * j).collect::<Vec<_>>());
            assert_eq!(units.load(Ordering::Relaxed), jobs.iter().sum::<u64>());
        }
    }

    #[test]
    fn no_jobs_no_results() {
        let out: Vec<u8> = run_jobs(&[] as &[u8], 4, &|_| {}, |&j, _| j);
        assert!(out.is_empty());
    }

    #[test]
    fn jobs_run_at_the_same_time() {
        // Each job waits (up to 10 s) until both have started: only possible on two threads.
        let started = AtomicU64::new(0);
        let saw_both = run_jobs(&[(); 2], 2, &|_| {}, |_, _| {
            started.fetch_add(1, Ordering::SeqCst);
            let t = std::time::Instant::now();
            while started.load(Ordering::SeqCst) < 2 {
                if t.elapsed() > std::time::Duration::from_secs(10) {
                    return false;
                }
                std::thread::yield_now();
            }
            true
        });
        assert_eq!(saw_both, vec![true, true]);
    }
}
