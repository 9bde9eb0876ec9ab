//! A replica read from a peer: a signed frame, hedged with another holder's when the first
//! turns slow or fails.

use bytes::Bytes;
use ecdn_cluster::wire::{self, PieceName};

use crate::node::cluster::pieces::holders::signed_get;
use crate::node::cluster::pieces::member::Cluster;

/// A whole replica from `server`, hedged with `alternate`'s (another holder, if any): asked
/// too as soon as this node's probes find `server` much slower than its peers while its
/// answer is awaited (`Cluster::turned_slow`: late probes count), or at once when `server`'s
/// read fails. The first whole replica wins; the other read is dropped, which cancels it.
pub(in crate::node) async fn hedged_replica(
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
