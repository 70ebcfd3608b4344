//! Tests of the one-shot transaction ([`Txn`]) and its result ([`TxnResult`]):
//! the encoder and decoder against an independent model of the bounds, round
//! trips, arbitrary and mutated bytes, and one test per rejection.

mod app_support;

use app_support::*;
use proptest::prelude::*;
use splitkv_layout::app::*;
use splitkv_layout::{DecodeError, Key, VALUE_BYTES_MAX, VERSION_MAX};

fn k(id: u64) -> Key {
    Key::new(0, id)
}

fn txn(compares: Vec<(Key, CondOwned)>, success: Vec<OpOwned>, failure: Vec<OpOwned>) -> TxnOwned {
    TxnOwned {
        compares,
        success,
        failure,
    }
}

fn too_large(r: Result<Vec<u8>, AppEncodeError>) -> &'static str {
    match r {
        Err(AppEncodeError::Invalid(DecodeError::TooLarge { what, .. })) => what,
        other => panic!("expected TooLarge, got {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The encoder accepts exactly what the model calls valid, and what it
    /// writes decodes to the same transaction.
    #[test]
    fn txn_encode_agrees_with_model_and_round_trips(t in txn_any()) {
        match t.encode() {
            Ok(bytes) => {
                prop_assert!(t.model_valid(), "encoder accepted an invalid txn");
                prop_assert_eq!(bytes.len(), t.model_len());
                let d = Txn::decode(&bytes).unwrap();
                prop_assert_eq!(d.as_bytes(), &bytes[..]);
                prop_assert_eq!(TxnOwned::from_txn(&d), t.clone());
                prop_assert_eq!(d.compare_count(), t.compares.len());
                prop_assert_eq!(d.op_count(Branch::Success), t.success.len());
                prop_assert_eq!(d.op_count(Branch::Failure), t.failure.len());
            }
            Err(e) => {
                prop_assert!(!t.model_valid(), "encoder refused a valid txn: {e}");
            }
        }
    }

    /// Any mutation of a valid encoding decodes to a valid transaction whose
    /// canonical encoding is the mutated bytes, or fails.
    #[test]
    fn txn_mutations_decode_valid_or_fail(
        t in txn_valid(), kind in any::<u8>(), at in any::<usize>(), value in any::<u8>(),
    ) {
        let bytes = t.encode().unwrap();
        let m = mutate(&bytes, kind, at, value);
        if let Ok(d) = Txn::decode(&m) {
            let owned = TxnOwned::from_txn(&d);
            prop_assert!(owned.model_valid());
            prop_assert_eq!(owned.encode().unwrap(), m);
        }
    }

    #[test]
    fn txn_decode_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(d) = Txn::decode(&bytes) {
            prop_assert_eq!(TxnOwned::from_txn(&d).encode().unwrap(), bytes);
        }
    }

    #[test]
    fn result_round_trips(
        failure in any::<bool>(),
        gets in prop::collection::vec(get_result(), 0..=TXN_BRANCH_GETS_MAX),
    ) {
        let branch = if failure { Branch::Failure } else { Branch::Success };
        let mut out = Vec::new();
        TxnResult::encode(branch, &borrow_gets(&gets), &mut out).unwrap();
        prop_assert!(out.len() <= TXN_RESULT_BYTES_MAX);
        let r = TxnResult::decode(&out).unwrap();
        prop_assert_eq!(r.branch(), branch);
        prop_assert_eq!(r.gets().collect::<Vec<_>>(), borrow_gets(&gets));
        prop_assert_eq!(r.as_bytes(), &out[..]);
    }

    #[test]
    fn result_mutations_decode_valid_or_fail(
        gets in prop::collection::vec(get_result(), 0..4),
        kind in any::<u8>(), at in any::<usize>(), value in any::<u8>(),
    ) {
        let mut out = Vec::new();
        TxnResult::encode(Branch::Success, &borrow_gets(&gets), &mut out).unwrap();
        let m = mutate(&out, kind, at, value);
        if let Ok(r) = TxnResult::decode(&m) {
            let again: Vec<GetResult> = r.gets().collect();
            prop_assert_eq!(again.len(), r.get_count());
            let mut re = Vec::new();
            TxnResult::encode(r.branch(), &again, &mut re).unwrap();
            prop_assert_eq!(re, m);
        }
    }

    #[test]
    fn result_decode_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = TxnResult::decode(&bytes);
    }
}

#[test]
fn layout_matches_the_table() {
    let t = txn(
        vec![(k(1), CondOwned::Version(CmpOp::Greater, 3))],
        vec![OpOwned::Put(k(1), b"v".to_vec())],
        vec![OpOwned::Get(k(2))],
    );
    let expected = Raw::default()
        .u8(1)
        .u8(1)
        .u8(1)
        .key(k(1))
        .u8(1) // version target
        .u8(3) // greater
        .u64(3)
        .u8(2) // put
        .key(k(1))
        .u32(1)
        .bytes(b"v")
        .u8(1) // get
        .key(k(2));
    assert_eq!(t.encode().unwrap(), expected.0);
}

#[test]
fn exactly_at_every_bound_is_accepted() {
    // 16 written keys (put in success, deleted in failure), 16 other keys
    // read, 16 gets in each branch, 32 compares.
    let writes: Vec<Key> = (0..16).map(k).collect();
    let reads: Vec<Key> = (16..32).map(k).collect();
    let mut success: Vec<OpOwned> = writes
        .iter()
        .map(|&w| OpOwned::Put(w, vec![1; 8]))
        .collect();
    success.extend(reads.iter().map(|&r| OpOwned::Get(r)));
    let mut failure: Vec<OpOwned> = writes.iter().map(|&w| OpOwned::Delete(w)).collect();
    failure.extend(reads.iter().map(|&r| OpOwned::Get(r)));
    let compares = writes
        .iter()
        .chain(&reads)
        .map(|&key| (key, CondOwned::Present))
        .collect();
    let t = txn(compares, success, failure);
    assert!(t.model_valid());
    let bytes = t.encode().unwrap();
    let d = Txn::decode(&bytes).unwrap();
    assert_eq!(d.get_count(Branch::Success), 16);
    assert_eq!(d.compare_count(), TXN_COMPARES_MAX);
}

#[test]
fn write_union_over_bound_is_refused() {
    // 9 keys written in one branch, 8 others in the other: 17 together.
    let t = txn(
        vec![],
        (0..9).map(|i| OpOwned::Delete(k(i))).collect(),
        (9..17).map(|i| OpOwned::Put(k(i), vec![])).collect(),
    );
    assert!(too_large(t.encode()).contains("write set"));
    // The same keys in both branches count once.
    let t = txn(
        vec![],
        (0..16).map(|i| OpOwned::Delete(k(i))).collect(),
        (0..16).map(|i| OpOwned::Put(k(i), vec![])).collect(),
    );
    assert!(t.encode().is_ok());
}

#[test]
fn read_set_over_bound_is_refused() {
    // 17 compared keys, none written.
    let t = txn(
        (0..17).map(|i| (k(i), CondOwned::Absent)).collect(),
        vec![],
        vec![],
    );
    assert!(too_large(t.encode()).contains("read set"));
    // Compares on written keys are not in the read set.
    let t = txn(
        (0..17).map(|i| (k(i), CondOwned::Absent)).collect(),
        vec![OpOwned::Put(k(0), vec![])],
        vec![],
    );
    assert!(t.encode().is_ok());
    // Gets of the two branches count together.
    let t = txn(
        vec![],
        (0..9).map(|i| OpOwned::Get(k(i))).collect(),
        (9..17).map(|i| OpOwned::Get(k(i))).collect(),
    );
    assert!(too_large(t.encode()).contains("read set"));
}

#[test]
fn gets_per_branch_over_bound_are_refused() {
    let t = txn(
        vec![],
        (0..17)
            .map(|i| OpOwned::Get(k(i % 16 + 100 * (i / 16))))
            .collect(),
        vec![],
    );
    // 17 gets: the read set is also 17, the per-branch check comes first.
    assert!(too_large(t.encode()).contains("success branch"));
}

#[test]
fn counts_over_bound_are_refused() {
    let t = txn(
        (0..33).map(|_| (k(0), CondOwned::Present)).collect(),
        vec![],
        vec![],
    );
    assert_eq!(too_large(t.encode()), "Txn compares");
    let bytes = Raw::default().u8(33).u8(0).u8(0).0;
    assert!(matches!(
        Txn::decode(&bytes),
        Err(DecodeError::TooLarge {
            what: "Txn compares",
            ..
        })
    ));
    let bytes = Raw::default().u8(0).u8(0).u8(33).0;
    assert!(matches!(
        Txn::decode(&bytes),
        Err(DecodeError::TooLarge {
            what: "Txn failure ops",
            ..
        })
    ));
}

#[test]
fn a_key_twice_in_a_branch_is_refused() {
    let t = txn(
        vec![],
        vec![OpOwned::Get(k(1)), OpOwned::Put(k(1), vec![])],
        vec![],
    );
    assert!(matches!(
        t.encode(),
        Err(AppEncodeError::Invalid(DecodeError::Inconsistent { .. }))
    ));
}

#[test]
fn values_and_versions_over_bound_are_refused() {
    let big = vec![0u8; VALUE_BYTES_MAX + 1];
    let t = txn(vec![], vec![OpOwned::Put(k(1), big.clone())], vec![]);
    assert_eq!(too_large(t.encode()), "Txn put value");
    let t = txn(
        vec![(k(1), CondOwned::Value(CmpOp::Equal, big))],
        vec![],
        vec![],
    );
    assert_eq!(too_large(t.encode()), "Txn compare value");
    let t = txn(
        vec![(k(1), CondOwned::Version(CmpOp::Less, VERSION_MAX + 1))],
        vec![],
        vec![],
    );
    assert_eq!(too_large(t.encode()), "Txn compare version");
    // A length field over the bound is refused before the bytes are read.
    let bytes = Raw::default()
        .u8(0)
        .u8(1)
        .u8(0)
        .u8(2)
        .key(k(1))
        .u32(u32::MAX)
        .0;
    assert!(matches!(
        Txn::decode(&bytes),
        Err(DecodeError::TooLarge {
            what: "Txn put value",
            ..
        })
    ));
}

#[test]
fn encoding_over_txn_bytes_max_is_refused() {
    // 16 puts and 16 compares of 4 KiB each: 128 KiB of values.
    let t = txn(
        (0..16)
            .map(|i| {
                (
                    k(i),
                    CondOwned::Value(CmpOp::Equal, vec![0; VALUE_BYTES_MAX]),
                )
            })
            .collect(),
        (0..16)
            .map(|i| OpOwned::Put(k(i), vec![0; VALUE_BYTES_MAX]))
            .collect(),
        vec![],
    );
    assert_eq!(too_large(t.encode()), "Txn encoding");
    let long = vec![0u8; TXN_BYTES_MAX + 1];
    assert!(matches!(
        Txn::decode(&long),
        Err(DecodeError::TooLarge {
            what: "Txn encoding",
            ..
        })
    ));
}

#[test]
fn bad_tags_and_contradictions_are_refused() {
    let compare = |target: u8, op: u8| {
        Raw::default()
            .u8(1)
            .u8(0)
            .u8(0)
            .key(k(1))
            .u8(target)
            .u8(op)
            .u64(0)
            .0
    };
    assert!(matches!(
        Txn::decode(&compare(3, 0)),
        Err(DecodeError::BadTag {
            what: "Txn compare target",
            ..
        })
    ));
    assert!(matches!(
        Txn::decode(&compare(1, 6)),
        Err(DecodeError::BadTag {
            what: "Txn compare operator",
            ..
        })
    ));
    // Version target with an existence operator, existence with an order.
    assert!(matches!(
        Txn::decode(&compare(1, 4)),
        Err(DecodeError::Inconsistent { .. })
    ));
    let existence = Raw::default().u8(1).u8(0).u8(0).key(k(1)).u8(2).u8(0).0;
    assert!(matches!(
        Txn::decode(&existence),
        Err(DecodeError::Inconsistent { .. })
    ));
    let op = Raw::default().u8(0).u8(1).u8(0).u8(4).key(k(1)).0;
    assert!(matches!(
        Txn::decode(&op),
        Err(DecodeError::BadTag {
            what: "Txn operation kind",
            ..
        })
    ));
    let op = Raw::default().u8(0).u8(1).u8(0).u8(0).key(k(1)).0;
    assert!(matches!(Txn::decode(&op), Err(DecodeError::BadTag { .. })));
}

#[test]
fn trailing_and_missing_bytes_are_refused() {
    let t = txn(
        vec![(k(1), CondOwned::Present)],
        vec![OpOwned::Get(k(1))],
        vec![],
    );
    let mut bytes = t.encode().unwrap();
    bytes.push(0);
    assert!(matches!(
        Txn::decode(&bytes),
        Err(DecodeError::Inconsistent {
            detail: "trailing bytes",
            ..
        })
    ));
    bytes.truncate(bytes.len() - 2);
    assert!(matches!(
        Txn::decode(&bytes),
        Err(DecodeError::Truncated { .. })
    ));
    assert!(matches!(
        Txn::decode(&[]),
        Err(DecodeError::Truncated { .. })
    ));
}

#[test]
fn result_rejections() {
    let bad_branch = Raw::default().u8(2).u8(0).0;
    assert!(matches!(
        TxnResult::decode(&bad_branch),
        Err(DecodeError::BadTag {
            what: "TxnResult branch",
            ..
        })
    ));
    let not_found_with_version = Raw::default().u8(0).u8(1).u8(0).u64(5).u32(0).0;
    assert!(matches!(
        TxnResult::decode(&not_found_with_version),
        Err(DecodeError::Inconsistent { .. })
    ));
    let bad_flag = Raw::default().u8(0).u8(1).u8(2).u64(0).u32(0).0;
    assert!(matches!(
        TxnResult::decode(&bad_flag),
        Err(DecodeError::BadTag { .. })
    ));
    let too_many = Raw::default().u8(0).u8(17).0;
    assert!(matches!(
        TxnResult::decode(&too_many),
        Err(DecodeError::TooLarge { .. })
    ));
    let gets = vec![GetResult::NotFound; TXN_BRANCH_GETS_MAX + 1];
    assert!(TxnResult::encode(Branch::Success, &gets, &mut Vec::new()).is_err());
    let big = vec![0u8; VALUE_BYTES_MAX + 1];
    let found = [GetResult::Found {
        version: 1,
        value: &big,
    }];
    let mut out = vec![7];
    assert!(TxnResult::encode(Branch::Success, &found, &mut out).is_err());
    assert_eq!(out, [7], "nothing appended on error");
}

#[test]
fn result_checks_against_its_txn() {
    let t = txn(
        vec![(k(1), CondOwned::Present)],
        vec![OpOwned::Get(k(1)), OpOwned::Get(k(2))],
        vec![OpOwned::Put(k(1), vec![])],
    );
    let bytes = t.encode().unwrap();
    let d = Txn::decode(&bytes).unwrap();
    let mut out = Vec::new();
    let two = [GetResult::NotFound, GetResult::NotFound];
    TxnResult::encode(Branch::Success, &two, &mut out).unwrap();
    assert!(TxnResult::decode(&out).unwrap().check_against(&d).is_ok());
    out.clear();
    TxnResult::encode(Branch::Failure, &two, &mut out).unwrap();
    assert!(TxnResult::decode(&out).unwrap().check_against(&d).is_err());
    out.clear();
    TxnResult::encode(Branch::Failure, &[], &mut out).unwrap();
    assert!(TxnResult::decode(&out).unwrap().check_against(&d).is_ok());
}

#[test]
fn cmp_op_holds() {
    assert!(CmpOp::Less.holds(&b"ab"[..], &b"b"[..]));
    assert!(CmpOp::Greater.holds(&3u64, &2));
    assert!(CmpOp::NotEqual.holds(&b""[..], &b"\0"[..]));
    assert!(!CmpOp::Equal.holds(&1u64, &2));
}
