//! A listing's page (`ListObjectsV2`, `ListObjects`) over a sorted index of a bucket's keys:
//! [`Lister`] asks its caller for keys after a cursor, a batch at a time, folds the keys that
//! share a prefix up to the delimiter into one common prefix (and skips past the rest of them
//! in one step), and stops at `max-keys`. Each page costs a few range reads of the index,
//! never a scan of the bucket.
//!
//! The cursor is a key's bytes; after a common prefix it is the prefix followed by `0xFF`,
//! which sorts after every key that begins with it (UTF-8 never holds the byte `0xFF`). The
//! continuation token is the cursor, hex-encoded.

use crate::error::{Code, S3Error};
use crate::request::ListQuery;
use crate::text::hex;
use crate::xml::{ListEntry, ListV2};

/// What the index is asked for next: up to `limit` keys beginning with `prefix`, after
/// `after` (exclusive; `None`: from the first), in byte order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    pub prefix: String,
    pub after: Option<Vec<u8>>,
    pub limit: usize,
}

/// One page of a listing, built from the batches its caller reads (see the module
/// documentation).
pub struct Lister {
    q: ListQuery,
    bucket: String,
    cursor: Option<Vec<u8>>,
    entries: Vec<ListEntry>,
    prefixes: Vec<String>,
    truncated: bool,
    done: bool,
}

impl Lister {
    /// A page of `bucket` for the query `q`.
    pub fn new(bucket: &str, q: ListQuery) -> Result<Lister, S3Error> {
        let token = match &q.continuation_token {
            Some(t) => Some(unhex(t).ok_or_else(|| {
                S3Error::new(Code::InvalidArgument, "the continuation token is not valid")
            })?),
            None => None,
        };
        let mut start = q.start_after.as_ref().map(|s| s.as_bytes().to_vec());
        // V1's marker may be the last page's last common prefix: go on past every key under it.
        if let (true, Some(d), Some(s)) = (q.v1, &q.delimiter, &q.start_after) {
            if s.ends_with(d.as_str()) && s.starts_with(&q.prefix) && s.len() > q.prefix.len() {
                start = Some([s.as_bytes(), &[0xFF]].concat());
            }
        }
        // A continuation token goes on from where the page before stopped; `start-after` only
        // counts when it is further.
        let cursor = match (token, start) {
            (Some(t), Some(s)) => Some(t.max(s)),
            (t, s) => t.or(s),
        };
        Ok(Lister {
            done: q.max_keys == 0,
            q,
            bucket: bucket.to_string(),
            cursor,
            entries: Vec::new(),
            prefixes: Vec::new(),
            truncated: false,
        })
    }

    fn count(&self) -> usize {
        self.entries.len() + self.prefixes.len()
    }

    /// The batch to read next, or `None` when the page is complete.
    pub fn next_batch(&self) -> Option<Batch> {
        if self.done {
            return None;
        }
        Some(Batch {
            prefix: self.q.prefix.clone(),
            after: self.cursor.clone(),
            // One more than the page holds: whether the listing goes on.
            limit: self.q.max_keys - self.count() + 1,
        })
    }

    /// Takes the batch read for [`Lister::next_batch`] (sorted, each key beginning with the
    /// prefix and after the cursor; fewer than asked: the index has no more).
    pub fn take(&mut self, batch: Vec<ListEntry>, limit: usize) {
        let last_batch = batch.len() < limit;
        for e in batch {
            if self.count() == self.q.max_keys {
                // One more key than the page holds: the listing goes on from the cursor.
                self.truncated = true;
                self.done = true;
                return;
            }
            // (Every key of a batch begins with the prefix.)
            let rest = e.key.get(self.q.prefix.len()..).unwrap_or("");
            let folded = self
                .q
                .delimiter
                .as_deref()
                .and_then(|d| rest.find(d).map(|at| self.q.prefix.len() + at + d.len()));
            match folded {
                Some(end) => {
                    let common = e.key[..end].to_string();
                    let mut skip = common.as_bytes().to_vec();
                    skip.push(0xFF);
                    self.prefixes.push(common);
                    self.cursor = Some(skip);
                    // The other keys under this prefix are skipped: the next batch is read
                    // from past them (when the page is full, it says whether the listing
                    // goes on).
                    return;
                }
                None => {
                    self.cursor = Some(e.key.as_bytes().to_vec());
                    self.entries.push(e);
                }
            }
        }
        if last_batch {
            self.done = true;
        }
    }

    /// The page.
    pub fn finish(self) -> ListV2 {
        let next = (self.truncated && !self.q.v1)
            .then(|| self.cursor.as_deref().map(hex))
            .flatten();
        // V1 goes on from the page's last key or common prefix (they come sorted).
        let last_key = self.entries.last().map(|e| e.key.clone());
        let last_prefix = self.prefixes.last().cloned();
        let next_marker = (self.truncated && self.q.v1)
            .then(|| last_key.max(last_prefix))
            .flatten();
        ListV2 {
            bucket: self.bucket,
            prefix: self.q.prefix,
            delimiter: self.q.delimiter,
            start_after: self.q.start_after,
            continuation_token: self.q.continuation_token,
            next_continuation_token: next,
            next_marker,
            max_keys: self.q.max_keys,
            is_truncated: self.truncated,
            entries: self.entries,
            common_prefixes: self.prefixes,
            url_encoded: self.q.url_encoded,
        }
    }
}

/// A continuation token's cursor (at most a key and a byte, in hex).
fn unhex(s: &str) -> Option<Vec<u8>> {
    (s.len() <= 2 * 2048)
        .then(|| crate::text::unhex(s))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str) -> ListEntry {
        ListEntry {
            key: key.into(),
            size: 1,
            etag: "\"e\"".into(),
            last_modified_ms: 0,
        }
    }

    /// A page's keys and common prefixes.
    type Page = (Vec<String>, Vec<String>);

    /// Lists `keys` (sorted) page by page with `q`, as a caller over a sorted index does:
    /// every page, and the number of batches read.
    fn pages(keys: &[&str], mut q: ListQuery) -> (Vec<Page>, usize) {
        let mut out = Vec::new();
        let mut reads = 0;
        loop {
            let mut l = Lister::new("b", q.clone()).unwrap();
            while let Some(batch) = l.next_batch() {
                reads += 1;
                let got: Vec<ListEntry> = keys
                    .iter()
                    .filter(|k| k.starts_with(&batch.prefix))
                    .filter(|k| batch.after.as_deref().is_none_or(|a| k.as_bytes() > a))
                    .take(batch.limit)
                    .map(|k| entry(k))
                    .collect();
                l.take(got, batch.limit);
            }
            let page = l.finish();
            out.push((
                page.entries.iter().map(|e| e.key.clone()).collect(),
                page.common_prefixes.clone(),
            ));
            match page.next_continuation_token {
                Some(t) => q.continuation_token = Some(t),
                None => return (out, reads),
            }
        }
    }

    fn v2(prefix: &str, delimiter: Option<&str>, max_keys: usize) -> ListQuery {
        ListQuery {
            prefix: prefix.into(),
            delimiter: delimiter.map(str::to_string),
            max_keys,
            ..ListQuery::default()
        }
    }

    #[test]
    fn pages_of_keys_and_common_prefixes() {
        let keys = [
            "a.txt",
            "dir/1",
            "dir/2",
            "dir/sub/3",
            "dir2/4",
            "e",
            "f/5",
            "f/6",
            "g",
        ];
        let (p, _) = pages(&keys, v2("", Some("/"), 1000));
        assert_eq!(
            p,
            vec![(
                vec!["a.txt".into(), "e".into(), "g".into()],
                vec!["dir/".into(), "dir2/".into(), "f/".into()]
            )]
        );
        // Two per page: prefixes count as keys, and pages go on from where they stopped.
        let (p, _) = pages(&keys, v2("", Some("/"), 2));
        let flat: Vec<String> = p
            .iter()
            .flat_map(|(k, c)| k.iter().chain(c).cloned().collect::<Vec<_>>())
            .collect();
        assert_eq!(flat.len(), 6);
        assert!(p.iter().all(|(k, c)| k.len() + c.len() <= 2));
        // Under a prefix.
        let (p, _) = pages(&keys, v2("dir/", Some("/"), 1000));
        assert_eq!(
            p,
            vec![(
                vec!["dir/1".into(), "dir/2".into()],
                vec!["dir/sub/".into()]
            )]
        );
        // No delimiter: every key, one per page.
        let (p, _) = pages(&keys, v2("", None, 1));
        assert_eq!(p.len(), keys.len());
        assert_eq!(
            p.iter().map(|(k, _)| k[0].as_str()).collect::<Vec<_>>(),
            keys
        );
    }

    #[test]
    fn a_big_common_prefix_costs_one_read_not_one_per_key() {
        let many: Vec<String> = (0..5000).map(|i| format!("logs/{i:05}")).collect();
        let mut keys: Vec<&str> = many.iter().map(String::as_str).collect();
        keys.push("z");
        let (p, reads) = pages(&keys, v2("", Some("/"), 1000));
        assert_eq!(p, vec![(vec!["z".into()], vec!["logs/".into()])]);
        assert!(reads <= 3, "{reads} reads");
    }

    #[test]
    fn start_after_and_bad_tokens() {
        let keys = ["a", "b", "c"];
        let mut q = v2("", None, 1000);
        q.start_after = Some("a".into());
        assert_eq!(
            pages(&keys, q).0,
            vec![(vec!["b".into(), "c".into()], vec![])]
        );
        let mut q = v2("", None, 1000);
        q.continuation_token = Some("zz".into());
        assert!(Lister::new("b", q).is_err());
        assert_eq!(pages(&keys, v2("", None, 0)).0, vec![(vec![], vec![])]);
    }
}
