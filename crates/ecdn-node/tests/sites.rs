//! Cooperating sites (`ecdn_node::node::sites`) with referrals given by the test: what the
//! node does with them, apart from how Coral finds them (`ecdn-coral`'s tests do that).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ecdn_node::node::sites::{Referrals, Sites};
use ecdn_node::node::{Node, NodeConfig};
use ecdn_node::origin::{Origin, OriginConfig};

mod common;
use common::fetch;

/// Referrals of the site `me` that name `sites`, nearest first, for every URL, after `pause`.
struct Named {
    me: String,
    sites: Vec<SocketAddr>,
    pause: Duration,
}

impl Referrals for Named {
    fn me(&self) -> &str {
        &self.me
    }
    fn locate<'a>(
        &'a self,
        _url: &'a str,
    ) -> Pin<Box<dyn Future<Output = Vec<String>> + Send + 'a>> {
        Box::pin(async move {
            tokio::time::sleep(self.pause).await;
            self.sites.iter().map(ToString::to_string).collect()
        })
    }
    fn filling(&self, _url: &str) {}
    fn filled(&self, _url: &str) {}
    fn abandoned(&self, _url: &str) {}
}

/// `n` free loopback addresses (bound, then released), for sites whose referrals name each
/// other before they start.
fn free_addrs(n: usize) -> Vec<SocketAddr> {
    (0..n)
        .map(|_| {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            probe.local_addr().unwrap()
        })
        .collect()
}

/// Two sites miss the same object at the same moment and each is told the other is filling it
/// (as Coral's `filling` references do in a flash crowd). Each fill asks the other site first;
/// if each waited for the other's fill, both would wait until their timeouts. The site that
/// comes first (by address) waits for the other's fill; the other waits at most
/// `SITE_JOIN_WAIT` (1 s), is refused (`504`) and goes to the origin: one origin request, both
/// clients served within seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sites_filling_from_each_other_do_not_wait_for_each_other() {
    let origin = Origin::start("127.0.0.1:0".parse().unwrap(), OriginConfig::default())
        .await
        .unwrap();
    // Each node's address is needed for the other's referrals before it starts.
    let addrs = free_addrs(2);
    let mut nodes = Vec::new();
    for i in 0..2 {
        let cfg = NodeConfig {
            origin: format!("http://{}", origin.addr),
            hoc_size: 16 << 20,
            // The other site, named after a pause long enough for a fill that started at
            // the same moment there to be in flight too.
            sites: Some(Sites(Arc::new(Named {
                me: addrs[i].to_string(),
                sites: vec![addrs[1 - i]],
                pause: Duration::from_millis(200),
            }))),
            ..NodeConfig::default()
        };
        nodes.push(Node::start(addrs[i], cfg).await.unwrap());
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
    assert_eq!(origin.requests(), 1, "one site filled from the other");
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
            "site_peers_gave_up",
        ] {
            c.push(counter(n, name).await);
        }
        counts.push(c);
    }
    let first = usize::from(addrs[1].to_string() < addrs[0].to_string());
    // The first site filled from the other; the other gave up waiting on the first's fill
    // (counted there), and went to the origin after its one referral failed.
    assert_eq!(
        counts[first],
        [1, 0, 0, 0, 1],
        "the site that comes first ({}) filled from the other",
        addrs[first]
    );
    assert_eq!(counts[1 - first], [0, 0, 1, 0, 0]);
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
    let me = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let referrals = Named {
        me: me.to_string(),
        sites: vec![hang_addr, holder.addr],
        pause: Duration::ZERO,
    };
    let node = Node::start(me, cfg(Some(Sites(Arc::new(referrals)))))
        .await
        .unwrap();
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

/// Referrals of the site `me` in a flash crowd's race: a URL's first locate names no site
/// (the others' *filling* references are not visible yet), every later one names `sites`.
struct Racing {
    me: String,
    sites: Vec<SocketAddr>,
    located: std::sync::Mutex<std::collections::HashSet<String>>,
    /// `filling_stored` calls.
    waited: std::sync::atomic::AtomicUsize,
}

impl Referrals for Racing {
    fn me(&self) -> &str {
        &self.me
    }
    fn locate<'a>(
        &'a self,
        url: &'a str,
    ) -> Pin<Box<dyn Future<Output = Vec<String>> + Send + 'a>> {
        let first = self.located.lock().unwrap().insert(url.to_string());
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            match first {
                true => Vec::new(),
                false => self.sites.iter().map(ToString::to_string).collect(),
            }
        })
    }
    fn filling(&self, _url: &str) {}
    fn filling_stored<'a>(
        &'a self,
        _url: &'a str,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
        self.waited
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Box::pin(tokio::time::sleep(Duration::from_millis(100)))
    }
    fn filled(&self, _url: &str) {}
    fn abandoned(&self, _url: &str) {}
}

/// Four sites miss one object at the same moment and none finds another's reference (the
/// race of a flash crowd, CoralCDN §8). Each waits until its own reference can be found,
/// looks again, now finds the others, and asks only those that come after it (by address):
/// the last site goes to the origin, every other fills down the chain, and the origin sees
/// one request instead of four.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sites_that_missed_at_once_look_again_in_order_and_make_one_origin_request() {
    let origin = Origin::start("127.0.0.1:0".parse().unwrap(), OriginConfig::default())
        .await
        .unwrap();
    let mut addrs = free_addrs(4);
    addrs.sort_by_key(|a| a.to_string());
    let mut nodes = Vec::new();
    let mut referrals = Vec::new();
    for &addr in &addrs {
        let r = Arc::new(Racing {
            me: addr.to_string(),
            sites: addrs.iter().copied().filter(|&a| a != addr).collect(),
            located: Default::default(),
            waited: Default::default(),
        });
        referrals.push(r.clone());
        let cfg = NodeConfig {
            origin: format!("http://{}", origin.addr),
            hoc_size: 16 << 20,
            sites: Some(Sites(r)),
            ..NodeConfig::default()
        };
        nodes.push(Node::start(addr, cfg).await.unwrap());
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
        .expect("sites filling down a chain waited for each other");
    for r in &got {
        assert_eq!((r.status, r.body.len()), (200, 40000));
        assert_eq!(r.body, got[0].body);
    }
    assert_eq!(
        origin.requests(),
        1,
        "only the last site went to the origin"
    );
    for (i, n) in nodes.iter().enumerate() {
        let stats = fetch(n.admin_addr().unwrap(), "GET", "/_ecdn/stats").await;
        let v: serde_json::Value = serde_json::from_slice(&stats.body).unwrap();
        let last = i == nodes.len() - 1;
        assert_eq!(v["site_fills"], u64::from(!last), "site {i}");
        assert_eq!(v["site_origin_unreferred"], u64::from(last), "site {i}");
        let waited = referrals[i]
            .waited
            .load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(waited, 1, "site {i} looked again once");
    }
    for n in nodes {
        n.stop().await.unwrap();
    }
    origin.stop().await.unwrap();
}
