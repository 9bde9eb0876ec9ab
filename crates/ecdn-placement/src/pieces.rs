//! Where an object's pieces go under each scheme of the C2DN evaluation (§6: no-replication,
//! replication, C2DN-NoRebal, C2DN), and which servers a moved (bucket, chunk) slot left behind.
//! The cluster simulator and the live cluster both call [`pieces`] and keep a [`SlotHistory`],
//! so a piece is looked for and written where the other would look for and write it.
//!
//! * Replicated objects (every object in `no-rep` / `repN`, objects at or below the coding
//!   threshold in the C2DN schemes): copies on the bucket's first `replicas` distinct available
//!   servers of its ring walk; in `c2dn` on its first data servers (the ring walk when `K` is
//!   smaller than the replica count).
//! * Coded objects: chunk `i` (data `0..K`, then parity `K..K+P`) on the `i`-th server of the
//!   ring walk (`c2dn-norebal`), or data chunk `i` on data server `i` and parity chunk `j` on
//!   parity server `j`, placed by parity rebalance (`c2dn`).

use crate::{Placement, ServerId};

/// Resync's default age (`c2dn`; the cluster file's `resync`, `ecdn sim cluster --resync`): a
/// read that writes back a piece its object lacks also rewrites the pieces it found on their
/// assigned servers when the oldest of them has more than this fraction of its server's FIFO
/// written after it, so the object's pieces leave the caches together again. Half the FIFO, the
/// age past which background repair leaves an object alone as near eviction. Measured on four
/// Akamai classes (BENCHMARKS.md, issue 63): 2–4 times fewer partial hits and reads of
/// unprotected objects, for 0.4–2% more bytes written on the downloads classes and up to 31%
/// more on the web class.
pub const RESYNC_AGE: f64 = 0.5;

/// Reinsertion's default age (every scheme; the cluster file's `reinsert`, `ecdn sim cluster
/// --reinsert`): a hit that finds every piece of its object rewrites them all when the oldest
/// has more than this fraction of its server's FIFO written after it. With whole-object
/// eviction ([`EVICT_TOGETHER`]) it is what keeps a read object's pieces from leaving: on
/// 2M-request traces of four Akamai classes, at most 0.9% of the cached objects and 0.02% of
/// the reads unprotected, the byte miss ratio below rep2's (with the same reinsertion) at
/// every size. 0.8 misses up to 2% fewer bytes, but in the default demo the nodes then write
/// unevenly (1.05–1.06) after a node dies (BENCHMARKS.md, issue 63).
pub const REINSERT_AGE: f64 = 0.9;

/// Whole-object eviction by default (coded schemes; the cluster file's `evict_together`,
/// `ecdn sim cluster --evict-together`): a piece a server's policy evicts from the server the
/// map assigns it takes its object's other pieces off every server, so an object leaves the
/// cluster whole, not a piece at a time (BENCHMARKS.md, issue 63).
pub const EVICT_TOGETHER: bool = true;

/// How objects are placed and protected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// One copy, on the bucket's first available server.
    NoRep,
    /// Copies on the bucket's first `n` distinct available servers.
    Rep(usize),
    /// Two copies for objects requested at least a given number of times so far, else one.
    Rep2Popular,
    /// Large objects coded, chunk `i` on the `i`-th server of the ring walk; small ones on two.
    C2dnNoRebal,
    /// Large objects coded, data chunks on the data servers and parity chunks on the parity
    /// servers placed by parity rebalance; small ones on the first two data servers.
    C2dn,
}

impl Scheme {
    pub fn parse(s: &str) -> Result<Scheme, String> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "no-rep" | "norep" => Scheme::NoRep,
            "rep2" => Scheme::Rep(2),
            "rep3" => Scheme::Rep(3),
            "rep2-popular" => Scheme::Rep2Popular,
            "c2dn-norebal" => Scheme::C2dnNoRebal,
            "c2dn" => Scheme::C2dn,
            other => {
                return Err(format!(
                    "unknown scheme {other:?} (known: no-rep, rep2, rep3, rep2-popular, \
                     c2dn-norebal, c2dn)"
                ))
            }
        })
    }

    pub fn name(&self) -> String {
        match self {
            Scheme::NoRep => "no-rep".into(),
            Scheme::Rep(n) => format!("rep{n}"),
            Scheme::Rep2Popular => "rep2-popular".into(),
            Scheme::C2dnNoRebal => "c2dn-norebal".into(),
            Scheme::C2dn => "c2dn".into(),
        }
    }

    /// The name with the code when a coded scheme's differs from C2DN's n4k3 (`c2dn-n5k3`):
    /// what `ecdn_sim`'s `SchemeCode::parse` reads back.
    pub fn name_with_code(&self, k: usize, p: usize) -> String {
        if self.coded() && (k, p) != (3, 1) {
            format!("{}-n{}k{k}", self.name(), k + p)
        } else {
            self.name()
        }
    }

    /// Whether objects above the threshold are erasure-coded.
    pub fn coded(&self) -> bool {
        matches!(self, Scheme::C2dn | Scheme::C2dnNoRebal)
    }

    /// Copies of a replicated object (`Rep2Popular`: of a popular one; the caller decides).
    pub fn replicas(&self) -> usize {
        match self {
            Scheme::NoRep => 1,
            Scheme::Rep(n) => *n,
            Scheme::Rep2Popular | Scheme::C2dn | Scheme::C2dnNoRebal => 2,
        }
    }

    /// The `(K, P)` the placement is built with: replication schemes only use the ring walk.
    pub fn placement_code(&self, k: usize, p: usize) -> (usize, usize) {
        if self.coded() {
            (k, p)
        } else {
            (1, 0)
        }
    }

    /// Servers the scheme needs at least.
    pub fn servers_needed(&self, k: usize, p: usize) -> usize {
        match self {
            Scheme::Rep(r) => *r,
            Scheme::C2dn | Scheme::C2dnNoRebal => (k + p).max(2),
            _ => 1,
        }
    }
}

/// Where a bucket's pieces live: a [`Placement`], or the bucket map a live node received.
pub trait BucketLayout {
    /// Servers of the bucket's data buckets; index `i` holds data chunk `i`.
    fn data_servers(&self, bucket: usize) -> &[ServerId];
    /// Servers of the bucket's parity buckets; index `j` holds parity chunk `j`.
    fn parity_servers(&self, bucket: usize) -> &[ServerId];
    /// The first `n` distinct available servers of the bucket's ring walk, into `out`.
    fn ring_servers_into(&self, bucket: usize, n: usize, out: &mut Vec<ServerId>);
}

impl BucketLayout for Placement {
    fn data_servers(&self, bucket: usize) -> &[ServerId] {
        Placement::data_servers(self, bucket)
    }
    fn parity_servers(&self, bucket: usize) -> &[ServerId] {
        Placement::parity_servers(self, bucket)
    }
    fn ring_servers_into(&self, bucket: usize, n: usize, out: &mut Vec<ServerId>) {
        Placement::ring_servers_into(self, bucket, n, out)
    }
}

/// One piece of an object and the server it belongs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    pub server: ServerId,
    /// Chunk index (`0..K` data, `K..K+P` parity); 0 for a replica.
    pub chunk: usize,
    /// `Some(j)`: parity chunk `j`, whose writes count as the bucket's parity load.
    pub parity: Option<usize>,
}

/// The pieces of an object of `bucket` and their servers, into `out` (cleared first): `K + P`
/// chunks when `coded`, else `replicas` copies (see the module documentation). `walk` is
/// scratch space.
#[allow(clippy::too_many_arguments)]
pub fn pieces<L: BucketLayout + ?Sized>(
    layout: &L,
    scheme: Scheme,
    k: usize,
    p: usize,
    bucket: usize,
    coded: bool,
    replicas: usize,
    out: &mut Vec<Piece>,
    walk: &mut Vec<ServerId>,
) {
    out.clear();
    if coded {
        if scheme == Scheme::C2dn {
            for (i, &server) in layout.data_servers(bucket).iter().enumerate() {
                out.push(Piece {
                    server,
                    chunk: i,
                    parity: None,
                });
            }
            for (j, &server) in layout.parity_servers(bucket).iter().enumerate() {
                out.push(Piece {
                    server,
                    chunk: k + j,
                    parity: Some(j),
                });
            }
        } else {
            layout.ring_servers_into(bucket, k + p, walk);
            for (i, &server) in walk.iter().enumerate() {
                out.push(Piece {
                    server,
                    chunk: i,
                    parity: (i >= k).then(|| i - k),
                });
            }
        }
        return;
    }
    if scheme == Scheme::C2dn {
        walk.clear();
        walk.extend(layout.data_servers(bucket).iter().take(replicas));
        if walk.len() < replicas {
            // Fewer data servers than replicas (K = 1): the ring walk.
            layout.ring_servers_into(bucket, replicas, walk);
        }
    } else {
        layout.ring_servers_into(bucket, replicas, walk);
    }
    out.extend(walk.iter().map(|&server| Piece {
        server,
        chunk: 0,
        parity: None,
    }));
}

/// No server (an unplaced slot, or no former server).
pub const NO_SERVER: ServerId = usize::MAX;

/// For `c2dn`: per (bucket, chunk) slot, the last two servers it was assigned to before its
/// current one. Their caches still hold the slot's chunks (and replicas) until they are
/// evicted there, so a lookup tries them too; without this every parity move would strip the
/// moved bucket's objects of a chunk.
#[derive(Clone, Debug)]
pub struct SlotHistory {
    k: usize,
    p: usize,
    former: Vec<[ServerId; 2]>,
}

impl SlotHistory {
    pub fn new(buckets: usize, k: usize, p: usize) -> SlotHistory {
        SlotHistory {
            k,
            p,
            former: vec![[NO_SERVER; 2]; buckets * (k + p)],
        }
    }

    /// The server of every (bucket, chunk) slot of `placement`: `K` data then `P` parity per
    /// bucket, [`NO_SERVER`] where none is placed.
    pub fn holders(&self, placement: &Placement) -> Vec<ServerId> {
        let (k, p) = (self.k, self.p);
        let buckets = self.former.len() / (k + p).max(1);
        let mut out = vec![NO_SERVER; buckets * (k + p)];
        for b in 0..buckets {
            let slots = &mut out[b * (k + p)..(b + 1) * (k + p)];
            for (c, &srv) in placement.data_servers(b).iter().enumerate().take(k) {
                slots[c] = srv;
            }
            for (j, &srv) in placement.parity_servers(b).iter().enumerate().take(p) {
                slots[k + j] = srv;
            }
        }
        out
    }

    /// After a placement change from `before` to `after` (both from [`SlotHistory::holders`]):
    /// every slot whose server changed remembers the server it left.
    pub fn record(&mut self, before: &[ServerId], after: &[ServerId]) {
        for (slot, (&old, &new)) in before.iter().zip(after).enumerate() {
            if old != new && old != NO_SERVER {
                let f = &mut self.former[slot];
                if f[0] != old {
                    f[1] = f[0];
                    f[0] = old;
                }
            }
        }
    }

    /// The former servers of chunk `chunk`'s slot of `bucket` (most recent first).
    pub fn former(&self, bucket: usize, chunk: usize) -> [ServerId; 2] {
        self.former[bucket * (self.k + self.p) + chunk]
    }

    /// All slots' former servers, `K + P` per bucket.
    pub fn as_slice(&self) -> &[[ServerId; 2]] {
        &self.former
    }

    /// The history whose [`SlotHistory::as_slice`] is `former` (a stored one); `None` unless it
    /// has `buckets × (K + P)` slots.
    pub fn from_slice(
        buckets: usize,
        k: usize,
        p: usize,
        former: &[[ServerId; 2]],
    ) -> Option<SlotHistory> {
        (former.len() == buckets * (k + p)).then(|| SlotHistory {
            k,
            p,
            former: former.to_vec(),
        })
    }
}
