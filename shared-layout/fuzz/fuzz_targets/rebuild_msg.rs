//! `RebuildMsg::decode` (NIC-restart rebuild messages) on arbitrary bytes:
//! never panic; a message that decodes re-encodes to exactly its bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use splitkv_layout::wire::RebuildMsg;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = RebuildMsg::decode(data) {
        let mut out = Vec::new();
        m.encode(&mut out)
            .expect("a decoded message is within bounds");
        assert_eq!(&out[..], data);
    }
});
