//! The DSHT's packets: a compact, versioned, bounded binary format for RPC over UDP.
//!
//! Every packet is one UDP datagram of at most [`MAX_PACKET`] bytes:
//!
//! ```text
//! magic "Co" | version u8 | kind u8 | txid u64 | sender id [20]
//! | levels u8 | per non-global level: cluster id [20], age s u32, size u32
//! | body (by kind)
//! ```
//!
//! The header carries the sender's cluster information (§4.3: identifier, age and size
//! estimate of each non-global cluster), which the receiver uses to demultiplex requests by
//! level and to manage clusters. Integers are big-endian. Every count is bounded
//! ([`MAX_LEVELS`], [`MAX_CONTACTS`], [`MAX_VALUES`], [`MAX_VALUE`]) and a packet with a
//! wrong magic or version, an unknown kind, a count beyond its bound, a short field or
//! trailing bytes is refused with a [`WireError`]: the node drops it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::id::{Id, ID_BYTES};

/// The first two bytes of every packet.
pub const MAGIC: [u8; 2] = *b"Co";
/// The format version this code speaks.
pub const VERSION: u8 = 2;
/// The largest datagram sent or accepted.
pub const MAX_PACKET: usize = 1400;
/// Most levels in a hierarchy (level 0 included).
pub const MAX_LEVELS: usize = 4;
/// Most contacts in one reply.
pub const MAX_CONTACTS: usize = 8;
/// Most values in one reply (and stored per key: `l` is at most this).
pub const MAX_VALUES: usize = 8;
/// Largest value in bytes.
pub const MAX_VALUE: usize = 64;

/// Why a packet was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("packet of {0} bytes is larger than {MAX_PACKET}")]
    TooLarge(usize),
    #[error("packet ends early (reading {0})")]
    Short(&'static str),
    #[error("not a DSHT packet (bad magic)")]
    Magic,
    #[error("unsupported version {0}")]
    Version(u8),
    #[error("unknown packet kind {0}")]
    Kind(u8),
    #[error("unknown lookup operation {0}")]
    Op(u8),
    #[error("{what} count {count} exceeds {max}")]
    Count {
        what: &'static str,
        count: usize,
        max: usize,
    },
    #[error("unknown address family {0}")]
    Family(u8),
    #[error("a flag byte is {0}, not 0 or 1")]
    Flag(u8),
    #[error("{0} trailing bytes")]
    Trailing(usize),
}

/// A sender's view of one of its non-global clusters (§4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterInfo {
    /// The cluster's random 160-bit id.
    pub id: Id,
    /// Seconds since the cluster was created.
    pub age_s: u32,
    /// The sender's estimate of the cluster's size (nodes).
    pub size: u32,
}

/// A node as others reach it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Contact {
    pub id: Id,
    pub addr: SocketAddr,
}

impl Contact {
    /// The contact's bytes as in a reply (id, family, IP, port): how it travels as a value
    /// too (clustering hints).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = self.id.0.to_vec();
        put_addr(&mut out, &self.addr);
        out
    }

    /// The contact `bytes` hold, exactly (nothing before or after), if any.
    pub fn from_bytes(bytes: &[u8]) -> Option<Contact> {
        let mut r = Reader { bytes, pos: 0 };
        let contact = Contact {
            id: r.id("contact id").ok()?,
            addr: r.addr().ok()?,
        };
        (r.pos == bytes.len()).then_some(contact)
    }
}

/// A stored value and its remaining time to live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Value {
    pub data: Vec<u8>,
    pub ttl_s: u32,
}

/// What a lookup step asks of a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `get`: values if the node stores any for the key, else contacts closer to the target.
    Get = 1,
    /// A `put`'s forward phase: whether the node is loaded for the key and how many values it
    /// holds (with their least remaining TTL), and contacts closer to the target. Counts
    /// toward the node's leakage rate for the key.
    Put = 2,
    /// Contacts closer to the target only (joining, refreshing).
    Find = 3,
}

impl Op {
    fn from_u8(v: u8) -> Result<Op, WireError> {
        match v {
            1 => Ok(Op::Get),
            2 => Ok(Op::Put),
            3 => Ok(Op::Find),
            other => Err(WireError::Op(other)),
        }
    }
}

/// A packet's body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// Liveness and RTT probe.
    Ping,
    /// Answer to [`Body::Ping`].
    Pong,
    /// One step of a lookup in `level`'s cluster for `key`, asking for contacts near `target`
    /// (the lookup's current intermediate target, §4.1).
    Probe {
        level: u8,
        op: Op,
        key: Id,
        target: Id,
        /// For [`Op::Put`]: the new value's TTL (seconds); 0 otherwise.
        ttl_s: u32,
    },
    /// Answer to [`Body::Probe`].
    ProbeReply {
        level: u8,
        /// Whether the replier is in the sender's cluster at `level`; if not, the rest is
        /// empty and the sender drops the replier from that level.
        member: bool,
        /// More than β requests for the key within the past minute (§4.2).
        loaded: bool,
        /// Values stored for the key.
        count: u8,
        /// Least remaining TTL of those values, seconds (0 when none).
        min_ttl_s: u32,
        /// For [`Op::Get`] and [`Op::Put`]: the stored values (empty when none).
        values: Vec<Value>,
        /// Contacts near the target.
        contacts: Vec<Contact>,
    },
    /// A `put`'s reverse phase: store `value` under `key` in `level`'s cluster; with a TTL of
    /// 0, withdraw it (its owner no longer holds what it names).
    Store {
        level: u8,
        key: Id,
        ttl_s: u32,
        value: Vec<u8>,
    },
    /// Answer to [`Body::Store`].
    StoreReply {
        level: u8,
        member: bool,
        stored: bool,
        /// The values the node held for the key just before this store, other than the one
        /// stored (the store's return status, §8's test-and-set: a put learns who came
        /// first).
        values: Vec<Value>,
    },
}

impl Body {
    fn kind(&self) -> u8 {
        match self {
            Body::Ping => 1,
            Body::Pong => 2,
            Body::Probe { .. } => 3,
            Body::ProbeReply { .. } => 4,
            Body::Store { .. } => 5,
            Body::StoreReply { .. } => 6,
        }
    }

    /// Whether this body answers a request (and so must match an outstanding txid).
    pub fn is_reply(&self) -> bool {
        matches!(
            self,
            Body::Pong | Body::ProbeReply { .. } | Body::StoreReply { .. }
        )
    }
}

/// One datagram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    /// Matches a reply to its request.
    pub txid: u64,
    /// The sender's node id.
    pub sender: Id,
    /// The sender's clusters at levels 1, 2, … (level 0 is implicit).
    pub clusters: Vec<ClusterInfo>,
    pub body: Body,
}

impl Packet {
    /// The packet's bytes. Panics only on a packet this crate would never build: counts beyond
    /// the bounds (callers truncate contact and value lists to them).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(&MAGIC);
        out.push(VERSION);
        out.push(self.body.kind());
        out.extend_from_slice(&self.txid.to_be_bytes());
        out.extend_from_slice(&self.sender.0);
        assert!(self.clusters.len() < MAX_LEVELS, "too many levels");
        out.push(self.clusters.len() as u8 + 1);
        for c in &self.clusters {
            out.extend_from_slice(&c.id.0);
            out.extend_from_slice(&c.age_s.to_be_bytes());
            out.extend_from_slice(&c.size.to_be_bytes());
        }
        match &self.body {
            Body::Ping | Body::Pong => {}
            Body::Probe {
                level,
                op,
                key,
                target,
                ttl_s,
            } => {
                out.push(*level);
                out.push(*op as u8);
                out.extend_from_slice(&key.0);
                out.extend_from_slice(&target.0);
                out.extend_from_slice(&ttl_s.to_be_bytes());
            }
            Body::ProbeReply {
                level,
                member,
                loaded,
                count,
                min_ttl_s,
                values,
                contacts,
            } => {
                out.push(*level);
                out.push(*member as u8);
                out.push(*loaded as u8);
                out.push(*count);
                out.extend_from_slice(&min_ttl_s.to_be_bytes());
                assert!(contacts.len() <= MAX_CONTACTS);
                put_values(&mut out, values);
                out.push(contacts.len() as u8);
                for c in contacts {
                    out.extend_from_slice(&c.id.0);
                    put_addr(&mut out, &c.addr);
                }
            }
            Body::Store {
                level,
                key,
                ttl_s,
                value,
            } => {
                out.push(*level);
                out.extend_from_slice(&key.0);
                out.extend_from_slice(&ttl_s.to_be_bytes());
                put_value(&mut out, value);
            }
            Body::StoreReply {
                level,
                member,
                stored,
                values,
            } => {
                out.push(*level);
                out.push(*member as u8);
                out.push(*stored as u8);
                put_values(&mut out, values);
            }
        }
        debug_assert!(out.len() <= MAX_PACKET);
        out
    }

    /// Parses one datagram, refusing anything malformed.
    pub fn decode(bytes: &[u8]) -> Result<Packet, WireError> {
        if bytes.len() > MAX_PACKET {
            return Err(WireError::TooLarge(bytes.len()));
        }
        let mut r = Reader { bytes, pos: 0 };
        if r.take(2, "magic")? != MAGIC {
            return Err(WireError::Magic);
        }
        let version = r.u8("version")?;
        if version != VERSION {
            return Err(WireError::Version(version));
        }
        let kind = r.u8("kind")?;
        let txid = r.u64("txid")?;
        let sender = r.id("sender")?;
        let levels = r.u8("levels")? as usize;
        if levels == 0 || levels > MAX_LEVELS {
            return Err(WireError::Count {
                what: "level",
                count: levels,
                max: MAX_LEVELS,
            });
        }
        let mut clusters = Vec::with_capacity(levels - 1);
        for _ in 1..levels {
            clusters.push(ClusterInfo {
                id: r.id("cluster id")?,
                age_s: r.u32("cluster age")?,
                size: r.u32("cluster size")?,
            });
        }
        let body = match kind {
            1 => Body::Ping,
            2 => Body::Pong,
            3 => Body::Probe {
                level: r.u8("level")?,
                op: Op::from_u8(r.u8("op")?)?,
                key: r.id("key")?,
                target: r.id("target")?,
                ttl_s: r.u32("ttl")?,
            },
            4 => {
                let level = r.u8("level")?;
                let member = r.flag("member")?;
                let loaded = r.flag("loaded")?;
                let count = r.u8("count")?;
                let min_ttl_s = r.u32("min ttl")?;
                let values = r.values()?;
                let n = r.count("contact", MAX_CONTACTS)?;
                let mut contacts = Vec::with_capacity(n);
                for _ in 0..n {
                    contacts.push(Contact {
                        id: r.id("contact id")?,
                        addr: r.addr()?,
                    });
                }
                Body::ProbeReply {
                    level,
                    member,
                    loaded,
                    count,
                    min_ttl_s,
                    values,
                    contacts,
                }
            }
            5 => Body::Store {
                level: r.u8("level")?,
                key: r.id("key")?,
                ttl_s: r.u32("ttl")?,
                value: r.value()?,
            },
            6 => Body::StoreReply {
                level: r.u8("level")?,
                member: r.flag("member")?,
                stored: r.flag("stored")?,
                values: r.values()?,
            },
            other => return Err(WireError::Kind(other)),
        };
        if r.pos != bytes.len() {
            return Err(WireError::Trailing(bytes.len() - r.pos));
        }
        Ok(Packet {
            txid,
            sender,
            clusters,
            body,
        })
    }
}

/// A count, then each value and its TTL.
fn put_values(out: &mut Vec<u8>, values: &[Value]) {
    assert!(values.len() <= MAX_VALUES, "too many values");
    out.push(values.len() as u8);
    for v in values {
        put_value(out, &v.data);
        out.extend_from_slice(&v.ttl_s.to_be_bytes());
    }
}

fn put_value(out: &mut Vec<u8>, value: &[u8]) {
    assert!(value.len() <= MAX_VALUE, "value too long");
    out.push(value.len() as u8);
    out.extend_from_slice(value);
}

fn put_addr(out: &mut Vec<u8>, addr: &SocketAddr) {
    match addr.ip() {
        IpAddr::V4(ip) => {
            out.push(4);
            out.extend_from_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            out.push(6);
            out.extend_from_slice(&ip.octets());
        }
    }
    out.extend_from_slice(&addr.port().to_be_bytes());
}

/// A bounds-checked cursor over a datagram.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], WireError> {
        let end = self.pos.checked_add(n).ok_or(WireError::Short(what))?;
        let slice = self
            .bytes
            .get(self.pos..end)
            .ok_or(WireError::Short(what))?;
        self.pos = end;
        Ok(slice)
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, WireError> {
        Ok(self.take(1, what)?[0])
    }

    fn flag(&mut self, what: &'static str) -> Result<bool, WireError> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(WireError::Flag(other)),
        }
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, WireError> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, WireError> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8, what)?);
        Ok(u64::from_be_bytes(b))
    }

    fn id(&mut self, what: &'static str) -> Result<Id, WireError> {
        let mut b = [0u8; ID_BYTES];
        b.copy_from_slice(self.take(ID_BYTES, what)?);
        Ok(Id(b))
    }

    fn count(&mut self, what: &'static str, max: usize) -> Result<usize, WireError> {
        let count = self.u8(what)? as usize;
        if count > max {
            return Err(WireError::Count { what, count, max });
        }
        Ok(count)
    }

    fn value(&mut self) -> Result<Vec<u8>, WireError> {
        let len = self.count("value byte", MAX_VALUE)?;
        Ok(self.take(len, "value")?.to_vec())
    }

    /// A count (at most [`MAX_VALUES`]), then each value and its TTL.
    fn values(&mut self) -> Result<Vec<Value>, WireError> {
        let n = self.count("value", MAX_VALUES)?;
        let mut values = Vec::with_capacity(n);
        for _ in 0..n {
            let data = self.value()?;
            values.push(Value {
                data,
                ttl_s: self.u32("value ttl")?,
            });
        }
        Ok(values)
    }

    fn addr(&mut self) -> Result<SocketAddr, WireError> {
        let ip = match self.u8("address family")? {
            4 => {
                let b = self.take(4, "IPv4 address")?;
                IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
            }
            6 => {
                let mut o = [0u8; 16];
                o.copy_from_slice(self.take(16, "IPv6 address")?);
                IpAddr::V6(Ipv6Addr::from(o))
            }
            other => return Err(WireError::Family(other)),
        };
        let b = self.take(2, "port")?;
        Ok(SocketAddr::new(ip, u16::from_be_bytes([b[0], b[1]])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Packet> {
        let clusters = vec![
            ClusterInfo {
                id: Id::hash(b"c1"),
                age_s: 3600,
                size: 37,
            },
            ClusterInfo {
                id: Id::hash(b"c2"),
                age_s: 5,
                size: 9,
            },
        ];
        let contacts = (0..MAX_CONTACTS)
            .map(|i| Contact {
                id: Id::hash(&[i as u8]),
                addr: if i % 2 == 0 {
                    SocketAddr::from(([127, 0, 3, i as u8], 4000 + i as u16))
                } else {
                    SocketAddr::from((Ipv6Addr::LOCALHOST, 5000))
                },
            })
            .collect::<Vec<_>>();
        let values = (0..MAX_VALUES)
            .map(|i| Value {
                data: vec![i as u8; MAX_VALUE],
                ttl_s: 20 * i as u32,
            })
            .collect::<Vec<_>>();
        let bodies = vec![
            Body::Ping,
            Body::Pong,
            Body::Probe {
                level: 2,
                op: Op::Put,
                key: Id::hash(b"k"),
                target: Id::hash(b"t"),
                ttl_s: 3600,
            },
            Body::ProbeReply {
                level: 1,
                member: true,
                loaded: true,
                count: 4,
                min_ttl_s: 1800,
                values: values.clone(),
                contacts,
            },
            Body::Store {
                level: 0,
                key: Id::hash(b"k"),
                ttl_s: 20,
                value: b"127.0.0.1:8080".to_vec(),
            },
            Body::StoreReply {
                level: 0,
                member: true,
                stored: false,
                values,
            },
        ];
        bodies
            .into_iter()
            .map(|body| Packet {
                txid: 0xdead_beef_0123_4567,
                sender: Id::hash(b"me"),
                clusters: clusters.clone(),
                body,
            })
            .collect()
    }

    #[test]
    fn contacts_round_trip_as_values() {
        for addr in ["127.0.3.4:5000", "[::1]:80"] {
            let c = Contact {
                id: Id::hash(addr.as_bytes()),
                addr: addr.parse().unwrap(),
            };
            let v = c.to_bytes();
            assert!(v.len() <= MAX_VALUE);
            assert_eq!(Contact::from_bytes(&v), Some(c));
            assert_eq!(Contact::from_bytes(&v[..v.len() - 1]), None);
        }
        assert_eq!(Contact::from_bytes(b""), None);
    }

    #[test]
    fn every_packet_round_trips_within_the_size_bound() {
        for p in sample() {
            let bytes = p.encode();
            assert!(bytes.len() <= MAX_PACKET, "{} bytes", bytes.len());
            assert_eq!(Packet::decode(&bytes).unwrap(), p);
        }
    }

    #[test]
    fn every_truncation_and_extension_is_refused() {
        for p in sample() {
            let bytes = p.encode();
            for cut in 0..bytes.len() {
                assert!(Packet::decode(&bytes[..cut]).is_err(), "cut at {cut}");
            }
            let mut long = bytes.clone();
            long.push(0);
            assert_eq!(Packet::decode(&long), Err(WireError::Trailing(1)));
        }
    }

    #[test]
    fn bad_headers_and_counts_are_named() {
        let bytes = sample()[3].encode();
        let mut b = bytes.clone();
        b[0] = b'X';
        assert_eq!(Packet::decode(&b), Err(WireError::Magic));
        let mut b = bytes.clone();
        b[2] = 9;
        assert_eq!(Packet::decode(&b), Err(WireError::Version(9)));
        let mut b = bytes.clone();
        b[3] = 77;
        assert_eq!(Packet::decode(&b), Err(WireError::Kind(77)));
        // The level count sits after magic, version, kind, txid and sender.
        let mut b = bytes.clone();
        b[2 + 1 + 1 + 8 + ID_BYTES] = 9;
        assert!(matches!(
            Packet::decode(&b),
            Err(WireError::Count { what: "level", .. })
        ));
        assert_eq!(
            Packet::decode(&vec![0u8; MAX_PACKET + 1]),
            Err(WireError::TooLarge(MAX_PACKET + 1))
        );
    }
}
