//! The machine's CPU while a bed delays packets: the seconds in which it had none to spare.
//!
//! The delayers run at a real-time priority, and letting a packet go runs the rest of the
//! kernel's receive path in their system calls, so they take CPU before the processes under
//! test do. That costs the processes nothing while the machine has CPU to spare, and
//! everything once it has none: then a request waits for the CPU the bed took, and the run
//! measures the bed. So a run through delayers is no result when too many of its seconds were
//! *starved*: the machine idle less than [`STARVED_IDLE`] of its cores' time (measured, the
//! object bench with 1 ms of delay had 73 of 104 seconds starved and failed a third of its
//! reads; the same without delay none, its least idle second 22%).

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Below this share of the machine's time idle, a second was starved.
pub const STARVED_IDLE: f64 = 0.05;

/// What the watch counted so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct MachineReport {
    /// Seconds measured.
    pub seconds: u64,
    /// Of them, starved ([`STARVED_IDLE`]).
    pub starved_seconds: u64,
    /// The machine's idle share over all of them.
    pub idle: f64,
}

#[derive(Debug, Default)]
struct Counts {
    seconds: AtomicU64,
    starved: AtomicU64,
    idle_ticks: AtomicU64,
    total_ticks: AtomicU64,
}

/// A thread reading `/proc/stat` every second until dropped.
#[derive(Debug)]
pub struct MachineWatch {
    counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MachineWatch {
    /// Starts watching; fails only if `/proc/stat` cannot be read.
    pub fn start() -> io::Result<MachineWatch> {
        let mut last = cpu_times()?;
        let counts = Arc::new(Counts::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s) = (counts.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("bed-machine".into())
            .spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    // A second in steps, so that stopping takes a tenth of one.
                    for _ in 0..10 {
                        if s.load(Ordering::Relaxed) {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    let Ok(now) = cpu_times() else { return };
                    c.count(last, now);
                    last = now;
                }
            })?;
        Ok(MachineWatch {
            counts,
            stop,
            thread: Some(thread),
        })
    }

    /// The seconds counted so far.
    pub fn report(&self) -> MachineReport {
        let c = &self.counts;
        let total = c.total_ticks.load(Ordering::Relaxed);
        MachineReport {
            seconds: c.seconds.load(Ordering::Relaxed),
            starved_seconds: c.starved.load(Ordering::Relaxed),
            idle: if total == 0 {
                0.0
            } else {
                c.idle_ticks.load(Ordering::Relaxed) as f64 / total as f64
            },
        }
    }
}

impl Drop for MachineWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Counts {
    /// Counts the second between two readings of `/proc/stat` (idle, total ticks).
    fn count(&self, (idle0, total0): (u64, u64), (idle1, total1): (u64, u64)) {
        let (idle, total) = (idle1.saturating_sub(idle0), total1.saturating_sub(total0));
        if total == 0 {
            return;
        }
        self.seconds.fetch_add(1, Ordering::Relaxed);
        if (idle as f64) < STARVED_IDLE * total as f64 {
            self.starved.fetch_add(1, Ordering::Relaxed);
        }
        self.idle_ticks.fetch_add(idle, Ordering::Relaxed);
        self.total_ticks.fetch_add(total, Ordering::Relaxed);
    }
}

/// The machine's (idle, total) ticks since boot.
fn cpu_times() -> io::Result<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    stat.lines()
        .next()
        .and_then(parse_cpu_line)
        .ok_or_else(|| io::Error::other("/proc/stat has no `cpu` line"))
}

/// (idle, total) ticks of `/proc/stat`'s first line: `cpu user nice system idle iowait irq
/// softirq steal ...`; idle counts iowait too (a core waiting on a disk could run a process).
/// Guest times are inside user and nice already, so the sum stops at steal.
fn parse_cpu_line(line: &str) -> Option<(u64, u64)> {
    let mut f = line.split_whitespace();
    if f.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = f.take(8).map(|x| x.parse().ok()).collect::<Option<_>>()?;
    if v.len() < 5 {
        return None;
    }
    Some((v[3] + v[4], v.iter().sum()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_line_gives_idle_with_iowait_and_the_total_up_to_steal() {
        let line = "cpu  100 5 50 800 20 0 25 0 7 0";
        assert_eq!(parse_cpu_line(line), Some((820, 1000)));
        assert_eq!(parse_cpu_line("cpu0 1 2 3 4 5"), None);
        assert_eq!(parse_cpu_line("cpu 1 2 x 4 5"), None);
        assert_eq!(parse_cpu_line("cpu 1 2 3"), None);
    }

    #[test]
    fn a_second_is_starved_below_the_idle_share() {
        let c = Counts::default();
        c.count((0, 0), (4, 100)); // 4% idle: starved
        c.count((4, 100), (10, 200)); // 6%: not
        c.count((10, 200), (10, 200)); // no tick: not a second
        assert_eq!(c.seconds.load(Ordering::Relaxed), 2);
        assert_eq!(c.starved.load(Ordering::Relaxed), 1);
        assert_eq!(c.idle_ticks.load(Ordering::Relaxed), 10);
    }

    #[test]
    fn the_watch_reads_this_machine() {
        let w = MachineWatch::start().expect("/proc/stat");
        let mut r = w.report();
        for _ in 0..100 {
            if r.seconds > 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
            r = w.report();
        }
        assert!(r.seconds >= 1, "{r:?}");
        assert!((0.0..=1.0).contains(&r.idle), "{r:?}");
    }
}
