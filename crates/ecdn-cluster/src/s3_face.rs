//! The S3 face of EC-Cache's objects (issue 67): which requests reach it, its access keys
//! and its buckets — the cluster file's `[s3]` section (every node serves it on its client
//! listener; `ecdn-node`'s `cluster/objects/s3/`).
//!
//! ```toml
//! [s3]
//! domains = ["s3.example.com"]  # Host s3.example.com (path-style) and BUCKET.s3.example.com
//!                               # (virtual-hosted) reach the S3 face; so does any request
//!                               # signed with AWS4-HMAC-SHA256, whatever its Host
//! region = "us-east-1"          # what GetBucketLocation answers
//!
//! [[s3.keys]]
//! access_key = "AKIDEXAMPLE0001"
//! secret_key = "at least sixteen characters"
//! buckets = ["models", "data"]  # the buckets it may read and write; ["*"]: all
//!
//! [[s3.buckets]]
//! name = "models"
//! k = 10                        # the code of the objects written to it (x-ecdn-k and
//! r = 1                         # x-ecdn-r on a PUT choose another); default: the
//!                               # object API's (object_scheme)
//! anonymous_read = false        # unsigned GET, HEAD and listings allowed
//! ```

use serde::{Deserialize, Serialize};

/// The `[s3]` section (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct S3Face {
    pub domains: Vec<String>,
    pub region: String,
    pub keys: Vec<S3Key>,
    pub buckets: Vec<S3Bucket>,
}

/// An access key and what it may reach.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct S3Key {
    pub access_key: String,
    pub secret_key: String,
    pub buckets: Vec<String>,
}

/// A bucket.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct S3Bucket {
    pub name: String,
    #[serde(default)]
    pub k: Option<usize>,
    #[serde(default)]
    pub r: Option<usize>,
    #[serde(default)]
    pub anonymous_read: bool,
}

/// The shortest secret key taken.
pub const MIN_SECRET: usize = 16;

impl S3Face {
    /// The region answered when the section names none.
    pub const DEFAULT_REGION: &'static str = "us-east-1";

    pub fn region(&self) -> &str {
        if self.region.is_empty() {
            Self::DEFAULT_REGION
        } else {
            &self.region
        }
    }

    /// Refuses names S3 would not take, a bucket or key named twice, a short secret, and a
    /// key given a bucket that does not exist.
    pub fn validate(&self) -> Result<(), String> {
        for d in &self.domains {
            if d.is_empty() || d.contains(['/', ':', ' ']) || d.starts_with('.') {
                return Err(format!("[s3] domains: {d:?} is not a host name"));
            }
        }
        let mut names: Vec<&str> = Vec::new();
        for b in &self.buckets {
            if !ecdn_s3::request::valid_bucket(&b.name) {
                return Err(format!(
                    "[[s3.buckets]] name {:?}: 3 to 63 of a-z 0-9 . - beginning and ending with a letter or digit",
                    b.name
                ));
            }
            if names.contains(&b.name.as_str()) {
                return Err(format!("[[s3.buckets]] {:?} is named twice", b.name));
            }
            names.push(&b.name);
            if b.k == Some(0) {
                return Err(format!("[[s3.buckets]] {:?}: k must be at least 1", b.name));
            }
            if b.k.is_some() != b.r.is_some() {
                return Err(format!(
                    "[[s3.buckets]] {:?}: give k and r together, or neither",
                    b.name
                ));
            }
        }
        let mut ids: Vec<&str> = Vec::new();
        for k in &self.keys {
            let id = k.access_key.as_str();
            if id.len() < 3 || id.len() > 128 || !id.bytes().all(|c| c.is_ascii_alphanumeric()) {
                return Err(format!(
                    "[[s3.keys]] access_key {id:?}: 3 to 128 letters and digits"
                ));
            }
            if ids.contains(&id) {
                return Err(format!("[[s3.keys]] {id:?} is listed twice"));
            }
            ids.push(id);
            if k.secret_key.len() < MIN_SECRET {
                return Err(format!(
                    "[[s3.keys]] {id:?}: the secret_key has {} bytes: it needs at least {MIN_SECRET}",
                    k.secret_key.len()
                ));
            }
            for b in &k.buckets {
                if b != "*" && !names.contains(&b.as_str()) {
                    return Err(format!(
                        "[[s3.keys]] {id:?}: bucket {b:?} is not one of [[s3.buckets]]"
                    ));
                }
            }
        }
        Ok(())
    }

    /// The bucket named `name`.
    pub fn bucket(&self, name: &str) -> Option<&S3Bucket> {
        self.buckets.iter().find(|b| b.name == name)
    }

    /// The secret of access key `id`.
    pub fn secret(&self, id: &str) -> Option<&str> {
        self.keys
            .iter()
            .find(|k| k.access_key == id)
            .map(|k| k.secret_key.as_str())
    }

    /// Whether access key `id` may read and write bucket `bucket`.
    pub fn allows(&self, id: &str, bucket: &str) -> bool {
        self.keys
            .iter()
            .find(|k| k.access_key == id)
            .is_some_and(|k| k.buckets.iter().any(|b| b == "*" || b == bucket))
    }

    /// Whether `host` (a Host header, port and all) names the S3 face.
    pub fn serves_host(&self, host: &str) -> bool {
        let name = host.rsplit_once(':').map_or(host, |(n, _)| n);
        let name = name.to_ascii_lowercase();
        self.domains.iter().any(|d| {
            name == *d
                || name
                    .strip_suffix(d.as_str())
                    .is_some_and(|b| b.ends_with('.') && b.len() > 1)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn face() -> S3Face {
        toml::from_str(
            r#"
domains = ["s3.test"]
[[keys]]
access_key = "AKID0001"
secret_key = "0123456789abcdef0"
buckets = ["models"]
[[keys]]
access_key = "AKID0002"
secret_key = "0123456789abcdef1"
buckets = ["*"]
[[buckets]]
name = "models"
k = 4
r = 2
[[buckets]]
name = "public-data"
anonymous_read = true
"#,
        )
        .unwrap()
    }

    #[test]
    fn keys_reach_their_buckets_and_hosts_name_the_face() {
        let f = face();
        f.validate().unwrap();
        assert_eq!(f.region(), "us-east-1");
        assert!(f.allows("AKID0001", "models"));
        assert!(!f.allows("AKID0001", "public-data"));
        assert!(f.allows("AKID0002", "public-data"));
        assert!(!f.allows("AKID0003", "models"));
        assert_eq!(f.secret("AKID0002"), Some("0123456789abcdef1"));
        assert_eq!(f.bucket("models").and_then(|b| b.k), Some(4));
        assert!(f.serves_host("s3.test:9000"));
        assert!(f.serves_host("Models.S3.test"));
        assert!(!f.serves_host("xs3.test"));
        assert!(!f.serves_host("example.com"));
    }

    #[test]
    fn bad_sections_are_refused() {
        let mut f = face();
        f.keys[0].secret_key = "short".into();
        assert!(f.validate().unwrap_err().contains("at least 16"));
        let mut f = face();
        f.keys[0].buckets = vec!["nope".into()];
        assert!(f.validate().unwrap_err().contains("not one of"));
        let mut f = face();
        f.buckets[1].name = "Bad_Name".into();
        assert!(f.validate().is_err());
        let mut f = face();
        f.buckets[1].name = "models".into();
        assert!(f.validate().unwrap_err().contains("twice"));
        let mut f = face();
        f.buckets[0].r = None;
        assert!(f.validate().unwrap_err().contains("together"));
        let mut f = face();
        f.keys[1].access_key = "AKID0001".into();
        assert!(f.validate().unwrap_err().contains("twice"));
        assert!(toml::from_str::<S3Face>("unknown = 1").is_err());
    }
}
