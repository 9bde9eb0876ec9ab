//! The control plane a cluster file names, asked from outside it: the embedded coordinator
//! ([`crate::control`]'s side of it) or etcd ([`crate::etcd`]).

use crate::config::ClusterConfig;
use crate::map::BucketMap;

/// The current map of the cluster of `cfg`, asked once from its control plane (the
/// coordinator, or etcd), checked with [`crate::control::fits`]. A node added while the
/// cluster runs reads its own addresses from it before it starts.
pub async fn fetch_map(cfg: &ClusterConfig) -> Result<BucketMap, String> {
    let map = if cfg.etcd.is_empty() {
        crate::control::fetch_coordinator_map(cfg).await?
    } else {
        crate::etcd::fetch_map(cfg).await?
    };
    let map = map.ok_or("the control plane has no map yet")?;
    map.validate()?;
    crate::control::fits(cfg, &map)?;
    Ok(map)
}
