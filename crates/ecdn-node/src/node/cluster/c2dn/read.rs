//! The serving node's lookup of an object's pieces in the cluster (after its HOC).
//!
//! As the simulator does (`ecdn_sim::cluster`): the node looks for the object's pieces on the
//! bucket's servers — its own piece store first; then, unless it holds a replica, it asks the
//! bucket's servers (the data and parity servers, the replica targets, and the slots' former
//! servers, where moved chunks stay until evicted) which pieces they hold, all at once. A server
//! serves any chunk of the object it holds, not only the one its assignment names.
//!
//! When the node holds a chunk, the chunk's metadata names the coding (C2DN §5, "Metadata
//! lookups"), so it skips that round trip: it reads from the servers the bucket map assigns
//! at once and asks who holds what beside the read, restoring a lacking chunk before the
//! answer ends. If the assigned servers cannot supply the object, it asks as above.
//!
//! * A replica anywhere: a hit, read whole (small objects only), from this node, else from a
//!   holder this node's probes do not find much slower than its peers (a hedge, as a coded
//!   read's against a slow data holder). While its answer is awaited, a holder the probes
//!   find slow, or whose read fails, is joined by another holder's read; the first whole
//!   replica wins and the other read is dropped ([`hedged_replica`]).
//! * At least K distinct chunks: a coded hit, streamed (`pieces/coded.rs`).
//! * 1 to K − 1 chunks: a **partial hit**, counted as a miss: only the missing data chunks'
//!   bytes come from the origin (`partial.rs`).
//! * Nothing: a miss.
//!
//! After a hit, every available target that lacks its piece gets it (`write.rs`), before the
//! answer, as the simulator's servers are written before the next request: a replica from the
//! bytes read, chunks re-encoded from the object read whole; with `resync`, the pieces found
//! are written again too when they are near eviction (`resync.rs`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use ecdn_cluster::piece::PieceMeta;
use ecdn_cluster::wire::{self, PieceName};
use ecdn_codec::ObjectLayout;
use ecdn_placement::pieces::Piece;
use http_body_util::Full;
use hyper::header::VARY;
use hyper::{Method, Request};
use tokio::sync::oneshot;

use crate::node::answer::Answer;
use crate::node::answer::ReqBody;
use crate::node::body::{LiveBody, NodeBody};
use crate::node::cluster::c2dn::headers::mark;
use crate::node::cluster::c2dn::partial::PartialHit;
use crate::node::cluster::c2dn::resync;
use crate::node::cluster::c2dn::whole::answer_whole;
use crate::node::cluster::pieces::coded::{self, CodedObject};
use crate::node::cluster::pieces::holders::{
    ask_has, ask_holders, lacking, signed_get, sources_of, Holder,
};
use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::stats::ClusterStats;
use crate::node::cluster::pieces::store::PieceStore;
use crate::node::disk::stored_response;
use crate::node::freshness::{RequestDirectives, StoredResponse};
use crate::node::hit::{hit_bytes, plan_hit};
use crate::node::hoc::Striped;
use crate::node::key::CacheKey;
use crate::node::lock::lock;
use crate::node::outcome::Outcome;
use crate::node::state::State;

/// What the cluster held of a request's object. (Returned once per request and never kept, as
/// [`crate::node::lookup::Lookup`].)
#[allow(clippy::large_enum_variant)]
pub(in crate::node) enum Found {
    Hit(Answer),
    /// Some chunks, fewer than K: a partial hit (a miss); what `partial.rs` needs to fetch
    /// only the missing chunks, unless the whole object must come from the origin.
    Partial(Option<PartialHit>),
    Miss,
}

/// Who reads an object's pieces.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(in crate::node) enum Reader {
    /// The bucket's serving node (or a node serving a relayed request): every outcome, HOC
    /// included.
    Serving,
    /// A node that does not serve the bucket (`direct.rs`): only a hit (a replica, or K
    /// chunks), without the HOC, and never an answer that varies (its
    /// variants' keys are the serving node's); anything else is [`Found::Miss`] and counts
    /// nothing, so that the serving node, relayed to, counts it.
    Direct,
}

/// Looks the object of `key` up in the cluster, as the module documentation says.
pub(in crate::node) async fn lookup(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    req: &Request<ReqBody>,
    key: &CacheKey,
    rd: &RequestDirectives,
    reader: Reader,
) -> Found {
    if st.disk.is_none() {
        return Found::Miss;
    }
    let map = c.map.current();
    let bucket = map.bucket_of(crate::node::cluster::pieces::names::object_id(&key.key));
    let (k, p) = (c.cfg.k, c.cfg.p);
    let chunks = if c.scheme().coded() { k + p } else { 0 };
    let object = key.id;
    let mut holders = vec![Holder::presumed(c.id, c.pieces.held(object, chunks))];
    let mut meta: Option<PieceMeta> = None;
    // Whether this lookup counted its read of a cached object (see `count_protection`).
    let once = Arc::new(AtomicBool::new(false));
    // A replica here: no need to ask anyone.
    let local_replica = holders[0].held.contains(&PieceName::Replica);
    let local = if local_replica {
        None
    } else {
        local_coding(st, c, object, &holders[0]).await
    };
    if let Some((coding, http)) = local.clone() {
        // A chunk here names the coding: read from the bucket's servers at once.
        let mut presumed = presumed_holders(c, bucket);
        presumed[0] = holders[0].clone();
        let hit = coded_hit(
            st, c, req, key, rd, &presumed, coding, http, bucket, &once, true, reader,
        );
        if let Some(found) = hit.await {
            return found;
        }
    }
    if !local_replica {
        for (m, holder) in ask_holders(c, &key.key, bucket).await {
            if meta.as_ref().is_none_or(|m| m.coding.is_none()) {
                meta = Some(m);
            }
            holders.push(holder);
        }
    }
    // This node's replica, else a holder's this node's probes do not find slow, else any.
    let now = Instant::now();
    let with_replica = || {
        holders
            .iter()
            .filter(|h| h.held.contains(&PieceName::Replica))
            .map(|h| h.server)
    };
    let replica_at = with_replica()
        .find(|&s| !c.slower(s, now))
        .or_else(|| with_replica().next());
    // A peer's chunk names the coding, or this node's.
    let coding = meta.and_then(|m| m.coding.map(|cd| (cd, m.http))).or(local);
    if let Some((coding, http)) = coding.filter(|_| replica_at.is_none()) {
        let hit = coded_hit(
            st, c, req, key, rd, &holders, coding, http, bucket, &once, false, reader,
        );
        return hit.await.unwrap_or(Found::Miss);
    }
    let Some(server) = replica_at else {
        return Found::Miss;
    };
    replica_hit(st, c, req, key, rd, &holders, server, &once, reader).await
}

/// The coding and HTTP metadata of a chunk of `object` this node holds (`holder`: what it
/// holds), if it holds one: what a node that finds a chunk locally needs to know what to fetch
/// (C2DN §5, "Metadata lookups").
async fn local_coding(
    st: &State,
    c: &Cluster,
    object: u64,
    holder: &Holder,
) -> Option<(ecdn_cluster::piece::Coding, Vec<u8>)> {
    let disk = st.disk.as_ref()?;
    let ch = holder.held.iter().find_map(|p| match p {
        PieceName::Chunk(ch) => Some(*ch),
        _ => None,
    })?;
    let id = PieceStore::piece_id(object, PieceName::Chunk(ch));
    let (m, _) = c.pieces.read(disk, id, Some(0..0)).await?;
    let m = PieceMeta::decode(&m).ok()?;
    Some((m.coding?, m.http))
}

/// The holders the bucket map implies: every assigned server of the bucket's coded pieces
/// holding its chunk. Entry 0 is this node's, empty (the caller puts what it really holds).
fn presumed_holders(c: &Cluster, bucket: usize) -> Vec<Holder> {
    let map = c.map.current();
    let (mut placed, mut walk) = (Vec::new(), Vec::new());
    map.pieces(bucket, true, &mut placed, &mut walk);
    let mut holders = vec![Holder::presumed(c.id, Vec::new())];
    for p in placed.iter().filter(|p| p.server != c.id) {
        holders.push(Holder::presumed(p.server, vec![assigned(p, true)]));
    }
    holders
}

/// The piece the map assigns `p`'s server: its chunk if `coded`, else a replica.
fn assigned(p: &Piece, coded: bool) -> PieceName {
    if coded {
        PieceName::Chunk(p.chunk as u16)
    } else {
        PieceName::Replica
    }
}

/// What the bucket's assigned servers of its pieces (chunks if `coded`, else replicas) hold,
/// asking every available one but this node (whose pieces `here` says) and the slow ones at
/// once; a server that does not answer holds nothing. ([`lacking`] of it: which pieces their
/// servers lack.)
async fn ask_placed(c: &Arc<Cluster>, key: &CacheKey, coded: bool, here: &Holder) -> Vec<Holder> {
    let map = c.map.current();
    let bucket = map.bucket_of(crate::node::cluster::pieces::names::object_id(&key.key));
    let (mut placed, mut walk) = (Vec::new(), Vec::new());
    map.pieces(bucket, coded, &mut placed, &mut walk);
    // A server this node's probes find much slower than its peers is not waited for: it is
    // presumed to hold what the map assigns it (a piece it lacks is restored by a later hit
    // or by repair, not by this answer).
    let now = Instant::now();
    let (slow, fast): (Vec<&Piece>, Vec<&Piece>) = placed
        .iter()
        .filter(|p| p.server != c.id && map.is_available(p.server))
        .partition(|p| c.slower(p.server, now));
    let mut holders = vec![here.clone()];
    for p in &slow {
        let piece = assigned(p, coded);
        match holders.iter_mut().find(|h| h.server == p.server) {
            Some(h) => h.held.push(piece),
            None => holders.push(Holder::presumed(p.server, vec![piece])),
        }
    }
    let servers = fast.iter().map(|p| p.server).collect();
    holders.extend(ask_servers(c, &key.key, servers).await);
    holders
}

/// What `servers` hold of `key` (those available, but this node), asked at once; a server that
/// does not answer holds nothing.
async fn ask_servers(c: &Arc<Cluster>, key: &str, mut servers: Vec<usize>) -> Vec<Holder> {
    let map = c.map.current();
    servers.sort_unstable();
    servers.dedup();
    servers.retain(|&s| s != c.id && map.is_available(s));
    let mut asks = tokio::task::JoinSet::new();
    for s in servers {
        let (c, k) = (c.clone(), key.to_string());
        asks.spawn(async move { (s, ask_has(&c, s, &k).await) });
    }
    let mut holders = Vec::new();
    while let Some(r) = asks.join_next().await {
        if let Ok((server, answer)) = r {
            // No answer: holds nothing (and there is no age to know).
            holders.push(answer.map_or_else(|| Holder::presumed(server, Vec::new()), |(_, h)| h));
        }
    }
    holders
}

/// [`ask_placed`] for a read from the presumed holders, told the read's answers: the servers
/// whose only assigned pieces are data chunks the read asks of them are not asked again
/// (`heard`, once `read_over`: a `200` holds its chunk). The others are asked beside the read,
/// and so is any server the read did not hear from, or heard lacks its chunk. When what was
/// heard leaves the object with K distinct chunks or fewer, the servers heard are asked too,
/// for every piece they hold, so the protection counted is the one the full answers give.
/// With `reinsert`, every assigned server is asked beside the read: the hit's reinsertion
/// needs every piece's age, which a piece's answer does not say.
async fn ask_placed_beside(
    c: &Arc<Cluster>,
    key: &CacheKey,
    obj: &CodedObject,
    here: &Holder,
    read_over: oneshot::Receiver<()>,
) -> Vec<Holder> {
    let map = c.map.current();
    let bucket = map.bucket_of(crate::node::cluster::pieces::names::object_id(&key.key));
    let (mut placed, mut walk) = (Vec::new(), Vec::new());
    map.pieces(bucket, true, &mut placed, &mut walk);
    let k = obj.layout.k();
    // A piece the read answers: a data chunk read from its assigned server, a peer.
    let read = |chunk: usize, server: usize| {
        chunk < k
            && server != c.id
            && obj.sources.get(chunk) == Some(&Some(server))
            && c.cfg.reinsert.is_none()
    };
    let (mut heard_from, mut others): (Vec<usize>, Vec<usize>) = (Vec::new(), Vec::new());
    for p in &placed {
        if read(p.chunk, p.server) {
            heard_from.push(p.server);
        } else {
            others.push(p.server);
        }
    }
    heard_from.retain(|s| !others.contains(s) && map.is_available(*s));
    heard_from.sort_unstable();
    heard_from.dedup();
    let asked = ask_servers(c, &key.key, others);
    // (A read dropped before its end has heard what it heard: the rest is asked.)
    let (mut holders, _) = tokio::join!(asked, read_over);
    holders.insert(0, here.clone());
    let (mut sure, mut ask) = (Vec::new(), Vec::new());
    for s in heard_from {
        let chunks: Vec<usize> = placed
            .iter()
            .filter(|p| p.server == s)
            .map(|p| p.chunk)
            .collect();
        if chunks.iter().all(|&ch| obj.heard.of(ch) == Some(true)) {
            let held = chunks.iter().map(|&ch| PieceName::Chunk(ch as u16));
            sure.push(Holder::presumed(s, held.collect()));
        } else {
            ask.push(s);
        }
    }
    let heard: Vec<usize> = sure.iter().map(|h| h.server).collect();
    holders.extend(sure);
    if distinct_chunks(c, &holders) <= k {
        // Every piece the servers heard hold may count: ask them.
        holders.retain(|h| !heard.contains(&h.server));
        ask.extend(heard);
    }
    holders.extend(ask_servers(c, &key.key, ask).await);
    holders
}

/// A coded hit that lacks nothing (`known`: what its servers hold): with `reinsert`, its
/// pieces near the FIFO's end are written again (`resync.rs`), from the object read whole.
async fn reinsert(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    obj: &Arc<CodedObject>,
    e: &StoredResponse,
    known: &[Holder],
) {
    let lack = &lacking(c, &obj.key, true, known);
    let renew = resync::reinsertions(c, &obj.key, true, lack, known).await;
    if renew.is_empty() {
        return;
    }
    let whole = Arc::new(AtomicBool::new(false));
    if let Some(body) = coded::read_all(st, c, obj.clone(), whole).await {
        let e = StoredResponse { body, ..e.clone() };
        resync::rewrite(st, c, &e, lack, &renew).await;
    }
}

/// Counts the serving node's read of a cached object (`ecdn_cluster_cached_reads_total`, see
/// `admin.rs`), once per lookup (`once`): protected if `holders` hold replicas on two servers
/// or more (`coded`: K + 1 distinct chunks or more), unprotected otherwise.
fn count_protection(c: &Cluster, holders: &[Holder], coded: bool, once: &AtomicBool) {
    if once.swap(true, Ordering::Relaxed) {
        return;
    }
    let protected = if coded {
        distinct_chunks(c, holders) > c.cfg.k
    } else {
        let mut servers: Vec<usize> = holders
            .iter()
            .filter(|h| h.held.contains(&PieceName::Replica))
            .map(|h| h.server)
            .collect();
        servers.sort_unstable();
        servers.dedup();
        servers.len() >= 2
    };
    c.stats.cached_read(coded, protected);
}

/// How many of the object's chunks `holders` hold between them.
fn distinct_chunks(c: &Cluster, holders: &[Holder]) -> usize {
    let total = c.cfg.k + c.cfg.p;
    let mut chunks: Vec<u16> = holders
        .iter()
        .flat_map(|h| &h.held)
        .filter_map(|piece| match piece {
            PieceName::Chunk(ch) if usize::from(*ch) < total => Some(*ch),
            _ => None,
        })
        .collect();
    chunks.sort_unstable();
    chunks.dedup();
    chunks.len()
}

/// The coded object `key` (id `id`, of `bucket`) read whole from what `held` says each server
/// holds (this node first), decoded where needed: the background repair's read.
pub(in crate::node) async fn whole_object(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    key: &str,
    id: u64,
    bucket: usize,
    held: &[Holder],
    coding: ecdn_cluster::piece::Coding,
) -> Option<Bytes> {
    let (k, p) = (c.cfg.k, c.cfg.p);
    if usize::from(coding.k) != k || usize::from(coding.p) != p {
        return None;
    }
    let layout = ObjectLayout::new(coding.size, k, p, u64::from(coding.sub_chunk)).ok()?;
    let obj = CodedObject {
        key: key.to_string(),
        object: id,
        layout,
        coding,
        sources: sources_of(c, bucket, held),
        supplied: Vec::new(),
        hoc: None,
        late: None,
        heard: Default::default(),
    };
    let decoded = Arc::new(AtomicBool::new(false));
    coded::read_all(st, c, Arc::new(obj), decoded).await
}

#[allow(clippy::too_many_arguments)]
async fn replica_hit(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    req: &Request<ReqBody>,
    key: &CacheKey,
    rd: &RequestDirectives,
    holders: &[Holder],
    server: usize,
    once: &Arc<AtomicBool>,
    reader: Reader,
) -> Found {
    let object = key.id;
    let frame = if server == c.id {
        let Some(disk) = &st.disk else {
            return Found::Miss;
        };
        c.pieces
            .read(disk, PieceStore::piece_id(object, PieceName::Replica), None)
            .await
    } else {
        let now = Instant::now();
        let alternate = holders
            .iter()
            .filter(|h| h.server != server && h.held.contains(&PieceName::Replica))
            .map(|h| h.server)
            .min_by_key(|&s| c.slower(s, now));
        hedged_replica(c, server, alternate, &key.key).await
    };
    let Some((m, payload)) = frame else {
        return Found::Miss;
    };
    let Some(e) = PieceMeta::decode(&m)
        .ok()
        .filter(|m| m.coding.is_none())
        .and_then(|m| stored_response(key.key.clone(), &m.http, payload))
    else {
        return Found::Miss;
    };
    let now = Instant::now();
    if !e.is_fresh(now) || !rd.accepts(&e, now) {
        return Found::Miss;
    }
    if reader == Reader::Direct && e.first(&VARY).is_some() {
        return Found::Miss;
    }
    let e = Arc::new(e);
    let head = req.method() == Method::HEAD;
    // Found here without asking anyone: whether the other targets hold their copy is checked
    // beside the answer. With reinsertion on, the answer's last byte waits for the check (and
    // what it writes), as the simulator's hit rewrites before the next request.
    let mut check = None;
    if server == c.id && holders.len() == 1 {
        let (st, cl, key, e, once) = (st.clone(), c.clone(), key.clone(), e.clone(), once.clone());
        let task = ecdn_cluster::peer::spawn_traced(async move {
            repair_replicas(&st, &cl, &key, &e, &once).await
        });
        if c.cfg.reinsert.is_some() {
            check = Some(task);
        }
    } else {
        count_protection(c, holders, false, once);
        let lack = lacking(c, &key.key, false, holders);
        if lack.iter().any(|&l| l) {
            ClusterStats::add(&c.stats.repairs, 1);
        }
        resync::place(st, c, &e, &lack, holders).await;
    }
    ClusterStats::add(&c.stats.replicated_hits, 1);
    let hoc = reader == Reader::Serving;
    if hoc && !head && lock(&st.hoc).admit(object, &key.key, e.body.len() as u64, now) {
        st.unless_purged(&e, || lock(&st.hoc).insert(object, e.clone()))
            .await;
    }
    let (r, bytes) = hit_bytes(&e, req.headers(), now, head);
    let body = match check {
        Some(task) if !bytes.is_empty() => {
            let until = async move {
                let _ = task.await;
            };
            NodeBody::Live(LiveBody::last_byte_after(bytes, until))
        }
        Some(task) => {
            // No byte to hold back: the answer waits.
            let _ = task.await;
            NodeBody::Full(Full::new(bytes))
        }
        None => NodeBody::Full(Full::new(bytes)),
    };
    Found::Hit(Answer {
        outcome: Outcome::HitDisk,
        response: mark(r.map(|()| body), c, false, false),
    })
}

/// Writes the replicas of `e` that the other replica targets lack (asking them first), and
/// counts the read's protection from their answers.
async fn repair_replicas(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    key: &CacheKey,
    e: &StoredResponse,
    once: &AtomicBool,
) {
    let here = Holder::presumed(c.id, vec![PieceName::Replica]);
    let holders = ask_placed(c, key, false, &here).await;
    count_protection(c, &holders, false, once);
    let lack = lacking(c, &key.key, false, &holders);
    if lack.iter().any(|&l| l) {
        ClusterStats::add(&c.stats.repairs, 1);
    }
    resync::place(st, c, e, &lack, &holders).await;
}

/// A whole replica from `server`, hedged with `alternate`'s (another holder, if any): asked
/// too as soon as this node's probes find `server` much slower than its peers while its
/// answer is awaited (`Cluster::turned_slow`: late probes count), or at once when `server`'s
/// read fails. The first whole replica wins; the other read is dropped, which cancels it.
async fn hedged_replica(
    c: &Cluster,
    server: usize,
    alternate: Option<usize>,
    key: &str,
) -> Option<(Vec<u8>, Bytes)> {
    let first = fetch_replica(c, server, key);
    let Some(alternate) = alternate else {
        return first.await;
    };
    tokio::pin!(first);
    tokio::select! {
        r = &mut first => {
            if r.is_some() {
                return r;
            }
            c.stats.replica_hedge(server);
            return fetch_replica(c, alternate, key).await;
        }
        _ = c.turned_slow(server) => {}
    }
    c.stats.replica_hedge(server);
    let second = fetch_replica(c, alternate, key);
    tokio::pin!(second);
    tokio::select! {
        r = &mut first => match r {
            Some(_) => r,
            None => second.await,
        },
        r = &mut second => match r {
            Some(_) => r,
            None => first.await,
        },
    }
}

/// A whole replica from a peer (a signed frame).
pub(in crate::node) async fn fetch_replica(
    c: &Cluster,
    server: usize,
    key: &str,
) -> Option<(Vec<u8>, Bytes)> {
    let path = wire::piece_path(PieceName::Replica, key, None);
    let limit = c.cfg.threshold as usize * 4 + ecdn_cluster::piece::MAX_META;
    let body = signed_get(c, server, &path, limit).await?;
    let (m, payload) = wire::split_frame(&body).ok()?;
    let payload = body.slice(body.len() - payload.len()..);
    Some((m.to_vec(), payload))
}

/// A coded hit from `holders`, or a partial hit, or a miss. With `presumed`, `holders` is
/// what the bucket map implies ([`presumed_holders`]) rather than what the servers said: the
/// object is read from the assigned servers at once, and whether they really hold their
/// chunks is asked beside the read ([`ask_placed`]); a lacking chunk is restored before
/// the answer ends, as on the other path. `None` (only with `presumed`): the assigned servers
/// could not supply the object; the caller asks the servers and tries again. A
/// [`Reader::Direct`] gets a hit or a miss, as it says.
#[allow(clippy::too_many_arguments)]
async fn coded_hit(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    req: &Request<ReqBody>,
    key: &CacheKey,
    rd: &RequestDirectives,
    holders: &[Holder],
    coding: ecdn_cluster::piece::Coding,
    http: Vec<u8>,
    bucket: usize,
    once: &Arc<AtomicBool>,
    presumed: bool,
    reader: Reader,
) -> Option<Found> {
    let direct = reader == Reader::Direct;
    let (k, p) = (c.cfg.k, c.cfg.p);
    if usize::from(coding.k) != k || usize::from(coding.p) != p {
        return Some(Found::Miss);
    }
    let Ok(layout) = ObjectLayout::new(coding.size, k, p, u64::from(coding.sub_chunk)) else {
        return Some(Found::Miss);
    };
    // A source per chunk (this node first among the holders).
    let sources = sources_of(c, bucket, holders);
    let found = sources.iter().filter(|s| s.is_some()).count();
    let usable = stored_response(key.key.clone(), &http, Bytes::new()).filter(|e| {
        let now = Instant::now();
        e.is_fresh(now) && rd.accepts(e, now)
    });
    if presumed && (found < k || usable.is_none()) {
        return None;
    }
    if direct && (found < k || usable.as_ref().is_none_or(|e| e.first(&VARY).is_some())) {
        return Some(Found::Miss);
    }
    if found == 0 {
        return Some(Found::Miss);
    }
    let obj = CodedObject {
        key: key.key.clone(),
        object: key.id,
        layout,
        coding,
        sources,
        supplied: Vec::new(),
        hoc: None,
        late: None,
        heard: Default::default(),
    };
    if found < k {
        ClusterStats::add(&c.stats.partial_hits, 1);
        let head = req.method() == Method::HEAD;
        return Some(Found::Partial(usable.filter(|_| !head).map(|entry| {
            PartialHit {
                obj,
                entry,
                known: holders.to_vec(),
            }
        })));
    }
    let Some(e) = usable else {
        return Some(Found::Miss);
    };
    let now = Instant::now();
    let mut obj = obj;
    let decoded = Arc::new(AtomicBool::new(false));
    let head = req.method() == Method::HEAD;
    let size = obj.layout.size();
    let lack = lacking(c, &key.key, true, holders);
    // The HOC: it holds the object in stripes already (the lookup found some of the stripes
    // this answer needs missing), or its policy admits it now. (A HEAD neither reads nor keeps
    // bytes.)
    let held = (!head && !direct)
        .then(|| lock(&st.hoc).striped(key.id, &key.key))
        .flatten();
    let admit =
        held.is_none() && !head && !direct && lock(&st.hoc).admit(key.id, &key.key, size, now);
    // A whole object the HOC admits is read whole before the answer, as one the targets lack
    // a chunk of: a chunk lost meanwhile then turns the request into a miss instead of a
    // response cut short. Ranges read only their stripes into the HOC (below).
    let whole = admit && !req.headers().contains_key(hyper::header::RANGE);
    if lack.iter().any(|&l| l) || whole {
        // Presumed: the object is read whole anyway, so learn first what the targets really
        // lack.
        let asked = match presumed {
            true => Some(ask_placed(c, key, true, &holders[0]).await),
            false => None,
        };
        let known = asked.as_deref().unwrap_or(holders);
        // The object whole, to re-encode the missing chunks and for the HOC. (When the
        // presumed sources fail here, the HOC's admission was counted once already.)
        let keep = admit || held.is_some();
        let response = answer_whole(st, c, req, key, Arc::new(obj), e, known, keep).await;
        let response = match response {
            Some(r) => r,
            None if presumed => return None,
            None => return Some(Found::Miss),
        };
        count_protection(c, known, true, once);
        ClusterStats::add(&c.stats.coded_hits, 1);
        return Some(Found::Hit(Answer {
            outcome: Outcome::HitDisk,
            response,
        }));
    }
    obj.hoc = held.or_else(|| {
        admit.then(|| {
            let width = obj.layout.stripe_width();
            let s = Arc::new(Striped::new(e.clone(), size, width));
            lock(&st.hoc).insert_striped(key.id, s.clone());
            s
        })
    });
    let obj = Arc::new(obj);
    let (r, pieces) = plan_hit(&e, size, req.headers(), now, head);
    let length = crate::node::upstream::content_length(r.headers());
    let finish = if presumed {
        let (st, c, key, obj) = (st.clone(), c.clone(), key.clone(), obj.clone());
        let once = once.clone();
        let here = holders[0].clone();
        let (read_over, over) = oneshot::channel();
        let task = ecdn_cluster::peer::spawn_traced(async move {
            let placed = ask_placed_beside(&c, &key, &obj, &here, over).await;
            count_protection(&c, &placed, true, &once);
            let lack = lacking(&c, &key.key, true, &placed);
            if !lack.iter().any(|&l| l) {
                reinsert(&st, &c, &obj, &e, &placed).await;
                return;
            }
            let whole = Arc::new(AtomicBool::new(false));
            if let Some(body) = coded::read_all(&st, &c, obj, whole).await {
                ClusterStats::add(&c.stats.repairs, 1);
                resync::place(&st, &c, &StoredResponse { body, ..e }, &lack, &placed).await;
            }
        });
        Some(coded::Finish { task, read_over })
    } else if c.cfg.reinsert.is_some() {
        // The holders were asked before the read: a reinsertion's check once it is over.
        let (st, c, obj) = (st.clone(), c.clone(), obj.clone());
        let known = holders.to_vec();
        let (read_over, over) = oneshot::channel::<()>();
        let task = ecdn_cluster::peer::spawn_traced(async move {
            let _ = over.await;
            reinsert(&st, &c, &obj, &e, &known).await;
        });
        Some(coded::Finish { task, read_over })
    } else {
        None
    };
    let streamed = coded::stream(st, c, obj, pieces, decoded.clone(), finish).await;
    let Some((ready, rest)) = streamed else {
        return if presumed { None } else { Some(Found::Miss) };
    };
    if !presumed {
        count_protection(c, holders, true, once);
    }
    ClusterStats::add(&c.stats.coded_hits, 1);
    let d = decoded.load(Ordering::Relaxed);
    if d {
        ClusterStats::add(&c.stats.decodes, 1);
    }
    let body = match rest {
        None => NodeBody::Slices(ready),
        // `length` counts the bytes already read too.
        Some(rx) => NodeBody::Live(LiveBody::new(ready, None, rx, length)),
    };
    Some(Found::Hit(Answer {
        outcome: Outcome::HitDisk,
        response: mark(r.map(|()| body), c, true, d),
    }))
}
