use super::*;
use crate::history::{Op, ReadValue};

fn op(process: u64, kind: OpType, value: Vec<MicroOp>) -> Op {
    Op {
        index: 0,
        process,
        kind,
        value,
        time_ns: 0,
        error: None,
    }
}

fn append(key: u64, element: u64) -> MicroOp {
    MicroOp::Append { key, element }
}

/// p1 commits appends 10 and 11 to key 1, p2 fails appending 20 to key 2, p3
/// appends 30 to key 2 and never learns the outcome.
fn list_history() -> History {
    let mut h = History::new();
    let t1 = vec![append(1, 10), append(1, 11)];
    h.push(op(1, OpType::Invoke, t1.clone()));
    h.push(op(2, OpType::Invoke, vec![append(2, 20)]));
    h.push(op(1, OpType::Ok, t1));
    h.push(op(2, OpType::Fail, vec![append(2, 20)]));
    h.push(op(3, OpType::Invoke, vec![append(2, 30)]));
    h
}

fn list_row(version: u64, l: &[u64]) -> FinalRow {
    FinalRow {
        version,
        value: FinalValue::List(l.to_vec()),
    }
}

fn initial() -> BTreeMap<u64, u64> {
    [(1, 1), (2, 1), (3, 1)].into_iter().collect()
}

#[test]
fn a_consistent_list_state_passes_with_or_without_the_indeterminate_append() {
    let h = list_history();
    for (v2, l2) in [(1, vec![]), (2, vec![30])] {
        let rows = [
            (1, list_row(2, &[10, 11])),
            (2, list_row(v2, &l2)),
            (3, list_row(1, &[])),
        ];
        let r = check(&h, &initial(), &rows.into_iter().collect()).unwrap();
        assert_eq!((r.committed, r.failed, r.indeterminate), (1, 1, 1));
        assert_eq!(r.keys_checked, 3);
        assert_eq!(
            r.committed_key_writes, 1,
            "two appends to one key: one write"
        );
        assert_eq!(r.values_checked, 2 + l2.len() as u64);
    }
}

fn violations(rows: Vec<(u64, FinalRow)>) -> Vec<Violation> {
    check(&list_history(), &initial(), &rows.into_iter().collect())
        .unwrap_err()
        .violations
}

#[test]
fn lost_aborted_phantom_and_version_errors_name_key_and_tx() {
    let ok = |i| TxRef {
        process: 1,
        index: i,
    };
    let v = violations(vec![
        (1, list_row(2, &[10])),
        (2, list_row(1, &[])),
        (3, list_row(1, &[])),
    ]);
    assert_eq!(
        v,
        [Violation::LostAppend {
            key: 1,
            element: 11,
            tx: ok(2)
        }]
    );
    let v = violations(vec![
        (1, list_row(2, &[10, 11])),
        (2, list_row(2, &[20])),
        (3, list_row(1, &[])),
    ]);
    assert_eq!(
        v,
        [Violation::AbortedWriteVisible {
            key: 2,
            value: 20,
            tx: TxRef {
                process: 2,
                index: 3
            }
        }]
    );
    let v = violations(vec![
        (1, list_row(2, &[10, 11, 99])),
        (2, list_row(1, &[])),
        (3, list_row(1, &[])),
    ]);
    assert_eq!(v, [Violation::Phantom { key: 1, value: 99 }]);
    let v = violations(vec![
        (1, list_row(3, &[10, 11])),
        (2, list_row(1, &[])),
        (3, list_row(1, &[])),
    ]);
    assert!(matches!(
        v[..],
        [Violation::Version {
            key: 1,
            actual: 3,
            committed: 1,
            ..
        }]
    ));
    let v = violations(vec![
        (1, list_row(2, &[10, 11])),
        (2, list_row(3, &[])),
        (3, list_row(1, &[])),
    ]);
    assert!(matches!(
        v[..],
        [Violation::Version {
            key: 2,
            indeterminate: 1,
            ..
        }]
    ));
    let v = violations(vec![(1, list_row(2, &[10, 11])), (2, list_row(1, &[]))]);
    assert_eq!(v, [Violation::MissingKey { key: 3 }]);
    let v = violations(vec![
        (1, list_row(2, &[10, 11])),
        (2, list_row(1, &[])),
        (3, list_row(1, &[10])),
    ]);
    assert!(v.contains(&Violation::Duplicate {
        key: 3,
        element: 10
    }));
}

#[test]
fn registers_accept_committed_or_indeterminate_values_only() {
    let mut h = History::new();
    let read = MicroOp::Read {
        key: 1,
        value: Some(ReadValue::Register(5)),
    };
    h.push(op(1, OpType::Ok, vec![MicroOp::Write { key: 1, value: 5 }]));
    h.push(op(
        2,
        OpType::Fail,
        vec![MicroOp::Write { key: 2, value: 6 }],
    ));
    h.push(op(
        3,
        OpType::Info,
        vec![MicroOp::Write { key: 2, value: 7 }, read],
    ));
    let reg = |version, v| FinalRow {
        version,
        value: FinalValue::Register(v),
    };
    let init: BTreeMap<u64, u64> = [(1, 1), (2, 1)].into_iter().collect();
    let run = |r1, r2| check(&h, &init, &[(1, r1), (2, r2)].into_iter().collect());
    assert!(run(reg(2, Some(5)), reg(1, None)).is_ok());
    assert!(run(reg(2, Some(5)), reg(2, Some(7))).is_ok());
    let e = run(reg(2, Some(5)), reg(2, Some(6))).unwrap_err();
    assert!(matches!(
        e.violations[0],
        Violation::AbortedWriteVisible {
            key: 2,
            value: 6,
            ..
        }
    ));
    let e = run(reg(2, None), reg(1, None)).unwrap_err();
    assert_eq!(
        e.violations,
        [Violation::LostWrite {
            key: 1,
            tx: TxRef {
                process: 1,
                index: 0
            }
        }]
    );
    let e = run(reg(2, Some(8)), reg(1, None)).unwrap_err();
    assert_eq!(e.violations, [Violation::Phantom { key: 1, value: 8 }]);
    assert!(e.to_string().contains("never written"), "{e}");
}

#[test]
fn fault_free_counters_must_be_zero() {
    let quiet = NodeCounters {
        node: 0,
        ..NodeCounters::default()
    };
    assert!(check_fault_free_counters(&[quiet]).is_ok());
    let noisy = NodeCounters {
        node: 2,
        stale_records: 3,
        bad_packets: 1,
        ..quiet
    };
    let e = check_fault_free_counters(&[quiet, noisy]).unwrap_err();
    assert_eq!(e.total, 2);
    assert_eq!(
        e.violations[0],
        Violation::Counter {
            node: 2,
            counter: "host worker stale records",
            value: 3
        }
    );
}
