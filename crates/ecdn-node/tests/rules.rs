//! The caching rules of RFC 9111 / 9110 / 9213 that an edge is expected to have, each checked
//! with curl over HTTP/1.1 and over HTTP/2 (h2c with prior knowledge, the same request path
//! as HTTP/2 over TLS); and an origin's `103 Early Hints`, dropped and never stored.

use std::net::SocketAddr;
use std::process::Command;

use ecdn_node::node::{Node, NodeConfig, RunningNode};
use ecdn_node::origin::{Origin, OriginConfig, LAST_MODIFIED};

/// The protocols every rule is checked over: curl's flag and the status line's prefix.
const PROTOCOLS: [(&str, &str); 2] = [
    ("--http1.1", "http/1.1 "),
    ("--http2-prior-knowledge", "http/2 "),
];

struct Bed {
    origin: Origin,
    node: RunningNode,
}

impl Bed {
    async fn start(cfg: NodeConfig) -> Bed {
        let origin = Origin::start("127.0.0.1:0".parse().unwrap(), OriginConfig::default())
            .await
            .unwrap();
        let cfg = NodeConfig {
            origin: format!("http://{}", origin.addr),
            hoc_size: 16 << 20,
            hoc_policy: "lru".into(),
            h2c: true,
            ..cfg
        };
        let node = Node::start("127.0.0.1:0".parse().unwrap(), cfg)
            .await
            .unwrap();
        Bed { origin, node }
    }

    async fn stop(self) {
        self.node.stop().await.unwrap();
        self.origin.stop().await.unwrap();
    }
}

/// One answer as curl saw it: status, the head in lower case, the body.
#[derive(Debug)]
struct Answer {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            (n.trim() == name).then(|| v.trim())
        })
    }
}

/// curl `flag` to the node: `method path` with `headers`.
async fn curl(node: SocketAddr, flag: &str, method: &str, path: &str, headers: &[&str]) -> Answer {
    let (flag, method, url) = (
        flag.to_string(),
        method.to_string(),
        format!("http://{node}{path}"),
    );
    let headers: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let dir = tempfile::tempdir().unwrap();
        let (head, body) = (dir.path().join("head"), dir.path().join("body"));
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", &flag, "-X", &method, "--max-time", "10"])
            .args(["-D", head.to_str().unwrap(), "-o", body.to_str().unwrap()]);
        if method == "HEAD" {
            cmd.arg("-I");
        }
        for h in &headers {
            cmd.args(["-H", h]);
        }
        let out = cmd
            .arg(&url)
            .output()
            .expect("curl is needed (Debian: curl)");
        assert!(out.status.success(), "curl {url}: {out:?}");
        let head = std::fs::read_to_string(&head).unwrap().to_ascii_lowercase();
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        Answer {
            status,
            head,
            body: std::fs::read(&body).unwrap_or_default(),
        }
    })
    .await
    .unwrap()
}

/// A fresh stored response answers matching conditions with `304` and no body: an
/// `If-None-Match` with its tag (strong or weak, in a list, or `*`), or an
/// `If-Modified-Since` not before its `Last-Modified`. Other tags, earlier or invalid dates,
/// and an `If-None-Match` that fails even with a matching `If-Modified-Since`, get the `200`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_requests_get_304_from_the_cache() {
    let bed = Bed::start(NodeConfig::default()).await;
    for (n, (flag, line)) in PROTOCOLS.iter().enumerate() {
        let path = format!("/obj/cond{n}?size=1000");
        let first = curl(bed.node.addr, flag, "GET", &path, &[]).await;
        assert!(first.head.starts_with(line), "{}", first.head);
        let etag = first.header("etag").unwrap().to_string();
        let weak = format!("W/{etag}");
        let cases: Vec<(String, u16)> = vec![
            (format!("If-None-Match: {etag}"), 304),
            (format!("If-None-Match: \"other\", {weak}"), 304),
            ("If-None-Match: *".into(), 304),
            ("If-None-Match: \"other\"".into(), 200),
            (format!("If-Modified-Since: {LAST_MODIFIED}"), 304),
            (
                "If-Modified-Since: Wed, 31 Dec 2025 00:00:00 GMT".into(),
                200,
            ),
            ("If-Modified-Since: yesterday".into(), 200),
        ];
        for (condition, want) in cases {
            let a = curl(bed.node.addr, flag, "GET", &path, &[&condition]).await;
            assert_eq!(a.status, want, "{flag} {condition}: {}", a.head);
            assert_eq!(a.header("x-cache"), Some("hit-hoc"), "{condition}");
            if want == 304 {
                assert!(a.body.is_empty());
                assert_eq!(a.header("etag"), Some(etag.as_str()));
                assert!(a.header("age").is_some());
            } else {
                assert_eq!(a.body.len(), 1000);
            }
        }
        let both = [
            "If-None-Match: \"other\"".to_string(),
            format!("If-Modified-Since: {LAST_MODIFIED}"),
        ];
        let both: Vec<&str> = both.iter().map(String::as_str).collect();
        assert_eq!(
            curl(bed.node.addr, flag, "GET", &path, &both).await.status,
            200
        );
    }
    assert_eq!(
        bed.origin.requests(),
        2,
        "every conditional was answered by the cache"
    );
    bed.stop().await;
}

/// Statuses other than `200` are stored when the rules allow: any with an explicit lifetime
/// (a `404`, a `204`, even a `503`), replayed with their status; without one, a `503` or a
/// `302` is not stored (no heuristic for them, and no `Last-Modified` to base one on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_statuses_are_stored_by_the_rules() {
    let bed = Bed::start(NodeConfig::default()).await;
    let mut expected = 0;
    for (n, (flag, _)) in PROTOCOLS.iter().enumerate() {
        for (status, cc, stored) in [
            (404, "&cc=max-age%3D60", true),
            (204, "&cc=max-age%3D60", true),
            (503, "&cc=max-age%3D60", true),
            (410, "&cc=public%2C%20max-age%3D60", true),
            (503, "", false),
            (302, "", false),
        ] {
            let path = format!("/obj/s{n}-{status}{}?status={status}{cc}", cc.len());
            let first = curl(bed.node.addr, flag, "GET", &path, &[]).await;
            let second = curl(bed.node.addr, flag, "GET", &path, &[]).await;
            assert_eq!((first.status, second.status), (status, status), "{path}");
            let want = if stored { "hit-hoc" } else { "miss" };
            assert_eq!(second.header("x-cache"), Some(want), "{flag} {path}");
            expected += if stored { 1 } else { 2 };
        }
    }
    assert_eq!(bed.origin.requests(), expected);
    bed.stop().await;
}

/// `Authorization` (RFC 9111 §3.5): a stored response answers such a request only if it has
/// `public`, `must-revalidate` or `s-maxage`, and the answer to such a request is stored only
/// if it has one of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_is_served_from_cache_only_as_allowed() {
    let bed = Bed::start(NodeConfig::default()).await;
    let auth = "Authorization: Bearer secret";
    for (n, (flag, _)) in PROTOCOLS.iter().enumerate() {
        let get = |path: String, headers: Vec<&'static str>| {
            let addr = bed.node.addr;
            async move {
                curl(addr, flag, "GET", &path, &headers)
                    .await
                    .header("x-cache")
                    .unwrap_or("")
                    .to_string()
            }
        };
        // Stored for everyone, then asked with credentials.
        for (cc, with_auth) in [
            ("max-age%3D60", "miss"),
            ("public%2C%20max-age%3D60", "hit-hoc"),
            ("s-maxage%3D60", "hit-hoc"),
            ("max-age%3D60%2C%20must-revalidate", "hit-hoc"),
        ] {
            let path = format!("/obj/a{n}?size=100&cc={cc}");
            assert_eq!(get(path.clone(), vec![]).await, "miss");
            assert_eq!(
                get(path.clone(), vec![auth]).await,
                with_auth,
                "{flag} {cc}"
            );
            assert_eq!(get(path, vec![]).await, "hit-hoc", "{cc}");
        }
        // Fetched with credentials first: stored only when the answer allows sharing it.
        for (cc, after) in [("max-age%3D60", "miss"), ("s-maxage%3D60", "hit-hoc")] {
            let path = format!("/obj/b{n}?size=100&cc={cc}");
            assert_eq!(get(path.clone(), vec![auth]).await, "miss");
            assert_eq!(get(path, vec![]).await, after, "{flag} {cc}");
        }
    }
    bed.stop().await;
}

/// The request's `stale-if-error=N` (RFC 5861 §4): when the origin is gone, a stale entry
/// answers a request that allows it (`X-Cache: STALE`), not one that does not, nor one
/// whose N is shorter than the entry's staleness.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_requests_stale_if_error_serves_stale_when_the_origin_is_gone() {
    let Bed { origin, node } = Bed::start(NodeConfig::default()).await;
    let paths: Vec<String> = (0..PROTOCOLS.len())
        .map(|n| format!("/obj/e{n}?size=700&cc=max-age%3D1"))
        .collect();
    for ((flag, _), path) in PROTOCOLS.iter().zip(&paths) {
        assert_eq!(curl(node.addr, flag, "GET", path, &[]).await.status, 200);
    }
    origin.stop().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(2200)).await;
    for ((flag, _), path) in PROTOCOLS.iter().zip(&paths) {
        let a = curl(
            node.addr,
            flag,
            "GET",
            path,
            &["Cache-Control: stale-if-error=60"],
        )
        .await;
        assert_eq!(
            (a.status, a.header("x-cache")),
            (200, Some("stale")),
            "{flag}"
        );
        assert_eq!(a.body.len(), 700);
        let a = curl(node.addr, flag, "GET", path, &[]).await;
        assert!(a.status >= 500, "{flag}: {}", a.head);
        let a = curl(
            node.addr,
            flag,
            "GET",
            path,
            &["Cache-Control: stale-if-error=0"],
        )
        .await;
        assert!(
            a.status >= 500,
            "{flag}: stale by a second, more than 0: {}",
            a.head
        );
    }
    node.stop().await.unwrap();
}

/// `CDN-Cache-Control` and the node's own `Ecdn-Cache-Control` (RFC 9213): the first valid
/// one takes the place of `Cache-Control` for this cache, and neither reaches the client,
/// who gets the origin's `Cache-Control`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn targeted_cache_control_rules_this_cache_and_is_not_forwarded() {
    let bed = Bed::start(NodeConfig::default()).await;
    for (n, (flag, _)) in PROTOCOLS.iter().enumerate() {
        for (query, stored, why) in [
            (
                "cc=no-store&cdn-cc=max-age%3D60",
                true,
                "CDN-Cache-Control over no-store",
            ),
            (
                "cc=max-age%3D60&cdn-cc=max-age%3D60&ecdn-cc=no-store",
                false,
                "the node's own field first",
            ),
            (
                "cc=max-age%3D60&ecdn-cc=Max-Age%3D60&cdn-cc=no-store",
                false,
                "an invalid own field is ignored: CDN-Cache-Control applies",
            ),
            (
                "cc=max-age%3D60&cdn-cc=private",
                false,
                "private for the CDN",
            ),
        ] {
            let path = format!("/obj/t{n}-{}?size=300&{query}", query.len());
            let first = curl(bed.node.addr, flag, "GET", &path, &[]).await;
            assert_eq!(first.status, 200);
            for field in [
                "cdn-cache-control",
                "ecdn-cache-control",
                "x-ecdn-effective-cache-control",
            ] {
                assert!(
                    first.header(field).is_none(),
                    "{why}: {field} forwarded: {}",
                    first.head
                );
            }
            assert!(first.header("cache-control").is_some(), "{why}");
            let second = curl(bed.node.addr, flag, "GET", &path, &[]).await;
            let want = if stored { "hit-hoc" } else { "miss" };
            assert_eq!(second.header("x-cache"), Some(want), "{flag}: {why}");
            assert!(second.header("x-ecdn-effective-cache-control").is_none());
        }
    }
    bed.stop().await;
}

/// Strict parsing of what decides freshness: `Age` takes a list's first member (so
/// `Age: 3600, 0` with `max-age=3600` is stale at once and revalidated), and an `Expires`
/// that is not one valid IMF-fixdate (a one-digit hour, or two `Expires` lines) means
/// already expired, with no heuristic lifetime from `Last-Modified` instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_age_and_expires_are_read_strictly() {
    let bed = Bed::start(NodeConfig::default()).await;
    let later = "Sun, 06 Nov 2050 08:49:37 GMT";
    for (n, (flag, _)) in PROTOCOLS.iter().enumerate() {
        for (query, second, why) in [
            ("cc=max-age%3D3600&h=Age%3A3600%2C%200", "revalidated", "a list's first member"),
            ("cc=max-age%3D3600&h=Age%3A0%2C%203600", "hit-hoc", "a list's first member"),
            ("cc=max-age%3D3600&h=Age%3Aabc", "hit-hoc", "junk is ignored"),
            ("cc=&h=Expires%3ASun%2C%2006%20Nov%202050%208%3A49%3A37%20GMT", "miss", "one-digit hour"),
            ("cc=&h=Expires%3ASun%2C%2006%20Nov%202050%2008%3A49%3A37%20GMT", "hit-hoc", "valid"),
            (
                "cc=&h=Expires%3ASun%2C%2006%20Nov%202050%2008%3A49%3A37%20GMT&h=Expires%3ASun%2C%2006%20Nov%202050%2008%3A49%3A37%20GMT",
                "miss",
                "two Expires lines",
            ),
        ] {
            let path = format!("/obj/p{n}-{}?size=400&{query}", query.len());
            assert_eq!(curl(bed.node.addr, flag, "GET", &path, &[]).await.status, 200);
            let a = curl(bed.node.addr, flag, "GET", &path, &[]).await;
            assert_eq!(a.header("x-cache"), Some(second), "{flag} {why}: {query} {later}");
        }
    }
    bed.stop().await;
}

/// `Set-Cookie` is stored and replayed as received; `no-cache="set-cookie"` keeps the rest
/// of the response and withholds the cookie; `--no-store-set-cookie` keeps such responses
/// out of the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_cookie_is_stored_as_received_unless_withheld() {
    let cookie = "h=Set-Cookie%3Aid%3D1%3B%20Path%3D%2F%3B%20HttpOnly";
    let bed = Bed::start(NodeConfig::default()).await;
    for (n, (flag, _)) in PROTOCOLS.iter().enumerate() {
        let path = format!("/obj/k{n}?size=100&{cookie}");
        curl(bed.node.addr, flag, "GET", &path, &[]).await;
        let a = curl(bed.node.addr, flag, "GET", &path, &[]).await;
        assert_eq!(a.header("x-cache"), Some("hit-hoc"), "{flag}");
        assert_eq!(a.header("set-cookie"), Some("id=1; path=/; httponly"));
        let path =
            format!("/obj/w{n}?size=100&{cookie}&cc=max-age%3D60%2C%20no-cache%3D%22set-cookie%22");
        let first = curl(bed.node.addr, flag, "GET", &path, &[]).await;
        assert!(
            first.header("set-cookie").is_some(),
            "the fill passes it on"
        );
        let a = curl(bed.node.addr, flag, "GET", &path, &[]).await;
        assert_eq!(a.header("x-cache"), Some("hit-hoc"), "{flag}");
        assert_eq!(
            a.header("set-cookie"),
            None,
            "{flag}: withheld from the stored copy"
        );
    }
    bed.stop().await;
    let bed = Bed::start(NodeConfig {
        store_set_cookie: false,
        ..NodeConfig::default()
    })
    .await;
    let path = format!("/obj/k?size=100&{cookie}");
    curl(bed.node.addr, "--http1.1", "GET", &path, &[]).await;
    let a = curl(bed.node.addr, "--http1.1", "GET", &path, &[]).await;
    assert_eq!(a.header("x-cache"), Some("miss"));
    bed.stop().await;
}

/// Only a successful unsafe request invalidates: a `POST` answered `500` leaves the entry, one
/// answered `201` removes it and the entry of its `Location`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_successful_unsafe_requests_invalidate() {
    let bed = Bed::start(NodeConfig::default()).await;
    for (n, (flag, _)) in PROTOCOLS.iter().enumerate() {
        let (path, other) = (format!("/obj/i{n}?size=100"), format!("/obj/j{n}?size=100"));
        for p in [&path, &other] {
            curl(bed.node.addr, flag, "GET", p, &[]).await;
        }
        let x_cache = |p: String| {
            let addr = bed.node.addr;
            async move {
                curl(addr, flag, "GET", &p, &[])
                    .await
                    .header("x-cache")
                    .unwrap_or("")
                    .to_string()
            }
        };
        let failed = curl(
            bed.node.addr,
            flag,
            "POST",
            &path,
            &["X-Origin-Status: 500"],
        )
        .await;
        assert_eq!(failed.status, 500);
        assert_eq!(
            x_cache(path.clone()).await,
            "hit-hoc",
            "{flag}: a failed POST"
        );
        let location = format!("X-Origin-Location: {other}");
        let ok = curl(
            bed.node.addr,
            flag,
            "POST",
            &path,
            &["X-Origin-Status: 201", &location],
        )
        .await;
        assert_eq!(ok.status, 201);
        assert_eq!(x_cache(path).await, "miss", "{flag}: the URL");
        assert_eq!(x_cache(other).await, "miss", "{flag}: its Location");
    }
    bed.stop().await;
}

/// An origin that answers every request with a `103 Early Hints` before its `200`: the node
/// drops the interim response (RFC 8297 lets an intermediary; hyper's server cannot send one,
/// hyperium/hyper#4114), passes the final one, and stores only that: the second request is a
/// hit whose head carries neither the `103` nor its `Link`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn early_hints_from_the_origin_are_dropped_and_never_stored() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = listener.local_addr().unwrap();
    let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = served.clone();
    let origin_task = tokio::spawn(async move {
        loop {
            let (mut s, _) = listener.accept().await.unwrap();
            let count = count.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    let Ok(n) = s.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    head.extend_from_slice(&buf[..n]);
                    while let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                        head.drain(..end + 4);
                        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let answer = "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n\
                             HTTP/1.1 200 OK\r\nContent-Length: 5\r\nCache-Control: max-age=60\r\n\r\nhello";
                        if s.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    let cfg = NodeConfig {
        origin: format!("http://{origin}"),
        hoc_size: 16 << 20,
        hoc_policy: "lru".into(),
        h2c: true,
        ..NodeConfig::default()
    };
    let node = Node::start("127.0.0.1:0".parse().unwrap(), cfg)
        .await
        .unwrap();
    for (n, (flag, line)) in PROTOCOLS.iter().enumerate() {
        let path = format!("/hinted{n}");
        for want in ["miss", "hit-hoc"] {
            let a = curl(node.addr, flag, "GET", &path, &[]).await;
            assert!(a.head.starts_with(line), "{flag}: {}", a.head);
            assert_eq!(a.status, 200, "{flag}: {}", a.head);
            assert!(!a.head.contains(" 103"), "{flag}: {}", a.head);
            assert_eq!(a.header("link"), None, "{flag}: {}", a.head);
            assert_eq!(a.header("x-cache"), Some(want), "{flag}: {}", a.head);
            assert_eq!(a.body, b"hello");
        }
    }
    assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), 2);
    node.stop().await.unwrap();
    origin_task.abort();
}
