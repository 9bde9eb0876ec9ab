//! What the tests that start etcd share: the rule for a missing tool, and the cluster file.

use ecdn_cluster::ClusterConfig;

/// True when `CI` is set to anything but empty, `0` or `false` (as the plot tests read it).
fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| {
        let v = v.to_ascii_lowercase();
        !v.is_empty() && v != "false" && v != "0"
    })
}

/// A tool this test needs is missing: under CI that fails the test (CI must install it);
/// elsewhere the test says it is skipped and the caller returns.
pub fn missing(why: &str) {
    if under_ci() {
        panic!("under CI and {why}: CI must install it");
    }
    eprintln!("skipped: {why}");
}

/// A c2dn cluster file of five nodes (their listeners unused), heartbeats every 100 ms, with
/// the extra settings `extra` (TOML lines).
pub fn cluster(key: &str, extra: &str) -> ClusterConfig {
    let mut text = format!("scheme = \"c2dn\"\nkey = \"{key}\"\nheartbeat_ms = 100\n{extra}\n");
    for i in 0..5 {
        text.push_str(&format!(
            "[[node]]\nid = {i}\nclient = \"127.0.0.1:{}\"\npeer = \"127.0.0.1:{}\"\n",
            20000 + i,
            21000 + i
        ));
    }
    ClusterConfig::parse(&text).unwrap()
}
