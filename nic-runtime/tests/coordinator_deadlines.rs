//! Coordinator deadlines and failed peers (crash recovery's timeouts;
//! `nic-runtime/src/protocol/coordinator/deadline.rs`): a participant that
//! never answers ends its transaction as `Unavailable` before any LOG (with
//! ABORT to the primaries that may hold its locks) and, after LOG, by an
//! abort in two rounds (every LOG holder acknowledges before the report and
//! the unlock; resent at the deadline, bounded, then `Unknown`); an excluded
//! replica is not waited for, and the live coordinator commits once every
//! written key has a live LOG holder (a suspicion alone never lets it
//! commit without a replica's LOG); the client hears once.

use splitkv_layout::host_nic::{TxRequest, TxStatus};
use splitkv_layout::wire::{BodyWriter, MsgKind, NodeId, ReplyStatus};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta, TxId};
use splitkv_nic::protocol::coordinator::{
    ABORT_LOG_RESENDS_MAX, DEADLINE_SCAN_INTERVAL_NS, PHASE_DEADLINE_NS_DEFAULT,
};
use splitkv_nic::Placement;
use support::coordinator::CoordinatorRig as Rig;

mod support;

/// A key whose primary is not node 0 (the coordinator), so it can fail.
const KEY: Key = Key::new(0, 1);

/// Node 0 of 3 with replication `replicas`, at time 1 µs; its procedure
/// writes [`KEY`].
fn rig(replicas: usize) -> Rig {
    let mut r = Rig::new(Placement::new(3, replicas).unwrap(), vec![KEY]);
    r.io.now = 1_000;
    r
}

impl Rig {
    fn outcomes(&mut self) -> Vec<TxStatus> {
        self.coord.outcomes().drain(..).map(|o| o.status).collect()
    }

    /// Moves time on by `ns` and runs the deadline check.
    fn advance(&mut self, ns: u64) {
        self.io.now += ns;
        self.coord.check_deadlines(&mut self.io, &self.procs);
    }

    /// `node`'s session fell silent (a suspicion, which may be false).
    fn fail(&mut self, node: NodeId) {
        self.coord.on_peer_failed(&mut self.io, &self.procs, node);
    }

    /// A configuration leaves `node` out (of the 3 nodes).
    fn exclude(&mut self, node: NodeId) {
        let live = 0b111 & !(1u32 << node);
        self.coord.set_live(&mut self.io, &self.procs, live);
    }

    /// Starts the transaction; returns its tx_id and the primary of KEY.
    fn start(&mut self) -> (TxId, NodeId) {
        let req = TxRequest {
            req_id: 1,
            procedure: 0,
            args: b"",
        };
        self.coord.start(&mut self.io, &self.procs, &req);
        let primary = self.io.placement.primary(&KEY);
        assert_ne!(primary, 0, "the test key's primary must be a peer");
        let tx = match self.sent_kinds()[..] {
            [(p, MsgKind::Execute, tx)] if p == primary => tx,
            ref other => panic!("one EXECUTE to the primary expected: {other:?}"),
        };
        (tx, primary)
    }

    /// Starts and answers EXECUTE (lock granted); returns the tx id and
    /// the nodes LOG went to.
    fn start_to_log(&mut self) -> (TxId, NodeId, Vec<NodeId>) {
        let (tx, primary) = self.start();
        let mut w = BodyWriter::new();
        w.begin_execute_resp(tx, ReplyStatus::Ok);
        w.push_item(&KEY, ObjectMeta::new(3, ObjectFlags::empty()), b"old");
        self.respond(primary, &w);
        let logs: Vec<NodeId> = self
            .sent_kinds()
            .iter()
            .map(|&(d, k, _)| {
                assert_eq!(k, MsgKind::Log);
                d
            })
            .collect();
        (tx, primary, logs)
    }
}

#[test]
fn a_silent_primary_in_execute_ends_unavailable_at_the_deadline_and_is_sent_abort() {
    let mut r = rig(2);
    let (tx, primary) = r.start();
    r.advance(PHASE_DEADLINE_NS_DEFAULT - 1);
    assert!(r.outcomes().is_empty(), "not before the deadline");
    assert_eq!(r.coord.inflight(), 1);
    // Found overdue by the next scan, at most one scan interval later.
    r.advance(DEADLINE_SCAN_INTERVAL_NS);
    assert_eq!(r.outcomes(), vec![TxStatus::Unavailable]);
    // Its EXECUTE may have locked: the ABORT follows it on the session.
    assert_eq!(r.sent_kinds(), vec![(primary, MsgKind::Abort, tx)]);
    assert_eq!(r.coord.inflight(), 0);
    assert_eq!(r.coord.stats().deadlines.unavailable, 1);
    r.advance(PHASE_DEADLINE_NS_DEFAULT);
    assert!(r.outcomes().is_empty(), "told once");
}

#[test]
fn a_suspected_primary_ends_execute_at_once_and_is_sent_abort() {
    let mut r = rig(2);
    let (tx, primary) = r.start();
    r.fail(primary);
    assert_eq!(r.outcomes(), vec![TxStatus::Unavailable]);
    // A suspicion may be false: the primary may live and hold the lock.
    assert_eq!(r.sent_kinds(), vec![(primary, MsgKind::Abort, tx)]);
    assert_eq!(r.coord.inflight(), 0);
    let s = r.coord.stats().deadlines;
    assert_eq!((s.peers_failed, s.unavailable), (1, 1));
    assert_eq!(r.coord.failed_peers(), 1 << primary);
    assert_eq!(r.coord.excluded_peers(), 0);
}

#[test]
fn an_excluded_primary_ends_execute_at_once_without_sending_to_it() {
    let mut r = rig(2);
    let (_, primary) = r.start();
    r.exclude(primary);
    assert_eq!(r.outcomes(), vec![TxStatus::Unavailable]);
    assert!(
        r.sent_kinds().is_empty(),
        "nothing goes to an excluded node"
    );
    assert_eq!(r.coord.inflight(), 0);
    assert_eq!(r.coord.excluded_peers(), 1 << primary);
    assert_eq!(r.coord.failed_peers(), 1 << primary);
}

/// The ABORTs after LOG sent so far, by destination (sorted).
fn abort_logs(sent: &[(NodeId, MsgKind, TxId)], tx: TxId) -> Vec<NodeId> {
    let mut to: Vec<NodeId> = sent
        .iter()
        .filter(|&&(_, k, t)| k == MsgKind::AbortLog && t == tx)
        .map(|&(d, _, _)| d)
        .collect();
    to.sort();
    to
}

#[test]
fn a_silent_replica_after_log_aborts_in_two_rounds_resent_until_it_is_excluded() {
    let mut r = rig(3);
    let (tx, primary, logs) = r.start_to_log();
    assert!(
        logs.len() >= 2,
        "replication 3 logs on 2 nodes at least: {logs:?}"
    );
    let silent = *logs.iter().rev().find(|&&n| n != 0).unwrap();
    let mut w = BodyWriter::new();
    for &n in logs.iter().filter(|&&n| n != silent) {
        w.ack(MsgKind::LogAck, tx, ReplyStatus::Ok);
        r.respond(n, &w);
    }
    assert!(r.outcomes().is_empty());
    // Overdue in Log: round 1 to every replica sent the LOG, nothing told.
    r.advance(PHASE_DEADLINE_NS_DEFAULT);
    let mut holders = logs.clone();
    holders.sort();
    assert_eq!(abort_logs(&r.sent_kinds(), tx), holders);
    assert!(
        r.outcomes().is_empty(),
        "not before every holder acknowledged"
    );
    for &n in logs.iter().filter(|&&n| n != silent) {
        w.ack(MsgKind::AbortLogAck, tx, ReplyStatus::Ok);
        r.respond(n, &w);
    }
    assert!(
        r.outcomes().is_empty(),
        "the silent holder has not acknowledged"
    );
    assert!(r.sent_kinds().is_empty(), "no unlock in round 1");
    // Its ABORT (or ack) may be lost: sent again at each deadline, bounded.
    for i in 1..=ABORT_LOG_RESENDS_MAX as u64 {
        r.advance(PHASE_DEADLINE_NS_DEFAULT);
        assert_eq!(
            r.sent_kinds(),
            vec![(silent, MsgKind::AbortLog, tx)],
            "resend {i}"
        );
    }
    r.advance(PHASE_DEADLINE_NS_DEFAULT);
    assert!(r.sent_kinds().is_empty(), "no resend past the bound");
    assert_eq!(r.outcomes(), vec![TxStatus::Unknown]);
    // Suspected only: it may be alive and hold the LOG, so still no unlock.
    r.fail(silent);
    r.advance(DEADLINE_SCAN_INTERVAL_NS);
    assert!(r.sent_kinds().is_empty(), "no unlock on a suspicion");
    assert_eq!(r.coord.inflight(), 1);
    // Excluded: round 2 unlocks at the live primary and frees the slot.
    r.exclude(silent);
    let round2 = r.sent_kinds();
    if primary == silent {
        assert!(round2.is_empty(), "nothing goes to an excluded node");
    } else {
        assert_eq!(round2, vec![(primary, MsgKind::Abort, tx)]);
    }
    assert!(r.outcomes().is_empty(), "told once");
    assert_eq!(r.coord.inflight(), 0);
    let s = r.coord.stats();
    assert_eq!((s.aborts_after_log, s.deadlines.log_overdue), (1, 1));
    assert_eq!(s.abort_log_resends, u64::from(ABORT_LOG_RESENDS_MAX));
    assert_eq!(s.abort_log_acks, logs.len() as u64 - 1);
    assert_eq!((s.deadlines.unknown, s.deadlines.unknown_aborted), (1, 1));
    assert_eq!(s.committed, 0);
}

#[test]
fn a_replica_failing_in_commit_is_not_waited_for() {
    let mut r = rig(3);
    let (tx, _, logs) = r.start_to_log();
    let mut w = BodyWriter::new();
    for &n in &logs {
        w.ack(MsgKind::LogAck, tx, ReplyStatus::Ok);
        r.respond(n, &w);
    }
    let commits: Vec<NodeId> = r
        .sent()
        .iter()
        .filter(|x| x.1 == MsgKind::Commit)
        .map(|x| x.0)
        .collect();
    let failing = *commits
        .iter()
        .find(|&&n| n != 0)
        .expect("a COMMIT to a peer");
    for &d in commits.iter().filter(|&&d| d != failing) {
        w.ack(MsgKind::CommitAck, tx, ReplyStatus::Ok);
        r.respond(d, &w);
    }
    assert!(r.outcomes().is_empty());
    // Suspected only: it may live and hold locks until its COMMIT.
    r.fail(failing);
    r.advance(DEADLINE_SCAN_INTERVAL_NS);
    assert!(r.outcomes().is_empty());
    assert_eq!(r.coord.inflight(), 1);
    r.exclude(failing);
    assert_eq!(r.outcomes(), vec![TxStatus::Committed]);
    assert_eq!(r.coord.stats().deadlines.commit_without_failed, 1);
    assert_eq!(r.coord.inflight(), 0);
}

#[test]
fn an_overdue_log_aborts_in_two_rounds_and_a_late_log_ack_changes_nothing() {
    // Replication 2: KEY's replicas are two peers, not node 0.
    let mut r = rig(2);
    assert!(
        !r.io.placement.is_replica(0, &KEY),
        "pick a KEY node 0 does not hold"
    );
    let (tx, primary, logs) = r.start_to_log();
    assert!(logs.contains(&primary), "LOG goes to the primary too");
    for &n in logs.iter().filter(|&&n| n != primary) {
        r.exclude(n);
    }
    assert!(r.outcomes().is_empty());
    // The primary is live but silent past the deadline: round 1 goes to it
    // alone (the excluded backup gets nothing).
    r.advance(PHASE_DEADLINE_NS_DEFAULT);
    assert_eq!(r.sent_kinds(), vec![(primary, MsgKind::AbortLog, tx)]);
    let mut w = BodyWriter::new();
    w.ack(MsgKind::LogAck, tx, ReplyStatus::Ok);
    r.respond(primary, &w);
    assert!(r.sent_kinds().is_empty(), "a late LOG ack does not commit");
    assert_eq!(r.coord.stats().stale_responses, 1);
    w.ack(MsgKind::AbortLogAck, tx, ReplyStatus::Ok);
    r.respond(primary, &w);
    assert_eq!(r.sent_kinds(), vec![(primary, MsgKind::Abort, tx)]);
    assert_eq!(r.outcomes(), vec![TxStatus::Unavailable]);
    assert_eq!(r.coord.inflight(), 0);
    assert_eq!(
        r.coord.stats().deadlines.unknown,
        0,
        "a decision, not unknown"
    );
}

#[test]
fn a_log_on_no_live_replica_aborts_without_waiting() {
    let mut r = rig(2);
    let (tx, primary, logs) = r.start_to_log();
    // Every replica of KEY is excluded (2 of the 3 nodes): no live LOG
    // holder, so nothing to wait for; the abort is reported at once.
    let live = 0b111 & !logs.iter().fold(0u32, |m, &n| m | 1 << n);
    r.coord.set_live(&mut r.io, &r.procs, live);
    assert!(
        r.sent_kinds().is_empty(),
        "nothing goes to an excluded node"
    );
    assert_eq!(r.outcomes(), vec![TxStatus::Unavailable]);
    assert_eq!(r.coord.inflight(), 0);
    let s = r.coord.stats();
    assert_eq!((s.aborts_after_log, s.deadlines.shard_lost), (1, 1));
    let _ = (tx, primary);
}

#[test]
fn an_excluded_replica_in_log_lets_the_live_coordinator_commit_and_report_committed() {
    let mut r = rig(3);
    let (tx, _, logs) = r.start_to_log();
    let gone = *logs.iter().rev().find(|&&n| n != 0).unwrap();
    let mut w = BodyWriter::new();
    for &n in logs.iter().filter(|&&n| n != gone) {
        w.ack(MsgKind::LogAck, tx, ReplyStatus::Ok);
        r.respond(n, &w);
    }
    r.exclude(gone);
    // Not overdue: the coordinator decides, and the client hears the commit.
    let commits = r.sent_kinds();
    assert!(!commits.is_empty());
    assert!(commits
        .iter()
        .all(|&(d, k, t)| d != gone && k == MsgKind::Commit && t == tx));
    for &(d, _, _) in &commits {
        w.ack(MsgKind::CommitAck, tx, ReplyStatus::Ok);
        r.respond(d, &w);
    }
    assert_eq!(r.outcomes(), vec![TxStatus::Committed]);
    assert_eq!(r.coord.stats().deadlines.unknown, 0);
    assert_eq!(r.coord.inflight(), 0);
}
