//! S3's protocol for ecdn's object cache (issue 67): what a request to the S3 face asks
//! ([`request`]: bucket, key, operation), whether its signature holds ([`sigv4`]: Signature
//! Version 4 in the `Authorization` header or a presigned URL), its body when it comes in
//! aws-chunked encoding ([`chunked`]), a listing's page over a sorted index ([`list`]), and
//! what is answered: S3's errors ([`error`]), XML ([`xml`]) and times ([`time`]).
//!
//! The crate knows nothing of the cluster: `ecdn-node` serves the operations on EC-Cache's
//! objects (`node/cluster/objects/s3/`). It is written here rather than taken from the AWS
//! SDK, which signs requests but does not check them as a server must; the XML bodies a client
//! sends are read with quick-xml.

pub mod chunked;
pub mod error;
pub mod list;
pub mod names;
pub mod request;
pub mod sigv4;
pub mod text;
pub mod time;
pub mod xml;

pub use error::{Code, S3Error};
pub use request::{Op, S3Request};
