//! `decode_packet` (format v2) and every message in it on arbitrary bytes:
//! never panic; iteration ends after at most `count` messages or the first
//! error; a packet that decodes re-encodes its header exactly; raw and decoded
//! iteration agree on the message headers.
#![no_main]

use libfuzzer_sys::fuzz_target;
use splitkv_layout::wire::{decode_packet, MESSAGES_PER_PACKET_MAX, PACKET_HEADER_BYTES};

fuzz_target!(|data: &[u8]| {
    if let Ok((h, msgs)) = decode_packet(data) {
        let mut again = Vec::new();
        h.encode(&mut again);
        assert_eq!(&again[..], &data[..PACKET_HEADER_BYTES]);
        assert!(!h.is_ack_only() || h.count == 0);
        let mut raw = msgs.clone();
        let mut n = 0;
        for m in msgs {
            n += 1;
            let r = raw.next_raw().expect("raw iteration as long");
            if let Ok((mh, body)) = m {
                assert_eq!(r.expect("raw decodes when the body does").0, mh);
                let _ = body.tx_id();
                let _ = body.kind();
            }
        }
        assert!(n <= h.count as usize && n <= MESSAGES_PER_PACKET_MAX);
    }
});
