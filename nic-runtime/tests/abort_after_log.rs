//! A replica that refuses a LOG (its host log failed: it stops) must not let
//! its coordinator report an abort, nor release the locks, before every
//! other LOG holder recorded the ABORT (`tla/XenicOCCMsgs.tla`,
//! `XenicAbortReportEarly.cfg` and `XenicAbortUnlockEarly.cfg` fail). The
//! coordinator has no acknowledged ABORT, so it keeps the slot, tells the
//! client `Unknown`, and the refuser's exclusion decides
//! (`protocol/coordinator/commit.rs`, `log_refused`).
//!
//! The scripted scenario: node 0 coordinates a write of a key replicated on
//! all three nodes, node 1 refuses its LOG, nodes 0 and 2 hold it. Before
//! the fix node 0 told the client `HostFailure` at once and sent the ABORTs;
//! had it crashed before they landed, node 1 (stopped) and node 0 would be
//! excluded and recovery at node 2 would commit (every survivor holds the
//! LOG): a reported abort contradicted.

use splitkv_layout::host_nic::{TxRequest, TxStatus};
use splitkv_layout::wire::{
    BodyWriter, CoordPhase, MsgKind, NodeId, NodeMask, Outcome, RecordEvidence, RecordKind,
    ReplyStatus,
};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta};
use splitkv_nic::recovery::TxEvidence;
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
fn refused_log() -> (Rig, u64) {
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
        let status = if n == REFUSER {
            ReplyStatus::HostFailure
        } else {
            ReplyStatus::Ok
        };
        w.ack(MsgKind::LogAck, tx, status);
        r.respond(n, &w);
    }
    (r, tx)
}

/// The outcomes the client was handed so far.
fn told(r: &mut Rig) -> Vec<TxStatus> {
    r.coord.outcomes().drain(..).map(|o| o.status).collect()
}

#[test]
fn a_refused_log_is_not_reported_aborted_nor_unlocked_before_every_holder_recorded_it() {
    let (mut r, _tx) = refused_log();
    let told = told(&mut r);
    assert!(
        told.iter().all(|s| *s == TxStatus::Unknown),
        "the client must not hear a decision before every LOG holder recorded it: {told:?}"
    );
    assert_eq!(told, vec![TxStatus::Unknown]);
    assert_eq!(
        r.sent_kinds(),
        vec![],
        "no one-round ABORT: it would unlock before the holders recorded it"
    );
    assert_eq!(r.coord.inflight(), 1, "the slot (and its locks) stays");
    assert_eq!(r.coord.stats().log_refusals, 1);
}

#[test]
fn a_crash_of_the_coordinator_then_cannot_contradict_what_the_client_heard() {
    let (mut r, tx) = refused_log();
    let told = told(&mut r);
    // Node 0 crashes now; node 1 stopped at its refusal. Node 2 holds the
    // LOG record and no ABORT record (any ABORT sent is still in flight).
    let mut e = TxEvidence::default();
    e.add_record(
        2,
        RecordEvidence {
            tx_id: tx,
            shard: placement().shard(&key()),
            kind: RecordKind::Log,
            write_shards: NodeMask::EMPTY.with(placement().shard(&key())),
        },
    );
    let view = PlacementView::new(placement(), NodeMask::EMPTY.with(0).with(REFUSER)).unwrap();
    let (commit, _) = e.decide_tx(tx, &view);
    assert!(commit, "the survivor holds the LOG: recovery commits");
    let contradicted = told
        .iter()
        .any(|s| !matches!(s, TxStatus::Unknown | TxStatus::Committed));
    assert!(!contradicted, "recovery committed after {told:?}");
}

#[test]
fn the_live_coordinator_reports_it_undecided_to_recovery() {
    let (r, tx) = refused_log();
    let mut ev = Vec::new();
    r.coord.evidence(0, &placement(), &mut ev);
    assert_eq!(
        ev.len(),
        1,
        "reported, so recovery never takes it as forgotten"
    );
    assert_eq!(ev[0].tx_id, tx);
    assert_eq!(ev[0].phase, CoordPhase::Log);
    assert_eq!(ev[0].outcome, Outcome::Undecided);
    assert!(!ev[0].reported, "`Unknown` is not a reported decision");
}

#[test]
fn the_deadline_alone_decides_nothing_while_the_refuser_is_in_the_configuration() {
    let (mut r, _tx) = refused_log();
    told(&mut r);
    r.io.now += 10 * splitkv_nic::protocol::coordinator::PHASE_DEADLINE_NS_DEFAULT;
    r.coord.check_deadlines(&mut r.io, &r.procs);
    assert_eq!(r.sent_kinds(), vec![], "neither COMMIT nor ABORT");
    assert_eq!(r.coord.inflight(), 1);
    assert!(told(&mut r).is_empty(), "told once");
}

#[test]
fn the_refusers_exclusion_commits_at_the_holders_and_frees_the_slot() {
    let (mut r, tx) = refused_log();
    told(&mut r);
    r.coord
        .set_live(&mut r.io, &r.procs, 0b111 & !(1 << REFUSER));
    let mut commits = r.sent_kinds();
    commits.sort_by_key(|&(d, _, _)| d);
    assert_eq!(
        commits,
        vec![(0, MsgKind::Commit, tx), (2, MsgKind::Commit, tx)],
        "every live LOG holder gets the COMMIT, the excluded refuser none"
    );
    let mut w = BodyWriter::new();
    for n in [0, 2] {
        w.ack(MsgKind::CommitAck, tx, ReplyStatus::Ok);
        r.respond(n, &w);
    }
    assert_eq!(r.coord.inflight(), 0, "the slot is freed");
    assert!(told(&mut r).is_empty(), "the client heard once (Unknown)");
    let s = r.coord.stats();
    assert_eq!((s.committed, s.deadlines.unknown_committed), (1, 1));
}
