//! The status page: its data endpoint says what `/_ecdn/metrics` says, and the page, loaded in
//! a real browser (Debian's headless Chromium), shows the figures of that data.
//!
//! The browser test needs `chromium` (`./test.sh` installs it); without it the test fails and
//! says so. With `ECDN_STATUS_SCREENSHOT=DIR` the browser tests also keep their screenshots
//! there (how `docs/status-node.png` and `docs/status-cluster-node.png` were made).

mod common;
#[path = "common/cluster.rs"]
mod harness;
#[path = "common/prom.rs"]
mod prom;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{admin, fetch};
use ecdn_node::node::{Node, NodeConfig, RunningNode};
use ecdn_node::origin::{Origin, OriginConfig};
use prom::Scrape;

fn any() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// An origin and a node with a disk, and traffic on every cache tier: misses, HOC hits, disk
/// hits, an origin error, and admin paths refused on the client listener.
async fn busy_node(dir: &Path) -> (Origin, RunningNode) {
    let o = Origin::start(any(), OriginConfig::default()).await.unwrap();
    let n = Node::start(
        any(),
        NodeConfig {
            origin: format!("http://{}", o.addr),
            hoc_size: 1 << 20,
            disk_path: Some(dir.join("disk")),
            disk_size: 32 << 20,
            ..NodeConfig::default()
        },
    )
    .await
    .unwrap();
    for round in 0..3 {
        for i in 0..20 {
            // Small objects stay in the HOC; 1.5 MiB ones do not fit it and live on the disk.
            let size = if i % 4 == 0 {
                1536 << 10
            } else {
                3000 + i * 100
            };
            let r = fetch(n.addr, "GET", &format!("/obj/{i}?size={size}")).await;
            assert_eq!(r.status, 200, "round {round}, object {i}");
        }
    }
    assert_eq!(fetch(n.addr, "GET", "/_ecdn/stats").await.status, 404);
    assert_eq!(fetch(n.addr, "GET", "/_ecdn/status").await.status, 404);
    (o, n)
}

async fn status_json(n: &RunningNode) -> serde_json::Value {
    let r = fetch(admin(n), "GET", "/_ecdn/status.json").await;
    assert_eq!(r.status, 200);
    serde_json::from_slice(&r.body).unwrap()
}

/// Prometheus's `histogram_quantile` over the scraped buckets of one tier (seconds), written
/// apart from the node's own.
fn histogram_quantile(s: &Scrape, tier: &str, q: f64) -> Option<f64> {
    let mut buckets: Vec<(f64, f64)> = s
        .matching("ecdn_request_duration_seconds_bucket", &[("tier", tier)])
        .map(|x| {
            let le = &x.labels.iter().find(|(k, _)| k == "le").unwrap().1;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap()
            };
            (le, x.value)
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total = buckets.last()?.1;
    if total == 0.0 {
        return None;
    }
    let rank = q * total;
    let (mut lower, mut below) = (0.0, 0.0);
    for &(le, cumulative) in &buckets {
        if cumulative >= rank && cumulative > below {
            if le.is_infinite() {
                return Some(lower);
            }
            return Some(lower + (le - lower) * (rank - below) / (cumulative - below));
        }
        (lower, below) = (if le.is_infinite() { lower } else { le }, cumulative);
    }
    Some(lower)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_data_is_what_the_metrics_say() {
    let dir = tempfile::tempdir().unwrap();
    let (o, n) = busy_node(dir.path()).await;
    let d = status_json(&n).await;
    let m = Scrape::parse(
        std::str::from_utf8(&fetch(admin(&n), "GET", "/_ecdn/metrics").await.body).unwrap(),
    );
    assert_eq!(
        d["requests"].as_f64(),
        Some(m.one("ecdn_requests_total", &[]))
    );
    assert_eq!(d["requests"], 60);
    assert_eq!(
        d["bytes_served"].as_f64(),
        Some(m.one("ecdn_bytes_served_total", &[]))
    );
    assert_eq!(
        d["admin_refused"].as_f64(),
        Some(m.one("ecdn_admin_refused_total", &[]))
    );
    assert_eq!(d["admin_refused"], 2);
    assert_eq!(
        d["origin_errors"].as_f64(),
        Some(m.one("ecdn_origin_errors_total", &[]))
    );
    let tiers = d["tier_names"].as_array().unwrap();
    assert_eq!(tiers.len(), 9);
    for t in tiers {
        let t = t.as_str().unwrap();
        let count = m.one("ecdn_responses_total", &[("tier", t)]);
        assert_eq!(d["tiers"][t].as_f64(), Some(count), "{t}");
        assert_eq!(d["latency_ms"][t]["count"].as_f64(), Some(count), "{t}");
        for (name, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)] {
            let ours = d["latency_ms"][t][name].as_f64();
            let prom = histogram_quantile(&m, t, q).map(|s| s * 1000.0);
            match (ours, prom) {
                (Some(a), Some(b)) => assert!((a - b).abs() < 1e-9, "{t} {name}: {a} vs {b}"),
                (a, b) => assert_eq!(a, b, "{t} {name}"),
            }
        }
    }
    // Every tier a cache answers was exercised.
    for t in ["hoc", "disk", "miss"] {
        assert!(d["tiers"][t].as_u64().unwrap() > 0, "{t}: {d}");
    }
    let hits = d["tiers"]["hoc"].as_f64().unwrap() + d["tiers"]["disk"].as_f64().unwrap();
    assert_eq!(d["hit_ratio"].as_f64(), Some(hits / 60.0));
    assert_eq!(
        d["hoc"]["used"].as_f64(),
        Some(m.one("ecdn_hoc_used_bytes", &[]))
    );
    assert_eq!(
        d["disk"]["capacity"].as_f64(),
        Some(m.one("ecdn_disk_capacity_bytes", &[]))
    );
    let c = m.one("ecdn_adaptsize_c_bytes", &[]);
    if c.is_finite() {
        assert_eq!(d["adaptsize_c"].as_f64(), Some(c));
    } else {
        assert_eq!(
            (d["adaptsize_c"].is_null(), &d["adaptsize_admits_all"]),
            (true, &true.into())
        );
    }
    // One sample a second; the newest says what the counters said then.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let d = status_json(&n).await;
    let h = d["history"].as_array().unwrap();
    assert!(h.len() >= 2, "{h:?}");
    let last = h.last().unwrap();
    assert_eq!(last["requests"], 60);
    assert_eq!(last["tiers"][0], d["tiers"]["hoc"]);
    // `since`: only the samples after it.
    let t = h[h.len() - 2]["t_ms"].as_u64().unwrap();
    let uri = format!("/_ecdn/status.json?since={t}");
    let r = fetch(admin(&n), "GET", &uri).await;
    let newer: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let newer = newer["history"].as_array().unwrap();
    assert!(!newer.is_empty() && newer.len() < h.len(), "{newer:?}");
    assert!(newer.iter().all(|s| s["t_ms"].as_u64().unwrap() > t));
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

/// Debian's Chromium, or the test fails saying what to install.
fn chromium() -> PathBuf {
    for p in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if Path::new(p).exists() {
            return PathBuf::from(p);
        }
    }
    panic!("this test needs Debian's chromium (apt-get install chromium; ./test.sh installs it)");
}

/// Runs headless Chromium on `url` with `args` (its own profile directory, no sandbox as root
/// in a container), killed after 90 s (its helper processes end with it); its standard output.
fn headless(url: &str, profile: &Path, args: &[&str]) -> String {
    let mut child = Command::new(chromium())
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--window-size=1280,1400",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting chromium");
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut out, &mut s).ok();
        s
    });
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish {url} within 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().unwrap()
}

/// The text of the element carrying `data-k="key"` in a serialized DOM.
fn shown(dom: &str, key: &str) -> String {
    let at = dom
        .find(&format!("data-k=\"{key}\""))
        .unwrap_or_else(|| panic!("no element shows {key}"));
    let start = at + dom[at..].find('>').unwrap() + 1;
    let end = start + dom[start..].find('<').unwrap();
    dom[start..end].trim().to_string()
}

/// A figure as the page writes it: digits with thousands separators, or a decimal.
fn number(text: &str) -> f64 {
    let t: String = text
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    t.parse()
        .unwrap_or_else(|_| panic!("not a number: {text:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_in_a_browser_shows_the_data() {
    let browser = chromium();
    let dir = tempfile::tempdir().unwrap();
    let (o, n) = busy_node(dir.path()).await;
    // A few history samples, so the charts have lines.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let url = format!("http://{}/_ecdn/status", admin(&n));
    let shot = dir.path().join("status.png");
    let dom = screenshot_and_dom(&url, dir.path(), &shot).await;
    // No request since the page was drawn: the counters stand still.
    let d = status_json(&n).await;

    assert!(dom.contains("<h1>ecdn node</h1>"), "{browser:?}: {dom}");
    assert!(
        dom.contains("id=\"state\" class=\"\">updated"),
        "the page did not load its data: {dom}"
    );
    assert_eq!(
        number(&shown(&dom, "requests")),
        d["requests"].as_f64().unwrap()
    );
    for k in ["bytes_served", "admin_refused", "origin_errors"] {
        assert_eq!(number(&shown(&dom, k)), d[k].as_f64().unwrap(), "{k}");
    }
    let ratio = number(&shown(&dom, "hit_ratio"));
    assert!((ratio - 100.0 * d["hit_ratio"].as_f64().unwrap()).abs() < 0.051);
    for k in [
        "hoc.used",
        "hoc.capacity",
        "hoc.objects",
        "disk.used",
        "disk.objects",
    ] {
        let (a, b) = k.split_once('.').unwrap();
        assert_eq!(number(&shown(&dom, k)), d[a][b].as_f64().unwrap(), "{k}");
    }
    for t in d["tier_names"].as_array().unwrap() {
        let t = t.as_str().unwrap();
        let count = number(&shown(&dom, &format!("tiers.{t}")));
        assert_eq!(count, d["tiers"][t].as_f64().unwrap(), "{t}");
        for q in ["p50", "p90", "p99"] {
            let text = shown(&dom, &format!("latency_ms.{t}.{q}"));
            match d["latency_ms"][t][q].as_f64() {
                Some(v) => assert!((number(&text) - v).abs() < 0.0051, "{t} {q}: {text} vs {v}"),
                None => assert_eq!(text, "–", "{t} {q}"),
            }
        }
    }
    let png = std::fs::read(&shot).expect("the screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "{} bytes",
        png.len()
    );
    keep(&shot, "status-node.png");
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}

/// Copies a screenshot into `ECDN_STATUS_SCREENSHOT`'s directory, if set.
fn keep(shot: &Path, name: &str) {
    if let Some(dir) = std::env::var_os("ECDN_STATUS_SCREENSHOT") {
        std::fs::copy(shot, Path::new(&dir).join(name)).unwrap();
    }
}

/// Loads `url` headless twice: a screenshot into `shot`, then the DOM once its script ran.
async fn screenshot_and_dom(url: &str, dir: &Path, shot: &Path) -> String {
    let (u, p) = (url.to_string(), dir.join("profile-1"));
    let arg = format!("--screenshot={}", shot.display());
    tokio::task::spawn_blocking(move || headless(&u, &p, &[&arg]))
        .await
        .unwrap();
    let (u, p) = (url.to_string(), dir.join("profile-2"));
    tokio::task::spawn_blocking(move || headless(&u, &p, &["--dump-dom"]))
        .await
        .unwrap()
}

/// A cluster node's page: its cluster counters, the members and the bucket map as the node's
/// data has them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_node_s_page_shows_its_cluster() {
    chromium();
    let c = harness::TestCluster::start(4, "c2dn", 2, 1).await;
    // Replicated (10 KB) and coded (1 MB) objects, each fetched twice through two nodes.
    for round in 0..2 {
        for id in 0..12u64 {
            let size = if id % 3 == 0 { 1_000_000 } else { 10_000 };
            let at = c.client((id as usize + round) % 4);
            let r = fetch(at, "GET", &format!("/obj/{id}?size={size}")).await;
            assert_eq!(r.status, 200, "object {id}");
        }
    }
    let admin0 = c.admin(0);
    let url = format!("http://{admin0}/_ecdn/status");
    let dir = tempfile::tempdir().unwrap();
    let shot = dir.path().join("status.png");
    let dom = screenshot_and_dom(&url, dir.path(), &shot).await;
    let r = fetch(admin0, "GET", "/_ecdn/status.json").await;
    let d: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let cl = &d["cluster"];
    assert!(cl.is_object(), "{d}");
    // The data is the node's `/_ecdn/stats` cluster object.
    let s = fetch(admin0, "GET", "/_ecdn/stats").await;
    let s: serde_json::Value = serde_json::from_slice(&s.body).unwrap();
    assert_eq!(cl["counters"], s["cluster"]);
    assert!(dom.contains("id=\"state\" class=\"\">updated"), "{dom}");
    for k in [
        "epoch",
        "coded_hits",
        "replicated_hits",
        "decodes",
        "partial_hits",
        "peer_errors",
        "bytes_written",
        "relayed",
    ] {
        let text = shown(&dom, &format!("cluster.counters.{k}"));
        assert_eq!(number(&text), cl["counters"][k].as_f64().unwrap(), "{k}");
    }
    let scheme = shown(&dom, "cluster.counters.scheme");
    assert_eq!(scheme, cl["counters"]["scheme"].as_str().unwrap());
    assert_eq!(scheme, "c2dn-n3k2");
    assert_eq!(
        (shown(&dom, "cluster.k"), shown(&dom, "cluster.p")),
        ("2".into(), "1".into())
    );
    // One row per member, every one available; one grid cell per (node, bucket), coloured by
    // the node's role in the bucket.
    let members = &dom[dom.find("id=\"members\"").unwrap()..];
    let members = &members[..members.find("</table>").unwrap()];
    assert_eq!(members.matches("class=\"up\"").count(), 4, "{members}");
    let buckets = cl["buckets"].as_array().unwrap();
    let grid = &dom[dom.find("id=\"bucketgrid\"").unwrap()..];
    let grid = &grid[..grid.find("</section>").unwrap()];
    let count = |role: &str| {
        buckets
            .iter()
            .map(|b| b[role].as_array().unwrap().len())
            .sum::<usize>()
    };
    assert_eq!(grid.matches("<div class=\"d\">").count(), count("data"));
    assert_eq!(grid.matches("<div class=\"p\">").count(), count("parity"));
    assert_eq!(grid.matches("<div class=").count(), 4 * buckets.len() + 4);
    assert!(count("parity") > 0);
    keep(&shot, "status-cluster-node.png");
    c.stop_all().await;
}

/// The coordinator's page: a row per node with what that node's own stats say, the bucket
/// grid, and a node going down as an event; its admin listener's token rules.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_coordinator_s_page_shows_every_node() {
    chromium();
    let mut c = harness::TestCluster::start(4, "c2dn", 2, 1).await;
    for round in 0..2 {
        for id in 0..12u64 {
            let size = if id % 3 == 0 { 1_000_000 } else { 10_000 };
            let at = c.client((id as usize + round) % 4);
            let r = fetch(at, "GET", &format!("/obj/{id}?size={size}")).await;
            assert_eq!(r.status, 200, "object {id}");
        }
    }
    // Beyond loopback the listener needs a token; with one, the data needs it too.
    let wild = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    assert!(c.coordinator.serve_admin(wild, None).is_err());
    let wild = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let short = c.coordinator.serve_admin(wild, Some("t0k".into()));
    assert!(short.unwrap_err().to_string().contains("3 bytes"));
    let wild = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let port = c
        .coordinator
        .serve_admin(wild, Some("t0k-of-sixteen-bytes".into()))
        .unwrap()
        .port();
    let guarded = SocketAddr::from(([127, 0, 0, 1], port));
    assert_eq!(
        fetch(guarded, "GET", "/_ecdn/status.json").await.status,
        401
    );
    let ok = common::fetch_with(
        guarded,
        "GET",
        "/_ecdn/status.json",
        &[("authorization", "Bearer t0k-of-sixteen-bytes")],
    );
    assert_eq!(ok.await.status, 200);
    assert_eq!(fetch(guarded, "GET", "/_ecdn/status").await.status, 200);

    // Node 3 goes down: an event, and its row says so.
    c.stop(3).await;
    c.wait_available(&[true, true, true, false]).await;
    let listener = tokio::net::TcpListener::bind(any()).await.unwrap();
    let at = c.coordinator.serve_admin(listener, None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let shot = dir.path().join("status.png");
    let url = format!("http://{at}/_ecdn/status");
    let dom = screenshot_and_dom(&url, dir.path(), &shot).await;
    let d: serde_json::Value =
        serde_json::from_slice(&fetch(at, "GET", "/_ecdn/status.json").await.body).unwrap();
    assert!(dom.contains("id=\"state\" class=\"\">updated"), "{dom}");
    assert_eq!(
        shown(&dom, "status.epoch"),
        d["status"]["epoch"].to_string()
    );
    assert!(dom.contains(">3 / 4<"), "available nodes");
    // Each node's figures are its own stats (read by the test from the node itself).
    for i in 0..3 {
        let own = fetch(c.admin(i), "GET", "/_ecdn/stats").await;
        let own: serde_json::Value = serde_json::from_slice(&own.body).unwrap();
        assert_eq!(
            d["nodes"][i]["stats"]["cluster"], own["cluster"],
            "node {i}"
        );
        for f in [
            "bytes_written",
            "decodes",
            "partial_hits",
            "peer_errors",
            "coded_hits",
        ] {
            let cell = format!("data-node=\"{i}\" data-f=\"{f}\"");
            let at = dom.find(&cell).unwrap_or_else(|| panic!("no {cell}"));
            let text = &dom[at + cell.len() + 1..];
            let text = &text[..text.find('<').unwrap()];
            assert_eq!(
                number(text),
                own["cluster"][f].as_f64().unwrap(),
                "node {i} {f}"
            );
        }
    }
    assert!(d["nodes"][3]["error"].is_string(), "{}", d["nodes"][3]);
    assert!(dom.contains("(no stats)"));
    let rows = &dom[dom.find("id=\"nodes\"").unwrap()..];
    let rows = &rows[..rows.find("</table>").unwrap()];
    assert_eq!(rows.matches("class=\"up\"").count(), 3);
    assert_eq!(rows.matches("class=\"down\"").count(), 1);
    // The grid: every placed bucket of the map, and the event of node 3.
    let buckets = d["buckets"].as_array().unwrap();
    let placed: usize = buckets
        .iter()
        .map(|b| b["data"].as_array().unwrap().len() + b["parity"].as_array().unwrap().len())
        .sum();
    let grid = &dom[dom.find("id=\"bucketgrid\"").unwrap()..];
    let grid = &grid[..grid.find("</section>").unwrap()];
    let cells =
        grid.matches("<div class=\"d\">").count() + grid.matches("<div class=\"p\">").count();
    assert_eq!(cells, placed);
    let events = &dom[dom.find("id=\"events\"").unwrap()..];
    assert!(events.contains("node 3 unavailable"), "{events}");
    keep(&shot, "status-cluster.png");
    c.stop_all().await;
}
