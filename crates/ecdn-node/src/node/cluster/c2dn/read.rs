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
//! * At least K distinct chunks: a coded hit, streamed (`pieces/coded/`).
//! * 1 to K − 1 chunks: a **partial hit**, counted as a miss: only the missing data chunks'
//!   bytes come from the origin (`partial.rs`).
//! * Nothing: a miss.
//!
//! After a hit, every available target that lacks its piece gets it (`write.rs`), before the
//! answer, as the simulator's servers are written before the next request: a replica from the
//! bytes read, chunks re-encoded from the object read whole; with `resync`, the pieces found
//! are written again too when they are near eviction (`resync.rs`).
//!
//! **This file is the read's orchestration, read top to bottom**: [`lookup`] (where the
//! pieces are), then [`replica_hit`] or `coded_hit` (what the hit does, step by step). The
//! mechanisms are leaves it calls, none calling back: `placed.rs` (what the bucket's servers
//! hold, and the protection counted), `replica.rs` (a replica from a peer, hedged),
//! `pieces/coded/` (the windows of a coded read: chunk streams, delayed parity, decode),
//! `whole.rs` (an object read whole and answered), `restore.rs` (what a hit restores on the
//! targets), `partial.rs` (a partial hit, called by the request's path).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use ecdn_cluster::piece::{Coding, PieceMeta};
use ecdn_cluster::wire::PieceName;
use ecdn_codec::ObjectLayout;
use http_body_util::Full;
use hyper::header::VARY;
use hyper::{Method, Request};
use tokio::sync::oneshot;

use crate::node::answer::{Answer, ReqBody};
use crate::node::body::{LiveBody, NodeBody};
use crate::node::cluster::c2dn::headers::mark;
use crate::node::cluster::c2dn::partial::PartialHit;
use crate::node::cluster::c2dn::placed::{
    ask_placed, count_protection, local_coding, presumed_holders,
};
use crate::node::cluster::c2dn::replica::hedged_replica;
use crate::node::cluster::c2dn::restore::{chunk_targets, reinsert, replica_targets};
use crate::node::cluster::c2dn::resync;
use crate::node::cluster::c2dn::whole::answer_whole;
use crate::node::cluster::pieces::coded::{self, CodedObject};
use crate::node::cluster::pieces::holders::{ask_holders, lacking, sources_of, Holder};
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
    // 1. What this node holds.
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
        // 2. A chunk here names the coding: read from the bucket's servers at once.
        let mut presumed = presumed_holders(c, bucket);
        presumed[0] = holders[0].clone();
        let hit = coded_hit(
            st, c, req, key, rd, &presumed, coding, http, bucket, &once, true, reader,
        );
        if let Some(found) = hit.await {
            return found;
        }
    }
    // 3. Otherwise (or the assigned servers could not supply it): ask the bucket's servers
    // who holds what.
    if !local_replica {
        for (m, holder) in ask_holders(c, &key.key, bucket).await {
            if meta.as_ref().is_none_or(|m| m.coding.is_none()) {
                meta = Some(m);
            }
            holders.push(holder);
        }
    }
    // 4. A replica: this node's, else a holder's this node's probes do not find slow, else
    // any. Without one, the coding a chunk names: a coded hit.
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

/// A replica hit from `server` (one of `holders`), or a miss: the replica read (here, or from
/// a peer, hedged); the targets that lack their copy written (a replica found here without
/// asking anyone: checked beside the answer, its last byte waiting for the check when
/// reinsertion is on); the HOC's admission; the answer.
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
            replica_targets(&st, &cl, &key, &e, &once).await
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

/// A coded hit from `holders`, or a partial hit, or a miss. With `presumed`, `holders` is
/// what the bucket map implies ([`presumed_holders`]) rather than what the servers said: the
/// object is read from the assigned servers at once, and whether they really hold their
/// chunks is asked beside the read (`restore.rs`); a lacking chunk is restored before
/// the answer ends, as on the other path. `None` (only with `presumed`): the assigned servers
/// could not supply the object; the caller asks the servers and tries again. A
/// [`Reader::Direct`] gets a hit or a miss, as it says.
///
/// The steps: what the holders make of the object ([`coded_object`]: a hit, a partial hit or
/// nothing); whether the HOC takes it; then either the object read whole, when a target lacks
/// its chunk or the HOC admits it whole (`whole.rs`), or its answer streamed window by window
/// (`pieces/coded/`) with the targets' check beside it ([`beside_the_read`]).
#[allow(clippy::too_many_arguments)]
async fn coded_hit(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    req: &Request<ReqBody>,
    key: &CacheKey,
    rd: &RequestDirectives,
    holders: &[Holder],
    coding: Coding,
    http: Vec<u8>,
    bucket: usize,
    once: &Arc<AtomicBool>,
    presumed: bool,
    reader: Reader,
) -> Option<Found> {
    let head = req.method() == Method::HEAD;
    let direct = reader == Reader::Direct;
    // 1. The object, from what the holders hold.
    let (mut obj, e) = match coded_object(c, key, rd, holders, coding, &http, bucket) {
        Held::Enough(obj, e) => (obj, e),
        Held::OtherCode => return Some(Found::Miss),
        Held::Unusable | Held::Partial(_) if presumed => return None,
        Held::Unusable | Held::Partial(_) if direct => return Some(Found::Miss),
        Held::Unusable => return Some(Found::Miss),
        Held::Partial(usable) => {
            ClusterStats::add(&c.stats.partial_hits, 1);
            let hit = usable.filter(|_| !head);
            return Some(Found::Partial(hit.map(|(obj, entry)| PartialHit {
                obj,
                entry,
                known: holders.to_vec(),
            })));
        }
    };
    if direct && e.first(&VARY).is_some() {
        return Some(Found::Miss);
    }
    // 2. The HOC: it holds the object in stripes already (the lookup found some of the stripes
    // this answer needs missing), or its policy admits it now. (A HEAD neither reads nor keeps
    // bytes.)
    let now = Instant::now();
    let size = obj.layout.size();
    let held = (!head && !direct)
        .then(|| lock(&st.hoc).striped(key.id, &key.key))
        .flatten();
    let admit =
        held.is_none() && !head && !direct && lock(&st.hoc).admit(key.id, &key.key, size, now);
    // 3. Read whole: a target lacks its chunk (to re-encode it), or the HOC admits the whole
    // object (a chunk lost meanwhile then turns the request into a miss instead of a response
    // cut short). Ranges read only their stripes into the HOC (below).
    let whole = admit && !req.headers().contains_key(hyper::header::RANGE);
    let lack = lacking(c, &key.key, true, holders);
    if lack.iter().any(|&l| l) || whole {
        // Presumed: the object is read whole anyway, so learn first what the targets really
        // lack.
        let asked = match presumed {
            true => Some(ask_placed(c, key, true, &holders[0]).await),
            false => None,
        };
        let known = asked.as_deref().unwrap_or(holders);
        // (When the presumed sources fail here, the HOC's admission was counted once already.)
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
    // 4. Streamed, the HOC keeping the stripes read if it holds or admits the object.
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
    let finish = beside_the_read(st, c, key, &obj, e, holders, once, presumed);
    let decoded = Arc::new(AtomicBool::new(false));
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

/// What the holders of a coded object hold of it ([`coded_object`]).
enum Held {
    /// K chunks or more, and its stored response fresh and accepted: a hit.
    Enough(CodedObject, StoredResponse),
    /// Some chunks, fewer than K: a partial hit, with the object and its response when the
    /// response is usable (to fetch only the missing chunks).
    Partial(Option<(CodedObject, StoredResponse)>),
    /// No chunk, or a response that is not fresh or not accepted.
    Unusable,
    /// Coded with another K and P than this cluster's.
    OtherCode,
}

/// What `holders` hold of the object `coding` describes (its response's metadata `http`).
fn coded_object(
    c: &Cluster,
    key: &CacheKey,
    rd: &RequestDirectives,
    holders: &[Holder],
    coding: Coding,
    http: &[u8],
    bucket: usize,
) -> Held {
    let (k, p) = (c.cfg.k, c.cfg.p);
    if usize::from(coding.k) != k || usize::from(coding.p) != p {
        return Held::OtherCode;
    }
    let Ok(layout) = ObjectLayout::new(coding.size, k, p, u64::from(coding.sub_chunk)) else {
        return Held::OtherCode;
    };
    // A source per chunk (this node first among the holders).
    let sources = sources_of(c, bucket, holders);
    let found = sources.iter().filter(|s| s.is_some()).count();
    if found == 0 {
        return Held::Unusable;
    }
    let usable = stored_response(key.key.clone(), http, Bytes::new()).filter(|e| {
        let now = Instant::now();
        e.is_fresh(now) && rd.accepts(e, now)
    });
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
    match usable {
        _ if found < k => Held::Partial(usable.map(|e| (obj, e))),
        Some(e) => Held::Enough(obj, e),
        None => Held::Unusable,
    }
}

/// The work beside a streamed coded read that the answer's last byte waits for: read from the
/// presumed holders, the check that every target holds its chunk, and the restoration of
/// those it lacks (`restore.rs`'s [`chunk_targets`]); read from holders that answered, the
/// reinsertion's check once the read is over, if reinsertion is on. `None`: nothing to wait for.
#[allow(clippy::too_many_arguments)]
fn beside_the_read(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    key: &CacheKey,
    obj: &Arc<CodedObject>,
    e: StoredResponse,
    holders: &[Holder],
    once: &Arc<AtomicBool>,
    presumed: bool,
) -> Option<coded::Finish> {
    let (st, c, obj) = (st.clone(), c.clone(), obj.clone());
    let (read_over, over) = oneshot::channel();
    let task = if presumed {
        let (key, here, once) = (key.clone(), holders[0].clone(), once.clone());
        ecdn_cluster::peer::spawn_traced(async move {
            chunk_targets(&st, &c, &key, obj, e, &here, &once, over).await
        })
    } else if c.cfg.reinsert.is_some() {
        // The holders were asked before the read: a reinsertion's check once it is over.
        let known = holders.to_vec();
        ecdn_cluster::peer::spawn_traced(async move {
            let _ = over.await;
            reinsert(&st, &c, &obj, &e, &known).await;
        })
    } else {
        return None;
    };
    Some(coded::Finish { task, read_over })
}
