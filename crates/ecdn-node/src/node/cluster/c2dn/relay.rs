//! Relay: a `GET` / `HEAD` for a bucket another node serves goes to that node.
//!
//! The request travels signed to the serving node's peer listener as
//! `/_peer/relay/{target}` with the client's end-to-end headers; the answer (its status, its
//! headers, its `X-Cache`) is streamed back as it arrives, checked first: the serving node tags
//! its head and sends its body as tagged segments (`ecdn_cluster::relayed`), and an answer or
//! a segment that fails its tag is never passed on. A relayed request is never relayed
//! again. When the serving node refuses the connection or resets it, the request goes on at
//! once to the bucket's next candidate (C2DN §5: no waiting for the coordinator), and when
//! none is left, or the next candidate is this node, this node serves it. When the serving
//! node acknowledges nothing for `ecdn_cluster::peer::PEER_GONE` (its host gone, or this node
//! cut off from its peers), or does not answer within the origin timeout plus the peer
//! timeout, this node serves the request at once: it reads the cluster's pieces or the origin
//! itself, as the next candidate would, where trying each further candidate could cost as
//! long again (a node cut off from every peer would hold its client for all of them).
//!
//! **Around a slow serving node.** A candidate this node's probes find much slower than its
//! peers (`ecdn_cluster::health::observer::PeerObserver::slower`) is tried after the others,
//! as if it had failed (a *detour*, `ecdn_cluster_relay_detours_total`): while the coordinator
//! has not yet declared it unavailable, its buckets are served by their next candidate, which
//! reads the same pieces, as it will once it is declared. A relay already sent is not left
//! when its serving node turns slow: that node may be filling the object from the origin for
//! every request of it (collapsed), and a second candidate would fetch it again.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use ecdn_cluster::auth::SubChunkTagger;
use ecdn_cluster::peer::{PeerError, SentSignature};
use ecdn_cluster::relayed;
use ecdn_cluster::wire;
use http_body_util::BodyExt;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Request, Response};
use tokio::sync::mpsc;

use crate::node::answer::{Answer, ReqBody};
use crate::node::body::{Chunk, LiveBody, NodeBody};
use crate::node::cluster::c2dn::headers::X_OBJECT;
use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::stats::ClusterStats;
use crate::node::freshness;
use crate::node::key::CacheKey;
use crate::node::outcome::{Outcome, X_CACHE};
use crate::node::slice_range::{SLICED_HEADER, SLICE_HEADER};
use crate::node::state::State;
use crate::node::upstream::content_length;

/// Passes `req` to the bucket's serving node; `None` when this node is to serve it.
pub(in crate::node) async fn forward(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    req: &Request<ReqBody>,
) -> Option<Answer> {
    relay(st, c, req, None).await
}

/// Asks the serving node of `sub`'s URL (a sliced object's) for slice `index` alone
/// (`?slice=N`, see `direct.rs`): the slice's answer, its outcome the serving node's
/// (`X-Cache`), as a slice read here would be; `None` when this node is to fill it.
pub(in crate::node) async fn forward_slice(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    sub: &Request<ReqBody>,
    index: u64,
) -> Option<Answer> {
    let mut answer = relay(st, c, sub, Some(index)).await?;
    let h = answer.response.headers_mut();
    if !h.contains_key(SLICE_HEADER) {
        // The object is no longer sliced: this is its whole answer, counted where it was made.
        return Some(answer);
    }
    // What the serving node said of the slice: its outcome, not the client's answer's.
    let outcome = h.get(X_CACHE).and_then(|v| v.to_str().ok());
    if let Some(o) = outcome.and_then(Outcome::of_x_cache) {
        answer.outcome = o;
    }
    h.remove(X_CACHE);
    h.remove(hyper::header::VIA);
    Some(answer)
}

/// The relay of `req` (of one slice of its object, with `slice`) to the bucket's serving node.
async fn relay(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    req: &Request<ReqBody>,
    slice: Option<u64>,
) -> Option<Answer> {
    let primary = CacheKey::primary(req);
    let map = c.map.current();
    let bucket = map.bucket_of(crate::node::cluster::pieces::names::object_id(&primary));
    let target = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let path = match slice {
        None => wire::relay_path(target),
        Some(index) => wire::relay_slice_path(target, index),
    };
    let conn = freshness::connection_tokens(req.headers());
    let headers: Vec<(HeaderName, HeaderValue)> = req
        .headers()
        .iter()
        .filter(|(n, _)| !freshness::is_hop_by_hop(n, &conn) && !n.as_str().starts_with("x-ecdn-"))
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect();
    let timeout = st.upstream.timeout + c.peer_timeout;
    for &server in detour_order(c, map.candidates(bucket)).iter() {
        if server == c.id {
            return None;
        }
        let Some(addr) = c.peer_of(server) else {
            continue;
        };
        let sent = c
            .peers
            .send(
                addr,
                req.method().clone(),
                &path,
                Bytes::new(),
                &headers,
                timeout,
            )
            .await;
        // A candidate that acknowledged nothing (or answered nothing in the relay's time):
        // this node serves, rather than spend as long on each further candidate.
        let unreachable = matches!(sent, Err(PeerError::Gone(_) | PeerError::Timeout(..)));
        // The answer's head must carry the serving node's tag (an answer it did not make,
        // or a refusal of the request, fails over as a failed relay does).
        let checked = sent.map_err(|e| e.to_string()).and_then(|resp| {
            let tagger = resp
                .extensions()
                .get::<SentSignature>()
                .map(SentSignature::sub_chunk_tagger);
            let tagger = tagger.ok_or_else(|| "no signature sent".to_string())?;
            let headers = relayed::check_head(&tagger, resp.status(), resp.headers())
                .map_err(|e| format!("{e} (status {})", resp.status()))?;
            Ok((resp, headers, tagger))
        });
        match checked {
            Ok((resp, headers, tagger)) => {
                c.stats.relay(server, true);
                if slice.is_none() {
                    learn(st, c, &primary, resp.status(), &headers);
                }
                let head = req.method() == hyper::Method::HEAD;
                return Some(Answer {
                    outcome: Outcome::Relayed,
                    response: stream_back(c, resp, headers, tagger, head),
                });
            }
            Err(e) => {
                c.stats.relay(server, false);
                let then = if unreachable {
                    "serving it here"
                } else {
                    "trying the next candidate"
                };
                eprintln!(
                    "ecdn node: relay to node {server}: {e}; {then}{}",
                    ecdn_cluster::peer::request_note()
                );
                if unreachable {
                    return None;
                }
            }
        }
    }
    None
}

/// What a relayed answer tells this node of the object at `primary`, for its direct reads
/// (`direct.rs`): an answer made of slices (whole, or one range), that the object is sliced
/// and how long, as serving it would have; any other answer, whether it is coded whole
/// (`kinds.rs`). Either way this node reads the object's next hits itself.
fn learn(
    st: &State,
    c: &Cluster,
    primary: &str,
    status: hyper::StatusCode,
    headers: &hyper::HeaderMap,
) {
    if !c.direct_reads() {
        return;
    }
    if headers.contains_key(SLICED_HEADER) {
        // The object's length: the whole answer's, or one range's `Content-Range` says it.
        let length = match status {
            hyper::StatusCode::OK => content_length(headers),
            hyper::StatusCode::PARTIAL_CONTENT => headers
                .get(hyper::header::CONTENT_RANGE)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| crate::multipart::parse_content_range(v).ok())
                .and_then(|(_, length)| length),
            _ => None,
        };
        if let Some(length) = length.filter(|_| st.slices.on()) {
            st.slices.remember(primary, Some(length));
        }
        return;
    }
    if let Some(kind) = headers.get(X_OBJECT) {
        let id = ecdn_trace::hash_id(primary.as_bytes());
        c.kinds.learn(id, kind.as_bytes() == b"coded");
    }
}

/// The bucket's `candidates` in the order to try them: those this node's probes find much
/// slower than their peers after the others (each counted as a detour), in their order.
/// Without a slow one, the map's own slice.
fn detour_order<'a>(c: &Cluster, candidates: &'a [usize]) -> Cow<'a, [usize]> {
    let now = std::time::Instant::now();
    if !candidates.iter().any(|&s| c.slower(s, now)) {
        return Cow::Borrowed(candidates);
    }
    let (mut fast, slow): (Vec<usize>, Vec<usize>) =
        candidates.iter().partition(|&&s| !c.slower(s, now));
    // A detour only counts when another candidate takes the request.
    if let (Some(&first), false) = (candidates.first(), fast.is_empty()) {
        if slow.contains(&first) {
            c.stats.relay_detour(first);
        }
    }
    fast.extend(slow);
    Cow::Owned(fast)
}

/// The serving node's answer as this node's: its tagged headers (`headers`, checked) less
/// hop-by-hop ones, the body streamed as its segments arrive, each checked against its tag
/// first (a segment that fails, or a body that ends without its end segment, aborts the
/// client's response: no byte the serving node did not send is passed on). Its bytes count
/// as received from peers (they cross the cluster's network as a chunk does).
fn stream_back(
    c: &Arc<Cluster>,
    resp: Response<hyper::body::Incoming>,
    tagged: hyper::HeaderMap,
    tagger: SubChunkTagger,
    head: bool,
) -> Response<NodeBody> {
    let (parts, mut body) = resp.into_parts();
    let conn = freshness::connection_tokens(&parts.headers);
    let mut headers = hyper::HeaderMap::with_capacity(tagged.len());
    for (n, v) in &tagged {
        if !freshness::is_hop_by_hop(n, &conn) {
            headers.append(n.clone(), v.clone());
        }
    }
    let remaining = if head {
        Some(0)
    } else {
        content_length(&headers)
    };
    let segments = relayed::has_body(head, parts.status);
    let (tx, rx) = mpsc::channel(4);
    let c = c.clone();
    ecdn_cluster::peer::spawn_traced(async move {
        let mut reader = relayed::SegmentReader::new(tagger);
        loop {
            match body.frame().await {
                None => {
                    if !segments || reader.ended() {
                        let _ = tx.send(Chunk::Done).await;
                    }
                    return;
                }
                Some(Ok(f)) => {
                    let Ok(data) = f.into_data() else { continue };
                    let n = data.len() as u64;
                    ClusterStats::add(&c.stats.peer_bytes_received, n);
                    ClusterStats::add(&c.stats.relay_bytes_received, n);
                    if !segments {
                        continue; // none is sent; none is passed on
                    }
                    let mut checked = Vec::new();
                    if let Err(e) = reader.push(data, &mut checked) {
                        eprintln!(
                            "ecdn node: {e}; the client's response is aborted{}",
                            ecdn_cluster::peer::request_note()
                        );
                        return;
                    }
                    if !checked.is_empty() && tx.send(Chunk::Slices(checked)).await.is_err() {
                        return;
                    }
                }
                // Closing the channel without `Done` aborts the client's response.
                Some(Err(_)) => return,
            }
        }
    });
    let mut r = Response::new(NodeBody::Live(LiveBody::new(
        VecDeque::new(),
        None,
        rx,
        remaining,
    )));
    *r.status_mut() = parts.status;
    *r.headers_mut() = headers;
    r
}
