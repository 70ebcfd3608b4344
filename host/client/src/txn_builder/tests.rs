//! The builder against the format's decoder: what it encodes decodes to the
//! same compares and operations, and its own checks refuse exactly what the
//! decoder refuses, each with its typed error.

use super::*;
use proptest::prelude::*;
use splitkv_layout::app::txn::{TXN_BYTES_MAX, TXN_COMPARES_MAX};

fn k(id: u64) -> Key {
    Key::new(1, id)
}

/// A transaction and a test of the error it must get.
type Case = (Txn, fn(&TxnError) -> bool);

// The last case below is over the encoding bound.
const _: () = assert!((TXN_WRITES_MAX + 1) * VALUE_BYTES_MAX > TXN_BYTES_MAX);

#[test]
fn each_bound_has_its_error() {
    let max = VALUE_BYTES_MAX;
    let many = |n: u64| (0..n).map(k);
    let cases: Vec<Case> = vec![
        (
            Txn::new().when(many(TXN_COMPARES_MAX as u64 + 1).map(Cmp::present)),
            |e| matches!(e, TxnError::TooManyCompares { .. }),
        ),
        (
            Txn::new().otherwise(many(TXN_BRANCH_OPS_MAX as u64 + 1).map(TxnOp::get)),
            |e| {
                matches!(
                    e,
                    TxnError::TooManyOps {
                        branch: Branch::Failure,
                        ..
                    }
                )
            },
        ),
        (
            Txn::new().then(many(TXN_BRANCH_GETS_MAX as u64 + 1).map(TxnOp::get)),
            |e| matches!(e, TxnError::TooManyGets { .. }),
        ),
        (
            Txn::new().then([TxnOp::get(k(1)), TxnOp::put(k(1), *b"x")]),
            |e| matches!(e, TxnError::KeyTwiceInBranch { .. }),
        ),
        (
            // Half the writes in each branch: the union is over the bound.
            Txn::new()
                .then(many(TXN_WRITES_MAX as u64).map(TxnOp::delete))
                .otherwise((100..101).map(k).map(TxnOp::delete)),
            |e| matches!(e, TxnError::WriteSetTooLarge { count, .. } if *count == TXN_WRITES_MAX + 1),
        ),
        (
            Txn::new().when(many(TXN_READS_MAX as u64 + 1).map(Cmp::absent)),
            |e| matches!(e, TxnError::ReadSetTooLarge { .. }),
        ),
        (
            Txn::new().when([Cmp::value_eq(k(1), vec![0; max + 1])]),
            |e| matches!(e, TxnError::ValueTooLarge { .. }),
        ),
        (
            Txn::new().when([Cmp::version_eq(k(1), VERSION_MAX + 1)]),
            |e| matches!(e, TxnError::VersionTooLarge { .. }),
        ),
        (
            // Every bound per item holds, but the encoding is over
            // TXN_BYTES_MAX.
            Txn::new()
                .when([Cmp::value_eq(k(0), vec![2; max])])
                .then(many(TXN_WRITES_MAX as u64).map(|key| TxnOp::put(key, vec![1; max]))),
            |e| matches!(e, TxnError::Invalid(_)),
        ),
    ];
    for (i, (txn, expected)) in cases.into_iter().enumerate() {
        let err = txn.check(max).unwrap_err();
        assert!(expected(&err), "case {i}: {err:?}");
        let mut out = vec![9];
        assert_eq!(txn.encode(max, &mut out), Err(err));
        assert_eq!(out, vec![9], "nothing appended");
    }
}

#[test]
fn the_node_value_bound_is_the_callers() {
    let txn = Txn::new().then([TxnOp::put(k(1), vec![0; 101])]);
    assert_eq!(
        txn.check(100),
        Err(TxnError::ValueTooLarge { len: 101, max: 100 })
    );
    assert!(txn.check(101).is_ok());
    // Never above the format's bound, whatever the caller says.
    let huge = Txn::new().then([TxnOp::put(k(1), vec![0; VALUE_BYTES_MAX + 1])]);
    assert!(matches!(
        huge.check(usize::MAX),
        Err(TxnError::ValueTooLarge { .. })
    ));
}

fn cmp_op() -> impl Strategy<Value = CmpOp> {
    prop::sample::select(CmpOp::ALL.to_vec())
}

fn cmp(keys: u64) -> impl Strategy<Value = Cmp> {
    let key = (0..keys).prop_map(k);
    prop_oneof![
        (
            key.clone(),
            cmp_op(),
            prop::collection::vec(any::<u8>(), 0..8)
        )
            .prop_map(|(k, op, v)| Cmp::value(k, op, v)),
        (key.clone(), cmp_op(), 0..1000u64).prop_map(|(k, op, v)| Cmp::version(k, op, v)),
        key.clone().prop_map(Cmp::present),
        key.prop_map(Cmp::absent),
    ]
}

/// One branch: distinct keys of `0..keys` in order, each with a random
/// operation, and now and then a key named a second time.
fn branch(keys: u64) -> impl Strategy<Value = Vec<TxnOp>> {
    let all: Vec<u64> = (0..keys).collect();
    let n = TXN_BRANCH_OPS_MAX.min(keys as usize);
    (
        prop::sample::subsequence(all, 0..=n),
        prop::collection::vec((0u8..3, prop::collection::vec(any::<u8>(), 0..8)), n),
        prop::bool::weighted(0.1),
    )
        .prop_map(|(ids, kinds, twice)| {
            let mut ops: Vec<TxnOp> = ids
                .into_iter()
                .zip(kinds)
                .map(|(id, (kind, v))| match kind {
                    0 => TxnOp::get(k(id)),
                    1 => TxnOp::put(k(id), v),
                    _ => TxnOp::delete(k(id)),
                })
                .collect();
            if let (true, Some(first)) = (twice, ops.first()) {
                ops.push(TxnOp::get(first.key()));
            }
            ops
        })
}

/// Transactions around the bounds: key spaces small enough to share keys
/// between compares and branches and large enough to overflow the read and
/// write sets and the gets of a branch.
fn txn() -> impl Strategy<Value = Txn> {
    (4u64..48).prop_flat_map(|keys| {
        (
            prop::collection::vec(cmp(keys), 0..(TXN_COMPARES_MAX + 2)),
            branch(keys),
            branch(keys),
        )
            .prop_map(|(c, s, f)| Txn::new().when(c).then(s).otherwise(f))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The builder's checks accept exactly what the format's decoder accepts
    /// (small values: the encoding-size bound is never reached), and an
    /// accepted transaction decodes to the same compares and operations.
    #[test]
    fn builder_and_decoder_agree(t in txn()) {
        let mut out = Vec::new();
        let built = t.encode(VALUE_BYTES_MAX, &mut out);
        let compares: Vec<Compare<'_>> = t.compares().iter().map(Cmp::as_compare).collect();
        let success: Vec<Op<'_>> = t.ops(Branch::Success).iter().map(TxnOp::as_op).collect();
        let failure: Vec<Op<'_>> = t.ops(Branch::Failure).iter().map(TxnOp::as_op).collect();
        let mut reference = Vec::new();
        let format = TxnView::encode(&compares, &success, &failure, &mut reference);
        prop_assert_eq!(built.is_ok(), format.is_ok(), "{:?} vs {:?}", built, format);
        prop_assert!(!matches!(built, Err(TxnError::Invalid(_))), "{:?}", built);
        if built.is_ok() {
            prop_assert_eq!(&out, &reference);
            let view = TxnView::decode(&out).unwrap();
            prop_assert_eq!(view.compares().collect::<Vec<_>>(), compares);
            prop_assert_eq!(view.ops(Branch::Success).collect::<Vec<_>>(), success);
            prop_assert_eq!(view.ops(Branch::Failure).collect::<Vec<_>>(), failure);
            for b in [Branch::Success, Branch::Failure] {
                prop_assert_eq!(view.get_count(b), t.get_count(b));
            }
        } else {
            prop_assert!(out.is_empty());
        }
    }
}
