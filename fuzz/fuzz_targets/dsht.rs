//! The DSHT's packet parser on arbitrary datagrams: it never panics, and what it accepts is
//! canonical (encoding the parsed packet gives back the same bytes), so two nodes can never
//! read one datagram two ways. Values that claim to be contacts (clustering hints) decode or
//! are refused, and a decoded one re-encodes to the same bytes. A key as the admin listener
//! takes it (`/_ecdn/sites/get?key=HEX`) parses or is refused, and a parsed one prints back
//! as its 40 hex digits.
#![no_main]

use ecdn_dsht::wire::{Contact, Packet};
use ecdn_dsht::Id;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(packet) = Packet::decode(data) {
        assert_eq!(packet.encode(), data, "accepted a non-canonical packet");
    }
    if let Some(contact) = Contact::from_bytes(data) {
        assert_eq!(contact.to_bytes(), data);
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(id) = text.parse::<Id>() {
            assert_eq!(id.to_string(), text.to_ascii_lowercase());
        }
    }
});
