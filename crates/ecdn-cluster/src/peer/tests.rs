use super::*;
use crate::auth::AuthError;
use hyper::header::HeaderMap;
use hyper::http::request::Parts;

fn parts(method: &str, uri: &str, headers: &[(&str, String)]) -> Parts {
    let mut b = Request::builder().method(method).uri(uri);
    for (n, v) in headers {
        b = b.header(*n, v.as_str());
    }
    b.body(()).unwrap().into_parts().0
}

fn to(addr: &str) -> Recipient {
    Recipient {
        addr: addr.parse().unwrap(),
        epoch: 0,
    }
}

#[test]
fn verify_parts_reads_the_headers_and_the_path_with_its_query() {
    let key = ClusterKey::new(b"0123456789abcdef-secret");
    let at = to("127.0.0.1:7400");
    let sig = key.sign_digest("GET", "/coord/map?after=3", at, 1000, 1, &auth::digest(b""));
    let h = sig.headers().to_vec();
    let p = parts("GET", "/coord/map?after=3", &h);
    assert!(verify_parts(&key, &p, 1000).unwrap().empty_body());
    // Another query, method or clock is refused.
    let p = parts("GET", "/coord/map?after=4", &h);
    assert_eq!(
        verify_parts(&key, &p, 1000).unwrap_err(),
        AuthError::BadSignature
    );
    let p = parts("POST", "/coord/map?after=3", &h);
    assert_eq!(
        verify_parts(&key, &p, 1000).unwrap_err(),
        AuthError::BadSignature
    );
    let p = parts("GET", "/coord/map?after=3", &h);
    assert!(matches!(
        verify_parts(&key, &p, 100_000).unwrap_err(),
        AuthError::Stale { skew_ms: 99_000 }
    ));
    let without_time: Vec<_> = h
        .iter()
        .filter(|(n, _)| *n != auth::TIME)
        .cloned()
        .collect();
    let p = parts("GET", "/coord/map?after=3", &without_time);
    assert_eq!(
        verify_parts(&key, &p, 1000).unwrap_err(),
        AuthError::Missing(auth::TIME)
    );
    let mut bad = h.clone();
    for (n, v) in bad.iter_mut() {
        if *n == auth::SIGNATURE {
            *v = "x".repeat(64);
        }
    }
    let p = parts("GET", "/coord/map?after=3", &bad);
    assert_eq!(
        verify_parts(&key, &p, 1000).unwrap_err(),
        AuthError::Malformed(auth::SIGNATURE)
    );
}

/// The head of an answer with `headers` as [`PeerClient::send`] returns it for a request
/// this client signed: with the request's signature.
fn answer_parts(headers: &HeaderMap, sent: Option<SentSignature>) -> hyper::http::response::Parts {
    let (mut p, ()) = Response::new(()).into_parts();
    p.headers = headers.clone();
    if let Some(sent) = sent {
        p.extensions.insert(AnswerTo(sent.signature));
    }
    p
}

/// A request signed for `pq` (as `PeerClient::send` signs one): what its answer's head
/// carries.
fn sent(key: &ClusterKey, pq: &str) -> SentSignature {
    let (sig, answers) = key.sign_expecting_sub_chunks("GET", pq, to("127.0.0.1:9"), b"");
    SentSignature {
        signature: sig.mac().unwrap(),
        answers,
    }
}

#[test]
fn responses_are_signed_for_their_request_and_are_no_requests() {
    let key = ClusterKey::new(b"0123456789abcdef-secret");
    let pq = "/coord/map?after=1";
    let request = sent(&key, pq);
    let headers = sign_response(&key, pq, &request.signature, b"{}");
    let p = answer_parts(&headers, Some(request.clone()));
    let now = auth::unix_now_ms();
    verify_response(&key, pq, &p, b"{}", now).unwrap();
    assert_eq!(
        verify_response(&key, pq, &p, b"{ }", now),
        Err(AuthError::BodyMismatch)
    );
    assert_eq!(
        verify_response(&key, "/coord/map?after=2", &p, b"{}", now),
        Err(AuthError::BadSignature)
    );
    let other = ClusterKey::new(b"another-cluster-key!");
    assert_eq!(
        verify_response(&other, pq, &p, b"{}", now),
        Err(AuthError::BadSignature)
    );
    // The same answer to another request for the same path (a replayed answer): refused.
    let again = answer_parts(&headers, Some(sent(&key, pq)));
    assert_eq!(
        verify_response(&key, pq, &again, b"{}", now),
        Err(AuthError::BadSignature)
    );
    // An answer to no request this client signed: refused.
    assert_eq!(
        verify_response(&key, pq, &answer_parts(&headers, None), b"{}", now),
        Err(AuthError::Missing(auth::SIGNATURE))
    );
    // A signed response is no signed request: it names no destination.
    let h: Vec<(&str, String)> = headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.to_str().unwrap().to_string()))
        .collect();
    let r = parts("GET", pq, &h);
    assert_eq!(
        verify_parts(&key, &r, now).unwrap_err(),
        AuthError::Missing(auth::DESTINATION)
    );
    assert_eq!(
        verify_response(
            &key,
            pq,
            &answer_parts(&HeaderMap::new(), Some(request)),
            b"{}",
            now
        ),
        Err(AuthError::Missing(auth::SIGNATURE))
    );
}

#[tokio::test]
async fn bodies_are_limited_and_checked_against_the_digest() {
    let key = ClusterKey::new(b"0123456789abcdef-secret");
    let sig = key.sign_digest(
        "PUT",
        "/x",
        to("127.0.0.1:1"),
        5,
        1,
        &auth::digest(b"hello"),
    );
    let p = parts("PUT", "/x", &sig.headers());
    let v = verify_parts(&key, &p, 5).unwrap();
    let body = read_verified_body(Full::new(Bytes::from_static(b"hello")), 16, &v)
        .await
        .unwrap();
    assert_eq!(&body[..], b"hello");
    let e = read_verified_body(Full::new(Bytes::from_static(b"hellO")), 16, &v).await;
    assert!(matches!(e, Err(BodyError::Auth(AuthError::BodyMismatch))));
    let e = read_verified_body(Full::new(Bytes::from_static(b"hello")), 4, &v).await;
    assert!(matches!(e, Err(BodyError::TooLarge(4))));
}

/// A raw listener that answers each request `200` and reports its head.
async fn head_recorder() -> (SocketAddr, mpsc::UnboundedReceiver<String>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    let n = s.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    got.extend_from_slice(&buf[..n]);
                }
                let _ = tx.send(String::from_utf8_lossy(&got).to_lowercase());
                let _ = s
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                    .await;
            });
        }
    });
    (addr, rx)
}

#[tokio::test]
async fn peer_requests_carry_the_request_id_in_scope() {
    let client = PeerClient::new(ClusterKey::new(b"0123456789abcdef-secret"));
    let (addr, mut heads) = head_recorder().await;
    let t = Duration::from_secs(5);
    let send = || client.send(addr, Method::GET, "/x", Bytes::new(), &[], t);
    send().await.unwrap();
    assert!(!heads.recv().await.unwrap().contains("x-request-id"));
    let id = HeaderValue::from_static("trace-1");
    REQUEST_ID.scope(id.clone(), send()).await.unwrap();
    assert!(heads
        .recv()
        .await
        .unwrap()
        .contains("x-request-id: trace-1\r\n"));
    // A task spawned with the id in scope keeps it.
    let c = client.clone();
    let answer = REQUEST_ID
        .scope(id, async move {
            let task =
                spawn_traced(
                    async move { c.send(addr, Method::GET, "/y", Bytes::new(), &[], t).await },
                );
            task.await
        })
        .await;
    answer.unwrap().unwrap();
    assert!(heads
        .recv()
        .await
        .unwrap()
        .contains("x-request-id: trace-1\r\n"));
    assert_eq!(request_note(), "");
}

#[tokio::test]
async fn requests_are_signed_for_their_address_and_epoch_with_fresh_nonces() {
    let client = PeerClient::new(ClusterKey::new(b"0123456789abcdef-secret"));
    let (addr, mut heads) = head_recorder().await;
    let t = Duration::from_secs(5);
    let header = |head: &str, name: &str| -> String {
        let prefix = format!("{name}: ");
        head.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_default()
            .to_string()
    };
    client
        .send(addr, Method::GET, "/x", Bytes::new(), &[], t)
        .await
        .unwrap();
    let first = heads.recv().await.unwrap();
    assert_eq!(header(&first, auth::DESTINATION), addr.to_string());
    assert_eq!(header(&first, auth::EPOCH), "0");
    assert_eq!(header(&first, auth::VERSION_HEADER), "3");
    // A clone shares the epoch; every request has its own nonce.
    client.clone().set_epoch(41);
    let (mut body, answer) = client.send_streamed(addr, Method::PUT, "/y").unwrap();
    let _ = body.send(Bytes::from_static(b"content")) && body.finish();
    // The recorder answers at the head: the body may or may not have gone by then.
    let _ = answer.await;
    let second = heads.recv().await.unwrap();
    assert_eq!(header(&second, auth::EPOCH), "41");
    assert_eq!(header(&second, auth::DIGEST), auth::STREAMED);
    let (n1, n2) = (header(&first, auth::NONCE), header(&second, auth::NONCE));
    assert_eq!(n1.len(), 32);
    assert_ne!(n1, n2);
}

#[tokio::test]
async fn a_closed_port_is_refused_and_a_silent_peer_times_out() {
    let client = PeerClient::new(ClusterKey::new(b"0123456789abcdef-secret"));
    // A port nobody listens on: bound, not listening (connections are refused), and held
    // so that no other listener can take it meanwhile.
    let closed = tokio::net::TcpSocket::new_v4().unwrap();
    closed.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = closed.local_addr().unwrap();
    let t = Duration::from_secs(2);
    let e = client
        .send(addr, Method::GET, "/x", Bytes::new(), &[], t)
        .await
        .unwrap_err();
    assert_eq!(e, PeerError::Refused(addr));
    // A listener that accepts and never answers.
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        tokio::time::sleep(Duration::from_secs(5)).await;
        drop(s);
    });
    let t = Duration::from_millis(200);
    let e = client
        .send(addr, Method::GET, "/x", Bytes::new(), &[], t)
        .await
        .unwrap_err();
    assert_eq!(e, PeerError::Timeout(addr, t));
    held.abort();
    // A peer that closes the connection without answering.
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        drop(s);
    });
    let e = client
        .send(
            addr,
            Method::GET,
            "/x",
            Bytes::new(),
            &[],
            Duration::from_secs(2),
        )
        .await
        .unwrap_err();
    assert_eq!(e, PeerError::Reset(addr));
    let e = client
        .send(addr, Method::GET, "no-slash", Bytes::new(), &[], t)
        .await
        .unwrap_err();
    assert!(matches!(e, PeerError::Other(..)));
}
