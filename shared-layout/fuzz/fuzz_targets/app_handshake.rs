//! `app::HandshakeMsg::decode` (Hello, Welcome, Refused from an untrusted
//! peer's socket) on arbitrary bytes: never panics; a decoded Hello's memory
//! layout lies inside its memory; whatever decodes re-encodes to exactly the
//! input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use splitkv_layout::app::handshake::handshake_frame_len;
use splitkv_layout::app::{HandshakeMsg, HANDSHAKE_BYTES_MAX};

fuzz_target!(|data: &[u8]| {
    let _ = handshake_frame_len(data);
    if let Ok(m) = HandshakeMsg::decode(data) {
        assert!(data.len() <= HANDSHAKE_BYTES_MAX);
        assert_eq!(handshake_frame_len(data), Ok(data.len()));
        if let HandshakeMsg::Hello(h) = m {
            let mut end = 0;
            for (offset, bytes) in h.layout.parts() {
                assert_eq!(offset, end);
                end = offset + bytes;
            }
            assert_eq!(end, h.layout.memory_bytes);
            assert_eq!(h.names().count(), h.name_count());
        }
        let mut out = Vec::new();
        m.encode(&mut out);
        assert_eq!(out, data);
    }
});
