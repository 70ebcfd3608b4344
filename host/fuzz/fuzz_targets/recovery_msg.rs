//! The recovery message decoder (`wire::RecoveryMsg::decode`, crash recovery):
//! arbitrary bytes as one recovery message body.
//!
//! Checks: nothing panics; a message that decodes re-encodes to exactly the
//! input bytes (the encoding has one form), within
//! `RECOVERY_MESSAGE_BYTES_MAX`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use splitkv_layout::wire::{RecoveryMsg, RECOVERY_MESSAGE_BYTES_MAX};

fuzz_target!(|data: &[u8]| {
    let Ok(msg) = RecoveryMsg::decode(data) else {
        return;
    };
    let mut out = Vec::new();
    msg.encode(&mut out)
        .expect("a decoded recovery message is within the encoder's bounds");
    assert_eq!(out, data, "decode then encode changed the bytes");
    assert!(out.len() <= RECOVERY_MESSAGE_BYTES_MAX);
});
