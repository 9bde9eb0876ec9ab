//! A site's referrals through Coral's DSHT (CoralCDN §3.2): how an `ecdn node` finds the
//! sites that hold an object it misses, and advertises the objects it fills.
//!
//! * `claim`: a reference to this site with a 20 s TTL (the values are the `host:port` of the
//!   sites' HTTP listeners; the key is SHA-1 of the cache's primary key), put as a
//!   [`Dsht::claim`]: a hierarchical sloppy put, the fastest cluster first, whose probes and
//!   store tell it the references met on its way (each stored before this one), stopping at
//!   the first level where it met any. Those sites are the claim's answer, nearest first (by
//!   the DSHT's RTT to them); the sites that miss meanwhile find this one's reference and
//!   fetch from it (a multicast tree). The reference is renewed every 10 s, at the levels the
//!   claim stored it, until the fill ends: never at a slower level than where it found a site
//!   to fill from, so a site it waits on can never find it there and wait on it in turn (the
//!   claims at one level follow the order of their stores, and a wait only goes to a faster
//!   or the same level).
//! * `filled`: a reference with a 1 h TTL at every level, which replaces the short one.
//! * `abandoned`: the renewals stop; the short reference expires within 20 s.
//! * The upkeep ([`CoralReferrals::start_upkeep`], every minute in `ecdn node`): each object
//!   this site advertised for an hour is checked with the node ([`Holder`]); one no longer
//!   held (evicted, purged, expired) has its references withdrawn where they were stored and
//!   is never advertised again; one still held has its reference renewed every half hour.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use ecdn_dsht::{Contact, Dsht, Id};
use ecdn_node::node::sites::Referrals;
use ecdn_node::node::Holder;

/// TTL of the reference a site puts while it fills an object.
pub const FILLING_TTL: Duration = Duration::from_secs(20);
/// How often that reference is renewed.
pub const FILLING_RENEW: Duration = Duration::from_secs(10);
/// TTL of the reference to an object the site holds.
pub const HELD_TTL: Duration = Duration::from_secs(3600);
/// How old that reference gets before the upkeep renews it.
pub const RENEW_HELD_AFTER: Duration = Duration::from_secs(1800);

/// [`Referrals`] over a DSHT node.
pub struct CoralReferrals {
    dsht: Arc<Dsht>,
    /// This site's HTTP listener, as the value of its references.
    me: String,
    /// The longest a lookup (a get, a claim) may take before the miss goes to the origin.
    lookup_timeout: Duration,
    /// Fills in progress: the flag that keeps their reference renewed (cleared when the fill
    /// ends).
    filling: Mutex<HashMap<String, Arc<AtomicBool>>>,
    /// Objects advertised for an hour: where their reference was stored (level, node), and
    /// when.
    held: Arc<Mutex<HashMap<String, Advertised>>>,
    /// The node, once it runs: whether it still holds an object.
    holder: OnceLock<Holder>,
    /// The lookups it made (claims, and gets asked on the admin listener).
    lookups: crate::stats::LookupStats,
    /// The site's DNS redirector's answers, if it runs one.
    dns: OnceLock<Arc<crate::stats::DnsAnswers>>,
}

impl CoralReferrals {
    /// Referrals through `dsht` for the site whose HTTP listener is `me` (`host:port`).
    pub fn new(dsht: Arc<Dsht>, me: String, lookup_timeout: Duration) -> CoralReferrals {
        CoralReferrals {
            dsht,
            me,
            lookup_timeout,
            filling: Mutex::new(HashMap::new()),
            held: Arc::new(Mutex::new(HashMap::new())),
            holder: OnceLock::new(),
            lookups: Default::default(),
            dns: OnceLock::new(),
        }
    }

    /// Shows the site's redirector's answers (`Redirector::answers`) in its stats.
    pub fn set_dns(&self, answers: Arc<crate::stats::DnsAnswers>) {
        let _ = self.dns.set(answers);
    }

    /// A `get` of `key`, bounded by the lookup timeout and counted in the stats (as found
    /// when it found a value other than this site's own reference).
    async fn lookup(&self, key: Id) -> Option<ecdn_dsht::GetResult> {
        let get = self.dsht.get(key, None);
        match tokio::time::timeout(self.lookup_timeout, get).await {
            Ok(Ok(got)) => {
                self.lookups.answered(
                    got.values.iter().any(|v| v.data != self.me.as_bytes()),
                    got.level,
                    got.hops,
                    got.elapsed,
                );
                Some(got)
            }
            _ => {
                self.lookups.failed();
                None
            }
        }
    }

    /// Gives the referrals the node they advertise for (it starts after them).
    pub fn set_holder(&self, holder: Holder) {
        let _ = self.holder.set(holder);
    }

    /// Starts the upkeep (see the module doc): every `every`, withdraw the references of the
    /// objects the node no longer holds and renew the old ones of those it does. Runs while
    /// the referrals exist.
    pub fn start_upkeep(self: &Arc<Self>, every: Duration) {
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(me) = me.upgrade() else { return };
                me.upkeep().await;
            }
        });
    }

    /// One round of the upkeep.
    pub async fn upkeep(&self) {
        let Some(holder) = self.holder.get() else {
            return;
        };
        let advertised: Vec<(String, Advertised)> = lock(&self.held)
            .iter()
            .map(|(u, a)| (u.clone(), a.clone()))
            .collect();
        for (url, a) in advertised {
            let key = Self::key(&url);
            if !holder.holds(&url).await {
                lock(&self.held).remove(&url);
                self.dsht.withdraw(key, self.me.as_bytes(), &a.places).await;
            } else if a.at.elapsed() >= RENEW_HELD_AFTER {
                if let Ok(put) = self.dsht.put(key, self.me.as_bytes(), HELD_TTL, None).await {
                    lock(&self.held).insert(url, Advertised::of(&put));
                }
            }
        }
    }

    fn key(url: &str) -> Id {
        Id::hash(url.as_bytes())
    }

    fn stop_renewing(&self, url: &str) {
        let flag = lock(&self.filling).remove(url);
        if let Some(f) = flag {
            f.store(false, Ordering::Relaxed);
        }
    }

    /// The sites of `found` (a claim's), nearest first by the DSHT's RTT to them (unknown
    /// last), never this one.
    fn nearest_first(&self, found: Vec<ecdn_dsht::Value>) -> Vec<String> {
        let mut sites: Vec<(Duration, String)> = found
            .into_iter()
            .filter_map(|v| String::from_utf8(v.data).ok())
            .filter(|site| *site != self.me)
            .filter_map(|site| {
                let addr = site.parse::<std::net::SocketAddr>().ok()?;
                let rtt = self.dsht.rtt_to(addr.ip()).unwrap_or(Duration::MAX);
                Some((rtt, site))
            })
            .collect();
        sites.sort_by_key(|(rtt, _)| *rtt);
        sites.into_iter().map(|(_, s)| s).collect()
    }

    /// Advertises `url` for an hour, remembering where the reference went.
    fn advertise(&self, url: &str) {
        let (dsht, key, me) = (self.dsht.clone(), Self::key(url), self.me.clone());
        let (held, url) = (self.held.clone(), url.to_string());
        tokio::spawn(async move {
            if let Ok(put) = dsht.put(key, me.as_bytes(), HELD_TTL, None).await {
                lock(&held).insert(url, Advertised::of(&put));
            }
        });
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where and when an object's reference was put.
#[derive(Clone)]
struct Advertised {
    places: Vec<(usize, Contact)>,
    at: std::time::Instant,
}

impl Advertised {
    fn of(put: &ecdn_dsht::PutResult) -> Advertised {
        Advertised {
            places: put
                .stored
                .iter()
                .filter_map(|(level, c)| c.map(|c| (*level, c)))
                .collect(),
            at: std::time::Instant::now(),
        }
    }
}

impl Referrals for CoralReferrals {
    fn me(&self) -> &str {
        &self.me
    }

    fn claim<'a>(&'a self, url: &'a str) -> Pin<Box<dyn Future<Output = Vec<String>> + Send + 'a>> {
        Box::pin(async move {
            let renew = Arc::new(AtomicBool::new(true));
            lock(&self.filling).insert(url.to_string(), renew.clone());
            let key = Self::key(url);
            let claim = self.dsht.claim(key, self.me.as_bytes(), FILLING_TTL);
            let (levels, found) = match tokio::time::timeout(self.lookup_timeout, claim).await {
                Ok(Ok(put)) => {
                    self.lookups.answered(
                        !put.found.is_empty(),
                        put.found_level,
                        put.hops,
                        put.elapsed,
                    );
                    let levels: Vec<usize> = put.stored.iter().map(|(l, _)| *l).collect();
                    (Some(levels), put.found)
                }
                _ => {
                    // Unknown where it got to: renewed everywhere, and the fill goes to the
                    // origin (no site named).
                    self.lookups.failed();
                    (None, Vec::new())
                }
            };
            let (dsht, me) = (self.dsht.clone(), self.me.clone());
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(FILLING_RENEW).await;
                    if !renew.load(Ordering::Relaxed) {
                        return;
                    }
                    let at = levels.as_deref();
                    let _ = dsht.put(key, me.as_bytes(), FILLING_TTL, at).await;
                }
            });
            self.nearest_first(found)
        })
    }

    fn filled(&self, url: &str) {
        self.stop_renewing(url);
        self.advertise(url);
    }

    fn abandoned(&self, url: &str) {
        self.stop_renewing(url);
    }

    fn stats(&self) -> serde_json::Value {
        let d = self.dsht.stats();
        serde_json::json!({
            "id": self.dsht.id().to_string(),
            "dsht_addr": self.dsht.addr().to_string(),
            "levels": self.dsht.levels().iter().map(|t| t.map(|t| t.as_secs_f64() * 1000.0)).collect::<Vec<_>>(),
            "clusters": self.dsht.clusters().iter().map(|c| c.to_string()).collect::<Vec<_>>(),
            "lookups": self.lookups.json(),
            "dsht": {
                "packets_in": d.packets_in,
                "malformed": d.malformed,
                "rate_limited": d.rate_limited,
                "rpcs_sent": d.rpcs_sent,
                "rpcs_timed_out": d.rpcs_timed_out,
                "hedges": d.hedges,
                "put_probes": d.put_probes,
                "stores": d.stores,
                "gets": d.gets,
            },
            "dns": self.dns.get().map_or(serde_json::Value::Null, |a| a.json()),
        })
    }

    fn admin<'a>(
        &'a self,
        op: &'a str,
        query: &'a str,
        post: bool,
    ) -> ecdn_node::node::sites::AdminAnswer<'a> {
        Box::pin(async move { admin::answer(self, op, query, post).await })
    }
}

/// The DSHT's operations on the node's admin listener (`/_ecdn/sites/OP`), for operators and
/// test beds that drive sites in other processes: `GET /_ecdn/sites` (the stats),
/// `GET /_ecdn/sites/get?key=HEX` (a lookup, as a miss makes one: found values, level, hops,
/// ms), `POST /_ecdn/sites/put?key=HEX&value=TEXT&ttl=SECONDS` (a sloppy put of `value`, at
/// most an hour; the levels that stored it, and its forward phases' stops: level, node id,
/// whether it was loaded, its values and their least TTL) and
/// `GET /_ecdn/sites/probes?key=HEX` (the put probes this node received for the key: a hot
/// spot's load, §4.2). `HEX` is a 40-digit key
/// (SHA-1 of the cache's primary key for an object's references); `value` is taken as sent,
/// without percent-decoding.
mod admin {
    use super::*;

    fn param<'q>(query: &'q str, name: &str) -> Option<&'q str> {
        query.split('&').find_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            (k == name).then_some(v)
        })
    }

    fn bad(why: &str) -> Option<(u16, serde_json::Value)> {
        Some((400, serde_json::json!({ "error": why })))
    }

    /// A 40-hex-digit key.
    fn key(query: &str) -> Result<Id, &'static str> {
        let hex = param(query, "key").ok_or("key=HEX (40 hex digits) is needed")?;
        hex.parse().map_err(|_| "key= must be 40 hex digits")
    }

    pub(super) async fn answer(
        r: &CoralReferrals,
        op: &str,
        query: &str,
        post: bool,
    ) -> Option<(u16, serde_json::Value)> {
        match (op, post) {
            ("", false) => Some((200, r.stats())),
            ("get", false) => {
                let key = match key(query) {
                    Ok(k) => k,
                    Err(e) => return bad(e),
                };
                Some(match r.lookup(key).await {
                    Some(got) => (
                        200,
                        serde_json::json!({
                            "values": got.values.iter().map(|v| String::from_utf8_lossy(&v.data).into_owned()).collect::<Vec<_>>(),
                            "level": got.level,
                            "hops": got.hops,
                            "ms": got.elapsed.as_secs_f64() * 1000.0,
                        }),
                    ),
                    None => (
                        504,
                        serde_json::json!({ "error": "the lookup failed or timed out" }),
                    ),
                })
            }
            ("put", true) => {
                let key = match key(query) {
                    Ok(k) => k,
                    Err(e) => return bad(e),
                };
                let Some(value) = param(query, "value").filter(|v| !v.is_empty()) else {
                    return bad("value=TEXT is needed");
                };
                let ttl = match param(query, "ttl").map(str::parse::<u64>) {
                    None => HELD_TTL,
                    Some(Ok(s)) if s > 0 && s <= HELD_TTL.as_secs() => Duration::from_secs(s),
                    Some(_) => return bad("ttl= must be whole seconds, 1 to 3600"),
                };
                Some(match r.dsht.put(key, value.as_bytes(), ttl, None).await {
                    Ok(put) => (
                        200,
                        serde_json::json!({
                            "stored_at_levels": put.stored.iter().filter(|(_, c)| c.is_some()).map(|(l, _)| *l).collect::<Vec<_>>(),
                            "path": put.path.iter().map(|(level, c, p)| serde_json::json!({
                                "level": level,
                                "id": c.id.to_string(),
                                "loaded": p.loaded,
                                "values": p.count,
                                "min_ttl_s": p.min_ttl.as_secs(),
                            })).collect::<Vec<_>>(),
                        }),
                    ),
                    Err(e) => (502, serde_json::json!({ "error": e.to_string() })),
                })
            }
            ("probes", false) => {
                let key = match key(query) {
                    Ok(k) => k,
                    Err(e) => return bad(e),
                };
                Some((
                    200,
                    serde_json::json!({ "put_probes": r.dsht.put_probes(&key) }),
                ))
            }
            ("get" | "probes" | "", true) | ("put", false) => Some((
                405,
                serde_json::json!({ "error": "GET /_ecdn/sites[/get|/probes], POST /_ecdn/sites/put" }),
            )),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ecdn_node::node::sites::Sites;
    use ecdn_node::node::{Node, NodeConfig};
    use ecdn_node::origin::{Origin, OriginConfig};
    use std::net::SocketAddr;

    async fn get(node: SocketAddr, path: &str) -> (u16, Vec<u8>, String) {
        get_with(node, path, "").await
    }

    async fn get_with(node: SocketAddr, path: &str, extra: &str) -> (u16, Vec<u8>, String) {
        request(node, "GET", path, extra).await
    }

    async fn request(
        node: SocketAddr,
        method: &str,
        path: &str,
        extra: &str,
    ) -> (u16, Vec<u8>, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(node).await.unwrap();
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: site.test\r\n{extra}Connection: close\r\n\r\n"
        );
        s.write_all(req.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.unwrap();
        let split = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let head = String::from_utf8_lossy(&out[..split]).to_string();
        let status = head[9..12].parse().unwrap();
        (status, out[split + 4..].to_vec(), head)
    }

    /// Two sites and an origin: the first site's miss goes to the origin; the second site's
    /// miss of the same object is filled from the first (its reference found in the DSHT),
    /// with the same bytes, and the origin sees one request. A site refuses another's request
    /// for an object it does not hold (`504`) without asking the origin.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_second_site_fills_from_the_first_not_the_origin() {
        let origin = Origin::start("127.0.0.1:0".parse().unwrap(), OriginConfig::default())
            .await
            .unwrap();
        let mut dshts = Vec::new();
        for _ in 0..2 {
            let mut c = ecdn_dsht::Config::new("127.0.0.1:0".parse().unwrap());
            c.thresholds = vec![None];
            dshts.push(Arc::new(Dsht::start(c).await.unwrap()));
        }
        dshts[1].join(&[dshts[0].addr()]).await;
        let mut nodes = Vec::new();
        for d in &dshts {
            // The node's address is needed for its referrals before it starts: take a free port.
            let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = probe.local_addr().unwrap();
            drop(probe);
            let referrals =
                CoralReferrals::new(d.clone(), addr.to_string(), Duration::from_secs(2));
            let cfg = NodeConfig {
                origin: format!("http://{}", origin.addr),
                hoc_size: 16 << 20,
                sites: Some(Sites(Arc::new(referrals))),
                ..NodeConfig::default()
            };
            nodes.push(Node::start(addr, cfg).await.unwrap());
        }
        let path = "/obj/7?size=300000";
        let (status, first, head) = get(nodes[0].addr, path).await;
        assert_eq!(status, 200, "{head}");
        assert_eq!(origin.requests(), 1);
        // The first site's reference is put as the fill ends; wait until the DSHT has it.
        let key = CoralReferrals::key(&format!("site.test{path}"));
        for _ in 0..50 {
            if !dshts[1].get(key, None).await.unwrap().values.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (status, second, head) = get(nodes[1].addr, path).await;
        assert_eq!(status, 200, "{head}");
        assert_eq!(second, first, "the same bytes from the other site");
        assert_eq!(origin.requests(), 1, "the origin saw one request");
        // Another site's request for an object this one does not hold is refused at once,
        // without going to the origin.
        let peer = format!("{}: 127.0.0.1:1\r\n", ecdn_node::node::sites::PEER_HEADER);
        let (status, _, head) = get_with(nodes[0].addr, "/obj/8?size=1000", &peer).await;
        assert_eq!(status, 504, "{head}");
        assert_eq!(origin.requests(), 1);
        let (_, stats, _) = get(nodes[1].admin_addr().unwrap(), "/_ecdn/stats").await;
        let stats: serde_json::Value = serde_json::from_slice(&stats).unwrap();
        assert_eq!(stats["site_fills"], 1, "{stats}");
        // Its claim found the first site's reference at level 0; the first site's found none.
        let lookups = &stats["sites"]["lookups"];
        assert_eq!(lookups["found"], 1, "{stats}");
        assert_eq!(lookups["found_at_level"], serde_json::json!([1]), "{stats}");
        assert_eq!(lookups["lookup_hops"].as_object().unwrap().len(), 1);
        assert_eq!(stats["sites"]["id"], dshts[1].id().to_string());
        let (_, stats, _) = get(nodes[0].admin_addr().unwrap(), "/_ecdn/stats").await;
        let stats: serde_json::Value = serde_json::from_slice(&stats).unwrap();
        // One claim, which found nobody.
        assert_eq!(stats["sites"]["lookups"]["gets"], 1, "{stats}");
        assert_eq!(stats["sites"]["lookups"]["found"], 0, "{stats}");
        assert_eq!(stats["site_origin_unreferred"], 1, "{stats}");
        // The DSHT on the admin listener: a put at one site, found by a get at the other,
        // whose put probes the stats and `/probes` count.
        let (a0, a1) = (
            nodes[0].admin_addr().unwrap(),
            nodes[1].admin_addr().unwrap(),
        );
        let hot = Id::hash(b"hot");
        let (status, body, _) = request(
            a0,
            "POST",
            &format!("/_ecdn/sites/put?key={hot}&value=x&ttl=60"),
            "",
        )
        .await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let (status, body, _) = get(a1, &format!("/_ecdn/sites/get?key={hot}")).await;
        assert_eq!(status, 200);
        let got: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(got["values"], serde_json::json!(["x"]), "{got}");
        let mut probes = 0;
        for a in [a0, a1] {
            let (_, body, _) = get(a, &format!("/_ecdn/sites/probes?key={hot}")).await;
            let p: serde_json::Value = serde_json::from_slice(&body).unwrap();
            probes += p["put_probes"].as_u64().unwrap();
        }
        assert!(probes >= 1, "the put probed one of the two nodes");
        let put = format!("/_ecdn/sites/put?key={hot}");
        for (method, path, want) in [
            ("GET", "/_ecdn/sites/get?key=12".to_string(), 400),
            ("GET", "/_ecdn/sites/get".into(), 400),
            ("POST", put.clone(), 400),
            ("POST", format!("{put}&value=v&ttl=99999"), 400),
            ("GET", put, 405),
            ("DELETE", "/_ecdn/sites".into(), 405),
            ("GET", "/_ecdn/sites/nothing".into(), 404),
        ] {
            let (status, _, head) = request(a0, method, &path, "").await;
            assert_eq!(status, want, "{method} {path}: {head}");
        }
        // Never on the client listener.
        let (status, _, _) = get(nodes[0].addr, "/_ecdn/sites").await;
        assert_eq!(status, 404);
        for n in nodes {
            n.stop().await.unwrap();
        }
        origin.stop().await.unwrap();
    }

    /// A site that no longer holds an object (here purged) withdraws its reference at the next
    /// upkeep, and keeps advertising what it still holds.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_site_withdraws_what_it_no_longer_holds() {
        let origin = Origin::start("127.0.0.1:0".parse().unwrap(), OriginConfig::default())
            .await
            .unwrap();
        let mut c = ecdn_dsht::Config::new("127.0.0.1:0".parse().unwrap());
        c.thresholds = vec![None];
        let dsht = Arc::new(Dsht::start(c).await.unwrap());
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = probe.local_addr().unwrap();
        drop(probe);
        let referrals = Arc::new(CoralReferrals::new(
            dsht.clone(),
            addr.to_string(),
            Duration::from_secs(2),
        ));
        let cfg = NodeConfig {
            origin: format!("http://{}", origin.addr),
            hoc_size: 16 << 20,
            hoc_policy: "lru".into(),
            purge_token: Some("purge-token-of-the-test".into()),
            sites: Some(Sites(referrals.clone())),
            ..NodeConfig::default()
        };
        let node = Node::start(addr, cfg).await.unwrap();
        referrals.set_holder(node.holder());
        for path in ["/obj/1?size=1000", "/obj/2?size=1000"] {
            assert_eq!(get(node.addr, path).await.0, 200);
        }
        let (kept, purged) = (
            CoralReferrals::key("site.test/obj/1?size=1000"),
            CoralReferrals::key("site.test/obj/2?size=1000"),
        );
        let advertised = |key| {
            let dsht = dsht.clone();
            async move { !dsht.get(key, None).await.unwrap().values.is_empty() }
        };
        for _ in 0..50 {
            if advertised(kept).await && advertised(purged).await {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(advertised(kept).await && advertised(purged).await);
        let purge = "Authorization: Bearer purge-token-of-the-test\r\n";
        let admin = node.admin_addr().unwrap();
        let (status, _, head) = request(admin, "PURGE", "/obj/2?size=1000", purge).await;
        assert_eq!(status, 200, "{head}");
        referrals.upkeep().await;
        assert!(advertised(kept).await, "still held: still advertised");
        assert!(!advertised(purged).await, "purged: withdrawn");
        node.stop().await.unwrap();
        origin.stop().await.unwrap();
    }
}
