//! `app::Request::decode` (request ring entries from an untrusted client) on
//! arbitrary bytes: never panics; whatever decodes is within its bounds and
//! re-encodes to exactly the input (the encoding is canonical).
#![no_main]

use libfuzzer_sys::fuzz_target;
use splitkv_layout::app::{Request, REQUEST_BYTES_MAX};

fuzz_target!(|data: &[u8]| {
    if let Ok(req) = Request::decode(data) {
        assert!(data.len() <= REQUEST_BYTES_MAX);
        assert_eq!(req.encoded_len(), data.len());
        let mut out = Vec::new();
        req.encode(&mut out)
            .expect("a decoded request is within bounds");
        assert_eq!(out, data);
    }
});
