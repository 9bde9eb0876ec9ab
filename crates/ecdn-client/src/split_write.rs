//! A client's own write (EC-Cache §4.2: the client codes the object and puts its splits on
//! their servers), so a write's bytes leave the client over `k + r` servers' links at once
//! instead of through one node's. Top to bottom, as the node's side
//! (`ecdn_node`'s `cluster/objects/client_write.rs`) documents it:
//! 1. `?begin` at a node: the code, the version, the split servers and their grants;
//! 2. the object coded here (`ecdn_codec::encode_object`) and each split's window digests
//!    hashed (`ecdn_objects::digest`);
//! 3. every split `PUT` to its server at once, with its grant; each answer's digests must be
//!    the ones computed here (bytes changed on the way are caught at the write, not at a read);
//! 4. `?commit` with the record and the servers' receipts; fewer than `k` splits stored:
//!    `?abort`, and an error.

use std::net::SocketAddr;

use bytes::Bytes;
use ecdn_codec::{encode_object, ObjectLayout};
use ecdn_objects::digest::WindowHasher;
use ecdn_objects::meta::{ObjectMeta, ObjectName};
use ecdn_objects::writes::{Begun, Commit, Stored};
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode};
use sha2::{Digest, Sha256};

use crate::splits::SplitClient;
use crate::{ClientError, Code};

impl SplitClient {
    /// Stores `data` as `name`, coding it here and putting every split on its server (with
    /// `code`, or the cluster's default for its size); the committed record.
    pub async fn put(
        &self,
        name: &str,
        data: Bytes,
        code: Option<Code>,
    ) -> Result<ObjectMeta, ClientError> {
        let parsed = ObjectName::parse(name).map_err(|e| ClientError::BadName(e.to_string()))?;
        let node = self.next_node()?;
        let mut query = format!("?begin&size={}", data.len());
        if let Some(c) = code {
            query.push_str(&format!("&k={}&r={}", c.k, c.r));
        }
        let (_, body) = self
            .call(node, Method::POST, &parsed, &query, Bytes::new())
            .await?;
        let begun: Begun =
            serde_json::from_slice(&body).map_err(|e| ClientError::BadAnswer(e.to_string()))?;
        let out = self.put_splits(&parsed, &data, &begun).await;
        if out.is_err() {
            let abort = format!("?abort&version={}", begun.version);
            let _ = self
                .call(node, Method::POST, &parsed, &abort, Bytes::new())
                .await;
        }
        let commit = out?;
        let body =
            serde_json::to_vec(&commit).map_err(|e| ClientError::BadAnswer(e.to_string()))?;
        let (_, body) = self
            .call(node, Method::POST, &parsed, "?commit", Bytes::from(body))
            .await?;
        serde_json::from_slice(&body).map_err(|e| ClientError::BadAnswer(e.to_string()))
    }

    /// Steps 2 and 3: the record to commit, with its receipts.
    async fn put_splits(
        &self,
        name: &ObjectName,
        data: &Bytes,
        b: &Begun,
    ) -> Result<Commit, ClientError> {
        let bad = |e: String| ClientError::BadAnswer(e);
        let n = b.k + b.r;
        if b.splits.len() != n
            || b.addrs.len() != n
            || b.grants.len() != n
            || b.size != data.len() as u64
        {
            return Err(bad("the begin answer does not match the write".into()));
        }
        let layout =
            ObjectLayout::new(b.size, b.k, b.r, b.sub_chunk).map_err(|e| bad(e.to_string()))?;
        let codec = self.codec(b.k, b.r)?;
        let chunks =
            encode_object(codec.as_ref(), &layout, data).map_err(|e| bad(e.to_string()))?;
        let mut hasher = WindowHasher::new(n, b.window_stripes);
        for (i, chunk) in chunks.iter().enumerate() {
            for sub in chunk.chunks(b.sub_chunk.max(1) as usize) {
                hasher.push(i, sub);
            }
        }
        let digests = hasher.finish();
        let windows = digests.len() / n.max(1);
        let mut puts = tokio::task::JoinSet::new();
        for (i, chunk) in chunks.into_iter().enumerate() {
            let Ok(addr) = b.addrs[i].parse::<SocketAddr>() else {
                continue;
            };
            let query = format!(
                "?split={i}&version={}&k={}&r={}&size={}&expires={}",
                b.version, b.k, b.r, b.size, b.expires
            );
            let req = Request::put(format!("http://{addr}/_objects/{name}{query}"))
                .header("x-ecdn-grant", &b.grants[i])
                .body(Full::new(Bytes::from(chunk)))
                .map_err(|e| bad(e.to_string()))?;
            let (http, timeout) = (self.http(), self.timeout());
            puts.spawn(async move {
                let go = async {
                    let resp = http.request(req).await.map_err(|e| e.to_string())?;
                    let status = resp.status();
                    let body = resp
                        .into_body()
                        .collect()
                        .await
                        .map_err(|e| e.to_string())?;
                    match status {
                        StatusCode::OK => serde_json::from_slice::<Stored>(&body.to_bytes())
                            .map_err(|e| e.to_string()),
                        s => Err(format!("{s}")),
                    }
                };
                let out = tokio::time::timeout(timeout, go)
                    .await
                    .unwrap_or_else(|_| Err("no answer in time".into()));
                (i, out)
            });
        }
        let stripes = layout.stripe_count() as usize;
        let mut crcs = vec![0u32; n * stripes];
        let mut receipts = vec![None; n];
        let mut failed = Vec::new();
        while let Some(done) = puts.join_next().await {
            let Ok((i, out)) = done else { continue };
            match out {
                Ok(s)
                    if s.digests[..] == digests[i * windows..(i + 1) * windows]
                        && s.crcs.len() == stripes =>
                {
                    crcs[i * stripes..(i + 1) * stripes].copy_from_slice(&s.crcs);
                    receipts[i] = Some(s.receipt);
                }
                Ok(_) => failed.push(format!("split {i}: its server stored other bytes")),
                Err(e) => failed.push(format!("split {i}: {e}")),
            }
        }
        let stored: Vec<bool> = receipts.iter().map(Option::is_some).collect();
        let count = stored.iter().filter(|&&s| s).count();
        if count < b.k {
            return Err(ClientError::TooFewSplits(format!(
                "object {name}: only {count} of {n} splits stored, decoding needs {} ({})",
                b.k,
                failed.join("; ")
            )));
        }
        let sha: [u8; 32] = Sha256::digest(data).into();
        let record = ObjectMeta {
            name: name.clone(),
            version: b.version,
            size: b.size,
            k: b.k,
            r: b.r,
            splits: b.splits.clone(),
            stored,
            sha256: sha.iter().map(|x| format!("{x:02x}")).collect(),
            sub_chunk: b.sub_chunk,
            crcs,
            window_stripes: b.window_stripes,
            digests,
            s3: None,
        };
        Ok(Commit { record, receipts })
    }
}
