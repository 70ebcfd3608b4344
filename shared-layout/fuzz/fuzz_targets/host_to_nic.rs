//! `HostToNic::decode` on arbitrary bytes: never panics, and whatever decodes
//! re-encodes to exactly the input (the encoding is canonical).
#![no_main]

use libfuzzer_sys::fuzz_target;
use splitkv_layout::host_nic::{HostToNic, HOST_TO_NIC_BYTES_MAX};

fuzz_target!(|data: &[u8]| {
    if let Ok(msg) = HostToNic::decode(data) {
        assert!(data.len() <= HOST_TO_NIC_BYTES_MAX);
        assert_eq!(msg.encoded_len(), data.len());
        let mut out = Vec::new();
        msg.encode(&mut out);
        assert_eq!(out, data);
    }
});
