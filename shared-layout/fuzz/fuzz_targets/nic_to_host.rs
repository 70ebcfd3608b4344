//! `NicToHost::decode` on arbitrary bytes: never panics, and whatever decodes
//! re-encodes to exactly the input (the encoding is canonical).
#![no_main]

use libfuzzer_sys::fuzz_target;
use splitkv_layout::host_nic::{NicToHost, NIC_TO_HOST_BYTES_MAX};

fuzz_target!(|data: &[u8]| {
    if let Ok(msg) = NicToHost::decode(data) {
        assert!(data.len() <= NIC_TO_HOST_BYTES_MAX);
        assert_eq!(msg.encoded_len(), data.len());
        let mut out = Vec::new();
        msg.encode(&mut out);
        assert_eq!(out, data);
    }
});
