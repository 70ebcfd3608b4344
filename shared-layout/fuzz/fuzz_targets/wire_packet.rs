//! `decode_packet` and every message in it on arbitrary bytes: never panic;
//! iteration ends after at most `count` messages or the first error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use splitkv_layout::wire::{decode_packet, MESSAGES_PER_PACKET_MAX};

fuzz_target!(|data: &[u8]| {
    if let Ok((h, msgs)) = decode_packet(data) {
        let mut n = 0;
        for m in msgs {
            n += 1;
            if let Ok((_, body)) = m {
                let _ = body.tx_id();
                let _ = body.kind();
            }
        }
        assert!(n <= h.count as usize && n <= MESSAGES_PER_PACKET_MAX);
    }
});
