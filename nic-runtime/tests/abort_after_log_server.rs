//! The two-round abort after LOG at a replica (`tla/XenicOCCMsgs.tla`,
//! `AbortLogL` and `AbortL`; `protocol/server/abort.rs`): round 1
//! (ABORT-after-LOG) records the abort — an ABORT decision record after the
//! LOG records, the abort in the recovery evidence — keeps the locks, and is
//! acknowledged; a LOG arriving later is refused and appends nothing; a
//! duplicate is acknowledged again and changes nothing; round 2 (the plain
//! ABORT) releases the locks, only its own transaction's. A coordinator that
//! crashes between the rounds leaves recovery deciding abort, and that
//! decision releases the locks round 2 would have.

mod support;

use splitkv_layout::log_record::LogKind;
use splitkv_layout::wire::{
    Body, BodyWriter, MsgKind, NodeMask, RecordEvidence, RecordKind, ReplyStatus,
};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta, TxId};
use splitkv_nic::recovery::{RecoveryRule, TxEvidence};
use splitkv_nic::{Placement, PlacementView};
use support::server::{ServerRig as Rig, PEER};

/// The key written.
const KEY: Key = Key::new(0, 7);

/// Node 0 of 2 (replication 2: a replica of every key) over an empty host
/// table and a host log the test reads.
fn rig() -> Rig {
    Rig::new(Placement::new(2, 2).unwrap())
}

/// Transaction `slot` of coordinator [`PEER`], generation 1.
fn tx(slot: usize) -> TxId {
    TxId::new(PEER, slot, 1)
}

impl Rig {
    /// Delivers one request from [`PEER`], runs DMA to completion, and
    /// returns the replies sent: (kind, status).
    fn request(&mut self, w: &BodyWriter) -> Vec<(MsgKind, ReplyStatus)> {
        self.deliver(w);
        self.pump();
        self.replies()
    }

    fn replies(&mut self) -> Vec<(MsgKind, ReplyStatus)> {
        self.replies_with(|body| {
            let kind = body.kind();
            let status = match body {
                Body::ExecuteResp { status, .. }
                | Body::LogAck { status, .. }
                | Body::CommitAck { status, .. }
                | Body::AbortLogAck { status, .. } => status,
                other => panic!("not a reply: {other:?}"),
            };
            (kind, status)
        })
    }

    /// Kinds of the host-log records appended so far.
    fn logged(&mut self) -> Vec<LogKind> {
        self.logged_with(|r| r.kind)
    }

    /// EXECUTE locking [`KEY`] for `t`, then its LOG: both answered `Ok`.
    fn locked_and_logged(&mut self, t: TxId) {
        let mut w = BodyWriter::new();
        w.begin_execute(t);
        w.push_lock(&KEY);
        assert_eq!(self.request(&w), vec![(MsgKind::ExecuteResp, OK)]);
        assert_eq!(self.request(&log(t)), vec![(MsgKind::LogAck, OK)]);
        assert_eq!(self.logged(), vec![LogKind::Log]);
    }

    /// The records this node reports to recovery.
    fn evidence_records(&self) -> Vec<RecordEvidence> {
        let mut out = Vec::new();
        self.server.recovery_evidence(64, &mut out);
        out
    }

    /// The kinds of [`Rig::evidence_records`].
    fn evidence(&self) -> Vec<RecordKind> {
        self.evidence_records().iter().map(|r| r.kind).collect()
    }
}

const OK: ReplyStatus = ReplyStatus::Ok;
const ACKED: (MsgKind, ReplyStatus) = (MsgKind::AbortLogAck, OK);

fn execute_locking(t: TxId) -> BodyWriter {
    let mut w = BodyWriter::new();
    w.begin_execute(t);
    w.push_lock(&KEY);
    w
}

fn log(t: TxId) -> BodyWriter {
    let mut w = BodyWriter::new();
    w.begin_log(t, NodeMask::EMPTY);
    w.push_item(&KEY, ObjectMeta::new(4, ObjectFlags::empty()), b"new");
    w
}

fn abort_log(t: TxId) -> BodyWriter {
    let mut w = BodyWriter::new();
    w.abort_log(t);
    w
}

fn abort(t: TxId) -> BodyWriter {
    let mut w = BodyWriter::new();
    w.begin_abort(t);
    w.push_abort_key(&KEY);
    w
}

#[test]
fn round_one_records_the_abort_and_keeps_the_lock_round_two_unlocks() {
    let mut r = rig();
    let t = tx(3);
    r.locked_and_logged(t);
    assert_eq!(r.evidence(), vec![RecordKind::Log]);
    assert_eq!(r.request(&abort_log(t)), vec![ACKED]);
    assert_eq!(
        r.logged(),
        vec![LogKind::Abort],
        "the LOG records are dropped"
    );
    assert_eq!(
        r.evidence(),
        vec![RecordKind::Abort],
        "recovery sees the abort"
    );
    assert_eq!(
        r.index.lock_holder(&KEY),
        Some(t),
        "round 1 unlocks nothing"
    );
    assert_eq!(r.request(&abort(t)), vec![], "round 2 needs no answer");
    assert_eq!(r.index.lock_holder(&KEY), None);
    assert_eq!(r.server.stats().abort_log_requests, 1);
}

#[test]
fn a_late_log_after_round_one_is_refused_and_appends_nothing() {
    let mut r = rig();
    let t = tx(4);
    // Round 1 overtakes the LOG (it reached this replica first).
    assert_eq!(r.request(&abort_log(t)), vec![ACKED]);
    assert_eq!(
        r.request(&log(t)),
        vec![(MsgKind::LogAck, ReplyStatus::Malformed)]
    );
    assert_eq!(r.logged(), vec![], "no pending record nobody decides");
    assert_eq!(r.evidence(), vec![], "nothing for recovery to commit");
}

#[test]
fn duplicates_of_either_round_change_nothing_and_never_unlock_another() {
    let mut r = rig();
    let t = tx(5);
    r.locked_and_logged(t);
    assert_eq!(r.request(&abort_log(t)), vec![ACKED]);
    r.request(&abort(t));
    r.logged();
    // A later transaction of another slot takes the key.
    let other = tx(6);
    let mut w = BodyWriter::new();
    w.begin_execute(other);
    w.push_lock(&KEY);
    assert_eq!(r.request(&w), vec![(MsgKind::ExecuteResp, OK)]);
    assert_eq!(r.request(&abort_log(t)), vec![ACKED], "acknowledged again");
    assert_eq!(r.request(&abort(t)), vec![]);
    assert_eq!(r.index.lock_holder(&KEY), Some(other), "orphan-lock rule");
    assert_eq!(r.logged(), vec![], "no second decision record");
    assert_eq!(r.evidence(), vec![RecordKind::Abort]);
}

#[test]
fn an_abort_log_for_a_committed_transaction_is_refused() {
    let mut r = rig();
    let t = tx(8);
    r.locked_and_logged(t);
    let mut w = BodyWriter::new();
    w.begin_items(MsgKind::Commit, t);
    w.push_item(&KEY, ObjectMeta::new(4, ObjectFlags::empty()), b"new");
    assert_eq!(r.request(&w), vec![(MsgKind::CommitAck, OK)]);
    assert_eq!(
        r.request(&abort_log(t)),
        vec![(MsgKind::AbortLogAck, ReplyStatus::Malformed)]
    );
    assert_eq!(r.evidence(), vec![RecordKind::Commit]);
}

#[test]
fn a_coordinator_crash_between_the_rounds_leaves_recovery_deciding_abort_and_unlocking() {
    let mut r = rig();
    let t = tx(9);
    r.locked_and_logged(t);
    let before = r.evidence_records();
    assert_eq!(r.request(&abort_log(t)), vec![ACKED]);
    assert_eq!(r.logged(), vec![LogKind::Abort]);
    // The coordinator (node 1) crashes before round 2: this node's evidence
    // decides (rule 3), though it is the only survivor of the shard.
    let out = r.evidence_records();
    let mut e = TxEvidence::default();
    out.iter().for_each(|rec| e.add_record(0, *rec));
    let view = PlacementView::new(r.io.placement, NodeMask::EMPTY.with(PEER)).unwrap();
    assert!(!e.decide_tx(t, &view, RecoveryRule::XenicOcc).0, "abort");
    // Had it crashed before round 1, the survivor's pending LOG commits.
    let mut e = TxEvidence::default();
    before.iter().for_each(|rec| e.add_record(0, *rec));
    assert!(e.decide_tx(t, &view, RecoveryRule::XenicOcc).0, "commit");
    assert_eq!(r.index.lock_holder(&KEY), Some(t));
    let changed = r.server.apply_recovered(&mut r.io, &mut r.index, t, false);
    assert!(changed, "the lock round 2 would have released goes");
    assert_eq!(r.index.lock_holder(&KEY), None);
    r.pump();
    assert_eq!(r.logged(), vec![], "the ABORT record is there already");
}

/// A decision that reaches a replica while the transaction's LOG records
/// are still being appended to its host log is appended after them when
/// that append completes, even if a newer transaction of the same
/// coordinator slot arrived meanwhile and took the slot's entry (nic-crash
/// list-append seed 18, with the restarted coordinator's ids going on: a
/// recovered commit was never recorded at one backup, which stayed a
/// version behind its primary; with an abort the pending records would
/// have stayed in the host log for good).
#[test]
fn a_decision_during_the_log_append_survives_a_newer_transaction_of_the_slot() {
    for commit in [false, true] {
        let mut r = rig();
        let t = tx(10);
        assert_eq!(
            r.request(&execute_locking(t)),
            vec![(MsgKind::ExecuteResp, OK)]
        );
        r.deliver(&log(t));
        if commit {
            // A restarted coordinator's rebuild decided commit (its
            // Decisions message).
            assert!(r.server.commit_recovered_holding_locks(&mut r.io, t));
            r.index.unlock(&KEY, t);
        } else {
            r.deliver(&abort_log(t));
            r.deliver(&abort(t));
        }
        // The slot's next transaction (generation 2) overtakes the append.
        r.deliver(&execute_locking(TxId::new(PEER, 10, 2)));
        r.pump();
        let decision = if commit {
            LogKind::Commit
        } else {
            LogKind::Abort
        };
        assert_eq!(
            r.logged(),
            vec![LogKind::Log, decision],
            "the decision record follows the LOG records (commit: {commit})"
        );
    }
}
