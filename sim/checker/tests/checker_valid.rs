//! Histories the checker must accept (serial, concurrent and non-conflicting,
//! with indeterminate transactions that committed and that did not), and
//! malformed histories it must refuse with a typed error.

mod checker_support;

use checker_support::{a, assert_found, r, rr, w, Builder};
use splitkv_check::checker::{check, CheckError, CheckOptions, HistoryOutcome, Model};
use splitkv_check::history::{History, Op, OpType};

#[test]
fn serial_list_append_history_is_valid() {
    let mut b = Builder::default();
    b.ok(0, 10, vec![r(1, &[]), a(1, 1)])
        .ok(20, 30, vec![r(1, &[1]), a(1, 2), r(1, &[1, 2])])
        .ok(40, 50, vec![a(2, 3), r(1, &[1, 2])])
        .ok(60, 70, vec![r(2, &[3]), r(1, &[1, 2])]);
    let rep = b.check();
    assert_found(&rep, &[]);
    assert_eq!(rep.stats.txns[&HistoryOutcome::Committed], 4);
    assert!(
        rep.stats.edges.values().sum::<usize>() > 0,
        "edges were inferred: {rep}"
    );
}

#[test]
fn empty_and_read_only_histories_are_valid() {
    assert_found(&Builder::default().check(), &[]);
    let mut b = Builder::default();
    b.ok(0, 10, vec![r(1, &[])])
        .ok(5, 20, vec![r(1, &[]), r(2, &[])]);
    assert_found(&b.check(), &[]);
}

#[test]
fn concurrent_non_conflicting_history_is_valid() {
    let mut b = Builder::default();
    for k in 0..8 {
        b.ok(k, 100 + k, vec![a(k, 1), r(k, &[1])]);
    }
    assert_found(&b.check(), &[]);
}

#[test]
fn indeterminate_that_committed_is_accepted() {
    let mut b = Builder::default();
    b.txn(0, Some(10), OpType::Info, vec![a(1, 1)])
        .ok(20, 30, vec![r(1, &[1]), a(1, 2)])
        .ok(40, 50, vec![r(1, &[1, 2])]);
    let rep = b.check();
    assert_found(&rep, &[]);
    assert_eq!(rep.stats.indeterminate_committed, 1);
}

#[test]
fn indeterminate_that_never_appeared_is_accepted() {
    let mut b = Builder::default();
    b.txn(0, Some(10), OpType::Info, vec![a(1, 1)])
        .txn(0, None, OpType::Info, vec![a(1, 2)])
        .ok(20, 30, vec![r(1, &[]), a(1, 3)])
        .ok(40, 50, vec![r(1, &[3])]);
    let rep = b.check();
    assert_found(&rep, &[]);
    assert_eq!(rep.stats.txns[&HistoryOutcome::Indeterminate], 2);
    assert_eq!(rep.stats.indeterminate_committed, 0);
}

/// An indeterminate write seen only after later writes committed: it
/// committed late, which the checker must allow (no real-time edge out of it).
#[test]
fn indeterminate_committing_late_is_accepted() {
    let mut b = Builder::default();
    b.txn(0, Some(10), OpType::Info, vec![a(1, 1)])
        .ok(20, 30, vec![a(1, 2)])
        .ok(40, 50, vec![r(1, &[2, 1])]);
    assert_found(&b.check(), &[]);
}

#[test]
fn failed_writes_never_read_are_accepted() {
    let mut b = Builder::default();
    b.txn(0, Some(10), OpType::Fail, vec![w(1, 1)])
        .ok(20, 30, vec![rr(1, None), w(1, 2)])
        .ok(40, 50, vec![rr(1, Some(2)), w(1, 3)])
        .ok(60, 70, vec![rr(1, Some(3))]);
    let rep = b.check();
    assert_found(&rep, &[]);
    assert_eq!(rep.stats.model, Model::Register);
}

fn op(process: u64, kind: OpType, value: Vec<splitkv_check::history::MicroOp>, time_ns: u64) -> Op {
    Op {
        index: 0,
        process,
        kind,
        value,
        time_ns,
        error: None,
    }
}

fn history(ops: Vec<Op>) -> History {
    let mut h = History::new();
    ops.into_iter().for_each(|o| {
        h.push(o);
    });
    h
}

#[test]
fn malformed_histories_are_typed_errors() {
    let opts = CheckOptions::default();
    let h = history(vec![op(1, OpType::Ok, vec![a(1, 1)], 5)]);
    assert!(matches!(
        check(&h, &opts),
        Err(CheckError::CompletionWithoutInvoke {
            index: 0,
            process: 1,
            ..
        })
    ));
    let h = history(vec![
        op(1, OpType::Invoke, vec![a(1, 1)], 5),
        op(1, OpType::Invoke, vec![a(1, 2)], 6),
    ]);
    assert!(matches!(
        check(&h, &opts),
        Err(CheckError::InvokeWhileOutstanding {
            index: 1,
            outstanding: 0,
            ..
        })
    ));
    let h = history(vec![
        op(1, OpType::Invoke, vec![a(1, 1)], 5),
        op(1, OpType::Ok, vec![a(1, 2)], 6),
    ]);
    assert!(matches!(
        check(&h, &opts),
        Err(CheckError::CompletionMismatch { .. })
    ));
    let h = history(vec![
        op(1, OpType::Invoke, vec![a(1, 1), r(1, &[])], 5),
        op(1, OpType::Ok, vec![a(1, 1)], 6),
    ]);
    assert!(matches!(
        check(&h, &opts),
        Err(CheckError::CompletionMismatch { .. })
    ));
    let h = history(vec![
        op(1, OpType::Invoke, vec![a(1, 1)], 9),
        op(1, OpType::Ok, vec![a(1, 1)], 6),
    ]);
    assert!(matches!(
        check(&h, &opts),
        Err(CheckError::TimeBackwards { .. })
    ));
    let h = history(vec![
        op(1, OpType::Invoke, vec![a(1, 1)], 1),
        op(1, OpType::Ok, vec![a(1, 1)], 2),
        op(2, OpType::Invoke, vec![a(1, 1)], 3),
        op(2, OpType::Ok, vec![a(1, 1)], 4),
    ]);
    assert!(matches!(
        check(&h, &opts),
        Err(CheckError::NotUnique {
            key: 1,
            value: 1,
            ..
        })
    ));
    let h = history(vec![
        op(1, OpType::Invoke, vec![a(1, 1), w(2, 1)], 1),
        op(1, OpType::Ok, vec![a(1, 1), w(2, 1)], 2),
    ]);
    assert!(matches!(
        check(&h, &opts),
        Err(CheckError::WrongModel { .. })
    ));
}
