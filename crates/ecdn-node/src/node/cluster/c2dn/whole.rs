//! A coded object read whole (decoded from any K of its chunks), its lacking chunks written
//! back, and answered: how a coded hit that must read everything, and a partial hit whose
//! missing chunks came from the origin, end.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use hyper::{Method, Request, Response};

use crate::node::answer::ReqBody;
use crate::node::body::NodeBody;
use crate::node::cluster::c2dn::headers::mark;
use crate::node::cluster::c2dn::resync;
use crate::node::cluster::pieces::coded::{self, CodedObject};
use crate::node::cluster::pieces::holders::{lacking, Holder};
use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::stats::ClusterStats;
use crate::node::freshness::StoredResponse;
use crate::node::hit::answer_hit;
use crate::node::key::CacheKey;
use crate::node::lock::lock;
use crate::node::state::State;

/// A coded object read whole (decoded where needed): every target that lacks its piece
/// (`known`: what the servers hold) gets it (`resync.rs`), the HOC takes it if `admit`, and
/// the answer to `req` is built from it (`None` if the object cannot be read). Shared by coded
/// hits and partial hits (`partial.rs`).
#[allow(clippy::too_many_arguments)]
pub(in crate::node) async fn answer_whole(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    req: &Request<ReqBody>,
    key: &CacheKey,
    obj: Arc<CodedObject>,
    e: StoredResponse,
    known: &[Holder],
    admit: bool,
) -> Option<Response<NodeBody>> {
    let decoded = Arc::new(AtomicBool::new(false));
    let body = coded::read_all(st, c, obj, decoded.clone()).await?;
    let e = Arc::new(StoredResponse { body, ..e });
    let lack = lacking(c, &key.key, true, known);
    if lack.iter().any(|&l| l) {
        ClusterStats::add(&c.stats.repairs, 1);
    }
    // (With nothing lacking, a reinsertion's check.)
    resync::place(st, c, &e, &lack, known).await;
    if admit {
        st.unless_purged(&e, || lock(&st.hoc).insert(key.id, e.clone()))
            .await;
    }
    let d = decoded.load(Ordering::Relaxed);
    if d {
        ClusterStats::add(&c.stats.decodes, 1);
    }
    let head = req.method() == Method::HEAD;
    let now = Instant::now();
    Some(mark(answer_hit(&e, req.headers(), now, head), c, true, d))
}
