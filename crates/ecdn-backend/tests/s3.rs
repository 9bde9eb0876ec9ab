//! The backend tier against S3-compatible servers: the emulator (`ecdn_backend::emulator`),
//! and moto's server (`moto_server`, a real S3 implementation from PyPI, `pip install
//! 'moto[server]'`; `./test.sh` installs it). Coded and plain objects round trip through the
//! S3 client and the proxy, ranges come back right, corrupt strips are caught, and the
//! emulator's delays follow its model.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ecdn_backend::emulator::{DelaySource, Emulator, EmulatorConfig};
use ecdn_backend::model::DelayModel;
use ecdn_backend::proxy::{Proxy, ProxyConfig, ProxyError};
use ecdn_backend::store::{S3Config, S3Store, Store};
use ecdn_backend::strips::{self, MANIFEST_KEY};
use ecdn_backend::tofec::Strategy;
use ecdn_codec::CodecCache;

fn data(seed: u64, len: usize) -> Bytes {
    let mut rng = ecdn_trace::Rng::new(seed);
    Bytes::from((0..len).map(|_| rng.next_u64() as u8).collect::<Vec<u8>>())
}

fn s3(endpoint: &str, bucket: &str) -> S3Store {
    s3_trusting(endpoint, bucket, None)
}

fn s3_trusting(endpoint: &str, bucket: &str, ca: Option<&std::path::Path>) -> S3Store {
    let cfg = S3Config {
        bucket: bucket.into(),
        prefix: "ecdn-test".into(),
        endpoint: Some(endpoint.into()),
        region: Some("us-east-1".into()),
        access_key_id: Some("testing".into()),
        secret_access_key: Some("testing".into()),
        session_token: None,
        ca_bundle: ca.map(Into::into),
    };
    S3Store::new(&cfg, Duration::from_secs(10)).unwrap()
}

fn proxy(store: Arc<dyn Store>, strategy: Strategy) -> Proxy {
    let cfg = ProxyConfig {
        strategy,
        task_timeout: Duration::from_secs(10),
        // Small parts, so that writes use the code asked (moto runs with
        // S3_UPLOAD_PART_MIN_SIZE=1, the emulator here with no minimum).
        min_part: 0,
        ..ProxyConfig::default()
    };
    Proxy::start(store, cfg)
}

/// What every S3-compatible server must do for the tier.
async fn round_trips(store: Arc<dyn Store>) {
    // Coded objects, written with a multipart upload, read with several codes.
    for (i, len) in [1usize, 999, 250_001].into_iter().enumerate() {
        let d = data(i as u64, len);
        let key = format!("coded/{i}");
        let w = proxy(store.clone(), Strategy::Static { n: 4, k: 2 })
            .write(&key, d.clone())
            .await
            .unwrap();
        w.finished().await.unwrap();
        let head = store.head(&key).await.unwrap().unwrap();
        let m = strips::Manifest::from_metadata(head.manifest.as_deref().unwrap()).unwrap();
        assert_eq!(
            (m.size, m.n, m.k, head.size),
            (len as u64, 12, 6, m.coded_size())
        );
        for strategy in ["static-1-1", "static-12-6", "static-6-3", "tofec", "greedy"] {
            let p = proxy(store.clone(), Strategy::parse(strategy).unwrap());
            let (got, _) = p.read(&key).await.unwrap();
            assert_eq!(got, d, "{key} {strategy}");
        }
        // Ranges of the stored file: exact bytes.
        let r = m.chunk_range(3, 1);
        let part = store.get_range(&key, r.clone()).await.unwrap();
        assert_eq!(part.len() as u64, r.end - r.start);
    }
    // A plain object (not coded by ecdn): read as k ranges.
    let d = data(7, 100_003);
    store.put("plain/a", d.clone(), None).await.unwrap();
    let (got, s) = proxy(store.clone(), Strategy::Static { n: 3, k: 3 })
        .read("plain/a")
        .await
        .unwrap();
    assert_eq!((got, s.k), (d.clone(), 3));
    assert_eq!(
        store.get_range("plain/a", 5..10).await.unwrap(),
        d.slice(5..10)
    );
    // A coded file with a corrupt strip: its chunk is replaced, the bytes are right; with
    // every strip of the data corrupt, a clear error.
    let d = data(8, 60_000);
    let codecs = CodecCache::new();
    let (m, mut file) = strips::encode(&codecs, &d, 12, 6).unwrap();
    file[10] ^= 1;
    store
        .put(
            "coded/bad",
            Bytes::from(file.clone()),
            Some(m.to_metadata()),
        )
        .await
        .unwrap();
    let p = proxy(store.clone(), Strategy::Static { n: 1, k: 1 });
    let (got, _) = p.read("coded/bad").await.unwrap();
    assert_eq!(got, d);
    assert_eq!(p.counters().corrupt_chunks, 1);
    for i in 0..12 {
        file[i * m.strip as usize] ^= 1;
    }
    store
        .put("coded/worse", Bytes::from(file), Some(m.to_metadata()))
        .await
        .unwrap();
    let e = p.read("coded/worse").await.unwrap_err();
    assert!(e.to_string().contains("fewer than k"), "{e}");
    // The manifest names its metadata key; absent objects and deletes.
    assert_eq!(MANIFEST_KEY, "ecdn-tofec");
    assert!(store.head("absent").await.unwrap().is_none());
    assert_eq!(
        p.read("absent").await.unwrap_err(),
        ProxyError::NotFound("absent".into())
    );
    store.delete("plain/a").await.unwrap();
    assert!(store.head("plain/a").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_emulator_speaks_s3() {
    let cfg = EmulatorConfig {
        min_part: 0,
        ..EmulatorConfig::instant()
    };
    let emu = Emulator::start("127.0.0.1:0".parse().unwrap(), cfg)
        .await
        .unwrap();
    round_trips(Arc::new(s3(&emu.endpoint(), "emulated"))).await;
    emu.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_emulator_keeps_s3_s_least_part_size() {
    let emu = Emulator::start("127.0.0.1:0".parse().unwrap(), EmulatorConfig::instant())
        .await
        .unwrap();
    let store: Arc<dyn Store> = Arc::new(s3(&emu.endpoint(), "parts"));
    // Parts of 1 MiB are refused when the upload is completed, as S3 refuses them.
    let small = proxy(store.clone(), Strategy::Static { n: 12, k: 6 });
    let w = small.write("small-parts", data(1, 3 << 20)).await.unwrap();
    let e = w.finished().await.unwrap_err().to_string();
    assert!(e.contains("EntityTooSmall"), "{e}");
    assert!(store.head("small-parts").await.unwrap().is_none());
    // ... and the refused upload was given up, not left open with its parts.
    assert_eq!(emu.open_uploads(), 0);
    // The proxy that keeps to S3's 5 MiB: a 12 MiB file in chunks of 6 MiB, a 1 MiB file
    // whole, by two racing PUTs; both read back.
    let cfg = ProxyConfig {
        strategy: Strategy::Static { n: 12, k: 6 },
        task_timeout: Duration::from_secs(10),
        ..ProxyConfig::default()
    };
    let p = Proxy::start(store.clone(), cfg);
    for (len, code) in [(12 << 20, (4, 2)), (1 << 20, (2, 1))] {
        let d = data(len as u64, len);
        let w = p.write("kept", d.clone()).await.unwrap();
        assert_eq!((w.served.n, w.served.k), code, "{len}");
        w.finished().await.unwrap();
        assert_eq!(p.read("kept").await.unwrap().0, d, "{len}");
    }
    emu.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_emulator_s_delays_follow_its_model() {
    // A fast model (10 ms + 1 ms/MB floor, 10 ms + 2 ms/MB tail) and a paced link.
    let m = DelayModel {
        delta0: 0.010,
        delta1: 0.001 / 1e6,
        psi0: 0.010,
        psi1: 0.002 / 1e6,
    };
    let emu = Emulator::start(
        "127.0.0.1:0".parse().unwrap(),
        EmulatorConfig {
            read: Some(DelaySource::Model(m)),
            write: None,
            bandwidth: Some(100_000_000),
            seed: 5,
            ..EmulatorConfig::default()
        },
    )
    .await
    .unwrap();
    let store = s3(&emu.endpoint(), "timed");
    store.put("o", data(1, 2_000_000), None).await.unwrap();
    let mut delays = Vec::new();
    for _ in 0..60 {
        let t = Instant::now();
        store.get_range("o", 0..1_000_000).await.unwrap();
        delays.push(t.elapsed().as_secs_f64());
    }
    let mean = delays.iter().sum::<f64>() / delays.len() as f64;
    let min = delays.iter().copied().fold(f64::MAX, f64::min);
    // Floor 11 ms, mean 23 ms (the link's 10 ms fit inside the floor's and tail's time);
    // the upper bound leaves room for a loaded machine.
    assert!(min >= 0.011, "{min}");
    assert!((0.017..0.060).contains(&mean), "{mean}");
    emu.stop().await;
}

/// moto's S3 server on a free loopback port, stopped when dropped.
struct Moto(Child);

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn moto() -> (Moto, String) {
    moto_with(&[], "http")
}

/// moto's server with extra arguments, and its endpoint with `scheme`.
fn moto_with(extra: &[&std::ffi::OsStr], scheme: &str) -> (Moto, String) {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("moto_server")
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .args(extra)
        // Parts as small as the test's (real S3 wants 5 MiB but for the last).
        .env("S3_UPLOAD_PART_MIN_SIZE", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "moto_server could not be started ({e}): install it with \
                 `python3 -m pip install 'moto[server]'` (./test.sh does)"
            )
        });
    let guard = Moto(child);
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(addr).is_err() {
        assert!(
            Instant::now() < deadline,
            "moto_server did not listen within 30 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    (guard, format!("{scheme}://{addr}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moto_agrees() {
    let (_moto, endpoint) = moto();
    // The bucket, created with a plain PUT (moto, like S3, has none at first).
    let client = reqwest_put(&format!("{endpoint}/ecdn")).await;
    assert!(client < 300, "creating the bucket: {client}");
    round_trips(Arc::new(s3(&endpoint, "ecdn"))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moto_over_tls_with_a_private_ca() {
    // A CA, and a certificate for 127.0.0.1 it signed, made by openssl.
    let dir = tempfile::tempdir().unwrap();
    let script = "set -e
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
            -subj '/CN=ecdn test CA' -keyout ca.key -out ca.pem
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
            -keyout key.pem -out srv.csr
        printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' > ext.cnf
        openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
            -extfile ext.cnf -out cert.pem";
    let made = Command::new("sh")
        .args(["-c", script])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "openssl (install it if missing): {}",
        String::from_utf8_lossy(&made.stderr)
    );
    let p = |f: &str| dir.path().join(f);
    let (cert, key) = (p("cert.pem"), p("key.pem"));
    let (_moto, endpoint) = moto_with(
        &[
            "-c".as_ref(),
            cert.as_os_str(),
            "-k".as_ref(),
            key.as_os_str(),
        ],
        "https",
    );
    // The bucket, over TLS, trusting the CA (the store's client installs rustls's ring
    // provider, which this client uses too).
    let untrusted = s3(&endpoint, "tls");
    let pem = std::fs::read(p("ca.pem")).unwrap();
    let client = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(&pem).unwrap()])
        .build()
        .unwrap();
    let r = client.put(format!("{endpoint}/tls")).send().await.unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    // Without the CA the store's certificate is refused; with it, coded round trips.
    assert!(untrusted
        .put("k", Bytes::from_static(b"x"), None)
        .await
        .is_err());
    let store = s3_trusting(&endpoint, "tls", Some(&p("ca.pem")));
    let d = data(3, 70_000);
    let px = proxy(Arc::new(store), Strategy::Static { n: 4, k: 2 });
    px.write("over/tls", d.clone())
        .await
        .unwrap()
        .finished()
        .await
        .unwrap();
    assert_eq!(px.read("over/tls").await.unwrap().0, d);
}

/// `PUT url` with no body; the status.
async fn reqwest_put(url: &str) -> u16 {
    use http_body_util::Empty;
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let req = hyper::Request::put(url).body(Empty::new()).unwrap();
    client.request(req).await.unwrap().status().as_u16()
}
