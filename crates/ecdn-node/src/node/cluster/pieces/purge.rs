//! A `PURGE` across the cluster: this node's pieces of an object, then every other node's
//! (a signed `DELETE` of the object's `has` path).

use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::names::object_id;
use crate::node::state::State;

/// A `PURGE` in a cluster, after this node dropped its own copies (`purged`: whether it held
/// any): this node's pieces of the object, then a signed `DELETE` of the object's `has` path
/// to every other node the map has available, all at once; each drops its pieces and its own
/// copies (the bucket's serving node, its decoded copy in the HOC). Whether any node held
/// something, and the nodes that did not confirm.
pub(in crate::node) async fn purge(
    st: &State,
    c: &std::sync::Arc<Cluster>,
    primary: &str,
    mut purged: bool,
) -> (bool, Vec<usize>) {
    if let Some(disk) = &st.disk {
        let object = ecdn_trace::hash_id(primary.as_bytes());
        let now = ecdn_cluster::auth::unix_now_ms();
        let dropped = c.pieces.purge(disk, object, c.cfg.k + c.cfg.p);
        purged |= c.purges.purge(object_id(primary), now, now, dropped).await;
    }
    let map = c.map.current();
    let mut asks = tokio::task::JoinSet::new();
    for server in (0..map.servers()).filter(|&s| s != c.id && map.is_available(s)) {
        let (c, key) = (c.clone(), primary.to_string());
        asks.spawn(async move {
            let answer = purge_answer(&c, server, &key).await;
            (server, answer)
        });
    }
    let mut unreached = Vec::new();
    while let Some(r) = asks.join_next().await {
        match r {
            Ok((_, Some(held))) => purged |= held,
            Ok((server, None)) => unreached.push(server),
            Err(_) => {}
        }
    }
    unreached.sort_unstable();
    (purged, unreached)
}

/// Has node `server` drop every piece (and copy) of `key` (the peer `DELETE` of its `has`
/// path): `Some(whether it held any)`, `None` when it did not confirm.
async fn purge_answer(c: &Cluster, server: usize, key: &str) -> Option<bool> {
    let addr = c.peer_of(server)?;
    let path = ecdn_cluster::wire::has_path(key);
    let sent = c.peers.send(
        addr,
        hyper::Method::DELETE,
        &path,
        bytes::Bytes::new(),
        &[],
        c.peer_timeout,
    );
    match sent.await {
        Ok(r) if r.status() == hyper::StatusCode::OK => {
            let body = ecdn_cluster::peer::read_body(r.into_body(), 64)
                .await
                .ok()?;
            Some(body.as_ref() == b"purged\n")
        }
        _ => None,
    }
}

/// [`purge_answer`] for the object API: whether `server` dropped a piece of `key`.
pub(in crate::node) async fn purge_on(c: &Cluster, server: usize, key: &str) -> bool {
    purge_answer(c, server, key).await == Some(true)
}
