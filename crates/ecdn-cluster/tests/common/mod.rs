//! What the cluster crate's tests share: the cluster file.

#![allow(dead_code)] // each test binary uses part of it

use ecdn_cluster::ClusterConfig;

/// A c2dn cluster file of five nodes (their listeners unused), heartbeats every 100 ms, with
/// the extra settings `extra` (TOML lines).
pub fn cluster(key: &str, extra: &str) -> ClusterConfig {
    ClusterConfig::parse(&cluster_text(key, extra)).unwrap()
}

/// The text of [`cluster`]'s file (`extra` may end with tables, such as `[peer_tls]`).
pub fn cluster_text(key: &str, extra: &str) -> String {
    let mut text = format!("scheme = \"c2dn\"\nkey = \"{key}\"\nheartbeat_ms = 100\n{extra}\n");
    for i in 0..5 {
        text.push_str(&format!(
            "[[node]]\nid = {i}\nclient = \"127.0.0.1:{}\"\npeer = \"127.0.0.1:{}\"\n",
            20000 + i,
            21000 + i
        ));
    }
    text
}
