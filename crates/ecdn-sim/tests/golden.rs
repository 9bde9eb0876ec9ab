//! Exactness against libCacheSim: miss ratios on the CloudPhysics block trace
//! (`tests/data/cloudPhysicsIO.oracleGeneral.bin`, shipped with libCacheSim's data folder),
//! no warm-up, must equal libCacheSim's to 4 decimals; for the randomised policies (Hyperbolic,
//! LeCaR), be within the measured spread of the random draws.
//!
//! LRU and FIFO were checked against libCacheSim's `cachesim` binary (issue 2); CLOCK, SIEVE,
//! S3-FIFO, 2Q, ARC, LIRS, W-TinyLFU, Belady and LHD (issue 19) against libCacheSim 0.3.5 from PyPI (`pip install libcachesim==0.3.5`), whose
//! `LRU` and `FIFO` give the same values as the binary did:
//!
//! ```python
//! import libcachesim as lcs
//! r = lcs.TraceReader("tests/data/cloudPhysicsIO.oracleGeneral.bin",
//!                     lcs.TraceType.ORACLE_GENERAL_TRACE)
//! print(lcs.Sieve(16 << 20).process_trace(r))   # (miss ratio, byte miss ratio)
//! ```

use std::path::PathBuf;

use ecdn_policy::PolicySpec;
use ecdn_sim::{simulate, SimConfig};
use ecdn_trace::{open, OpenOptions};

fn trace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/cloudPhysicsIO.oracleGeneral.bin")
}

fn run_seeded(policy: &str, seed: u64, size: u64) -> (u64, f64, f64) {
    let mut r = open(&trace(), &OpenOptions::default()).expect("open trace");
    let spec = PolicySpec::parse(policy).unwrap();
    let cfg = SimConfig {
        seed,
        ..SimConfig::default()
    };
    let res = simulate(&mut *r, &spec, size, &cfg, &|_| {}).unwrap();
    (res.requests, res.miss_ratio, res.byte_miss_ratio)
}

fn run(policy: &str, size: u64) -> (u64, f64, f64) {
    run_seeded(policy, SimConfig::default().seed, size)
}

fn check(policy: &str, size_mib: u64, miss: f64, byte_miss: f64) {
    check_seeded(policy, SimConfig::default().seed, size_mib, miss, byte_miss);
}

/// [`check`] with the seed of a randomised policy.
fn check_seeded(policy: &str, seed: u64, size_mib: u64, miss: f64, byte_miss: f64) {
    let (n, mr, bmr) = run_seeded(policy, seed, size_mib << 20);
    assert_eq!(n, 113_872);
    assert_eq!(
        (format!("{mr:.4}"), format!("{bmr:.4}")),
        (format!("{miss:.4}"), format!("{byte_miss:.4}")),
        "{policy} {size_mib} MiB: miss {mr} byte miss {bmr}"
    );
}

#[test]
fn lru_matches_libcachesim() {
    check("lru", 1, 0.8699, 0.9869);
    check("lru", 16, 0.8351, 0.9803);
    check("lru", 256, 0.7885, 0.9298);
}

#[test]
fn fifo_matches_libcachesim() {
    check("fifo", 1, 0.8821, 0.9882);
    check("fifo", 16, 0.8384, 0.9807);
    check("fifo", 256, 0.7850, 0.9278);
}

#[test]
fn clock_matches_libcachesim() {
    check("clock", 1, 0.8683, 0.9868);
    check("clock", 16, 0.8340, 0.9802);
    check("clock", 256, 0.7884, 0.9305);
}

#[test]
fn sieve_matches_libcachesim() {
    check("sieve", 1, 0.8566, 0.9854);
    check("sieve", 16, 0.8236, 0.9778);
    check("sieve", 256, 0.7616, 0.8968);
}

#[test]
fn s3fifo_matches_libcachesim() {
    check("s3fifo", 1, 0.8421, 0.9838);
    check("s3fifo", 16, 0.8240, 0.9768);
    check("s3fifo", 256, 0.7106, 0.8182);
}

#[test]
fn twoq_matches_libcachesim() {
    check("2q", 1, 0.8425, 0.9838);
    check("2q", 16, 0.8286, 0.9793);
    check("2q", 256, 0.7339, 0.8602);
}

#[test]
fn arc_matches_libcachesim() {
    check("arc", 1, 0.8448, 0.9842);
    check("arc", 16, 0.8233, 0.9773);
    check("arc", 256, 0.7540, 0.8748);
}

#[test]
fn belady_matches_libcachesim() {
    check("belady", 1, 0.8304, 0.9790);
    check("belady", 16, 0.8044, 0.9457);
    check("belady", 256, 0.6211, 0.6857);
}

/// For the randomised policies: our miss ratio and byte miss ratio with the simulator's default
/// seed (1) must be within `tolerance` of libCacheSim's (miss, byte miss).
fn check_near(policy: &str, size_mib: u64, want: (f64, f64), tolerance: (f64, f64)) {
    let (n, mr, bmr) = run(policy, size_mib << 20);
    assert_eq!(n, 113_872);
    assert!(
        (mr - want.0).abs() <= tolerance.0 && (bmr - want.1).abs() <= tolerance.1,
        "{policy} {size_mib} MiB: miss {mr} byte miss {bmr}, libCacheSim {want:?} ± {tolerance:?}"
    );
}

/// Hyperbolic and LeCaR draw random numbers, so equality to 4 decimals is out of reach:
/// libCacheSim draws from one process-wide generator whose state carries over from cache to
/// cache, so even its own figures depend on what ran before in the process (the values here are
/// from `benches/libcachesim-golden.py` run after other policies, as BENCHMARKS.md lists them;
/// the script run with just `Hyperbolic,LeCaR` in a fresh process gives 0.8675 / 0.9866,
/// 0.8318 / 0.9799, 0.7859 / 0.9309 and 0.8595 / 0.9853, 0.8288 / 0.9793, 0.7819 / 0.9201), and
/// Hyperbolic samples through its hash table (a random bucket, then an object in it), which no
/// other implementation reproduces. We draw from our own generator, seeded by the simulation's
/// seed (here the default, 1).
///
/// Measured (miss ratio range, byte miss ratio range), ours over seeds 0..99 and libCacheSim
/// over 100 runs in one process (each starts where the last left the generator):
///
/// | policy     | MiB | ours miss       | libCacheSim miss | ours byte miss  | libCacheSim byte |
/// |------------|-----|-----------------|------------------|-----------------|------------------|
/// | Hyperbolic |   1 | 0.86751–0.86778 | 0.86749–0.86777  | 0.98660–0.98667 | 0.98660–0.98667  |
/// | Hyperbolic |  16 | 0.83169–0.83182 | 0.83170–0.83184  | 0.97985–0.97993 | 0.97983–0.97995  |
/// | Hyperbolic | 256 | 0.78548–0.78603 | 0.78532–0.78598  | 0.93041–0.93123 | 0.93018–0.93105  |
/// | LeCaR      |   1 | 0.85751–0.86073 | 0.85769–0.86095  | 0.98504–0.98541 | 0.98502–0.98540  |
/// | LeCaR      |  16 | 0.82868–0.82897 | 0.82857–0.82901  | 0.97926–0.97935 | 0.97926–0.97936  |
/// | LeCaR      | 256 | 0.78162–0.78224 | 0.78162–0.78224  | 0.91960–0.92068 | 0.91960–0.92063  |
///
/// The two sets of runs overlap almost exactly: their means differ by at most 0.00016
/// (Hyperbolic's byte miss ratio at 256 MiB, about one standard deviation; perhaps the slight
/// bias of libCacheSim's bucket-then-object sampling, ours being uniform). Each tolerance is
/// the width of the union of the two ranges plus 0.00005 for the 4-decimal rounding of
/// libCacheSim's value, rounded up to 0.0001, so any of those seeds of ours would pass against
/// any of those runs of libCacheSim's. LeCaR at 1 MiB varies most: its weights, and so all its
/// later choices, follow its draws.
#[test]
fn hyperbolic_is_within_its_seed_spread_of_libcachesim() {
    check_near("hyperbolic", 1, (0.8677, 0.9866), (0.0004, 0.0002));
    check_near("hyperbolic", 16, (0.8318, 0.9799), (0.0002, 0.0002));
    check_near("hyperbolic", 256, (0.7859, 0.9310), (0.0008, 0.0011));
}

/// See [`hyperbolic_is_within_its_seed_spread_of_libcachesim`] for why and how much.
#[test]
fn lecar_is_within_its_seed_spread_of_libcachesim() {
    check_near("lecar", 1, (0.8590, 0.9852), (0.0035, 0.0005));
    check_near("lecar", 16, (0.8287, 0.9793), (0.0005, 0.0002));
    check_near("lecar", 256, (0.7819, 0.9202), (0.0007, 0.0012));
}

/// LHD samples its eviction candidates (and picks its explorers) at random, from libCacheSim's
/// own generator, which starts at the same state in every new process and carries on from one
/// run to the next within a process. Ours draws the same numbers (seed 0: a fresh process) and
/// so evicts the same objects: the hit counts are equal, so the ratios agree in every digit
/// libCacheSim prints, not just to 4 decimals. Without the same draws they could not: over
/// seeds 0..9, our miss ratio spreads over 0.0010, 0.0005 and 0.0014 (max − min; standard
/// deviation 0.0004, 0.0002, 0.0004) at 1, 16 and 256 MiB, and the byte miss ratio over
/// 0.0002, 0.0005 and 0.0017; seeds 1..9 get at most 2 of the 6 values right to 4 decimals.
///
/// libCacheSim's values in BENCHMARKS.md (0.8438 / 0.9864, 0.8195 / 0.9806, 0.7628 / 0.9287)
/// come from `benches/libcachesim-golden.py`, which runs the three sizes one after the other in
/// one process: the 16 MiB run continues the generator where the 1 MiB run left it, and so on.
/// This does the same, handing each run's generator state to the next; the full values are
/// libCacheSim's as printed.
#[test]
fn lhd_matches_libcachesim_run_after_run() {
    let mut state = ecdn_policy::eviction::lhd::seed_state(0);
    for (size_mib, miss, byte_miss, full) in [
        (1, 0.8438, 0.9864, (0.8437719544752003, 0.9863572252341927)),
        (16, 0.8195, 0.9806, (0.8195166502739919, 0.9805748905006477)),
        (
            256,
            0.7628,
            0.9287,
            (0.7627599409863707, 0.9287170849934401),
        ),
    ] {
        let (n, mr, bmr, next) = run_lhd(size_mib << 20, state);
        assert_eq!(n, 113_872);
        assert_eq!(
            (format!("{mr:.4}"), format!("{bmr:.4}")),
            (format!("{miss:.4}"), format!("{byte_miss:.4}")),
            "lhd {size_mib} MiB after the smaller sizes: miss {mr} byte miss {bmr}"
        );
        // One request more or less is 1/113,872 ≈ 9e-6 of the miss ratio.
        assert!(
            (mr - full.0).abs() < 1e-9 && (bmr - full.1).abs() < 1e-9,
            "lhd {size_mib} MiB: miss {mr} byte miss {bmr}, libCacheSim {full:?}"
        );
        state = next;
    }
}

/// The simulator with seed 0 against libCacheSim with each size in a fresh process
/// (`python -c '...; print(lcs.LHD(16 << 20).process_trace(r))'` once per size): the 1 MiB
/// value is the one above, the others differ from it in the 4th decimal as the draws differ.
#[test]
fn lhd_matches_libcachesim_in_a_fresh_process() {
    check_seeded("lhd", 0, 1, 0.8438, 0.9864);
    check_seeded("lhd", 0, 16, 0.8193, 0.9806);
    check_seeded("lhd", 0, 256, 0.7627, 0.9289);
    for (size_mib, full) in [
        (1, (0.8437719544752003, 0.9863572252341927)),
        (16, (0.8193234508922299, 0.9805519163544156)),
        (256, (0.7627335956161304, 0.9289455370904112)),
    ] {
        let (_, mr, bmr) = run_seeded("lhd", 0, size_mib << 20);
        assert!(
            (mr - full.0).abs() < 1e-9 && (bmr - full.1).abs() < 1e-9,
            "lhd {size_mib} MiB: miss {mr} byte miss {bmr}, libCacheSim {full:?}"
        );
    }
}

/// Runs the trace through LHD whose generator starts at `state`, as [`ecdn_policy::Cache`]
/// would (a hit needs the same size; a miss that fits is inserted); returns the requests, the
/// miss and byte miss ratios and the generator's final state.
fn run_lhd(size: u64, state: u128) -> (u64, f64, f64, u128) {
    use ecdn_policy::eviction::{Lhd, LhdParams};
    use ecdn_policy::Eviction;
    let mut lhd = Lhd::with_rng_state(size, LhdParams::default(), state);
    let (mut now, mut evicted) = (0, Vec::new());
    let (n, miss, byte_miss) = replay(|req| {
        now += 1;
        evicted.clear();
        match lhd.touch(req.id, now, &mut evicted) {
            Some(s) if s == req.size => return true,
            Some(_) => {
                lhd.remove(req.id);
            }
            None => {}
        }
        if lhd.can_insert(req.id, req.size) {
            lhd.insert(req.id, req.size, now, &mut evicted);
        }
        false
    });
    (n, miss, byte_miss, lhd.rng_state())
}

/// Belady needs the next access of each request: a trace that repeats an id without it is
/// refused, not simulated as if nothing came back.
#[test]
fn belady_refuses_a_trace_without_next_access() {
    let reqs: Vec<ecdn_trace::Request> = [1u64, 2, 1, 3, 2]
        .iter()
        .enumerate()
        .map(|(i, &id)| ecdn_trace::Request {
            time: i as u64,
            id,
            size: 10,
            next_access: -1,
        })
        .collect();
    let spec = PolicySpec::parse("belady").unwrap();
    let mut r = ecdn_trace::SliceReader::new(&reqs);
    let e = simulate(&mut r, &spec, 25, &SimConfig::default(), &|_| {}).unwrap_err();
    assert!(e.to_string().contains("next access"), "{e}");
    // With it, the same requests run.
    let mut with = reqs.clone();
    ecdn_trace::compute_next_access(&mut with);
    let mut r = ecdn_trace::SliceReader::new(&with);
    let res = simulate(&mut r, &spec, 25, &SimConfig::default(), &|_| {}).unwrap();
    assert_eq!(res.requests, 5);
}

#[test]
fn lirs_matches_libcachesim() {
    check("lirs", 1, 0.8399, 0.9863);
    check("lirs", 16, 0.8246, 0.9786);
    check("lirs", 256, 0.6958, 0.8072);
}

/// The trace, request by request, through `access` (whether the request hit): the requests,
/// the miss ratio and the byte miss ratio.
fn replay(mut access: impl FnMut(&ecdn_trace::Request) -> bool) -> (u64, f64, f64) {
    let mut r = open(&trace(), &OpenOptions::default()).expect("open trace");
    let (mut n, mut misses, mut bytes, mut missed_bytes) = (0u64, 0u64, 0u64, 0u64);
    let mut batch = Vec::new();
    while r.read_batch(&mut batch, 4096).expect("read trace") > 0 {
        for req in &batch {
            n += 1;
            bytes += req.size;
            if !access(req) {
                misses += 1;
                missed_bytes += req.size;
            }
        }
    }
    (
        n,
        misses as f64 / n as f64,
        missed_bytes as f64 / bytes as f64,
    )
}

/// Miss and byte miss ratio of `cache` over the trace.
fn run_cache(mut cache: ecdn_policy::Cache) -> (f64, f64) {
    let (_, miss, byte_miss) = replay(|req| {
        let hit = cache.access(req).is_hit();
        cache.clear_evicted();
        hit
    });
    (miss, byte_miss)
}

/// W-TinyLFU with a frequency sketch like libCacheSim's filter on this trace (wide enough to
/// count almost exactly, never halved) gives libCacheSim's `WTinyLFU` exactly. The default
/// sketch (as wide as the cached objects, halved every 10 × width counts) forgets and
/// collides, so the policy differs; its values here are ours (libCacheSim's, for comparison:
/// 0.8472/0.9869, 0.8285/0.9771, 0.7393/0.8524).
#[test]
fn wtinylfu_matches_libcachesim_with_its_counting() {
    use ecdn_policy::eviction::WTinyLfu;
    for (mib, miss, byte_miss) in [
        (1, 0.8472, 0.9869),
        (16, 0.8285, 0.9771),
        (256, 0.7393, 0.8524),
    ] {
        let policy = WTinyLfu::with_sketch(mib << 20, Some(1 << 22));
        let (mr, bmr) = run_cache(ecdn_policy::Cache::new(Box::new(policy), None));
        assert_eq!(
            (format!("{mr:.4}"), format!("{bmr:.4}")),
            (format!("{miss:.4}"), format!("{byte_miss:.4}")),
            "{mib} MiB"
        );
    }
    check("wtinylfu", 1, 0.8441, 0.9868);
    check("wtinylfu", 16, 0.8243, 0.9778);
    check("wtinylfu", 256, 0.7410, 0.8612);
}
