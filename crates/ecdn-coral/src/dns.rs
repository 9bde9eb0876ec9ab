//! The DNS redirector (CoralCDN §3.1): an authoritative server for a domain that answers
//! `NAME.<domain>` with the addresses of live proxies near the client's resolver.
//!
//! * **The resolver's level.** Coral measures its RTT to the resolver and takes the highest
//!   level whose threshold it meets. Here the RTT comes from a [`Locator`] first: in `ecdn
//!   node`, a resolver in the node's own /24 (or /64; `--coral-resolver-prefix`) is at 0 ms, a DSHT peer's address at the
//!   RTT the DSHT measured to it; the in-process demo gives its injected RTTs. A resolver the
//!   locator does not know is probed ([`crate::probe::Prober`], with
//!   [`Redirector::with_prober`]: `ecdn node` has one): one TCP round trip to its DNS port,
//!   waited for at most the largest finite threshold, and kept for ten minutes. Unknown and
//!   unprobed, it is at level 0.
//! * **The answer**: A (or AAAA) records of up to [`ANSWERS`] proxies of the site's cluster at
//!   that level (`nodes(level, count, target)`, those sharing the longest prefix with the
//!   resolver first), with a TTL of 30 s for levels 0 and 1 and 60 s for level 2. Only proxies
//!   heard from within [`FRESH`] are answered; the others are pinged first (one RPC, bounded
//!   by the DSHT's timeout) and left out if they do not answer, so a dead proxy stops being
//!   returned within one TTL.
//! * **The authority section** names nameservers (the same sites, `ns-A-B-C-D.<domain>` with
//!   glue A records) with a 1 h TTL, for the zone `L0.<domain>` to a level-0 resolver,
//!   `L1.L0.<domain>` to a level-1 one, `L2.L1.L0.<domain>` to a level-2 one: resolvers
//!   query the most specific zone they know, so a nearer server overrides a farther one.
//! * A proxy's address is its DSHT node's IP: every site's proxy listens on one well-known
//!   port, as Coral's did (8090).
//!
//! * **Transport**: UDP and TCP on one port. A UDP answer is at most 512 bytes; one that does
//!   not fit (hickory writes a name whole before compressing it, so names near 253 characters
//!   do not) is truncated and the resolver asks again over TCP.
//!
//! Names outside the domain are refused; queries of other types get an empty answer; a
//! message that is not exactly one question gets FORMERR.

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use ecdn_dsht::{Contact, Dsht};
use hickory_server::net::runtime::{Time, TokioTime};
use hickory_server::net::xfer::Protocol;
use hickory_server::net::NetError;
use hickory_server::proto::op::{
    Header, Message, MessageType, Metadata, OpCode, Query, ResponseCode,
};
use hickory_server::proto::rr::rdata::{A, AAAA, NS};
use hickory_server::proto::rr::{LowerName, Name, RData, Record, RecordType};
use hickory_server::proto::serialize::binary::{BinDecoder, BinEncodable, BinEncoder};
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use hickory_server::zone_handler::{MessageResponse, MessageResponseBuilder, Queries};

/// Most proxies in one answer.
pub const ANSWERS: usize = 4;
/// Proxies heard from within this long are answered without a ping.
pub const FRESH: Duration = Duration::from_secs(10);
/// TTL of the answers to level-0 and level-1 resolvers.
pub const TTL_FAR: u32 = 30;
/// TTL of the answers to level-2 resolvers.
pub const TTL_NEAR: u32 = 60;
/// TTL of the nameservers in the authority section.
pub const TTL_NS: u32 = 3600;

/// The RTT from this site to a resolver, if known.
pub type Locator = Arc<dyn Fn(IpAddr) -> Option<Duration> + Send + Sync>;

/// `ecdn node`'s locator: the site's own prefix is near (0 ms), a DSHT peer's address is at
/// its measured RTT, anything else unknown.
pub fn prefix_locator(dsht: Arc<Dsht>) -> Locator {
    locator(dsht, None)
}

/// [`prefix_locator`] with the site's own prefix `bits` long for IPv4 and IPv6 alike (32:
/// only the node's own IPv4 address), for networks whose sites share a /24, as a test bed's
/// one subnet.
pub fn prefix_locator_of(dsht: Arc<Dsht>, bits: u32) -> Locator {
    locator(dsht, Some(bits))
}

fn locator(dsht: Arc<Dsht>, bits: Option<u32>) -> Locator {
    let own = dsht.addr().ip();
    Arc::new(move |ip: IpAddr| {
        let shared = ecdn_dsht::node::common_prefix(&own, &ip);
        let same_net = match (ip, bits) {
            (_, Some(b)) => shared >= b,
            (IpAddr::V4(_), None) => shared >= 24,
            (IpAddr::V6(_), None) => shared >= 64,
        };
        if same_net {
            return Some(Duration::ZERO);
        }
        dsht.rtt_to(ip)
    })
}

/// The redirector of one site.
pub struct Redirector {
    domain: LowerName,
    dsht: Arc<Dsht>,
    locate: Locator,
    /// Proxies heard from within this long are answered without a ping ([`FRESH`]).
    pub fresh: Duration,
    /// Probes the resolvers `locate` does not know.
    prober: Option<Arc<crate::probe::Prober>>,
    /// Its answers by level, for the node's stats.
    answers: Arc<crate::stats::DnsAnswers>,
}

impl Redirector {
    /// A redirector for `domain` (e.g. `cdn.example.`), answering with the proxies `dsht`
    /// knows, at the level `locate` gives each resolver.
    pub fn new(domain: &str, dsht: Arc<Dsht>, locate: Locator) -> Result<Redirector> {
        let name =
            Name::from_str(domain).with_context(|| format!("{domain:?} is not a domain name"))?;
        let mut name = name;
        name.set_fqdn(true);
        Ok(Redirector {
            domain: LowerName::from(name),
            dsht,
            locate,
            fresh: FRESH,
            prober: None,
            answers: Arc::default(),
        })
    }

    /// Probes the resolvers the locator does not know with `prober` (its wait should be the
    /// largest finite level threshold: see [`Redirector::probe_wait`]).
    pub fn with_prober(mut self, prober: Arc<crate::probe::Prober>) -> Redirector {
        self.prober = Some(prober);
        self
    }

    /// Its answers to in-domain queries, by the resolver's level (shared: it counts on).
    pub fn answers(&self) -> Arc<crate::stats::DnsAnswers> {
        self.answers.clone()
    }

    /// The longest a probe needs to wait to place a resolver: the DSHT's largest finite
    /// level threshold (an RTT above it is level 0 whatever it is).
    pub fn probe_wait(dsht: &Dsht) -> Duration {
        dsht.levels()
            .iter()
            .flatten()
            .copied()
            .max()
            .unwrap_or(Duration::from_millis(100))
    }

    /// The level of a resolver: the highest whose RTT threshold its RTT meets (0 when
    /// unknown).
    async fn level_of(&self, resolver: IpAddr) -> usize {
        let rtt = match ((self.locate)(resolver), &self.prober) {
            (Some(rtt), _) => Some(rtt),
            (None, Some(p)) => p.rtt(resolver).await,
            (None, None) => None,
        };
        let Some(rtt) = rtt else {
            return 0;
        };
        self.dsht
            .levels()
            .iter()
            .enumerate()
            .filter(|(_, t)| t.is_none_or(|t| rtt <= t))
            .map(|(i, _)| i)
            .max()
            .unwrap_or(0)
    }

    /// Live proxies of the cluster at `level`, nearest the resolver first: those not heard
    /// from recently are pinged, and left out if they do not answer.
    async fn live_proxies(&self, level: usize, resolver: IpAddr) -> Vec<Contact> {
        let candidates = self
            .dsht
            .nodes(level, ANSWERS * 2, Some(resolver))
            .unwrap_or_default();
        let own = self.dsht.id();
        let mut live = Vec::new();
        let mut checks = tokio::task::JoinSet::new();
        for c in candidates {
            let recent = c.id == own
                || self
                    .dsht
                    .last_heard(&c.id)
                    .is_some_and(|t| t.elapsed() <= self.fresh);
            if recent {
                live.push(c);
            } else {
                let dsht = self.dsht.clone();
                checks.spawn(async move { dsht.ping(&c).await.then_some(c) });
            }
        }
        while let Some(r) = checks.join_next().await {
            if let Ok(Some(c)) = r {
                live.push(c);
            }
        }
        live.truncate(ANSWERS);
        live
    }

    /// The zone a resolver of `level` is given nameservers for: `L0.<domain>`,
    /// `L1.L0.<domain>`, ….
    fn zone_for(&self, level: usize) -> Name {
        let mut zone = Name::from(self.domain.clone());
        for l in 0..=level {
            let label = Name::from_str(&format!("L{l}")).expect("a valid label");
            zone = label.append_domain(&zone).unwrap_or(zone);
        }
        zone
    }

    fn ns_name(&self, ip: IpAddr) -> Name {
        let label = match ip {
            IpAddr::V4(v4) => format!("ns-{}", v4.to_string().replace('.', "-")),
            IpAddr::V6(v6) => format!("ns-{}", v6.to_string().replace(':', "-")),
        };
        Name::from_str(&label)
            .ok()
            .and_then(|l| l.append_domain(&Name::from(self.domain.clone())).ok())
            .unwrap_or_else(|| Name::from(self.domain.clone()))
    }
}

fn address_record(name: Name, ttl: u32, ip: IpAddr) -> Record {
    match ip {
        IpAddr::V4(v4) => Record::from_rdata(name, ttl, RData::A(A(v4))),
        IpAddr::V6(v6) => Record::from_rdata(name, ttl, RData::AAAA(AAAA(v6))),
    }
}

/// The request's one question, as the client wrote it (its case kept), or `None` when the
/// message does not parse whole or asks more or less than one.
fn question_of(request: &Request) -> Option<Query> {
    let message = Message::from_vec(request.as_slice()).ok()?;
    match <[Query; 1]>::try_from(message.queries) {
        Ok([q]) => Some(q),
        Err(_) => None,
    }
}

/// The question section of the response: `question` encoded on its own. hickory's builder
/// would copy the request's bytes, whose compression pointers can point anywhere in the
/// response (the fuzz target found answers that did not parse), and its parsed question is
/// lowercased, which resolvers that check the case they sent (DNS 0x20) would refuse.
fn echo(question: Option<&Query>) -> Queries {
    let mut bytes = Vec::new();
    let encoded = question.is_some_and(|q| q.emit(&mut BinEncoder::new(&mut bytes)).is_ok());
    let count = usize::from(encoded);
    if !encoded {
        bytes.clear();
    }
    Queries::read(&mut BinDecoder::new(&bytes), count)
        .or_else(|_| Queries::read(&mut BinDecoder::new(&[]), 0))
        .expect("an empty question section reads")
}

/// What the server records when a response could not be sent.
fn failed(request: &Request) -> ResponseInfo {
    let mut metadata = Metadata::response_from_request(&request.metadata);
    metadata.response_code = ResponseCode::ServFail;
    ResponseInfo::from(Header {
        metadata,
        counts: Default::default(),
    })
}

#[async_trait::async_trait]
impl RequestHandler for Redirector {
    async fn handle_request<R: ResponseHandler, T: Time>(
        &self,
        request: &Request,
        mut response: R,
    ) -> ResponseInfo {
        let question = question_of(request);
        let echoed = echo(question.as_ref());
        let builder = MessageResponseBuilder::new(&echoed, None);
        let Some(query) = question else {
            let r = builder.error_msg(&request.metadata, ResponseCode::FormErr);
            return response
                .send_response(r)
                .await
                .unwrap_or_else(|_| failed(request));
        };
        let name = query.name();
        if !self.domain.zone_of(&LowerName::from(name)) {
            let r = builder.error_msg(&request.metadata, ResponseCode::Refused);
            return response
                .send_response(r)
                .await
                .unwrap_or_else(|_| failed(request));
        }
        let resolver = request.src().ip();
        let level = self.level_of(resolver).await;
        let proxies = self.live_proxies(level, resolver).await;
        self.answers.answered(level, proxies.len());
        let ttl = if level >= 2 { TTL_NEAR } else { TTL_FAR };
        let wanted = query.query_type();
        let answers: Vec<Record> = proxies
            .iter()
            .map(|c| c.addr.ip())
            .filter(|ip| {
                (wanted == RecordType::A && ip.is_ipv4())
                    || (wanted == RecordType::AAAA && ip.is_ipv6())
                    || wanted == RecordType::ANY
            })
            .map(|ip| address_record(name.clone(), ttl, ip))
            .collect();
        let zone = self.zone_for(level);
        let nameservers: Vec<(Name, IpAddr)> = proxies
            .iter()
            .map(|c| (self.ns_name(c.addr.ip()), c.addr.ip()))
            .collect();
        let authority: Vec<Record> = nameservers
            .iter()
            .map(|(ns, _)| Record::from_rdata(zone.clone(), TTL_NS, RData::NS(NS(ns.clone()))))
            .collect();
        let glue: Vec<Record> = nameservers
            .iter()
            .map(|(ns, ip)| address_record(ns.clone(), TTL_NS, *ip))
            .collect();
        let mut meta = Metadata::response_from_request(&request.metadata);
        meta.authoritative = true;
        let r = builder.build(
            meta,
            answers.iter(),
            authority.iter(),
            std::iter::empty(),
            glue.iter(),
        );
        response
            .send_response(r)
            .await
            .unwrap_or_else(|_| failed(request))
    }
}

impl Redirector {
    /// Answers one DNS message from `src`, received over `protocol`, as the server does once
    /// hickory has parsed it: the response's bytes, or `None` for what the server drops or
    /// answers itself before the handler (not a DNS message, a response, a malformed one).
    /// Over UDP an answer is at most 512 bytes (the answers carry no EDNS); one that does not
    /// fit is truncated (TC) and the resolver asks again over TCP. The fuzz target and tests
    /// use it without sockets.
    pub async fn answer(
        &self,
        message: &[u8],
        src: SocketAddr,
        protocol: Protocol,
    ) -> Option<Vec<u8>> {
        let request = Request::from_bytes(message.to_vec(), src, protocol).ok()?;
        if request.metadata.message_type == MessageType::Response {
            return None;
        }
        let capture = Capture {
            max_size: if protocol == Protocol::Udp {
                512
            } else {
                u16::MAX
            },
            sent: Default::default(),
        };
        self.handle_request::<_, TokioTime>(&request, capture.clone())
            .await;
        let sent = lock(&capture.sent).take();
        sent
    }
}

/// A [`ResponseHandler`] that keeps the encoded response, as hickory's handle would send it.
#[derive(Clone)]
struct Capture {
    max_size: u16,
    sent: Arc<std::sync::Mutex<Option<Vec<u8>>>>,
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[async_trait::async_trait]
impl ResponseHandler for Capture {
    async fn send_response<'a>(
        &mut self,
        response: MessageResponse<
            '_,
            'a,
            impl Iterator<Item = &'a Record> + Send + 'a,
            impl Iterator<Item = &'a Record> + Send + 'a,
            impl Iterator<Item = &'a Record> + Send + 'a,
            impl Iterator<Item = &'a Record> + Send + 'a,
        >,
    ) -> Result<ResponseInfo, NetError> {
        let id = response.metadata().id;
        let mut bytes = Vec::with_capacity(512);
        let mut encoder = BinEncoder::new(&mut bytes);
        encoder.set_max_size(self.max_size);
        let info = match response.destructive_emit(&mut encoder) {
            Ok(info) => info,
            Err(_) => {
                // What hickory sends when a response cannot be encoded: SERVFAIL, nothing else.
                bytes.clear();
                let mut metadata = Metadata::new(id, MessageType::Response, OpCode::Query);
                metadata.response_code = ResponseCode::ServFail;
                let header = Header {
                    metadata,
                    counts: Default::default(),
                };
                header.emit(&mut BinEncoder::new(&mut bytes))?;
                ResponseInfo::from(header)
            }
        };
        *lock(&self.sent) = Some(bytes);
        Ok(info)
    }
}

/// How long a TCP connection may wait between queries before the server closes it.
pub const TCP_IDLE: Duration = Duration::from_secs(10);

/// A running redirector: dropping it stops the server.
pub struct DnsServer {
    /// Where it answers, over UDP and TCP.
    pub addr: SocketAddr,
    server: hickory_server::Server<Redirector>,
}

impl DnsServer {
    /// Serves `redirector` over UDP and TCP on `addr` (port 0: a port free for both). TCP is
    /// where a resolver asks again when a UDP answer was truncated (RFC 7766).
    pub async fn start(addr: SocketAddr, redirector: Redirector) -> Result<DnsServer> {
        let (socket, listener) = bind_both(addr).await?;
        let addr = socket.local_addr()?;
        let mut server = hickory_server::Server::new(redirector);
        server.register_socket(socket);
        server.register_listener(listener, TCP_IDLE, 64 << 10);
        Ok(DnsServer { addr, server })
    }

    /// Stops serving.
    pub async fn stop(mut self) {
        let _ = self.server.shutdown_gracefully().await;
    }
}

/// A UDP socket and a TCP listener on the same port: `addr`'s, or for port 0 the first port
/// the system gives UDP that TCP can have too.
async fn bind_both(addr: SocketAddr) -> Result<(tokio::net::UdpSocket, tokio::net::TcpListener)> {
    let mut last = None;
    for _ in 0..if addr.port() == 0 { 20 } else { 1 } {
        let socket = tokio::net::UdpSocket::bind(addr)
            .await
            .with_context(|| format!("binding the DNS server on {addr} (UDP)"))?;
        let bound = socket.local_addr()?;
        match tokio::net::TcpListener::bind(bound).await {
            Ok(listener) => return Ok((socket, listener)),
            Err(e) => last = Some((bound, e)),
        }
    }
    let (bound, e) = last.expect("at least one try");
    Err(e).with_context(|| format!("binding the DNS server on {bound} (TCP)"))
}

/// What a stub resolver at `source` gets for `name`'s A records from the DNS server at
/// `server` over UDP: the addresses with their TTLs, in the answer's order. A refusal, a
/// failure, a truncated answer or no answer within `timeout` is an error.
pub async fn query_a(
    server: SocketAddr,
    source: IpAddr,
    name: &str,
    timeout: Duration,
) -> Result<Vec<(IpAddr, u32)>> {
    let name = Name::from_str(name).with_context(|| format!("{name:?} is not a domain name"))?;
    let id = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u16);
    let mut query = Message::new(id, MessageType::Query, OpCode::Query);
    query.add_query(Query::query(name, RecordType::A));
    let socket = tokio::net::UdpSocket::bind(SocketAddr::new(source, 0))
        .await
        .with_context(|| format!("binding a resolver's socket on {source}"))?;
    socket.send_to(&query.to_vec()?, server).await?;
    let mut buf = vec![0u8; 4096];
    let response = tokio::time::timeout(timeout, async {
        loop {
            let (n, from) = socket.recv_from(&mut buf).await?;
            if from != server {
                continue;
            }
            match Message::from_vec(&buf[..n]) {
                Ok(m)
                    if m.metadata.id == id && m.metadata.message_type == MessageType::Response =>
                {
                    return anyhow::Ok(m)
                }
                _ => continue,
            }
        }
    })
    .await
    .with_context(|| format!("no answer from {server} within {timeout:?}"))??;
    anyhow::ensure!(
        response.metadata.response_code == ResponseCode::NoError,
        "{server} answered {}",
        response.metadata.response_code
    );
    anyhow::ensure!(
        !response.metadata.truncation,
        "{server}'s answer was truncated"
    );
    Ok(response
        .answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some((IpAddr::V4(a.0), r.ttl)),
            _ => None,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// `dig` (Debian's dnsutils; `./test.sh` installs it) from `source` for `name`: the answer's
    /// (address, TTL) pairs and the authority section's lines.
    fn dig(server: SocketAddr, source: &str, name: &str) -> (Vec<(String, u32)>, Vec<String>) {
        dig_with(server, source, name, "+notcp")
    }

    /// `dig` with one more option (`+tcp`: over TCP).
    fn dig_with(
        server: SocketAddr,
        source: &str,
        name: &str,
        option: &str,
    ) -> (Vec<(String, u32)>, Vec<String>) {
        let out = Command::new("dig")
            .args([
                option,
                &format!("@{}", server.ip()),
                "-p",
                &server.port().to_string(),
                "-b",
                source,
                name,
                "A",
                "+norecurse",
                "+noall",
                "+answer",
                "+authority",
                "+tries=1",
                "+time=3",
            ])
            .output()
            .expect("dig is needed (Debian: dnsutils)");
        assert!(out.status.success(), "dig failed: {out:?}");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let mut answers = Vec::new();
        let mut authority = Vec::new();
        for line in text
            .lines()
            .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
        {
            let f: Vec<&str> = line.split_whitespace().collect();
            match f.get(3) {
                Some(&"A") if f[0] == name => {
                    answers.push((f[4].to_string(), f[1].parse().unwrap()))
                }
                _ => authority.push(line.to_string()),
            }
        }
        answers.sort();
        (answers, authority)
    }

    /// A DNS query datagram for `name` (type A, recursion desired, no EDNS).
    fn a_query(id: u16, name: &str) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&id.to_be_bytes());
        m.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
        for label in name.trim_end_matches('.').split('.') {
            m.push(label.len() as u8);
            m.extend_from_slice(label.as_bytes());
        }
        m.extend_from_slice(&[0, 0, 1, 0, 1]);
        m
    }

    /// Names of every length are answered with the site over TCP; over UDP the longest (253
    /// characters) do not fit in 512 bytes with hickory's encoder (it writes a name whole
    /// before compressing it) and come back truncated, for the resolver to ask over TCP. A
    /// query outside the domain is refused; a message that is not a query gets nothing from
    /// the handler.
    #[tokio::test]
    async fn the_longest_names_are_answered_in_one_datagram() {
        use hickory_server::proto::op::Message;
        let dsht = Arc::new(
            Dsht::start(ecdn_dsht::Config::new("127.0.0.1:0".parse().unwrap()))
                .await
                .unwrap(),
        );
        let locate: Locator = Arc::new(|_| Some(Duration::ZERO));
        let redirector = Redirector::new("cdn.test", dsht, locate).unwrap();
        let resolver: SocketAddr = "127.0.0.1:5353".parse().unwrap();
        let label = "a".repeat(63);
        let longest = format!("{label}.{label}.{label}.{}.cdn.test.", "b".repeat(52));
        assert_eq!(longest.trim_end_matches('.').len(), 253);
        for name in ["cdn.test.", "www.example.com.cdn.test.", &longest] {
            for protocol in [Protocol::Udp, Protocol::Tcp] {
                let query = a_query(7, name);
                let bytes = redirector.answer(&query, resolver, protocol).await.unwrap();
                let m = Message::from_vec(&bytes).unwrap();
                assert_eq!(m.metadata.id, 7);
                assert_eq!(m.metadata.response_code, ResponseCode::NoError, "{name}");
                if protocol == Protocol::Udp && name == longest {
                    assert!(m.metadata.truncation && m.answers.is_empty(), "{m:?}");
                } else {
                    if protocol == Protocol::Udp {
                        assert!(bytes.len() <= 512, "{name}: {} bytes", bytes.len());
                    }
                    assert!(!m.metadata.truncation, "{name}");
                    assert_eq!(m.answers.len(), 1, "{name}: the site itself");
                }
            }
        }
        let bytes = redirector
            .answer(&a_query(8, "www.example.com."), resolver, Protocol::Udp)
            .await
            .unwrap();
        let m = Message::from_vec(&bytes).unwrap();
        assert_eq!(m.metadata.response_code, ResponseCode::Refused);
        assert!(m.answers.is_empty());
        let mut response = a_query(9, "x.cdn.test.");
        response[2] |= 0x80;
        let udp = Protocol::Udp;
        assert!(redirector.answer(&response, resolver, udp).await.is_none());
        assert!(redirector.answer(b"short", resolver, udp).await.is_none());
    }

    /// The response's question is the query's as sent, case kept (resolvers using DNS 0x20
    /// check it), and is encoded anew: a request whose question bytes hickory accepts but
    /// that point elsewhere (the fuzz target's finding, seven questions and a reserved label
    /// type) gets a FORMERR that parses, with no question.
    /// A resolver the locator does not know is probed, once: one 5 ms away gets level 2's
    /// zone and TTL, one that does not answer the probe level 0's.
    #[tokio::test]
    async fn resolvers_the_locator_does_not_know_are_probed() {
        use crate::probe::{ProbeFn, Prober};
        use hickory_server::proto::op::Message;
        let mut cfg = ecdn_dsht::Config::new("127.0.0.1:0".parse().unwrap());
        cfg.thresholds = vec![
            None,
            Some(Duration::from_millis(60)),
            Some(Duration::from_millis(20)),
        ];
        let dsht = Arc::new(Dsht::start(cfg).await.unwrap());
        assert_eq!(Redirector::probe_wait(&dsht), Duration::from_millis(60));
        let locate: Locator = Arc::new(|_| None);
        let probe: ProbeFn = Arc::new(|addr: SocketAddr, _wait| {
            let rtt = (addr.ip().to_string() == "127.0.0.7").then_some(Duration::from_millis(5));
            Box::pin(async move { rtt })
        });
        let prober = Arc::new(Prober::with_probe(Duration::from_millis(60), probe));
        let redirector = Redirector::new("cdn.test", dsht, locate)
            .unwrap()
            .with_prober(prober.clone());
        let ask = |src: &str| {
            let src: SocketAddr = format!("{src}:5353").parse().unwrap();
            let r = &redirector;
            async move {
                let bytes = r
                    .answer(&a_query(9, "www.x.cdn.test."), src, Protocol::Udp)
                    .await
                    .unwrap();
                let m = Message::from_vec(&bytes).unwrap();
                let zone = m.authorities[0].name.to_string().to_ascii_lowercase();
                (m.answers[0].ttl, zone)
            }
        };
        for _ in 0..2 {
            assert_eq!(
                ask("127.0.0.7").await,
                (TTL_NEAR, "l2.l1.l0.cdn.test.".into())
            );
            assert_eq!(ask("127.0.0.8").await, (TTL_FAR, "l0.cdn.test.".into()));
        }
        assert_eq!(prober.probes(), 2, "each resolver probed once");
        // Two answers at level 2, two at level 0, each naming the redirector's own node.
        let answers = redirector.answers();
        assert_eq!(answers.by_level(), [2, 0, 2, 0]);
        assert_eq!(answers.json()["empty"], 0);
    }

    #[tokio::test]
    async fn answers_echo_the_question_as_sent_and_always_parse() {
        use hickory_server::proto::op::Message;
        let dsht = Dsht::start(ecdn_dsht::Config::new("127.0.0.1:0".parse().unwrap()))
            .await
            .unwrap();
        let locate: Locator = Arc::new(|_| None);
        let redirector = Redirector::new("cdn.test", Arc::new(dsht), locate).unwrap();
        let resolver: SocketAddr = "127.0.0.1:5353".parse().unwrap();
        let mixed = "WwW.ExAmple.com.CDN.tEst.";
        let bytes = redirector
            .answer(&a_query(3, mixed), resolver, Protocol::Udp)
            .await
            .unwrap();
        let m = Message::from_vec(&bytes).unwrap();
        assert_eq!(m.queries[0].name().to_string(), mixed);
        assert_eq!(m.answers.len(), 1);
        let mut found = vec![0x34, 0x56, 1, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x31];
        found.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0x91, 0x40, 0x85, 1, 0, 0, 0, 0]);
        found.extend_from_slice(&[0, 0, 0, 2, 2, 2, 0xc0]);
        found.extend_from_slice(&[2; 92]);
        found.extend_from_slice(&[0, 0, 0, 0, 0xb4, 0x63, 0x87, 0x6e, 0x12, 0x32, 1, 0x14, 1]);
        assert_eq!(found.len(), 143);
        let bytes = redirector
            .answer(&found, resolver, Protocol::Udp)
            .await
            .expect("hickory takes it for a query");
        let m = Message::from_vec(&bytes).expect("the answer parses");
        assert_eq!(m.metadata.id, 0x3456);
        assert_eq!(m.metadata.response_code, ResponseCode::FormErr);
        assert!(m.queries.is_empty());
    }

    /// Three sites' DSHT nodes: two in 127.0.10.0/24 (5 ms apart), one in 127.0.11.0/24 (40 ms
    /// away). The redirector at the first answers a resolver of its own /24 with its level-2
    /// cluster (TTL 60 s, nameservers for L2.L1.L0), one of the other /24 with the level-1
    /// cluster (TTL 30 s), an unknown one from level 0; a proxy that dies stops being answered.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dig_gets_live_proxies_of_the_resolvers_level() {
        let rtt = |a: IpAddr, b: IpAddr| -> Option<Duration> {
            let net = |ip: IpAddr| match ip {
                IpAddr::V4(v) if v.octets()[..2] == [127, 0] && v.octets()[2] >= 10 => {
                    Some(v.octets()[2])
                }
                _ => None,
            };
            match (net(a)?, net(b)?) {
                (x, y) if x == y => Some(Duration::from_millis(5)),
                _ => Some(Duration::from_millis(40)),
            }
        };
        let latency: ecdn_dsht::Latency = Arc::new(move |a: SocketAddr, b: SocketAddr| {
            rtt(a.ip(), b.ip()).unwrap_or_default() / 2
        });
        let mut nodes = Vec::new();
        for ip in [[127, 0, 10, 1], [127, 0, 10, 2], [127, 0, 11, 1]] {
            let mut c = ecdn_dsht::Config::new(SocketAddr::from((ip, 0)));
            c.latency = Some(latency.clone());
            c.cluster_period = Duration::from_millis(500);
            nodes.push(Arc::new(Dsht::start(c).await.unwrap()));
        }
        for n in &nodes[1..] {
            n.join(&[nodes[0].addr()]).await;
        }
        // Wait for the clusters (level 2 = the /24s, level 1 = all three) and for the first
        // site's tables to hold them.
        let formed = || {
            let c: Vec<Vec<ecdn_dsht::Id>> = nodes.iter().map(|n| n.clusters()).collect();
            let known = |level| nodes[0].nodes(level, 8, None).map_or(0, |n| n.len());
            c[0][2] == c[1][2]
                && c[0][2] != c[2][2]
                && c[0][1] == c[1][1]
                && c[1][1] == c[2][1]
                && known(2) == 2
                && known(1) == 3
        };
        for _ in 0..100 {
            if formed() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(formed(), "the clusters did not form in 10 s");
        let own = nodes[0].addr().ip();
        let locate: Locator = Arc::new(move |ip| rtt(own, ip));
        let mut redirector = Redirector::new("cdn.test", nodes[0].clone(), locate).unwrap();
        redirector.fresh = Duration::from_secs(1);
        let server = DnsServer::start("127.0.10.1:0".parse().unwrap(), redirector)
            .await
            .unwrap();
        let name = "www.example.com.cdn.test.";
        let addr = server.addr;
        let dig_from =
            |source: &'static str| tokio::task::spawn_blocking(move || dig(addr, source, name));
        let (near, authority) = dig_from("127.0.10.9").await.unwrap();
        assert_eq!(
            near,
            vec![
                ("127.0.10.1".to_string(), 60),
                ("127.0.10.2".to_string(), 60)
            ],
            "{authority:?}"
        );
        assert!(
            authority
                .iter()
                .any(|l| l.to_ascii_lowercase().starts_with("l2.l1.l0.cdn.test.")
                    && l.contains("3600")
                    && l.contains("NS")),
            "{authority:?}"
        );
        // The stub resolver of `query_a` reads the same answer.
        let source = "127.0.10.9".parse().unwrap();
        let mut ours = query_a(addr, source, name, Duration::from_secs(3))
            .await
            .unwrap();
        ours.sort();
        let ours: Vec<(String, u32)> = ours.iter().map(|(ip, t)| (ip.to_string(), *t)).collect();
        assert_eq!(ours, near);
        let (level1, _) = dig_from("127.0.11.9").await.unwrap();
        assert_eq!(level1.len(), 3, "{level1:?}");
        assert!(level1.iter().all(|(_, ttl)| *ttl == 30));
        let (far, authority) = dig_from("127.0.0.1").await.unwrap();
        assert_eq!(far.len(), 3, "{far:?}");
        assert!(
            authority
                .iter()
                .any(|l| l.to_ascii_lowercase().starts_with("l0.cdn.test.")),
            "{authority:?}"
        );
        // Outside the domain: refused, no answer.
        let (other, _) =
            tokio::task::spawn_blocking(move || dig(addr, "127.0.10.9", "www.other.test."))
                .await
                .unwrap();
        assert!(other.is_empty());
        // The longest name does not fit a UDP answer: dig, told of the truncation, asks again
        // over TCP and gets it.
        let label = "a".repeat(63);
        let longest = format!("{label}.{label}.{label}.{}.cdn.test.", "b".repeat(52));
        let (long, _) = tokio::task::spawn_blocking({
            let longest = longest.clone();
            move || dig(addr, "127.0.10.9", &longest)
        })
        .await
        .unwrap();
        assert_eq!(long.len(), 2, "{long:?}");
        let (tcp, _) = tokio::task::spawn_blocking(move || {
            dig_with(addr, "127.0.10.9", "www.example.com.cdn.test.", "+tcp")
        })
        .await
        .unwrap();
        assert_eq!(tcp.len(), 2, "{tcp:?}");
        // The second proxy dies: once it is no longer fresh, it is pinged, fails, and is left out.
        nodes[1].shutdown();
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let (after, _) = dig_from("127.0.10.9").await.unwrap();
        assert_eq!(after, vec![("127.0.10.1".to_string(), 60)]);
        server.stop().await;
    }
}
