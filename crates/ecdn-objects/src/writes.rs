//! The messages of a client's own write (EC-Cache §4.2's write path, issue 61): what a node
//! answers to `POST /_objects/<name>?begin`, what a split's server answers to a granted split
//! `PUT`, and what `POST ?commit` takes. The node's side is `ecdn_node`'s
//! `cluster/objects/client_write.rs`; the client's, `ecdn_client::SplitClient::put`.

use serde::{Deserialize, Serialize};

use crate::meta::ObjectMeta;

/// What `?begin` answers: the code, the version begun, where each split goes and its grant.
#[derive(Debug, Serialize, Deserialize)]
pub struct Begun {
    pub version: u64,
    pub k: usize,
    pub r: usize,
    pub size: u64,
    pub sub_chunk: u64,
    pub window_stripes: u64,
    pub splits: Vec<usize>,
    pub addrs: Vec<String>,
    pub expires: u64,
    pub grants: Vec<String>,
}

/// What a split's server answers to a granted `PUT`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Stored {
    /// The split's sub-chunks' CRC-32C (in JSON as the record's: hex, 8 digits each).
    #[serde(with = "crate::meta::hex_crcs")]
    pub crcs: Vec<u32>,
    /// The split's window digests (hex, 64 digits each).
    #[serde(with = "crate::digest::hex_digests")]
    pub digests: Vec<crate::digest::Sha>,
    /// The server's seal of the split's name, version, index, server, CRCs and digests.
    pub receipt: String,
}

/// What `?commit` takes.
#[derive(Debug, Serialize, Deserialize)]
pub struct Commit {
    pub record: ObjectMeta,
    /// Per split, its server's receipt (`None`: not stored).
    pub receipts: Vec<Option<String>>,
}
