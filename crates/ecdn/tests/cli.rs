//! End-to-end tests of the `ecdn` command line: the simulator's JSON contract and clear errors
//! (never a panic) for bad input.

use std::path::PathBuf;
use std::process::{Command, Output};

fn ecdn(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ecdn"))
        .args(args)
        .output()
        .expect("run ecdn")
}

fn trace() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/cloudPhysicsIO.oracleGeneral.bin")
        .to_string_lossy()
        .into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every case exits with status 1 and an error that mentions `needle`, never a panic.
fn assert_clean_failures(cases: &[(Vec<&str>, &str)]) {
    for (args, needle) in cases {
        let o = ecdn(args);
        let err = stderr(&o);
        assert_eq!(
            o.status.code(),
            Some(1),
            "{args:?} should fail cleanly: {err}"
        );
        assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
        assert!(
            err.contains(needle),
            "{args:?}: error should mention {needle:?}: {err}"
        );
    }
}

#[test]
fn sim_cache_json_has_one_line_per_policy_and_size() {
    let t = trace();
    let o = ecdn(&[
        "sim",
        "cache",
        "--trace",
        &t,
        "--policy",
        "lru,fifo",
        "--size",
        "1MiB,16MiB",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    assert_eq!(lines.len(), 4);
    for v in &lines {
        for key in [
            "policy",
            "cache_size",
            "requests",
            "miss_ratio",
            "byte_miss_ratio",
        ] {
            assert!(v.get(key).is_some(), "missing {key} in {v}");
        }
    }
    let lru1 = &lines[0];
    assert_eq!(lru1["policy"], "lru");
    assert_eq!(lru1["cache_size"], 1 << 20);
    assert_eq!(lru1["requests"], 113_872);
    assert_eq!(
        format!("{:.4}", lru1["miss_ratio"].as_f64().unwrap()),
        "0.8699"
    );
}

#[test]
fn warmup_fraction_and_series() {
    let t = trace();
    let o = ecdn(&[
        "sim",
        "cache",
        "--trace",
        &t,
        "--policy",
        "adaptsize:window=10000",
        "--size",
        "4MiB",
        "--warmup",
        "50%",
        "--series",
        "20000",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["warmup"], 56_936);
    assert_eq!(v["requests"], 113_872 - 56_936);
    assert_eq!(v["series"].as_array().unwrap().len(), 113_872 / 20_000);
    assert!(v["c_history"].as_array().unwrap().len() >= 11);
}

#[test]
fn bad_input_gives_clear_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let truncated = dir.path().join("bad.oracleGeneral.bin");
    let mut bytes = std::fs::read(trace()).unwrap();
    bytes.truncate(24 * 10 + 7);
    std::fs::write(&truncated, bytes).unwrap();
    let truncated = truncated.to_string_lossy().into_owned();
    let t = trace();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "sim",
                "cache",
                "--trace",
                "/nonexistent.bin",
                "--size",
                "1MiB",
            ],
            "/nonexistent.bin",
        ),
        (
            vec!["sim", "cache", "--trace", &t, "--size", "1XB"],
            "unknown unit",
        ),
        (
            vec!["sim", "cache", "--trace", &t, "--size", "0"],
            "positive",
        ),
        (
            vec![
                "sim", "cache", "--trace", &t, "--size", "1MiB", "--policy", "lru+nope",
            ],
            "unknown admission",
        ),
        (
            vec![
                "sim", "cache", "--trace", &t, "--size", "1MiB", "--warmup", "abc",
            ],
            "invalid warmup",
        ),
        (
            vec!["sim", "cache", "--trace", &truncated, "--size", "1MiB"],
            "record 10",
        ),
        (
            vec![
                "sim", "cache", "--trace", &t, "--size", "1MiB", "--format", "parquet",
            ],
            "parquet",
        ),
    ];
    assert_clean_failures(&cases);
}

#[test]
fn sim_cluster_json_and_unavailability() {
    let t = trace();
    let o = ecdn(&[
        "sim",
        "cluster",
        "--trace",
        &t,
        "--scheme",
        "rep2,c2dn,c2dn-n6k3",
        "--size",
        "50%",
        "--threshold",
        "4KiB",
        "--window",
        "10000",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows: Vec<serde_json::Value> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 3);
    for key in [
        "scheme",
        "cache_size",
        "miss_ratio",
        "byte_miss_ratio",
        "write_imbalance",
        "read_imbalance",
        "unprotected_fraction",
        "partial_hit_ratio",
    ] {
        assert!(rows[1].get(key).is_some(), "missing {key}");
    }
    assert_eq!(rows[2]["scheme"], "c2dn-n6k3");
    assert_eq!(rows[1]["requests"], 113_872);

    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("unavail.txt");
    std::fs::write(&record, "\n\n\n4\n4 7\n\n").unwrap();
    let record = record.to_string_lossy().into_owned();
    let o = ecdn(&[
        "sim",
        "cluster",
        "--trace",
        &t,
        "--scheme",
        "c2dn",
        "--size",
        "50%",
        "--threshold",
        "4KiB",
        "--window",
        "10000",
        "--unavailability",
        &record,
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["unavailability_starts"], serde_json::json!([3, 4]));
    assert!(v.get("max_relative_miss_increase").is_some());
    assert_eq!(v["relative_miss_change"].as_array().unwrap().len(), 12);
}

#[test]
fn sim_cluster_bad_input_gives_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, "1\n12\n").unwrap();
    let bad = bad.to_string_lossy().into_owned();
    let t = trace();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "sim", "cluster", "--trace", &t, "--size", "1GiB", "--scheme", "raid5",
            ],
            "unknown scheme",
        ),
        (
            vec![
                "sim",
                "cluster",
                "--trace",
                &t,
                "--size",
                "1GiB",
                "--scheme",
                "c2dn-n2k3",
            ],
            "n ≥ k",
        ),
        (
            vec![
                "sim",
                "cluster",
                "--trace",
                &t,
                "--size",
                "1GiB",
                "--servers",
                "3",
            ],
            "only 3",
        ),
        (
            vec![
                "sim",
                "cluster",
                "--trace",
                &t,
                "--size",
                "1GiB",
                "--unavailability",
                &bad,
            ],
            "line 2",
        ),
        (
            vec![
                "sim", "cluster", "--trace", &t, "--size", "1GiB", "--fail", "12@10",
            ],
            "does not exist",
        ),
        (
            vec![
                "sim", "cluster", "--trace", &t, "--size", "1GiB", "--window", "0",
            ],
            "invalid window",
        ),
        (
            vec!["sim", "cluster", "--trace", &t, "--size", "0%"],
            "out of range",
        ),
    ];
    assert_clean_failures(&cases);
}

#[test]
fn demo_serves_every_byte_correctly() {
    let o = ecdn(&[
        "demo",
        "--requests",
        "600",
        "--objects",
        "100",
        "--concurrency",
        "4",
        "--hoc-size",
        "1MiB",
        "--disk-size",
        "16MiB",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}{}", out, stderr(&o));
    assert!(out.contains("600 requests"), "{out}");
    assert!(out.contains(" 0 responses with wrong bytes"), "{out}");
    assert!(
        out.contains("HIT-HOC"),
        "a Zipf workload over 100 objects must hit: {out}"
    );
    assert!(out.contains("MISS"), "{out}");
}
