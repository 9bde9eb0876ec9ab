//! `GET /_objects/<name>?stat`: an object's record, and what its splits' servers hold now.
//!
//! The record says which splits the writer stored; since then a server may have evicted its
//! split, or restarted. So the answer asks every server of the record (a signed `has`, as a
//! read's holders are found; this node looks in its own piece policy) and adds, per split:
//! `held`, `true` or `false` as its server answered, `null` when the server is unavailable in
//! the map or did not answer; and `readable`, the splits known held. With `readable >= k` a
//! read can decode the object (unless a split turns out corrupt when read).

use std::collections::HashMap;
use std::sync::Arc;

use ecdn_cluster::wire::{self, PieceName};
use ecdn_objects::meta::ObjectMeta;
use hyper::StatusCode;

use crate::node::body::NodeBody;
use crate::node::cluster::pieces::member::Cluster;
use crate::node::cluster::pieces::store::pieces_per_object;

/// The pieces of `key` node `server` holds: `None` when it is unavailable or did not answer
/// (a `404` is an answer: none).
async fn held_on(c: &Cluster, server: usize, key: &str) -> Option<Vec<PieceName>> {
    if server == c.id {
        let object = ecdn_trace::hash_id(key.as_bytes());
        return Some(c.pieces.held(object, pieces_per_object(&c.cfg, key)));
    }
    if !c.map.current().is_available(server) {
        return None;
    }
    let path = wire::has_path(key);
    let resp = c.peer_get(server, &path).await?;
    match resp.status() {
        StatusCode::NOT_FOUND => Some(Vec::new()),
        StatusCode::OK => {
            let limit = ecdn_cluster::piece::MAX_META + 512;
            let body =
                crate::node::cluster::pieces::holders::verified_body(c, server, &path, resp, limit)
                    .await?;
            let (_, held) = wire::split_frame(&body).ok()?;
            wire::decode_held(held).ok()
        }
        _ => None,
    }
}

/// Per split of `meta`, whether its server holds it now (`None`: unknown). The servers are
/// asked all at once.
pub(in crate::node) async fn held_splits(c: &Arc<Cluster>, meta: &ObjectMeta) -> Vec<Option<bool>> {
    let key = crate::node::cluster::objects::record::piece_key(&meta.name, meta.version);
    let mut servers: Vec<usize> = meta.splits.clone();
    servers.sort_unstable();
    servers.dedup();
    let mut asks = tokio::task::JoinSet::new();
    for &s in &servers {
        let (c, key) = (c.clone(), key.clone());
        asks.spawn(async move { (s, held_on(&c, s, &key).await) });
    }
    let mut answers: HashMap<usize, Vec<PieceName>> = HashMap::new();
    while let Some(r) = asks.join_next().await {
        if let Ok((s, Some(held))) = r {
            answers.insert(s, held);
        }
    }
    meta.splits
        .iter()
        .enumerate()
        .map(|(i, s)| Some(answers.get(s)?.contains(&PieceName::Chunk(i as u16))))
        .collect()
}

/// The `?stat` answer: the record as JSON with `held` and `readable` added.
pub(in crate::node) async fn stat(
    c: &Arc<Cluster>,
    meta: &ObjectMeta,
) -> hyper::Response<NodeBody> {
    let held = held_splits(c, meta).await;
    let readable = held.iter().filter(|h| **h == Some(true)).count();
    let mut v = serde_json::to_value(meta).expect("a record serializes");
    if let Some(o) = v.as_object_mut() {
        o.insert("held".into(), serde_json::json!(held));
        o.insert("readable".into(), serde_json::json!(readable));
    }
    crate::node::cluster::objects::record::json_value(StatusCode::OK, meta, &v)
}
