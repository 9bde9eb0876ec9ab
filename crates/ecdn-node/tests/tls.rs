//! The TLS listener with real clients: curl over HTTP/2 and HTTP/1.1 (ALPN), certificates
//! picked by SNI (exact and wildcard names, the default otherwise), a certificate reloaded
//! while a connection made before it goes on, session resumption, h2c with prior knowledge,
//! clear errors for bad certificate files; the cache over HTTP/2, and HTTP/2's stream limit
//! with frames written by hand.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use ecdn_node::node::tls::{CertFiles, TlsSettings};
use ecdn_node::node::{Node, NodeConfig, RunningNode, TlsListen};
use ecdn_node::origin::{Origin, OriginConfig};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, ServerName};

/// A CA and the certificates it signs, written as PEM files in a temporary directory.
struct Pki {
    dir: tempfile::TempDir,
    ca: rcgen::Certificate,
    ca_key: rcgen::KeyPair,
}

impl Pki {
    fn new(name: &str) -> Pki {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca = params.self_signed(&ca_key).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
        Pki { dir, ca, ca_key }
    }

    fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    fn ca_der(&self) -> CertificateDer<'static> {
        self.ca.der().clone()
    }

    /// A certificate for `names`, signed by the CA, written as `<file>.pem` and
    /// `<file>.key` (or into `at` when given, to replace files in place).
    fn issue(&self, file: &str, names: &[&str], at: Option<&CertFiles>) -> CertFiles {
        let params =
            rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        let files = at.cloned().unwrap_or_else(|| CertFiles {
            cert: self.dir.path().join(format!("{file}.pem")),
            key: self.dir.path().join(format!("{file}.key")),
        });
        std::fs::write(&files.cert, cert.pem()).unwrap();
        std::fs::write(&files.key, key.serialize_pem()).unwrap();
        files
    }
}

async fn start(origin: &Origin, settings: TlsSettings, h2c: bool) -> RunningNode {
    let cfg = NodeConfig {
        origin: format!("http://{}", origin.addr),
        hoc_size: 16 << 20,
        tls: Some(TlsListen {
            addr: "127.0.0.1:0".parse().unwrap(),
            settings,
        }),
        h2c,
        ..NodeConfig::default()
    };
    Node::start("127.0.0.1:0".parse().unwrap(), cfg)
        .await
        .unwrap()
}

/// An origin whose answers take `latency`, and a node in front of it whose TLS side has one
/// certificate, for `h2.test` (with h2c on its plain listener when `h2c`).
async fn h2_bed(latency_ms: u64, h2c: bool) -> (Origin, Pki, RunningNode) {
    let cfg = OriginConfig {
        latency: std::time::Duration::from_millis(latency_ms),
        ..OriginConfig::default()
    };
    let origin = Origin::start("127.0.0.1:0".parse().unwrap(), cfg)
        .await
        .unwrap();
    let pki = Pki::new("CA");
    let settings = TlsSettings {
        default: pki.issue("h2", &["h2.test"], None),
        hosts: vec![],
    };
    let node = start(&origin, settings, h2c).await;
    (origin, pki, node)
}

/// curl for `https://HOST:PORT/PATH` resolved to the node, trusting `ca`: the HTTP version,
/// status, and the body's length; or curl's error.
fn curl(ca: &Path, tls: SocketAddr, host: &str, path: &str, flag: &str) -> Result<String, String> {
    let out = Command::new("curl")
        .args([
            "-sS",
            flag,
            "--cacert",
            ca.to_str().unwrap(),
            "--resolve",
            &format!("{host}:{}:127.0.0.1", tls.port()),
            "-o",
            "/dev/null",
            "-w",
            "%{http_version} %{response_code} %{size_download}",
            "--max-time",
            "10",
            &format!("https://{host}:{}{path}", tls.port()),
        ])
        .output()
        .expect("curl is needed (Debian: curl)");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).to_string())
    }
}

/// SNI picks the certificate (curl checks that it names the host it asked for); ALPN gives
/// HTTP/2 to `--http2` and HTTP/1.1 to `--http1.1`; the second request for an object is a
/// hit whichever protocol filled it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_gets_the_hosts_certificate_over_h2_and_http1() {
    let origin = Origin::start("127.0.0.1:0".parse().unwrap(), OriginConfig::default())
        .await
        .unwrap();
    let pki = Pki::new("ecdn test CA");
    let settings = TlsSettings {
        default: pki.issue("default", &["default.test"], None),
        hosts: vec![
            ("a.test".into(), pki.issue("a", &["a.test"], None)),
            ("*.w.test".into(), pki.issue("w", &["*.w.test"], None)),
        ],
    };
    let node = start(&origin, settings, false).await;
    let tls = node.tls_addr.unwrap();
    let ca = pki.ca_file();
    let path = "/obj/5?size=100000";
    let run = move |host: &'static str, flag: &'static str| {
        let ca = ca.clone();
        tokio::task::spawn_blocking(move || curl(&ca, tls, host, path, flag))
    };
    for (host, flag, want) in [
        ("a.test", "--http2", "2 200 100000"),
        ("a.test", "--http1.1", "1.1 200 100000"),
        ("x.w.test", "--http2", "2 200 100000"),
        ("default.test", "--http2", "2 200 100000"),
    ] {
        assert_eq!(
            run(host, flag).await.unwrap().unwrap(),
            want,
            "{host} {flag}"
        );
    }
    // A name with no certificate of its own gets the default one, which curl refuses.
    let err = run("b.test", "--http2").await.unwrap().unwrap_err();
    assert!(err.contains("SSL") || err.contains("certificate"), "{err}");
    // The cache key holds the host: one fill for each of the three; a.test's second
    // request, over HTTP/1.1, was a hit of the fill made over HTTP/2.
    assert_eq!(origin.requests(), 3);
    node.stop().await.unwrap();
    origin.stop().await.unwrap();
}

/// A TLS client of our own: rustls trusting `roots`, sharing `config` (and so its session
/// cache) across connections.
fn client_config(roots: &[CertificateDer<'static>], alpn: &[u8]) -> Arc<rustls::ClientConfig> {
    let mut store = rustls::RootCertStore::empty();
    for r in roots {
        store.add(r.clone()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(store)
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    Arc::new(config)
}

type Tls = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

async fn connect(
    config: &Arc<rustls::ClientConfig>,
    addr: SocketAddr,
    host: &str,
) -> std::io::Result<Tls> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = ServerName::try_from(host.to_string()).unwrap();
    tokio_rustls::TlsConnector::from(config.clone())
        .connect(name, tcp)
        .await
}

/// An HTTP/1.1 client on one TLS connection.
async fn http1<S>(
    stream: tokio_rustls::client::TlsStream<S>,
) -> hyper::client::conn::http1::SendRequest<Empty<Bytes>>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    send
}

async fn get(
    send: &mut hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
    host: &str,
    path: &str,
) -> (u16, usize) {
    let req = hyper::Request::get(path)
        .header("host", host)
        .body(Empty::new())
        .unwrap();
    let resp = send.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, body.len())
}

/// A certificate replaced on disk and reloaded: new connections get the new one (a client
/// trusting only the new CA connects, one trusting only the old fails), while a connection
/// opened before goes on serving requests. A second connection resumes the first's session;
/// a reload that finds a broken file changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reloaded_certificate_serves_new_connections_while_old_ones_go_on() {
    let origin = Origin::start("127.0.0.1:0".parse().unwrap(), OriginConfig::default())
        .await
        .unwrap();
    let (old_ca, new_ca) = (Pki::new("old CA"), Pki::new("new CA"));
    let files = old_ca.issue("site", &["site.test"], None);
    let settings = TlsSettings {
        default: files.clone(),
        hosts: vec![],
    };
    let node = start(&origin, settings, false).await;
    let tls = node.tls_addr.unwrap();
    let trusts_old = client_config(&[old_ca.ca_der()], b"http/1.1");
    let trusts_new = client_config(&[new_ca.ca_der()], b"http/1.1");

    let first = connect(&trusts_old, tls, "site.test").await.unwrap();
    assert_eq!(
        first.get_ref().1.handshake_kind(),
        Some(rustls::HandshakeKind::Full)
    );
    let mut old_conn = http1(first).await;
    assert_eq!(
        get(&mut old_conn, "site.test", "/obj/1?size=5000").await,
        (200, 5000)
    );
    // The same client again: the session is resumed.
    let again = connect(&trusts_old, tls, "site.test").await.unwrap();
    assert_eq!(
        again.get_ref().1.handshake_kind(),
        Some(rustls::HandshakeKind::Resumed)
    );
    drop(again);
    assert!(connect(&trusts_new, tls, "site.test").await.is_err());

    // Renewal: the new CA's certificate replaces the files, then the reload.
    new_ca.issue("site", &["site.test"], Some(&files));
    node.reload_tls().unwrap();
    let mut new_conn = http1(connect(&trusts_new, tls, "site.test").await.unwrap()).await;
    assert_eq!(
        get(&mut new_conn, "site.test", "/obj/2?size=7000").await,
        (200, 7000)
    );
    assert!(
        connect(
            &client_config(&[old_ca.ca_der()], b"http/1.1"),
            tls,
            "site.test"
        )
        .await
        .is_err(),
        "a new connection no longer gets the old certificate"
    );
    // The connection made before the reload goes on.
    assert_eq!(
        get(&mut old_conn, "site.test", "/obj/1?size=5000").await,
        (200, 5000)
    );

    // A broken file: the reload fails, naming it, and the node keeps the certificate it has.
    std::fs::write(&files.key, "not a key").unwrap();
    let err = node.reload_tls().unwrap_err().to_string();
    assert!(err.contains("site.key"), "{err}");
    assert!(connect(&trusts_new, tls, "site.test").await.is_ok());
    node.stop().await.unwrap();
    origin.stop().await.unwrap();
}

/// A missing file, a file with no certificate, and a key of another certificate are errors at
/// start that name the files.
#[tokio::test]
async fn bad_certificate_files_are_errors_at_start() {
    let origin = Origin::start("127.0.0.1:0".parse().unwrap(), OriginConfig::default())
        .await
        .unwrap();
    let pki = Pki::new("CA");
    let good = pki.issue("good", &["good.test"], None);
    let other = pki.issue("other", &["other.test"], None);
    let empty = pki.dir.path().join("empty.pem");
    std::fs::write(&empty, "").unwrap();
    let cases = [
        (
            CertFiles {
                cert: pki.dir.path().join("missing.pem"),
                key: good.key.clone(),
            },
            "missing.pem",
        ),
        (
            CertFiles {
                cert: empty.clone(),
                key: good.key.clone(),
            },
            "empty.pem",
        ),
        (
            CertFiles {
                cert: good.cert.clone(),
                key: other.key.clone(),
            },
            "other.key",
        ),
    ];
    for (files, named) in cases {
        let cfg = NodeConfig {
            origin: format!("http://{}", origin.addr),
            tls: Some(TlsListen {
                addr: "127.0.0.1:0".parse().unwrap(),
                settings: TlsSettings {
                    default: files,
                    hosts: vec![],
                },
            }),
            ..NodeConfig::default()
        };
        let err = Node::start("127.0.0.1:0".parse().unwrap(), cfg)
            .await
            .err()
            .expect("refused")
            .to_string();
        assert!(err.contains(named), "{named}: {err}");
    }
    origin.stop().await.unwrap();
}

/// h2c with prior knowledge on the plain listener (curl `--http2-prior-knowledge`), beside
/// HTTP/1.1 on the same port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_with_prior_knowledge_beside_http1() {
    let (origin, _pki, node) = h2_bed(0, true).await;
    let url = format!("http://{}/obj/9?size=3000", node.addr);
    let curl_plain = move |flag: &'static str| {
        let url = url.clone();
        tokio::task::spawn_blocking(move || {
            let out = Command::new("curl")
                .args([
                    "-sS",
                    flag,
                    "-o",
                    "/dev/null",
                    "-w",
                    "%{http_version} %{response_code} %{size_download}",
                    "--max-time",
                    "10",
                    &url,
                ])
                .output()
                .expect("curl is needed (Debian: curl)");
            assert!(out.status.success(), "{out:?}");
            String::from_utf8_lossy(&out.stdout).to_string()
        })
    };
    assert_eq!(
        curl_plain("--http2-prior-knowledge").await.unwrap(),
        "2 200 3000"
    );
    assert_eq!(curl_plain("--http1.1").await.unwrap(), "1.1 200 3000");
    node.stop().await.unwrap();
    origin.stop().await.unwrap();
}

/// curl over TLS to the node with `args`: the response heads (lower-case, of every response
/// curl saw) and the body, or curl's error.
fn curl_full(ca: &Path, tls: SocketAddr, host: &str, args: &[&str]) -> (String, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let (head, body) = (dir.path().join("head"), dir.path().join("body"));
    let mut cmd = Command::new("curl");
    cmd.args([
        "-sS",
        "--cacert",
        ca.to_str().unwrap(),
        "--resolve",
        &format!("{host}:{}:127.0.0.1", tls.port()),
        "-D",
        head.to_str().unwrap(),
        "-o",
        body.to_str().unwrap(),
        "--max-time",
        "20",
    ]);
    let out = cmd
        .args(args)
        .output()
        .expect("curl is needed (Debian: curl)");
    assert!(out.status.success(), "curl {args:?}: {out:?}");
    (
        std::fs::read_to_string(&head).unwrap().to_ascii_lowercase(),
        std::fs::read(&body).unwrap(),
    )
}

/// Over HTTP/2 the cache behaves as over HTTP/1.1: a streamed miss of a large object comes
/// whole; a range of a cached object is a 206 with the right bytes; Vary keeps one variant
/// per header value; a stale entry is revalidated with the origin (304) and served; and
/// five streams on one connection asking for the same missing object make one origin
/// request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_h2_the_cache_behaves_as_over_http1() {
    let (origin, pki, node) = h2_bed(300, false).await;
    let (tls, ca) = (node.tls_addr.unwrap(), pki.ca_file());
    let base = format!("https://h2.test:{}", tls.port());
    let run = move |args: Vec<String>| {
        let ca = ca.clone();
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            curl_full(&ca, tls, "h2.test", &args)
        })
    };
    let id = |name: &str| ecdn_node::content::object_id(name);

    // A streamed miss, then a range of the cached object.
    let (head, body) = run(vec!["--http2".into(), format!("{base}/obj/big?size=4MiB")])
        .await
        .unwrap();
    assert!(head.starts_with("http/2 200"), "{head}");
    assert_eq!(body, ecdn_node::content::bytes(id("big"), 0, 4 << 20));
    let (head, body) = run(vec![
        "--http2".into(),
        "-H".into(),
        "Range: bytes=1000-1999".into(),
        format!("{base}/obj/big?size=4MiB"),
    ])
    .await
    .unwrap();
    assert!(head.starts_with("http/2 206"), "{head}");
    assert!(
        head.contains("content-range: bytes 1000-1999/4194304"),
        "{head}"
    );
    assert_eq!(body, ecdn_node::content::bytes(id("big"), 1000, 1000));
    assert_eq!(origin.requests(), 1);

    // Vary: one variant per Accept-Language value.
    let vary = format!("{base}/obj/v?size=1000&vary=Accept-Language");
    for (lang, cache) in [("en", "miss"), ("fr", "miss"), ("en", "hit-hoc")] {
        let (head, _) = run(vec![
            "--http2".into(),
            "-H".into(),
            format!("Accept-Language: {lang}"),
            vary.clone(),
        ])
        .await
        .unwrap();
        assert!(
            head.contains(&format!("x-cache: {cache}\r\n")),
            "{lang}: {head}"
        );
    }
    assert_eq!(origin.requests(), 3);

    // Revalidation of a stale entry: the origin answers 304, the stored body is served.
    let stale = format!("{base}/obj/r?size=2000&cc=max-age%3D1");
    run(vec!["--http2".into(), stale.clone()]).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    let (head, body) = run(vec!["--http2".into(), stale]).await.unwrap();
    assert!(head.contains("x-cache: revalidated\r\n"), "{head}");
    assert_eq!(body, ecdn_node::content::bytes(id("r"), 0, 2000));
    assert_eq!(origin.requests(), 5);

    // Five streams on one connection for one missing object: one origin request.
    let same = format!("{base}/obj/c?size=50000");
    let mut args = vec![
        "--http2".to_string(),
        "--parallel".into(),
        "--parallel-immediate".into(),
        "--parallel-max".into(),
        "5".into(),
    ];
    args.extend(std::iter::repeat_n(same, 5));
    let (head, body) = run(args).await.unwrap();
    assert_eq!(head.matches("http/2 200").count(), 5, "{head}");
    assert_eq!(head.matches("content-length: 50000").count(), 5, "{head}");
    assert_eq!(head.matches("x-cache: miss-collapsed").count(), 4, "{head}");
    assert_eq!(body, ecdn_node::content::bytes(id("c"), 0, 50_000));
    assert_eq!(
        origin.requests(),
        6,
        "the five streams made one origin request"
    );
    node.stop().await.unwrap();
    origin.stop().await.unwrap();
}

/// HTTP/2 frames by hand, for the limits: the client preface and an empty SETTINGS.
fn h2_preface() -> Vec<u8> {
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend_from_slice(&[0, 0, 0, 0x4, 0, 0, 0, 0, 0]);
    out
}

/// A HEADERS frame (END_HEADERS | END_STREAM) for `GET path` on `stream`, HPACK-coded with
/// the static table and literals without indexing.
fn h2_get(stream: u32, path: &str) -> Vec<u8> {
    let mut block = vec![0x82, 0x86]; // :method GET, :scheme http
    block.push(0x04); // :path, literal without indexing (name index 4)
    block.push(path.len() as u8);
    block.extend_from_slice(path.as_bytes());
    block.push(0x01); // :authority (name index 1)
    block.push(7);
    block.extend_from_slice(b"h2.test");
    let mut frame = (block.len() as u32).to_be_bytes()[1..].to_vec();
    frame.extend_from_slice(&[0x1, 0x5]);
    frame.extend_from_slice(&stream.to_be_bytes());
    frame.extend_from_slice(&block);
    frame
}

/// The frames in a server's bytes: (type, stream, payload).
fn h2_frames(mut b: &[u8]) -> Vec<(u8, u32, Vec<u8>)> {
    let mut out = Vec::new();
    while b.len() >= 9 {
        let len = u32::from_be_bytes([0, b[0], b[1], b[2]]) as usize;
        if b.len() < 9 + len {
            break;
        }
        let stream = u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff;
        out.push((b[3], stream, b[9..9 + len].to_vec()));
        b = &b[9 + len..];
    }
    out
}

/// The HTTP/2 stream limit holds: a client that opens 150 streams at once while the origin
/// is slow gets the first 100 served and the rest refused (RST_STREAM REFUSED_STREAM, which a
/// client may retry), and the connection is not closed for it (no GOAWAY).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_streams_beyond_the_limit_are_refused() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (origin, _pki, node) = h2_bed(500, true).await;
    let mut conn = tokio::net::TcpStream::connect(node.addr).await.unwrap();
    let mut out = h2_preface();
    for i in 0..150u32 {
        out.extend_from_slice(&h2_get(1 + 2 * i, &format!("/obj/s{i}?size=10")));
    }
    conn.write_all(&out).await.unwrap();
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let frames = h2_frames(&got);
        let done = frames
            .iter()
            .filter(|(t, _, p)| (*t == 0x0 && !p.is_empty()) || *t == 0x3);
        if done.count() >= 150 {
            break;
        }
        match tokio::time::timeout_at(deadline, conn.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => got.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    let frames = h2_frames(&got);
    let refused = frames
        .iter()
        .filter(|(t, _, p)| *t == 0x3 && p.as_slice() == [0, 0, 0, 7])
        .count();
    let answered = frames
        .iter()
        .filter(|(t, _, _)| *t == 0x1)
        .map(|(_, s, _)| *s)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    assert_eq!((answered, refused), (100, 50), "{} frames", frames.len());
    assert!(frames.iter().all(|(t, _, _)| *t != 0x7), "no GOAWAY");
    drop(conn);
    node.stop().await.unwrap();
    origin.stop().await.unwrap();
}

/// "Rapid reset" (CVE-2023-44487): a client that opens and at once resets streams, over and
/// over, is sent GOAWAY (ENHANCE_YOUR_CALM) and cut off, instead of keeping the node busy
/// starting requests nobody waits for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_rapid_reset_is_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (origin, _pki, node) = h2_bed(0, true).await;
    let mut conn = tokio::net::TcpStream::connect(node.addr).await.unwrap();
    let mut out = h2_preface();
    for i in 0..2000u32 {
        let stream = 1 + 2 * i;
        out.extend_from_slice(&h2_get(stream, &format!("/obj/r{i}?size=10")));
        // RST_STREAM CANCEL.
        out.extend_from_slice(&[0, 0, 4, 0x3, 0]);
        out.extend_from_slice(&stream.to_be_bytes());
        out.extend_from_slice(&[0, 0, 0, 8]);
    }
    // The node may close before it has read everything.
    let _ = conn.write_all(&out).await;
    let mut got = Vec::new();
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        conn.read_to_end(&mut got),
    )
    .await;
    let frames = h2_frames(&got);
    let goaway = frames.iter().find(|(t, _, _)| *t == 0x7);
    let code = goaway.map(|(_, _, p)| u32::from_be_bytes([p[4], p[5], p[6], p[7]]));
    assert_eq!(
        code,
        Some(0xb),
        "GOAWAY ENHANCE_YOUR_CALM; {} frames",
        frames.len()
    );
    assert!(
        origin.requests() < 2000,
        "the origin saw {} of the 2000 reset requests",
        origin.requests()
    );
    drop(conn);
    node.stop().await.unwrap();
    origin.stop().await.unwrap();
}

/// What the node writes to one connection, counted below TLS: the writes (each a system call
/// on a socket) and the TLS records in them.
#[derive(Default)]
struct Wire {
    writes: usize,
    records: usize,
    /// The record header being read (5 bytes), then the body's bytes still to skip.
    header: Vec<u8>,
    skip: usize,
}

impl Wire {
    fn saw(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(bytes.len());
                self.skip -= n;
                bytes = &bytes[n..];
                continue;
            }
            let n = (5 - self.header.len()).min(bytes.len());
            self.header.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            if self.header.len() == 5 {
                self.records += 1;
                self.skip = usize::from(u16::from_be_bytes([self.header[3], self.header[4]]));
                self.header.clear();
            }
        }
    }
}

/// The server's end of an in-memory connection, counting what is written to it.
struct Counted {
    io: tokio::io::DuplexStream,
    wire: Arc<std::sync::Mutex<Wire>>,
}

impl tokio::io::AsyncRead for Counted {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Counted {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let done = std::pin::Pin::new(&mut self.io).poll_write(cx, buf);
        if let std::task::Poll::Ready(Ok(n)) = done {
            let mut wire = self.wire.lock().unwrap();
            wire.writes += 1;
            wire.saw(&buf[..n]);
        }
        done
    }

    fn poll_write_vectored(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        // One write, as `writev` is one system call.
        let all: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
        self.poll_write(cx, &all)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// A TLS connection to `node` over memory, negotiating `alpn`, whose server side counts its
/// writes and records.
async fn counted_tls(
    node: &RunningNode,
    pki: &Pki,
    alpn: &[u8],
) -> (
    tokio_rustls::client::TlsStream<tokio::io::DuplexStream>,
    Arc<std::sync::Mutex<Wire>>,
) {
    let (client, server) = tokio::io::duplex(1 << 20);
    let wire = Arc::new(std::sync::Mutex::new(Wire::default()));
    let counted = Counted {
        io: server,
        wire: wire.clone(),
    };
    tokio::spawn(node.serve_io_as(
        counted,
        "127.0.0.1:1".parse().unwrap(),
        ecdn_node::node::Speak::Tls,
    ));
    let name = ServerName::try_from("h2.test").unwrap();
    let tls = tokio_rustls::TlsConnector::from(client_config(&[pki.ca_der()], alpn))
        .connect(name, client)
        .await
        .unwrap();
    (tls, wire)
}

/// (writes, records) so far.
fn counts(wire: &std::sync::Mutex<Wire>) -> (usize, usize) {
    let w = wire.lock().unwrap();
    (w.writes, w.records)
}

/// A 1 KiB hit costs one write and one TLS record over HTTPS/1.1, and ten of them asked at once
/// over HTTP/2 go out together: at most two writes and two records, where each response was a
/// write and a record of its own before the node gathered a connection's writes.
#[tokio::test(flavor = "current_thread")]
async fn small_hits_cost_one_write_and_one_record_and_h2_batches_share_them() {
    let (origin, pki, node) = h2_bed(0, false).await;
    let path = "/obj/7?size=1024";

    let (tls, wire) = counted_tls(&node, &pki, b"http/1.1").await;
    let mut h1 = http1(tls).await;
    assert_eq!(get(&mut h1, "h2.test", path).await, (200, 1024), "the fill");
    let before = counts(&wire);
    for _ in 0..20 {
        assert_eq!(get(&mut h1, "h2.test", path).await, (200, 1024));
    }
    let after = counts(&wire);
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (20, 20),
        "HTTPS/1.1: writes and records for 20 hits"
    );

    let (tls, wire) = counted_tls(&node, &pki, b"h2").await;
    let (mut h2, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        TokioIo::new(tls),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let request = || {
        hyper::Request::get(format!("https://h2.test{path}"))
            .body(Empty::<Bytes>::new())
            .unwrap()
    };
    // The connection's settings and a first answer, before counting.
    let first = h2.send_request(request()).await.unwrap();
    assert_eq!(
        first.into_body().collect().await.unwrap().to_bytes().len(),
        1024
    );
    h2.ready().await.unwrap();
    let before = counts(&wire);
    let sent: Vec<_> = (0..10).map(|_| h2.send_request(request())).collect();
    for answer in sent {
        let answer = answer.await.unwrap();
        assert_eq!(answer.status(), 200);
        assert_eq!(
            answer.into_body().collect().await.unwrap().to_bytes().len(),
            1024
        );
    }
    let after = counts(&wire);
    let (writes, records) = (after.0 - before.0, after.1 - before.1);
    assert!(
        writes <= 2 && records <= 2,
        "HTTP/2: {writes} writes and {records} records for 10 hits asked at once"
    );
    drop(h1);
    node.stop().await.unwrap();
    origin.stop().await.unwrap();
}
