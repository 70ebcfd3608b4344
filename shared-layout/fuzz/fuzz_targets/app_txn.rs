//! `app::Txn::decode` (the one-shot transaction inside a request) on
//! arbitrary bytes: never panics; whatever decodes is within every bound
//! (read set, write set of both branches, gets per branch) and re-encodes,
//! from its compares and operations, to exactly the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use splitkv_layout::app::{Branch, Compare, Op, Txn, TXN_BRANCH_GETS_MAX, TXN_BYTES_MAX};

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = Txn::decode(data) {
        assert!(data.len() <= TXN_BYTES_MAX);
        let compares: Vec<Compare> = t.compares().collect();
        let success: Vec<Op> = t.ops(Branch::Success).collect();
        let failure: Vec<Op> = t.ops(Branch::Failure).collect();
        assert_eq!(compares.len(), t.compare_count());
        assert_eq!(success.len(), t.op_count(Branch::Success));
        assert_eq!(failure.len(), t.op_count(Branch::Failure));
        assert!(t.get_count(Branch::Success) <= TXN_BRANCH_GETS_MAX);
        assert!(t.get_count(Branch::Failure) <= TXN_BRANCH_GETS_MAX);
        let mut out = Vec::new();
        Txn::encode(&compares, &success, &failure, &mut out)
            .expect("a decoded txn is within bounds");
        assert_eq!(out, data);
    }
});
