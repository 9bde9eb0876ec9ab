//! One request's life, top-down: each step is one function, and every path ends in one
//! [`Outcome`] (see the steps in the module documentation of [`super`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{self, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};

use super::answer::{empty_body, text, Answer, ReqBody, VIA};
use super::body::NodeBody;
use super::client_body::{self, ClientBody};
use super::fill::{self, Job, NOT_PLAIN};
use super::key::CacheKey;
use super::lookup::{self, Lookup};
use super::outcome::{Outcome, X_CACHE};
use super::state::State;
use super::{admin, cluster, freshness, ops, request_id, sanitize, sites};
use super::{slices, targeted, upstream};

const X_REQUEST_ID: HeaderName = HeaderName::from_static(ecdn_cluster::peer::REQUEST_ID_HEADER);

/// Step 1, receive: one request, through every step to its response.
///
/// The steps a hit from memory does not take (the object API, admin, relay, pass, miss, the
/// cluster's reads) are boxed where they are awaited, and the disk's in `lookup.rs`: unboxed,
/// their states would make every request's future six times larger (17,568 bytes against
/// 2,936, measured with `size_of_val` at the service), and hyper moves it whole into each
/// HTTP/2 stream.
pub(super) async fn handle(
    st: Arc<State>,
    req: Request<Incoming>,
    remote: SocketAddr,
) -> Response<NodeBody> {
    let arrived = Instant::now();
    // The S3 face (cluster mode with `[s3]`): S3's requests, answered as S3 answers them
    // (their keys are not cache URLs: not sanitized as those are).
    if let Some(c) = &st.cluster {
        if let Some(face) = c
            .cfg
            .s3
            .as_ref()
            .filter(|f| cluster::objects::s3::wants(f, &req))
        {
            let (req, finished) = client_body::with_client_body(req);
            let answer = Box::pin(cluster::objects::s3::serve(&st, c, face, req)).await;
            return client_body::settle(answer, finished.get());
        }
    }
    // 2. Sanitize.
    let mut req = match sanitize::sanitize(req, st.max_uri_len) {
        Ok(r) => r,
        Err(refused) => return refused,
    };
    // The request's id: in the request (the origin and a relay get it), in scope while it is
    // served (peer requests carry it, error lines name it), and in the answer.
    let id = request_id::of(req.headers());
    req.headers_mut().insert(X_REQUEST_ID, id.clone());
    let served = serve(st, req, remote, arrived);
    let mut response = ecdn_cluster::peer::REQUEST_ID
        .scope(id.clone(), served)
        .await;
    response.headers_mut().insert(X_REQUEST_ID, id);
    response
}

/// Steps 3 to 6 of [`handle`], with the request's id in scope.
async fn serve(
    st: Arc<State>,
    req: Request<Incoming>,
    remote: SocketAddr,
    arrived: Instant,
) -> Response<NodeBody> {
    // EC-Cache's object API (cluster mode): its own requests, bodies and answers.
    if req.uri().path().starts_with(cluster::objects::api::PREFIX) {
        return match &st.cluster {
            Some(c) => {
                let (req, finished) = client_body::with_client_body(req);
                let answer = Box::pin(cluster::objects::api::serve(&st, c, req)).await;
                client_body::settle(answer, finished.get())
            }
            None => text(StatusCode::NOT_FOUND, "the object API needs cluster mode"),
        };
    }
    // The request's body is kept aside: only a pass forwards it, and every other answer waits
    // until it has been read (see `client_body.rs`).
    let (parts, body) = req.into_parts();
    let (body, finished) = ClientBody::new(body);
    let req = Request::from_parts(parts, empty_body());
    // 3. Route.
    if let Some(own) = admin::on_client_port(&st, &req) {
        let read = body.discard(st.unread_body_timeout).await;
        return client_body::settle(own, read);
    }
    if !st.upstream.serves(&req) {
        let read = body.discard(st.unread_body_timeout).await;
        let refused = text(
            StatusCode::MISDIRECTED_REQUEST,
            "no origin is configured for this host",
        );
        return client_body::settle(refused, read);
    }
    let log = st
        .access_log
        .then(|| (req.method().clone(), req.uri().path().to_string()));
    // 4-5. Lookup, then hit, miss or pass.
    let (answer, read) = if req.method() == Method::GET || req.method() == Method::HEAD {
        // Content in a `GET` / `HEAD` has no defined meaning (RFC 9110 §9.3.1, §9.3.2) and is
        // not part of the cache key: it is never forwarded (a shared fetch must not carry one
        // client's body), only read and discarded before the answer.
        let read = body.discard(st.unread_body_timeout).await;
        // Cluster mode: a hit this node reads itself, else the bucket's serving node answers.
        let relayed = match &st.cluster {
            Some(c) => match Box::pin(cluster::c2dn::direct::read(&st, c, &req)).await {
                Some(answer) => Some(answer),
                None => Box::pin(cluster::c2dn::relay::forward(&st, c, &req)).await,
            },
            None => None,
        };
        match relayed {
            Some(answer) => (answer, read),
            None => (cached(&st, req).await, read),
        }
    } else {
        let answer = Box::pin(pass(&st, req.map(|_| body.boxed()))).await;
        (answer, finished.get())
    };
    // 6. Deliver.
    client_body::settle(deliver(&st, answer, arrived, log, remote), read)
}

/// Cluster mode: a `GET` / `HEAD` another node relayed here (see `cluster/c2dn/relay.rs`), served
/// by this node whatever its map says, never relayed again.
///
/// With `slice` (`?slice=N`: a node reading a sliced object's other slices itself, see
/// `cluster/c2dn/direct.rs`), only that slice of the object, found or filled as for this
/// node's own answer of it.
pub(super) async fn relayed(
    st: Arc<State>,
    req: Request<ReqBody>,
    remote: SocketAddr,
    slice: Option<u64>,
) -> Response<NodeBody> {
    let arrived = Instant::now();
    let log = st
        .access_log
        .then(|| (req.method().clone(), req.uri().path().to_string()));
    let answer = match slice {
        Some(index) if st.slices.on() && req.method() == Method::GET => {
            Box::pin(slices::relayed_slice(&st, &req, index)).await
        }
        Some(_) => Answer {
            outcome: Outcome::Pass,
            response: text(StatusCode::BAD_REQUEST, "no slices here: slice_size is 0"),
        },
        None => cached(&st, req).await,
    };
    let mut response = deliver(&st, answer, arrived, log, remote);
    if let Some(id) = ecdn_cluster::peer::request_id() {
        response.headers_mut().insert(X_REQUEST_ID, id);
    }
    response
}

/// Steps 4-5 for `GET` / `HEAD`: lookup, then a hit, a stale entry served at once, or a miss.
/// The request carries no body (see `handle`).
async fn cached(st: &Arc<State>, req: Request<ReqBody>) -> Answer {
    let key = CacheKey::of(st, &req);
    let rd = freshness::request_directives(req.headers());
    // Large objects as range slices: an object known to be sliced goes to its slices at once.
    let sliced = st.slices.on() && slices::takes(&req, &rd);
    let range = st.slices.on().then(|| slices::ranges(&req, &rd)).flatten();
    let known = st.slices.on() && st.slices.known(&key.primary).is_some();
    if known {
        let by = slices::By::Serving;
        if let Some(a) = Box::pin(slices::serve_known(st, &req, &rd, &key.primary, by)).await {
            return a;
        }
    }
    let conditional = st.slices.on() && slices::takes_conditional(&req, &rd);
    if let Some(c) = &st.cluster {
        // The serving node counts what it serves, for the background repair's order.
        c.repair.requested(&c.cfg, &c.map, c.id, key.id, &key.key);
    }
    let stale = match lookup::lookup(st, &req, &key, &rd).await {
        Lookup::Hit(mut answer) => {
            if let Some(c) = &st.cluster {
                cluster::c2dn::headers::mark_hoc_hit(c, &mut answer);
            }
            return answer;
        }
        Lookup::Miss(stale) => stale,
    };
    let Some(c) = &st.cluster else {
        return Box::pin(uncached(st, req, key, rd, stale)).await;
    };
    // Cluster mode: the object's pieces, here and on peers.
    let partial = if stale.is_none() && !rd.no_cache {
        match Box::pin(cluster::c2dn::read::lookup(
            st,
            c,
            &req,
            &key,
            &rd,
            cluster::c2dn::read::Reader::Serving,
        ))
        .await
        {
            cluster::c2dn::read::Found::Hit(answer) => return answer,
            cluster::c2dn::read::Found::Partial(Some(p)) => {
                // Only the missing chunks from the origin, if it can be done.
                if let Some(answer) =
                    Box::pin(cluster::c2dn::partial::serve(st, c, &req, &key, p)).await
                {
                    return answer;
                }
                true
            }
            cluster::c2dn::read::Found::Partial(None) => true,
            // Nothing of the object whole: it may be sliced (slice 0 tells).
            cluster::c2dn::read::Found::Miss if sliced => {
                return Box::pin(slices::serve(st, &req, &key.primary, slices::By::Serving)).await;
            }
            cluster::c2dn::read::Found::Miss if conditional => {
                return Box::pin(slices::serve_conditional(
                    st,
                    &req,
                    &key.primary,
                    slices::By::Serving,
                ))
                .await;
            }
            // A range of an object not known sliced: the slice of its first byte tells.
            cluster::c2dn::read::Found::Miss => match (&range, known) {
                (Some(r), false) => {
                    match Box::pin(slices::serve_range(
                        st,
                        &req,
                        &key.primary,
                        r,
                        slices::By::Serving,
                    ))
                    .await
                    {
                        Some(a) => return a,
                        None => false,
                    }
                }
                _ => false,
            },
        }
    } else {
        false
    };
    let mut answer = Box::pin(uncached(st, req, key, rd, stale)).await;
    cluster::c2dn::headers::mark_miss(c, &mut answer, partial);
    answer
}

/// Step 5 for a `GET` / `HEAD` the caches could not answer: a stale entry served at once, or a
/// miss.
async fn uncached(
    st: &Arc<State>,
    req: Request<ReqBody>,
    key: CacheKey,
    rd: freshness::RequestDirectives,
    stale: Option<fill::Revalidation>,
) -> Answer {
    if req.headers().contains_key(sites::PEER_HEADER) {
        // Another site asks: what the caches did not have, only a fill in flight here can
        // give; a site never fetches for another.
        return match fill::join_in_flight(st, &req, &key).await {
            Some(answer) => answer,
            None => Answer {
                outcome: Outcome::Miss,
                response: text(StatusCode::GATEWAY_TIMEOUT, "not held by this site"),
            },
        };
    }
    if let Some(answer) = stale
        .as_ref()
        .and_then(|s| lookup::serve_stale(st, &req, &key, &rd, s))
    {
        return answer;
    }
    if rd.only_if_cached {
        return Answer {
            outcome: Outcome::Miss,
            response: text(
                StatusCode::GATEWAY_TIMEOUT,
                "only-if-cached: no usable cached response",
            ),
        };
    }
    if req.method() == Method::HEAD {
        // Forwarded as `HEAD`, never stored: nothing to stream or share.
        let fetched = st.upstream.fetch(req).await;
        return Answer::exchange(fetched, true, Outcome::Miss, Outcome::MissError);
    }
    // Only a plain `GET` revalidates: a `Range`, a conditional of the client's own, or a
    // request whose answer may not be stored (or shared) goes to the origin as it is.
    let plain = NOT_PLAIN.iter().all(|h| !req.headers().contains_key(h));
    let job = Job {
        key,
        req_headers: req.headers().clone(),
        stale: stale.filter(|_| plain && !rd.no_store),
        slice: None,
    };
    fill::miss(st, req, job, &rd).await
}

/// Step 5, pass: another method goes to the origin as it is; after a successful unsafe one,
/// its URL is invalidated, and so are the `Location` and `Content-Location` URLs of the same
/// host (RFC 9111 §4.4).
async fn pass(st: &State, req: Request<ReqBody>) -> Answer {
    let primary = CacheKey::primary(&req);
    let host = upstream::request_host(&req).to_ascii_lowercase();
    let unsafe_method = !matches!(*req.method(), Method::OPTIONS | Method::TRACE);
    let fetched = st.upstream.fetch(req).await;
    if let Ok(f) = &fetched {
        if unsafe_method && (f.status.is_success() || f.status.is_redirection()) {
            // The origin's answer is still the client's if the disk fails to record a removal
            // (logged and counted there).
            st.invalidate(&primary).await.ok();
            for name in [header::LOCATION, header::CONTENT_LOCATION] {
                let target = f.headers.get(&name).and_then(|v| v.to_str().ok());
                if let Some(other) = target.and_then(|t| same_host_key(&host, t)) {
                    st.invalidate(&other).await.ok();
                }
            }
        }
    }
    Answer::exchange(fetched, false, Outcome::Pass, Outcome::PassError)
}

/// The primary key of a `Location` / `Content-Location` value if it names a URL of `host`
/// (a path, or an absolute URL with that host); `None` for another host or no URL.
fn same_host_key(host: &str, target: &str) -> Option<String> {
    let uri: hyper::Uri = target.trim().parse().ok()?;
    let pq = uri.path_and_query()?.as_str();
    if !pq.starts_with('/') {
        return None;
    }
    match uri.authority() {
        None => Some(format!("{host}{pq}")),
        Some(a) if a.as_str().eq_ignore_ascii_case(host) => Some(format!("{host}{pq}")),
        Some(_) => None,
    }
}

/// Step 6, deliver: the edge, where the [`Outcome`] becomes `X-Cache`, the metrics and the
/// access log line.
fn deliver(
    st: &State,
    answer: Answer,
    arrived: Instant,
    log: Option<(Method, String)>,
    remote: SocketAddr,
) -> Response<NodeBody> {
    let Answer {
        outcome,
        mut response,
    } = answer;
    let h = response.headers_mut();
    // The targeted directives a stored response carries are the node's own (`targeted.rs`).
    h.remove(&targeted::EFFECTIVE);
    // A relayed answer already says how the serving node answered.
    if outcome != Outcome::Relayed {
        h.append(header::VIA, HeaderValue::from_static(VIA));
        h.insert(X_CACHE, HeaderValue::from_static(outcome.x_cache()));
    }
    let elapsed = arrived.elapsed();
    let bytes = hyper::body::Body::size_hint(response.body()).exact();
    st.metrics.record(outcome, elapsed, bytes);
    if let Some(c) = &st.cluster {
        c.stats.delivered(outcome, bytes, response.headers());
    }
    if let Some((method, path)) = log {
        let id = ecdn_cluster::peer::request_id();
        let line = ops::Access {
            method: method.as_str(),
            path: &path,
            request_id: id.as_ref().and_then(|v| v.to_str().ok()),
            status: response.status().as_u16(),
            tier: outcome.tier(),
            bytes,
            duration: elapsed,
            remote,
        }
        .line();
        eprintln!("{line}");
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_keys() {
        let req = Request::builder()
            .uri("/obj/1?size=10")
            .header("host", "Example.com")
            .body(())
            .unwrap();
        assert_eq!(CacheKey::primary(&req), "example.com/obj/1?size=10");
        let k = CacheKey::variant("a/b", "a/b".into());
        assert_eq!(k.id, ecdn_trace::hash_id(b"a/b"));
    }
}
