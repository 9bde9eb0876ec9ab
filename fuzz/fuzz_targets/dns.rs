//! The DNS redirector on arbitrary messages (the first byte picks the resolver, in the
//! site's /24, in a /24 40 ms away, or unknown, and UDP or TCP). It never panics or hangs,
//! and every answer is a DNS response to the query: the same id, parseable, at most 512
//! bytes over UDP. A query for an A record in the redirector's domain is answered NOERROR
//! with at least one proxy (the site's own is always live), or over UDP truncated for the
//! resolver to ask over TCP.
#![no_main]

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ecdn_coral::{Locator, Redirector};
use ecdn_dsht::{Config, Dsht};
use hickory_server::net::xfer::Protocol;
use hickory_server::proto::op::{Message, MessageType, ResponseCode};
use hickory_server::proto::rr::{LowerName, Name, RecordType};
use libfuzzer_sys::fuzz_target;

const DOMAIN: &str = "cdn.test.";

fn state() -> &'static (tokio::runtime::Runtime, Redirector) {
    static STATE: OnceLock<(tokio::runtime::Runtime, Redirector)> = OnceLock::new();
    STATE.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let redirector = rt.block_on(async {
            let dsht = Dsht::start(Config::new("127.0.10.1:0".parse().unwrap()))
                .await
                .expect("a DSHT node on loopback");
            let locate: Locator = Arc::new(|ip: IpAddr| match ip {
                IpAddr::V4(v4) if v4.octets()[..3] == [127, 0, 10] => Some(Duration::ZERO),
                IpAddr::V4(v4) if v4.octets()[..3] == [127, 0, 11] => {
                    Some(Duration::from_millis(40))
                }
                _ => None,
            });
            Redirector::new(DOMAIN, Arc::new(dsht), locate).expect("a valid domain")
        });
        (rt, redirector)
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, datagram)) = data.split_first() else {
        return;
    };
    let (rt, redirector) = state();
    let resolver = match pick % 3 {
        0 => [127, 0, 10, 9],
        1 => [127, 0, 11, 9],
        _ => [127, 0, 0, 1],
    };
    let protocol = if pick / 3 % 2 == 0 {
        Protocol::Udp
    } else {
        Protocol::Tcp
    };
    let src = SocketAddr::from((resolver, 5353));
    let Some(bytes) = rt.block_on(redirector.answer(datagram, src, protocol)) else {
        return;
    };
    if protocol == Protocol::Udp {
        assert!(bytes.len() <= 512, "a UDP answer of {} bytes", bytes.len());
    }
    let response = Message::from_vec(&bytes).expect("the answer parses");
    assert_eq!(response.metadata.message_type, MessageType::Response);
    assert_eq!(&bytes[..2], &datagram[..2], "the answer has the query's id");
    let Ok(query) = Message::from_vec(datagram) else {
        return;
    };
    let [question] = query.queries.as_slice() else {
        return;
    };
    let domain = LowerName::from(Name::from_str(DOMAIN).unwrap());
    if question.query_type() == RecordType::A && domain.zone_of(&LowerName::from(question.name())) {
        assert_eq!(response.metadata.response_code, ResponseCode::NoError);
        let truncated = protocol == Protocol::Udp && response.metadata.truncation;
        assert!(
            !response.answers.is_empty() || truncated,
            "no proxy answered"
        );
    }
});
