//! How the demo's load balancer picks the node a request goes to (`--routing`).
//!
//! - `round-robin` (the default): the n-th request goes to live node n mod |live|. A node that
//!   does not serve the object's bucket relays the request to the one that does: the way an
//!   anycast CDN's servers work (C2DN §7, "DNS vs anycast-based CDN request routing").
//! - `bucket`: each request goes to its bucket's serving node, as C2DN's own prototype routes
//!   (§2, "Bucket-based request routing": the cluster-local load balancer resolves a bucket to
//!   a server by consistent hashing). The balancer reads the buckets from the coordinator's
//!   map, the same map the nodes follow, fetched again every [`REFRESH`]: after a failure,
//!   requests move to the bucket's next server once the coordinator's map says so, as a DNS
//!   answer changes only when the load balancer republishes it. Until then a request for a
//!   dead node's bucket goes to its next live candidate in the old map.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ecdn_cluster::{BucketMap, ClusterConfig};

use super::driver::object_id;

/// How often the `bucket` balancer fetches the coordinator's map again.
pub const REFRESH: Duration = Duration::from_millis(250);

/// `--routing`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Routing {
    #[default]
    RoundRobin,
    Bucket,
}

impl Routing {
    /// What the report says of it.
    pub fn describe(self) -> &'static str {
        match self {
            Routing::RoundRobin => "round-robin over live nodes",
            Routing::Bucket => "by bucket, to its serving node in the coordinator's map",
        }
    }
}

/// The `bucket` balancer: the map it routes by and the object id of every request.
pub struct BucketRouter {
    map: Arc<Mutex<BucketMap>>,
    ids: Vec<u64>,
}

impl BucketRouter {
    /// A balancer for `requests` (object id and size, in trace order) that starts from the
    /// coordinator's current map and fetches it again every [`REFRESH`] while it lives.
    pub async fn start(cfg: &ClusterConfig, requests: &[(u64, u64)]) -> Result<Self, String> {
        let map = Arc::new(Mutex::new(ecdn_cluster::plane::fetch_map(cfg).await?));
        let follow = Arc::downgrade(&map);
        let cfg = cfg.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(REFRESH).await;
                let fetched = ecdn_cluster::plane::fetch_map(&cfg).await;
                let Some(map) = follow.upgrade() else {
                    return; // the run is over
                };
                // A failed fetch keeps the map it had (a coordinator failing over).
                if let Ok(m) = fetched {
                    *map.lock().unwrap_or_else(|e| e.into_inner()) = m;
                }
            }
        });
        let ids = requests
            .iter()
            .map(|&(id, size)| object_id(id, size))
            .collect();
        Ok(BucketRouter { map, ids })
    }

    /// The node request `index` goes to: its bucket's first candidate in the map that is
    /// `live` (`None`: none is, or no such request).
    pub fn pick(&self, index: u64, live: &[usize]) -> Option<usize> {
        let id = *self.ids.get(usize::try_from(index).ok()?)?;
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.candidates(map.bucket_of(id))
            .iter()
            .copied()
            .find(|s| live.contains(s))
    }
}
