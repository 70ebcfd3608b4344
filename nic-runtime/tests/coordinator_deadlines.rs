//! Coordinator deadlines and failed peers (issue 11 "Recovery": timeouts;
//! `nic-runtime/src/protocol/coordinator/deadline.rs`): a participant that
//! never answers ends its transaction as `Unavailable` before any LOG (with
//! ABORT to the live primaries that may hold its locks) and as `Unknown`
//! after; the slot and the locks stay until the decision, which the live
//! coordinator makes once the failed replica is known; the client hears once.

use splitkv_layout::host_nic::{TxRequest, TxStatus};
use splitkv_layout::wire::{BodyWriter, MsgKind, NodeId, ReplyStatus};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta};
use splitkv_nic::protocol::coordinator::{DEADLINE_SCAN_INTERVAL_NS, PHASE_DEADLINE_NS_DEFAULT};
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

    fn fail(&mut self, node: NodeId) {
        self.coord.on_peer_failed(&mut self.io, &self.procs, node);
    }

    /// Starts the transaction; returns its tx_id and the primary of KEY.
    fn start(&mut self) -> (u64, NodeId) {
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
    fn start_to_log(&mut self) -> (u64, NodeId, Vec<NodeId>) {
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
fn a_failed_primary_ends_execute_at_once_without_sending_to_it() {
    let mut r = rig(2);
    let (_, primary) = r.start();
    r.fail(primary);
    assert_eq!(r.outcomes(), vec![TxStatus::Unavailable]);
    assert!(r.sent_kinds().is_empty(), "nothing goes to a failed node");
    assert_eq!(r.coord.inflight(), 0);
    let s = r.coord.stats().deadlines;
    assert_eq!((s.peers_failed, s.unavailable), (1, 1));
    assert_eq!(r.coord.failed_peers(), 1 << primary);
}

#[test]
fn a_silent_replica_after_log_gives_unknown_then_the_live_coordinator_commits() {
    let mut r = rig(3);
    let (tx, _, logs) = r.start_to_log();
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
    r.advance(PHASE_DEADLINE_NS_DEFAULT);
    assert_eq!(r.outcomes(), vec![TxStatus::Unknown]);
    assert_eq!(
        r.coord.inflight(),
        1,
        "the slot and locks wait for a decision"
    );
    assert!(r.sent_kinds().is_empty());
    r.advance(PHASE_DEADLINE_NS_DEFAULT);
    assert!(r.outcomes().is_empty(), "told once");
    // The silent replica is declared failed: every written key is logged at
    // a live replica, so the live coordinator commits (recovery's rule).
    r.fail(silent);
    let commits = r.sent_kinds();
    assert!(commits.iter().any(|&(d, _, _)| d != silent));
    assert!(commits
        .iter()
        .all(|&(_, k, t)| k == MsgKind::Commit && t == tx));
    // The live replicas acknowledge; one sent to the failed node (which its
    // session drops) is not waited for past the next scan.
    for &(d, _, _) in commits.iter().filter(|c| c.0 != silent) {
        w.ack(MsgKind::CommitAck, tx, ReplyStatus::Ok);
        r.respond(d, &w);
    }
    r.advance(DEADLINE_SCAN_INTERVAL_NS);
    assert!(r.outcomes().is_empty(), "the client already heard Unknown");
    assert_eq!(r.coord.inflight(), 0);
    let s = r.coord.stats().deadlines;
    assert_eq!(
        (s.unknown, s.unknown_committed, s.unknown_aborted),
        (1, 1, 0)
    );
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
    r.fail(failing);
    assert_eq!(r.outcomes(), vec![TxStatus::Committed]);
    assert_eq!(r.coord.stats().deadlines.commit_without_failed, 1);
    assert_eq!(r.coord.inflight(), 0);
}

#[test]
fn a_log_on_no_live_replica_aborts_and_releases_the_lock() {
    // Replication 2: KEY's replicas are two peers, not node 0.
    let mut r = rig(2);
    assert!(
        !r.io.placement.is_replica(0, &KEY),
        "pick a KEY node 0 does not hold"
    );
    let (tx, primary, logs) = r.start_to_log();
    for &n in logs.iter().filter(|&&n| n != primary) {
        r.fail(n);
    }
    assert!(!r.outcomes().is_empty() || logs.contains(&primary));
    r.advance(PHASE_DEADLINE_NS_DEFAULT);
    assert!(r.coord.outcomes().is_empty() || r.outcomes() == vec![TxStatus::Unknown]);
    let mut w = BodyWriter::new();
    if logs.contains(&primary) {
        // The primary logged it and lives: the decision is commit, made
        // at the next scan (the failed backup's LOG ack never comes).
        w.ack(MsgKind::LogAck, tx, ReplyStatus::Ok);
        r.respond(primary, &w);
        r.advance(DEADLINE_SCAN_INTERVAL_NS);
        assert!(r.sent_kinds().contains(&(primary, MsgKind::Commit, tx)));
        w.ack(MsgKind::CommitAck, tx, ReplyStatus::Ok);
        r.respond(primary, &w);
        r.advance(DEADLINE_SCAN_INTERVAL_NS);
        assert_eq!(r.coord.stats().deadlines.unknown_committed, 1);
    } else {
        // Only the failed backup was sent the LOG: no live replica holds
        // it, so abort, and the live primary's lock is released.
        assert_eq!(r.sent_kinds(), vec![(primary, MsgKind::Abort, tx)]);
        assert_eq!(r.coord.stats().deadlines.unknown_aborted, 1);
    }
    assert_eq!(r.coord.stats().deadlines.unknown, 1);
    assert_eq!(r.coord.inflight(), 0);
    assert!(r.outcomes().is_empty(), "told once");
}
