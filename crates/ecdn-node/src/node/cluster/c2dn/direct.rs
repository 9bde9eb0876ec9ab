//! Direct reads: a hit read by the node the client reached, though another node serves the
//! object's bucket (the cluster file's `direct_reads`, on by default).
//!
//! Under anycast routing (C2DN §7; the demo's round-robin) most requests reach a node that
//! does not serve their bucket, and `relay.rs` passes them to the one that does. Relayed, a
//! coded hit crosses the cluster twice: K − 1 chunks (K when the serving node lacks its own)
//! to the serving node, then the whole object back to this node, each hop tagged and checked.
//! Read here, it crosses once: this node looks the object up as the serving node would
//! (`read.rs`, [`lookup`] as a [`Reader::Direct`]): with a chunk of it here, that chunk's
//! metadata names the coding (C2DN §5, "Metadata lookups") and the other chunks are read from
//! their servers at once, (K − 1)/K of the object over the network; without one, but told by
//! an earlier relayed answer that the object is coded (`pieces/kinds.rs`), the bucket's
//! servers are asked who holds what, and K data chunks are read, the object once. The same
//! questions beside the read, the same delayed parity fetch, and the same restoration of a
//! lacking piece follow. A replica on this node is answered from it (nothing crosses); one
//! found elsewhere on the way is read from its holder.
//!
//! **Sliced objects.** An object this node knows to be sliced (`slices.rs`: it served it, or
//! a relayed answer of it, whole or one range, said so) is made of its slices here, as the
//! serving node would make it ([`By::Direct`]): each slice is an object of its own bucket,
//! rarely the URL's, so relayed, a slice's pieces crossed to the serving node and the slice
//! crossed back. Here each slice the cluster's pieces hold is read at once (a replica or K
//! chunks, after one round of questions unless a chunk is here), and only a slice they do not
//! hold is asked of the URL's serving node (`?slice=N` on the relay, `slices.rs`'s
//! `slice_answer`), which finds or fills it as for its own answers, collapsing concurrent
//! fills of it. The answer is counted here (`/_ecdn/sliced/ID`, a miss if any slice was
//! filled), the relayed slice not at the serving node.
//!
//! Everything else still goes to the serving node: an object this node holds no piece of and
//! has not learned is coded (a replica held elsewhere crosses the network once relayed too,
//! and a round of questions first would only delay it), a miss or a partial hit (the serving
//! node collapses concurrent fills of an object into one origin request), a stale entry, a
//! request with `no-cache`, an answer that varies. A request that turns out a miss here has
//! cost the relay one lookup more. What a direct read leaves out:
//! the serving node's HOC (it neither answers nor admits; this node admits nothing to its
//! own). The background repair orders its work by the requests each serving node counted, so
//! with `repair_rate` set every request for another node's bucket is relayed, as with
//! `direct_reads = false` (counting a direct read at the serving node, say with the chunk it
//! answers, would lift that). `--routing bucket` keeps the simulator's routed model request
//! for request either way.

use std::sync::Arc;

use hyper::Request;

use crate::node::answer::{Answer, ReqBody};
use crate::node::cluster::c2dn::read::{lookup, Found, Reader};
use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::stats::ClusterStats;
use crate::node::freshness;
use crate::node::key::CacheKey;
use crate::node::slices::{self, By};
use crate::node::state::State;

/// The answer of a `GET` / `HEAD` this node reads itself (see the module documentation), or
/// `None`: the request goes to the serving node (or is this node's to serve anyway).
pub(in crate::node) async fn read(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    req: &Request<ReqBody>,
) -> Option<Answer> {
    if !c.direct_reads() {
        return None;
    }
    let key = CacheKey::of(st, req);
    let map = c.map.current();
    // The bucket the relay goes by (the URL's, as `relay.rs`).
    let bucket = map.bucket_of(crate::node::cluster::pieces::names::object_id(&key.primary));
    if map.serving(bucket) == Some(c.id) {
        return None; // this node's own bucket: served in full, HOC first
    }
    if st.slices.on() && st.slices.known(&key.primary).is_some() {
        // Made here of its slices, as the serving node would (see the module documentation).
        let rd = freshness::request_directives(req.headers());
        let answer = slices::serve_known(st, req, &rd, &key.primary, By::Direct);
        let answer = Box::pin(answer).await?;
        ClusterStats::add(&c.stats.direct_reads, 1);
        return Some(answer);
    }
    // Worth a read here: a piece of it is here, or a relayed answer said it is coded.
    let here = !c.pieces.held(key.id, c.cfg.k + c.cfg.p).is_empty();
    if !here && !c.kinds.coded(ecdn_trace::hash_id(key.primary.as_bytes())) {
        return None;
    }
    let rd = freshness::request_directives(req.headers());
    if rd.no_cache {
        return None;
    }
    match lookup(st, c, req, &key, &rd, Reader::Direct).await {
        Found::Hit(answer) => {
            ClusterStats::add(&c.stats.direct_reads, 1);
            Some(answer)
        }
        Found::Partial(_) | Found::Miss => None,
    }
}
