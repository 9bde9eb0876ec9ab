//! Tests of the generator: determinism, popularity, sizes, scenarios; and its throughput
//! benchmark (ignored by default).

use super::*;

fn generate(cfg: GenConfig) -> Vec<Request> {
    Generator::new(cfg).unwrap().collect()
}

fn cfg(requests: u64, objects: u64) -> GenConfig {
    GenConfig {
        requests,
        objects,
        ..GenConfig::default()
    }
}

#[test]
fn rng_is_deterministic_and_below_is_in_range() {
    let a: Vec<u64> = (0..5)
        .scan(Rng::new(7), |r, _| Some(r.next_u64()))
        .collect();
    let b: Vec<u64> = (0..5)
        .scan(Rng::new(7), |r, _| Some(r.next_u64()))
        .collect();
    let c: Vec<u64> = (0..5)
        .scan(Rng::new(8), |r, _| Some(r.next_u64()))
        .collect();
    assert_eq!(a, b);
    assert_ne!(a, c);
    let mut r = Rng::new(1);
    let mut hist = [0u32; 3];
    for _ in 0..30_000 {
        hist[r.below(3) as usize] += 1;
    }
    assert!(
        hist.iter().all(|&h| (9_000..11_000).contains(&h)),
        "{hist:?}"
    );
    for _ in 0..1000 {
        let x = r.f64();
        assert!((0.0..1.0).contains(&x));
        assert!(r.f64_open0() > 0.0);
    }
    let mean: f64 = (0..100_000).map(|_| r.exp()).sum::<f64>() / 100_000.0;
    assert!((mean - 1.0).abs() < 0.02, "{mean}");
    let xs: Vec<f64> = (0..100_000).map(|_| r.normal()).collect();
    let m = xs.iter().sum::<f64>() / xs.len() as f64;
    let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / xs.len() as f64;
    assert!(m.abs() < 0.02 && (v - 1.0).abs() < 0.03, "{m} {v}");
}

/// Checks empirical Zipf frequencies against the exact probabilities.
fn check_zipf(n: u64, alpha: f64) {
    let z = Zipf::new(n, alpha).unwrap();
    assert_eq!(z.len(), n);
    let mut rng = Rng::new(42);
    let draws = 1_000_000u64;
    let mut hist = vec![0u64; n as usize];
    for _ in 0..draws {
        hist[z.sample(&mut rng) as usize] += 1;
    }
    let h: f64 = (1..=n).map(|k| (k as f64).powf(-alpha)).sum();
    for k in [0usize, 1, 2, 9, (n - 1) as usize] {
        if k >= n as usize {
            continue;
        }
        let p = ((k + 1) as f64).powf(-alpha) / h;
        let expect = p * draws as f64;
        let sd = (expect * (1.0 - p)).sqrt();
        assert!(
            (hist[k] as f64 - expect).abs() < 5.0 * sd + 1.0,
            "n={n} alpha={alpha} rank {k}: {} vs {expect:.0}",
            hist[k]
        );
    }
}

#[test]
fn zipf_matches_its_distribution() {
    check_zipf(100, 1.0);
    check_zipf(1000, 0.8);
    check_zipf(50, 0.0);
    check_zipf(10_000, 1.2);
    check_zipf(1, 1.0);
}

#[test]
fn zipf_rejects_bad_parameters() {
    assert!(Zipf::new(0, 1.0).is_err());
    assert!(Zipf::new(10, -0.1).is_err());
    assert!(Zipf::new(10, f64::NAN).is_err());
    assert!(Zipf::new(u32::MAX as u64 + 1, 1.0).is_err());
}

#[test]
fn size_distributions() {
    let mut rng = Rng::new(3);
    let draw = |d: SizeDist, rng: &mut Rng| -> Vec<u64> {
        let mut v: Vec<u64> = (0..100_000).map(|_| d.sample(rng)).collect();
        v.sort_unstable();
        v
    };
    assert!(draw(SizeDist::Fixed(4096), &mut rng)
        .iter()
        .all(|&s| s == 4096));
    let ln = draw(
        SizeDist::LogNormal {
            median: 16384.0,
            sigma: 1.0,
        },
        &mut rng,
    );
    let med = ln[ln.len() / 2] as f64;
    assert!((med / 16384.0 - 1.0).abs() < 0.03, "{med}");
    let pa = draw(
        SizeDist::Pareto {
            alpha: 3.0,
            min: 1000.0,
        },
        &mut rng,
    );
    assert!(pa[0] >= 1000);
    let mean = pa.iter().sum::<u64>() as f64 / pa.len() as f64;
    assert!((mean / 1500.0 - 1.0).abs() < 0.03, "{mean}");
    let lu = draw(
        SizeDist::LogUniform {
            min: 1024,
            max: 65536,
        },
        &mut rng,
    );
    assert!(lu[0] >= 1024 && *lu.last().unwrap() <= 65536);
    let med = lu[lu.len() / 2] as f64;
    assert!((med / 8192.0 - 1.0).abs() < 0.03, "{med}");
    // Extreme parameters are clamped to [1, u32::MAX].
    let wide = draw(
        SizeDist::LogNormal {
            median: 1e9,
            sigma: 8.0,
        },
        &mut rng,
    );
    assert_eq!(wide[0], 1);
    assert_eq!(*wide.last().unwrap(), u32::MAX as u64);
    // Web + video: ~10% of objects are ≥ 512 KiB, the median is near the web median.
    let wv = draw(SizeDist::WebVideo, &mut rng);
    let big = wv.iter().filter(|&&s| s >= 512 << 10).count() as f64 / wv.len() as f64;
    assert!((0.09..0.13).contains(&big), "{big}");
    let med = wv[wv.len() / 2] as f64;
    assert!((12_000.0..26_000.0).contains(&med), "{med}");
    assert!(wv[0] < 1024 && *wv.last().unwrap() > 16 << 20);
}

#[test]
fn size_dist_parsing() {
    assert_eq!(SizeDist::parse("fixed:4KiB"), Ok(SizeDist::Fixed(4096)));
    assert_eq!(
        SizeDist::parse("lognormal:16KiB:1.5"),
        Ok(SizeDist::LogNormal {
            median: 16384.0,
            sigma: 1.5
        })
    );
    assert_eq!(
        SizeDist::parse("Pareto:1.2:1KiB"),
        Ok(SizeDist::Pareto {
            alpha: 1.2,
            min: 1024.0
        })
    );
    assert_eq!(
        SizeDist::parse("loguniform:1KiB:64KiB"),
        Ok(SizeDist::LogUniform {
            min: 1024,
            max: 65536
        })
    );
    assert_eq!(SizeDist::parse("web-video"), Ok(SizeDist::WebVideo));
    for d in [
        "fixed:4KiB",
        "lognormal:16KiB:1.5",
        "pareto:1.2:1KiB",
        "loguniform:1KiB:64KiB",
        "web-video",
    ] {
        let parsed = SizeDist::parse(d).unwrap();
        assert_eq!(parsed.to_string(), d);
        assert_eq!(parsed.to_string().parse::<SizeDist>(), Ok(parsed));
    }
    for bad in [
        "",
        "fixed",
        "fixed:0",
        "fixed:8GiB",
        "lognormal:16KiB",
        "lognormal:16KiB:-1",
        "lognormal:16KiB:x",
        "pareto:0:1KiB",
        "pareto:1:0",
        "loguniform:64KiB:1KiB",
        "gamma:1:2",
        "fixed:4QB",
    ] {
        assert!(SizeDist::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn same_seed_same_trace_different_seed_different_trace() {
    for scenario in [
        Scenario::Stationary,
        Scenario::randomized(2_000),
        Scenario::Adversarial { phase_len: 1_000 },
    ] {
        let c = GenConfig {
            scenario,
            ..cfg(6_000, 1_000)
        };
        let a = generate(c);
        assert_eq!(a.len(), 6_000);
        assert_eq!(a, generate(c));
        let other = generate(GenConfig { seed: 2, ..c });
        assert_ne!(a, other);
        let same_ids = a.iter().zip(&other).filter(|(x, y)| x.id == y.id).count();
        assert!(same_ids < 600, "{scenario:?}: {same_ids}");
    }
}

#[test]
fn batches_equal_the_iterator() {
    let c = cfg(10_000, 500);
    let all = generate(c);
    let mut g = Generator::new(c).unwrap();
    let batched = crate::read_all(&mut g).unwrap();
    assert_eq!(batched, all);
    let mut buf = Vec::new();
    assert_eq!(g.read_batch(&mut buf, 10).unwrap(), 0);
}

#[test]
fn stationary_properties() {
    let c = GenConfig {
        alpha: 1.0,
        rate: 500.0,
        ..cfg(200_000, 1_000)
    };
    let reqs = generate(c);
    // Sizes are fixed per object; ids are scrambled, not ranks.
    let mut size_of = std::collections::HashMap::new();
    for r in &reqs {
        assert_eq!(*size_of.entry(r.id).or_insert(r.size), r.size);
        assert!((1..=u32::MAX as u64).contains(&r.size));
        assert_eq!(r.next_access, -1);
    }
    assert!(size_of.len() > 900 && size_of.len() <= 1000);
    assert!(size_of.keys().filter(|&&id| id < 1000).count() < 5);
    // Zipf(1) over 1000 objects: the top object gets 1/H_1000 ≈ 13.4% of requests.
    let mut counts = std::collections::HashMap::new();
    for r in &reqs {
        *counts.entry(r.id).or_insert(0u64) += 1;
    }
    let top = *counts.values().max().unwrap() as f64 / reqs.len() as f64;
    assert!((top - 0.1336).abs() < 0.005, "{top}");
    // Poisson arrivals at 500/s: 200k requests span ~400 s, times never go backwards.
    assert!(reqs.windows(2).all(|w| w[0].time <= w[1].time));
    let span = reqs.last().unwrap().time as f64;
    assert!((span - 400.0).abs() < 8.0, "{span}");
    assert_eq!(reqs[0].time, 0);
}

#[test]
fn randomized_change_sends_half_the_traffic_to_a_hot_set() {
    let c = GenConfig {
        scenario: Scenario::randomized(50_000),
        ..cfg(150_000, 100_000)
    };
    let g = Generator::new(c).unwrap();
    let hot: std::collections::HashSet<u64> = g.hot_objects().into_iter().collect();
    assert!((200..=1000).contains(&hot.len()), "{}", hot.len());
    let reqs: Vec<Request> = g.collect();
    let before = reqs[..50_000]
        .iter()
        .filter(|r| hot.contains(&r.id))
        .count() as f64
        / 50_000.0;
    let after = reqs[50_000..]
        .iter()
        .filter(|r| hot.contains(&r.id))
        .count() as f64
        / 100_000.0;
    assert!(before < 0.05, "{before}");
    assert!((0.49..0.56).contains(&after), "{after}");
    // Hot objects keep their base sizes.
    let mut size_of = std::collections::HashMap::new();
    for r in &reqs {
        assert_eq!(*size_of.entry(r.id).or_insert(r.size), r.size);
    }
    // Different seeds pick different hot sets of different sizes (almost surely).
    let g2 = Generator::new(GenConfig { seed: 9, ..c }).unwrap();
    assert_ne!(g2.hot_objects().len(), hot.len());
}

#[test]
fn adversarial_phases_cycle_through_disjoint_classes() {
    let phase = 20_000u64;
    let c = GenConfig {
        scenario: Scenario::Adversarial { phase_len: phase },
        ..cfg(phase * 5, 10_000)
    };
    let reqs = generate(c);
    let classes: Vec<Class> = (0..5).map(Class::sequence).collect();
    assert_eq!(
        classes,
        [
            Class::Small,
            Class::Medium,
            Class::Large,
            Class::Medium,
            Class::Small
        ]
    );
    let mut ids: Vec<std::collections::HashSet<u64>> = Vec::new();
    for (p, class) in classes.iter().enumerate() {
        let slice = &reqs[p * phase as usize..(p + 1) * phase as usize];
        let sizes = class.sizes();
        let (lo, hi) = match sizes {
            SizeDist::LogUniform { min, max } => (min, max),
            _ => unreachable!(),
        };
        let in_class =
            slice.iter().filter(|r| (lo..=hi).contains(&r.size)).count() as f64 / phase as f64;
        let want = 1.0 - class.noise().map_or(0.0, |(s, _)| s);
        assert!(
            (in_class - want).abs() < 0.02,
            "phase {p}: {in_class} vs {want}"
        );
        // Popular class objects repeat; the set of frequently requested ids is the class's.
        let mut counts = std::collections::HashMap::new();
        for r in slice {
            *counts.entry(r.id).or_insert(0u32) += 1;
        }
        ids.push(
            counts
                .into_iter()
                .filter(|&(_, n)| n > 1)
                .map(|(id, _)| id)
                .collect(),
        );
    }
    assert!(ids[0].is_disjoint(&ids[1]));
    assert!(ids[1].is_disjoint(&ids[2]));
    assert!(ids[0].is_disjoint(&ids[2]));
    // Classes come back with the same objects.
    assert!(ids[0].intersection(&ids[4]).count() > ids[0].len() / 2);
    assert!(ids[1].intersection(&ids[3]).count() > ids[1].len() / 2);
}

#[test]
fn rejects_bad_configs() {
    let bad = [
        GenConfig {
            rate: 0.0,
            ..GenConfig::default()
        },
        GenConfig {
            rate: f64::INFINITY,
            ..GenConfig::default()
        },
        GenConfig {
            objects: 0,
            ..GenConfig::default()
        },
        GenConfig {
            alpha: -1.0,
            ..GenConfig::default()
        },
        GenConfig {
            sizes: SizeDist::Fixed(0),
            ..GenConfig::default()
        },
        GenConfig {
            scenario: Scenario::Adversarial { phase_len: 0 },
            ..GenConfig::default()
        },
        GenConfig {
            scenario: Scenario::Randomized {
                change_at: 0,
                hot_fraction: 1.5,
                hot_min: 1,
                hot_max: 2,
            },
            ..GenConfig::default()
        },
        GenConfig {
            scenario: Scenario::Randomized {
                change_at: 0,
                hot_fraction: 0.5,
                hot_min: 5,
                hot_max: 2,
            },
            ..GenConfig::default()
        },
    ];
    for c in bad {
        assert!(Generator::new(c).is_err(), "{c:?}");
    }
    // A hot set larger than the population is capped at the population.
    let c = GenConfig {
        scenario: Scenario::randomized(0),
        ..cfg(100, 50)
    };
    assert_eq!(Generator::new(c).unwrap().hot_objects().len(), 50);
}

#[test]
fn distinct_sampling() {
    let mut rng = Rng::new(5);
    for (n, k) in [(10, 10), (1000, 200), (5, 0), (1 << 40, 1000)] {
        let v = sample_distinct(n, k, &mut rng);
        assert_eq!(v.len() as u64, k);
        let set: std::collections::HashSet<_> = v.iter().collect();
        assert_eq!(set.len() as u64, k);
        assert!(v.iter().all(|&x| x < n));
    }
}

mod throughput {
    use super::*;

    /// Generator speed; run with
    /// `cargo test --release -p ecdn-trace gen_throughput -- --ignored --nocapture`.
    #[test]
    #[ignore = "benchmark"]
    fn gen_throughput() {
        for (objects, sizes) in [
            (
                1_000_000,
                SizeDist::LogNormal {
                    median: 16384.0,
                    sigma: 1.5,
                },
            ),
            (10_000_000, SizeDist::WebVideo),
            (1_000, SizeDist::WebVideo),
        ] {
            let cfg = GenConfig {
                requests: 20_000_000,
                objects,
                alpha: 0.9,
                sizes,
                ..GenConfig::default()
            };
            let t0 = std::time::Instant::now();
            let mut g = Generator::new(cfg).unwrap();
            let setup = t0.elapsed().as_secs_f64();
            let t1 = std::time::Instant::now();
            let mut buf = Vec::new();
            let mut sum = 0u64;
            while g.read_batch(&mut buf, crate::BATCH).unwrap() > 0 {
                sum = sum.wrapping_add(buf.iter().map(|r| r.id ^ r.size).sum::<u64>());
            }
            let secs = t1.elapsed().as_secs_f64();
            println!(
                "{objects} objects, {sizes}: setup {setup:.2}s, {:.1}M requests/s (checksum {sum:x})",
                20.0 / secs
            );
        }
    }
}
