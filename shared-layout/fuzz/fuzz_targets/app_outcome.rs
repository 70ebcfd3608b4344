//! `app::Outcome::decode` (outcome ring entries) and the committed bodies it
//! carries (`GetValue`, `TxnResult`) on arbitrary bytes: never panic;
//! whatever decodes re-encodes to exactly the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use splitkv_layout::app::{GetResult, GetValue, Outcome, TxnResult, OUTCOME_BYTES_MAX};

fuzz_target!(|data: &[u8]| {
    if let Ok(o) = Outcome::decode(data) {
        assert!(data.len() <= OUTCOME_BYTES_MAX);
        let mut out = Vec::new();
        o.encode(&mut out)
            .expect("a decoded outcome is within bounds");
        assert_eq!(out, data);
    }
    if let Ok(g) = GetValue::decode(data) {
        let mut out = Vec::new();
        g.encode(&mut out)
            .expect("a decoded value is within bounds");
        assert_eq!(out, data);
    }
    if let Ok(r) = TxnResult::decode(data) {
        let gets: Vec<GetResult> = r.gets().collect();
        assert_eq!(gets.len(), r.get_count());
        let mut out = Vec::new();
        TxnResult::encode(r.branch(), &gets, &mut out).expect("a decoded result is within bounds");
        assert_eq!(out, data);
    }
});
