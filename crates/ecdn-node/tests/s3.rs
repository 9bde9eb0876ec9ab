//! The S3 face (issue 67) on an in-process cluster of 6 nodes, driven by boto3 (the AWS SDK
//! for Python, installed by `tools/install-test-deps.sh`): `tests/s3/boto3_client.py` writes,
//! reads (whole, ranged, conditional), lists (pages, delimiters, V1), reaches a bucket by its
//! host (virtual-hosted), presigns, copies (whole, by parts, conditional), uploads by parts,
//! deletes, and checks S3's refusals; then the object it wrote is read through the object API
//! under its EC-Cache name, byte for byte the same; the AWS CLI (`tests/s3/aws_cli.sh`: `cp`
//! with its parallel multipart transfers and on the server, `sync` both ways, `ls`,
//! `rm --recursive`); and rclone (`tests/s3/rclone.sh`: `copy` both ways, `check`, `lsf`,
//! `cat`, `sync`, `purge`). Without boto3, the CLI or rclone a test fails, saying how to
//! install it.

use std::process::Command;

use md5::{Digest, Md5};

#[path = "common/cluster.rs"]
mod harness;
use harness::TestCluster;

mod common;

const S3: &str = r#"
[s3]
domains = ["localhost"]
[[s3.keys]]
access_key = "AKIDMODELS0001"
secret_key = "models-secret-0123456789"
buckets = ["models", "public-data"]
[[s3.keys]]
access_key = "AKIDOTHER0002"
secret_key = "other-secret-0123456789"
buckets = ["public-data"]
[[s3.buckets]]
name = "models"
k = 3
r = 1
[[s3.buckets]]
name = "public-data"
anonymous_read = true
"#;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn boto3_writes_reads_lists_and_is_refused_as_s3_does() {
    let have = Command::new("python3")
        .args(["-c", "import boto3"])
        .status();
    assert!(
        have.is_ok_and(|s| s.success()),
        "boto3 is missing: install it with `python3 -m pip install boto3` (tools/install-test-deps.sh does)"
    );
    // An object of 1 GiB and 5 MiB by multipart: its parts, each coded 3 + 1 (1.4 GiB in
    // all), on disks of 512 MiB.
    let c = TestCluster::start_with_disks(6, "c2dn", 3, 1, S3, 512 << 20).await;
    let endpoint = format!("http://{}", c.client(2));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/s3/boto3_client.py");
    let out = tokio::task::spawn_blocking(move || {
        Command::new("python3")
            .args([
                script,
                &endpoint,
                "AKIDMODELS0001",
                "models-secret-0123456789",
                "AKIDOTHER0002",
                "other-secret-0123456789",
            ])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let last = stdout.lines().last().unwrap_or("");
    assert!(last.starts_with("ok "), "{stdout}");
    let checks: usize = last[3..].parse().unwrap();
    assert!(checks >= 39, "{checks} checks");
    // The object boto3 wrote is an EC-Cache object: read through the object API under its
    // name, at another node, it is the same bytes.
    let written: serde_json::Value =
        serde_json::from_str(stdout.lines().rev().nth(1).unwrap()).unwrap();
    let key = written["object"].as_str().unwrap();
    let name = format!("s3/models/{}", hex(key.as_bytes()));
    let r = common::send_body(
        c.client(4),
        "GET",
        &format!("/_objects/{name}"),
        &[],
        bytes::Bytes::new(),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len() as u64, written["size"].as_u64().unwrap());
    assert_eq!(hex(&Md5::digest(&r.body)), written["md5"].as_str().unwrap());
    let k = r.headers.get("x-ecdn-k").and_then(|v| v.to_str().ok());
    assert_eq!(k, Some("3"), "the bucket's code");
    early_answers_close_the_connection(c.client(3)).await;
    c.stop_all().await;
}

/// Sends `head` (and `body`) on a new connection, then reads the first answer's head and
/// whatever follows it within 5 s: the head, and whether the server closed the connection.
async fn exchange(addr: std::net::SocketAddr, head: &str, body: &[u8]) -> (String, bool) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let end = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match tokio::time::timeout_at(end, s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (String::from_utf8_lossy(&got).into(), true),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => return (String::from_utf8_lossy(&got).into(), false),
        }
    }
}

/// A request that says `Expect: 100-continue` and is answered before its body is read (a
/// refusal) is answered with `Connection: close`, and the connection closes: the client may
/// or may not send the body then (botocore does not), so what follows is not known to be a
/// request. Once this failed one run in ten under load: the node read the next request's
/// `P` as the unsent body and answered `UT` as a method, and botocore, its connection reused,
/// took the late `100 Continue` for a bare `404`. A body read to its end keeps the connection.
async fn early_answers_close_the_connection(addr: std::net::SocketAddr) {
    let expect = "Content-Length: 5\r\nExpect: 100-continue\r\n\r\n";
    // S3: an anonymous write, refused before its body.
    let (s3, closed) = exchange(
        addr,
        &format!("PUT /public-data/w HTTP/1.1\r\nHost: localhost\r\n{expect}"),
        b"",
    )
    .await;
    assert!(s3.starts_with("HTTP/1.1 403"), "{s3}");
    assert!(
        s3.to_ascii_lowercase().contains("connection: close"),
        "{s3}"
    );
    assert!(
        closed,
        "the connection stays open after an early answer: {s3}"
    );
    // The object API: a query it refuses, before the body.
    let (api, closed) = exchange(
        addr,
        &format!("PUT /_objects/early?k=x HTTP/1.1\r\nHost: a\r\n{expect}"),
        b"",
    )
    .await;
    assert!(api.starts_with("HTTP/1.1 400"), "{api}");
    assert!(
        api.to_ascii_lowercase().contains("connection: close"),
        "{api}"
    );
    assert!(
        closed,
        "the connection stays open after an early answer: {api}"
    );
    // A body read to its end: the connection stays for the next request.
    let (kept, closed) = exchange(
        addr,
        "PUT /_objects/kept HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n",
        b"hello",
    )
    .await;
    assert!(kept.starts_with("HTTP/1.1 20"), "{kept}");
    assert!(
        !kept.to_ascii_lowercase().contains("connection: close"),
        "{kept}"
    );
    assert!(!closed, "a connection whose body was read closed: {kept}");
}

/// Runs the script `name` of `tests/s3/` with bash against a new cluster (at node `node`)
/// with the models key; it must end with `ok`.
async fn script_against_a_cluster(name: &str, node: usize) {
    let c = TestCluster::start_with(6, "c2dn", 3, 1, S3).await;
    let endpoint = format!("http://{}", c.client(node));
    let script = format!("{}/tests/s3/{name}", env!("CARGO_MANIFEST_DIR"));
    let out = tokio::task::spawn_blocking(move || {
        Command::new("bash")
            .args([
                &script,
                &endpoint,
                "AKIDMODELS0001",
                "models-secret-0123456789",
            ])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout.lines().last(), Some("ok"), "{stdout}\n{stderr}");
    c.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rclone_copies_checks_syncs_and_purges() {
    let have = Command::new("rclone").arg("version").output();
    assert!(
        have.is_ok_and(|o| o.status.success()),
        "rclone is missing: install it with `apt-get install rclone` (tools/install-test-deps.sh does)"
    );
    script_against_a_cluster("rclone.sh", 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_aws_cli_copies_syncs_lists_and_removes() {
    let have = Command::new("aws").arg("--version").output();
    assert!(
        have.is_ok_and(|o| o.status.success()),
        "the AWS CLI is missing: install it with `python3 -m pip install awscli` (tools/install-test-deps.sh does)"
    );
    script_against_a_cluster("aws_cli.sh", 1).await;
}
