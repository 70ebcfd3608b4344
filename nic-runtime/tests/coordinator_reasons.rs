//! The coordinator (`nic-runtime/src/protocol/coordinator.rs`) tells the
//! application why a transaction aborted (a rule the fuzz targets check): a
//! server's refusal reason becomes the outcome's status — a DMA or host-decode
//! failure is `HostFailure`, never a lock conflict — and metadata a peer
//! planted in an EXECUTE response aborts the transaction (releasing its locks)
//! instead of being trusted.

use splitkv_layout::host_nic::{TxRequest, TxStatus};
use splitkv_layout::wire::{BodyWriter, MsgKind, NodeId, ReplyStatus};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta, TxId};
use splitkv_nic::Placement;
use support::coordinator::CoordinatorRig as Rig;

mod support;

/// The key the transaction writes.
const KEY: Key = Key::new(0, 1);

/// Node 0 of 3, replication 2; its procedure writes [`KEY`].
fn rig() -> Rig {
    Rig::new(Placement::new(3, 2).unwrap(), vec![KEY])
}

impl Rig {
    fn outcome(&mut self) -> TxStatus {
        let o = self.coord.outcomes().pop_front().expect("an outcome");
        o.status
    }
}

/// Starts the transaction; returns its tx_id and the primary it went to.
fn start(r: &mut Rig) -> (TxId, NodeId) {
    let req = TxRequest {
        req_id: 1,
        procedure: 0,
        args: b"",
    };
    r.coord.start(&mut r.io, &r.procs, &req);
    let sent = r.sent_kinds();
    let [(primary, MsgKind::Execute, tx)] = sent[..] else {
        panic!("one EXECUTE expected: {sent:?}");
    };
    assert_eq!(primary, r.io.placement.primary(&KEY));
    (tx, primary)
}

#[test]
fn a_host_failure_is_reported_as_such() {
    let mut r = rig();
    let (tx, primary) = start(&mut r);
    let mut w = BodyWriter::new();
    w.begin_execute_resp(tx, ReplyStatus::HostFailure);
    r.respond(primary, &w);
    assert_eq!(r.outcome(), TxStatus::HostFailure);
    let s = r.coord.stats();
    assert_eq!((s.host_failures, s.execute_aborts), (1, 1));
    assert!(
        r.sent_kinds().is_empty(),
        "nothing locked, nothing to release"
    );
}

#[test]
fn planted_locked_bits_abort_and_release_the_locks() {
    let mut r = rig();
    let (tx, primary) = start(&mut r);
    let mut w = BodyWriter::new();
    w.begin_execute_resp(tx, ReplyStatus::Ok);
    w.push_item(&KEY, ObjectMeta::new(3, ObjectFlags::LOCKED), b"old");
    r.respond(primary, &w);
    assert_eq!(r.outcome(), TxStatus::Rejected);
    assert_eq!(r.coord.stats().malformed_responses, 1);
    assert_eq!(r.sent_kinds(), vec![(primary, MsgKind::Abort, tx)]);
}

#[test]
fn a_refused_log_aborts_in_two_rounds_with_the_refusals_reason() {
    let mut r = rig();
    let (tx, primary) = start(&mut r);
    let mut w = BodyWriter::new();
    w.begin_execute_resp(tx, ReplyStatus::Ok);
    w.push_item(&KEY, ObjectMeta::new(3, ObjectFlags::empty()), b"old");
    r.respond(primary, &w);
    let sent = r.sent_kinds();
    // LOG goes to every replica, primary included (the commit point).
    let mut backups: Vec<NodeId> = r.io.placement.backups(&KEY).collect();
    backups.insert(0, primary);
    assert_eq!(sent.len(), backups.len());
    assert!(sent
        .iter()
        .all(|&(_, kind, t)| kind == MsgKind::Log && t == tx));
    for (i, &b) in backups.iter().enumerate() {
        let status = if i == 0 {
            ReplyStatus::TooLarge
        } else {
            ReplyStatus::Ok
        };
        w.ack(MsgKind::LogAck, tx, status);
        r.respond(b, &w);
    }
    // Two rounds (`tests/abort_after_log.rs`): round 1 goes to every LOG
    // holder, the refuser included; the client hears nothing yet.
    assert!(r.coord.outcomes().is_empty());
    assert_eq!(r.coord.stats().log_refusals, 1);
    let mut round1 = r.sent_kinds();
    round1.sort_by_key(|&(d, _, _)| d);
    let mut holders = backups.clone();
    holders.sort();
    let expect: Vec<_> = holders
        .iter()
        .map(|&n| (n, MsgKind::AbortLog, tx))
        .collect();
    assert_eq!(round1, expect);
    for &b in &backups {
        w.ack(MsgKind::AbortLogAck, tx, ReplyStatus::Ok);
        r.respond(b, &w);
    }
    // Round 2 unlocks at the primary; the refusal's reason is the outcome's.
    assert_eq!(r.sent_kinds(), vec![(primary, MsgKind::Abort, tx)]);
    assert_eq!(r.outcome(), TxStatus::TooLarge);
    assert_eq!(r.coord.inflight(), 0);
}
