//! Vary (RFC 9111 §4.1): the Vary index, variant keys, and whether a shared answer suits a
//! request.
//!
//! A storable answer with `Vary` (any list but `*`, which is never stored) is stored under a
//! *variant* key: primary key, `\n#`, a generation number, then for each Vary-named header
//! (names lower-cased, sorted, deduplicated) `\n<name>=<the request's values>`, values
//! trimmed with whitespace runs collapsed to one space and several fields joined with `,`
//! ([`freshness::vary_suffix`]). A lookup must know the names before it can compose that key,
//! so storing such an answer also records them in the *Vary index* ([`VaryIndex`]), an
//! in-memory side table primary key → (names, generation); every `GET` / `HEAD` first consults
//! it and looks up (and collapses into flights) under the variant key. A request whose values
//! differ misses and stores another variant. A storable answer without `Vary` removes the URL's
//! index entry (it is stored under the primary key again); a changed name list gets a new
//! generation. Invalidation (`PURGE`, other methods) removes the index entry, so the next
//! answer gets a new generation and the old variants are never found again (they age out of
//! the HOC and the disk ring). The index holds at most 100,000 URLs and is cleared beyond it.
//! It is not persisted: after a restart a varying URL misses once, and the re-learned entry
//! gets a new generation (the counter starts from the clock), so variants written to disk by
//! an earlier run are never served again — a known cost, traded for never reviving purged
//! variants.
//!
//! Before the index knows a URL, concurrent misses of it collapse under the primary key; when
//! the answer turns out to vary ([`Vary::of`]), a request that joined with different values for
//! the named headers (or any request, for `Vary: *`) leaves the flight and fetches on its own
//! (`X-Cache: MISS`).

use std::collections::HashMap;
use std::sync::Mutex;

use hyper::header::HeaderMap;

use super::freshness;
use super::lock::lock;

/// URLs whose stored responses carry `Vary`, and the names they vary on.
pub(super) struct VaryIndex {
    inner: Mutex<Urls>,
}

struct Urls {
    /// Primary key → (the sorted, lower-cased header names, generation).
    urls: HashMap<String, (Vec<String>, u64)>,
    /// The next generation: started from the clock so that keys of an earlier run (still on
    /// disk) are not reused by a later index entry of another generation.
    next: u64,
}

/// Entries kept in the Vary index; beyond it the index is cleared (the variants become
/// unreachable misses).
const VARY_INDEX_MAX: usize = 100_000;

/// The key of one variant: the primary key, the generation and [`freshness::vary_suffix`]
/// (a newline cannot occur in the primary key).
fn variant_key(primary: &str, names: &[String], generation: u64, req: &HeaderMap) -> String {
    format!(
        "{primary}\n#{generation:x}{}",
        freshness::vary_suffix(names, req)
    )
}

impl VaryIndex {
    pub(super) fn new() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        VaryIndex {
            inner: Mutex::new(Urls {
                urls: HashMap::new(),
                next: nanos,
            }),
        }
    }

    /// The key to look `primary` up under for a request: the variant key when the URL's
    /// answers vary, else `primary`.
    pub(super) fn lookup_key(&self, primary: &str, req: &HeaderMap) -> String {
        match lock(&self.inner).urls.get(primary) {
            Some((names, generation)) => variant_key(primary, names, *generation, req),
            None => primary.to_string(),
        }
    }

    /// The key a storable answer of `primary` is stored under, given what it varies on:
    /// records its Vary header names (an unchanged name list keeps its generation, a new or
    /// changed one gets a fresh generation), or, when it does not vary, drops the URL's entry
    /// so it is stored under the primary key again. `Vary: *` is never stored.
    pub(super) fn store_key(&self, primary: &str, vary: &Vary, req: &HeaderMap) -> String {
        let mut v = lock(&self.inner);
        let Vary::On(names, _) = vary else {
            v.urls.remove(primary);
            return primary.to_string();
        };
        if let Some((known, generation)) = v.urls.get(primary) {
            if known == names {
                return variant_key(primary, names, *generation, req);
            }
        }
        if v.urls.len() >= VARY_INDEX_MAX {
            v.urls.clear();
        }
        let generation = v.next;
        v.next = v.next.wrapping_add(1);
        v.urls
            .insert(primary.to_string(), (names.clone(), generation));
        variant_key(primary, names, generation, req)
    }

    /// Invalidation: forgets the URL's variants (a later answer gets a fresh generation, so
    /// the old variants are never found again). Whether it had any.
    pub(super) fn forget(&self, primary: &str) -> bool {
        lock(&self.inner).urls.remove(primary).is_some()
    }
}

/// What an origin answer varies on.
pub(super) enum Vary {
    /// Nothing: it suits every request.
    None,
    /// `Vary: *`: it suits no other request.
    All,
    /// These header names, with the leader request's [`freshness::vary_suffix`].
    On(Vec<String>, String),
}

impl Vary {
    /// What an answer with `headers` varies on, for the request with `req` headers that
    /// fetched it.
    pub(super) fn of(headers: &HeaderMap, req: &HeaderMap) -> Vary {
        match freshness::vary_names(headers) {
            None => Vary::All,
            Some(names) if names.is_empty() => Vary::None,
            Some(names) => {
                let suffix = freshness::vary_suffix(&names, req);
                Vary::On(names, suffix)
            }
        }
    }

    /// Whether the answer suits a request with `req` headers.
    pub(super) fn admits(&self, req: &HeaderMap) -> bool {
        match self {
            Vary::None => true,
            Vary::All => false,
            Vary::On(names, suffix) => freshness::vary_suffix(names, req) == *suffix,
        }
    }
}
