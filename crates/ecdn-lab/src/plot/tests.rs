//! Tests of the figures: every figure in both formats, empty inputs, fonts, labels and axes.

use super::cluster::*;
use super::demo::*;
use super::style::*;
use super::*;
use ecdn_sim::cluster::ClusterWindow;
use ecdn_sim::WindowPoint;

fn result(policy: &str, size: u64, mr: f64, series: Vec<WindowPoint>) -> SimResult {
    SimResult {
        policy: policy.to_string(),
        cache_size: size,
        requests: 1_000_000,
        warmup: 100_000,
        hits: ((1.0 - mr) * 1e6) as u64,
        miss_ratio: mr,
        byte_miss_ratio: (mr * 1.3).min(1.0),
        object_hit_ratio: 1.0 - mr,
        byte_hit_ratio: 1.0 - (mr * 1.3).min(1.0),
        bytes: 1 << 40,
        hit_bytes: 1 << 39,
        cached_objects: 1000,
        policy_heap_bytes: 64_000,
        admission_tracked: 0,
        guard_overruled: None,
        admission_heap_bytes: 0,
        elapsed_s: 1.0,
        requests_per_s: 1e6,
        series,
        c_history: Vec::new(),
    }
}

fn sweep_results() -> Vec<SimResult> {
    let mut v = Vec::new();
    for (pi, policy) in ["lru", "adaptsize", "lru+threshold:64KiB"]
        .iter()
        .enumerate()
    {
        for k in 0..9 {
            let size = 1u64 << (20 + 2 * k);
            let mr = 0.9 - 0.08 * k as f64 - 0.05 * pi as f64;
            v.push(result(policy, size, mr, Vec::new()));
        }
    }
    v
}

fn windows(n: usize, every: u64, with_c: bool, phase: f64) -> Vec<WindowPoint> {
    (1..=n)
        .map(|i| {
            let t = i as f64 / n as f64;
            WindowPoint {
                end: i as u64 * every,
                requests: every,
                miss_ratio: 0.4 + 0.2 * (6.0 * t + phase).sin(),
                byte_miss_ratio: 0.5,
                c: with_c.then(|| 2f64.powf(14.0 + 6.0 * t + phase)),
                used_bytes: 1 << 30,
            }
        })
        .collect()
}

fn series_results(with_c: bool) -> Vec<SimResult> {
    vec![
        result("lru", 1 << 30, 0.5, windows(200, 10_000, false, 0.0)),
        result("adaptsize", 1 << 30, 0.4, windows(200, 10_000, with_c, 0.5)),
        result("adaptsize", 1 << 32, 0.3, windows(200, 10_000, with_c, 1.0)),
        // No series: not drawn.
        result("fifo", 1 << 30, 0.6, Vec::new()),
    ]
}

fn model_points() -> Vec<ModelPoint> {
    (10..=26)
        .map(|k| {
            let x = (k as f64 - 17.0) / 5.0;
            let p = 0.6 - 0.2 * x * x;
            ModelPoint {
                c: (1u64 << k) as f64,
                predicted_ohr: p.max(0.05),
                measured_ohr: (p - 0.02 + 0.01 * (k as f64).sin()).max(0.04),
            }
        })
        .collect()
}

/// Registers a font, which every test that draws needs: without one the test fails, saying
/// how to get it (./test.sh installs Debian's fonts-dejavu-core). It never passes without
/// drawing.
pub(super) fn require_font() {
    if let Err(e) = ensure_font() {
        panic!("this plot test needs a font (install fonts-dejavu-core): {e}");
    }
}

fn check_file(path: &Path) {
    let bytes = std::fs::read(path).unwrap();
    assert!(!bytes.is_empty(), "{} is empty", path.display());
    match output_format(path).unwrap() {
        OutputFormat::Png => assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n")),
        OutputFormat::Svg => {
            let s = String::from_utf8(bytes).unwrap();
            assert!(s.contains("<svg"), "not an SVG");
            assert!(s.contains("<text"), "SVG without text");
        }
    }
}

fn each_format(name: &str, draw: impl Fn(&Path) -> Result<()>) {
    require_font();
    let dir = tempfile::tempdir().unwrap();
    for ext in ["png", "svg"] {
        let path = dir.path().join(format!("{name}.{ext}"));
        draw(&path).unwrap();
        check_file(&path);
    }
}

#[test]
fn miss_ratio_plot() {
    let rs = sweep_results();
    each_format("mr", |p| miss_ratio_vs_size(p, &rs));
}

#[test]
fn miss_ratio_plot_single_size() {
    let rs = vec![
        result("lru", 100 << 20, 0.5, Vec::new()),
        result("adaptsize", 100 << 20, 0.4, Vec::new()),
    ];
    each_format("mr1", |p| miss_ratio_vs_size(p, &rs));
    let one = vec![result("lru", 3 << 30, 0.5, Vec::new())];
    each_format("mr2", |p| miss_ratio_vs_size(p, &one));
}

#[test]
fn model_plot() {
    let pts = model_points();
    each_format("model", |p| model_curve(p, &pts, 64 << 20));
    let one = vec![ModelPoint {
        c: 65536.0,
        predicted_ohr: 0.3,
        measured_ohr: 0.31,
    }];
    each_format("model1", |p| model_curve(p, &one, 64 << 20));
}

#[test]
fn series_plot() {
    let rs = series_results(true);
    each_format("series", |p| series(p, &rs));
}

#[test]
fn series_plot_without_c() {
    let rs = series_results(false);
    each_format("series_noc", |p| series(p, &rs));
    let short = vec![result("lru", 1 << 30, 0.5, windows(1, 1000, true, 0.0))];
    each_format("series_one", |p| series(p, &short));
}

#[test]
fn many_policies_wrap_the_legend() {
    let mut rs = Vec::new();
    for i in 0..24 {
        for k in 0..4 {
            let mr = 0.8 - 0.1 * k as f64 - 0.01 * i as f64;
            rs.push(result(
                &format!("policy-{i}+admission"),
                1 << (24 + k),
                mr,
                Vec::new(),
            ));
        }
    }
    each_format("many", |p| miss_ratio_vs_size(p, &rs));
}

/// Draws a figure to the given path.
type Draw<'a> = &'a dyn Fn(&Path) -> Result<()>;

/// Each of `draws` fails with "nothing to plot" and writes no file.
fn assert_nothing_to_plot(draws: &[Draw<'_>]) {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("x.png");
    for draw in draws {
        let e = draw(&png).unwrap_err();
        assert!(e.to_string().contains("nothing to plot"), "{e}");
    }
    assert!(!png.exists());
}

#[test]
fn empty_inputs_are_errors() {
    let sweep = sweep_results();
    assert_nothing_to_plot(&[
        &|p| miss_ratio_vs_size(p, &[]),
        &|p| model_curve(p, &[], 1 << 20),
        &|p| series(p, &[]),
        &|p| series(p, &sweep),
    ]);
}

#[test]
fn unknown_extension_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["plot.pdf", "plot"] {
        let p = dir.path().join(name);
        let e = miss_ratio_vs_size(&p, &sweep_results()).unwrap_err();
        assert!(e.to_string().contains(".png or .svg"), "{e}");
        assert!(!p.exists());
    }
    assert_eq!(
        output_format(Path::new("a.PNG")).unwrap(),
        OutputFormat::Png
    );
}

#[test]
fn unwritable_path_is_an_error() {
    require_font();
    let dir = tempfile::tempdir().unwrap();
    for ext in ["png", "svg"] {
        let p = dir.path().join("missing-dir").join(format!("x.{ext}"));
        let e = miss_ratio_vs_size(&p, &sweep_results()).unwrap_err();
        assert!(format!("{e:#}").contains("cannot write plot"), "{e:#}");
    }
}

#[test]
fn missing_font_is_a_clear_error() {
    let e = load_font(None, &[]).unwrap_err();
    assert_eq!(e, NO_FONT);
    assert!(e.contains("fonts-dejavu-core") && e.contains("ECDN_FONT"));
    let e = load_font(None, &["/nonexistent/font.ttf"]).unwrap_err();
    assert_eq!(e, NO_FONT);
    let e = load_font(Some("/nonexistent/font.ttf".into()), FONT_PATHS).unwrap_err();
    assert!(e.starts_with("ECDN_FONT=/nonexistent/font.ttf: "), "{e}");
}

#[test]
fn labels() {
    assert_eq!(size_label(&20.0), "1MiB");
    assert_eq!(size_label(&24.0), "16MiB");
    assert_eq!(count_label(0.0), "0");
    assert_eq!(count_label(12_500.0), "12.5k");
    assert_eq!(count_label(3_000_000.0), "3M");
    assert_eq!(ratio_label(0.3)(&0.25), "0.25");
    assert_eq!(grouped(0), "0");
    assert_eq!(grouped(999), "999");
    assert_eq!(grouped(102_485), "102,485");
    assert_eq!(grouped(1_234_567), "1,234,567");
}

#[test]
fn log2_axis_ticks_are_aligned_powers() {
    let axis = LogAxis::log2(19.5, 40.5, 6, &[]);
    let bold = &axis.bold;
    assert!(bold.len() <= 6, "{bold:?}");
    assert!(bold.iter().all(|k| (*k as i64) % 4 == 0), "{bold:?}");
    assert_eq!(axis.light.len(), 21);
    // No power of two in range: ticks at the data.
    let d = (100.0f64 * 1048576.0).log2();
    let axis = LogAxis::log2(d - 0.3, d + 0.3, 6, &[d, d]);
    assert_eq!(axis.bold, vec![d]);
    assert_eq!(size_label(&d), "100MiB");
}

// -----------------------------------------------------------------------------------------
// Cluster figures.

fn cluster_result(
    scheme: &str,
    size: u64,
    mr: f64,
    imbalance: f64,
    windows: Vec<ClusterWindow>,
) -> ClusterResult {
    ClusterResult {
        scheme: scheme.to_string(),
        cache_size: size,
        servers: 10,
        k: 3,
        p: 1,
        requests: 2_000_000,
        miss_ratio: mr,
        byte_miss_ratio: (mr * 1.2).min(1.0),
        partial_hit_ratio: 0.01,
        slice_size: 0,
        slice_requests: 2_000_000,
        slice_miss_ratio: mr,
        write_imbalance: imbalance,
        read_imbalance: 1.1,
        always_available: (0..10).collect(),
        unprotected_fraction: mr * 0.5,
        unprotected_fraction_end: mr * 0.5,
        cached_objects: 100_000,
        coded_by_chunks: vec![0, 10, 10, 10, 99_970],
        unprotected_request_fraction: mr * 0.4,
        bytes_written: vec![1 << 30; 10],
        bytes_read: vec![1 << 30; 10],
        origin_bytes: 1 << 32,
        partial_hit_bytes: 1 << 20,
        rebalances: 3,
        rebalance_s: 0.01,
        repair: Default::default(),
        resyncs: 0,
        reinserts: 0,
        elapsed_s: 1.0,
        requests_per_s: 2e6,
        windows,
    }
}

fn cluster_sweep() -> Vec<ClusterResult> {
    let mut v = Vec::new();
    for (si, scheme) in ["no-rep", "rep2", "rep3", "c2dn-norebal", "c2dn"]
        .iter()
        .enumerate()
    {
        for k in 0..7 {
            let size = 1u64 << (30 + k);
            let mr = 0.5 - 0.05 * k as f64 + 0.03 * si as f64;
            let imbalance = match (si, k) {
                // A server that wrote nothing.
                (0, 0) | (1, 3) => f64::INFINITY,
                _ => 1.05 + 0.6 / (1.0 + k as f64) + 0.2 * si as f64,
            };
            v.push(cluster_result(scheme, size, mr, imbalance, Vec::new()));
        }
    }
    v
}

/// Windows of a run: miss ratio `base(i)`, plus `bump(i)` times it when unavailable.
fn cluster_windows(
    n: usize,
    down: &dyn Fn(usize) -> Vec<usize>,
    mr: &dyn Fn(usize) -> f64,
) -> Vec<ClusterWindow> {
    (0..n)
        .map(|i| {
            let requests = 10_000;
            let misses = (mr(i) * requests as f64).round() as u64;
            ClusterWindow {
                index: i,
                start: i as u64 * requests,
                requests,
                misses,
                partial_hits: 0,
                bytes: u128::from(requests) << 16,
                origin_bytes: u128::from(misses) << 16,
                miss_ratio: misses as f64 / requests as f64,
                byte_miss_ratio: misses as f64 / requests as f64,
                unavailable: down(i),
                cached_objects: 1000,
                unprotected_fraction: mr(i) * 0.5,
            }
        })
        .collect()
}

/// A run with unavailability `down` next to the same run without, through `compare`.
fn unavailability_row(
    scheme: &str,
    size: u64,
    n: usize,
    spike: f64,
    down: &dyn Fn(usize) -> Vec<usize>,
) -> UnavailabilityResult {
    let base = |i: usize| 0.3 + 0.02 * (i as f64 * 0.7).sin() - 0.002 * i as f64;
    // The miss ratio jumps when servers go down and decays while they stay down.
    let with_mr = |i: usize| {
        let d = down(i).len() as f64;
        let since = (0..=i).rev().take_while(|&j| !down(j).is_empty()).count() as f64;
        base(i) * (1.0 + spike * d * (-0.4 * (since - 1.0).max(0.0)).exp())
    };
    let none = |_: usize| Vec::new();
    let with = cluster_result(scheme, size, 0.3, 1.1, cluster_windows(n, down, &with_mr));
    let without = cluster_result(scheme, size, 0.29, 1.1, cluster_windows(n, &none, &base));
    ecdn_sim::cluster::compare(with, &without, 5)
}

fn spike_rows() -> Vec<UnavailabilityResult> {
    let down = |i: usize| {
        if (10..16).contains(&i) {
            vec![3]
        } else {
            Vec::new()
        }
    };
    vec![
        unavailability_row("no-rep", 4 << 30, 30, 0.9, &down),
        unavailability_row("rep2", 4 << 30, 30, 0.25, &down),
        unavailability_row("c2dn", 4 << 30, 30, 0.05, &down),
        unavailability_row("c2dn", 16 << 30, 30, 0.08, &down),
    ]
}

/// Akamai-like: 40 windows, one or two servers down now and then.
fn akamai_down(i: usize) -> Vec<usize> {
    match i {
        3..=5 => vec![2],
        9 => vec![7],
        14..=17 => vec![1, 4],
        18..=20 => vec![4],
        27 => vec![0, 5, 8],
        31..=35 => vec![6],
        _ => Vec::new(),
    }
}

fn series_rows() -> Vec<UnavailabilityResult> {
    vec![
        unavailability_row("no-rep", 4 << 30, 40, 0.4, &akamai_down),
        unavailability_row("rep2", 4 << 30, 40, 0.15, &akamai_down),
        unavailability_row("c2dn", 4 << 30, 40, 0.03, &akamai_down),
    ]
}

#[test]
fn cluster_size_plot() {
    let rs = cluster_sweep();
    each_format("cluster", |p| cluster_vs_size(p, &rs));
    // No infinite imbalance, a single size, everything infinite.
    let finite: Vec<ClusterResult> = rs
        .iter()
        .filter(|r| r.write_imbalance.is_finite())
        .cloned()
        .collect();
    each_format("cluster_finite", |p| cluster_vs_size(p, &finite));
    let one = vec![cluster_result(
        "c2dn",
        3 << 30,
        0.2,
        f64::INFINITY,
        Vec::new(),
    )];
    each_format("cluster_one", |p| cluster_vs_size(p, &one));
    let odd = vec![
        cluster_result("rep2", 1 << 30, f64::NAN, f64::NAN, Vec::new()),
        cluster_result("rep2", 2 << 30, 0.3, 1.0, Vec::new()),
    ];
    each_format("cluster_odd", |p| cluster_vs_size(p, &odd));
}

#[test]
fn cluster_spike_plot() {
    let rows = spike_rows();
    each_format("spike", |p| cluster_spike(p, &rows, 10));
    each_format("spike_long", |p| cluster_spike(p, &rows, 1000));
    each_format("spike_zero", |p| cluster_spike(p, &rows, 0));
    // Unavailability from window 0 (nothing before it), and a row without any.
    let early = |i: usize| if i < 4 { vec![1, 2] } else { Vec::new() };
    let none = |_: usize| Vec::new();
    let mixed = vec![
        unavailability_row("rep2", 1 << 30, 12, 0.3, &early),
        unavailability_row("rep3", 1 << 30, 12, 0.3, &none),
    ];
    assert!(mixed[1].unavailability_starts.is_empty());
    each_format("spike_mixed", |p| cluster_spike(p, &mixed, 5));
}

#[test]
fn cluster_series_plot() {
    let rows = series_rows();
    each_format("cseries", |p| cluster_series(p, &rows));
    let long = vec![unavailability_row("c2dn", 1 << 30, 500, 0.1, &|i| {
        if i % 97 < 9 {
            vec![1; 1 + i % 3]
        } else {
            Vec::new()
        }
    })];
    each_format("cseries_long", |p| cluster_series(p, &long));
    let one = vec![unavailability_row("rep2", 1 << 30, 1, 0.1, &|_| vec![0])];
    each_format("cseries_one", |p| cluster_series(p, &one));
}

#[test]
fn empty_cluster_inputs_are_errors() {
    let zero = vec![cluster_result("c2dn", 0, 0.2, 1.0, Vec::new())];
    let empty = vec![unavailability_row("c2dn", 1 << 30, 0, 0.1, &|_| Vec::new())];
    assert_nothing_to_plot(&[
        &|p| cluster_vs_size(p, &[]),
        &|p| cluster_vs_size(p, &zero),
        &|p| cluster_spike(p, &[], 10),
        &|p| cluster_series(p, &[]),
        &|p| cluster_spike(p, &empty, 10),
        &|p| cluster_series(p, &empty),
    ]);
}

#[test]
fn cluster_helpers() {
    assert_eq!(percent_label(30.0)(&-0.2), "0%");
    assert_eq!(percent_label(30.0)(&20.0), "20%");
    assert_eq!(percent_label(3.0)(&-1.5), "-1.5%");
    assert_eq!(window_label(&-3.0), "-3");
    assert_eq!(window_label(&0.5), "");
    let shade = merge_shade([(1.0, 1), (2.0, 2), (2.0, 1), (3.0, 2), (5.0, 1)].into_iter());
    assert_eq!(shade, vec![(1.0, 1), (2.0, 2), (3.0, 2), (5.0, 1)]);
    assert_eq!(
        runs(&shade, |d| d),
        vec![(1.0, 1.0, 1), (2.0, 3.0, 2), (5.0, 5.0, 1)]
    );
    let (lo, hi) = percent_range([5.0, 40.0].into_iter());
    assert!(lo < 0.0 && hi > 40.0);
}

/// `n` synthetic demo samples: hits get more likely and faster as the run goes on.
fn demo_samples(n: u64) -> Vec<(&'static str, u64)> {
    (0..n)
        .map(|i| {
            let warm = i * 100 / n;
            let r = (i * 7919) % 100;
            if r < warm / 2 {
                ("HIT-HOC", 80 + (i * 37) % 400)
            } else if r < warm {
                ("HIT-DISK", 300 + (i * 53) % 2_000)
            } else if r % 17 == 0 {
                ("MISS-COLLAPSED", 2_500 + (i * 71) % 9_000)
            } else if r % 29 == 0 {
                ("REVALIDATED", 2_200 + (i * 13) % 3_000)
            } else {
                ("MISS", 2_100 + (i * 91) % 20_000)
            }
        })
        .collect()
}

#[test]
fn demo_plot() {
    let samples = demo_samples(5_000);
    each_format("demo", |p| {
        demo(p, &samples, "ecdn demo: 5,000 requests, 2,500 req/s")
    });
    let one = [("HIT-HOC", 120), ("STALE", 0), ("X-ODD", 5_000)];
    each_format("demo-few", |p| demo(p, &one, "three requests"));
}

#[test]
fn demo_helpers() {
    assert_nothing_to_plot(&[&|p| demo(p, &[], "none")]);
    assert_eq!(ms_label(&0.0), "1ms");
    assert_eq!(ms_label(&-1.0), "0.1ms");
    assert_eq!(ms_label(&2f64.log10()), "2ms");
    assert_eq!(ms_label(&(0.05f64).log10()), "0.05ms");
    assert_eq!(ms_label(&3.0), "1000ms");
    let pts = cdf_points(&[1_000, 2_000, 3_000, 4_000, 10_000], 2);
    let x3 = 3f64.log10();
    assert_eq!(
        pts,
        [
            (0.0, 0.0),
            (0.0, 0.2),
            (x3, 0.2),
            (x3, 0.6),
            (1.0, 0.6),
            (1.0, 1.0)
        ]
    );
    assert_eq!(
        cdf_points(&[500], 400),
        [((0.5f64).log10(), 0.0), ((0.5f64).log10(), 1.0)]
    );
    assert!(cdf_points(&[], 400).is_empty());
    let fig = DemoFigure::new(&demo_samples(1_000), "t").unwrap();
    assert_eq!(fig.windows.len(), DEMO_WINDOWS);
    for (_, _, shares) in &fig.windows {
        assert!((shares.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    }
    assert!(fig.other);
    let tiers: Vec<&str> = fig.cdfs.iter().map(|c| c.tier.as_str()).collect();
    assert_eq!(
        tiers,
        [
            "HIT-HOC",
            "HIT-DISK",
            "MISS",
            "MISS-COLLAPSED",
            "REVALIDATED"
        ]
    );
    assert!(check_output(Path::new("x.svg")).is_ok());
    assert!(check_output(Path::new("x.pdf")).is_err());
}
