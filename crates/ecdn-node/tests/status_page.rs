//! The status page: its data endpoint says what `/_ecdn/metrics` says, and the page, loaded in
//! a real browser (Debian's headless Chromium), shows the figures of that data.
//!
//! The browser test needs `chromium` (`.ci/run` installs it); without it the test fails and
//! says so. With `ECDN_STATUS_SCREENSHOT=PATH` it also keeps its screenshot there (how
//! `docs/status-node.png` was made).

mod common;
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
    panic!("this test needs Debian's chromium (apt-get install chromium; .ci/run installs it)");
}

/// Runs headless Chromium on `url` with `args` (its own profile directory, no sandbox as root
/// in a container), killing it and its children after 90 s; its standard output.
fn headless(url: &str, profile: &Path, args: &[&str]) -> String {
    use std::os::unix::process::CommandExt;
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
        .process_group(0)
        .spawn()
        .expect("starting chromium");
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut out, &mut s).ok();
        s
    });
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = Command::new("kill")
                .args(["-9", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            panic!("chromium did not finish {url} within 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Its helpers (renderer, GPU process) share its process group.
    let _ = Command::new("kill")
        .args(["-9", &format!("-{}", child.id())])
        .stderr(Stdio::null())
        .status();
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
    let (u, p) = (url.clone(), dir.path().join("profile-1"));
    let arg = format!("--screenshot={}", shot.display());
    tokio::task::spawn_blocking(move || headless(&u, &p, &[&arg]))
        .await
        .unwrap();
    let (u, p) = (url.clone(), dir.path().join("profile-2"));
    let dom = tokio::task::spawn_blocking(move || headless(&u, &p, &["--dump-dom"]))
        .await
        .unwrap();
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
    if let Some(keep) = std::env::var_os("ECDN_STATUS_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
    n.stop().await.unwrap();
    o.stop().await.unwrap();
}
