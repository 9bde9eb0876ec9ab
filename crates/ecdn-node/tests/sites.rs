//! Cooperating sites (`ecdn_node::node::sites`) with referrals given by the test: what the
//! node does with them, apart from how Coral finds them (`ecdn-coral`'s tests do that).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ecdn_node::node::sites::{Referrals, Sites};
use ecdn_node::node::{Node, NodeConfig};
use ecdn_node::origin::{Origin, OriginConfig};

mod common;
use common::fetch;

/// Referrals of the site `me` that name `sites`, nearest first, for every URL, after `pause`.
/// Both are set once the sites have started, each on a port the system gave it: a port picked
/// beforehand and released may be taken meanwhile by another test's listener.
struct Named {
    me: OnceLock<String>,
    sites: OnceLock<Vec<SocketAddr>>,
    pause: Duration,
}

impl Named {
    fn after(pause: Duration) -> Arc<Named> {
        Arc::new(Named {
            me: OnceLock::new(),
            sites: OnceLock::new(),
            pause,
        })
    }
}

impl Referrals for Named {
    fn me(&self) -> &str {
        self.me.get().map_or("", String::as_str)
    }
    fn claim<'a>(
        &'a self,
        _url: &'a str,
    ) -> Pin<Box<dyn Future<Output = Vec<String>> + Send + 'a>> {
        Box::pin(async move {
            tokio::time::sleep(self.pause).await;
            let sites = self.sites.get().map_or(&[][..], Vec::as_slice);
            sites.iter().map(ToString::to_string).collect()
        })
    }
    fn filled(&self, _url: &str) {}
    fn abandoned(&self, _url: &str) {}
}

/// Two sites miss the same object at the same moment and each claim names the other (a
/// referral implementation that broke the claims' order: Coral's cannot). Each fill asks the
/// other site; if each waited for the other's fill, both would wait until their timeouts.
/// A site refuses the other's request at once instead (`504`, counted as circular) and goes
/// to the origin; the other, refused too, does the same, or (had its request arrived once
/// the first was going to the origin) joins that fetch. Both clients are served within
/// seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sites_whose_claims_name_each_other_do_not_wait_for_each_other() {
    let origin = Origin::start("127.0.0.1:0".parse().unwrap(), OriginConfig::default())
        .await
        .unwrap();
    // Each names the other site, after a pause long enough for a fill that started at the
    // same moment there to be in flight too.
    let referrals = [0, 1].map(|_| Named::after(Duration::from_millis(200)));
    let mut nodes = Vec::new();
    for r in &referrals {
        let cfg = NodeConfig {
            origin: format!("http://{}", origin.addr),
            hoc_size: 16 << 20,
            sites: Some(Sites(r.clone())),
            ..NodeConfig::default()
        };
        let node = Node::start("127.0.0.1:0".parse().unwrap(), cfg);
        nodes.push(node.await.unwrap());
    }
    for (i, r) in referrals.iter().enumerate() {
        r.me.set(nodes[i].addr.to_string()).unwrap();
        r.sites.set(vec![nodes[1 - i].addr]).unwrap();
    }
    let path = "/obj/9?size=40000";
    let (a, b) = (nodes[0].addr, nodes[1].addr);
    let both = async { tokio::join!(fetch(a, "GET", path), fetch(b, "GET", path)) };
    let (ra, rb) = tokio::time::timeout(Duration::from_secs(5), both)
        .await
        .expect("two sites filling from each other waited for each other");
    assert_eq!((ra.status, rb.status), (200, 200));
    assert_eq!(ra.body, rb.body);
    assert_eq!(ra.body.len(), 40000);
    let counter = |n: &ecdn_node::node::RunningNode, name: &'static str| {
        let n = n.admin_addr().unwrap();
        async move {
            let stats = fetch(n, "GET", "/_ecdn/stats").await;
            let v: serde_json::Value = serde_json::from_slice(&stats.body).unwrap();
            v[name].as_u64().unwrap()
        }
    };
    let mut counts = Vec::new();
    for n in &nodes {
        let mut c = Vec::new();
        for name in [
            "site_fills",
            "site_origin_unreferred",
            "site_origin_after_referrals",
            "site_peers_not_held",
            "site_peers_circular",
        ] {
            c.push(counter(n, name).await);
        }
        counts.push(c);
    }
    // Each site filled once, from the other or from the origin after its referral failed;
    // at least one refused the other's request as circular.
    for (i, c) in counts.iter().enumerate() {
        assert_eq!(c[0] + c[2], 1, "site {i}: {c:?}");
        assert_eq!((c[1], c[3]), (0, 0), "site {i}: {c:?}");
    }
    assert!(counts.iter().map(|c| c[4]).sum::<u64>() >= 1, "{counts:?}");
    let to_origin: u64 = counts.iter().map(|c| c[2]).sum();
    assert_eq!(origin.requests(), to_origin, "{counts:?}");
    for n in nodes {
        n.stop().await.unwrap();
    }
    origin.stop().await.unwrap();
}

/// The nearest referral accepts the connection and never answers (a site that hangs); the
/// second holds the object. The first two referrals race, so the fill comes from the second
/// at once instead of after the first's 30 s timeout, and the origin is not asked again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_two_referrals_race() {
    let origin = Origin::start("127.0.0.1:0".parse().unwrap(), OriginConfig::default())
        .await
        .unwrap();
    let cfg = |sites: Option<Sites>| NodeConfig {
        origin: format!("http://{}", origin.addr),
        hoc_size: 16 << 20,
        sites,
        ..NodeConfig::default()
    };
    let holder = Node::start("127.0.0.1:0".parse().unwrap(), cfg(None))
        .await
        .unwrap();
    let path = "/obj/race?size=30000";
    assert_eq!(fetch(holder.addr, "GET", path).await.status, 200);
    assert_eq!(origin.requests(), 1);
    // A site that accepts and says nothing: its connections are kept open until the end.
    let hang = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hang_addr = hang.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((s, _)) = hang.accept().await {
            open.push(s);
        }
    });
    let referrals = Named::after(Duration::ZERO);
    referrals.sites.set(vec![hang_addr, holder.addr]).unwrap();
    let node = Node::start(
        "127.0.0.1:0".parse().unwrap(),
        cfg(Some(Sites(referrals.clone()))),
    )
    .await
    .unwrap();
    referrals.me.set(node.addr.to_string()).unwrap();
    let t = std::time::Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(10), fetch(node.addr, "GET", path))
        .await
        .expect("the fill waited for the site that hangs");
    assert_eq!((r.status, r.body.len()), (200, 30000));
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!(origin.requests(), 1, "filled from the second referral");
    held.abort();
    node.stop().await.unwrap();
    holder.stop().await.unwrap();
    origin.stop().await.unwrap();
}

/// Referrals of one site over claims shared by every site of a test, as a DSHT's claims at a
/// key's closest node are: a claim of a URL returns the sites that claimed it before,
/// latest first (the nearest, say), after a pause in which the other sites' claims are made
/// too (the flash crowd's race).
struct Claims {
    /// Set once the site has started (as [`Named`]'s).
    me: OnceLock<String>,
    claimed: Arc<std::sync::Mutex<std::collections::HashMap<String, Vec<String>>>>,
}

impl Referrals for Claims {
    fn me(&self) -> &str {
        self.me.get().map_or("", String::as_str)
    }
    fn claim<'a>(&'a self, url: &'a str) -> Pin<Box<dyn Future<Output = Vec<String>> + Send + 'a>> {
        Box::pin(async move {
            let before = {
                let mut claimed = self.claimed.lock().unwrap();
                let sites = claimed.entry(url.to_string()).or_default();
                let before: Vec<String> = sites.iter().rev().cloned().collect();
                sites.push(self.me().to_string());
                before
            };
            tokio::time::sleep(Duration::from_millis(100)).await;
            before
        })
    }
    fn filled(&self, _url: &str) {}
    fn abandoned(&self, _url: &str) {}
}

/// Six sites miss one object at the same moment. Their claims are ordered: the first finds
/// nobody and goes to the origin, every other fills from the sites that claimed before it,
/// each waiting as long as the fill it asks takes (they are all still asking when asked). The
/// origin sees one request instead of six, and every client the same bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sites_that_miss_at_once_fill_down_their_claims_and_make_one_origin_request() {
    let origin = Origin::start(
        "127.0.0.1:0".parse().unwrap(),
        OriginConfig {
            // Slow enough that every fill is still waiting when the later ones ask it.
            latency: Duration::from_millis(300),
            ..OriginConfig::default()
        },
    )
    .await
    .unwrap();
    let claimed = Arc::new(std::sync::Mutex::new(Default::default()));
    let mut nodes = Vec::new();
    for _ in 0..6 {
        let r = Arc::new(Claims {
            me: OnceLock::new(),
            claimed: claimed.clone(),
        });
        let cfg = NodeConfig {
            origin: format!("http://{}", origin.addr),
            hoc_size: 16 << 20,
            sites: Some(Sites(r.clone())),
            ..NodeConfig::default()
        };
        let node = Node::start("127.0.0.1:0".parse().unwrap(), cfg)
            .await
            .unwrap();
        r.me.set(node.addr.to_string()).unwrap();
        nodes.push(node);
    }
    let path = "/obj/crowd?size=40000";
    let mut asks = tokio::task::JoinSet::new();
    for n in &nodes {
        asks.spawn(fetch(n.addr, "GET", path));
    }
    let all = async {
        let mut got = Vec::new();
        while let Some(r) = asks.join_next().await {
            got.push(r.unwrap());
        }
        got
    };
    let got = tokio::time::timeout(Duration::from_secs(10), all)
        .await
        .expect("sites filling down their claims waited for each other");
    for r in &got {
        assert_eq!((r.status, r.body.len()), (200, 40000));
        assert_eq!(r.body, got[0].body);
    }
    assert_eq!(
        origin.requests(),
        1,
        "only the first claimer went to the origin"
    );
    let order: Vec<String> = claimed.lock().unwrap().values().next().unwrap().clone();
    for n in &nodes {
        let stats = fetch(n.admin_addr().unwrap(), "GET", "/_ecdn/stats").await;
        let v: serde_json::Value = serde_json::from_slice(&stats.body).unwrap();
        let first = order[0] == n.addr.to_string();
        assert_eq!(v["site_fills"], u64::from(!first), "site {}", n.addr);
        assert_eq!(
            v["site_origin_unreferred"],
            u64::from(first),
            "site {}",
            n.addr
        );
        assert_eq!(v["site_peers_circular"], 0, "site {}", n.addr);
    }
    for n in nodes {
        n.stop().await.unwrap();
    }
    origin.stop().await.unwrap();
}
