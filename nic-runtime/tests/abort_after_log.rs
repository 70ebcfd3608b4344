//! The two-round abort after LOG at the coordinator (`tla/XenicOCCMsgs.tla`,
//! `AbortMode = "tworound"`; `protocol/coordinator/commit.rs`,
//! `abort_after_log`). A replica that refuses a LOG (its host log failed:
//! it stops; or any other refusal, a late LOG answered `Malformed`
//! included) makes the coordinator send ABORT-after-LOG to every replica
//! sent the LOG, and only once every one acknowledged (or was excluded)
//! does it report the abort and, in round 2, release the primaries' locks.
//! Reporting earlier fails `XenicAbortReportEarly.cfg`, unlocking earlier
//! `XenicAbortUnlockEarly.cfg`: with node 1 (the refuser) stopped and node 0
//! (the coordinator) crashed before the ABORTs landed, recovery at node 2
//! would find the LOG on every survivor and commit.
//!
//! The scripted scenario: node 0 coordinates a write of a key replicated on
//! all three nodes (primary node 2), node 1 refuses its LOG, nodes 0 and 2
//! hold it. The replica side (records, late LOGs, recovery evidence) is in
//! `tests/abort_after_log_server.rs`.

use splitkv_layout::host_nic::{TxRequest, TxStatus};
use splitkv_layout::wire::{
    BodyWriter, CoordOutcome, CoordPhase, MsgKind, NodeId, NodeMask, RecordEvidence, RecordKind,
    ReplyStatus,
};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta, TxId};
use splitkv_nic::recovery::{RecoveryRule, TxEvidence};
use splitkv_nic::{Placement, PlacementView};
use support::coordinator::CoordinatorRig as Rig;

mod support;

/// The refusing replica.
const REFUSER: NodeId = 1;

/// 3 nodes, replication 3: every node is a replica of every key.
fn placement() -> Placement {
    Placement::new(3, 3).unwrap()
}

/// A key whose primary is node 2 (so the coordinator, node 0, and the
/// refuser are backups).
fn key() -> Key {
    support::key_on(&placement(), &[2, 0, 1])
}

/// Starts the write of [`key`], answers its EXECUTE, and has every replica
/// answer its LOG, [`REFUSER`] with `HostFailure`. Returns the rig and the
/// transaction id.
fn refused_log() -> (Rig, TxId) {
    refused_log_with(ReplyStatus::HostFailure)
}

/// As [`refused_log`], [`REFUSER`] answering `why`.
fn refused_log_with(why: ReplyStatus) -> (Rig, TxId) {
    let mut r = Rig::new(placement(), vec![key()]);
    let req = TxRequest {
        req_id: 7,
        procedure: 0,
        args: b"",
    };
    r.coord.start(&mut r.io, &r.procs, &req);
    let [(2, MsgKind::Execute, tx)] = r.sent_kinds()[..] else {
        panic!("one EXECUTE to the primary");
    };
    let mut w = BodyWriter::new();
    w.begin_execute_resp(tx, ReplyStatus::Ok);
    w.push_item(&key(), ObjectMeta::new(3, ObjectFlags::empty()), b"old");
    r.respond(2, &w);
    let mut logs: Vec<NodeId> = r
        .sent_kinds()
        .into_iter()
        .map(|(d, kind, t)| {
            assert_eq!((kind, t), (MsgKind::Log, tx));
            d
        })
        .collect();
    logs.sort();
    assert_eq!(logs, vec![0, 1, 2], "LOG to every replica");
    for n in [0, REFUSER, 2] {
        let status = if n == REFUSER { why } else { ReplyStatus::Ok };
        w.ack(MsgKind::LogAck, tx, status);
        r.respond(n, &w);
    }
    (r, tx)
}

/// The outcomes the client was handed so far.
fn told(r: &mut Rig) -> Vec<TxStatus> {
    r.coord.outcomes().drain(..).map(|o| o.status).collect()
}

/// Round 1 was sent to every replica (all three hold or may hold the LOG).
fn round1_to_all(r: &mut Rig, tx: TxId) {
    let mut sent = r.sent_kinds();
    sent.sort_by_key(|&(d, _, _)| d);
    assert_eq!(
        sent,
        vec![
            (0, MsgKind::AbortLog, tx),
            (1, MsgKind::AbortLog, tx),
            (2, MsgKind::AbortLog, tx)
        ],
        "round 1 to every replica sent the LOG, the refuser included"
    );
}

fn ack(r: &mut Rig, n: NodeId, tx: TxId) {
    let mut w = BodyWriter::new();
    w.ack(MsgKind::AbortLogAck, tx, ReplyStatus::Ok);
    r.respond(n, &w);
}

#[test]
fn a_refused_log_is_reported_aborted_and_unlocked_only_after_every_holder_acknowledged() {
    let (mut r, tx) = refused_log();
    round1_to_all(&mut r, tx);
    assert!(told(&mut r).is_empty(), "no report at the decision");
    for n in [0, 2] {
        ack(&mut r, n, tx);
        assert!(
            told(&mut r).is_empty(),
            "not before every holder acknowledged"
        );
        assert_eq!(r.sent_kinds(), vec![], "no unlock in round 1");
        assert_eq!(r.coord.inflight(), 1, "the slot (and its locks) stays");
    }
    ack(&mut r, REFUSER, tx);
    assert_eq!(
        r.sent_kinds(),
        vec![(2, MsgKind::Abort, tx)],
        "round 2: the plain ABORT unlocks at the primary only"
    );
    assert_eq!(
        told(&mut r),
        vec![TxStatus::HostFailure],
        "the refusal's reason"
    );
    assert_eq!(r.coord.inflight(), 0, "the slot is freed");
    let s = r.coord.stats();
    assert_eq!(
        (s.log_refusals, s.aborts_after_log, s.abort_log_acks),
        (1, 1, 3)
    );
    assert_eq!((s.committed, s.deadlines.unknown), (0, 0));
}

#[test]
fn a_duplicated_ack_counts_once() {
    let (mut r, tx) = refused_log();
    round1_to_all(&mut r, tx);
    ack(&mut r, 0, tx);
    ack(&mut r, 0, tx);
    ack(&mut r, 2, tx);
    assert!(told(&mut r).is_empty(), "the refuser has not acknowledged");
    assert_eq!(r.sent_kinds(), vec![]);
    assert_eq!(r.coord.stats().stale_responses, 1);
    assert_eq!(r.coord.stats().abort_log_acks, 2);
}

#[test]
fn a_late_log_refusal_malformed_aborts_in_two_rounds_too() {
    // A replica that finished the transaction already answers a late LOG
    // `Malformed`: once aborted in one round, now in two like the others.
    let (mut r, tx) = refused_log_with(ReplyStatus::Malformed);
    round1_to_all(&mut r, tx);
    assert!(told(&mut r).is_empty());
    for n in [0, 1, 2] {
        ack(&mut r, n, tx);
    }
    assert_eq!(r.sent_kinds(), vec![(2, MsgKind::Abort, tx)]);
    assert_eq!(told(&mut r), vec![TxStatus::Rejected]);
}

#[test]
fn the_live_coordinator_reports_its_abort_decision_to_recovery_between_the_rounds() {
    let (mut r, tx) = refused_log();
    r.sent_kinds();
    ack(&mut r, 0, tx);
    let mut ev = Vec::new();
    r.coord.evidence(0, &placement(), &mut ev);
    assert_eq!(
        ev.len(),
        1,
        "reported, so recovery never takes it as forgotten"
    );
    assert_eq!(ev[0].tx_id, tx);
    assert_eq!(ev[0].phase, CoordPhase::Log);
    assert_eq!(ev[0].outcome, CoordOutcome::Abort, "decided: rule 1 aborts");
    assert!(!ev[0].reported, "nothing told yet");
    let mut e = TxEvidence::default();
    e.add_coordinator(ev[0]);
    e.add_record(2, log_record(tx));
    let view = PlacementView::new(placement(), NodeMask::EMPTY.with(REFUSER)).unwrap();
    assert!(
        !e.decide_tx(tx, &view, RecoveryRule::XenicOcc).0,
        "the live coordinator's abort stands"
    );
}

/// Node `n`'s evidence that it holds the LOG of `tx` (pending).
fn log_record(tx: TxId) -> RecordEvidence {
    let shard = placement().shard(&key());
    RecordEvidence {
        tx_id: tx,
        shard,
        kind: RecordKind::Log,
        write_shards: NodeMask::EMPTY.with(shard),
    }
}

#[test]
fn a_coordinator_crash_after_round_one_leaves_recovery_deciding_abort() {
    let (mut r, tx) = refused_log();
    r.sent_kinds();
    ack(&mut r, 2, tx);
    // Node 0 (coordinator) crashes now; node 1 stopped at its refusal. Node
    // 2 recorded the abort (round 1): its evidence is an ABORT record.
    let mut e = TxEvidence::default();
    e.add_record(
        2,
        RecordEvidence {
            kind: RecordKind::Abort,
            ..log_record(tx)
        },
    );
    let view = PlacementView::new(placement(), NodeMask::EMPTY.with(0).with(REFUSER)).unwrap();
    assert!(
        !e.decide_tx(tx, &view, RecoveryRule::XenicOcc).0,
        "rule 3: the ABORT record decides"
    );
    // Had the abort been reported before node 2's acknowledgement (the
    // must-fail variant), node 2 would still hold the LOG alone, and
    // recovery would commit: the reason for round 1's acknowledgements.
    let mut early = TxEvidence::default();
    early.add_record(2, log_record(tx));
    assert!(early.decide_tx(tx, &view, RecoveryRule::XenicOcc).0);
}

#[test]
fn the_refusers_exclusion_ends_round_one_and_frees_the_slot() {
    let (mut r, tx) = refused_log();
    r.sent_kinds();
    for n in [0, 2] {
        ack(&mut r, n, tx);
    }
    // Stopped, the refuser never acknowledges; the deadline only resends.
    r.io.now += splitkv_nic::protocol::coordinator::PHASE_DEADLINE_NS_DEFAULT;
    r.coord.check_deadlines(&mut r.io, &r.procs);
    assert_eq!(r.sent_kinds(), vec![(REFUSER, MsgKind::AbortLog, tx)]);
    assert!(told(&mut r).is_empty());
    r.coord
        .set_live(&mut r.io, &r.procs, 0b111 & !(1 << REFUSER));
    assert_eq!(r.sent_kinds(), vec![(2, MsgKind::Abort, tx)]);
    assert_eq!(told(&mut r), vec![TxStatus::HostFailure]);
    assert_eq!(r.coord.inflight(), 0, "the slot is freed");
    assert_eq!(r.coord.stats().abort_log_resends, 1);
}
