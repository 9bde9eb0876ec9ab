//! EC-Cache's object API (EC-Cache §3–§4), over the pieces layer (`super::pieces`) and the
//! backend store (`super::backend`): `api.rs` (the `/_objects/` endpoints: `PUT`, `GET` with
//! late binding, `DELETE`), `budget.rs` (the coordinator's parity budget applied to an
//! object), `stat.rs` (where an object's splits are), `splits.rs` (the split service for clients that
//! read the splits themselves), `client_write.rs` (writes by clients that code the object and
//! put the splits themselves), `write.rs` (an object written through a node, for the API's
//! `PUT` and the S3 face's), `parts.rs` (an object made of a multipart upload's parts, read
//! from them in turn), and `record.rs` (what they share: the
//! object's record and its splits).

pub(in crate::node) mod api;
pub(in crate::node) mod budget;
pub mod client_write;
pub(in crate::node) mod parts;
pub(in crate::node) mod record;
pub(in crate::node) mod s3;
pub(in crate::node) mod splits;
pub(in crate::node) mod stat;
pub(in crate::node) mod write;
