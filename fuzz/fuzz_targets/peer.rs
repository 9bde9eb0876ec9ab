//! The cluster's network-facing parsers on arbitrary input: peer request paths, piece frames
//! and piece metadata, dying object lists and piece answers, a bucket map as JSON (then validated), and signature headers. Checks
//! the documented invariants, not just the absence of panics: what parses re-encodes to
//! something that parses to the same value (trailing frames too), a map that validates answers
//! every lookup within its servers, no signature made with another key verifies, none made for
//! another destination (another address or epoch; nor with another nonce) verifies or passes a
//! gate that does not answer as that destination, a nonce is taken once, a streamed body
//! opens only with its own tag, a sub-chunk's tag checks only for its own bytes, index and
//! request, and a relayed answer's body passes no byte without its tag, however it arrives. The values nodes and coordinators read from etcd
//! too: a stored map or map diff opens only when sealed with the cluster key (and then re-seals
//! to itself), a compressed value decompresses or is refused (never beyond its bound), a map
//! diff applied to a map gives a valid map or an error, and load reports, registrations and
//! the leader's stored state parse or are refused.
//! EC-Cache's object records (from the coordinator or etcd), the coordinator's object requests
//! and the nodes' heartbeats (with their object read counts): what parses and validates
//! re-encodes to itself.
#![no_main]

use std::net::SocketAddr;

use ecdn_cluster::auth::{self, ClusterKey, Recipient};
use ecdn_cluster::coordinator::etcd::Stored;
use ecdn_cluster::coordinator::objects::{ObjectOp, GET_PATH, UPDATE_PATH};
use ecdn_cluster::coordinator::Heartbeat;
use ecdn_cluster::etcd::{LoadReport, Registration};
use ecdn_cluster::etcd_map::{decompress, open_diff, open_map, seal_diff, seal_map};
use ecdn_cluster::map::MapDiff;
use ecdn_cluster::piece::PieceMeta;
use ecdn_cluster::relayed;
use ecdn_cluster::replay::Gate;
use ecdn_cluster::wire::{self, PeerPath, PieceName};
use ecdn_cluster::BucketMap;
use ecdn_objects::meta::{ObjectMeta, ObjectName};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Piece metadata and frames.
    if let Ok(m) = PieceMeta::decode(data) {
        assert_eq!(PieceMeta::decode(&m.encode()).as_ref(), Ok(&m));
    }
    if let Ok((meta, payload)) = wire::split_frame(data) {
        assert_eq!(4 + meta.len() + payload.len(), data.len());
        let _ = PieceMeta::decode(meta);
        let _ = wire::decode_held(payload);
        // A `has?ages` answer: as many ages as pieces, and it re-encodes to itself.
        if let Ok((held, capacity, since)) = wire::decode_held_ages(payload) {
            assert_eq!(held.len(), since.len());
            let mut again = wire::encode_held(&held);
            again.extend_from_slice(&wire::encode_ages(capacity, &since));
            assert_eq!(again, payload);
        }
    }
    if let Ok((meta, payload)) = wire::split_trailing_frame(data) {
        assert_eq!(payload.len() + meta.len() + 4, data.len());
        assert_eq!(&data[..payload.len()], payload);
        let mut again = payload.to_vec();
        again.extend_from_slice(&wire::frame_tail(meta));
        assert_eq!(again, data);
    }
    // Dying objects and piece answers: what decodes encodes back to the same bytes.
    if let Ok(ids) = wire::decode_objects(data) {
        assert_eq!(wire::encode_objects(&ids), data);
    }
    if let Ok(ids) = wire::decode_stored(data) {
        let present = data.starts_with(b"present\n");
        assert_eq!(wire::encode_stored(present, &ids), data);
    }
    let text = String::from_utf8_lossy(data);
    // Paths: what parses names its key again the same way.
    if let Ok(p) = wire::parse_path(&text) {
        let again = match &p {
            PeerPath::Piece {
                piece: PieceName::Chunk(c),
                key,
                sub_chunks: Some(sub),
                untagged: true,
            } => wire::untagged_piece_path(*c, key, *sub),
            PeerPath::Piece {
                piece,
                key,
                sub_chunks,
                ..
            } => wire::piece_path(*piece, key, *sub_chunks),
            PeerPath::Has { key, ages: false } => wire::has_path(key),
            PeerPath::Has { key, ages: true } => wire::has_ages_path(key),
            PeerPath::Purge { key, sequence } => wire::purge_path(key, *sequence),
            PeerPath::Relay {
                target,
                slice: None,
            } => wire::relay_path(target),
            PeerPath::Relay {
                target,
                slice: Some(i),
            } => wire::relay_slice_path(target, *i),
            PeerPath::Stats => wire::STATS_PATH.to_string(),
            PeerPath::Probe => wire::PROBE_PATH.to_string(),
            PeerPath::Dying => wire::DYING_PATH.to_string(),
            PeerPath::Units { name, units } => wire::units_path(name, *units),
        };
        assert_eq!(wire::parse_path(&again), Ok(p));
    }
    // A bucket map from JSON: if it validates, every lookup stays within its servers.
    if let Ok(map) = serde_json::from_slice::<BucketMap>(data) {
        if map.validate().is_ok() {
            let (mut pieces, mut walk) = (Vec::new(), Vec::new());
            for bucket in 0..map.buckets.min(64) {
                for coded in [false, true] {
                    map.pieces(bucket, coded, &mut pieces, &mut walk);
                    assert!(pieces.iter().all(|p| p.server < map.servers()));
                }
                if let Some(s) = map.serving(bucket) {
                    assert!(s < map.servers());
                }
                for c in 0..(map.k + map.p).min(8) {
                    let _ = map.former(bucket, c);
                }
            }
        }
    }
    // Values read from etcd.
    let key = ClusterKey::new(b"fuzzing-cluster-key-0123");
    if let Ok(map) = open_map(&key, data, 7) {
        assert_eq!(map.epoch, 7);
        // What opened re-seals and opens to the same map; another key never opens it.
        let again = seal_map(&key, &map);
        assert_eq!(open_map(&key, &again, 7).as_ref(), Ok(&map));
        let other = ClusterKey::new(b"another-cluster-key-4567");
        assert!(open_map(&other, &again, 7).is_err());
    }
    if let Ok(diff) = open_diff(&key, data) {
        assert_eq!(open_diff(&key, &seal_diff(&key, &diff)).as_ref(), Ok(&diff));
    }
    let _ = decompress(data);
    // A diff from the network applied to a map: a map that validates, or an error.
    if let Ok(mut diff) = serde_json::from_slice::<MapDiff>(data) {
        let base = base_map();
        diff.base = base.epoch;
        if let Ok(m) = diff.apply(base, 9) {
            assert!(m.validate().is_ok());
            assert_eq!(m.epoch, 9);
        }
    }
    // Object records: one that validates re-encodes to itself and is the same object as
    // itself; names parse back to themselves.
    if let Ok(m) = serde_json::from_slice::<ObjectMeta>(data) {
        if m.validate(64).is_ok() {
            let json = serde_json::to_vec(&m).unwrap();
            assert_eq!(serde_json::from_slice::<ObjectMeta>(&json).unwrap(), m);
            assert!(m.same_object(&m).is_ok());
        }
    }
    if let Ok(n) = ObjectName::parse(&text) {
        assert_eq!(ObjectName::parse(n.as_str()), Ok(n.clone()));
    }
    // The coordinator's object requests: the input as a query, and as a record's body.
    let _ = ObjectOp::from_request(GET_PATH, Some(&text), b"");
    let _ = ObjectOp::from_request(UPDATE_PATH, None, data);
    if let Ok(hb) = serde_json::from_slice::<Heartbeat>(data) {
        let json = serde_json::to_vec(&hb).unwrap();
        assert_eq!(serde_json::from_slice::<Heartbeat>(&json).unwrap(), hb);
    }
    let _ = serde_json::from_slice::<LoadReport>(data);
    let _ = serde_json::from_slice::<Registration>(data);
    if let Ok(stored) = serde_json::from_slice::<Stored>(data) {
        let json = serde_json::to_vec(&stored).unwrap();
        assert_eq!(serde_json::from_slice::<Stored>(&json).unwrap(), stored);
    }
    // Signature headers split from the input: never verify under a key that did not sign.
    let mut parts = text.splitn(8, '\n');
    let mut headers = hyper::HeaderMap::new();
    for name in [
        auth::VERSION_HEADER,
        auth::TIME,
        auth::DIGEST,
        auth::DESTINATION,
        auth::EPOCH,
        auth::NONCE,
        auth::SIGNATURE,
    ] {
        if let Some(v) = parts
            .next()
            .and_then(|v| hyper::header::HeaderValue::from_str(v).ok())
        {
            headers.insert(name, v);
        }
    }
    let _ = key.verify("PUT", "/_peer/piece/0/k", &headers, 1_700_000_000_000);
    let _ = key.verify_response("/_peer/has/k", &[7; 32], &headers, data, 1_700_000_000_000);
    // A request signed for a destination taken from the input.
    let (addr, epoch) = destination(data);
    let to = Recipient {
        addr: SocketAddr::V4(addr),
        epoch,
    };
    let signed = key.sign("GET", &text, to, data);
    let other = ClusterKey::new(b"another-cluster-key-4567");
    let check = |k: &ClusterKey, h: &hyper::HeaderMap| k.verify("GET", &text, h, signed.time);
    assert!(check(&other, &signed.header_map()).is_err());
    let v = check(&key, &signed.header_map()).unwrap();
    v.check_body(data).unwrap();
    assert_eq!(v.recipient(), to);
    // No other destination verifies: the headers naming another port, address, epoch or nonce.
    let (ip, port) = (u32::from(*addr.ip()), addr.port());
    let next_port = SocketAddr::from((std::net::Ipv4Addr::from(ip), port.wrapping_add(1)));
    let next_ip = SocketAddr::from((std::net::Ipv4Addr::from(ip ^ 1), port));
    for (name, value) in [
        (auth::DESTINATION, next_port.to_string()),
        (auth::DESTINATION, next_ip.to_string()),
        (auth::EPOCH, to.epoch.wrapping_add(1).to_string()),
        (auth::NONCE, format!("{:032x}", signed.nonce ^ 1)),
    ] {
        let mut h = signed.header_map();
        h.insert(name, value.parse().unwrap());
        assert!(check(&key, &h).is_err(), "{name} {value} verified");
    }
    // A gate that answers as another address refuses it; one that answers as its own takes it
    // once.
    let mut req = hyper::Request::builder().method("GET");
    if let Ok(uri) = hyper::Uri::try_from(text.as_ref()) {
        req = req.uri(uri);
        let mut req = req.body(()).unwrap();
        *req.headers_mut() = signed.header_map();
        let (head, ()) = req.into_parts();
        let pq = head
            .uri
            .path_and_query()
            .map_or(head.uri.path(), |p| p.as_str());
        if pq == text {
            let now = signed.time;
            let stranger = Gate::with_memory(key.clone(), &[next_port, next_ip], 4, 0);
            assert!(stranger.admit(&head, now).is_err());
            let gate = Gate::with_memory(key.clone(), &[to.addr], 4, 0);
            gate.admit(&head, now).unwrap();
            assert!(gate.admit(&head, now).is_err());
        }
    }
    // A streamed body: the input is the content; with its tag it opens to the content, any
    // input taken as content-and-tag without one does not, and another key never verifies.
    let now = 1_700_000_000_000;
    let (streamed, mut tagger) = key.sign_streamed("PUT", &text, to, now, 7);
    let verify = |k: &ClusterKey| k.verify("PUT", &text, &streamed.header_map(), now);
    assert!(verify(&other).is_err());
    let v = verify(&key).unwrap();
    tagger.update(data);
    let mut body = data.to_vec();
    body.extend_from_slice(&tagger.finish());
    let opened = v.open_body(bytes::Bytes::from(body)).unwrap();
    assert_eq!(&opened[..], data);
    assert!(v.check_body(data).is_err());
    // Sub-chunk tags (a range answer): the input as a sub-chunk; its tag checks under the key
    // of the request it answers, at its index, and under nothing else: not another request's
    // (the same one signed with another key), not another index. The input as a claimed tag
    // of a fixed sub-chunk checks only if it is that tag.
    let sig = v.signature();
    let tags = key.sub_chunk_tagger(sig);
    let tag = tags.tag(3, data);
    assert!(tags.check(3, data, &tag));
    assert!(!tags.check(4, data, &tag));
    let forged = other
        .sign_streamed("PUT", &text, to, now, 7)
        .0
        .mac()
        .unwrap();
    assert!(!other.sub_chunk_tagger(&forged).check(3, data, &tag));
    assert!(!key.sub_chunk_tagger(&forged).check(3, data, &tag));
    assert_eq!(
        tags.check(0, b"sub-chunk", data),
        data == tags.tag(0, b"sub-chunk")
    );
    // A relayed answer's body from the input, fed whole and byte by byte: the same bytes pass
    // and the same error ends both; arbitrary input never ends well (no tag is guessed), and a
    // body the writer made from the input passes whole.
    let read = |step: usize| {
        let mut r = relayed::SegmentReader::new(tags.clone());
        let mut passed = Vec::new();
        for piece in data.chunks(step) {
            let mut out = Vec::new();
            let pushed = r.push(bytes::Bytes::copy_from_slice(piece), &mut out);
            passed.extend(out.iter().flat_map(|b| b.iter().copied()));
            if let Err(e) = pushed {
                return (passed, Err(e));
            }
        }
        (passed, Ok(r.ended()))
    };
    let (whole, by_bytes) = (read(data.len().max(1)), read(1));
    assert_eq!(whole, by_bytes);
    assert!(whole.0.is_empty() && whole.1 != Ok(true));
    let mut w = relayed::SegmentWriter::new(tags.clone());
    let mut wire_body = Vec::new();
    let mut segs = Vec::new();
    w.segments(bytes::Bytes::copy_from_slice(data), &mut segs);
    segs.push(w.end());
    for b in segs {
        wire_body.extend_from_slice(&b);
    }
    let mut r = relayed::SegmentReader::new(tags.clone());
    let mut out = Vec::new();
    r.push(bytes::Bytes::from(wire_body), &mut out).unwrap();
    assert!(r.ended());
    assert_eq!(out.concat(), data);
});

/// A destination from the input: its first 6 bytes as an IPv4 address and port, the next 8
/// as an epoch.
fn destination(data: &[u8]) -> (std::net::SocketAddrV4, u64) {
    let mut b = [0u8; 14];
    for (o, i) in b.iter_mut().zip(data) {
        *o = *i;
    }
    let ip = std::net::Ipv4Addr::new(b[0], b[1], b[2], b[3]);
    let port = u16::from_le_bytes([b[4], b[5]]);
    let mut epoch = [0u8; 8];
    epoch.copy_from_slice(&b[6..14]);
    (
        std::net::SocketAddrV4::new(ip, port),
        u64::from_le_bytes(epoch),
    )
}

/// A small map to apply diffs to: 20 buckets on 6 servers, K = 3, P = 1, one server down.
fn base_map() -> &'static BucketMap {
    static MAP: std::sync::OnceLock<BucketMap> = std::sync::OnceLock::new();
    MAP.get_or_init(|| {
        use ecdn_placement::pieces::{Scheme, SlotHistory};
        let cfg = ecdn_placement::PlacementConfig {
            buckets: 20,
            ..Default::default()
        };
        let mut pl = ecdn_placement::Placement::new(&[1.0; 6], cfg).unwrap();
        let mut h = SlotHistory::new(20, 3, 1);
        let before = h.holders(&pl);
        pl.set_available(2, false);
        h.record(&before, &h.holders(&pl));
        BucketMap::from_placement(5, Scheme::C2dn, 3, 1, &pl, Some(&h))
    })
}
