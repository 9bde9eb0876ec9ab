//! A trace generated from a footprint descriptor (`ecdn_trace::gen::footprint`) has the LRU
//! hit-ratio curve the descriptor predicts: checked at the bin edges of a small made-up
//! descriptor in JEDI's format (tests/data/footprint-mini, sizes in bytes, first requests as
//! rows), with the trace's curve measured from its stack distances.

use std::path::Path;

use ecdn_sim::stack_distance::lru_curve;
use ecdn_trace::gen::footprint::{
    Footprint, FootprintConfig, FootprintGenerator, SizeUnit, WithinBin,
};

fn mini() -> Footprint {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/footprint-mini");
    Footprint::load(&dir, SizeUnit::Auto).unwrap()
}

#[test]
fn descriptor_units_are_read_from_the_data() {
    let fp = mini();
    // Mean object 95 kB: bytes; stack distances up to 16 MB against 95 MB unique: not ×1000.
    assert_eq!((fp.unit, fp.sd_scale), (1, 1));
    assert_eq!(
        fp.bins,
        [0, 1_000_000, 2_000_000, 4_000_000, 8_000_000, 16_000_000]
    );
    assert_eq!(fp.max_stack_distance(), 16_000_000);
    assert!(
        (fp.first_mass - 1000.0 / 30_500.0).abs() < 1e-6,
        "{}",
        fp.first_mass
    );
    // As KiB, sizes and stack distances scale by 1024.
    let kib = Footprint::load(&fp.dir, SizeUnit::KiB).unwrap();
    assert_eq!(kib.max_stack_distance(), 16_000_000 * 1024);
}

#[test]
fn generated_trace_follows_the_descriptor() {
    let fp = mini();
    let cfg = FootprintConfig {
        requests: 400_000,
        warmup: 100_000,
        seed: 5,
        within_bin: WithinBin::Uniform,
        rate: None,
    };
    let reqs: Vec<_> = FootprintGenerator::new(&fp, cfg).unwrap().collect();
    assert_eq!(reqs.len(), 400_000);
    let sizes: Vec<u64> = fp.bins[1..].to_vec();
    let curve = lru_curve(&reqs, 50_000, &sizes);
    for (&c, &(ohr, bhr)) in sizes.iter().zip(&curve) {
        let (p_ohr, p_bhr) = fp.lru_hit_ratio(c, WithinBin::Uniform);
        eprintln!("{c:>9}: OHR {ohr:.4} vs {p_ohr:.4}, BHR {bhr:.4} vs {p_bhr:.4}");
        assert!((ohr - p_ohr).abs() < 0.03, "{c}: OHR {ohr} vs {p_ohr}");
        assert!((bhr - p_bhr).abs() < 0.03, "{c}: BHR {bhr} vs {p_bhr}");
    }
    // Same seed, same trace; another seed, another.
    let again: Vec<_> = FootprintGenerator::new(&fp, cfg)
        .unwrap()
        .take(1000)
        .collect();
    assert_eq!(again, reqs[..1000]);
    let other = FootprintConfig { seed: 6, ..cfg };
    let other: Vec<_> = FootprintGenerator::new(&fp, other)
        .unwrap()
        .take(1000)
        .collect();
    assert_ne!(other, reqs[..1000]);
}

#[test]
fn jedis_floor_placement_makes_the_first_bin_immediate_repeats() {
    let fp = mini();
    let cfg = FootprintConfig {
        requests: 100_000,
        warmup: 20_000,
        seed: 1,
        within_bin: WithinBin::Floor,
        rate: None,
    };
    let reqs: Vec<_> = FootprintGenerator::new(&fp, cfg).unwrap().collect();
    let repeats = reqs.windows(2).filter(|w| w[0].id == w[1].id).count() as f64;
    let uniform: Vec<_> = FootprintGenerator::new(
        &fp,
        FootprintConfig {
            within_bin: WithinBin::Uniform,
            ..cfg
        },
    )
    .unwrap()
    .collect();
    let uniform_repeats = uniform.windows(2).filter(|w| w[0].id == w[1].id).count() as f64;
    // The first bin holds about half the re-requests: JEDI repeats them at once.
    assert!(repeats / (reqs.len() as f64) > 0.3, "{repeats}");
    assert!(
        uniform_repeats / (reqs.len() as f64) < 0.1,
        "{uniform_repeats}"
    );
}
