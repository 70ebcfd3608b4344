//! One hand-built history per anomaly the checker names (list-append and
//! register), each reported with the right name; the real-time ones are also
//! shown to be serializable (valid with real-time edges off).

mod checker_support;

use checker_support::{a, assert_found, r, rr, w, Builder};
use splitkv_check::checker::{AnomalyKind as K, EdgeKind};
use splitkv_check::history::OpType;

#[test]
fn g0_write_cycle() {
    let mut b = Builder::default();
    b.ok(0, 100, vec![a(1, 1), a(2, 1)])
        .ok(0, 100, vec![a(1, 2), a(2, 2)])
        .ok(0, 100, vec![r(1, &[1, 2]), r(2, &[2, 1])]);
    let rep = b.check();
    assert_found(&rep, &[K::G0]);
    let g0 = &rep.anomalies[0];
    assert_eq!(g0.txns.len(), 2);
    assert!(g0.steps.iter().all(|s| s.kind == EdgeKind::Ww), "{g0}");
    let text = g0.to_string();
    assert!(
        text.starts_with("G0:") && text.contains("-ww(1)->") && text.contains("-ww(2)->"),
        "{text}"
    );
}

#[test]
fn g1a_aborted_read() {
    let mut b = Builder::default();
    b.txn(0, Some(10), OpType::Fail, vec![a(1, 1)])
        .ok(20, 30, vec![r(1, &[1])]);
    assert_found(&b.check(), &[K::G1a]);
}

#[test]
fn g1b_intermediate_read() {
    let mut b = Builder::default();
    b.ok(0, 10, vec![a(1, 1), a(1, 2)])
        .ok(0, 30, vec![r(1, &[1])]);
    assert_found(&b.check(), &[K::G1b]);
}

#[test]
fn g1c_circular_information_flow() {
    let mut b = Builder::default();
    b.ok(0, 100, vec![a(1, 1), r(2, &[2])])
        .ok(0, 100, vec![a(2, 2), r(1, &[1])]);
    let rep = b.check();
    assert_found(&rep, &[K::G1c]);
    assert!(rep.anomalies[0]
        .steps
        .iter()
        .all(|s| s.kind == EdgeKind::Wr));
}

#[test]
fn g_single_read_skew() {
    let mut b = Builder::default();
    b.ok(0, 100, vec![a(1, 1), a(2, 1)])
        .ok(0, 100, vec![r(1, &[]), r(2, &[1])])
        .ok(0, 100, vec![r(1, &[1])]);
    let rep = b.check();
    assert_found(&rep, &[K::GSingle]);
    let kinds: Vec<_> = rep.anomalies[0].steps.iter().map(|s| s.kind).collect();
    assert_eq!(
        kinds.iter().filter(|&&k| k == EdgeKind::Rw).count(),
        1,
        "{kinds:?}"
    );
}

#[test]
fn g2_item_write_skew() {
    let mut b = Builder::default();
    b.ok(0, 100, vec![r(1, &[]), r(2, &[]), a(1, 1)])
        .ok(0, 100, vec![r(1, &[]), r(2, &[]), a(2, 2)])
        .ok(0, 100, vec![r(1, &[1]), r(2, &[2])]);
    assert_found(&b.check(), &[K::G2Item]);
}

#[test]
fn internal_inconsistency() {
    let mut b = Builder::default();
    b.ok(0, 10, vec![a(1, 1), r(1, &[])]);
    assert_found(&b.check(), &[K::Internal]);
    let mut b = Builder::default();
    b.ok(0, 10, vec![a(1, 5)])
        .ok(20, 30, vec![r(1, &[5]), a(1, 6), r(1, &[5])]);
    assert_found(&b.check(), &[K::Internal]);
}

#[test]
fn incompatible_order() {
    let mut b = Builder::default();
    b.ok(0, 100, vec![a(1, 1)])
        .ok(0, 100, vec![a(1, 2)])
        .ok(0, 100, vec![r(1, &[1, 2])])
        .ok(0, 100, vec![r(1, &[2, 1])]);
    assert_found(&b.check(), &[K::IncompatibleOrder]);
}

#[test]
fn duplicate_and_garbage_elements() {
    let mut b = Builder::default();
    b.ok(0, 10, vec![a(1, 1)]).ok(20, 30, vec![r(1, &[1, 1])]);
    assert_found(&b.check(), &[K::DuplicateElements]);
    let mut b = Builder::default();
    b.ok(0, 10, vec![r(1, &[7])]);
    assert_found(&b.check(), &[K::GarbageRead]);
}

/// A stale read: T1's append completed before T2 began, yet T2 read the
/// empty list. Serializable (T2 before T1), not strictly serializable.
#[test]
fn g_single_realtime_stale_read() {
    let mut b = Builder::default();
    b.ok(0, 10, vec![a(1, 1)])
        .ok(20, 30, vec![r(1, &[])])
        .ok(0, 100, vec![r(1, &[1])]);
    let rep = b.check();
    assert_found(&rep, &[K::GSingleRealtime]);
    let kinds: Vec<_> = rep.anomalies[0].steps.iter().map(|s| s.kind).collect();
    assert!(
        kinds.contains(&EdgeKind::Realtime) && kinds.contains(&EdgeKind::Rw),
        "{kinds:?}"
    );
    assert_found(&b.check_serializable(), &[]);
}

#[test]
fn g0_realtime_writes_ordered_against_real_time() {
    let mut b = Builder::default();
    b.ok(0, 10, vec![a(1, 1)])
        .ok(20, 30, vec![a(1, 2)])
        .ok(0, 100, vec![r(1, &[2, 1])]);
    assert_found(&b.check(), &[K::G0Realtime]);
    assert_found(&b.check_serializable(), &[]);
}

/// T1 completed before T2 was invoked, yet read T2's append.
#[test]
fn g1c_realtime_read_from_the_future() {
    let mut b = Builder::default();
    b.ok(0, 10, vec![r(1, &[2])]).ok(20, 30, vec![a(1, 2)]);
    assert_found(&b.check(), &[K::G1cRealtime]);
    assert_found(&b.check_serializable(), &[]);
}

#[test]
fn g2_item_realtime() {
    let mut b = Builder::default();
    b.ok(0, 10, vec![a(2, 2)]) // T3
        .ok(20, 30, vec![r(1, &[])]) // T1
        .ok(5, 40, vec![a(1, 1), r(2, &[])]) // T2
        .ok(0, 100, vec![r(1, &[1]), r(2, &[2])]);
    assert_found(&b.check(), &[K::G2ItemRealtime]);
    assert_found(&b.check_serializable(), &[]);
}

#[test]
fn register_aborted_and_intermediate_reads() {
    let mut b = Builder::default();
    b.txn(0, Some(10), OpType::Fail, vec![w(1, 1)])
        .ok(20, 30, vec![rr(1, Some(1))]);
    assert_found(&b.check(), &[K::G1a]);
    let mut b = Builder::default();
    b.ok(0, 10, vec![w(1, 1), w(1, 2)])
        .ok(20, 30, vec![rr(1, Some(1))]);
    assert_found(&b.check(), &[K::G1b]);
}

#[test]
fn register_internal_and_garbage() {
    let mut b = Builder::default();
    b.ok(0, 10, vec![w(1, 1), rr(1, Some(2))])
        .ok(20, 30, vec![w(1, 2)]);
    assert_found(&b.check(), &[K::Internal]);
    let mut b = Builder::default();
    b.ok(0, 10, vec![rr(1, Some(9))]);
    assert_found(&b.check(), &[K::GarbageRead]);
}

#[test]
fn register_g_single_from_the_initial_value() {
    let mut b = Builder::default();
    b.ok(0, 100, vec![w(1, 1), w(2, 1)])
        .ok(0, 100, vec![rr(1, None), rr(2, Some(1))]);
    assert_found(&b.check(), &[K::GSingle]);
}

/// Two read-modify-writes of one value: a lost update, G2-item by the
/// read-then-write inference (each read the other's overwritten version).
#[test]
fn register_lost_update() {
    let mut b = Builder::default();
    b.ok(0, 10, vec![w(1, 1)])
        .ok(20, 100, vec![rr(1, Some(1)), w(1, 2)])
        .ok(20, 100, vec![rr(1, Some(1)), w(1, 3)]);
    assert_found(&b.check(), &[K::G2Item]);
}

#[test]
fn register_stale_read_is_g_single_realtime() {
    let mut b = Builder::default();
    b.ok(0, 10, vec![w(1, 1)]).ok(20, 30, vec![rr(1, None)]);
    assert_found(&b.check(), &[K::GSingleRealtime]);
    assert_found(&b.check_serializable(), &[]);
}

#[test]
fn register_g1c_through_read_then_write() {
    let mut b = Builder::default();
    b.ok(0, 100, vec![rr(1, Some(2)), w(2, 1)])
        .ok(0, 100, vec![rr(2, Some(1)), w(1, 2)]);
    assert_found(&b.check(), &[K::G1c]);
}

/// Element faults are found once per key but reported for every read that
/// holds them, compatible with the longest read or not.
#[test]
fn element_faults_are_reported_per_read() {
    let mut b = Builder::default();
    b.ok(0, 10, vec![a(1, 1)])
        .txn(0, Some(10), OpType::Fail, vec![a(1, 2)])
        .ok(20, 30, vec![r(1, &[1, 2])])
        .ok(20, 30, vec![r(1, &[1, 2, 9])])
        .ok(20, 30, vec![r(1, &[1])]);
    let rep = b.check();
    assert_found(&rep, &[K::G1a, K::GarbageRead]);
    assert_eq!(rep.found[&K::G1a], 2, "{rep}");
    assert_eq!(rep.found[&K::GarbageRead], 1, "{rep}");
    let mut b = Builder::default();
    b.txn(0, Some(10), OpType::Fail, vec![a(1, 2)])
        .ok(20, 30, vec![r(1, &[2, 7])])
        .ok(20, 30, vec![r(1, &[3])]);
    let rep = b.check();
    assert_found(&rep, &[K::G1a, K::GarbageRead, K::IncompatibleOrder]);
    assert_eq!(rep.found[&K::GarbageRead], 2, "7 and 3: {rep}");
}

/// A lost append: T1's append of 1 committed before T2 appended 2, yet a
/// later read shows 2 and never 1. Only the unseen-append rule orders T1 at
/// all (after 2's appender, and after the reader): with real-time edges
/// that is a cycle; serializable as T2, T3, T1.
#[test]
fn lost_append_is_a_realtime_cycle() {
    let mut b = Builder::default();
    b.ok(0, 10, vec![a(1, 1)])
        .ok(20, 30, vec![a(1, 2)])
        .ok(40, 50, vec![r(1, &[2])]);
    let rep = b.check();
    assert!(!rep.valid, "report:\n{rep}");
    let cycle = &rep.anomalies[0];
    assert!(
        matches!(cycle.kind, K::G0Realtime | K::GSingleRealtime),
        "{cycle}"
    );
    assert!(
        cycle.steps.iter().any(|s| s.kind == EdgeKind::Realtime),
        "{cycle}"
    );
    assert_found(&b.check_serializable(), &[]);
}

/// An append no read shows is no anomaly when nothing read the key after
/// it completed (the reads ran concurrently with it), nor when its
/// transaction is indeterminate (it may never have happened).
#[test]
fn unseen_appends_that_are_no_anomaly() {
    let mut b = Builder::default();
    b.ok(0, 10, vec![a(1, 1)])
        .ok(5, 100, vec![r(1, &[1])])
        .ok(20, 30, vec![a(1, 2)])
        .ok(25, 100, vec![r(1, &[1])]);
    assert_found(&b.check(), &[]);
    let mut b = Builder::default();
    b.txn(0, Some(10), OpType::Info, vec![a(1, 1)])
        .ok(20, 30, vec![a(1, 2)])
        .ok(40, 50, vec![r(1, &[2])]);
    assert_found(&b.check(), &[]);
}
